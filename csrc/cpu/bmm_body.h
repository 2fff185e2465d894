// The CPU bmm, included after simd_body.h by each simd_*.cpp (same namespace, same target options).
//
// A cache-blocked GEMM in the usual three levels (products with at most 4 output columns or rows take
// a matrix-vector loop instead, bmm_narrow below):
//   task        one batch and one MT x NT tile of the output; tasks run in parallel (at::parallel_for
//               through BmmArgs' caller), at least three per thread, taken from a shared counter.
//   k-block     KC values of k at a time: B's KC x NT panel is packed into NR-column slivers, then
//               for each MC-row block of A, A's MC x KC block into MR-row slivers (k-major inside a
//               sliver), each zero-padded to whole slivers and converted to the compute type.
//               Packing reads any strides, so transposed (or broadcast) operands cost no copies.
//   micro-kernel  MR x NR outputs held in vector registers, one FMA per (row, vector of columns)
//               per k: each packed B vector is loaded once for MR rows, each A value broadcast once
//               for NR columns.
// float32 and float64 compute in their own type; half types are packed into float32 and accumulate in
// a float32 tile that is rounded to the output once at the end. On AVX512-BF16 machines bf16 skips the
// conversion: its packs keep bf16 pairs and the micro-kernel multiplies them into float32 sums
// (Bf16Dots below).

