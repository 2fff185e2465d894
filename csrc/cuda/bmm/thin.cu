// CUDA bmm for thin products, whose tensor-core tiles (128 wide, 32 deep) would be mostly padding:
//   short K      K <= 16: a few multiply-adds per output, the product bound by writing its output;
//   few columns  N <= 4 or M <= 4 (a matrix-vector product, a classifier's few outputs), or up to 8
//                over a K of at least 64: bound by reading the large operand once.
// Both run on the CUDA cores in the op-math type, read any strides (batch broadcast through stride 0),
// and map threads so that the loads of the large operand are coalesced in either major order.
#include <ATen/ATen.h>

#include "binding/dispatch.h"
#include "cuda/bmm/paths.h"
#include "cuda/bmm/split_k.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::thin {
namespace {

constexpr int kThreads = 256, kWarps = kThreads / 32;
constexpr int64_t kMaxShortK = 16, kMaxColumns = 8;
// 5 to 8 columns want a K of at least 64: over a shorter one most lanes of the kernel that walks K idle,
// and it lost to the tensor-core and general kernels.
constexpr int64_t kFewColumnsAnyK = 4, kMinKOverFour = 64;
constexpr int64_t kMaxBatchBlocks = 65535;  // gridDim.y; blocks loop over larger batches

// ---- short K -----------------------------------------------------------------------------------
// Each thread computes kCols columns of `rows_per_thread` rows: it keeps those columns of b (K x kCols
// values) in registers, reads each row's K values of a from shared memory (where the block stages its
// rows first; a broadcast, 16 bytes at a time) and does a few multiply-adds per output: the product
// runs at the speed of its stores. Where the output's rows allow whole vectors, a thread's columns are
// consecutive and stored as one vector; otherwise they are threads_n apart, so that each store
// instruction still writes a warp's consecutive columns (partial vectors would leave sectors half
// written). A b that is K-contiguous is staged in shared memory too, along k: read directly, a warp's
// loads would touch a cache line per lane. A block is `threads_n` threads across (a power of two up to
// 256: under 32 for a narrow output, so that a warp spans several rows rather than idle lanes) and
// 256 / threads_n rows of threads down, each thread taking rows_per_thread rows, at most kMaxRows a block.
constexpr int kMaxRowsPerThread = 32, kMaxRows = kWarps * kMaxRowsPerThread;
// Columns per thread (b's K x kCols values stay in registers), at most 16 bytes of them: a wider
// vector store is split into 16-byte halves, each leaving every sector it touches half written.
template <class scalar_t, int kK>
constexpr int kColsOf = std::min(kK <= 8 ? 4 : 2, int(16 / sizeof(scalar_t)));

// Shared memory for a block: `rows` rows of a and `cols` columns of b, K values each, in the op-math type.
template <class Acc, int kK>
constexpr int short_k_smem(int rows, int cols) { return (rows + cols) * kK * int(sizeof(Acc)); }

struct ShortK {
  int64_t batch, m, n;
  int k;
  int64_t sab, sam, sak, sbb, sbk, sbn;
  int threads_n, rows_per_thread;
  int64_t tiles_n;
  bool vector_stores, stage_b;
};

template <class scalar_t, int kK>
__global__ void __launch_bounds__(kThreads)
short_k_kernel(scalar_t* __restrict__ out, const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
               const ShortK p) {
  using Acc = opmath_t<scalar_t>;
  constexpr int kCols = kColsOf<scalar_t, kK>;
  extern __shared__ __align__(16) unsigned char smem[];
  const int threads_n = p.threads_n, groups = kThreads / threads_n, group = threadIdx.x / threads_n;
  const int rows = groups * p.rows_per_thread, block_cols = threads_n * kCols;
  Acc(*a_rows)[kK] = reinterpret_cast<Acc(*)[kK]>(smem);  // [rows][kK]
  Acc* b_tile = reinterpret_cast<Acc*>(smem) + rows * kK;  // [kK][block_cols]
  const int64_t m0 = int64_t(blockIdx.x / p.tiles_n) * rows, n0 = int64_t(blockIdx.x % p.tiles_n) * block_cols;
  // this thread's columns: local + c * step within the block's, c < kCols
  const int lane_n = threadIdx.x % threads_n;
  const int local = p.vector_stores ? lane_n * kCols : lane_n, step = p.vector_stores ? 1 : threads_n;
  const int64_t col0 = n0 + local;
  for (int64_t bi = blockIdx.y; bi < p.batch; bi += gridDim.y) {
    for (int e = threadIdx.x; e < rows * kK; e += kThreads) {  // zeros past k and m: no NaN * 0
      const bool m_fastest = p.sam == 1;
      const int r = m_fastest ? e % rows : e / kK, kk = m_fastest ? e / rows : e % kK;
      a_rows[r][kk] = kk < p.k && m0 + r < p.m ? Acc(a[bi * p.sab + (m0 + r) * p.sam + kk * p.sak]) : Acc(0);
    }
    for (int e = threadIdx.x; p.stage_b && e < kK * block_cols; e += kThreads) {  // k-fastest
      const int kk = e % kK, c = e / kK;
      b_tile[kk * block_cols + c] = kk < p.k && n0 + c < p.n ? Acc(b[bi * p.sbb + kk * p.sbk + (n0 + c) * p.sbn]) : Acc(0);
    }
    __syncthreads();
    Acc b_cols[kK][kCols];
#pragma unroll
    for (int kk = 0; kk < kK; ++kk)
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int64_t col = col0 + c * step;
        b_cols[kk][c] = p.stage_b ? b_tile[kk * block_cols + local + c * step]
                        : kk < p.k && col < p.n ? Acc(b[bi * p.sbb + kk * p.sbk + col * p.sbn]) : Acc(0);
      }
    if (col0 < p.n) {
      const int64_t rows_left = (p.m - m0 - group + groups - 1) / groups;  // this thread's rows in the matrix
      const int rows_here = int(std::min<int64_t>(p.rows_per_thread, rows_left));
      scalar_t* dst = out + (bi * p.m + m0 + group) * p.n + col0;
#pragma unroll 4
      for (int i = 0; i < rows_here; ++i, dst += groups * p.n) {
        Acc sum[kCols] = {};
#pragma unroll
        for (int kk = 0; kk < kK; ++kk) {
          const Acc av = a_rows[group + i * groups][kk];
#pragma unroll
          for (int c = 0; c < kCols; ++c) sum[c] += av * b_cols[kk][c];
        }
        if (p.vector_stores) {  // n is a multiple of kCols: a thread's columns are all in or all out
          Vec<scalar_t, kCols> v;
#pragma unroll
          for (int c = 0; c < kCols; ++c) v.v[c] = scalar_t(sum[c]);
          *reinterpret_cast<Vec<scalar_t, kCols>*>(dst) = v;
        } else {
#pragma unroll
          for (int c = 0; c < kCols; ++c)
            if (col0 + c * step < p.n) dst[c * step] = scalar_t(sum[c]);
        }
      }
    }
    __syncthreads();  // the tiles are restaged for the next batch
  }
}

