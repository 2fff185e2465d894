// The vector loops of the CPU kernels, written once with GCC / Clang vector extensions and included by
// one .cpp per instruction set (simd_base.cpp, simd_avx2.cpp, simd_avx512.cpp) after
//   TILES_ISA           the namespace the set's code lives in (base, avx2, avx512)
//   TILES_VEC_BYTES     the vector width in bytes (16, 32, 64)
// and after switching the compiler's target options for everything defined below. Every header this
// file depends on is included by the .cpp before that switch, so their inline functions keep the
// baseline target (the linker may pick any TU's copy of those). No include guard: by design.
//
// Half types compute in float32 lanes; bfloat16 converts with shifts (round to nearest even, NaN kept),
// float16 with F16C on the x86 sets that have it, else through c10's scalar conversion. Map / zip fns
// without a vector form here (pow; sin, cos, log, tanh, erf and gelu in double lanes; sqrt off x86) run
// c10 / libm per lane over the same blocks.

namespace tiles::cpu::TILES_ISA {
namespace {

constexpr int kBytes = TILES_VEC_BYTES;
// Vectors of B bytes; the set's own width below, narrower ones for loops that run at fewer bytes.
template <int B> struct Vec {
  typedef float f __attribute__((vector_size(B)));
  typedef double d __attribute__((vector_size(B)));
  typedef uint32_t u __attribute__((vector_size(B)));
  typedef int32_t i __attribute__((vector_size(B)));
  typedef uint16_t h __attribute__((vector_size(B / 2)));  // one 16-bit value per float lane
  typedef uint16_t w __attribute__((vector_size(B)));      // two 16-bit values per float lane
};
using vf = Vec<kBytes>::f;
using vd = Vec<kBytes>::d;
using vu = Vec<kBytes>::u;
using vh = Vec<kBytes>::h;
typedef int32_t vi __attribute__((vector_size(kBytes)));
typedef int64_t vl __attribute__((vector_size(kBytes)));

template <class T> struct VecOf;
template <> struct VecOf<float> { using type = vf; using mask = vi; };
template <> struct VecOf<double> { using type = vd; using mask = vl; };
template <class T> using vec_t = typename VecOf<T>::type;
template <class T> constexpr int lanes = kBytes / int(sizeof(T));

template <class V> inline V vload(const void* p) { V v; __builtin_memcpy(&v, p, sizeof(V)); return v; }
template <class V> inline void vstore(void* p, V v) { __builtin_memcpy(p, &v, sizeof(V)); }
template <class V> using elem_t = std::remove_reference_t<decltype(std::declval<V&>()[0])>;
// Every lane = s (x - 0 is x for every x, -0 and NaN included; the compiler emits one broadcast).
template <class V, class S> inline V splat(S s) { return static_cast<elem_t<V>>(s) - V{}; }

// ---- conversions: storage S <-> op-math vectors (unit stride) ----------------------------------------

inline uint16_t bf16_bits(float f) {  // c10::BFloat16's round to nearest even, NaN -> 0x7fc0
  uint32_t u;
  __builtin_memcpy(&u, &f, 4);
  if (f != f) return 0x7fc0;
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// Lane-wise widening conversions (float -> double, uint16 -> uint32). GCC 12 lowers a 512-bit one as
// two 256-bit conversions and an insert, a large part of a bf16 loop, and four floats to four doubles
// as two 2-lane conversions and an insert (five instructions in the row sums' widening, where one
// vcvtps2pd does it); the x86 sets' single instructions are written out.
template <class To, class From> inline To widen(From v) {
#if defined(TILES_ISA_TARGET)
  if constexpr (sizeof(To) == 32 && std::is_same_v<elem_t<To>, double>) return (To)_mm256_cvtps_pd((__m128)v);
#endif
#if TILES_VEC_BYTES == 64
  // (The maskz forms with every lane set are the same instructions; the plain ones' undefined
  // pass-through trips GCC 12's -Wmaybe-uninitialized.)
  if constexpr (sizeof(To) == 64 && std::is_same_v<elem_t<To>, double>)
    return (To)_mm512_maskz_cvtps_pd(0xff, (__m256)v);
  if constexpr (sizeof(To) == 64 && std::is_same_v<elem_t<To>, uint32_t>)
    return (To)_mm512_maskz_cvtepu16_epi32(0xffff, (__m256i)v);
#endif
  return __builtin_convertvector(v, To);
}
// uint32 -> uint16 lanes (values below 2^16), in one instruction on AVX-512 too.
inline vh narrow(vu v) {
#if TILES_VEC_BYTES == 64
  return (vh)_mm512_maskz_cvtepi32_epi16(0xffff, (__m512i)v);
#else
  return __builtin_convertvector(v, vh);
#endif
}

// The low and high halves of v's lanes, by register shuffles where the compiler has
// __builtin_shufflevector (a copy through memory can keep a loop's accumulators there too).
template <class V, size_t... I> inline auto halves_(V v, std::index_sequence<I...>) {
#if defined(__clang__) || __GNUC__ >= 12
  return std::pair{__builtin_shufflevector(v, v, I...), __builtin_shufflevector(v, v, (I + sizeof...(I))...)};
#else
  typedef elem_t<V> Half __attribute__((vector_size(sizeof(V) / 2)));
  std::pair<Half, Half> h;
  __builtin_memcpy(&h.first, &v, sizeof(Half));
  __builtin_memcpy(&h.second, reinterpret_cast<const char*>(&v) + sizeof(Half), sizeof(Half));
  return h;
#endif
}
template <class V> inline auto halves(V v) {
  return halves_(v, std::make_index_sequence<sizeof(V) / sizeof(elem_t<V>) / 2>());
}

// lo += the low half of s's float lanes as doubles, hi += the high half.
template <class VD, class VF> inline void add_widened(VD& lo, VD& hi, VF s) {
  const auto [l, h] = halves(s);
  lo += widen<VD>(l);
  hi += widen<VD>(h);
}

// float16 <-> float32 with F16C's vcvtph2ps / vcvtps2ph (round to nearest even, as c10::Half), which
// the x86 sets with 32- and 64-byte vectors are built with (simd_avx2.cpp, simd_avx512.cpp); the others
// convert a lane at a time through c10.
#if defined(TILES_ISA_TARGET) && TILES_VEC_BYTES >= 32
constexpr bool kF16c = true;
template <int B> inline typename Vec<B>::f f16c_load(const c10::Half* p) {
  using V = typename Vec<B>::f;
  if constexpr (B == 16) return (V)_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  else if constexpr (B == 32) return (V)_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  else return (V)_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <int B> inline void f16c_store(c10::Half* p, typename Vec<B>::f v) {
  if constexpr (B == 32)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(p), _mm256_cvtps_ph((__m256)v, _MM_FROUND_TO_NEAREST_INT));
  else
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), _mm512_cvtps_ph((__m512)v, _MM_FROUND_TO_NEAREST_INT));
}
#else
constexpr bool kF16c = false;
template <int B> inline typename Vec<B>::f f16c_load(const c10::Half*) { return {}; }
template <int B> inline void f16c_store(c10::Half*, typename Vec<B>::f) {}
#endif

// B / 4 elements of S (unit stride) as float lanes.
template <int B, class S> inline typename Vec<B>::f load_floats(const S* p) {
  using V = typename Vec<B>::f;
  if constexpr (std::is_same_v<S, float>) {
    return vload<V>(p);
  } else if constexpr (std::is_same_v<S, c10::BFloat16>) {
    return (V)(widen<typename Vec<B>::u>(vload<typename Vec<B>::h>(p)) << 16);
  } else if constexpr (kF16c) {
    return f16c_load<B>(p);
  } else {
    V v{};
    for (int l = 0; l < B / 4; ++l) v[l] = float(p[l]);
    return v;
  }
}

template <class S> struct Io;
template <> struct Io<float> {
  static vf load(const float* p) { return load_floats<kBytes>(p); }
  static void store(float* p, vf v) { vstore(p, v); }
};
template <> struct Io<double> {
  static vd load(const double* p) { return vload<vd>(p); }
  static void store(double* p, vd v) { vstore(p, v); }
};
template <> struct Io<c10::BFloat16> {
  static vf load(const c10::BFloat16* p) { return load_floats<kBytes>(p); }
  static void store(c10::BFloat16* p, vf v) {
    const vu u = (vu)v;
    vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    r = (v != v) ? splat<vu>(0x7fc0u) : r;
    vstore(p, narrow(r));
  }
};
template <> struct Io<c10::Half> {
  static vf load(const c10::Half* p) { return load_floats<kBytes>(p); }
  static void store(c10::Half* p, vf v) {
    if constexpr (kF16c) {
      f16c_store<kBytes>(p, v);
    } else {
      for (int l = 0; l < lanes<float>; ++l) p[l] = c10::Half(float(v[l]));
    }
  }
};

// ---- math -------------------------------------------------------------------------------------------

// The math helpers (and vmap / vmap_grad / vzip) are inlined into their loops whatever their size:
// GCC's heuristics left vexp, verf and then vmap out of line, and each call spilled the loop's vector
// registers around it (AVX2 host, one thread, float32 64 x 256: gelu's gradient 73 -> 38 us, gelu
// 58 -> 36, torch 40 and 19).
#define TILES_VECTOR_MATH [[gnu::always_inline]] inline
// The same for the lambdas that wrap them for the loops (`[](auto v) TILES_INLINE_LAMBDA { ... }`): GCC
// inlined the first of store_op's two calls a loop turn and called the second out of line, with every
// constant reloaded on each side (AVX2 Zen 3 host, one thread, float32 in cache, ns an element: gelu
// 1.14 -> 0.98, tanh 1.27 -> 1.06, erf 1.39 -> 1.16; torch's gelu 0.87).
#define TILES_INLINE_LAMBDA __attribute__((always_inline))

// e^x = e^r 2^n by range reduction x = n ln2 + r, |r| <= ln2 / 2 (ln2 in two parts), and a polynomial
// for e^r: the part vexp and vexp_nonpositive share, for |x| up to ~104. NaN gives NaN.
struct ExpParts {
  vf e_r, n;  // e^r, and n as a float
};
TILES_VECTOR_MATH ExpParts exp_parts(vf x) {
  const vf t = x * 1.44269504088896341f + 12582912.0f;  // round to nearest integer (1.5 * 2^23)
  const vf n = t - 12582912.0f;
  vf r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  vf p = splat<vf>(1.9875691500e-4f);
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  return {p * (r * r) + r + 1.0f, n};
}

// exp, with 2^n applied as two factors (so results that are subnormal, or overflow to inf, come out
// right). NaN stays NaN.
TILES_VECTOR_MATH vf vexp(vf x) {
  x = x > 88.8f ? splat<vf>(88.8f) : x;
  x = x < -104.0f ? splat<vf>(-104.0f) : x;
  const ExpParts e = exp_parts(x);
  const vi ni = __builtin_convertvector(e.n, vi);
  const vi n1 = ni >> 1, n2 = ni - n1;
  return e.e_r * (vf)((n1 + 127) << 23) * (vf)((n2 + 127) << 23);
}

// exp(x) for -87.3 <= x <= 0, whose results are normal floats: one 2^n factor and no clamps. NaN stays
// NaN. vexp_nonpositive takes any x <= 0, where results under 2^-126 (x < -87.3) may be 0, as the erfc
// tails allow: a few instructions fewer than vexp either way.
TILES_VECTOR_MATH vf vexp_in_normal_range(vf x) {
  const ExpParts e = exp_parts(x);
  return e.e_r * (vf)((__builtin_convertvector(e.n, vi) + 127) << 23);
}
TILES_VECTOR_MATH vf vexp_nonpositive(vf x) {
  const vf result = vexp_in_normal_range(x < -87.3f ? splat<vf>(-87.3f) : x);
  return x < -87.3f ? splat<vf>(0.0f) : result;
}

// min(x, c) for a constant c, keeping a NaN x: the x86 sets' min returns its second operand when either
// is NaN, so min(c, x) is exactly `c < x ? c : x`, one instruction where GCC makes the select two.
// (vmin, for two variables, must keep a NaN on either side: one instruction cannot.)
TILES_VECTOR_MATH vf vmin_const(vf x, float c) {
#if defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 32
  return (vf)_mm256_min_ps(_mm256_set1_ps(c), (__m256)x);
#elif defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 64
  return (vf)_mm512_maskz_min_ps(0xffff, _mm512_set1_ps(c), (__m512)x);  // maskz: as in widen()
#else
  return c < x ? splat<vf>(c) : x;
#endif
}

// 1 / x to about 2e-7 relative: the x86 sets' reciprocal estimate and one Newton step (a division's
// throughput is a third of it), a division elsewhere.
TILES_VECTOR_MATH vf vrecip(vf x) {
#if defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 32
  const vf r = (vf)_mm256_rcp_ps((__m256)x);
  return r * (2.0f - x * r);
#elif defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 64
  const vf r = (vf)_mm512_rcp14_ps((__m512)x);
  return r * (2.0f - x * r);
#else
  return 1.0f / x;
#endif
}

TILES_VECTOR_MATH vd vexp(vd x) {
  x = x > 710.0 ? splat<vd>(710.0) : x;
  x = x < -746.0 ? splat<vd>(-746.0) : x;
  const vd t = x * 1.4426950408889634074 + 6755399441055744.0;  // 1.5 * 2^52
  const vd n = t - 6755399441055744.0;
  vd r = x - n * 6.93147180369123816490e-01;
  r = r - n * 1.90821492927058770002e-10;
  // Taylor to r^13: the remainder is below 2e-16 relative for |r| <= ln2 / 2.
  vd p = splat<vd>(1.0 / 6227020800.0);
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * (r * r) + r + 1.0;
  const vl ni = __builtin_convertvector(n, vl);
  const vl n1 = ni >> 1, n2 = ni - n1;
  return p * (vd)((n1 + 1023) << 52) * (vd)((n2 + 1023) << 52);
}

template <class V> inline V vabs(V x) {
  using M = decltype(x < x);  // the signed integers of the lanes' width: clear the sign bit
  return (V)((M)x & splat<M>(std::numeric_limits<elem_t<M>>::max()));
}

// g(a) = erfc(a) exp(a²) for 0 <= a <= 4 (past 4, where erfc is below 1.6e-8, g(4) stands in): a
// degree-7 polynomial in t = 1 / (1 + 0.47 a), which runs from 1 to 0.35 as g falls from 1 to 0.14
// (tools/fit_erfc.py prints it: 3.4e-7 relative in float arithmetic, mostly t's rounding). erf's tail
// (erfcx_to_4) and gelu's Φ (normal_parts) both take erfc from it. erfcx_poly is g as that polynomial
// of t, times `scale`: a power of two, so the scaled coefficients are exact (and, the call inlined with
// a constant, folded at compile time).
constexpr float kErfcxPoly[] = {0.0979262986f, -0.465801151f, 0.698072061f, -0.223373237f,
                                0.396625496f,  0.22655685f,   0.270278774f, -0.000285057393f};  // highest power first
TILES_VECTOR_MATH vf erfcx_poly(vf t, float scale = 1.0f) {
  vf p = splat<vf>(kErfcxPoly[0] * scale);
  for (int i = 1; i < int(std::size(kErfcxPoly)); ++i) p = p * t + kErfcxPoly[i] * scale;
  return p;
}
TILES_VECTOR_MATH vf erfcx_to_4(vf a) { return erfcx_poly(vrecip(vmin_const(a, 4.0f) * 0.47f + 1.0f)); }

// erfc(a) for a >= 0 in float lanes: exp(-a²) g(a); past 4, where erfc is below 1.6e-8, g(4) stands in
// (erfc comes out too large by up to a factor a / 4, absolute error below 1e-8).
TILES_VECTOR_MATH vf verfc(vf a) { return vexp_nonpositive(-(a * a)) * erfcx_to_4(a); }

// The Taylor coefficients of erf(x) / x in powers of x²: (2 / √π) (-1)^n / (n! (2n + 1)).
constexpr float erf_taylor(int n) {
  double c = M_2_SQRTPI;
  for (int i = 1; i <= n; ++i) c /= -double(i);
  return float(c / (2 * n + 1));
}
// erf(x) / x for |x| < 1: its Taylor series to x^21 (the next term is below 2e-9).
TILES_VECTOR_MATH vf erf_over_x(vf x) {
  const vf x2 = x * x;
  vf p = splat<vf>(erf_taylor(10));
  for (int n = 9; n >= 0; --n) p = p * x2 + erf_taylor(n);
  return p;
}

// erf in float lanes: |x| < 1 by its Taylor series, else ±(1 - erfc(|x|)). NaN stays NaN; ±inf gives ±1.
TILES_VECTOR_MATH vf verf(vf x) {
  const vf a = vabs(x);
  const vu sign = (vu)x & 0x80000000u;
  const vf tail = (vf)((vu)(1.0f - verfc(a)) | sign);
  return a < 1.0f ? x * erf_over_x(x) : tail;
}

// Φ(x) = ½ (1 + erf(x / √2)) and exp(-x²/2), for gelu (x Φ(x)) and its gradient (Φ(x) + x exp(-x²/2) /
// √(2π)): h = ½ erfc(|x|/√2) = exp(-x²/2) ½ g(|x|/√2), Φ = h below 0 and 1 - h from 0, so neither side
// cancels (1 - h is at least ½) and one erfc, from g over the whole of [0, 4], serves both (the Taylor
// series inside and the tail's took two, both evaluated in every vector: gelu 64 x 256 took 1.9x torch's
// time with them). Written from x itself: the √2 goes into t's factor and the clamp, the ½ into g's
// coefficients, and x² is clamped with one min (exp's range). Past it, x² > 174.6, e is set to 0: a huge
// negative x then gives gelu -0, not x times h's floor of ~1e-39 (-0.3 at -3.4e38), and -inf gives NaN, as
// torch's. That is four instructions fewer a vector, of about 45, than computing 1 + erf(u) at u = x / √2;
// and t comes from a division rather than vrecip's three instructions: the divider has nothing else to do
// in these loops. AVX2 Zen 3 host, one thread, float32 in cache, ns an element: gelu 0.97 before,
// 0.86-0.91 with vrecip, 0.84-0.86 with the division (torch 0.86-0.88), largest relative error where
// |gelu| > 1e-3 1.35e-6 before, 5.4e-7 after; the gradient 1.22-1.35 -> 1.14-1.26 (torch 1.8-2.2), largest
// relative error where it exceeds 1e-3 (cancellation near its zero at x = -0.75 bounds it) 8.9e-5 ->
// 5.4e-5 (torch 9.2e-5).
struct NormalParts {
  vf cdf, e;  // Φ(x), and exp(-x² / 2), which the density is a multiple of
};
TILES_VECTOR_MATH NormalParts normal_parts(vf x) {
  constexpr float kMaxSquare = 2 * 87.3f;  // vexp_in_normal_range's limit for -x² / 2
  const vf square = x * x;
  const vf e_in_range = vexp_in_normal_range(vmin_const(square, kMaxSquare) * -0.5f);
  const vf e = square > kMaxSquare ? splat<vf>(0.0f) : e_in_range;
  const vf t = 1.0f / (vmin_const(vabs(x), float(4 * M_SQRT2)) * float(0.47 * M_SQRT1_2) + 1.0f);
  const vf h = e * erfcx_poly(t, 0.5f);
  return {x < 0.0f ? h : 1.0f - h, e};
}
TILES_VECTOR_MATH vf vgelu(vf x) { return x * normal_parts(x).cdf; }

// log in float lanes: x = m 2^e with m in [√½, √2) (subnormals scaled by 2^23 first), log m = 2 atanh(s)
// with s = (m - 1) / (m + 1), |s| <= 0.172, by its series to s^9 (the next term is below 3e-9 of the
// sum; m - 1 is exact), plus e ln 2 in two parts. 0 gives -inf, a negative x NaN, inf inf, NaN NaN.
// (libm's per lane took four times torch's time.)
TILES_VECTOR_MATH vf vlog(vf x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  const vi subnormal = x < kMinNormal;  // (and zeros and negatives, replaced at the end)
  const vi bits = (vi)(subnormal ? x * 8388608.0f : x);
  vi e = ((bits >> 23) & 0xff) - 127 + (subnormal & -23);
  vf m = (vf)((bits & 0x007fffff) | 0x3f800000);  // [1, 2)
  const vi high = m > 1.41421356f;
  m = high ? m * 0.5f : m;
  e -= high;  // (true is -1)
  const vf s = (m - 1.0f) / (m + 1.0f), s2 = s * s;
  vf p = splat<vf>(1.0f / 9.0f);
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 0.2f;
  p = p * s2 + 1.0f / 3.0f;
  const vf log_m = 2.0f * s + (2.0f * s) * (s2 * p);
  const vf ef = __builtin_convertvector(e, vf);
  vf r = ef * 0.693359375f + (ef * -2.12194440e-4f + log_m);
  r = x == 0.0f ? splat<vf>(-std::numeric_limits<float>::infinity()) : r;
  r = x < 0.0f ? splat<vf>(std::numeric_limits<float>::quiet_NaN()) : r;
  r = x == std::numeric_limits<float>::infinity() ? x : r;
  return x != x ? x : r;
}

// tanh in float lanes: |x| < 0.55 by its Taylor series to x^17 (relative error below 1e-7 in float
// arithmetic), else ±(1 - 2 / (e^2|x| + 1)), which cancels at most a factor 2 there (2e-7). NaN stays
// NaN; ±inf gives ±1; -0 stays -0. (libm's per lane took ten times torch's time.)
TILES_VECTOR_MATH vf vtanh(vf x) {
  // The Taylor coefficients of tanh(x) / x in powers of x², 2^2n (2^2n - 1) B_2n / (2n)!, highest first.
  constexpr float kTaylor[] = {5.900274264e-04f, -1.455834368e-03f, 3.592127934e-03f, -8.863235824e-03f,
                               2.186948806e-02f, -5.396825448e-02f, 1.333333403e-01f, -3.333333433e-01f, 1.0f};
  const vf x2 = x * x;
  vf p = splat<vf>(kTaylor[0]);
  for (int i = 1; i < int(sizeof(kTaylor) / sizeof(kTaylor[0])); ++i) p = p * x2 + kTaylor[i];
  const vf a = vabs(x);
  const vu sign = (vu)x & 0x80000000u;
  const vf outer = (vf)((vu)(1.0f - 2.0f / (vexp(2.0f * a) + 1.0f)) | sign);
  return a < 0.55f ? x * p : outer;
}

// Whether any lane of a comparison's result (all ones or zero per lane) is set: one movemask on the x86
// sets, an OR over the lanes elsewhere.
TILES_VECTOR_MATH bool any_lane(vi m) {
#if defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 32
  return _mm256_movemask_ps((__m256)m) != 0;
#elif defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 64
  return _mm512_movepi32_mask((__m512i)m) != 0;
#else
  int32_t any = 0;
  for (int l = 0; l < lanes<float>; ++l) any |= m[l];
  return any != 0;
#endif
}

// sin (kCos false) or cos in float lanes: x = q π/2 + r with q the nearest integer to x 2/π and π/2 in
// four parts (the first two with trailing zero bits, so q times them is exact; the fourth what the third
// leaves out, for the results near zero, sin x at x = k π), then sin or cos of r (|r| <= π/4) by minimax
// polynomials (Cephes's sinf / cosf coefficients) chosen and signed by q mod 4: within 1.56 float32 ulps
// of the exact result (torch's 0.6). Near zero the third part's product decides: where the compiler
// contracts `r - q * c` into an FMA (GCC's default for C++ on the sets with FMA) within 1 ulp, without
// (the base set) up to 2.1e-13 absolute; tests/helpers.py assert_sin_cos_ulps checks each set. Past
// |x| = 125 the reduction loses bits (12 ulps at 8192), so those lanes, and NaN and ±inf, take libm's
// per lane (sinf / cosf, as every lane did before: four times torch's time). sin keeps -0.
template <bool kCos> TILES_VECTOR_MATH vf vsincos(vf x) {
  // q rounded to the nearest integer by adding 1.5 * 2^23, whose float has unit steps: the low bits of
  // t's pattern are q's (mod 4 for negative q too), read as they lie, with no float-to-int conversion.
  const vf t = x * 0.636619772f + 12582912.0f;
  const vf q = t - 12582912.0f;
  vf r = (x - q * 1.5703125f) - q * 4.837512969970703125e-4f;
  r = (r - q * 7.549790126404332e-8f) - q * -1.7151245e-15f;
  const vf z = r * r;
  const vf sin_r = r + r * z * ((-1.9515295891e-4f * z + 8.3321608736e-3f) * z - 1.6666654611e-1f);
  const vf cos_r = 1.0f - 0.5f * z + z * z * ((2.443315711809948e-5f * z - 1.388731625493765e-3f) * z +
                                              4.166664568298827e-2f);
  const vi quadrant = (vi)t + (kCos ? 1 : 0);  // cos x = sin(x + π/2)
  const vf v = (quadrant & 1) != 0 ? cos_r : sin_r;
  vf result = (vf)((vu)v ^ ((vu)(quadrant & 2) << 30));  // quadrants 2 and 3 negate
  if constexpr (!kCos) result = x == 0.0f ? x : result;
  const vi outside = (vabs(x) > 125.0f) | (x != x);  // also ±inf and NaN
  if (any_lane(outside)) [[unlikely]]
    for (int l = 0; l < lanes<float>; ++l)
      if (outside[l]) result[l] = kCos ? ::cosf(x[l]) : ::sinf(x[l]);
  return result;
}

// The NaN-propagating max / min of apply_zip, lane by lane.
template <class V> inline V vmax(V a, V b) { const V r = (b != b) | (b > a) ? b : a; return a != a ? a : r; }
template <class V> inline V vmin(V a, V b) { const V r = (b != b) | (b < a) ? b : a; return a != a ? a : r; }

// f applied lane by lane, for the fns without a vector form (c10 / libm scalar code).
template <class V, class F, class... Vs> inline V per_lane(F f, Vs... v) {
  V r{};
  for (int l = 0; l < int(sizeof(V) / sizeof(elem_t<V>)); ++l) r[l] = f(elem_t<V>(v[l])...);
  return r;
}

// Square roots with the vector instruction (correctly rounded, as std::sqrt) on the x86 sets, whose
// headers the set's target pragma opens; per lane elsewhere (the libm call did not vectorize).
template <class V> TILES_VECTOR_MATH V vsqrt(V x) {
#if defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 32
  if constexpr (std::is_same_v<V, vf>) return (V)_mm256_sqrt_ps((__m256)x);
  else return (V)_mm256_sqrt_pd((__m256d)x);
#elif defined(TILES_ISA_TARGET) && TILES_VEC_BYTES == 64
  if constexpr (std::is_same_v<V, vf>) return (V)_mm512_sqrt_ps((__m512)x);
  else return (V)_mm512_sqrt_pd((__m512d)x);
#else
  return per_lane<V>([](auto t) { return std::sqrt(t); }, x);
#endif
}

template <MapFn F, class V> TILES_VECTOR_MATH V vmap(V x) {
  using T = elem_t<V>;
  if constexpr (F == MapFn::Id) return x;
  else if constexpr (F == MapFn::Neg) return -x;
  else if constexpr (F == MapFn::Abs) return vabs(x);
  else if constexpr (F == MapFn::Exp) return vexp(x);
  else if constexpr (F == MapFn::Inv) return T(1) / x;
  else if constexpr (F == MapFn::Square) return x * x;
  else if constexpr (F == MapFn::Sqrt) return vsqrt(x);
  else if constexpr (F == MapFn::Sigmoid) return T(1) / (T(1) + vexp(-x));
  else if constexpr (F == MapFn::Relu) return x < T(0) ? splat<V>(T(0)) : x;  // NaN stays
  else if constexpr (F == MapFn::Silu) return x / (T(1) + vexp(-x));
  else if constexpr (F == MapFn::Erf && std::is_same_v<V, vf>) return verf(x);
  else if constexpr (F == MapFn::Tanh && std::is_same_v<V, vf>) return vtanh(x);
  else if constexpr (F == MapFn::Log && std::is_same_v<V, vf>) return vlog(x);
  else if constexpr (F == MapFn::Sin && std::is_same_v<V, vf>) return vsincos<false>(x);
  else if constexpr (F == MapFn::Cos && std::is_same_v<V, vf>) return vsincos<true>(x);
  else if constexpr (F == MapFn::Gelu && std::is_same_v<V, vf>) return vgelu(x);
  else return per_lane<V>([](T t) { return apply_map<F>(t); }, x);
}

// map's gradient g f'(v) (tiles/functions.h map_grad, the same formulas) in vector form; per lane only
// where f' has no vector form here (sin, cos, erf and gelu in double lanes).
template <MapFn F, class V> TILES_VECTOR_MATH V vmap_grad(V g, V v) {
  using T = elem_t<V>;
  const V zero = splat<V>(T(0)), one = splat<V>(T(1));
  if constexpr (F == MapFn::Id) return g;
  else if constexpr (F == MapFn::Neg) return -g;
  else if constexpr (F == MapFn::Abs) return g * ((v > T(0) ? one : zero) - (v < T(0) ? one : zero));
  else if constexpr (F == MapFn::Exp) return g * v;
  else if constexpr (F == MapFn::Log) return g / v;
  else if constexpr (F == MapFn::Sqrt) return g / (T(2) * v);
  else if constexpr (F == MapFn::Inv) return -(g * (v * v));
  else if constexpr (F == MapFn::Square) return g * (T(2) * v);
  else if constexpr (F == MapFn::Sigmoid) return g * (v * (T(1) - v));
  else if constexpr (F == MapFn::Relu) return v <= T(0) ? zero : g;  // a select: NaN x passes g
  else if constexpr (F == MapFn::Tanh) return g * (T(1) - v * v);
  else if constexpr (F == MapFn::Silu) {
    const V s = T(1) / (T(1) + vexp(-v));
    return g * (s * (T(1) + v * (T(1) - s)));
  } else if constexpr (F == MapFn::Gelu && std::is_same_v<V, vf>) {
    const NormalParts n = normal_parts(v);
    return g * (n.cdf + v * (n.e * float(0.5 * M_2_SQRTPI * M_SQRT1_2)));  // the density: e / √(2π)
  } else if constexpr (F == MapFn::Erf && std::is_same_v<V, vf>) {
    return g * (float(M_2_SQRTPI) * vexp(-(v * v)));
  } else if constexpr (F == MapFn::Sin && std::is_same_v<V, vf>) {
    return g * vsincos<true>(v);
  } else if constexpr (F == MapFn::Cos && std::is_same_v<V, vf>) {
    return -(g * vsincos<false>(v));
  } else {
    return per_lane<V>([](T gl, T vl) { return tiles::map_grad<F>(gl, vl); }, g, v);
  }
}

template <ZipFn F, class V> TILES_VECTOR_MATH V vzip(V a, V b) {
  using T = elem_t<V>;
  const V one = splat<V>(T(1)), zero = splat<V>(T(0));
  if constexpr (F == ZipFn::Add) return a + b;
  else if constexpr (F == ZipFn::Sub) return a - b;
  else if constexpr (F == ZipFn::Mul) return a * b;
  else if constexpr (F == ZipFn::Div) return a / b;
  else if constexpr (F == ZipFn::Max) return vmax(a, b);
  else if constexpr (F == ZipFn::Min) return vmin(a, b);
  else if constexpr (F == ZipFn::Lt) return a < b ? one : zero;
  else if constexpr (F == ZipFn::Le) return a <= b ? one : zero;
  else if constexpr (F == ZipFn::Gt) return a > b ? one : zero;
  else if constexpr (F == ZipFn::Ge) return a >= b ? one : zero;
  else if constexpr (F == ZipFn::Eq) return a == b ? one : zero;
  else if constexpr (F == ZipFn::Ne) return a != b ? one : zero;
  else return per_lane<V>([](T al, T bl) { return apply_zip<F>(al, bl); }, a, b);  // pow
}

// ---- map and zip --------------------------------------------------------------------------------------

constexpr int64_t kBlock = 512;  // elements staged at a time when an operand must be gathered

// dst[0, n) = op(vector loads of src...): full vectors straight from memory, the tail through a
// padded vector, so every element goes through the same (vector) arithmetic wherever it sits.
template <class S, class T, class Op, class... Src>
inline void store_op(S* dst, int64_t n, Op op, const Src*... src) {
  constexpr int W = lanes<T>;
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    const auto r0 = op(Io<Src>::load(src + j)...);
    const auto r1 = op(Io<Src>::load(src + j + W)...);
    Io<S>::store(dst + j, r0);
    Io<S>::store(dst + j + W, r1);
  }
  for (; j + W <= n; j += W) Io<S>::store(dst + j, op(Io<Src>::load(src + j)...));
  if (j < n) {
    S out_tail[W];
    auto pad = [&](const auto* s) {
      using X = std::remove_const_t<std::remove_pointer_t<decltype(s)>>;
      X tmp[W] = {};
      for (int64_t t = 0; t < n - j; ++t) tmp[t] = s[j + t];
      return Io<X>::load(tmp);
    };
    Io<S>::store(out_tail, op(pad(src)...));
    for (int64_t t = 0; t < n - j; ++t) dst[j + t] = out_tail[t];
  }
}

