// Host emulation of what day 57's kernel.cu uses, so its indexing, barriers, shared-memory
// atomics and v4's cluster protocol (distributed shared memory, cluster.sync) can run on a
// machine without a GPU (.notes/day57_emulate.py compiles kernel.cu against this header).
//
// Every CUDA thread is a std::thread; the blocks of one cluster run concurrently, clusters one
// after another. __syncthreads / __syncwarp / cluster.sync are std::barriers; a thread that
// returns drops out of all of them (as an exited thread no longer holds up a GPU barrier).
// Shared memory is a per-block byte array poisoned with 0xFF; day57_emulate.py rewrites every
// `__shared__` declaration into a slot of it (emu_block_slot), so map_shared_rank can turn an
// address of this block into the same offset in another block of the cluster. Shuffles go
// through a per-warp exchange buffer. Not modelled: timing, registers, the GPU's weaker memory
// ordering (every emulated access is sequentially consistent at the barriers).
#pragma once
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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
#define __cluster_dims__(...)
#define __restrict__ __restrict
#define __align__(n) alignas(n)

struct emu_uint3 {
    unsigned x = 0, y = 0, z = 0;
};
inline thread_local emu_uint3 threadIdx;
inline thread_local emu_uint3 blockIdx;
inline emu_uint3 gridDim, blockDim;

struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(16) ulonglong2 {
    unsigned long long x, y;
};

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned __float_as_uint(float f) {
    unsigned u;
    std::memcpy(&u, &f, 4);
    return u;
}
template <class T>
inline T __ldcs(const T* p) { return *p; }
template <class T>
inline T __ldg(const T* p) { return *p; }

inline unsigned atomicAdd(unsigned* p, unsigned v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

constexpr size_t EMU_DYNAMIC = 64 * 1024;   // dynamic shared memory: the first 64 KB
constexpr size_t EMU_SMEM = EMU_DYNAMIC + 16 * 1024;

struct EmuBlock {
    std::unique_ptr<std::barrier<>> block;
    std::vector<std::unique_ptr<std::barrier<>>> warps;
    std::barrier<>* cluster = nullptr;
    unsigned long long xchg[32][32];
    std::vector<unsigned char> smem;
    size_t used = 0;
    std::mutex m;
    std::map<const void*, size_t> slots;
};
inline thread_local EmuBlock* emu_this = nullptr;
inline std::vector<EmuBlock*> emu_blocks;   // the running cluster's blocks, by rank
inline unsigned emu_cluster = 1;

template <class T>
inline T* emu_block_slot(const void* tag, size_t count) {
    EmuBlock* b = emu_this;
    std::lock_guard<std::mutex> g(b->m);
    auto it = b->slots.find(tag);
    if (it == b->slots.end()) {
        const size_t off = (EMU_DYNAMIC + b->used + 15) & ~size_t(15);
        b->used = off - EMU_DYNAMIC + count * sizeof(T);
        if (off + count * sizeof(T) > b->smem.size()) {
            std::fprintf(stderr, "emu: static shared memory overflow\n");
            std::abort();
        }
        it = b->slots.emplace(tag, off).first;
    }
    return reinterpret_cast<T*>(b->smem.data() + it->second);
}
inline unsigned char* emu_dynamic_smem() { return emu_this->smem.data(); }

inline void __syncthreads() { emu_this->block->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_this->warps[threadIdx.x / 32]->arrive_and_wait(); }

template <class T>
inline T emu_shfl(T v, int src_of_lane(int lane, int arg), int arg) {
    static_assert(sizeof(T) <= 8, "shuffle of at most 8 bytes");
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    unsigned long long bits = 0;
    std::memcpy(&bits, &v, sizeof(T));
    emu_this->xchg[w][l] = bits;
    __syncwarp();
    bits = emu_this->xchg[w][src_of_lane(l, arg)];
    __syncwarp();   // every lane has read before the next exchange writes
    T r;
    std::memcpy(&r, &bits, sizeof(T));
    return r;
}
inline int emu_xor(int l, int o) { return l ^ o; }
inline int emu_up(int l, int d) { return l - d >= 0 ? l - d : l; }
template <class T>
inline T __shfl_xor_sync(unsigned, T v, int o) { return emu_shfl(v, emu_xor, o); }
template <class T>
inline T __shfl_up_sync(unsigned, T v, int d) { return emu_shfl(v, emu_up, d); }

namespace cooperative_groups {
struct cluster_group {
    unsigned block_rank() const { return blockIdx.x % emu_cluster; }
    void sync() const { emu_this->cluster->arrive_and_wait(); }
    template <class T>
    T* map_shared_rank(T* p, unsigned r) const {
        const unsigned char* base = emu_this->smem.data();
        const size_t off = reinterpret_cast<const unsigned char*>(p) - base;
        if (off >= emu_this->smem.size() || r >= emu_cluster) {
            std::fprintf(stderr, "emu: map_shared_rank of a non-shared address or rank %u\n", r);
            std::abort();
        }
        return reinterpret_cast<T*>(emu_blocks[r]->smem.data() + off);
    }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cooperative_groups

// Run `body` as grid x block threads, a cluster of `cluster` blocks at a time.
inline void emu_launch(unsigned grid, unsigned block, unsigned cluster,
                       const std::function<void()>& body) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    emu_cluster = cluster;
    if (grid % cluster) {
        std::fprintf(stderr, "emu: grid %u is not whole clusters of %u\n", grid, cluster);
        std::abort();
    }
    const int nw = (block + 31) / 32;
    for (unsigned b0 = 0; b0 < grid; b0 += cluster) {
        std::barrier<> cbar(cluster * block);
        std::vector<std::unique_ptr<EmuBlock>> blocks;
        emu_blocks.clear();
        for (unsigned r = 0; r < cluster; ++r) {
            auto eb = std::make_unique<EmuBlock>();
            eb->block = std::make_unique<std::barrier<>>(block);
            for (int w = 0; w < nw; ++w)
                eb->warps.push_back(std::make_unique<std::barrier<>>(std::min<int>(32, block - 32 * w)));
            eb->cluster = &cbar;
            eb->smem.assign(EMU_SMEM, 0xFF);
            emu_blocks.push_back(eb.get());
            blocks.push_back(std::move(eb));
        }
        std::vector<std::thread> threads;
        for (unsigned r = 0; r < cluster; ++r)
            for (unsigned t = 0; t < block; ++t)
                threads.emplace_back([&, r, t] {
                    EmuBlock* eb = blocks[r].get();
                    emu_this = eb;
                    blockIdx = {b0 + r, 0, 0};
                    threadIdx = {t, 0, 0};
                    body();
                    eb->warps[t / 32]->arrive_and_drop();
                    eb->block->arrive_and_drop();
                    eb->cluster->arrive_and_drop();
                });
        for (auto& th : threads) th.join();
    }
}
