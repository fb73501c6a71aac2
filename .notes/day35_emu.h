// Host emulation of what day 35's kernel.cu uses, so its index arithmetic, its barriers and v4's
// arrival protocol can run (and be checked against float64) on a machine without a GPU.
//
// Unlike .notes/day15_20_emu.h, the blocks of a launch can run CONCURRENTLY (v4's last blocks
// wait for the others): every block is blockDim.x std::threads, `conc` blocks at a time. So
// blockIdx is thread-local and shared memory is per block: day35_emulate.py rewrites each
// `__shared__ T name[...]` into a slice of a per-block array (emu_block_slot()). Named barriers
// (bar.sync id, count) become per-block std::barriers created on first use. Atomics are GCC
// __atomic builtins, __threadfence a seq_cst fence. What this does NOT model: the register
// budget, timing, the weaker ordering of real GPU memory.
#pragma once
#include <barrier>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
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

struct emu_uint3 {
    unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline thread_local emu_uint3 threadIdx;
inline thread_local emu_uint3 blockIdx;
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

template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldcg(const T* p) { return *p; }
template <class T>
inline T __ldg(const T* p) { return *p; }

inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline unsigned atomicExch(unsigned* p, unsigned v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }

// --- per-block state ----------------------------------------------------------------------------
struct EmuBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::map<int, std::unique_ptr<std::barrier<>>> named;
    std::mutex named_mutex;
    float shfl[32][32];
    std::vector<unsigned char> smem;  // static + dynamic shared memory of the block
    size_t smem_used = 0;
    std::mutex smem_mutex;
    std::map<const void*, size_t> smem_offsets;  // one slot per __shared__ declaration
};
inline thread_local EmuBlock* emu_this_block = nullptr;
constexpr size_t EMU_DYNAMIC = 256 * 1024;  // dynamic shared memory at the start of smem

// the slot of one `__shared__` declaration (identified by a static tag) in this block
template <class T>
inline T* emu_block_slot(const void* tag, size_t count) {
    EmuBlock* b = emu_this_block;
    std::lock_guard<std::mutex> g(b->smem_mutex);
    auto it = b->smem_offsets.find(tag);
    if (it == b->smem_offsets.end()) {
        size_t off = (EMU_DYNAMIC + b->smem_used + 15) & ~size_t(15);
        b->smem_used = off - EMU_DYNAMIC + count * sizeof(T);
        if (off + count * sizeof(T) > b->smem.size()) {
            fprintf(stderr, "emu: static shared memory overflow\n");
            std::abort();
        }
        it = b->smem_offsets.emplace(tag, off).first;
    }
    return reinterpret_cast<T*>(b->smem.data() + it->second);
}
inline float4* emu_dynamic_smem() { return reinterpret_cast<float4*>(emu_this_block->smem.data()); }

inline void __syncthreads() { emu_this_block->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_this_block->warps[threadIdx.x / 32]->arrive_and_wait(); }
inline void emu_bar_sync(int id, int count) {
    EmuBlock* b = emu_this_block;
    std::barrier<>* bar;
    {
        std::lock_guard<std::mutex> g(b->named_mutex);
        auto& p = b->named[id];
        if (!p) p = std::make_unique<std::barrier<>>(count);
        bar = p.get();
    }
    bar->arrive_and_wait();
}

inline float __shfl_xor_sync(unsigned, float v, int o) {
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    emu_this_block->shfl[w][l] = v;
    __syncwarp();
    const float r = emu_this_block->shfl[w][l ^ o];
    __syncwarp();  // every lane has read before the next exchange writes
    return r;
}

// Run `body` (a call of one kernel with its arguments) as grid x block threads, `conc` blocks at
// a time (conc >= grid.x: all blocks at once, as v4's waiting blocks need).
inline void emu_launch(dim3 grid, dim3 block, int conc, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    const int nthreads = block.x;
    const int nwarps = (nthreads + 31) / 32;
    for (unsigned b0 = 0; b0 < grid.x; b0 += conc) {
        const unsigned b1 = std::min<unsigned>(grid.x, b0 + conc);
        std::vector<std::unique_ptr<EmuBlock>> blocks;
        for (unsigned b = b0; b < b1; ++b) {
            auto eb = std::make_unique<EmuBlock>();
            eb->block = std::make_unique<std::barrier<>>(nthreads);
            for (int w = 0; w < nwarps; ++w)
                eb->warps.push_back(std::make_unique<std::barrier<>>(std::min(32, nthreads - 32 * w)));
            eb->smem.assign(EMU_DYNAMIC + 64 * 1024, 0xFF);  // poisoned: unwritten smem reads NaN
            blocks.push_back(std::move(eb));
        }
        std::vector<std::thread> threads;
        for (unsigned b = b0; b < b1; ++b)
            for (int t = 0; t < nthreads; ++t)
                threads.emplace_back([&, b, t] {
                    EmuBlock* eb = blocks[b - b0].get();
                    emu_this_block = eb;
                    blockIdx = {b, 0, 0};
                    threadIdx = {(unsigned)t, 0, 0};
                    body();
                    // an exited thread no longer holds up the barriers of the others
                    eb->warps[t / 32]->arrive_and_drop();
                    eb->block->arrive_and_drop();
                });
        for (auto& th : threads) th.join();
    }
}
