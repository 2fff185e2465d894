// Launch-configuration helpers shared by the CUDA kernels.
#pragma once

// Only c10's CUDA headers: ATen/cuda/CUDAContext.h would pull in the cuBLAS/cuSPARSE headers, which
// the CI machine's CUDA toolkit lacks (tools/check_cuda_compiles.sh).
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <atomic>

namespace tiles::cuda {

// The current device's multiprocessor count.
inline int sm_count() {
  int sms = 0;  // a cached driver attribute: cheap, no synchronization
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c10::cuda::current_device()));
  return sms;
}

// The current device's L2 cache size in bytes.
inline int64_t l2_bytes() {
  int bytes = 0;
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, c10::cuda::current_device()));
  return bytes;
}

// The current device's peak DRAM bandwidth in bytes per second: the memory clock (kHz) times the bus
// width, twice a clock (double data rate). H100 SXM 3.35e12, H200 4.8e12. Read once a device: unlike
// the SM count, the memory clock is not a cached driver attribute (read per call, it added ~0.5 ms of
// host time to every bmm that asked, on an H200).
inline double dram_bytes_per_s() {
  constexpr int kMaxDevices = 64;
  static std::atomic<double> cached[kMaxDevices];  // static storage: zero, "not read yet"
  const int device = c10::cuda::current_device();
  TORCH_INTERNAL_ASSERT(device < kMaxDevices, "dram_bytes_per_s: device ", device, " out of the cache's range");
  double bytes_per_s = cached[device].load(std::memory_order_relaxed);
  if (bytes_per_s == 0) {  // two threads may both read it: they store the same value
    int khz = 0, bits = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device));
    bytes_per_s = 2.0 * 1e3 * khz * (bits / 8);
    cached[device].store(bytes_per_s, std::memory_order_relaxed);
  }
  return bytes_per_s;
}

// A kernel's block shape as a template parameter: threads, and vectors in flight per thread (and
// operand), so that benchmarks/probes/ can time other shapes of the product's own kernels.
template <int THREADS, int UNROLL>
struct BlockShape {
  static constexpr int kThreads = THREADS, kUnroll = UNROLL;
};

// `ask()`, a positive number, for `device`, asked once per device and per `known` (each caller's own
// static array; 0: not asked yet). Devices past 64 ask every time.
template <class Ask>
int once_per_device(std::atomic<int> (&known)[64], int device, Ask&& ask) {
  std::atomic<int>* slot = device < 64 ? &known[device] : nullptr;
  if (slot)
    if (const int v = slot->load(std::memory_order_relaxed); v != 0) return v;
  const int v = ask();
  if (slot) slot->store(v, std::memory_order_relaxed);
  return v;
}

// A device's compute capability as major * 10 + minor (90 for an H100), asked once per device:
// the bmm paths check it on every call.
inline int compute_capability(int device) {
  static std::atomic<int> known[64] = {};
  return once_per_device(known, device, [&] {
    int major = 0, minor = 0;
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    return major * 10 + minor;
  });
}

// Lets kKernel use `bytes` of dynamic shared memory (above 48 KiB it must be asked for), once per
// kernel and device. The kernel's address is the template argument, so each kernel keeps its own flags.
template <auto kKernel>
void allow_dynamic_smem(int bytes) {
  static std::atomic<uint64_t> raised{0};  // bit d: done on device d
  const uint64_t bit = uint64_t(1) << (c10::cuda::current_device() % 64);
  if (raised.load(std::memory_order_relaxed) & bit) return;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  raised.fetch_or(bit);
}

// Blocks per thread block cluster without the non-portable opt-in (allow_clusters_of_16).
constexpr int kPortableCluster = 8;

// Thread block clusters: sm_90a builds running on an sm_90 device.
inline bool clusters_available() {
#if defined(TILES_HAS_SM90A)
  return compute_capability(c10::cuda::current_device()) == 90;
#else
  return false;
#endif
}

