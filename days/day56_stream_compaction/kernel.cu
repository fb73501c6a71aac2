// Day 56: stream compaction. Three operations, each an exclusive scan of 0/1 flags used as
// output positions:
//
//   select     y = the x[i] with x[i] > t, in order; count = how many
//   partition  y = the selected in order, then the rejected in REVERSE order (as CUB's
//              DevicePartition::If: a rejected element's place is counted from the end, so a
//              single pass never needs the total); count = how many were selected
//   unique     y = x without consecutive duplicates (x[i] kept iff i == 0 or x[i] != x[i-1];
//              np.unique on sorted input, cub::DeviceSelect::Unique); count = how many kept
//
// float32 values, any n from 1 to 2^31 - 1. Every entry point takes the op as a template
// argument (OP_SELECT, OP_PARTITION, OP_UNIQUE) and exists in three copies, *_select,
// *_partition, *_unique.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I common/cuda -cubin kernel.cu
// Run:               python run_day.py 56
//
// Versions:
//   v1  three passes, one thread an element: flags (write n ints), a multi-kernel scan of the
//       flags (scan-then-propagate, blocks of 1024), scatter (read x and the positions).
//       About 5 reads/writes of n words beside the op's own
//   v2  two passes over x: per-tile counts (read x), one block scans the tile counts, then
//       every tile recomputes its flags and ranks and scatters from its tile's offset (read x
//       again). Ranks inside a tile come from warp ballots: no per-element memory at all
//   v3  one pass, decoupled look-back (Merrill & Garland, 2016): tiles take their index from
//       an atomic counter, publish their count (A), look back at their predecessors' words
//       until an inclusive prefix (P) turns up, publish their own P and scatter. x is read
//       once and y written once: the op's own bytes
//   v4  v3 with the tile compacted in shared memory first, so the writes to y go out as
//       whole 128-byte lines (v3's scatter writes each warp's selected lanes only), the
//       staging done while the look-back waits, and x read with 16-byte loads: 8 warps x 16
//       items, each lane's items four float4s (the fastest shape of the first sweep). The
//       shape and four options (16-byte stores of the staged runs, streaming loads, a fast
//       path for whole tiles, a dedicated look-back warp) are template arguments; the
//       candidates at the end of the file are compared by .notes/day56_sweep.py
//
// The look-back's status words carry the launch number, so nothing is cleared between
// launches (day 17's v5 does the same); see "Look-back" below.
#include <cstdint>

#include "warp_scan.cuh"  // cuda100::warp_inclusive_scan (day 23)

#define OP_SELECT 0
#define OP_PARTITION 1
#define OP_UNIQUE 2

#define FULL_MASK 0xffffffffu

// Whether an element is kept. `prev` is x[i - 1] (unique only), `first` whether i == 0.
template <int OP>
__device__ __forceinline__ bool keep(float v, float prev, bool first, float t) {
    if constexpr (OP == OP_UNIQUE) return first || v != prev;  // NaN != NaN: every NaN is kept
    else return v > t;                                          // NaN > t is false: rejected
}

__device__ __forceinline__ unsigned lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// ---------------------------------------------------------------------------------------
// v1: an element a thread, three passes.
// ---------------------------------------------------------------------------------------
#define V1_THREADS 512
#define V1_SCAN_THREADS 1024

template <int OP>
__device__ __forceinline__ void v1_flags(const float* __restrict__ x, int* __restrict__ f,
                                         long long n, float t) {
    const long long i = (long long)blockIdx.x * V1_THREADS + threadIdx.x;
    if (i >= n) return;
    const float v = x[i];
    const float prev = (OP == OP_UNIQUE && i > 0) ? x[i - 1] : 0.f;
    f[i] = keep<OP>(v, prev, i == 0, t) ? 1 : 0;
}

// Inclusive scan of one int a thread over the block (blockDim.x a multiple of 32, <= 1024).
// scratch: 32 ints of shared memory. Safe to call again after a barrier.
__device__ __forceinline__ int block_inclusive_scan_int(int v, int* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = cuda100::warp_inclusive_scan(v);
    if (lane == 31) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        int s = lane < warps ? scratch[lane] : 0;
        s = cuda100::warp_inclusive_scan(s);
        if (lane < warps) scratch[lane] = s;
    }
    __syncthreads();
    return warp > 0 ? v + scratch[warp - 1] : v;
}

