// The CUDA bmm kernels, one namespace per path, and the choice between them (bmm/bmm.cu).
//
//   hopper   TMA + wgmma tensor-core kernel: bf16 / fp16 on sm_90a, operands whose rows (or columns)
//            are contiguous with 16-byte-aligned strides, either major order (bmm/hopper.cu)
//   hopper_tf32  TMA + wgmma kernel for float32 on sm_90a: TF32, or 3xTF32 (float32-accurate) under the
//            "highest" matmul precision; operands with a unit-stride matrix dim, either major order (b's
//            tiles transposed in shared memory when neither is K-major), those TMA cannot address copied
//            4 bytes at a time by the kernel's producer warps (bmm/hopper_tf32.cu)
//   mma      mma.sync tensor-core kernel with a cp.async pipeline: every dtype (fp32 as TF32 or 3xTF32 by
//            the float32 matmul precision, fp64 on DMMA) on sm_80 and newer, operands with a unit-stride
//            matrix dim, either major order; strides or a base that are not 16-byte aligned are copied
//            8 or 4 bytes at a time, or element by element through registers where even that does not
//            divide them (16-bit operands) (bmm/mma.cu)
//   thin     CUDA-core kernels for products that tensor-core tiles would mostly pad: K <= 16, or at most
//            4 output columns or rows (8 over a K of 64 or more); any dtype, strides, GPU (bmm/thin.cu)
//   general  shared-memory tiled SIMT kernel: any dtype, strides, GPU (bmm/general.cu)
#pragma once

#include <optional>

#include "binding/problems.h"
#include "cuda/bmm/pair.h"
#include "cuda/bmm/store.h"

