// The Hopper (sm_90a) tensor-core bmm for float32: TF32 wgmma, either plain (precision "high" /
// "medium") or as 3xTF32 split arithmetic (precision "highest": float32 accuracy).
//
// TF32 wgmma reads a shared-memory operand only in K-major order, so the kernel multiplies two roles
// rather than a and b:
//   R, the register operand: a tile of BP = 128 rows x BK = 32 k, any major order, loaded by TMA and
//      read into wgmma's A fragments with ordinary shared-memory loads (which also round to TF32), except
//      in 1xTF32 with R K-major (a.b.mT, "NT"), where wgmma reads it through a descriptor as it reads Q;
//   Q, the shared-memory operand: BQ rows x 32 k, K-major, read by wgmma through a descriptor.
// D = R * Q^T is a BP x BQ tile. With a row-major a and b (b N-major) the roles swap: R = b^T,
// Q = a, and D is an output tile transposed (kSwap). The host picks the roles (bmm/hopper_tf32.cu).
// An M-major a with an N-major b has no K-major operand: R = a, and Q = b is MN-major (kQMnMajor),
// loaded by TMA in MN-major boxes transposed in place: by the consumer warps in 1xTF32's 128-wide tiles
// (transpose_q_halves), by producer warps otherwise (transpose_q_stage, which for 3xTF32 also writes the
// transposed tile's small part).
//
// An operand TMA cannot address (a stride or the base not 16-byte aligned: an odd K, M or N) is copied by
// producer warps 1-3 (0-3 when both are) instead, 4 bytes a lane with cp.async, into the layout TMA would
// have written (copy_stages): a warp instruction writes 8 floats in each of 4 rows (an MN-major Q: 4 k in
// each of 8 K-major rows, transposed as it is copied), 32 distinct banks, one shared-memory wavefront, whole
// 32-byte sectors of global memory (bmm/hopper_tf32_copies.cuh). Those variants (kCopies) are compiled apart
// from the others. The shape, stage sizes and fragment rows are in bmm/hopper_tf32_tiles.cuh, the stores of
// the output in bmm/hopper_tf32_epilogue.cuh.
//
// Block: 3 warpgroups on the tile walk and stage ring of bmm/hopper_pipeline.cuh, as in
// bmm/hopper_kernel.cuh. Warpgroup 0 produces: its thread 0 issues the TMA copies; for 3xTF32 its
// warps 1-3 also write each stage's Q "small part" (q - tf32(q)) into a third buffer, since wgmma can
// only read Q's big part (it ignores a float's low 13 bits) from shared memory; for an MN-major Q (but
// 1xTF32's 128-wide tiles that TMA loads) its warps 1-3 transpose Q's tiles (and write 3xTF32's small
// part).
// Warpgroups 1 and 2 each own 64 rows of R and accumulate 64 x BQ floats; with ping-pong consumers
// (kPingPong) each owns whole 128 x BQ tiles of its own instead, the two taking turns.
//
// 3xTF32: r * q ~ r_big * q_big + r_small * q_big + r_big * q_small. The tensor cores accumulate
// rounding toward zero, so each k-block sums its 12 products in fresh registers, folded into the
// running sum with a float32 add (see bmm/mma_atoms.cuh, Tf32x3): error at cuBLAS SGEMM's level.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/bmm/cp_async.cuh"
#include "cuda/bmm/hopper_pipeline.cuh"
#include "cuda/bmm/hopper_tf32_copies.cuh"
#include "cuda/bmm/hopper_tf32_epilogue.cuh"
#include "cuda/bmm/hopper_tf32_tiles.cuh"
#include "cuda/bmm/mma_atoms.cuh"      // to_tf32
#include "cuda/bmm/sm90_ptx.cuh"
#include "cuda/bmm/wgmma_ops.cuh"

