// CPU bmm over any strides. Each task owns whole output rows and accumulates them in the op-math type:
// with b row-major (unit stride along n) as a sum of scaled rows of b, which walks b and the
// accumulator with unit stride; otherwise as one dot product per output element.
#include <ATen/Parallel.h>

#include <vector>

#include "cpu/kernels.h"
#include "tiles/dispatch.h"

namespace tiles::cpu {
namespace {

template <class scalar_t>
void bmm_kernel(const BmmProblem& p) {
  using Acc = opmath_t<scalar_t>;
  const scalar_t* A = p.a.const_data_ptr<scalar_t>();
  const scalar_t* B = p.b.const_data_ptr<scalar_t>();
  scalar_t* C = p.out.data_ptr<scalar_t>();
  const int64_t sab = p.a_strides[0], sam = p.a_strides[1], sak = p.a_strides[2];
  const int64_t sbb = p.b_strides[0], sbk = p.b_strides[1], sbn = p.b_strides[2];
  const int64_t rows = p.batch * p.m;
  const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(p.n * p.k, 1));

  at::parallel_for(0, rows, grain, [&](int64_t begin, int64_t end) {
    std::vector<Acc> acc(p.n);
    for (int64_t row = begin; row < end; ++row) {
      const int64_t batch = row / p.m, i = row % p.m;
      const scalar_t* a_row = A + batch * sab + i * sam;
      const scalar_t* b_mat = B + batch * sbb;
      scalar_t* c_row = C + row * p.n;
      if (sbn == 1) {
        std::fill(acc.begin(), acc.end(), Acc(0));
        for (int64_t kk = 0; kk < p.k; ++kk) {
          const Acc av = Acc(a_row[kk * sak]);
          const scalar_t* b_row = b_mat + kk * sbk;
          for (int64_t j = 0; j < p.n; ++j) acc[j] += av * Acc(b_row[j]);
        }
        for (int64_t j = 0; j < p.n; ++j) c_row[j] = scalar_t(acc[j]);
      } else {
        // kCols dot products at once: each a element is loaded once for kCols independent sums,
        // which keep the FMA units busy where one dependent chain would stall on its own latency.
        constexpr int64_t kCols = 4;
        int64_t j = 0;
        for (; j + kCols <= p.n; j += kCols) {
          Acc s[kCols] = {};
          for (int64_t kk = 0; kk < p.k; ++kk) {
            const Acc av = Acc(a_row[kk * sak]);
            const scalar_t* b_k = b_mat + kk * sbk + j * sbn;
            for (int64_t c = 0; c < kCols; ++c) s[c] += av * Acc(b_k[c * sbn]);
          }
          for (int64_t c = 0; c < kCols; ++c) c_row[j + c] = scalar_t(s[c]);
        }
        for (; j < p.n; ++j) {
          const scalar_t* b_col = b_mat + j * sbn;
          Acc s = 0;
          for (int64_t kk = 0; kk < p.k; ++kk) s += Acc(a_row[kk * sak]) * Acc(b_col[kk * sbk]);
          c_row[j] = scalar_t(s);
        }
      }
    }
  });
}

}  // namespace

void bmm(const BmmProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::bmm", [&] { bmm_kernel<scalar_t>(p); });
}

}  // namespace tiles::cpu
