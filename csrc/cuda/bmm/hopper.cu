// Host side of the Hopper bf16/fp16 bmm (kernel: bmm/hopper_kernel.cuh): whether a problem can take it,
// the TMA tensor maps of its operands (bmm/tma_maps.h), the tile width, and the persistent grid.
#include <type_traits>

#include "binding/format.h"
#include "cuda/bmm/hopper_kernel.cuh"
#include "cuda/bmm/operand_layout.h"  // with_layouts
#include "cuda/bmm/paths.h"
#include "cuda/bmm/split_k.cuh"
#include "cuda/bmm/tma_maps.h"
#include "cuda/launch.cuh"

namespace tiles::cuda::hopper {

template <class T, int BN, bool kTransA, bool kTransB>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
            const GemmShape& shape, int grid);
template <class T, bool kTransA, bool kTransB>
void launch_whole_tile(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                       const GemmShape& shape, int grid);
template <class T, int BN, bool kTransA, bool kTransB>
void launch_pair(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                 const GemmShape& shape, int grid, Pair pair);
template <class T, int kSide, bool kTransA, bool kTransB>
void launch_square(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
                   const GemmShape& shape, int grid);

// The widths whose paired kernels are built (instances/bmm_hopper_*_pairs.cu).
template <class T, int BN>
constexpr bool kHasPairs = std::is_same_v<T, __nv_bfloat16> && (BN == 96 || BN == 128 || BN == 192);

namespace {

constexpr int kBox = 64;  // elements per 128-byte swizzled row of a TMA box

template <class T, int BN>
void launch_layouts(const CUtensorMap& ma, const CUtensorMap& mb, const CUtensorMap& mc, bool ta, bool tb, T* c,
                    const GemmShape& s, int grid, Pair pair) {
  TORCH_CHECK(pair == Pair::none || (kHasPairs<T, BN>), "tiles::bmm: no paired Hopper kernel for ", BN,
              "-wide tiles of this dtype");
  with_layouts(ta, tb, [&](auto trans_a, auto trans_b) {
    constexpr bool kA = decltype(trans_a)::value, kB = decltype(trans_b)::value;
    if constexpr (kHasPairs<T, BN>)
      if (pair != Pair::none) return launch_pair<T, BN, kA, kB>(ma, mb, mc, c, s, grid, pair);
    launch<T, BN, kA, kB>(ma, mb, mc, c, s, grid);
  });
}

template <class T>
void launch_width(const CUtensorMap& ma, const CUtensorMap& mb, const CUtensorMap& mc, bool ta, bool tb, T* c,
                  const GemmShape& s, int grid, int bm, int bn, Pair pair) {
  if (bm != 128) {
    TORCH_INTERNAL_ASSERT((bm == 192 || bm == 64) && bn == bm && pair == Pair::none && s.store != Store::tma_whole_tile,
                          "hopper::bmm: tall and small tiles are built as 192 x 192 and 64 x 64 single blocks");
    return with_layouts(ta, tb, [&](auto trans_a, auto trans_b) {
      constexpr bool kA = decltype(trans_a)::value, kB = decltype(trans_b)::value;
      if (bm == 192) return launch_square<T, 192, kA, kB>(ma, mb, mc, c, s, grid);
      launch_square<T, 64, kA, kB>(ma, mb, mc, c, s, grid);
    });
  }
  if (s.store == Store::tma_whole_tile) {
    TORCH_INTERNAL_ASSERT(bn == 256 && pair == Pair::none,
                          "hopper::bmm: whole-tile stores are built for 256-wide single blocks");
    return with_layouts(ta, tb, [&](auto trans_a, auto trans_b) {
      launch_whole_tile<T, decltype(trans_a)::value, decltype(trans_b)::value>(ma, mb, mc, c, s, grid);
    });
  }
  switch (bn) {
    case 256: return launch_layouts<T, 256>(ma, mb, mc, ta, tb, c, s, grid, pair);
    case 192: return launch_layouts<T, 192>(ma, mb, mc, ta, tb, c, s, grid, pair);
    case 160: return launch_layouts<T, 160>(ma, mb, mc, ta, tb, c, s, grid, pair);
    case 112: return launch_layouts<T, 112>(ma, mb, mc, ta, tb, c, s, grid, pair);
    case 96: return launch_layouts<T, 96>(ma, mb, mc, ta, tb, c, s, grid, pair);
    case 64: return launch_layouts<T, 64>(ma, mb, mc, ta, tb, c, s, grid, pair);
    default: return launch_layouts<T, 128>(ma, mb, mc, ta, tb, c, s, grid, pair);
  }
}

}  // namespace

