// The CPU kernels' vector code for the baseline every build target has (SSE2 on x86-64, NEON on
// aarch64): 16-byte vectors, compiled with the default target options.
#include "cpu/simd_includes.h"

#define TILES_ISA base
#define TILES_VEC_BYTES 16
#include "cpu/simd_body.h"
#include "cpu/bmm_body.h"

namespace tiles::cpu::base {
const Kernels kKernels = {Isa::Base, "base", &map_range, &zip_range, &reduce_span, &reduce_cols, &bmm};
}  // namespace tiles::cpu::base