// Scan-then-propagate, level k: each block scans 1024 ints (inclusive) and leaves its total
// in sums[block]. In place is fine: a block reads its own elements before it writes them.
extern "C" __global__ void __launch_bounds__(V1_SCAN_THREADS)
compact_v1_scan_block(const int* in, int* out, int* sums, long long n) {
    __shared__ int scratch[32];
    const long long i = (long long)blockIdx.x * V1_SCAN_THREADS + threadIdx.x;
    const int incl = block_inclusive_scan_int(i < n ? in[i] : 0, scratch);
    if (i < n) out[i] = incl;
    if (threadIdx.x == V1_SCAN_THREADS - 1) sums[blockIdx.x] = incl;
}

// Block b >= 1 adds the scanned total of blocks 0 .. b-1. Launched with one block fewer.
extern "C" __global__ void __launch_bounds__(V1_SCAN_THREADS)
compact_v1_scan_add(int* out, const int* scanned_sums, long long n) {
    const long long b = (long long)blockIdx.x + 1;
    const long long i = b * V1_SCAN_THREADS + threadIdx.x;
    if (i < n) out[i] += scanned_sums[b - 1];
}

// pos = inclusive scan of the flags: element i is kept iff pos[i] != pos[i-1], and then goes
// to y[pos[i] - 1]. A rejected element (partition) has i - pos[i-1] rejected before it and
// goes to y[n - 1 - that]. The last thread writes the count.
template <int OP>
__device__ __forceinline__ void v1_scatter(const float* __restrict__ x, const int* __restrict__ pos,
                                           float* __restrict__ y, int* __restrict__ count,
                                           long long n) {
    const long long i = (long long)blockIdx.x * V1_THREADS + threadIdx.x;
    if (i >= n) return;
    const int s = pos[i], before = i > 0 ? pos[i - 1] : 0;
    if (s != before) y[s - 1] = x[i];
    else if (OP == OP_PARTITION) y[n - 1 - (i - before)] = x[i];
    if (i == n - 1) *count = s;
}

// ---------------------------------------------------------------------------------------
// Tiles for v2-v4. A block of WARPS warps owns a tile of WARPS * 32 * ITEMS consecutive
// elements; warp w owns the w-th slice of 32 * ITEMS. Two layouts of a slice in registers:
//   scalar (VEC false): item k of lane l is element 32k + l of the slice. Each load is a
//     warp reading 128 contiguous bytes, and the order of the items, (k, lane), is the order
//     of the elements: in one instruction, selected lanes have consecutive ranks
//   float4 (VEC true): items 4g .. 4g+3 of lane l are elements 128g + 4l .. 128g + 4l + 3,
//     one 16-byte load; the order is (g, lane, component)
// A tile's flags live in one 32-bit word a thread (bit k = item k kept), so ITEMS <= 32.
// ---------------------------------------------------------------------------------------
template <int WARPS, int ITEMS, bool VEC>
struct Tile {
    static_assert(ITEMS <= 32, "one bit an item in a 32-bit word");
    static_assert(!VEC || ITEMS % 4 == 0, "float4 items come in fours");
    static constexpr int THREADS = WARPS * 32;
    static constexpr int SIZE = WARPS * 32 * ITEMS;

