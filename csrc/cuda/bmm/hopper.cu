// Host side of the Hopper bmm (kernel: bmm/hopper_kernel.cuh): whether a problem can take it, the TMA
// tensor maps that describe each operand in place (no copies, either major order), the tile width,
// and the persistent grid.
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <c10/cuda/CUDAFunctions.h>

#include "cuda/bmm/hopper_kernel.cuh"
#include "cuda/bmm/paths.h"
#include "cuda/launch.cuh"
#include "tiles/format.h"

namespace tiles::cuda::hopper {

template <class T, int BN, bool kTransA, bool kTransB>
void launch(const CUtensorMap& map_a, const CUtensorMap& map_b, const CUtensorMap& map_c, T* c,
            const GemmShape& shape, int grid);

namespace {

constexpr int kBox = 64;  // elements per 128-byte swizzled row of a TMA box

// One operand as TMA sees it: a 3-D tensor [batch][outer][inner] with unit inner stride. `mn_major`
// says whether the inner (contiguous) dim is M (or N) instead of K.
struct OperandLayout {
  bool ok = false;
  bool mn_major = false;
  int64_t inner = 0, outer = 0, batch = 1;
  int64_t outer_stride = 0, batch_stride = 0;  // elements
};

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// rows: the operand's M (for a) or N (for b) extent. TMA needs the base and every stride but the
// innermost 16-byte aligned (8 elements of 2 bytes); a stride of a size-1 dim is never used, so any
// aligned value stands in for it.
OperandLayout layout_of(const at::Tensor& t, int64_t rows, int64_t k, int64_t row_stride, int64_t k_stride,
                        int64_t batch_stride, int64_t batch) {
  OperandLayout l;
  if (k_stride == 1 || k == 1) {
    l.mn_major = false;
    l.inner = k, l.outer = rows;
    l.outer_stride = rows == 1 ? round_up(k, 8) : row_stride;
  } else if (row_stride == 1 || rows == 1) {
    l.mn_major = true;
    l.inner = rows, l.outer = k;
    l.outer_stride = k == 1 ? round_up(rows, 8) : k_stride;
  } else {
    return l;
  }
  l.batch = batch_stride == 0 ? 1 : batch;
  l.batch_stride = batch_stride == 0 ? round_up(l.outer_stride * l.outer, 8) : batch_stride;
  l.ok = l.outer_stride > 0 && l.outer_stride % 8 == 0 && l.batch_stride % 8 == 0 &&
         reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0 && l.outer_stride < (int64_t(1) << 39) &&
         l.batch_stride < (int64_t(1) << 39);
  return l;
}

OperandLayout layout_a(const BmmProblem& p) {
  return layout_of(p.a, p.m, p.k, p.a_strides[1], p.a_strides[2], p.a_strides[0], p.batch);
}
OperandLayout layout_b(const BmmProblem& p) {
  return layout_of(p.b, p.n, p.k, p.b_strides[2], p.b_strides[1], p.b_strides[0], p.batch);
}

PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  // The driver entry point, looked up once (the extension does not link libcuda itself).
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found));
    TILES_CHECK(found == cudaDriverEntryPointSuccess && f != nullptr,
                "tiles::bmm: the CUDA driver has no cuTensorMapEncodeTiled (needs CUDA 12 or newer)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The output [batch][m][n] (contiguous, fresh) for the TMA-store epilogue, in [64][64] boxes.
OperandLayout output_layout(const BmmProblem& p) {
  OperandLayout l;
  l.inner = p.n, l.outer = p.m, l.batch = p.batch;
  l.outer_stride = p.n, l.batch_stride = p.m * p.n;
  l.ok = p.n % 8 == 0 && reinterpret_cast<uintptr_t>(p.out.data_ptr()) % 16 == 0;
  return l;
}

// A map whose boxes are [1][box_outer][64] elements, stored in shared memory with the 128-byte swizzle.
CUtensorMap tensor_map(const at::Tensor& t, const OperandLayout& l, int box_outer) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {cuuint64_t(l.inner), cuuint64_t(l.outer), cuuint64_t(l.batch)};
  const cuuint64_t strides[2] = {cuuint64_t(l.outer_stride) * 2, cuuint64_t(l.batch_stride) * 2};  // bytes
  const cuuint32_t box[3] = {kBox, cuuint32_t(box_outer), 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  const auto type = t.scalar_type() == at::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const CUresult r = encode_tiled()(&map, type, 3, const_cast<void*>(t.const_data_ptr()), dims, strides, box, unit,
                                    CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TILES_CHECK(r == CUDA_SUCCESS, "tiles::bmm: cuTensorMapEncodeTiled failed with CUresult ", int(r),
              " for an operand of shape ", t.sizes(), " and strides ", t.strides());
  return map;
}

template <class T, int BN>
void launch_layouts(const CUtensorMap& ma, const CUtensorMap& mb, const CUtensorMap& mc, bool ta, bool tb, T* c,
                    const GemmShape& s, int grid) {
  if (ta && tb) return launch<T, BN, true, true>(ma, mb, mc, c, s, grid);
  if (ta) return launch<T, BN, true, false>(ma, mb, mc, c, s, grid);
  if (tb) return launch<T, BN, false, true>(ma, mb, mc, c, s, grid);
  launch<T, BN, false, false>(ma, mb, mc, c, s, grid);
}

}  // namespace

bool can_run(const BmmProblem& p, const char** why) {
  auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
#if !defined(TILES_HAS_SM90A)
  return no("built without sm_90a (TORCH_CUDA_ARCH_LIST lacks 9.0a)");
#else
  const auto dtype = p.out.scalar_type();
  if (dtype != at::kBFloat16 && dtype != at::kHalf) return no("dtype is not bfloat16 or float16");
  if (p.k == 0) return no("K is 0");
  if (p.m >= (int64_t(1) << 31) - 256 || p.n >= (int64_t(1) << 31) - 256 || p.k >= (int64_t(1) << 31) ||
      p.batch >= (int64_t(1) << 31))
    return no("a size exceeds TMA's 32-bit coordinates");
  if (compute_capability(p.out.get_device()) != 90) return no("the device is not sm_90");
  if (!layout_a(p).ok) return no("a's strides or alignment do not suit TMA");
  if (!layout_b(p).ok) return no("b's strides or alignment do not suit TMA");
  return true;
#endif
}

void bmm(const BmmProblem& p) {
  const OperandLayout la = layout_a(p), lb = layout_b(p);
  GemmShape s;
  s.batch = p.batch, s.m = p.m, s.n = p.n, s.k = p.k;
  s.a_broadcast = la.batch == 1, s.b_broadcast = lb.batch == 1;
  s.tiles_m = int((p.m + 127) / 128);
  // 256-wide tiles do more work per byte loaded; 128-wide ones when N is small or the wider tiles
  // would leave multiprocessors idle.
  const int sms = sm_count();
  const int64_t wide_tiles = p.batch * s.tiles_m * ((p.n + 255) / 256);
  const int bn = p.n > 128 && wide_tiles >= sms ? 256 : 128;
  s.tiles_n = int((p.n + bn - 1) / bn);
  const int64_t tiles = p.batch * s.tiles_m * s.tiles_n;
  const int grid = int(std::min<int64_t>(tiles, sms));

  // A M-major a is loaded in two 64-row boxes; B N-major in BN / 64 boxes (bmm/hopper_kernel.cuh).
  const CUtensorMap ma = tensor_map(p.a, la, la.mn_major ? kBox : 128);
  const CUtensorMap mb = tensor_map(p.b, lb, lb.mn_major ? kBox : bn);
  const OperandLayout lc = output_layout(p);
  s.tma_store = lc.ok;
  CUtensorMap mc{};  // unused (zeros) when the consumers store directly
  if (lc.ok) mc = tensor_map(p.out, lc, kBox);
  const bool ta = la.mn_major, tb = lb.mn_major;
  if (p.out.scalar_type() == at::kBFloat16) {
    auto* c = reinterpret_cast<__nv_bfloat16*>(p.out.data_ptr());
    bn == 256 ? launch_layouts<__nv_bfloat16, 256>(ma, mb, mc, ta, tb, c, s, grid)
              : launch_layouts<__nv_bfloat16, 128>(ma, mb, mc, ta, tb, c, s, grid);
  } else {
    auto* c = reinterpret_cast<__half*>(p.out.data_ptr());
    bn == 256 ? launch_layouts<__half, 256>(ma, mb, mc, ta, tb, c, s, grid)
              : launch_layouts<__half, 128>(ma, mb, mc, ta, tb, c, s, grid);
  }
}

}  // namespace tiles::cuda::hopper