template <class scalar_t, int kK>
void launch_short_k(const BmmProblem& problem) {
  using Acc = opmath_t<scalar_t>;
  constexpr int kCols = kColsOf<scalar_t, kK>;
  constexpr auto kernel = short_k_kernel<scalar_t, kK>;
  ShortK p{problem.batch, problem.m, problem.n, int(problem.k), problem.a_strides[0], problem.a_strides[1],
           problem.a_strides[2], problem.b_strides[0], problem.b_strides[1], problem.b_strides[2]};
  // threads across: the fewest thread-columns that cover n (the widest block among equals); under 32
  // vectors, the power of two that covers them
  const int64_t vectors = (p.n + kCols - 1) / kCols;
  p.threads_n = 256;
  for (int t = 128; t >= 32; t /= 2)
    if ((vectors + t - 1) / t * t < (vectors + p.threads_n - 1) / p.threads_n * p.threads_n) p.threads_n = t;
  while (p.threads_n > 1 && p.threads_n / 2 >= vectors) p.threads_n /= 2;
  p.tiles_n = (vectors + p.threads_n - 1) / p.threads_n;
  // rows per thread: 32 (a long run of stores per thread: measured fastest on large outputs), fewer
  // where that would leave fewer than two blocks per SM, or stage more than kMaxRows rows of a
  const int64_t batch_blocks = std::min(p.batch, kMaxBatchBlocks), groups = kThreads / p.threads_n;
  auto row_tiles = [&](int per_thread) { return (p.m + groups * per_thread - 1) / (groups * per_thread); };
  p.rows_per_thread = int(std::min<int64_t>(kMaxRowsPerThread, kMaxRows / groups));
  while (p.rows_per_thread > 4 && row_tiles(p.rows_per_thread) * p.tiles_n * batch_blocks < 2 * sm_count())
    p.rows_per_thread /= 2;
  const int64_t tiles = row_tiles(p.rows_per_thread) * p.tiles_n;
  TILES_CHECK(tiles < (int64_t(1) << 31), "tiles::bmm: output matrices of ", p.m, " x ", p.n,
              " are too large for one launch");
  scalar_t* out = problem.out.data_ptr<scalar_t>();
  p.vector_stores = p.n % kCols == 0 && aligned(out, sizeof(scalar_t) * kCols);
  p.stage_b = p.sbk == 1 && p.sbn != 1 && p.k > 1;
  const int smem = short_k_smem<Acc, kK>(int(groups) * p.rows_per_thread, p.stage_b ? p.threads_n * kCols : 0);
  allow_dynamic_smem<kernel>(short_k_smem<Acc, kK>(kMaxRows, kThreads * kCols));
  const dim3 grid{unsigned(tiles), unsigned(batch_blocks)};
  kernel<<<grid, kThreads, smem, current_stream()>>>(out, problem.a.const_data_ptr<scalar_t>(),
                                                     problem.b.const_data_ptr<scalar_t>(), p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// ---- few columns -------------------------------------------------------------------------------
// The product as out[b][r][j] = sum over k of A[b][r][k] * X[b][k][j]: A is the large operand (rows x K),
// X the narrow one (K x cols, cols <= 8). With n <= 8 A is a and X is b; otherwise (m <= 8) A is b's
// transpose and X a's, and the output is written transposed (through out_r / out_j).
struct Narrow {
  int64_t batch, rows, cols, k;
  int64_t a_b, a_r, a_k;  // A's strides
  int64_t x_b, x_k, x_j;  // X's strides
  int64_t out_r, out_j;   // the output's strides along r and j (its batch stride is rows * cols)
  bool a_is_b;            // A is b's transpose (few rows), else a (few columns)
  int64_t k_split;        // each block's k-range: [blockIdx.z * k_split, + k_split), whole chunks (launch_narrow)
};

// With k_split < k, `out` is this split's slice of the partials (Out = the op-math type): slice z at
// out + z * batch * rows * cols, laid out as the output, for sum_splits. With kClusterSum the splits are
// a thread block cluster along z and add their partials in shared memory (sum_cluster_partials): `out`
// is the output, written once.
template <bool kClusterSum, class Out>
__device__ __forceinline__ Out* split_slice(Out* out, const Narrow& t) {
  return kClusterSum ? out : out + int64_t(blockIdx.z) * t.batch * t.rows * t.cols;
}

// The output at (row, j) of batch bi.
template <class Out>
__device__ __forceinline__ Out& output_at(Out* out, const Narrow& t, int64_t bi, int64_t row, int j) {
  return out[bi * t.rows * t.cols + row * t.out_r + j * t.out_j];
}

// X's rows [k0, k0 + kChunk) of one batch in shared memory, in the op-math type, zeros past k_end and
// past the columns; row kk at kk + kk / kSkew.
template <class scalar_t, class Acc, int kJ, int kChunk, int kSkew>
__device__ __forceinline__ void stage_x(Acc (*xs)[kJ], const scalar_t* x, const Narrow& t, int64_t k0,
                                        int64_t k_end) {
  for (int e = threadIdx.x; e < kChunk * kJ; e += kThreads) {
    const int kk = t.x_j == 1 ? e / kJ : e % kChunk, j = t.x_j == 1 ? e % kJ : e / kChunk;  // coalesced
    xs[kk + kk / kSkew][j] = k0 + kk < k_end && j < t.cols ? Acc(x[(k0 + kk) * t.x_k + j * t.x_j]) : Acc(0);
  }
}

// A's k-stride is 1 (or neither stride is): each warp walks kRowsPerWarp rows of A along k, each lane
// kVec consecutive k at a time (16-byte loads where A's rows are 16-byte aligned, else one element),
// the warp's lanes on consecutive vectors (coalesced). X's rows come from shared memory, staged by the
// block a chunk at a time while the chunk's loads of A are in flight, and each lane reads them once for
// all of its warp's rows; lane l's rows sit kVec + 1 rows apart (the skew), so that a warp's reads
// spread over the banks. The lanes' sums meet through shuffles.
constexpr int kRowsPerWarp = 4;
template <int kVec>
constexpr int kStepsPerChunk = kVec >= 8 ? 1 : 2;  // A's loads per row per chunk: 16-byte ones take registers

template <class scalar_t, class Out, int kJ, int kVec, bool kClusterSum = false>
__global__ void __launch_bounds__(kThreads)
narrow_k_fastest_kernel(Out* __restrict__ out, const scalar_t* __restrict__ A, const scalar_t* __restrict__ X,
                        const Narrow t) {
  using Acc = opmath_t<scalar_t>;
  constexpr int kStep = 32 * kVec, kSteps = kStepsPerChunk<kVec>, kChunk = kSteps * kStep;
  constexpr int kSkew = kVec == 1 ? kChunk : kVec;  // one element per lane: consecutive rows suit the banks
  static_assert(kRowsPerWarp * kJ <= 32, "a lane stores each of the warp's sums");
  __shared__ __align__(16) Acc xs[kChunk + kChunk / kSkew][kJ];
  constexpr int kBlockOutputs = kWarps * kRowsPerWarp * kJ;
  __shared__ Acc partials[kClusterSum ? kBlockOutputs : 1];  // (row in the block, j): kClusterSum's staging
  const int lane = threadIdx.x % 32;
  const int64_t r0 = (int64_t(blockIdx.x) * kWarps + threadIdx.x / 32) * kRowsPerWarp;
  const int64_t k_begin = int64_t(blockIdx.z) * t.k_split, k_end = std::min(t.k, k_begin + t.k_split);
  out = split_slice<kClusterSum>(out, t);
  for (int64_t bi = blockIdx.y; bi < t.batch; bi += gridDim.y) {
    const scalar_t* a_rows = A + bi * t.a_b + r0 * t.a_r;
    Acc acc[kRowsPerWarp][kJ] = {};
    for (int64_t k0 = k_begin; k0 < k_end; k0 += kChunk) {
      Vec<scalar_t, kVec> raw[kSteps][kRowsPerWarp];  // the chunk's A, loaded before X is staged
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r) {
          const int64_t k = k0 + s * kStep + lane * kVec;
          const scalar_t* src = a_rows + r * t.a_r + k * t.a_k;
          if (r0 + r < t.rows && k + kVec <= k_end) {
            raw[s][r] = *reinterpret_cast<const Vec<scalar_t, kVec>*>(src);
          } else {
#pragma unroll
            for (int i = 0; i < kVec; ++i) raw[s][r].v[i] = r0 + r < t.rows && k + i < k_end ? src[i * t.a_k] : scalar_t(0);
          }
        }
      __syncthreads();  // the previous chunk's X is read
      stage_x<scalar_t, Acc, kJ, kChunk, kSkew>(xs, X + bi * t.x_b, t, k0, k_end);
      __syncthreads();
#pragma unroll
      for (int s = 0; s < kSteps; ++s)
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const int kk = s * kStep + lane * kVec + i;
          Acc xv[kJ];
#pragma unroll
          for (int j = 0; j < kJ; ++j) xv[j] = xs[kk + kk / kSkew][j];
#pragma unroll
          for (int r = 0; r < kRowsPerWarp; ++r) {
            const Acc av = Acc(raw[s][r].v[i]);
#pragma unroll
            for (int j = 0; j < kJ; ++j) acc[r][j] += av * xv[j];
          }
        }
    }
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
#pragma unroll
      for (int j = 0; j < kJ; ++j) {
        Acc v = acc[r][j];
#pragma unroll
        for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
        // The stores spread over the lanes. The unclustered store keeps its one combined test: written
        // as `if (lane != r * kJ + j) continue;` before both, float64's <1, 1> instance took 80 registers
        // instead of 64 and its whole-k walk ran 1.24x slower (one block fewer an SM).
        if constexpr (kClusterSum) {
          if (lane == r * kJ + j) partials[((threadIdx.x / 32) * kRowsPerWarp + r) * kJ + j] = v;
        } else if (lane == r * kJ + j && r0 + r < t.rows && j < t.cols) {
          output_at(out, t, bi, r0 + r, j) = Out(v);
        }
      }
    if constexpr (kClusterSum) {
      const int64_t block_r0 = int64_t(blockIdx.x) * kWarps * kRowsPerWarp;
      sum_cluster_partials<kThreads>(partials, kBlockOutputs, [&](int e, Acc sum) {
        const int64_t row = block_r0 + e / kJ;
        if (row < t.rows && e % kJ < t.cols) output_at(out, t, bi, row, e % kJ) = Out(sum);
      });
    }
  }
}

