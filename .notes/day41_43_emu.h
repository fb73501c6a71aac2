// Host emulation of what days 41-43's kernel.cu files use (WMMA, ldmatrix, mma.sync m16n8k16 bf16,
// cp.async, st.shared), so their index arithmetic, fragment layouts, padding and pipeline waits
// run on a machine without a GPU. Used by .notes/day41_43_emulate.py; not part of the build.
//
// Each block's threads run as fibers (ucontext) in one OS thread, blocks one after another. Shared memory is one
// arena (dynamic `extern __shared__` memory is rewritten to point at it; static __shared__
// arrays become `static`); 32-bit shared addresses are offsets into the arena. Warp-wide
// instructions (ldmatrix, mma) exchange operands through per-warp slots between two warp
// barriers and follow the PTX ISA's fragment tables lane by lane. WMMA fragments are whole
// 16 x 16 tiles held by every lane (their real layout is unspecified anyway); loads and stores
// check WMMA's alignment rules (32-byte pointers, ldm % 8 / % 4). cp.async copies are deferred to
// cp.async.wait_group (EMU_CP_EARLY=0) or done at issue (=1); the arena is refilled with 0xFF
// (bf16 NaN) for every block, so reading a tile before its copy landed gives NaN.
// Not modelled: memory ordering without barriers, registers, timing.
#pragma once
#include <barrier>
#include <cassert>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>
#include <ucontext.h>

#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
#define CUDA100_EMULATED_PTX 1

