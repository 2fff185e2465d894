// The double instantiation of tiles::map's CUDA kernels (one dtype per file so they compile in parallel).
#include "cuda/elementwise/map_impl.cuh"

template void tiles::cuda::map_typed<double>(const tiles::MapProblem&);
