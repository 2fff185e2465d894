// CUDA kernels of the backward ops for one dtype, through the elementwise kernels
// (elementwise/kernels.cuh): map's gradient over (grad, saved), zip's over (grad, a, b).
#pragma once

#include "binding/dispatch.h"
#include "cuda/elementwise/launch.cuh"
#include "cuda/kernels.h"

namespace tiles::cuda {

template <class scalar_t>
void map_grad_typed(const MapGradProblem& p) {
  const void* ptrs[2] = {p.grad.const_data_ptr(), p.saved.const_data_ptr()};
  dispatch_fn(p.fn, [&](auto fn) {
    elementwise::launch<scalar_t, MapGradOp<decltype(fn)::value>>(p.out.data_ptr<scalar_t>(), ptrs, p.in, p.numel);
  });
}

template <class scalar_t>
void zip_grad_typed(const ZipGradProblem& p) {
  const void* ptrs[3] = {p.grad.const_data_ptr(), p.a.const_data_ptr(), p.b.const_data_ptr()};
  scalar_t* out = p.out.data_ptr<scalar_t>();
  dispatch_fn(p.fn, [&](auto fn) {
    constexpr ZipFn F = decltype(fn)::value;
    if constexpr (has_zip_grad_kernel(F)) {
      auto run = [&](auto which) {
        using Op = ZipGradOp<F, decltype(which)::value>;
        if (p.same_dtype) {
          elementwise::launch<scalar_t, Op>(out, ptrs, p.in, p.numel);
        } else {
          const Dtype result = to_dtype(p.grad.scalar_type());  // the forward's result dtype
          elementwise::LoadSet<DynamicLoad, 3> loads{{DynamicLoad{result, result},
                                                      DynamicLoad{to_dtype(p.a.scalar_type()), result},
                                                      DynamicLoad{to_dtype(p.b.scalar_type()), result}}};
          elementwise::launch_strided<scalar_t, Op>(out, ptrs, p.in, p.numel, loads);
        }
      };
      p.which == 0 ? run(std::integral_constant<int, 0>{}) : run(std::integral_constant<int, 1>{});
    }
  });
}

// Instantiated once per dtype, each in its own translation unit.
#define TILES_GRAD_EXTERN(T)                                 \
  extern template void map_grad_typed<T>(const MapGradProblem&); \
  extern template void zip_grad_typed<T>(const ZipGradProblem&);
TILES_GRAD_EXTERN(c10::Half)
TILES_GRAD_EXTERN(c10::BFloat16)
TILES_GRAD_EXTERN(float)
TILES_GRAD_EXTERN(double)
#undef TILES_GRAD_EXTERN

}  // namespace tiles::cuda
