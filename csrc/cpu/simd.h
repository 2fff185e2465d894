// The CPU kernels' vector code, compiled once per instruction set and picked at run time.
//
// simd_body.h holds the loops; simd_base.cpp, simd_avx2.cpp and simd_avx512.cpp each include it
// under their own target options and in their own namespace, so no function
// compiled for AVX2 or AVX-512 can be shared with, or reached from, code of the baseline build unless
// kernels() picked that set. The baseline is what the compiler targets by default (SSE2 on x86-64,
// NEON on aarch64), so the package runs on any machine it installs on.
//
// The per-set code is plain C++ over pointers and strided indexers (no tensors, no ATen calls);
// elementwise.cpp, reduce.cpp and bmm.cpp own the tensors and the threads and call into it.
#pragma once

#include <cstdint>

#include "tiles/functions.h"
#include "tiles/loads.h"
#include "tiles/strided.h"

namespace tiles::cpu {

enum class Isa : int { Base, Avx2, Avx512 };

struct MapArgs {
  MapFn fn;
  Dtype dtype;
  const void* x;  // includes the storage offset
  void* out;      // dense, in the order of `in`'s linear positions
  const StridedIndexer<1>* in;
};

struct ZipArgs {
  ZipFn fn;
  Dtype out_dtype, a_dtype, b_dtype;
  const void* a;
  const void* b;
  void* out;
  const StridedIndexer<2>* in;
};

// map's gradient grad * f'(saved) (tiles::_map_backward): grad, saved and out of one dtype.
struct MapGradArgs {
  MapFn fn;
  Dtype dtype;
  const void* grad;   // includes the storage offset
  const void* saved;  // x, or y = f(x) where map_grad_uses_output(fn)
  void* out;          // dense, in the order of `in`'s linear positions
  const StridedIndexer<2>* in;
};

struct ReduceArgs {
  ReduceFn fn;
  Dtype dtype;
  const void* x;
  const StridedIndexer<1>* inner;  // position within a reduction -> offset from its first element
};

// out[b] = a[b] @ b[b] over raw pointers; strides in elements, any of them (0 broadcasts a batch).
struct BmmArgs {
  Dtype dtype;
  const void* a;
  const void* b;
  void* out;  // contiguous [batch, m, n]
  int64_t batch, m, n, k;
  int64_t a_strides[3], b_strides[3];
  int64_t threads;  // how many tasks can run at once
};

// Runs body(ctx, begin, end) over [0, n) in parallel, in ranges of at least `grain` (at::parallel_for).
using BmmParallel = void (*)(int64_t n, int64_t grain, void* ctx, void (*body)(void* ctx, int64_t begin, int64_t end));

struct Kernels {
  Isa isa;
  const char* name;
  // out positions [begin, end) of a map / zip.
  void (*map_range)(const MapArgs&, int64_t begin, int64_t end);
  void (*zip_range)(const ZipArgs&, int64_t begin, int64_t end);
  void (*map_grad_range)(const MapGradArgs&, int64_t begin, int64_t end);
  // The reduction of positions [begin, end) of one output whose first element is at x + base,
  // evaluated in an order that depends only on (begin, end) and the layout. In double for every fn
  // (exact for max / min).
  double (*reduce_span)(const ReduceArgs&, int64_t base, int64_t begin, int64_t end);
  // reduce_span over [0, n) of outputs [begin, end) of `outer` (offsets of their first elements), when
  // the n positions are one unit-stride run: result[o - begin].
  void (*reduce_rows)(const ReduceArgs&, const StridedIndexer<1>& outer, int64_t begin, int64_t end, int64_t n,
                      double* result);
  // The same for `cols` outputs (at most kReduceCols) whose first elements are x + base + c (c < cols,
  // unit stride between outputs): partial[c] = the reduction of positions [begin, end) of output c, in an
  // order fixed by (begin, end), the layout and whether c is in the vector part of the block (float sums
  // add eight positions pairwise first).
  void (*reduce_cols)(const ReduceArgs&, int64_t base, int64_t cols, int64_t begin, int64_t end,
                      double* partial);
  // The whole bmm, threads included (at::parallel_for is passed in, so this code stays ATen-free).
  void (*bmm)(const BmmArgs&, BmmParallel parallel);
};

// The most outputs one reduce_cols call takes (reduce.cpp's tasks of the columns shape).
constexpr int64_t kReduceCols = 256;

namespace base { extern const Kernels kKernels; }
#if defined(__x86_64__) || defined(_M_X64)
namespace avx2 { extern const Kernels kKernels; }
namespace avx512 { extern const Kernels kKernels; }
#endif

// The widest set this CPU (and OS) supports, unless TILES_CPU_ISA=base|avx2|avx512 asks for a
// narrower one (a wider one than the CPU has is refused: it would crash). Decided once per process.
const Kernels& kernels();

}  // namespace tiles::cpu
