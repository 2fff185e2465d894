// Thin wrappers over the Hopper (sm_90a) PTX that the tensor-core bmm uses: mbarriers, TMA tensor
// loads, wgmma fences and shared-memory matrix descriptors, register reallocation.
//
// Every body is compiled only for sm_90a (__CUDA_ARCH_FEAT_SM90_ALL); on other targets the functions
// are empty, and the host never launches the kernels that call them (see bmm/hopper.cu).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TILES_SM90A_BODY(...) __VA_ARGS__
#else
#define TILES_SM90A_BODY(...)
#endif

namespace tiles::cuda::hopper {

// A shared-memory pointer as its 32-bit address in the shared window, which the PTX below takes. Each
// conversion of a generic pointer costs a few dependent instructions (reading the block's window
// base), so loops that run once a k-block take addresses computed once (the uint32_t overloads).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One 16-byte shared-memory store that stays one: in transpose_q_stage the compiler split three of a
// lane's eight float4 stores a box into four 4-byte ones each (the TF32 TN 256-wide kernel's PTX), and
// a quarter warp's 4-byte stores there hit 8 banks 4 times over: 140 store instructions a stage where 68
// do, 26.7 M bank conflicts on 4096^3 TN (ncu, H200), the kernel at 1.15x cuBLAS's time.
__device__ __forceinline__ void st_shared_v4(uint32_t addr, float4 v) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

// ---- mbarriers: a producer arrives once and the TMA unit adds the bytes it wrote; consumers wait on
// the phase parity. A fresh barrier is in phase 0, so waiting for parity 1 returns at once.

__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  TILES_SM90A_BODY(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals));)
}

// Makes the barriers' initialization visible to the TMA unit (the async proxy).
__device__ __forceinline__ void mbarrier_init_fence() {
  TILES_SM90A_BODY(asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");)
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  TILES_SM90A_BODY(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");)
}
__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  mbarrier_arrive_expect_tx(smem_addr(bar), bytes);
}

__device__ __forceinline__ void mbarrier_arrive(uint32_t bar) {
  TILES_SM90A_BODY(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");)
}
__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) { mbarrier_arrive(smem_addr(bar)); }

__device__ __forceinline__ void mbarrier_wait(uint32_t bar, uint32_t parity) {
  TILES_SM90A_BODY(
      uint32_t done = 0;
      do {
        asm volatile(
            "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
            : "=r"(done) : "r"(bar), "r"(parity) : "memory");
      } while (!done);)
}
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) { mbarrier_wait(smem_addr(bar), parity); }

// ---- Thread block clusters of two (the 16-bit bmm's paired blocks): the block's rank in its cluster,
// a barrier over every thread of the cluster (not `.aligned`: threads of one warp may reach it apart),
// and an arrival on the mbarrier at `bar`'s offset in the other block of the pair. The arrival keeps
// PTX's default semantics (release at CTA scope), which is all a consumer needs to tell the peer's
// producer that this block's wgmmas have finished reading a stage: the wgmma wait already ordered
// those reads. The branch hopper-pairs arrived with `.release.cluster` (and spilled its producer):
// its pairs ran at about half the single blocks' speed, these at 0.8-1.1x (benchmarks/NOTES.md, "Pairs
// and the producer's k-block").

__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank = 0;
  TILES_SM90A_BODY(asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));)
  return rank;
}

__device__ __forceinline__ void cluster_sync() {
  TILES_SM90A_BODY(asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");)
}

__device__ __forceinline__ void mbarrier_arrive_peer(uint32_t bar, uint32_t peer_rank) {
  TILES_SM90A_BODY(
      uint32_t remote;
      asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(bar), "r"(peer_rank));
      asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");)
}

// ---- TMA: copy one box of a 3-D tensor map at (c0, c1, c2) into shared memory, completing on `bar`.
// Elements outside the tensor are written as zeros and still count towards the barrier's bytes.

__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  TILES_SM90A_BODY(asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");)
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  tma_load_3d(smem_addr(dst), map, smem_addr(bar), c0, c1, c2);
}

// The same box written at the same offset into the shared memory of both blocks of a pair, completing
// on each one's barrier at `bar`'s offset.
__device__ __forceinline__ void tma_load_3d_to_pair(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                                    int c2) {
  TILES_SM90A_BODY(asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5}], [%2], %6;"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2), "h"(uint16_t(0b11)) : "memory");)
}

