// CPU map and zip: a direct loop when every operand is contiguous in output order, else strided runs.
#include <ATen/Parallel.h>

#include "cpu/kernels.h"
#include "cpu/loops.h"
#include "tiles/dispatch.h"

namespace tiles::cpu {
namespace {

constexpr int64_t kGrain = 32768;  // elements per parallel task

template <class scalar_t, MapFn F>
void map_kernel(const MapProblem& p) {
  using T = opmath_t<scalar_t>;
  scalar_t* out = p.out.data_ptr<scalar_t>();
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();  // includes the storage offset
  at::parallel_for(0, p.numel, kGrain, [&](int64_t begin, int64_t end) {
    if (p.in.is_contiguous()) {
      for (int64_t i = begin; i < end; ++i) out[i] = scalar_t(apply_map<F>(T(x[i])));
      return;
    }
    for_each_run(p.in, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
      const scalar_t* src = x + off[0];
      for (int64_t j = 0; j < count; ++j) out[i + j] = scalar_t(apply_map<F>(T(src[j * step[0]])));
    });
  });
}

template <class scalar_t, ZipFn F, class LoadA, class LoadB>
void zip_kernel(const ZipProblem& p, LoadA load_a, LoadB load_b) {
  using T = opmath_t<scalar_t>;
  scalar_t* out = p.out.data_ptr<scalar_t>();
  const void* a = p.a.const_data_ptr();
  const void* b = p.b.const_data_ptr();
  at::parallel_for(0, p.numel, kGrain, [&](int64_t begin, int64_t end) {
    if (p.in.is_contiguous()) {
      for (int64_t i = begin; i < end; ++i)
        out[i] = scalar_t(apply_zip<F>(load_a.template load<T>(a, i), load_b.template load<T>(b, i)));
      return;
    }
    for_each_run(p.in, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
      for (int64_t j = 0; j < count; ++j) {
        const T va = load_a.template load<T>(a, off[0] + j * step[0]);
        const T vb = load_b.template load<T>(b, off[1] + j * step[1]);
        out[i + j] = scalar_t(apply_zip<F>(va, vb));
      }
    });
  });
}

}  // namespace

void map(const MapProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::map", [&] {
    dispatch_fn(p.fn, [&](auto fn) { map_kernel<scalar_t, decltype(fn)::value>(p); });
  });
}

void zip(const ZipProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::zip", [&] {
    dispatch_fn(p.fn, [&](auto fn) {
      constexpr ZipFn F = decltype(fn)::value;
      if (p.same_dtype)
        zip_kernel<scalar_t, F>(p, StaticLoad<scalar_t>{}, StaticLoad<scalar_t>{});
      else
        zip_kernel<scalar_t, F>(p, DynamicLoad{to_dtype(p.a.scalar_type())},
                                DynamicLoad{to_dtype(p.b.scalar_type())});
    });
  });
}

}  // namespace tiles::cpu
