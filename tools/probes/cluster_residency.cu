// How many thread block clusters of 1, 2 and 4 blocks run at once on this GPU, for a kernel shaped like
// the Hopper bmm kernels (384 threads, one block per SM by shared memory): what
// cudaOccupancyMaxActiveClusters says, and what a launch of SMs / cluster clusters does (blocks that
// started only after another had ended were not resident at once). Standalone; on the GPU machine:
//
//   nvcc -arch=sm_90a -o /tmp/cluster_residency tools/probes/cluster_residency.cu && /tmp/cluster_residency
//
// On an H200 (2026-11-28): 66 clusters of 2 at every shared-memory size (all 132 SMs), 30 of 4 at
// 160 KiB and more (120 SMs; 12 blocks of a 132-block launch start late). benchmarks/NOTES.md, "Tile
// widths and pairs".
#include <algorithm>
#include <cooperative_groups.h>
#include <cstdio>
#include <vector>

namespace {

constexpr int kThreads = 384;
constexpr unsigned long long kSpinNs = 200000;

__device__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Each block holds its SM for kSpinNs and records when it started and ended.
__global__ void __launch_bounds__(kThreads, 1) hold_sm(unsigned long long* started, unsigned long long* ended) {
  extern __shared__ char smem[];
  cooperative_groups::this_cluster().sync();
  const unsigned long long t0 = global_ns();
  if (threadIdx.x == 0) smem[0] = 1;  // the shared memory is asked for, not used
  while (global_ns() - t0 < kSpinNs) {
  }
  if (threadIdx.x == 0) started[blockIdx.x] = t0, ended[blockIdx.x] = global_ns();
}

#define CHECK(call)                                                                              \
  do {                                                                                           \
    cudaError_t e = (call);                                                                      \
    if (e != cudaSuccess) return std::printf("%s: %s\n", #call, cudaGetErrorString(e)), 1;      \
  } while (0)

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::printf("%d SMs\n", sms);
  unsigned long long *started, *ended;
  CHECK(cudaMalloc(&started, sms * sizeof(unsigned long long)));
  CHECK(cudaMalloc(&ended, sms * sizeof(unsigned long long)));
  for (int kib : {100, 160, 200, 227}) {
    const int smem = kib * 1024;
    CHECK(cudaFuncSetAttribute(hold_sm, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    for (unsigned cluster : {1u, 2u, 4u}) {
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeClusterDimension;
      attribute.val.clusterDim.x = cluster, attribute.val.clusterDim.y = 1, attribute.val.clusterDim.z = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(cluster), config.blockDim = dim3(kThreads), config.dynamicSmemBytes = smem;
      config.attrs = &attribute, config.numAttrs = 1;
      int resident = 0;
      CHECK(cudaOccupancyMaxActiveClusters(&resident, hold_sm, &config));
      const int blocks = sms / int(cluster) * int(cluster);
      config.gridDim = dim3(blocks);
      CHECK(cudaLaunchKernelEx(&config, hold_sm, started, ended));
      CHECK(cudaDeviceSynchronize());
      std::vector<unsigned long long> t0(blocks), t1(blocks);
      CHECK(cudaMemcpy(t0.data(), started, blocks * sizeof(t0[0]), cudaMemcpyDeviceToHost));
      CHECK(cudaMemcpy(t1.data(), ended, blocks * sizeof(t1[0]), cudaMemcpyDeviceToHost));
      const unsigned long long first_end = *std::min_element(t1.begin(), t1.end());
      const long late = std::count_if(t0.begin(), t0.end(), [&](unsigned long long t) { return t >= first_end; });
      std::printf("%3d KiB, clusters of %u: the occupancy API says %3d at once (%3d blocks); of %3d blocks "
                  "launched, %3ld started late\n", kib, cluster, resident, resident * int(cluster), blocks, late);
    }
  }
  return 0;
}
