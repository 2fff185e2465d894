// Launches one instantiation of the Hopper bmm kernel. Included by the per-dtype .cu files, which
// instantiate every (tile width, A major order, B major order) so the kernels compile in parallel.
#pragma once

#include "cuda/bmm/hopper_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {

// Clusters of two blocks of `kernel` that fit on the device at once, asked once per kernel and device.
template <auto kKernel>
int max_active_pairs(int threads, size_t smem_bytes) {
  static std::atomic<int> known[64] = {};  // 0: not asked yet
  const int device = c10::cuda::current_device();
  std::atomic<int>* slot = device < 64 ? &known[device] : nullptr;
  if (slot && slot->load(std::memory_order_relaxed) > 0) return slot->load(std::memory_order_relaxed);
  ClusterLaunch launch(dim3(2), dim3(threads), dim3(2, 1, 1), nullptr);
  launch.config.dynamicSmemBytes = smem_bytes;
  int clusters = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kKernel, &launch.config));
  clusters = std::max(clusters, 1);
  if (slot) slot->store(clusters, std::memory_order_relaxed);
  return clusters;
}

// `grid` blocks, or where shape.pair == 2 as many clusters of two as fit at once (a persistent grid
// whose later clusters waited for a free pair of SMs would run their tiles after everyone else's).
template <class T, int BN, bool kTransA, bool kTransB>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
            const GemmShape& shape, int grid) {
  using Cfg = TileConfig<BN>;
  constexpr auto kernel = &hopper_bmm_kernel<T, BN, kTransA, kTransB>;
  allow_dynamic_smem<kernel>(int(Cfg::kSmemBytes));
  if (shape.pair == 1) {
    kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, current_stream()>>>(map_a, map_b, map_c, c, shape);
  } else {
    const int pairs = std::min(grid / 2, max_active_pairs<kernel>(Cfg::kThreads, Cfg::kSmemBytes));
    ClusterLaunch launch(dim3(2 * pairs), dim3(Cfg::kThreads), dim3(2, 1, 1), current_stream());
    launch.config.dynamicSmemBytes = Cfg::kSmemBytes;
    C10_CUDA_CHECK(cudaLaunchKernelEx(&launch.config, kernel, map_a, map_b, map_c, c, shape));
  }
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
