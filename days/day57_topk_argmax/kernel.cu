// Day 57: row argmax / argmin and row top-k (k = 1..256) of a float32 matrix [rows, cols].
//
// Build alone:  nvcc -arch=sm_90 -std=c++17 -I common/cuda -cubin -Xptxas -v \
//                    days/day57_topk_argmax/kernel.cu
//
// The order. Every kernel compares elements through one 64-bit "composite" that is unique in
// a row:   composite(x, i) = key(x) << 32 | ~i
// key() maps a float to a uint32 that sorts as the float does (flip the sign bit of a positive
// number, every bit of a negative one), after two clean-ups: -0.0 becomes +0.0 (numpy calls
// them equal) and every NaN becomes 0xFFFFFFFF, above +inf (numpy's argmax and torch.topk both
// treat NaN as the largest value). ~i makes the lower index the larger composite, so "largest
// composite" = largest value, ties to the lowest index: numpy's argmax and the order the top-k
// is defined in (reference.py). Argmin uses key_min(x) = ~key(x) (NaN still 0xFFFFFFFF: numpy's
// argmin returns the first NaN too). A real element's composite is never 0 (~i >= 2^31 for
// i < 2^31), so 0 means "nothing".
//
// Argmax (the drivers's k = 1: top-1 is the maximum and its first index):
//   argmax_v1   one thread per row, a scalar loop along the row (neighbouring threads read
//               addresses a row apart: nothing coalesces)
//   argmax_v2   one block of 256 per row, coalesced scalar loads, a (key, index) warp/block
//               reduction as one 64-bit max
//   argmax_v3   16-byte loads (a scalar head and tail around the row's float4 body: a row of an
//               odd width starts at any 4-byte offset), U of them in flight a thread, evict-first
//               (the data is read once); a row per group of WPR warps, 8/WPR rows a block
//   argmax_v4   few rows: a row split over a cluster of C blocks (v3's loop on a slice each);
//               the partial winners meet in rank 0's shared memory (distributed shared memory)
//
// Top-k, k = 2..256, values sorted descending, ties to the lower index:
//   topk_v1     a block per row, k rounds of argmax, round r over the elements below round
//               r-1's winner: O(k * cols) reads (from L2), the naive rung
//   topk_v2     radix select: a block per row finds the k-th largest composite 8 bits at a time
//               (256-bin shared-memory histogram of the digit over the elements that match the
//               bits found so far, a suffix scan to pick the digit), rereading the row from
//               global memory (L2) each pass, stopping as soon as the picked bin is wholly
//               inside the top k; one more pass collects the k winners; a rank sort writes them
//   topk_v3     pass 1 with float4 loads histograms the top 12 bits of the key (4096 bins: sign,
//               exponent, 3 mantissa bits), pass 2 rereads the row once and keeps the elements
//               above the picked bin (winners) and in it (candidates, usually tens to a few
//               thousand) in shared memory; the remaining 8-bit passes run over the candidates
//               only. A bin of more than CAP candidates (heavy ties) falls back to v2's passes
//               over the row. k = 1 runs argmax_v3 (the driver routes it).
//   topk_v4     few rows: v3 with a row split over a cluster of C blocks; the slices'
//               histograms are summed through distributed shared memory, winners and
//               candidates are appended straight into rank 0's shared memory, which finishes
//               alone.
#include <cooperative_groups.h>
#include <stdint.h>

#include "warp_scan.cuh"

namespace cg = cooperative_groups;
using cuda100::block_inclusive_scan;
using cuda100::warp_inclusive_scan;

// --- the order --------------------------------------------------------------------------------

__device__ __forceinline__ uint32_t key_max(float x) {
    if (x != x) return 0xFFFFFFFFu;                      // every NaN: above +inf
    uint32_t u = x == 0.0f ? 0u : __float_as_uint(x);    // -0.0 -> +0.0
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);   // never 0: -inf -> 0x007FFFFF
}

template <bool MIN>
__device__ __forceinline__ uint32_t key_of(float x) {
    if (!MIN) return key_max(x);
    return x != x ? 0xFFFFFFFFu : ~key_max(x);           // smallest value -> largest key
}

