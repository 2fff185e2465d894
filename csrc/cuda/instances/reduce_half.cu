// The half instantiation of tiles::reduce's CUDA kernels (one dtype per file so they compile in parallel).
#include "cuda/reduce/launch.cuh"

template void tiles::cuda::reduce_typed<c10::Half>(const tiles::ReduceProblem&);
