// The fp64 bmm kernel (bmm/dmma_kernel.cuh), all four operand major orders, 16- and 8-byte copies.
#include "cuda/bmm/dmma_kernel.cuh"
#include "cuda/bmm/mma_launch.cuh"  // launch_tile_grid

namespace tiles::cuda::dmma {

template <bool kMnA, bool kMnB, int kCopyBytes>
void launch(const Params<double>& p) {
  mma::launch_tile_grid<&dmma_bmm_kernel<kMnA, kMnB, kCopyBytes>, BM, BN>(p, kThreads, kSmemBytes);
}

#define TILES_DMMA_INSTANTIATE(BYTES)                                  \
  template void launch<false, false, BYTES>(const Params<double>&);  \
  template void launch<false, true, BYTES>(const Params<double>&);   \
  template void launch<true, false, BYTES>(const Params<double>&);   \
  template void launch<true, true, BYTES>(const Params<double>&);
TILES_DMMA_INSTANTIATE(16)
TILES_DMMA_INSTANTIATE(8)
#undef TILES_DMMA_INSTANTIATE

}  // namespace tiles::cuda::dmma
