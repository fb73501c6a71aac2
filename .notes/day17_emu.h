// A small host emulator of the CUDA features day 17's kernels use, so that kernel.cu can be
// compiled with g++ and run on a CPU (see .notes/day17_emulate.py). Every CUDA thread of a
// block is a std::thread; a few blocks run at once, each in its own process (fork), on global
// memory shared between them. It checks logic and index arithmetic, not speed:
//   - __syncthreads: a barrier over the block; warp shuffles, votes and ballots: a
//     barrier over the 32 lanes of the warp and an exchange array.
//   - cp.async: each copy is queued in its thread's open group; a group lands at the latest
//     when cp.async.wait_group asks for it, and at random earlier (any pending group, at each
//     commit), so a read of a slot before its wait, or a refill before its read, shows up as
//     a wrong answer.
//   - st.relaxed of a P status word (flag 2 in bits 32-33) over an A of the same launch: its
//     visibility is delayed by a random number of later status stores (A stays immediate), so
//     look-backs walk back over aggregates as they do when P words are late on a GPU.
//   - atomics: std::atomic_ref.
#pragma once
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

struct emu_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local emu_dim3 threadIdx, blockIdx;
inline emu_dim3 blockDim, gridDim;

struct uint4 { unsigned x, y, z, w; };
inline uint4 make_uint4(unsigned a, unsigned b, unsigned c, unsigned d) { return {a, b, c, d}; }

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __launch_bounds__(...)
#define __restrict__ __restrict

template <class T> inline T min(T a, T b) { return a < b ? a : b; }

// ---- block and warp synchronisation ----------------------------------------------------------
// A barrier that sleeps at once (a mutex and a condition variable): with hundreds of emulated
// threads on a few cores, spinning barriers spend their time waiting for descheduled threads.
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
    unsigned long long slot[32];
};
inline std::unique_ptr<EmuBarrier> emu_block_bar;
inline std::vector<std::unique_ptr<EmuWarp>> emu_warps;
inline thread_local EmuWarp* emu_warp = nullptr;
inline thread_local int emu_lane = 0;

inline void __syncthreads() { emu_block_bar->arrive_and_wait(); }

inline unsigned long long emu_exchange(unsigned long long v, int src) {
    emu_warp->slot[emu_lane] = v;
    emu_warp->bar.arrive_and_wait();
    const unsigned long long r = emu_warp->slot[src & 31];
    emu_warp->bar.arrive_and_wait();
    return r;
}
inline unsigned __shfl_up_sync(unsigned, unsigned v, int d) {
    return (unsigned)emu_exchange(v, emu_lane >= d ? emu_lane - d : emu_lane);
}
inline unsigned __shfl_sync(unsigned, unsigned v, int src) { return (unsigned)emu_exchange(v, src); }
inline unsigned __shfl_xor_sync(unsigned, unsigned v, int m) { return (unsigned)emu_exchange(v, emu_lane ^ m); }
inline unsigned __ballot_sync(unsigned, bool p) {
    emu_warp->slot[emu_lane] = p ? 1 : 0;
    emu_warp->bar.arrive_and_wait();
    unsigned r = 0;
    for (int l = 0; l < 32; ++l) r |= emu_warp->slot[l] ? 1u << l : 0u;
    emu_warp->bar.arrive_and_wait();
    return r;
}
inline bool __any_sync(unsigned m, bool p) { return __ballot_sync(m, p) != 0; }
inline int __ffs(unsigned x) { return __builtin_ffs((int)x); }

// ---- memory -------------------------------------------------------------------------------------
inline unsigned atomicAdd(unsigned* p, unsigned v) {
    return std::atomic_ref<unsigned>(*p).fetch_add(v);
}
inline uint4 __ldcs(const uint4* p) { return *p; }
inline void __stcs(uint4* p, uint4 v) { *p = v; }
inline void __nanosleep(unsigned) { std::this_thread::yield(); }
inline void __trap() {
    std::fprintf(stderr, "__trap(): a look-back waited too long\n");
    std::abort();
}
alignas(16) inline unsigned char emu_dyn_smem[232448];

inline std::mutex emu_mu;
inline std::mt19937 emu_rng(1);
inline int emu_p_delay_max = 0;  // 0: P words visible at once
struct EmuLate { unsigned long long* p; unsigned long long v; int left; };
inline std::deque<EmuLate> emu_late;

inline void emu_flush_late(bool all) {  // caller holds emu_mu
    for (auto it = emu_late.begin(); it != emu_late.end();) {
        if (all || --it->left <= 0) {
            std::atomic_ref<unsigned long long>(*it->p).store(it->v, std::memory_order_relaxed);
            it = emu_late.erase(it);
        } else {
            ++it;
        }
    }
}
inline unsigned long long emu_load_status(const unsigned long long* p) {
    return std::atomic_ref<unsigned long long>(*const_cast<unsigned long long*>(p)).load(std::memory_order_relaxed);
}
inline void emu_store_status(unsigned long long* p, unsigned long long v) {
    std::lock_guard<std::mutex> g(emu_mu);
    emu_flush_late(false);
    // a P is delayed only over an A of the same launch: a word that would read as X (tile 0
    // publishes P at once) must become visible, or the tiles after it wait for ever here
    const unsigned long long now = emu_load_status(p);
    const bool over_a = (now >> 34) == (v >> 34) && ((unsigned)(now >> 32) & 3u) == 1u;
    const unsigned flag = (unsigned)(v >> 32) & 3u;
    if (flag == 2 && over_a && emu_p_delay_max > 0) {
        emu_late.push_back({p, v, (int)(emu_rng() % (emu_p_delay_max + 1))});
    } else {
        std::atomic_ref<unsigned long long>(*p).store(v, std::memory_order_relaxed);
    }
}

