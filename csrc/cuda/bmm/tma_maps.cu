// TMA tensor maps for the Hopper bmm kernels (bmm/tma_maps.h).
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <c10/cuda/CUDAException.h>

#include "binding/format.h"
#include "cuda/bmm/operand_layout.h"
#include "cuda/bmm/tma_maps.h"
#include "cuda/launch.cuh"  // compute_capability

namespace tiles::cuda::hopper {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// TMA needs the base and every stride but the innermost 16-byte aligned. The stride of a size-1 dim
// and that of an operand broadcast over the batch are never used: an aligned value stands in. (A
// stride of 0 on the outer matrix dim, longer than 1, leaves outer_stride 0: not TMA's.)
OperandLayout layout_of(const at::Tensor& t, const MatrixLayout& m, int64_t batch) {
  const int64_t align = 16 / int64_t(t.element_size());  // elements per 16 bytes
  OperandLayout l;
  if (!m.ok) return l;
  l.mn_major = m.mn_major;
  l.inner = m.inner, l.outer = m.outer;
  l.outer_stride = m.outer == 1 ? round_up(m.inner, align) : m.ld;
  l.batch = m.batch_stride == 0 ? 1 : batch;
  l.batch_stride = m.batch_stride == 0 ? round_up(l.outer_stride * l.outer, align) : m.batch_stride;
  l.ok = m.aligned && l.outer_stride > 0 && l.outer_stride < (int64_t(1) << 39) && l.batch_stride < (int64_t(1) << 39);
  return l;
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

CUtensorMapDataType tma_type(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kBFloat16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
    case at::kHalf: return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case at::kFloat: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    default: TILES_CHECK(false, "tiles::bmm: no TMA data type for ", t.scalar_type());
  }
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

}  // namespace

OperandLayout layout_a(const BmmProblem& p) { return layout_of(p.a, layout_of_a(p), p.batch); }
OperandLayout layout_b(const BmmProblem& p) { return layout_of(p.b, layout_of_b(p), p.batch); }

const char* hopper_unsuitable(const BmmProblem& p) {
  if (p.k == 0) return "K is 0";
  if (p.m >= (int64_t(1) << 31) - 256 || p.n >= (int64_t(1) << 31) - 256 || p.k >= (int64_t(1) << 31) ||
      p.batch >= (int64_t(1) << 31))
    return "a size exceeds TMA's 32-bit coordinates";
  if (compute_capability(p.out.get_device()) != 90) return "the device is not sm_90";
  return nullptr;
}

const char* tma_unsuitable(const BmmProblem& p) {
  if (const char* reason = hopper_unsuitable(p)) return reason;
  if (!layout_a(p).ok) return "a's strides or alignment do not suit TMA";
  if (!layout_b(p).ok) return "b's strides or alignment do not suit TMA";
  return nullptr;
}

OperandLayout output_layout(const BmmProblem& p) {
  OperandLayout l;
  l.inner = p.n, l.outer = p.m, l.batch = p.batch;
  l.outer_stride = p.n, l.batch_stride = p.m * p.n;
  l.ok = (p.n * int64_t(p.out.element_size())) % 16 == 0 && reinterpret_cast<uintptr_t>(p.out.data_ptr()) % 16 == 0;
  return l;
}

CUtensorMap tensor_map(const at::Tensor& t, const OperandLayout& l, int box_outer) {
  CUtensorMap map;
  const int64_t elem = int64_t(t.element_size());
  const cuuint64_t dims[3] = {cuuint64_t(l.inner), cuuint64_t(l.outer), cuuint64_t(l.batch)};
  const cuuint64_t strides[2] = {cuuint64_t(l.outer_stride * elem), cuuint64_t(l.batch_stride * elem)};  // bytes
  const cuuint32_t box[3] = {cuuint32_t(box_inner(t)), cuuint32_t(box_outer), 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = encode_tiled()(&map, tma_type(t), 3, const_cast<void*>(t.const_data_ptr()), dims, strides, box,
                                    unit, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                    CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TILES_CHECK(r == CUDA_SUCCESS, "tiles::bmm: cuTensorMapEncodeTiled failed with CUresult ", int(r),
              " for an operand of shape ", t.sizes(), " and strides ", t.strides());
  return map;
}

}  // namespace tiles::cuda::hopper
