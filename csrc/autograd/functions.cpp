// Autograd for the tiles operators: an autograd node per op, as ATen's generated code builds them,
// registered at the Autograd dispatch key, so a call with or without gradients never enters Python.
// (torch::autograd::Function did the same at about twice the cost per call: its node wraps every
// output and keeps its saved values in a string-keyed map.)
//
// A call that records a graph runs the backend kernel below autograd, then creates the node with the
// inputs' gradient edges and only what its backward reads (map: x or its output y, whichever the fn's
// derivative is written in; zip: the operands its gradient formulas read; reduce sum/mean: nothing but
// sizes). A call that records no graph (grad mode off, or no input requiring grad) goes straight to the
// kernel. The formulas are in derivatives.cpp.
#include <torch/library.h>

#include <mutex>
#include <optional>
#include <vector>

#include "autograd/calls.h"
#include "autograd/derivatives.h"
#include "autograd/recording.h"
#include "binding/problems.h"

namespace tiles::autograd {
namespace {

struct MapBackward : TilesNode<1> {
  MapBackward() : TilesNode("tiles::MapBackward") {}
  MapFn fn{};

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!grads[0].defined()) return {at::Tensor()};
    return {map_grad(grads[0], saved(0), fn)};
  }
};

at::Tensor map_recorded(const at::Tensor& x, c10::string_view fn) {
  const MapFn f = parse_map_fn("tiles::map", fn);
  at::Tensor y;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    y = calls::map(x, fn);
  }
  auto node = make_node<MapBackward>();
  node->fn = f;
  recorded(node, y, x);
  if (f != MapFn::Id && f != MapFn::Neg) {
    const bool uses_output = map_grad_uses_output(f);
    node->save(0, uses_output ? y : x, uses_output);
  }
  return y;
}

struct ZipBackward : TilesNode<2> {
  ZipBackward() : TilesNode("tiles::ZipBackward") {}
  ZipFn fn{};
  // An operand's gradient is summed down to its shape and cast to its dtype only where those differ
  // from the output's (a broadcast operand, a 0-dim constant of another dtype).
  std::optional<std::vector<c10::SymInt>> sizes[2];
  std::optional<at::ScalarType> dtypes[2];

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    variable_list out(2);
    if (!grads[0].defined()) return out;
    const at::Tensor a = saved(0), b = saved(1);
    for (int which = 0; which < 2; ++which) {
      if (!task_should_compute_output(which)) continue;  // asked for in this backward
      at::Tensor g = zip_grad(grads[0], a, b, fn, which);
      if (!g.defined()) {
        // A comparison: its derivative is zero, given as a zero (a 0-dim one, expanded), not as
        // "unused", so that an input reached only through comparisons still gets a gradient, as
        // torch's own masks give one (threshold_backward for relu, sgn for abs): relu, abs, max / min
        // and their ties differentiate through comparisons in double backward.
        const at::ScalarType dtype = dtypes[which].value_or(grads[0].scalar_type());
        out[which] = at::zeros({}, grads[0].options().dtype(dtype))
                         .expand_symint(sizes[which] ? c10::SymIntArrayRef(*sizes[which]) : grads[0].sym_sizes());
        continue;
      }
      if (sizes[which]) g = autograd::sum_to(g, *sizes[which]);
      if (dtypes[which]) g = g.to(*dtypes[which]);
      out[which] = g;
    }
    return out;
  }
};

at::Tensor zip_recorded(const at::Tensor& a, const at::Tensor& b, c10::string_view fn) {
  const ZipFn f = parse_zip_fn("tiles::zip", fn);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    out = calls::zip(a, b, fn);
  }
  auto node = make_node<ZipBackward>();
  node->fn = f;
  const at::Tensor* operands[2] = {&a, &b};
  for (int k = 0; k < 2; ++k) {
    if (operands[k]->sym_sizes() != out.sym_sizes()) node->sizes[k] = operands[k]->sym_sizes().vec();
    if (operands[k]->scalar_type() != out.scalar_type()) node->dtypes[k] = operands[k]->scalar_type();
  }
  const bool grad_a = a.requires_grad(), grad_b = b.requires_grad();
  for (int operand = 0; operand < 2; ++operand)
    if ((grad_a && zip_grad_reads(f, 0, operand)) || (grad_b && zip_grad_reads(f, 1, operand)))
      node->save(operand, *operands[operand], false);
  return recorded(node, out, a, b);
}

struct ReduceBackward : TilesNode<2> {  // saved: x (all but sum, mean) and the output (max, min, logsumexp)
  ReduceBackward() : TilesNode("tiles::ReduceBackward") {}
  ReduceFn fn{};
  std::vector<int64_t> dims;  // the reduced dims of x
  bool keepdim = false;
  std::vector<c10::SymInt> x_sizes;
  at::ScalarType x_dtype{};

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!grads[0].defined()) return {at::Tensor()};
    at::Tensor grad = grads[0], x = saved(0), out = saved(1);
    if (!keepdim) {  // the reduced dims back as size 1: grad broadcasts against x
      std::vector<c10::SymInt> kept = x_sizes;
      for (int64_t d : dims) kept[d] = 1;
      grad = grad.reshape_symint(kept);
      if (out.defined()) out = out.reshape_symint(kept);
    }
    return {reduce_grad(grad, x, out, fn, dims, x_sizes, x_dtype)};
  }
};