    // position of this lane's item k inside the tile
    static __device__ __forceinline__ int pos(int k) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        return VEC ? warp * 32 * ITEMS + (k >> 2) * 128 + lane * 4 + (k & 3)
                   : warp * 32 * ITEMS + k * 32 + lane;
    }

    // Load the tile at `base`; elements past n read as 0 (their flags are cleared anyway).
    // BOUNDS false: the caller knows the whole tile is inside x (no per-element checks).
    // CS: streaming loads (ld.global.cs, evict-first: x is read once).
    template <bool BOUNDS = true, bool CS = false>
    static __device__ __forceinline__ void load(const float* __restrict__ x, long long base,
                                                long long n, float (&v)[ITEMS]) {
        if constexpr (VEC) {
#pragma unroll
            for (int g = 0; g < ITEMS / 4; ++g) {
                const long long e = base + pos(4 * g);  // a multiple of 4: 16-byte aligned
                if (!BOUNDS || e + 3 < n) {
                    const float4* p = reinterpret_cast<const float4*>(x + e);
                    const float4 q = CS ? __ldcs(p) : *p;
                    v[4 * g] = q.x; v[4 * g + 1] = q.y; v[4 * g + 2] = q.z; v[4 * g + 3] = q.w;
                } else {
#pragma unroll
                    for (int c = 0; c < 4; ++c) v[4 * g + c] = e + c < n ? x[e + c] : 0.f;
                }
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const long long e = base + pos(k);
                v[k] = (!BOUNDS || e < n) ? (CS ? __ldcs(x + e) : x[e]) : 0.f;
            }
        }
    }

    // The flags of the tile (bit k: item k kept; 0 past n). Unique compares each element with
    // the one before it: inside a lane's float4 from registers, across lanes by a shuffle,
    // and the first element of the warp's slice reads its predecessor from memory (a line
    // this block or the previous tile has just read: an L1 or L2 hit).
    template <int OP, bool BOUNDS = true>
    static __device__ __forceinline__ unsigned flags(const float* __restrict__ x, long long base,
                                                     long long n, float t,
                                                     const float (&v)[ITEMS]) {
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        float before_slice = 0.f;
        if constexpr (OP == OP_UNIQUE) {
            const long long e0 = base + (long long)warp * 32 * ITEMS;  // the slice's first element
            if (lane == 0 && e0 > 0 && e0 <= n) before_slice = x[e0 - 1];
        }
        unsigned bits = 0;
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const long long e = base + pos(k);
            float prev = 0.f;
            if constexpr (OP == OP_UNIQUE) {
                // the element before item k of lane l: in a float4, the component before it;
                // else the same row's item of lane l - 1 (VEC: its last component), and for
                // lane 0 lane 31's last item of the row before, or the slice's predecessor
                if constexpr (VEC) {
                    if (k & 3) {
                        prev = v[k - 1];
                    } else {
                        const float up = __shfl_up_sync(FULL_MASK, v[k + 3], 1);
                        const float wrap = k > 0 ? __shfl_sync(FULL_MASK, v[k - 1], 31) : before_slice;
                        prev = lane > 0 ? up : wrap;
                    }
                } else {
                    const float up = __shfl_up_sync(FULL_MASK, v[k], 1);
                    const float wrap = k > 0 ? __shfl_sync(FULL_MASK, v[k - 1], 31) : before_slice;
                    prev = lane > 0 ? up : wrap;
                }
            }
            if ((!BOUNDS || e < n) && keep<OP>(v[k], prev, e == 0, t)) bits |= 1u << k;
        }
        return bits;
    }

    // Walk the items in order with the number of kept elements of the TILE before each:
    // emit(k, kept_before, kept). `warp_base`: the kept elements of the warps before this one.
    template <class Emit>
    static __device__ __forceinline__ void ranks(unsigned bits, int warp_base, Emit emit) {
        const unsigned lt = lanemask_lt();
        int r = warp_base;
        if constexpr (VEC) {
#pragma unroll
            for (int g = 0; g < ITEMS / 4; ++g) {
                int lanes_before = 0, row = 0;
                unsigned b[4];
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    b[c] = __ballot_sync(FULL_MASK, (bits >> (4 * g + c)) & 1u);
                    lanes_before += __popc(b[c] & lt);
                    row += __popc(b[c]);
                }
                int own = 0;
#pragma unroll
                for (int c = 0; c < 4; ++c) {
                    const bool kept = (bits >> (4 * g + c)) & 1u;
                    emit(4 * g + c, r + lanes_before + own, kept);
                    own += kept;
                }
                r += row;
            }
        } else {
#pragma unroll
            for (int k = 0; k < ITEMS; ++k) {
                const unsigned b = __ballot_sync(FULL_MASK, (bits >> k) & 1u);
                emit(k, r + __popc(b & lt), ((bits >> k) & 1u) != 0);
                r += __popc(b);
            }
        }
    }
};

// Barrier among the first WARPS warps only (named barrier 1), for v4's blocks whose last warp
// does the look-back and must not be waited for; with no such warp, __syncthreads.
template <int WARPS, bool NAMED>
__device__ __forceinline__ void data_warps_sync() {
    if constexpr (NAMED) asm volatile("bar.sync 1, %0;" ::"n"(WARPS * 32) : "memory");
    else __syncthreads();
}

// The kept elements of each warp, then each warp's offset in the tile and the tile's total.
// warp_tot: WARPS ints of shared memory. Ends with a barrier passed by the WARPS data warps
// (NAMED: barrier 1 of WARPS * 32 threads; else the whole block's).
template <int WARPS, bool NAMED = false>
__device__ __forceinline__ int tile_offsets(unsigned bits, int* warp_tot, int* warp_base) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int mine = __reduce_add_sync(FULL_MASK, __popc(bits));
    if (lane == 0) warp_tot[warp] = mine;
    data_warps_sync<WARPS, NAMED>();
    int before = 0, total = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const int c = warp_tot[w];
        before += w < warp ? c : 0;
        total += c;
    }
    *warp_base = before;
    return total;
}