// The reverse: one box from shared memory to the tensor at (c0, c1, c2); parts outside it are dropped.
// Completes asynchronously, tracked per thread as bulk groups.
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  TILES_SM90A_BODY(asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
      ::"l"(map), "r"(smem_addr(src)), "r"(c0), "r"(c1), "r"(c2) : "memory");)
}
__device__ __forceinline__ void bulk_commit() {
  TILES_SM90A_BODY(asm volatile("cp.async.bulk.commit_group;" ::: "memory");)
}
// Until all but this thread's `kPending` most recent store groups have finished reading shared
// memory (their sources may be rewritten).
template <int kPending = 0>
__device__ __forceinline__ void bulk_wait_read() {
  TILES_SM90A_BODY(asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");)
}
// Orders this thread's ordinary shared-memory writes before later TMA (async proxy) reads of them.
__device__ __forceinline__ void fence_async_shared() {
  TILES_SM90A_BODY(asm volatile("fence.proxy.async.shared::cta;" ::: "memory");)
}
// A barrier for `threads` threads (a warpgroup) under id `id` (0 is __syncthreads').
__device__ __forceinline__ void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void tma_prefetch_descriptor(const CUtensorMap* map) {
  TILES_SM90A_BODY(asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");)
}

// ---- wgmma ordering: fence before the first wgmma that touches registers written by ordinary
// instructions; commit the issued wgmmas as a group; wait until at most N groups are pending.

__device__ __forceinline__ void wgmma_fence() {
  TILES_SM90A_BODY(asm volatile("wgmma.fence.sync.aligned;" ::: "memory");)
}
__device__ __forceinline__ void wgmma_commit() {
  TILES_SM90A_BODY(asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");)
}
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  TILES_SM90A_BODY(asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");)
}

// Keeps the compiler from moving accesses to the accumulators across a wgmma fence/wait.
__device__ __forceinline__ void fence_registers(float* acc, int count) {
  for (int i = 0; i < count; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}

// ---- Register reallocation between warpgroups (needs a register cap at entry: __launch_bounds__(n, 1)).
template <int kRegs>
__device__ __forceinline__ void registers_decrease() {
  TILES_SM90A_BODY(asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));)
}
template <int kRegs>
__device__ __forceinline__ void registers_increase() {
  TILES_SM90A_BODY(asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));)
}

// ---- Shared-memory matrix descriptor for wgmma, for tiles stored with the 128-byte swizzle (rows of
// 128 bytes, groups of 8 rows 1024 bytes apart). Byte offsets are stored divided by 16.
//   stride_bytes:  between groups of 8 rows (1024 for densely stored rows)
//   leading_bytes: for MN-major tiles, between the 64-element column blocks along M or N; unused for
//                  K-major tiles whose K extent fits in one 128-byte row
__device__ __forceinline__ uint64_t smem_descriptor(uint32_t tile, uint32_t leading_bytes, uint32_t stride_bytes) {
  uint64_t desc = (tile & 0x3FFFF) >> 4;
  desc |= uint64_t((leading_bytes >> 4) & 0x3FFF) << 16;
  desc |= uint64_t((stride_bytes >> 4) & 0x3FFF) << 32;
  desc |= uint64_t(1) << 62;  // swizzle mode 1: 128-byte swizzle
  return desc;
}
__device__ __forceinline__ uint64_t smem_descriptor(const void* tile, uint32_t leading_bytes, uint32_t stride_bytes) {
  return smem_descriptor(smem_addr(tile), leading_bytes, stride_bytes);
}

}  // namespace tiles::cuda::hopper
