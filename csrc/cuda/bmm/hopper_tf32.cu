// Host side of the Hopper float32 bmm (kernel: bmm/hopper_tf32_kernel.cuh): whether a problem can take
// it, which operand plays the register role R and which the K-major shared-memory role Q, the TMA
// maps (bmm/tma_maps.h), the tile width and the persistent grid.
//   a K-major, b K-major (b = y.mT):   R = a, Q = b
//   a M-major (a = x.mT), b K-major:   R = a, Q = b
//   a K-major, b N-major (row-major):  R = b^T, Q = a, output tiles transposed on the way out
//   a M-major, b N-major:              R = a, Q = b transposed in shared memory by the producer's warps
#include "binding/format.h"
#include "cuda/bmm/hopper_tf32_kernel.cuh"
#include "cuda/bmm/paths.h"
#include "cuda/bmm/split_k.cuh"
#include "cuda/bmm/tma_maps.h"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {
template <int kSplit, int BQ, bool kRKMajor, bool kSwap, bool kQMnMajor>
void launch_tf32(const CUtensorMap& map_r, const CUtensorMap& map_q, const CUtensorMap& map_c, float* c,
                 const Tf32Shape& shape, int grid);
}  // namespace tiles::cuda::hopper

namespace tiles::cuda::hopper_tf32 {
namespace {

using hopper::OperandLayout;

template <int kSplit, int BQ>
void launch_roles(const CUtensorMap& mr, const CUtensorMap& mq, const CUtensorMap& mc, const OperandLayout& lr,
                  const OperandLayout& lq, bool swap, float* c, const hopper::Tf32Shape& s, int grid) {
  if (!lr.mn_major) return hopper::launch_tf32<kSplit, BQ, true, false, false>(mr, mq, mc, c, s, grid);
  if (swap) return hopper::launch_tf32<kSplit, BQ, false, true, false>(mr, mq, mc, c, s, grid);
  if (lq.mn_major) return hopper::launch_tf32<kSplit, BQ, false, false, true>(mr, mq, mc, c, s, grid);
  hopper::launch_tf32<kSplit, BQ, false, false, false>(mr, mq, mc, c, s, grid);
}

// One k-block of a tile, in H100 microseconds (from whole-wave timings: 4096^3, 768 x 3072 x 16384).
// The transposing variant (neither operand K-major) takes twice as long per block in TF32.
double k_block_us(bool three_pass, int bq, bool transposing) {
  if (three_pass) return transposing ? 1.6 : 1.32;
  return (bq == 256 ? 0.71 : 0.44) * (transposing ? 2 : 1);
}

}  // namespace

bool can_run(const BmmProblem& p, const char** why) {
#if !defined(TILES_HAS_SM90A)
  return refuse(why, "built without sm_90a (TORCH_CUDA_ARCH_LIST lacks 9.0a)");
#else
  if (p.out.scalar_type() != at::kFloat || p.a.scalar_type() != at::kFloat || p.b.scalar_type() != at::kFloat)
    return refuse(why, "dtype is not float32");
  if (const char* reason = hopper::tma_unsuitable(p)) return refuse(why, reason);
  return true;
#endif
}

void bmm(const BmmProblem& p) {
  const OperandLayout la = hopper::layout_a(p), lb = hopper::layout_b(p);
  const bool swap = !la.mn_major && lb.mn_major;  // only b^T can play R
  const at::Tensor& r = swap ? p.b : p.a;
  const at::Tensor& q = swap ? p.a : p.b;
  const OperandLayout& lr = swap ? lb : la;
  const OperandLayout& lq = swap ? la : lb;

  hopper::Tf32Shape s;
  s.batch = p.batch, s.k = p.k;
  s.p = swap ? p.n : p.m, s.q = swap ? p.m : p.n;
  s.r_broadcast = lr.batch == 1, s.q_broadcast = lq.batch == 1;
  s.tiles_p = int((s.p + 127) / 128);
  const bool three_pass = !float32_as_tf32();  // 3xTF32
  // TF32 takes 256-wide Q tiles (more products per byte loaded) unless they would leave
  // multiprocessors idle; 3xTF32 needs its second set of accumulators, so 128.
  const int sms = sm_count();
  const int64_t wide_tiles = p.batch * s.tiles_p * ((s.q + 255) / 256);
  const int bq = !three_pass && s.q > 128 && wide_tiles >= sms ? 256 : 128;
  s.tiles_q = int((s.q + bq - 1) / bq);
  const int64_t tiles = p.batch * s.tiles_p * s.tiles_q, k_blocks = (p.k + 31) / 32;
  const int64_t outputs = p.batch * p.m * p.n;
  const double block_us = k_block_us(three_pass, bq, lr.mn_major && lq.mn_major);
  const int k_splits = costed_k_splits(tiles, k_blocks, outputs, sms, block_us);
  s.k_blocks = (k_blocks + k_splits - 1) / k_splits;
  s.splits = int((k_blocks + s.k_blocks - 1) / s.k_blocks);
  const int grid = int(std::min<int64_t>(tiles * s.splits, sms));

  // R: one [128 rows][32 k] box when K-major, four [32 k][32 rows] boxes when MN-major; Q: [bq][32 k],
  // or bq / 32 boxes of [32 k][32 rows] when MN-major (transposed in shared memory by the kernel).
  const CUtensorMap mr = hopper::tensor_map(r, lr, lr.mn_major ? 32 : 128);
  const CUtensorMap mq = hopper::tensor_map(q, lq, lq.mn_major ? 32 : bq);
  // The output in boxes of [64 p rows][32 q], or with the roles swapped [32 q rows][32 p]. With split-K
  // the kernel writes each split's partial outputs, summed afterwards in split order.
  const at::Tensor partials = s.splits > 1 ? at::empty({s.splits * p.batch, p.m, p.n}, p.out.options()) : at::Tensor();
  const at::Tensor& target = s.splits > 1 ? partials : p.out;
  OperandLayout lc = hopper::output_layout(p);
  lc.batch *= s.splits;
  s.tma_store = lc.ok;
  CUtensorMap mc{};  // unused (zeros) when the consumers store directly
  if (lc.ok) mc = hopper::tensor_map(target, lc, swap ? 32 : 64);
  float* c = target.data_ptr<float>();
  if (three_pass) {
    launch_roles<3, 128>(mr, mq, mc, lr, lq, swap, c, s, grid);
  } else {
    bq == 256 ? launch_roles<1, 256>(mr, mq, mc, lr, lq, swap, c, s, grid)
              : launch_roles<1, 128>(mr, mq, mc, lr, lq, swap, c, s, grid);
  }
  if (s.splits > 1) sum_splits<float, float>(p.out.data_ptr<float>(), partials, outputs, s.splits);
}

}  // namespace tiles::cuda::hopper_tf32
