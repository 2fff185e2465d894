// The Hopper (sm_90a) tensor-core bmm for bf16 and fp16: TMA loads into 128-byte-swizzled shared
// memory, wgmma from two consumer warpgroups (three in tall tiles, one in small ones), a producer warpgroup
// that runs ahead by kStages k-blocks, and a persistent grid walking output tiles in an L2-friendly order.
//
// Block: 3 warpgroups (2 in small tiles, 4 in tall ones). Warpgroup 0 is the producer (one thread issues
// every TMA copy); warpgroups 1 and 2 each own 64 rows of the 128 x BN output tile and accumulate them in
// registers in float. Tall tiles (192 x 192, TileConfig's kRows) have a third consumer warpgroup, 4 in
// all, for 64 rows more; small tiles (64 x 64) one, 2 in all.
// Each k-block is BK = 64 deep: exactly one 128-byte swizzle row of a K-major operand.
//
// Operand layouts, per stage in shared memory (each box is [rows][64 elements], 128-byte rows):
//   A K-major (a[m][k] with unit k stride):     one box of BM (64, 128 or 192) m-rows;
//   A M-major (unit m stride, a = x.mT):         BM / 64 boxes of 64 k-rows, for m 0..63, 64..127, ...;
//   B K-major (unit k stride, b = y.mT):         one box of BN n-rows;
//   B N-major (b[k][n] with unit n stride):      BN / 64 boxes of 64 k-rows, rounded up (a 96-wide
//                                                tile loads two and its products read 1.5 of them).
// Either way consumer w's A rows start 8 KiB * w into the stage. Out-of-range rows, columns and k are
// zero-filled by TMA, so edge tiles need no special case.
//
// Epilogue (Store, chosen by bmm/hopper.cu): each consumer converts its 64 x BN floats to the output
// type, two per register, and stages them in 8 KiB swizzled shared buffers (one 64-column box each)
// for TMA stores, which clip at the matrix edges and drain while the consumer goes on: a 64-wide tile
// in one group of one buffer, a 128-wide one in one group of two, a 192-wide one in three groups of
// one, a 256-wide one in two groups of two (a whole-tile buffer would take 64 KiB, one operand stage).
// The groups are staged during the next tile's first k-blocks, one per k-block, so the tensor cores do
// not wait for the epilogue; a tile of no more k-blocks than groups is stored right after its
// mainloop. Where K is two or three k-blocks, a 256-wide tile is staged whole in one group instead
// (Store::tma_whole_tile: buffers for the whole tile, a stage fewer), stored right after its mainloop;
// so is every tall tile (192 x 192), from buffers for its whole tile.
// Or, when the kernel is a write stream (or by name, bmm/store.h), the consumer's own threads copy the
// buffers out with evict-first 16-byte stores. When the output's rows are not 16-byte multiples (N % 8
// != 0) neither can address it, and the consumers store straight from registers; so they do a split-K
// slice's float partials, and every tile of a width that is not a multiple of 64 (96, 112, 160;
// TileConfig), 16 bytes a store where the rows allow it (store_tile_direct_wide).
//
// Split-K (splits > 1): the walk's batch index is split * batch + b, that split's k-blocks [split *
// k_blocks, + k_blocks) of batch entry b (the past-K k-blocks of the last split are TMA's zeros), and
// its float tile goes to partials[split * batch + b], summed in split order afterwards (bmm/split_k.cuh).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/bmm/hopper_pipeline.cuh"
#include "cuda/bmm/output_pairs.cuh"
#include "cuda/bmm/pair.h"
#include "cuda/bmm/sm90_ptx.cuh"
#include "cuda/bmm/store.h"
#include "cuda/bmm/wgmma_ops.cuh"

