// The derivative formulas (autograd/derivatives.h). Constants enter as 0-dim tensors of the operand's
// dtype and device, which broadcast in zip without promoting its result.
#include "autograd/derivatives.h"

#include <ATen/ATen.h>

#include "autograd/calls.h"

namespace tiles::autograd {
namespace {

at::Tensor constant(const at::Tensor& like, double value) { return at::scalar_tensor(value, like.options()); }

at::Tensor map_op(const at::Tensor& x, const char* fn) { return calls::map(x, fn); }
at::Tensor zip_op(const at::Tensor& a, const at::Tensor& b, const char* fn) { return calls::zip(a, b, fn); }
at::Tensor times(const at::Tensor& a, const at::Tensor& b) { return zip_op(a, b, "mul"); }
at::Tensor scaled(const at::Tensor& t, double c) { return times(t, constant(t, c)); }
at::Tensor one_minus(const at::Tensor& t) { return zip_op(constant(t, 1.0), t, "sub"); }

// torch.maximum / torch.minimum's share of the gradient for `self`: 1 where it wins, 1/2 at a tie,
// 0 where it loses (`loses` is "lt" for max, "gt" for min).
at::Tensor tie_weight(const at::Tensor& self, const at::Tensor& other, const char* loses) {
  return zip_op(one_minus(zip_op(self, other, loses)), scaled(zip_op(self, other, "eq"), 0.5), "sub");
}

// g times the product of the *other* elements of each reduced slice, zeros included.
//
// With z the mask of zeros, prod_{j != i} x_j = A_i * B_i where
//   A_i = prod of the other non-zero elements = P~ / x~_i, x~ = x with zeros replaced by 1;
//   B_i = prod of the other zero elements: 1 if there are none, x_k if x_k is the only other zero,
//         and 0 (with zero derivative) otherwise, written exactly to first order as
//         B_i = [others(i) == 0] + [others(i) == 1] * (sum_k z_k x_k - z_i x_i),
// so the gradient is exact and so is its own gradient (double backward). Not handled: a slice that
// holds a zero and an infinite element, or whose non-zero product overflows, where A_i * B_i is
// inf * 0 (NaN) for elements whose true product of the others is 0. (A select there would lose
// A_i * dB_i, the double backward's term where exactly one other element is zero.)
at::Tensor prod_grad(const at::Tensor& x, const at::Tensor& g, const std::vector<int64_t>& dims) {
  auto reduce = [&](const at::Tensor& t, const char* fn) { return calls::reduce(t, dims, fn, true); };
  const at::Tensor zero = zip_op(x, constant(x, 0.0), "eq");
  const at::Tensor x_nonzero = zip_op(times(x, one_minus(zero)), zero, "add");
  const at::Tensor others_nonzero = zip_op(reduce(x_nonzero, "prod"), x_nonzero, "div");
  const at::Tensor other_zeros = zip_op(reduce(zero, "sum"), zero, "sub");
  // z_k x_k: 0 in value, z_k in derivative. x is clamped to [-1, 1] first (which leaves it as it is
  // near 0, the only place z_k is 1) so that an infinite x_k gives 0 * 1, not 0 * inf = NaN across
  // its whole slice.
  const at::Tensor zero_x =
      times(zero, zip_op(zip_op(x, constant(x, 1.0), "min"), constant(x, -1.0), "max"));
  const at::Tensor one_other_zero =
      times(zip_op(other_zeros, constant(x, 1.0), "eq"), zip_op(reduce(zero_x, "sum"), zero_x, "sub"));
  const at::Tensor others_zero = zip_op(zip_op(other_zeros, constant(x, 0.0), "eq"), one_other_zero, "add");
  return times(g, times(others_nonzero, others_zero));
}

}  // namespace

at::Tensor map_grad(const at::Tensor& grad, const at::Tensor& saved, MapFn f) {
  if (f == MapFn::Id) return grad;
  if (f == MapFn::Neg) return map_op(grad, "neg");
  return calls::map_backward(grad, saved, kMapFnNames[int(f)]);
}

at::Tensor map_grad_composite(const at::Tensor& g, const at::Tensor& v, MapFn f) {
  switch (f) {
    case MapFn::Id: return map_op(g, "id");  // a new tensor: an op's output never aliases its input
    case MapFn::Neg: return map_op(g, "neg");
    case MapFn::Abs:
      return times(g, zip_op(zip_op(v, constant(v, 0.0), "gt"), zip_op(v, constant(v, 0.0), "lt"), "sub"));
    case MapFn::Exp: return times(g, v);
    case MapFn::Log: return zip_op(g, v, "div");
    case MapFn::Sqrt: return zip_op(g, scaled(v, 2.0), "div");
    case MapFn::Inv: return map_op(times(g, map_op(v, "square")), "neg");
    case MapFn::Square: return times(g, scaled(v, 2.0));
    case MapFn::Sigmoid: return times(g, times(v, one_minus(v)));
    case MapFn::Relu: return times(g, one_minus(zip_op(v, constant(v, 0.0), "le")));  // a NaN x passes g
    case MapFn::Tanh: return times(g, one_minus(map_op(v, "square")));
    case MapFn::Gelu: {  // Φ(x) + x φ(x)
      const at::Tensor cdf = scaled(zip_op(map_op(scaled(v, M_SQRT1_2), "erf"), constant(v, 1.0), "add"), 0.5);
      const at::Tensor pdf = scaled(map_op(scaled(map_op(v, "square"), -0.5), "exp"), 0.5 * M_2_SQRTPI * M_SQRT1_2);
      return times(g, zip_op(cdf, times(v, pdf), "add"));
    }
    case MapFn::Silu: {  // s (1 + x (1 - s))
      const at::Tensor s = map_op(v, "sigmoid");
      return times(g, times(s, zip_op(constant(v, 1.0), times(v, one_minus(s)), "add")));
    }
    case MapFn::Sin: return times(g, map_op(v, "cos"));
    case MapFn::Cos: return times(g, map_op(map_op(v, "sin"), "neg"));
    case MapFn::Erf: return times(g, scaled(map_op(map_op(map_op(v, "square"), "neg"), "exp"), M_2_SQRTPI));
    case MapFn::kCount: break;
  }
  TORCH_INTERNAL_ASSERT(false, "unhandled MapFn");
}

bool zip_grad_reads(ZipFn f, int which, int operand) {
  switch (f) {
    case ZipFn::Mul: return operand != which;  // g * (the other operand)
    case ZipFn::Div: return which == 1 || operand == 1;
    case ZipFn::Max: case ZipFn::Min: case ZipFn::Pow: return true;
    default: return false;  // add / sub need only the gradient; comparisons have none
  }
}

at::Tensor zip_grad(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, ZipFn f, int which) {
  switch (f) {
    case ZipFn::Add: return grad;
    case ZipFn::Sub: return which == 0 ? grad : map_op(grad, "neg");
    case ZipFn::Mul: return times(grad, which == 0 ? b : a);
    case ZipFn::Div:
      if (which == 0) return zip_op(grad, b, "div");
      [[fallthrough]];
    case ZipFn::Max: case ZipFn::Min: case ZipFn::Pow:
      return calls::zip_backward(grad, a, b, kZipFnNames[int(f)], which);
    default: return at::Tensor();  // comparisons are piecewise constant: ZipBackward gives a zero
  }
}

at::Tensor zip_grad_composite(const at::Tensor& g, const at::Tensor& a, const at::Tensor& b, ZipFn f, int which) {
  switch (f) {
    case ZipFn::Div:
      return which == 0 ? zip_op(g, b, "div") : map_op(times(zip_op(g, b, "div"), zip_op(a, b, "div")), "neg");
    case ZipFn::Max: return times(g, which == 0 ? tie_weight(a, b, "lt") : tie_weight(b, a, "lt"));
    case ZipFn::Min: return times(g, which == 0 ? tie_weight(a, b, "gt") : tie_weight(b, a, "gt"));
    case ZipFn::Pow:
      if (which == 0) return times(g, times(b, zip_op(a, zip_op(b, constant(b, 1.0), "sub"), "pow")));
      return times(g, times(zip_op(a, b, "pow"), map_op(a, "log")));
    default: TORCH_INTERNAL_ASSERT(false, "no composite gradient for this zip fn");
  }
}

at::Tensor sum_to(at::Tensor grad, c10::SymIntArrayRef sizes) {
  const int64_t lead = grad.dim() - int64_t(sizes.size());
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < lead; ++d) dims.push_back(d);
  for (int64_t d = 0; d < int64_t(sizes.size()); ++d)
    if (sizes[d] == 1 && grad.sym_size(lead + d) != 1) dims.push_back(lead + d);
  return dims.empty() ? grad : calls::reduce(grad, dims, "sum", true).reshape_symint(sizes);
}

