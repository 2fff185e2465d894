// The float instantiation of the backward ops' CUDA kernels (one dtype per file so they compile in parallel).
#include "cuda/elementwise/grad_impl.cuh"

template void tiles::cuda::map_grad_typed<float>(const tiles::MapGradProblem&);
template void tiles::cuda::zip_grad_typed<float>(const tiles::ZipGradProblem&);
