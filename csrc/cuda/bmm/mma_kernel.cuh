// The mma.sync bmm kernel (sm_80 and newer), generic over the tensor-core instruction (bmm/mma_atoms.cuh).
//
// A block computes a BM x BN tile of one output matrix; its warps each a WM x WN part of it, as a grid
// of atoms whose fragments stay in registers. Operand tiles BM x BK (a) and BK x BN (b) stream through
// a ring of kStages shared-memory buffers filled by cp.async (zero-filled past the matrix edges), so
// the loads of the next tiles overlap the multiplies of this one; one barrier per k-tile. The copies
// are kCopyBytes wide: 16 where both operands' bases and strides allow, else 8 or 4 (a K or N that is
// not a multiple of 8, a sliced view). 16-bit operands with an odd stride or base (kCopyBytes = 2) go
// through registers: each thread loads the aligned 16-byte blocks around its chunks of the next tile
// before the multiplies of this one, and shifts them into place and stores them after, so those loads'
// latency still hides behind the tensor cores (TileCopy).
// Tiles keep each operand's own major order (kMnA: a is M-contiguous, i.e. a.transpose(1, 2);
// kMnB: b is N-contiguous, i.e. row-major), so no operand is ever copied or transposed; the atom's
// fragment loads read either order (16-bit atoms with ldmatrix, transposing where the tile is
// M/N-contiguous), and the row padding (the atom's kPadK / kPadMN) keeps them free of bank conflicts.
// Output tiles go from the accumulators straight to the contiguous output.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/bmm/cp_async.cuh"
#include "cuda/bmm/mma_atoms.cuh"
#include "cuda/bmm/output_pairs.cuh"
#include "cuda/bmm/tile_order.cuh"