// dst[j] = op(a[j], s) (op(s, a[j]) with ScalarFirst) for j < n: a broadcast operand (a 0-dim scale)
// as one splat vector, so the loop reads one stream, as torch's scalar loops do.
template <class S, class T, bool ScalarFirst, class Op>
inline void store_op_splat(S* dst, int64_t n, Op op, const S* a, T s) {
  constexpr int W = lanes<T>;
  const auto v = splat<vec_t<T>>(s);
  auto f = [&](auto x) TILES_INLINE_LAMBDA { if constexpr (ScalarFirst) return op(v, x); else return op(x, v); };
  int64_t j = 0;
  for (; j + 2 * W <= n; j += 2 * W) {
    const auto r0 = f(Io<S>::load(a + j));
    const auto r1 = f(Io<S>::load(a + j + W));
    Io<S>::store(dst + j, r0);
    Io<S>::store(dst + j + W, r1);
  }
  if (j < n) {  // the last vectors and the tail, through store_op with the scalar staged
    T staged[2 * W];
    std::fill_n(staged, n - j, s);
    if constexpr (ScalarFirst) store_op<S, T>(dst + j, n - j, op, static_cast<const T*>(staged), a + j);
    else store_op<S, T>(dst + j, n - j, op, a + j, static_cast<const T*>(staged));
  }
}

