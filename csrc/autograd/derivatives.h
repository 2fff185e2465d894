// The derivative formulas of the tiles operators, written with tiles operators (csrc/autograd/calls.h)
// so that every gradient is itself differentiable.
//
// First derivatives take one kernel per input where they can: map's is tiles::_map_backward, zip's
// div / max / min / pow take tiles::_zip_backward. Those two ops' own derivatives (double backward)
// are the *_composite formulas below: the same gradient as a chain of map / zip calls, which autograd
// can differentiate again; they run only when a gradient of a gradient is asked for.
#pragma once

#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>

#include "tiles/functions.h"

namespace tiles::autograd {

// grad * f'(x) from `saved` (x, or y = f(x) where map_grad_uses_output(f)): one kernel at most.
at::Tensor map_grad(const at::Tensor& grad, const at::Tensor& saved, MapFn f);
at::Tensor map_grad_composite(const at::Tensor& grad, const at::Tensor& saved, MapFn f);

// zip's gradient with respect to operand `which` in the broadcast shape; undefined where it is zero
// (comparisons). a / b may be undefined where the formula does not read them (zip_grad_reads).
at::Tensor zip_grad(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, ZipFn f, int which);
at::Tensor zip_grad_composite(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, ZipFn f, int which);
// Whether zip_grad for operand `which` reads a (operand 0) / b (operand 1).
bool zip_grad_reads(ZipFn f, int which, int operand);

// `grad` summed over the dims along which an operand of shape `sizes` was broadcast.
at::Tensor sum_to(at::Tensor grad, c10::SymIntArrayRef sizes);

// reduce's gradient: `grad` and `out` are the reduction's output gradient and result with the reduced
// `dims` kept as size 1; x is the input (undefined for sum and mean, which only need its sizes).
at::Tensor reduce_grad(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& out, ReduceFn f,
                       const std::vector<int64_t>& dims, c10::SymIntArrayRef x_sizes, at::ScalarType x_dtype);

}  // namespace tiles::autograd
