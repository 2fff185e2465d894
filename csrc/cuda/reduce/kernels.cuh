// CUDA reduce kernels (launch.cuh picks one per problem). By layout of the reduced elements (after the host merged contiguous dims):
//   rows     each output reduces one contiguous row. Rows shorter than kBlockRowMinBytes go to
//            groups of 1..32 lanes (several rows per warp, warp shuffles) where there are enough of them
//            (kLanesMinRowsPerSm) or they are short; other rows to a whole block; and
//            when there are too few rows to fill the GPU, each row is split across blocks whose
//            partial results a second kernel combines (also the all-dims reduction of a contiguous
//            tensor). Loads are 16-byte vectors when the rows are aligned.
//   columns  the outputs are contiguous in the input and each reduces one strided column (dim 0 of
//            a row-major matrix): threads own neighbouring columns, so every load is coalesced;
//            the rows are split across blocks, whose partials meet in one block's shared memory when
//            the blocks form a thread block cluster (sm_90), else in the second kernel.
//   generic  anything else: one block per output, threads striding over its elements.
// Every combination order depends only on the shape, the input's 16-byte alignment (which picks the
// vector width) and the GPU (its SM count, and for columns whether it runs clusters, and of 16), never
// on timing: the result is the same bits run to run. Half types accumulate in float32.
#pragma once

#include <cooperative_groups.h>

#include "cuda/launch.cuh"
#include "tiles/functions.h"
#include "tiles/strided.h"

