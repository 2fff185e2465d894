// The CPU kernels (binding/kernels.h lists them).
#pragma once

#include "binding/kernels.h"

namespace tiles::cpu {
TILES_BACKEND_KERNELS

// An operand of one element in another dtype than `dtype` (a 0-dim scale, a [1] tensor) converted once
// to it, rounded as the per-element loads round it (tiles/loads.h), so that zip and its gradient take
// the same-dtype loops instead of converting every element (cpu/elementwise.cpp: a float16 tensor times
// a float64 0-dim one, 2^20 elements on one thread, 10.4 ms before, 0.07 after); other operands as they are.
at::Tensor one_element_as(const at::Tensor& t, at::ScalarType dtype);
}  // namespace tiles::cpu
