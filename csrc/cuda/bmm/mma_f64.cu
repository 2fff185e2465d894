// The fp64 bmm kernel (bmm/dmma_kernel.cuh), all four operand major orders.
#include "cuda/bmm/dmma_kernel.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::dmma {

template <bool kMnA, bool kMnB>
void launch(const Params<double>& p) {
  constexpr auto kernel = &dmma_bmm_kernel<kMnA, kMnB>;
  allow_dynamic_smem<kernel>(kSmemBytes);
  Params<double> q = p;
  q.tiles_m = int((p.m + BM - 1) / BM);
  q.tiles_n = int((p.n + BN - 1) / BN);
  const dim3 grid(unsigned(int64_t(q.tiles_m) * q.tiles_n), unsigned(std::min<int64_t>(p.batch, 65535)));
  kernel<<<grid, kThreads, kSmemBytes, current_stream()>>>(q);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template void launch<false, false>(const Params<double>&);
template void launch<false, true>(const Params<double>&);
template void launch<true, false>(const Params<double>&);
template void launch<true, true>(const Params<double>&);

}  // namespace tiles::cuda::dmma