namespace tiles::cpu::TILES_ISA {
namespace {

template <class V> inline V vfma(V a, V b, V c) {
#if TILES_VEC_BYTES == 64
  if constexpr (std::is_same_v<V, vf>) return (vf)_mm512_fmadd_ps((__m512)a, (__m512)b, (__m512)c);
  else return (vd)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
#elif TILES_VEC_BYTES == 32
  if constexpr (std::is_same_v<V, vf>) return (vf)_mm256_fmadd_ps((__m256)a, (__m256)b, (__m256)c);
  else return (vd)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
#else
  return a * b + c;  // the baseline has no FMA on x86-64 (aarch64 compilers contract this)
#endif
}

// Register tile: MR rows x NV vectors. AVX-512 has 32 vector registers (24 accumulators), AVX2 and
// SSE 16 (12 accumulators).
constexpr int kMR = TILES_VEC_BYTES == 64 ? 12 : 6;
constexpr int kNV = 2;

template <class T> struct Blocking {
  static constexpr int MR = kMR;
  static constexpr int NR = kNV * lanes<T>;
  static constexpr int64_t KC = 256;                    // a B sliver (KC x NR) stays in L1
  static constexpr int64_t MC = MR * (TILES_VEC_BYTES == 64 ? 8 : 16);  // an A block in L2
  static constexpr int64_t MT = MC * 4;                 // task tile, before splitting for threads
  static constexpr int64_t NT = NR * (TILES_VEC_BYTES == 64 ? 16 : 32);
};

// c[MR x NR] (row stride ldc) = (accumulate ? c : 0) + ap-sliver x bp-sliver over kc.
template <class T>
void micro_kernel(int64_t kc, const T* __restrict ap, const T* __restrict bp, T* __restrict c, int64_t ldc,
                  bool accumulate) {
  using V = vec_t<T>;
  constexpr int MR = kMR, NV = kNV, W = lanes<T>;
  V acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = V{};
    // the tile's output lines, read (or written) after the k loop: fetched while it runs
    __builtin_prefetch(c + i * ldc, 1);
    __builtin_prefetch(c + i * ldc + NV * W - 1, 1);
  }
  for (int64_t p = 0; p < kc; ++p) {
    V b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = vload<V>(bp + v * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const V a = splat<V>(ap[i]);
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = vfma(a, b[v], acc[i][v]);
    }
    ap += MR;
    bp += NV * W;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      T* dst = c + i * ldc + v * W;
      vstore(dst, accumulate ? acc[i][v] + vload<V>(dst) : acc[i][v]);
    }
}

// 4 rows of 4 consecutive values (rows ns apart) to 4 rows of 4 (rows dw apart), transposed in registers:
// 8 vector accesses for 16 values. Where the compiler has __builtin_shufflevector (GCC 12, clang); the
// packs fall back to their scalar loop elsewhere.
#if defined(__clang__) || __GNUC__ >= 12
constexpr bool kRegisterTranspose = true;
template <class T>
inline void transpose_4x4(const T* s, int64_t ns, T* d, int64_t dw) {
  typedef T v4 __attribute__((vector_size(4 * sizeof(T))));
  const v4 r0 = vload<v4>(s), r1 = vload<v4>(s + ns), r2 = vload<v4>(s + 2 * ns), r3 = vload<v4>(s + 3 * ns);
  const v4 lo01 = __builtin_shufflevector(r0, r1, 0, 4, 1, 5), lo23 = __builtin_shufflevector(r2, r3, 0, 4, 1, 5);
  const v4 hi01 = __builtin_shufflevector(r0, r1, 2, 6, 3, 7), hi23 = __builtin_shufflevector(r2, r3, 2, 6, 3, 7);
  vstore(d, __builtin_shufflevector(lo01, lo23, 0, 1, 4, 5));
  vstore(d + dw, __builtin_shufflevector(lo01, lo23, 2, 3, 6, 7));
  vstore(d + 2 * dw, __builtin_shufflevector(hi01, hi23, 0, 1, 4, 5));
  vstore(d + 3 * dw, __builtin_shufflevector(hi01, hi23, 2, 3, 6, 7));
}
#else
constexpr bool kRegisterTranspose = false;
template <class T>
inline void transpose_4x4(const T*, int64_t, T*, int64_t) {}
#endif

// n x kc of src (strides ns along n, ks along k) into W-wide slivers of dst, each k-major (its W
// values for one k side by side), the last zero-padded to W: the MR-row slivers of a and the NR-column
// slivers of b.
template <int W, class S, class T>
void pack_slivers(const S* src, int64_t n, int64_t kc, int64_t ns, int64_t ks, T* dst) {
  for (int64_t i0 = 0; i0 < n; i0 += W, dst += kc * W) {
    const int64_t ni = std::min<int64_t>(W, n - i0);
    const S* s = src + i0 * ns;
    if (ni == W && ns == 1) {  // a sliver is contiguous at each k: read along it
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < W; ++i) dst[p * W + i] = T(opmath_t<S>(s[p * ks + i]));
    } else if (ni == W) {  // read along k, contiguous when ks == 1
      // Rows contiguous along k (a row-major a, a transposed b) are transposed 4 x 4 in registers, four
      // rows at a time (scalar, each value took a load and a store); the rest one value at a time.
      // Not for half types (converted on the way) nor doubles on the 16-byte baseline.
      constexpr bool kBlocked = kRegisterTranspose && std::is_same_v<S, T> && 4 * sizeof(T) <= kBytes;
      constexpr int kBlockedRows = kBlocked ? W / 4 * 4 : 0;
      int64_t blocked_k = 0;
      if constexpr (kBlockedRows > 0) {
        if (ks == 1) blocked_k = kc / 4 * 4;
        for (int i = 0; i < kBlockedRows && blocked_k > 0; i += 4)
          for (int64_t p = 0; p < blocked_k; p += 4) transpose_4x4(s + i * ns + p, ns, dst + p * W + i, W);
      }
      for (int i = 0; i < W; ++i)
        for (int64_t p = i < kBlockedRows ? blocked_k : 0; p < kc; ++p)
          dst[p * W + i] = T(opmath_t<S>(s[i * ns + p * ks]));
    } else {
      for (int64_t p = 0; p < kc; ++p)
        for (int i = 0; i < W; ++i) dst[p * W + i] = i < ni ? T(opmath_t<S>(s[i * ns + p * ks])) : T(0);
    }
  }
}

