// CUDA bmm, the general strided kernel: any dtype, any strides, batch broadcast through stride 0, any
// GPU. The fallback for everything the tensor-core paths do not take (see bmm/bmm.cu).
//
// Each block computes a kTile x kTile tile of one output matrix: 64 x 64, or 32 x 32 for small products
// whose 64-wide tiles would not give every SM a block (tile_for). Per step it stages a kTile x depth
// slab of a and a depth x kTile slab of b in shared memory (converted to the op-math type), and each of
// its 256 threads accumulates a 4 x 4 (2 x 2) sub-tile in registers. A thread's rows and columns are
// consecutive, so it reads each k's 4 (2) values of a and of b as one vector (a 16- or 8-byte load; two
// for double): a quarter of the shared-memory instructions of one value a load, the warp's a reads a
// broadcast and its b reads 16 threads' consecutive vectors. Global loads walk
// whichever of an operand's two matrix dims has unit stride, so both row- and column-major
// operands (a.transpose(1, 2), b.mT) load coalesced. The next slab's loads are issued into registers
// before the current slab is multiplied, so their latency hides behind the arithmetic: small products
// (a narrow layer's, tens of microseconds of work or less) are a chain of these round trips.
//
// Few output tiles over a long K (a matrix-vector product, a weight gradient of a narrow layer) would
// leave most SMs idle while each block walks all of K: there the k-blocks are split over gridDim.z
// (split-K) and the splits' partial tiles, in the op-math type, are summed in split order
// (deterministic). Up to 8 splits on an sm_90 device form a thread block cluster and sum in its
// shared memory, in the same kernel; otherwise each split writes its partials to global memory and a
// second kernel sums them.
#include <ATen/ATen.h>

#include "binding/dispatch.h"
#include "binding/format.h"
#include "cuda/bmm/paths.h"
#include "cuda/bmm/split_k.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::general {
namespace {

constexpr int kThreads = 256;
constexpr int kSpread = 16;  // 16 x 16 threads across a tile
template <int kTile>
constexpr int kMicroOf = kTile / kSpread;  // each thread: kMicroOf x kMicroOf outputs of a kTile x kTile tile
// A slab row's padding: rows stay aligned to a thread's vector (16 bytes; 32 for double's 4 values); a store along
// k (slab rows 68 words apart) meets a 4-way bank conflict, once per element a slab.
constexpr int kPad = 4;
// k-slab depth: deep slabs make few round trips to memory; two slabs of double stay within the 48 KiB
// of static shared memory.
template <class Acc>
constexpr int kDepth = sizeof(Acc) == 8 ? 32 : 64;

// A thread's kMicro consecutive values (of one k's slab row, or of one output row), moved as one vector.
template <class T, int kMicro>
struct alignas(kMicro * sizeof(T)) Run {
  T v[kMicro];
};

// One operand's [rows x depth] slab (a) or [depth x cols] slab (b), held in registers between its load
// from global memory and its store to shared memory as [depth][kTile] (k-major).
//   `outer_stride` steps along the tile's m (or n) dim, `k_stride` along k; zeros outside the matrix.
template <class scalar_t, class Acc, int kTile>
struct Slab {
  static constexpr int D = kDepth<Acc>;
  static constexpr int kPerThread = kTile * D / kThreads;
  Acc v[kPerThread];

  // Element r of this thread: (kk, oo) ordered so that neighbouring threads touch neighbouring addresses.
  // The block's threads are a whole number of rows of either order, so along r only one of kk and oo
  // moves, by a constant step: element r is element 0 plus r steps.
  static_assert(kThreads % D == 0 && kThreads % kTile == 0, "a thread's elements are a fixed step apart");
  static __device__ __forceinline__ void place(int r, bool k_fastest, int& kk, int& oo) {
    const int e = threadIdx.x + r * kThreads;
    kk = k_fastest ? e % D : e / kTile;
    oo = k_fastest ? e / D : e % kTile;
  }

