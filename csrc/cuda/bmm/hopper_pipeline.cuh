// What the Hopper bmm kernels (bmm/hopper_kernel.cuh for bf16 / fp16, bmm/hopper_tf32_kernel.cuh for
// float32) share: the persistent grid's walk over output tiles, and the producer's walk around the ring
// of shared-memory stages, each guarded by a `full` barrier (the stage's TMA copies landed, and the
// producer warps' own copies where the TF32 kernel makes them: copy_stages) and an `empty` one (the
// consumers are done with it). Tile shapes are each kernel's (TileConfig, Tf32Config).
#pragma once

#include <cstdint>

#include "cuda/bmm/cp_async.cuh"
#include "cuda/bmm/sm90_ptx.cuh"
#include "cuda/bmm/tile_order.cuh"

namespace tiles::cuda::hopper {

// Output tile `t` of the persistent walk -> (batch, tile row, tile column): batch by batch, each in
// the grouped order of bmm/tile_order.cuh.
struct TileCoord {
  int64_t batch;
  int tm, tn;
};
__device__ __forceinline__ TileCoord tile_coord(int64_t t, int tiles_m, int tiles_n) {
  const int64_t per_batch = int64_t(tiles_m) * tiles_n;
  // In 32 bits whenever the numbers fit, as they do for any walk of fewer than 2^31 tiles: the 64-bit
  // division (even on nvcc's path for small operands) cost the short-K shapes, which take a new tile
  // every k-block or two, 1.5-2% on the H100.
  if ((t | per_batch) <= INT32_MAX) {  // both are >= 0: t counts from blockIdx.x, per_batch >= 1
    const int t32 = int(t), per32 = int(per_batch);
    const int bi = t32 / per32;
    const TilePos pos = grouped_tile(t32 - bi * per32, tiles_m, tiles_n);
    return {bi, pos.tm, pos.tn};
  }
  const int64_t bi = t / per_batch;
  const TilePos pos = grouped_tile(int(t - bi * per_batch), tiles_m, tiles_n);
  return {bi, pos.tm, pos.tn};
}

// A place in the ring of kStages stages: the stage, and the parity of the ring's lap, which is the
// phase its barriers complete next. Every role walks the ring in the same order, one stage per k-block.
template <int kStages>
struct StageRing {
  int s = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void advance() {
    if (++s == kStages) s = 0, phase ^= 1;
  }
  // Past n stages another role consumes (the TF32 kernel's ping-pong consumers skip each other's tiles).
  __device__ __forceinline__ void skip(int64_t n) {
    const int64_t to = s + n;
    s = int(to % kStages);
    phase ^= uint32_t((to / kStages) & 1);
  }
};

// The producer's walk around the ring: for each tile this block computes (first, + stride, ...: by
// default blockIdx.x, + gridDim.x), `tile_loads(tile)` works out where the tile's operands are once and
// returns `load(stage, k0)`, which issues a k-block's TMA copies; for each k-block, wait until the
// consumers have freed the next stage, arm its `full` barrier for `bytes`, and load. `full` and `empty`
// are the shared-window addresses of the rings' first barriers (8 bytes apart).
//
// One thread runs this, and it must keep up with the tensor cores: on one-wave products a 128 x 96
// k-block is ~400 cycles of wgmma, and a walk that recomputed the tile's coordinates and converted
// generic pointers every k-block took about as long, so that k-blocks cost the same at any tile width
// and the consumers waited for stages the producer had not yet asked for (benchmarks/NOTES.md,
// "Pairs and the producer's k-block").
template <int kStages, int BK, class TileLoads>
__device__ __forceinline__ void produce_stages(uint32_t full, uint32_t empty, uint32_t bytes, int64_t total_tiles,
                                               int tiles_m, int tiles_n, int64_t k_blocks, TileLoads&& tile_loads,
                                               int64_t first = blockIdx.x, int64_t stride = gridDim.x) {
  StageRing<kStages> ring;
  for (int64_t t = first; t < total_tiles; t += stride) {
    const auto load = tile_loads(tile_coord(t, tiles_m, tiles_n));
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      mbarrier_wait(empty + 8 * ring.s, ring.phase ^ 1);
      mbarrier_arrive_expect_tx(full + 8 * ring.s, bytes);
      load(ring.s, int(kb * BK));
      ring.advance();
    }
  }
}

// The same walk for producer warps that work on each stage once its TMA copies have landed (the TF32
// kernel's transposers and splitters): `work(stage)` for every k-block of every tile, in ring order.
template <int kStages, class Work>
__device__ __forceinline__ void on_landed_stages(uint64_t* full, int64_t total_tiles, int64_t k_blocks, Work&& work) {
  StageRing<kStages> ring;
  for (int64_t t = blockIdx.x; t < total_tiles; t += gridDim.x) {
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      mbarrier_wait(&full[ring.s], ring.phase);
      work(ring.s);
      ring.advance();
    }
  }
}

// The walk for producer threads that copy operand tiles themselves (cp.async, bmm/cp_async.cuh): for
// every k-block of every tile, in ring order, wait until the consumers have freed the stage and let
// `issue(stage, tile, k0)` start its copies, committed as one group; kLag stages later, once that group
// has landed, `finish(stage)`. kLag <= kStages - 2 keeps the ring turning: before waiting for stage j to
// be freed the walk has finished stages up to j - 1 - kLag, and the TF32 consumers free stage j - kStages
// only once stage j - kStages + 1 is complete (they keep one k-block's products in flight).
template <int kStages, int BK, int kLag, class Issue, class Finish>
__device__ __forceinline__ void copy_stages(uint64_t* empty, int64_t total_tiles, int tiles_m, int tiles_n,
                                            int64_t k_blocks, Issue&& issue, Finish&& finish) {
  static_assert(kLag >= 0 && kLag <= kStages - 2, "a stage must be finished before the walk needs its turn");
  StageRing<kStages> ring, behind;  // behind: the next stage to finish
  int pending = 0;                  // stages issued and not finished
  for (int64_t t = blockIdx.x; t < total_tiles; t += gridDim.x) {
    const TileCoord tc = tile_coord(t, tiles_m, tiles_n);
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      mbarrier_wait(&empty[ring.s], ring.phase ^ 1);
      issue(ring.s, tc, int(kb * BK));
      mma::cp_async_commit();
      ring.advance();
      if (++pending > kLag) {
        mma::cp_async_wait<kLag>();
        finish(behind.s);
        behind.advance();
        --pending;
      }
    }
  }
  mma::cp_async_wait<0>();
  for (; pending > 0; --pending) {
    finish(behind.s);
    behind.advance();
  }
}

}  // namespace tiles::cuda::hopper
