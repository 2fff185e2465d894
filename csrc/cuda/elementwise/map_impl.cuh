// CUDA map for one dtype: every fn, through the elementwise kernels (elementwise/kernels.cuh).
#pragma once

#include "binding/dispatch.h"
#include "cuda/elementwise/launch.cuh"
#include "cuda/kernels.h"

namespace tiles::cuda {

template <class scalar_t>
void map_typed(const MapProblem& p) {
  const void* ptrs[1] = {p.x.const_data_ptr()};
  dispatch_fn(p.fn, [&](auto fn) {
    elementwise::launch<scalar_t, MapOp<decltype(fn)::value>>(p.out.data_ptr<scalar_t>(), ptrs, p.in, p.numel);
  });
}

// Instantiated once per dtype, each in its own translation unit.
extern template void map_typed<c10::Half>(const MapProblem&);
extern template void map_typed<c10::BFloat16>(const MapProblem&);
extern template void map_typed<float>(const MapProblem&);
extern template void map_typed<double>(const MapProblem&);

}  // namespace tiles::cuda
