// Host side of the Hopper float32 bmm (kernel: bmm/hopper_tf32_kernel.cuh): whether a problem can take
// it, which operand plays the register role R and which the K-major shared-memory role Q, the TMA
// maps (bmm/tma_maps.h), the tile width and the persistent grid.
//   a K-major, b K-major (b = y.mT):   R = a, Q = b
//   a M-major (a = x.mT), b K-major:   R = a, Q = b
//   a K-major, b N-major (row-major):  R = b^T, Q = a, output tiles transposed on the way out
//   a M-major, b N-major:              R = a, Q = b transposed in shared memory by the kernel's warps
#include <algorithm>

#include "binding/format.h"
#include "cuda/bmm/hopper_tf32_tiles.cuh"
#include "cuda/bmm/operand_layout.h"
#include "cuda/bmm/paths.h"
#include "cuda/bmm/split_k.cuh"
#include "cuda/bmm/tma_maps.h"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {
template <int kSplit, int BQ, bool kRKMajor, bool kSwap, bool kQMnMajor, bool kCopies, bool kPingPong = false>
void launch_tf32(const CUtensorMap& map_r, const CUtensorMap& map_q, const CUtensorMap& map_c, float* c,
                 const Tf32CopyShape& shape, int grid);
}  // namespace tiles::cuda::hopper