// Copy, negate or take the absolute value of a half type on its bits: its sign is its top bit, so the
// three copy, flip or clear it, exactly as torch's kernels do (NaN payloads kept), without the round trip
// through float lanes (bf16 neg, one thread in cache on Zen 4: 0.107 ns an element that way, torch 0.044).
template <class S, MapFn F>
constexpr bool kOnSignBit = sizeof(S) == 2 && (F == MapFn::Id || F == MapFn::Neg || F == MapFn::Abs);

template <class S, MapFn F>
void map_sign_bit(const MapArgs& a, int64_t begin, int64_t end) {
  const S* x = static_cast<const S*>(a.x);
  S* out = static_cast<S*>(a.out);
  auto op = [](S v) TILES_INLINE_LAMBDA {
    if constexpr (F == MapFn::Neg) v.x ^= 0x8000u;
    else if constexpr (F == MapFn::Abs) v.x &= 0x7fffu;
    return v;
  };
  if (a.in->is_contiguous()) {
    for (int64_t j = begin; j < end; ++j) out[j] = op(x[j]);
    return;
  }
  for_each_run(*a.in, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
    const S* src = x + off[0];
    for (int64_t j = 0; j < count; ++j) out[i + j] = op(src[j * step[0]]);
  });
}

template <class S, MapFn F>
void map_typed(const MapArgs& a, int64_t begin, int64_t end) {
  if constexpr (kOnSignBit<S, F>) return map_sign_bit<S, F>(a, begin, end);
  using T = opmath_t<S>;
  const S* x = static_cast<const S*>(a.x);
  S* out = static_cast<S*>(a.out);
  auto op = [](auto v) TILES_INLINE_LAMBDA { return vmap<F>(v); };
  if (a.in->is_contiguous()) {
    store_op<S, T>(out + begin, end - begin, op, x + begin);
    return;
  }
  for_each_run(*a.in, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
    const S* src = x + off[0];
    if (step[0] == 1) {
      store_op<S, T>(out + i, count, op, src);
      return;
    }
    T buf[kBlock];
    for (int64_t j0 = 0; j0 < count; j0 += kBlock) {
      const int64_t n = std::min(kBlock, count - j0);
      const S* s = src + j0 * step[0];
      for (int64_t j = 0; j < n; ++j) buf[j] = T(s[j * step[0]]);
      store_op<S, T>(out + i + j0, n, op, static_cast<const T*>(buf));
    }
  });
}

