// CUDA map: picks the dtype; the per-dtype kernels live in instances/map_<dtype>.cu (built in parallel).
#include "cuda/elementwise/map_impl.cuh"

namespace tiles::cuda {

void map(const MapProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::map", [&] { map_typed<scalar_t>(p); });
}

}  // namespace tiles::cuda