__device__ __forceinline__ uint64_t composite(uint32_t key, int i) {
    return (uint64_t)key << 32 | (uint32_t)~i;
}

__device__ __forceinline__ int index_of(uint64_t c) { return (int)~(uint32_t)c; }

__device__ __forceinline__ uint64_t warp_max_u64(uint64_t v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        const uint64_t w = __shfl_xor_sync(0xffffffffu, v, o);
        v = w > v ? w : v;
    }
    return v;
}

// Max over the block; `scratch` holds 32 values. Returned to every thread.
__device__ __forceinline__ uint64_t block_max_u64(uint64_t v, uint64_t* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max_u64(v);
    __syncthreads();                                     // a previous call may still read scratch
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0ull;
    return warp_max_u64(v);
}

// --- walking a row with 16-byte loads -----------------------------------------------------------
// Thread `t` of a group of G threads calls f(value, index) for its elements of p[0, n), in
// increasing index order: the head (elements before the first 16-byte boundary, 0..3 of them),
// its float4 of the body (U loads issued before any is used), then the tail (0..3).
template <int G, int U, bool STREAM, class F>
__device__ __forceinline__ void for_row4(const float* p, int n, int t, F&& f) {
    int head = (int)(((16u - ((uint32_t)(uintptr_t)p & 15u)) & 15u) >> 2);
    head = head < n ? head : n;
    if (t < head) f(__ldg(p + t), t);
    const int n4 = (n - head) >> 2;
    const float4* q = reinterpret_cast<const float4*>(p + head);
    for (int j0 = 0; j0 < n4; j0 += G * U) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = j0 + u * G + t;
            if (j < n4) v[u] = STREAM ? __ldcs(q + j) : __ldg(q + j);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int j = j0 + u * G + t;
            if (j < n4) {
                const int i = head + 4 * j;
                f(v[u].x, i);
                f(v[u].y, i + 1);
                f(v[u].z, i + 2);
                f(v[u].w, i + 3);
            }
        }
    }
    const int tail0 = head + 4 * n4;
    if (tail0 + t < n) f(__ldg(p + tail0 + t), tail0 + t);
}

// =============================================================================================
// Argmax / argmin. Outputs: vals[row] = x[row, i], idx[row] = i (the top-1 of the row).
// =============================================================================================

// v1: one thread per row.
template <bool MIN>
__device__ void argmax_v1(const float* __restrict__ x, float* __restrict__ vals,
                          int* __restrict__ idx, int rows, int cols) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= rows) return;
    const float* p = x + (size_t)row * cols;
    uint32_t best = 0;
    int bi = 0;
    for (int i = 0; i < cols; ++i) {
        const uint32_t k = key_of<MIN>(p[i]);
        if (k > best) { best = k; bi = i; }              // strict: the first of equal keys stays
    }
    idx[row] = bi;
    vals[row] = p[bi];
}

// v2: one block per row, scalar coalesced loads, a 64-bit (key, ~index) block max.
template <bool MIN>
__device__ void argmax_v2(const float* __restrict__ x, float* __restrict__ vals,
                          int* __restrict__ idx, int rows, int cols) {
    __shared__ uint64_t scratch[32];
    const int row = blockIdx.x;
    const float* p = x + (size_t)row * cols;
    uint32_t best = 0;
    int bi = -1;                                         // composite(0, -1) = 0: nothing yet
    for (int i = threadIdx.x; i < cols; i += blockDim.x) {
        const uint32_t k = key_of<MIN>(p[i]);
        if (k > best) { best = k; bi = i; }              // this thread's indices only grow
    }
    const uint64_t c = block_max_u64(composite(best, bi), scratch);
    if (threadIdx.x == 0) {
        const int i = index_of(c);
        idx[row] = i;
        vals[row] = p[i];
    }
}