namespace tiles::cuda {
namespace reduce_detail {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kUnroll = 8;       // vectors in flight per thread: whole long rows, columns, partials
constexpr int kShortUnroll = 4;  // and on short rows, whose lanes own ~4 vectors each (launch_rows)
// The row kernels' blocks (cuda/launch.cuh BlockShape), from benchmarks/probes/row_reduce_block.py on the
// H200 (benchmarks/NOTES.md, "Row reductions: block shapes"): many long rows on 128 threads (inferred
// from the five long-row cases' geomean, and run.py's 4096 x 8192 rows 1.09x -> 1.15x); few rows, split
// into segments or not (launch_rows), on 1024 threads of 2 vectors, where 128 x 8 lost 4% to torch on
// one 2^28-element row. A split block's pass is 2048 vectors, as 256 x 8's was: a segment (4096) is two.
// 16-bit rows split into segments keep 128 x 8 (bf16 8 x 2^25 and 1 x 2^29 lost 16-24% on 1024 x 2).
using LongRowBlock = BlockShape<128, kUnroll>;
using SplitRowBlock = BlockShape<1024, 2>;
using SplitRowBlock16 = LongRowBlock;
using ShortRowBlock = BlockShape<kThreads, kShortUnroll>;
constexpr int64_t kBlockRowMinBytes = 32 << 10;  // rows at least this long get a block each (launch_rows)
// Rows shorter than that take lanes only where there are at least this many a SM, or a row is no more
// than one pass of a warp's lanes: 64 bf16 rows of 8192 on lanes are 64 warps on the whole GPU.
constexpr int64_t kLanesMinRowsPerSm = 16;
// A split row's segments: about 4096 vectors each (64 KiB in 16-byte vectors; rows that cannot take them
// count single elements), longer where that would make over kMaxSplitBlocksPerSm blocks per SM, whose
// partials the second pass would have to read; one block apiece (launch_rows).
constexpr int64_t kSegmentVectors = 4096;
constexpr int64_t kMaxSplitBlocksPerSm = 128;

// The accumulator of reduction F over scalar_t: the op-math type, or a (max, sum) pair for logsumexp.
template <class scalar_t, ReduceFn F>
using acc_t = typename Reducer<F, opmath_t<scalar_t>>::Acc;

template <class T>
__device__ __forceinline__ T shuffle_xor(T v, int offset, int width) {
  return __shfl_xor_sync(0xffffffffu, v, offset, width);
}
template <class T>
__device__ __forceinline__ MaxSum<T> shuffle_xor(MaxSum<T> v, int offset, int width) {
  return {shuffle_xor(v.max, offset, width), shuffle_xor(v.sum, offset, width)};
}

// Combines v across aligned groups of `width` lanes (a power of two <= 32); every lane gets the result.
template <class R, class Acc>
__device__ __forceinline__ Acc group_reduce(Acc v, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) v = R::combine(v, shuffle_xor(v, offset, width));
  return v;
}

// The block-wide combination of every thread's v; valid in thread 0. blockDim.x is a multiple of 32.
template <class R, class Acc>
__device__ Acc block_reduce(Acc v) {
  __shared__ Acc warp_results[kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  v = group_reduce<R>(v, kWarp);
  if (lane == 0) warp_results[warp] = v;
  __syncthreads();
  if (warp == 0) v = group_reduce<R>(lane < int(blockDim.x / kWarp) ? warp_results[lane] : R::identity(), kWarp);
  __syncthreads();  // warp_results may be reused right after
  return v;
}

// Accumulates the VEC-vectors of a contiguous row that this thread owns: every `stride`-th one starting
// at vector `first`. kUnroll (a template parameter here) of them are loaded before any is combined, including the last, partial
// batch (a short row is often nothing but that batch: loading it one vector per loop trip put a DRAM
// latency on each).
template <class R, class scalar_t, int VEC, int kUnroll, class Acc>
__device__ __forceinline__ Acc accumulate_row(const scalar_t* row, int64_t n_vec, int64_t first, int64_t stride, Acc acc) {
  using V = Vec<scalar_t, VEC>;
  const V* vrow = reinterpret_cast<const V*>(row);
  int64_t c = first;
  for (; c + (kUnroll - 1) * stride < n_vec; c += kUnroll * stride) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = vrow[c + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc = R::combine(acc, R::lift(v[u].v[e]));
  }
  if (c < n_vec) {
    V v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (c + u * stride < n_vec) v[u] = vrow[c + u * stride];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (c + u * stride < n_vec)
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc = R::combine(acc, R::lift(v[u].v[e]));
  }
  return acc;
}

// ---- rows, short: `width` lanes per row, kThreads / width rows per block -------------------------
// 46-48 registers for float rows in 16-byte vectors, up to 62 for bf16 (ptxas, sm_90a): 4-5 blocks are
// resident per SM.
template <class scalar_t, ReduceFn F, int VEC, class Block = ShortRowBlock>
__global__ void __launch_bounds__(Block::kThreads)
short_rows_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x, StridedIndexer<1> outer,
                  int64_t num_out, int64_t num_in, int width) {
  using R = Reducer<F, opmath_t<scalar_t>>;
  using Acc = typename R::Acc;
  const int rows_per_block = Block::kThreads / width;
  const int lane = threadIdx.x % width;
  for (int64_t base = int64_t(blockIdx.x) * rows_per_block; base < num_out; base += int64_t(gridDim.x) * rows_per_block) {
    const int64_t o = base + threadIdx.x / width;  // every lane iterates alike: shuffles stay converged
    Acc acc = R::identity();
    // Rows one stride apart (the common case) skip the indexer's 64-bit divisions.
    const int64_t start = outer.ndim == 1 ? o * outer.strides[0][0] : outer.offsets(o)[0];
    if (o < num_out) acc = accumulate_row<R, scalar_t, VEC, Block::kUnroll>(x + start, num_in / VEC, lane, width, acc);
    acc = group_reduce<R>(acc, width);
    if (o < num_out && lane == 0) out[o] = scalar_t(R::finish(acc, num_in));
  }
}

// ---- rows, long: a block per (row, segment); segments > 1 write partials for finish_kernel -------
// Segment s of a row is its vectors [s * seg_vec, (s + 1) * seg_vec), the block's threads striding over them.
template <class scalar_t, ReduceFn F, int VEC, class Block = LongRowBlock>
__global__ void __launch_bounds__(Block::kThreads)
long_rows_kernel(scalar_t* __restrict__ out, acc_t<scalar_t, F>* __restrict__ partial, const scalar_t* __restrict__ x,
                 StridedIndexer<1> outer, int64_t num_out, int64_t num_in, int64_t segments, int64_t seg_vec) {
  using R = Reducer<F, opmath_t<scalar_t>>;
  using Acc = typename R::Acc;
  const int64_t n_vec = num_in / VEC;
  for (int64_t job = blockIdx.x; job < num_out * segments; job += gridDim.x) {
    const int64_t o = job / segments, s = job % segments;
    const int64_t begin = s * seg_vec, end = std::min(n_vec, begin + seg_vec);
    const scalar_t* segment = x + outer.offsets(o)[0] + begin * VEC;
    Acc acc = accumulate_row<R, scalar_t, VEC, Block::kUnroll>(segment, end - begin, threadIdx.x, Block::kThreads,
                                                               R::identity());
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) {
      if (segments == 1) out[o] = scalar_t(R::finish(acc, num_in));
      else partial[s * num_out + o] = acc;
    }
  }
}

