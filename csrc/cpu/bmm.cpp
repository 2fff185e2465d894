// CPU bmm: validation and the output live in problems.cpp; the blocked kernel (packed panels, a
// register-tiled FMA micro-kernel, tasks over batches and output tiles) is bmm_body.h, compiled per
// instruction set (simd.h). This file hands it the pointers, the strides and the threads.
#include <ATen/Parallel.h>

#include "binding/dispatch.h"
#include "cpu/kernels.h"
#include "cpu/parallel.h"
#include "cpu/simd.h"

namespace tiles::cpu {
namespace {

void parallel(int64_t n, int64_t grain, void* ctx, void (*body)(void*, int64_t, int64_t)) {
  parallel_for(0, n, grain, [&](int64_t begin, int64_t end) { body(ctx, begin, end); });
}

// Products this small cost less as one direct loop than the packing and task setup of the blocked
// kernel (about half the time of a call).
constexpr int64_t kDirectMacs = 4096;

template <class scalar_t>
void direct_bmm(const BmmProblem& p) {
  using T = opmath_t<scalar_t>;
  const scalar_t* a = p.a.const_data_ptr<scalar_t>();
  const scalar_t* b = p.b.const_data_ptr<scalar_t>();
  scalar_t* out = p.out.data_ptr<scalar_t>();
  for (int64_t bi = 0; bi < p.batch; ++bi)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        T acc = T(0);
        for (int64_t kk = 0; kk < p.k; ++kk)
          acc += T(a[bi * p.a_strides[0] + i * p.a_strides[1] + kk * p.a_strides[2]]) *
                 T(b[bi * p.b_strides[0] + kk * p.b_strides[1] + j * p.b_strides[2]]);
        out[(bi * p.m + i) * p.n + j] = scalar_t(acc);
      }
}

}  // namespace

void bmm(const BmmProblem& p) {
  if (p.batch * p.m * p.n * std::max<int64_t>(p.k, 1) <= kDirectMacs) {
    TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::bmm", [&] { direct_bmm<scalar_t>(p); });
    return;
  }
  BmmArgs args{to_dtype(p.out.scalar_type()), p.a.const_data_ptr(), p.b.const_data_ptr(), p.out.data_ptr(),
               p.batch, p.m, p.n, p.k, {}, {}, at::get_num_threads()};
  for (int d = 0; d < 3; ++d) {
    args.a_strides[d] = p.a_strides[d];
    args.b_strides[d] = p.b_strides[d];
  }
  kernels().bmm(args, &parallel);
}

}  // namespace tiles::cpu