namespace tiles::cuda::hopper {

template <int BQ>
__device__ __forceinline__ void wgmma_tf32(float* acc, const uint32_t* a, uint64_t desc_q, int scale_d) {
  if constexpr (BQ == 256) wgmma_m64n256k8_tf32_rs(acc, a, desc_q, scale_d);
  else if constexpr (BQ == 192) wgmma_m64n192k8_tf32_rs(acc, a, desc_q, scale_d);
  else if constexpr (BQ == 128) wgmma_m64n128k8_tf32_rs(acc, a, desc_q, scale_d);
  else wgmma_m64n64k8_tf32_rs(acc, a, desc_q, scale_d);
}
template <int BQ>
__device__ __forceinline__ void wgmma_tf32(float* acc, uint64_t desc_r, uint64_t desc_q, int scale_d) {
  if constexpr (BQ == 256) wgmma_m64n256k8_tf32_ss(acc, desc_r, desc_q, scale_d);
  else if constexpr (BQ == 192) wgmma_m64n192k8_tf32_ss(acc, desc_r, desc_q, scale_d);
  else if constexpr (BQ == 128) wgmma_m64n128k8_tf32_ss(acc, desc_r, desc_q, scale_d);
  else wgmma_m64n64k8_tf32_ss(acc, desc_r, desc_q, scale_d);
}

// The thread's A fragments for the 4 k-steps of a k-block: element j of step kk holds R at fragment
// row (j % 2 ? g + 8 : g) and k = 8 kk + t + (j / 2 ? 4 : 0), as in mma.m16n8k8's TF32 A fragment.
template <int kSplit, bool kRKMajor>
__device__ __forceinline__ void load_fragments(const uint8_t* r, int row0, int row1, int t,
                                               uint32_t (&big)[4][4], uint32_t (&small)[4][4]) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int k = 8 * kk + t + 4 * (j / 2);
      const float x = *reinterpret_cast<const float*>(r + r_offset<kRKMajor>(j % 2 ? row1 : row0, k));
      big[kk][j] = mma::to_tf32(x);
      if constexpr (kSplit == 3) small[kk][j] = mma::to_tf32(x - __uint_as_float(big[kk][j]));
    }
  }
}

// Q's small part: small = q - (q with its low 13 bits cleared, what wgmma reads), itself rounded to TF32.
__device__ __forceinline__ float small_part(float x) {
  return __uint_as_float(mma::to_tf32(x - __uint_as_float(__float_as_uint(x) & 0xFFFFE000u)));
}
__device__ __forceinline__ float4 small_part(float4 v) {
  return make_float4(small_part(v.x), small_part(v.y), small_part(v.z), small_part(v.w));
}

// A K-major Q stage's small part, by the splitter threads (producer warps 1-3); `index` counts from 0
// among them.
template <int kBytes, int kThreads>
__device__ __forceinline__ void write_small_part(const uint8_t* q, uint8_t* small, int index) {
  for (int i = index; i < kBytes / 16; i += kThreads)
    reinterpret_cast<float4*>(small)[i] = small_part(reinterpret_cast<const float4*>(q)[i]);
}

// The 4 x 4 block t (row r: 4 q of k row r) transposed: row c holds the 4 k of q column c.
__device__ __forceinline__ void transpose_4x4(const float4 (&t)[4], float4 (&rows)[4]) {
  rows[0] = make_float4(t[0].x, t[1].x, t[2].x, t[3].x), rows[1] = make_float4(t[0].y, t[1].y, t[2].y, t[3].y);
  rows[2] = make_float4(t[0].z, t[1].z, t[2].z, t[3].z), rows[3] = make_float4(t[0].w, t[1].w, t[2].w, t[3].w);
}

// An MN-major Q stage, as TMA wrote it ([32 k][32 q] boxes with the 128-byte swizzle, as an MN-major R),
// transposed in place into the K-major [BQ q][32 k] tile wgmma reads: box j becomes rows 32 j .. 32 j + 31,
// the same 4 KiB. TMA cannot transpose; copying with 4-byte cp.async (as copy_box_transposed does for
// operands TMA cannot address) takes 8 times the instructions of TMA's boxes. Transposing warp `copier`
// (of kCopiers) takes boxes copier, copier + kCopiers, ...; a lane holds two 4 x 4 blocks (kb, qb) of a
// box in registers, reads their 4 k rows and writes their 4 q rows with 16-byte accesses. The blocks of
// lanes 8 p' .. 8 p' + 7 (a quarter warp, one shared-memory wavefront) lie on the diagonal kb = i, qb = i
// + p (p = 4 round + p'), whose swizzled chunks differ in every row read and written: no bank conflicts.
// 3xTF32 (kSplit = 3) also writes the small part of the transposed tile to `small`.
template <int BQ, int kCopiers, int kSplit>
__device__ __forceinline__ void transpose_q_stage(uint8_t* q, uint8_t* small, int copier) {
  const int lane = threadIdx.x % 32, kb = lane % 8;
  for (int box = copier; box < BQ / 32; box += kCopiers) {
    uint8_t* base = q + box * 4096;
    float4 v[2][4];
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      const int qb = (kb + 4 * round + lane / 8) % 8;
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int k = 4 * kb + r;
        v[round][r] = *reinterpret_cast<const float4*>(base + k * 128 + ((qb ^ (k % 8)) * 16));
      }
    }
    __syncwarp();  // every lane's reads of the box before any lane's writes over it