at::Tensor reduce_grad(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& out, ReduceFn f,
                       const std::vector<int64_t>& dims, c10::SymIntArrayRef x_sizes, at::ScalarType x_dtype) {
  at::Tensor gx;
  switch (f) {
    case ReduceFn::Sum: gx = grad.expand_symint(x_sizes); break;
    case ReduceFn::Mean: {
      // The count as a 0-dim float64: exact, and (0-dim) it does not promote grad's dtype. Over no
      // elements the gradient is empty; dividing by 1 instead of 0 keeps its own gradient (double
      // backward) a finite sum of no terms, 0, as in PyTorch, instead of 0 / 0.
      c10::SymInt n = 1;
      for (int64_t d : dims) n = n * x_sizes[d];
      const at::Tensor count = at::scalar_tensor(c10::Scalar(n.max(1)), grad.options().dtype(at::kDouble));
      gx = zip_op(grad, count, "div").expand_symint(x_sizes);
      break;
    }
    case ReduceFn::Prod: gx = prod_grad(x, grad, dims); break;
    case ReduceFn::Max: case ReduceFn::Min: {  // shared equally among the elements equal to the result
      const at::Tensor hit = zip_op(x, out, "eq");
      gx = times(zip_op(grad, calls::reduce(hit, dims, "sum", true), "div"), hit);
      break;
    }
    case ReduceFn::LogSumExp: gx = times(grad, map_op(zip_op(x, out, "sub"), "exp")); break;  // softmax(x) grad
    case ReduceFn::kCount: TORCH_INTERNAL_ASSERT(false, "unhandled ReduceFn");
  }
  // Only a 0-dim grad can have been promoted by a 0-dim constant.
  return gx.scalar_type() == x_dtype ? gx : gx.to(x_dtype);
}

}  // namespace tiles::autograd