// ---- columns: out[c] reduces x[r * row_stride + c] over r; blockDim (32, 8) ----------------------
constexpr int kColThreads = 32, kColRows = 8;
constexpr int kMaxCluster = 16;  // blocks per thread block cluster, beyond kPortableCluster by an opt-in

// The segments' totals meet in the shared memory of their cluster's first block (kCluster: a cluster
// of `segments` blocks along y, block rank = segment), which combines them in segment order.
template <class scalar_t, ReduceFn F, int VEC>
__device__ __forceinline__ void combine_cluster(scalar_t* __restrict__ out, acc_t<scalar_t, F>* totals,
                                                int64_t num_cols, int64_t num_rows, int segments) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using R = Reducer<F, opmath_t<scalar_t>>;
  using Acc = typename R::Acc;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  cluster.sync();  // every block's totals are staged
  if (cluster.block_rank() == 0) {
    const int64_t col0 = int64_t(blockIdx.x) * kColThreads * VEC;
    for (int i = threadIdx.y * kColThreads + threadIdx.x; i < kColThreads * VEC; i += kColThreads * kColRows) {
      Acc part[kMaxCluster];  // every load in flight before the first combine
#pragma unroll
      for (int r = 0; r < kMaxCluster; ++r)
        if (r < segments) part[r] = cluster.map_shared_rank(totals, r)[i];
      Acc total = R::identity();
#pragma unroll
      for (int r = 0; r < kMaxCluster; ++r)
        if (r < segments) total = R::combine(total, part[r]);
      if (col0 + i < num_cols) out[col0 + i] = scalar_t(R::finish(total, num_rows));
    }
  }
  cluster.sync();  // the first block reads the others' shared memory: they must not exit before
#else
  __trap();  // launch_columns launches clusters only where sm_90a code runs
#endif
}

