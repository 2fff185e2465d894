// Launches one instantiation of the mma.sync bmm kernel (bmm/mma_kernel.cuh) with the tile shape of its
// atom and size (ConfigFor). Included by instances/bmm_mma_<kind>[_small].cu, which instantiate every
// (a order, b order, copy width) of one atom and size, so the kernels compile in parallel.
#pragma once

#include "cuda/bmm/mma_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::mma {

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

template <class Atom, TileSize kSize, bool kMnA, bool kMnB, int kCopyA, int kCopyB>
void launch(const Params<typename Atom::Elem>& p) {
  using Cfg = typename ConfigFor<Atom, kSize>::type;
  launch_tile_grid<&bmm_kernel<Atom, Cfg, kMnA, kMnB, kCopyA, kCopyB>, Cfg::BM, Cfg::BN>(
      p, Cfg::kThreads, kSmemBytes<Atom, Cfg, kMnA, kMnB>);
}

// Every (a order, b order) of one atom and tile size for one copy width of a and one of b (bmm/mma.cu's
// launch_width); the same width for both, most of them.
#define TILES_MMA_INSTANTIATE_WIDTHS(ATOM, SIZE, A, B)                                         \
  template void launch<ATOM, SIZE, false, false, A, B>(const Params<typename ATOM::Elem>&);  \
  template void launch<ATOM, SIZE, false, true, A, B>(const Params<typename ATOM::Elem>&);   \
  template void launch<ATOM, SIZE, true, false, A, B>(const Params<typename ATOM::Elem>&);   \
  template void launch<ATOM, SIZE, true, true, A, B>(const Params<typename ATOM::Elem>&);
#define TILES_MMA_INSTANTIATE_WIDTH(ATOM, SIZE, BYTES) TILES_MMA_INSTANTIATE_WIDTHS(ATOM, SIZE, BYTES, BYTES)
// One 16-bit operand through registers, the other in 16-byte copies, either way round.
#define TILES_MMA_INSTANTIATE_MIXED(ATOM, SIZE) \
  TILES_MMA_INSTANTIATE_WIDTHS(ATOM, SIZE, 2, 16) \
  TILES_MMA_INSTANTIATE_WIDTHS(ATOM, SIZE, 16, 2)
// 16-, 8- and 4-byte copies; 16-bit atoms also take width 2 (element-by-element register loads).
#define TILES_MMA_INSTANTIATE(ATOM, SIZE)      \
  TILES_MMA_INSTANTIATE_WIDTH(ATOM, SIZE, 16)  \
  TILES_MMA_INSTANTIATE_WIDTH(ATOM, SIZE, 8)   \
  TILES_MMA_INSTANTIATE_WIDTH(ATOM, SIZE, 4)

}  // namespace tiles::cuda::mma
