// CUDA elementwise kernels shared by map, zip and their backward ops; launch.cuh picks one per problem.
//
// Operands share the output's (coalesced) shape. The output is dense and the problem lists its dims by
// descending output stride (csrc/binding/problems.cpp), so it is contiguous in that order. By layout, fastest first:
//   contiguous  every operand contiguous in output order: 16-byte vector loads and stores, several
//               vectors in flight per thread;
//   rows        2-D, every operand steps by 0 or 1 along the row (a full operand, or one broadcast
//               along rows or columns): vectorized along the row, row offsets from the block index
//               (no per-element index math), a broadcast value loaded once per row;
//   transpose   2-D, some operand is stored transposed to the output (a.t(), a + b.t()): 32 x 32
//               tiles staged through padded shared memory so reads and writes both coalesce;
//   strided     anything else: per-element index decomposition (32-bit when everything fits).
// Mixed-dtype zip always takes `strided`, converting per element.
#pragma once

#include "cuda/launch.cuh"
#include "tiles/functions.h"
#include "tiles/loads.h"
#include "tiles/strided.h"

namespace tiles::cuda {

// The function applied per element to the operands' values in the op-math type.
template <MapFn F>
struct MapOp {
  static constexpr int kArity = 1;
  template <class T>
  __device__ __forceinline__ T operator()(const T (&v)[1]) const { return apply_map<F>(v[0]); }
};
template <ZipFn F>
struct ZipOp {
  static constexpr int kArity = 2;
  template <class T>
  __device__ __forceinline__ T operator()(const T (&v)[2]) const { return apply_zip<F>(v[0], v[1]); }
};

// The backward ops' functions: operands (grad, saved) and (grad, a, b).
template <MapFn F>
struct MapGradOp {
  static constexpr int kArity = 2;
  template <class T>
  __device__ __forceinline__ T operator()(const T (&v)[2]) const { return tiles::map_grad<F>(v[0], v[1]); }
};
template <ZipFn F, int Which>
struct ZipGradOp {
  static constexpr int kArity = 3;
  template <class T>
  __device__ __forceinline__ T operator()(const T (&v)[3]) const { return tiles::zip_grad<F, Which>(v[0], v[1], v[2]); }
};

template <class T, int N>
struct Operands {
  const T* ptr[N];
};

namespace elementwise {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;  // vectors in flight per thread and operand

// The contiguous kernel's block: threads, and vectors in flight per thread and operand. Small blocks of
// one 16-byte vector a thread (PyTorch's vectorized kernel runs 128 threads of 8 elements: one vector
// for 16-bit types, two for float32) beat the 256 x 4 shared with the other kernels by 3-5% on an H200,
// and 128 x 2 by 1-2% (exp fp32 / bf16 4096 x 8192 from 0.96x of torch.exp to 1.00-1.01x; NOTES.md,
// "The contiguous kernel's block").
using ContiguousBlock = BlockShape<128, 1>;

template <class scalar_t, class Op, int VEC>
__device__ __forceinline__ Vec<scalar_t, VEC> apply_vec(const Vec<scalar_t, VEC> (&in)[Op::kArity]) {
  using T = opmath_t<scalar_t>;
  Vec<scalar_t, VEC> out;
#pragma unroll
  for (int e = 0; e < VEC; ++e) {
    T args[Op::kArity];
#pragma unroll
    for (int k = 0; k < Op::kArity; ++k) args[k] = T(in[k].v[e]);
    out.v[e] = scalar_t(Op{}(args));
  }
  return out;
}

// ---- contiguous: the flat range [0, n), VEC elements per access -----------------------------------
template <class scalar_t, class Op, int VEC, class Block = ContiguousBlock>
__global__ void __launch_bounds__(Block::kThreads)
contiguous_kernel(scalar_t* __restrict__ out, Operands<scalar_t, Op::kArity> in, int64_t n) {
  constexpr int N = Op::kArity, THREADS = Block::kThreads, UNROLL = Block::kUnroll;
  using V = Vec<scalar_t, VEC>;
  const int64_t n_vec = n / VEC;
  const int64_t step = int64_t(THREADS) * UNROLL;
  for (int64_t base = int64_t(blockIdx.x) * step; base < n_vec; base += int64_t(gridDim.x) * step) {
    V vals[UNROLL][N];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {  // issue every load before the first use
      const int64_t i = base + u * THREADS + threadIdx.x;
      if (i < n_vec)
#pragma unroll
        for (int k = 0; k < N; ++k) vals[u][k] = reinterpret_cast<const V*>(in.ptr[k])[i];
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const int64_t i = base + u * THREADS + threadIdx.x;
      if (i < n_vec) reinterpret_cast<V*>(out)[i] = apply_vec<scalar_t, Op, VEC>(vals[u]);
    }
  }
  const int64_t tail = n_vec * VEC + global_thread();  // fewer than VEC elements left
  if (tail < n) {
    Vec<scalar_t, 1> last[N];
#pragma unroll
    for (int k = 0; k < N; ++k) last[k].v[0] = in.ptr[k][tail];
    out[tail] = apply_vec<scalar_t, Op, 1>(last).v[0];
  }
}

// ---- rows: [rows, row_len]; operand k steps by inner_unit[k] (0 or 1) along a row ---------------
template <int N>
struct RowLayout {
  int64_t row_len, rows;
  int64_t row_stride[N];
  bool inner_unit[N];  // false: the operand holds one value per row (broadcast along the row)
};

template <class scalar_t, class Op, int VEC>
__global__ void __launch_bounds__(kThreads)
rows_kernel(scalar_t* __restrict__ out, Operands<scalar_t, Op::kArity> in, RowLayout<Op::kArity> lay) {
  constexpr int N = Op::kArity;
  using V = Vec<scalar_t, VEC>;
  const int64_t vecs_per_row = lay.row_len / VEC;  // row_len is a multiple of VEC
  const int64_t chunk = int64_t(kThreads) * kUnroll;
  for (int64_t r = blockIdx.y; r < lay.rows; r += gridDim.y) {
    const scalar_t* src[N];
    V splat[N];
#pragma unroll
    for (int k = 0; k < N; ++k) {
      src[k] = in.ptr[k] + r * lay.row_stride[k];
      if (!lay.inner_unit[k])
#pragma unroll
        for (int e = 0; e < VEC; ++e) splat[k].v[e] = src[k][0];
    }
    scalar_t* dst = out + r * lay.row_len;
    for (int64_t base = int64_t(blockIdx.x) * chunk; base < vecs_per_row; base += int64_t(gridDim.x) * chunk) {
      V vals[kUnroll][N];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = base + u * kThreads + threadIdx.x;
#pragma unroll
        for (int k = 0; k < N; ++k)
          vals[u][k] = (c < vecs_per_row && lay.inner_unit[k]) ? reinterpret_cast<const V*>(src[k])[c] : splat[k];
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = base + u * kThreads + threadIdx.x;
        if (c < vecs_per_row) reinterpret_cast<V*>(dst)[c] = apply_vec<scalar_t, Op, VEC>(vals[u]);
      }
    }
  }
}

// ---- transpose: [rows, row_len] tiles of 32 x 32; `staged` operands have unit stride across rows ----
constexpr int kTile = 32, kTileRows = 8;  // blockDim (32, 8): each thread covers 4 rows of a tile

template <int N>
struct TileLayout {
  int64_t row_len, rows;
  int64_t col_stride[N], row_stride[N];
  bool staged[N];  // read through shared memory (row_stride == 1)
};

template <class scalar_t, class Op>
__global__ void __launch_bounds__(kTile * kTileRows)
transpose_kernel(scalar_t* __restrict__ out, Operands<scalar_t, Op::kArity> in, TileLayout<Op::kArity> lay) {
  constexpr int N = Op::kArity;
  using T = opmath_t<scalar_t>;
  __shared__ scalar_t tile[N][kTile][kTile + 1];  // [operand][column][row]; +1 keeps columns in distinct banks
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t c0 = int64_t(blockIdx.x) * kTile;
  constexpr int kRowsPerThread = kTile / kTileRows;
  for (int64_t r0 = int64_t(blockIdx.y) * kTile; r0 < lay.rows; r0 += int64_t(gridDim.y) * kTile) {
    // Every global load of the tile is issued before the barrier and before any shared-memory
    // store: the operands are generic pointers the compiler must assume may point into shared
    // memory, so a load placed after a store to `tile` waits for it (and the store for its own load).
    // Staged operands read down a column (consecutive threads, consecutive rows: contiguous); the
    // others read along a row, straight into registers.
    T args[kRowsPerThread][N];
    scalar_t staging[kRowsPerThread][N];
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
#pragma unroll
      for (int k = 0; k < N; ++k) {
        if (lay.staged[k]) {
          const int64_t col = c0 + ty + j * kTileRows, row = r0 + tx;
          staging[j][k] = col < lay.row_len && row < lay.rows ? in.ptr[k][col * lay.col_stride[k] + row] : scalar_t(0);
        } else {
          const int64_t row = r0 + ty + j * kTileRows, col = c0 + tx;
          args[j][k] = row < lay.rows && col < lay.row_len
                           ? T(in.ptr[k][col * lay.col_stride[k] + row * lay.row_stride[k]]) : T(0);
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j)
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (lay.staged[k]) tile[k][ty + j * kTileRows][tx] = staging[j][k];
    __syncthreads();
    // Consecutive threads write consecutive columns of a row of the contiguous output.
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j)
#pragma unroll
      for (int k = 0; k < N; ++k)
        if (lay.staged[k]) args[j][k] = T(tile[k][tx][ty + j * kTileRows]);
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      const int64_t row = r0 + ty + j * kTileRows, col = c0 + tx;
      if (row < lay.rows && col < lay.row_len) out[row * lay.row_len + col] = scalar_t(Op{}(args[j]));
    }
    __syncthreads();  // the tile is refilled for the next r0
  }
}

// ---- strided: any layout; index math in Index (uint32_t when every offset fits) ------------------
template <class scalar_t, class Op, class Index, class Loads>
__global__ void __launch_bounds__(kThreads)
strided_kernel(scalar_t* __restrict__ out, Operands<void, Op::kArity> in, StridedIndexer<Op::kArity> ix,
               int64_t n, Loads loads) {
  constexpr int N = Op::kArity;
  using T = opmath_t<scalar_t>;
  for (int64_t i = global_thread(); i < n; i += grid_threads()) {
    const auto off = ix.template offsets<Index>(i);
    T args[N];
#pragma unroll
    for (int k = 0; k < N; ++k) args[k] = loads[k].template load<T>(in.ptr[k], int64_t(off[k]));
    out[i] = scalar_t(Op{}(args));
  }
}

template <class L, int N>
struct LoadSet {
  L l[N];
  __device__ __forceinline__ const L& operator[](int k) const { return l[k]; }
};

}  // namespace elementwise
}  // namespace tiles::cuda
