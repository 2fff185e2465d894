// The Hopper float32 bmm's epilogues (bmm/hopper_tf32_kernel.cuh): a 64 x BQ block of D (a cooperative
// consumer warpgroup's, or half a ping-pong consumer's tile) out to the output, through shared memory and
// TMA stores, or with bounds-checked stores.
#pragma once

#include <cstdint>

#include "cuda/bmm/hopper_pipeline.cuh"
#include "cuda/bmm/hopper_tf32_tiles.cuh"
#include "cuda/bmm/output_pairs.cuh"
#include "cuda/bmm/sm90_ptx.cuh"

namespace tiles::cuda::hopper {

// Epilogues. Thread (warp, lane) of a consumer holds D at fragment rows g (+8) (R rows by
// fragment_row) and q columns 8 i + 2 t (+1): acc[4 i + 2 h + {0, 1}].

// A consumer's 64 x BQ block, rows 64 * half of the tile's 128 (a cooperative consumer's own half, or
// either half of a ping-pong consumer's tile), through shared memory and TMA stores, 32 q at a time in
// consumer w's two alternating 8 KiB buffers (one store group in flight while the next chunk is written).
// Each chunk is staged with the 128-byte swizzle as the output's boxes: [64 p rows][32 q] (kSwap: two
// [32 q rows][32 p]).
template <int BQ, bool kRKMajor, bool kSwap>
__device__ __forceinline__ void store_tf32_tile_tma(const float* acc, uint8_t* buffers, const CUtensorMap* map_c,
                                                    const Tf32Shape& shape, const TileCoord& tc, int half, int w) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4, t = lane % 4;
  const bool leader = threadIdx.x % 128 == 0;
  const int p_first = tc.tm * 128 + 64 * half;
  constexpr int kChunk = 64 * 32 * 4;
#pragma unroll
  for (int j = 0; j < BQ / 32; ++j) {
    uint8_t* buffer = buffers + (j % 2) * kChunk;
    if (leader) bulk_wait_read<1>();  // the store that last read this buffer is done with it
    named_barrier(1 + w, 128);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int p = fragment_row<kRKMajor>(warp, lane, h);
#pragma unroll
      for (int ii = 0; ii < 4; ++ii) {
        const int i = 4 * j + ii, q = 8 * ii + 2 * t;  // q within the chunk
        const float v0 = acc[4 * i + 2 * h], v1 = acc[4 * i + 2 * h + 1];
        if constexpr (kSwap) {
          uint8_t* box = buffer + (p / 32) * (kChunk / 2);
          *reinterpret_cast<float*>(box + swizzled(q, p % 32)) = v0;
          *reinterpret_cast<float*>(box + swizzled(q + 1, p % 32)) = v1;
        } else {
          *reinterpret_cast<float2*>(buffer + swizzled(p, q)) = make_float2(v0, v1);
        }
      }
    }
    fence_async_shared();
    named_barrier(1 + w, 128);
    const int q_first = tc.tn * BQ + 32 * j;
    if (leader && p_first < shape.p && q_first < shape.q) {
      if constexpr (kSwap) {
        tma_store_3d(map_c, buffer, p_first, q_first, int(tc.batch));
        if (p_first + 32 < shape.p) tma_store_3d(map_c, buffer + kChunk / 2, p_first + 32, q_first, int(tc.batch));
      } else {
        tma_store_3d(map_c, buffer, q_first, p_first, int(tc.batch));
      }
    }
    if (leader) bulk_commit();
  }
}

// Bounds-checked stores of a consumer's 64 x BQ block (rows 64 * half of the tile), for outputs TMA cannot
// describe.
template <int BQ, bool kRKMajor, bool kSwap>
__device__ __forceinline__ void store_tf32_tile(const float* acc, float* c, const Tf32Shape& shape,
                                                const TileCoord& tc, int half) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  const int64_t ld = kSwap ? shape.p : shape.q;  // the output's row stride (its N)
  float* c_batch = c + tc.batch * shape.p * shape.q;
  const int64_t q0 = int64_t(tc.tn) * BQ + 2 * (lane % 4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t p = int64_t(tc.tm) * 128 + 64 * half + fragment_row<kRKMajor>(warp, lane, h);
    if (p >= shape.p) continue;
#pragma unroll
    for (int i = 0; i < BQ / 8; ++i) {
      const int64_t q = q0 + 8 * i;
      const float v0 = acc[4 * i + 2 * h], v1 = acc[4 * i + 2 * h + 1];
      if constexpr (kSwap) {
        if (q < shape.q) c_batch[q * ld + p] = v0;
        if (q + 1 < shape.q) c_batch[(q + 1) * ld + p] = v1;
      } else {
        // q is even: the pair is aligned where the row is (every row of an even N, every other of an odd one)
        float* dst = c_batch + p * ld + q;
        if (q + 1 < shape.q && pair_aligned(dst)) {
          store_pair(dst, v0, v1);
        } else {
          if (q < shape.q) dst[0] = v0;
          if (q + 1 < shape.q) dst[1] = v1;
        }
      }
    }
  }
}

}  // namespace tiles::cuda::hopper