// v3: float4 loads, U in flight, a row per WPR warps, 8 / WPR rows per block of 8 warps.
template <int WPR, int U, bool MIN>
__device__ void argmax_v3(const float* __restrict__ x, float* __restrict__ vals,
                          int* __restrict__ idx, int rows, int cols) {
    constexpr int WARPS = 8, G = 32 * WPR, R = WARPS / WPR;
    __shared__ uint64_t part[WARPS];
    const int g = threadIdx.x / G, t = threadIdx.x % G;
    const long long row = (long long)blockIdx.x * R + g;
    const float* p = x + row * cols;
    uint32_t best = 0;
    int bi = -1;
    if (row < rows)
        for_row4<G, U, true>(p, cols, t, [&](float v, int i) {
            const uint32_t k = key_of<MIN>(v);
            if (k > best) { best = k; bi = i; }
        });
    uint64_t c = warp_max_u64(composite(best, bi));
    if (WPR > 1) {                                       // every thread reaches the barrier
        if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = c;
        __syncthreads();
        if (t == 0)
            for (int w = 0; w < WPR; ++w) c = part[g * WPR + w] > c ? part[g * WPR + w] : c;
    }
    if (t == 0 && row < rows) {
        const int i = index_of(c);
        idx[row] = i;
        vals[row] = p[i];
    }
}

// v4: a row split over a cluster of C blocks of 256 threads; block r of the cluster takes the
// r-th slice of ceil(cols / C) elements; the C partial winners go to rank 0's shared memory.
template <int C, int U, bool MIN>
__device__ void argmax_v4(const float* __restrict__ x, float* __restrict__ vals,
                          int* __restrict__ idx, int rows, int cols) {
    __shared__ uint64_t scratch[32];
    __shared__ uint64_t part[C];
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int row = blockIdx.x / C;                      // grid = rows * C, whole clusters
    const float* p = x + (size_t)row * cols;
    const int slice = (cols + C - 1) / C;
    const int lo = min(cols, rank * slice), hi = min(cols, lo + slice);
    uint32_t best = 0;
    int bi = -1;
    for_row4<256, U, true>(p + lo, hi - lo, threadIdx.x, [&](float v, int i) {
        const uint32_t k = key_of<MIN>(v);
        if (k > best) { best = k; bi = lo + i; }
    });
    const uint64_t c = block_max_u64(composite(best, bi), scratch);  // 0 for an empty slice
    if (threadIdx.x == 0) *cluster.map_shared_rank(&part[rank], 0) = c;
    cluster.sync();                                      // release/acquire: rank 0 sees them all
    if (rank == 0 && threadIdx.x == 0) {
        uint64_t m = 0;
        for (int r = 0; r < C; ++r) m = part[r] > m ? part[r] : m;
        const int i = index_of(m);
        idx[row] = i;
        vals[row] = p[i];
    }
}

#define ARGMAX_ENTRY(NAME, CALL)                                                              \
    extern "C" __global__ void NAME##_max(const float* x, float* v, int* i, int rows, int cols) \
    { CALL<false>(x, v, i, rows, cols); }                                                       \
    extern "C" __global__ void NAME##_min(const float* x, float* v, int* i, int rows, int cols) \
    { CALL<true>(x, v, i, rows, cols); }

ARGMAX_ENTRY(argmax_v1, argmax_v1)
ARGMAX_ENTRY(argmax_v2, argmax_v2)

#define ARGMAX_V3(WPR, U)                                                                      \
    extern "C" __global__ void __launch_bounds__(256) argmax_v3_w##WPR##_u##U##_max(            \
        const float* x, float* v, int* i, int rows, int cols)                                  \
    { argmax_v3<WPR, U, false>(x, v, i, rows, cols); }                                          \
    extern "C" __global__ void __launch_bounds__(256) argmax_v3_w##WPR##_u##U##_min(            \
        const float* x, float* v, int* i, int rows, int cols)                                  \
    { argmax_v3<WPR, U, true>(x, v, i, rows, cols); }
ARGMAX_V3(1, 2) ARGMAX_V3(1, 4) ARGMAX_V3(4, 2) ARGMAX_V3(4, 4) ARGMAX_V3(4, 8)
ARGMAX_V3(8, 2) ARGMAX_V3(8, 4) ARGMAX_V3(8, 8)

