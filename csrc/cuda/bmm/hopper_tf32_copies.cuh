// The Hopper float32 bmm's copies of operands TMA cannot address (a stride or the base not 16-byte aligned:
// an odd K, M or N): producer warps 1-3 (0-3 when both operands are copied) fill a stage 4 bytes a lane with
// cp.async, into the layout TMA would have written (bmm/hopper_tf32_kernel.cuh runs them in its kCopies
// variants).
#pragma once

#include <cstdint>

#include "cuda/bmm/cp_async.cuh"
#include "cuda/bmm/hopper_tf32_tiles.cuh"
#include "cuda/bmm/sm90_ptx.cuh"

namespace tiles::cuda::hopper {

// The rows of one 8-row block of a copied operand's tile (below) that a warp copies, 4 floats a lane in
// each of 2 rows: lane (sub, c) = (lane / 8, lane % 8) takes rows 8 block + 2 sub + h (h = 0, 1) at
// inner offsets c + 8 kk (kk < 4). A warp instruction reads 8 consecutive floats from each of 4 rows
// (whole 32-byte sectors); its rows' r % 8 (2 sub + h) differ in the bits that pick the swizzled chunk
// pair, so it writes 32 distinct banks. The four copies of a row share one pointer (immediate offsets)
// and XOR their shared address with kk. kChecked: zeros past the operand's edges and K (TMA's fill).
template <bool kChecked>
__device__ __forceinline__ void copy_block_rows(uint32_t row_word, const CopiedOperand& op, const float* row_ptr,
                                                int64_t outer, int64_t inner) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // row 2 sub + 1: the next 128-byte row, and r % 8 odd flips the low bit of the chunk
    const uint32_t word = h ? (row_word + 128) ^ 16 : row_word;
    const float* g = row_ptr + h * op.ld;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      if constexpr (kChecked) {
        const bool ok = outer + h < op.outer && inner + 8 * kk < op.inner;
        mma::cp_async_shared<4>(word ^ (kk << 5), ok ? g + 8 * kk : op.base, ok ? 4 : 0);
      } else {
        mma::cp_async_shared<4>(word ^ (kk << 5), g + 8 * kk);
      }
    }
  }
}

// A copied operand's tile in a stage, laid out as its TMA boxes: K-major, [kRows tile rows][32 k] (row
// r: tile row r); MN-major, kRows / 32 boxes of [32 k][32 tile rows] (row r: k0 + r % 32 of box r / 32).
// Warp `first` of `step` copies the blocks of 8 rows first, first + step, ... (copy_block_rows); tiles
// inside the operand, most of them, without bounds checks.
template <int kRows>
__device__ __forceinline__ void copy_tile_rows(uint8_t* stage, const CopiedOperand& op, bool mn_major, int64_t batch,
                                               int64_t row0, int64_t k0, int first, int step, int lane) {
  const float* base = op.base + batch * op.batch_stride;
  const int sub = lane / 8, c = lane % 8;
  // The lane's first word in row 2 sub of block 0: chunk c / 4 XOR r % 8 (= 2 sub), word c % 4.
  const uint32_t word0 = smem_addr(stage) + 2 * sub * 128 + (((c / 4) ^ (2 * sub)) << 4) + (c % 4) * 4;
  const bool inside = mn_major ? k0 + 32 <= op.outer && row0 + kRows <= op.inner
                               : row0 + kRows <= op.outer && k0 + 32 <= op.inner;
#pragma unroll 1
  for (int block = first; block < kRows / 8; block += step) {
    const int r = 8 * block + 2 * sub;  // the lane's first row of the block: (outer, inner) in the operand
    const int64_t outer = mn_major ? k0 + r % 32 : row0 + r;
    const int64_t inner = mn_major ? row0 + 32 * (block / 4) + c : k0 + c;
    const float* row_ptr = base + outer * op.ld + inner;
    if (inside) copy_block_rows<false>(word0 + block * 1024, op, row_ptr, outer, inner);
    else copy_block_rows<true>(word0 + block * 1024, op, row_ptr, outer, inner);
  }
}

// Tile rows 32 box .. 32 box + 31 of an MN-major Q, copied straight into the K-major rows wgmma reads.
// Lane (i, j) = (lane % 8, lane / 8) takes tile rows 32 box + 8 qq + i at k = 4 kk + j: a warp instruction
// reads 8 consecutive floats from each of 4 rows of the operand (whole 32-byte sectors) and writes 8 rows
// x 4 k of shared memory, 32 distinct banks under the swizzle (the row's chunk kk ^ i, its word j).
template <bool kChecked>
__device__ __forceinline__ void copy_box_transposed(uint8_t* q, const CopiedOperand& op, int64_t batch, int64_t q0,
                                                    int64_t k0, int box, int lane) {
  const int i = lane % 8, j = lane / 8;
  const uint32_t at = smem_addr(q) + (32 * box + i) * 128 + i * 16 + j * 4;  // chunk i: XORed with kk below
  const int64_t k = k0 + j, row = q0 + 32 * box + i;
  const float* g = op.base + batch * op.batch_stride + k * op.ld + row;
#pragma unroll
  for (int kk = 0; kk < 8; ++kk, g += 4 * op.ld) {
    const uint32_t dst = at ^ (kk << 4);
#pragma unroll
    for (int qq = 0; qq < 4; ++qq) {
      if constexpr (kChecked) {
        const bool ok = k + 4 * kk < op.outer && row + 8 * qq < op.inner;
        mma::cp_async_shared<4>(dst + qq * 1024, ok ? g + 8 * qq : op.base, ok ? 4 : 0);
      } else {
        mma::cp_async_shared<4>(dst + qq * 1024, g + 8 * qq);
      }
    }
  }
}

}  // namespace tiles::cuda::hopper
