// Host emulation of the CUDA features days 15 and 20's kernel.cu use, so their index
// arithmetic can be executed (and checked against float64) on a machine without a GPU.
//
// Each block runs as blockDim.x std::threads; blocks run one after another, so a function's
// `__shared__` array (made `static` here) is the block's shared memory. __syncthreads and
// __syncwarp are std::barriers; __shfl_xor_sync exchanges through a per-warp array between two
// warp barriers. What this does NOT model: memory ordering between threads without a barrier
// (real threads run, so a missing barrier can show up, but not reliably), the register budget,
// timing. Used by .notes/day15_20_emulate.py; not part of the project's build.
#pragma once
#include <barrier>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct emu_uint3 {
    unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline thread_local emu_uint3 threadIdx;
inline emu_uint3 blockIdx;
inline dim3 gridDim, blockDim;

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long min(long a, long b) { return a < b ? a : b; }
inline long max(long a, long b) { return a > b ? a : b; }

template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline void __stcs(T* p, T v) { *p = v; }
template <class T>
inline T __ldg(const T* p) { return *p; }

inline std::mutex emu_atomic_mutex;
inline float atomicAdd(float* p, float v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    const float old = *p;
    *p = old + v;
    return old;
}

// --- barriers and shuffles ------------------------------------------------------------------
inline std::unique_ptr<std::barrier<>> emu_block_barrier;
inline std::vector<std::unique_ptr<std::barrier<>>> emu_warp_barriers;
inline float emu_shfl_buf[32][32];

inline void __syncthreads() { emu_block_barrier->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp_barriers[threadIdx.x / 32]->arrive_and_wait(); }

inline float __shfl_xor_sync(unsigned, float v, int o) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    emu_shfl_buf[w][l] = v;
    __syncwarp();
    const float r = emu_shfl_buf[w][l ^ o];
    __syncwarp();  // every lane has read before the next exchange writes
    return r;
}

// Run `body` (a call of one kernel with its arguments) as grid x block threads, block by block.
inline void emu_launch(dim3 grid, dim3 block, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    const int nthreads = block.x * block.y * block.z;
    const int nwarps = (nthreads + 31) / 32;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                emu_block_barrier = std::make_unique<std::barrier<>>(nthreads);
                emu_warp_barriers.clear();
                for (int w = 0; w < nwarps; ++w)
                    emu_warp_barriers.push_back(std::make_unique<std::barrier<>>(
                        std::min(32, nthreads - 32 * w)));
                std::vector<std::thread> threads;
                threads.reserve(nthreads);
                for (int t = 0; t < nthreads; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                        body();
                        // an exited thread no longer holds up the barriers of the others
                        emu_warp_barriers[t / 32]->arrive_and_drop();
                        emu_block_barrier->arrive_and_drop();
                    });
                for (auto& th : threads) th.join();
            }
}
