// Can TMA load an operand whose row stride is not a multiple of 16 bytes (an odd K, M or N), one row per
// request, fast enough to feed the Hopper kernels instead of the TF32 kernel's cp.async copies
// (bmm/hopper_tf32_copies.cuh) or the 16-bit operands' mma.sync path?
//
// TMA wants a 16-byte-aligned base and strides. Rows r and r + R of a matrix are 16 * ld bytes apart for
// R = 16 / element size (4 in float32, 8 in 16-bit), so the rows with one residue r = row % R form a
// matrix TMA can describe: base = row r's start rounded down to 16 bytes, its columns shifted by the
// `shift` elements that rounding added (never requested: a request starts at column c + shift), row
// stride R * ld. R such maps reach every row; a tile is loaded one row (one 128-byte box) per request,
// into the rows the full-box load would fill. Two questions, one run each (a GPU with sm_90a):
//   1. Correctness, float32 and bf16: the tiles land where a [128 bytes][128 row] box with the 128-byte
//      swizzle would put them, zeros past the matrix's edges (the swizzle follows the shared-memory
//      address, so a one-row box written 128 bytes into a 1024-byte-aligned tile lands as the full box's
//      row would), with odd strides, an odd base and boxes that start off 16 bytes.
//   2. Rate: 128 requests per 16 KiB tile against one, streaming L2-resident tiles on every SM, in
//      requests per SM per microsecond. Full speed in TF32 (~340 TFLOP/s, 128 x 256 tiles of 32 k: 2.1
//      MFLOP, ~0.8 us on one of 132 SMs) needs R's 16 KiB every ~0.8 us: ~160 row requests per
//      SM-microsecond, ~470 with Q's 32 KiB loaded by rows as well.
// Barriers and TMA loads through the kernels' own wrappers (bmm/sm90_ptx.cuh).
//   nvcc -arch=sm_90a -O2 -I csrc -o /tmp/tma_rows tools/probes/tma_rows.cu && /tmp/tma_rows
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/bmm/sm90_ptx.cuh"

namespace {

using namespace tiles::cuda::hopper;

constexpr int kTileRows = 128, kRowBytes = 128, kTileBytes = kTileRows * kRowBytes, kStages = 4;

struct RowMaps {
  CUtensorMap map[8];  // rows with row % residues == r
  int shift[8];        // columns the rounded-down base adds in front of row r
  int residues;        // 16 / element size
};

__device__ uint8_t* align_1024(uint8_t* p) {
  return p + ((1024 - (smem_addr(p) % 1024)) % 1024);
}

// The tile at (row0, col0) row by row: warp 0's lanes issue 4 requests each.
__device__ void load_tile_rows(uint8_t* tile, const RowMaps& maps, uint64_t* bar, int row0, int col0) {
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < kTileRows; i += 32) {
    const int row = row0 + i, r = row % maps.residues;
    tma_load_3d(tile + i * kRowBytes, &maps.map[r], bar, col0 + maps.shift[r], row / maps.residues, 0);
  }
}

// T: float, or uint16_t for bf16's bits (compared as bits).
template <class T>
__global__ void check_rows(const __grid_constant__ RowMaps maps, const T* g, int64_t ld, int rows, int cols,
                           int row0, int col0, unsigned* bad) {
  extern __shared__ uint8_t raw[];
  __shared__ uint64_t bar;
  uint8_t* tile = align_1024(raw);
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) mbarrier_arrive_expect_tx(&bar, kTileBytes);
  if (threadIdx.x < 32) load_tile_rows(tile, maps, &bar, row0, col0);
  mbarrier_wait(&bar, 0);
  constexpr int kCols = kRowBytes / sizeof(T), kPerChunk = 16 / sizeof(T);
  for (int e = threadIdx.x; e < kTileRows * kCols; e += blockDim.x) {
    const int i = e / kCols, c = e % kCols, row = row0 + i, col = col0 + c;
    const T want = row < rows && col < cols ? g[int64_t(row) * ld + col] : T(0);
    const int at = i * kRowBytes + (((c / kPerChunk) ^ (i % 8)) * 16) + (c % kPerChunk) * int(sizeof(T));
    if (*reinterpret_cast<const T*>(tile + at) != want) atomicAdd(bad, 1u);
  }
}