// cp.async: per-thread groups of queued 16-byte copies, numbered in commit order
struct EmuCopy { void* dst; const void* src; unsigned bytes; };
struct EmuGroup { unsigned long long seq; std::vector<EmuCopy> copies; };
inline thread_local std::vector<EmuCopy> emu_open;
inline thread_local std::deque<EmuGroup> emu_groups;  // committed, not landed yet
inline thread_local unsigned long long emu_committed = 0;
inline thread_local std::mt19937 emu_trng;
inline void emu_land(EmuGroup& g) {
    for (auto& c : g.copies) {
        std::memset(c.dst, 0, 16);
        std::memcpy(c.dst, c.src, c.bytes);
    }
}
inline void emu_cp_async16(void* smem, const void* gmem, unsigned bytes) {
    if (bytes > 16) { std::fprintf(stderr, "cp.async src-size %u > 16\n", bytes); std::abort(); }
    emu_open.push_back({smem, gmem, bytes});
}
inline void emu_cp_async_commit() {
    emu_groups.push_back({emu_committed++, std::move(emu_open)});
    emu_open.clear();
    for (auto it = emu_groups.begin(); it != emu_groups.end();) {  // any group may land early
        if (emu_trng() % 2) {
            emu_land(*it);
            it = emu_groups.erase(it);
        } else {
            ++it;
        }
    }
}
// cp.async.wait_group N: every group but the N most recently committed has landed
inline void emu_cp_async_wait(int pending) {
    for (auto it = emu_groups.begin(); it != emu_groups.end();) {
        if (it->seq + pending < emu_committed) {
            emu_land(*it);
            it = emu_groups.erase(it);
        } else {
            ++it;
        }
    }
}

// ---- global memory shared by the processes that run blocks at the same time -----------------
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

// `count` elements of T in memory shared across fork(), ending right before an inaccessible
// page (and starting right after one): a read or write past either end kills the process.
template <class T> T* emu_global(size_t count) {
    const size_t page = 4096, bytes = count * sizeof(T), pages = (bytes + page - 1) / page;
    char* base = (char*)mmap(nullptr, (pages + 2) * page, PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) { std::perror("mmap"); std::exit(2); }
    mprotect(base, page, PROT_NONE);
    mprotect(base + (pages + 1) * page, page, PROT_NONE);
    return (T*)(base + page + pages * page - bytes);
}

// ---- launch ---------------------------------------------------------------------------------------
// Blocks run `together` at a time, each in its own process (its own __shared__ statics), all of
// them on the same global memory; the threads of a block are threads of that process.
template <class F, class... Args>
void emu_run_block(F kernel, unsigned b, unsigned threads, unsigned seed, Args... args) {
    emu_block_bar = std::make_unique<EmuBarrier>(threads);
    emu_warps.clear();
    for (unsigned w = 0; w < threads / 32; ++w) emu_warps.push_back(std::make_unique<EmuWarp>());
    emu_rng.seed(seed * 7919u + b);
    std::vector<std::thread> ts;
    for (unsigned t = 0; t < threads; ++t) {
        ts.emplace_back([=] {
            threadIdx = {t, 0, 0};
            blockIdx = {b, 0, 0};
            emu_warp = emu_warps[t / 32].get();
            emu_lane = (int)(t % 32);
            emu_trng.seed(seed * 1000003u + b * 4099u + t);
            emu_groups.clear();
            emu_open.clear();
            emu_committed = 0;
            kernel(args...);
        });
    }
    for (auto& th : ts) th.join();
    std::lock_guard<std::mutex> g(emu_mu);
    emu_flush_late(true);  // a block's writes are all visible once it has finished
}

template <class F, class... Args>
bool emu_launch(F kernel, unsigned grid, unsigned threads, unsigned together, unsigned seed,
                Args... args) {
    gridDim = {grid, 1, 1};
    blockDim = {threads, 1, 1};
    for (unsigned first = 0; first < grid; first += together) {
        std::vector<pid_t> kids;
        for (unsigned b = first; b < std::min(grid, first + together); ++b) {
            std::fflush(nullptr);
            const pid_t pid = fork();
            if (pid == 0) {
                emu_run_block(kernel, b, threads, seed, args...);
                std::fflush(nullptr);
                _exit(0);
            }
            kids.push_back(pid);
        }
        bool ok = true;
        for (pid_t k : kids) {
            int st = 0;
            waitpid(k, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) ok = false;
        }
        if (!ok) {
            std::fprintf(stderr, "a block of the wave starting at %u died\n", first);
            return false;
        }
    }
    return true;
}
