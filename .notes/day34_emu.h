// Host emulation for day 34's kernels: real threads (a std::thread per CUDA thread), so
// __syncthreads, warp shuffles and thread-block CLUSTERS (cluster.sync, map_shared_rank) run
// as on the GPU: the K blocks of a cluster run at the same time, each with its own shared
// memory (the emulate script rewrites `__shared__` declarations into per-block storage).
// Not modelled: memory ordering without a barrier (real threads run, but a race is not
// reliably caught), registers, timing. Used by .notes/day34_emulate.py.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <math.h>
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

struct emu_uint3 { unsigned x = 0, y = 0, z = 0; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline thread_local emu_uint3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;

struct alignas(16) float4 { float x, y, z, w; };
struct float3 { float x, y, z; };
struct alignas(8) float2 { float x, y; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float3 make_float3(float x, float y, float z) { return {x, y, z}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
using std::min;
using std::max;

template <class T> inline T __ldg(const T* p) { return *p; }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __int_as_float(int u) { float f; std::memcpy(&f, &u, 4); return f; }
inline int __float_as_int(float f) { int u; std::memcpy(&u, &f, 4); return u; }
struct alignas(8) int2 { int x, y; };
inline int2 make_int2(int x, int y) { return {x, y}; }
struct alignas(16) int4 { int x, y, z, w; };
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
// PTX prmt (default mode, selectors 0..7) and shf.r.wrap
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    const uint64_t v = (uint64_t(y) << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= unsigned((v >> (8 * ((s >> (4 * i)) & 7))) & 0xff) << (8 * i);
    return r;
}
inline unsigned __funnelshift_r(unsigned lo, unsigned hi, unsigned shift) {
    return unsigned(((uint64_t(hi) << 32) | lo) >> (shift & 31));
}

inline std::mutex emu_atomic_mutex;
inline double atomicAdd(double* p, double v) {
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    const double old = *p;
    *p = old + v;
    return old;
}

// --- one block in flight: its barrier, warps and shared memory ---------------------------------
struct EmuBlock {
    std::unique_ptr<std::barrier<>> bar;
    std::vector<std::unique_ptr<std::barrier<>>> warp_bars;
    std::vector<float> shfl;                   // [warps][32]
    std::vector<unsigned char> smem;           // the block's shared memory
};
inline std::vector<EmuBlock> emu_blocks;       // the blocks of the cluster in flight
inline thread_local int emu_me = 0;            // this thread's block within the cluster
inline std::unique_ptr<std::barrier<>> emu_cluster_bar;
inline int emu_cluster_size = 1;

constexpr size_t EMU_STATIC = 16 * 1024, EMU_SMEM = EMU_STATIC + 240 * 1024;  // static, then dynamic
inline std::mutex emu_smem_mutex;
inline std::map<int, size_t> emu_smem_offsets;  // declaration id -> offset (same in every block)
inline size_t emu_smem_top = 0;

template <class T>
inline T* emu_smem(int id, size_t count) {
    size_t off;
    {
        std::lock_guard<std::mutex> g(emu_smem_mutex);
        auto it = emu_smem_offsets.find(id);
        if (it == emu_smem_offsets.end()) {
            off = (emu_smem_top + 15) & ~size_t(15);
            emu_smem_top = off + sizeof(T) * count;
            emu_smem_offsets[id] = off;
        } else {
            off = it->second;
        }
    }
    return reinterpret_cast<T*>(emu_blocks[emu_me].smem.data() + off);
}

template <class T>
inline T* emu_dyn() { return reinterpret_cast<T*>(emu_blocks[emu_me].smem.data() + EMU_STATIC); }

inline void __syncthreads() { emu_blocks[emu_me].bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
    emu_blocks[emu_me].warp_bars[threadIdx.x / 32]->arrive_and_wait();
}
inline float __shfl_xor_sync(unsigned, float v, int o) {
    auto& blk = emu_blocks[emu_me];
    const int w = threadIdx.x / 32, l = threadIdx.x % 32;
    blk.shfl[w * 32 + l] = v;
    __syncwarp();
    const float r = blk.shfl[w * 32 + (l ^ o)];
    __syncwarp();
    return r;
}

namespace cooperative_groups {
struct cluster_group {
    unsigned block_rank() const { return (unsigned)emu_me; }
    void sync() const { emu_cluster_bar->arrive_and_wait(); }
    template <class T>
    T* map_shared_rank(T* p, int rank) const {
        const size_t off = reinterpret_cast<unsigned char*>(p) - emu_blocks[emu_me].smem.data();
        return reinterpret_cast<T*>(emu_blocks[rank].smem.data() + off);
    }
};
inline cluster_group this_cluster() { return {}; }
}  // namespace cooperative_groups

// Run `body` over the grid, `cluster` blocks (consecutive in x) at a time, all their threads
// at once.
inline void emu_launch(dim3 grid, dim3 block, int cluster, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    const int nthreads = block.x * block.y * block.z;
    const int nwarps = (nthreads + 31) / 32;
    emu_cluster_size = cluster;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx0 = 0; bx0 < grid.x; bx0 += cluster) {
                emu_blocks.clear();
                emu_blocks.resize(cluster);
                for (auto& blk : emu_blocks) {
                    blk.bar = std::make_unique<std::barrier<>>(nthreads);
                    for (int w = 0; w < nwarps; ++w)
                        blk.warp_bars.push_back(std::make_unique<std::barrier<>>(std::min(32, nthreads - 32 * w)));
                    blk.shfl.assign(nwarps * 32, 0.f);
                    blk.smem.assign(EMU_SMEM, 0xFF);     // uninitialized shared memory: NaN bytes
                }
                emu_cluster_bar = std::make_unique<std::barrier<>>(nthreads * cluster);
                std::vector<std::thread> threads;
                threads.reserve(nthreads * cluster);
                for (int k = 0; k < cluster; ++k)
                    for (int t = 0; t < nthreads; ++t)
                        threads.emplace_back([&, k, t] {
                            emu_me = k;
                            blockIdx = {bx0 + k, by, bz};
                            threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
                            body();
                            // an exited thread no longer holds up the others
                            emu_blocks[k].warp_bars[t / 32]->arrive_and_drop();
                            emu_blocks[k].bar->arrive_and_drop();
                            emu_cluster_bar->arrive_and_drop();
                        });
                for (auto& th : threads) th.join();
            }
}

inline int emu_next_cluster = 1;
inline void emu_set_cluster(int k) { emu_next_cluster = k; }
inline void emu_launch(dim3 grid, dim3 block, const std::function<void()>& body) {
    emu_launch(grid, block, emu_next_cluster, body);
}
