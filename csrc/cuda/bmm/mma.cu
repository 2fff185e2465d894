// Host side of the mma.sync bmm (kernel: bmm/mma_kernel.cuh): whether a problem can take it, and which
// tensor-core instruction computes its dtype.
//   bfloat16 / float16  m16n8k16, float32 accumulation
//   float32             TF32 (m16n8k8) when the float32 matmul precision allows it ("high" / "medium",
//                       i.e. torch.backends.cuda.matmul.allow_tf32), else 3xTF32 (float32 accuracy)
//   float64             DMMA (m16n8k8 on sm_90, four m8n8k4 on sm_80), in a kernel of its own whose
//                       fragment loads go straight into the DMMA operand registers (bmm/dmma_kernel.cuh)
#include <ATen/Context.h>

#include "binding/format.h"
#include "cuda/bmm/dmma_kernel.cuh"  // its tile shape (split-K)
#include "cuda/bmm/mma_kernel.cuh"  // Params, atoms, tiles; kernels in instances/bmm_mma_*.cu
#include "cuda/bmm/operand_layout.h"
#include "cuda/bmm/paths.h"
#include "cuda/bmm/split_k.cuh"
#include "cuda/launch.cuh"

namespace tiles::cuda::mma {

template <class Atom, TileSize kSize, bool kMnA, bool kMnB, int kCopyA, int kCopyB>
void launch(const Params<typename Atom::Elem>& p);

}  // namespace tiles::cuda::mma

namespace tiles::cuda::dmma {
// fp64 has a kernel of its own (bmm/dmma_kernel.cuh, mma_f64.cu), copying 16 or 8 bytes at a time.
template <bool kMnA, bool kMnB, int kCopyBytes>
void launch(const mma::Params<double>& p);
}  // namespace tiles::cuda::dmma

