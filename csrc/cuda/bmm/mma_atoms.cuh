// The warp-level tensor-core instructions (`mma.sync`, sm_80 and newer) that bmm/mma_kernel.cuh tiles,
// one struct ("atom") per kind of multiply. An atom says which elements of its A (M x K), B (K x N)
// and C (M x N) tiles each lane holds, and issues the instruction:
//   load_a(get, lane)  builds lane's A fragment from get(m, k), an element of the warp's A tile;
//   load_b(get, lane)  builds lane's B fragment from get(n, k);
//   c_row / c_col      place lane's accumulator e in the C tile;
//   mma(c, a, b)       c += a * b.
// An atom with kLdmatrix also reads its fragments from a shared-memory tile itself (load_a_smem /
// load_b_smem, with `ldmatrix`), in either major order, instead of element by element through get().
// The lane layouts are those of the PTX ISA's "Matrix fragments for mma.m16n8k*" / "mma.m8n8k4" figures
// (g = lane / 4 is the fragment row group, t = lane % 4 the thread in the group).
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace tiles::cuda::mma {

__device__ __forceinline__ uint32_t to_tf32(float x) {  // round to nearest, ties away: 10 mantissa bits
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// Lane's elements of an m16n8k8 multiply's A (16 x 8) and B (8 x 8) tiles: a[i] at row g + 8 (i % 2),
// column t + 4 (i / 2); b[i] at k = t + 4 i, column g.
template <class Get, class T>
__device__ __forceinline__ void gather_a_m16n8k8(Get get, int lane, T (&a)[4]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = get(g + 8 * (i % 2), t + 4 * (i / 2));
}
template <class Get, class T>
__device__ __forceinline__ void gather_b_m16n8k8(Get get, int lane, T (&b)[2]) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < 2; ++i) b[i] = get(g, t + 4 * i);
}

// `ldmatrix`: kCount 8 x 8 matrices of 16-bit elements, whose rows (16 bytes each, 16-byte aligned) the
// lanes 8 j .. 8 j + 7 address for matrix j; lane l receives register j = the two elements at row l / 4,
// columns 2 (l % 4) and 2 (l % 4) + 1 of matrix j (kTrans: of its transpose), the first in the low half.
template <int kCount, bool kTrans>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[kCount], const void* row) {
  const uint32_t addr = uint32_t(__cvta_generic_to_shared(row));
  if constexpr (kCount == 4 && kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else if constexpr (kCount == 4)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
  else if constexpr (kCount == 2 && kTrans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r[0]), "=r"(r[1]) : "r"(addr));
  static_assert(kCount == 2 || kCount == 4);
}

// Accumulator layout shared by the m16n8 atoms: c[e] at row g + 8 (e / 2), column 2 t + e % 2.
struct M16N8Accumulator {
  static constexpr int kAcc = 4;
  __device__ static int c_row(int lane, int e) { return lane / 4 + 8 * (e / 2); }
  __device__ static int c_col(int lane, int e) { return 2 * (lane % 4) + e % 2; }
};

// fp64 on the FP64 tensor cores (DMMA): m16n8k8, with the m16n8k8 fragment layouts above. sm_90 has
// the instruction; the A100's only DMMA shape, m8n8k4, reaches half the H100's FP64 tensor peak (the
// DP tensor pipe was 68% busy at 22 TFLOP/s), so older GPUs run an m16n8k8 as four m8n8k4, whose A,
// B and C fragments are the m16n8k8 ones split into row and k halves. Only the fp64 kernel
// (bmm/dmma_kernel.cuh) uses it, and fills the fragments itself: one 8-byte shared-memory load
// straight into each operand register.
struct F64 : M16N8Accumulator {
  static constexpr bool kLdmatrix = false;
  using Elem = double;
  using Acc = double;
  static constexpr int M = 16, N = 8, K = 8;
  struct FragA { double v[4]; };
  struct FragB { double v[2]; };
  __device__ static void mma(double (&c)[4], const FragA& a, const FragB& b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a.v[0]), "d"(a.v[1]), "d"(a.v[2]), "d"(a.v[3]), "d"(b.v[0]), "d"(b.v[1]));
#else
    // rows 0-7 take c[0..1], rows 8-15 c[2..3]; k 0-3 take a[0..1] and b[0], k 4-7 a[2..3] and b[1]
    m8n8k4(c[0], c[1], a.v[0], b.v[0]);
    m8n8k4(c[0], c[1], a.v[2], b.v[1]);
    m8n8k4(c[2], c[3], a.v[1], b.v[0]);
    m8n8k4(c[2], c[3], a.v[3], b.v[1]);
#endif
  }
  __device__ static double out(double x) { return x; }

 private:
  __device__ static void m8n8k4(double& c0, double& c1, double a, double b) {
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0,%1}, {%2}, {%3}, {%0,%1};"
                 : "+d"(c0), "+d"(c1)
                 : "d"(a), "d"(b));
  }
};

