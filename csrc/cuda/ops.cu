// Registers the CUDA kernels for the tiles operators. Each entry point makes the inputs' device
// current (kernels then launch on that device's current stream) before the shared entry body runs.
#include <algorithm>
#include <iterator>
#include <optional>

#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <string>

#include "binding/entry.h"
#include "binding/format.h"
#include "cuda/bmm/paths.h"
#include "cuda/kernels.h"

namespace tiles::cuda {
namespace {

// The device of the first CUDA tensor: with mixed devices the dispatcher still lands here, and the
// entry body then reports the mismatch.
c10::Device cuda_device(const at::Tensor& a, const at::Tensor& b) { return a.is_cuda() ? a.device() : b.device(); }

at::Tensor map_cuda(const at::Tensor& x, c10::string_view fn) {
  c10::cuda::CUDAGuard guard(x.device());
  return map_entry<map>(x, fn);
}

at::Tensor zip_cuda(const at::Tensor& a, const at::Tensor& b, c10::string_view fn) {
  c10::cuda::CUDAGuard guard(cuda_device(a, b));
  return zip_entry<zip>(a, b, fn);
}

at::Tensor reduce_cuda(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn, bool keepdim) {
  c10::cuda::CUDAGuard guard(x.device());
  return reduce_entry<reduce>(x, dim, fn, keepdim);
}

at::Tensor bmm_cuda(const at::Tensor& a, const at::Tensor& b) {
  c10::cuda::CUDAGuard guard(cuda_device(a, b));
  return bmm_entry<bmm>(a, b);
}

at::Tensor map_grad_cuda(const at::Tensor& grad, const at::Tensor& saved, c10::string_view fn) {
  c10::cuda::CUDAGuard guard(grad.device());
  return map_grad_entry<map_grad>(grad, saved, fn);
}

at::Tensor zip_grad_cuda(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, c10::string_view fn,
                         int64_t which) {
  c10::cuda::CUDAGuard guard(grad.device());
  return zip_grad_entry<zip_grad>(grad, a, b, fn, which);
}

std::string bmm_path_cuda(const at::Tensor& a, const at::Tensor& b) {
  c10::cuda::CUDAGuard guard(cuda_device(a, b));
  const BmmProblem p = make_bmm_problem(a, b);
  const char* why = "";
  switch (choose_path(p, &why)) {  // the choice bmm makes
    case Path::hopper: {
      const char* store = hopper::store_name(p);
      return store ? std::string("hopper-wgmma ") + store : "hopper-wgmma";
    }
    case Path::hopper_tf32:
      return std::string("hopper-wgmma ") + mma::kind(p) + (hopper_tf32::copies(p) ? " copied" : "") +
             (hopper_tf32::splits_k(p) ? " split-k" : "");
    case Path::thin: return thin::short_k(p) ? "thin short-k" : "thin few-columns";
    case Path::mma: {
      const int bytes = mma::copy_bytes(p);
      return std::string("mma-sync ") + mma::kind(p) +
             (bytes == 16 ? "" : bytes >= 4 ? " unaligned " + std::to_string(bytes) + "-byte" : " unaligned") +
             mma::split_name(p);
    }
    case Path::general: break;
  }
  return std::string("general: ") + why;
}

std::string bmm_tile_cuda(const at::Tensor& a, const at::Tensor& b) {
  c10::cuda::CUDAGuard guard(cuda_device(a, b));
  const BmmProblem p = make_bmm_problem(a, b);
  switch (choose_path(p)) {
    case Path::hopper: return hopper::tile(p);
    case Path::hopper_tf32: return hopper_tf32::tile(p);
    case Path::mma: return mma::tile(p);
    default: return "";
  }
}

// The paths _bmm_on_path takes by name: a kernel, and for some a forced tile size (0: the kernel picks).
// "hopper" is the Hopper kernel of the dtype: the TF32 one for float32, the 16-bit one otherwise;
// "hopper-<width>" the kernel of the dtype with tiles of that many columns (float32: 64, 128, 192 or 256,
// Q's rows where the roles swap; 128 under 3xTF32), and for the 16-bit one " pair-b" / " pair-a" after it
// its blocks in clusters of two that share b's or a's loads (hopper::bmm; bf16 at 96, 128 and 192), and
// " tma-store" / " streaming-store" the way every tile is written, unsplit (at 64, 128, 192 and 256), and
// " whole-tile-store" TMA's stores from buffers for a whole tile (at 256); "hopper-192x192" its tall tiles,
// "hopper-64x64" its small ones; "hopper-128 ping-pong" the float32 one's consumers on 128 x 128 tiles of their
// own in turn (NT only); "thin whole-k" / "thin split-k" the thin kernels with K never split /
// split as far as filling the SMs asks (at most 8 ways where they would sum in clusters).
struct NamedPath {
  c10::string_view name;
  Path kernel;
  int tile;
  bool may_split = true;  // the mma kernel's split-K; "whole-k" walks K on one block per tile
  hopper::Pair pair = hopper::Pair::none;  // the 16-bit Hopper kernel's blocks alone or paired
  std::optional<hopper::Store> store = std::nullopt;  // its stores as planned, or forced (bmm/store.h)
  thin::SplitK thin_split = thin::SplitK::costed;     // the thin kernels' split-K as costed, never or to fill
  int rows = 0;                                       // the 16-bit Hopper kernel's tile rows: 0 as planned, 192 or 64
  bool ping_pong = false;  // the float32 Hopper kernel's consumers on tiles of their own, in turn (NT, 128 wide)
};
constexpr NamedPath kNamedPaths[] = {
    {"hopper", Path::hopper, 0},           {"hopper-64", Path::hopper, 64},
    {"hopper-96", Path::hopper, 96},       {"hopper-112", Path::hopper, 112},
    {"hopper-128", Path::hopper, 128},     {"hopper-160", Path::hopper, 160},
    {"hopper-192", Path::hopper, 192},     {"hopper-256", Path::hopper, 256},
    {"hopper-96 pair-b", Path::hopper, 96, true, hopper::Pair::share_b},
    {"hopper-96 pair-a", Path::hopper, 96, true, hopper::Pair::share_a},
    {"hopper-128 pair-b", Path::hopper, 128, true, hopper::Pair::share_b},
    {"hopper-128 pair-a", Path::hopper, 128, true, hopper::Pair::share_a},
    {"hopper-192 pair-b", Path::hopper, 192, true, hopper::Pair::share_b},
    {"hopper-192 pair-a", Path::hopper, 192, true, hopper::Pair::share_a},
    {"hopper-64 tma-store", Path::hopper, 64, true, hopper::Pair::none, hopper::Store::tma},
    {"hopper-64 streaming-store", Path::hopper, 64, true, hopper::Pair::none, hopper::Store::streaming},
    {"hopper-128 tma-store", Path::hopper, 128, true, hopper::Pair::none, hopper::Store::tma},
    {"hopper-128 streaming-store", Path::hopper, 128, true, hopper::Pair::none, hopper::Store::streaming},
    {"hopper-192 tma-store", Path::hopper, 192, true, hopper::Pair::none, hopper::Store::tma},
    {"hopper-192 streaming-store", Path::hopper, 192, true, hopper::Pair::none, hopper::Store::streaming},
    {"hopper-256 tma-store", Path::hopper, 256, true, hopper::Pair::none, hopper::Store::tma},
    {"hopper-256 streaming-store", Path::hopper, 256, true, hopper::Pair::none, hopper::Store::streaming},
    {"hopper-256 whole-tile-store", Path::hopper, 256, true, hopper::Pair::none, hopper::Store::tma_whole_tile},
    {.name = "hopper-192x192", .kernel = Path::hopper, .tile = 192, .rows = 192},
    {.name = "hopper-64x64", .kernel = Path::hopper, .tile = 64, .rows = 64},
    {.name = "hopper-128 ping-pong", .kernel = Path::hopper, .tile = 128, .ping_pong = true},
    {"mma", Path::mma, 0},
    {"mma-64", Path::mma, 64},             {"mma-128", Path::mma, 128},
    {"mma-64 whole-k", Path::mma, 64, false}, {"mma-128 whole-k", Path::mma, 128, false},
    {"thin", Path::thin, 0},
    {.name = "thin whole-k", .kernel = Path::thin, .tile = 0, .thin_split = thin::SplitK::never},
    {.name = "thin split-k", .kernel = Path::thin, .tile = 0, .thin_split = thin::SplitK::fill},
    {"general", Path::general, 0},
    {"general-32", Path::general, 32},     {"general-64", Path::general, 64}};

at::Tensor bmm_on_path_cuda(const at::Tensor& a, const at::Tensor& b, c10::string_view path) {
  c10::cuda::CUDAGuard guard(cuda_device(a, b));
  const BmmProblem p = make_bmm_problem(a, b);
  const NamedPath* named = std::find_if(std::begin(kNamedPaths), std::end(kNamedPaths),
                                        [&](const NamedPath& n) { return n.name == path; });
  if (named == std::end(kNamedPaths)) {
    std::string names;
    for (const NamedPath& n : kNamedPaths) names += (names.empty() ? "'" : ", '") + std::string(n.name) + "'";
    TILES_CHECK(false, "tiles::_bmm_on_path: path must be one of ", names, "; got '", std::string(path), "'");
  }
  const char* why = "";
  const bool tf32 = p.out.scalar_type() == at::kFloat;
  switch (named->kernel) {
    case Path::hopper:
      TILES_CHECK(!tf32 || (named->pair == hopper::Pair::none && !named->store && named->rows == 0 &&
                            (named->tile == 0 || named->tile % 64 == 0)),
                  "tiles::_bmm_on_path: '", std::string(path), "' is a bfloat16 / float16 kernel's; float32 takes ",
                  "'hopper', 'hopper-64', 'hopper-128', 'hopper-192', 'hopper-256' or 'hopper-128 ping-pong'");
      TILES_CHECK(!named->ping_pong || tf32, "tiles::_bmm_on_path: '", std::string(path), "' is the float32 kernel's");
      TILES_CHECK(named->pair == hopper::Pair::none || p.out.scalar_type() == at::kBFloat16, "tiles::_bmm_on_path: '",
                  std::string(path), "' is built for bfloat16 only");
      TILES_CHECK(tf32 ? hopper_tf32::can_run(p, &why) : hopper::can_run(p, &why),
                  "tiles::_bmm_on_path: the hopper path cannot take these operands: ", why);
      break;
    case Path::mma:
      TILES_CHECK(mma::can_run(p, &why), "tiles::_bmm_on_path: the mma path cannot take these operands: ", why);
      break;
    case Path::thin:
      TILES_CHECK(thin::suits(p), "tiles::_bmm_on_path: the thin path cannot take these operands: K is over 16 ",
                  "and M and N over 4 (over 8 where K is at least 64)");
      break;
    default: break;  // the general kernel takes anything
  }
  if (p.out.numel() == 0) return p.out;
  switch (named->kernel) {
    case Path::hopper:
      if (tf32) hopper_tf32::bmm(p, named->tile, named->ping_pong);
      else hopper::bmm(p, named->tile, named->pair, named->store, named->rows);
      break;
    case Path::mma: mma::bmm(p, named->tile, named->may_split); break;
    case Path::thin: thin::bmm(p, named->thin_split); break;
    default: general::bmm(p, named->tile);
  }
  return p.out;
}

}  // namespace
}  // namespace tiles::cuda

TORCH_LIBRARY_IMPL(tiles, CUDA, m) {
  m.impl("map", &tiles::cuda::map_cuda);
  m.impl("zip", &tiles::cuda::zip_cuda);
  m.impl("reduce", &tiles::cuda::reduce_cuda);
  m.impl("bmm", &tiles::cuda::bmm_cuda);
  m.impl("_map_backward", &tiles::cuda::map_grad_cuda);
  m.impl("_zip_backward", &tiles::cuda::zip_grad_cuda);
  m.impl("_bmm_path", &tiles::cuda::bmm_path_cuda);
  m.impl("_bmm_on_path", &tiles::cuda::bmm_on_path_cuda);
  m.impl("_bmm_tile", &tiles::cuda::bmm_tile_cuda);
}