namespace tiles::cuda::mma {

template <class Elem>
struct Params {
  const Elem* a;
  const Elem* b;
  void* c;                    // [batch][m][n], contiguous, of the atom's output type; with split-K
                              // [splits * batch][m][n] of its accumulator type (the partials)
  int64_t batch, m, n, k;
  int64_t a_batch, a_ld;      // a's batch stride (0: broadcast) and the stride of its non-unit dim
  int64_t b_batch, b_ld;
  int tiles_m, tiles_n;
  // Split-K: slices of k_split of K (a multiple of the k-tile), each written to its own output matrices
  // c[split][batch][m][n] (in the accumulator type) and summed afterwards.
  int splits = 1;
  int64_t k_split = 0;
};

// kMinBlocks: blocks per multiprocessor the register allocation must allow (__launch_bounds__).
template <int BM_, int BN_, int BK_, int WM_, int WN_, int kStages_, int kMinBlocks_ = 1>
struct Config {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_, kStages = kStages_;
  static constexpr int kMinBlocks = kMinBlocks_;
  static constexpr int kWarpsN = BN / WN;
  static constexpr int kThreads = (BM / WM) * kWarpsN * 32;
};

enum class TileSize { large, small };

// Block and warp tiles per atom and size (bmm/mma.cu tile_size picks one). Large: 128 x 128 blocks of
// eight 64 x 32 warps (64 accumulators each) for TF32 and 16-bit, one block per SM (180-220 registers).
// Small: 64 x 64 blocks of four 32 x 32 warps, three per SM on sm_90 (at most 168 registers, 40-55 KB
// of shared memory; at four, 128 registers, the 16-bit ones with 4- and 8-byte copies spilled 8-32
// bytes; sm_80 / sm_86 / sm_89 fit fewer and take large tiles). One large block per SM is bound by its warps' latency
// (ncu, 1 x 474 x 138 x 202 bf16: 8 blocks, 2 warps per scheduler, an instruction issued every 7.9
// cycles, ~1 us per k-tile with 16-byte copies as with 4-byte ones), so small tiles run faster except on
// grids of many waves. (fp64 runs its own kernel: bmm/dmma_kernel.cuh.)
template <class Atom, TileSize kSize>
struct ConfigFor {
  using type = std::conditional_t<kSize == TileSize::large, Config<128, 128, 32, 64, 32, 4>,
                                  Config<64, 64, 32, 32, 32, 4, 3>>;
};
template <TileSize kSize>
struct ConfigFor<Tf32, kSize> {
  using type = std::conditional_t<kSize == TileSize::large, Config<128, 128, 16, 64, 32, 4>,
                                  Config<64, 64, 16, 32, 32, 4, 3>>;
};
// 3xTF32 holds a second set of accumulators (kFreshPerTile): 32 x 32 warps keep that in registers;
// 32-deep k-tiles halve how often the fresh sums are folded in.
template <TileSize kSize>
struct ConfigFor<Tf32x3, kSize> {
  using type = std::conditional_t<kSize == TileSize::large, Config<128, 64, 32, 32, 32, 3>,
                                  Config<64, 64, 32, 32, 32, 3, 3>>;
};

// One operand tile in shared memory: `rows` x BK (K-contiguous) or BK x `rows` (M/N-contiguous),
// each row padded.
template <class Atom, int kRows, int BK, bool kMn_>
struct Tile {
  using Elem = typename Atom::Elem;
  static constexpr bool kMn = kMn_;
  static constexpr int kLd = kMn ? kRows + Atom::kPadMN : BK + Atom::kPadK;  // elements per smem row
  static constexpr int kElems = (kMn ? BK : kRows) * kLd;
  // Shared-memory rows (kOuter) of kInner elements, the inner dim contiguous in global memory too.
  static constexpr int kOuter = kMn ? BK : kRows, kInner = kMn ? kRows : BK;
  static constexpr int kTileRows = kRows, kDepth = BK;  // along M (or N), along K
  // The element at (r, k): r along M (or N), k along K.
  __device__ static Elem at(const Elem* s, int r, int k) { return kMn ? s[k * kLd + r] : s[r * kLd + k]; }
};

// Lane's fragments of the atom at (r0, k0) of a shared-memory tile: by the atom's own ldmatrix loads
// where it has them, else element by element.
template <class Atom, class TileT>
__device__ __forceinline__ typename Atom::FragA fragment_a(const typename Atom::Elem* s, int r0, int k0, int lane) {
  if constexpr (Atom::kLdmatrix) return Atom::template load_a_smem<TileT::kMn>(s, TileT::kLd, r0, k0, lane);
  else return Atom::load_a([&](int r, int k) { return TileT::at(s, r0 + r, k0 + k); }, lane);
}
template <class Atom, class TileT>
__device__ __forceinline__ typename Atom::FragB fragment_b(const typename Atom::Elem* s, int r0, int k0, int lane) {
  if constexpr (Atom::kLdmatrix) return Atom::template load_b_smem<TileT::kMn>(s, TileT::kLd, r0, k0, lane);
  else return Atom::load_b([&](int r, int k) { return TileT::at(s, r0 + r, k0 + k); }, lane);
}

// Block b's output tile (bmm/tile_order.cuh): its first row and column.
struct TileOrigin {
  int64_t m0, n0;
};
__device__ __forceinline__ TileOrigin grouped_tile_origin(int b, int tiles_m, int tiles_n, int bm, int bn) {
  const TilePos t = grouped_tile(b, tiles_m, tiles_n);
  return {int64_t(t.tm) * bm, int64_t(t.tn) * bn};
}

// `a` when kFirst, else `b`: the k-tile's accumulators, fresh or the running sum (a lambda returning
// either by reference drew nvcc's "returning reference to local variable").
template <bool kFirst, class A, class B>
__device__ __forceinline__ auto& first_if(A& a, B& b) {
  if constexpr (kFirst) return a;
  else return b;
}

// How one operand's tiles get from global to shared memory, in two steps around the multiplies of the
// previous tile: begin(s, kt, ...) starts the copy of k-tile kt into `s`, finish(s) completes it (then
// a barrier makes it visible). The cp.async copies are built per output tile and batch entry from `g`,
// the operand matrix's element (r0, 0) (r along M, or N), its stride `ld`, the rows left from r0 on and
// the depth K; the register loads take the operand with each begin().
//
// kCopyBytes of 4 or more: begin() issues cp.async copies of that width straight into shared memory,
// finish() has nothing left to do. A thread copies the same (row, chunk) of every tile, so its source
// advances by a constant per k-tile and per pass; which chunks lie inside the matrix is tested only in
// edge tiles and a last, partial k-tile (out-of-matrix chunks are zero-filled from a valid address).
template <class TileT, int kThreads, int kCopyBytes, bool kAsync = (kCopyBytes >= 4)>
struct TileCopy {
  using Elem = typename TileT::Elem;
  static constexpr bool kMn = TileT::kMn;
  static constexpr int kChunk = kCopyBytes / int(sizeof(Elem));  // elements per copy
  static constexpr int kChunksPerRow = TileT::kInner / kChunk, kRowsPerPass = kThreads / kChunksPerRow;
  static constexpr int kPasses = TileT::kOuter / kRowsPerPass;
  static_assert(kThreads % kChunksPerRow == 0 && TileT::kOuter % kRowsPerPass == 0, "passes must cover the tile");