#define ARGMAX_V4(C)                                                                           \
    extern "C" __global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256)                 \
    argmax_v4_c##C##_max(const float* x, float* v, int* i, int rows, int cols)                 \
    { argmax_v4<C, 4, false>(x, v, i, rows, cols); }                                            \
    extern "C" __global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(256)                 \
    argmax_v4_c##C##_min(const float* x, float* v, int* i, int rows, int cols)                 \
    { argmax_v4<C, 4, true>(x, v, i, rows, cols); }
ARGMAX_V4(2) ARGMAX_V4(4) ARGMAX_V4(8)

// =============================================================================================
// Top-k. Outputs vals[row * k + j], idx[row * k + j], j = 0..k-1, largest first.
// =============================================================================================

// v1: k rounds of a block argmax; round r takes the largest composite below round r-1's.
template <int T>
__device__ void topk_v1(const float* __restrict__ x, float* __restrict__ vals,
                        int* __restrict__ idx, int cols, int k) {
    __shared__ uint64_t scratch[32];
    const int row = blockIdx.x;
    const float* p = x + (size_t)row * cols;
    uint64_t below = ~0ull;                              // round 0: anything (see `r == 0`)
    for (int r = 0; r < k; ++r) {
        uint64_t best = 0;
        for (int i = threadIdx.x; i < cols; i += T) {
            const uint64_t c = composite(key_max(p[i]), i);
            if ((c < below || r == 0) && c > best) best = c;
        }
        best = block_max_u64(best, scratch);             // k <= cols: never 0
        if (threadIdx.x == 0) {
            const int i = index_of(best);
            idx[(size_t)row * k + r] = i;
            vals[(size_t)row * k + r] = p[i];
        }
        below = best;
    }
}
extern "C" __global__ void __launch_bounds__(256)
topk_v1_rounds(const float* x, float* v, int* i, int rows, int cols, int k) {
    topk_v1<256>(x, v, i, cols, k);
}

// --- radix select pieces ----------------------------------------------------------------------

struct Pick {
    int bin;       // the digit of the k-th largest among the elements that match the prefix
    int above;     // how many of those elements have a larger digit (all of them are winners)
    int inbin;     // how many have this digit
};

// Given the histogram of one digit (NB bins), find the bin that holds the kk-th largest element
// (kk >= 1, at most the histogram's total). Thread t sums BPT bins counted down from the top,
// a block scan gives each thread the count above its bins, and the thread whose bins cross kk
// walks them. Every thread must call it; ends with a barrier (then *out is readable).
template <int NB, int T>
__device__ __forceinline__ void find_bin(const uint32_t* hist, int kk, Pick* out, int* scratch) {
    constexpr int BPT = NB >= T ? NB / T : 1;
    const int hi = NB - (int)threadIdx.x * BPT;          // this thread's bins: [hi - BPT, hi)
    int s = 0;
    if (hi > 0) {
#pragma unroll
        for (int j = 1; j <= BPT; ++j) s += (int)hist[hi - j];
    }
    const int incl = block_inclusive_scan(s, scratch);
    const int excl = incl - s;
    if (hi > 0 && excl < kk && kk <= incl) {             // exactly one thread: s > 0 here
        int cnt = excl;
        for (int j = 1; j <= BPT; ++j) {
            const int h = (int)hist[hi - j];
            if (cnt + h >= kk) {
                out->bin = hi - j;
                out->above = cnt;
                out->inbin = h;
                break;
            }
            cnt += h;
        }
    }
    __syncthreads();
}

