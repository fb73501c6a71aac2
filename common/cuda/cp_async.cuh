// cp.async: Ampere's asynchronous copy from global to shared memory (taught on day 43,
// async_copy_pipeline; sgemm.cuh (day 25) and flash_attention.cuh (day 26) use these too).
//
// One cp.async moves 4, 8 or 16 bytes from global memory straight into shared memory: no
// register receives the data, and the issuing thread goes on at once. Copies are grouped:
//
//     cp_async16(dst, src, valid);   ... more copies ...
//     cp_async_commit();             // close the group of this thread's copies since the last commit
//     cp_async_wait<N>();            // block until at most N of this thread's groups are in flight
//     __syncthreads();               // then every thread's copies have landed: read the tile
//
// The wait covers only the calling thread's copies; the barrier after it makes all of them
// visible to the block. valid = false writes zeros and reads nothing (src-size 0): the zero fill
// of tiles that run past a matrix edge. src must still be a valid global address then (pass the
// matrix base pointer).
//
//   cp_async16: .cg (cache in L2 only, bypass L1): streamed GEMM/attention tiles are read once
//               per block, L1 would only be polluted; 16-byte aligned src and dst.
//   cp_async8 / cp_async4: .ca (L1 and L2; .cg allows only 16 bytes); 8/4-byte aligned.
//
// The asm statements are volatile (never dropped, never reordered against each other or against
// __syncthreads) and carry no "memory" clobber, as the copies in sgemm.cuh and
// flash_attention.cuh had: the pattern wait -> __syncthreads -> read is what orders the reads.
//
// The host emulator of the GEMM days (.notes/day41_43_emu.h) defines CUDA100_EMULATED_PTX and
// supplies these functions itself; everything else in this file is plain C++.
#pragma once

#include <stdint.h>

namespace cuda100 {

#ifndef CUDA100_EMULATED_PTX
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// dst given as a 32-bit shared-window address (what __cvta_generic_to_shared returns)
__device__ __forceinline__ void cp_async16_u32(uint32_t dst, const void* src, bool valid) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
                 "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
    cp_async16_u32(smem_u32(dst), src, valid);
}
__device__ __forceinline__ void cp_async8(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 8 : 0));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, bool valid) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// at most N of this thread's committed groups still in flight (N = 0: all landed)
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

}  // namespace cuda100
