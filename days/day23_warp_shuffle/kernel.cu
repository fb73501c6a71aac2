// Day 23: warp-level primitives. Shuffles, votes and matches against their shared-memory twins.
//
// The versions (the day's table): row softmax of short rows (at most 1024 columns), ONE WARP
// PER ROW, the row held in registers (lane l keeps columns l, l+32, l+64, ...: coalesced at any
// width, odd ones included), read once and written once. Only the two reductions differ:
//   v1  softmax_v1_smem_items{N}     max and sum by a tree in the warp's 32 floats of shared
//                                    memory: 5 halving steps, each a store, __syncwarp, loads
//   v2  softmax_v2_shfl_items{N}     max and sum by __shfl_xor_sync butterflies (warp.cuh):
//                                    5 register exchanges, no shared memory, no barrier
// N = 1, 2, 4, 8, 16, 32 registers a lane (columns <= 32 N).
//
// Beside the versions (driver.py extras, checked and timed in pairs):
//   reduce_{smem,shfl}               sum of a large array: a block of 256 sums 2048 elements,
//                                    the block total by a shared-memory tree (8 barriers) or by
//                                    warp shuffles + one exchange of 8 warp sums (block_sum)
//   scan32_{smem,shfl}               inclusive scan of every segment of 32: Hillis-Steele in
//                                    shared memory vs __shfl_up_sync (warp_scan.cuh)
//   scan1024_{smem,shfl}             inclusive scan of every segment of 1024 (a block each):
//                                    Hillis-Steele over 1024 floats in shared memory (10
//                                    barrier steps) vs warp scans + a scan of the 32 warp totals
//   compact_{atomic,ballot}          stream compaction (keep x > t): one atomicAdd per kept
//                                    element vs one per warp (__ballot_sync + __popc), with
//                                    __any_sync skipping warps that keep nothing
//   hist_{atomic,match}              histogram of small keys: one atomicAdd per element vs one
//                                    per distinct key in the warp (__match_any_sync + __popc),
//                                    with an __all_sync fast path when the warp shares one key
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day23_warp_shuffle/kernel.cu
#include <cfloat>

#include "warp.cuh"
#include "warp_scan.cuh"

using namespace cuda100;

#define FULL 0xffffffffu
constexpr int SOFTMAX_THREADS = 256;             // 8 warps, 8 rows a block
constexpr int SOFTMAX_WARPS = SOFTMAX_THREADS / 32;

// ---- the two warp reductions of the versions -------------------------------------------------

// v1: a tree in this warp's 32 floats of shared memory. Step s: lanes < s combine red[lane]
// with red[lane + s] (which no lane writes in this step). __syncwarp orders the steps, and the
// last one keeps a lane from overwriting red[lane] for the next reduction while another lane
// still reads red[0].
template <bool IS_MAX>
__device__ __forceinline__ float smem_tree(float v, volatile float* red) {
    const int lane = threadIdx.x & 31;
    red[lane] = v;
    __syncwarp();
#pragma unroll
    for (int s = 16; s > 0; s >>= 1) {
        if (lane < s) red[lane] = IS_MAX ? fmaxf(red[lane], red[lane + s]) : red[lane] + red[lane + s];
        __syncwarp();
    }
    const float r = red[0];
    __syncwarp();
    return r;
}

template <int ITEMS, bool SHFL>
__device__ __forceinline__ void softmax_warp_row(const float* __restrict__ x, float* __restrict__ y,
                                                 int rows, int cols, volatile float* red) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * SOFTMAX_WARPS + (threadIdx.x >> 5);
    if (row >= rows) return;  // the whole warp leaves together (row is warp-uniform)
    const float* xr = x + (size_t)row * cols;
    float* yr = y + (size_t)row * cols;
    float v[ITEMS];
    float m = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int c = lane + 32 * i;
        v[i] = c < cols ? xr[c] : -FLT_MAX;
        m = fmaxf(m, v[i]);
    }
    m = SHFL ? warp_max(m) : smem_tree<true>(m, red);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        v[i] = lane + 32 * i < cols ? __expf(v[i] - m) : 0.f;
        s += v[i];
    }
    s = SHFL ? warp_sum(s) : smem_tree<false>(s, red);
    const float inv = 1.f / s;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int c = lane + 32 * i;
        if (c < cols) yr[c] = v[i] * inv;
    }
}