  const Elem* origin;       // the matrix's element (r0, 0): a valid address for copies of nothing
  const Elem* src;          // this thread's pass-0 chunk of k-tile 0
  int64_t k_step, pass_step;  // elements from one k-tile's chunk to the next's, one pass's to the next's
  int64_t k;
  int full_tiles;           // k-tiles of kDepth whole k
  int row0, inner, at;      // this thread's shared-memory row in pass 0, its column, their offset
  int rows_left;            // rows (M or N) from r0 on, at most the tile's

  __device__ __forceinline__ TileCopy(const Elem* g, int64_t ld, int64_t r_left, int64_t k_)
      : origin(g), k(k_), full_tiles(int(k_ / TileT::kDepth)), row0(int(threadIdx.x) / kChunksPerRow),
        inner(int(threadIdx.x) % kChunksPerRow * kChunk) {
    src = g + row0 * ld + inner;  // K-major: (r0 + row0, inner); M/N-major: (r0 + inner, row0)
    k_step = kMn ? TileT::kDepth * ld : TileT::kDepth;
    pass_step = kRowsPerPass * ld;
    at = row0 * TileT::kLd + inner;
    rows_left = int(std::min<int64_t>(r_left, TileT::kTileRows));
  }

  __device__ __forceinline__ void begin(Elem* s, int kt, const Elem*, int64_t, int64_t, int64_t, int64_t) const {
    const Elem* from = src + kt * k_step;
    if (kt < full_tiles && rows_left == TileT::kTileRows) {  // every chunk whole
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass)
        cp_async<kCopyBytes>(s + at + pass * kRowsPerPass * TileT::kLd, from + pass * pass_step, kCopyBytes);
      return;
    }
    const int k_left = int(std::min<int64_t>(k - int64_t(kt) * TileT::kDepth, TileT::kDepth));
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int row = row0 + pass * kRowsPerPass;  // along K (M/N-major) or M / N (K-major)
      const int chunk = kChunk;  // by value: std::min takes references
      const int valid = kMn ? (row < k_left ? std::max(0, std::min(chunk, rows_left - inner)) : 0)
                            : (row < rows_left ? std::max(0, std::min(chunk, k_left - inner)) : 0);
      cp_async<kCopyBytes>(s + at + pass * kRowsPerPass * TileT::kLd, valid > 0 ? from + pass * pass_step : origin,
                           valid * int(sizeof(Elem)));
    }
  }
  __device__ __forceinline__ void finish(Elem*) const {}
};

