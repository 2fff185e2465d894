// cp.async (sm_80 and later): copies from global to shared memory that bypass registers, in groups a
// thread commits and later waits for. The mma.sync kernels fill their tiles with them, and the Hopper
// TF32 kernel copies the operands TMA cannot address (bmm/hopper_tf32_kernel.cuh).
#pragma once

#include <cstdint>

namespace tiles::cuda::mma {

// Copies kBytes (16, 8 or 4) from global to shared memory, zero-filling past the first src_bytes.
template <int kBytes>
__device__ __forceinline__ void cp_async(void* smem, const void* gmem, int src_bytes) {
  const uint32_t dst = uint32_t(__cvta_generic_to_shared(smem));
  if constexpr (kBytes == 16)  // .cg (L2 only) exists for 16-byte copies alone
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(gmem), "r"(src_bytes));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(gmem), "n"(kBytes), "r"(src_bytes));
}
// The same to a shared-memory address (a 32-bit shared-window offset, as smem_addr gives), kBytes of 4 or 8.
template <int kBytes>
__device__ __forceinline__ void cp_async_shared(uint32_t dst, const void* gmem, int src_bytes) {
  static_assert(kBytes == 4 || kBytes == 8, "16-byte copies: cp_async");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;" ::"r"(dst), "l"(gmem), "n"(kBytes), "r"(src_bytes));
}
// The same, all kBytes from `gmem` (no zero fill: no source-size operand to compute).
template <int kBytes>
__device__ __forceinline__ void cp_async_shared(uint32_t dst, const void* gmem) {
  static_assert(kBytes == 4 || kBytes == 8, "16-byte copies: cp_async");
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" ::"r"(dst), "l"(gmem), "n"(kBytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
// Until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(kPending)); }

}  // namespace tiles::cuda::mma
