// CUDA reduce: one block per output (grid-stride over outputs). The block's threads stride over the
// reduced elements, then combine through warp shuffles and one shared-memory step. The combination
// order is fixed by the launch shape, so results are the same bits every run.
#include "cuda/kernels.h"
#include "cuda/launch.cuh"
#include "tiles/dispatch.h"

namespace tiles::cuda {
namespace {

constexpr int kWarp = 32;

template <class R, class Acc>
__device__ __forceinline__ Acc warp_reduce(Acc v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    v = R::combine(v, __shfl_down_sync(0xffffffffu, v, offset));
  return v;
}

// The block-wide combination of every thread's v; valid in thread 0. blockDim.x is a multiple of 32.
template <class R, class Acc>
__device__ Acc block_reduce(Acc v, Acc* warp_results /* [32] */) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = warp_reduce<R>(v);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < int(blockDim.x / kWarp) ? warp_results[lane] : R::identity();
    v = warp_reduce<R>(v);
  }
  return v;
}

template <class scalar_t, ReduceFn F>
__global__ void reduce_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x,
                              StridedIndexer<1> outer, StridedIndexer<1> inner, int64_t num_out,
                              int64_t num_in) {
  using Acc = opmath_t<scalar_t>;
  using R = Reducer<F, Acc>;
  __shared__ Acc warp_results[kWarp];
  for (int64_t o = blockIdx.x; o < num_out; o += gridDim.x) {
    const scalar_t* slice = x + outer.offsets(o)[0];
    Acc acc = R::identity();
    for (int64_t j = threadIdx.x; j < num_in; j += blockDim.x)
      acc = R::combine(acc, Acc(slice[inner.offsets(j)[0]]));
    acc = block_reduce<R>(acc, warp_results);
    if (threadIdx.x == 0) out[o] = scalar_t(R::finish(acc, num_in));
    __syncthreads();  // warp_results is reused by the next output
  }
}

template <class scalar_t, ReduceFn F>
void launch(const ReduceProblem& p) {
  // Short reductions get one warp, so few threads idle; long ones 256 threads.
  const int threads = int(std::min<int64_t>(256, std::max<int64_t>(kWarp, (p.num_in + kWarp - 1) / kWarp * kWarp)));
  const unsigned blocks = unsigned(std::min<int64_t>(p.num_out, int64_t(1) << 20));
  reduce_kernel<scalar_t, F><<<blocks, threads, 0, current_stream()>>>(
      p.out.data_ptr<scalar_t>(), p.x.const_data_ptr<scalar_t>(), p.outer, p.inner, p.num_out, p.num_in);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void reduce(const ReduceProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::reduce", [&] {
    dispatch_fn(p.fn, [&](auto fn) { launch<scalar_t, decltype(fn)::value>(p); });
  });
}

}  // namespace tiles::cuda
