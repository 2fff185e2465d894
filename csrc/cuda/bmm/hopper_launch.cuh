// Launches one instantiation of the Hopper bmm kernel. Included by the per-dtype .cu files, which
// instantiate every (tile width, A major order, B major order) so the kernels compile in parallel.
#pragma once

#include "cuda/bmm/hopper_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {

template <class T, int BN, bool kTransA, bool kTransB>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
            const GemmShape& shape, int grid) {
  using Cfg = TileConfig<BN>;
  constexpr auto kernel = &hopper_bmm_kernel<T, BN, kTransA, kTransB>;
  allow_dynamic_smem<kernel>(int(Cfg::kSmemBytes));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, current_stream()>>>(map_a, map_b, map_c, c, shape);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

#define TILES_HOPPER_LAUNCH(T, BN, TA, TB) \
  template void launch<T, BN, TA, TB>(const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, T*, const GemmShape&, int);
#define TILES_HOPPER_INSTANTIATE(T, BN)      \
  TILES_HOPPER_LAUNCH(T, BN, false, false) \
  TILES_HOPPER_LAUNCH(T, BN, false, true)  \
  TILES_HOPPER_LAUNCH(T, BN, true, false)  \
  TILES_HOPPER_LAUNCH(T, BN, true, true)

}  // namespace tiles::cuda::hopper