// A launch configuration for cudaLaunchKernelEx whose blocks form clusters of `cluster` blocks (each
// grid dim a multiple of the cluster's). It points into itself, so it is neither copied nor moved.
struct ClusterLaunch {
  cudaLaunchAttribute attribute[1];
  cudaLaunchConfig_t config;
  ClusterLaunch(dim3 grid, dim3 block, dim3 cluster, cudaStream_t stream) : attribute{}, config{} {
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = cluster.x;
    attribute[0].val.clusterDim.y = cluster.y;
    attribute[0].val.clusterDim.z = cluster.z;
    config.gridDim = grid;
    config.blockDim = block;
    config.stream = stream;
    config.attrs = attribute;
    config.numAttrs = 1;
  }
  ClusterLaunch(const ClusterLaunch&) = delete;
  ClusterLaunch& operator=(const ClusterLaunch&) = delete;
};

// Whether kKernel, launched with `block`, can run in thread block clusters of 16 (beyond the portable
// 8: an opt-in, and they must fit in one GPC), asked once per kernel and device.
template <auto kKernel>
bool allow_clusters_of_16(dim3 block) {
  static std::atomic<uint64_t> asked{0}, fits{0};  // bit d: device d asked / can
  const uint64_t bit = uint64_t(1) << (c10::cuda::current_device() % 64);
  if (asked.load(std::memory_order_acquire) & bit) return fits.load(std::memory_order_relaxed) & bit;
  cudaError_t status = cudaFuncSetAttribute(kKernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  int clusters = 0;
  if (status == cudaSuccess) {
    const ClusterLaunch launch(dim3(1, 16), block, dim3(1, 16, 1), nullptr);
    status = cudaOccupancyMaxActiveClusters(&clusters, kKernel, &launch.config);
  }
  if (status != cudaSuccess) (void)cudaGetLastError();  // the refusal is an answer, not an error for the next check
  const bool ok = status == cudaSuccess && clusters > 0;
  if (ok) fits.fetch_or(bit, std::memory_order_relaxed);
  asked.fetch_or(bit, std::memory_order_release);
  return ok;
}

// How many clusters of `size` blocks of kKernel (`block` threads each, static shared memory only) the
// device holds at once: a launch of no more clusters runs in one wave. Asked once per kernel, device
// and size.
template <auto kKernel>
int resident_clusters(dim3 block, int size) {
  TORCH_INTERNAL_ASSERT(size >= 1 && size <= kPortableCluster, "resident_clusters: clusters of ", size);
  static std::atomic<int> known[64][kPortableCluster + 1] = {};  // the count + 1; 0: not asked yet
  std::atomic<int>& slot = known[c10::cuda::current_device() % 64][size];
  if (const int k = slot.load(std::memory_order_relaxed)) return k - 1;
  const ClusterLaunch launch(dim3(1, 1, unsigned(size)), block, dim3(1, 1, unsigned(size)), nullptr);
  int clusters = 0;
  if (cudaOccupancyMaxActiveClusters(&clusters, kKernel, &launch.config) != cudaSuccess) {
    (void)cudaGetLastError();  // no answer: count none, so that callers take their launch without clusters
    clusters = 0;
  }
  slot.store(clusters + 1, std::memory_order_relaxed);
  return clusters;
}

// The current stream of the current device: every kernel launches here.
inline cudaStream_t current_stream() { return c10::cuda::getCurrentCUDAStream(); }

// Blocks for a grid-stride loop over n items: enough to fill every SM several times, no more.
inline unsigned grid_stride_blocks(int64_t n, int threads, int blocks_per_sm = 8) {
  const int64_t sms = sm_count();
  const int64_t wanted = (n + threads - 1) / threads;
  return unsigned(std::max<int64_t>(1, std::min(wanted, sms * blocks_per_sm)));
}

// Index of this thread in a 1-D grid, and the grid's stride, in 64 bits.
__device__ __forceinline__ int64_t global_thread() {
  return int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_threads() { return int64_t(gridDim.x) * blockDim.x; }

// VEC elements loaded or stored as one access (16 bytes for VEC = 16 / sizeof(T)).
template <class T, int VEC>
struct alignas(sizeof(T) * VEC) Vec {
  T v[VEC];
};

inline bool aligned(const void* p, int bytes) { return reinterpret_cast<uintptr_t>(p) % bytes == 0; }

}  // namespace tiles::cuda