// The k a warp of narrow_rows_fastest_kernel loads before using any. 16-bit: four, two from 4 columns on
// (a round's rows of X take registers; with element loads of A, four rounds of 8 columns took 159 a
// thread, two 128; of 4 columns, 128 with 4 bytes spilled against 64). Wider types: one, as before the
// rounds. On the H200, rounds of four made bf16 with a transposed a faster (16384 x 4 x 4096 116 -> 95
// us, 3 x 113 x 3 x 4333 22.3 -> 16.9) but float32 slower (16384 x 1 x 4096 84 -> 138, 16384 x 4 x 4096
// 102 -> 115; NOTES.md, "Thin rows in flight").
template <class scalar_t, int kJ>
constexpr int kRowsRound = sizeof(scalar_t) > 2 ? 1 : kJ >= 4 ? 2 : 4;

// X's row k into xv, zeros past its columns: every lane reads column min(j, cols - 1), then selects.
template <class scalar_t, class Acc, int kJ>
__device__ __forceinline__ void load_x_row(Acc (&xv)[kJ], const scalar_t* x, const Narrow& t, int64_t k) {
#pragma unroll
  for (int j = 0; j < kJ; ++j) {
    const Acc v = Acc(x[k * t.x_k + std::min<int64_t>(j, t.cols - 1) * t.x_j]);
    xv[j] = j < t.cols ? v : Acc(0);
  }
}

