// How a bmm operand lies in memory, classified by one function from its strides for every tensor-core
// path: the TMA maps of the Hopper kernels (bmm/tma_maps.cu) and the mma.sync kernel (bmm/mma.cu).
#pragma once

#include <cstdint>

#include "binding/problems.h"

namespace tiles::cuda {

// One operand as a matrix [rows][k] per batch entry (rows: M for a, N for b).
struct MatrixLayout {
  bool ok = false;        // a matrix dim has unit stride (a dim of size 1 counts: its stride is never used)
  bool mn_major = false;  // the rows dim (M or N) is the contiguous one; else K is
  int64_t inner = 0, outer = 0;  // extents of the contiguous dim and of the other
  int64_t ld = 0;                // the other dim's stride in elements; 0 when that dim has size 1
  int64_t batch_stride = 0;      // elements; 0 for an operand broadcast over the batch
  bool aligned = false;  // the base, ld and the batch stride are multiples of 16 bytes
};

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
  const int64_t chunk = 16 / int64_t(t.element_size());  // elements per 16 bytes
  l.ok = true;
  l.batch_stride = batch_stride;
  l.aligned = reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0 && l.ld % chunk == 0 &&
              batch_stride % chunk == 0;
  return l;
}

inline MatrixLayout layout_of_a(const BmmProblem& p) {
  return matrix_layout(p.a, p.m, p.k, p.a_strides[1], p.a_strides[2], p.a_strides[0]);
}
inline MatrixLayout layout_of_b(const BmmProblem& p) {
  return matrix_layout(p.b, p.n, p.k, p.b_strides[2], p.b_strides[1], p.b_strides[0]);
}

}  // namespace tiles::cuda
