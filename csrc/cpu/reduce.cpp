// CPU reduce. Each output reduces its input elements in fixed chunks of kChunk positions (the chunk
// partials combined in order), and a chunk's arithmetic order depends only on the layout (which
// vector lane takes which element is fixed by the position), so the result does not depend on the
// thread count or on whether the work was split across outputs or across one long reduction: the same
// bits every run on one machine. (Machines of other vector widths may differ in the last bits.)
// Sum, mean and prod accumulate in double lanes: in float32 the roundings of a running sum of similar
// values all err the same way (n ulps after n elements); in double that drift stays far below one
// float32 ulp of the result. Along rows, float sums first add 8 vectors pairwise in float (3 ulps of
// their magnitudes at most) and widen only that, so the conversions cost a quarter of the loads.
// Max and min are exact in any order and run in the op-math type. Logsumexp, whose state is a pair,
// has a loop of its own (logsumexp_kernel).
//
// Three shapes of work (simd_body.h has the loops):
//   rows     the innermost reduced dim has unit stride: each chunk is summed along it with 4 vector
//            accumulators; threads take whole outputs (blocks of them per call when each is one
//            run of at most a chunk), or the chunks of a few long outputs.
//   columns  neighbouring outputs sit side by side in memory (unit stride between outputs) and the
//            reduced dims do not: one vector lane per output, a block of outputs in registers, the
//            reduced positions walked in order; threads take blocks of outputs (and chunks when
//            there are few blocks).
//   other    strided: the same chunked order, one element at a time along the innermost dim.
#include <ATen/Parallel.h>

#include "cpu/parallel.h"

#include <vector>

#include "binding/dispatch.h"
#include "cpu/kernels.h"
#include "cpu/loops.h"
#include "cpu/simd.h"

namespace tiles::cpu {
namespace {

constexpr int64_t kChunk = 4096;   // positions accumulated before their partial is combined in order
constexpr int64_t kGrain = 32768;  // input elements per parallel task
constexpr int64_t kCols = kReduceCols;  // outputs per task of the columns shape
constexpr int64_t kRows = 256;     // outputs per kernel call of the rows shape


// Each output's positions in chunks of kChunk, chunk(base, begin, end) -> R::Acc for one, the chunks
// combined in order, so the result does not depend on who computed which chunk: threads take whole
// outputs when there are enough to go round, else the chunks of each output in turn.
template <class R, class Chunk, class Finish>
void reduce_by_chunks(const ReduceProblem& p, Chunk&& chunk, Finish&& finish) {
  using Acc = typename R::Acc;
  const int64_t chunks = (p.num_in + kChunk - 1) / kChunk;
  auto span = [&](int64_t base, int64_t c) { return chunk(base, c * kChunk, std::min((c + 1) * kChunk, p.num_in)); };
  if (p.num_out >= at::get_num_threads() || chunks <= 1) {
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(p.num_in, 1));
    parallel_for(0, p.num_out, grain, [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) {
        const int64_t base = p.outer.offsets(o)[0];
        Acc acc = R::identity();
        for (int64_t c = 0; c < chunks; ++c) acc = R::combine(acc, span(base, c));
        finish(o, acc);
      }
    });
    return;
  }
  std::vector<Acc> partial(chunks);
  for (int64_t o = 0; o < p.num_out; ++o) {
    const int64_t base = p.outer.offsets(o)[0];
    parallel_for(0, chunks, std::max<int64_t>(1, kGrain / kChunk), [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) partial[c] = span(base, c);
    });
    Acc acc = R::identity();
    for (const Acc& v : partial) acc = R::combine(acc, v);
    finish(o, acc);
  }
}

