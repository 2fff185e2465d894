// Autograd for the tiles operators: a torch::autograd::Function per op, registered at the Autograd
// dispatch key, so a call with or without gradients never enters Python.
//
// Each forward runs the backend kernel below autograd and saves only what its backward reads (map:
// x or its output y, whichever the fn's derivative is written in; zip: the operands its gradient
// formulas read; reduce sum/mean: nothing but sizes). A call that records no graph (grad mode off,
// or no input requiring grad) goes straight to the kernel. The formulas are in derivatives.cpp.
#include <torch/autograd.h>

#include <vector>

#include "autograd/calls.h"
#include "autograd/derivatives.h"
#include "binding/problems.h"

namespace tiles::autograd {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::Function;
using torch::autograd::variable_list;

bool records_graph(std::initializer_list<const at::Tensor*> inputs) {
  if (!c10::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : inputs)
    if (t->requires_grad()) return true;
  return false;
}

class MapFunction : public Function<MapFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::string_view fn) {
    const MapFn f = parse_map_fn("tiles::map", fn);
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor y = calls::map(x, fn);
    ctx->saved_data["fn"] = int64_t(f);
    if (f != MapFn::Id && f != MapFn::Neg) ctx->save_for_backward({map_grad_uses_output(f) ? y : x});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto f = MapFn(ctx->saved_data["fn"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    return {map_grad(grads[0], saved.empty() ? at::Tensor() : saved[0], f), at::Tensor()};
  }
};

class ZipFunction : public Function<ZipFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b, c10::string_view fn) {
    const ZipFn f = parse_zip_fn("tiles::zip", fn);
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor out = calls::zip(a, b, fn);
    ctx->saved_data["fn"] = int64_t(f);
    // An operand's gradient is summed down to its shape and cast to its dtype only where those differ
    // from the output's (a broadcast operand, a 0-dim constant of another dtype): say which, and how.
    const at::Tensor* operands[2] = {&a, &b};
    for (int k = 0; k < 2; ++k) {
      if (operands[k]->sym_sizes() != out.sym_sizes()) ctx->saved_data[kSizes[k]] = operands[k]->sym_sizes();
      if (operands[k]->scalar_type() != out.scalar_type()) ctx->saved_data[kDtypes[k]] = operands[k]->scalar_type();
    }
    const bool grad_a = a.requires_grad(), grad_b = b.requires_grad();
    auto read = [&](int operand) {
      return (grad_a && zip_grad_reads(f, 0, operand)) || (grad_b && zip_grad_reads(f, 1, operand));
    };
    ctx->save_for_backward({read(0) ? a : at::Tensor(), read(1) ? b : at::Tensor()});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto f = ZipFn(ctx->saved_data["fn"].toInt());
    const variable_list saved = ctx->get_saved_variables();
    variable_list out(3);
    for (int which = 0; which < 2; ++which) {
      if (!ctx->needs_input_grad(which)) continue;
      at::Tensor g = zip_grad(grads[0], saved[0], saved[1], f, which);
      if (!g.defined()) continue;
      auto sizes = ctx->saved_data.find(kSizes[which]);
      if (sizes != ctx->saved_data.end()) g = autograd::sum_to(g, sizes->second.toSymIntVector());
      auto dtype = ctx->saved_data.find(kDtypes[which]);
      if (dtype != ctx->saved_data.end()) g = g.to(dtype->second.toScalarType());
      out[which] = g;
    }
    return out;
  }

 private:
  static constexpr const char* kSizes[2] = {"a_sizes", "b_sizes"};
  static constexpr const char* kDtypes[2] = {"a_dtype", "b_dtype"};
};

