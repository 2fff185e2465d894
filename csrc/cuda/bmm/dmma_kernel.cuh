// The fp64 bmm kernel: DMMA (the F64 atom of bmm/mma_atoms.cuh: mma.sync m16n8k8 on sm_90), with
// the tile shape of cuBLAS's H100 DGEMM (64 x 64 x 16 blocks of four 32 x 32 warps, 4 stages, 3 blocks
// per SM) and an instruction stream about as lean as its.
//
// Why not the generic mma.sync kernel (bmm/mma_kernel.cuh): with 8-byte elements it executed 3x
// cuBLAS's instructions for the same DMMAs (64-bit address and bounds arithmetic per copy and per
// fragment element, register spills), and its warps stalled on those dependency chains instead of
// keeping the FP64 tensor pipe busy: 0.63x cuBLAS (benchmarks/NOTES.md, fp64 v3). Here
//  - each fragment element is one 8-byte ld.shared straight into the register the DMMA reads, at a
//    lane offset computed once per kernel plus a constant: the tiles are unpadded and XOR-swizzled
//    in 16-byte chunks (chunk ^ 2 (row % 4)), which keeps every read of a half warp (16 lanes x 8
//    bytes) on 16 distinct bank pairs in either major order, and keeps all rows of a lane's reads
//    on one swizzle;
//  - each thread's cp.async copies sit at fixed (row, chunk) positions of the tile, so outside edge
//    tiles and a partial last k-tile a k-tile's copy is a pointer step and four copies (eight of
//    8 bytes where the operands' strides or base are not 16-byte multiples: an odd K, N or M).
#pragma once

#include "cuda/bmm/mma_kernel.cuh"  // Params, cp.async, the tile order, the F64 atom
#include "cuda/bmm/output_pairs.cuh"

namespace tiles::cuda::dmma {

using mma::Params;

constexpr int BM = 64, BN = 64, BK = 16, kStages = 4, kThreads = 128, kMinBlocks = 3;
constexpr int WM = 32, WN = 32;                       // warp tile: 2 x 4 atoms of 16 x 8
constexpr int kTileElems = BM * BK;                   // one operand tile, either order (BM == BN)
constexpr int kSmemBytes = kStages * 2 * kTileElems * int(sizeof(double));

// An operand tile in shared memory keeps the operand's major order: K-major, 64 rows (m or n) of
// kLen = 16 k; MN-major, 16 rows (k) of kLen = 64 m or n. Offset of the element at (row, e).
template <int kLen>
__device__ __forceinline__ int element_offset(int row, int e) {
  return row * kLen + 2 * ((e / 2) ^ (2 * (row & 3))) + e % 2;
}
template <bool kMn>
constexpr int kRowLen = kMn ? BM : BK;

// Streams one operand's tiles into shared memory. Thread t copies the 16-byte chunks at (row0 + p *
// kRowsPerPass, chunk) of every tile, p < 4, in one cp.async each, or two of 8 bytes (kCopyBytes) when
// the operand is only 8-byte aligned; rows and k past the matrix edge are zero-filled. Which of them
// lie inside the matrix matters only in edge tiles and in a last, partial k-tile; all others copy whole
// chunks with no test.
template <bool kMn, int kCopyBytes>
struct TileLoader {
  static_assert(kCopyBytes == 16 || kCopyBytes == 8, "fp64 tiles are copied 16 or 8 bytes at a time");
  static constexpr int kChunksPerRow = kRowLen<kMn> / 2, kRowsPerPass = kThreads / kChunksPerRow;
  const double* origin;  // the tile's element (0, 0): a valid address for copies of nothing
  const double* src;     // the thread's pass-0 chunk of k-tile 0
  int64_t k_step;        // elements from one k-tile's chunk to the next's
  int64_t pass_step;     // elements from one pass's chunk to the next's
  int64_t k;             // the matrices' depth
  int full_tiles;        // k-tiles of BK whole k
  int row0, chunk, at;   // the thread's (row, chunk) in pass 0, and its offset in the tile
  int rows_left;         // rows (m or n) of the matrix from the tile's first on, at most BM

