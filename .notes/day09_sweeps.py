"""Day 9 at 8192 x 768: the experiments behind v7 (README, "What did not make v7 faster").

    python .notes/day09_sweeps.py                 # every experiment (about a minute on an H200)
    python .notes/day09_sweeps.py builds timeline # some of them; --list names them

Run from the repository root on the GPU machine. Each experiment builds the day's kernel.cu plus
the experimental kernels below (EXPERIMENTS_CU), checks every configuration against the float64
reference (at 8192 x 768 and at a ragged 1025 x 764 with stress rows) and times it with the
project's time_fn (events, L2 flushed by a read, median). Build variants are text edits of
kernel.cu: plain stores instead of __stcs, an L2 evict_first policy on the bulk loads, no stores
at all (reads only), no proxy fence before a slot refill.

The figures in .notes/day09_experiments.md came from one script per sweep (git history, commit
edc2e5eb1747: .notes/day09_v7_sweep*.py and day09_v7_timeline.py); this file holds the same
kernels once.
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H  # noqa: E402
from common.build import load_module  # noqa: E402
from common.check import compare_all  # noqa: E402
from common.gpu import blocks_per_sm, device_info, driver  # noqa: E402
from common.timing import _flusher, copy_bandwidth_gbps, time_fn  # noqa: E402
from days.day09_layer_norm import driver as D  # noqa: E402

KERNEL = Path("days/day09_layer_norm/kernel.cu")
STCS = "__stcs(reinterpret_cast<float4*>(outr) + j, o);"
BULK = ('asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"\n'
        '                 " [%0], [%1], %2, [%3];"\n'
        '                 ::"r"(smem_addr(dst_smem)), "l"(src), "r"(bytes), "r"(smem_addr(bar))')
FENCE_CALL = "            fence_proxy_async_smem();\n"
EDITS = {  # build variant -> (text in kernel.cu, replacement)
    "wb": (STCS, "reinterpret_cast<float4*>(outr)[j] = o;"),
    "reads_only": (STCS, "(void)o;"),
    "nofence": (FENCE_CALL, ""),
    "evict_first": (BULK, 'uint64_t pol;\n'
                    '    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));\n'
                    '    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes'
                    '.L2::cache_hint"\n'
                    '                 " [%0], [%1], %2, [%3], %4;"\n'
                    '                 ::"r"(smem_addr(dst_smem)), "l"(src), "r"(bytes), "r"(smem_addr(bar)), '
                    '"l"(pol)'),
}

EXPERIMENTS_CU = r'''
// ---- shared pieces of the experimental kernels --------------------------------------------
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }

__device__ __forceinline__ bool mbar_test(uint64_t* bar, uint32_t parity) {
    uint32_t done;
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
    return done != 0;
}

__device__ __forceinline__ void prefetch_l2(const void* src, uint32_t bytes) {
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(src), "r"(bytes) : "memory");
}

// This warp's P slots: barriers first, then one int per slot (the row in it), then the slots
// themselves, `extra` more rows per warp after the P input slots (output slots).
struct WarpSlots { uint64_t* bars; int* rows; float* slots; };
__device__ __forceinline__ WarpSlots warp_slots(unsigned char* smem, int P, int C, int extra) {
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    WarpSlots s;
    s.bars = reinterpret_cast<uint64_t*>(smem) + warp * P;
    s.rows = reinterpret_cast<int*>(smem + nwarps * P * 8) + warp * P;
    s.slots = reinterpret_cast<float*>(smem + ((nwarps * P * 12 + 127) & ~127)) + (size_t)warp * (P + extra) * C;
    return s;
}

template <int ITEMS>
__device__ __forceinline__ void slot_to_regs(const float* slot, int nvec, int lane, float4 (&v)[ITEMS]) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) { const int j = lane + 32 * i; if (j < nvec) v[i] = reinterpret_cast<const float4*>(slot)[j]; }
}

__device__ __forceinline__ int block_first_row(int N) { return (int)((int64_t)N * blockIdx.x / gridDim.x); }
__device__ __forceinline__ int block_end_row(int N) { return (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x); }

// rows of this warp when the block's rows row0.. are dealt to its warps round-robin
__device__ __forceinline__ int rows_of_warp(int N, int row0) {
    const int warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    return (block_end_row(N) - row0 - warp + nwarps - 1) / nwarps;
}

// lane 0: one arrival per phase on each of the warp's P slot barriers, visible to the copy engine
__device__ __forceinline__ void init_barriers(const WarpSlots& ws, int P) {
    for (int s = 0; s < P; ++s) mbar_init(&ws.bars[s], 1);
    mbar_init_fence();
}

#define LN_ARGS const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, \
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C, float eps

// ---- the shipped v7 body with up to 16 warps per block -------------------------------------
extern "C" __global__ void __launch_bounds__(512) x_v7_w16(LN_ARGS, int P) {
    layernorm_v7_body<6>(x, w, b, out, mean, rstd, N, C, eps, P); }

// ---- first try: normalize straight from the slot (three passes over shared memory) ----------
extern "C" __global__ void __launch_bounds__(1024) x_smem_passes(LN_ARGS, int P) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const WarpSlots ws = warp_slots(smem, P, C, 0);
    const int row0 = block_first_row(N), nrows = rows_of_warp(N, row0);
    const uint32_t bytes = (uint32_t)C * 4u;
    if (lane == 0) {
        init_barriers(ws, P);
        for (int t = 0; t < P && t < nrows; ++t)
            bulk_load(ws.slots + (size_t)t * C, x + (int64_t)(row0 + warp + t * nwarps) * C, bytes, &ws.bars[t]);
    }
    __syncwarp();
    const int nvec = C >> 2;
    for (int t = 0; t < nrows; ++t) {
        const int s = t % P, row = row0 + warp + t * nwarps;
        mbar_wait(&ws.bars[s], (uint32_t)(t / P) & 1u);
        const float4* xs = reinterpret_cast<const float4*>(ws.slots + (size_t)s * C);
        float sum = 0.f;
        for (int j = lane; j < nvec; j += 32) { const float4 v = xs[j]; sum += (v.x + v.y) + (v.z + v.w); }
        const float m0 = warp_sum(sum) / C;
        float2 aq = make_float2(0.f, 0.f);
        for (int j = lane; j < nvec; j += 32) {
            const float4 v = xs[j];
            const float dx = v.x - m0, dy = v.y - m0, dz = v.z - m0, dw = v.w - m0;
            aq.x += (dx + dy) + (dz + dw);
            aq.y += (dx * dx + dy * dy) + (dz * dz + dw * dw);
        }
        aq = warp_sum2(aq);
        float md, r;
        finish_stats(aq.x, aq.y, C, eps, md, r);
        float4* outr = reinterpret_cast<float4*>(out + (int64_t)row * C);
        for (int j = lane; j < nvec; j += 32) {
            const float4 v = xs[j], wv = __ldg(reinterpret_cast<const float4*>(w) + j), bv = __ldg(reinterpret_cast<const float4*>(b) + j);
            __stcs(outr + j, make_float4(((v.x - m0) - md) * r * wv.x + bv.x, ((v.y - m0) - md) * r * wv.y + bv.y,
                                         ((v.z - m0) - md) * r * wv.z + bv.z, ((v.w - m0) - md) * r * wv.w + bv.w));
        }
        if (lane == 0) { mean[row] = m0 + md; rstd[row] = r; }
        __syncwarp();
        if (lane == 0 && t + P < nrows) {
            fence_proxy_async_smem();
            bulk_load(ws.slots + (size_t)s * C, x + (int64_t)(row0 + warp + (t + P) * nwarps) * C, bytes, &ws.bars[s]);
        }
    }
}

// ---- v6 with v7's split: contiguous, equal shares of rows per block ---------------------------
extern "C" __global__ void __launch_bounds__(512) x_v6_split(LN_ARGS) {
    layernorm_v6_rows<6>(x, w, b, out, mean, rstd, block_first_row(N) + (threadIdx.x >> 5),
                         blockDim.x >> 5, block_end_row(N), C, eps);
}

// ---- floors: a float4 copy and a float4 read-only sum, and an empty kernel ------------------
extern "C" __global__ void x_copy_f4(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) y[i] = x[i];
}
extern "C" __global__ void x_sum_f4(const float4* __restrict__ x, float* __restrict__ y, int n4) {
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        const float4 v = __ldcs(x + i); s += (v.x + v.y) + (v.z + v.w); }
    if (s == 12345.f) y[0] = s;  // keeps the loads alive
}
extern "C" __global__ void x_empty(int) {}

// ---- a row shared by GW warps (named barrier per group), contiguous rows, next row prefetched --
template <int GW>
__device__ __forceinline__ float2 group_sum2(float2 v, float2* buf, int gw, int lane, int bar_id) {
    v = warp_sum2(v);
    if (GW == 1) return v;
    if (lane == 0) buf[gw] = v;
    asm volatile("bar.sync %0, %1;" :: "r"(bar_id), "r"(GW * 32) : "memory");
    float2 t = make_float2(0.f, 0.f);
#pragma unroll
    for (int k = 0; k < GW; ++k) { t.x += buf[k].x; t.y += buf[k].y; }
    return t;
}
template <int GW, int ITEMS>
__device__ __forceinline__ void group_row(float4 (&v)[ITEMS], const float* w, const float* b, float* outr,
    float* mean_out, float* rstd_out, int C, int nvec, int tid, int gw, int lane, float2* buf, int bar_id, float eps) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) if (tid + 32 * GW * i < nvec) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    const float m0 = group_sum2<GW>(make_float2(s, 0.f), buf, gw, lane, bar_id).x / C;
    float2 aq = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) if (tid + 32 * GW * i < nvec) {
        v[i].x -= m0; v[i].y -= m0; v[i].z -= m0; v[i].w -= m0;
        aq.x += (v[i].x + v[i].y) + (v[i].z + v[i].w);
        aq.y += (v[i].x * v[i].x + v[i].y * v[i].y) + (v[i].z * v[i].z + v[i].w * v[i].w);
    }
    aq = group_sum2<GW>(aq, buf + GW, gw, lane, bar_id);
    float md, r;
    finish_stats(aq.x, aq.y, C, eps, md, r);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = tid + 32 * GW * i;
        if (j < nvec) {
            const float4 wv = __ldg(reinterpret_cast<const float4*>(w) + j), bv = __ldg(reinterpret_cast<const float4*>(b) + j);
            reinterpret_cast<float4*>(outr)[j] = make_float4((v[i].x - md) * r * wv.x + bv.x, (v[i].y - md) * r * wv.y + bv.y,
                                                             (v[i].z - md) * r * wv.z + bv.z, (v[i].w - md) * r * wv.w + bv.w);
        }
    }
    if (tid == 0) { *mean_out = m0 + md; *rstd_out = r; }
}
template <int GW, int ITEMS>
__device__ __forceinline__ void group_kernel(LN_ARGS) {
    __shared__ float2 red[64];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp / GW, gw = warp % GW, stride = (blockDim.x >> 5) / GW;
    const int tid = gw * 32 + lane, bar_id = 1 + group, nvec = C / 4;
    float2* buf = red + group * 2 * GW;
    int row = block_first_row(N) + group;
    N = block_end_row(N);
    float4 a[ITEMS], bb[ITEMS];
    auto load = [&](int r, float4 (&v)[ITEMS]) {
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) { const int j = tid + 32 * GW * i; if (j < nvec) v[i] = __ldcs(reinterpret_cast<const float4*>(x + (int64_t)r * C) + j); }
    };
    if (row < N) load(row, a);
    while (row < N) {
        const int r1 = row + stride;
        if (r1 < N) load(r1, bb);
        group_row<GW, ITEMS>(a, w, b, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, tid, gw, lane, buf, bar_id, eps);
        if (r1 >= N) break;
        const int r2 = r1 + stride;
        if (r2 < N) load(r2, a);
        group_row<GW, ITEMS>(bb, w, b, out + (int64_t)r1 * C, mean + r1, rstd + r1, C, nvec, tid, gw, lane, buf, bar_id, eps);
        row = r2;
    }
}
extern "C" __global__ void x_group2(LN_ARGS) { group_kernel<2, 3>(x, w, b, out, mean, rstd, N, C, eps); }
extern "C" __global__ void x_group3(LN_ARGS) { group_kernel<3, 2>(x, w, b, out, mean, rstd, N, C, eps); }
extern "C" __global__ void x_group6(LN_ARGS) { group_kernel<6, 1>(x, w, b, out, mean, rstd, N, C, eps); }

// ---- rows in landing order: lane 0 polls the warp's P slots --------------------------------
template <int P>
__device__ __forceinline__ void landing_order(LN_ARGS) {
    constexpr int ITEMS = 6;
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const WarpSlots ws = warp_slots(smem, P, C, 0);
    const int row0 = block_first_row(N), nrows = rows_of_warp(N, row0);
    const uint32_t bytes = (uint32_t)C * 4u;
    if (lane == 0) {
        init_barriers(ws, P);
        for (int s = 0; s < P; ++s) {
            ws.rows[s] = s < nrows ? row0 + warp + s * nwarps : -1;
            if (s < nrows) bulk_load(ws.slots + (size_t)s * C, x + (int64_t)ws.rows[s] * C, bytes, &ws.bars[s]);
        }
    }
    int next = min(P, nrows);
    __syncwarp();
    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
    load_wb4<ITEMS>(w, b, nvec, lane, wv, bv);
    uint32_t phase = 0;  // bit s: parity of slot s's next phase
    for (int done = 0; done < nrows; ++done) {
        int s = 0;
        if (lane == 0) {
            for (bool found = false; !found;) {
#pragma unroll
                for (int k = 0; k < P; ++k)
                    if (!found && ws.rows[k] >= 0 && mbar_test(&ws.bars[k], (phase >> k) & 1u)) { s = k; found = true; }
            }
        }
        s = __shfl_sync(0xffffffffu, s, 0);
        mbar_wait(&ws.bars[s], (phase >> s) & 1u);  // complete already: orders the reads after it
        phase ^= 1u << s;
        const int row = ws.rows[s];
        slot_to_regs<ITEMS>(ws.slots + (size_t)s * C, nvec, lane, v);
        __syncwarp();
        if (lane == 0) {
            ws.rows[s] = next < nrows ? row0 + warp + next * nwarps : -1;
            if (next < nrows) bulk_load(ws.slots + (size_t)s * C, x + (int64_t)ws.rows[s] * C, bytes, &ws.bars[s]);
        }
        next += next < nrows;
        __syncwarp();
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, lane, eps);
    }
}
extern "C" __global__ void __launch_bounds__(512) x_landing_p2(LN_ARGS) { landing_order<2>(x, w, b, out, mean, rstd, N, C, eps); }
extern "C" __global__ void __launch_bounds__(512) x_landing_p4(LN_ARGS) { landing_order<4>(x, w, b, out, mean, rstd, N, C, eps); }
extern "C" __global__ void __launch_bounds__(512) x_landing_p8(LN_ARGS) { landing_order<8>(x, w, b, out, mean, rstd, N, C, eps); }

// ---- dynamic rows: a warp's next row comes from a counter --------------------------------
// mode 0: one global counter for the grid (all rows dynamic).
// mode 1: each block a global counter for its own range, the first P rows of every warp static,
//         and a warp whose block is exhausted steals from the next `ksteal` blocks.
// mode 2: as 1 with the block's counter in shared memory (no stealing).
// The grab for the next row is issued one row ahead (its latency hides behind the row being
// normalized). With global counters the last warp to finish zeroes them for the next launch.
template <int mode>  // a template parameter: as a runtime switch it slowed every mode down
__device__ __forceinline__ void dynamic_rows(LN_ARGS, int P, int* __restrict__ ctrs, int ksteal) {
    constexpr int ITEMS = 6;
    extern __shared__ __align__(128) unsigned char smem[];
    __shared__ int s_next;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5, G = gridDim.x;
    const WarpSlots ws = warp_slots(smem, P, C, 0);
    const uint32_t bytes = (uint32_t)C * 4u;
    auto rstart = [&](int k) { return (int)((int64_t)N * k / G); };
    const int nstatic = mode == 0 ? 0 : nwarps * P;
    int cb = blockIdx.x, raw = 0, tried = 0;
    bool exhausted = false;
    auto grab = [&]() {
        if constexpr (mode == 0) return atomicAdd(ctrs, 1);
        else if constexpr (mode == 1) return atomicAdd(&ctrs[cb], 1);
        else return atomicAdd(&s_next, 1);
    };
    auto resolve = [&]() -> int {  // lane 0: the row the grab in flight (`raw`) names
        if (exhausted) return N;
        if constexpr (mode == 0) {
            return raw < N ? raw : N;
        } else {
            for (;;) {
                const int row = rstart(cb) + nstatic + raw;
                if (row < rstart(cb + 1)) return row;
                if (mode == 2 || tried >= ksteal) { exhausted = true; return N; }
                ++tried;
                cb = cb + 1 == G ? 0 : cb + 1;
                raw = atomicAdd(&ctrs[cb], 1);
            }
        }
    };
    if (threadIdx.x == 0) s_next = 0;
    __syncthreads();
    if (lane == 0) {
        init_barriers(ws, P);
        for (int s = 0; s < P; ++s) {
            int row;
            if (mode == 0) { raw = grab(); row = resolve(); }
            else { row = rstart(blockIdx.x) + warp + s * nwarps; if (row >= rstart(blockIdx.x + 1)) row = N; }
            ws.rows[s] = row;
            if (row < N) bulk_load(ws.slots + (size_t)s * C, x + (int64_t)row * C, bytes, &ws.bars[s]);
        }
        raw = grab();
    }
    __syncwarp();
    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
    load_wb4<ITEMS>(w, b, nvec, lane, wv, bv);
    // slots are consumed in order t % P and hold rows in grab order; a slot holding N is empty
    for (int t = 0, empty = 0; empty < P; ++t) {
        const int s = t % P, row = ws.rows[s];
        if (row >= N) { ++empty; continue; }
        empty = 0;
        mbar_wait(&ws.bars[s], (uint32_t)(t / P) & 1u);
        slot_to_regs<ITEMS>(ws.slots + (size_t)s * C, nvec, lane, v);
        __syncwarp();
        if (lane == 0) {
            const int next = resolve();
            ws.rows[s] = next;
            if (next < N) { bulk_load(ws.slots + (size_t)s * C, x + (int64_t)next * C, bytes, &ws.bars[s]); raw = grab(); }
        }
        __syncwarp();
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, lane, eps);
    }
    if (lane == 0 && mode != 2) {
        asm volatile("" :: "r"(raw));  // every grab has returned, so it is performed
        __threadfence();
        const int ncounters = mode == 0 ? 1 : G;
        if (atomicAdd(&ctrs[ncounters], 1) == G * nwarps - 1)
            for (int k = 0; k <= ncounters; ++k) atomicExch(&ctrs[k], 0);
    }
}

extern "C" __global__ void __launch_bounds__(512) x_dynamic_global(LN_ARGS, int P, int* ctrs, int ksteal) {
    dynamic_rows<0>(x, w, b, out, mean, rstd, N, C, eps, P, ctrs, ksteal); }
extern "C" __global__ void __launch_bounds__(512) x_dynamic_blocks(LN_ARGS, int P, int* ctrs, int ksteal) {
    dynamic_rows<1>(x, w, b, out, mean, rstd, N, C, eps, P, ctrs, ksteal); }
extern "C" __global__ void __launch_bounds__(512) x_dynamic_shared(LN_ARGS, int P, int* ctrs, int ksteal) {
    dynamic_rows<2>(x, w, b, out, mean, rstd, N, C, eps, P, ctrs, ksteal); }

// ---- v7 variants: bulk stores, L2 prefetch ahead, staggered start, per-warp timestamps ------
// The shipped v7 loop with compile-time hooks (a kernel with all of them as runtime switches ran
// 0.3-2.6 us slower than v7 itself, which made its "off" baseline useless).
// STORE: the normalized row goes to one of two shared-memory out slots and one bulk copy stores it.
// PREFETCH: cp.async.bulk.prefetch.L2 of the row D ahead of the slots.
// STAGGER: warps >= late_warp wait delay_ns before their first request.
// STAMPS: per warp (start, first row in registers, end) from %globaltimer into `stamps`.
template <bool STORE, bool PREFETCH, bool STAGGER, bool STAMPS>
__device__ __forceinline__ void v7_variant(LN_ARGS, int P, int D, int late_warp, int delay_ns,
                                           unsigned long long* __restrict__ stamps) {
    constexpr int ITEMS = 6;
    unsigned long long t_start = 0, t_first = 0;
    if constexpr (STAMPS) t_start = gtime();
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const WarpSlots ws = warp_slots(smem, P, C, STORE ? 2 : 0);
    const int row0 = block_first_row(N), nrows = rows_of_warp(N, row0);
    const uint32_t bytes = (uint32_t)C * 4u;
    auto rowp = [&](int t) { return x + (int64_t)(row0 + warp + t * nwarps) * C; };
    if (lane == 0) {
        init_barriers(ws, P);
        if constexpr (STAGGER) {
            if (warp >= late_warp) { const unsigned long long t0 = gtime(); while (gtime() - t0 < (unsigned long long)delay_ns) {} }
        }
        for (int t = 0; t < P && t < nrows; ++t) bulk_load(ws.slots + (size_t)t * C, rowp(t), bytes, &ws.bars[t]);
        if constexpr (PREFETCH) for (int t = P; t < P + D && t < nrows; ++t) prefetch_l2(rowp(t), bytes);
    }
    __syncwarp();
    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
    load_wb4<ITEMS>(w, b, nvec, lane, wv, bv);
    for (int t = 0; t < nrows; ++t) {
        const int s = t % P, row = row0 + warp + t * nwarps;
        mbar_wait(&ws.bars[s], (uint32_t)(t / P) & 1u);
        slot_to_regs<ITEMS>(ws.slots + (size_t)s * C, nvec, lane, v);
        if constexpr (STAMPS) if (t == 0) t_first = gtime();
        __syncwarp();
        if (lane == 0) {
            if (t + P < nrows) { fence_proxy_async_smem(); bulk_load(ws.slots + (size_t)s * C, rowp(t + P), bytes, &ws.bars[s]); }
            if constexpr (PREFETCH) if (t + P + D < nrows) prefetch_l2(rowp(t + P + D), bytes);
        }
        if constexpr (!STORE) {
            normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, lane, eps);
        } else {
            if (lane == 0) asm volatile("cp.async.bulk.wait_group.read 1;" ::: "memory");  // out slot t&1 is free
            __syncwarp();
            // normalize_row4 with the out slot as the target
            float* os = ws.slots + (size_t)(P + (t & 1)) * C;
            float m0, md, r;
            row_stats4<ITEMS>(v, C, nvec, lane, eps, m0, md, r);
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int j = lane + 32 * i;
                if (j < nvec) reinterpret_cast<float4*>(os)[j] = make_float4((v[i].x - md) * r * wv[i].x + bv[i].x,
                    (v[i].y - md) * r * wv[i].y + bv[i].y, (v[i].z - md) * r * wv[i].z + bv[i].z, (v[i].w - md) * r * wv[i].w + bv[i].w);
            }
            if (lane == 0) { mean[row] = m0 + md; rstd[row] = r; }
            asm volatile("fence.proxy.async.shared::cta;" ::: "memory");  // the copy engine reads os next
            __syncwarp();
            if (lane == 0) {
                asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                             :: "l"(out + (int64_t)row * C), "r"(smem_addr(os)), "r"(bytes) : "memory");
                asm volatile("cp.async.bulk.commit_group;" ::: "memory");
            }
        }
    }
    if constexpr (STORE) if (lane == 0) asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
    if constexpr (STAMPS) if (lane == 0) {
        const int gw = blockIdx.x * nwarps + warp;
        stamps[3 * gw] = t_start; stamps[3 * gw + 1] = t_first; stamps[3 * gw + 2] = gtime();
    }
}
#define V7_VARIANT(NAME, STORE, PREFETCH, STAGGER, STAMPS)                                          \
    extern "C" __global__ void __launch_bounds__(512) NAME(LN_ARGS, int P, int D, int late_warp,   \
                                                           int delay_ns, unsigned long long* stamps) { \
        v7_variant<STORE, PREFETCH, STAGGER, STAMPS>(x, w, b, out, mean, rstd, N, C, eps, P, D,     \
                                                     late_warp, delay_ns, stamps); }
V7_VARIANT(x_v7_base, false, false, false, false)
V7_VARIANT(x_v7_bulk_store, true, false, false, false)
V7_VARIANT(x_v7_prefetch, false, true, false, false)
V7_VARIANT(x_v7_stagger, false, false, true, false)
V7_VARIANT(x_v7_stamped, false, false, false, true)

// the float4 copy with the same stamps: (start, first load back, end) per warp
extern "C" __global__ void x_copy_stamped(const float4* __restrict__ x, float4* __restrict__ y, int n4,
                                          unsigned long long* __restrict__ stamps) {
    const unsigned long long t0 = gtime();
    unsigned long long t1 = 0;
    bool first = true;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        const float4 v = x[i];
        if (first) { t1 = gtime(); first = false; asm volatile("" :: "f"(v.x)); }
        y[i] = v;
    }
    if ((threadIdx.x & 31) == 0) {
        const int gw = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        stamps[3 * gw] = t0; stamps[3 * gw + 1] = t1; stamps[3 * gw + 2] = gtime();
    }
}
'''


class Bench:
    """The 8192 x 768 case, a ragged stress case, the kernels and the reporting, in one place."""

    def __init__(self):
        self.cuda = driver()
        info = device_info()
        self.sms, self.optin, self.smem_per_sm = info["sms"], info["smem_per_block_optin"], info["smem_per_sm"]
        self.copy = copy_bandwidth_gbps()
        rng = np.random.default_rng(0)
        self.case = D.make_case((8192, 768), rng)
        self.small = D.make_case((1025, 764), rng, stress=True)
        self.d, self.ds = H.DeviceCase(self.case), H.DeviceCase(self.small)
        for dd in (self.d, self.ds):
            dd.scratch("ctrs", 1024, np.int32, zero=True)
            dd.scratch("stamps", 3 * 132 * 64, np.uint64)
        self._mods, self._fns = {}, {}
        print(f"{info['name']}: copy ceiling {self.copy:.0f} GB/s; 80% at 8192x768 = "
              f"{self.case.bytes / (0.8 * self.copy * 1e3):.2f} us")

    def fn(self, name, signature, build=()):
        """Kernel `name` from kernel.cu with the text edits `build` plus EXPERIMENTS_CU."""
        build = tuple(build)
        if build not in self._mods:
            src = KERNEL.read_text()
            for edit in build:
                old, new = EDITS[edit]
                assert old in src, f"kernel.cu changed: the '{edit}' edit no longer applies"
                src = src.replace(old, new)
            path = Path(tempfile.mkdtemp()) / "kernel.cu"
            path.write_text(src + EXPERIMENTS_CU)
            self._mods[build] = load_module(path, options=["-diag-suppress", "1556"])
        key = (name, build)
        if key not in self._fns:
            f = self._mods[build].get_function(name)
            f.prepare(signature)
            room = self.optin - f.shared_size_bytes
            if room > 48 * 1024:
                f.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, room)
            self._fns[key] = f
        return self._fns[key]

    def ln(self, name, signature_extra="", build=(), warps=8, per_sm=1, smem=0, extra=()):
        """A launcher for a LayerNorm-shaped kernel: (dd) -> launch on DeviceCase dd. `extra` is a
        function of dd giving the arguments after eps."""
        f = self.fn(name, D.SIG + signature_extra, build)

        def go(dd):
            n, c = dd.size
            f.prepared_call((min(self.sms * per_sm, n), 1, 1), (32 * warps, 1, 1), dd.x, dd.w, dd.b, dd.out,
                            dd.mean, dd.rstd, n, c, np.float32(D.EPS), *extra(dd), shared_size=smem)
        return go

    def ok(self, go):
        """go(dd) correct on the 8192 x 768 case and on the ragged stress case (twice for the
        first: kernels with counters must leave them ready for the next launch)."""
        good = True
        for dd, case in ((self.d, self.case), (self.ds, self.small), (self.d, self.case)):
            dd.poison_outputs()
            go(dd)
            self.cuda.Context.synchronize()
            good &= compare_all(dd.outputs(), case.expected(), case.tolerance()).ok
        return good

    def time(self, label, go, check=True):
        good = self.ok(go) if check else None
        us = min(time_fn(lambda: go(self.d), repeats=80).median_ms for _ in range(2)) * 1e3
        pct = 100 * self.case.bytes / (us * 1e-6) / 1e9 / self.copy
        print(f"  {label:52s} {us:7.2f} us {pct:6.1f}%" + ("" if good is None else f"  ok={good}"), flush=True)

    def slots_smem(self, warps, P, extra_rows=0):
        return -(-warps * P * 12 // 128) * 128 + warps * (P + extra_rows) * 768 * 4

    def fits(self, smem, per_sm):
        return smem <= self.optin and per_sm * (smem + 1024) <= self.smem_per_sm


# ---- the experiments ------------------------------------------------------------------------

def e_reference(B):
    """memcpy of the same bytes, and the shipped v6 and v7."""
    n, c = B.case.size
    t = time_fn(lambda: B.cuda.memcpy_dtod(B.d.out, B.d.x, n * c * 4), repeats=100)
    print(f"  {'cuMemcpyDtoD of the same bytes':52s} {t.median_ms * 1e3:7.2f} us")
    for v in ("v6", "v7"):
        B.time(f"{v} as shipped", lambda dd, v=v: D.launch(v, dd))


def e_smem_passes(B):
    """normalize straight from the slot: three passes over shared memory per row."""
    for warps, P in ((4, 8), (8, 4), (16, 2), (32, 1)):
        smem = B.slots_smem(warps, P)
        B.time(f"W={warps} P={P}", B.ln("x_smem_passes", "i", (), warps, 1, smem, lambda dd, P=P: (P,)))


def e_slots(B):
    """the shipped v7 body with W warps x P slots, blocks per SM (more rows in flight)."""
    for warps, P, per_sm in ((8, 1, 2), (8, 2, 2), (16, 1, 1), (16, 2, 1), (8, 4, 1), (8, 8, 1)):
        smem = B.slots_smem(warps, P)
        B.time(f"W={warps} P={P} blocks/SM={per_sm}", B.ln("x_v7_w16", "i", (), warps, per_sm, smem, lambda dd, P=P: (P,)))


def e_builds(B):
    """build variants of the shipped v7 (and v6): stores, L2 policy, the proxy fence, reads only."""
    for build in ((), ("wb",), ("evict_first",), ("wb", "evict_first"), ("nofence",), ("reads_only",)):
        f = B.fn("layernorm_v7_items6", D.SIG + "i", build)
        smem = B.slots_smem(8, 1)
        grid = B.sms * blocks_per_sm(f, 256, smem)

        def go(dd, f=f, smem=smem, grid=grid):
            n, c = dd.size
            f.prepared_call((min(grid, n), 1, 1), (256, 1, 1), dd.x, dd.w, dd.b, dd.out, dd.mean, dd.rstd,
                            n, c, np.float32(D.EPS), 1, shared_size=smem)
        B.time(f"v7 {'+'.join(build) or 'as shipped'}", go, check="reads_only" not in build)
    for build in ((), ("wb",), ("reads_only",)):
        f6 = B.fn("layernorm_v6_items6", D.SIG, build)
        B.time(f"v6 {'+'.join(build) or 'as shipped'}",
               lambda dd, f6=f6: f6.prepared_call((B.sms * 2, 1, 1), (256, 1, 1), dd.x, dd.w, dd.b, dd.out,
                                                  dd.mean, dd.rstd, *dd.size, np.float32(D.EPS)),
               check="reads_only" not in build)


def e_split(B):
    """v6 with v7's contiguous equal split of rows, plain and streaming stores."""
    for build in ((), ("wb",)):
        for warps, per_sm in ((8, 2), (16, 1), (4, 4)):
            B.time(f"v6 split {'+'.join(build) or 'stcs'} W={warps} blocks/SM={per_sm}",
                   B.ln("x_v6_split", "", build, warps, per_sm, 0, lambda dd: ()))


