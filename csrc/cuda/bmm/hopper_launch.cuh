// Launches one instantiation of the Hopper bmm kernel. Included by the per-dtype .cu files, which
// instantiate every (tile width, A major order, B major order) so the kernels compile in parallel;
// the *_pairs.cu files instantiate the paired blocks (Pair::share_b and Pair::share_a) of some widths,
// the *_whole_tile.cu ones the 256-wide blocks with whole-tile store buffers, the *_tall.cu ones the
// 192 x 192 tiles, the *_small.cu ones the 64 x 64 tiles.
#pragma once

#include "cuda/bmm/hopper_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {

// Single blocks of the kernel, `grid` of them.
template <class T, int BN, bool kTransA, bool kTransB, bool kWholeTile, int kRows = 128>
void launch_blocks(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                   const GemmShape& shape, int grid) {
  using Cfg = TileConfig<BN, kWholeTile, kRows>;
  constexpr auto kernel = &hopper_bmm_kernel<T, BN, kTransA, kTransB, Pair::none, kWholeTile, kRows>;
  allow_dynamic_smem<kernel>(int(Cfg::kSmemBytes));
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, current_stream()>>>(map_a, map_b, map_c, c, shape);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <class T, int BN, bool kTransA, bool kTransB>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
            const GemmShape& shape, int grid) {
  launch_blocks<T, BN, kTransA, kTransB, false>(map_a, map_b, map_c, c, shape, grid);
}

// 256-wide tiles with buffers for the whole output tile (Store::tma_whole_tile).
template <class T, bool kTransA, bool kTransB>
void launch_whole_tile(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                       const GemmShape& shape, int grid) {
  launch_blocks<T, 256, kTransA, kTransB, true>(map_a, map_b, map_c, c, shape, grid);
}

// Square tiles of other than 128 rows (TileConfig's kRows): tall ones, 192 x 192, and small ones, 64 x 64.
template <class T, int kSide, bool kTransA, bool kTransB>
void launch_square(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                   const GemmShape& shape, int grid) {
  launch_blocks<T, kSide, kTransA, kTransB, false, kSide>(map_a, map_b, map_c, c, shape, grid);
}

// Clusters of two blocks of kKernel that fit on the device at once, asked once per kernel and device.
template <auto kKernel>
int max_active_pairs(int threads, size_t smem_bytes) {
  static std::atomic<int> known[64] = {};
  return once_per_device(known, c10::cuda::current_device(), [&] {
    ClusterLaunch probe(dim3(2), dim3(threads), dim3(2, 1, 1), nullptr);
    probe.config.dynamicSmemBytes = smem_bytes;
    int clusters = 0;
    C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kKernel, &probe.config));
    return std::max(clusters, 1);
  });
}

// Paired blocks: `grid` / 2 clusters of two, or as many as fit at once (a persistent grid whose later
// clusters waited for a free pair of SMs would run their tiles after everyone else's).
template <class T, int BN, bool kTransA, bool kTransB, Pair kPair>
void launch_pair_kernel(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                        const GemmShape& shape, int grid) {
  using Cfg = TileConfig<BN>;
  constexpr auto kernel = &hopper_bmm_kernel<T, BN, kTransA, kTransB, kPair>;
  allow_dynamic_smem<kernel>(int(Cfg::kSmemBytes));
  const int pairs = std::min(grid / 2, max_active_pairs<kernel>(Cfg::kThreads, Cfg::kSmemBytes));
  ClusterLaunch launch(dim3(2 * pairs), dim3(Cfg::kThreads), dim3(2, 1, 1), current_stream());
  launch.config.dynamicSmemBytes = Cfg::kSmemBytes;
  C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, map_a, map_b, map_c, c, shape));
}

template <class T, int BN, bool kTransA, bool kTransB>
void launch_pair(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                 const GemmShape& shape, int grid, Pair pair) {
  if (pair == Pair::share_b) launch_pair_kernel<T, BN, kTransA, kTransB, Pair::share_b>(map_a, map_b, map_c, c, shape, grid);
  else launch_pair_kernel<T, BN, kTransA, kTransB, Pair::share_a>(map_a, map_b, map_c, c, shape, grid);
}

#define TILES_HOPPER_LAUNCH(T, BN, TA, TB) \
  template void launch<T, BN, TA, TB>(const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, T*, const GemmShape&, int);
#define TILES_HOPPER_INSTANTIATE(T, BN)      \
  TILES_HOPPER_LAUNCH(T, BN, false, false) \
  TILES_HOPPER_LAUNCH(T, BN, false, true)  \
  TILES_HOPPER_LAUNCH(T, BN, true, false)  \
  TILES_HOPPER_LAUNCH(T, BN, true, true)

#define TILES_HOPPER_LAUNCH_WHOLE_TILE(T, TA, TB) \
  template void launch_whole_tile<T, TA, TB>(const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, T*, \
                                             const GemmShape&, int);
#define TILES_HOPPER_INSTANTIATE_WHOLE_TILE(T)      \
  TILES_HOPPER_LAUNCH_WHOLE_TILE(T, false, false) \
  TILES_HOPPER_LAUNCH_WHOLE_TILE(T, false, true)  \
  TILES_HOPPER_LAUNCH_WHOLE_TILE(T, true, false)  \
  TILES_HOPPER_LAUNCH_WHOLE_TILE(T, true, true)

#define TILES_HOPPER_LAUNCH_SQUARE(T, SIDE, TA, TB)                                                     \
  template void launch_square<T, SIDE, TA, TB>(const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, T*, \
                                               const GemmShape&, int);
#define TILES_HOPPER_INSTANTIATE_SQUARE(T, SIDE)      \
  TILES_HOPPER_LAUNCH_SQUARE(T, SIDE, false, false) \
  TILES_HOPPER_LAUNCH_SQUARE(T, SIDE, false, true)  \
  TILES_HOPPER_LAUNCH_SQUARE(T, SIDE, true, false)  \
  TILES_HOPPER_LAUNCH_SQUARE(T, SIDE, true, true)

#define TILES_HOPPER_LAUNCH_PAIR(T, BN, TA, TB)                                                                  \
  template void launch_pair<T, BN, TA, TB>(const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, T*, \
                                           const GemmShape&, int, Pair);
#define TILES_HOPPER_INSTANTIATE_PAIRS(T, BN)     \
  TILES_HOPPER_LAUNCH_PAIR(T, BN, false, false) \
  TILES_HOPPER_LAUNCH_PAIR(T, BN, false, true)  \
  TILES_HOPPER_LAUNCH_PAIR(T, BN, true, false)  \
  TILES_HOPPER_LAUNCH_PAIR(T, BN, true, true)

}  // namespace tiles::cuda::hopper
