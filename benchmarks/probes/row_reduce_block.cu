// The row-reduction kernels (cuda/reduce/kernels.cuh) at several block shapes, threads x vectors in flight
// per thread, through the product's own launch_rows, for row_reduce_block.py.
#include <torch/extension.h>

#include "cuda/reduce/launch.cuh"

namespace {

using namespace tiles;
using namespace tiles::cuda;
using namespace tiles::cuda::reduce_detail;

// The problem the binding builds for reducing the last dim of a contiguous [rows, cols] x.
ReduceProblem rows_problem(const at::Tensor& out, const at::Tensor& x, ReduceFn fn) {
  ReduceProblem p{out, x, fn, {}, {}, x.size(0), x.size(1)};
  p.outer.ndim = 1, p.outer.sizes[0] = x.size(0), p.outer.strides[0][0] = x.size(1);
  p.inner.ndim = 1, p.inner.sizes[0] = x.size(1), p.inner.strides[0][0] = 1;
  return p;
}

template <class T, ReduceFn F, class Long, class Short>
void go(const ReduceProblem& p) {
  launch_rows<T, F, 16 / sizeof(T), Long, Short>(p);
}

template <class T, ReduceFn F>
bool pick(const std::string& kind, int threads, int unroll, const ReduceProblem& p) {
#define LONG(A, B) \
  if (kind == "long" && threads == A && unroll == B) return go<T, F, BlockShape<A, B>, ShortRowBlock>(p), true;
#define SHORT(A, B) \
  if (kind == "short" && threads == A && unroll == B) return go<T, F, LongRowBlock, BlockShape<A, B>>(p), true;
  LONG(128, 8) LONG(128, 16) LONG(256, 4) LONG(256, 8) LONG(256, 16) LONG(512, 4) LONG(512, 8) LONG(1024, 2)
  LONG(1024, 4)
  SHORT(128, 4) SHORT(256, 2) SHORT(256, 4) SHORT(256, 8) SHORT(512, 4)
#undef LONG
#undef SHORT
  return false;
}

// out[r] = fn over x[r, :]; kind "long" varies the long-row block, "short" the short-row one (rows shorter
// than kBlockRowMinBytes take the short kernel whatever the kind: the caller picks matching shapes).
void run(at::Tensor out, at::Tensor x, const std::string& fn, const std::string& kind, int64_t threads,
         int64_t unroll) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && out.numel() == x.size(0), "row_reduce_block: bad arguments");
  const ReduceFn f = fn == "max" ? ReduceFn::Max : ReduceFn::Sum;
  const ReduceProblem p = rows_problem(out, x, f);
  bool ok = false;
  if (x.scalar_type() == at::kFloat)
    ok = f == ReduceFn::Max ? pick<float, ReduceFn::Max>(kind, threads, unroll, p)
                            : pick<float, ReduceFn::Sum>(kind, threads, unroll, p);
  else if (x.scalar_type() == at::kBFloat16 && f == ReduceFn::Sum)
    ok = pick<c10::BFloat16, ReduceFn::Sum>(kind, threads, unroll, p);
  TORCH_CHECK(ok, "row_reduce_block: no instance for ", fn, " ", x.scalar_type(), " ", kind, " ", threads, "x", unroll);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("run", &run); }
