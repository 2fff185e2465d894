// Can a TMA tile load start its innermost dim at any element? One 128-byte box of a float32 or bf16
// matrix (16-byte-aligned base and row stride, as TMA requires) is loaded at every start column up to
// 16 bytes in, with and without the 128-byte swizzle, each in a child process of its own, since a
// faulting load poisons its CUDA context. On the H100 (CUDA 13.0) a start column whose byte offset is
// not a multiple of 16 dies with "an illegal instruction" at the load, though cuTensorMapEncodeTiled
// accepts the map: TMA moves 16-byte units from 16-byte-aligned addresses, so a row that starts off 16
// bytes (an odd leading stride) cannot be loaded by TMA into an aligned tile. This ended the plan to
// load such operands a row per request from residue-class maps (benchmarks/NOTES.md, Current state).
// (Measured with a one-off program of the same loads, start columns 0, 1, 3, 4 in float32; this file,
// which sweeps every start and bf16 too, is compiled but not yet run on a GPU.)
// The barriers and loads are the kernels' own wrappers (bmm/sm90_ptx.cuh).
//   nvcc -arch=sm_90a -O2 -I csrc -o /tmp/tma_inner_start tools/probes/tma_inner_start.cu && /tmp/tma_inner_start
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "cuda/bmm/sm90_ptx.cuh"

namespace {

using namespace tiles::cuda::hopper;

constexpr int kBoxBytes = 128, kRows = 64, kCols = 1024, kRow = 1;

// Whether the code that runs has the sm_90a bodies (elsewhere the TMA wrappers are empty and every
// load would look fine).
__global__ void runs_sm90a_code(int* yes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  *yes = 1;
#else
  *yes = 0;
#endif
}

// The box at (start_col, kRow) into shared memory, then its bytes out to `landed`.
__global__ void load_one_box(const __grid_constant__ CUtensorMap map, int start_col, uint8_t* landed) {
  __shared__ alignas(1024) uint8_t tile[kBoxBytes];
  __shared__ uint64_t bar;
  if (threadIdx.x != 0) return;
  mbarrier_init(&bar, 1);
  mbarrier_init_fence();
  mbarrier_arrive_expect_tx(&bar, kBoxBytes);
  tma_load_3d(tile, &map, &bar, start_col, kRow, 0);
  mbarrier_wait(&bar, 0);
  for (int i = 0; i < kBoxBytes; ++i) landed[i] = tile[i];
}

// Loads one box at `start_col` in this process; returns 0 when it ran without an error and its bytes
// are the matrix's (in a one-row box the 128-byte swizzle moves nothing: row 0 of its pattern).
int run_case(int element_bytes, bool swizzle, int start_col) {
  alarm(20);  // a load that never completes its barrier would spin forever
  const size_t bytes = size_t(kRows) * kCols * element_bytes;
  std::vector<uint8_t> host(bytes);
  for (size_t i = 0; i < bytes; ++i) host[i] = uint8_t(i * 7 + i / 251);
  void* matrix = nullptr;
  uint8_t* landed = nullptr;
  cudaMalloc(&matrix, bytes);
  cudaMalloc(&landed, kBoxBytes);
  cudaMemcpy(matrix, host.data(), bytes, cudaMemcpyHostToDevice);
  int* flag = nullptr;
  int sm90a = 0;
  cudaMalloc(&flag, sizeof(int));
  runs_sm90a_code<<<1, 1>>>(flag);
  cudaMemcpy(&sm90a, flag, sizeof(int), cudaMemcpyDeviceToHost);
  if (sm90a != 1) {
    printf("not running sm_90a code (%s): build with -arch=sm_90a for an sm_90 GPU\n",
           cudaGetErrorString(cudaGetLastError()));
    fflush(stdout);
    return 2;
  }
  void* encode = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &encode, 12000, cudaEnableDefault, &found);
  CUtensorMap map{};
  const cuuint64_t dims[3] = {kCols, kRows, 1}, strides[2] = {uint64_t(kCols) * element_bytes,
                                                              uint64_t(kCols) * kRows * element_bytes};
  const cuuint32_t box[3] = {cuuint32_t(kBoxBytes / element_bytes), 1, 1}, unit[3] = {1, 1, 1};
  const CUresult encoded = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(encode)(
      &map, element_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, matrix,
      dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
      swizzle ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_NONE,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (encoded != CUDA_SUCCESS) {
    printf("encode refused the map: %d\n", int(encoded));
    fflush(stdout);
    return 2;
  }
  load_one_box<<<1, 32>>>(map, start_col, landed);
  cudaError_t ran = cudaGetLastError();
  if (ran == cudaSuccess) ran = cudaDeviceSynchronize();
  bool same = false;
  if (ran == cudaSuccess) {
    uint8_t got[kBoxBytes];
    cudaMemcpy(got, landed, kBoxBytes, cudaMemcpyDeviceToHost);
    same = std::memcmp(got, host.data() + (size_t(kRow) * kCols + start_col) * element_bytes, kBoxBytes) == 0;
  }
  printf("%-4s %-10s start column %d (%2d bytes in): %s%s\n", element_bytes == 4 ? "fp32" : "bf16",
         swizzle ? "swizzled" : "unswizzled", start_col, start_col * element_bytes, cudaGetErrorString(ran),
         ran == cudaSuccess && !same ? ", but the box holds other bytes" : "");
  fflush(stdout);
  return ran != cudaSuccess || !same;
}

}  // namespace

int main() {
  int failed_on_16 = 0, failed_off_16 = 0, cases_off_16 = 0, other = 0;
  for (const int element_bytes : {4, 2})
    for (const bool swizzle : {false, true})
      for (int col = 0; col * element_bytes <= 16; ++col) {
        const pid_t child = fork();
        if (child == 0) _exit(run_case(element_bytes, swizzle, col));
        int status = 0;
        waitpid(child, &status, 0);
        const bool off_16 = col * element_bytes % 16 != 0;
        cases_off_16 += off_16;
        if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) {  // killed (the alarm: a hung load) or not run
          printf("  (that case did not run to the end: %s)\n", WIFSIGNALED(status) ? "killed" : "see above");
          ++other;
        } else if (WEXITSTATUS(status) == 1) {
          ++(off_16 ? failed_off_16 : failed_on_16);
        }
      }
  printf("loads that failed: %d of those starting on a 16-byte multiple, %d of the %d starting off one; "
         "%d cases did not finish\n", failed_on_16, failed_off_16, cases_off_16, other);
  return other != 0;
}
