// Does compute-sanitizer's racecheck follow mbarrier hand-offs between warps? A producer warp fills a
// two-stage ring in shared memory (ordinary stores, or cp.async waited for with wait_group), arrives on
// the stage's `full` barrier; a consumer warpgroup waits on `full`, reads the stage, meets at a named
// barrier and frees it on `empty`, which the producer waits for before refilling it. The hand-offs are
// correct, so every hazard racecheck reports here is the tool's, not the kernel's.
//   nvcc -arch=sm_90a -o /tmp/probe tools/probes/racecheck_mbarrier.cu
//   compute-sanitizer --tool racecheck /tmp/probe 0   (1: cp.async fills)
#include <cstdio>
#include <cstdint>
#include <cstdlib>

__device__ uint32_t smem(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ void arrive(uint64_t* b) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem(b)) : "memory"); }
__device__ void wait(uint64_t* b, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem(b)), "r"(parity) : "memory");
  } while (!done);
}

constexpr int kStages = 2, kFloats = 512, kRounds = 8;

__global__ void ring(const float* in, float* out, int mode) {
  __shared__ __align__(16) float stage[kStages][kFloats];
  __shared__ uint64_t full[kStages], empty[kStages];
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&full[s])));
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem(&empty[s])));
    }
  }
  __syncthreads();
  if (threadIdx.x >= 128) {  // producer warp
    const int lane = threadIdx.x - 128;
    for (int r = 0; r < kRounds; ++r) {
      const int s = r % kStages;
      if (r >= kStages) wait(&empty[s], (r / kStages - 1) % 2);
      for (int i = lane; i < kFloats; i += 32) {
        const float* src = in + r * kFloats + i;
        if (mode == 0) stage[s][i] = *src;
        else asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem(&stage[s][i])), "l"(src));
      }
      if (mode == 1) asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
      __syncwarp();
      if (lane == 0) arrive(&full[s]);
    }
    return;
  }
  float acc = 0.f;  // consumer warpgroup
  for (int r = 0; r < kRounds; ++r) {
    const int s = r % kStages;
    wait(&full[s], (r / kStages) % 2);
    for (int i = threadIdx.x; i < kFloats; i += 128) acc += stage[s][(i * 7) % kFloats];
    asm volatile("bar.sync 1, 128;" ::: "memory");
    if (threadIdx.x == 0) arrive(&empty[s]);
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
