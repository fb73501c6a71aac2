// tma.cuh: Hopper's Tensor Memory Accelerator and the mbarriers it completes on
// (days 44 and 45 teach them; plain sm_90, no 'a' features here).
//
// The pattern: one thread arms an mbarrier with the bytes it expects and issues a bulk tensor
// copy global -> shared; the copy engine moves the box and counts the bytes down on that
// mbarrier; every thread that needs the data waits on the barrier's phase. Stores go the
// other way (shared -> global) in "bulk groups" that a thread commits and waits for.
//
// Tensor maps come from Python (common/tma.py), uploaded to device memory: kernels take
// `const CUtensorMap *` (pycuda cannot pass a map by value; see common/tma.py); here a map
// is just that address.
#pragma once
#include <cuda.h>      // CUtensorMap
#include <cstdint>

namespace cuda100 {
namespace tma {

__device__ __forceinline__ uint32_t smem_addr(const void *p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The 128-byte swizzle repeats every 1024 bytes: a swizzled tile starts on that grid, in the
// copy engine's view and in wgmma's. p rounded up to it (dynamic shared memory + 1024 spare).
__device__ __forceinline__ uint8_t *align1024(uint8_t *p) {
    const uint32_t a = smem_addr(p);
    return p + ((1024 - (a & 1023)) & 1023);
}

// --- mbarrier --------------------------------------------------------------------------------
// A 64-bit shared-memory object with an arrival count and a transaction (byte) count. A phase
// completes when `count` threads have arrived AND the expected bytes have landed; then the
// phase bit flips, and waiters on the old parity return.
__device__ __forceinline__ void mbar_init(uint64_t *bar, uint32_t count) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}

// Make initialised barriers visible to the async (copy engine) proxy and to the cluster.
__device__ __forceinline__ void fence_barrier_init() {
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive once and announce `bytes` more bytes that the copy engine will deliver this phase.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar) {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// Arrive on the barrier at the same offset in another block of the cluster (its rank).
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar, uint32_t cta_rank) {
    asm volatile("{\n\t.reg .b32 remote;\n\t"
                 "mapa.shared::cluster.u32 remote, %0, %1;\n\t"
                 "mbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}"
                 ::"r"(smem_addr(bar)), "r"(cta_rank) : "memory");
}

// Spin until the phase with this parity (0 or 1) has completed.
__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity) {
    asm volatile("{\n\t.reg .pred done;\n"
                 "WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
                 "@!done bra WAIT_%=;\n\t}"
                 ::"r"(smem_addr(bar)), "r"(parity) : "memory");
}

// --- bulk tensor copies ----------------------------------------------------------------------
// Coordinates are element indices, innermost dimension first (as the map's dims).
__device__ __forceinline__ void load_2d(void *dst, const void *map, uint64_t *bar, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(smem_addr(bar)), "r"(x), "r"(y)
                 : "memory");
}

// 3-D and 4-D boxes: the same instruction with more coordinates (signed 32-bit: a negative
// coordinate or one past the end reads zeros; day 60 makes a convolution's padding that way).
__device__ __forceinline__ void load_3d(void *dst, const void *map, uint64_t *bar, int c0, int c1,
                                        int c2) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "r"(c2)
                 : "memory");
}
__device__ __forceinline__ void load_4d(void *dst, const void *map, uint64_t *bar, int c0, int c1,
                                        int c2, int c3) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1),
                   "r"(c2), "r"(c3)
                 : "memory");
}

// The same box delivered to the same shared offset in every block of `mask` in the cluster
// (each of those blocks' barriers at `bar`'s offset counts the bytes).
__device__ __forceinline__ void load_2d_multicast(void *dst, const void *map, uint64_t *bar,
                                                  int x, int y, uint16_t mask) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;"
                 ::"r"(smem_addr(dst)), "l"(map), "r"(smem_addr(bar)), "r"(x), "r"(y), "h"(mask)
                 : "memory");
}

__device__ __forceinline__ void store_2d(const void *map, const void *src, int x, int y) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];"
                 ::"l"(map), "r"(smem_addr(src)), "r"(x), "r"(y) : "memory");
}

// 1-D bulk copies (no tensor map): 16-byte aligned addresses, a multiple of 16 bytes.
__device__ __forceinline__ void load_1d(void *dst, const void *src, uint32_t bytes, uint64_t *bar) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(dst)), "l"(src), "r"(bytes), "r"(smem_addr(bar)) : "memory");
}

__device__ __forceinline__ void store_1d(void *dst, const void *src, uint32_t bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(dst), "r"(smem_addr(src)), "r"(bytes) : "memory");
}

// Close the current group of bulk stores; then wait until at most N groups are still
// READING shared memory (the buffer may be reused) or, for wait_all, until all have landed.
__device__ __forceinline__ void store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
__device__ __forceinline__ void store_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Shared memory written by ordinary stores that the copy engine (or wgmma) reads next:
// each writing thread fences before the barrier that publishes the data.
__device__ __forceinline__ void fence_async_shared() {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// Hint the copy engine to fetch the map's descriptor early (once per block).
__device__ __forceinline__ void prefetch_map(const void *map) {
    asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}

// A tensor map's rows are a multiple of 16 bytes apart. For a [rows, K] matrix whose rows are
// not, a grid-stride copy into [rows, Kp] (Kp the next such multiple) with zeros after column K
// (days 45-49 run it before the GEMM when K is ragged; zeros add nothing to the products).
template <typename T>
__device__ __forceinline__ void pad_rows(const T *__restrict__ src, T *__restrict__ dst, int rows,
                                         int K, int Kp) {
    const size_t total = (size_t)rows * Kp;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / Kp), k = (int)(i % Kp);
        dst[i] = k < K ? src[(size_t)r * K + k] : static_cast<T>(0.f);
    }
}

}  // namespace tma
}  // namespace cuda100