// Full rows [r0, r1) of a 2-D problem (in.sizes[0] columns) where operand t is stored transposed to
// the output (unit stride down a column: a + b.t()) and the other row by row. Gathering a row of the
// transposed operand would touch one cache line per element; instead tiles of kTileRows x kTileCols
// are read along its columns (kTileRows contiguous elements each) into a row-major tile, then
// combined row by row.
template <class S, class Op>
void binary_transposed_rows(const S* a, const S* b, S* out, const StridedIndexer<2>& in, int t, int64_t r0,
                            int64_t r1, Op op) {
  using T = opmath_t<S>;
  constexpr int64_t kTileRows = 16, kTileCols = 64;
  const int64_t cols = in.sizes[0];
  const S* transposed = t == 0 ? a : b;
  const S* rows = t == 0 ? b : a;
  T tile[kTileRows][kTileCols];
  for (int64_t rb = r0; rb < r1; rb += kTileRows) {
    const int64_t nr = std::min(kTileRows, r1 - rb);
    for (int64_t cb = 0; cb < cols; cb += kTileCols) {
      const int64_t nc = std::min(kTileCols, cols - cb);
      for (int64_t c = 0; c < nc; ++c) {
        const S* column = transposed + (cb + c) * in.strides[t][0] + rb;
        for (int64_t r = 0; r < nr; ++r) tile[r][c] = T(column[r]);
      }
      for (int64_t r = 0; r < nr; ++r) {
        const S* row = rows + (rb + r) * in.strides[1 - t][1] + cb;
        S* dst = out + (rb + r) * cols + cb;
        if (t == 0) store_op<S, T>(dst, nc, op, static_cast<const T*>(tile[r]), row);
        else store_op<S, T>(dst, nc, op, row, static_cast<const T*>(tile[r]));
      }
    }
  }
}