bool can_run(const BmmProblem& p, const char** why) {
#if !defined(TILES_HAS_SM90A)
  return refuse(why, "built without sm_90a (TORCH_CUDA_ARCH_LIST lacks 9.0a)");
#else
  const auto dtype = p.out.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf) return refuse(why, "dtype is not bfloat16 or float16");
  if (const char* reason = tma_unsuitable(p)) return refuse(why, reason);
  return true;
#endif
}

namespace {

// One k-block of a tile, in H100 microseconds, by tile width (from one-wave timings: 768 x 2304 x 8192 at
// 128-wide, 768 x 3072 x 8192 at 192-wide; 4096^3 at 256-wide). 160 in proportion to the width, untimed; so are
// 96 (bmm picks it only for one-wave products, below) and 112 (by name only). 64 (N <= 64) is fitted over the
// H200 grid's 31 rows a precision then at 128 x 64 (fit_plan_costs.py: 0.48; six a precision take 64 x 64
// since 96b3870; the A/B of the splits it changes in NOTES.md, "64-wide tiles for N <= 64"): a 64-wide
// k-block loads the same 16 KiB of a as a 128-wide one, which bounds it. The others were timed before
// f4e9a22's leaner producer, which made one-wave k-blocks 5-15% faster on an H200 (NOTES.md, "Pairs and the
// producer's k-block"): not re-fitted.
double k_block_us(int bn) {
  switch (bn) {
    case 256: return 0.76;
    case 192: return 0.51;
    case 128: return 0.40;
    case 64: return 0.48;
    default: return 0.40 * bn / 128;
  }
}

bool staged_width(int bn) { return bn % 64 == 0; }

// Short-K outputs larger than L2 take the threads' streaming stores only on DRAM slower than this
// (bytes per second): between the two chips timed, H100 SXM and H200 (plan, below). Other chips are
// extrapolated.
constexpr double kStreamingStoreMaxDram = 4.0e12;

// The tiles launch_width instantiates, and the names _bmm_tile gives them.
struct TileName {
  int rows, width;
  const char* name;
};
constexpr TileName kTiles[] = {{128, 64, "128x64"},   {128, 96, "128x96"},   {128, 112, "128x112"},
                               {128, 128, "128x128"}, {128, 160, "128x160"}, {128, 192, "128x192"},
                               {128, 256, "128x256"}, {192, 192, "192x192"}, {64, 64, "64x64"}};
const TileName* tile_named(int rows, int width) {
  for (const TileName& t : kTiles)
    if (t.rows == rows && t.width == width) return &t;
  return nullptr;
}

// One k-block of a tall (192 x 192) tile: untimed, 1.5 times a 128 x 192 one's, in proportion to the
// tensor-core work.
constexpr double kTallKBlockUs = 0.765;
// One k-block of a small (64 x 64) tile: two thirds of a 128 x 64 one's, as its stage is two thirds the
// bytes. Fitted on an H200 it is half (0.25; NOTES.md, "Small tiles for narrow products"), but the model
// has no per-tile cost: at 0.25 it took small tiles for short-K products of many waves, where they lost
// (200 x 250 x 40 x 200 24% slower back to back), and at 0.32 it keeps those at 128 rows, with products of
// three waves of small tiles against two of 128 rows (which ran 5-9% faster small).
constexpr double kSmallKBlockUs = 0.32;

// The tiles, the output store and the persistent grid for a problem, which bmm and the path name share.
struct Plan {
  int bm, bn;
  int tiles_m, tiles_n;
  int64_t k_blocks;  // per split
  int splits;
  int grid;
  OperandLayout out;  // the output as TMA sees it (out.ok: TMA can address it)
  Store store;
  Pair pair;
};

// Tile width: the narrowest that takes no more waves over the SMs than 256-wide tiles. A narrower tile
// takes less time, but not in proportion (128-wide about 0.7 of a 256-wide one's), so it pays only where
// it fills the same waves: N <= 128, or outputs whose last 256-wide wave is partly idle (8192 x 768: 192
// tiles of 256 on 132 SMs, two waves of 192-wide; NOTES.md, "Launch rules: the measurements behind
// them"). 160-wide tiles join where 256-wide ones take a single wave (before any split of K): the
// weight gradient 768 x 3072 is 96 tiles of 192 columns, 120 of 160 (0.90x the time on an H200), and 144
// of 128. Past one wave they stay out, since they store from registers where the others stage the store
// under the next tile's mainloop. 96-wide tiles join where 128-wide ones take one wave, b is K-major and
// K has at least 16 k-blocks: back to back on an H200 they took 0.91x 128's time on 2048 x 768 x 3072 NT
// (128 tiles of 96 on 132 SMs against 96 of 128) and 0.87x on 1536 x 768 x 3072, but 1.11x on 4096 x 384 x
// 768, since their registers' store is not overlapped (where K is long, the shorter k-blocks pay for
// it); an N-major b, loaded in two whole 64-column boxes, ran 17% slower (NOTES.md, "Pairs and the
// producer's k-block"; "Tile widths on one wave"). 112 stays by name only. N <= 64 (attention's p @ v
// and its input gradient at head size 64) takes 64-wide tiles: as many as 128-wide ones, with half the
// tensor-core work and b's stage a k-block, where 128 columns multiplied zeros past N.
// Output tiles of rows x width for p, and the waves of them over the SMs (tile_width, tall_tiles_pay,
// small_tiles_pay).
int64_t tile_count(const BmmProblem& p, int64_t rows, int64_t width) {
  return p.batch * ((p.m + rows - 1) / rows) * ((p.n + width - 1) / width);
}
int64_t tile_waves(const BmmProblem& p, int64_t rows, int64_t width, int64_t sms) {
  return (tile_count(p, rows, width) + sms - 1) / sms;
}

int tile_width(const BmmProblem& p, int64_t sms) {
  if (p.n <= 64) return 64;
  auto tiles = [&](int64_t width) { return tile_count(p, 128, width); };
  auto waves = [&](int64_t width) { return tile_waves(p, 128, width, sms); };
  int bn = 256;
  for (const int width : {192, 160, 128})
    if (waves(width) <= waves(256) && (staged_width(width) || waves(256) == 1)) bn = width;
  if (bn == 128 && p.k >= 16 * 64 && waves(128) == 1 && waves(96) == 1 && tiles(96) > tiles(128) &&
      !layout_b(p).mn_major)
    bn = 96;
  return bn;
}

// Tall tiles (192 x 192) in place of 128 x 192 or 128 x 256 ones that take at most two waves, where tall
// ones cost less by the waves they take and their k-blocks' time: 2048 x 2304 is 11 x 12 = 132 tall
// tiles, one wave, where 128 x 192 takes 16 x 12 = 192, two (cuBLAS runs 192 x 192 tiles there:
// NOTES.md, "cuBLAS's tiles on the training shapes"). Not in place of narrower tiles (N <= 128, or one
// wave of 96 or 160 columns), where a tall tile's columns would be zeros or the margin is within the
// untimed cost's error, nor where the threads' streaming stores would write the output (untimed together).
bool tall_tiles_pay(const BmmProblem& p, int bn, int64_t sms) {
  if (bn < 192) return false;
  const int64_t now = tile_waves(p, 128, bn, sms), tall = tile_waves(p, 192, 192, sms);
  return now <= 2 && double(tall) * kTallKBlockUs < double(now) * k_block_us(bn);
}

// Small tiles (64 x 64) in place of 128 x 64 ones (N <= 64) where they cost less, each count of tiles with
// its cheapest split of K (split_k.cuh cheapest_k_split): narrow products over few rows, where 128-row
// tiles leave SMs idle or take a split and its summing launch. 1 x 2048 x 64 x 1024 is 16 tiles of 128
// rows and 32 of 64 (on an H200 back to back 7.5 -> 6.1 us, cuBLAS 4.3); 1 x 8192 x 64 x 4096 runs 128
// small tiles unsplit where 128-row ones took two slices (25.1 -> 21.6, cuBLAS 20.4). Many waves keep
// 128 rows: 96 x 1024 x 64 x 1024 is 768 tiles against 1536, and ran 2% slower at 64 (NOTES.md, "Small
// tiles for narrow products"). cuBLAS runs 24- to 64-row tiles on these shapes. Not with the threads'
// streaming stores (untimed together), as for tall tiles.
bool small_tiles_pay(const BmmProblem& p, int bn, int64_t sms, int64_t k_total, int64_t outputs, int max_splits) {
  if (bn != 64) return false;
  auto cost = [&](int64_t rows, double block_us) {
    return cheapest_k_split(tile_count(p, rows, 64), k_total, outputs, int(sms), block_us, 0, max_splits).us;
  };
  return cost(64, kSmallKBlockUs) < cost(128, k_block_us(64));
}

// `pair`: paired blocks (bmm/pair.h), by name only, pending measurements. `forced_store`: TMA's stores,
// TMA's of whole tiles (256-wide only) or the threads' streaming stores for every tile, without split-K
// (by name only, to time them against each other).
// `forced_rows`: 192 for tall tiles by name (with a forced width of 192), 64 for small ones (width 64).
Plan plan(const BmmProblem& p, int forced_width = 0, Pair pair = Pair::none,
          std::optional<Store> forced_store = std::nullopt, int forced_rows = 0) {
  const int64_t sms = sm_count();
  int bn = forced_width ? forced_width : tile_width(p, sms);
  // Short K and an output larger than L2: the kernel is a write stream to DRAM. Where DRAM is the
  // bound (an H100's 3.35 TB/s), the threads' evict-first stores beat TMA's by keeping the operands in
  // L2; with an H200's 4.8 TB/s, TMA's stores, overlapped with the next tile's mainloop, took 0.83-0.94x
  // their time on every short-K case timed. An output that fits in L2 stays there and TMA's stores are as
  // fast, and with long K the threads' stores cost the mainloop (NOTES.md, "Short K: the streaming store",
  // "Short K on the H200").
  const bool short_k = p.k <= 128;
  const OperandLayout out = output_layout(p);
  Store store = Store::tma;
  if (!out.ok || !staged_width(bn)) store = Store::direct;
  else if (short_k && p.out.numel() * int64_t(p.out.element_size()) > l2_bytes() &&
           dram_bytes_per_s() < kStreamingStoreMaxDram)
    store = Store::streaming;
  // Split-K where few tiles over a long K leave SMs idle (below). The partials are summed into the output
  // as one contiguous run of elements, and the last slice's past-K k-blocks (fewer than the slices) must
  // keep TMA's int32 k coordinate in range.
  const int64_t k_total = (p.k + 63) / 64, outputs = p.batch * p.m * p.n;
  const bool can_split = !forced_store && p.out.is_contiguous() && (k_total + kMaxCostedSplits) * 64 <= INT32_MAX;
  int bm = 128;
  const bool planned = !forced_width && pair == Pair::none && store != Store::streaming;
  const bool planned_tall = planned && tall_tiles_pay(p, bn, sms);
  if (forced_rows == 192 || planned_tall) {
    TORCH_INTERNAL_ASSERT(bn == 192 || !forced_width, "hopper::plan: tall tiles are 192 x 192");
    TORCH_INTERNAL_ASSERT(pair == Pair::none && forced_store != Store::tma_whole_tile,
                          "hopper::plan: tall tiles run as single blocks with half-tile store buffers");
    bm = 192, bn = 192;  // staged like the 192- and 256-wide tiles it replaces (direct only where !out.ok)
  } else if (forced_rows == 64 ||
             (planned && small_tiles_pay(p, bn, sms, k_total, outputs, can_split ? kMaxCostedSplits : 1))) {
    TORCH_INTERNAL_ASSERT(bn == 64 && pair == Pair::none && forced_store != Store::tma_whole_tile,
                          "hopper::plan: small tiles are 64 x 64 single blocks");
    bm = 64;
  }
  const int tiles_m = int((p.m + bm - 1) / bm);
  const int tiles_n = int((p.n + bn - 1) / bn);
  const int64_t tiles = p.batch * tiles_m * tiles_n;
  const double block_us = bm == 192 ? kTallKBlockUs : bm == 64 ? kSmallKBlockUs : k_block_us(bn);
  const int splits = can_split ? costed_k_splits(tiles, k_total, outputs, int(sms), block_us) : 1;
  const int64_t k_blocks = (k_total + splits - 1) / splits;
  if (splits > 1) store = Store::partials;
  if (forced_store) {
    const Store forced = *forced_store;
    TORCH_INTERNAL_ASSERT(forced == Store::tma || forced == Store::streaming || forced == Store::tma_whole_tile,
                          "hopper::plan: a forced store is TMA's, TMA's of whole tiles or the streaming one");
    TORCH_INTERNAL_ASSERT(forced != Store::tma_whole_tile || (bn == 256 && pair == Pair::none),
                          "hopper::plan: whole-tile stores are built for 256-wide single blocks");
    const char* name = forced == Store::tma ? "tma-store" : forced == Store::streaming ? "streaming-store"
                                                                                      : "whole-tile-store";
    TORCH_CHECK(store == Store::tma || store == Store::streaming, "tiles::_bmm_on_path: '", name,
                "' needs an output that TMA can describe (rows of 16-byte multiples, 16-byte aligned)");
    store = forced;
  } else if (store == Store::tma && bn == 256 && pair == Pair::none && k_blocks >= 2 && k_blocks <= 3) {
    // Two or three k-blocks a 256-wide tile: its mainloop is short beside its 64 KiB store, and with
    // buffers for half a tile the second half waits for the first to leave shared memory, at the output's
    // DRAM rate. Buffers for the whole tile (a stage fewer) store it in one go, which waits only for the
    // previous tile's stores: on an H200, 48 x 2048^2 x 128 155 -> 137 us (cuBLAS 128), 2 x 8192^2 x 128
    // 124 -> 93 (105), K = 192 188 -> 177; at K = 64 it was even, at 256 10% slower (NOTES.md, "Short
    // K: whole-tile store buffers").
    store = Store::tma_whole_tile;
  }
  // Paired blocks walk pairs of tiles, two blocks to a pair.
  const int per = pair == Pair::none ? 1 : 2;
  const int64_t walked = p.batch * (pair == Pair::share_b ? (tiles_m + 1) / 2 : tiles_m) *
                         (pair == Pair::share_a ? (tiles_n + 1) / 2 : tiles_n);
  const int grid = per * int(std::min<int64_t>(walked * splits, sms / per));
  return {bm, bn, tiles_m, tiles_n, k_blocks, splits, grid, out, store, pair};
}

}  // namespace