// Scatter straight from registers (v2, v3): kept element -> y[prefix + rank]; partition's
// rejected element at tile position q, with q - rank rejected before it in the tile and
// base - prefix in earlier tiles -> y[n - 1 - (base - prefix) - (q - rank)].
template <int OP, class T>
__device__ __forceinline__ void scatter_direct(float* __restrict__ y, long long base, long long n,
                                               long long prefix, unsigned bits, int warp_base,
                                               const float (&v)[T::SIZE / T::THREADS]) {
    const long long rej_end = n - 1 - (base - prefix);
    T::ranks(bits, warp_base, [&](int k, int rank, bool kept) {
        if (kept) {
            y[prefix + rank] = v[k];
        } else if (OP == OP_PARTITION) {
            const int q = T::pos(k);
            if (base + q < n) y[rej_end - (q - rank)] = v[k];
        }
    });
}

// ---------------------------------------------------------------------------------------
// v2: reduce, scan the tile counts, rescan and scatter. One tile a block, tile = blockIdx.x.
// ---------------------------------------------------------------------------------------
#define V2_WARPS 8
#define V2_ITEMS 8
using TileV2 = Tile<V2_WARPS, V2_ITEMS, false>;

template <int OP>
__device__ __forceinline__ void v2_count(const float* __restrict__ x, int* __restrict__ tile_counts,
                                         long long n, float t) {
    __shared__ int warp_tot[V2_WARPS];
    const long long base = (long long)blockIdx.x * TileV2::SIZE;
    float v[V2_ITEMS];
    TileV2::load(x, base, n, v);
    const unsigned bits = TileV2::flags<OP>(x, base, n, t, v);
    int warp_base;
    const int total = tile_offsets<V2_WARPS>(bits, warp_tot, &warp_base);
    if (threadIdx.x == 0) tile_counts[blockIdx.x] = total;
}

// One block of 1024: counts -> exclusive offsets in place, 1024 at a time with a carry; the
// grand total is the count the op returns.
extern "C" __global__ void __launch_bounds__(1024)
compact_v2_scan(int* counts, int* count, int tiles) {
    __shared__ int scratch[32];
    int carry = 0;
    for (int start = 0; start < tiles; start += 1024) {
        const int i = start + threadIdx.x;
        const int c = i < tiles ? counts[i] : 0;
        const int incl = block_inclusive_scan_int(c, scratch);
        if (i < tiles) counts[i] = carry + incl - c;
        carry += scratch[(blockDim.x >> 5) - 1];  // this round's total (the last warp's scan)
        __syncthreads();  // scratch is rewritten by the next round
    }
    if (threadIdx.x == 0) *count = carry;
}

template <int OP>
__device__ __forceinline__ void v2_scatter(const float* __restrict__ x, float* __restrict__ y,
                                           const int* __restrict__ offsets, long long n, float t) {
    __shared__ int warp_tot[V2_WARPS];
    const long long base = (long long)blockIdx.x * TileV2::SIZE;
    float v[V2_ITEMS];
    TileV2::load(x, base, n, v);
    const unsigned bits = TileV2::flags<OP>(x, base, n, t, v);
    int warp_base;
    tile_offsets<V2_WARPS>(bits, warp_tot, &warp_base);
    scatter_direct<OP, TileV2>(y, base, n, offsets[blockIdx.x], bits, warp_base, v);
}

// ---------------------------------------------------------------------------------------
// Look-back. Tile `tile` has a 64-bit status word: (epoch << 34) | (flag << 32) | value.
//   X (0): nothing yet   A (1): value = the tile's own count   P (2): value = the count of
//   every tile up to and including it (its inclusive prefix)
// Flag and value travel in one 64-bit store and one 64-bit load (relaxed, device scope: they
// go to L2, never a stale L1 line), so a reader that sees a flag sees its value. `epoch` is
// the launch number (1 .. 2^30 - 1, counted by the driver): a word of an earlier launch reads
// as X, so the words are never cleared. The tile counter alternates the same way: launch e
// takes tickets from counters[e & 1] and block 0 zeroes counters[(e + 1) & 1] for the next
// launch (the launch that used it last has finished: one stream runs launches in order).
// ---------------------------------------------------------------------------------------
#define LB_X 0u
#define LB_A 1u
#define LB_P 2u
// A look-back that saw an unpublished predecessor this many times in a row waits for a tile
// that will never come (a bug): trap, an error the host sees, instead of hanging the GPU.
#define LB_SPIN_LIMIT (1u << 22)

__device__ __forceinline__ unsigned long long lb_pack(unsigned epoch, unsigned flag, unsigned value) {
    return ((unsigned long long)((epoch << 2) | flag) << 32) | value;
}