namespace tiles::cuda::hopper {

// What the kernel needs besides the tensor maps. Batch strides of 0 broadcast an operand.
struct GemmShape {
  int64_t batch, m, n, k;
  int64_t k_blocks;  // per split
  int splits;
  float* partials;   // [splits][batch][m][n] when splits > 1
  int tiles_m, tiles_n;
  bool a_broadcast, b_broadcast;  // read batch 0 for every output batch
  Store store;                    // Store::tma, tma_whole_tile: the output is described by map_c
};

template <int BN, bool kWholeTile = false, int kRows = 128>
struct TileConfig {
  // 64-column multiples stage their output in whole 64-column chunks (the epilogue above); the others
  // (96, 112, 160) store straight from registers. bmm picks 160 only where its tiles fill one wave, so
  // that a block has no next mainloop to hide a staged store under (split-K may add waves), and 96 for
  // one-wave products with a K-major b over a long K; 112 runs by name only (bmm/hopper.cu tile_width).
  // An N-major b of these widths is read by wgmma as 1.5 (96), 1.75 (112) or 2.5 (160) of the
  // 128-byte-swizzled 64-column blocks: not one of PTX's canonical MN-major layouts (CUTLASS would take
  // the 64-byte swizzle), but what the H200 computes correctly in every layout
  // (tests/test_bmm_paths.py test_hopper_tile_width_by_name).
  static_assert(BN == 64 || BN == 96 || BN == 112 || BN == 128 || BN == 160 || BN == 192 || BN == 256,
                "Hopper bmm tiles are 64, 96, 112, 128, 160, 192 or 256 columns wide");
  static_assert(!kWholeTile || BN == 256, "whole-tile store buffers are built for 256-wide tiles only");
  // Tall tiles, 192 x 192 (bmm/hopper.cu plan): the tile count cuBLAS fills one wave with on 2048 x 2304
  // (11 x 12 = 132 tiles, where 128 x 192 takes 16 x 12 = 192, two waves).
  // Small tiles, 64 x 64: twice the tiles of 128 x 64 ones for narrow products (N <= 64) over few rows,
  // where 128-row tiles leave SMs idle and split-K adds a launch (NOTES.md, "cuBLAS's tiles on the
  // training shapes": cuBLAS runs 24- to 64-row tiles there, unsplit), where they cost less (bmm/hopper.cu
  // small_tiles_pay).
  static_assert(kRows == 128 || (kRows == 192 && BN == 192 && !kWholeTile) || (kRows == 64 && BN == 64 && !kWholeTile),
                "tiles are 128 rows, 192 x 192 or 64 x 64");
  static constexpr int kWidth = BN;
  static constexpr bool kStagedStores = BN % 64 == 0;
  static constexpr int BM = kRows, BK = 64;
  static constexpr int kConsumers = BM / 64;           // warpgroups computing, 64 rows each
  static constexpr int kThreads = 128 * (kConsumers + 1);
  static constexpr int kABytes = BM * BK * 2;          // 16 KiB, 24 for tall tiles, 8 for small ones
  // An N-major b arrives in whole 64-column boxes (BN = 96: two, the second half used), a K-major one
  // as BN rows; a stage has room for the boxes.
  static constexpr int kBBoxes = (BN + 63) / 64;
  static constexpr int kBBytes = kBBoxes * 64 * BK * 2;  // 8, 16, 24 or 32 KiB
  static constexpr int kStageBytes = kABytes + kBBytes;
  // The bytes TMA writes into a stage, which its `full` barrier waits for.
  static constexpr uint32_t loaded_bytes(bool trans_b) { return kABytes + (trans_b ? kBBoxes * 64 : BN) * BK * 2; }
  static constexpr int kChunkBytes = 64 * 64 * 2;      // one output box: 64 rows x 64 columns
  // Output chunk buffers per consumer, one store group. At BN = 256 two, half a tile, which leaves room
  // for a 4th stage, which long K wants; at BN = 128 the whole tile in one group (faster than chunk by
  // chunk); at BN = 192 one chunk a group (three made ptxas spill the consumers' registers when held
  // under the next mainloop), which leaves room for a 5th stage; at BN = 64 the tile's one chunk. None
  // where the tile is not staged.
  // Store::tma_whole_tile (kWholeTile): a 256-wide tile's four chunks a consumer in one group, so that
  // a tile's stores never wait for its own earlier chunks to leave shared memory, at the price of a
  // stage (short K: bmm/hopper.cu plan). Tall tiles' three chunks a consumer too, in one group: their
  // stores are never held under the next mainloop (kHoldsStores), so chunk by chunk they would wait for
  // each other at the end of every tile.
  static constexpr int kCBuffers = kWholeTile || kRows == 192 ? BN / 64 : BN == 192 || BN == 64 ? 1 : 2;
  static constexpr int kStoreGroups = kStagedStores ? BN / 64 / kCBuffers : 0;
  static constexpr int kCBytes = kStagedStores ? kConsumers * kCBuffers * kChunkBytes : 0;
  // Whether a tile's packed output may wait in registers for the next tile's first k-blocks (the
  // kernel's `overlap`). Not with whole-tile buffers, nor in tall tiles, whose consumers have 152
  // registers: 96 accumulators and 48 packed ones would spill.
  static constexpr bool kHoldsStores = !kWholeTile && kRows != 192;
  // At 256 and 192 as deep as 227 KiB allows (128: untimed at 6; 256 with whole-tile buffers: three
  // 48 KiB stages beside 64 KiB of buffers); 96 and 112 (32 KiB stages) at 6, as cuBLAS runs its 96 x
  // 128 tiles (benchmarks/NOTES.md, "cuBLAS's tiles on the training shapes"). 64 (24 KiB stages) as
  // deep as fits: its products (N <= 64, as attention's p @ v over a long K) stream a through few
  // tensor-core cycles a k-block, so the loads in flight set their pace.
  // Tall tiles: three 48 KiB stages beside 72 KiB of buffers, as cuBLAS runs its 192 x 192 tiles. Small
  // ones: twelve 16 KiB stages, as many bytes in flight as 128 x 64's eight of 24 KiB.
  static constexpr int kStages =
      kWholeTile || kRows == 192 ? 3 : kRows == 64 ? 12 : BN == 256 ? 4 : BN == 64 ? 8 : BN < 128 ? 6 : 5;
  // Registers a thread after setmaxnreg, of the 168 each of the 384 threads starts with: the consumers
  // take every one the producer warpgroup gives up (at a producer of 48 they never get them, and the
  // kernel hangs in setmaxnreg.inc). Paired blocks' producers walk pairs and multicast, which spills at
  // 40 registers; their consumers of at most 128 columns fit in 224. Tall tiles' 512 threads start with
  // 128 registers each: a producer of 40 leaves (65536 - 128 x 40) / 384 = 157 to each consumer, 152 in
  // setmaxnreg's steps of 8. Small tiles' 256 threads start with 232, the consumer's count (as CUTLASS's
  // one-consumer kernels run): its increase is a no-op, and the producer's decrease frees what none takes.
  static constexpr int producer_registers(bool paired) { return paired && BN <= 128 ? 56 : 40; }
  static constexpr int consumer_registers(bool paired) {
    return kRows == 192 ? 152 : paired && BN <= 128 ? 224 : 232;
  }
  static constexpr size_t kSmemBytes =
      size_t(kStages) * kStageBytes + kCBytes + 2 * kStages * sizeof(uint64_t) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than a Hopper block may have");
};

// One product for warpgroup-sized tiles: 64 x BN x 16.
#define TILES_WGMMA_WIDTH(W)                                                    \
  if constexpr (BN == W) {                                                      \
    if constexpr (std::is_same_v<T, __nv_bfloat16>) wgmma_m64n##W##k16_bf16<ta, tb>(acc, da, db, 1); \
    else wgmma_m64n##W##k16_f16<ta, tb>(acc, da, db, 1);                       \
  }
template <class T, int BN, bool kTransA, bool kTransB>
__device__ __forceinline__ void wgmma_tile(float* acc, uint64_t da, uint64_t db) {
  constexpr int ta = kTransA, tb = kTransB;
  TILES_WGMMA_WIDTH(64)
  TILES_WGMMA_WIDTH(96)
  TILES_WGMMA_WIDTH(112)
  TILES_WGMMA_WIDTH(128)
  TILES_WGMMA_WIDTH(160)
  TILES_WGMMA_WIDTH(192)
  TILES_WGMMA_WIDTH(256)
}
#undef TILES_WGMMA_WIDTH

template <class T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(v);
  else return __float2half_rn(v);
}

