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

template <class T, ReduceFn F, class Long, class Short, class Split, class Split16 = Split,
          int64_t kLanesMinRows = kLanesMinRowsPerSm>
void go(const ReduceProblem& p) {
  launch_rows<T, F, 16 / sizeof(T), Long, Short, Split, Split16, kLanesMinRows>(p);
}

template <class T, ReduceFn F>
bool pick(const std::string& kind, int threads, int unroll, const ReduceProblem& p) {
  // Each kind varies one of launch_rows's choices and keeps the product's others; "split" sets float's
  // and 16-bit's split blocks alike, "lanes" the rows a SM under which rows longer than a warp's pass
  // leave the lanes for a block (threads: that count; 0 keeps every row under 32 KiB on lanes).
#define WHOLE(A, B)                                    \
  if (kind == "whole" && threads == A && unroll == B) \
    return go<T, F, BlockShape<A, B>, ShortRowBlock, SplitRowBlock, SplitRowBlock16>(p), true;
#define SPLIT(A, B)                                    \
  if (kind == "split" && threads == A && unroll == B) \
    return go<T, F, LongRowBlock, ShortRowBlock, BlockShape<A, B>>(p), true;
  if (kind == "split" && threads == 0) return go<T, F, LongRowBlock, ShortRowBlock, SplitRowBlock, SplitRowBlock16>(p), true;
#define LONG_SHAPES(X) \
  X(128, 8) X(128, 16) X(256, 4) X(256, 8) X(256, 16) X(512, 4) X(512, 8) X(1024, 2) X(1024, 4)
  LONG_SHAPES(WHOLE)
  LONG_SHAPES(SPLIT)
  if (kind == "short") {
#define SHORT(A, B) \
  if (threads == A && unroll == B) return go<T, F, LongRowBlock, BlockShape<A, B>, SplitRowBlock, SplitRowBlock16>(p), true;
    SHORT(128, 4) SHORT(256, 2) SHORT(256, 4) SHORT(256, 8) SHORT(512, 4)
  }
  if (kind == "lanes") {
#define LANES(N) \
  if (threads == N) return go<T, F, LongRowBlock, ShortRowBlock, SplitRowBlock, SplitRowBlock16, N>(p), true;
    LANES(0) LANES(4) LANES(16) LANES(64)
  }
#undef WHOLE
#undef SPLIT
#undef LONG_SHAPES
#undef SHORT
#undef LANES
  return false;
}

// out[r] = fn over x[r, :]; kind "whole" varies the block of many long rows, "split" that of few long
// rows (split into segments where they are long enough), "short" that of short rows, "lanes" which
// rows under 32 KiB take lanes. Which kernel a
// shape of x takes is launch_rows's choice whatever the kind: the caller picks matching shapes.
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