// How a task packs and multiplies its k-blocks: slivers of values in the compute type and FMAs, for
// every type on every instruction set.
template <class S>
struct FmaPath {
  using T = opmath_t<S>;
  using Packed = T;  // a packed sliver's element: one k of one row (or column)
  static int64_t packed_k(int64_t kc) { return kc; }
  template <int W>
  static void pack(const S* src, int64_t n, int64_t kc, int64_t ns, int64_t ks, Packed* dst) {
    pack_slivers<W>(src, n, kc, ns, ks, dst);
  }
  static void multiply(int64_t kp, const Packed* ap, const Packed* bp, T* c, int64_t ldc, bool accumulate) {
    micro_kernel(kp, ap, bp, c, ldc, accumulate);
  }
};

// (GCC only: under clang the unit's `#pragma clang attribute push(target)` would meet the micro-kernel's
// own target attribute, untried; clang builds keep bf16 on the FMA path.)
#if TILES_VEC_BYTES == 64 && (defined(__x86_64__) || defined(_M_X64)) && !defined(__clang__)
#define TILES_BF16_DOTS 1
// ---- bf16 on AVX512-BF16: two products a lane per instruction -------------------------------------------
// vdpbf16ps adds a0 * b0 + a1 * b1 of two bf16 pairs into each float32 lane: twice the products of an
// FMA per instruction, from packs of half the bytes, and no conversion while packing. The packs hold k
// in pairs, one 32-bit word per (pair, row or column): B's sliver [k / 2][NR], A's [k / 2][MR] (a word
// broadcast per row); an odd k's last pair has a zero high half. The instruction flushes subnormal
// inputs and sums to zero and rounds to nearest even, as cuBLAS-style bf16 GEMMs do; the sums stay
// float32. TILES_CPU_BF16_DOTS=0 keeps bf16 on the FMA path (tests and comparisons).
#define TILES_BF16_DOTS_TARGET TILES_ISA_TARGET ",avx512bf16"

inline bool bf16_dots_available() {
  static const bool available = [] {
    const char* knob = std::getenv("TILES_CPU_BF16_DOTS");
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && !(knob && std::strcmp(knob, "0") == 0);
  }();
  return available;
}

inline uint32_t bf16_pair(const c10::BFloat16* lo, const c10::BFloat16* hi) {
  return uint32_t(lo->x) | (hi ? uint32_t(hi->x) << 16 : 0u);
}

// n x kc of src (strides ns along n, ks along k) into W-wide slivers of k pairs, the last sliver's
// missing rows and an odd k's missing half zero.
template <int W>
void pack_bf16_pairs(const c10::BFloat16* src, int64_t n, int64_t kc, int64_t ns, int64_t ks, uint32_t* dst) {
  const int64_t kp = (kc + 1) / 2, whole = kc / 2;
  for (int64_t i0 = 0; i0 < n; i0 += W, dst += kp * W) {
    const int64_t ni = std::min<int64_t>(W, n - i0);
    const c10::BFloat16* s = src + i0 * ns;
    if (ni == W && ns == 1 && W == 32) {
      // a sliver contiguous at each k (a row-major b): two k-rows of 32 values interleaved in registers
      const __m512i lo_idx = _mm512_set_epi16(47, 15, 46, 14, 45, 13, 44, 12, 43, 11, 42, 10, 41, 9, 40, 8, 39, 7,
                                              38, 6, 37, 5, 36, 4, 35, 3, 34, 2, 33, 1, 32, 0);
      const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
      for (int64_t p = 0; p < whole; ++p) {
        const __m512i r0 = _mm512_loadu_si512(s + 2 * p * ks), r1 = _mm512_loadu_si512(s + (2 * p + 1) * ks);
        _mm512_storeu_si512(dst + p * W, _mm512_permutex2var_epi16(r0, lo_idx, r1));
        _mm512_storeu_si512(dst + p * W + 16, _mm512_permutex2var_epi16(r0, hi_idx, r1));
      }
      for (int64_t p = whole; p < kp; ++p)
        for (int i = 0; i < W; ++i) dst[p * W + i] = bf16_pair(s + 2 * p * ks + i, nullptr);
    } else if (ks == 1) {
      // rows contiguous along k (a row-major a, a transposed b): each pair is one 32-bit load
      for (int i = 0; i < W; ++i) {
        if (i >= ni) {
          for (int64_t p = 0; p < kp; ++p) dst[p * W + i] = 0u;
          continue;
        }
        const c10::BFloat16* row = s + i * ns;
        for (int64_t p = 0; p < whole; ++p) std::memcpy(&dst[p * W + i], row + 2 * p, sizeof(uint32_t));
        if (whole < kp) dst[whole * W + i] = bf16_pair(row + 2 * whole, nullptr);
      }
    } else {
      for (int64_t p = 0; p < kp; ++p)
        for (int i = 0; i < W; ++i)
          dst[p * W + i] = i < ni ? bf16_pair(s + i * ns + 2 * p * ks, p < whole ? s + i * ns + (2 * p + 1) * ks : nullptr) : 0u;
    }
  }
}

