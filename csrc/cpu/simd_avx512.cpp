// The CPU kernels' vector code for AVX512 machines: 64-byte vectors, every function defined here
// compiled for
// AVX-512 F/BW/VL/DQ with AVX2 and FMA. Only reached when kernels() found the CPU supports it.
#include "cpu/simd_includes.h"

#if defined(__x86_64__) || defined(_M_X64)
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,popcnt"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,popcnt")
#endif

#define TILES_ISA avx512
#define TILES_VEC_BYTES 64
#include "cpu/simd_body.h"
#include "cpu/bmm_body.h"

namespace tiles::cpu::avx512 {
const Kernels kKernels = {Isa::Avx512, "avx512", &map_range, &zip_range, &reduce_span, &reduce_cols, &bmm};
}  // namespace tiles::cpu::avx512

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif  // x86-64
