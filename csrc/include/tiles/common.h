// Definitions shared by every kernel, host and device.
#pragma once

#include <cstdint>

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#if defined(__CUDACC__)
#define TILES_HD __host__ __device__ __forceinline__
#else
#define TILES_HD inline
#endif

namespace tiles {

// The most dimensions a strided view may have after contiguous dims are merged. Shapes and strides
// travel to kernels by value in fixed arrays of this length (as ATen's TensorIterator does).
constexpr int kMaxDims = 25;

// The type arithmetic happens in: half types compute (and accumulate) in float32.
template <class T> struct OpMath { using type = T; };
template <> struct OpMath<c10::Half> { using type = float; };
template <> struct OpMath<c10::BFloat16> { using type = float; };
template <class T> using opmath_t = typename OpMath<T>::type;

}  // namespace tiles
