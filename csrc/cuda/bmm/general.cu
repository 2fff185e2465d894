// CUDA bmm, the general strided kernel: any dtype, any strides, batch broadcast through stride 0, any
// GPU. The fallback for everything the tensor-core paths do not take (see bmm/bmm.cu).
//
// Each block computes a kTile x kTile tile of one output matrix. Per step it stages a kTile x kDepth
// slab of a and a kDepth x kTile slab of b in shared memory (converted to the op-math type), and each
// of its 256 threads accumulates a 4 x 4 sub-tile in registers. A thread's rows and columns are
// spaced 16 apart, so a warp's shared-memory reads hit distinct banks (or broadcast). Global loads
// walk whichever of an operand's two matrix dims has unit stride, so both row- and column-major
// operands (a.transpose(1, 2), b.mT) load coalesced.
#include "cuda/bmm/paths.h"
#include "cuda/launch.cuh"
#include "tiles/dispatch.h"

namespace tiles::cuda::general {
namespace {

constexpr int kTile = 64;    // output tile edge
constexpr int kDepth = 16;   // k-slab depth
constexpr int kThreads = 256;
constexpr int kMicro = 4;    // each thread: kMicro x kMicro outputs
constexpr int kSpread = kTile / kMicro;  // 16: distance between a thread's rows (and columns)

// Stages the [rows x kDepth] slab (a) or [kDepth x cols] slab (b) starting at `src` into smem as
// [kDepth][kTile] (k-major), zero-filling outside the matrix.
//   `outer_stride` steps along the tile's m (or n) dim, `k_stride` along k.
template <class scalar_t, class Acc>
__device__ __forceinline__ void stage(Acc (*smem)[kTile + 1], const scalar_t* src, int64_t outer_stride,
                                      int64_t k_stride, int64_t outer_left, int64_t k_left) {
  const bool k_fastest = k_stride == 1;  // choose the order that makes neighbouring threads coalesce
#pragma unroll
  for (int r = 0; r < kTile * kDepth / kThreads; ++r) {
    const int e = threadIdx.x + r * kThreads;
    const int kk = k_fastest ? e % kDepth : e / kTile;
    const int oo = k_fastest ? e / kDepth : e % kTile;
    Acc v = Acc(0);
    if (oo < outer_left && kk < k_left) v = Acc(src[oo * outer_stride + kk * k_stride]);
    smem[kk][oo] = v;
  }
}

template <class scalar_t>
__global__ void __launch_bounds__(kThreads)
bmm_kernel(scalar_t* __restrict__ c, const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
           int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sab, int64_t sam, int64_t sak,
           int64_t sbb, int64_t sbk, int64_t sbn, int64_t tiles_n) {
  using Acc = opmath_t<scalar_t>;
  __shared__ Acc a_tile[kDepth][kTile + 1];  // +1: staging stores along kk do not collide in a bank
  __shared__ Acc b_tile[kDepth][kTile + 1];

  const int64_t m0 = int64_t(blockIdx.x / tiles_n) * kTile;
  const int64_t n0 = int64_t(blockIdx.x % tiles_n) * kTile;
  const int tx = threadIdx.x % kSpread, ty = threadIdx.x / kSpread;

  for (int64_t bi = blockIdx.y; bi < batch; bi += gridDim.y) {
    const scalar_t* a_blk = a + bi * sab + m0 * sam;
    const scalar_t* b_blk = b + bi * sbb + n0 * sbn;
    Acc acc[kMicro][kMicro] = {};
    for (int64_t k0 = 0; k0 < k; k0 += kDepth) {
      stage(a_tile, a_blk + k0 * sak, sam, sak, m - m0, k - k0);
      stage(b_tile, b_blk + k0 * sbk, sbn, sbk, n - n0, k - k0);
      __syncthreads();
#pragma unroll
      for (int kk = 0; kk < kDepth; ++kk) {
        Acc av[kMicro], bv[kMicro];
#pragma unroll
        for (int i = 0; i < kMicro; ++i) av[i] = a_tile[kk][ty + i * kSpread];
#pragma unroll
        for (int j = 0; j < kMicro; ++j) bv[j] = b_tile[kk][tx + j * kSpread];
#pragma unroll
        for (int i = 0; i < kMicro; ++i)
#pragma unroll
          for (int j = 0; j < kMicro; ++j) acc[i][j] += av[i] * bv[j];
      }
      __syncthreads();
    }
    scalar_t* c_blk = c + (bi * m + m0) * n + n0;
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const int64_t row = ty + i * kSpread;
#pragma unroll
      for (int j = 0; j < kMicro; ++j) {
        const int64_t col = tx + j * kSpread;
        if (m0 + row < m && n0 + col < n) c_blk[row * n + col] = scalar_t(acc[i][j]);
      }
    }
  }
}

template <class scalar_t>
void launch(const BmmProblem& p) {
  const int64_t tiles_m = (p.m + kTile - 1) / kTile, tiles_n = (p.n + kTile - 1) / kTile;
  TILES_CHECK(tiles_m * tiles_n < (int64_t(1) << 31), "tiles::bmm: output matrices of ", p.m, " x ", p.n,
              " are too large for one launch");
  const dim3 grid(unsigned(tiles_m * tiles_n), unsigned(std::min<int64_t>(p.batch, 65535)));
  bmm_kernel<scalar_t><<<grid, kThreads, 0, current_stream()>>>(
      p.out.data_ptr<scalar_t>(), p.a.const_data_ptr<scalar_t>(), p.b.const_data_ptr<scalar_t>(), p.batch,
      p.m, p.n, p.k, p.a_strides[0], p.a_strides[1], p.a_strides[2], p.b_strides[0], p.b_strides[1],
      p.b_strides[2], tiles_n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void bmm(const BmmProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::bmm", [&] { launch<scalar_t>(p); });
}

}  // namespace tiles::cuda::general
