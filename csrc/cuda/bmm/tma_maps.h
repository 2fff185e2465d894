// TMA tensor maps for the Hopper bmm kernels: how an operand's strides look to TMA, and the map that
// describes it in place (no copies, either major order). Shared by the 16-bit (bmm/hopper.cu) and the
// TF32 (bmm/hopper_tf32.cu) paths.
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#include "binding/problems.h"

namespace tiles::cuda::hopper {

// One operand as TMA sees it: a 3-D tensor [batch][outer][inner] with unit inner stride. `mn_major`
// says whether the inner (contiguous) dim is M (or N) instead of K.
struct OperandLayout {
  bool ok = false;
  bool mn_major = false;
  int64_t inner = 0, outer = 0, batch = 1;
  int64_t outer_stride = 0, batch_stride = 0;  // elements
};

// a's and b's layouts; `ok` is false when TMA cannot address them (no unit-stride matrix dim, a
// stride or the base not 16-byte aligned, a stride of 2^39 elements or more).
OperandLayout layout_a(const BmmProblem& p);
OperandLayout layout_b(const BmmProblem& p);
// The output [batch][m][n] (contiguous, fresh); `ok` when TMA can store it (16-byte-aligned rows).
OperandLayout output_layout(const BmmProblem& p);

// Why no Hopper kernel can take `p`, whatever its dtype and its operands' strides (K = 0, a size beyond
// TMA's 32-bit coordinates, not an sm_90 device), or nullptr.
const char* hopper_unsuitable(const BmmProblem& p);
// hopper_unsuitable's reasons, and an operand TMA cannot address; nullptr when TMA can load both.
const char* tma_unsuitable(const BmmProblem& p);

// A map whose boxes are [1][box_outer][128 bytes of inner elements], stored in shared memory with the
// 128-byte swizzle; zero fill outside the tensor.
CUtensorMap tensor_map(const at::Tensor& t, const OperandLayout& l, int box_outer);

// Elements of `t`'s dtype in one 128-byte swizzle row: a box's inner extent.
inline int box_inner(const at::Tensor& t) { return 128 / int(t.element_size()); }

}  // namespace tiles::cuda::hopper