__device__ __forceinline__ unsigned long long lb_load(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void lb_store(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// The exclusive prefix of tile `tile` (> 0), run by one whole warp; every lane gets it. Lane
// k reads the word of tile newest - k. The window is done once every lane nearer than the
// nearest P has published (an A), or, with no P, once all 32 have: the prefix grows by the
// values up to and including the nearest P (then it is complete) or by all 32 aggregates
// (then the window moves 32 tiles back).
__device__ __forceinline__ unsigned warp_look_back(const unsigned long long* status, unsigned tile,
                                                   unsigned epoch, unsigned retry_ns) {
    const int lane = threadIdx.x & 31;
    unsigned prefix = 0;
    long long newest = (long long)tile - 1;
    for (;;) {
        const long long idx = newest - lane;
        unsigned flag, value, p_lanes;
        for (unsigned spins = 0;; ++spins) {
            if (idx >= 0) {
                const unsigned long long st = lb_load(status + idx);
                const unsigned hi = (unsigned)(st >> 32);
                flag = (hi >> 2) == epoch ? (hi & 3u) : LB_X;
                value = (unsigned)st;
            } else {  // before tile 0: the inclusive prefix of nothing
                flag = LB_P;
                value = 0u;
            }
            p_lanes = __ballot_sync(FULL_MASK, flag == LB_P);
            const unsigned x_lanes = __ballot_sync(FULL_MASK, flag == LB_X);
            const unsigned needed = p_lanes ? (p_lanes & (0u - p_lanes)) - 1u : FULL_MASK;
            if ((x_lanes & needed) == 0u) break;
            if (spins == LB_SPIN_LIMIT) __trap();
            if (retry_ns) __nanosleep(retry_ns);
        }
        if (p_lanes) {
            const int nearest = __ffs(p_lanes) - 1;
            return prefix + __reduce_add_sync(FULL_MASK, lane <= nearest ? value : 0u);
        }
        prefix += __reduce_add_sync(FULL_MASK, value);
        newest -= 32;
    }
}

// ---------------------------------------------------------------------------------------
// v4's options (a bit mask OPTS; the shipped v4 uses V4_OPTS, the sweep compares them):
//   OPT_VST   the staged runs go out as 16-byte stores (write_run below)
//   OPT_CS    x read with streaming loads (ld.global.cs: evict first, x is read once)
//   OPT_FULL  a tile wholly inside x loads and flags without per-element bound checks
//   OPT_LBW   one more warp, the block's last, does the look-back from the moment the block
//             has its ticket, while the data warps load (it reads no x); it publishes P
// ---------------------------------------------------------------------------------------
#define OPT_VST 1
#define OPT_CS 2
#define OPT_FULL 4
#define OPT_LBW 8

// Copy stage[s0 .. s0 + len) to y[d0 .. d0 + len) with the block's NT threads.
//   VST false: one word a thread a step, consecutive threads on consecutive words.
//   VST true: 16-byte stores. y + d0 is only 4-byte aligned: the first h elements (h = the
//     words to the next 16-byte boundary, at most len) go one a thread, then body float4s to
//     the aligned y + d0 + h, then the last len - h - 4 * body (< 4) one a thread. Body float4
//     j is stage[s + 4j .. s + 4j + 3], s = s0 + h; when s is not a multiple of 4 (sh = s & 3,
//     the same for the whole block) it straddles two aligned float4s of stage, A at
//     (s - sh) + 4j and B right after, and is picked out of them. The reads reach
//     stage[(s - sh) + 4j + 7] <= s + 4 * body + 3 <= s0 + len + 3: stage has 4 floats of
//     padding past the tile (read, never used: B's words past the run are never picked).
template <int NT, bool VST>
__device__ __forceinline__ void write_run(float* __restrict__ y, long long d0,
                                          const float* __restrict__ stage, int s0, int len) {
    const int tid = threadIdx.x;
    if constexpr (!VST) {
        for (int p = tid; p < len; p += NT) y[d0 + p] = stage[s0 + p];
    } else {
        const unsigned word = (unsigned)(reinterpret_cast<uintptr_t>(y + d0) >> 2);
        const int h = min(len, (int)((0u - word) & 3u));
        const int body = (len - h) >> 2;
        const int tail = h + 4 * body;  // the first element after the body
        if (tid < h) y[d0 + tid] = stage[s0 + tid];
        if (tid < len - tail) y[d0 + tail + tid] = stage[s0 + tail + tid];
        const int s = s0 + h, sh = s & 3;
        const float4* src = reinterpret_cast<const float4*>(stage + (s - sh));
        float4* dst = reinterpret_cast<float4*>(y + d0 + h);
        if (sh == 0) {
#pragma unroll 2
            for (int j = tid; j < body; j += NT) dst[j] = src[j];
        } else {
#pragma unroll 2
            for (int j = tid; j < body; j += NT) {
                const float4 a = src[j], b = src[j + 1];
                dst[j] = sh == 1 ? make_float4(a.y, a.z, a.w, b.x)
                       : sh == 2 ? make_float4(a.z, a.w, b.x, b.y)
                                 : make_float4(a.w, b.x, b.y, b.z);
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// v3 and v4: one tile a block, tiles in the order blocks start (atomic ticket: every lower
// tile is already running, so the look-back never waits on a block that was not scheduled).
//   STAGE false (v3): after the look-back, scatter from registers.
//   STAGE true  (v4): before the look-back, compact the tile in shared memory (kept first
//     in order; partition's rejected after them, reversed); after it, write the tile's kept
//     elements as one contiguous run y[prefix ...] with consecutive threads on consecutive
//     words (partition: two runs), so every warp store covers whole lines.
// Launch: grid = number of tiles, (WARPS + (OPTS & OPT_LBW ? 1 : 0)) * 32 threads.
//
// Who publishes what (each tile's word is written by one thread, or, with OPT_LBW, by data
// thread 0 then the look-back warp's lane 0, ordered by a fence and barrier 2):
//   data thread 0: A (own count), or P at once for tile 0
//   without OPT_LBW, thread 0 (warp 0 looks back after staging): P and, last tile, the count
//   with OPT_LBW, the last warp's lane 0: P (tile > 0) and, last tile, the count
// Barriers: 0 (__syncthreads) after the ticket and before the write-out; with OPT_LBW, 1 =
// the data warps alone (their counts), 2 = data warps arrive, look-back warp waits (it needs
// the tile's total to publish P, and must not hold the data warps up).
// ---------------------------------------------------------------------------------------
template <int OP, int WARPS, int ITEMS, bool VEC, bool STAGE, int OPTS = 0>
__device__ __forceinline__ void single_pass(const float* __restrict__ x, float* __restrict__ y,
                                            int* __restrict__ count,
                                            unsigned long long* __restrict__ status,
                                            unsigned* __restrict__ counters, long long n, float t,
                                            unsigned epoch, unsigned first_ns, unsigned retry_ns) {
    using T = Tile<WARPS, ITEMS, VEC>;
    constexpr bool VST = (OPTS & OPT_VST) != 0, CS = (OPTS & OPT_CS) != 0;
    constexpr bool FULL = (OPTS & OPT_FULL) != 0, LBW = (OPTS & OPT_LBW) != 0;
    static_assert(STAGE || OPTS == 0, "the options are v4's (staged) only");
    constexpr int NT = (WARPS + (LBW ? 1 : 0)) * 32;  // every thread of the block
    __shared__ unsigned s_tile;
    __shared__ int warp_tot[WARPS];
    __shared__ unsigned s_prefix;
    __shared__ __align__(16) float stage[STAGE ? T::SIZE + 4 : 1];

    if (threadIdx.x == 0) {
        s_tile = atomicAdd(counters + (epoch & 1u), 1u);
        if (blockIdx.x == 0) counters[(epoch & 1u) ^ 1u] = 0u;  // the next launch's counter
    }
    __syncthreads();
    const unsigned tile = s_tile;
    const long long base = (long long)tile * T::SIZE;
    if (base >= n) return;  // never, unless the counter was not reset (the whole block leaves)
    const long long tiles = (n + T::SIZE - 1) / T::SIZE;
    const int tile_n = (int)min((long long)T::SIZE, n - base);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    float v[ITEMS];
    unsigned bits = 0;
    int warp_base = 0, total = 0;
    if (LBW && warp == WARPS) {
        // the look-back warp: no x to wait for, so it starts now
        unsigned prefix = 0;
        if (tile > 0) {
            if (first_ns) __nanosleep(first_ns);
            prefix = warp_look_back(status, tile, epoch, retry_ns);
        }
        asm volatile("bar.sync 2, %0;" ::"n"(NT) : "memory");  // the data warps' counts are in
#pragma unroll
        for (int w = 0; w < WARPS; ++w) total += warp_tot[w];
        if (lane == 0) {
            if (tile > 0) lb_store(status + tile, lb_pack(epoch, LB_P, prefix + total));
            s_prefix = prefix;
            if ((long long)tile == tiles - 1) *count = (int)(prefix + total);
        }
    } else {
        if (FULL && tile_n == T::SIZE) {
            T::template load<false, CS>(x, base, n, v);
            bits = T::template flags<OP, false>(x, base, n, t, v);
        } else {
            T::template load<true, CS>(x, base, n, v);
            bits = T::template flags<OP, true>(x, base, n, t, v);
        }
        total = tile_offsets<WARPS, LBW>(bits, warp_tot, &warp_base);

        if (threadIdx.x == 0) {  // tile 0 knows its inclusive prefix at once
            lb_store(status + tile, lb_pack(epoch, tile == 0 ? LB_P : LB_A, (unsigned)total));
            if (LBW) __threadfence();  // A reaches L2 before the look-back warp can write P
        }
        if constexpr (LBW) asm volatile("bar.arrive 2, %0;" ::"n"(NT) : "memory");

        if constexpr (STAGE) {  // needs no prefix: done while the predecessors publish
            T::ranks(bits, warp_base, [&](int k, int rank, bool kept) {
                if (kept) {
                    stage[rank] = v[k];
                } else if (OP == OP_PARTITION) {
                    const int q = T::pos(k);
                    if (q < tile_n) stage[tile_n - 1 - (q - rank)] = v[k];
                }
            });
        }

        if (!LBW && threadIdx.x < 32) {
            unsigned prefix = 0;
            if (tile > 0) {
                if (first_ns) __nanosleep(first_ns);  // give the predecessors time to publish
                prefix = warp_look_back(status, tile, epoch, retry_ns);
                if (threadIdx.x == 0) lb_store(status + tile, lb_pack(epoch, LB_P, prefix + total));
            }
            if (threadIdx.x == 0) {
                s_prefix = prefix;
                if ((long long)tile == tiles - 1) *count = (int)(prefix + total);
            }
        }
    }
    __syncthreads();
    const long long prefix = s_prefix;

    if constexpr (STAGE) {
        // stage[p] goes to y[prefix + p] (kept, p < total) or, partition's rejected
        // (total <= p < tile_n), to y[n - (base - prefix) - tile_n + p] (the tile's rejected,
        // reversed, end at n - 1 - (base - prefix))
        write_run<NT, VST>(y, prefix, stage, 0, total);
        if (OP == OP_PARTITION)
            write_run<NT, VST>(y, n - (base - prefix) - tile_n + total, stage, total, tile_n - total);
    } else {
        scatter_direct<OP, T>(y, base, n, prefix, bits, warp_base, v);
    }
}

// ---------------------------------------------------------------------------------------
// Shapes. v3: v2's tile (8 warps x 8 scalar items). v4: the shipped shape and options (the
// driver's V4 repeats them; a test checks that they agree), chosen by .notes/day56_sweep.py
// from the candidates below (select only): 8 warps x 32 items in the float4 layout with the
// full-tile fast path (OPT_FULL), capped at 48 registers so that 5 blocks share an SM
// (partition: 4, see V4_MINB_PARTITION), measured fastest of the third sweep
// (.notes/day56_sweep_results.md).
// ---------------------------------------------------------------------------------------
#define V3_WARPS 8
#define V3_ITEMS 8
#define V4_WARPS 8
#define V4_ITEMS 32
#define V4_VEC 1
// V4_OPTS 4 = OPT_FULL: full tiles load and flag without bound checks
#define V4_OPTS 4
// __launch_bounds__'s minimum blocks an SM for v4 (0: the compiler's choice). A candidate's
// m<N> goes here with its options: it is what keeps that candidate free of spills
#define V4_MINB 5
// partition keeps two runs in the write-out: at 5 blocks an SM (48 registers) it spills 32 bytes,
// at 4 (64 registers) it does not
#define V4_MINB_PARTITION 4
#define V4_THREADS (V4_WARPS * 32 + ((V4_OPTS & OPT_LBW) ? 32 : 0))

#define SP_ARGS const float* __restrict__ x, float* __restrict__ y, int* __restrict__ count, \
    unsigned long long* __restrict__ status, unsigned* __restrict__ counters, long long n,  \
    float t, unsigned epoch, unsigned first_ns, unsigned retry_ns
#define SP_PASS x, y, count, status, counters, n, t, epoch, first_ns, retry_ns

#define ENTRY_POINTS(NAME, OP, MINB4)                                                                \
    extern "C" __global__ void __launch_bounds__(V1_THREADS)                                   \
    compact_v1_flags_##NAME(const float* __restrict__ x, int* __restrict__ f, long long n,      \
                            float t) {                                                          \
        v1_flags<OP>(x, f, n, t);                                                               \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(V1_THREADS)                                   \
    compact_v1_scatter_##NAME(const float* __restrict__ x, const int* __restrict__ pos,         \
                              float* __restrict__ y, int* __restrict__ count, long long n) {    \
        v1_scatter<OP>(x, pos, y, count, n);                                                    \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(V2_WARPS * 32)                                \
    compact_v2_count_##NAME(const float* __restrict__ x, int* __restrict__ tile_counts,         \
                            long long n, float t) {                                             \
        v2_count<OP>(x, tile_counts, n, t);                                                     \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(V2_WARPS * 32)                                \
    compact_v2_scatter_##NAME(const float* __restrict__ x, float* __restrict__ y,               \
                              const int* __restrict__ offsets, long long n, float t) {          \
        v2_scatter<OP>(x, y, offsets, n, t);                                                    \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(V3_WARPS * 32) compact_v3_##NAME(SP_ARGS) {   \
        single_pass<OP, V3_WARPS, V3_ITEMS, false, false>(SP_PASS);                             \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(V4_THREADS, MINB4)                            \
    compact_v4_##NAME(SP_ARGS) {                                                                \
        single_pass<OP, V4_WARPS, V4_ITEMS, (V4_VEC != 0), true, V4_OPTS>(SP_PASS);             \
    }

ENTRY_POINTS(select, OP_SELECT, V4_MINB)
ENTRY_POINTS(partition, OP_PARTITION, V4_MINB_PARTITION)
ENTRY_POINTS(unique, OP_UNIQUE, V4_MINB)

// Sweep candidates: compact_v4_<TAG>_<op>, TAG = w<WARPS>i<ITEMS><s|v> (s scalar, v float4
// loads) then the options (vst, cs, full, lbw; all = the four) and m<MINB> when MINB > 0
// (__launch_bounds__'s minimum blocks an SM, which caps the registers; 0: the compiler's
// choice, 40 registers for w8i16v: 6 blocks of 256 threads an SM). Select for all; partition and unique for the candidates with options
// (their write-out and barriers differ: the GPU tests run them too).
#define CANDIDATE_OP(W, I, VEC, OPTS, MINB, TAG, NAME, OP)                                      \
    extern "C" __global__ void __launch_bounds__(W * 32 + ((OPTS & OPT_LBW) ? 32 : 0), MINB)   \
    compact_v4_##TAG##_##NAME(SP_ARGS) {                                                        \
        single_pass<OP, W, I, VEC, true, OPTS>(SP_PASS);                                        \
    }
#define CANDIDATE(W, I, VEC, OPTS, MINB, TAG) CANDIDATE_OP(W, I, VEC, OPTS, MINB, TAG, select, OP_SELECT)
#define CANDIDATE3(W, I, VEC, OPTS, MINB, TAG)                                                  \
    CANDIDATE_OP(W, I, VEC, OPTS, MINB, TAG, select, OP_SELECT)                                 \
    CANDIDATE_OP(W, I, VEC, OPTS, MINB, TAG, partition, OP_PARTITION)                           \
    CANDIDATE_OP(W, I, VEC, OPTS, MINB, TAG, unique, OP_UNIQUE)

// around the first sweep's winner, w8i16v (the shipped v4); the scalar-load shapes are gone
// (about 1.5x slower there: .notes/day56_sweep_results.md)
CANDIDATE(8, 32, true, 0, 0, w8i32v)
CANDIDATE(16, 16, true, 0, 0, w16i16v)
CANDIDATE(12, 16, true, 0, 0, w12i16v)
CANDIDATE(8, 24, true, 0, 0, w8i24v)
CANDIDATE(8, 32, true, 0, 5, w8i32v_m5)
CANDIDATE(8, 16, true, 0, 8, w8i16v_m8)
// the options one at a time on w8i16v, then together
CANDIDATE3(8, 16, true, OPT_VST, 0, w8i16v_vst)
CANDIDATE3(8, 16, true, OPT_CS, 0, w8i16v_cs)
CANDIDATE3(8, 16, true, OPT_FULL, 0, w8i16v_full)
CANDIDATE3(8, 16, true, OPT_LBW, 0, w8i16v_lbw)
CANDIDATE3(8, 16, true, OPT_VST | OPT_CS | OPT_FULL, 5, w8i16v_vst_cs_full_m5)
CANDIDATE3(8, 16, true, OPT_VST | OPT_CS | OPT_FULL | OPT_LBW, 0, w8i16v_all)
CANDIDATE3(8, 32, true, OPT_VST | OPT_CS | OPT_FULL | OPT_LBW, 0, w8i32v_all)
// round 3, around the second sweep's winner w8i32v_m5 (the register cap that lets 5 blocks of
// 256 threads share an SM made the difference: w8i32v without it ran at 6 fewer points)
CANDIDATE(8, 32, true, 0, 4, w8i32v_m4)
CANDIDATE(4, 32, true, 0, 10, w4i32v_m10)
CANDIDATE(8, 32, true, OPT_FULL, 5, w8i32v_full_m5)
CANDIDATE(8, 32, true, OPT_VST, 5, w8i32v_vst_m5)
