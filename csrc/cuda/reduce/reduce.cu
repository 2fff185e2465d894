// CUDA reduce: picks the dtype; the per-dtype kernels live in instances/reduce_<dtype>.cu (built in parallel).
#include "cuda/reduce/launch.cuh"

namespace tiles::cuda {

void reduce(const ReduceProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::reduce", [&] { reduce_typed<scalar_t>(p); });
}

}  // namespace tiles::cuda
