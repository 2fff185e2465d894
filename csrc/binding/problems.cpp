// Argument checks, output allocation and strided plans for the four ops (see binding/problems.h).
#include "binding/problems.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/ops/result_type_native.h>
#include <torch/library.h>

#include <algorithm>
#include <string>
#include <vector>

#include "binding/indexer.h"

namespace tiles {

template <class T>
at::Tensor empty_like_first_dense(c10::ArrayRef<T> shape, const at::TensorOptions& options,
                                  c10::ArrayRef<const at::Tensor*> candidates) {
  for (const at::Tensor* t : candidates) {
    c10::TensorImpl* impl = t->unsafeGetTensorImpl();
    if (impl->generic_sizes<T>() == shape && impl->is_non_overlapping_and_dense())
      return at::symint::empty_strided<T>(shape, impl->generic_strides<T>(), options);
  }
  return at::symint::empty<T>(shape, options);
}
template at::Tensor empty_like_first_dense(c10::IntArrayRef, const at::TensorOptions&, c10::ArrayRef<const at::Tensor*>);
template at::Tensor empty_like_first_dense(c10::SymIntArrayRef, const at::TensorOptions&,
                                           c10::ArrayRef<const at::Tensor*>);

namespace {

template <class Fn, size_t N>
Fn parse_fn(const char* op, std::string_view fn, const char* const (&names)[N]) {
  for (size_t i = 0; i < N; ++i)
    if (fn == names[i]) return Fn(i);
  std::string valid;
  for (size_t i = 0; i < N; ++i) valid += std::string(i ? ", " : "") + names[i];
  TILES_CHECK(false, op, ": unknown fn '", fn, "'; valid names are: ", valid);
}

void check_float(const char* op, const char* arg, const at::Tensor& t) {
  const auto s = t.scalar_type();
  TILES_CHECK(s == at::kHalf || s == at::kBFloat16 || s == at::kFloat || s == at::kDouble, op,
              ": argument '", arg, "' has dtype ", s,
              "; expected a float tensor (float16, bfloat16, float32 or float64)");
}

void check_same_device(const char* op, const at::Tensor& a, const at::Tensor& b) {
  TILES_CHECK(a.device() == b.device(), op, ": arguments 'a' and 'b' must be on the same device, got ",
              a.device(), " and ", b.device());
}

Dims broadcast_shape(const char* op, const at::Tensor& a, const at::Tensor& b) {
  const int64_t nd = std::max(a.dim(), b.dim());
  Dims shape(nd);
  for (int64_t i = 1; i <= nd; ++i) {  // right-aligned
    const int64_t sa = i <= a.dim() ? a.size(-i) : 1;
    const int64_t sb = i <= b.dim() ? b.size(-i) : 1;
    TILES_CHECK(sa == sb || sa == 1 || sb == 1, op, ": shapes ", a.sizes(), " (a) and ", b.sizes(),
                " (b) do not broadcast: size ", sa, " vs ", sb, " at dim ", -i);
    shape[nd - i] = sa == 1 ? sb : sa;
  }
  return shape;
}

// The dims of a dense output ordered by stride, outermost first (stable, so ties keep their order;
// only size-1 and empty dims can tie, and those are dropped by make_indexer or never run).
// An insertion sort: dims are few, and std::stable_sort takes a heap buffer on every call.
Dims memory_order(c10::IntArrayRef strides) {
  Dims perm;
  for (int64_t d = 0; d < int64_t(strides.size()); ++d) {
    auto at = perm.end();
    while (at != perm.begin() && strides[*(at - 1)] < strides[d]) --at;
    perm.insert(at, d);
  }
  return perm;
}

Dims permuted(c10::IntArrayRef v, c10::IntArrayRef perm) {
  Dims out(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) out[d] = v[perm[d]];
  return out;
}

void check_same_device(const char* op, const char* arg_a, const at::Tensor& a, const char* arg_b,
                       const at::Tensor& b) {
  TILES_CHECK(a.device() == b.device(), op, ": arguments '", arg_a, "' and '", arg_b,
              "' must be on the same device, got ", a.device(), " and ", b.device());
}

}  // namespace

MapFn parse_map_fn(const char* op, std::string_view fn) { return parse_fn<MapFn>(op, fn, kMapFnNames); }
ZipFn parse_zip_fn(const char* op, std::string_view fn) { return parse_fn<ZipFn>(op, fn, kZipFnNames); }
ReduceFn parse_reduce_fn(const char* op, std::string_view fn) { return parse_fn<ReduceFn>(op, fn, kReduceFnNames); }

Dtype to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kHalf: return Dtype::Half;
    case at::kBFloat16: return Dtype::BFloat16;
    case at::kFloat: return Dtype::Float;
    default: return Dtype::Double;
  }
}