def e_floors(B):
    """what a copy kernel and a read-only kernel reach at this size; an empty launch."""
    n4 = B.case.size[0] * B.case.size[1] // 4
    fe = B.fn("x_empty", "i")
    B.time("empty kernel", lambda dd: fe.prepared_call((B.sms, 1, 1), (256, 1, 1), 0), check=False)
    for name, label in (("x_copy_f4", "float4 copy"), ("x_sum_f4", "float4 read-only sum")):
        f = B.fn(name, "PPi")
        for per_sm in (4, 8):
            B.time(f"{label}, 256 threads x {per_sm} blocks/SM",
                   lambda dd, f=f, p=per_sm: f.prepared_call((B.sms * p, 1, 1), (256, 1, 1), dd.x, dd.out, n4),
                   check=False)


def e_groups(B):
    """a row shared by 2, 3 or 6 warps (named barriers), contiguous rows, next row prefetched."""
    for name, gw in (("x_group2", 2), ("x_group3", 3), ("x_group6", 6)):
        for groups in (2, 4, 5):
            warps = gw * groups
            if warps > 32 or groups > 15:
                continue
            f = B.fn(name, D.SIG)
            per_sm = blocks_per_sm(f, 32 * warps)
            B.time(f"{gw} warps per row, {groups} rows per block, {per_sm} blocks/SM",
                   B.ln(name, "", (), warps, per_sm, 0, lambda dd: ()))