#define SOFTMAX_ENTRIES(N)                                                                          \
    extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)                                  \
        softmax_v1_smem_items##N(const float* __restrict__ x, float* __restrict__ y, int rows,     \
                                 int cols) {                                                       \
        __shared__ float red[SOFTMAX_WARPS][32];                                                   \
        softmax_warp_row<N, false>(x, y, rows, cols, red[threadIdx.x >> 5]);                       \
    }                                                                                              \
    extern "C" __global__ void __launch_bounds__(SOFTMAX_THREADS)                                  \
        softmax_v2_shfl_items##N(const float* __restrict__ x, float* __restrict__ y, int rows,     \
                                 int cols) {                                                       \
        softmax_warp_row<N, true>(x, y, rows, cols, nullptr);                                      \
    }

SOFTMAX_ENTRIES(1)
SOFTMAX_ENTRIES(2)
SOFTMAX_ENTRIES(4)
SOFTMAX_ENTRIES(8)
SOFTMAX_ENTRIES(16)
SOFTMAX_ENTRIES(32)

// ---- block reduction of a large array ---------------------------------------------------------
// Block b sums x[b*2048 .. b*2048+2047] (8 coalesced loads a thread, in flight together) into
// out[b]; the driver launches it again on the partial sums until one value is left.
constexpr int RED_THREADS = 256, RED_ITEMS = 8, RED_TILE = RED_THREADS * RED_ITEMS;

__device__ __forceinline__ float tile_partial(const float* __restrict__ x, int n) {
    const size_t base = (size_t)blockIdx.x * RED_TILE + threadIdx.x;
    float v[RED_ITEMS];
#pragma unroll
    for (int i = 0; i < RED_ITEMS; ++i) {
        const size_t j = base + (size_t)i * RED_THREADS;
        v[i] = j < (size_t)n ? x[j] : 0.f;
    }
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < RED_ITEMS; ++i) s += v[i];
    return s;
}