const char* store_name(const BmmProblem& p) {
  switch (plan(p).store) {
    case Store::streaming: return "streaming-store";
    case Store::tma_whole_tile: return "whole-tile-store";
    case Store::partials: return "split-k";
    default: return nullptr;
  }
}

const char* tile(const BmmProblem& p) {
  const Plan chosen = plan(p);
  return tile_named(chosen.bm, chosen.bn)->name;
}

void bmm(const BmmProblem& p, int width, Pair pair, std::optional<Store> store, int rows) {
  const int named_rows = rows ? rows : 128;
  TORCH_INTERNAL_ASSERT(width == 0 || tile_named(named_rows, width), "hopper::bmm: no ", named_rows, " x ", width,
                        " tiles");
  const OperandLayout la = layout_a(p), lb = layout_b(p);
  const Plan chosen = plan(p, width, pair, store, rows);
  const int bm = chosen.bm, bn = chosen.bn, grid = chosen.grid;
  GemmShape s;
  s.batch = p.batch, s.m = p.m, s.n = p.n, s.k = p.k;
  s.a_broadcast = la.batch == 1, s.b_broadcast = lb.batch == 1;
  s.tiles_m = chosen.tiles_m, s.tiles_n = chosen.tiles_n;
  s.store = chosen.store;
  s.k_blocks = chosen.k_blocks, s.splits = chosen.splits;
  // Split-K: each slice's float partials, [splits][batch][m][n], summed in slice order into the output.
  const int64_t outputs = p.batch * p.m * p.n;
  const at::Tensor partials =
      s.splits > 1 ? at::empty({s.splits * outputs}, p.out.options().dtype(at::kFloat)) : at::Tensor();
  s.partials = s.splits > 1 ? partials.data_ptr<float>() : nullptr;

  // A M-major a is loaded in BM / 64 boxes of 64 rows; B N-major in BN / 64 boxes, rounded up
  // (bmm/hopper_kernel.cuh). A paired block loads half the rows of a K-major shared operand's box.
  const CUtensorMap ma = tensor_map(p.a, la, la.mn_major ? kBox : chosen.pair == Pair::share_a ? 64 : bm);
  const CUtensorMap mb = tensor_map(p.b, lb, lb.mn_major ? kBox : chosen.pair == Pair::share_b ? bn / 2 : bn);
  CUtensorMap mc{};  // unused (zeros) unless TMA stores the output
  if (bulk_stores(s.store)) mc = tensor_map(p.out, chosen.out, kBox);
  const bool ta = la.mn_major, tb = lb.mn_major;
  if (p.out.scalar_type() == at::kBFloat16) {
    launch_width(ma, mb, mc, ta, tb, reinterpret_cast<__nv_bfloat16*>(p.out.data_ptr()), s, grid, bm, bn, chosen.pair);
    if (s.splits > 1) sum_splits<at::BFloat16, float>(p.out.data_ptr<at::BFloat16>(), partials, outputs, s.splits);
  } else {
    launch_width(ma, mb, mc, ta, tb, reinterpret_cast<__half*>(p.out.data_ptr()), s, grid, bm, bn, chosen.pair);
    if (s.splits > 1) sum_splits<at::Half, float>(p.out.data_ptr<at::Half>(), partials, outputs, s.splits);
  }
}

}  // namespace tiles::cuda::hopper
