// CPU map and zip: the output's positions split across threads (parallel.h), each range run by
// the vector loops of simd_body.h for this CPU's instruction set: unit-stride runs straight from
// memory, strided runs gathered along the innermost dim into small blocks first.
#include <ATen/Parallel.h>

#include "cpu/parallel.h"

#include "cpu/kernels.h"
#include "cpu/simd.h"

namespace tiles::cpu {
namespace {

// Elements per parallel task: large enough that a task's start-up (tens of microseconds for a
// thread wake-up) is small against its work, small enough that 2^20 elements use every thread.
constexpr int64_t kGrain = 32768;

}  // namespace

void map(const MapProblem& p) {
  const MapArgs args{p.fn, to_dtype(p.out.scalar_type()), p.x.const_data_ptr(), p.out.data_ptr(), &p.in};
  const Kernels& k = kernels();
  parallel_for(0, p.numel, kGrain, [&](int64_t begin, int64_t end) { k.map_range(args, begin, end); });
}

at::Tensor one_element_as(const at::Tensor& t, at::ScalarType dtype) {
  return t.numel() == 1 && t.scalar_type() != dtype ? t.to(dtype) : t;
}

void zip(const ZipProblem& p) {
  const at::Tensor a = one_element_as(p.a, p.out.scalar_type()), b = one_element_as(p.b, p.out.scalar_type());
  const ZipArgs args{p.fn, to_dtype(p.out.scalar_type()), to_dtype(a.scalar_type()), to_dtype(b.scalar_type()),
                     a.const_data_ptr(), b.const_data_ptr(), p.out.data_ptr(), &p.in};
  const Kernels& k = kernels();
  parallel_for(0, p.numel, kGrain, [&](int64_t begin, int64_t end) { k.zip_range(args, begin, end); });
}

}  // namespace tiles::cpu