// c[MR x NR] (row stride ldc) = (accumulate ? c : 0) + the pair slivers' products over kp pairs.
// micro_kernel's loop with vdpbf16ps for the FMA: a copy, not an instance of it, because only a function
// carrying the avx512bf16 target may contain the instruction, and a template instantiated here would
// take the unit's target instead.
__attribute__((target(TILES_BF16_DOTS_TARGET), noinline)) void micro_kernel_bf16(
    int64_t kp, const uint32_t* __restrict ap, const uint32_t* __restrict bp, float* __restrict c, int64_t ldc,
    bool accumulate) {
  constexpr int MR = kMR, NV = kNV, W = 16;
  __m512 acc[MR][NV];
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i) {
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_setzero_ps();
    __builtin_prefetch(c + i * ldc, 1);
    __builtin_prefetch(c + i * ldc + NV * W - 1, 1);
  }
  for (int64_t p = 0; p < kp; ++p) {
    __m512bh b[NV];
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) b[v] = (__m512bh)_mm512_loadu_si512(bp + v * W);
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(ap[i]));
#pragma GCC unroll 4
      for (int v = 0; v < NV; ++v) acc[i][v] = _mm512_dpbf16_ps(acc[i][v], a, b[v]);
    }
    ap += MR;
    bp += NV * W;
  }
#pragma GCC unroll 16
  for (int i = 0; i < MR; ++i)
#pragma GCC unroll 4
    for (int v = 0; v < NV; ++v) {
      float* dst = c + i * ldc + v * W;
      _mm512_storeu_ps(dst, accumulate ? _mm512_add_ps(acc[i][v], _mm512_loadu_ps(dst)) : acc[i][v]);
    }
}

struct Bf16Dots {
  using Packed = uint32_t;
  static int64_t packed_k(int64_t kc) { return (kc + 1) / 2; }
  template <int W>
  static void pack(const c10::BFloat16* src, int64_t n, int64_t kc, int64_t ns, int64_t ks, Packed* dst) {
    pack_bf16_pairs<W>(src, n, kc, ns, ks, dst);
  }
  static void multiply(int64_t kp, const Packed* ap, const Packed* bp, float* c, int64_t ldc, bool accumulate) {
    micro_kernel_bf16(kp, ap, bp, c, ldc, accumulate);
  }
};
#endif