// The sums of a lane's kVec rows of A (all inside the matrix) over k = k, k + kWarps, ... < k_end (its
// warp's k), into acc. kRowsRound of the warp's k are loaded before any is used, in one branch-free
// block, so that their DRAM round trips overlap: with a load, its FMAs and a bounds branch per k (the
// loop unrolled around them), each k cost a round trip of its own. The round holds A as loaded (16-bit
// elements packed two a register); the last few k go one at a time. Each row adds its k in order, so
// the sums' bits do not depend on the round.
template <class scalar_t, class Acc, int kVec, int kJ>
__device__ __forceinline__ void walk_rows(Acc (&acc)[kVec][kJ], const scalar_t* a_rows, const scalar_t* x,
                                          const Narrow& t, int64_t k, int64_t k_end) {
  auto load = [&](int64_t at) { return *reinterpret_cast<const Vec<scalar_t, kVec>*>(a_rows + at * t.a_k); };
  auto add = [&](const Vec<scalar_t, kVec>& a, const Acc (&xv)[kJ]) {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
#pragma unroll
      for (int j = 0; j < kJ; ++j) acc[i][j] += Acc(a.v[i]) * xv[j];
  };
  constexpr int kRound = kRowsRound<scalar_t, kJ>;
  // One k a round: unrolled by 4 as before the rounds. With no branch inside, ptxas hoists the four k's
  // loads: at 8 columns that took float32 to 200 registers (one block an SM) and made float64 spill,
  // so 8 columns are not unrolled. The tail loop below is compiled only for rounds of several k:
  // left in, dead, it changed how ptxas scheduled the 1-4 column loops (NOTES.md, "Thin rows in
  // flight: the A/B" and "8 columns and the dead tail").
#pragma unroll(kRound == 1 && kJ < 8 ? 4 : 1)
  for (; k + (kRound - 1) * kWarps < k_end; k += kRound * kWarps) {
    Vec<scalar_t, kVec> a[kRound];
    Acc xv[kRound][kJ];
#pragma unroll
    for (int u = 0; u < kRound; ++u) a[u] = load(k + u * kWarps), load_x_row(xv[u], x, t, k + u * kWarps);
#pragma unroll
    for (int u = 0; u < kRound; ++u) add(a[u], xv[u]);
  }
  if constexpr (kRound > 1) {  // the last few k, one at a time (with one k a round, none are left)
    for (; k < k_end; k += kWarps) {
      Acc xv[kJ];
      load_x_row(xv, x, t, k);
      add(load(k), xv);
    }
  }
}

