// Split-K for the kernels that split a product's K over blocks (general, thin, the Hopper kernels; the
// mma.sync and DMMA kernels cost their own counts, bmm/mma.cu cheapest_split): how many ways to split,
// and the second step: each split writes its partial outputs (in the op-math type) to its own slice of
// a buffer, and sum_splits adds them; or, in thread block clusters on sm_90, sum_cluster_partials adds
// them from the cluster's shared memory in the same kernel.
#pragma once

#include <ATen/ATen.h>
#include <cooperative_groups.h>

#include "cuda/launch.cuh"

namespace tiles::cuda {

// How many ways to split K: enough blocks for about `blocks_per_sm` per SM, each split at least
// `min_depth` deep, at most 64 splits, and the partials at most 2^23 elements.
inline int64_t fill_k_splits(int64_t blocks, int64_t k, int64_t min_depth, int64_t outputs, int64_t blocks_per_sm) {
  constexpr int64_t kMaxSplits = 64, kMaxPartials = int64_t(1) << 23;
  const int64_t wanted = (blocks_per_sm * int64_t(sm_count()) + blocks - 1) / blocks;
  const int64_t by_depth = k / min_depth, by_memory = kMaxPartials / std::max<int64_t>(outputs, 1);
  return std::max<int64_t>(1, std::min({wanted, by_depth, by_memory, kMaxSplits}));
}

// The Hopper kernels' split count: how many slices of K to walk as tiles of their own. Few output tiles
// over a long K (a weight gradient, K = tokens) leave SMs idle: 768 x 768 x 8192 is 36 tiles of 128 x
// 128 on 132 SMs. Each count is costed in H100 microseconds (waves x k-blocks per slice x one k-block's
// time, plus the partials' round trip through memory and the summing launch) and the cheapest taken:
// slicing by wave fill alone could cost half a product's time (NOTES.md, TF32 section). `wave_us`, where
// given, is a fixed cost per wave of tiles (pipeline fill, the last tile's stores). The cheapest count
// comes with its modelled time, so that a caller can weigh tile widths by it too (hopper_tf32.cu).
constexpr int kMaxCostedSplits = 8;
struct KSplit {
  int splits;
  double us;  // the model's time for the product at that count
};
inline KSplit cheapest_k_split(int64_t tiles, int64_t k_blocks, int64_t outputs, int sms, double k_block_us,
                               double wave_us = 0, int max_splits = kMaxCostedSplits) {
  // Slices of at least 8 k-blocks: narrow products over a moderate K (1 x 4096 x 64 x 2048: 32 tiles of
  // 32 k-blocks) want more blocks than two slices of 16 give (NOTES.md, "cuBLAS's tiles on the training
  // shapes": cuBLAS runs 88 blocks there). Of the grid's rows only tf32 NT 2 x 633 x 10 x 944 changes count.
  constexpr int64_t kMinBlocks = 8, kMaxPartials = int64_t(1) << 24;
  constexpr double kBytesPerUs = 2.5e6, kSumUs = 4;  // DRAM rate; the sum kernel's launch and tail
  KSplit best{1, 0};
  for (int splits = 1; splits <= max_splits; ++splits) {
    if (splits > 1 && (k_blocks < splits * kMinBlocks || splits * outputs > kMaxPartials)) break;
    const int64_t per = (k_blocks + splits - 1) / splits, used = (k_blocks + per - 1) / per;
    const int64_t waves = (tiles * used + sms - 1) / sms;
    double us = double(waves * per) * k_block_us + double(waves) * wave_us;
    if (used > 1) us += double(used * outputs) * 8 / kBytesPerUs + kSumUs;  // 4 bytes out, 4 back
    if (splits == 1 || us < best.us) best = {int(used), us};
  }
  return best;
}
inline int costed_k_splits(int64_t tiles, int64_t k_blocks, int64_t outputs, int sms, double k_block_us) {
  return cheapest_k_split(tiles, k_blocks, outputs, sms, k_block_us).splits;
}

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

// In one kernel instead (split-K in thread block clusters, sm_90): the splits of a block's outputs, a
// cluster of blocks along z (block rank = split), add the `count` partial outputs each has staged in its
// shared `staging`, in split order (sum_splits' order: the same bits); each block adds a band of them and
// hands each sum to `store(e, sum)`, e its index in the staging. Every block of the cluster calls it, with
// its staging written and left alone until the call returns. Launchers form clusters only where
// clusters_available().
template <int kThreads, class Acc, class Store>
__device__ __forceinline__ void sum_cluster_partials(Acc* staging, int count, Store&& store) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every split's partials are staged
  const int splits = int(cluster.num_blocks()), rank = int(cluster.block_rank());
  const int band = (count + splits - 1) / splits, last = min(count, (rank + 1) * band);
  for (int e = rank * band + int(threadIdx.x); e < last; e += kThreads) {
    Acc part[kPortableCluster];  // every load in flight before the first add
#pragma unroll
    for (int s = 0; s < kPortableCluster; ++s)
      if (s < splits) part[s] = cluster.map_shared_rank(staging, s)[e];
    Acc sum = part[0];
#pragma unroll
    for (int s = 1; s < kPortableCluster; ++s)
      if (s < splits) sum += part[s];
    store(e, sum);
  }
  cluster.sync();  // the others read this block's shared memory: it must not be reused or left before
#else
  __trap();
#endif
}

}  // namespace tiles::cuda