// Streams `tiles` tiles per block through a ring of kStages, up to kStages in flight; nothing computes.
// whole_box: one [32][128] request a tile from maps.map[0] (an aligned matrix), else the tile row by row.
__global__ void stream_tiles(const __grid_constant__ RowMaps maps, bool whole_box, int tiles, int row_tiles,
                             int col_tiles) {
  extern __shared__ uint8_t raw[];
  __shared__ uint64_t full[kStages];
  uint8_t* ring = align_1024(raw);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) mbarrier_init(&full[s], 1);
    mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x >= 32) return;
  for (int t = 0; t < tiles; ++t) {
    const int s = t % kStages;
    if (t >= kStages) mbarrier_wait(&full[s], (t / kStages - 1) % 2);
    __syncwarp();
    const int tile = (blockIdx.x + t * gridDim.x) % (row_tiles * col_tiles);
    const int row0 = (tile / col_tiles) * kTileRows, col0 = (tile % col_tiles) * (kRowBytes / 4);
    if (threadIdx.x == 0) mbarrier_arrive_expect_tx(&full[s], kTileBytes);
    if (whole_box) {
      if (threadIdx.x == 0) tma_load_3d(ring + s * kTileBytes, &maps.map[0], &full[s], col0, row0, 0);
    } else {
      load_tile_rows(ring + s * kTileBytes, maps, &full[s], row0, col0);
    }
  }
  for (int t = tiles - kStages; t < tiles; ++t)
    if (t >= 0) mbarrier_wait(&full[t % kStages], (t / kStages) % 2);
}

PFN_cuTensorMapEncodeTiled_v12000 encode() {
  void* f = nullptr;
  cudaDriverEntryPointQueryResult found{};
  cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &found);
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
}

// A [1][rows][cols] map (3-D, as the kernels' maps are) with row stride row_bytes and boxes of box_rows rows.
CUtensorMap map_2d(const void* base, int element_bytes, uint64_t cols, uint64_t rows, uint64_t row_bytes,
                   uint32_t box_rows) {
  CUtensorMap m{};
  const cuuint64_t dims[3] = {cols, rows, 1}, strides[2] = {row_bytes, row_bytes * rows};
  const cuuint32_t box[3] = {cuuint32_t(kRowBytes / element_bytes), box_rows, 1}, unit[3] = {1, 1, 1};
  const CUtensorMapDataType type = element_bytes == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const CUresult r = encode()(&m, type, 3, const_cast<void*>(base), dims, strides, box, unit,
                              CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                              CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) printf("cuTensorMapEncodeTiled failed: %d\n", int(r));
  return m;
}

// The residue maps of a [rows][cols] matrix of T with row stride ld (elements), rows >= 16 / sizeof(T).
template <class T>
RowMaps row_maps(const T* g, int64_t ld, int rows, int cols) {
  RowMaps maps{};
  maps.residues = 16 / int(sizeof(T));
  for (int r = 0; r < maps.residues; ++r) {
    const uintptr_t start = uintptr_t(g + int64_t(r) * ld), base = start & ~uintptr_t(15);
    maps.shift[r] = int((start - base) / sizeof(T));
    maps.map[r] = map_2d(reinterpret_cast<const void*>(base), int(sizeof(T)), uint64_t(cols + maps.shift[r]),
                         uint64_t((rows - r + maps.residues - 1) / maps.residues), uint64_t(16 * ld), 1);
  }
  return maps;
}

