// CUDA map: one grid-stride kernel, with the strided offset computation compiled out when the input
// is contiguous in output order.
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "tiles/dispatch.h"

namespace tiles::cuda {
namespace {

template <class scalar_t, MapFn F, bool kContiguous>
__global__ void map_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x,
                           StridedIndexer<1> in, int64_t n) {
  using T = opmath_t<scalar_t>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const int64_t src = kContiguous ? i : in.offsets(i)[0];
    out[i] = scalar_t(apply_map<F>(T(x[src])));
  }
}

template <class scalar_t, MapFn F>
void launch(const MapProblem& p) {
  constexpr int kThreads = 256;
  const unsigned blocks = grid_stride_blocks(p.numel, kThreads);
  auto stream = current_stream();
  auto* out = p.out.data_ptr<scalar_t>();
  const auto* x = p.x.const_data_ptr<scalar_t>();
  if (p.in.is_contiguous())
    map_kernel<scalar_t, F, true><<<blocks, kThreads, 0, stream>>>(out, x, p.in, p.numel);
  else
    map_kernel<scalar_t, F, false><<<blocks, kThreads, 0, stream>>>(out, x, p.in, p.numel);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void map(const MapProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::map", [&] {
    dispatch_fn(p.fn, [&](auto fn) { launch<scalar_t, decltype(fn)::value>(p); });
  });
}

}  // namespace tiles::cuda