namespace tiles::cuda::mma {

namespace {

// 3xTF32 with 8-byte copies of a K-major a spills (255 registers) and ran 13% slower than with 4-byte
// ones (4 x 3123 x 2188 x 734); with an M-major a, 25% faster (8 x 96 x 2174 x 1410). That variant is
// not built at either tile size (instances/bmm_mma_tf32x3[_small].cu; timed on the large tile only): it
// copies 4 bytes.
constexpr bool narrower_copies(bool three_pass, int width, bool a_mn_major) {
  return three_pass && width == 8 && !a_mn_major;
}

// The kernels that are built: kernel_copy_width below never asks for another, and launch_width asks for
// two widths only of 16-bit atoms, 2 and 16.
template <class Atom, bool kMnA, bool kMnB, int kCopyA, int kCopyB>
void launch_kind(const Params<typename Atom::Elem>& q, TileSize size) {
  constexpr int kCopyBytes = std::min(kCopyA, kCopyB);
  if constexpr (narrower_copies(std::is_same_v<Atom, Tf32x3>, kCopyBytes, kMnA)) {
    TILES_CHECK(false, "tiles::bmm: the 3xTF32 mma.sync kernel with 8-byte copies of a K-major a is not built");
  } else if constexpr (kCopyA != kCopyB && (sizeof(typename Atom::Elem) != 2 || kCopyBytes != 2)) {
    TILES_CHECK(false, "tiles::bmm: mixed copy widths are built for 16-bit operands, 2 and 16 bytes, only");
  } else if constexpr (!std::is_same_v<Atom, F64>) {
    if (size == TileSize::small) launch<Atom, TileSize::small, kMnA, kMnB, kCopyA, kCopyB>(q);
    else launch<Atom, TileSize::large, kMnA, kMnB, kCopyA, kCopyB>(q);
  } else if constexpr (kCopyBytes >= 8) {
    dmma::launch<kMnA, kMnB, kCopyBytes>(q);
  } else {
    TILES_CHECK(false, "tiles::bmm: no mma.sync kernel for float64 operands that are not 8-byte aligned");
  }
}

template <class Atom, int kCopyA, int kCopyB = kCopyA>
void launch_layout(const Params<typename Atom::Elem>& q, bool mn_a, bool mn_b, TileSize size) {
  with_layouts(mn_a, mn_b, [&](auto mn_major_a, auto mn_major_b) {
    launch_kind<Atom, decltype(mn_major_a)::value, decltype(mn_major_b)::value, kCopyA, kCopyB>(q, size);
  });
}

// The copy width both operands allow, their common alignment: 16, 8 or 4 bytes (cp.async), else 2
// (16-bit elements through registers). Narrow copies bound the kernel's speed (NOTES.md, mma.sync).
int copy_width(const MatrixLayout& a, const MatrixLayout& b) { return std::min(a.align_bytes, b.align_bytes); }

// The width the kernel copies with: copy_width, but 4 where narrower_copies says so.
int kernel_copy_width(const BmmProblem& p, const MatrixLayout& a, const MatrixLayout& b) {
  const int width = copy_width(a, b);
  const bool three_pass = p.out.scalar_type() == at::kFloat && !float32_as_tf32();
  return narrower_copies(three_pass, width, a.mn_major) ? 4 : width;
}

// Split-K: how many slices of K the kernel walks as blocks of their own, each writing its partial
// outputs (in the accumulator type) for sum_splits to add. Few output blocks over a long K leave SMs
// idle (fp64 768 x 2304 x 8192: 432 tiles of 64 x 64 on 132 SMs of three blocks each, a tail of lone
// blocks; bf16 2 x 633 x 10 x 944: 20 blocks walking 30 k-tiles each). Each count is costed in H100
// microseconds per k-tile on the busiest SM, by the round of blocks it runs at a time, plus the
// partials' round trip through memory and the summing launch; a split must save a tenth, since the
// model's tail estimate is rough. bf16 on the H100 (`bmm_paths.py --paths "mma-64,mma-64 whole-k"`,
// flushed us, split / whole): 2 x 633 x 10 x 944 14.9 / 31.8, 1 x 500 x 500 x 3000 25.5 / 51.9, 1 x 700 x
// 700 x 2000 29.2 / 37.2, 4 x 300 x 300 x 1500 24.7 / 29.0 (the model's closest call, 0.89), 1 x 768 x
// 10 x 50257 NT 131 / 1551; 1 x 1000 x 1001 x 4000 (256 blocks) is left whole (133). NOTES.md, mma.sync.
struct SplitCosts {
  int blocks_per_sm;       // that run at once on one SM
  double round_us[4];      // a k-tile's time for a round of 1 .. blocks_per_sm blocks (index = blocks)
  int64_t partial_bytes;   // an output's partial, written and read back
};
// float64's DMMA kernel, 16-deep k-tiles, fitted to 2048 x 1024 x 4096 and 768 x 2304 x 8192.
constexpr SplitCosts kDmmaCosts{3, {0, 0.49, 0.80, 1.08}, 16};
// The tensor-core atoms' 64 x 64 tiles (three a SM) and 128-row ones (one): a round of small blocks
// costs tile_size's 0.55 / 0.7 / 0.835 of a large block's k-tile, ~1 us (bf16 2 x 633 x 10 x 944 on
// 20 small blocks: 21 us over 30 k-tiles).
constexpr SplitCosts kSmallTileCosts{3, {0, 0.55, 0.70, 0.835}, 8};
constexpr SplitCosts kLargeTileCosts{1, {0, 1.0}, 8};

// A k-tile walk's modelled time: `blocks` output blocks in `slices` slices of `per` k-tiles each, on
// the busiest SM, plus the partials' round trip and the summing launch where K is split.
double split_cost(const SplitCosts& c, int64_t blocks, int64_t slices, int64_t per, int64_t outputs, int sms) {
  constexpr double kBytesPerUs = 2.5e6, kSumUs = 4;
  const int64_t on_sm = (blocks * slices + sms - 1) / sms;
  const int64_t rounds = on_sm / c.blocks_per_sm, rest = on_sm % c.blocks_per_sm;
  double us = double(per) * (double(rounds) * c.round_us[c.blocks_per_sm] + c.round_us[rest]);
  if (slices > 1) us += double(slices * outputs * c.partial_bytes) / kBytesPerUs + kSumUs;
  return us;
}

struct SplitChoice {
  int splits;
  double us, whole_us;  // the model's time at that count, and unsplit
};
constexpr double kMinSplitGain = 0.9;  // a split must save a tenth: the model's tail estimate is rough

SplitChoice cheapest_split(const SplitCosts& c, int64_t blocks, int64_t k_tiles, int64_t outputs, int sms) {
  constexpr int kMaxSplits = 16;
  constexpr int64_t kMinKTiles = 8, kMaxPartials = int64_t(1) << 24;
  const double whole = split_cost(c, blocks, 1, k_tiles, outputs, sms);
  SplitChoice best{1, whole, whole};
  for (int splits = 2; splits <= kMaxSplits; ++splits) {
    const int64_t per = (k_tiles + splits - 1) / splits;
    if (per < kMinKTiles) break;
    const int64_t used = (k_tiles + per - 1) / per;
    if (used * outputs > kMaxPartials) break;
    const double us = split_cost(c, blocks, used, per, outputs, sms);
    if (us < best.us) best.splits = int(used), best.us = us;
  }
  if (best.us >= kMinSplitGain * whole) best = {1, whole, whole};
  return best;
}

// How the kernel walks K: the output rows from `split_from` on in `splits` slices of K, the rows above
// them whole (splits 1: every row whole; split_from 0: the split everywhere).
struct SplitPlan {
  int splits = 1;
  int64_t split_from = 0;
};

// The DMMA kernel's tail split of one output matrix. A product of a little over whole waves of blocks
// (fp64 768 x 2304 x 2048: 432 tiles on 396 slots) runs its last blocks nearly alone, a whole wave's
// time for a tenth of the work; splitting every tile's K to even that out costs every output a round
// trip. The tail split walks the rows of whole waves of 64-row tile rows whole and splits only the rows
// below them, a launch each: 768 x 2304 x 2048 runs 11 of its 12 tile rows in one wave and the 12th in 7
// slices of 19 k-tiles. Taken only where a split everywhere is declined (split_plan).
SplitPlan tail_split(const SplitCosts& c, const BmmProblem& p, int64_t k_tiles, double best_us, int sms) {
  const int64_t tiles_m = (p.m + dmma::BM - 1) / dmma::BM, tiles_n = (p.n + dmma::BN - 1) / dmma::BN;
  const int64_t slots = int64_t(c.blocks_per_sm) * sms, waves = tiles_m * tiles_n / slots;
  const int64_t rows = waves * slots / tiles_n;  // tile rows in whole waves
  if (p.batch != 1 || waves == 0 || rows == 0 || rows >= tiles_m) return {};
  const double main_us = split_cost(c, rows * tiles_n, 1, k_tiles, 0, sms);
  const int64_t tail_m = p.m - rows * dmma::BM;
  const SplitChoice tail = cheapest_split(c, (tiles_m - rows) * tiles_n, k_tiles, tail_m * p.n, sms);
  if (tail.splits == 1 || main_us + tail.us >= best_us) return {};
  return {tail.splits, rows * dmma::BM};
}

template <class Atom>
void launch_width(const Params<typename Atom::Elem>& q, const BmmProblem& p, const MatrixLayout& la,
                  const MatrixLayout& lb, TileSize size) {
  using Elem = typename Atom::Elem;
  if (p.k == 0) return launch_kind<Atom, false, false, 16, 16>(q, size);  // no operand is read
  switch (kernel_copy_width(p, la, lb)) {
    case 16: return launch_layout<Atom, 16>(q, la.mn_major, lb.mn_major, size);
    case 8: return launch_layout<Atom, 8>(q, la.mn_major, lb.mn_major, size);
    case 4: return launch_layout<Atom, 4>(q, la.mn_major, lb.mn_major, size);
    default:
      // Register loads for the operand that needs them; the other, where 16-byte aligned, copied so.
      if constexpr (sizeof(Elem) == 2) {
        if (la.aligned) return launch_layout<Atom, 16, 2>(q, la.mn_major, lb.mn_major, size);
        if (lb.aligned) return launch_layout<Atom, 2, 16>(q, la.mn_major, lb.mn_major, size);
        return launch_layout<Atom, 2>(q, la.mn_major, lb.mn_major, size);
      }
      TILES_CHECK(false, "tiles::bmm: operands of ", sizeof(Elem), "-byte elements that are not ", sizeof(Elem),
                  "-byte aligned");
  }
}

// The block tile's rows, columns and depth for Atom at `size` (float64: the DMMA kernel's one tile).
struct BlockTile {
  int64_t rows, cols, depth;
};
template <class Atom>
BlockTile block_tile(TileSize size) {
  if constexpr (std::is_same_v<Atom, F64>) {
    return {dmma::BM, dmma::BN, dmma::BK};
  } else {
    using Small = typename ConfigFor<Atom, TileSize::small>::type;
    using Large = typename ConfigFor<Atom, TileSize::large>::type;
    if (size == TileSize::small) return {Small::BM, Small::BN, Small::BK};
    return {Large::BM, Large::BN, Large::BK};
  }
}

// How many blocks of tile t cover p's output matrices.
int64_t output_blocks(const BmmProblem& p, const BlockTile& t) {
  return (p.m + t.rows - 1) / t.rows * ((p.n + t.cols - 1) / t.cols) * p.batch;
}

// The block tile for p when the caller leaves it to the kernel (tile 0); 64 or 128 force one. Timed on
// the H100 only (sm_90, where three small blocks fit an SM; fewer fit sm_80 / sm_86 / sm_89's shared
// memory): elsewhere, large. A lone large block is bound by its warps' latency (bmm/mma_kernel.cuh
// ConfigFor), so small tiles win wherever the large ones make few waves. 16-bit and TF32 take small
// where its blocks on the busiest SM cost under 0.95 of the large ones': large blocks run one per SM at
// a time, each costing 1; small ones three at a time, a round of 1 / 2 / 3 costing 0.55 / 0.7 / 0.835
// (in thousandths below, so that no rounding decides a tie). 3xTF32 always takes small: its large tile
// is 128 x 64, so small tiles are at most twice as many, and ran faster on every shape timed.
// `bmm_paths.py` (H100, flushed us, small / large, large blocks on the busiest SM): bf16 1 x 474 x 138 x
// 202 11.5 / 16.3 (1), 2 x 8192 x 30 x 4096 108 / 125 (1), 8 x 96 x 2174 x 1410 87 / 110 (2) and its TF32
// NT 136 / 201, 3xTF32 209 / 314 (3); 3xTF32 4 x 386 x 2153 x 715 NT 165 / 231 (5), 4 x 3123 x 2188 x 734
// 974 / 1185 (27), 8192 x 50257 x 768 14559 / 17208 (382); large ahead on bf16 4 x 1000 x 2153 x 715 (5,
// i.e. 4.1 waves: 196 / 189), 4 x 1500 / 2200 / 3123 x 2188 x 734 (7, 10, 14: 184 / 179, 260 / 251, 354 /
// 339) and 8192 x 768 x 50257 (3 over K = 50257: 8183 / 5731). NOTES.md, mma.sync.
template <class Atom>
TileSize tile_size(const BmmProblem& p, int tile) {
  TILES_CHECK(tile == 0 || tile == 64 || tile == 128, "tiles::bmm: the mma kernel's tile is 64 or 128, got ", tile);
  if (tile != 0) return tile == 64 ? TileSize::small : TileSize::large;
  if (compute_capability(p.out.get_device()) != 90) return TileSize::large;
  if constexpr (std::is_same_v<Atom, Tf32x3>) {
    return TileSize::small;
  } else {
    constexpr int64_t kSmallRound[3] = {0, 550, 700}, kSmallRoundOf3 = 835;  // thousandths of a large block
    const int64_t sms = sm_count();
    const int64_t large = output_blocks(p, block_tile<Atom>(TileSize::large));
    const int64_t small = output_blocks(p, block_tile<Atom>(TileSize::small));
    const int64_t large_per_sm = (large + sms - 1) / sms, small_per_sm = (small + sms - 1) / sms;
    const int64_t small_cost = small_per_sm / 3 * kSmallRoundOf3 + kSmallRound[small_per_sm % 3];
    return 20 * small_cost < 19 * 1000 * large_per_sm ? TileSize::small : TileSize::large;  // under 0.95
  }
}

// The block tile size p runs at: tile_size's, or for float64 the DMMA kernel's one tile.
template <class Atom>
TileSize picked_size(const BmmProblem& p, int tile) {
  if constexpr (std::is_same_v<Atom, F64>) return TileSize::small;
  else return tile_size<Atom>(p, tile);
}

// How p walks K at `size` (cheapest_split; for float64 also tail_split); whole where K is empty or the
// output is.
template <class Atom>
SplitPlan split_plan(const BmmProblem& p, TileSize size) {
  const int64_t outputs = p.batch * p.m * p.n;
  if (p.k == 0 || outputs == 0) return {};
  const BlockTile t = block_tile<Atom>(size);
  const SplitCosts& costs = std::is_same_v<Atom, F64> ? kDmmaCosts
                            : size == TileSize::small ? kSmallTileCosts
                                                      : kLargeTileCosts;
  const int64_t k_tiles = (p.k + t.depth - 1) / t.depth;
  const SplitChoice all = cheapest_split(costs, output_blocks(p, t), k_tiles, outputs, sm_count());
  if constexpr (std::is_same_v<Atom, F64>) {
    // Only where a split everywhere is declined: over long K it beat the tail split, which the model
    // had the other way round (768 x 2304 x 8192: 612 us split in 3, 664 tail-split, 787 whole).
    const SplitPlan tail = all.splits == 1 ? tail_split(costs, p, k_tiles, kMinSplitGain * all.whole_us, sm_count())
                                           : SplitPlan{};
    if (tail.splits > 1) return tail;
  }
  return {all.splits};
}

// Adds the slices' partials (float, or double for float64) into `total` outputs of p's from `offset`
// on, in slice order.
void sum_partials(const BmmProblem& p, const at::Tensor& partials, int splits, int64_t offset, int64_t total) {
  switch (p.out.scalar_type()) {
    case at::kDouble: return sum_splits<double, double>(p.out.data_ptr<double>() + offset, partials, total, splits);
    case at::kFloat: return sum_splits<float, float>(p.out.data_ptr<float>() + offset, partials, total, splits);
    case at::kBFloat16:
      return sum_splits<at::BFloat16, float>(p.out.data_ptr<at::BFloat16>() + offset, partials, total, splits);
    default: return sum_splits<at::Half, float>(p.out.data_ptr<at::Half>() + offset, partials, total, splits);
  }
}

// Runs q (p's output rows from `row0` on) with K in `splits` slices: each writes its partial outputs (in
// the accumulator type) to a buffer of its own, which sum_partials then adds into p's output.
template <class Atom>
void run_split(Params<typename Atom::Elem> q, const BmmProblem& p, const MatrixLayout& la, const MatrixLayout& lb,
               TileSize size, int splits, int64_t row0) {
  const int64_t depth = block_tile<Atom>(size).depth, k_tiles = (p.k + depth - 1) / depth;
  q.k_split = (k_tiles + splits - 1) / splits * depth;
  q.splits = int((p.k + q.k_split - 1) / q.k_split);
  const auto acc_type = p.out.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor partials = at::empty({q.splits * q.batch, q.m, q.n}, p.out.options().dtype(acc_type));
  q.c = partials.data_ptr();
  launch_width<Atom>(q, p, la, lb, size);
  sum_partials(p, partials, q.splits, row0 * p.n, q.batch * q.m * q.n);
}

template <class Atom>
void run(const BmmProblem& p, int tile, bool may_split) {
  using Elem = typename Atom::Elem;
  const MatrixLayout la = layout_of_a(p), lb = layout_of_b(p);
  const TileSize size = picked_size<Atom>(p, tile);
  Params<Elem> q{};
  q.a = static_cast<const Elem*>(p.a.const_data_ptr());
  q.b = static_cast<const Elem*>(p.b.const_data_ptr());
  q.c = p.out.data_ptr();
  q.batch = p.batch, q.m = p.m, q.n = p.n, q.k = p.k;
  q.a_batch = p.a_strides[0], q.a_ld = la.ld;
  q.b_batch = p.b_strides[0], q.b_ld = lb.ld;
  q.k_split = p.k;
  const SplitPlan plan = may_split ? split_plan<Atom>(p, size) : SplitPlan{};
  if (plan.splits == 1) return launch_width<Atom>(q, p, la, lb, size);
  if (plan.split_from > 0) {  // one output matrix (tail_split): the rows above split_from whole
    Params<Elem> whole = q;
    whole.m = plan.split_from;
    launch_width<Atom>(whole, p, la, lb, size);
    // a's rows from split_from on (a multiple of 64: the operand's alignment, so its copy width, holds)
    q.a += la.mn_major ? plan.split_from : plan.split_from * la.ld;
    q.m = p.m - plan.split_from;
  }
  run_split<Atom>(q, p, la, lb, size, plan.splits, plan.split_from);
}

}  // namespace

const char* kind(const BmmProblem& p) {
  switch (p.out.scalar_type()) {
    case at::kDouble: return "f64";
    case at::kFloat: return float32_as_tf32() ? "tf32" : "3xtf32";
    case at::kBFloat16: return "bf16";
    default: return "fp16";
  }
}

bool can_run(const BmmProblem& p, const char** why) {
#if !defined(TILES_HAS_SM80)
  return refuse(why, "built without sm_80 or newer code (TORCH_CUDA_ARCH_LIST)");
#else
  if (p.a.scalar_type() != p.out.scalar_type() || p.b.scalar_type() != p.out.scalar_type())
    return refuse(why, "operand dtypes differ from the result's");
  if (compute_capability(p.out.get_device()) < 80) return refuse(why, "the device is older than sm_80");
  // The tile grid must fit one launch's x dimension (tiles of at least 64 x 64).
  if ((p.m + 63) / 64 * ((p.n + 63) / 64) >= (int64_t(1) << 31))
    return refuse(why, "the output matrices are too large");
  if (p.k == 0) return true;  // nothing is read: the kernel only writes zeros
  const MatrixLayout la = layout_of_a(p), lb = layout_of_b(p);
  if (!la.ok) return refuse(why, "a has no unit-stride matrix dim");
  if (!lb.ok) return refuse(why, "b has no unit-stride matrix dim");
  if (p.out.scalar_type() == at::kDouble && copy_width(la, lb) < 8)
    return refuse(why, "float64 operands need 8-byte-aligned strides and base");
  return true;
#endif
}

// Calls f(AtomTag<Atom>{}) with the atom p's dtype (and, for float32, the matmul precision) runs on.
template <class Atom>
struct AtomTag {
  using type = Atom;
};
template <class F>
decltype(auto) with_atom(const BmmProblem& p, F&& f) {
  const at::ScalarType dtype = p.out.scalar_type();
  TILES_CHECK(dtype == at::kDouble || dtype == at::kFloat || dtype == at::kBFloat16 || dtype == at::kHalf,
              "tiles::bmm: no mma.sync kernel for dtype ", dtype);
  switch (dtype) {
    case at::kDouble: return f(AtomTag<F64>{});
    case at::kFloat: return float32_as_tf32() ? f(AtomTag<Tf32>{}) : f(AtomTag<Tf32x3>{});
    case at::kBFloat16: return f(AtomTag<Half16<true>>{});
    default: return f(AtomTag<Half16<false>>{});
  }
}

const char* split_name(const BmmProblem& p) {
  return with_atom(p, [&](auto atom) {
    using Atom = typename decltype(atom)::type;
    const SplitPlan plan = split_plan<Atom>(p, picked_size<Atom>(p, 0));
    return plan.splits == 1 ? "" : plan.split_from > 0 ? " tail-split-k" : " split-k";
  });
}

bool splits_k(const BmmProblem& p) { return *split_name(p) != '\0'; }

// The block tile picked_size chooses, as _bmm_tile reports it.
const char* tile(const BmmProblem& p) {
  return with_atom(p, [&](auto atom) {
    using Atom = typename decltype(atom)::type;
    const BlockTile t = block_tile<Atom>(picked_size<Atom>(p, 0));
    return t.rows == 64 ? "64x64" : t.cols == 64 ? "128x64" : "128x128";
  });
}

int copy_bytes(const BmmProblem& p) { return p.k == 0 ? 16 : kernel_copy_width(p, layout_of_a(p), layout_of_b(p)); }

void bmm(const BmmProblem& p, int tile, bool may_split) {
  with_atom(p, [&](auto atom) { run<typename decltype(atom)::type>(p, tile, may_split); });
}

}  // namespace tiles::cuda::mma

namespace tiles::cuda {
bool float32_as_tf32() { return at::globalContext().allowTF32CuBLAS(); }
}  // namespace tiles::cuda