  // g: the operand matrix's element (r0, 0), r along M (or N); r_left: rows from r0 on.
  __device__ TileLoader(const double* g, int64_t ld, int64_t r_left, int64_t k_, int tid)
      : origin(g), k(k_), full_tiles(int(k_ / BK)), row0(tid / kChunksPerRow), chunk(tid % kChunksPerRow) {
    src = g + row0 * ld + 2 * chunk;
    k_step = kMn ? BK * ld : BK;
    pass_step = kRowsPerPass * ld;
    at = element_offset<kRowLen<kMn>>(row0, 2 * chunk);  // passes keep the swizzle: rows + 4p or 16p
    rows_left = int(std::min<int64_t>(r_left, BM));
  }

  // Elements of pass `pass`'s chunk inside the matrix (0, 1 or 2), `k_left` k being left from the
  // tile's first k on.
  __device__ __forceinline__ int elements(int pass, int k_left) const {
    const int row = row0 + pass * kRowsPerPass;
    if constexpr (kMn) return row < k_left ? std::max(0, std::min(2, rows_left - 2 * chunk)) : 0;
    else return row < rows_left ? std::max(0, std::min(2, k_left - 2 * chunk)) : 0;
  }

  // Copies the chunk at `from` to `to`, of which the first `elems` (0 to 2) lie inside the matrix.
  __device__ __forceinline__ void copy_chunk(double* to, const double* from, int elems) const {
    if constexpr (kCopyBytes == 16) {
      mma::cp_async<16>(to, elems > 0 ? from : origin, elems * 8);
    } else {
#pragma unroll
      for (int e = 0; e < 2; ++e) mma::cp_async<8>(to + e, elems > e ? from + e : origin, elems > e ? 8 : 0);
    }
  }

