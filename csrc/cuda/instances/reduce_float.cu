// The float instantiation of tiles::reduce's CUDA kernels (one dtype per file so they compile in parallel).
#include "cuda/reduce/launch.cuh"

template void tiles::cuda::reduce_typed<float>(const tiles::ReduceProblem&);
