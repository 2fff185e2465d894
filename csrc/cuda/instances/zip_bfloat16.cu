// The bfloat16 instantiation of tiles::zip's CUDA kernels (one dtype per file so they compile in parallel).
#include "cuda/elementwise/zip_impl.cuh"

template void tiles::cuda::zip_typed<c10::BFloat16>(const tiles::ZipProblem&);