// Two adjacent outputs converted to T and packed into one register, low half first.
template <class T>
__device__ __forceinline__ uint32_t pack_pair(float lo, float hi) {
  uint32_t bits;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    memcpy(&bits, &pair, 4);
  } else {
    const __half2 pair = __floats2half2_rn(lo, hi);
    memcpy(&bits, &pair, 4);
  }
  return bits;
}

// Thread (warp, lane) of a consumer warpgroup holds, for i < BN / 8, the outputs at rows
// warp * 16 + lane / 4 (+ 8) and columns 8 i + 2 (lane % 4) (+ 1) of the warpgroup's 64 x BN block:
// acc[4 i + 2 half + {0, 1}].

// The warpgroup's 64 x BN block converted to T in half the registers: packed[2 i + half] holds
// acc[4 i + 2 half] and acc[4 i + 2 half + 1].
template <class T, int BN>
__device__ __forceinline__ void pack_tile(const float* acc, uint32_t* packed) {
#pragma unroll
  for (int i = 0; i < BN / 4; ++i) packed[i] = pack_pair<T>(acc[2 * i], acc[2 * i + 1]);
}

// Columns 64 j .. 64 j + 63 of the packed block (`j` a compile-time constant once unrolled) into
// `buffer` as [64 rows][64 columns] with the 128-byte swizzle (16-byte chunk index XOR row % 8), which
// also makes these 4-byte writes free of bank conflicts.
__device__ __forceinline__ void stage_chunk(const uint32_t* packed, uint8_t* buffer, int j) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = warp * 16 + lane / 4 + 8 * half;
#pragma unroll
    for (int ii = 0; ii < 8; ++ii) {
      const int i = 8 * j + ii;
      uint8_t* dst = buffer + row * 128 + ((ii ^ (row % 8)) * 16) + 4 * (lane % 4);
      *reinterpret_cast<uint32_t*>(dst) = packed[2 * i + half];
    }
  }
}

// Where a consumer's part of a packed output tile goes, and whether its store groups (kCBuffers
// chunks each) are still to be staged under the next tile's mainloop.
struct PendingTile {
  int64_t batch;
  int m0, n0;
  bool held;
};

// Store group `g` of a packed tile through shared memory and TMA: one thread waits until the stores of
// the previous group are done reading the buffers, the warpgroup stages the group's chunks, and the
// same thread issues one TMA store per chunk, which drain while the consumer goes on.
template <class T, class Cfg>
__device__ __forceinline__ void store_group_tma(const uint32_t* packed, uint8_t* buffers, const CUtensorMap* map_c,
                                                const GemmShape& shape, const PendingTile& pt, int g, int w) {
  constexpr int kGroups = Cfg::kStoreGroups;
  const bool leader = threadIdx.x % 128 == 0;
  if (leader) bulk_wait_read<0>();
  named_barrier(1 + w, 128);
#pragma unroll
  for (int G = 0; G < kGroups; ++G) {  // `packed` is indexed by compile-time constants only
    if (G != g) continue;
#pragma unroll
    for (int jj = 0; jj < Cfg::kCBuffers; ++jj) stage_chunk(packed, buffers + jj * Cfg::kChunkBytes, G * Cfg::kCBuffers + jj);
  }
  fence_async_shared();
  named_barrier(1 + w, 128);
  if (leader) {
#pragma unroll
    for (int jj = 0; jj < Cfg::kCBuffers; ++jj) {
      const int n0 = pt.n0 + 64 * (g * Cfg::kCBuffers + jj);
      if (pt.m0 < shape.m && n0 < shape.n) tma_store_3d(map_c, buffers + jj * Cfg::kChunkBytes, n0, pt.m0, int(pt.batch));
    }
    bulk_commit();
  }
}

