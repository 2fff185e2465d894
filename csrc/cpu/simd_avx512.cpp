// The CPU kernels' vector code for AVX-512 machines (F/BW/VL/DQ, with AVX2 and FMA): 64-byte vectors.
// Only reached when kernels() found the CPU supports it.
#define TILES_ISA avx512
#define TILES_ISA_ENUM Isa::Avx512
#define TILES_VEC_BYTES 64
#define TILES_ISA_TARGET "avx512f,avx512bw,avx512vl,avx512dq,avx2,fma,f16c,bmi,bmi2,popcnt"
#include "cpu/simd_target.h"