extern "C" __global__ void __launch_bounds__(RED_THREADS)
    reduce_smem(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float red[RED_THREADS];
    red[threadIdx.x] = tile_partial(x, n);
    __syncthreads();
#pragma unroll
    for (int s = RED_THREADS / 2; s > 0; s >>= 1) {  // 8 halving steps, a barrier after each
        if (threadIdx.x < s) red[threadIdx.x] += red[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[blockIdx.x] = red[0];
}

extern "C" __global__ void __launch_bounds__(RED_THREADS)
    reduce_shfl(const float* __restrict__ x, float* __restrict__ out, int n) {
    __shared__ float scratch[32];
    const float s = block_sum(tile_partial(x, n), scratch);  // warp.cuh: shuffles, 2 barriers
    if (threadIdx.x == 0) out[blockIdx.x] = s;
}

// ---- segmented inclusive scans ----------------------------------------------------------------
// Segments start at multiples of 32 (scan32) or 1024 (scan1024) of the flat array; the last one
// may be short. Elements past n enter the scan as 0 and are not written.

constexpr int SCAN_THREADS = 256;

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
    scan32_smem(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float buf[SCAN_THREADS];
    const int lane = threadIdx.x & 31;
    volatile float* s = buf + (threadIdx.x & ~31);  // this warp's 32 floats
    const size_t i = (size_t)blockIdx.x * SCAN_THREADS + threadIdx.x;
    float v = i < (size_t)n ? x[i] : 0.f;
    s[lane] = v;
    __syncwarp();
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float up = lane >= d ? s[lane - d] : 0.f;
        __syncwarp();  // every lane has read before any lane writes
        v += up;
        s[lane] = v;
        __syncwarp();
    }
    if (i < (size_t)n) y[i] = v;
}

extern "C" __global__ void __launch_bounds__(SCAN_THREADS)
    scan32_shfl(const float* __restrict__ x, float* __restrict__ y, int n) {
    const size_t i = (size_t)blockIdx.x * SCAN_THREADS + threadIdx.x;
    const float v = warp_inclusive_scan(i < (size_t)n ? x[i] : 0.f);
    if (i < (size_t)n) y[i] = v;
}

constexpr int SEG = 1024;

extern "C" __global__ void __launch_bounds__(SEG)
    scan1024_smem(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float buf[2][SEG];  // double buffer: read one, write the other, one barrier a step
    const int t = threadIdx.x;
    const size_t i = (size_t)blockIdx.x * SEG + t;
    buf[0][t] = i < (size_t)n ? x[i] : 0.f;
    __syncthreads();
    int src = 0;
#pragma unroll
    for (int d = 1; d < SEG; d <<= 1) {
        buf[src ^ 1][t] = t >= d ? buf[src][t] + buf[src][t - d] : buf[src][t];
        src ^= 1;
        __syncthreads();
    }
    if (i < (size_t)n) y[i] = buf[src][t];
}

extern "C" __global__ void __launch_bounds__(SEG)
    scan1024_shfl(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float scratch[32];
    const size_t i = (size_t)blockIdx.x * SEG + threadIdx.x;
    const float v = block_inclusive_scan(i < (size_t)n ? x[i] : 0.f, scratch);
    if (i < (size_t)n) y[i] = v;
}

// ---- votes: stream compaction -----------------------------------------------------------------
// out gets every x[i] > t (in no particular order), *count how many. *count must be 0 before.
// Grid-stride over warps of 32 elements; the loop bound is warp-uniform so every lane reaches
// every vote (lanes past n vote "keep nothing").

constexpr int COMPACT_THREADS = 256;

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
    compact_atomic(const float* __restrict__ x, float* __restrict__ out, int* __restrict__ count,
                   int n, float t) {
    const size_t stride = (size_t)gridDim.x * COMPACT_THREADS;
    for (size_t i = (size_t)blockIdx.x * COMPACT_THREADS + threadIdx.x; i < (size_t)n; i += stride) {
        const float v = x[i];
        if (v > t) out[atomicAdd(count, 1)] = v;  // one atomic per kept element
    }
}

extern "C" __global__ void __launch_bounds__(COMPACT_THREADS)
    compact_ballot(const float* __restrict__ x, float* __restrict__ out, int* __restrict__ count,
                   int n, float t) {
    const int lane = threadIdx.x & 31;
    const size_t stride = (size_t)gridDim.x * COMPACT_THREADS;
    for (size_t base = (size_t)blockIdx.x * COMPACT_THREADS + (threadIdx.x & ~31); base < (size_t)n;
         base += stride) {
        const size_t i = base + lane;
        const float v = i < (size_t)n ? x[i] : 0.f;
        const bool keep = i < (size_t)n && v > t;
        if (!__any_sync(FULL, keep)) continue;            // nothing kept: no atomic at all
        const unsigned mask = __ballot_sync(FULL, keep);  // bit l: lane l keeps its element
        int at = 0;
        if (lane == 0) at = atomicAdd(count, __popc(mask));  // one atomic for the whole warp
        at = __shfl_sync(FULL, at, 0);
        // a lane's slot: the warp's base + the kept lanes below it
        if (keep) out[at + __popc(mask & ((1u << lane) - 1u))] = v;
    }
}

// ---- matches: histogram of small keys ---------------------------------------------------------
// hist[k] += how many keys equal k (0 <= k < bins; the driver checks the keys). hist must be 0.

constexpr int HIST_THREADS = 256;

extern "C" __global__ void __launch_bounds__(HIST_THREADS)
    hist_atomic(const int* __restrict__ keys, int* __restrict__ hist, int n) {
    const size_t stride = (size_t)gridDim.x * HIST_THREADS;
    for (size_t i = (size_t)blockIdx.x * HIST_THREADS + threadIdx.x; i < (size_t)n; i += stride)
        atomicAdd(hist + keys[i], 1);
}

extern "C" __global__ void __launch_bounds__(HIST_THREADS)
    hist_match(const int* __restrict__ keys, int* __restrict__ hist, int n) {
    const int lane = threadIdx.x & 31;
    const size_t stride = (size_t)gridDim.x * HIST_THREADS;
    for (size_t base = (size_t)blockIdx.x * HIST_THREADS + (threadIdx.x & ~31); base < (size_t)n;
         base += stride) {
        const size_t i = base + lane;
        const bool in = i < (size_t)n;
        const int k = in ? keys[i] : -1;  // lanes past n form their own group (key -1), skipped
        const int k0 = __shfl_sync(FULL, k, 0);
        if (__all_sync(FULL, k == k0)) {  // one key for the whole warp (so every lane is in)
            if (lane == 0) atomicAdd(hist + k0, 32);
            continue;
        }
        const unsigned peers = __match_any_sync(FULL, k);  // the lanes holding my key
        const int leader = __ffs(peers) - 1;               // the lowest of them adds for all
        if (in && lane == leader) atomicAdd(hist + k, __popc(peers));
    }
}