  // Every element's load is issued before any arrives; the address walks by one 64-bit step an element
  // (with an index product per element, the unrolled loads kept a 64-bit address each live: 128-246
  // registers a thread, one or two blocks an SM).
  __device__ __forceinline__ void load(const scalar_t* src, int64_t outer_stride, int64_t k_stride,
                                       int64_t outer_left, int64_t k_left) {
    const bool k_fastest = k_stride == 1;
    int kk0, oo0;
    place(0, k_fastest, kk0, oo0);
    const int dk = k_fastest ? 0 : kThreads / kTile, doo = k_fastest ? kThreads / D : 0;
    const scalar_t* at = src + oo0 * outer_stride + kk0 * k_stride;
    const int64_t step = doo * outer_stride + dk * k_stride;
#pragma unroll
    for (int r = 0; r < kPerThread; ++r, at += step) {
      const bool inside = oo0 + r * doo < outer_left && kk0 + r * dk < k_left;
      v[r] = inside ? Acc(*at) : Acc(0);
    }
  }

  __device__ __forceinline__ void store(Acc (*smem)[kTile + kPad], int64_t k_stride) const {
#pragma unroll
    for (int r = 0; r < kPerThread; ++r) {
      int kk, oo;
      place(r, k_stride == 1, kk, oo);
      smem[kk][oo] = v[r];
    }
  }
};

// The splits of one output tile, a cluster of gridDim.z blocks along z (block rank = split), sum their
// partial tiles (`acc`, staged in `staging`) in split order; each block sums and stores a band of the
// tile's outputs (sum_cluster_partials).
template <class scalar_t, class Acc, int kTile>
__device__ __forceinline__ void sum_cluster_splits(scalar_t* __restrict__ c_blk,
                                                   const Acc (&acc)[kMicroOf<kTile>][kMicroOf<kTile>], Acc* staging,
                                                   int64_t rows_left, int64_t cols_left, int64_t n) {
  constexpr int kMicro = kMicroOf<kTile>;
  const int tx = threadIdx.x % kSpread, ty = threadIdx.x / kSpread;
#pragma unroll
  for (int i = 0; i < kMicro; ++i)
#pragma unroll
    for (int j = 0; j < kMicro; ++j) staging[(kMicro * ty + i) * kTile + kMicro * tx + j] = acc[i][j];
  sum_cluster_partials<kThreads>(staging, kTile * kTile, [&](int e, Acc sum) {
    const int row = e / kTile, col = e % kTile;
    if (row < rows_left && col < cols_left) c_blk[row * n + col] = scalar_t(sum);
  });
}

// Writes c[batch][m][n] from k-blocks [blockIdx.z * k_split, + k_split): with one split (gridDim.z = 1)
// or kClusterSum, c is the output (Out = scalar_t); otherwise this split's partials (Out = the op-math
// type) at c + blockIdx.z * batch * m * n. 32-wide tiles are bounded to two blocks an SM (unbounded,
// ptxas gave the float one 148 registers: one block).
template <class scalar_t, class Out, int kTile, bool kClusterSum = false>
__global__ void __launch_bounds__(kThreads, kTile == 32 ? 2 : 1)
bmm_kernel(Out* __restrict__ c, const scalar_t* __restrict__ a, const scalar_t* __restrict__ b,
           int64_t batch, int64_t m, int64_t n, int64_t k, int64_t sab, int64_t sam, int64_t sak,
           int64_t sbb, int64_t sbk, int64_t sbn, int64_t tiles_n, int64_t k_split) {
  using Acc = opmath_t<scalar_t>;
  constexpr int D = kDepth<Acc>;
  constexpr int kMicro = kMicroOf<kTile>;
  // a's and b's slabs. With kClusterSum the same memory then stages the block's partial tile.
  __shared__ __align__(32) Acc slabs[2][D][kTile + kPad];
  static_assert(2 * D * (kTile + kPad) >= kTile * kTile, "a partial tile must fit in the slabs' memory");
  Acc(*a_tile)[kTile + kPad] = slabs[0];
  Acc(*b_tile)[kTile + kPad] = slabs[1];
  using AccRun = Run<Acc, kMicro>;
  using OutRun = Run<Out, kMicro>;

  const int64_t m0 = int64_t(blockIdx.x / tiles_n) * kTile;
  const int64_t n0 = int64_t(blockIdx.x % tiles_n) * kTile;
  const int tx = threadIdx.x % kSpread, ty = threadIdx.x / kSpread;

  const int64_t k_begin = int64_t(blockIdx.z) * k_split, k_end = std::min(k, k_begin + k_split);
  if constexpr (!kClusterSum) c += int64_t(blockIdx.z) * batch * m * n;
  for (int64_t bi = blockIdx.y; bi < batch; bi += gridDim.y) {
    const scalar_t* a_blk = a + bi * sab + m0 * sam;
    const scalar_t* b_blk = b + bi * sbb + n0 * sbn;
    Acc acc[kMicro][kMicro] = {};
    Slab<scalar_t, Acc, kTile> a_next, b_next;
    if (k_begin < k_end) {
      a_next.load(a_blk + k_begin * sak, sam, sak, m - m0, k - k_begin);
      b_next.load(b_blk + k_begin * sbk, sbn, sbk, n - n0, k - k_begin);
    }
    for (int64_t k0 = k_begin; k0 < k_end; k0 += D) {
      a_next.store(a_tile, sak);
      b_next.store(b_tile, sbk);
      __syncthreads();
      const int64_t k1 = k0 + D;
      if (k1 < k_end) {
        a_next.load(a_blk + k1 * sak, sam, sak, m - m0, k - k1);
        b_next.load(b_blk + k1 * sbk, sbn, sbk, n - n0, k - k1);
      }
      const int64_t depth = std::min<int64_t>(D, k_end - k0);  // a short last slab skips its zero rows
#pragma unroll
      for (int k8 = 0; k8 < D; k8 += 8) {
        if (k8 >= depth) break;
#pragma unroll
        for (int kk = k8; kk < k8 + 8; ++kk) {
          const AccRun av = *reinterpret_cast<const AccRun*>(&a_tile[kk][kMicro * ty]);
          const AccRun bv = *reinterpret_cast<const AccRun*>(&b_tile[kk][kMicro * tx]);
#pragma unroll
          for (int i = 0; i < kMicro; ++i)
#pragma unroll
            for (int j = 0; j < kMicro; ++j) acc[i][j] += av.v[i] * bv.v[j];
        }
      }
      __syncthreads();
    }
    Out* c_blk = c + (bi * m + m0) * n + n0;
    if constexpr (kClusterSum) {
      sum_cluster_splits<scalar_t, Acc, kTile>(c_blk, acc, &slabs[0][0][0], m - m0, n - n0, n);
      continue;
    }
    // A thread's kMicro outputs of a row are consecutive: one vector store where they are all inside the
    // matrix and aligned as one, else one at a time. Alignment is tested per row, not once a launch: where
    // n % kMicro != 0 some rows still align (every other one for 32-wide tiles and odd n).
    const int64_t col0 = kMicro * tx;
#pragma unroll
    for (int i = 0; i < kMicro; ++i) {
      const int64_t row = kMicro * ty + i;
      if (m0 + row >= m) continue;
      Out* dst = c_blk + row * n + col0;
      if (n0 + col0 + kMicro <= n && reinterpret_cast<uintptr_t>(dst) % sizeof(OutRun) == 0) {
        OutRun run;
#pragma unroll
        for (int j = 0; j < kMicro; ++j) run.v[j] = Out(acc[i][j]);
        *reinterpret_cast<OutRun*>(dst) = run;
        continue;
      }
#pragma unroll
      for (int j = 0; j < kMicro; ++j)
        if (n0 + col0 + j < n) dst[j] = Out(acc[i][j]);
    }
  }
}

// Split-K (fill_k_splits): about four blocks per SM (a block has one slab's loads in flight at a time:
// the other blocks of its SM hide what its arithmetic does not), each split at least kMinSplitK deep (a
// slab of float32 accumulators, two of float64). Small products want many short splits rather than one
// block per tile walking all of K (NOTES.md, "General kernel and small float32 products").
constexpr int64_t kMinSplitK = 64, kBlocksPerSm = 4;

template <class scalar_t, int kTile>
void launch(const BmmProblem& p) {
  using Acc = opmath_t<scalar_t>;
  const int64_t tiles_m = (p.m + kTile - 1) / kTile, tiles_n = (p.n + kTile - 1) / kTile;
  TILES_CHECK(tiles_m * tiles_n < (int64_t(1) << 31), "tiles::bmm: output matrices of ", p.m, " x ", p.n,
              " are too large for one launch");
  const int64_t batch_blocks = std::min<int64_t>(p.batch, 65535);
  const int64_t total = p.batch * p.m * p.n;
  constexpr int64_t depth = kDepth<Acc>;
  const int64_t splits = fill_k_splits(tiles_m * tiles_n * batch_blocks, p.k, kMinSplitK, total, kBlocksPerSm);
  // Each split's k-range, whole k-slabs.
  const int64_t k_split = ((p.k + splits - 1) / splits + depth - 1) / depth * depth;
  const int64_t used = splits > 1 ? (p.k + k_split - 1) / k_split : 1;
  const dim3 grid(unsigned(tiles_m * tiles_n), unsigned(batch_blocks), unsigned(used));
  const scalar_t* a = p.a.const_data_ptr<scalar_t>();
  const scalar_t* b = p.b.const_data_ptr<scalar_t>();
  const int64_t split_depth = used > 1 ? k_split : std::max<int64_t>(p.k, 1);
  auto run = [&](auto* c) {
    bmm_kernel<scalar_t, std::remove_pointer_t<decltype(c)>, kTile><<<grid, kThreads, 0, current_stream()>>>(
        c, a, b, p.batch, p.m, p.n, p.k, p.a_strides[0], p.a_strides[1], p.a_strides[2], p.b_strides[0],
        p.b_strides[1], p.b_strides[2], tiles_n, split_depth);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  };
  if (used == 1) {
    run(p.out.data_ptr<scalar_t>());
    return;
  }
  // One kernel, no partials, no second launch, where the launch fits on the GPU at once: a cluster's
  // blocks wait at its barrier for its slowest split, where the split kernel's blocks retire as they
  // finish and the next wave takes their place (H200: 2 x 256 x 64 x 512 on 32-wide tiles, 8 splits, 10.1
  // us in clusters, 7.4 in the second kernel; 256 x 256 x 256 10.3 against 7.1; NOTES.md N1j).
  constexpr auto in_clusters = bmm_kernel<scalar_t, scalar_t, kTile, true>;
  if (used <= kPortableCluster && clusters_available() &&
      tiles_m * tiles_n * batch_blocks <= resident_clusters<in_clusters>(dim3(kThreads), int(used))) {
    const ClusterLaunch cluster(grid, dim3(kThreads), dim3(1, 1, unsigned(used)), current_stream());
    C10_CUDA_CHECK(cudaLaunchKernelEx(&cluster.config, in_clusters, p.out.data_ptr<scalar_t>(),
                                      a, b, p.batch, p.m, p.n, p.k, p.a_strides[0], p.a_strides[1],
                                      p.a_strides[2], p.b_strides[0], p.b_strides[1], p.b_strides[2], tiles_n,
                                      split_depth));
    return;
  }
  at::Tensor partials = at::empty({used, total}, p.out.options().dtype(c10::CppTypeToScalarType<Acc>::value));
  run(partials.data_ptr<Acc>());
  sum_splits<scalar_t, Acc>(p.out.data_ptr<scalar_t>(), partials, total, int(used));
}

// 32-wide tiles for products of at most 7 x 2^21 (2^23.8) multiply-adds whose 64-wide tiles leave SMs
// idle: there four times the blocks, each a quarter of the work, finish sooner; above it their 2 x 2
// sub-tiles (half the arithmetic per shared-memory load) lose. Since the vector reads (4090c50) 32-wide
// tiles won every float32 product timed from 2^22.4 to 2^23.7 (H200, "highest", flushed us, 32 against 64:
// 4 x 128 x 127 x 100 8.0 against 12.3, 1 x 474 x 138 x 202 11.6 against 14.4, 2 x 633 x 10 x 944 19.6
// against 23.8, 8 x 64 x 64 x 256 9.6 against 10.8) and lost at 2^24 (2 x 256 x 64 x 512, eight splits
// of K: 13.8 against 10.6); NOTES.md, "General kernel and small float32 products". Timed in float32 only;
// the other dtypes that reach this kernel (operands with no unit-stride dim) share the rule.
constexpr int64_t kMaxMacsFor32 = int64_t(7) << 21;

}  // namespace

int tile_for(const BmmProblem& p) {
  const int64_t blocks_of_64 = (p.m + 63) / 64 * ((p.n + 63) / 64) * std::min<int64_t>(p.batch, 65535);
  const int64_t macs = p.batch * p.m * p.n * p.k;
  return blocks_of_64 < sm_count() && macs <= kMaxMacsFor32 ? 32 : 64;
}

void bmm(const BmmProblem& p, int tile) {
  if (tile == 0) tile = tile_for(p);
  TORCH_INTERNAL_ASSERT(tile == 32 || tile == 64, "general::bmm: tile ", tile);
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::bmm", [&] {
    tile == 32 ? launch<scalar_t, 32>(p) : launch<scalar_t, 64>(p);
  });
}

}  // namespace tiles::cuda::general
