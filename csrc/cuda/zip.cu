// CUDA zip: one grid-stride kernel over the broadcast shape. Operands of the result dtype load
// directly; operands of another float dtype convert per element (DynamicLoad), never through a copy.
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "tiles/dispatch.h"

namespace tiles::cuda {
namespace {

template <class scalar_t, ZipFn F, class LoadA, class LoadB>
__global__ void zip_kernel(scalar_t* __restrict__ out, const void* __restrict__ a,
                           const void* __restrict__ b, StridedIndexer<2> in, int64_t n,
                           LoadA load_a, LoadB load_b) {
  using T = opmath_t<scalar_t>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const auto off = in.offsets(i);
    out[i] = scalar_t(apply_zip<F>(load_a.template load<T>(a, off[0]), load_b.template load<T>(b, off[1])));
  }
}

template <class scalar_t, ZipFn F, class LoadA, class LoadB>
void launch(const ZipProblem& p, LoadA load_a, LoadB load_b) {
  constexpr int kThreads = 256;
  const unsigned blocks = grid_stride_blocks(p.numel, kThreads);
  zip_kernel<scalar_t, F><<<blocks, kThreads, 0, current_stream()>>>(
      p.out.data_ptr<scalar_t>(), p.a.const_data_ptr(), p.b.const_data_ptr(), p.in, p.numel, load_a, load_b);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void zip(const ZipProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::zip", [&] {
    dispatch_fn(p.fn, [&](auto fn) {
      constexpr ZipFn F = decltype(fn)::value;
      if (p.same_dtype)
        launch<scalar_t, F>(p, StaticLoad<scalar_t>{}, StaticLoad<scalar_t>{});
      else
        launch<scalar_t, F>(p, DynamicLoad{to_dtype(p.a.scalar_type())}, DynamicLoad{to_dtype(p.b.scalar_type())});
    });
  });
}

}  // namespace tiles::cuda