struct emu_uint3 { unsigned x = 0, y = 0, z = 0; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline emu_uint3 threadIdx;   // the running fiber's (set at every switch)
inline emu_uint3 blockIdx;
inline dim3 gridDim, blockDim;

struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
template <class T> inline T __ldg(const T* p) { return *p; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }

// --- shared memory arena --------------------------------------------------------------------------
constexpr size_t EMU_SMEM = 232448;
alignas(1024) inline unsigned char emu_smem[EMU_SMEM];
inline size_t emu_smem_limit = EMU_SMEM;     // the launch's dynamic bytes
inline int emu_cp_early = 0;
inline unsigned char* emu_at(uint32_t addr, int bytes, int align) {
    if (addr % align || (size_t)addr + bytes > emu_smem_limit) {
        std::fprintf(stderr, "EMU: bad shared address %u (%d bytes, align %d, limit %zu)\n", addr,
                     bytes, align, emu_smem_limit);
        std::abort();
    }
    return emu_smem + addr;
}

// --- fibers and barriers ---------------------------------------------------------------------------
// The threads of a block are fibers (ucontext) run round-robin in ONE OS thread: a barrier yields
// until every live fiber of its group has arrived. A fiber that returns leaves its groups.
struct EmuBarrier {
    int expected = 0, arrived = 0;
    unsigned gen = 0;
};
inline std::vector<ucontext_t> emu_ctx;
inline ucontext_t emu_sched_ctx;
inline int emu_cur = 0;
inline EmuBarrier emu_block_bar;
inline std::vector<EmuBarrier> emu_warp_bars;
inline void emu_yield() { swapcontext(&emu_ctx[emu_cur], &emu_sched_ctx); }
inline void emu_arrive_wait(EmuBarrier& b) {
    const unsigned g = b.gen;
    if (++b.arrived == b.expected) { b.arrived = 0; ++b.gen; return; }
    while (b.gen == g) emu_yield();
}
inline void emu_leave(EmuBarrier& b) {
    --b.expected;
    if (b.arrived && b.arrived == b.expected) { b.arrived = 0; ++b.gen; }
}
inline void __syncthreads() { emu_arrive_wait(emu_block_bar); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu_arrive_wait(emu_warp_bars[threadIdx.x / 32]); }
inline int emu_lane() { return threadIdx.x % 32; }
inline int emu_warp() { return threadIdx.x / 32; }

// per-warp exchange slots (up to 32 warps)
struct EmuSlot { uint32_t a[4]; uint32_t b[2]; float c[4]; float d[4]; uint32_t addr; };
inline EmuSlot emu_slots[32][32];

inline float emu_bf2f(uint16_t h) { uint32_t u = (uint32_t)h << 16; float f; std::memcpy(&f, &u, 4); return f; }

namespace cuda100 {
inline uint32_t smem_u32(const void* p) {
    const unsigned char* q = static_cast<const unsigned char*>(p);
    if (q < emu_smem || q >= emu_smem + EMU_SMEM) { std::fprintf(stderr, "EMU: smem_u32 of a non-arena pointer\n"); std::abort(); }
    return (uint32_t)(q - emu_smem);
}
struct EmuCopy { uint32_t dst; const void* src; int bytes; bool valid; };
inline std::vector<std::vector<EmuCopy>> emu_open_all(1024);             // per fiber
inline std::vector<std::deque<std::vector<EmuCopy>>> emu_groups_all(1024);
#define emu_open emu_open_all[emu_cur]
#define emu_groups emu_groups_all[emu_cur]
inline void emu_do(const EmuCopy& c) {
    unsigned char* d = emu_at(c.dst, c.bytes, c.bytes);
    if (c.valid) {
        if ((uintptr_t)c.src % c.bytes) { std::fprintf(stderr, "EMU: misaligned cp.async source\n"); std::abort(); }
        std::memcpy(d, c.src, c.bytes);
    } else {
        std::memset(d, 0, c.bytes);
    }
}
inline void emu_cp(uint32_t dst, const void* src, int bytes, bool valid) {
    EmuCopy c{dst, src, bytes, valid};
    emu_at(dst, bytes, bytes);
    if (emu_cp_early) emu_do(c); else emu_open.push_back(c);
}
inline void cp_async16_u32(uint32_t dst, const void* src, bool valid) { emu_cp(dst, src, 16, valid); }
inline void cp_async16(void* dst, const void* src, bool valid) { emu_cp(smem_u32(dst), src, 16, valid); }
inline void cp_async8(void* dst, const void* src, bool valid) { emu_cp(smem_u32(dst), src, 8, valid); }
inline void cp_async4(void* dst, const void* src, bool valid) { emu_cp(smem_u32(dst), src, 4, valid); }
inline void cp_async_commit() { emu_groups.push_back(emu_open); emu_open.clear(); }
template <int N> inline void cp_async_wait() {
    while ((int)emu_groups.size() > N) {
        for (auto& c : emu_groups.front()) emu_do(c);
        emu_groups.pop_front();
    }
}
inline void emu_thread_exit_check() {
    if (!emu_open.empty() || !emu_groups.empty()) {
        std::fprintf(stderr, "EMU: a thread exited with cp.async copies not waited for\n");
        std::abort();
    }
}

namespace mma {
inline void st_shared_v4(uint32_t addr, uint4 v) { std::memcpy(emu_at(addr, 16, 16), &v, 16); }

// ldmatrix: lane 8j + r gives the address of row r of matrix j (16 bytes)
inline void emu_ldmatrix(uint32_t (&out)[4], uint32_t addr, int nmat, bool trans) {
    const int w = emu_warp(), l = emu_lane();
    emu_slots[w][l].addr = addr;
    __syncwarp();
    for (int j = 0; j < nmat; ++j) {
        uint16_t e[2];
        for (int q = 0; q < 2; ++q) {
            int row, col;
            if (!trans) { row = l / 4; col = 2 * (l % 4) + q; }
            else        { row = 2 * (l % 4) + q; col = l / 4; }
            const uint32_t a = emu_slots[w][8 * j + row].addr;
            std::memcpy(&e[q], emu_at(a, 16, 16) + 2 * col, 2);
        }
        out[j] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
    }
    __syncwarp();
}
inline void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) { emu_ldmatrix(r, addr, 4, false); }
inline void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) { emu_ldmatrix(r, addr, 4, true); }

// mma.m16n8k16 row.col bf16 -> f32, PTX ISA fragment tables: every lane posts its registers,
// lane 0 rebuilds A (16 x 16), B (16 x 8) and C and writes every lane's D back to its slot
inline void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    const int w = emu_warp(), l = emu_lane();
    EmuSlot& s = emu_slots[w][l];
    for (int q = 0; q < 4; ++q) { s.a[q] = a[q]; s.c[q] = d[q]; }
    s.b[0] = b0; s.b[1] = b1;
    __syncwarp();
    if (l == 0) {
        float A[16][16], B[16][8], Cc[16][8];
        for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t = lane % 4;
            const EmuSlot& o = emu_slots[w][lane];
            for (int h = 0; h < 2; ++h) {
                A[g][2 * t + h] = emu_bf2f((uint16_t)(o.a[0] >> (16 * h)));
                A[g + 8][2 * t + h] = emu_bf2f((uint16_t)(o.a[1] >> (16 * h)));
                A[g][2 * t + 8 + h] = emu_bf2f((uint16_t)(o.a[2] >> (16 * h)));
                A[g + 8][2 * t + 8 + h] = emu_bf2f((uint16_t)(o.a[3] >> (16 * h)));
                B[2 * t + h][g] = emu_bf2f((uint16_t)(o.b[0] >> (16 * h)));
                B[2 * t + 8 + h][g] = emu_bf2f((uint16_t)(o.b[1] >> (16 * h)));
            }
            for (int q = 0; q < 4; ++q) Cc[g + 8 * (q / 2)][2 * t + (q % 2)] = o.c[q];
        }
        for (int lane = 0; lane < 32; ++lane) {
            const int g = lane / 4, t = lane % 4;
            for (int q = 0; q < 4; ++q) {
                const int row = g + 8 * (q / 2), col = 2 * t + (q % 2);
                float acc = Cc[row][col];
                for (int k = 0; k < 16; ++k) acc += A[row][k] * B[k][col];
                emu_slots[w][lane].d[q] = acc;
            }
        }
    }
    __syncwarp();
    for (int q = 0; q < 4; ++q) d[q] = s.d[q];
}
}  // namespace mma
}  // namespace cuda100