MapProblem make_map_problem(const at::Tensor& x, std::string_view fn) {
  constexpr const char* op = "tiles::map";
  const MapFn f = parse_fn<MapFn>(op, fn, kMapFnNames);
  check_float(op, "x", x);
  at::Tensor out = empty_like_first_dense<int64_t>(x.sizes(), x.options(), {&x});
  // The indexer walks the output in memory order: over the dims sorted by out's strides, out is
  // contiguous, so linear position i is out's element i (what the kernels write) and x, when it
  // gave out its strides, coalesces to one unit-stride dim (the flat path).
  const auto perm = memory_order(out.strides());
  auto in = make_indexer<1>(op, permuted(x.sizes(), perm), {permuted(x.strides(), perm)});
  return {out, x, f, in, x.numel()};
}

ZipProblem make_zip_problem(const at::Tensor& a, const at::Tensor& b, std::string_view fn) {
  constexpr const char* op = "tiles::zip";
  const ZipFn f = parse_fn<ZipFn>(op, fn, kZipFnNames);
  check_float(op, "a", a);
  check_float(op, "b", b);
  check_same_device(op, a, b);
  const auto shape = broadcast_shape(op, a, b);
  const auto dtype = at::native::result_type(a, b);  // the rule of at::result_type, without its dispatch
  at::Tensor out = empty_like_first_dense<int64_t>(shape, a.options().dtype(dtype), {&a, &b});
  const auto perm = memory_order(out.strides());  // as in make_map_problem
  auto in = make_indexer<2>(op, permuted(shape, perm),
                            {permuted(broadcast_strides(shape, a.sizes(), a.strides()), perm),
                             permuted(broadcast_strides(shape, b.sizes(), b.strides()), perm)});
  const bool same = a.scalar_type() == dtype && b.scalar_type() == dtype;
  return {out, a, b, f, in, out.numel(), same};
}

DimMask reduced_dims(int64_t nd, at::OptionalIntArrayRef dim) {
  constexpr const char* op = "tiles::reduce";
  // None and [] both mean all dims, as in PyTorch.
  DimMask reduced(nd, !dim.has_value() || dim->empty());
  if (dim.has_value()) {
    const int64_t lo = nd == 0 ? -1 : -nd, hi = nd == 0 ? 0 : nd - 1;
    DimMask seen(std::max<int64_t>(nd, 1), false);
    for (int64_t d : *dim) {
      TILES_CHECK(d >= lo && d <= hi, op, ": dim ", d, " is out of range for argument 'x' with ", nd,
                  " dimensions (expected a dim in [", lo, ", ", hi, "])");
      const int64_t w = d < 0 ? d + std::max<int64_t>(nd, 1) : d;
      TILES_CHECK(!seen[w], op, ": dim ", w, " appears more than once in argument 'dim' ", *dim);
      seen[w] = true;
      if (nd > 0) reduced[w] = true;
    }
  }
  return reduced;
}

