// Element loads with conversion to the op-math type. Same-dtype kernels use StaticLoad (a plain typed
// load); zip with operands of different float dtypes uses DynamicLoad, which switches on the dtypes at
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

// An operand of another dtype than the result is converted to the result dtype first, as torch's
// TensorIterator casts every input to the common dtype before computing: a float32 0-dim operand of a
// float16 result is rounded to float16 (converting to a wider dtype leaves the value as it is).
struct DynamicLoad {
  Dtype dtype;   // the operand's
  Dtype result;  // the op's result dtype
  // Both named, so that no call site can leave `result` to a default (Half, the enum's first value).
  constexpr TILES_HD DynamicLoad(Dtype dtype_, Dtype result_) : dtype(dtype_), result(result_) {}
  template <class T>
  TILES_HD T load(const void* base, int64_t offset) const {
    switch (dtype) {
      case Dtype::Half: return as_result<T>(float(static_cast<const c10::Half*>(base)[offset]));
      case Dtype::BFloat16: return as_result<T>(float(static_cast<const c10::BFloat16*>(base)[offset]));
      case Dtype::Float: return as_result<T>(static_cast<const float*>(base)[offset]);
      default: return as_result<T>(static_cast<const double*>(base)[offset]);
    }
  }
  template <class T, class V>
  TILES_HD T as_result(V v) const {
    switch (result) {
      case Dtype::Half: return T(float(c10::Half(float(v))));
      case Dtype::BFloat16: return T(float(c10::BFloat16(float(v))));
      case Dtype::Float: return T(float(v));
      default: return T(v);
    }
  }
};

}  // namespace tiles