// A's row stride is 1: each lane owns kVec consecutive rows of A (16-byte loads where aligned, else one
// row) and the block's warps take interleaved k, so each warp load is 32 lanes' consecutive rows at one
// k (coalesced) and X's row k is the same for the whole warp (a broadcast); a warp loads kRowsRound of
// its k before their FMAs (walk_rows). The warps' sums meet in shared memory, four columns at a time
// (32 KiB), and are added in warp order.
template <class scalar_t, class Out, int kJ, int kVec, bool kClusterSum = false>
__global__ void __launch_bounds__(kThreads)
narrow_rows_fastest_kernel(Out* __restrict__ out, const scalar_t* __restrict__ A, const scalar_t* __restrict__ X,
                           const Narrow t) {
  using Acc = opmath_t<scalar_t>;
  constexpr int kBlockRows = 32 * kVec, kSumCols = std::min(kJ, 4);
  __shared__ Acc sums[kWarps][kSumCols][kBlockRows];
  __shared__ Acc partials[kClusterSum ? kJ * kBlockRows : 1];  // [j][row in the block]: kClusterSum's staging
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r0 = int64_t(blockIdx.x) * kBlockRows, r = r0 + lane * kVec;
  const int64_t k_begin = int64_t(blockIdx.z) * t.k_split, k_end = std::min(t.k, k_begin + t.k_split);
  out = split_slice<kClusterSum>(out, t);
  for (int64_t bi = blockIdx.y; bi < t.batch; bi += gridDim.y) {
    const scalar_t* a_rows = A + bi * t.a_b + r * t.a_r;
    const scalar_t* x = X + bi * t.x_b;
    Acc acc[kVec][kJ] = {};
    if (r + kVec <= t.rows) {
      walk_rows(acc, a_rows, x, t, k_begin + warp, k_end);
    } else if (r < t.rows) {  // the matrix's last rows, one k at a time
      for (int64_t k = k_begin + warp; k < k_end; k += kWarps) {
        Acc xv[kJ];
        load_x_row(xv, x, t, k);
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const Acc av = r + i < t.rows ? Acc(a_rows[k * t.a_k + i * t.a_r]) : Acc(0);
#pragma unroll
          for (int j = 0; j < kJ; ++j) acc[i][j] += av * xv[j];
        }
      }
    }
#pragma unroll
    for (int j0 = 0; j0 < kJ; j0 += kSumCols) {
#pragma unroll
      for (int i = 0; i < kVec; ++i)
#pragma unroll
        for (int j = 0; j < kSumCols; ++j) sums[warp][j][lane * kVec + i] = acc[i][j0 + j];
      __syncthreads();
      for (int e = threadIdx.x; e < kSumCols * kBlockRows; e += kThreads) {
        const int j = j0 + e / kBlockRows, row = e % kBlockRows;
        Acc v = sums[0][j - j0][row];
#pragma unroll
        for (int w = 1; w < kWarps; ++w) v += sums[w][j - j0][row];
        if constexpr (kClusterSum) partials[j * kBlockRows + row] = v;
        else if (r0 + row < t.rows && j < t.cols) output_at(out, t, bi, r0 + row, j) = Out(v);
      }
      __syncthreads();  // sums is rewritten for the next columns or batch
    }
    if constexpr (kClusterSum) {
      sum_cluster_partials<kThreads>(partials, kJ * kBlockRows, [&](int e, Acc sum) {
        const int j = e / kBlockRows, row = e % kBlockRows;
        if (r0 + row < t.rows && j < t.cols) output_at(out, t, bi, r0 + row, j) = Out(sum);
      });
    }
  }
}

