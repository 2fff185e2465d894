// CPU bmm: validation and the output live in problems.cpp; the blocked kernel (packed panels, a
// register-tiled FMA micro-kernel, tasks over batches and output tiles) is bmm_body.h, compiled per
// instruction set (simd.h). This file hands it the pointers, the strides and the threads.
#include <ATen/Parallel.h>

#include "cpu/parallel.h"

#include "cpu/kernels.h"
#include "cpu/simd.h"

namespace tiles::cpu {
namespace {

void parallel(int64_t n, int64_t grain, void* ctx, void (*body)(void*, int64_t, int64_t)) {
  parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { body(ctx, begin, end); });
}

}  // namespace

void bmm(const BmmProblem& p) {
  BmmArgs args{to_dtype(p.out.scalar_type()), p.a.const_data_ptr(), p.b.const_data_ptr(), p.out.data_ptr(),
               p.batch, p.m, p.n, p.k, {}, {}, at::get_num_threads()};
  for (int d = 0; d < 3; ++d) {
    args.a_strides[d] = p.a_strides[d];
    args.b_strides[d] = p.b_strides[d];
  }
  kernels().bmm(args, &parallel);
}

}  // namespace tiles::cpu
