// The CPU kernels' vector code for AVX2 machines: 32-byte vectors, every function defined here
// compiled with target("avx2,fma,f16c,bmi,bmi2,popcnt"). Only reached when kernels() found the CPU supports it.
#include "cpu/simd_includes.h"

#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi,bmi2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2,popcnt")
#endif

#define TILES_ISA avx2
#define TILES_VEC_BYTES 32
#include "cpu/simd_body.h"
#include "cpu/bmm_body.h"

namespace tiles::cpu::avx2 {
const Kernels kKernels = {Isa::Avx2, "avx2", &map_range, &zip_range, &reduce_span, &reduce_cols, &bmm};
}  // namespace tiles::cpu::avx2

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64