// The tile staged in the same swizzled buffers, kCBuffers chunks at a time, then written by the
// consumer's 128 threads as 16-byte stores (each warp writes contiguous row segments of kCBuffers x 128
// bytes) marked evict-first (`st.global.cs`): the lines leave L2 in about the order they were written
// instead of pushing out the operands, and nothing waits for a bulk store to finish reading a buffer,
// which is free again once every thread has loaded its pieces. Needs rows of 16-byte multiples (N % 8 ==
// 0) and a 16-byte-aligned output, as the TMA store does.
template <class T, class Cfg>
__device__ __forceinline__ void store_tile_streaming(const uint32_t* packed, uint8_t* buffers, T* c, const GemmShape& shape,
                                                     const TileCoord& tc, int w) {
  constexpr int BN = Cfg::kWidth;
  constexpr int kChunks = BN / 64, kPerGroup = Cfg::kCBuffers;
  static_assert(kChunks % kPerGroup == 0, "a store group is kCBuffers whole chunks");
  // A group's 16-byte pieces, 8 per chunk row; thread t takes pieces t, t + 128, ...; piece p is
  // column block cc of row `row` of the group's chunk jj.
  constexpr int kPieces = 64 * 8 * kPerGroup, kPerThread = kPieces / 128;
  struct Piece {
    int row, jj, cc;
  };
  auto piece_of = [](int p) { return Piece{p / (8 * kPerGroup), (p / 8) % kPerGroup, p % 8}; };
  const int t = threadIdx.x % 128;
  const int64_t m0 = int64_t(tc.tm) * Cfg::BM + 64 * w;
  T* c_batch = c + tc.batch * shape.m * shape.n;
#pragma unroll
  for (int j0 = 0; j0 < kChunks; j0 += kPerGroup) {
    named_barrier(1 + w, 128);  // every thread is done reading the buffers
#pragma unroll
    for (int jj = 0; jj < kPerGroup; ++jj) stage_chunk(packed, buffers + jj * Cfg::kChunkBytes, j0 + jj);
    named_barrier(1 + w, 128);
    // Every piece is loaded before the first store: a generic store could alias shared memory, which
    // would keep each load behind the previous store.
    uint4 v[kPerThread];
#pragma unroll
    for (int q = 0; q < kPerThread; ++q) {
      const Piece pc = piece_of(q * 128 + t);
      v[q] = *reinterpret_cast<const uint4*>(buffers + pc.jj * Cfg::kChunkBytes + pc.row * 128 + ((pc.cc ^ (pc.row % 8)) * 16));
    }
#pragma unroll
    for (int q = 0; q < kPerThread; ++q) {
      const Piece pc = piece_of(q * 128 + t);
      const int64_t m = m0 + pc.row, n = int64_t(tc.tn) * BN + 64 * (j0 + pc.jj) + 8 * pc.cc;
      if (m < shape.m && n < shape.n) __stcs(reinterpret_cast<uint4*>(c_batch + m * shape.n + n), v[q]);
    }
  }
}

// One output, or two adjacent ones (`p` pair_aligned), in Out: T, or float for split-K partials; 16-bit
// pairs converted by one packing instruction.
template <class Out>
__device__ __forceinline__ void store_one(Out* p, float v) {
  if constexpr (std::is_same_v<Out, float>) *p = v;
  else *p = from_float<Out>(v);
}
template <class Out>
__device__ __forceinline__ void store_two(Out* p, float v0, float v1) {
  if constexpr (std::is_same_v<Out, float>) store_pair(p, v0, v1);
  else *reinterpret_cast<uint32_t*>(p) = pack_pair<Out>(v0, v1);
}

// Four packed words v[j] of one row, columns 8 (4 g + j) + 2 q and + 1 in lane q of a quad (q = lane % 4),
// transposed across the quad: lane q ends with lane j's v[q] in v[j], columns 8 (4 g + q) to + 7 in order.
// Two exchanges, with lane q ^ 1 (the words whose j differs from q in bit 0) and then with lane q ^ 2 (bit 1).
// Every lane of the warp must take part.
__device__ __forceinline__ void transpose_quad(uint32_t (&v)[4]) {
  const bool odd = threadIdx.x & 1, high = threadIdx.x & 2;
  uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? v[0] : v[1], 1);
  uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? v[2] : v[3], 1);
  if (odd) v[0] = r0, v[2] = r1;
  else v[1] = r0, v[3] = r1;
  r0 = __shfl_xor_sync(0xffffffffu, high ? v[0] : v[2], 2);
  r1 = __shfl_xor_sync(0xffffffffu, high ? v[1] : v[3], 2);
  if (high) v[0] = r0, v[1] = r1;
  else v[2] = r0, v[3] = r1;
}

// Where this thread's accumulators land in the output, for the stores straight from registers: in
// wgmma's fragment, lane `lane` of warp `warp` in warpgroup w holds output rows row0 and row0 + 8 and, from
// the tile's first column tile_col, columns 8 i + 2 (lane % 4) and + 1; batch is the tile's batch entry.
template <class T>
struct FragmentOrigin {
  int64_t row0, tile_col;
  T* batch;
};
template <int BN, int BM, class T>
__device__ __forceinline__ FragmentOrigin<T> fragment_origin(T* c, const GemmShape& shape, const TileCoord& tc, int w) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  return {int64_t(tc.tm) * BM + w * 64 + warp * 16 + lane / 4, int64_t(tc.tn) * BN, c + tc.batch * shape.m * shape.n};
}