// Radix passes of 8-bit digits, starting at bit `shift` of the composite, over a set of
// composites that `each(f)` walks (f(c) for every element: a row or a candidate list). Only
// elements with (c & mask) == prefix take part. On return the winners are exactly the elements
// of the set with (c & mask) >= prefix (the last bin is wholly inside the top k). The digits of
// the last passes may overlap bits already fixed (shift 4 -> 0): those bits are equal in every
// element that takes part, so they only move every count to the same bins.
template <int T, class Each>
__device__ void radix_passes(Each&& each, uint32_t* hist, Pick* pick, int* scratch,
                             uint64_t& prefix, uint64_t& mask, int kk, int shift) {
    for (;;) {
        for (int b = threadIdx.x; b < 256; b += T) hist[b] = 0;
        __syncthreads();
        const uint64_t pf = prefix, mk = mask;
        each([&](uint64_t c) {
            if ((c & mk) == pf) atomicAdd(&hist[(uint32_t)(c >> shift) & 255u], 1u);
        });
        __syncthreads();
        find_bin<256, T>(hist, kk, pick, scratch);
        prefix |= (uint64_t)pick->bin << shift;
        mask |= 255ull << shift;
        kk -= pick->above;
        if (pick->inbin == kk || shift == 0) return;     // composites are unique: inbin = 1 at bit 0
        shift = shift >= 8 ? shift - 8 : 0;
    }
}

// Write the k winners sel[0..k) sorted (largest composite first): the rank of a winner is the
// number of winners above it (composites are unique, so ranks are 0..k-1 exactly once). The
// winners are read two at a time (16-byte loads, every lane of a warp the same address: a
// broadcast); an odd k gets a 0 at sel[k] (below every composite; k < 256 there, in bounds).
template <int T>
__device__ __forceinline__ void rank_sort_write(uint64_t* sel, int k, const float* p,
                                                float* vout, int* iout) {
    if (threadIdx.x == 0 && (k & 1)) sel[k] = 0;
    __syncthreads();
    for (int e = threadIdx.x; e < k; e += T) {
        const uint64_t c = sel[e];
        int r = 0;
        for (int j = 0; j < k; j += 2) {
            const ulonglong2 w = *reinterpret_cast<const ulonglong2*>(sel + j);
            r += (w.x > c) + (w.y > c);
        }
        const int i = index_of(c);
        iout[r] = i;
        vout[r] = p[i];
    }
}

// v2: radix select with 8-bit digits over the row in global memory, scalar loads.
template <int T>
__device__ void topk_v2(const float* __restrict__ x, float* __restrict__ vals,
                        int* __restrict__ idx, int cols, int k) {
    __shared__ uint32_t hist[256];
    __shared__ __align__(16) uint64_t sel[256];
    __shared__ int scratch[32];
    __shared__ Pick pick;
    __shared__ int nsel;
    const int row = blockIdx.x;
    const float* p = x + (size_t)row * cols;
    auto each = [&](auto&& f) {
        for (int i = threadIdx.x; i < cols; i += T) f(composite(key_max(__ldg(p + i)), i));
    };
    uint64_t prefix = 0, mask = 0;
    radix_passes<T>(each, hist, &pick, scratch, prefix, mask, k, 56);
    if (threadIdx.x == 0) nsel = 0;
    __syncthreads();
    each([&](uint64_t c) {
        if ((c & mask) >= prefix) sel[atomicAdd(&nsel, 1)] = c;
    });
    __syncthreads();
    rank_sort_write<T>(sel, k, p, vals + (size_t)row * k, idx + (size_t)row * k);
}
extern "C" __global__ void __launch_bounds__(256)
topk_v2_radix(const float* x, float* v, int* i, int rows, int cols, int k) {
    topk_v2<256>(x, v, i, cols, k);
}

// --- v3 and v4: a 12-bit first pass, then candidates in shared memory -------------------------

constexpr int NB1 = 4096;          // bins of pass 1: the top 12 bits of the key
constexpr int SHIFT1 = 52;         // their place in the composite (bits 63..52)
constexpr int MAX_K = 256;

// Dynamic shared memory of a v3/v4 block: hist[NB1] u32, sel[MAX_K] u64, cand[cap] u64.
__host__ __device__ constexpr int topk_smem_bytes(int cap) { return NB1 * 4 + MAX_K * 8 + cap * 8; }

struct TopkShared {
    uint32_t* hist;
    uint64_t* sel;
    uint64_t* cand;
};

