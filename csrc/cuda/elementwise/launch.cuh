// The host side of the CUDA elementwise kernels (kernels.cuh): which kernel a problem's layout takes,
// and 32-bit index math where every offset fits.
#pragma once

#include "cuda/elementwise/kernels.cuh"

namespace tiles::cuda {
namespace elementwise {

template <int N>
bool fits_32bit(const StridedIndexer<N>& ix, int64_t n) {
  if (n >= (int64_t(1) << 31)) return false;
  for (int k = 0; k < N; ++k) {
    int64_t extent = 0;  // the largest offset an operand reaches (strides are non-negative)
    for (int d = 0; d < ix.ndim; ++d) extent += (ix.sizes[d] - 1) * ix.strides[k][d];
    if (extent >= (int64_t(1) << 31)) return false;
  }
  return true;
}

template <class scalar_t, class Op, class Loads>
void launch_strided(scalar_t* out, const void* const* ptrs, const StridedIndexer<Op::kArity>& ix, int64_t n,
                    LoadSet<Loads, Op::kArity> loads) {
  Operands<void, Op::kArity> in;
  for (int k = 0; k < Op::kArity; ++k) in.ptr[k] = ptrs[k];
  const unsigned blocks = grid_stride_blocks(n, kThreads);
  if (fits_32bit(ix, n))
    strided_kernel<scalar_t, Op, uint32_t><<<blocks, kThreads, 0, current_stream()>>>(out, in, ix, n, loads);
  else
    strided_kernel<scalar_t, Op, int64_t><<<blocks, kThreads, 0, current_stream()>>>(out, in, ix, n, loads);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The contiguous kernel over [0, n): one chunk of a block's threads x vectors per block (the grid-stride
// loop then runs once) up to 2^20 blocks, measured a little faster than a persistent grid of a few blocks
// per SM.
template <class scalar_t, class Op, int VEC, class Block = ContiguousBlock>
void launch_contiguous(scalar_t* out, const Operands<scalar_t, Op::kArity>& in, int64_t n, cudaStream_t stream) {
  constexpr int64_t kChunk = Block::kThreads * Block::kUnroll;
  const int64_t chunks = ((n + VEC - 1) / VEC + kChunk - 1) / kChunk;
  const unsigned blocks = unsigned(std::max<int64_t>(1, std::min<int64_t>(chunks, int64_t(1) << 20)));
  contiguous_kernel<scalar_t, Op, VEC, Block><<<blocks, Block::kThreads, 0, stream>>>(out, in, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Runs Op over same-dtype operands `ptrs` laid out by `ix`, writing the contiguous `out`.
template <class scalar_t, class Op>
void launch(scalar_t* out, const void* const* ptrs, const StridedIndexer<Op::kArity>& ix, int64_t n) {
  constexpr int N = Op::kArity;
  constexpr int VEC = 16 / sizeof(scalar_t);
  Operands<scalar_t, N> in;
  bool all_aligned = aligned(out, 16);
  for (int k = 0; k < N; ++k) {
    in.ptr[k] = static_cast<const scalar_t*>(ptrs[k]);
    all_aligned = all_aligned && aligned(ptrs[k], 16);
  }
  auto stream = current_stream();

  if (ix.is_contiguous()) {
    if (all_aligned)
      launch_contiguous<scalar_t, Op, VEC>(out, in, n, stream);
    else
      launch_contiguous<scalar_t, Op, 1>(out, in, n, stream);
    return;
  }

  if (ix.ndim == 1 || ix.ndim == 2) {  // a 1-D problem is one row
    const int64_t n_rows = ix.ndim == 2 ? ix.sizes[1] : 1;
    bool rows_ok = ix.sizes[0] % VEC == 0 && all_aligned, any_staged = false;
    RowLayout<N> rows{ix.sizes[0], n_rows, {}, {}};
    TileLayout<N> tiles{ix.sizes[0], n_rows, {}, {}, {}};
    for (int k = 0; k < N; ++k) {
      const int64_t s0 = ix.strides[k][0], s1 = ix.ndim == 2 ? ix.strides[k][1] : 0;
      rows_ok = rows_ok && (s0 == 0 || s0 == 1) && (s0 == 0 || s1 % VEC == 0);
      rows.row_stride[k] = s1;
      rows.inner_unit[k] = s0 == 1;
      tiles.col_stride[k] = s0;
      tiles.row_stride[k] = s1;
      tiles.staged[k] = s1 == 1 && s0 != 1;
      any_staged = any_staged || tiles.staged[k];
    }
    if (rows_ok) {
      const int64_t chunk = int64_t(kThreads) * kUnroll * VEC;
      const dim3 grid(unsigned((rows.row_len + chunk - 1) / chunk), unsigned(std::min<int64_t>(rows.rows, 65535)));
      rows_kernel<scalar_t, Op, VEC><<<grid, kThreads, 0, stream>>>(out, in, rows);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
    if (any_staged && (tiles.row_len + kTile - 1) / kTile < (int64_t(1) << 31)) {
      // One block per tile (up to 65535 row tiles; past that, blocks loop). Fewer blocks that each
      // loop over several tiles measured slower (benchmarks/NOTES.md).
      const dim3 grid(unsigned((tiles.row_len + kTile - 1) / kTile),
                      unsigned(std::min<int64_t>((tiles.rows + kTile - 1) / kTile, 65535)));
      transpose_kernel<scalar_t, Op><<<grid, dim3(kTile, kTileRows), 0, stream>>>(out, in, tiles);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return;
    }
  }
  LoadSet<StaticLoad<scalar_t>, N> loads{};
  launch_strided<scalar_t, Op>(out, ptrs, ix, n, loads);
}

}  // namespace elementwise
}  // namespace tiles::cuda
