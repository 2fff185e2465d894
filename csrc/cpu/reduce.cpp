// CPU reduce. Each output reduces its input elements in fixed chunks of kChunk positions (the chunk
// partials combined in order), so the result does not depend on the thread count or on whether the
// work was split across outputs or across one long reduction: the same bits every run.
// Every dtype accumulates in double: a chunk is summed element after element, and in float32 the
// roundings of a running sum of similar values all err the same way (n ulps after n elements); in
// double that drift stays far below one float32 ulp of the result.
#include <ATen/Parallel.h>

#include <vector>

#include "cpu/kernels.h"
#include "cpu/loops.h"
#include "tiles/dispatch.h"

namespace tiles::cpu {
namespace {

constexpr int64_t kChunk = 4096;   // positions accumulated sequentially before combining
constexpr int64_t kGrain = 32768;  // input elements per parallel task

template <class scalar_t, ReduceFn F>
void reduce_kernel(const ReduceProblem& p) {
  using Acc = double;
  using R = Reducer<F, Acc>;
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();
  scalar_t* out = p.out.data_ptr<scalar_t>();

  // Input positions [begin, end) of the reduction whose first element is at x + base.
  auto reduce_chunk = [&](int64_t base, int64_t begin, int64_t end) {
    Acc acc = R::identity();
    for_each_run(p.inner, begin, end, [&](int64_t, auto off, int64_t count, auto step) {
      const scalar_t* src = x + base + off[0];
      for (int64_t j = 0; j < count; ++j) acc = R::combine(acc, Acc(opmath_t<scalar_t>(src[j * step[0]])));
    });
    return acc;
  };
  auto reduce_all = [&](int64_t base) {
    Acc acc = R::identity();
    for (int64_t c = 0; c < p.num_in; c += kChunk)
      acc = R::combine(acc, reduce_chunk(base, c, std::min(c + kChunk, p.num_in)));
    return acc;
  };

  const int64_t chunks = (p.num_in + kChunk - 1) / kChunk;
  if (p.num_out >= at::get_num_threads() || chunks <= 1) {
    // Enough outputs to go round: one task reduces whole outputs.
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(p.num_in, 1));
    at::parallel_for(0, p.num_out, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o)
        out[o] = scalar_t(opmath_t<scalar_t>(R::finish(reduce_all(p.outer.offsets(o)[0]), p.num_in)));
    });
    return;
  }
  // Few, long reductions: split each across threads by chunk, then combine the chunks in order.
  std::vector<Acc> partial(chunks);
  for (int64_t o = 0; o < p.num_out; ++o) {
    const int64_t base = p.outer.offsets(o)[0];
    at::parallel_for(0, chunks, std::max<int64_t>(1, kGrain / kChunk), [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c)
        partial[c] = reduce_chunk(base, c * kChunk, std::min((c + 1) * kChunk, p.num_in));
    });
    Acc acc = R::identity();
    for (const Acc& v : partial) acc = R::combine(acc, v);
    out[o] = scalar_t(opmath_t<scalar_t>(R::finish(acc, p.num_in)));
  }
}

}  // namespace

void reduce(const ReduceProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::reduce", [&] {
    dispatch_fn(p.fn, [&](auto fn) { reduce_kernel<scalar_t, decltype(fn)::value>(p); });
  });
}

}  // namespace tiles::cpu
