// The host side of CUDA reduce: partial buffers, and the choice among the kernels of kernels.cuh by the
// layout of the reduced elements; reduce_typed runs one dtype (reduce.cu picks it).
#pragma once

#include <ATen/ops/empty.h>

#include "binding/dispatch.h"
#include "cuda/kernels.h"
#include "cuda/reduce/kernels.cuh"

namespace tiles::cuda {
namespace reduce_detail {

// Room for `segments` partial accumulators per output, from the caching allocator.
template <class scalar_t, ReduceFn F>
at::Tensor partials(const ReduceProblem& p, int64_t segments) {
  using T = opmath_t<scalar_t>;
  static_assert(sizeof(acc_t<scalar_t, F>) % sizeof(T) == 0);
  const auto dtype = std::is_same_v<T, double> ? at::kDouble : at::kFloat;
  return at::empty({segments * p.num_out * int64_t(sizeof(acc_t<scalar_t, F>) / sizeof(T))}, p.x.options().dtype(dtype));
}

template <class scalar_t, ReduceFn F>
acc_t<scalar_t, F>* partial_ptr(const at::Tensor& part) {
  return part.defined() ? reinterpret_cast<acc_t<scalar_t, F>*>(part.data_ptr()) : nullptr;
}

template <class scalar_t, ReduceFn F>
void finish(const ReduceProblem& p, const at::Tensor& part, int64_t segments) {
  const bool block_per_output = p.num_out < 4 * sm_count();
  const unsigned blocks = block_per_output ? unsigned(p.num_out) : grid_stride_blocks(p.num_out, kThreads);
  // A block per output: enough warps for kUnroll partials per thread, up to kFinishThreads.
  const int64_t loaders = (segments + kUnroll - 1) / kUnroll;
  const int threads = block_per_output ? int(std::min<int64_t>(kFinishThreads, (loaders + kWarp - 1) / kWarp * kWarp))
                                       : kThreads;
  finish_kernel<scalar_t, F><<<blocks, threads, 0, current_stream()>>>(
      p.out.data_ptr<scalar_t>(), partial_ptr<scalar_t, F>(part), p.num_out, segments, p.num_in,
      block_per_output);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The block shapes and kLanesMinRowsPerSm are parameters for benchmarks/probes/row_reduce_block.py.
template <class scalar_t, ReduceFn F, int VEC, class Long = LongRowBlock, class Short = ShortRowBlock,
          class Split = SplitRowBlock, class Split16 = SplitRowBlock16, int64_t kLanesMinRows = kLanesMinRowsPerSm>
void launch_rows(const ReduceProblem& p) {
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();
  scalar_t* out = p.out.data_ptr<scalar_t>();
  const int64_t sms = sm_count();
  // Rows under 32 KiB: a group of lanes each; longer: a block each (the crossover measured on the H100,
  // benchmarks/NOTES.md "Row reductions: lanes or a block per row"), and so do rows longer than one
  // pass of a warp's lanes too few to fill the SMs as lanes (H200, bf16 sums flushed against torch: 64
  // x 8192 0.50x on lanes, 0.94-1.03x on a block; 1024 x 8192 0.84x -> 1.12x; 4096 x 8192 keeps lanes,
  // 6% ahead of a block; NOTES.md "Row reductions: block shapes").
  const bool lanes_fill = p.num_out >= kLanesMinRows * sms || p.num_in <= int64_t(kWarp) * VEC * 4;
  if (p.num_in * int64_t(sizeof(scalar_t)) < kBlockRowMinBytes && lanes_fill) {
    // Lanes per row: about 4 vectors per lane (enough threads in flight for short rows), at most a warp.
    int width = 1;
    while (width < kWarp && width * VEC * 4 < p.num_in) width *= 2;
    const int64_t rows_per_block = Short::kThreads / width;
    const unsigned blocks = unsigned(std::min<int64_t>((p.num_out + rows_per_block - 1) / rows_per_block, sms * 16));
    short_rows_kernel<scalar_t, F, VEC, Short><<<blocks, Short::kThreads, 0, current_stream()>>>(
        out, x, p.outer, p.num_out, p.num_in, width);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return;
  }
  // Split rows only when there are too few to give every SM several blocks: then into segments of
  // about kSegmentVectors, each a block of its own, which the hardware hands out as SMs free up, so the
  // blocks finish together (segment sizes measured in benchmarks/NOTES.md "Long rows: segment size").
  const int64_t n_vec = p.num_in / VEC;
  int64_t segments = 1, seg_vec = n_vec;
  const bool few_rows = p.num_out < 16 * sms;
  if (few_rows) {
    const int64_t most_segments = std::max<int64_t>(1, kMaxSplitBlocksPerSm * sms / p.num_out);
    segments = std::min((n_vec + kSegmentVectors - 1) / kSegmentVectors, most_segments);
    seg_vec = (n_vec + segments - 1) / segments;
    segments = (n_vec + seg_vec - 1) / seg_vec;  // all seg_vec long but the last: none left empty
  }
  at::Tensor part = segments > 1 ? partials<scalar_t, F>(p, segments) : at::Tensor();
  // Whole rows: a grid-stride loop over them. Segments: a block each (up to the grid limit).
  const unsigned blocks = unsigned(std::min<int64_t>(p.num_out * segments, segments == 1 ? sms * 32 : INT32_MAX));
  auto launch = [&](auto block) {
    using Block = decltype(block);
    long_rows_kernel<scalar_t, F, VEC, Block><<<blocks, Block::kThreads, 0, current_stream()>>>(
        out, partial_ptr<scalar_t, F>(part), x, p.outer, p.num_out, p.num_in, segments, seg_vec);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  // Split rows take the split block (16-bit ones their own: sum bf16 8 x 2^25 read 129 us back to back
  // on 128 x 8 against 169 on 1024 x 2, 1 x 2^29 245 against 337); so do rows of one segment (up to
  // 4096 vectors) fewer than the SMs, which 128 x 8 would walk in two passes on a few SMs where 1024 x 2
  // reads them in one (64 x 8192 float: 6.8 us against 8.5); from one row a SM, 128-thread blocks all
  // resident at once win (1024 x 8192: 17.4 us against 17.8, 11.9 against 13.8 back to back;
  // benchmarks/NOTES.md "Row reductions: block shapes").
  if (segments > 1 && sizeof(scalar_t) == 2) launch(Split16{});
  else if (segments > 1 || p.num_out < sms) launch(Split{});
  else launch(Long{});
  if (segments > 1) finish<scalar_t, F>(p, part, segments);
}

// How many row segments of a column block to combine in a cluster's shared memory (0: through partials
// and finish_kernel), given how many the grid would otherwise have: the largest power of two from 2 to
// 16 that keeps to about one block per SM, if that
// makes from one block per two SMs to two per SM; with few column blocks partials win (the sizes and
// the bounds measured in benchmarks/NOTES.md "Column reductions: cluster size").
template <auto kKernel>
int cluster_segments(int64_t segments, int64_t col_blocks, int64_t sms) {
  if (segments < 2 || !clusters_available()) return 0;
  int64_t size = 2;
  while (size < kMaxCluster && 2 * size * col_blocks <= sms && 2 * size <= segments) size *= 2;
  if (size > kPortableCluster && !allow_clusters_of_16<kKernel>(dim3(kColThreads, kColRows))) size = kPortableCluster;
  return 2 * size * col_blocks >= sms && size * col_blocks <= 2 * sms ? int(size) : 0;
}

template <class scalar_t, ReduceFn F, int VEC>
void launch_columns(const ReduceProblem& p, int64_t row_stride) {
  const int64_t sms = sm_count();
  const int64_t col_blocks = (p.num_out / VEC + kColThreads - 1) / kColThreads;
  // Row segments for at most ~4 blocks per SM, each segment at least 64 rows: one wave (44-54
  // registers a thread let 4-5 blocks fit per SM; at ~8 per SM a second, partial wave ran on its own).
  int64_t segments = std::max<int64_t>(1, std::min(4 * sms / col_blocks, p.num_in / 64));
  const int cluster = cluster_segments<columns_kernel<scalar_t, F, VEC, true>>(segments, col_blocks, sms);
  scalar_t* out = p.out.data_ptr<scalar_t>();
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();
  if (cluster > 0) {
    const ClusterLaunch launch(dim3(unsigned(col_blocks), unsigned(cluster)), dim3(kColThreads, kColRows),
                               dim3(1, unsigned(cluster), 1), current_stream());
    C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, columns_kernel<scalar_t, F, VEC, true>, out,
                                      static_cast<acc_t<scalar_t, F>*>(nullptr), x, p.num_out, p.num_in, row_stride,
                                      int64_t(cluster)));
    return;
  }
  at::Tensor part = segments > 1 ? partials<scalar_t, F>(p, segments) : at::Tensor();
  const dim3 grid(unsigned(col_blocks), unsigned(std::min<int64_t>(segments, 65535)));
  columns_kernel<scalar_t, F, VEC, false><<<grid, dim3(kColThreads, kColRows), 0, current_stream()>>>(
      out, partial_ptr<scalar_t, F>(part), x, p.num_out, p.num_in, row_stride, segments);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (segments > 1) finish<scalar_t, F>(p, part, segments);
}

template <class scalar_t, ReduceFn F>
void launch(const ReduceProblem& p) {
  constexpr int VEC = 16 / sizeof(scalar_t);
  const void* x = p.x.const_data_ptr();
  const bool x_aligned = aligned(x, 16);

  // rows: the reduced elements of each output are one contiguous run
  if (p.inner.ndim <= 1 && (p.inner.ndim == 0 || p.inner.strides[0][0] == 1)) {
    bool vec_ok = x_aligned && p.num_in % VEC == 0;
    for (int d = 0; d < p.outer.ndim; ++d) vec_ok = vec_ok && p.outer.strides[0][d] % VEC == 0;
    if (vec_ok) launch_rows<scalar_t, F, VEC>(p);
    else launch_rows<scalar_t, F, 1>(p);
    return;
  }
  // columns: outputs contiguous in x, each reducing one strided run
  if (p.outer.ndim == 1 && p.outer.strides[0][0] == 1 && p.inner.ndim == 1) {
    const int64_t row_stride = p.inner.strides[0][0];
    if (x_aligned && p.num_out % VEC == 0 && row_stride % VEC == 0) launch_columns<scalar_t, F, VEC>(p, row_stride);
    else launch_columns<scalar_t, F, 1>(p, row_stride);
    return;
  }
  const int threads = int(std::min<int64_t>(kThreads, std::max<int64_t>(kWarp, (p.num_in + kWarp - 1) / kWarp * kWarp)));
  const unsigned blocks = unsigned(std::min<int64_t>(p.num_out, int64_t(1) << 20));
  generic_kernel<scalar_t, F><<<blocks, threads, 0, current_stream()>>>(
      p.out.data_ptr<scalar_t>(), p.x.const_data_ptr<scalar_t>(), p.outer, p.inner, p.num_out, p.num_in);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace reduce_detail

template <class scalar_t>
void reduce_typed(const ReduceProblem& p) {
  dispatch_fn(p.fn, [&](auto fn) { reduce_detail::launch<scalar_t, decltype(fn)::value>(p); });
}

// Instantiated once per dtype, each in its own translation unit (instances/reduce_<dtype>.cu).
extern template void reduce_typed<c10::Half>(const ReduceProblem&);
extern template void reduce_typed<c10::BFloat16>(const ReduceProblem&);
extern template void reduce_typed<float>(const ReduceProblem&);
extern template void reduce_typed<double>(const ReduceProblem&);

}  // namespace tiles::cuda