#pragma unroll
    for (int round = 0; round < 2; ++round) {
      const int qb = (kb + 4 * round + lane / 8) % 8;
      float4 rows[4];
      transpose_4x4(v[round], rows);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int row = 4 * qb + c, at = box * 4096 + row * 128 + ((kb ^ (row % 8)) * 16);
        st_shared_v4(smem_addr(q) + at, rows[c]);  // not split into 4-byte stores (sm90_ptx.cuh)
        if constexpr (kSplit == 3) st_shared_v4(smem_addr(small) + at, small_part(rows[c]));
      }
    }
    __syncwarp();  // the warp leaves each box together (the next box is other memory)
  }
}

// The same in-place transposition for 1xTF32, shared by the 8 consumer warps (kConsumersTranspose): in
// units of half a box, whose blocks lie on the four diagonals p = qb - kb of {0, 4, 1, 7} or {2, 6, 3, 5}.
// Each set holds every block's transpose (diagonal p's blocks land on 8 - p's), so a warp's __syncwarp
// still orders every read of the half before any write over it. Quarter warp p' takes the set's p'-th
// diagonal, one block a lane: as conflict-free as above. `warp` counts from 0 among kWarps.
template <int BQ, int kWarps>
__device__ __forceinline__ void transpose_q_halves(uint8_t* q, int warp) {
  const int lane = threadIdx.x % 32, kb = lane % 8, quarter = lane / 8;
  for (int half = warp; half < BQ / 16; half += kWarps) {
    uint8_t* base = q + (half / 2) * 4096;
    const int p = ((half % 2 ? 0x5362 : 0x7140) >> (4 * quarter)) & 7;  // nibble p' of the set
    const int qb = (kb + p) % 8;
    float4 t[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int k = 4 * kb + r;
      t[r] = *reinterpret_cast<const float4*>(base + k * 128 + ((qb ^ (k % 8)) * 16));
    }
    __syncwarp();  // every lane's reads of the half before any lane's writes over it
    float4 rows[4];
    transpose_4x4(t, rows);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int row = 4 * qb + c;
      st_shared_v4(smem_addr(base) + row * 128 + ((kb ^ (row % 8)) * 16), rows[c]);
    }
    __syncwarp();  // the warp leaves each half together (with fewer warps than halves, on to another box)
  }
}

// A K-major Q tile's small part (3xTF32), the blocks of 8 rows first, first + step, ... of it (those the
// warp copied): one float a lane.
template <int kRows>
__device__ __forceinline__ void write_small_rows(const uint8_t* q, uint8_t* small, int first, int step, int lane) {
  for (int r = 8 * first; r < kRows; r += (r % 8 == 7 ? 8 * step - 7 : 1)) {
    const int at = r * 128 + lane * 4;
    *reinterpret_cast<float*>(small + at) = small_part(*reinterpret_cast<const float*>(q + at));
  }
}

