// CUDA zip for one result dtype: every fn, through the elementwise kernels (elementwise/kernels.cuh).
// Operands of another float dtype than the result convert per element on the strided path.
#pragma once

#include "binding/dispatch.h"
#include "cuda/elementwise/launch.cuh"
#include "cuda/kernels.h"

namespace tiles::cuda {

template <class scalar_t>
void zip_typed(const ZipProblem& p) {
  const void* ptrs[2] = {p.a.const_data_ptr(), p.b.const_data_ptr()};
  scalar_t* out = p.out.data_ptr<scalar_t>();
  dispatch_fn(p.fn, [&](auto fn) {
    using Op = ZipOp<decltype(fn)::value>;
    if (p.same_dtype) {
      elementwise::launch<scalar_t, Op>(out, ptrs, p.in, p.numel);
    } else {
      const Dtype result = to_dtype(p.out.scalar_type());
      elementwise::LoadSet<DynamicLoad, 2> loads{{DynamicLoad{to_dtype(p.a.scalar_type()), result},
                                                  DynamicLoad{to_dtype(p.b.scalar_type()), result}}};
      elementwise::launch_strided<scalar_t, Op>(out, ptrs, p.in, p.numel, loads);
    }
  });
}

extern template void zip_typed<c10::Half>(const ZipProblem&);
extern template void zip_typed<c10::BFloat16>(const ZipProblem&);
extern template void zip_typed<float>(const ZipProblem&);
extern template void zip_typed<double>(const ZipProblem&);

}  // namespace tiles::cuda
