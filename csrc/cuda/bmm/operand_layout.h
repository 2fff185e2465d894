// How a bmm operand lies in memory, classified by one function from its strides for every tensor-core
// path: the TMA maps of the Hopper kernels (bmm/tma_maps.cu) and the mma.sync kernel (bmm/mma.cu).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "binding/problems.h"

namespace tiles::cuda {

// One operand as a matrix [rows][k] per batch entry (rows: M for a, N for b).
struct MatrixLayout {
  bool ok = false;        // a matrix dim has unit stride (a dim of size 1 counts: its stride is never used)
  bool mn_major = false;  // the rows dim (M or N) is the contiguous one; else K is
  int64_t inner = 0, outer = 0;  // extents of the contiguous dim and of the other
  int64_t ld = 0;                // the other dim's stride in elements; 0 when that dim has size 1
  int64_t batch_stride = 0;      // elements; 0 for an operand broadcast over the batch
  int align_bytes = 0;   // the largest of 16, 8, 4, 2, 1 that divides the base, ld and the batch stride, in bytes
  bool aligned = false;  // align_bytes == 16
};

// Calls f(kMnA, kMnB) with the operands' major orders (true: MN-major) as std::bool_constant
// values, so that one lambda picks the kernel instantiation of each of the four layouts.
template <class F>
void with_layouts(bool mn_a, bool mn_b, F&& f) {
  if (mn_a && mn_b) return f(std::true_type{}, std::true_type{});
  if (mn_a) return f(std::true_type{}, std::false_type{});
  if (mn_b) return f(std::false_type{}, std::true_type{});
  f(std::false_type{}, std::false_type{});
}

// The largest power of two up to 16 that divides every one of `values`.
inline int alignment_of(std::initializer_list<uint64_t> values) {
  int bytes = 16;
  for (uint64_t v : values)
    while (v % bytes != 0) bytes /= 2;
  return bytes;
}

inline MatrixLayout matrix_layout(const at::Tensor& t, int64_t rows, int64_t k, int64_t row_stride, int64_t k_stride,
                                  int64_t batch_stride) {
  MatrixLayout l;
  if (k_stride == 1 || k == 1) {
    l.inner = k, l.outer = rows, l.ld = rows == 1 ? 0 : row_stride;
  } else if (row_stride == 1 || rows == 1) {
    l.mn_major = true;
    l.inner = rows, l.outer = k, l.ld = k == 1 ? 0 : k_stride;
  } else {
    return l;
  }
  const uint64_t elem = uint64_t(t.element_size());
  l.ok = true;
  l.batch_stride = batch_stride;
  l.align_bytes = alignment_of({uint64_t(reinterpret_cast<uintptr_t>(t.const_data_ptr())), uint64_t(l.ld) * elem,
                                uint64_t(batch_stride) * elem});
  l.aligned = l.align_bytes == 16;
  return l;
}

inline MatrixLayout layout_of_a(const BmmProblem& p) {
  return matrix_layout(p.a, p.m, p.k, p.a_strides[1], p.a_strides[2], p.a_strides[0]);
}
inline MatrixLayout layout_of_b(const BmmProblem& p) {
  return matrix_layout(p.b, p.n, p.k, p.b_strides[2], p.b_strides[1], p.b_strides[0]);
}

}  // namespace tiles::cuda