class ReduceFunction : public Function<ReduceFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, at::OptionalIntArrayRef dim,
                            c10::string_view fn, bool keepdim) {
    const ReduceFn f = parse_reduce_fn("tiles::reduce", fn);
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor out = calls::reduce(x, dim, fn, keepdim);  // validates dim first
    const std::vector<bool> reduced = reduced_dims(x.dim(), dim);
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < x.dim(); ++d)
      if (reduced[d]) dims.push_back(d);
    ctx->saved_data["fn"] = int64_t(f);
    ctx->saved_data["dims"] = dims;
    ctx->saved_data["keepdim"] = keepdim;
    ctx->saved_data["x_sizes"] = x.sym_sizes();
    ctx->saved_data["x_dtype"] = x.scalar_type();
    if (f == ReduceFn::Prod) ctx->save_for_backward({x});
    if (f == ReduceFn::Max || f == ReduceFn::Min) ctx->save_for_backward({x, out});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto f = ReduceFn(ctx->saved_data["fn"].toInt());
    const std::vector<int64_t> dims = ctx->saved_data["dims"].toIntVector();
    const std::vector<c10::SymInt> x_sizes = ctx->saved_data["x_sizes"].toSymIntVector();
    const variable_list saved = ctx->get_saved_variables();
    at::Tensor grad = grads[0], x = saved.size() > 0 ? saved[0] : at::Tensor(),
               out = saved.size() > 1 ? saved[1] : at::Tensor();
    if (!ctx->saved_data["keepdim"].toBool()) {  // the reduced dims back as size 1: grad broadcasts against x
      std::vector<c10::SymInt> kept = x_sizes;
      for (int64_t d : dims) kept[d] = 1;
      grad = grad.reshape_symint(kept);
      if (out.defined()) out = out.reshape_symint(kept);
    }
    return {reduce_grad(grad, x, out, f, dims, x_sizes, ctx->saved_data["x_dtype"].toScalarType()), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

// A [B, ., .] gradient summed down to an operand's batch: 2-D, or a broadcast batch of one.
at::Tensor sum_batch(const at::Tensor& grad, int64_t like_dim, const c10::SymInt& like_size0) {
  if (grad.dim() == like_dim && grad.sym_size(0) == like_size0) return grad;
  return calls::reduce(grad, std::vector<int64_t>{0}, "sum", like_dim == 3);
}

class BmmFunction : public Function<BmmFunction> {
 public:
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView below;
    at::Tensor out = calls::bmm(a, b);
    ctx->saved_data["a_dim"] = a.dim();
    ctx->saved_data["b_dim"] = b.dim();
    ctx->saved_data["a_size0"] = a.sym_size(0);
    ctx->saved_data["b_size0"] = b.sym_size(0);
    // a's gradient reads b and b's reads a.
    ctx->save_for_backward({b.requires_grad() ? a : at::Tensor(), a.requires_grad() ? b : at::Tensor()});
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &grad = grads[0], &a = saved[0], &b = saved[1];
    at::Tensor ga, gb;
    if (ctx->needs_input_grad(0))  // grad @ bᵀ, on a transposed view of b
      ga = sum_batch(calls::bmm(grad, b.transpose(-1, -2)), ctx->saved_data["a_dim"].toInt(),
                     ctx->saved_data["a_size0"].toSymInt());
    if (ctx->needs_input_grad(1))  // aᵀ @ grad
      gb = sum_batch(calls::bmm(a.transpose(-1, -2), grad), ctx->saved_data["b_dim"].toInt(),
                     ctx->saved_data["b_size0"].toSymInt());
    return {ga, gb};
  }
};

// ---- the Autograd-key kernels -----------------------------------------------------------------------

at::Tensor map_autograd(const at::Tensor& x, c10::string_view fn) {
  if (records_graph({&x})) return MapFunction::apply(x, fn);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::map(x, fn);
}

at::Tensor zip_autograd(const at::Tensor& a, const at::Tensor& b, c10::string_view fn) {
  if (records_graph({&a, &b})) return ZipFunction::apply(a, b, fn);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::zip(a, b, fn);
}

at::Tensor reduce_autograd(const at::Tensor& x, at::OptionalIntArrayRef dim, c10::string_view fn, bool keepdim) {
  if (records_graph({&x})) return ReduceFunction::apply(x, dim, fn, keepdim);
  at::AutoDispatchBelowADInplaceOrView below;
  return calls::reduce(x, dim, fn, keepdim);
}

at::Tensor bmm_autograd(const at::Tensor& a, const at::Tensor& b) {
  if (records_graph({&a, &b})) return BmmFunction::apply(a, b);
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