// One task: output tile (batch bi, rows [m0, m0 + rows), cols [n0, n0 + cols)), packed and multiplied
// by Path (FmaPath, or Bf16Dots).
template <class S, class Path>
void bmm_tile(const BmmArgs& g, int64_t bi, int64_t m0, int64_t rows, int64_t n0, int64_t cols) {
  using T = opmath_t<S>;
  using P = typename Path::Packed;
  using B = Blocking<T>;
  constexpr int MR = B::MR, NR = B::NR;
  const S* A = static_cast<const S*>(g.a) + bi * g.a_strides[0] + m0 * g.a_strides[1];
  const S* Bm = static_cast<const S*>(g.b) + bi * g.b_strides[0] + n0 * g.b_strides[2];
  S* out = static_cast<S*>(g.out) + bi * g.m * g.n + m0 * g.n + n0;
  const int64_t sam = g.a_strides[1], sak = g.a_strides[2], sbk = g.b_strides[1], sbn = g.b_strides[2];

  // Where the micro-kernels accumulate: the output itself, or a float32 tile for half types.
  constexpr bool direct = std::is_same_v<S, T>;
  thread_local std::vector<P> a_buf, b_buf;
  thread_local std::vector<T> c_buf;
  const int64_t kp_max = Path::packed_k(std::min<int64_t>(B::KC, g.k));
  const int64_t mc_max = std::min<int64_t>(B::MC, rows);
  const int64_t cols_up = (cols + NR - 1) / NR * NR;
  a_buf.resize(size_t((mc_max + MR - 1) / MR * MR * kp_max));
  b_buf.resize(size_t(cols_up * kp_max));
  T* C;
  int64_t ldc;
  if constexpr (direct) {
    C = reinterpret_cast<T*>(out);
    ldc = g.n;
  } else {
    c_buf.resize(size_t(rows * cols));
    C = c_buf.data();
    ldc = cols;
  }
  alignas(64) T edge[MR * NR];

  for (int64_t pc = 0; pc < g.k; pc += B::KC) {
    const int64_t kc = std::min<int64_t>(B::KC, g.k - pc), kp = Path::packed_k(kc);
    const bool accumulate = pc > 0;
    Path::template pack<NR>(Bm + pc * sbk, cols, kc, sbn, sbk, b_buf.data());
    for (int64_t ic = 0; ic < rows; ic += B::MC) {
      const int64_t mc = std::min<int64_t>(B::MC, rows - ic);
      Path::template pack<MR>(A + ic * sam + pc * sak, mc, kc, sam, sak, a_buf.data());
      for (int64_t jr = 0; jr < cols; jr += NR) {
        const int64_t nr = std::min<int64_t>(NR, cols - jr);
        const P* bp = b_buf.data() + jr * kp;
        for (int64_t ir = 0; ir < mc; ir += MR) {
          const int64_t mr = std::min<int64_t>(MR, mc - ir);
          const P* ap = a_buf.data() + ir * kp;
          T* c = C + (ic + ir) * ldc + jr;
          if (mr == MR && nr == NR) {
            Path::multiply(kp, ap, bp, c, ldc, accumulate);
          } else {
            Path::multiply(kp, ap, bp, edge, NR, false);
            for (int64_t i = 0; i < mr; ++i)
              for (int64_t j = 0; j < nr; ++j)
                c[i * ldc + j] = accumulate ? c[i * ldc + j] + edge[i * NR + j] : edge[i * NR + j];
          }
        }
      }
    }
  }
  if (g.k == 0) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) C[i * ldc + j] = T(0);
  }
  if constexpr (!direct) {
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) out[i * g.n + j] = S(C[i * ldc + j]);
  }
}

// ---- few output columns or rows: a matrix-vector product -------------------------------------------
// With at most kNarrow output columns (or rows) the blocked kernel would pack all of A (a pass over the
// large operand) and then run FMAs on slivers that are mostly padding. Here the product is
// out[b][r][j] = sum over k of A[b][r][k] * X[b][k][j], j < cols <= kNarrow, with A the large operand:
// a (few columns) or b's transpose (few rows, the output written transposed). A is read once along its
// unit-stride dim: along k, J vector dot products per row; along rows, a vector of rows scaled by
// X[k][j] and added, k after k. X (K x J, small) is first converted into a k-contiguous buffer per
// column. Each output is summed by one thread in an order fixed by the layout: the same bits at any
// thread count.
constexpr int64_t kNarrow = 4;

struct Narrow {
  const void* a;
  const void* x;
  void* out;
  int64_t batch, rows, cols, k;
  int64_t a_b, a_r, a_k, x_b, x_k, x_j;
  int64_t out_r, out_j;  // the output's strides along r and j (its batch stride is rows * cols)
};