def e_landing(B):
    """rows taken in the order they land (lane 0 polls the slots with mbarrier.test_wait)."""
    for P in (2, 4, 8):
        for warps, per_sm in ((8, 1), (8, 2), (4, 4)):
            smem = B.slots_smem(warps, P)
            if B.fits(smem, per_sm):
                B.time(f"P={P} W={warps} blocks/SM={per_sm}", B.ln(f"x_landing_p{P}", "", (), warps, per_sm, smem, lambda dd: ()))


def e_dynamic(B):
    """rows from counters: one global counter; per-block global counters (+ stealing); a
    shared-memory counter per block."""
    for kernel, ksteal, label in (("global", 0, "one global counter"), ("blocks", 0, "per-block global counters"),
                                  ("blocks", 8, "per-block global counters, steal from 8"),
                                  ("shared", 0, "per-block shared counter")):
        for warps, P, per_sm in ((8, 1, 2), (8, 2, 1)):
            smem = B.slots_smem(warps, P)
            B.time(f"{label}, W={warps} P={P} blocks/SM={per_sm}",
                   B.ln(f"x_dynamic_{kernel}", "iPi", (), warps, per_sm, smem,
                        lambda dd, P=P, k=ksteal: (P, dd.scratch("ctrs", 1024, np.int32), k)))


