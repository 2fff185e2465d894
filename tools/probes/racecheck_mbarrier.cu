// Does compute-sanitizer's racecheck follow mbarrier hand-offs between warps? A producer warp fills a
// two-stage ring in shared memory (ordinary stores, or cp.async waited for with wait_group), arrives on
// the stage's `full` barrier; a consumer warpgroup waits on `full`, reads the stage, meets at a named
// barrier and frees it on `empty`, which the producer waits for before refilling it. The hand-offs are
// correct, so every hazard racecheck reports here is the tool's, not the kernel's.
// The barriers and copies are the kernels' own wrappers (bmm/sm90_ptx.cuh, bmm/cp_async.cuh).
//   nvcc -arch=sm_90a -I csrc -o /tmp/probe tools/probes/racecheck_mbarrier.cu
//   compute-sanitizer --tool racecheck /tmp/probe 0   (1: cp.async fills)
#include <cstdio>
#include <cstdint>
#include <cstdlib>

#include "cuda/bmm/cp_async.cuh"
#include "cuda/bmm/sm90_ptx.cuh"

using namespace tiles::cuda::hopper;
using tiles::cuda::mma::cp_async_commit;
using tiles::cuda::mma::cp_async_shared;
using tiles::cuda::mma::cp_async_wait;

constexpr int kStages = 2, kFloats = 512, kRounds = 8;

__global__ void ring(const float* in, float* out, int mode) {
  __shared__ __align__(16) float stage[kStages][kFloats];
  __shared__ uint64_t full[kStages], empty[kStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1), mbarrier_init(&empty[s], 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= 128) {  // producer warp
    const int lane = threadIdx.x - 128;
    for (int r = 0; r < kRounds; ++r) {
      const int s = r % kStages;
      if (r >= kStages) mbarrier_wait(&empty[s], (r / kStages - 1) % 2);
      for (int i = lane; i < kFloats; i += 32) {
        const float* src = in + r * kFloats + i;
        if (mode == 0) stage[s][i] = *src;
        else cp_async_shared<4>(smem_addr(&stage[s][i]), src);
      }
      if (mode == 1) cp_async_commit(), cp_async_wait<0>();
      __syncwarp();
      if (lane == 0) mbarrier_arrive(&full[s]);
    }
    return;
  }
  float acc = 0.f;  // consumer warpgroup
  for (int r = 0; r < kRounds; ++r) {
    const int s = r % kStages;
    mbarrier_wait(&full[s], (r / kStages) % 2);
    for (int i = threadIdx.x; i < kFloats; i += 128) acc += stage[s][(i * 7) % kFloats];
    named_barrier(1, 128);
    if (threadIdx.x == 0) mbarrier_arrive(&empty[s]);
  }
  out[threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  const int mode = argc > 1 ? atoi(argv[1]) : 0;
  float *in, *out;
  cudaMalloc(&in, kRounds * kFloats * sizeof(float));
  cudaMalloc(&out, 128 * sizeof(float));
  cudaMemset(in, 0, kRounds * kFloats * sizeof(float));
  ring<<<1, 160>>>(in, out, mode);
  const cudaError_t e = cudaDeviceSynchronize();
  printf("racecheck probe mode %d (%s): %s\n", mode, mode ? "cp.async" : "st.shared", cudaGetErrorString(e));
  return e != cudaSuccess;
}