  __device__ __forceinline__ void load(double* s, int kt) const {
    const double* from = src + kt * k_step;
    if (kt < full_tiles && rows_left == BM) {  // every chunk whole: the copies of all tiles but edge ones
#pragma unroll
      for (int pass = 0; pass < 4; ++pass)
        copy_chunk(s + at + pass * kRowsPerPass * kRowLen<kMn>, from + pass * pass_step, 2);
      return;
    }
    const int k_left = int(std::min<int64_t>(k - int64_t(kt) * BK, BK));
#pragma unroll
    for (int pass = 0; pass < 4; ++pass)
      copy_chunk(s + at + pass * kRowsPerPass * kRowLen<kMn>, from + pass * pass_step, elements(pass, k_left));
  }
};

// Lane (g, q)'s fragment reads of one operand (bmm/mma_atoms.cuh: F64): A element (m g + 8h, k q + 4x)
// of m16 tile i; B element (k q + 4x, n g) of n8 tile j. Offsets in a stage's tile for the warp's
// rows (m or n) from w0 on: base(kk, x, y) plus a constant, where K-major tiles take rows + 8h + 16i
// (A) or + 8j (B) at the base's swizzle, and MN-major tiles take rows + kk + 4x at the base's swizzle
// and columns + 16i (A) or + 16 (j / 2) (B), y being h (A) or j % 2 (B).
template <bool kMn>
struct FragmentReads {
  int base[2][2];  // K-major: [kk / 8][x]; MN-major: [0][y]
  __device__ FragmentReads(int w0, int g, int q) {
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
      for (int b = 0; b < 2; ++b)
        base[a][b] = kMn ? element_offset<BM>(q, w0 + g + 8 * b) : element_offset<BK>(w0 + g, 8 * a + 4 * b + q);
  }
  // A: tile i's element (g + 8h, q + 4x) of k8 step kk.
  __device__ __forceinline__ int a(int kk, int i, int h, int x) const {
    return kMn ? base[0][h] + (kk + 4 * x) * BM + 16 * i : base[kk / 8][x] + (8 * h + 16 * i) * BK;
  }
  // B: tile j's element (q + 4x, g) of k8 step kk.
  __device__ __forceinline__ int b(int kk, int j, int x) const {
    return kMn ? base[0][j % 2] + (kk + 4 * x) * BN + 16 * (j / 2) : base[kk / 8][x] + 8 * j * BK;
  }
};

template <bool kMnA, bool kMnB, int kCopyBytes>
__global__ void __launch_bounds__(kThreads, kMinBlocks) dmma_bmm_kernel(Params<double> p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
  __trap();  // never launched: the host offers this path to sm_80 and newer only (bmm/mma.cu)
#else
  using Atom = mma::F64;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  double* smem = reinterpret_cast<double*>(smem_raw);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, q = lane % 4;
  const int wm0 = (warp / 2) * WM, wn0 = (warp % 2) * WN;

  const mma::TileOrigin origin = mma::grouped_tile_origin(blockIdx.x, p.tiles_m, p.tiles_n, BM, BN);
  const int64_t m0 = origin.m0, n0 = origin.n0;

  const FragmentReads<kMnA> reads_a(wm0, g, q);
  const FragmentReads<kMnB> reads_b(wn0, g, q);

  // z = split * batch + bi: output matrix z of c, from K's slice [k0, k0 + k_split) of batch entry bi.
  for (int64_t z = blockIdx.y; z < p.batch * p.splits; z += gridDim.y) {
    const int64_t bi = z % p.batch, k0 = z / p.batch * p.k_split, k = std::min(p.k - k0, p.k_split);
    const int k_tiles = int((k + BK - 1) / BK);
    const TileLoader<kMnA, kCopyBytes> load_a(
        p.a + bi * p.a_batch + (kMnA ? m0 + k0 * p.a_ld : m0 * p.a_ld + k0), p.a_ld, p.m - m0, k, tid);
    const TileLoader<kMnB, kCopyBytes> load_b(
        p.b + bi * p.b_batch + (kMnB ? n0 + k0 * p.b_ld : n0 * p.b_ld + k0), p.b_ld, p.n - n0, k, tid);
    auto load_stage = [&](int kt) {
      double* s = smem + (kt % kStages) * 2 * kTileElems;
      load_a.load(s, kt);
      load_b.load(s + kTileElems, kt);
    };

    double acc[2][4][4] = {};  // [m16 tile][n8 tile][F64 accumulator]
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < k_tiles) load_stage(s);
      mma::cp_async_commit();  // empty groups keep the count of pending groups uniform
    }
    for (int kt = 0; kt < k_tiles; ++kt) {
      mma::cp_async_wait<kStages - 2>();  // this thread's copies of tile kt have landed...
      __syncthreads();                    // ...and everyone's; tile kt - 1's buffer is free again
      const double* sa = smem + (kt % kStages) * 2 * kTileElems;
      const double* sb = sa + kTileElems;
#pragma unroll
      for (int kk = 0; kk < BK; kk += 8) {
        Atom::FragA fa[2];
        Atom::FragB fb[4];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int e = 0; e < 4; ++e) fa[i].v[e] = sa[reads_a.a(kk, i, e % 2, e / 2)];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
          for (int e = 0; e < 2; ++e) fb[j].v[e] = sb[reads_b.b(kk, j, e)];
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) Atom::mma(acc[i][j], fa[i], fb[j]);
      }
      // The next copies go out after this tile's fragment reads, so their address arithmetic does not
      // hold registers next to the fragments; three tiles are still in flight meanwhile.
      if (kt + kStages - 1 < k_tiles) load_stage(kt + kStages - 1);
      mma::cp_async_commit();
    }
    mma::cp_async_wait<0>();
    __syncthreads();  // the next batch's first copies reuse the buffers

    // Lane's outputs (M16N8Accumulator): tile (i, j)'s accumulators 2h and 2h + 1 are the neighbours
    // at row 16 i + g + 8 h, column 8 j + 2 q of the warp tile: one 16-byte store where the pair is
    // aligned (every pair of an even N, every other row's of an odd one).
    double* c = static_cast<double*>(p.c) + z * p.m * p.n;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t row = m0 + wm0 + 16 * i + g + 8 * h;
        if (row >= p.m) continue;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int64_t col = n0 + wn0 + 8 * j + 2 * q;
          double* out = c + row * p.n + col;
          const double v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
          if (col + 1 < p.n && pair_aligned(out)) {
            store_pair(out, v0, v1);
          } else {
            if (col < p.n) out[0] = v0;
            if (col + 1 < p.n) out[1] = v1;
          }
        }
      }
  }
#endif
}

}  // namespace tiles::cuda::dmma