namespace tiles::cuda {

// Whether float32 products may run in TF32: torch's float32 matmul precision is "high" or "medium"
// (torch.backends.cuda.matmul.allow_tf32), as for cuBLAS. Otherwise float32 runs as 3xTF32.
bool float32_as_tf32();

// A can_run's refusal: says why through `why` (when given) and returns false.
inline bool refuse(const char** why, const char* reason) {
  if (why) *why = reason;
  return false;
}

enum class Path { hopper, hopper_tf32, thin, mma, general };

// The path bmm runs `p` on (bmm/bmm.cu): hopper where it can take the product, else thin for a thin one
// (mma for a short K of 9 to 16 over few outputs, where it can; at full float32 precision, general
// where its tiles are 32 wide), general for a small float32 product at full precision, else hopper_tf32
// where it can take the product and prefers it, else mma where it can (but general for few output
// tiles over a long K that mma declines to split), else general; when `why` is given and the answer is
// general, it says why.
Path choose_path(const BmmProblem& p, const char** why = nullptr);

namespace general {
// `tile`: the output tile edge, 0 to let the kernel pick (tile_for), 32 or 64 to force one (tests and
// benchmarks, through tiles::_bmm_on_path).
void bmm(const BmmProblem& p, int tile = 0);
// The tile edge the kernel picks for p: 32 for small products whose 64-wide tiles would leave SMs idle,
// else 64.
int tile_for(const BmmProblem& p);
}

namespace thin {
// Whether `p` is thin: K <= 16 (short K), or at most 4 output columns or rows, 8 where K >= 64 (few columns).
bool suits(const BmmProblem& p);
bool short_k(const BmmProblem& p);
// How the few-columns kernels split K over blocks (bmm/thin.cu narrow_k_split): where the split's sum (in
// thread block clusters or a second launch) costs less than the long walk it saves ("thin"), never ("thin
// whole-k"), or as far as filling the SMs asks, at most 8 ways where "thin" would sum in clusters ("thin
// split-k", the rule before costing), the last two to time against the first.
enum class SplitK { costed, never, fill };
void bmm(const BmmProblem& p, SplitK split = SplitK::costed);
}  // namespace thin

namespace hopper {
// Whether this build, the current device and the problem's dtype and layout suit the Hopper kernel;
// when not and `why` is given, says why.
bool can_run(const BmmProblem& p, const char** why = nullptr);
// `width`: the output tile's columns, 0 to let the kernel pick (bmm/hopper.cu `plan`), or 64, 96, 112,
// 128, 160, 192 or 256 to force one (tests and benchmarks, through tiles::_bmm_on_path's "hopper-<width>").
// `pair`: single blocks, or clusters of two over adjacent tiles that share b's or a's loads
// (bmm/pair.h; "hopper-<width> pair-b" / "pair-a"), built for bf16 at 96, 128 and 192 columns.
// `store`: the plan's (bmm/store.h), or Store::tma / Store::streaming forced for every tile, unsplit
// ("hopper-<width> tma-store" / "streaming-store"; widths of 64-column multiples, an output TMA can
// describe), or Store::tma_whole_tile at 256 ("hopper-256 whole-tile-store"). `rows`: 192 with a width of
// 192 forces tall tiles, 192 x 192 ("hopper-192x192"), 64 with a width of 64 small ones, 64 x 64
// ("hopper-64x64"); 0 is the plan's rows (128, 192 where tall tiles cost less, 64 where small ones do).
void bmm(const BmmProblem& p, int width = 0, Pair pair = Pair::none, std::optional<Store> store = std::nullopt,
         int rows = 0);
// How the kernel writes p's output when not through TMA's stores from half-tile buffers held under the
// next tile (then nullptr): "streaming-store" (the threads' evict-first stores: short K, an output larger
// than L2), "whole-tile-store" (TMA's from buffers for the whole tile: two or three k-blocks over 256-wide
// tiles) or "split-k" (few tiles over a long K: float partials of K's slices, summed afterwards);
// bmm/hopper.cu `plan`.
const char* store_name(const BmmProblem& p);
// The output tile the kernel would use for p, "128x<width>", "192x192" or "64x64" (bmm/hopper.cu `plan`).
const char* tile(const BmmProblem& p);
}  // namespace hopper

namespace hopper_tf32 {
bool can_run(const BmmProblem& p, const char** why = nullptr);
// `width`: Q's rows per tile (the output's columns, its rows where the roles swap), 0 to let the kernel
// pick (bmm/hopper_tf32.cu `plan`), or 64, 128, 192 or 256 to force one in TF32, 128 in 3xTF32 (tests and
// benchmarks, through tiles::_bmm_on_path's "hopper-<width>" on float32 operands). `ping_pong`: the kernel
// whose consumer warpgroups take 128 x 128 tiles in turn (with width 128; NT in TF32 only; "hopper-128
// ping-pong"; with width 0 the plan takes it where it models faster, unsplit NT over a K above 736).
void bmm(const BmmProblem& p, int width = 0, bool ping_pong = false);
// Whether the kernel splits p's K into slices (few tiles over a long K; bmm/hopper_tf32.cu `plan`).
bool splits_k(const BmmProblem& p);
// Whether the kernel copies an operand that TMA cannot address (with cp.async, by its producer warps),
// and how many of the two it copies: a copied operand may take the other with it (hopper_tf32.cu
// copied_roles).
bool copies(const BmmProblem& p);
int copied_operands(const BmmProblem& p);
// Whether bmm should send p here: always where nothing is copied (but 3xTF32 over outputs of at most
// 64 x 64); with copies, only where they were measured to beat the mma.sync kernel (bmm/hopper_tf32.cu).
// _bmm_on_path's "hopper" needs can_run alone.
bool prefers(const BmmProblem& p);
// The output tile the kernel would use for p (rows x columns of the output): "128x256", "128x192" or
// "128x128", or "256x128" / "192x128" where the roles are swapped (a K-major, b N-major); bmm/hopper_tf32.cu
// `plan`.
const char* tile(const BmmProblem& p);
}  // namespace hopper_tf32

namespace mma {
bool can_run(const BmmProblem& p, const char** why = nullptr);
// `tile`: the block tile edge, 0 to let the kernel pick (on sm_90: 64 x 64 where its blocks on the
// busiest SM cost under 0.95 of 128 x 128's, and always for 3xTF32, whose large tile is 128 x 64; 128
// elsewhere; float64 has one tile), 64 or 128 to force one (tests and benchmarks, _bmm_on_path).
// `may_split` false walks K whole on one block per tile, where the kernel would split it (splits_k):
// the other side of the split rule, for tests and benchmarks.
void bmm(const BmmProblem& p, int tile = 0, bool may_split = true);
// The block tile bmm(p) picks, rows x columns of the output: "64x64", "128x128" or (3xTF32 off sm_90)
// "128x64".
const char* tile(const BmmProblem& p);
// Whether bmm(p) splits K into slices walked as blocks of their own (few blocks over a long K; mma.cu),
// and how, as _bmm_path names it: "" (whole), " split-k" (every tile), " tail-split-k" (float64: the
// tile rows past its whole waves only, mma.cu tail_split).
bool splits_k(const BmmProblem& p);
const char* split_name(const BmmProblem& p);
// The instruction the problem's dtype (and, for float32, the matmul precision) runs on: "f64",
// "tf32", "3xtf32", "bf16" or "fp16".
const char* kind(const BmmProblem& p);
// The width of the mma.sync kernel's global-to-shared copies for these operands: 16, 8 or 4 bytes
// (cp.async), or one element (16-bit operands with an odd stride or base: register loads).
int copy_bytes(const BmmProblem& p);
}  // namespace mma

}  // namespace tiles::cuda
