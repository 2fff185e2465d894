// The CPU kernels' vector code for the baseline every build target has (SSE2 on x86-64, NEON on
// aarch64): 16-byte vectors, compiled with the default target options.
#define TILES_ISA base
#define TILES_ISA_ENUM Isa::Base
#define TILES_VEC_BYTES 16
#include "cpu/simd_target.h"
