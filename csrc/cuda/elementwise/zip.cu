// CUDA zip: picks the dtype; the per-dtype kernels live in instances/zip_<dtype>.cu (built in parallel).
#include "cuda/elementwise/zip_impl.cuh"

namespace tiles::cuda {

void zip(const ZipProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::zip", [&] { zip_typed<scalar_t>(p); });
}

}  // namespace tiles::cuda