__device__ __forceinline__ TopkShared topk_shared() {
    extern __shared__ __align__(16) unsigned char smem[];
    TopkShared s;
    s.hist = reinterpret_cast<uint32_t*>(smem);
    s.sel = reinterpret_cast<uint64_t*>(smem + NB1 * 4);
    s.cand = reinterpret_cast<uint64_t*>(smem + NB1 * 4 + MAX_K * 8);
    return s;
}

// What a block does after pass 1's pick (bin b1 holds the kk-th largest of the row; `above` are
// winners already): finish the selection and write the row. `ncand` candidates of bin b1 are in
// cand[] when `compacted`; otherwise the row itself is walked again (the bin was wholly inside
// the top k, or too big for cand[]). sel[0..nsel) holds the winners found so far.
template <int T, int U>
__device__ void topk_finish(const float* p, int cols, int k, int b1, int kk, bool compacted,
                            int ncand, TopkShared s, Pick* pick, int* scratch, int* nsel,
                            float* vout, int* iout) {
    uint64_t prefix = (uint64_t)b1 << SHIFT1, mask = 0xFFFull << SHIFT1;
    auto row_each = [&](auto&& f) {
        for_row4<T, U, false>(p, cols, threadIdx.x, [&](float v, int i) {
            f(composite(key_max(v), i));
        });
    };
    if (compacted) {
        auto cand_each = [&](auto&& f) {
            for (int j = threadIdx.x; j < ncand; j += T) f(s.cand[j]);
        };
        if (ncand != kk) radix_passes<T>(cand_each, s.hist, pick, scratch, prefix, mask, kk, 44);
        cand_each([&](uint64_t c) {
            if ((c & mask) >= prefix) s.sel[atomicAdd(nsel, 1)] = c;
        });
    } else {
        if (ncand != kk) radix_passes<T>(row_each, s.hist, pick, scratch, prefix, mask, kk, 44);
        row_each([&](uint64_t c) {                       // every winner, the sure ones included
            if ((c & mask) >= prefix) s.sel[atomicAdd(nsel, 1)] = c;
        });
    }
    __syncthreads();
    rank_sort_write<T>(s.sel, k, p, vout, iout);
}

template <int T, int U>
__device__ void topk_v3(const float* __restrict__ x, float* __restrict__ vals,
                        int* __restrict__ idx, int cols, int k, int cap) {
    __shared__ int scratch[32];
    __shared__ Pick pick;
    __shared__ int nsel, ncand;
    const TopkShared s = topk_shared();
    const int row = blockIdx.x;
    const float* p = x + (size_t)row * cols;

    for (int b = threadIdx.x; b < NB1; b += T) s.hist[b] = 0;
    if (threadIdx.x == 0) nsel = ncand = 0;
    __syncthreads();
    for_row4<T, U, false>(p, cols, threadIdx.x, [&](float v, int) {   // pass 1: keep it in L2
        atomicAdd(&s.hist[key_max(v) >> 20], 1u);
    });
    __syncthreads();
    find_bin<NB1, T>(s.hist, k, &pick, scratch);
    const int b1 = pick.bin, kk = k - pick.above, inbin = pick.inbin;
    const bool compacted = inbin != kk && inbin <= cap;
    if (compacted) {                                     // pass 2: winners and candidates
        for_row4<T, U, false>(p, cols, threadIdx.x, [&](float v, int i) {
            const uint32_t key = key_max(v);
            const int d = (int)(key >> 20);
            if (d > b1) s.sel[atomicAdd(&nsel, 1)] = composite(key, i);
            else if (d == b1) s.cand[atomicAdd(&ncand, 1)] = composite(key, i);
        });
        __syncthreads();
    }
    topk_finish<T, U>(p, cols, k, b1, kk, compacted, inbin, s, &pick, scratch, &nsel,
                      vals + (size_t)row * k, idx + (size_t)row * k);
}

#define TOPK_V3(T, U)                                                                          \
    extern "C" __global__ void __launch_bounds__(T) topk_v3_t##T##_u##U(                        \
        const float* x, float* v, int* i, int rows, int cols, int k, int cap)                  \
    { topk_v3<T, U>(x, v, i, cols, k, cap); }