Narrow narrow_of(const BmmProblem& p) {
  Narrow t{};
  t.batch = p.batch;
  t.k = p.k;
  const auto& a = p.a_strides;
  const auto& b = p.b_strides;
  if (p.n <= kMaxColumns && (p.n <= p.m || p.m > kMaxColumns)) {  // few columns: A = a, X = b
    t.rows = p.m, t.cols = p.n;
    t.a_b = a[0], t.a_r = a[1], t.a_k = a[2];
    t.x_b = b[0], t.x_k = b[1], t.x_j = b[2];
    t.out_r = p.n, t.out_j = 1;
    t.a_is_b = false;
  } else {  // few rows: out^T = b^T a^T, A = b^T, X = a^T
    t.rows = p.n, t.cols = p.m;
    t.a_b = b[0], t.a_r = b[2], t.a_k = b[1];
    t.x_b = a[0], t.x_k = a[2], t.x_j = a[1];
    t.out_r = 1, t.out_j = p.n;
    t.a_is_b = true;
  }
  return t;
}

// The 16-byte vector width of A's loads along its unit-stride dim `unit` (k or rows), in elements, when
// every vector starts 16-byte aligned (base, batch stride, the other dim's stride); else 1.
template <class scalar_t>
int vector_width(const scalar_t* A, const Narrow& t, bool k_fastest) {
  constexpr int kVec = 16 / sizeof(scalar_t);
  const int64_t unit = k_fastest ? t.a_k : t.a_r, other = k_fastest ? t.a_r : t.a_k;
  const bool ok = aligned(A, 16) && unit == 1 && other % kVec == 0 && (t.batch == 1 || t.a_b % kVec == 0);
  return ok ? kVec : 1;
}

// The k-range each block of a few-columns launch of `blocks` blocks walks (Narrow::k_split: whole
// chunks). Split as far as filling the SMs asks (fill_k_splits), but where costed only if that saves
// more of the walk than the split costs. A block's walk is a chain of chunks, each a DRAM latency (along
// k the lanes' vectors; along rows a round of kRowsRound k a warp: when each k was a round of its own,
// H200, 1 x 112 x 2 x 158 with a transposed a ran 17.0 us whole and 9.2 in 10 splits); a split adds the
// partials' round trip and the sum, a launch with its own latency. Filling the SMs regardless, a short
// walk paid for the sum: along k 1 x 112 x 2 x 158 8.7 us split against 7.3 whole (cuBLAS 6.8), along
// rows 8 x 1 x 3484 x 42 13.3 against 10.5 (13.1); long walks split as before (NOTES.md, "The
// few-columns split, costed"). Where thread block clusters run, the splits may instead add their partials
// in the cluster's shared memory in the same kernel (no partials in memory, no second launch), at most
// kPortableCluster of them: a deeper walk each. Clusters are taken where that walk is at most a few
// chunks deeper than the second kernel's, fitted on the H200's grid rows (NOTES.md N1i): along k 8 (3 x
// 113 x 3 x 4333 walked 9 chunks in 8 splits against 2 in 34 and ran 0.85-0.99x the time, 5 x 254 x
// 1 x 3985 8 against 3, 0.88-0.93x); along rows 2 (1 x 112 x 2 x 158, 3 rounds against 2, 0.83-0.92x; 16-bit
// 5 x 254 x 1 x 3985, 16 against 5, 1.18-1.23x; 2 x 88 x 3 x 2025, 32 against 4, 1.4-2.0x). Against a whole
// walk the cluster's sum costs kClusterSumUs. SplitK::fill splits the same way, so that a costed split
// writes its bits.
struct NarrowSplit {
  int64_t k_split;  // each block's k-range, whole chunks (Narrow::k_split)
  bool clusters;    // the splits add up in thread block clusters, not in sum_splits
  // the splits K takes: blocks along z, a cluster's size
  int64_t splits(int64_t k) const { return std::max<int64_t>(1, (k + k_split - 1) / k_split); }
};