def _variant(B, kernel, warps, P, per_sm, D_ahead=0, late=99, delay=0):
    """A launcher for x_v7_<kernel> (base, bulk_store, prefetch, stagger, stamped)."""
    smem = B.slots_smem(warps, P, 2 if kernel == "bulk_store" else 0)
    return B.ln(f"x_v7_{kernel}", "iiiiP", (), warps, per_sm, smem,
                lambda dd: (P, D_ahead, late, delay, dd.scratch("stamps", 3 * 132 * 64, np.uint64)))


def e_bulk_store(B):
    """the output through two shared-memory out slots per warp and bulk stores."""
    for warps, P, per_sm in ((8, 1, 2), (8, 2, 1), (16, 1, 1)):
        B.time(f"without, W={warps} P={P} blocks/SM={per_sm}", _variant(B, "base", warps, P, per_sm))
        B.time(f"with,    W={warps} P={P} blocks/SM={per_sm}", _variant(B, "bulk_store", warps, P, per_sm))


def e_prefetch(B):
    """cp.async.bulk.prefetch.L2 of the row D ahead of the slots (D = 1000: every row at the start)."""
    for warps, P, per_sm in ((8, 1, 2), (8, 2, 2)):
        B.time(f"no prefetch W={warps} P={P} blocks/SM={per_sm}", _variant(B, "base", warps, P, per_sm))
        for D_ahead in (1, 4, 1000):
            B.time(f"D={D_ahead} W={warps} P={P} blocks/SM={per_sm}", _variant(B, "prefetch", warps, P, per_sm, D_ahead))