// Straight from registers in T, 16 bytes a store, for the widths that are not staged (96, 112, 160) where
// the output's rows are 16-byte multiples (N % 8 == 0, which TMA's stores ask too): each quad's four
// lanes trade words (transpose_quad) so that a lane stores 8 adjacent outputs, and a warp's store is 8
// rows of 64 bytes, where stores of 4 bytes made it 8 rows of 16. On an H200 the 4-byte stores cost a
// one-wave product ~5 us, against TMA's stores from shared memory (NOTES.md, "Direct stores, 16 bytes at
// a time"). 112's last two column groups of 8 are stored 4 bytes at a time.
template <class T, int BN, int BM>
__device__ __forceinline__ void store_tile_direct_wide(const float* acc, T* c, const GemmShape& shape,
                                                       const TileCoord& tc, int w) {
  const int q = threadIdx.x % 4;
  const auto [row0, col0, c_batch] = fragment_origin<BN, BM>(c, shape, tc, w);
  constexpr int kGroups = BN / 32;  // of four column groups of 8
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = row0 + 8 * half;
    T* c_row = c_batch + row * shape.n;
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      uint32_t v[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * g + j;
        v[j] = pack_pair<T>(acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
      }
      transpose_quad(v);  // by every lane, whether or not its row is past M
      const int64_t col = col0 + 8 * (4 * g + q);
      if (row < shape.m && col < shape.n) *reinterpret_cast<uint4*>(c_row + col) = make_uint4(v[0], v[1], v[2], v[3]);
    }
#pragma unroll
    for (int i = 4 * kGroups; i < BN / 8; ++i) {
      const int64_t col = col0 + 8 * i + 2 * q;
      if (row < shape.m && col < shape.n) store_two(c_row + col, acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
    }
  }
}

// One 16-bit output of 8 packed in w (element e: the low or high half of word e / 2).
__device__ __forceinline__ void store_element(void* at, const uint32_t (&w)[4], int e) {
  *static_cast<uint16_t*>(at) = uint16_t(w[e / 2] >> (16 * (e % 2)));
}
// Outputs e0 .. e0 + 7 of the 16 in (l, v), e0 in 1..7: words e0 / 2 on (two selects), then a half-word
// funnel shift where e0 is odd.
__device__ __forceinline__ void realign_words(const uint32_t (&l)[4], const uint32_t (&v)[4], int e0, uint32_t (&out)[4]) {
  const uint32_t w[8] = {l[0], l[1], l[2], l[3], v[0], v[1], v[2], v[3]};
  uint32_t u[6], x[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) u[i] = e0 & 4 ? w[i + 2] : w[i];
#pragma unroll
  for (int i = 0; i < 5; ++i) x[i] = e0 & 2 ? u[i + 1] : u[i];
#pragma unroll
  for (int t = 0; t < 4; ++t) out[t] = __funnelshift_r(x[t], x[t + 1], 16 * (e0 & 1));
}

// 16-bit outputs whose rows are not 16-byte multiples (N % 8 != 0: an LM head's 50257 columns), 16 bytes a
// store all the same. After transpose_quad lane q holds columns 32 g + 8 q .. + 7 of its row; the row's
// 16-byte blocks start s outputs before the tile's first column (s = the skew, per row). With s != 0 each
// lane stores the block that ends inside its 8: the last s outputs of the lane before it (lane q - 1; for
// lane 0, lane 3 of the previous group, kept from the previous exchange) and its own first 8 - s. That
// covers columns 8 - s .. BN - s - 1 of the tile; lane 0 stores the first 8 - s outputs of the tile and
// lane 3 the last s one at a time (the blocks around them hold the neighbouring tiles' outputs). Columns
// past N are stored one at a time or not at all. BN % 32 == 0 (whole groups of four lanes' 8). Modelled,
// every skew, width and N edge, in tools/realigned_store_model.py.
template <class T, int BN, int BM>
__device__ __forceinline__ void store_tile_direct_realigned(const float* acc, T* c, const GemmShape& shape,
                                                            const TileCoord& tc, int w) {
  static_assert(sizeof(T) == 2 && BN % 32 == 0, "16-bit outputs, whole column groups");
  const int lane = threadIdx.x % 32, q = lane % 4;
  const int left_lane = (lane & ~3) | ((q + 3) & 3);
  const auto [row0, col0, c_batch] = fragment_origin<BN, BM>(c, shape, tc, w);
  constexpr int kGroups = BN / 32;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = row0 + 8 * half;
    const bool row_inside = row < shape.m;
    T* tile_row = c_batch + row * shape.n + col0;  // formed, not dereferenced, past M
    const int s = int(reinterpret_cast<uintptr_t>(tile_row) / sizeof(T) % 8);
    uint32_t v[4], carry[4] = {0, 0, 0, 0};
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int i = 4 * g + j;
        v[j] = pack_pair<T>(acc[4 * i + 2 * half], acc[4 * i + 2 * half + 1]);
      }
      transpose_quad(v);  // by every lane, as are the exchanges below
      // The lane before's words; lane 0 takes the previous group's (its carry, zeros at g = 0, unread) and
      // keeps this one's for the next.
      uint32_t left[4];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t got = __shfl_sync(0xffffffffu, v[j], left_lane);
        left[j] = q == 0 ? carry[j] : got;
        carry[j] = got;
      }
      if (!row_inside) continue;
      const int at = 32 * g + 8 * q - s;  // the block's first column in the tile (s == 0: the lane's own)
      uint32_t out[4];
      if (s == 0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) out[j] = v[j];
      } else if (g == 0 && q == 0) {
#pragma unroll
        for (int e = 0; e < 8; ++e)  // whole loops, so that e indexes the words at compile time
          if (e < 8 - s && col0 + e < shape.n) store_element(tile_row + e, v, e);
        continue;
      } else {
        realign_words(left, v, 8 - s, out);
      }
      if (col0 + at + 8 <= shape.n) {
        *reinterpret_cast<uint4*>(tile_row + at) = make_uint4(out[0], out[1], out[2], out[3]);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (col0 + at + e < shape.n) store_element(tile_row + at + e, out, e);
      }
    }
    if (row_inside && s != 0 && q == 3)  // the tile's last s columns, from the last group's words
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e >= 8 - s && col0 + BN - 8 + e < shape.n) store_element(tile_row + BN - 8 + e, v, e);
  }
}

