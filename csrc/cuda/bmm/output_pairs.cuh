// Two adjacent outputs of a row in one store. Every tensor-core accumulator layout here (mma.sync's
// M16N8Accumulator, wgmma's fragments) gives one lane the outputs (row, 2k) and (row, 2k + 1), so where a
// row starts aligned to two outputs every such pair is (every row of an even N, every other row of an
// odd one, such as an LM head's 50257) and goes out as one 4-, 8- or 16-byte store; the rest are stored
// one at a time, bounds-checked, by the caller.
#pragma once

#include <cstdint>
#include <type_traits>

namespace tiles::cuda {

// Whether `at` may take a store_pair.
template <class T>
__device__ __forceinline__ bool pair_aligned(const T* at) {
  return reinterpret_cast<uintptr_t>(at) % (2 * sizeof(T)) == 0;
}

// at[0] = x, at[1] = y in one store (at: pair_aligned): 2-byte outputs' bits as one 32-bit word, floats as
// a float2, doubles as a double2. (A struct of two 2-byte members, alignas(4), was not always merged into
// one store: some mma.sync instances stored it as two 16-bit halves.)
template <class T>
__device__ __forceinline__ void store_pair(T* at, T x, T y) {
  static_assert(std::is_same_v<T, uint16_t> || std::is_same_v<T, float> || std::is_same_v<T, double>,
                "store_pair: 16-bit outputs as their bits (uint16_t), float or double");
  if constexpr (std::is_same_v<T, uint16_t>) *reinterpret_cast<uint32_t*>(at) = uint32_t(x) | uint32_t(y) << 16;
  else if constexpr (std::is_same_v<T, float>) *reinterpret_cast<float2*>(at) = make_float2(x, y);
  else *reinterpret_cast<double2*>(at) = make_double2(x, y);
}

}  // namespace tiles::cuda
