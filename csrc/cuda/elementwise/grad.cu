// CUDA backward ops: pick the dtype; the per-dtype kernels live in instances/grad_<dtype>.cu (built in parallel).
#include "cuda/elementwise/grad_impl.cuh"

namespace tiles::cuda {

void map_grad(const MapGradProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::_map_backward", [&] { map_grad_typed<scalar_t>(p); });
}

void zip_grad(const ZipGradProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::_zip_backward", [&] { zip_grad_typed<scalar_t>(p); });
}

}  // namespace tiles::cuda
