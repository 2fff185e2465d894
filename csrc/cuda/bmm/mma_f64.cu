// The fp64 bmm kernel (bmm/dmma_kernel.cuh), all four operand major orders.
#include "cuda/bmm/dmma_kernel.cuh"
#include "cuda/bmm/mma_launch.cuh"  // launch_tile_grid

namespace tiles::cuda::dmma {

template <bool kMnA, bool kMnB>
void launch(const Params<double>& p) {
  mma::launch_tile_grid<&dmma_bmm_kernel<kMnA, kMnB>, BM, BN>(p, kThreads, kSmemBytes);
}

template void launch<false, false>(const Params<double>&);
template void launch<false, true>(const Params<double>&);
template void launch<true, false>(const Params<double>&);
template void launch<true, true>(const Params<double>&);

}  // namespace tiles::cuda::dmma