TOPK_V3(256, 4) TOPK_V3(512, 2) TOPK_V3(512, 4) TOPK_V3(1024, 2)

// v4: a row per cluster of C blocks. Block r histograms its slice into its own hist; block r
// then sums bins [r * NB1 / C, (r + 1) * NB1 / C) of all C histograms into rank 0's; rank 0
// picks the bin; every block appends its slice's winners and candidates to rank 0's sel/cand
// (atomics on rank 0's counters through distributed shared memory); rank 0 finishes alone.
template <int C, int T, int U>
__device__ void topk_v4(const float* __restrict__ x, float* __restrict__ vals,
                        int* __restrict__ idx, int cols, int k, int cap) {
    __shared__ int scratch[32];
    __shared__ Pick pick;
    __shared__ int nsel, ncand;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const TopkShared s = topk_shared();
    const int row = blockIdx.x / C;
    const float* p = x + (size_t)row * cols;
    const int slice = (cols + C - 1) / C;
    const int lo = min(cols, rank * slice), hi = min(cols, lo + slice);

    for (int b = threadIdx.x; b < NB1; b += T) s.hist[b] = 0;
    if (threadIdx.x == 0) nsel = ncand = 0;
    __syncthreads();
    for_row4<T, U, false>(p + lo, hi - lo, threadIdx.x, [&](float v, int) {
        atomicAdd(&s.hist[key_max(v) >> 20], 1u);
    });
    cluster.sync();                                      // every slice's histogram is complete
    {
        constexpr int PER = NB1 / C;                     // bins this block sums
        uint32_t* total = cluster.map_shared_rank(s.hist, 0);
        for (int b = rank * PER + threadIdx.x; b < (rank + 1) * PER; b += T) {
            uint32_t sum = 0;
#pragma unroll
            for (int r = 0; r < C; ++r) sum += cluster.map_shared_rank(s.hist, r)[b];
            total[b] = sum;                              // only this block touches bin b
        }
    }
    cluster.sync();                                      // rank 0 holds the row's histogram
    if (rank == 0) find_bin<NB1, T>(s.hist, k, &pick, scratch);
    cluster.sync();                                      // rank 0's pick is readable
    const Pick p0 = *cluster.map_shared_rank(&pick, 0);
    const int b1 = p0.bin, kk = k - p0.above, inbin = p0.inbin;
    const bool compacted = inbin != kk && inbin <= cap;
    if (compacted) {
        int* nsel0 = cluster.map_shared_rank(&nsel, 0);
        int* ncand0 = cluster.map_shared_rank(&ncand, 0);
        uint64_t* sel0 = cluster.map_shared_rank(s.sel, 0);
        uint64_t* cand0 = cluster.map_shared_rank(s.cand, 0);
        for_row4<T, U, false>(p + lo, hi - lo, threadIdx.x, [&](float v, int i) {
            const uint32_t key = key_max(v);
            const int d = (int)(key >> 20);
            if (d > b1) sel0[atomicAdd(nsel0, 1)] = composite(key, lo + i);
            else if (d == b1) cand0[atomicAdd(ncand0, 1)] = composite(key, lo + i);
        });
    }
    cluster.sync();                                      // rank 0 has every winner and candidate
    if (rank != 0) return;                               // no one reads this block's memory now
    topk_finish<T, U>(p, cols, k, b1, kk, compacted, inbin, s, &pick, scratch, &nsel,
                      vals + (size_t)row * k, idx + (size_t)row * k);
}

#define TOPK_V4(C, T)                                                                          \
    extern "C" __global__ void __cluster_dims__(C, 1, 1) __launch_bounds__(T)                   \
    topk_v4_c##C##_t##T(const float* x, float* v, int* i, int rows, int cols, int k, int cap)  \
    { topk_v4<C, T, 4>(x, v, i, cols, k, cap); }
TOPK_V4(2, 512) TOPK_V4(4, 512) TOPK_V4(8, 512) TOPK_V4(8, 256)