// What the float32 atoms share: m16n8k8 over float32 elements, each made into TF32 registers by
// Atom::put(fragment, i, x) as lane's fragment is gathered.
template <class Atom>
struct Tf32Atom : M16N8Accumulator {
  static constexpr bool kLdmatrix = false;
  using Elem = float;
  using Acc = float;
  static constexpr int M = 16, N = 8, K = 8;
  // 32 lanes x 4 bytes: rows of g (8 of them) must land 4 banks apart (K-contiguous) or k rows of t
  // (4 of them) 8 banks apart (M/N-contiguous).
  static constexpr int kPadK = 4, kPadMN = 8;
  template <class Get>
  __device__ static auto load_a(Get get, int lane) {
    float v[4];
    gather_a_m16n8k8(get, lane, v);
    typename Atom::FragA f;
#pragma unroll
    for (int i = 0; i < 4; ++i) Atom::put(f, i, v[i]);
    return f;
  }
  template <class Get>
  __device__ static auto load_b(Get get, int lane) {
    float v[2];
    gather_b_m16n8k8(get, lane, v);
    typename Atom::FragB f;
#pragma unroll
    for (int i = 0; i < 2; ++i) Atom::put(f, i, v[i]);
    return f;
  }
  __device__ static float out(float x) { return x; }
};

// float32 through TF32 (10-bit mantissa) products, float32 accumulation: m16n8k8. What cuBLAS does
// when torch.backends.cuda.matmul.allow_tf32 is set (matmul precision "high").
struct Tf32 : Tf32Atom<Tf32> {
  static constexpr bool kFreshPerTile = false;
  struct FragA { uint32_t r[4]; };
  struct FragB { uint32_t r[2]; };
  template <class F>
  __device__ static void put(F& f, int i, float x) { f.r[i] = to_tf32(x); }
  __device__ static void mma(float (&c)[4], const FragA& a, const FragB& b) { mma_tf32(c, a.r, b.r); }
};

// float32 at float32 accuracy ("3xTF32"): each operand x splits into big = tf32(x) and
// small = tf32(x - big), and a * b ~= a_small b_big + a_big b_small + a_big b_big (the dropped
// a_small b_small is ~2^-22 of the product). Three TF32 multiplies, small terms first.
struct Tf32x3 : Tf32Atom<Tf32x3> {
  // The tensor cores add each product sum into the float32 accumulator rounding toward zero: over
  // K = 4096 (1536 instructions per output) that bias alone gave 18x cuBLAS SGEMM's error. So each
  // k-tile accumulates into fresh registers, added to the running sum with a rounded float32 add.
  static constexpr bool kFreshPerTile = true;
  struct FragA { uint32_t big[4], small[4]; };
  struct FragB { uint32_t big[2], small[2]; };
  template <class F>
  __device__ static void put(F& f, int i, float x) {
    f.big[i] = to_tf32(x);
    f.small[i] = to_tf32(x - __uint_as_float(f.big[i]));
  }
  __device__ static void mma(float (&c)[4], const FragA& a, const FragB& b) {
    mma_tf32(c, a.small, b.big);
    mma_tf32(c, a.big, b.small);
    mma_tf32(c, a.big, b.big);
  }
};

// bfloat16 / float16 (raw 16-bit storage), float32 accumulation: m16n8k16. Each 32-bit register
// holds two neighbouring k, the lower k in the low half.
template <bool kBf16>
struct Half16 : M16N8Accumulator {
  static constexpr bool kFreshPerTile = false;
  using Elem = uint16_t;
  using Acc = float;
  static constexpr int M = 16, N = 8, K = 16;
  static constexpr int kPadK = 8, kPadMN = 8;
  struct FragA { uint32_t r[4]; };
  struct FragB { uint32_t r[2]; };
  // The A fragment (rows g and g + 8, k pairs at 2 t and 2 t + 8) is four 8 x 8 matrices: rows 0-7 and
  // 8-15 of k 0-7, then of k 8-15; B's (row g of N, the same k pairs) is two. From a tile whose element
  // (r, k) lies at s[r * ld + k] (K-contiguous: the matrices as stored) or at s[k * ld + r]
  // (M/N-contiguous: stored transposed, so ldmatrix transposes them back). `ld` keeps rows 16-byte
  // aligned and 8 consecutive rows on distinct banks (the tile's padding).
  static constexpr bool kLdmatrix = true;
  template <bool kMn>
  __device__ static FragA load_a_smem(const Elem* s, int ld, int r0, int k0, int lane) {
    const int j = lane / 8, row = lane % 8;  // lane addresses row `row` of matrix j
    const int r = r0 + row * !kMn + 8 * (j % 2), k = k0 + row * kMn + 8 * (j / 2);
    FragA f;
    ldmatrix<4, kMn>(f.r, kMn ? s + k * ld + r : s + r * ld + k);
    return f;
  }
  template <bool kMn>
  __device__ static FragB load_b_smem(const Elem* s, int ld, int n0, int k0, int lane) {
    const int j = (lane / 8) % 2, row = lane % 8;  // lanes 16-31 repeat 0-15 (ldmatrix.x2 ignores them)
    const int n = n0 + row * !kMn, k = k0 + row * kMn + 8 * j;
    FragB f;
    ldmatrix<2, kMn>(f.r, kMn ? s + k * ld + n : s + n * ld + k);
    return f;
  }
  __device__ static void mma(float (&c)[4], const FragA& a, const FragB& b) {
    if constexpr (kBf16)
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
    else
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
          : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(b.r[0]), "r"(b.r[1]));
  }
  __device__ static uint16_t out(float x) {
    if constexpr (kBf16) return __bfloat16_as_ushort(__float2bfloat16_rn(x));
    else return __half_as_ushort(__float2half_rn(x));
  }
};

}  // namespace tiles::cuda::mma