// Without kCluster, segments > 1 write partials for finish_kernel.
template <class scalar_t, ReduceFn F, int VEC, bool kCluster>
__global__ void __launch_bounds__(kColThreads * kColRows)
columns_kernel(scalar_t* __restrict__ out, acc_t<scalar_t, F>* __restrict__ partial, const scalar_t* __restrict__ x,
               int64_t num_cols, int64_t num_rows, int64_t row_stride, int64_t segments) {
  using R = Reducer<F, opmath_t<scalar_t>>;
  using Acc = typename R::Acc;
  using V = Vec<scalar_t, VEC>;
  __shared__ Acc staged[kColRows][kColThreads * VEC];
  const int64_t cv = int64_t(blockIdx.x) * kColThreads + threadIdx.x;  // this thread's column vector
  const bool active = cv * VEC < num_cols;
  const int64_t seg_rows = (num_rows + segments - 1) / segments;
  for (int64_t s = blockIdx.y; s < segments; s += gridDim.y) {
    const int64_t begin = s * seg_rows, end = std::min(num_rows, begin + seg_rows);
    Acc acc[VEC];
#pragma unroll
    for (int e = 0; e < VEC; ++e) acc[e] = R::identity();
    if (active) {
      int64_t r = begin + threadIdx.y;
      for (; r + (kUnroll - 1) * kColRows < end; r += kUnroll * kColRows) {
        V v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = reinterpret_cast<const V*>(x + (r + u * kColRows) * row_stride)[cv];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[e] = R::combine(acc[e], R::lift(v[u].v[e]));
      }
      for (; r < end; r += kColRows) {
        const V v = reinterpret_cast<const V*>(x + r * row_stride)[cv];
#pragma unroll
        for (int e = 0; e < VEC; ++e) acc[e] = R::combine(acc[e], R::lift(v.v[e]));
      }
    }
    // Combine the kColRows row groups in a fixed order.
#pragma unroll
    for (int e = 0; e < VEC; ++e) staged[threadIdx.y][threadIdx.x * VEC + e] = acc[e];
    __syncthreads();
    if (threadIdx.y == 0 && active) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) {
        Acc total = staged[0][threadIdx.x * VEC + e];
        for (int y = 1; y < kColRows; ++y) total = R::combine(total, staged[y][threadIdx.x * VEC + e]);
        const int64_t col = cv * VEC + e;
        if constexpr (kCluster) staged[0][threadIdx.x * VEC + e] = total;  // for combine_cluster
        else if (segments == 1) out[col] = scalar_t(R::finish(total, num_rows));
        else partial[s * num_cols + col] = total;
      }
    }
    __syncthreads();
  }
  if constexpr (kCluster) combine_cluster<scalar_t, F, VEC>(out, staged[0], num_cols, num_rows, int(segments));
}

// ---- the second pass: out[o] combines partial[s * num_out + o] over s, in a fixed order ----------
// A thread per output when there are many; a block per output (threads striding over s) when few,
// each thread loading kUnroll partials before it combines them (thousands of partials for one output:
// one L2 round trip per partial would take longer than reading them).
constexpr int kFinishThreads = 1024;  // at most, per block

template <class scalar_t, ReduceFn F>
__global__ void __launch_bounds__(kFinishThreads)
finish_kernel(scalar_t* __restrict__ out, const acc_t<scalar_t, F>* __restrict__ partial, int64_t num_out,
              int64_t segments, int64_t count, bool block_per_output) {
  using R = Reducer<F, opmath_t<scalar_t>>;
  using Acc = typename R::Acc;
  if (block_per_output) {
    for (int64_t o = blockIdx.x; o < num_out; o += gridDim.x) {
      Acc acc = R::identity();
      for (int64_t s0 = threadIdx.x; s0 < segments; s0 += kUnroll * int64_t(blockDim.x)) {
        Acc v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int64_t s = s0 + u * int64_t(blockDim.x);
          v[u] = s < segments ? partial[s * num_out + o] : R::identity();
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc = R::combine(acc, v[u]);
      }
      acc = block_reduce<R>(acc);
      if (threadIdx.x == 0) out[o] = scalar_t(R::finish(acc, count));
    }
    return;
  }
  for (int64_t o = global_thread(); o < num_out; o += grid_threads()) {
    Acc acc = R::identity();
    for (int64_t s = 0; s < segments; ++s) acc = R::combine(acc, partial[s * num_out + o]);
    out[o] = scalar_t(R::finish(acc, count));
  }
}

// ---- generic: a block per output ------------------------------------------------------------------
template <class scalar_t, ReduceFn F>
__global__ void __launch_bounds__(kThreads)
generic_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ x, StridedIndexer<1> outer,
               StridedIndexer<1> inner, int64_t num_out, int64_t num_in) {
  using R = Reducer<F, opmath_t<scalar_t>>;
  using Acc = typename R::Acc;
  for (int64_t o = blockIdx.x; o < num_out; o += gridDim.x) {
    const scalar_t* slice = x + outer.offsets(o)[0];
    Acc acc = R::identity();
    for (int64_t j = threadIdx.x; j < num_in; j += blockDim.x) acc = R::combine(acc, R::lift(slice[inner.offsets(j)[0]]));
    acc = block_reduce<R>(acc);
    if (threadIdx.x == 0) out[o] = scalar_t(R::finish(acc, num_in));
  }
}

}  // namespace reduce_detail
}  // namespace tiles::cuda