namespace tiles::cuda::hopper_tf32 {
namespace {

using hopper::OperandLayout;

template <int kSplit, int BQ, bool kCopies>
void launch_variant(const CUtensorMap& mr, const CUtensorMap& mq, const CUtensorMap& mc, const OperandLayout& lr,
                    const OperandLayout& lq, bool swap, float* c, const hopper::Tf32CopyShape& s, int grid) {
  if (!lr.mn_major) return hopper::launch_tf32<kSplit, BQ, true, false, false, kCopies>(mr, mq, mc, c, s, grid);
  if (swap) return hopper::launch_tf32<kSplit, BQ, false, true, false, kCopies>(mr, mq, mc, c, s, grid);
  if (lq.mn_major) return hopper::launch_tf32<kSplit, BQ, false, false, true, kCopies>(mr, mq, mc, c, s, grid);
  hopper::launch_tf32<kSplit, BQ, false, false, false, kCopies>(mr, mq, mc, c, s, grid);
}

// The kernel for the roles' layouts, with the copiers where an operand is copied.
template <int kSplit, int BQ>
void launch_roles(const CUtensorMap& mr, const CUtensorMap& mq, const CUtensorMap& mc, const OperandLayout& lr,
                  const OperandLayout& lq, bool swap, float* c, const hopper::Tf32CopyShape& s, int grid) {
  if (s.copies()) return launch_variant<kSplit, BQ, true>(mr, mq, mc, lr, lq, swap, c, s, grid);
  launch_variant<kSplit, BQ, false>(mr, mq, mc, lr, lq, swap, c, s, grid);
}

// The model's costs in H100 microseconds: one k-block of a tile, and a fixed cost per wave of tiles
// (pipeline fill, the last tile's stores). TF32: least-squares fits over the unsplit TF32 grid cases at
// 27adeba (NOTES.md, TF32 section; median error 5% at 256-wide, 9% at 128). 3xTF32 (128-wide only):
// whole-wave timings, no wave cost.
struct BlockCost {
  double k_block_us, wave_us;
};
BlockCost block_cost(bool three_pass, int bq, bool transposing) {
  if (three_pass) return {transposing ? 1.6 : 1.32, 0};
  switch (bq) {
    case 256: return transposing ? BlockCost{1.22, 5.3} : BlockCost{0.68, 6.4};
    // Placed a quarter of the way from 128 to 256, where the 16-bit kernel's 192-wide k-blocks sit; the
    // A/B that merged 192-wide tiles timed these, and its own fit agrees on the k-block (0.565, transposing
    // 0.99) but cannot pin the transposing wave cost (NOTES.md, TF32 section).
    case 192: return transposing ? BlockCost{0.95, 4.5} : BlockCost{0.55, 6.0};
    // Fitted over the H200 grid's 64-wide rows (fit_plan_costs.py, 16 and 7 rows; A/B in NOTES.md, "64-wide
    // tiles for N <= 64"). Only Q of at most 64 rows takes 64-wide tiles (plan), where the cost weighs
    // splitting K, not the width.
    case 64: return transposing ? BlockCost{0.55, 2.8} : BlockCost{0.52, 2.6};
    default: return transposing ? BlockCost{0.86, 3.8} : BlockCost{0.50, 5.0};
  }
}

// Which operand plays R (through registers) and which Q (K-major in shared memory): only b^T can play
// R when a is K-major and b is not, and then the output tiles are transposed.
struct Roles {
  OperandLayout r, q;
  bool swap;
  int64_t p_rows, q_rows;  // R's and Q's rows: the output's two sides, transposed when swapped
};

Roles roles(const BmmProblem& p) {
  const OperandLayout la = hopper::layout_a(p), lb = hopper::layout_b(p);
  if (!la.mn_major && lb.mn_major) return {lb, la, true, p.n, p.m};
  return {la, lb, false, p.m, p.n};
}

// Which operands the kernel copies: those TMA cannot address, and Q with a copied R where Q needs work
// once landed (an MN-major Q's transpose, 3xTF32's small part): the copiers then do that work on their
// own copies (transposing as they copy), never waiting on TMA's, and the in-place transpose's registers
// need no room beside the copies'.
struct Copied {
  bool r, q;
};
Copied copied_roles(const Roles& ro, bool three_pass) {
  const bool r = !ro.r.ok;
  return {r, !ro.q.ok || (r && (ro.q.mn_major || three_pass))};
}

// Whether the ping-pong consumers (hopper_tf32_kernel's kPingPong) can take the roles: 1xTF32 with R and Q
// both K-major and fed by TMA, wgmma reading both from shared memory (NT).
bool ping_pong_runs(const Roles& ro, bool three_pass) {
  const Copied copying = copied_roles(ro, three_pass);
  return !three_pass && !ro.swap && !ro.r.mn_major && !ro.q.mn_major && !copying.r && !copying.q;
}

// The tile width (bq: Q rows per tile), the split of K and the persistent grid for a problem, which bmm
// and the tile's name share.
struct Plan {
  Roles roles;
  int bq;
  int tiles_p, tiles_q;
  int64_t k_blocks;  // per split
  int splits;
  int grid;
  bool ping_pong = false;  // the consumers on 128 x 128 tiles of their own, in turn (unsplit, NT in TF32)
};

// Ping-pong consumers (hopper_tf32_kernel's kPingPong) in the plan's units: a block's two consumer
// warpgroups each take whole 128 x 128 tiles in turn, one's epilogue under the other's products. Fitted on
// the H200 over the 32 grid rows bmm ran on them at c360d78 that the tensor cores bound (NOTES.md N1q;
// median error 2%, at most 9%): 0.40 us a tile's k-block, 0.15 a wave of 132 tiles, the epilogues hidden.
// Not in the fit: products bound by memory (attention's 96-384 x 1024-2048 x 128 x 1024-2048, a of up to
// 1.6 GB read once; the fit puts them at 0.6x, and they ran level with the 128 x 128 cooperative tiles;
// 8192 x 50257 x 768, 1.6 GB written, level with 128 x 256), and walks shorter than 24 k-blocks, bound by
// the output's stores, which keep the cooperative tiles.
constexpr double kPingPongKBlockUs = 0.40, kPingPongWaveUs = 0.15;
constexpr int64_t kPingPongMinKBlocks = 24;

Plan plan(const BmmProblem& p, int forced_bq = 0) {
  const Roles ro = roles(p);
  const bool three_pass = !float32_as_tf32();  // 3xTF32
  const bool transposing = ro.r.mn_major && ro.q.mn_major;
  const int sms = sm_count();
  const int tiles_p = int((ro.p_rows + 127) / 128);
  const int64_t k_total = (p.k + 31) / 32, outputs = p.batch * p.m * p.n;
  // The past-K k-blocks of the last slice (fewer than the slices) must keep TMA's int32 k in range.
  const bool can_split = (k_total + kMaxCostedSplits) * 32 <= INT32_MAX;
  // Tile width and split count together, the cheapest by the model: wider tiles do more products per
  // byte of shared memory (a 256-wide k-block costs 1.4x a 128-wide one's for 2x the outputs), narrower
  // ones fill more of the SMs. 3xTF32 needs its second set of accumulators, so 128 only. Weighing by waves alone
  // put 1024 x 4096 x 8192 on 256 tiles of 128 (two waves: 266 us modelled, 255 measured) where 128
  // tiles of 256 fill one (180 us modelled).
  // Q of at most 64 rows (attention's N = 64 products where b is not row-major under a row-major a,
  // which would swap the roles: p^T @ do, ds^T @ q at head size 64) takes 64-wide tiles: as many as
  // 128-wide ones, with half the tensor-core work and Q's stage, where 128 rows multiplied TMA's zeros.
  // A forced width (`forced_bq`: tests and benchmarks, _bmm_on_path's "hopper-<width>") is costed alone.
  Plan best{};
  double best_us = 0;
  const bool narrow_q = !three_pass && ro.q_rows <= 64;
  auto planned = [&](int bq) {
    if ((bq == 64) != narrow_q) return false;
    return bq <= 128 || (!three_pass && ro.q_rows > 128);
  };
  for (const int bq : {256, 192, 128, 64}) {
    if (forced_bq ? bq != forced_bq : !planned(bq)) continue;
    const int tiles_q = int((ro.q_rows + bq - 1) / bq);
    const int64_t tiles = p.batch * tiles_p * tiles_q;
    const BlockCost cost = block_cost(three_pass, bq, transposing);
    const KSplit split = cheapest_k_split(tiles, k_total, outputs, sms, cost.k_block_us, cost.wave_us,
                                          can_split ? kMaxCostedSplits : 1);
    if (best.bq != 0 && split.us >= best_us) continue;
    const int64_t k_blocks = (k_total + split.splits - 1) / split.splits;
    const int splits = int((k_total + k_blocks - 1) / k_blocks);
    best = {ro, bq, tiles_p, tiles_q, k_blocks, splits, int(std::min<int64_t>(tiles * splits, sms))};
    best_us = split.us;
  }
  // Ping-pong (unsplit) where the operands allow it (ping_pong_runs) and it models 5% under the best
  // unsplit plan: on the H200's grid it ran 0.85-0.99x of the cooperative tiles' time on the rows it takes
  // (8192 x 2304 x 768 99.2 -> 86.3 us, 2048 x 1024 x 3072 44.2 -> 38.1; N1q). 8192 x 768 x 2304-3072 ran
  // 1.02-1.04x on it: the fit puts them 4% under 128 x 192, so they keep it.
  // Against a plan that splits K it must model 15% under: timed by name beside bmm's split plans (H200,
  // N1q), unsplit ping-pong ran 0.83-0.93x flushed, 0.89-0.98x back to back, where it models 0.73-0.83x
  // of them (2048 x 1024 x 4096, 2048 x 768 x 2304 / 3072: a Linear's forward, x @ W^T), and 1.04-1.10x
  // where it models 0.91-0.94x (768 x 2304 x 8192, 960 x 1080 x 3076, 840 x 832 x 2052: fewer tiles
  // than SMs, which the split plans fill).
  constexpr double kPingPongMargin = 0.95, kPingPongOverSplitMargin = 0.85;
  if (forced_bq == 0 && ping_pong_runs(ro, three_pass) && !narrow_q && k_total >= kPingPongMinKBlocks) {
    const int tiles_q = int((ro.q_rows + 127) / 128);
    const int64_t tiles = p.batch * tiles_p * tiles_q, waves = (tiles + sms - 1) / sms;
    const double us = double(waves * k_total) * kPingPongKBlockUs + double(waves) * kPingPongWaveUs;
    if (us < (best.splits == 1 ? kPingPongMargin : kPingPongOverSplitMargin) * best_us)
      best = {ro, 128, tiles_p, tiles_q, k_total, 1, int(std::min<int64_t>(tiles, sms)), /*ping_pong=*/true};
  }
  return best;
}

// An operand TMA cannot address, for the producer warps to copy: its [batch][outer][inner] view.
hopper::CopiedOperand copied(const at::Tensor& t, const MatrixLayout& m) {
  hopper::CopiedOperand c;
  c.base = t.const_data_ptr<float>();
  c.inner = m.inner, c.outer = m.outer, c.ld = m.ld, c.batch_stride = m.batch_stride;
  return c;
}

}  // namespace

bool can_run(const BmmProblem& p, const char** why) {
#if !defined(TILES_HAS_SM90A)
  return refuse(why, "built without sm_90a (TORCH_CUDA_ARCH_LIST lacks 9.0a)");
#else
  if (p.out.scalar_type() != at::kFloat || p.a.scalar_type() != at::kFloat || p.b.scalar_type() != at::kFloat)
    return refuse(why, "dtype is not float32");
  if (const char* reason = hopper::hopper_unsuitable(p)) return refuse(why, reason);
  // An operand TMA cannot address is copied by the kernel's producer warps, 4 bytes at a time: it needs
  // a unit-stride matrix dim and 4-byte alignment (a float32 tensor from outside PyTorch, through DLPack
  // or from_blob, may lack it).
  const MatrixLayout la = layout_of_a(p), lb = layout_of_b(p);
  if (!la.ok) return refuse(why, "a has no unit-stride matrix dim");
  if (!lb.ok) return refuse(why, "b has no unit-stride matrix dim");
  if (la.align_bytes < 4) return refuse(why, "a's base or strides are not 4-byte aligned");
  if (lb.align_bytes < 4) return refuse(why, "b's base or strides are not 4-byte aligned");
  return true;
#endif
}

int copied_operands(const BmmProblem& p) {
  const Copied c = copied_roles(roles(p), !float32_as_tf32());
  return int(c.r) + int(c.q);
}

bool copies(const BmmProblem& p) { return copied_operands(p) > 0; }

// The copies cost the producer's three copying warps (four with both operands copied) about three
// instructions per 4-byte cp.async, which a large product's k-blocks hide and a small one's fixed costs do
// not. Measured against the mma.sync kernel over the 81 grid cases whose operands TMA cannot address
// (NOTES.md, TF32 section): in TF32 every product of at least 2^30 flops whose output spans a 128-row tile
// each way ran 1.00-2.12x faster (language-model heads over V = 50257: 1.2-2.1x), smaller or thinner ones
// 0.27-0.98x; in 3xTF32 the copies won only with an MN-major Q (transposed as it is copied, 1.05-1.65x), and
// lost 0.3-0.6x where they carry a K-major Q and its small part.
//
// 3xTF32 has 128 x 128 tiles only: over outputs of at most 64 x 64 (many small matrices) three quarters of
// each tile is padding, and the mma.sync kernel's 64 x 64 tiles run 1.3x faster (H200, flushed / back to
// back us, Hopper against mma-64: 512 x 64 x 64 x 64 22.4 / 18.5 against 17.4 / 10.8, the grid's worst
// fp32 rows at 0.64-0.73x of cuBLAS; 1xTF32 has 64-wide tiles and stays: 13.5 / 9.6 against 16.2 / 9.4).
// Where one side is wider the Hopper kernel holds (96 x 512 x 64 x 512 72.5 against 76.6; NOTES, N1m).
bool prefers(const BmmProblem& p) {
  if (!float32_as_tf32() && p.m <= 64 && p.n <= 64) return false;
  if (!copies(p)) return true;
  const double flops = 2.0 * double(p.batch) * double(p.m) * double(p.n) * double(p.k);
  if (flops < double(int64_t(1) << 30) || std::min(p.m, p.n) < 128) return false;
  if (float32_as_tf32()) return true;
  const Roles ro = roles(p);
  return ro.r.mn_major && ro.q.mn_major;  // the transposing variant: Q MN-major
}

bool splits_k(const BmmProblem& p) { return plan(p).splits > 1; }

const char* tile(const BmmProblem& p) {
  const Plan chosen = plan(p);
  const bool swap = chosen.roles.swap;  // output tiles transposed
  if (chosen.ping_pong) return "128x128 ping-pong";
  switch (chosen.bq) {
    case 256: return swap ? "256x128" : "128x256";
    case 192: return swap ? "192x128" : "128x192";
    case 64: return swap ? "64x128" : "128x64";
    default: return "128x128";
  }
}

void bmm(const BmmProblem& p, int width, bool ping_pong) {
  TILES_CHECK(width == 0 || width == 64 || width == 128 || width == 192 || width == 256,
              "tiles::_bmm_on_path: the float32 Hopper kernel's tiles are 64, 128, 192 or 256 wide; got ", width);
  TILES_CHECK(width == 0 || width == 128 || float32_as_tf32(), "tiles::_bmm_on_path: 3xTF32 (float32 matmul ",
              "precision 'highest') has 128-wide tiles only; got ", width);
  const Plan chosen = plan(p, width);
  const Roles& ro = chosen.roles;
  const bool swap = ro.swap;
  const at::Tensor& r = swap ? p.b : p.a;
  const at::Tensor& q = swap ? p.a : p.b;
  const OperandLayout &lr = ro.r, &lq = ro.q;
  const int bq = chosen.bq, grid = chosen.grid;
  const bool three_pass = !float32_as_tf32();

  hopper::Tf32CopyShape s;
  s.batch = p.batch, s.k = p.k;
  s.p = ro.p_rows, s.q = ro.q_rows;
  s.r_broadcast = lr.batch == 1, s.q_broadcast = lq.batch == 1;
  s.tiles_p = chosen.tiles_p, s.tiles_q = chosen.tiles_q;
  s.k_blocks = chosen.k_blocks, s.splits = chosen.splits;
  const int64_t outputs = p.batch * p.m * p.n;

  // R: one [128 rows][32 k] box when K-major, four [32 k][32 rows] boxes when MN-major; Q: [bq][32 k],
  // or bq / 32 boxes of [32 k][32 rows] when MN-major (transposed in shared memory by the kernel). An
  // operand the kernel copies (copied_roles) lands in the same layout (its map stays zeros).
  const Copied copying = copied_roles(ro, three_pass);
  const bool copy_r = copying.r, copy_q = copying.q;
  TILES_CHECK(!ping_pong || width == 128, "tiles::_bmm_on_path: ping-pong consumers take 128-wide tiles; got ", width);
  TILES_CHECK(!ping_pong || ping_pong_runs(ro, three_pass),
              "tiles::_bmm_on_path: 'hopper-128 ping-pong' takes float32 at precision 'high' or 'medium', a and b ",
              "both K-major (a row-major, b = y.mT), strides TMA can address");
  CUtensorMap mr{}, mq{};
  if (!copy_r) mr = hopper::tensor_map(r, lr, lr.mn_major ? 32 : 128);
  else s.copy_r = copied(r, swap ? layout_of_b(p) : layout_of_a(p));
  if (!copy_q) mq = hopper::tensor_map(q, lq, lq.mn_major ? 32 : bq);
  else s.copy_q = copied(q, swap ? layout_of_a(p) : layout_of_b(p));
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
  if (ping_pong || chosen.ping_pong) {
    hopper::launch_tf32<1, 128, true, false, false, false, true>(mr, mq, mc, c, s, grid);
  } else if (three_pass) {
    launch_roles<3, 128>(mr, mq, mc, lr, lq, swap, c, s, grid);
  } else {
    switch (bq) {
      case 256: launch_roles<1, 256>(mr, mq, mc, lr, lq, swap, c, s, grid); break;
      case 192: launch_roles<1, 192>(mr, mq, mc, lr, lq, swap, c, s, grid); break;
      case 64: launch_roles<1, 64>(mr, mq, mc, lr, lq, swap, c, s, grid); break;
      default: launch_roles<1, 128>(mr, mq, mc, lr, lq, swap, c, s, grid);
    }
  }
  if (s.splits > 1) sum_splits<float, float>(p.out.data_ptr<float>(), partials, outputs, s.splits);
}

}  // namespace tiles::cuda::hopper_tf32