// out[i] = op(a, b) at positions [begin, end) of `in` (operand 0: a, 1: b), operands and output of one
// dtype S: unit-stride runs straight from memory, a transposed operand in tiles, the others staged in
// blocks. zip's kernel and map's gradient (a = grad, b = the saved tensor) share it.
template <class S, class Op>
void binary_same_dtype(const S* a, const S* b, S* out, const StridedIndexer<2>& in, int64_t begin, int64_t end,
                       Op op) {
  using T = opmath_t<S>;
  if (in.is_contiguous()) {
    store_op<S, T>(out + begin, end - begin, op, a + begin, b + begin);
    return;
  }
  if (in.ndim == 2) {
    const int64_t cols = in.sizes[0];
    const int64_t r0 = (begin + cols - 1) / cols, r1 = end / cols;  // the range's full rows
    for (int t = 0; t < 2 && r0 < r1; ++t) {
      if (in.strides[t][1] != 1 || in.strides[t][0] == 1 || in.strides[1 - t][0] != 1) continue;
      binary_same_dtype(a, b, out, in, begin, r0 * cols, op);  // a partial first row, if any
      binary_transposed_rows(a, b, out, in, t, r0, r1, op);
      binary_same_dtype(a, b, out, in, r1 * cols, end, op);  // a partial last row
      return;
    }
  }
  for_each_run(in, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
    const S* pa = a + off[0];
    const S* pb = b + off[1];
    if (step[0] == 1 && step[1] == 1) {
      store_op<S, T>(out + i, count, op, pa, pb);
      return;
    }
    if (step[0] == 1 && step[1] == 0) {
      store_op_splat<S, T, false>(out + i, count, op, pa, T(pb[0]));
      return;
    }
    if (step[0] == 0 && step[1] == 1) {
      store_op_splat<S, T, true>(out + i, count, op, pb, T(pa[0]));
      return;
    }
    // Strided operands are staged a block at a time; a broadcast one (step 0: a 0-dim scale, a
    // column's value along its row) is one value, staged once for the whole run.
    T ba[kBlock], bb[kBlock];
    if (step[0] == 0) std::fill_n(ba, std::min(kBlock, count), T(pa[0]));
    if (step[1] == 0) std::fill_n(bb, std::min(kBlock, count), T(pb[0]));
    for (int64_t j0 = 0; j0 < count; j0 += kBlock) {
      const int64_t n = std::min(kBlock, count - j0);
      const S* sa = pa + j0 * step[0];
      const S* sb = pb + j0 * step[1];
      if (step[0] != 0 && step[0] != 1) for (int64_t j = 0; j < n; ++j) ba[j] = T(sa[j * step[0]]);
      if (step[1] != 0 && step[1] != 1) for (int64_t j = 0; j < n; ++j) bb[j] = T(sb[j * step[1]]);
      if (step[0] == 1) {
        store_op<S, T>(out + i + j0, n, op, sa, static_cast<const T*>(bb));
      } else if (step[1] == 1) {
        store_op<S, T>(out + i + j0, n, op, static_cast<const T*>(ba), sb);
      } else {
        store_op<S, T>(out + i + j0, n, op, static_cast<const T*>(ba), static_cast<const T*>(bb));
      }
    }
  });
}

template <class S, ZipFn F>
void zip_typed(const ZipArgs& z, int64_t begin, int64_t end) {
  using T = opmath_t<S>;
  S* out = static_cast<S*>(z.out);
  auto op = [](auto va, auto vb) TILES_INLINE_LAMBDA { return vzip<F>(va, vb); };
  if (z.a_dtype == z.out_dtype && z.b_dtype == z.out_dtype) {
    binary_same_dtype(static_cast<const S*>(z.a), static_cast<const S*>(z.b), out, *z.in, begin, end, op);
    return;
  }
  // Operands of other dtypes: converted to the result dtype, then the op-math type, as they are staged.
  const DynamicLoad la{z.a_dtype, z.out_dtype}, lb{z.b_dtype, z.out_dtype};
  for_each_run(*z.in, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
    T ba[kBlock], bb[kBlock];
    for (int64_t j0 = 0; j0 < count; j0 += kBlock) {
      const int64_t n = std::min(kBlock, count - j0);
      for (int64_t j = 0; j < n; ++j) ba[j] = la.load<T>(z.a, off[0] + (j0 + j) * step[0]);
      for (int64_t j = 0; j < n; ++j) bb[j] = lb.load<T>(z.b, off[1] + (j0 + j) * step[1]);
      store_op<S, T>(out + i + j0, n, op, static_cast<const T*>(ba), static_cast<const T*>(bb));
    }
  });
}