ReduceProblem make_reduce_problem(const at::Tensor& x, at::OptionalIntArrayRef dim,
                                  std::string_view fn, bool keepdim) {
  constexpr const char* op = "tiles::reduce";
  const ReduceFn f = parse_fn<ReduceFn>(op, fn, kReduceFnNames);
  check_float(op, "x", x);

  const DimMask reduced = reduced_dims(x.dim(), dim);
  const int64_t nd = x.dim();

  Dims out_shape, outer_sizes, outer_strides, inner_sizes, inner_strides;
  for (int64_t d = 0; d < nd; ++d) {
    if (reduced[d]) {
      TILES_CHECK(x.size(d) != 0 || (f != ReduceFn::Max && f != ReduceFn::Min), op, ": fn '", fn,
                  "' over dim ", d, " of size 0 of argument 'x' (shape ", x.sizes(),
                  ") is undefined: max/min of no elements");
      inner_sizes.push_back(x.size(d));
      inner_strides.push_back(x.stride(d));
      if (keepdim) out_shape.push_back(1);
    } else {
      outer_sizes.push_back(x.size(d));
      outer_strides.push_back(x.stride(d));
      out_shape.push_back(x.size(d));
    }
  }
  at::Tensor out = at::empty(out_shape, x.options());
  auto outer = make_indexer<1>(op, outer_sizes, {outer_strides});
  auto inner = make_indexer<1>(op, inner_sizes, {inner_strides});
  return {out, x, f, outer, inner, c10::multiply_integers(outer_sizes),
          c10::multiply_integers(inner_sizes)};
}

BmmProblem make_bmm_problem(const at::Tensor& a, const at::Tensor& b) {
  constexpr const char* op = "tiles::bmm";
  check_float(op, "a", a);
  check_float(op, "b", b);
  check_same_device(op, a, b);
  TILES_CHECK(a.dim() == 2 || a.dim() == 3, op, ": argument 'a' must be 2-D [M, K] or 3-D [B, M, K], got ",
              a.dim(), "-D shape ", a.sizes());
  TILES_CHECK(b.dim() == 2 || b.dim() == 3, op, ": argument 'b' must be 2-D [K, N] or 3-D [B, K, N], got ",
              b.dim(), "-D shape ", b.sizes());
  TILES_CHECK(a.scalar_type() == b.scalar_type(), op, ": arguments 'a' and 'b' must have one dtype, got ",
              a.scalar_type(), " and ", b.scalar_type());
  TILES_CHECK(a.size(-1) == b.size(-2), op, ": inner sizes differ: 'a' ", a.sizes(), " has K=", a.size(-1),
              " but 'b' ", b.sizes(), " has K=", b.size(-2));
  const int64_t batch_a = a.dim() == 3 ? a.size(0) : 1;
  const int64_t batch_b = b.dim() == 3 ? b.size(0) : 1;
  TILES_CHECK(batch_a == batch_b || batch_a == 1 || batch_b == 1, op, ": batch sizes differ: 'a' ",
              a.sizes(), " has B=", batch_a, " and 'b' ", b.sizes(), " has B=", batch_b,
              " (one of them may be 1 to broadcast)");

  BmmProblem p;
  p.a = a;
  p.b = b;
  p.batch = batch_a == 1 ? batch_b : batch_a;  // 1 broadcasts (also against 0)
  p.m = a.size(-2);
  p.k = a.size(-1);
  p.n = b.size(-1);
  // A 2-D operand, or a batch of one, is read with batch stride 0.
  p.a_strides[0] = batch_a == 1 ? 0 : a.stride(0);
  p.a_strides[1] = a.stride(-2);
  p.a_strides[2] = a.stride(-1);
  p.b_strides[0] = batch_b == 1 ? 0 : b.stride(0);
  p.b_strides[1] = b.stride(-2);
  p.b_strides[2] = b.stride(-1);
  const bool out_2d = a.dim() == 2 && b.dim() == 2;
  p.out = out_2d ? at::empty({p.m, p.n}, a.options()) : at::empty({p.batch, p.m, p.n}, a.options());
  return p;
}

