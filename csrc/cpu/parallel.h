// parallel_for(begin, end, grain, f): at::parallel_for's contract (f(b, e) over disjoint ranges that
// cover [begin, end), at most at::get_num_threads() of them, none shorter than grain but the last),
// on PyTorch's own intra-op threads.
//
// Why not at::parallel_for itself: when PyTorch uses OpenMP (the Linux wheels), its parallel_for is
// an inline template around `#pragma omp parallel`, which an extension compiled without -fopenmp
// (ours: setup.py passes no such flag) turns into a serial loop; every CPU kernel then ran on one
// thread whatever torch.get_num_threads() said. Here the region is opened through libgomp's entry
// point, GOMP_parallel (what `#pragma omp parallel` compiles to; libtorch_cpu has loaded libgomp),
// so the team is the one torch uses. Builds compiled with OpenMP, and PyTorch builds with the native
// thread pool (whose parallel_for lives in the library), use at::parallel_for.
#pragma once

#include <algorithm>
#include <cstdint>

#include <ATen/Parallel.h>

#if AT_PARALLEL_OPENMP && !defined(_OPENMP) && defined(__GNUC__)
#include <omp.h>
#define TILES_OWN_OMP_REGION 1
extern "C" void GOMP_parallel(void (*fn)(void*), void* data, unsigned num_threads, unsigned flags);
#endif

namespace tiles::cpu {

template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
#if TILES_OWN_OMP_REGION
  if (begin >= end) return;
  const int64_t n = end - begin;
  if (n <= grain || n == 1 || at::get_num_threads() == 1 || at::in_parallel_region()) {
    f(begin, end);
    return;
  }
  struct Ctx {
    const F* f;
    int64_t begin, end, grain;
  } ctx{&f, begin, end, grain};
  // As ATen's invoke_parallel: the default team (no num_threads clause), split by the grain.
  GOMP_parallel(
      [](void* p) {
        const Ctx& c = *static_cast<const Ctx*>(p);
        const int64_t n = c.end - c.begin;
        int64_t threads = omp_get_num_threads();
        if (c.grain > 0) threads = std::min(threads, (n + c.grain - 1) / c.grain);
        const int64_t chunk = (n + threads - 1) / threads;
        const int64_t b = c.begin + omp_get_thread_num() * chunk;
        if (b < c.end) (*c.f)(b, std::min(c.end, b + chunk));
      },
      &ctx, 0, 0);
#else
  at::parallel_for(begin, end, grain, f);
#endif
}

}  // namespace tiles::cpu