NarrowSplit narrow_k_split(SplitK mode, int64_t blocks, int64_t k, int64_t chunk, int64_t outputs, int acc_bytes,
                           bool k_fastest, bool clusters_run) {
  // A DRAM round trip; the sum kernel's launch and tail; the cluster's two barriers; DRAM's rate for the
  // partials (split_k.cuh's).
  constexpr double kChunkUs = 0.7, kSumUs = 4, kClusterSumUs = 1, kBytesPerUs = 2.5e6;
  auto depth = [&](int64_t splits) { return ((k + splits - 1) / splits + chunk - 1) / chunk * chunk; };
  auto walk_us = [&](int64_t d) { return double(d / chunk) * kChunkUs; };
  const int64_t whole = depth(1);
  if (mode == SplitK::never) return {whole, false};
  const int64_t splits = fill_k_splits(blocks, k, chunk, outputs, 8);  // ~8 blocks per SM
  const int64_t split = depth(splits), clustered = depth(std::min<int64_t>(splits, kPortableCluster));
  const int64_t extra_chunks = (clustered - split) / chunk, max_extra_chunks = k_fastest ? 8 : 2;
  // Along rows a walk of fewer than 64 k is too short for the cluster's barriers to pay: float32 3 x 217
  // x 2 x 33 (five one-k rounds, split three ways) ran 1.12-1.21x the whole walk's time in clusters, where
  // 2 x 422 x 7 x 122 and 1 x 112 x 2 x 158 ran 0.78-0.92x (H200 grid, NOTES.md N1i). In k, not rounds
  // (chunks: 8 k in float32, 16 k in 16-bit from 4 columns on, 32 k below): 16-bit walks of 4-8 columns
  // under 64 k stay whole too (untimed: no grid row has one); with fewer columns a walk past 32 k is 64.
  constexpr int64_t kMinClusteredRowsWalk = 64;
  const bool clusters = clusters_run && clustered < whole && extra_chunks <= max_extra_chunks &&
                        (k_fastest || whole >= kMinClusteredRowsWalk);
  const NarrowSplit filled{clusters ? clustered : split, clusters};
  if (mode == SplitK::fill || filled.k_split == whole) return filled;
  const int64_t used = (k + split - 1) / split;
  const double split_us = clusters ? walk_us(clustered) + kClusterSumUs
                                   : walk_us(split) + kSumUs + double(used * outputs * acc_bytes) / kBytesPerUs;
  return split_us < walk_us(whole) ? filled : NarrowSplit{whole, false};
}