// Tiles at the corners and edges of a [rows][cols] matrix of T with row stride ld at an odd base, against
// the matrix; returns the wrong elements.
template <class T>
unsigned check_matrix(int64_t ld, int rows, int cols, int smem_bytes) {
  std::vector<T> host(size_t(rows) * ld);
  for (size_t i = 0; i < host.size(); ++i) host[i] = T(i % 9973 + 1);
  T* g = nullptr;
  cudaMalloc(&g, (host.size() + 16) * sizeof(T));
  T* shifted = g + 1;  // an odd base as well (element-aligned)
  cudaMemcpy(shifted, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  unsigned* bad = nullptr;
  cudaMalloc(&bad, sizeof(unsigned));
  const RowMaps maps = row_maps(shifted, ld, rows, cols);
  const int tile_cols = kRowBytes / int(sizeof(T));
  unsigned total = 0;
  for (const int row0 : {0, 5, rows - kTileRows, rows - 58})
    for (const int col0 : {0, 3, cols - tile_cols + 8}) {
      cudaMemset(bad, 0, sizeof(unsigned));
      check_rows<T><<<1, 256, smem_bytes>>>(maps, shifted, ld, rows, cols, row0, col0, bad);
      unsigned n = 0;
      cudaMemcpy(&n, bad, sizeof(unsigned), cudaMemcpyDeviceToHost);
      total += n;
      if (n) printf("%d-byte elements, ld %lld, tile (%d, %d): %u wrong\n", int(sizeof(T)), (long long)ld, row0, col0, n);
    }
  cudaFree(bad);
  cudaFree(g);
  return total;
}

}  // namespace

int main() {
  const int rows = 2048, cols = 1000, smem_bytes = kStages * kTileBytes + 1024;
  cudaFuncSetAttribute(check_rows<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  cudaFuncSetAttribute(check_rows<uint16_t>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  cudaFuncSetAttribute(stream_tiles, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  unsigned total_bad = 0;
  for (const int64_t ld : {1001, 1003, 1005, 1024}) {  // odd strides, then an aligned one
    total_bad += check_matrix<float>(ld, rows, cols, smem_bytes);
    total_bad += check_matrix<uint16_t>(ld, rows, cols, smem_bytes);  // bf16's bits
  }
  printf("correctness: %u wrong elements (%s)\n", total_bad, cudaGetErrorString(cudaDeviceSynchronize()));

  int sms = 0, clock_khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
  const int tiles = 4000, big_rows = 4096, big_cols = 1024;  // 16 MiB: stays in L2
  float *odd = nullptr, *even = nullptr;
  cudaMalloc(&odd, size_t(big_rows) * 1027 * 4);
  cudaMalloc(&even, size_t(big_rows) * 1024 * 4);
  cudaMemset(odd, 0, size_t(big_rows) * 1027 * 4);
  cudaMemset(even, 0, size_t(big_rows) * 1024 * 4);
  RowMaps box{};
  box.map[0] = map_2d(even, 4, big_cols, big_rows, 1024 * 4, kTileRows);
  box.residues = 1;
  struct Variant {
    const char* name;
    RowMaps maps;
    bool whole_box;
  } variants[] = {{"one [32 x 128] box a tile (ld 1024)", box, true},
                  {"128 row requests a tile, ld 1024", row_maps<float>(even, 1024, big_rows, big_cols), false},
                  {"128 row requests a tile, ld 1027", row_maps<float>(odd, 1027, big_rows, big_cols), false}};
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  for (const Variant& v : variants) {
    for (int round = 0; round < 2; ++round) {  // the first warms up
      cudaEventRecord(start);
      stream_tiles<<<sms, 128, smem_bytes>>>(v.maps, v.whole_box, tiles, big_rows / kTileRows, big_cols / (kRowBytes / 4));
      cudaEventRecord(stop);
      cudaEventSynchronize(stop);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      if (round == 0) continue;
      const double us = ms * 1e3, requests = double(tiles) * (v.whole_box ? 1 : kTileRows);
      printf("%-38s %7.1f GB/s into shared memory, %6.1f tiles and %7.1f requests per SM-us (%.1f clocks a request)\n",
             v.name, double(sms) * tiles * kTileBytes / us / 1e3, tiles / us, requests / us,
             us * clock_khz / 1e3 / requests);
    }
  }
  printf("stream: %s\n", cudaGetErrorString(cudaDeviceSynchronize()));
  return total_bad != 0;
}