// Narrower than 4 bytes (16-bit operands with an odd stride or base): realigning register loads. Each
// thread takes 16-byte chunks of the tile (a row's elements [inner, inner + 8) along the operand's
// contiguous dim); begin() loads the one or two aligned 16-byte blocks of global memory that hold a
// chunk, finish() shifts the chunk's elements out of them (funnel shifts by the base's skew), zeroes
// those past the matrix edges and stores it with one 16-byte st.shared. Element-by-element loads took
// eight 2-byte loads and stores per chunk and ran at 50-66 TFLOP/s (NOTES.md, mma.sync). A block is
// loaded only when it holds an element of the matrix, so no read leaves the operand's own 16-byte
// blocks (and pages). The loads go out before the multiplies of the current tile, the stores after.
template <class TileT, int kThreads, int kCopyBytes>
struct TileCopy<TileT, kThreads, kCopyBytes, false> {
  using Elem = typename TileT::Elem;
  static constexpr bool kMn = TileT::kMn;
  static constexpr int kChunk = 16 / int(sizeof(Elem));  // elements per chunk
  static constexpr int kChunksPerRow = TileT::kInner / kChunk;
  static constexpr int kPerThread = TileT::kOuter * kChunksPerRow / kThreads;
  static_assert(TileT::kInner % kChunk == 0 && TileT::kOuter * kChunksPerRow % kThreads == 0,
                "whole chunks, the same number per thread");
  uint4 lo[kPerThread], hi[kPerThread];  // the aligned blocks at and after each chunk's first element
  int skew_valid[kPerThread];            // bytes from lo's start to the chunk's, | elements inside << 8

  __device__ __forceinline__ TileCopy(const Elem*, int64_t, int64_t, int64_t) {}

  // The operand comes with every call (`g`: its matrix, r0: the tile's first row, from the kernel's
  // parameters), not held: members cost this register-bound path spills.
  __device__ __forceinline__ void begin(Elem*, int kt, const Elem* g, int64_t ld, int64_t r0, int64_t r_left,
                                        int64_t k) {
    const int64_t k0 = int64_t(kt) * TileT::kDepth, k_left = k - k0;
    const int64_t outer_left = kMn ? k_left : r_left, inner_left = kMn ? r_left : k_left;
    const Elem* origin = g + (kMn ? k0 : r0) * ld + (kMn ? r0 : k0);
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int id = j * kThreads + int(threadIdx.x);
      const int outer = id / kChunksPerRow, inner = id % kChunksPerRow * kChunk;
      const int valid = outer < outer_left ? int(std::max<int64_t>(0, std::min<int64_t>(kChunk, inner_left - inner))) : 0;
      const uintptr_t at = reinterpret_cast<uintptr_t>(origin + outer * ld + inner);
      const int skew = int(at % 16);
      const uint4* block = reinterpret_cast<const uint4*>(at - skew);
      lo[j] = valid > 0 ? __ldg(block) : make_uint4(0, 0, 0, 0);
      hi[j] = skew + valid * int(sizeof(Elem)) > 16 ? __ldg(block + 1) : make_uint4(0, 0, 0, 0);
      skew_valid[j] = skew | valid << 8;
    }
  }

  __device__ __forceinline__ void finish(Elem* s) const {
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int id = j * kThreads + int(threadIdx.x);
      const int outer = id / kChunksPerRow, inner = id % kChunksPerRow * kChunk;
      const int skew = skew_valid[j] & 0xff, valid = skew_valid[j] >> 8;
      const uint32_t w[8] = {lo[j].x, lo[j].y, lo[j].z, lo[j].w, hi[j].x, hi[j].y, hi[j].z, hi[j].w};
      // Words skew / 4 on, in two selects (by 2 words, then by 1), then the bytes skew % 4 on.
      uint32_t u[6], v[5], out[4];
#pragma unroll
      for (int i = 0; i < 6; ++i) u[i] = skew & 8 ? w[i + 2] : w[i];
#pragma unroll
      for (int i = 0; i < 5; ++i) v[i] = skew & 4 ? u[i + 1] : u[i];
#pragma unroll
      for (int t = 0; t < 4; ++t) {
        // The word's bits that hold elements inside the matrix; the others are zeroed.
        const int inside = 8 * (valid * int(sizeof(Elem)) - 4 * t);
        const uint32_t keep = inside >= 32 ? 0xffffffffu : inside <= 0 ? 0u : (1u << inside) - 1;
        out[t] = __funnelshift_r(v[t], v[t + 1], 8 * (skew % 4)) & keep;
      }
      *reinterpret_cast<uint4*>(s + outer * TileT::kLd + inner) = make_uint4(out[0], out[1], out[2], out[3]);
    }
  }
};