// Whether bmm_narrow takes g: few output columns or rows and a large operand with a unit stride.
inline bool narrow_suits(const BmmArgs& g, Narrow* t) {
  if (std::min(g.m, g.n) > kNarrow) return false;
  const bool few_columns = g.n <= g.m;
  *t = few_columns ? Narrow{g.a, g.b, g.out, g.batch, g.m, g.n, g.k, g.a_strides[0], g.a_strides[1], g.a_strides[2],
                            g.b_strides[0], g.b_strides[1], g.b_strides[2], g.n, 1}
                   : Narrow{g.b, g.a, g.out, g.batch, g.n, g.m, g.k, g.b_strides[0], g.b_strides[2], g.b_strides[1],
                            g.a_strides[0], g.a_strides[2], g.a_strides[1], 1, g.n};
  return t->a_k == 1 || t->a_r == 1;
}

template <class V> inline elem_t<V> hsum(V v) {
  elem_t<V> s = 0;
  for (int l = 0; l < int(sizeof(V) / sizeof(s)); ++l) s += v[l];
  return s;
}

// kR rows from `row` (row stride a_r, k-stride 1), batch bi: kJ dot products per row over k, a vector
// of k at a time (the kR rows' loads in flight together, each X vector loaded once for them), then the
// scalar tail; columns past t.cols (kJ rounds them up) are computed on zeros, not stored.
template <class S, int kJ, int kR>
void narrow_rows_along_k(const Narrow& t, const S* row, S* out, const opmath_t<S>* xp) {
  using T = opmath_t<S>;
  using V = vec_t<T>;
  constexpr int W = lanes<T>;
  V acc[kR][kJ] = {};
  int64_t k = 0;
  for (; k + W <= t.k; k += W) {
    V a[kR];
    for (int i = 0; i < kR; ++i) a[i] = Io<S>::load(row + i * t.a_r + k);
    for (int j = 0; j < kJ; ++j) {
      const V x = vload<V>(xp + j * t.k + k);
      for (int i = 0; i < kR; ++i) acc[i][j] = vfma(a[i], x, acc[i][j]);
    }
  }
  for (int i = 0; i < kR; ++i) {
    T tail[kJ] = {};
    for (int64_t kk = k; kk < t.k; ++kk)
      for (int j = 0; j < kJ; ++j) tail[j] += T(opmath_t<S>(row[i * t.a_r + kk])) * xp[j * t.k + kk];
    for (int j = 0; j < t.cols; ++j) out[i * t.out_r + j * t.out_j] = S(hsum(acc[i][j]) + tail[j]);
  }
}

// Rows [r0, r1) of batch bi, A's k-stride 1: kRows rows at a time, the last ones one by one (each
// row's sum is in the same order either way).
template <class S, int kJ>
void narrow_along_k(const Narrow& t, int64_t bi, int64_t r0, int64_t r1, const opmath_t<S>* xp) {
  constexpr int kRows = kJ <= 2 ? 4 : 2;  // accumulators: kRows * kJ vectors
  const S* A = static_cast<const S*>(t.a) + bi * t.a_b;
  S* out = static_cast<S*>(t.out) + bi * t.rows * t.cols;
  int64_t r = r0;
  for (; r + kRows <= r1; r += kRows) narrow_rows_along_k<S, kJ, kRows>(t, A + r * t.a_r, out + r * t.out_r, xp);
  for (; r < r1; ++r) narrow_rows_along_k<S, kJ, 1>(t, A + r * t.a_r, out + r * t.out_r, xp);
}

