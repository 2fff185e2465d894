// Launches one instantiation of the Hopper bmm kernel. Included by the per-dtype .cu files, which
// instantiate every (tile width, A major order, B major order) so the kernels compile in parallel.
#pragma once

#include <atomic>

#include "cuda/bmm/hopper_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {

template <class T, int BN, bool kTransA, bool kTransB>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
            const GemmShape& shape, int grid) {
  using Cfg = TileConfig<BN>;
  auto* kernel = &hopper_bmm_kernel<T, BN, kTransA, kTransB>;
  // More than 48 KiB of dynamic shared memory must be asked for, once per kernel and device.
  static std::atomic<uint64_t> raised{0};  // bit d: done on device d
  const int device = c10::cuda::current_device();
  const uint64_t bit = uint64_t(1) << (device % 64);
  if (!(raised.load(std::memory_order_relaxed) & bit)) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(Cfg::kSmemBytes)));
    raised.fetch_or(bit);
  }
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
