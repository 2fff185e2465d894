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

template <class Atom, bool kMnA, bool kMnB>
void launch(const Params<typename Atom::Elem>& p) {
  using Cfg = typename ConfigFor<Atom>::type;
  constexpr int kBytes = kSmemBytes<Atom, Cfg, kMnA, kMnB>;
  constexpr auto kernel = &bmm_kernel<Atom, Cfg, kMnA, kMnB>;
  allow_dynamic_smem<kernel>(kBytes);
  Params<typename Atom::Elem> q = p;
  q.tiles_m = int((p.m + Cfg::BM - 1) / Cfg::BM);
  q.tiles_n = int((p.n + Cfg::BN - 1) / Cfg::BN);
  const dim3 grid(unsigned(int64_t(q.tiles_m) * q.tiles_n), unsigned(std::min<int64_t>(p.batch, 65535)));
  kernel<<<grid, Cfg::kThreads, kBytes, current_stream()>>>(q);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

#define TILES_MMA_INSTANTIATE(ATOM)                                                   \
  template void launch<ATOM, false, false>(const Params<typename ATOM::Elem>&);      \
  template void launch<ATOM, false, true>(const Params<typename ATOM::Elem>&);       \
  template void launch<ATOM, true, false>(const Params<typename ATOM::Elem>&);       \
  template void launch<ATOM, true, true>(const Params<typename ATOM::Elem>&);

}  // namespace tiles::cuda::mma