// --- WMMA: every lane holds the whole 16 x 16 tile ----------------------------------------------
struct __nv_bfloat16 { uint16_t bits; };
namespace nvcuda {
namespace wmma {
struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };
template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment { float v[16][16]; };
inline void emu_check(const void* p, unsigned ldm, int elem) {
    if ((uintptr_t)p % 32) { std::fprintf(stderr, "EMU: WMMA pointer not 32-byte aligned\n"); std::abort(); }
    if ((ldm * elem) % 16) { std::fprintf(stderr, "EMU: WMMA ldm not a multiple of 16 bytes\n"); std::abort(); }
}
template <class U, class L>
inline void load_matrix_sync(fragment<U, 16, 16, 16, __nv_bfloat16, L>& f, const __nv_bfloat16* p, unsigned ldm) {
    emu_check(p, ldm, 2);
    for (int r = 0; r < 16; ++r)
        for (int c = 0; c < 16; ++c) f.v[r][c] = emu_bf2f(p[(size_t)r * ldm + c].bits);
}
template <class T>
inline void fill_fragment(fragment<accumulator, 16, 16, 16, T>& f, float x) {
    for (auto& row : f.v) for (auto& e : row) e = x;
}
inline float emu_wmma_out[32][16][16];
template <class LA, class LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
                     const fragment<matrix_a, 16, 16, 16, __nv_bfloat16, LA>& a,
                     const fragment<matrix_b, 16, 16, 16, __nv_bfloat16, LB>& b,
                     const fragment<accumulator, 16, 16, 16, float>& c) {
    // every lane holds the same tiles: lane 0 multiplies, the others copy its result
    const int w = emu_warp();
    __syncwarp();
    if (emu_lane() == 0)
        for (int r = 0; r < 16; ++r)
            for (int q = 0; q < 16; ++q) {
                float acc = c.v[r][q];
                for (int k = 0; k < 16; ++k) acc += a.v[r][k] * b.v[k][q];
                emu_wmma_out[w][r][q] = acc;
            }
    __syncwarp();
    std::memcpy(d.v, emu_wmma_out[w], sizeof d.v);
}
inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f, unsigned ldm, layout_t) {
    emu_check(p, ldm, 4);
    __syncwarp();   // every lane writes the same values; keep them from overlapping other phases
    if (emu_lane() == 0)
        for (int r = 0; r < 16; ++r)
            for (int c = 0; c < 16; ++c) p[(size_t)r * ldm + c] = f.v[r][c];
    __syncwarp();
}
}  // namespace wmma
}  // namespace nvcuda

// --- launching ------------------------------------------------------------------------------------
inline const std::function<void()>* emu_body;
inline bool emu_exited = false;
inline void emu_fiber_main() {
    (*emu_body)();
    cuda100::emu_thread_exit_check();
    emu_leave(emu_warp_bars[threadIdx.x / 32]);
    emu_leave(emu_block_bar);
    emu_exited = true;
}
inline void emu_launch(dim3 grid, dim3 block, size_t smem, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    emu_body = &body;
    emu_smem_limit = smem ? smem : EMU_SMEM;
    const int nthreads = block.x * block.y * block.z, nwarps = (nthreads + 31) / 32;
    constexpr size_t STACK = 512 * 1024;
    static std::vector<std::unique_ptr<char[]>> stacks;
    while ((int)stacks.size() < nthreads) stacks.emplace_back(new char[STACK]);
    emu_ctx.assign(nthreads, ucontext_t{});
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                std::memset(emu_smem, 0xFF, emu_smem_limit);
                emu_block_bar = {nthreads, 0, 0};
                emu_warp_bars.assign(nwarps, EmuBarrier{});
                for (int w = 0; w < nwarps; ++w) emu_warp_bars[w].expected = std::min(32, nthreads - 32 * w);
                for (int t = 0; t < nthreads; ++t) {
                    getcontext(&emu_ctx[t]);
                    emu_ctx[t].uc_stack.ss_sp = stacks[t].get();
                    emu_ctx[t].uc_stack.ss_size = STACK;
                    emu_ctx[t].uc_link = &emu_sched_ctx;
                    makecontext(&emu_ctx[t], emu_fiber_main, 0);
                }
                // a fiber that returns switches to uc_link (the scheduler) with its state "finished":
                // mark it by a flag it sets itself
                int live = nthreads;
                std::vector<int> finished(nthreads, 0);
                while (live) {
                    for (int t = 0; t < nthreads; ++t) {
                        if (finished[t]) continue;
                        emu_cur = t;
                        threadIdx = {(unsigned)t, 0, 0};
                        emu_exited = false;
                        swapcontext(&emu_sched_ctx, &emu_ctx[t]);
                        if (emu_exited) { finished[t] = 1; --live; }
                    }
                }
            }
}