template <class F>
void with_dtype(Dtype d, F&& f) {
  switch (d) {
    case Dtype::Half: f(c10::Half{}); break;
    case Dtype::BFloat16: f(c10::BFloat16{}); break;
    case Dtype::Float: f(float{}); break;
    default: f(double{}); break;
  }
}

template <class Enum, int... I, class F>
void with_fn_impl(Enum fn, F&& f, std::integer_sequence<int, I...>) {
  ((int(fn) == I ? (f(std::integral_constant<Enum, Enum(I)>{}), true) : false) || ...);
}
template <class Enum, class F>
void with_fn(Enum fn, F&& f) {
  with_fn_impl(fn, f, std::make_integer_sequence<int, int(Enum::kCount)>{});
}

void map_range(const MapArgs& a, int64_t begin, int64_t end) {
  with_dtype(a.dtype, [&](auto s) {
    with_fn(a.fn, [&](auto fn) { map_typed<decltype(s), decltype(fn)::value>(a, begin, end); });
  });
}

void zip_range(const ZipArgs& z, int64_t begin, int64_t end) {
  with_dtype(z.out_dtype, [&](auto s) {
    with_fn(z.fn, [&](auto fn) { zip_typed<decltype(s), decltype(fn)::value>(z, begin, end); });
  });
}

void map_grad_range(const MapGradArgs& m, int64_t begin, int64_t end) {
  with_dtype(m.dtype, [&](auto s) {
    using S = decltype(s);
    with_fn(m.fn, [&](auto fn) {
      binary_same_dtype(static_cast<const S*>(m.grad), static_cast<const S*>(m.saved), static_cast<S*>(m.out), *m.in,
                        begin, end,
                        [](auto g, auto v) TILES_INLINE_LAMBDA { return vmap_grad<decltype(fn)::value>(g, v); });
    });
  });
}

// ---- reduce -------------------------------------------------------------------------------------------

// Sum / mean / prod accumulate in double lanes; max / min in the op-math type (exact either way).
template <ReduceFn F> constexpr bool kDoubleAcc = F == ReduceFn::Sum || F == ReduceFn::Mean || F == ReduceFn::Prod;
// Sums of float lanes (float32 and the half types), whose short pairwise partials may stay in float.
template <ReduceFn F, class S>
constexpr bool kFloatSum = (F == ReduceFn::Sum || F == ReduceFn::Mean) && !std::is_same_v<S, double>;

template <ReduceFn F, class V> inline V vcombine(V a, V b) {
  if constexpr (F == ReduceFn::Prod) return a * b;
  else if constexpr (F == ReduceFn::Max) return vmax(a, b);
  else if constexpr (F == ReduceFn::Min) return vmin(a, b);
  else return a + b;
}

// lanes<double> elements of S, unit stride, as doubles.
template <class S> inline vd load_d(const S* p) {
  if constexpr (std::is_same_v<S, double>) return vload<vd>(p);
  else return widen<vd>(load_floats<kBytes / 2>(p));  // exact: every S value is a float
}

// The lanes of v combined by op in halves: log2(lanes) dependent steps instead of lanes - 1.
template <class V, class Op> inline elem_t<V> hreduce(V v, Op op) {
  if constexpr (sizeof(V) == sizeof(elem_t<V>)) {
    return v[0];
  } else {
    const auto [lo, hi] = halves(v);
    return hreduce(op(lo, hi), op);
  }
}
inline constexpr auto kPlus = [](auto a, auto b) { return a + b; };
inline constexpr auto kLarger = [](auto a, auto b) { return a > b ? a : b; };  // never a NaN over a number
inline constexpr auto kSmaller = [](auto a, auto b) { return a < b ? a : b; };
inline constexpr auto kEither = [](auto a, auto b) { return a | b; };

// Keeps a loaded vector in its register for every later use: GCC otherwise loads a value that two
// instructions use twice (as a memory operand of each), and in a loop that streams from L3 or memory
// the extra loads cost time (the max / min rows below).
template <class V> [[gnu::always_inline]] inline void keep_in_register(V& v) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm("" : "+x"(v));
#endif
}

// The lanes (all ones) where a or b is NaN: one unordered compare on the x86 sets' 32-byte vectors
// (GCC does not fold `(a != a) | (b != b)` into one), two compares and an OR elsewhere.
template <class V> [[gnu::always_inline]] inline auto either_nan(V a, V b) {
  using M = decltype(a != b);
#if defined(TILES_ISA_TARGET)
  if constexpr (sizeof(V) == 32) return (M)_mm256_cmp_ps((__m256)a, (__m256)b, _CMP_UNORD_Q);
#endif
  return (a != a) | (b != b);
}

// n < B / 4 elements at p as B bytes of float lanes, the other lanes `fill`.
template <int B, class S> inline typename Vec<B>::f load_partial(const S* p, int64_t n, S fill) {
  S buf[B / 4];
  for (int l = 0; l < B / 4; ++l) buf[l] = l < n ? p[l] : fill;
  return load_floats<B>(buf);
}

// 2 * B / 4 bfloat16 elements at p (one full-width load) as two B-byte float vectors, in the order that
// interleaving them with zeros gives for free (punpcklwd / punpckhwd: a bf16 value in the high half of
// a 32-bit lane is its float): `lo` holds elements 0-3 of each 8, `hi` elements 4-7. Half the
// instructions of two widening loads; for sums, whose lanes only need an order fixed by position.
template <int B> struct FloatPair {
  typename Vec<B>::f lo, hi;
};
template <int B, size_t... L>
inline FloatPair<B> load_bf16_pair_(const c10::BFloat16* p, std::index_sequence<L...>) {
  static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "word 2i + 1 is the high half of lane i");
  using Words = typename Vec<B>::w;
  const Words x = vload<Words>(p), zero{};
  // Word 2i + 1 of the result (the high half of float lane i) takes element e(i) of x, word 2i zero:
  // e(i) = 8 (i / 4) + i % 4 for lo, + 4 for hi.
  constexpr int n = B / 2;
#if defined(__clang__) || __GNUC__ >= 12
  const Words lo = __builtin_shufflevector(zero, x, (L % 2 ? n + 8 * (L / 8) + (L / 2) % 4 : 0)...);
  const Words hi = __builtin_shufflevector(zero, x, (L % 2 ? n + 8 * (L / 8) + (L / 2) % 4 + 4 : 0)...);
#else
  const Words lo = __builtin_shuffle(zero, x, Words{(L % 2 ? n + 8 * (L / 8) + (L / 2) % 4 : 0)...});
  const Words hi = __builtin_shuffle(zero, x, Words{(L % 2 ? n + 8 * (L / 8) + (L / 2) % 4 + 4 : 0)...});
#endif
  return {(typename Vec<B>::f)lo, (typename Vec<B>::f)hi};
}
template <int B> inline FloatPair<B> load_bf16_pair(const c10::BFloat16* p) {
  return load_bf16_pair_<B>(p, std::make_index_sequence<B / 2>());
}

// float32 row sums (and max / min) stream 256 bits at a time on AVX-512 sets too, as PyTorch's do:
// 512-bit loads streamed slower on Zen 4 (NOTES.md, CPU kernels). The half types, converted in the
// loop, take the full width.
template <class S> constexpr int kRowSumBytes = std::is_same_v<S, float> && kBytes > 32 ? 32 : kBytes;

// The accumulator type of fn F over storage S: double for sums, means and products, else the op-math type.
template <ReduceFn F, class S> using acc_t = std::conditional_t<kDoubleAcc<F>, double, opmath_t<S>>;
// Whether F over S reduces in float lanes (float sums and means, max and min of float32 and the half
// types): reduce_float_lanes, which can take two rows at a time.
template <ReduceFn F, class S> constexpr bool kFloatLanes = kFloatSum<F, S> || std::is_same_v<acc_t<F, S>, float>;

