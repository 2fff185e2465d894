// Element loads with conversion to the op-math type. Same-dtype kernels use StaticLoad (a plain typed
// load); zip with operands of different float dtypes uses DynamicLoad, which switches on the dtype at
// run time, instead of copying an operand to the result dtype first.
#pragma once

#include "tiles/common.h"

namespace tiles {

enum class Dtype : uint8_t { Half, BFloat16, Float, Double };

template <class S>
struct StaticLoad {
  template <class T>
  TILES_HD T load(const void* base, int64_t offset) const {
    return T(static_cast<opmath_t<S>>(static_cast<const S*>(base)[offset]));
  }
};

struct DynamicLoad {
  Dtype dtype;
  template <class T>
  TILES_HD T load(const void* base, int64_t offset) const {
    switch (dtype) {
      case Dtype::Half: return T(float(static_cast<const c10::Half*>(base)[offset]));
      case Dtype::BFloat16: return T(float(static_cast<const c10::BFloat16*>(base)[offset]));
      case Dtype::Float: return T(static_cast<const float*>(base)[offset]);
      default: return T(static_cast<const double*>(base)[offset]);
    }
  }
};

}  // namespace tiles