// kCopies: the variant whose producer warps 1-3 (0-3 with both operands copied) copy the operands TMA cannot
// address (shape.copy_r / copy_q); the others take the plain Tf32Shape and compile as they did before copies
// existed (a shared build of both measured 3.7% slower on the aligned TF32 grid cases).
// kPingPong: the consumer warpgroups take the block's tiles in turn, each a whole 128 x 128 tile, so that
// one's epilogue runs while the other's products do (as cuBLAS's TF32 kernels for NT run; NOTES, N1q). NT
// only (R K-major and read by wgmma from shared memory): bmm's pick where its plan costs it cheaper
// (bmm/hopper_tf32.cu), or by name ("hopper-128 ping-pong").
template <int kSplit, int BQ, bool kRKMajor, bool kSwap, bool kQMnMajor, bool kCopies, bool kPingPong = false>
__global__ void __launch_bounds__(Tf32Config<kSplit, BQ>::kThreads, 1)
hopper_tf32_kernel(const __grid_constant__ CUtensorMap map_r, const __grid_constant__ CUtensorMap map_q,
                   const __grid_constant__ CUtensorMap map_c, float* __restrict__ c,
                   const Tf32ShapeOf<kCopies> shape) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using Cfg = Tf32Config<kSplit, BQ, kPingPong>;
  constexpr int BP = Cfg::BP, BK = Cfg::BK, kStages = Cfg::kStages;
  static_assert(!kQMnMajor || (!kRKMajor && !kSwap), "an MN-major Q pairs with an MN-major R");
  static_assert(!kPingPong || (kRKMajor && !kSwap && !kQMnMajor && !kCopies), "ping-pong consumers: NT only");
  static_assert(Cfg::kSplitters / 32 == (kSplit == 3 ? Cfg::kTransposers : 0), "both are warps 1-3");
  // 1xTF32's 128-wide MN-major Q tiles are transposed by the 8 consumer warps, one half box each, between
  // issuing one k-block's products and waiting for the previous ones (transpose_q_halves). With three
  // producer warps transposing the 4 KiB boxes one after another, TN at 128 columns took 1.3-1.75x TT's
  // time on the H200 (1.1-1.5x this way; attention's 96-384 x 1024-2048 x 128 3-15% faster). At 64 and 256
  // columns the consumers' share cost more than it saved (up to 10% slower at 16384 x 4096 x 12288; NOTES,
  // TF32 section), and 3xTF32 (which also writes the small part) and the copied variants (whose copiers
  // transpose as they copy) keep the producer's transposition.
  constexpr bool kConsumersTranspose = kQMnMajor && kSplit == 1 && !kCopies && BQ == 128;
  // The producer's transposers hold two 4 x 4 blocks (208 bytes spilled at 40 registers); 128 x 32 more
  // registers for the producer are 256 x 16 fewer for the consumers.
  constexpr bool kProducerTransposes = kQMnMajor && !kConsumersTranspose;
  // The copiers too: at 40 registers their copy loops spilled 76 bytes (local loads and stores queued
  // behind the cp.asyncs on the LSU, every stage) and reused one register for each cp.async's shared
  // address, so the next instruction waited for the copy to read it. At 72 (as the transposing copiers
  // had already) the copied NN / NT / TT rows ran 12-36% faster on the H200 (NOTES, N1b).
  constexpr bool kWideProducer = kProducerTransposes || kCopies;
  constexpr int kProducerRegisters = kWideProducer ? 72 : 40;
  constexpr int kConsumerRegisters = kWideProducer ? 216 : 232;
  // A K-major R in 1xTF32 is read by wgmma from shared memory as Q is (both operands through descriptors):
  // the consumers issue no loads, and R's floats are truncated to TF32 as Q's are, not rounded. 3xTF32
  // still needs R's small part, which only the register path computes.
  constexpr bool kRShared = kRKMajor && kSplit == 1;

  extern __shared__ uint8_t smem_raw[];
  // Rounded up to 1024 bytes (the swizzle's period) by pointer arithmetic, not through an integer, so
  // the compiler still knows these are shared-memory addresses (ld.shared, not generic loads).
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  uint8_t* c_stage = smem + kStages * Cfg::kStageBytes;                               // output chunks
  uint64_t* full = reinterpret_cast<uint64_t*>(c_stage + Cfg::kCBytes);   // TMA's and copies landed
  uint64_t* ready = full + kStages;                    // small part written, or an MN-major Q transposed
  uint64_t* empty = ready + kStages;                                               // stage consumed
  uint64_t* order = empty + kStages;  // kPingPong: order[w], consumer w may start its next tile's products
  auto stage_r = [&](int s) { return smem + s * Cfg::kStageBytes; };
  auto stage_q = [&](int s) { return smem + s * Cfg::kStageBytes + Cfg::kRBytes; };
  auto stage_small = [&](int s) { return smem + s * Cfg::kStageBytes + Cfg::kRBytes + Cfg::kQBytes; };

  const int warpgroup = threadIdx.x / 128;
  // With both operands copied TMA loads nothing, so warp 0 copies too: four copier warps, not three (the
  // copy-bound rows, 4 x 386 x 2153 x 715 in every layout, took 0.70-0.76x of three warps' time on the
  // H200; NOTES, N1b).
  bool both_copied = false;
  if constexpr (kCopies) both_copied = shape.copy_r.base != nullptr && shape.copy_q.base != nullptr;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      // With copied operands, `full` also waits for the copiers (one arrival per warp), so the consumers
      // wait as they do without them: thread 0's TMA arrival and three copiers, or four copiers.
      mbarrier_init(&full[s], kCopies ? 1 + Cfg::kTransposers : 1);
      // unused by TF32 with a K-major Q; the 8 consumer warps where they transpose; else one arrival per
      // copying or transposing warp (thread 0 never arrives here, so warp 0 counts only as a copier)
      mbarrier_init(&ready[s], kConsumersTranspose ? 4 * Cfg::kConsumers : Cfg::kTransposers + (both_copied ? 1 : 0));
      mbarrier_init(&empty[s], kPingPong ? 1 : Cfg::kConsumers);  // ping-pong: one consumer a stage
    }
    for (int i = 0; i < Cfg::kOrderBarriers; ++i) mbarrier_init(&order[i], 4);  // one arrival per warp
    mbarrier_init_fence();
  }
  __syncthreads();

  const int64_t k_blocks = shape.k_blocks;
  const int64_t total_tiles = shape.batch * shape.splits * shape.tiles_p * shape.tiles_q;

  if (warpgroup == 0) {  // ------------------------------------------------------------- producer
    registers_decrease<kProducerRegisters>();
    if constexpr (kCopies) {
      // Copiers: warps 1-3 (0-3 with both copied) fill the copied operands' tiles of each stage; once a
      // stage's copies have landed (two stages later), each warp writes the small part of its Q rows
      // (3xTF32) and arrives on `full` (and on `ready`, which the consumers also wait for with an MN-major
      // Q or 3xTF32). Q comes copied whenever it needs work after landing (the host copies it along with
      // a copied R), so a warp only reads its own copies and never waits for TMA's. The warp count is a
      // template constant: as a runtime step, the MN-major Q's copy loop spilled at 72 registers.
      auto copy_operands = [&](auto copier_count) {
        constexpr int copiers = decltype(copier_count)::value;  // the producer warpgroup's last `copiers` warps
        const int copier = threadIdx.x / 32 - (4 - copiers), lane = threadIdx.x % 32;
        const bool r_copied = shape.copy_r.base != nullptr, q_copied = shape.copy_q.base != nullptr;
        copy_stages<kStages, BK, 2>(empty, total_tiles, shape.tiles_p, shape.tiles_q, k_blocks,
                                    [&](int s, const TileCoord& tc, int k_in_split) {
          // 32-bit: tc.batch < 2^31 (a batch under 2^31, or under 2^24 partials when K splits), and the
          // 64-bit division's registers would spill in the producer's share.
          const int split = int(tc.batch) / int(shape.batch), b = int(tc.batch) - split * int(shape.batch);
          const int64_t k0 = split * k_blocks * BK + k_in_split;
          if (r_copied)
            copy_tile_rows<BP>(stage_r(s), shape.copy_r, !kRKMajor, shape.r_broadcast ? 0 : b, int64_t(tc.tm) * BP, k0,
                               copier, copiers, lane);
          if (q_copied) {
            const int64_t q0 = int64_t(tc.tn) * BQ, bq = shape.q_broadcast ? 0 : b;
            if constexpr (kQMnMajor) {
              const bool inside = k0 + 32 <= shape.copy_q.outer && q0 + BQ <= shape.copy_q.inner;
              for (int box = copier; box < BQ / 32; box += copiers) {
                if (inside) copy_box_transposed<false>(stage_q(s), shape.copy_q, bq, q0, k0, box, lane);
                else copy_box_transposed<true>(stage_q(s), shape.copy_q, bq, q0, k0, box, lane);
              }
            } else {
              copy_tile_rows<BQ>(stage_q(s), shape.copy_q, false, bq, q0, k0, copier, copiers, lane);
            }
          }
        }, [&](int s) {
          __syncwarp();  // the warp's copies (each lane waited for its own) before any lane reads them
          if constexpr (kSplit == 3) {  // Q is K-major in shared memory either way
            if constexpr (kQMnMajor) {
              for (int box = copier; box < BQ / 32; box += copiers)
                write_small_rows<32>(stage_q(s) + box * 4096, stage_small(s) + box * 4096, 0, 1, lane);
            } else {
              write_small_rows<BQ>(stage_q(s), stage_small(s), copier, copiers, lane);
            }
          }
          fence_async_shared();  // wgmma reads Q (and, with kRShared, R) through the async proxy
          __syncwarp();
          if (lane == 0) {
            mbarrier_arrive(&full[s]);
            if constexpr (kQMnMajor || kSplit == 3) mbarrier_arrive(&ready[s]);
          }
        });
      };
      if (both_copied) {
        copy_operands(std::integral_constant<int, Cfg::kTransposers + 1>{});
        return;
      }
      if (threadIdx.x >= 32) {
        copy_operands(std::integral_constant<int, Cfg::kTransposers>{});
        return;
      }
    }
    if (threadIdx.x >= 32) {  // 3xTF32's splitters and transposers (MN-major Q): one arrival per warp and stage
      if constexpr (kProducerTransposes || kSplit == 3) {
        on_landed_stages<kStages>(full, total_tiles, k_blocks, [&](int s) {
          if constexpr (kQMnMajor)
            transpose_q_stage<BQ, Cfg::kTransposers, kSplit>(stage_q(s), stage_small(s), threadIdx.x / 32 - 1);
          else
            write_small_part<Cfg::kQBytes, Cfg::kSplitters>(stage_q(s), stage_small(s), threadIdx.x - 32);
          fence_async_shared();  // wgmma reads the tile through the async proxy
          __syncwarp();
          if (threadIdx.x % 32 == 0) mbarrier_arrive(&ready[s]);
        });
      }
      return;
    }
    if (threadIdx.x != 0) return;
    // TMA loads the operands that are not copied (with both copied, an arrival alone each stage).
    bool load_r = true, load_q = true;
    if constexpr (kCopies) load_r = shape.copy_r.base == nullptr, load_q = shape.copy_q.base == nullptr;
    if (load_r) tma_prefetch_descriptor(&map_r);
    if (load_q) tma_prefetch_descriptor(&map_q);
    const uint32_t bytes = (load_r ? Cfg::kRBytes : 0) + (load_q ? Cfg::kQBytes : 0);
    const uint32_t stages_at = smem_addr(smem), full_at = smem_addr(full);
    produce_stages<kStages, BK>(full_at, smem_addr(empty), bytes, total_tiles, shape.tiles_p, shape.tiles_q, k_blocks,
                                [&](const TileCoord& tc) {
      const int split = int(tc.batch / shape.batch), b = int(tc.batch - split * shape.batch);
      const int br = shape.r_broadcast ? 0 : b, bq = shape.q_broadcast ? 0 : b;
      const int k_first = int(split * k_blocks * BK);
      const int p0 = tc.tm * BP, q0 = tc.tn * BQ;
      return [=, &map_r, &map_q](int s, int k_in_split) {
        const int k0 = k_first + k_in_split;
        const uint32_t r_at = stages_at + s * Cfg::kStageBytes, q_at = r_at + Cfg::kRBytes, bar = full_at + 8 * s;
        if (load_r) {
          if constexpr (kRKMajor) {
            tma_load_3d(r_at, &map_r, bar, k0, p0, br);
          } else {  // boxes of [32 k][32 p]
            for (int j = 0; j < BP / 32; ++j) tma_load_3d(r_at + j * 32 * 128, &map_r, bar, p0 + 32 * j, k0, br);
          }
        }
        if (load_q) {
          if constexpr (kQMnMajor) {  // boxes of [32 k][32 q], transposed once landed
            for (int j = 0; j < BQ / 32; ++j) tma_load_3d(q_at + j * 32 * 128, &map_q, bar, q0 + 32 * j, k0, bq);
          } else {
            tma_load_3d(q_at, &map_q, bar, k0, q0, bq);
          }
        }
      };
    });
    return;
  }

  // ---------------------------------------------------------------------------------- consumers
  registers_increase<kConsumerRegisters>();
  const int w = warpgroup - 1;  // which 64-row half of the R tile (ping-pong: which of the block's tiles)
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  const int row0 = 64 * w + fragment_row<kRKMajor>(warp, lane, 0);
  const int row1 = 64 * w + fragment_row<kRKMajor>(warp, lane, 1);
  constexpr uint32_t kGroup = 1024;  // bytes between 8-row groups of the K-major Q tile
  StageRing<kStages> ring;
  float acc[kPingPong ? BQ : BQ / 2];  // a 64-row half of the tile; ping-pong, both halves
  float part[kSplit == 3 ? BQ / 2 : 1];
  uint32_t big[kRShared ? 1 : 2][4][4], small[4][4];  // big: R through registers only; small: 3xTF32 only

  // One k-block: wait for its stage (a 128-wide MN-major 1xTF32 Q: transpose this warp's share of it and
  // wait for the others'), read the R fragments (unless wgmma reads R from shared memory, kRShared), issue
  // its wgmmas. TF32 leaves them in flight (fragment set `f` stays untouched until the next block's wait);
  // 3xTF32 waits for them and folds the block's sum into `acc`. Returns the stage to free once its
  // products are done.
  auto k_block = [&](auto f_index) {
    constexpr int f = decltype(f_index)::value;
    mbarrier_wait(&full[ring.s], ring.phase);
    if constexpr (kConsumersTranspose) {  // this warp's share; the previous block's products run meanwhile
      transpose_q_halves<BQ, 4 * Cfg::kConsumers>(stage_q(ring.s), 4 * w + warp);
      fence_async_shared();  // wgmma reads the tile through the async proxy
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&ready[ring.s]);
    }
    if constexpr (kSplit == 3 || kQMnMajor) mbarrier_wait(&ready[ring.s], ring.phase);
    if constexpr (!kRShared) load_fragments<kSplit, kRKMajor>(stage_r(ring.s), row0, row1, lane % 4, big[f], small);
    const uint8_t* q = stage_q(ring.s);
    const uint8_t* r = stage_r(ring.s) + w * 64 * 128;  // this warpgroup's 64 K-major rows
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 8; ++kk) {
      const uint64_t dq = smem_descriptor(q + kk * 32, 0, kGroup);  // 8 k = 32 bytes along the row
      if constexpr (kRShared) {
        wgmma_tf32<BQ>(acc, smem_descriptor(r + kk * 32, 0, kGroup), dq, 1);
      } else if constexpr (kSplit == 1) {
        wgmma_tf32<BQ>(acc, big[f][kk], dq, 1);
      } else {
        const uint64_t dq_small = smem_descriptor(stage_small(ring.s) + kk * 32, 0, kGroup);
        wgmma_tf32<BQ>(part, big[f][kk], dq, kk == 0 ? 0 : 1);
        wgmma_tf32<BQ>(part, small[kk], dq, 1);
        wgmma_tf32<BQ>(part, big[f][kk], dq_small, 1);
      }
    }
    wgmma_commit();
    const int done = ring.s;
    ring.advance();
    return done;
  };

  // One thread frees a stage for its warpgroup, after the warpgroup's wgmma wait, which every thread's
  // R reads of the stage precede (they feed those wgmmas; with kRShared the wgmmas read R themselves,
  // and there are none), as does the consumers' transposition of Q
  // (through its arrivals on `ready`, which that thread waited for before issuing them). Where the copiers
  // refill stages (cp.async: other threads' ordinary writes, not TMA's), the warpgroup also meets at a
  // named barrier first, so that every thread's reads are ordered before the release by a barrier, not by
  // wgmma's data flow.
  // (compute-sanitizer's racecheck reports these stages' cp.async writes against load_fragments' reads
  // with or without it, 168 and 176 hazards with all results right: it does not follow the mbarrier
  // hand-offs between warps, as tools/probes/racecheck_mbarrier.cu shows on a ring that is correct by
  // construction; the TMA-fed variants never show it since it does not see TMA's writes.)
  auto release = [&](int stage) {
    if constexpr (kCopies) named_barrier(1 + w, 128);
    if (threadIdx.x % 128 == 0) mbarrier_arrive(&empty[stage]);
  };

  if constexpr (kPingPong) {
    // Consumer w computes the block's tiles j (t = blockIdx.x + j * gridDim.x) with j % 2 == w, all 128 rows:
    // per 8 k two m64n128k8, rows 0-63 into acc[0, 64) and rows 64-127 into acc[64, 128). The producer fills
    // the ring in the walk's order, so each consumer skips the other's k_blocks stages. `order` passes the
    // tensor cores between them: w waits on order[w] before its tile's first k-block, and the other arrives
    // on it once it has issued its own tile's last. Beyond the schedule, this keeps the parity waits sound:
    // the fill a consumer waits for follows one that the other consumer (or it) has already waited for, so
    // the stage's barrier is never two phases behind (where a parity wait would pass on an old fill).
    constexpr int kAcc = BQ;
    uint32_t order_phase = w == 0 ? 1 : 0;  // a fresh barrier passes a parity-1 wait: consumer 0 goes first
    if (w == 1) ring.skip(k_blocks);
    for (int64_t t = blockIdx.x + w * int64_t(gridDim.x); t < total_tiles; t += 2 * int64_t(gridDim.x)) {
      const TileCoord tc = tile_coord(t, shape.tiles_p, shape.tiles_q);
#pragma unroll
      for (int i = 0; i < kAcc; ++i) acc[i] = 0.f;
      fence_registers(acc, kAcc);
      mbarrier_wait(&order[w], order_phase);
      order_phase ^= 1;
      int previous = -1;
      for (int64_t kb = 0; kb < k_blocks; ++kb) {
        mbarrier_wait(&full[ring.s], ring.phase);
        const uint8_t* q = stage_q(ring.s);
        const uint8_t* r = stage_r(ring.s);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 8; ++kk) {
          const uint64_t dq = smem_descriptor(q + kk * 32, 0, kGroup);
#pragma unroll
          for (int half = 0; half < 2; ++half)
            wgmma_tf32<BQ>(acc + half * (BQ / 2), smem_descriptor(r + half * 64 * 128 + kk * 32, 0, kGroup), dq, 1);
        }
        wgmma_commit();
        const int done = ring.s;
        ring.advance();
        if (kb + 1 == k_blocks) {  // the other consumer's products queue behind these (k_blocks >= 1: K > 0)
          __syncwarp();
          if (lane == 0) mbarrier_arrive(&order[1 - w]);
        }
        wgmma_wait<1>();
        fence_registers(acc, kAcc);
        if (previous >= 0) release(previous);
        previous = done;
      }
      wgmma_wait<0>();
      fence_registers(acc, kAcc);
      if (previous >= 0) release(previous);
      ring.skip(k_blocks);  // the other consumer's next tile
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        if (shape.tma_store) {
          store_tf32_tile_tma<BQ, kRKMajor, kSwap>(acc + half * (BQ / 2), c_stage + w * 2 * Cfg::kChunkBytes, &map_c,
                                                   shape, tc, half, w);
        } else {
          store_tf32_tile<BQ, kRKMajor, kSwap>(acc + half * (BQ / 2), c, shape, tc, half);
        }
      }
    }
  } else {
    for (int64_t t = blockIdx.x; t < total_tiles; t += gridDim.x) {
      const TileCoord tc = tile_coord(t, shape.tiles_p, shape.tiles_q);
#pragma unroll
      for (int i = 0; i < BQ / 2; ++i) acc[i] = 0.f;
      fence_registers(acc, BQ / 2);

      if constexpr (kSplit == 1) {
        // Two fragment sets alternate, so block kb + 1's loads need not wait for block kb's products (with
        // kRShared there are no loads: block kb + 1's wgmmas are issued while block kb's run all the same).
        int previous = -1;
        auto retire = [&](int done) {
          wgmma_wait<1>();
          fence_registers(acc, BQ / 2);
          if (previous >= 0) release(previous);
          previous = done;
        };
        int64_t kb = 0;
        for (; kb + 1 < k_blocks; kb += 2) {
          retire(k_block(std::integral_constant<int, 0>{}));
          retire(k_block(std::integral_constant<int, 1>{}));
        }
        if (kb < k_blocks) retire(k_block(std::integral_constant<int, 0>{}));
        wgmma_wait<0>();
        fence_registers(acc, BQ / 2);
        if (previous >= 0) release(previous);
      } else {
        for (int64_t kb = 0; kb < k_blocks; ++kb) {
          const int done = k_block(std::integral_constant<int, 0>{});
          wgmma_wait<0>();
          fence_registers(part, BQ / 2);
          release(done);
#pragma unroll
          for (int i = 0; i < BQ / 2; ++i) acc[i] += part[i];
        }
      }
      if (shape.tma_store) {
        store_tf32_tile_tma<BQ, kRKMajor, kSwap>(acc, c_stage + w * 2 * Cfg::kChunkBytes, &map_c, shape, tc, w, w);
      } else {
        store_tf32_tile<BQ, kRKMajor, kSwap>(acc, c, shape, tc, w);
      }
    }
  }
  if (shape.tma_store && threadIdx.x % 128 == 0) bulk_wait_read<0>();  // as hopper_kernel.cuh's end
#endif
}


}  // namespace tiles::cuda::hopper