// The reduction of the float-lane fns over n unit-stride elements of each of kRows rows (1 or 2) into
// acc[r], each row in the same order whatever kRows is (the lane order depends only on n). Two rows go
// in step, their loads interleaved: two streams a row apart read 12-15% faster from memory than one
// (AVX2 host, 2048 x 4096 float32 sums; NOTES.md, CPU kernels), and each row's arithmetic, so its
// bits, are those of a row alone (reduce_rows_typed pairs the long rows on the AVX2 build only). The
// loops over r are unrolled so that each row's accumulators are registers: rolled, GCC kept max's in
// memory, a store a vector.
template <ReduceFn F, int kRows, class S, class A>
[[gnu::always_inline]] inline void reduce_float_lanes(const S* const* p, int64_t n, A* acc) {
  using R = Reducer<F, A>;
  static_assert(kFloatLanes<F, S> && (kRows == 1 || kRows == 2));
  constexpr int B = kRowSumBytes<S>, W = B / 4;
  using VF = typename Vec<B>::f;
  auto load = [&](int r, int64_t k) { return load_floats<B>(p[r] + k); };
  if (n < W) {
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r)
      for (int64_t j = 0; j < n; ++j) acc[r] = R::combine(acc[r], A(opmath_t<S>(p[r][j])));
    return;
  }
  if constexpr (kFloatSum<F, S>) {
    // Sum / mean: blocks of 32 vectors summed in float by 4 accumulators that read memory in order
    // (each lane's partial of 32 values carries at most 9 roundings, 9 ulps of the sum of their
    // magnitudes), then widened into double accumulators: a conversion per 32 loads, and far inside
    // the float32 tolerance. In order, because a pairwise tree's loads, which the compiler reorders,
    // streamed slower from DRAM (NOTES.md, CPU kernels). Then 8 vectors pairwise, and the last few
    // vectors with the zero-padded tail in one float sum, widened once.
    using VD = typename Vec<B>::d;
    VD lo[kRows], hi[kRows];
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) lo[r] = hi[r] = splat<VD>(0.0);
    // Elements k .. k + 2W as two vectors: bf16 from one full-width load (load_bf16_pair's lane order).
    auto load2 = [&](int r, int64_t k) {
      if constexpr (std::is_same_v<S, c10::BFloat16>) return load_bf16_pair<B>(p[r] + k);
      else return FloatPair<B>{load(r, k), load(r, k + W)};
    };
    int64_t j = 0;
    for (; j + 32 * W <= n; j += 32 * W) {
      VF a0[kRows], a1[kRows], a2[kRows], a3[kRows];
#pragma GCC unroll 2
      for (int r = 0; r < kRows; ++r) {
        const auto [b0, b1] = load2(r, j);
        const auto [b2, b3] = load2(r, j + 2 * W);
        a0[r] = b0, a1[r] = b1, a2[r] = b2, a3[r] = b3;
      }
#pragma GCC unroll 1  // unrolled, the compiler interleaves the loads out of order
      for (int64_t k = j + 4 * W; k < j + 32 * W; k += 4 * W) {
#pragma GCC unroll 2
        for (int r = 0; r < kRows; ++r) {
          const auto [b0, b1] = load2(r, k);
          const auto [b2, b3] = load2(r, k + 2 * W);
          a0[r] += b0, a1[r] += b1, a2[r] += b2, a3[r] += b3;
        }
      }
#pragma GCC unroll 2
      for (int r = 0; r < kRows; ++r) add_widened(lo[r], hi[r], (a0[r] + a1[r]) + (a2[r] + a3[r]));
    }
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) {
      int64_t i = j;
      for (; i + 8 * W <= n; i += 8 * W) {
        VF v[8];
        for (int u = 0; u < 4; ++u) {
          const FloatPair<B> q = load2(r, i + 2 * u * W);
          v[2 * u] = q.lo, v[2 * u + 1] = q.hi;
        }
        add_widened(lo[r], hi[r], ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7])));
      }
      if (i < n) {  // at most 7 vectors and a tail: at most 8 roundings in float
        VF t = splat<VF>(0.0f);
        for (; i + W <= n; i += W) t += load(r, i);
        if (i < n) t += load_partial<B>(p[r] + i, n - i, S(0));
        add_widened(lo[r], hi[r], t);
      }
      // (A float block can overflow where the double sum would not: the callers sum again in double
      // the outputs that come out inf or NaN, summed_again_in_double.)
      acc[r] = R::combine(acc[r], hreduce(lo[r] + hi[r], kPlus));
    }
  } else {
    // Max / min: exact in any order, so the lanes take plain compares (a NaN never wins one, so no
    // lane holds one) and whether any element was NaN is kept apart: lanes set by unordered compares
    // of pairs of loads, half an instruction a vector. A loop that streams from L3 or memory runs as
    // fast as the loads its instructions let the core keep in flight: the |x| bit patterns' integer
    // max that this replaced, two instructions a vector, cost 6% of 2048 x 4096's time (NOTES.md, CPU
    // kernels). The tail is padded with the row's last element, which changes neither.
    const auto pick = [](auto a, auto b) { return F == ReduceFn::Max ? kLarger(a, b) : kSmaller(a, b); };
    VF v0[kRows], v1[kRows], v2[kRows], v3[kRows];
    using Lanes = decltype(either_nan(v0[0], v0[0]));
    Lanes nan[kRows];  // the lanes that have seen a NaN
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) v0[r] = v1[r] = v2[r] = v3[r] = splat<VF>(R::identity()), nan[r] = Lanes{};
    int64_t j = 0;
    for (; j + 4 * W <= n; j += 4 * W) {
#pragma GCC unroll 2
      for (int r = 0; r < kRows; ++r) {
        VF x0 = load(r, j), x1 = load(r, j + W), x2 = load(r, j + 2 * W), x3 = load(r, j + 3 * W);
        keep_in_register(x0), keep_in_register(x1), keep_in_register(x2), keep_in_register(x3);
        v0[r] = pick(x0, v0[r]), v1[r] = pick(x1, v1[r]), v2[r] = pick(x2, v2[r]), v3[r] = pick(x3, v3[r]);
        nan[r] |= either_nan(x0, x1) | either_nan(x2, x3);
      }
    }
#pragma GCC unroll 2
    for (int r = 0; r < kRows; ++r) {
      int64_t i = j;
      for (; i + W <= n; i += W) {
        const VF x = load(r, i);
        v0[r] = pick(x, v0[r]);
        nan[r] |= either_nan(x, x);
      }
      if (i < n) {
        const VF x = load_partial<B>(p[r] + i, n - i, p[r][n - 1]);
        v1[r] = pick(x, v1[r]);
        nan[r] |= either_nan(x, x);
      }
      acc[r] = R::combine(acc[r], hreduce(pick(pick(v0[r], v1[r]), pick(v2[r], v3[r])), pick));
      if (hreduce(nan[r], kEither) != 0) acc[r] = std::numeric_limits<A>::quiet_NaN();
    }
  }
}

// The reduction of n unit-stride elements into the running value `acc` (of type A), with 4 vector
// accumulators; the lane order depends only on n. Inlined into the row loops, so that the short rows'
// horizontal steps of one row overlap the loads of the next.
template <ReduceFn F, class S, class A>
[[gnu::always_inline]] inline A reduce_unit(const S* p, int64_t n, A acc) {
  using R = Reducer<F, A>;
  if constexpr (kFloatLanes<F, S>) {
    reduce_float_lanes<F, 1>(&p, n, &acc);
    return acc;
  } else {
    static_assert(std::is_same_v<A, double>);
    constexpr int W = lanes<double>;
    if (n >= W) {
      vd v0 = splat<vd>(R::identity()), v1 = v0, v2 = v0, v3 = v0;
      int64_t j = 0;
      for (; j + 4 * W <= n; j += 4 * W) {
        v0 = vcombine<F>(v0, load_d(p + j));
        v1 = vcombine<F>(v1, load_d(p + j + W));
        v2 = vcombine<F>(v2, load_d(p + j + 2 * W));
        v3 = vcombine<F>(v3, load_d(p + j + 3 * W));
      }
      for (; j + W <= n; j += W) v0 = vcombine<F>(v0, load_d(p + j));
      const vd v = vcombine<F>(vcombine<F>(v0, v1), vcombine<F>(v2, v3));
      acc = R::combine(acc, hreduce(v, [](auto a, auto b) { return vcombine<F>(a, b); }));
      p += j;
      n -= j;
    }
    for (int64_t j = 0; j < n; ++j) acc = R::combine(acc, double(opmath_t<S>(p[j])));
    return acc;
  }
}

// Whether any of n doubles is an inf or a NaN (every exponent bit set), in integer ops that vectorize.
inline bool any_non_finite(const double* v, int64_t n) {
  constexpr uint64_t kExponent = 0x7ff0000000000000ull;
  uint64_t seen = 0;
  for (int64_t i = 0; i < n; ++i) {
    uint64_t bits;
    std::memcpy(&bits, v + i, sizeof bits);
    seen |= uint64_t((bits & kExponent) == kExponent);
  }
  return seen != 0;
}

