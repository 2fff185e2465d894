// Picks the CPU kernels' instruction set once per process (simd.h).
#include <cstdlib>
#include <cstring>

#include "binding/format.h"
#include "cpu/simd.h"

namespace tiles::cpu {
namespace {

Isa widest_supported() {
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  // __builtin_cpu_supports also checks that the OS saves the wider registers (XGETBV).
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt"))
    return Isa::Avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2") && __builtin_cpu_supports("popcnt"))
    return Isa::Avx2;
#endif
  return Isa::Base;
}

const Kernels& pick() {
  Isa isa = widest_supported();
  if (const char* want = std::getenv("TILES_CPU_ISA")) {  // a narrower set, for tests and comparisons
    Isa asked = isa;
    if (std::strcmp(want, "base") == 0) asked = Isa::Base;
    else if (std::strcmp(want, "avx2") == 0) asked = Isa::Avx2;
    else if (std::strcmp(want, "avx512") == 0) asked = Isa::Avx512;
    if (int(asked) < int(isa)) isa = asked;
  }
#if defined(__x86_64__) || defined(_M_X64)
  if (isa == Isa::Avx512) return avx512::kKernels;
  if (isa == Isa::Avx2) return avx2::kKernels;
#endif
  return base::kKernels;
}

}  // namespace

const Kernels& kernels() {
  static const Kernels& k = pick();
  return k;
}

}  // namespace tiles::cpu
