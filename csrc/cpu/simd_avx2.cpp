// The CPU kernels' vector code for AVX2 machines: 32-byte vectors. Only reached when kernels() found
// the CPU supports it.
#define TILES_ISA avx2
#define TILES_ISA_ENUM Isa::Avx2
#define TILES_VEC_BYTES 32
#define TILES_ISA_TARGET "avx2,fma,f16c,bmi,bmi2,popcnt"
#include "cpu/simd_target.h"
