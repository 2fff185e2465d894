// One instruction set's build of the CPU kernels' vector code (simd_body.h, bmm_body.h) and its table
// of kernels. Each simd_<isa>.cpp defines, then includes this file:
//   TILES_ISA         the namespace and name (base, avx2, avx512)
//   TILES_ISA_ENUM    its Isa value
//   TILES_VEC_BYTES   the vector width
//   TILES_ISA_TARGET  (x86-64 sets only) the compiler's target string, applied to every function
//                     defined here; the headers simd_includes.h pulls in keep the baseline target.
#include "cpu/simd_includes.h"

#if !defined(TILES_ISA_TARGET) || defined(__x86_64__) || defined(_M_X64)

#define TILES_PRAGMA(x) TILES_PRAGMA_(x)  // expands the target macro before it is stringized
#define TILES_PRAGMA_(x) _Pragma(#x)
#define TILES_NAME(x) TILES_NAME_(x)
#define TILES_NAME_(x) #x

#if defined(TILES_ISA_TARGET) && defined(__clang__)
TILES_PRAGMA(clang attribute push(__attribute__((target(TILES_ISA_TARGET))), apply_to = function))
#elif defined(TILES_ISA_TARGET)
TILES_PRAGMA(GCC push_options)
TILES_PRAGMA(GCC target(TILES_ISA_TARGET))
#endif

#include "cpu/simd_body.h"
#include "cpu/bmm_body.h"

namespace tiles::cpu::TILES_ISA {
const Kernels kKernels = {TILES_ISA_ENUM, TILES_NAME(TILES_ISA), &map_range,   &zip_range, &map_grad_range,
                          &reduce_span,    &reduce_rows,            &reduce_cols, &bmm};
}  // namespace tiles::cpu::TILES_ISA

#if defined(TILES_ISA_TARGET) && defined(__clang__)
#pragma clang attribute pop
#elif defined(TILES_ISA_TARGET)
#pragma GCC pop_options
#endif

#endif
