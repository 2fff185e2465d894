// Split-K's second step, shared by the kernels that split a product's K over blocks: each split writes
// its partial outputs (in the op-math type) to its own slice of a buffer, and this sums them.
#pragma once

#include <ATen/ATen.h>

#include "cuda/launch.cuh"

namespace tiles::cuda {

// out[i] = the sum of the splits' partials at i (partials[s * total + i] for split s), in split order:
// the same bits on every run.
template <class scalar_t, class Acc>
__global__ void __launch_bounds__(256)
sum_splits_kernel(scalar_t* __restrict__ out, const Acc* __restrict__ partials, int64_t total, int splits) {
  for (int64_t i = global_thread(); i < total; i += grid_threads()) {
    Acc sum = partials[i];
    for (int s = 1; s < splits; ++s) sum += partials[s * total + i];
    out[i] = scalar_t(sum);
  }
}

template <class scalar_t, class Acc>
void sum_splits(scalar_t* out, const at::Tensor& partials, int64_t total, int splits) {
  constexpr int kThreads = 256;
  sum_splits_kernel<scalar_t, Acc><<<grid_stride_blocks(total, kThreads), kThreads, 0, current_stream()>>>(
      out, partials.const_data_ptr<Acc>(), total, splits);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace tiles::cuda
