// Running day 9's and day 10's kernel.cu on the CPU, to execute their index arithmetic without a
// GPU (.notes/day09_10_emulate.py builds and drives it; not part of the project's build).
//
// A launch runs its blocks one after another; a block runs as one std::thread per CUDA thread.
// __syncthreads is a barrier of the block's threads, __syncwarp one of the warp's, and
// __shfl_xor_sync trades values through a per-warp array between two warp barriers. The sm_90
// pieces of day 9 (mbarrier, cp.async.bulk) are replaced by emulate.py with calls into this
// file: a bulk copy is a memcpy done at once, an mbarrier a phase counter with its pending
// arrivals and bytes. Built with AddressSanitizer and UBSan, so a read or write outside an
// array (global or shared) or a float4 access at an address that is not 16-byte aligned stops
// the run. Not modelled: timing, registers, memory ordering without a barrier.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) alignas(n)

struct emu_dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline thread_local emu_dim3 threadIdx;
inline emu_dim3 blockIdx, blockDim, gridDim;

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

using std::max;
using std::min;

template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldg(const T* p) { return *p; }
template <class T>
inline void __stcs(T* p, T v) { *p = v; }
inline float __fdividef(float a, float b) { return a / b; }
inline float rsqrtf(float v) { return 1.f / std::sqrt(v); }
inline uint64_t __cvta_generic_to_shared(const void* p) { return (uint64_t)(uintptr_t)p; }

// --- the block and its warps ---------------------------------------------------------------
struct EmuWarp {
    std::barrier<> bar{32};
    uint64_t buf[32];
};
struct EmuBlock {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<EmuWarp>> warps;
};
inline EmuBlock* emu_block = nullptr;
inline thread_local EmuWarp* emu_warp = nullptr;

inline void __syncthreads() { emu_block->bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); }

template <class T>
inline T __shfl_xor_sync(unsigned, T v, int o) {
    static_assert(sizeof(T) <= 8);
    const int lane = (threadIdx.x + threadIdx.y * blockDim.x) & 31;
    std::memcpy(&emu_warp->buf[lane], &v, sizeof(T));
    emu_warp->bar.arrive_and_wait();
    T r;
    std::memcpy(&r, &emu_warp->buf[lane ^ o], sizeof(T));
    emu_warp->bar.arrive_and_wait();
    return r;
}
template <class T>
inline T __shfl_sync(unsigned, T v, int src) {
    const int lane = (threadIdx.x + threadIdx.y * blockDim.x) & 31;
    std::memcpy(&emu_warp->buf[lane], &v, sizeof(T));
    emu_warp->bar.arrive_and_wait();
    T r;
    std::memcpy(&r, &emu_warp->buf[src & 31], sizeof(T));
    emu_warp->bar.arrive_and_wait();
    return r;
}

// Dynamic shared memory of the current launch (allocated at its exact size: ASan sees overruns)
inline unsigned char* emu_dyn_smem = nullptr;

// --- mbarrier and bulk copies ----------------------------------------------------------------
struct EmuBar {
    unsigned expected = 0, pending = 0, phase = 0;
    long long tx = 0;
};
inline std::mutex emu_bar_mutex;
inline std::unordered_map<const void*, EmuBar> emu_bars;
// the global ranges a bulk copy may read (the x array of the launch)
inline const unsigned char* emu_bulk_lo = nullptr;
inline const unsigned char* emu_bulk_hi = nullptr;

inline void emu_fail(const char* what) {
    std::fprintf(stderr, "EMULATION ERROR: %s\n", what);
    std::abort();
}

inline void emu_complete(EmuBar& b) {
    if (b.pending == 0 && b.tx == 0) {
        b.phase += 1;
        b.pending = b.expected;
    }
}

inline void emu_mbar_init(uint64_t* bar, unsigned count) {
    std::lock_guard<std::mutex> g(emu_bar_mutex);
    emu_bars[bar] = EmuBar{count, count, 0, 0};
}

inline EmuBar& emu_bar_of(const void* bar) {
    auto it = emu_bars.find(bar);
    if (it == emu_bars.end()) emu_fail("mbarrier used before mbarrier.init");
    return it->second;
}

inline void emu_mbar_arrive(uint64_t* bar) {
    std::lock_guard<std::mutex> g(emu_bar_mutex);
    EmuBar& b = emu_bar_of(bar);
    if (b.pending == 0) emu_fail("mbarrier arrive with no pending arrival");
    b.pending -= 1;
    emu_complete(b);
}

inline void emu_bulk_load(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
    std::lock_guard<std::mutex> g(emu_bar_mutex);
    if (bytes == 0 || bytes % 16) emu_fail("cp.async.bulk size must be a positive multiple of 16");
    if ((uintptr_t)dst % 16 || (uintptr_t)src % 16) emu_fail("cp.async.bulk address not 16-byte aligned");
    const auto* s = static_cast<const unsigned char*>(src);
    if (s < emu_bulk_lo || s + bytes > emu_bulk_hi) emu_fail("cp.async.bulk reads outside x");
    EmuBar& b = emu_bar_of(bar);
    if (b.pending == 0) emu_fail("expect_tx arrive with no pending arrival");
    b.tx += bytes;                 // mbarrier.arrive.expect_tx
    b.pending -= 1;
    std::memcpy(dst, src, bytes);  // the copy lands ...
    b.tx -= bytes;                 // ... complete_tx
    emu_complete(b);
}

inline void emu_mbar_wait(uint64_t* bar, uint32_t parity) {
    for (long spin = 0;; ++spin) {
        {
            std::lock_guard<std::mutex> g(emu_bar_mutex);
            if ((emu_bar_of(bar).phase & 1u) != parity) return;
        }
        if (spin > 2000000) emu_fail("mbarrier wait never completes");
        std::this_thread::yield();
    }
}

// --- launching ---------------------------------------------------------------------------------
// Runs kernel(args...) on a grid of blocks, one block after another, each as blockDim threads.
template <class... Args>
void emu_launch(void (*kernel)(Args...), emu_dim3 grid, emu_dim3 block, size_t smem,
                Args... args) {
    gridDim = grid;
    blockDim = block;
    const unsigned nthreads = block.x * block.y * block.z;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                EmuBlock blk;
                blk.bar = std::make_unique<std::barrier<>>(nthreads);
                for (unsigned w = 0; w < (nthreads + 31) / 32; ++w)
                    blk.warps.push_back(std::make_unique<EmuWarp>());
                if (nthreads % 32) emu_fail("blocks must be whole warps here");
                emu_block = &blk;
                void* dyn = nullptr;
                if (smem && posix_memalign(&dyn, 128, smem)) emu_fail("no memory");
                emu_dyn_smem = static_cast<unsigned char*>(dyn);
                {
                    std::lock_guard<std::mutex> g(emu_bar_mutex);
                    emu_bars.clear();
                }
                std::vector<std::thread> threads;
                for (unsigned t = 0; t < nthreads; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        emu_warp = blk.warps[t / 32].get();
                        kernel(args...);
                    });
                for (auto& th : threads) th.join();
                std::free(dyn);
                emu_dyn_smem = nullptr;
            }
}