// Rows [r0, r1) of batch bi, A's row stride 1: A is k-major, so k is the outer loop and each k reads a
// contiguous run of rows, into sums held for a block of rows (small enough to stay in L1), four k at
// a time per pass over the block; rows past the last whole vector one at a time, in the same order.
template <class S, int kJ>
void narrow_along_rows(const Narrow& t, int64_t bi, int64_t r0, int64_t r1, const opmath_t<S>* xp) {
  using T = opmath_t<S>;
  using V = vec_t<T>;
  constexpr int W = lanes<T>;
  constexpr int64_t kBlock = 16384 / (kJ * int64_t(sizeof(T))) / W * W;  // rows whose sums fill 16 KiB
  constexpr int kU = 4;  // k per pass
  const S* A = static_cast<const S*>(t.a) + bi * t.a_b;
  S* out = static_cast<S*>(t.out) + bi * t.rows * t.cols;
  thread_local std::vector<T> sums;
  sums.resize(size_t(kJ * kBlock));
  for (int64_t b0 = r0; b0 < r1; b0 += kBlock) {
    const int64_t vec_rows = std::min(kBlock, r1 - b0) / W * W;
    std::fill(sums.begin(), sums.end(), T(0));
    int64_t k = 0;
    for (; k + kU <= t.k; k += kU) {
      const S* col = A + k * t.a_k + b0;
      V x[kU][kJ];
      for (int u = 0; u < kU; ++u)
        for (int j = 0; j < kJ; ++j) x[u][j] = splat<V>(xp[j * t.k + k + u]);
      for (int64_t r = 0; r < vec_rows; r += W) {
        V a[kU];
        for (int u = 0; u < kU; ++u) a[u] = Io<S>::load(col + u * t.a_k + r);
        for (int j = 0; j < kJ; ++j) {
          V acc = vload<V>(&sums[j * kBlock + r]);
          for (int u = 0; u < kU; ++u) acc = vfma(a[u], x[u][j], acc);
          vstore(&sums[j * kBlock + r], acc);
        }
      }
    }
    for (; k < t.k; ++k) {
      const S* col = A + k * t.a_k + b0;
      for (int64_t r = 0; r < vec_rows; r += W) {
        const V a = Io<S>::load(col + r);
        for (int j = 0; j < kJ; ++j)
          vstore(&sums[j * kBlock + r], vfma(a, splat<V>(xp[j * t.k + k]), vload<V>(&sums[j * kBlock + r])));
      }
    }
    for (int64_t r = 0; r < vec_rows; ++r)
      for (int j = 0; j < t.cols; ++j) out[(b0 + r) * t.out_r + j * t.out_j] = S(sums[j * kBlock + r]);
    for (int64_t r = b0 + vec_rows; r < std::min(r1, b0 + kBlock); ++r) {
      T acc[kJ] = {};
      for (int64_t kk = 0; kk < t.k; ++kk)
        for (int j = 0; j < kJ; ++j) acc[j] += T(opmath_t<S>(A[kk * t.a_k + r])) * xp[j * t.k + kk];
      for (int j = 0; j < t.cols; ++j) out[r * t.out_r + j * t.out_j] = S(acc[j]);
    }
  }
}

template <class S, int kJ>
void bmm_narrow(const Narrow& t, int64_t threads, BmmParallel parallel) {
  using T = opmath_t<S>;
  // Tasks: one batch's run of rows, whole vectors of rows, about four per thread.
  constexpr int64_t kStep = 2 * lanes<T>;
  const int64_t wanted = std::max<int64_t>(1, 4 * threads / std::max<int64_t>(t.batch, 1));
  const int64_t chunk = std::max(kStep, ((t.rows + wanted - 1) / wanted + kStep - 1) / kStep * kStep);
  const int64_t chunks = (t.rows + chunk - 1) / chunk;
  struct Ctx {
    const Narrow* t;
    int64_t chunk, chunks;
  } ctx{&t, chunk, chunks};
  parallel(t.batch * chunks, 1, &ctx, [](void* p, int64_t begin, int64_t end) {
    const Ctx& c = *static_cast<const Ctx*>(p);
    const Narrow& t = *c.t;
    thread_local std::vector<T> xp;  // X of the task's batch, [j][k]
    xp.resize(size_t(kJ * t.k));
    int64_t packed = -1;
    for (int64_t task = begin; task < end; ++task) {
      const int64_t bi = task / c.chunks, r0 = task % c.chunks * c.chunk, r1 = std::min(t.rows, r0 + c.chunk);
      if (bi != packed) {
        const S* x = static_cast<const S*>(t.x) + bi * t.x_b;
        for (int j = 0; j < kJ; ++j)
          for (int64_t k = 0; k < t.k; ++k) xp[j * t.k + k] = j < t.cols ? T(opmath_t<S>(x[k * t.x_k + j * t.x_j])) : T(0);
        packed = bi;
      }
      if (t.a_k == 1) narrow_along_k<S, kJ>(t, bi, r0, r1, xp.data());
      else narrow_along_rows<S, kJ>(t, bi, r0, r1, xp.data());
    }
  });
}

