// A small host emulator of the CUDA features day 55's kernels use, so that kernel.cu compiles
// with g++ as a shared library that .notes/day55_emulate.py drives through the REAL driver.launch
// (a stand-in for pycuda hands each prepared_call to emu_launch). It checks the logic and the
// index arithmetic, not speed and not the GPU's memory model:
//   - every CUDA thread of a block is a std::thread; blocks run one at a time, in a RANDOM
//     order of blockIdx.x (the onesweep kernels must not care: they number tiles by ticket);
//   - __syncthreads: a barrier over the block; shuffles, ballots, match_any, __syncwarp: a
//     barrier over the 32 lanes of the warp and an exchange array;
//   - st_relaxed of a P status word over an A word is DROPPED at random (tile 0's P, never
//     written over an A, always lands), so look-backs walk back over A counts, as they do on a
//     GPU when P words are late; an X word seen by a look-back is an error here (blocks run one
//     at a time, so every earlier tile has published).
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local emu_dim3 threadIdx;
inline emu_dim3 blockIdx, blockDim, gridDim;

struct uint4 { unsigned x, y, z, w; };

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict

template <class T> inline T min(T a, T b) { return a < b ? a : b; }

class EmuBarrier {
  public:
    explicit EmuBarrier(unsigned count) : count_(count) {}
    void arrive_and_wait() {
        std::unique_lock<std::mutex> lk(m_);
        const unsigned long long gen = gen_;
        if (++arrived_ == count_) {
            arrived_ = 0;
            ++gen_;
            cv_.notify_all();
        } else {
            cv_.wait(lk, [&] { return gen_ != gen; });
        }
    }
  private:
    std::mutex m_;
    std::condition_variable cv_;
    unsigned count_, arrived_ = 0;
    unsigned long long gen_ = 0;
};

struct EmuWarp {
    EmuBarrier bar{32};
    unsigned slot[32];
};
inline EmuBarrier* emu_block_bar = nullptr;
inline std::vector<EmuWarp*> emu_warps;
inline thread_local EmuWarp* emu_warp = nullptr;
inline thread_local int emu_lane = 0;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_warp->bar.arrive_and_wait(); }

inline void emu_gather(unsigned v, unsigned (&all)[32]) {
    emu_warp->slot[emu_lane] = v;
    emu_warp->bar.arrive_and_wait();
    std::memcpy(all, emu_warp->slot, sizeof(all));
    emu_warp->bar.arrive_and_wait();
}
inline unsigned __shfl_sync(unsigned, unsigned v, int src) {
    unsigned all[32];
    emu_gather(v, all);
    return all[src & 31];
}
inline int __shfl_up_sync(unsigned, int v, int d) {
    unsigned all[32];
    emu_gather((unsigned)v, all);
    return emu_lane >= d ? (int)all[emu_lane - d] : v;
}
inline float __shfl_up_sync(unsigned, float v, int d) {
    unsigned u, all[32];
    std::memcpy(&u, &v, 4);
    emu_gather(u, all);
    if (emu_lane >= d) std::memcpy(&v, &all[emu_lane - d], 4);
    return v;
}
inline unsigned __ballot_sync(unsigned, int p) {
    unsigned all[32], r = 0;
    emu_gather(p ? 1u : 0u, all);
    for (int l = 0; l < 32; ++l) r |= all[l] << l;
    return r;
}
inline unsigned __match_any_sync(unsigned, unsigned v) {
    unsigned all[32], r = 0;
    emu_gather(v, all);
    for (int l = 0; l < 32; ++l) r |= (unsigned)(all[l] == v) << l;
    return r;
}
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }
inline unsigned atomicAdd(unsigned* p, unsigned v) { return std::atomic_ref<unsigned>(*p).fetch_add(v); }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
inline void __trap() {
    std::fprintf(stderr, "__trap() (the look-back watchdog)\n");
    std::abort();
}

// --- the inline-PTX helpers, swapped in by day55_emulate.py ---------------------------------
inline unsigned emu_lanemask_lt() { return (1u << emu_lane) - 1u; }
inline std::mt19937 emu_rng(1);
inline std::mutex emu_mu;
inline double emu_drop_p = 0.5;
inline unsigned long long emu_walked = 0, emu_dropped = 0;
inline unsigned emu_ld_relaxed(const unsigned* p) {
    const unsigned v = std::atomic_ref<const unsigned>(*p).load();
    if ((v >> 30) == 0u) {
        std::fprintf(stderr, "look-back read an X word: an earlier tile never published\n");
        std::abort();
    }
    std::lock_guard<std::mutex> lk(emu_mu);
    ++emu_walked;
    return v;
}
inline void emu_st_relaxed(unsigned* p, unsigned v) {
    std::lock_guard<std::mutex> lk(emu_mu);
    const unsigned old = *p;
    if ((v >> 30) == 2u && (old >> 30) == 1u &&
        std::uniform_real_distribution<double>(0, 1)(emu_rng) < emu_drop_p) {
        ++emu_dropped;
        return;
    }
    std::atomic_ref<unsigned>(*p).store(v);
}

// --- launching: blocks one at a time, in a random order -----------------------------------
template <class F>
inline void emu_run(unsigned grid, unsigned block, F body) {
    gridDim = {grid, 1, 1};
    blockDim = {block, 1, 1};
    std::vector<unsigned> order(grid);
    for (unsigned b = 0; b < grid; ++b) order[b] = b;
    {
        std::lock_guard<std::mutex> lk(emu_mu);
        std::shuffle(order.begin(), order.end(), emu_rng);
    }
    for (unsigned b : order) {
        blockIdx = {b, 0, 0};
        EmuBarrier bar(block);
        emu_block_bar = &bar;
        std::vector<EmuWarp*> warps;
        for (unsigned w = 0; w < block / 32; ++w) warps.push_back(new EmuWarp);
        std::vector<std::thread> ts;
        ts.reserve(block);
        for (unsigned t = 0; t < block; ++t)
            ts.emplace_back([&, t] {
                threadIdx = {t, 0, 0};
                emu_lane = (int)(t & 31);
                emu_warp = warps[t >> 5];
                body();
            });
        for (auto& th : ts) th.join();
        for (auto* w : warps) delete w;
    }
}