at::Tensor reduce_recorded(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn, bool keepdim) {
  const ReduceFn f = parse_reduce_fn("tiles::reduce", fn);
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    out = calls::reduce(x, dim, fn, keepdim);  // validates dim first
  }
  auto node = make_node<ReduceBackward>();
  node->fn = f;
  const DimMask reduced = reduced_dims(x.dim(), dim);
  for (int64_t d = 0; d < x.dim(); ++d)
    if (reduced[d]) node->dims.push_back(d);
  node->keepdim = keepdim;
  node->x_sizes = x.sym_sizes().vec();
  node->x_dtype = x.scalar_type();
  recorded(node, out, x);
  const bool reads_out = f == ReduceFn::Max || f == ReduceFn::Min || f == ReduceFn::LogSumExp;
  if (reads_out || f == ReduceFn::Prod) node->save(0, x, false);
  if (reads_out) node->save(1, out, true);
  return out;
}

// A [B, ., .] gradient summed down to an operand's batch: 2-D, or a broadcast batch of one.
at::Tensor sum_batch(const at::Tensor& grad, int64_t like_dim, const c10::SymInt& like_size0) {
  if (grad.dim() == like_dim && grad.sym_size(0) == like_size0) return grad;
  return calls::reduce(grad, std::vector<int64_t>{0}, "sum", like_dim == 3);
}

struct BmmBackward : TilesNode<2> {  // saved: a (read by b's gradient) and b (read by a's)
  BmmBackward() : TilesNode("tiles::BmmBackward") {}
  int64_t dims[2] = {};
  c10::SymInt size0[2];

  variable_list apply(variable_list&& grads) override {
    std::lock_guard<std::mutex> lock(mutex_);
    variable_list out(2);
    const at::Tensor& grad = grads[0];
    if (!grad.defined()) return out;
    const at::Tensor a = saved(0), b = saved(1);
    if (task_should_compute_output(0))  // grad @ bᵀ, on a transposed view of b
      out[0] = sum_batch(calls::bmm(grad, b.transpose(-1, -2)), dims[0], size0[0]);
    if (task_should_compute_output(1))  // aᵀ @ grad
      out[1] = sum_batch(calls::bmm(a.transpose(-1, -2), grad), dims[1], size0[1]);
    return out;
  }
};

at::Tensor bmm_recorded(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView below;
    out = calls::bmm(a, b);
  }
  auto node = make_node<BmmBackward>();
  node->dims[0] = a.dim();
  node->dims[1] = b.dim();
  node->size0[0] = a.sym_size(0);
  node->size0[1] = b.sym_size(0);
  if (b.requires_grad()) node->save(0, a, false);
  if (a.requires_grad()) node->save(1, b, false);
  return recorded(node, out, a, b);
}

// ---- the Autograd-key kernels -----------------------------------------------------------------------

at::Tensor map_autograd(const at::Tensor& x, c10::string_view fn) {
  check_no_tangent("tiles::map", "x", x);
  if (records_graph({&x})) return map_recorded(x, fn);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::map(x, fn);
}

at::Tensor zip_autograd(const at::Tensor& a, const at::Tensor& b, c10::string_view fn) {
  check_no_tangent("tiles::zip", "a", a);
  check_no_tangent("tiles::zip", "b", b);
  if (records_graph({&a, &b})) return zip_recorded(a, b, fn);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::zip(a, b, fn);
}

at::Tensor reduce_autograd(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn, bool keepdim) {
  check_no_tangent("tiles::reduce", "x", x);
  if (records_graph({&x})) return reduce_recorded(x, dim, fn, keepdim);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::reduce(x, dim, fn, keepdim);
}

at::Tensor bmm_autograd(const at::Tensor& a, const at::Tensor& b) {
  check_no_tangent("tiles::bmm", "a", a);
  check_no_tangent("tiles::bmm", "b", b);
  if (records_graph({&a, &b})) return bmm_recorded(a, b);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::bmm(a, b);
}

// The backward ops: one kernel when no gradient of theirs is needed (a plain backward), else the
// same gradient as a chain of differentiable map / zip calls (double backward).
at::Tensor map_backward_autograd(const at::Tensor& grad, const at::Tensor& saved, c10::string_view fn) {
  if (records_graph({&grad, &saved})) return map_grad_composite(grad, saved, check_map_grad_args(grad, saved, fn));
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::map_backward(grad, saved, fn);
}

at::Tensor zip_backward_autograd(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b,
                                 c10::string_view fn, int64_t which) {
  if (records_graph({&grad, &a, &b}))
    return zip_grad_composite(grad, a, b, check_zip_grad_args(grad, a, b, fn, which), int(which));
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::zip_backward(grad, a, b, fn, which);
}

}  // namespace
}  // namespace tiles::autograd

TORCH_LIBRARY_IMPL(tiles, Autograd, m) {
  m.impl("map", &tiles::autograd::map_autograd);
  m.impl("zip", &tiles::autograd::zip_autograd);
  m.impl("reduce", &tiles::autograd::reduce_autograd);
  m.impl("bmm", &tiles::autograd::bmm_autograd);
  m.impl("_map_backward", &tiles::autograd::map_backward_autograd);
  m.impl("_zip_backward", &tiles::autograd::zip_backward_autograd);
}