// Split-K's float partials 16 bytes a store (N % 4 == 0): lanes q and q ^ 1 trade the pairs of columns
// 8 i + 2 q for i = 2 g + 1 (even q) or 2 g (odd q), so that each holds four adjacent floats.
template <int BN, int BM>
__device__ __forceinline__ void store_partials_wide(const float* acc, float* c, const GemmShape& shape,
                                                    const TileCoord& tc, int w) {
  const int q = threadIdx.x % 4;
  const bool odd = q & 1;
  const auto [row0, tile_col, c_batch] = fragment_origin<BN, BM>(c, shape, tc, w);
  const int64_t col0 = tile_col + 2 * (q & 2);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = row0 + 8 * half;
    float* c_row = c_batch + row * shape.n;
#pragma unroll
    for (int g = 0; g < BN / 16; ++g) {
      const float* mine = acc + 4 * (2 * g) + 2 * half;       // columns 8 (2 g) + 2 q, + 1
      const float* next = acc + 4 * (2 * g + 1) + 2 * half;   // columns 8 (2 g + 1) + 2 q, + 1
      const float s0 = __shfl_xor_sync(0xffffffffu, odd ? mine[0] : next[0], 1);
      const float s1 = __shfl_xor_sync(0xffffffffu, odd ? mine[1] : next[1], 1);
      const int64_t col = col0 + 8 * (2 * g + (odd ? 1 : 0));
      const float4 v = odd ? make_float4(s0, s1, next[0], next[1]) : make_float4(mine[0], mine[1], s0, s1);
      if (row < shape.m && col < shape.n) *reinterpret_cast<float4*>(c_row + col) = v;
    }
  }
}

// Straight from registers, for outputs TMA cannot describe and for split-K partials: T in 16-byte stores,
// straight where its rows are 16-byte multiples, realigned row by row at widths of 32-column multiples
// where they are not and the block has a tile after this one (`more_tiles`: a one-wave product ran 7-13%
// slower realigned, its epilogue exposed); floats 16 bytes a store where N % 4 == 0; else bounds-checked
// stores of pairs (4 bytes of T, 8 of float) where a row allows, or single outputs.
template <class Out, int BN, int BM>
__device__ __forceinline__ void store_tile_direct(const float* acc, Out* c, const GemmShape& shape,
                                                  const TileCoord& tc, int w, bool more_tiles) {
  if constexpr (!std::is_same_v<Out, float>) {
    if (shape.n % 8 == 0 && reinterpret_cast<uintptr_t>(c) % 16 == 0)
      return store_tile_direct_wide<Out, BN, BM>(acc, c, shape, tc, w);
    if constexpr (BN % 32 == 0)
      if (more_tiles) return store_tile_direct_realigned<Out, BN, BM>(acc, c, shape, tc, w);
  } else {
    if (shape.n % 4 == 0 && reinterpret_cast<uintptr_t>(c) % 16 == 0)
      return store_partials_wide<BN, BM>(acc, c, shape, tc, w);
  }
  const auto [row0, tile_col, c_batch] = fragment_origin<BN, BM>(c, shape, tc, w);
  const int64_t col0 = tile_col + 2 * (threadIdx.x % 4);
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t row = row0 + 8 * half;
    if (row >= shape.m) continue;
    Out* c_row = c_batch + row * shape.n;
    // (row, even col) pairs are aligned to two outputs where the row starts so: every row when N is even,
    // every other one when it is odd (an LM head's vocabulary of 50257), which then stores half its
    // outputs two at a time instead of none.
    const bool pairs = pair_aligned(c_row);
#pragma unroll
    for (int i = 0; i < BN / 8; ++i) {
      const int64_t col = col0 + 8 * i;
      const float v0 = acc[4 * i + 2 * half], v1 = acc[4 * i + 2 * half + 1];
      if (pairs && col + 1 < shape.n) {
        store_two(c_row + col, v0, v1);
      } else {
        if (col < shape.n) store_one(c_row + col, v0);
        if (col + 1 < shape.n) store_one(c_row + col + 1, v1);
      }
    }
  }
}

// One operand's part of a stage, kRows rows (BM of a, BN of b) by 64 k, completing on `bar`: MN-major, in
// kBoxes 64-wide boxes at (outer0 + 64 j, k0); K-major, one box of kRows rows at (k0, outer0). Where a
// pair of blocks shares the operand (kShared), this block loads its half into both: alternate boxes, or
// half the rows (the host's tensor map makes a K-major box half as tall), `half` being its rank.
template <bool kMnMajor, bool kShared, int kBoxes, int kRows>
__device__ __forceinline__ void load_operand(uint32_t at, const CUtensorMap* map, uint32_t bar, int outer0, int k0,
                                             int batch, int half) {
  if constexpr (kMnMajor) {
#pragma unroll
    for (int j = 0; j < kBoxes; ++j) {
      if constexpr (!kShared) tma_load_3d(at + j * 64 * 128, map, bar, outer0 + 64 * j, k0, batch);
      else if (j % 2 == half) tma_load_3d_to_pair(at + j * 64 * 128, map, bar, outer0 + 64 * j, k0, batch);
    }
  } else if constexpr (!kShared) {
    tma_load_3d(at, map, bar, k0, outer0, batch);
  } else {
    // kRows / 2 rows: a multiple of 8 at every width, so each half starts on a swizzle repeat.
    tma_load_3d_to_pair(at + half * (kRows / 2) * 128, map, bar, k0, outer0 + half * kRows / 2, batch);
  }
}