MapFn check_map_grad_args(const at::Tensor& grad, const at::Tensor& saved, std::string_view fn) {
  constexpr const char* op = "tiles::_map_backward";
  const MapFn f = parse_fn<MapFn>(op, fn, kMapFnNames);
  check_float(op, "grad", grad);
  check_float(op, "saved", saved);
  check_same_device(op, "grad", grad, "saved", saved);
  TILES_CHECK(grad.sizes() == saved.sizes(), op, ": arguments 'grad' ", grad.sizes(), " and 'saved' ",
              saved.sizes(), " must have one shape");
  TILES_CHECK(grad.scalar_type() == saved.scalar_type(), op, ": arguments 'grad' and 'saved' must have one dtype, got ",
              grad.scalar_type(), " and ", saved.scalar_type());
  return f;
}

MapGradProblem make_map_grad_problem(const at::Tensor& grad, const at::Tensor& saved, std::string_view fn) {
  const MapFn f = check_map_grad_args(grad, saved, fn);
  // The gradient takes the layout of the input it belongs to (saved is x or x's output, which has x's).
  at::Tensor out = empty_like_first_dense<int64_t>(grad.sizes(), grad.options(), {&saved, &grad});
  const auto perm = memory_order(out.strides());  // as in make_map_problem
  auto in = make_indexer<2>("tiles::_map_backward", permuted(grad.sizes(), perm),
                            {permuted(grad.strides(), perm), permuted(saved.strides(), perm)});
  return {out, grad, saved, f, in, grad.numel()};
}

ZipFn check_zip_grad_args(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, std::string_view fn,
                          int64_t which) {
  constexpr const char* op = "tiles::_zip_backward";
  const ZipFn f = parse_fn<ZipFn>(op, fn, kZipFnNames);
  TILES_CHECK(has_zip_grad_kernel(f), op, ": fn '", fn, "' has no gradient kernel (only div, max, min and pow do)");
  TILES_CHECK(which == 0 || which == 1, op, ": argument 'which' must be 0 (a) or 1 (b), got ", which);
  check_float(op, "grad", grad);
  check_float(op, "a", a);
  check_float(op, "b", b);
  check_same_device(op, "grad", grad, "a", a);
  check_same_device(op, "grad", grad, "b", b);
  const auto shape = broadcast_shape(op, a, b);
  TILES_CHECK(grad.sizes() == c10::IntArrayRef(shape), op, ": argument 'grad' has shape ", grad.sizes(),
              " but 'a' ", a.sizes(), " and 'b' ", b.sizes(), " broadcast to ", c10::IntArrayRef(shape));
  return f;
}

ZipGradProblem make_zip_grad_problem(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b,
                                     std::string_view fn, int64_t which) {
  const ZipFn f = check_zip_grad_args(grad, a, b, fn, which);
  const c10::IntArrayRef shape = grad.sizes();  // the broadcast shape (checked)
  const at::Tensor& self = which == 0 ? a : b;
  at::Tensor out = empty_like_first_dense<int64_t>(shape, grad.options(), {&self, &grad});
  const auto perm = memory_order(out.strides());
  auto in = make_indexer<3>("tiles::_zip_backward", permuted(shape, perm),
                            {permuted(grad.strides(), perm),
                             permuted(broadcast_strides(shape, a.sizes(), a.strides()), perm),
                             permuted(broadcast_strides(shape, b.sizes(), b.strides()), perm)});
  const bool same = a.scalar_type() == grad.scalar_type() && b.scalar_type() == grad.scalar_type();
  return {out, grad, a, b, f, int(which), in, out.numel(), same};
}

}  // namespace tiles

// The layout rule for torch_tiles/_fake.py. Composite: under a fake mode it runs with that mode's
// tensors, so its empty_strided makes the fake output.
TORCH_LIBRARY_IMPL(tiles, CompositeImplicitAutograd, m) {
  m.impl("_empty_like_first_dense",
         [](c10::SymIntArrayRef shape, at::ScalarType dtype, at::TensorList candidates) {
           TILES_CHECK(!candidates.empty(), "tiles::_empty_like_first_dense: argument 'candidates' is empty");
           c10::SmallVector<const at::Tensor*, 4> pointers;
           for (const at::Tensor& t : candidates) pointers.push_back(&t);
           return tiles::empty_like_first_dense<c10::SymInt>(shape, candidates[0].options().dtype(dtype), pointers);
         });
}