template <class scalar_t, ReduceFn F>
void reduce_kernel(const ReduceProblem& p) {
  using R = Reducer<F, double>;
  const Kernels& k = kernels();
  const ReduceArgs args{p.fn, to_dtype(p.out.scalar_type()), p.x.const_data_ptr(), &p.inner};
  scalar_t* out = p.out.data_ptr<scalar_t>();
  const int64_t chunks = (p.num_in + kChunk - 1) / kChunk;
  auto finish = [&](int64_t o, double acc) { out[o] = scalar_t(opmath_t<scalar_t>(R::finish(acc, p.num_in))); };

  if (p.num_in == 0) {  // an empty reduction: the identity (mean: 0 / 0)
    for (int64_t o = 0; o < p.num_out; ++o) finish(o, R::identity());
    return;
  }
  const bool unit_inner = p.inner.ndim >= 1 && p.inner.strides[0][0] == 1;
  const bool columns = !unit_inner && p.inner.ndim >= 1 && p.outer.ndim >= 1 && p.outer.strides[0][0] == 1;
  if (columns) {
    // Outputs in groups of kCols consecutive ones along the outputs' innermost dim.
    const int64_t row = p.outer.sizes[0];
    const int64_t groups_per_row = (row + kCols - 1) / kCols;
    const int64_t groups = groups_per_row * (p.num_out / row);
    std::vector<double> partial(chunks > 1 ? chunks * p.num_out : 0);
    const int64_t tasks = groups * chunks;
    const int64_t grain = std::max<int64_t>(1, kGrain / std::max<int64_t>(kCols * std::min(kChunk, p.num_in), 1));
    parallel_for(0, tasks, grain, [&](int64_t begin, int64_t end) {
      double buf[kCols];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t g = t / chunks, c = t % chunks;
        const int64_t o0 = (g / groups_per_row) * row + (g % groups_per_row) * kCols;
        const int64_t cols = std::min(kCols, row - (g % groups_per_row) * kCols);
        const int64_t pb = c * kChunk, pe = std::min(pb + kChunk, p.num_in);
        k.reduce_cols(args, p.outer.offsets(o0)[0], cols, pb, pe, buf);
        if (chunks == 1) {
          for (int64_t j = 0; j < cols; ++j) finish(o0 + j, R::combine(R::identity(), buf[j]));
        } else {
          for (int64_t j = 0; j < cols; ++j) partial[c * p.num_out + o0 + j] = buf[j];
        }
      }
    });
    if (chunks > 1) {
      parallel_for(0, p.num_out, kGrain / chunks + 1, [&](int64_t begin, int64_t end) {
        for (int64_t o = begin; o < end; ++o) {
          double acc = R::identity();
          for (int64_t c = 0; c < chunks; ++c) acc = R::combine(acc, partial[c * p.num_out + o]);
          finish(o, acc);
        }
      });
    }
    return;
  }

  if (unit_inner && p.inner.ndim == 1 && chunks == 1) {
    // Each output one unit-stride run of at most a chunk (the last dim reduced): blocks of whole
    // outputs per kernel call.
    const int64_t grain = std::max<int64_t>(1, kGrain / p.num_in);
    parallel_for(0, p.num_out, grain, [&](int64_t begin, int64_t end) {
      double result[kRows];
      for (int64_t b = begin; b < end; b += kRows) {
        const int64_t e = std::min(b + kRows, end);
        k.reduce_rows(args, p.outer, b, e, p.num_in, result);
        for (int64_t o = b; o < e; ++o) finish(o, R::combine(R::identity(), result[o - b]));
      }
    });
    return;
  }
  reduce_by_chunks<R>(
      p, [&](int64_t base, int64_t begin, int64_t end) { return k.reduce_span(args, base, begin, end); }, finish);
}

// logsumexp: a (max, sum) state in double, along runs of the innermost dim, chunked as the other fns.
template <class scalar_t>
void logsumexp_kernel(const ReduceProblem& p) {
  using R = Reducer<ReduceFn::LogSumExp, double>;
  const scalar_t* x = p.x.const_data_ptr<scalar_t>();
  scalar_t* out = p.out.data_ptr<scalar_t>();
  auto chunk = [&](int64_t base, int64_t begin, int64_t end) {
    R::Acc acc = R::identity();
    for_each_run(p.inner, begin, end, [&](int64_t, auto off, int64_t count, auto step) {
      const scalar_t* src = x + base + off[0];
      for (int64_t j = 0; j < count; ++j) acc = R::combine(acc, R::lift(double(src[j * step[0]])));
    });
    return acc;
  };
  reduce_by_chunks<R>(p, chunk, [&](int64_t o, R::Acc acc) {
    out[o] = scalar_t(opmath_t<scalar_t>(R::finish(acc, p.num_in)));
  });
}

}  // namespace

void reduce(const ReduceProblem& p) {
  TILES_DISPATCH_FLOAT_TYPES(p.out.scalar_type(), "tiles::reduce", [&] {
    dispatch_fn(p.fn, [&](auto fn) {
      if constexpr (decltype(fn)::value == ReduceFn::LogSumExp) logsumexp_kernel<scalar_t>(p);
      else reduce_kernel<scalar_t, decltype(fn)::value>(p);
    });
  });
}

}  // namespace tiles::cpu
