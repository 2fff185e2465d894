// The Hopper float32 bmm's problem in roles (R, Q; bmm/hopper_tf32_kernel.cuh) and the layouts its
// parts share: the kernel's shape parameter, the copied operands' description, the block's stage sizes,
// which R rows a consumer thread's fragments hold, and the 128-byte swizzle of the tiles in shared memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace tiles::cuda::hopper {

// The problem in roles: D[batch][p][q] = sum_k R[p][k] Q[q][k]; the output is D (or D^T if kSwap)
// stored as a contiguous [batch][out rows][out_cols] float tensor. With split-K (splits > 1) the walk's
// batch index is split * batch + b: that split's k-blocks [split * k_blocks, + k_blocks) of batch entry
// b, stored as batch entry split * batch + b of a partials tensor (the past-K k-blocks of the last split
// are zeros: TMA's fill, or the copiers').
struct Tf32Shape {
  int64_t batch, p, q, k;
  int64_t k_blocks;  // per split
  int splits;
  int tiles_p, tiles_q;
  bool r_broadcast, q_broadcast;  // read batch 0 for every output batch
  bool tma_store;                 // the output is described by map_c
};

// An operand the producer warps copy (TMA cannot address it), as a [batch][outer][inner] tensor with
// unit inner stride, the dims of its TMA map had it one: inner is K for a K-major operand, else its rows.
struct CopiedOperand {
  const float* base = nullptr;  // nullptr: the operand comes by TMA
  int64_t inner = 0, outer = 0;
  int64_t ld = 0, batch_stride = 0;  // elements between outer rows, between batch entries
};

// The copying variants' shape. Only they take it: a larger kernel parameter changes how the others
// read theirs (through a pointer rather than registers loaded up front) and what ptxas spills.
struct Tf32CopyShape : Tf32Shape {
  CopiedOperand copy_r, copy_q;  // copied instead of TMA's loads where base is set
  __host__ __device__ bool copies() const { return copy_r.base != nullptr || copy_q.base != nullptr; }
};
template <bool kCopies>
using Tf32ShapeOf = std::conditional_t<kCopies, Tf32CopyShape, Tf32Shape>;

// kPingPong: each consumer warpgroup computes whole 128 x BQ tiles of its own, the two taking turns on the
// tensor cores (hopper_tf32_kernel's ping-pong consumers); 1xTF32 at 128 columns only.
template <int kSplit, int BQ, bool kPingPong = false>
struct Tf32Config {
  // wgmma_tf32 and the chunked epilogue know these widths only; 1xTF32 or 3xTF32 (big and small parts).
  static_assert(BQ == 64 || BQ == 128 || BQ == 192 || BQ == 256,
                "TF32 Hopper bmm tiles are 64, 128, 192 or 256 rows of Q wide");
  static_assert(kSplit == 1 || kSplit == 3, "1xTF32 or 3xTF32");
  static_assert(!kPingPong || (kSplit == 1 && BQ == 128), "ping-pong consumers: 1xTF32, 128 columns");
  static constexpr int BP = 128, BK = 32;                // BK: one 128-byte swizzle row of floats
  static constexpr int kConsumers = 2;                   // warpgroups computing, 64 rows of R each (or tiles)
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kSplitters = kSplit == 3 ? 96 : 0;  // producer threads writing Q's small part
  static constexpr int kTransposers = 3;  // producer warps copying, or transposing a TMA-loaded MN-major Q
                                          // (not 1xTF32's 128-wide tiles, which the consumers transpose)
  static constexpr int kRBytes = BP * BK * 4;            // 16 KiB
  static constexpr int kQBytes = BQ * BK * 4;            // 8, 16, 24 or 32 KiB
  static constexpr int kStageBytes = kRBytes + kQBytes * (kSplit == 3 ? 2 : 1);
  // Up to 192 KiB of stages; at BQ = 64 (24 KiB stages; Q of at most 64 rows, as in attention's N = 64
  // products, which stream R) seven (eight would fit; not timed).
  // Ping-pong: six (225 KiB in all), so that the producer runs ahead of one warpgroup's tile while the
  // other finishes its own (the design: benchmarks/experiments/tf32_pingpong_design.md).
  static constexpr int kStages = kPingPong ? 6 : BQ == 64 ? 7 : 4;
  static constexpr int kChunkBytes = 64 * 32 * 4;        // 32 output columns of a consumer's 64 rows
  static constexpr int kCBytes = kConsumers * 2 * kChunkBytes;  // two chunk buffers per consumer
  static constexpr int kOrderBarriers = kPingPong ? 2 : 0;  // the consumers' turns on the tensor cores
  static constexpr size_t kSmemBytes =
      size_t(kStages) * kStageBytes + kCBytes + (3 * kStages + kOrderBarriers) * sizeof(uint64_t) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a Hopper block may have");
};

// Where a consumer thread's fragment row `h` (0: row g, 1: row g + 8 of its warp's 16) sits in the
// warpgroup's 64 R rows, which is also where the epilogue stores its accumulators. Where R goes through
// registers wgmma does not care which R row a fragment row holds, as long as the epilogue agrees, so the
// MN-major layout picks rows that make the fragment loads free of bank conflicts. A K-major R is fixed:
// 1xTF32 has wgmma read it from shared memory, where accumulator row 16 * warp + g + 8 h is R's row.
//   K-major R ([p][32 k] rows of 128 bytes): rows in order, 16 * warp + g + 8 h.
//   MN-major R ([k][32 p] boxes): a load of k = t (+4) by the warp touches 4 swizzled rows; the 8 g
//   take 16-byte chunks c and c + 4 of the box, whose XOR with k % 8 (< 4 apart) never collide.
template <bool kRKMajor>
__device__ __forceinline__ int fragment_row(int warp, int lane, int h) {
  const int g = lane / 4;
  if constexpr (kRKMajor) return 16 * warp + g + 8 * h;
  const int chunk = 2 * (warp % 2) + h + 4 * (g / 4);  // 4-float chunk within the 32-wide box
  return 32 * (warp / 2) + 4 * chunk + g % 4;
}

// Byte offset of column c (< 32 floats) of row r in a stage laid out with the 128-byte swizzle: chunk
// c / 4 of the row lands at c / 4 ^ r % 8, repeating every 8 rows (1024 bytes), as TMA writes it.
__device__ __forceinline__ int swizzled(int r, int c) { return r * 128 + (((c / 4) ^ (r % 8)) * 16) + (c % 4) * 4; }

// Byte offset of R element (row p of the 128-row tile, k < 32) in a stage: K-major, row p of 32 k;
// MN-major, row k of the [32 k][32 p] box p / 32.
template <bool kRKMajor>
__device__ __forceinline__ int r_offset(int p, int k) {
  if constexpr (kRKMajor) return swizzled(p, k);
  // swizzled(k, p % 32) in the box, written out: that form costs the fragment setup 12 more PTX
  // instructions (p % 32 % 4 for a p the compiler cannot prove non-negative), untimed
  return (p / 32) * (32 * 128) + k * 128 + ((((p % 32) / 4) ^ (k % 8)) * 16) + (p % 4) * 4;
}

}  // namespace tiles::cuda::hopper
