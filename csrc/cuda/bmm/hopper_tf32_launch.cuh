// Launches one instantiation of the Hopper float32 bmm kernel (bmm/hopper_tf32_kernel.cuh). Included
// by the per-variant .cu files, which instantiate every operand role layout so the kernels compile in
// parallel.
#pragma once

#include "cuda/bmm/hopper_tf32_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {

template <int kSplit, int BQ, bool kRKMajor, bool kSwap, bool kQMnMajor, bool kCopies, bool kPingPong>
void launch_tf32(const CUtensorMap& map_r, const CUtensorMap& map_q, const CUtensorMap& map_c, float* c,
                 const Tf32CopyShape& shape, int grid) {
  using Cfg = Tf32Config<kSplit, BQ, kPingPong>;
  constexpr auto kernel = &hopper_tf32_kernel<kSplit, BQ, kRKMajor, kSwap, kQMnMajor, kCopies, kPingPong>;
  allow_dynamic_smem<kernel>(int(Cfg::kSmemBytes));
  // the variants without copies take the plain shape (the copied operands sliced off)
  const Tf32ShapeOf<kCopies>& kernel_shape = shape;
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, current_stream()>>>(map_r, map_q, map_c, c, kernel_shape);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The role layouts the host uses (bmm/hopper_tf32.cu): R K-major; R MN-major; R MN-major with the
// roles swapped; R and Q both MN-major. COPIES: the variants that copy operands TMA cannot address, in
// .cu files of their own (bmm_hopper_tf32*_copies.cu) so that both sets compile in parallel. PING_PONG:
// the ping-pong consumers, NT at 128 columns only (bmm_hopper_tf32_n128_ping_pong.cu).
#define TILES_HOPPER_TF32_LAUNCH(SPLIT, BQ, RK, SWAP, QMN, COPIES, PING_PONG)                                      \
  template void launch_tf32<SPLIT, BQ, RK, SWAP, QMN, COPIES, PING_PONG>(                                         \
      const CUtensorMap&, const CUtensorMap&, const CUtensorMap&, float*, const Tf32CopyShape&, int);
#define TILES_HOPPER_TF32_INSTANTIATE(SPLIT, BQ, COPIES)                  \
  TILES_HOPPER_TF32_LAUNCH(SPLIT, BQ, true, false, false, COPIES, false)  \
  TILES_HOPPER_TF32_LAUNCH(SPLIT, BQ, false, false, false, COPIES, false) \
  TILES_HOPPER_TF32_LAUNCH(SPLIT, BQ, false, true, false, COPIES, false)  \
  TILES_HOPPER_TF32_LAUNCH(SPLIT, BQ, false, false, true, COPIES, false)

}  // namespace tiles::cuda::hopper
