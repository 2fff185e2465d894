// What each op computes, validated and laid out, independent of the backend that computes it.
//
// The CPU and CUDA entry points both call make_*_problem(): it checks the arguments (raising errors
// that name the op, the argument and the problem), allocates the output, and builds the coalesced
// strided plan. The backend then only launches kernels on it. Host-only code.
//
// Outputs of reduce and bmm are contiguous. map and zip give theirs the layout of an input (the
// rule is empty_like_first_dense, below), which may be a permutation of contiguous; their
// indexers then walk the output's dims in memory order, so for the kernels the output is always
// the dense array out.data_ptr()[0, numel) and linear position i of `in` is its element i.
#pragma once

#include <optional>
#include <string_view>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

#include "binding/format.h"
#include "tiles/functions.h"
#include "tiles/loads.h"
#include "tiles/strided.h"

namespace tiles {

struct MapProblem {
  at::Tensor out, x;
  MapFn fn;
  StridedIndexer<1> in;  // x's offsets over the output's positions in memory order
  int64_t numel;
};

struct ZipProblem {
  at::Tensor out, a, b;
  ZipFn fn;
  StridedIndexer<2> in;  // a's and b's offsets over the output's positions in memory order
  int64_t numel;
  bool same_dtype;       // a, b and out share one dtype: no per-element conversion needed
};

struct ReduceProblem {
  at::Tensor out, x;
  ReduceFn fn;
  StridedIndexer<1> outer;  // output position -> offset of its first input element
  StridedIndexer<1> inner;  // position within one reduction -> offset from that first element
  int64_t num_out, num_in;  // outputs, and input elements reduced into each
};

// The gradient of map for fn: out = grad * f'(x), read from `saved` (x, or y = f(x) where
// map_grad_uses_output(fn)); grad and saved have one shape and dtype.
struct MapGradProblem {
  at::Tensor out, grad, saved;
  MapFn fn;
  StridedIndexer<2> in;  // grad's and saved's offsets over the output's positions in memory order
  int64_t numel;
};

// The gradient of zip for fn with respect to operand `which` (0: a, 1: b), in the broadcast shape
// (grad's): the caller sums it down to that operand's shape. Operands of another float dtype than
// grad's are converted per element.
struct ZipGradProblem {
  at::Tensor out, grad, a, b;
  ZipFn fn;
  int which;
  StridedIndexer<3> in;  // grad's, a's and b's offsets over the output's positions in memory order
  int64_t numel;
  bool same_dtype;       // a and b have grad's dtype
};

// out[b] = a[b] @ b[b]; a batch stride of 0 broadcasts an operand.
struct BmmProblem {
  at::Tensor out, a, b;
  int64_t batch, m, n, k;
  int64_t a_strides[3], b_strides[3];  // (batch, row, col) in elements
  // out is a new contiguous [batch, m, n] tensor (viewed as [m, n] for 2-D inputs)
};

MapProblem make_map_problem(const at::Tensor& x, std::string_view fn);
ZipProblem make_zip_problem(const at::Tensor& a, const at::Tensor& b, std::string_view fn);
// reduce's dim argument over an input of nd dims, checked: reduced[d] for each dim d it reduces.
// Inline storage for up to 8 dims, so a call allocates nothing for it.
using DimMask = c10::SmallVector<bool, 8>;
DimMask reduced_dims(int64_t nd, at::OptionalIntArrayRef dim);
ReduceProblem make_reduce_problem(const at::Tensor& x, at::OptionalIntArrayRef dim,
                                  std::string_view fn, bool keepdim);
BmmProblem make_bmm_problem(const at::Tensor& a, const at::Tensor& b);
// The backward ops' argument checks alone (their autograd kernels' composite path runs no kernel).
MapFn check_map_grad_args(const at::Tensor& grad, const at::Tensor& saved, std::string_view fn);
ZipFn check_zip_grad_args(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b, std::string_view fn,
                          int64_t which);
MapGradProblem make_map_grad_problem(const at::Tensor& grad, const at::Tensor& saved, std::string_view fn);
ZipGradProblem make_zip_grad_problem(const at::Tensor& grad, const at::Tensor& a, const at::Tensor& b,
                                     std::string_view fn, int64_t which);

// The output layout rule of map, zip and their gradients (README "API"): the strides of the first
// candidate that has the output's shape and is non-overlapping and dense, so that map(x.t()) writes
// in x.t()'s order; none: contiguous. Candidates are the inputs in argument order. The one copy of
// the rule: the fake kernels call it through tiles::_empty_like_first_dense. T: int64_t (the kernels)
// or c10::SymInt (the fake kernels, whose sizes may be symbolic: comparing them adds guards).
template <class T>
at::Tensor empty_like_first_dense(c10::ArrayRef<T> shape, const at::TensorOptions& options,
                                  c10::ArrayRef<const at::Tensor*> candidates);

Dtype to_dtype(at::ScalarType t);

// The fn named `fn`, or an error naming `op` and listing the valid names.
MapFn parse_map_fn(const char* op, std::string_view fn);
ZipFn parse_zip_fn(const char* op, std::string_view fn);
ReduceFn parse_reduce_fn(const char* op, std::string_view fn);

}  // namespace tiles