def e_stagger(B):
    """warps >= k of each block wait delay_ns before their first request."""
    B.time("no stagger, W=8 P=1 blocks/SM=2", _variant(B, "base", 8, 1, 2))
    for late, delay in ((4, 200), (4, 800), (2, 400), (6, 800)):
        B.time(f"warps >= {late} wait {delay} ns", _variant(B, "stagger", 8, 1, 2, late=late, delay=delay))


def e_timeline(B):
    """per-warp %globaltimer stamps: start, first data, end (us after the first warp's start)."""
    n4 = B.case.size[0] * B.case.size[1] // 4
    fc = B.fn("x_copy_stamped", "PPiP")
    runs = [(f"float4 copy, 256 threads x {p} blocks/SM",
             lambda dd, p=p: fc.prepared_call((B.sms * p, 1, 1), (256, 1, 1), dd.x, dd.out, n4,
                                              dd.scratch("stamps", 3 * 132 * 64, np.uint64)), B.sms * p * 8, 8)
            for p in (4, 8)]
    runs += [(f"v7, W={w} P={P} blocks/SM={p}", _variant(B, "stamped", w, P, p), B.sms * p * w, w)
             for w, P, p in ((8, 1, 2), (16, 1, 1), (8, 2, 1))]
    buf = np.zeros(3 * 132 * 64, np.uint64)
    for label, go, nwarps, per_block in runs:
        event_us = time_fn(lambda: go(B.d), repeats=50).median_ms * 1e3
        rows = []
        for _ in range(5):
            _flusher()()
            go(B.d)
            B.cuda.Context.synchronize()
            B.cuda.memcpy_dtoh(buf, B.d.scratch("stamps", 3 * 132 * 64, np.uint64))
            s = buf[: 3 * nwarps].reshape(nwarps, 3).astype(np.int64)
            s = (s - s[:, 0].min()) / 1e3
            block_end = s[:, 2].reshape(-1, per_block).max(axis=1)
            rows.append([np.median(s[:, 1]), np.percentile(s[:, 2], 10), np.median(s[:, 2]), s[:, 2].max(),
                         np.percentile(block_end, 10), np.median(block_end)])
        r = np.median(np.array(rows), axis=0)
        print(f"  {label:40s} event {event_us:6.2f} | first data p50 {r[0]:5.2f} | warp end p10 {r[1]:5.2f} "
              f"p50 {r[2]:5.2f} max {r[3]:5.2f} | block end p10 {r[4]:5.2f} p50 {r[5]:5.2f}", flush=True)


EXPERIMENTS = {name[2:]: fn for name, fn in list(globals().items()) if name.startswith("e_")}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", help="experiments to run (default: all)")
    ap.add_argument("--list", action="store_true", help="name and describe the experiments")
    args = ap.parse_args()
    if args.list:
        for name, fn in EXPERIMENTS.items():
            print(f"{name:12s} {fn.__doc__}")
        return
    unknown = [n for n in args.names if n not in EXPERIMENTS]
    if unknown:
        ap.error(f"no experiment {', '.join(unknown)}; --list names them")
    B = Bench()
    for name in args.names or EXPERIMENTS:
        print(f"\n{name}: {EXPERIMENTS[name].__doc__}", flush=True)
        EXPERIMENTS[name](B)


if __name__ == "__main__":
    main()