// kCopyA / kCopyB: each operand's copy width (TileCopy). They differ only where one 16-bit operand needs
// register loads (width 2) and the other allows 16-byte copies (an LM head's odd vocabulary beside an
// aligned activation), which then go straight into shared memory.
template <class Atom, class Cfg, bool kMnA, bool kMnB, int kCopyA, int kCopyB = kCopyA>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) bmm_kernel(Params<typename Atom::Elem> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // never launched: the host offers this path to sm_80 and newer only (bmm/mma.cu)
#else
  using Elem = typename Atom::Elem;
  using Acc = typename Atom::Acc;
  using TileA = Tile<Atom, Cfg::BM, Cfg::BK, kMnA>;
  using TileB = Tile<Atom, Cfg::BN, Cfg::BK, kMnB>;
  constexpr int kAtomsM = Cfg::WM / Atom::M, kAtomsN = Cfg::WN / Atom::N;
  constexpr int kStageElems = TileA::kElems + TileB::kElems;

  extern __shared__ __align__(16) unsigned char smem_raw[];
  Elem* smem = reinterpret_cast<Elem*>(smem_raw);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int wm0 = (warp / Cfg::kWarpsN) * Cfg::WM, wn0 = (warp % Cfg::kWarpsN) * Cfg::WN;

  const TileOrigin origin = grouped_tile_origin(blockIdx.x, p.tiles_m, p.tiles_n, Cfg::BM, Cfg::BN);
  const int64_t m0 = origin.m0, n0 = origin.n0;
  // z = split * batch + bi: output matrix z, from K's slice [k0, k0 + k) of batch entry bi. Without
  // split-K (splits 1) the slice is all of K and z is bi.
  for (int64_t z = blockIdx.y; z < p.batch * p.splits; z += gridDim.y) {
    const int64_t bi = z % p.batch, k0 = z / p.batch * p.k_split, k = std::min(p.k - k0, p.k_split);
    const int k_tiles = int((k + Cfg::BK - 1) / Cfg::BK);
    // Each operand matrix from its slice's first k (k_split is a multiple of BK: no alignment is lost).
    const Elem* a = p.a + bi * p.a_batch + (kMnA ? k0 * p.a_ld : k0);
    const Elem* b = p.b + bi * p.b_batch + (kMnB ? k0 * p.b_ld : k0);
    // From each operand matrix's element (m0, 0) / (n0, 0).
    TileCopy<TileA, Cfg::kThreads, kCopyA> copy_a(a + (kMnA ? m0 : m0 * p.a_ld), p.a_ld, p.m - m0, k);
    TileCopy<TileB, Cfg::kThreads, kCopyB> copy_b(b + (kMnB ? n0 : n0 * p.b_ld), p.b_ld, p.n - n0, k);
    auto stage = [&](int kt) { return smem + (kt % Cfg::kStages) * kStageElems; };
    auto begin_stage = [&](int kt) {
      copy_a.begin(stage(kt), kt, a, p.a_ld, m0, p.m - m0, k);
      copy_b.begin(stage(kt) + TileA::kElems, kt, b, p.b_ld, n0, p.n - n0, k);
    };
    auto finish_stage = [&](int kt) {
      copy_a.finish(stage(kt));
      copy_b.finish(stage(kt) + TileA::kElems);
    };

    Acc acc[kAtomsM][kAtomsN][Atom::kAcc] = {};
#pragma unroll
    for (int s = 0; s < Cfg::kStages - 1; ++s) {
      if (s < k_tiles) {
        begin_stage(s);
        finish_stage(s);
      }
      cp_async_commit();  // empty groups keep the count of pending groups uniform
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      cp_async_wait<Cfg::kStages - 2>();  // this thread's copies of tile kt have landed...
      __syncthreads();                    // ...and everyone's; tile kt - 1's buffer is free again
      const int next = kt + Cfg::kStages - 1;
      if (next < k_tiles) begin_stage(next);
      cp_async_commit();

      const Elem* sa = smem + (kt % Cfg::kStages) * kStageElems;
      const Elem* sb = sa + TileA::kElems;
      Acc fresh[Atom::kFreshPerTile ? kAtomsM : 1][Atom::kFreshPerTile ? kAtomsN : 1][Atom::kAcc] = {};
      auto& sum = first_if<Atom::kFreshPerTile>(fresh, acc);
#pragma unroll
      for (int kk = 0; kk < Cfg::BK; kk += Atom::K) {
        typename Atom::FragA fa[kAtomsM];
        typename Atom::FragB fb[kAtomsN];
#pragma unroll
        for (int i = 0; i < kAtomsM; ++i) fa[i] = fragment_a<Atom, TileA>(sa, wm0 + i * Atom::M, kk, lane);
#pragma unroll
        for (int j = 0; j < kAtomsN; ++j) fb[j] = fragment_b<Atom, TileB>(sb, wn0 + j * Atom::N, kk, lane);
#pragma unroll
        for (int i = 0; i < kAtomsM; ++i)
#pragma unroll
          for (int j = 0; j < kAtomsN; ++j) Atom::mma(sum[i][j], fa[i], fb[j]);
      }
      if constexpr (Atom::kFreshPerTile) {
#pragma unroll
        for (int i = 0; i < kAtomsM; ++i)
#pragma unroll
          for (int j = 0; j < kAtomsN; ++j)
#pragma unroll
            for (int e = 0; e < Atom::kAcc; ++e) acc[i][j][e] += fresh[i][j][e];
      }
      if (next < k_tiles) finish_stage(next);  // into tile kt - 1's buffer, free since the barrier
    }
    cp_async_wait<0>();
    __syncthreads();  // the next batch's first copies reuse the buffers

    // Lane's accumulators e = 2h and 2h + 1 of atom (i, j) are the neighbours (row, col) and (row, col + 1),
    // col even (M16N8Accumulator): one store of the pair where the row starts aligned to two outputs
    // (every row of an even N, every other one of an odd N such as an LM head's 50257), else one output
    // at a time. With split-K each slice writes its sums unrounded (Acc) to matrix z of the partials,
    // which the host sums in slice order afterwards (bmm/mma.cu); else the output, in its own type. Only
    // the pointer this launch writes through is formed: the other offset may lie past p.c's end.
    auto store_tile = [&](auto* out, auto convert) {
      using T = std::remove_pointer_t<decltype(out)>;
#pragma unroll
      for (int i = 0; i < kAtomsM; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t row = m0 + wm0 + i * Atom::M + Atom::c_row(lane, 2 * h);
          if (row >= p.m) continue;
          T* out_row = out + row * p.n;
          const bool pairs = pair_aligned(out_row);
#pragma unroll
          for (int j = 0; j < kAtomsN; ++j) {
            const int64_t col = n0 + wn0 + j * Atom::N + Atom::c_col(lane, 2 * h);
            const T x = convert(acc[i][j][2 * h]), y = convert(acc[i][j][2 * h + 1]);
            if (pairs && col + 1 < p.n) {
              store_pair(out_row + col, x, y);
            } else {
              if (col < p.n) out_row[col] = x;
              if (col + 1 < p.n) out_row[col + 1] = y;
            }
          }
        }
    };
    static_assert(Atom::kAcc == 4, "an M16N8Accumulator: two rows of two adjacent columns");
    if (p.splits > 1) store_tile(static_cast<Acc*>(p.c) + z * p.m * p.n, [](Acc x) { return x; });
    else store_tile(static_cast<decltype(Atom::out(Acc(0)))*>(p.c) + bi * p.m * p.n, [](Acc x) { return Atom::out(x); });
  }
#endif
}

// Dynamic shared memory of one instantiation: kStages buffers of an a tile and a b tile.
template <class Atom, class Cfg, bool kMnA, bool kMnB>
constexpr int kSmemBytes = Cfg::kStages *
                           (Tile<Atom, Cfg::BM, Cfg::BK, kMnA>::kElems + Tile<Atom, Cfg::BN, Cfg::BK, kMnB>::kElems) *
                           int(sizeof(typename Atom::Elem));

}  // namespace tiles::cuda::mma