template <class scalar_t, int kJ, int kVec>
void launch_narrow(const BmmProblem& p, Narrow t, bool k_fastest, SplitK mode) {
  using Acc = opmath_t<scalar_t>;
  const scalar_t* A = (t.a_is_b ? p.b : p.a).template const_data_ptr<scalar_t>();
  const scalar_t* X = (t.a_is_b ? p.a : p.b).template const_data_ptr<scalar_t>();
  const int64_t rows_per_block = k_fastest ? kWarps * kRowsPerWarp : 32 * kVec;
  TORCH_INTERNAL_ASSERT(t.cols > 0, "thin::bmm: an empty output reaches the kernels");  // load_x_row reads cols - 1
  // a split is whole chunks: the loads of A a block issues together (one chunk along k, a round of
  // kRowsRound k a warp along rows; narrow_k_split's 0.7 us a chunk was fitted with one k a warp)
  const int64_t chunk = k_fastest ? kStepsPerChunk<kVec> * 32 * kVec : kRowsRound<scalar_t, kJ> * kWarps;
  const int64_t row_blocks = (t.rows + rows_per_block - 1) / rows_per_block;
  TILES_CHECK(row_blocks < (int64_t(1) << 31), "tiles::bmm: ", t.rows, " rows are too many for one launch");
  const int64_t batch_blocks = std::min(t.batch, kMaxBatchBlocks), outputs = t.batch * t.rows * t.cols;
  const int64_t blocks = row_blocks * batch_blocks;
  NarrowSplit split = narrow_k_split(mode, blocks, t.k, chunk, outputs, int(sizeof(Acc)), k_fastest,
                                     clusters_available());
  // A cluster's blocks wait at its barrier for its slowest split, holding their SMs: that pays where the
  // whole launch is resident at once (a small product, its walk a chain of DRAM round trips). Over
  // several waves the split kernel's blocks retire as they finish and the next ones take their place
  // (H200, clusters at every size: 16383 x 8 x 4095 1.33x the time in 16-bit and float32, 1.8x in
  // float64, 16384 x 1 x 4095 1.12-1.23x; NOTES.md N1g).
  if (split.clusters) {
    constexpr auto along_k = narrow_k_fastest_kernel<scalar_t, scalar_t, kJ, kVec, true>;
    constexpr auto along_rows = narrow_rows_fastest_kernel<scalar_t, scalar_t, kJ, kVec, true>;
    const int size = int(split.splits(t.k));
    const int resident = k_fastest ? resident_clusters<along_k>(dim3(kThreads), size)
                                   : resident_clusters<along_rows>(dim3(kThreads), size);
    if (blocks > resident)
      split = narrow_k_split(mode, blocks, t.k, chunk, outputs, int(sizeof(Acc)), k_fastest, /*clusters_run=*/false);
  }
  t.k_split = split.k_split;
  const int64_t used = split.splits(t.k);
  const dim3 grid{unsigned(row_blocks), unsigned(batch_blocks), unsigned(used)};
  auto run = [&](auto* out) {
    using Out = std::remove_pointer_t<decltype(out)>;
    if (k_fastest)
      narrow_k_fastest_kernel<scalar_t, Out, kJ, kVec><<<grid, kThreads, 0, current_stream()>>>(out, A, X, t);
    else
      narrow_rows_fastest_kernel<scalar_t, Out, kJ, kVec><<<grid, kThreads, 0, current_stream()>>>(out, A, X, t);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (used == 1) return run(p.out.data_ptr<scalar_t>());
  if (split.clusters) {  // one kernel, no partials
    TORCH_INTERNAL_ASSERT(used <= kPortableCluster, "thin::bmm: ", used, " splits do not form one cluster");
    const ClusterLaunch cluster(grid, dim3(kThreads), dim3(1, 1, unsigned(used)), current_stream());
    auto kernel = k_fastest ? narrow_k_fastest_kernel<scalar_t, scalar_t, kJ, kVec, true>
                            : narrow_rows_fastest_kernel<scalar_t, scalar_t, kJ, kVec, true>;
    C10_CUDA_CHECK(cudaLaunchKernelEx(&cluster.config, kernel, p.out.data_ptr<scalar_t>(), A, X, t));
    return;
  }
  at::Tensor partials = at::empty({used, outputs}, p.out.options().dtype(c10::CppTypeToScalarType<Acc>::value));
  run(partials.data_ptr<Acc>());
  sum_splits<scalar_t, Acc>(p.out.data_ptr<scalar_t>(), partials, outputs, int(used));
}

template <class scalar_t, int kJ>
void launch_narrow(const BmmProblem& p, const Narrow& t, SplitK mode) {
  // A walked along k where k is its unit stride (or where neither stride is 1); along rows otherwise
  const bool k_fastest = t.a_k == 1 || t.a_r != 1 || t.rows == 1;
  const scalar_t* A = (t.a_is_b ? p.b : p.a).template const_data_ptr<scalar_t>();
  if (vector_width(A, t, k_fastest) > 1)
    return launch_narrow<scalar_t, kJ, 16 / sizeof(scalar_t)>(p, t, k_fastest, mode);
  launch_narrow<scalar_t, kJ, 1>(p, t, k_fastest, mode);
}

}  // namespace

bool short_k(const BmmProblem& p) { return p.k <= kMaxShortK; }

bool suits(const BmmProblem& p) {
  const int64_t narrow = std::min(p.m, p.n);
  return short_k(p) || narrow <= kFewColumnsAnyK || (narrow <= kMaxColumns && p.k >= kMinKOverFour);
}

void bmm(const BmmProblem& p, SplitK split) {
  TORCH_INTERNAL_ASSERT(suits(p), "thin::bmm: ", p.m, " x ", p.n, " x ", p.k, " is not thin");
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::bmm", [&] {
    if (short_k(p)) {
      if (p.k <= 4) return launch_short_k<scalar_t, 4>(p);
      if (p.k <= 8) return launch_short_k<scalar_t, 8>(p);
      return launch_short_k<scalar_t, 16>(p);
    }
    const Narrow t = narrow_of(p);
    if (t.cols == 1) return launch_narrow<scalar_t, 1>(p, t, split);
    if (t.cols == 2) return launch_narrow<scalar_t, 2>(p, t, split);
    if (t.cols <= 4) return launch_narrow<scalar_t, 4>(p, t, split);
    launch_narrow<scalar_t, 8>(p, t, split);
  });
}

}  // namespace tiles::cuda::thin
