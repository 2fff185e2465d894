// tiles::bmm on CUDA: the choice of kernel. The fastest path whose requirements the problem meets runs;
// the general kernel takes everything else, so every input is computed (bmm/paths.h lists the paths).
#include "cuda/bmm/paths.h"
#include "cuda/kernels.h"
#include "cuda/launch.cuh"  // sm_count

namespace tiles::cuda {

namespace {

// Few 128 x 128 output tiles over a long K: the mma kernel splits K over the idle multiprocessors
// itself (bmm/mma.cu cheapest_split), faster than the general kernel's split-K that took these before
// (H100, flushed us: bf16 2 x 633 x 10 x 944 14.9 against 39.2, 1 x 92 x 24 x 1858 14.6 against 18.1,
// 1 x 768 x 10 x 50257 NT 130 against 508; TF32 that one 164 against 269) and than the Hopper TF32
// kernel's copies of an operand TMA cannot address (that one 570 us).
bool few_tiles_long_k(const BmmProblem& p) {
  const int64_t tiles = (p.m + 127) / 128 * ((p.n + 127) / 128) * p.batch;
  return tiles * 8 < sm_count() && p.k >= 256;
}

// Whether a float32 product at full precision runs faster on the general kernel's FMAs than on 3xTF32,
// whose fixed cost per k-step of a tile dominates when there is little work: few multiply-adds, or an
// output of few tiles (which the general kernel splits along K over the idle SMs) up to 2^26 multiply-adds
// where the Hopper kernel reads both operands through TMA (2 x 512 x 100 x 512, 2^25.6: 24.8 us against
// 27.9; 2 x 2048 x 60 x 512, 2^27: 38.7 against 28.7; 2 x 2048 x 100 x 4096: 321 against 58). Where an
// operand would be copied (or the Hopper kernel does not run) the mma.sync kernel's 3xTF32 takes every
// product over 2^24: it is 1.2-2.2x faster than the general kernel there, over a short K or a long one
// (H200, flushed us, general against mma-64: 2 x 35 x 4483 x 445 53-55 against 35-36 in every layout,
// 8 x 47 x 1254 x 74 18-19 against 13, 2 x 2048 x 30 x 4096 142 against 74, 1 x 3000 x 77 x 3000 170
// against 79, 2 x 8192 x 10 x 4096 490 against 244; before N1b and e93d5af the general kernel led on the
// long K ones up to 2^30). (A K under one tensor-core k-step is thin and never gets here.) Timings
// (`bmm_paths.py --preset skinny-float32`, `--preset slow-grid-fp32`) in NOTES.md, "Which float32
// products take the general kernel". TF32 ("high" precision) keeps the tensor cores.
bool small_full_precision_float(const BmmProblem& p) {
  constexpr int64_t kMaxMultiplyAdds = int64_t(1) << 24, kMaxOutputs = int64_t(1) << 19;
  constexpr int64_t kMaxMultiplyAddsThroughTma = int64_t(1) << 26;
  if (p.out.scalar_type() != at::kFloat || float32_as_tf32()) return false;
  const int64_t outputs = p.batch * p.m * p.n, multiply_adds = outputs * p.k;
  if (multiply_adds <= kMaxMultiplyAdds) return true;
  const bool through_tma = hopper_tf32::can_run(p) && !hopper_tf32::copies(p);
  return through_tma && outputs < kMaxOutputs && multiply_adds <= kMaxMultiplyAddsThroughTma;
}

// Whether the mma.sync kernel beats the short-K kernel: K of 9 to 16 (where the short-K kernel's threads
// hold two columns of b each, not four) over fewer than 2^20 outputs. Measured in every precision with
// `bmm_paths.py --preset slow-grid-<prec>` (H100, NOTES.md "Thin products"): 5 x 2565 x 5 x 16 and
// 2 x 1905 x 10 x 16 run 7-8 us on the mma kernel against 8-11 on the short-K one; larger outputs keep it.
bool short_k_on_tensor_cores(const BmmProblem& p) {
  constexpr int64_t kMinK = 9, kMaxOutputs = int64_t(1) << 20;
  return thin::short_k(p) && p.k >= kMinK && p.batch * p.m * p.n < kMaxOutputs;
}

// Whether a short-K product that short_k_on_tensor_cores takes off the thin kernel runs faster on the
// general kernel than on the mma kernel's 3xTF32: at full float32 precision (small_full_precision_float,
// which holds for every such product there) where the general kernel takes 32-wide tiles (few blocks of
// 64, little work), a k-slab of FMAs costs less than 3xTF32's k-step. H200, `bmm_paths.py --precision
// highest`, flushed / back to back us, mma-64 against general-32: 1 x 64 x 256 x 10 NT (the input
// gradient of examples/train.py's last layer) 9.2 / 5.9 against 6.5 / 3.5, 2 x 1905 x 10 x 16 7.8-8.1 /
// 4.9 against 6.5-6.7 / 3.5, 4 x 128 x 128 x 12 7.8 / 4.9 against 6.5 / 3.5; where the kernel takes
// 64-wide tiles the mma kernel stays ahead (5 x 2565 x 5 x 16, 205 blocks of 64: 8.4-8.9 / 4.7-5.6
// against general-64's 10.0-10.5 / 6.6-7.1).
// Up to 2^22 multiply-adds only, where tile_for's 32-wide tiles stopped when these were measured: above it
// (2^22-2^23 of a short K over fewer than 2^20 outputs) the mma kernel stays ahead (H200, flushed us, mma-64
// against general-32: 1 x 1024 x 512 x 16 7.1 against 10.3, 2 x 512 x 512 x 12 7.3 against 9.5, 1 x 100 x
// 4000 x 16 7.2 against 9.9).
bool short_k_on_cuda_cores(const BmmProblem& p) {
  constexpr int64_t kMaxMultiplyAdds = int64_t(1) << 22;
  return small_full_precision_float(p) && general::tile_for(p) == 32 && p.batch * p.m * p.n * p.k <= kMaxMultiplyAdds;
}

// Whether a TF32 product of which the Hopper kernel copies one operand (copied_operands: those TMA
// cannot address, and one that a copied operand takes with it) runs faster there than on the mma.sync
// kernel's copies, below the size hopper_tf32::prefers takes them from. Over a K of 1024 or more the
// mma.sync kernel's narrow copies cost ~1.8 us a k-step whatever the output (mma.sync against the copies:
// 2 x 2048 x 30 x 4096 239 us against 56; 1 x 3000 x 77 x 3000 258 against 55; 2 x 120 x 4099 x 1100 96
// against 72; 8 x 96 x 2174 x 1410 with a^T 194 against 86). Below it the copies win some (2 x 120 x
// 4099 x 1000 89 against 67; 1 x 10 x 50257 x 768 169 against 131) and lose others (K = 512 35-36 against
// 38-39 at every M; 2 x 2048 x 10 x 944 58 against 67): left on mma.sync. With both operands copied the
// copies mostly lost (7 x 1801 x 49 x 1097 96 against 115, 8 x 96 x 2174 x 1410 189 against 288; NT 194
// against 175), as 3xTF32's did (it copies both whenever it copies one: 2 x 2048 x 10 x 4096 222 against
// 270). Measured with `bmm_paths.py --preset skinny-float32` (H100; NOTES.md "General kernel and small
// float32 products").
bool long_k_tf32_on_hopper_copies(const BmmProblem& p) {
  constexpr int64_t kMinK = 1024;
  if (p.out.scalar_type() != at::kFloat || !float32_as_tf32() || p.k < kMinK) return false;
  return hopper_tf32::can_run(p) && hopper_tf32::copied_operands(p) == 1;
}

}  // namespace

Path choose_path(const BmmProblem& p, const char** why) {
  // The Hopper 16-bit kernel streams a short K's output, and reads a few-column product's large operand,
  // at the memory's speed; every other kernel pads a thin product's tiles (bmm/thin.cu).
  if (hopper::can_run(p)) return Path::hopper;
  if (thin::suits(p)) {
    if (!short_k_on_tensor_cores(p) || !mma::can_run(p)) return Path::thin;
    if (!short_k_on_cuda_cores(p)) return Path::mma;
  }
  if (small_full_precision_float(p)) {  // (short-K products on the CUDA cores too)
    if (why) *why = "small float32 product at full precision";
    return Path::general;
  }
  if (hopper_tf32::can_run(p) && hopper_tf32::prefers(p)) return Path::hopper_tf32;
  if (!mma::can_run(p, why)) return Path::general;
  // Few tiles over a long K: the mma kernel splits K itself (bmm/mma.cu cheapest_split), as the DMMA one
  // always did; where it declines (a K too short for two 8-k-tile slices, or a split saving under a tenth:
  // 16-bit 1 x 512 x 512 x 800, TF32 K of 256 to 384) the general kernel's 64-deep split-K takes them, as
  // before the mma kernel split (not re-timed).
  if (few_tiles_long_k(p) && p.out.scalar_type() != at::kDouble && !mma::splits_k(p)) {
    if (why) *why = "few output tiles over a long K (split-K)";
    return Path::general;
  }
  return long_k_tf32_on_hopper_copies(p) && !few_tiles_long_k(p) ? Path::hopper_tf32 : Path::mma;
}

void bmm(const BmmProblem& p) {
  switch (choose_path(p)) {
    case Path::hopper: return hopper::bmm(p);
    case Path::hopper_tf32: return hopper_tf32::bmm(p);
    case Path::thin: return thin::bmm(p);
    case Path::mma: return mma::bmm(p);
    case Path::general: return general::bmm(p);
  }
}

}  // namespace tiles::cuda
