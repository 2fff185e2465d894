// Launches one instantiation of the mma.sync bmm kernel (bmm/mma_kernel.cuh) with the tile shape of its
// atom. Included by mma_<kind>.cu, which instantiate every (atom, a order, b order) of one kind, so the
// kernels compile in parallel.
#pragma once

#include "cuda/bmm/mma_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::mma {

// Block and warp tiles per atom. TF32 and 16-bit: 128 x 128 blocks of eight 64 x 32 warps (64
// accumulators each). (fp64 runs its own kernel: bmm/dmma_kernel.cuh.)
template <class Atom>
struct ConfigFor { using type = Config<128, 128, 32, 64, 32, 4>; };
template <>
struct ConfigFor<Tf32> { using type = Config<128, 128, 16, 64, 32, 4>; };
// 3xTF32 holds a second set of accumulators (kFreshPerTile): 32 x 32 warps keep that in registers;
// 32-deep k-tiles halve how often the fresh sums are folded in.
template <>
struct ConfigFor<Tf32x3> { using type = Config<128, 64, 32, 32, 32, 3>; };

// The launch of the one-tile-per-block kernels (this one and the fp64 one, bmm/dmma_kernel.cuh): a
// block per BM x BN output tile along x (bmm/tile_order.cuh's order), batches (times K's slices) along
// y, walked with a stride of gridDim.y beyond 65535.
template <auto kKernel, int BM, int BN, class Elem>
void launch_tile_grid(Params<Elem> q, int threads, int smem_bytes) {
  allow_dynamic_smem<kKernel>(smem_bytes);
  q.tiles_m = int((q.m + BM - 1) / BM);
  q.tiles_n = int((q.n + BN - 1) / BN);
  const dim3 grid(unsigned(int64_t(q.tiles_m) * q.tiles_n), unsigned(std::min<int64_t>(q.batch * q.splits, 65535)));
  kKernel<<<grid, threads, smem_bytes, current_stream()>>>(q);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <class Atom, bool kMnA, bool kMnB, int kCopyBytes>
void launch(const Params<typename Atom::Elem>& p) {
  using Cfg = typename ConfigFor<Atom>::type;
  launch_tile_grid<&bmm_kernel<Atom, Cfg, kMnA, kMnB, kCopyBytes>, Cfg::BM, Cfg::BN>(
      p, Cfg::kThreads, kSmemBytes<Atom, Cfg, kMnA, kMnB>);
}

// Every (a order, b order) of one atom for one copy width (bmm/mma.cu's copy_bytes).
#define TILES_MMA_INSTANTIATE_WIDTH(ATOM, BYTES)                                          \
  template void launch<ATOM, false, false, BYTES>(const Params<typename ATOM::Elem>&);   \
  template void launch<ATOM, false, true, BYTES>(const Params<typename ATOM::Elem>&);    \
  template void launch<ATOM, true, false, BYTES>(const Params<typename ATOM::Elem>&);    \
  template void launch<ATOM, true, true, BYTES>(const Params<typename ATOM::Elem>&);
// 16-, 8- and 4-byte copies; 16-bit atoms also take width 2 (element-by-element register loads).
#define TILES_MMA_INSTANTIATE(ATOM)      \
  TILES_MMA_INSTANTIATE_WIDTH(ATOM, 16)  \
  TILES_MMA_INSTANTIATE_WIDTH(ATOM, 8)   \
  TILES_MMA_INSTANTIATE_WIDTH(ATOM, 4)

}  // namespace tiles::cuda::mma