template <class T, int BN, bool kTransA, bool kTransB, Pair kPair, bool kWholeTile = false, int kRows = 128>
__global__ void __launch_bounds__(TileConfig<BN, kWholeTile, kRows>::kThreads, 1)
hopper_bmm_kernel(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                  const __grid_constant__ CUtensorMap map_c, T* __restrict__ c, const GemmShape shape) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kRows == 128 || kPair == Pair::none, "tall and small tiles run as single blocks");
  using Cfg = TileConfig<BN, kWholeTile, kRows>;
  constexpr int BM = Cfg::BM, BK = Cfg::BK, kStages = Cfg::kStages;

  extern __shared__ uint8_t smem_raw[];
  // The 128-byte swizzle pattern repeats every 1024 bytes: stages start on 1024-byte boundaries.
  // Offset from smem_raw rather than rounded as an integer, which would hide from the compiler that the
  // pointer is shared: the output chunks would be staged with generic stores (ST) instead of STS.
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* c_stage = smem + kStages * Cfg::kStageBytes;                                // output chunks
  uint64_t* full = reinterpret_cast<uint64_t*>(c_stage + Cfg::kCBytes);                // data landed
  uint64_t* empty = full + kStages;                                                    // stage consumed
  // The same as shared-window addresses, for the loops that run every k-block (sm90_ptx.cuh smem_addr).
  const uint32_t stages_at = smem_addr(smem), full_at = smem_addr(full), empty_at = smem_addr(empty);

  const int warpgroup = threadIdx.x / 128;
  // A paired block's stage is freed once the consumers of both blocks have read it: each block's half
  // of the shared operand lands in both.
  constexpr int kBlocks = kPair == Pair::none ? 1 : 2;
  const uint32_t rank = kBlocks == 2 ? cluster_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], Cfg::kConsumers * kBlocks);
    }
    mbarrier_init_fence();
  }
  if constexpr (kBlocks == 2) cluster_sync();  // the peer's barriers are ready before any multicast or arrival
  else __syncthreads();

  const int64_t k_blocks = shape.k_blocks;
  // The walk is over tiles, or pairs of them: both blocks of a pair walk the same pairs in step, and
  // tile_of gives each its own tile of the pair (the second of a pair may lie past M or N: TMA reads
  // zeros there, and every store is clipped).
  const int walk_m = kPair == Pair::share_b ? (shape.tiles_m + 1) / 2 : shape.tiles_m;
  const int walk_n = kPair == Pair::share_a ? (shape.tiles_n + 1) / 2 : shape.tiles_n;
  const int64_t total_tiles = shape.batch * shape.splits * walk_m * walk_n;
  const int64_t first = blockIdx.x / kBlocks, stride = gridDim.x / kBlocks;
  auto tile_of = [&](TileCoord walked) {
    if constexpr (kPair == Pair::share_b) walked.tm = 2 * walked.tm + int(rank);
    if constexpr (kPair == Pair::share_a) walked.tn = 2 * walked.tn + int(rank);
    return walked;
  };

  if (warpgroup == 0) {  // ------------------------------------------------------------- producer
    registers_decrease<Cfg::producer_registers(kBlocks == 2)>();
    if (threadIdx.x == 0) {
      tma_prefetch_descriptor(&map_a);
      tma_prefetch_descriptor(&map_b);
      produce_stages<kStages, BK>(full_at, empty_at, Cfg::loaded_bytes(kTransB), total_tiles, walk_m, walk_n, k_blocks,
                                  [&](const TileCoord& walked) {
        const TileCoord tc = tile_of(walked);
        const int64_t split = tc.batch / shape.batch, b = tc.batch - split * shape.batch;
        const int ba = shape.a_broadcast ? 0 : int(b), bb = shape.b_broadcast ? 0 : int(b);
        const int k_first = int(split * k_blocks * BK);
        const int m0 = tc.tm * BM, n0 = tc.tn * BN;
        const int half = int(rank);  // of a shared operand, this block's
        return [=, &map_a, &map_b](int s, int k_in_split) {
          const int k0 = k_first + k_in_split;
          const uint32_t a_at = stages_at + s * Cfg::kStageBytes, b_at = a_at + Cfg::kABytes, bar = full_at + 8 * s;
          load_operand<kTransA, kPair == Pair::share_a, BM / 64, BM>(a_at, &map_a, bar, m0, k0, ba, half);
          load_operand<kTransB, kPair == Pair::share_b, Cfg::kBBoxes, BN>(b_at, &map_b, bar, n0, k0, bb, half);
        };
      }, first, stride);
    }
    if constexpr (kBlocks == 2) cluster_sync();  // every thread of the cluster takes part in the closing one
    return;
  }

  // ---------------------------------------------------------------------------------- consumers
  registers_increase<Cfg::consumer_registers(kBlocks == 2)>();
  const int w = warpgroup - 1;               // which 64 rows of the tile
  // Descriptor strides (bytes): 8-row groups are 1024 apart; MN-major column blocks are one box apart.
  constexpr uint32_t kGroup = 1024, kBox = 64 * 128;
  // Stage 0's descriptors, built once: any stage's and step's are these plus (byte offset) / 16. The low 14
  // bits of a descriptor are the shared-window address / 16, and the stages lie below 2^18 bytes, so the
  // additions never carry out of that field (the offsets are multiples of 16).
  const uint64_t desc_a = smem_descriptor(stages_at + w * kBox, kTransA ? kBox : 0, kGroup);
  const uint64_t desc_b = smem_descriptor(stages_at + Cfg::kABytes, kTransB ? kBox : 0, kGroup);
  StageRing<kStages> ring;
  float acc[BN / 2];
  // Store::tma: the previous tile, converted to T, whose store groups are staged one per k-block
  // during this tile's first k-blocks, while the tensor cores already work on this tile; a tile is
  // held only when it has more k-blocks than groups, so every group is out before `packed` is
  // rewritten. Otherwise the tile is stored right after its mainloop: there is no mainloop to hide it
  // under, and deferring it cost 256 x 128x128x64 (one k-block) 3% on the H100. So a tile of at most
  // kGroups k-blocks (K <= 64 at 64- and 128-wide tiles, 128 at 256-wide, 192 at 192-wide) is stored
  // at once, as is every tile with whole-tile buffers or tall (TileConfig::kHoldsStores).
  uint32_t packed[BN / 4];
  PendingTile pending{0, 0, 0, false};
  constexpr int kGroups = Cfg::kStoreGroups;
  // Whole-tile buffers (short K) and tall tiles store every tile at once (TileConfig::kHoldsStores): held,
  // the packed registers would live beside the accumulators through the next mainloop, which spills.
  const bool overlap = Cfg::kHoldsStores && k_blocks > kGroups;
  uint8_t* buffers = c_stage + w * (Cfg::kCBytes / Cfg::kConsumers);
  auto store_group = [&](int g) { store_group_tma<T, Cfg>(packed, buffers, &map_c, shape, pending, g, w); };
  auto release = [&](int stage) {  // by one thread of the warpgroup
    mbarrier_arrive(empty_at + 8 * stage);
    if constexpr (kBlocks == 2) mbarrier_arrive_peer(empty_at + 8 * stage, rank ^ 1);
  };
  for (int64_t t = first; t < total_tiles; t += stride) {
    const TileCoord tc = tile_of(tile_coord(t, walk_m, walk_n));
    const bool more_tiles = t + stride < total_tiles;
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
    fence_registers(acc, BN / 2);

    int previous = -1;
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      mbarrier_wait(full_at + 8 * ring.s, ring.phase);
      const uint32_t stage = uint32_t(ring.s) * (Cfg::kStageBytes / 16);
      wgmma_fence();
      // K-major: 16 k = 32 bytes along the swizzled row. MN-major: 16 k = 16 rows = 2 groups.
      constexpr auto k_step = [](bool mn_major, int kk) { return uint32_t(mn_major ? kk * 2 * kGroup : kk * 32) / 16; };
#pragma unroll
      for (int kk = 0; kk < BK / 16; ++kk) {
        const uint64_t da = desc_a + stage + k_step(kTransA, kk);
        const uint64_t db = desc_b + stage + k_step(kTransB, kk);
        wgmma_tile<T, BN, kTransA, kTransB>(acc, da, db);
      }
      wgmma_commit();
      // Keep this k-block's products in flight; the previous block's are done, so free its stage.
      wgmma_wait<1>();
      fence_registers(acc, BN / 2);
      if (previous >= 0 && threadIdx.x % 128 == 0) release(previous);
      previous = ring.s;
      ring.advance();
      if constexpr (Cfg::kStagedStores && Cfg::kHoldsStores)
        if (pending.held && kb < kGroups) store_group(int(kb));  // while this k-block's products are in flight
    }
    pending.held = false;  // all staged: k_blocks > kGroups whenever a tile is held
    wgmma_wait<0>();
    fence_registers(acc, BN / 2);
    if (previous >= 0 && threadIdx.x % 128 == 0) release(previous);

    if constexpr (!Cfg::kStagedStores) {  // bmm/hopper.cu never plans a staged store for these widths
      if (shape.store == Store::partials) store_tile_direct<float, BN, BM>(acc, shape.partials, shape, tc, w, more_tiles);
      else store_tile_direct<T, BN, BM>(acc, c, shape, tc, w, more_tiles);
    } else {
      switch (shape.store) {
        case Store::tma:
        case Store::tma_whole_tile:  // the same code on Cfg's buffers: one group of four chunks
          pack_tile<T, BN>(acc, packed);
          pending = {tc.batch, tc.tm * BM + 64 * w, tc.tn * BN, overlap};
          if (!overlap)
            for (int g = 0; g < kGroups; ++g) store_group(g);
          break;
        case Store::streaming:
          if constexpr (!kWholeTile) {
            pack_tile<T, BN>(acc, packed);
            store_tile_streaming<T, Cfg>(packed, buffers, c, shape, tc, w);
          } else {
            __trap();  // never launched: bmm/hopper.cu runs the whole-tile kernel for its own store only
          }
          break;
        case Store::direct: store_tile_direct<T, BN, BM>(acc, c, shape, tc, w, more_tiles); break;
        case Store::partials: store_tile_direct<float, BN, BM>(acc, shape.partials, shape, tc, w, more_tiles); break;
      }
    }
  }
  if constexpr (Cfg::kStagedStores && Cfg::kHoldsStores)
    if (pending.held)
      for (int g = 0; g < kGroups; ++g) store_group(g);
  // Shared memory must outlive the last stores' reads of it, not their writes to global memory (the
  // kernel's end orders those for the next kernel): bmm bf16 256 x 128x128x64 6.5 -> 6.1 us back to back.
  if (bulk_stores(shape.store) && threadIdx.x % 128 == 0) bulk_wait_read<0>();
  if constexpr (kBlocks == 2) cluster_sync();  // the peer may still arrive on this block's barriers
#endif
}

}  // namespace tiles::cuda::hopper