template <class S>
void bmm_typed(const BmmArgs& g, BmmParallel parallel) {
  using T = opmath_t<S>;
  using B = Blocking<T>;
  if (Narrow t; narrow_suits(g, &t)) {
    switch (t.cols) {
      case 1: return bmm_narrow<S, 1>(t, g.threads, parallel);
      case 2: return bmm_narrow<S, 2>(t, g.threads, parallel);
      default: return bmm_narrow<S, 4>(t, g.threads, parallel);
    }
  }
  // Task tiles: at most MT x NT, of near-equal sizes (whole register tiles); more of them, splitting
  // the longer side, until there are three per thread.
  auto cdiv = [](int64_t x, int64_t y) { return (x + y - 1) / y; };
  int64_t m_tiles = cdiv(g.m, B::MT), n_tiles = cdiv(g.n, B::NT);
  while (g.batch * m_tiles * n_tiles < 3 * g.threads) {
    const int64_t mt = cdiv(g.m, m_tiles), nt = cdiv(g.n, n_tiles);
    if (mt >= nt && mt >= 2 * B::MR) ++m_tiles;
    else if (nt >= 2 * B::NR) ++n_tiles;
    else if (mt >= 2 * B::MR) ++m_tiles;
    else break;
  }
  const int64_t mt = cdiv(cdiv(g.m, m_tiles), B::MR) * B::MR, nt = cdiv(cdiv(g.n, n_tiles), B::NR) * B::NR;
  m_tiles = cdiv(g.m, mt);
  n_tiles = cdiv(g.n, nt);
  // Tasks are handed out from a shared counter rather than in fixed ranges, so a thread that the OS
  // pauses (other work on the machine) holds up only the task it is on.
  struct Ctx {
    const BmmArgs* g;
    int64_t mt, nt, m_tiles, n_tiles, tasks;
    std::atomic<int64_t> next{0};
  } ctx{&g, mt, nt, m_tiles, n_tiles, g.batch * m_tiles * n_tiles};
  const int64_t workers = std::max<int64_t>(1, std::min(g.threads, ctx.tasks));
  auto run = [&](auto path) {
    using Path = decltype(path);
    parallel(workers, 1, &ctx, [](void* p, int64_t, int64_t) {
      Ctx& c = *static_cast<Ctx*>(p);
      for (int64_t t = c.next.fetch_add(1); t < c.tasks; t = c.next.fetch_add(1)) {
        const int64_t bi = t / (c.m_tiles * c.n_tiles), r = t % (c.m_tiles * c.n_tiles);
        const int64_t m0 = (r / c.n_tiles) * c.mt, n0 = (r % c.n_tiles) * c.nt;
        bmm_tile<S, Path>(*c.g, bi, m0, std::min(c.mt, c.g->m - m0), n0, std::min(c.nt, c.g->n - n0));
      }
    });
  };
#if defined(TILES_BF16_DOTS)
  if constexpr (std::is_same_v<S, c10::BFloat16>) {
    if (bf16_dots_available()) return run(Bf16Dots{});
  }
#endif
  run(FmaPath<S>{});
}

void bmm(const BmmArgs& g, BmmParallel parallel) {
  with_dtype(g.dtype, [&](auto s) { bmm_typed<decltype(s)>(g, parallel); });
}

}  // namespace
}  // namespace tiles::cpu::TILES_ISA