// Float sums run in float blocks (reduce_unit, reduce_cols_typed), which can overflow where the double
// sum would not (3e38 + 3e38 - 3e38 - 3e38): an output that comes out inf or NaN is summed again here,
// every element in double, so no layout or instruction set turns finite elements into inf or NaN. An
// output over an inf or NaN element comes out the same either way. `walk(add)` calls add(element) for
// each of the output's elements.
template <class S, class Walk>
double summed_again_in_double(double result, Walk&& walk) {
  if (std::isfinite(result)) return result;
  double sum = 0;
  walk([&](S v) { sum += double(opmath_t<S>(v)); });
  return sum;
}

template <ReduceFn F, class S>
double reduce_span_typed(const ReduceArgs& r, int64_t base, int64_t begin, int64_t end) {
  using A = acc_t<F, S>;
  using R = Reducer<F, A>;
  const S* x = static_cast<const S*>(r.x) + base;
  A acc = R::identity();
  for_each_run(*r.inner, begin, end, [&](int64_t, auto off, int64_t count, auto step) {
    const S* src = x + off[0];
    if (step[0] == 1) {
      acc = reduce_unit<F>(src, count, acc);
    } else {
      for (int64_t j = 0; j < count; ++j) acc = R::combine(acc, A(opmath_t<S>(src[j * step[0]])));
    }
  });
  if constexpr (kFloatSum<F, S>) {
    return summed_again_in_double<S>(double(acc), [&](auto add) {
      for_each_run(*r.inner, begin, end, [&](int64_t, auto off, int64_t count, auto step) {
        for (int64_t j = 0; j < count; ++j) add(x[off[0] + j * step[0]]);
      });
    });
  }
  return double(acc);
}

// Whole outputs whose n reduced elements are one unit-stride run (a reduction over the last dim):
// outputs [begin, end) of `outer`, each in reduce_span's order, into result[o - begin]. One call per
// block of outputs, so short rows do not pay reduce_span's dispatch per output.
template <ReduceFn F, class S>
void reduce_rows_typed(const ReduceArgs& r, const StridedIndexer<1>& outer, int64_t begin, int64_t end, int64_t n,
                       double* result) {
  using A = acc_t<F, S>;
  using R = Reducer<F, A>;
  const S* x = static_cast<const S*>(r.x);
  for_each_run(outer, begin, end, [&](int64_t o, auto off, int64_t count, auto step) {
    int64_t j = 0;
    if constexpr (kFloatLanes<F, S> && kBytes == 32) {
      // On the AVX2 build, rows of 2048 elements or more go two in step: the same bits as one at a time,
      // read 4-14% faster on the AVX2 host they were timed on (float32 sums and max; NOTES.md, CPU
      // kernels). Shorter rows stay one at a time: 1024-element rows read 2-7% slower in pairs and
      // 64-element ones 10-20%. On a Zen 4 host with AVX-512 (32 MiB of L3) pairs read 0.55-0.7x torch
      // where one row at a time reads 0.93-1.1x (2048 x 4096 float32 sum and max, 2048 x 3000, either
      // build), so the wider builds take rows one at a time.
      for (; n >= 2048 && j + 2 <= count; j += 2) {
        const S* rows[2] = {x + off[0] + j * step[0], x + off[0] + (j + 1) * step[0]};
        A acc[2] = {R::identity(), R::identity()};
        reduce_float_lanes<F, 2>(rows, n, acc);
        result[o - begin + j] = double(acc[0]);
        result[o - begin + j + 1] = double(acc[1]);
      }
    }
    for (; j < count; ++j) result[o - begin + j] = double(reduce_unit<F>(x + off[0] + j * step[0], n, R::identity()));
  });
  if constexpr (kFloatSum<F, S>) {
    if (!any_non_finite(result, end - begin)) return;  // one pass over the results, out of the row loop
    for_each_run(outer, begin, end, [&](int64_t o, auto off, int64_t count, auto step) {
      for (int64_t j = 0; j < count; ++j) {
        const S* row = x + off[0] + j * step[0];
        result[o - begin + j] = summed_again_in_double<S>(result[o - begin + j], [&](auto add) {
          for (int64_t k = 0; k < n; ++k) add(row[k]);
        });
      }
    });
  }
}

// Outputs side by side: one vector lane per output, positions taken one after another (float sums:
// eight at a time, added pairwise first). Each row's stretch of the block's columns is read in one
// sweep (accumulators for the whole block in L1), so the loads run along memory a row at a time, rather
// than down a narrow column of rows a page apart; the last few outputs one at a time in reduce_span's
// order.
template <ReduceFn F, class S>
void reduce_cols_typed(const ReduceArgs& r, int64_t base, int64_t cols, int64_t begin, int64_t end,
                       double* partial) {
  using A = acc_t<F, S>;
  using R = Reducer<F, A>;
  constexpr int W = lanes<double>;
  // Float sums widen a float vector (two double vectors) at a time; the others go a double vector at a time.
  constexpr int kStep = kFloatSum<F, S> ? lanes<float> : W;
  const S* x = static_cast<const S*>(r.x) + base;
  auto one_column = [&](int64_t c) {  // one output alone, every element in the accumulator type
    A acc = R::identity();
    for_each_run(*r.inner, begin, end, [&](int64_t, auto off, int64_t count, auto step) {
      const S* src = x + off[0] + c;
      for (int64_t j = 0; j < count; ++j) acc = R::combine(acc, A(opmath_t<S>(src[j * step[0]])));
    });
    return double(acc);
  };
  const int64_t vector_cols = std::min(cols, kReduceCols) / kStep * kStep;
  vd acc[kReduceCols / W];
  for (int64_t v = 0; v < vector_cols / W; ++v) acc[v] = splat<vd>(double(R::identity()));
  for_each_run(*r.inner, begin, end, [&](int64_t, auto off, int64_t count, auto step) {
    const S* src = x + off[0];
    int64_t j = 0;
    if constexpr (kFloatSum<F, S>) {
      // Sums of float lanes, as along rows: 8 rows added pairwise in float, then widened, so a
      // conversion serves 8 elements.
      for (; j + 8 <= count; j += 8) {
        const S* rows = src + j * step[0];
        for (int64_t c = 0; c < vector_cols; c += kStep) {
          vf v[8];
          for (int t = 0; t < 8; ++t) v[t] = Io<S>::load(rows + t * step[0] + c);
          const vf sum = ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
          add_widened(acc[c / W], acc[c / W + 1], sum);
        }
      }
    }
    for (; j < count; ++j) {
      const S* row = src + j * step[0];
      for (int64_t c = 0; c < vector_cols; c += W) acc[c / W] = vcombine<F>(acc[c / W], load_d(row + c));
    }
  });
  for (int64_t v = 0; v < vector_cols / W; ++v)
    for (int l = 0; l < W; ++l) partial[v * W + l] = acc[v][l];
  if constexpr (kFloatSum<F, S>) {  // float blocks that overflowed: summed_again_in_double
    for (int64_t c = 0; c < vector_cols; ++c)
      if (!std::isfinite(partial[c])) partial[c] = one_column(c);
  }
  for (int64_t c = vector_cols; c < cols; ++c) partial[c] = one_column(c);  // the last few, in the same order
}

// The reductions whose state is one number: logsumexp's is a (max, sum) pair, and reduce.cpp runs it.
template <class F>
void with_scalar_reduce_fn(ReduceFn fn, F&& f) {
  with_fn(fn, [&](auto c) {
    if constexpr (decltype(c)::value != ReduceFn::LogSumExp) f(c);
  });
}

double reduce_span(const ReduceArgs& r, int64_t base, int64_t begin, int64_t end) {
  double result = 0;
  with_dtype(r.dtype, [&](auto s) {
    with_scalar_reduce_fn(r.fn, [&](auto fn) {
      result = reduce_span_typed<decltype(fn)::value, decltype(s)>(r, base, begin, end);
    });
  });
  return result;
}

void reduce_rows(const ReduceArgs& r, const StridedIndexer<1>& outer, int64_t begin, int64_t end, int64_t n,
                 double* result) {
  with_dtype(r.dtype, [&](auto s) {
    with_scalar_reduce_fn(r.fn, [&](auto fn) {
      reduce_rows_typed<decltype(fn)::value, decltype(s)>(r, outer, begin, end, n, result);
    });
  });
}

void reduce_cols(const ReduceArgs& r, int64_t base, int64_t cols, int64_t begin, int64_t end,
                 double* partial) {
  with_dtype(r.dtype, [&](auto s) {
    with_scalar_reduce_fn(r.fn, [&](auto fn) {
      reduce_cols_typed<decltype(fn)::value, decltype(s)>(r, base, cols, begin, end, partial);
    });
  });
}

}  // namespace
}  // namespace tiles::cpu::TILES_ISA
