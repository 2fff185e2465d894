// CPU kernels of the backward ops: map's gradient grad * f'(x) (the vector loops of simd_body.h, as
// map's) and one operand's gradient of zip, each one pass over its operands (tiles/functions.h has
// the formulas).
#include "cpu/parallel.h"

#include "binding/dispatch.h"
#include "cpu/kernels.h"
#include "cpu/loops.h"
#include "cpu/simd.h"

namespace tiles::cpu {
namespace {

constexpr int64_t kGrain = 32768;  // elements per parallel task

// out[i] = f(operand values at position i) over the indexer's positions; out is dense in that order.
template <class scalar_t, int N, class Loads, class F>
void elementwise(scalar_t* out, const void* const (&ptrs)[N], const StridedIndexer<N>& ix, int64_t numel,
                 const Loads& loads, F f) {
  using T = opmath_t<scalar_t>;
  parallel_for(0, numel, kGrain, [&](int64_t begin, int64_t end) {
    for_each_run(ix, begin, end, [&](int64_t i, auto off, int64_t count, auto step) {
      for (int64_t j = 0; j < count; ++j) {
        T v[N];
        for (int k = 0; k < N; ++k) v[k] = loads[k].template load<T>(ptrs[k], off[k] + j * step[k]);
        out[i + j] = scalar_t(f(v));
      }
    });
  });
}

template <class L, int N>
struct Loads {
  L l[N];
  const L& operator[](int k) const { return l[k]; }
};

}  // namespace

void map_grad(const MapGradProblem& p) {
  const MapGradArgs args{p.fn, to_dtype(p.out.scalar_type()), p.grad.const_data_ptr(), p.saved.const_data_ptr(),
                         p.out.data_ptr(), &p.in};
  const Kernels& k = kernels();
  parallel_for(0, p.numel, kGrain, [&](int64_t begin, int64_t end) { k.map_grad_range(args, begin, end); });
}

void zip_grad(const ZipGradProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::_zip_backward", [&] {
    using T = opmath_t<scalar_t>;
    // A one-element operand of another dtype (a 0-dim scale) converted once, as zip's forward does
    // (cpu/elementwise.cpp), rounded to the forward's result dtype, the gradient's.
    const at::ScalarType dtype = p.grad.scalar_type();
    const at::Tensor a = one_element_as(p.a, dtype), b = one_element_as(p.b, dtype);
    const bool same_dtype = a.scalar_type() == dtype && b.scalar_type() == dtype;
    const void* ptrs[3] = {p.grad.const_data_ptr(), a.const_data_ptr(), b.const_data_ptr()};
    const Dtype result = to_dtype(dtype);
    const Loads<DynamicLoad, 3> loads{{DynamicLoad{result, result},
                                       DynamicLoad{to_dtype(a.scalar_type()), result},
                                       DynamicLoad{to_dtype(b.scalar_type()), result}}};
    dispatch_fn(p.fn, [&](auto fn) {
      constexpr ZipFn F = decltype(fn)::value;
      if constexpr (has_zip_grad_kernel(F)) {
        auto run = [&](auto which) {
          constexpr int W = decltype(which)::value;
          auto grad = [](const T (&v)[3]) { return tiles::zip_grad<F, W>(v[0], v[1], v[2]); };
          if (same_dtype)
            elementwise<scalar_t, 3>(p.out.data_ptr<scalar_t>(), ptrs, p.in, p.numel,
                                     Loads<StaticLoad<scalar_t>, 3>{}, grad);
          else
            elementwise<scalar_t, 3>(p.out.data_ptr<scalar_t>(), ptrs, p.in, p.numel, loads, grad);
        };
        p.which == 0 ? run(std::integral_constant<int, 0>{}) : run(std::integral_constant<int, 1>{});
      }
    });
  });
}

}  // namespace tiles::cpu
