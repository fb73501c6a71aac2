// Day 38: a stable merge sort of 32-bit unsigned keys, alone or with 32-bit values, built on
// the co-rank of a merge ("merge path").
//
//   keys  x[0..n)  uint32           out: the keys in ascending order
//   vals  v[0..n)  uint32 (opt.)    out: the values in the order of their keys; equal keys keep
//                                   their input order (stable), so with v = 0, 1, ..., n-1 the
//                                   values are numpy's argsort(x, kind="stable")
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -cubin kernel.cu
// Run:               python run_day.py 38
//
// The co-rank. Merging A[0..na) and B[0..nb) stably (on equal keys A's element first), the
// first d outputs are A[0..i) and B[0..d-i) for exactly one i, the co-rank of d. It is the
// first i with A[i] > B[d-1-i], found by a binary search over i in [max(0, d-nb), min(d, na)]:
// any thread can find where its outputs start without looking at anyone else's.
//
//   v1  the textbook: one launch per level (runs of 1, 2, 4, ... keys merge in pairs), a thread
//       per output element, its co-rank by binary search in global memory. log2(n) passes over
//       the data, and every element pays a binary search of global loads.
//   v2  1024-key tiles sorted in shared memory first (the same co-rank merge, level by level,
//       a thread per element), then 2-way global passes: a block per 1024 outputs finds its
//       two input ranges by two co-rank searches, stages them in shared memory and merges
//       there. 10 fewer passes than v1; each block starts with two serial global searches.
//   v3  16 keys a thread in registers: 4096-key tiles (256 threads), sorted first by a stable
//       odd-even transposition network in registers, then by shared-memory levels where each
//       thread merges its 16 outputs serially after one co-rank search (not one per element).
//       Merges within one warp's keys sync with __syncwarp only. The global co-ranks move to a
//       partition kernel (one thread per tile boundary). 16-byte loads of whole tiles; stores
//       go through shared memory so every warp writes 512 contiguous bytes.
//   v4  fewer trips through DRAM: 16384-key first runs (512 threads of 32 keys) and 4-WAY merge
//       passes. A block takes 8192 outputs of merge(merge(A,B), merge(C,D)), loads its four input
//       ranges and does both merge levels in shared memory: each pass reads and writes the data
//       once for two levels. Its exact four-way split is the co-rank of two co-ranks: a table
//       kernel finds the 2-way co-ranks of (A,B) and (C,D) every 8192 outputs, a split kernel
//       searches the table (coarse) and then between two table entries (fine, 4-way, its
//       co-rank searches side by side).
//   v5  v4 with each merge thread's loads in flight together: v4 stored every word into shared
//       memory before loading the next (one load in flight a thread, 16 round trips a tile).
//   v6  tiles cut at sampled splitters: every S-th key of each run is a sample; a tile runs from
//       the cut before the sample of rank kK to the one before rank (k+1)K (ranks in the stable
//       merge's order). A sample's rank is a few searches over the samples, its cut one search
//       over S keys: one short launch a pass (sort_v6_rank) instead of table + split. Tiles vary
//       in size (at most K S + 3 (S - 1) keys) and start anywhere (stores align themselves).
//   v7  fewer instructions a key. Keys only (stability is invisible): a Batcher network in
//       registers, and merges against a reversed run (no bounds checks in the merge step). Keys
//       and pairs: a pass's first level gives each pair of runs its own threads (no step checks
//       for a crossing); key merges 32 outputs a thread.
//   v8  v7 with 8-way passes on the same sampled cuts: three levels in shared memory a trip.
//
// Entry points end in _keys (keys only) or _pairs (keys and values). Block sorts and merges come
// in several block sizes (_t256, _t512, _t1024: threads a block, 16 keys each; _i32: 32 keys
// each); the driver names the ones each version uses and .notes/day38_sweep.py times the others.
//
// Indices are 32-bit: the driver refuses n > 2^30 (run starts are computed in 64 bits and
// clamped to n, so no run can point past the end of the array).
#include <stdint.h>

typedef unsigned int u32;
#define KEY_MAX 0xFFFFFFFFu

// ---------------------------------------------------------------------------------------------
// The co-rank, on any sequence `s` indexable by int: A is s[a0 .. a0+na), B is s[b0 .. b0+nb).
// The answer must lie in [lo, hi]; callers pass [max(0, d-nb), min(d, na)] or a narrower
// bracket they know. Every index read lies inside A and B (mid < hi <= na, d-1-mid < nb).
// ---------------------------------------------------------------------------------------------
template <class Seq>
__device__ __forceinline__ int co_rank(const Seq& s, int a0, int b0, int d, int lo, int hi) {
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (s[a0 + mid] <= s[b0 + d - 1 - mid]) lo = mid + 1;  // A[mid] goes first: take more of A
        else hi = mid;
    }
    return lo;
}

struct Gmem {  // keys in global memory
    const u32* __restrict__ p;
    __device__ __forceinline__ u32 operator[](int i) const { return p[i]; }
};
struct Plain {  // keys in shared memory, unpadded (v2)
    const u32* p;
    __device__ __forceinline__ u32 operator[](int i) const { return p[i]; }
};

// Shared memory of v3/v4 is padded with one spare word every 32: a thread reading its own 16
// consecutive words (word 16t + j) and a warp reading 32 consecutive words both hit 32
// different banks (16t + j + t/2 covers every bank once as t runs over a warp).
__device__ __forceinline__ int pad(int i) { return i + (i >> 5); }
struct Smem {  // keys in padded shared memory
    const u32* p;
    __device__ __forceinline__ u32 operator[](int i) const { return p[pad(i)]; }
};

// Start of run r of the group that starts at gs (runs of L keys), clamped to n: runs past the
// end of the array are empty. 64-bit arithmetic: gs + 3L can pass 2^31.
__device__ __forceinline__ int run_start(long long gs, int r, int L, int n) {
    const long long s = gs + (long long)r * L;
    return (int)(s < n ? s : n);
}

// ============================================================================================
// v1: a thread per output element, one launch per merge level (runs of w -> runs of 2w)
// ============================================================================================
template <bool PAIRS>
__device__ __forceinline__ void merge_v1(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                         u32* __restrict__ kout, u32* __restrict__ vout, int n,
                                         int w) {
    const int o = blockIdx.x * blockDim.x + threadIdx.x;
    if (o >= n) return;
    const long long gs = (long long)o - (long long)o % (2LL * w);  // this output's pair of runs
    const int a0 = (int)gs, b0 = run_start(gs, 1, w, n), b1 = run_start(gs, 2, w, n);
    const int na = b0 - a0, nb = b1 - b0, d = o - a0;
    const Gmem s{kin};
    const int i = co_rank(s, a0, b0, d, max(0, d - nb), min(d, na));
    const int j = d - i;  // output o is the next element after A[0..i) and B[0..j)
    const bool take_a = i < na && (j >= nb || s[a0 + i] <= s[b0 + j]);
    const int src = take_a ? a0 + i : b0 + j;
    kout[o] = kin[src];
    if (PAIRS) vout[o] = vin[src];
}

// ============================================================================================
// v2: 1024-key tiles sorted in shared memory, then a block per 1024 outputs of each pass
// ============================================================================================
#define V2_THREADS 256
#define V2_TILE 1024

template <bool PAIRS>
__device__ __forceinline__ void block_v2(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                         u32* __restrict__ kout, u32* __restrict__ vout, int n) {
    __shared__ u32 sk[2][V2_TILE];  // ping-pong: each level reads one buffer, writes the other
    __shared__ u32 sv[PAIRS ? 2 : 1][PAIRS ? V2_TILE : 1];
    const int tid = threadIdx.x;
    const int base = blockIdx.x * V2_TILE;
    const int cnt = min(V2_TILE, n - base);
    // a short last tile is padded with KEY_MAX: the merges are stable, so the padding (later in
    // the tile than every real key) stays behind real KEY_MAX keys and is never stored
    for (int i = tid; i < V2_TILE; i += V2_THREADS) {
        sk[0][i] = i < cnt ? kin[base + i] : KEY_MAX;
        if (PAIRS) sv[0][i] = i < cnt ? vin[base + i] : 0u;
    }
    __syncthreads();
    int cur = 0;
    for (int w = 1; w < V2_TILE; w *= 2) {
        const Plain s{sk[cur]};
        for (int o = tid; o < V2_TILE; o += V2_THREADS) {
            const int gs = o & ~(2 * w - 1), d = o - gs;  // runs [gs, gs+w) and [gs+w, gs+2w)
            const int i = co_rank(s, gs, gs + w, d, max(0, d - w), min(d, w));
            const int j = d - i;
            const bool take_a = i < w && (j >= w || s[gs + i] <= s[gs + w + j]);
            const int src = take_a ? gs + i : gs + w + j;
            sk[cur ^ 1][o] = sk[cur][src];
            if (PAIRS) sv[cur ^ 1][o] = sv[cur][src];
        }
        __syncthreads();
        cur ^= 1;
    }
    for (int i = tid; i < cnt; i += V2_THREADS) {
        kout[base + i] = sk[cur][i];
        if (PAIRS) vout[base + i] = sv[cur][i];
    }
}

// One 2-way pass, runs of L -> 2L: block b writes outputs [1024 b, 1024 b + 1024).
template <bool PAIRS>
__device__ __forceinline__ void merge_v2(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                         u32* __restrict__ kout, u32* __restrict__ vout, int n,
                                         int L) {
    __shared__ u32 sk[V2_TILE];
    __shared__ u32 sv[PAIRS ? V2_TILE : 1];
    __shared__ int split[2];
    const int tid = threadIdx.x;
    const int o0 = blockIdx.x * V2_TILE;
    const long long gs = (long long)o0 - (long long)o0 % (2LL * L);
    const int a0 = (int)gs, b0 = run_start(gs, 1, L, n), b1 = run_start(gs, 2, L, n);
    const int na = b0 - a0, nb = b1 - b0;
    const int d0 = o0 - a0, d1 = min(d0 + V2_TILE, na + nb);
    if (tid < 2) {  // the tile's first and one-past-last co-ranks, searched in global memory
        const int d = tid == 0 ? d0 : d1;
        split[tid] = co_rank(Gmem{kin}, a0, b0, d, max(0, d - nb), min(d, na));
    }
    __syncthreads();
    const int i0 = split[0], i1 = split[1];
    const int la = i1 - i0, lb = (d1 - i1) - (d0 - i0), cnt = d1 - d0;
    for (int i = tid; i < cnt; i += V2_THREADS) {  // A's range, then B's, side by side
        const int src = i < la ? a0 + i0 + i : b0 + (d0 - i0) + (i - la);
        sk[i] = kin[src];
        if (PAIRS) sv[i] = vin[src];
    }
    __syncthreads();
    const Plain s{sk};
    for (int o = tid; o < cnt; o += V2_THREADS) {
        const int i = co_rank(s, 0, la, o, max(0, o - lb), min(o, la));
        const int j = o - i;
        const bool take_a = i < la && (j >= lb || s[i] <= s[la + j]);
        const int src = take_a ? i : la + j;
        kout[o0 + o] = sk[src];
        if (PAIRS) vout[o0 + o] = sv[src];
    }
}

// ============================================================================================
// v3 and v4: ITEMS keys a thread in registers, padded shared memory, serial merges
// ============================================================================================

// Odd-even transposition sort of a thread's ITEMS keys: ITEMS rounds of compare-exchanges of
// neighbours. A pair is swapped only if strictly out of order, so equal keys never pass each
// other: stable (a bitonic network is not).
template <int ITEMS, bool PAIRS>
__device__ __forceinline__ void odd_even_sort(u32 (&k)[ITEMS], u32 (&v)[ITEMS]) {
#pragma unroll
    for (int r = 0; r < ITEMS; ++r) {
#pragma unroll
        for (int i = r & 1; i + 1 < ITEMS; i += 2) {
            const bool sw = k[i] > k[i + 1];
            const u32 lo = sw ? k[i + 1] : k[i], hi = sw ? k[i] : k[i + 1];
            k[i] = lo;
            k[i + 1] = hi;
            if (PAIRS) {
                const u32 a = sw ? v[i + 1] : v[i], b = sw ? v[i] : v[i + 1];
                v[i] = a;
                v[i + 1] = b;
            }
        }
    }
}

// A tile of cnt <= THREADS*ITEMS words from global memory into padded shared memory, `fill`
// past cnt. A full tile at a 16-byte aligned address moves as uint4 (each warp reads 512
// contiguous bytes an instruction); anything else word by word (still coalesced).
template <int THREADS, int ITEMS>
__device__ __forceinline__ void load_tile(const u32* __restrict__ g, u32* s, int cnt, u32 fill) {
    constexpr int T = THREADS * ITEMS;
    const int tid = threadIdx.x;
    if (cnt == T && (reinterpret_cast<unsigned long long>(g) & 15ull) == 0) {
        const uint4* g4 = reinterpret_cast<const uint4*>(g);
#pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            const int i = tid + q * THREADS;
            const uint4 x = __ldg(g4 + i);
            const int e = pad(4 * i);  // 4i .. 4i+3 never straddle a padding word
            s[e] = x.x;
            s[e + 1] = x.y;
            s[e + 2] = x.z;
            s[e + 3] = x.w;
        }
    } else {
#pragma unroll
        for (int q = 0; q < ITEMS; ++q) {
            const int i = tid + q * THREADS;
            s[pad(i)] = i < cnt ? g[i] : fill;
        }
    }
}

// The first cnt words of padded shared memory to global memory, coalesced (uint4 if whole).
template <int THREADS, int ITEMS>
__device__ __forceinline__ void store_tile(const u32* s, u32* __restrict__ g, int cnt) {
    constexpr int T = THREADS * ITEMS;
    const int tid = threadIdx.x;
    if (cnt == T && (reinterpret_cast<unsigned long long>(g) & 15ull) == 0) {
        uint4* g4 = reinterpret_cast<uint4*>(g);
#pragma unroll
        for (int q = 0; q < ITEMS / 4; ++q) {
            const int i = tid + q * THREADS;
            const int e = pad(4 * i);
            g4[i] = make_uint4(s[e], s[e + 1], s[e + 2], s[e + 3]);
        }
    } else {
#pragma unroll
        for (int q = 0; q < ITEMS; ++q) {
            const int i = tid + q * THREADS;
            if (i < cnt) g[i] = s[pad(i)];
        }
    }
}

// This thread's outputs o0 .. o0+ITEMS-1 of a merge level in shared memory, into registers.
// The level is laid out as [merge(A0, B0) | merge(A1, B1)]: A0 = [s0, m0), B0 = [m0, e0),
// A1 = [e0, m1), B1 = [m1, e1) (pass m1 = e1 = e0 for one pair). One co-rank search for o0,
// then a serial merge: each output costs one comparison and one shared-memory load. With
// CROSS, a thread whose outputs run past e0 continues with the second pair (v4's first
// level). Outputs past e1 are garbage that callers never store; the positions they read stay
// below e1 + ITEMS, inside the buffer (smem_words allocates that far).
template <int ITEMS, bool PAIRS, bool CROSS>
__device__ __forceinline__ void merge_regs(const u32* sk, const u32* sv, int s0, int m0, int e0,
                                           int m1, int e1, int o0, u32 (&k)[ITEMS],
                                           u32 (&v)[ITEMS]) {
    const Smem s{sk};
    int ia, ea, ib, eb;  // next A and B positions and their ends
    if (o0 < e0) {
        const int d = o0 - s0, na = m0 - s0, nb = e0 - m0;
        const int i = co_rank(s, s0, m0, d, max(0, d - nb), min(d, na));
        ia = s0 + i; ea = m0; ib = m0 + (d - i); eb = e0;
    } else {
        const int na = m1 - e0, nb = e1 - m1;
        const int d = min(o0 - e0, na + nb);  // a thread past the end: any in-range start
        const int i = co_rank(s, e0, m1, d, max(0, d - nb), min(d, na));
        ia = e0 + i; ea = m1; ib = m1 + (d - i); eb = e1;
    }
    u32 ka = sk[pad(ia)], kb = sk[pad(ib)];
#pragma unroll
    for (int q = 0; q < ITEMS; ++q) {
        if (CROSS && q > 0 && o0 + q == e0) {  // crossed from the first pair into the second
            ia = e0; ea = m1; ib = m1; eb = e1;
            ka = sk[pad(ia)];
            kb = sk[pad(ib)];
        }
        const bool take_a = ia < ea && (ib >= eb || ka <= kb);
        k[q] = take_a ? ka : kb;
        if (PAIRS) v[q] = sv[pad(take_a ? ia : ib)];
        const int nxt = take_a ? ++ia : ++ib;  // the one element that replaces the taken one
        const u32 kn = sk[pad(nxt)];
        ka = take_a ? kn : ka;
        kb = take_a ? kb : kn;
    }
}

template <int ITEMS, bool PAIRS>
__device__ __forceinline__ void regs_to_smem(u32* sk, u32* sv, int o0, int cnt,
                                             const u32 (&k)[ITEMS], const u32 (&v)[ITEMS]) {
#pragma unroll
    for (int q = 0; q < ITEMS; ++q)
        if (o0 + q < cnt) {
            sk[pad(o0 + q)] = k[q];
            if (PAIRS) sv[pad(o0 + q)] = v[q];
        }
}

// Words of shared memory a padded tile of T keys takes, with room for the reads past the end
// of merge_regs (up to T + ITEMS). Values (PAIRS) follow at the same offset.
__host__ __device__ constexpr int smem_words(int T, int items) {
    return T + items + ((T + items) >> 5) + 1;
}

// Block sort: tile b = keys [T b, T b + T), T = THREADS * ITEMS, sorted into a run.
template <int THREADS, int ITEMS, bool PAIRS>
__device__ __forceinline__ void block_sort(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                           u32* __restrict__ kout, u32* __restrict__ vout, int n) {
    constexpr int T = THREADS * ITEMS;
    extern __shared__ u32 smem[];
    u32* sk = smem;
    u32* sv = smem + smem_words(T, ITEMS);
    const int tid = threadIdx.x;
    const int base = blockIdx.x * T;
    const int cnt = min(T, n - base);
    load_tile<THREADS, ITEMS>(kin + base, sk, cnt, KEY_MAX);  // padding: see block_v2
    if (PAIRS) load_tile<THREADS, ITEMS>(vin + base, sv, cnt, 0u);
    __syncthreads();
    u32 k[ITEMS], v[ITEMS];
    const int o0 = tid * ITEMS;
#pragma unroll
    for (int q = 0; q < ITEMS; ++q) {
        k[q] = sk[pad(o0 + q)];
        if (PAIRS) v[q] = sv[pad(o0 + q)];
    }
    odd_even_sort<ITEMS, PAIRS>(k, v);  // runs of ITEMS
    for (int w = ITEMS; w < T; w *= 2) {  // runs of w -> 2w, every thread merging ITEMS outputs
        // while a pair of runs lies within one warp's 32 * ITEMS keys, only that warp reads and
        // writes it: a warp barrier suffices, and the other warps run on
        const bool in_warp = 2 * w <= 32 * ITEMS;
        regs_to_smem<ITEMS, PAIRS>(sk, sv, o0, T, k, v);
        if (in_warp) __syncwarp(); else __syncthreads();
        const int s0 = o0 & ~(2 * w - 1);  // ITEMS divides w: a thread's outputs share one pair
        merge_regs<ITEMS, PAIRS, false>(sk, sv, s0, s0 + w, s0 + 2 * w, s0 + 2 * w, s0 + 2 * w, o0,
                                        k, v);
        if (in_warp) __syncwarp(); else __syncthreads();  // all have read before any overwrites
    }
    regs_to_smem<ITEMS, PAIRS>(sk, sv, o0, T, k, v);
    __syncthreads();
    store_tile<THREADS, ITEMS>(sk, kout + base, cnt);
    if (PAIRS) store_tile<THREADS, ITEMS>(sv, vout + base, cnt);
}

// ---------------------------------------------------------------------------------------------
// v3: 2-way passes. part[b] = co-rank of tile b's first output within its pair of runs.
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void sort_v3_partition(const u32* __restrict__ keys, int n, int L, int T,
                                             int* __restrict__ part, int tiles) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= tiles) return;
    const long long o = (long long)b * T;
    const long long gs = o - o % (2LL * L);
    const int a0 = (int)gs, b0 = run_start(gs, 1, L, n), b1 = run_start(gs, 2, L, n);
    const int na = b0 - a0, nb = b1 - b0, d = (int)(o - gs);
    part[b] = co_rank(Gmem{keys}, a0, b0, d, max(0, d - nb), min(d, na));
}

template <int THREADS, int ITEMS, bool PAIRS>
__device__ __forceinline__ void merge2(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                       u32* __restrict__ kout, u32* __restrict__ vout,
                                       const int* __restrict__ part, int n, int L) {
    constexpr int T = THREADS * ITEMS;
    extern __shared__ u32 smem[];
    u32* sk = smem;
    u32* sv = smem + smem_words(T, ITEMS);
    const int tid = threadIdx.x, b = blockIdx.x;
    const long long o = (long long)b * T;
    const long long gs = o - o % (2LL * L);  // 2L is a multiple of T: a tile never spans groups
    const int a0 = (int)gs, b0 = run_start(gs, 1, L, n), b1 = run_start(gs, 2, L, n);
    const int na = b0 - a0, nb = b1 - b0;
    const int d0 = (int)(o - gs), d1 = min(d0 + T, na + nb);
    const int i0 = part[b], i1 = d1 == na + nb ? na : part[b + 1];
    const int la = i1 - i0, cnt = d1 - d0;
    const int ga = a0 + i0, gb = b0 + (d0 - i0);
#pragma unroll
    for (int q = 0; q < ITEMS; ++q) {  // A's range, then B's, side by side
        const int i = tid + q * THREADS;
        if (i < cnt) sk[pad(i)] = kin[i < la ? ga + i : gb + (i - la)];
    }
    if (PAIRS) {
#pragma unroll
        for (int q = 0; q < ITEMS; ++q) {
            const int i = tid + q * THREADS;
            if (i < cnt) sv[pad(i)] = vin[i < la ? ga + i : gb + (i - la)];
        }
    }
    __syncthreads();
    u32 k[ITEMS], v[ITEMS];
    const int o0 = tid * ITEMS;
    merge_regs<ITEMS, PAIRS, false>(sk, sv, 0, la, cnt, cnt, cnt, o0, k, v);
    __syncthreads();
    regs_to_smem<ITEMS, PAIRS>(sk, sv, o0, cnt, k, v);
    __syncthreads();
    store_tile<THREADS, ITEMS>(sk, kout + (int)o, cnt);
    if (PAIRS) store_tile<THREADS, ITEMS>(sv, vout + (int)o, cnt);
}

// ---------------------------------------------------------------------------------------------
// v4: 4-way passes, runs of L -> 4L. A group is four runs A, B, C, D (the last group may have
// fewer, or shorter, runs); U = merge(A, B), V = merge(C, D), and the group's output is
// merge(U, V) (U's element first on equal keys: A, B, C, D are in input order).
// ---------------------------------------------------------------------------------------------
struct Side {  // U (or V): A at keys[a0 .. a0+na), B at keys[b0 .. b0+nb)
    int a0, na, b0, nb;
    const uint4* tab;  // E entries: {co-rank, U[d], U[d-1], 0} at diagonal d = min(m T, na+nb)
};

// Table: for every group and side, the co-rank of U (V) at every multiple of T, and the keys
// just after and just before that diagonal. entry e = (group * 2 + side) * E + m.
extern "C" __global__ void sort_v4_table(const u32* __restrict__ keys, int n, int L, int T, int E,
                                         uint4* __restrict__ tab, int entries) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= entries) return;
    const int g = e / (2 * E), r = e - g * 2 * E, side = r / E, m = r - side * E;
    const long long gs = (long long)g * 4 * L;
    const int a0 = run_start(gs, 2 * side, L, n), b0 = run_start(gs, 2 * side + 1, L, n),
              b1 = run_start(gs, 2 * side + 2, L, n);
    const int na = b0 - a0, nb = b1 - b0, nu = na + nb;
    const int d = (int)min((long long)m * T, (long long)nu);
    const Gmem s{keys};
    const int a = co_rank(s, a0, b0, d, max(0, d - nb), min(d, na));
    const int b = d - a;
    u32 at = KEY_MAX, before = 0u;
    if (d < nu) at = a >= na ? s[b0 + b] : b >= nb ? s[a0 + a] : min(s[a0 + a], s[b0 + b]);
    if (d > 0) before = a == 0 ? s[b0 + b - 1] : b == 0 ? s[a0 + a - 1]
                                                         : max(s[a0 + a - 1], s[b0 + b - 1]);
    tab[e] = make_uint4((u32)a, at, before, 0u);
}

// co-rank of side s at diagonal d, knowing co-rank al at diagonal dl <= d and ah at dh >= d
// (a co-rank grows by 0 or 1 per diagonal, so it lies in [max(al, ah-(dh-d)), min(ah, al+(d-dl))])
__device__ __forceinline__ int bracketed(const u32* __restrict__ keys, const Side& s, int d, int dl,
                                         int al, int dh, int ah) {
    const int lo = max(max(0, d - s.nb), max(al, ah - (dh - d)));
    const int hi = min(min(d, s.na), min(ah, al + (d - dl)));
    return co_rank(Gmem{keys}, s.a0, s.b0, d, lo, hi);
}

// U[d] (d < na + nb) from its co-rank a
__device__ __forceinline__ u32 key_at(const u32* __restrict__ keys, const Side& s, int d, int a) {
    const int b = d - a;
    if (a >= s.na) return keys[s.b0 + b];
    if (b >= s.nb) return keys[s.a0 + a];
    return min(keys[s.a0 + a], keys[s.b0 + b]);
}

// split[b] = how many of A, B, C, D come before tile b's first output (t = b T - group start).
// x = how many of U: the co-rank of t in merge(U, V), searched with U[.] and V[.] that are
// themselves co-ranks. Coarse: over multiples of T the table has U[m T] and V[m T - 1], so
// x is found to within one stretch of T without touching the keys. Fine: a 4-way search in
// that stretch (three probes a round, the interval shrinks 4x); each probe finds U[m] and
// V[t-1-m] by co-rank searches bracketed by the probes of earlier rounds, so the inner searches
// shrink with the outer one, and the six searches of a round run side by side in one loop so
// that their global loads are in flight together: the chain of dependent loads is about half
// that of a binary outer search.
extern "C" __global__ void sort_v4_split(const u32* __restrict__ keys, int n, int L, int T, int E,
                                         const uint4* __restrict__ tab, int4* __restrict__ split,
                                         int tiles) {
    const int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= tiles) return;
    const long long o = (long long)b * T, G = 4LL * L;
    const int g = (int)(o / G);
    const long long gs = (long long)g * G;
    const int t = (int)(o - gs);
    const int r0 = run_start(gs, 0, L, n), r1 = run_start(gs, 1, L, n), r2 = run_start(gs, 2, L, n),
              r3 = run_start(gs, 3, L, n), r4 = run_start(gs, 4, L, n);
    const Side U{r0, r1 - r0, r1, r2 - r1, tab + (long long)g * 2 * E};
    const Side V{r2, r3 - r2, r3, r4 - r3, U.tab + E};
    const int nu = U.na + U.nb, nv = V.na + V.nb;
    int lo = max(0, t - nv), hi = min(t, nu);  // x lies in [lo, hi]
    if (lo < hi) {  // coarse: the last multiple m T with U[m T] <= V[t - 1 - m T]
        const int c = t / T;  // t is a multiple of T (4L is)
        const int mlo = (lo + T - 1) / T, mhi = (hi - 1) / T;
        int l = mlo, h = mhi + 1;
        while (l < h) {
            const int mid = (l + h) >> 1;
            if (U.tab[mid].y <= V.tab[c - mid].z) l = mid + 1;
            else h = mid;
        }
        if (l > mlo) lo = max(lo, (l - 1) * T + 1);
        if (l <= mhi) hi = min(hi, l * T);
    }
    // brackets from the table: [lo, hi] lies within one stretch of T of U, [t-hi, t-lo] of V
    const int mu = min(lo / T, E - 1), mu1 = min(mu + 1, E - 1);
    int dl = (int)min((long long)mu * T, (long long)nu), al = (int)U.tab[mu].x;
    int dh = (int)min((long long)mu1 * T, (long long)nu), ah = (int)U.tab[mu1].x;
    const int mv = min((t - hi) / T, E - 1), mv1 = min(mv + 1, E - 1);
    int vdl = (int)min((long long)mv * T, (long long)nv), vl = (int)V.tab[mv].x;
    int vdh = (int)min((long long)mv1 * T, (long long)nv), vh = (int)V.tab[mv1].x;
    while (lo < hi) {  // fine: a 4-way search, its three probes' six co-ranks searched side by side
        constexpr int P = 3;
        const int len = hi - lo;  // <= T: no overflow below
        int m[P], base_a[2 * P], base_b[2 * P], d[2 * P], l[2 * P], h[2 * P];
#pragma unroll
        for (int k = 0; k < P; ++k) {
            m[k] = lo + len * (k + 1) / (P + 1);  // lo <= m[k] < hi (equal ones when len < 4)
            const int j = t - 1 - m[k];           // 0 <= m[k] < nu, 0 <= j < nv
            d[k] = m[k]; base_a[k] = U.a0; base_b[k] = U.b0;
            l[k] = max(max(0, m[k] - U.nb), max(al, ah - (dh - m[k])));
            h[k] = min(min(m[k], U.na), min(ah, al + (m[k] - dl)));
            d[P + k] = j; base_a[P + k] = V.a0; base_b[P + k] = V.b0;
            l[P + k] = max(max(0, j - V.nb), max(vl, vh - (vdh - j)));
            h[P + k] = min(min(j, V.na), min(vh, vl + (j - vdl)));
        }
        for (bool busy = true; busy;) {  // the six binary searches in lockstep: their loads overlap
            busy = false;
#pragma unroll
            for (int q = 0; q < 2 * P; ++q)
                if (l[q] < h[q]) {
                    const int mid = (l[q] + h[q]) >> 1;
                    if (keys[base_a[q] + mid] <= keys[base_b[q] + d[q] - 1 - mid]) l[q] = mid + 1;
                    else h[q] = mid;
                    busy |= l[q] < h[q];
                }
        }
        bool below[P];  // U[m] <= V[t-1-m]: the split lies above m
#pragma unroll
        for (int k = 0; k < P; ++k)
            below[k] = key_at(keys, U, m[k], l[k]) <= key_at(keys, V, t - 1 - m[k], l[P + k]);
        int nlo = lo, nhi = hi;
#pragma unroll
        for (int k = 0; k < P; ++k)
            if (below[k]) {  // the last such probe: later U probes lie above it, V probes below
                nlo = m[k] + 1;
                dl = m[k]; al = l[k]; vdh = t - 1 - m[k]; vh = l[P + k];
            }
#pragma unroll
        for (int k = P - 1; k >= 0; --k)
            if (!below[k]) {  // the first probe above the split
                nhi = m[k];
                dh = m[k]; ah = l[k]; vdl = t - 1 - m[k]; vl = l[P + k];
            }
        lo = nlo;
        hi = nhi;
    }
    const int x = lo;
    const int a = bracketed(keys, U, x, dl, al, dh, ah);
    const int c = bracketed(keys, V, t - x, vdl, vl, vdh, vh);
    split[b] = make_int4(a, x - a, c, t - x - c);
}

// where word i of a v4 tile comes from: segments [0,p1) of A, [p1,p2) of B, [p2,p3) of C, then D
__device__ __forceinline__ int source4(int i, int p1, int p2, int p3, int ga, int gb, int gc, int gd) {
    return i < p1 ? ga + i : i < p2 ? gb + (i - p1) : i < p3 ? gc + (i - p2) : gd + (i - p3);
}

template <int THREADS, int ITEMS, bool PAIRS>
__device__ __forceinline__ void merge4(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                       u32* __restrict__ kout, u32* __restrict__ vout,
                                       const int4* __restrict__ split, int n, int L) {
    constexpr int T = THREADS * ITEMS;
    extern __shared__ u32 smem[];
    u32* sk = smem;
    u32* sv = smem + smem_words(T, ITEMS);
    const int tid = threadIdx.x, b = blockIdx.x;
    const long long o = (long long)b * T;
    const long long gs = o - o % (4LL * L);  // 4L is a multiple of T
    const int r0 = run_start(gs, 0, L, n), r1 = run_start(gs, 1, L, n), r2 = run_start(gs, 2, L, n),
              r3 = run_start(gs, 3, L, n), r4 = run_start(gs, 4, L, n);
    const int t0 = (int)(o - gs), gsize = r4 - r0, t1 = min(t0 + T, gsize);
    const int4 s = split[b];
    const int4 e = t1 == gsize ? make_int4(r1 - r0, r2 - r1, r3 - r2, r4 - r3) : split[b + 1];
    const int cnt = t1 - t0;
    const int p1 = e.x - s.x, p2 = p1 + (e.y - s.y), p3 = p2 + (e.z - s.z);  // segment ends
    const int ga = r0 + s.x, gb = r1 + s.y, gc = r2 + s.z, gd = r3 + s.w;
#pragma unroll
    for (int q = 0; q < ITEMS; ++q) {  // [A's range | B's | C's | D's], each read coalesced
        const int i = tid + q * THREADS;
        if (i < cnt) sk[pad(i)] = kin[source4(i, p1, p2, p3, ga, gb, gc, gd)];
    }
    if (PAIRS) {
#pragma unroll
        for (int q = 0; q < ITEMS; ++q) {
            const int i = tid + q * THREADS;
            if (i < cnt) sv[pad(i)] = vin[source4(i, p1, p2, p3, ga, gb, gc, gd)];
        }
    }
    __syncthreads();
    u32 k[ITEMS], v[ITEMS];
    const int o0 = tid * ITEMS;
    merge_regs<ITEMS, PAIRS, true>(sk, sv, 0, p1, p2, p3, cnt, o0, k, v);  // A+B | C+D
    __syncthreads();
    regs_to_smem<ITEMS, PAIRS>(sk, sv, o0, cnt, k, v);
    __syncthreads();
    if (p2 > 0 && p2 < cnt) {  // U | V -> the tile (block-uniform: skipped if a side is empty)
        merge_regs<ITEMS, PAIRS, false>(sk, sv, 0, p2, cnt, cnt, cnt, o0, k, v);
        __syncthreads();
        regs_to_smem<ITEMS, PAIRS>(sk, sv, o0, cnt, k, v);
        __syncthreads();
    }
    store_tile<THREADS, ITEMS>(sk, kout + (int)o, cnt);
    if (PAIRS) store_tile<THREADS, ITEMS>(sv, vout + (int)o, cnt);
}

// ============================================================================================
// v5: v4 with every thread's loads in flight together
// ============================================================================================
// v4's merge stores each word into shared memory before it loads the next (the compiler keeps the
// store inside the branch `if (i < cnt)`, so the next load waits for it): one load in flight per
// thread, ITEMS round trips to DRAM per tile. Here a thread first loads all of its words into
// registers, then stores them all. No load or store is predicated: a thread past cnt reloads the
// tile's last word (an address in bounds, a sector already in flight) and stores it into the
// spare slots [cnt, T), which no merge output reads back as data and no store copies out.
// (Predicated loads would each hold one of the 7 predicate registers until their store: at most
// 7 loads in flight, which is what ptxas made of the first draft.)
//
// WAYS sorted segments of global memory side by side into padded shared memory: segment w is
// g[start[w] .. start[w] + p[w+1] - p[w]) and lands at tile positions [p[w], p[w+1]); p[0] = 0,
// p[WAYS] = cnt <= THREADS * IT. With PAIRS the values come from v at the same positions.
template <int THREADS, int IT, int WAYS, bool PAIRS>
__device__ __forceinline__ void load_segments(const u32* __restrict__ g, const u32* __restrict__ gv,
                                              u32* sk, u32* sv, const int (&p)[WAYS + 1],
                                              const int (&start)[WAYS]) {
    const int tid = threadIdx.x, cnt = p[WAYS];
    int off[WAYS];  // word i of the tile is g[i + off[segment of i]]
#pragma unroll
    for (int w = 0; w < WAYS; ++w) off[w] = start[w] - p[w];
    u32 rk[IT], rv[IT];
#pragma unroll
    for (int q = 0; q < IT; ++q) {
        const int i = min(tid + q * THREADS, cnt - 1);  // cnt >= 1 (callers skip empty tiles)
        int o = off[0];
#pragma unroll
        for (int w = 1; w < WAYS; ++w) o = i >= p[w] ? off[w] : o;
        rk[q] = __ldg(g + (i + o));
        if (PAIRS) rv[q] = __ldg(gv + (i + o));
    }
#pragma unroll
    for (int q = 0; q < IT; ++q) {
        const int i = tid + q * THREADS;  // < THREADS * IT: inside the buffer
        sk[pad(i)] = rk[q];
        if (PAIRS) sv[pad(i)] = rv[q];
    }
}

// The first cnt words of padded shared memory to g[o .. o + cnt), o any word offset (v6's tiles
// start anywhere): up to 3 words one by one to reach a 16-byte boundary, then whole uint4s, then
// up to 3 words. g itself must be 16-byte aligned (the driver checks every buffer).
template <int THREADS, int IT>
__device__ __forceinline__ void store_span(const u32* s, u32* __restrict__ g, int o, int cnt) {
    const int tid = threadIdx.x;
    const int head = min(cnt, (4 - (o & 3)) & 3);
    const int body = (cnt - head) >> 2;  // whole uint4s, at most THREADS * IT / 4
    const int tail = head + 4 * body;
    uint4* g4 = reinterpret_cast<uint4*>(g + o + head);
#pragma unroll
    for (int q = 0; q < IT / 4; ++q) {
        const int c = tid + q * THREADS;
        if (c < body) {
            const int i = head + 4 * c;
            g4[c] = make_uint4(s[pad(i)], s[pad(i + 1)], s[pad(i + 2)], s[pad(i + 3)]);
        }
    }
    if (tid < head) g[o + tid] = s[pad(tid)];
    if (tid < cnt - tail) g[o + tail + tid] = s[pad(tail + tid)];
}

// One tile of a 4-way pass: segments of A, B, C, D (global starts and lengths) merged into
// kout[o .. o + cnt): load, merge(A, B) | merge(C, D), then merge(U, V), as v4.
template <int THREADS, int IT, bool PAIRS>
__device__ __forceinline__ void merge4_tile(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                            u32* __restrict__ kout, u32* __restrict__ vout,
                                            const int (&start)[4], const int (&len)[4], int o) {
    constexpr int T = THREADS * IT;
    extern __shared__ u32 smem[];
    u32* sk = smem;
    u32* sv = smem + smem_words(T, IT);
    const int tid = threadIdx.x;
    int p[5];
    p[0] = 0;
#pragma unroll
    for (int w = 0; w < 4; ++w) p[w + 1] = p[w] + len[w];
    const int cnt = p[4];
    if (cnt == 0) return;  // never: tiles of v5 and v6 hold at least one key (block-uniform)
    load_segments<THREADS, IT, 4, PAIRS>(kin, vin, sk, sv, p, start);
    __syncthreads();
    u32 k[IT], v[IT];
    const int o0 = tid * IT;
    merge_regs<IT, PAIRS, true>(sk, sv, 0, p[1], p[2], p[3], cnt, o0, k, v);  // A+B | C+D
    __syncthreads();
    regs_to_smem<IT, PAIRS>(sk, sv, o0, cnt, k, v);
    __syncthreads();
    if (p[2] > 0 && p[2] < cnt) {  // U | V (block-uniform: skipped if a side is empty)
        merge_regs<IT, PAIRS, false>(sk, sv, 0, p[2], cnt, cnt, cnt, o0, k, v);
        __syncthreads();
        regs_to_smem<IT, PAIRS>(sk, sv, o0, cnt, k, v);
        __syncthreads();
    }
    store_span<THREADS, IT>(sk, kout, o, cnt);
    if (PAIRS) store_span<THREADS, IT>(sv, vout, o, cnt);
}

// v5's pass: v4's plan (fixed tiles of T outputs, split[] from v4's table and split kernels).
template <int THREADS, int IT, bool PAIRS>
__device__ __forceinline__ void merge4_v5(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                          u32* __restrict__ kout, u32* __restrict__ vout,
                                          const int4* __restrict__ split, int n, int L) {
    constexpr int T = THREADS * IT;
    const int b = blockIdx.x;
    const long long o = (long long)b * T;
    const long long gs = o - o % (4LL * L);
    int r[5];
#pragma unroll
    for (int w = 0; w < 5; ++w) r[w] = run_start(gs, w, L, n);
    const int t0 = (int)(o - gs), gsize = r[4] - r[0], t1 = min(t0 + T, gsize);
    const int4 s = split[b];
    const int4 e = t1 == gsize ? make_int4(r[1] - r[0], r[2] - r[1], r[3] - r[2], r[4] - r[3])
                               : split[b + 1];
    const int start[4] = {r[0] + s.x, r[1] + s.y, r[2] + s.z, r[3] + s.w};
    const int len[4] = {e.x - s.x, e.y - s.y, e.z - s.z, e.w - s.w};
    merge4_tile<THREADS, IT, PAIRS>(kin, vin, kout, vout, start, len, (int)o);
}

// ============================================================================================
// v6: tiles cut at sampled splitters, one short partition launch per pass
// ============================================================================================
// Samples: every S-th key of every run, X[j S] (S divides L, so run starts are samples). Order
// the samples of a group as the stable merge orders their keys: by key, then run, then index.
// Cut the group at every K-th sample of that order: tile k holds every element from the cut before
// sample kK up to the cut before sample (k+1)K. The cut before a sample s (key x, run r, index iS)
// is, per run w: w == r: i S; w < r: elements <= x; w > r: elements < x (exactly what precedes s
// in the stable merge). Both are cheap:
//   - the rank of s among the samples is i + (samples of each other run before s): WAYS-1 binary
//     searches over the sample positions X[run start + m S] (a few hundred KB: L1/L2 hits);
//   - if m samples of run w come before s, then (m-1) S + 1 <= cut_w <= m S: the exact cut is a
//     binary search over S keys (log2 S steps), needed for one sample in K.
// A tile spans at most K samples' worth of keys plus, at each of the WAYS - 1 runs that do not
// own its first sample, less than S more: cnt < (K + WAYS - 1) S. Its output starts at the group
// start plus the cut's total. Every tile holds at least its first sample: none is empty.
//
// cuts[tile * WAYS + w], tile = group * Q + k (Q = tiles of a full group); one thread a sample.
template <int WAYS>
__device__ __forceinline__ void rank_samples(const u32* __restrict__ keys, int n, int L, int S,
                                             int K, int Q, int* __restrict__ cuts, int samples) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= samples) return;
    const int pos = j * S;  // < n <= 2^30
    const long long G = (long long)WAYS * L;
    const long long g = pos / G, gs = g * G;
    const int r = (int)((pos - gs) / L);
    int rs[WAYS + 1];
#pragma unroll
    for (int w = 0; w <= WAYS; ++w) rs[w] = run_start(gs, w, L, n);
    const u32 x = keys[pos];
    int lo[WAYS], hi[WAYS];  // samples of run w before s: searched in [lo, hi]
#pragma unroll
    for (int w = 0; w < WAYS; ++w) {
        lo[w] = 0;
        hi[w] = w == r ? 0 : (rs[w + 1] - rs[w] + S - 1) / S;
    }
    for (bool busy = true; busy;) {  // the searches side by side: their loads overlap
        busy = false;
#pragma unroll
        for (int w = 0; w < WAYS; ++w)
            if (lo[w] < hi[w]) {
                const int mid = (lo[w] + hi[w]) >> 1;
                const u32 y = keys[rs[w] + mid * S];
                if (w < r ? y <= x : y < x) lo[w] = mid + 1;
                else hi[w] = mid;
                busy |= lo[w] < hi[w];
            }
    }
    const int i = (pos - run_start(gs, r, L, n)) / S;  // (not rs[r]: a runtime index spills rs)
    int rank = i;
#pragma unroll
    for (int w = 0; w < WAYS; ++w) rank += lo[w];
    if (rank % K) return;
    // the exact cut: run w's count lies in [(m-1) S + 1, min(m S, len_w)] (0 if m = 0)
#pragma unroll
    for (int w = 0; w < WAYS; ++w) {
        const int m = lo[w], len = rs[w + 1] - rs[w];
        if (w == r) {
            lo[w] = hi[w] = i * S;
        } else {
            lo[w] = m > 0 ? (m - 1) * S + 1 : 0;
            hi[w] = m > 0 ? min(m * S, len) : 0;
        }
    }
    for (bool busy = true; busy;) {
        busy = false;
#pragma unroll
        for (int w = 0; w < WAYS; ++w)
            if (lo[w] < hi[w]) {
                const int mid = (lo[w] + hi[w]) >> 1;
                const u32 y = keys[rs[w] + mid];
                if (w < r ? y <= x : y < x) lo[w] = mid + 1;
                else hi[w] = mid;
                busy |= lo[w] < hi[w];
            }
    }
    int* c = cuts + (long long)(g * Q + rank / K) * WAYS;
#pragma unroll
    for (int w = 0; w < WAYS; ++w) c[w] = lo[w];
}

// v6's 4-way pass: tile b = group b / Q, k = b % Q, between cuts[b] and cuts[b + 1] (or the end of
// the group after its last tile).
template <int THREADS, int IT, bool PAIRS>
__device__ __forceinline__ void merge4_v6(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                          u32* __restrict__ kout, u32* __restrict__ vout,
                                          const int* __restrict__ cuts, int n, int L, int S, int K,
                                          int Q) {
    const int b = blockIdx.x, g = b / Q, k = b - g * Q;
    const long long gs = (long long)g * 4 * L;
    int r[5];
#pragma unroll
    for (int w = 0; w < 5; ++w) r[w] = run_start(gs, w, L, n);
    const int samples = (r[4] - r[0] + S - 1) / S, tiles = (samples + K - 1) / K;
    const int4 s = reinterpret_cast<const int4*>(cuts)[b];
    const int4 e = k + 1 < tiles ? reinterpret_cast<const int4*>(cuts)[b + 1]
                                 : make_int4(r[1] - r[0], r[2] - r[1], r[3] - r[2], r[4] - r[3]);
    const int start[4] = {r[0] + s.x, r[1] + s.y, r[2] + s.z, r[3] + s.w};
    const int len[4] = {e.x - s.x, e.y - s.y, e.z - s.z, e.w - s.w};
    merge4_tile<THREADS, IT, PAIRS>(kin, vin, kout, vout, start, len,
                                    r[0] + s.x + s.y + s.z + s.w);
}

// ============================================================================================
// v7: fewer instructions per key
// ============================================================================================
// Keys alone cannot show stability (equal keys are the same bits), so their path drops what only
// stability needs:
//   - Batcher's odd-even merge sort network in registers: 191 compare-exchanges of 32 keys, each
//     a min and a max (2 instructions), instead of the transposition network's 496 (3 each).
//   - Merges against a reversed run. Store run A ascending and run B descending right after it:
//     reading past A's end then gives B's largest keys (and past B's end, going down, A's largest),
//     which never win against a key still due except by being equal to it, and an equal key is the
//     same output. So a merge step needs no bounds check: take A if ka <= kb. Every merge writes its
//     output run ascending or descending, whichever the next level wants.
// Keys and pairs: a pass's first level gives each pair of runs its own threads, so no thread's
// outputs cross from one pair into the next (v4-v6 checked for that crossing at every step); a
// tile then needs one thread's outputs of slack per extra pair (the driver's K).

// Batcher's odd-even merge sort of N (a power of two) keys, ascending. Unstable: keys only.
// Stages (p, s) for p = 1, 2, 4, ... < N and s = p, p/2, ..., 1; stage (p, s) compares x with x + s
// for every x with (x - s % p) mod 2s < s whose pair lies in one block of 2p. Each stage is one
// flat loop over x with p and s template constants, so it unrolls to constant register indices.
template <int N, int P, int S>
__device__ __forceinline__ void batcher_stage(u32 (&k)[N]) {
#pragma unroll
    for (int x = 0; x < N; ++x)
        if (x >= S % P && (x - S % P) % (2 * S) < S && x + S < N && x / (2 * P) == (x + S) / (2 * P)) {
            const u32 a = k[x], b = k[x + S];
            k[x] = min(a, b);
            k[x + S] = max(a, b);
        }
}
template <int N, int P, int S>
__device__ __forceinline__ void batcher_from(u32 (&k)[N]) {
    if constexpr (P < N) {
        batcher_stage<N, P, S>(k);
        if constexpr (S > 1) batcher_from<N, P, S / 2>(k);
        else batcher_from<N, 2 * P, 2 * P>(k);
    }
}
template <int N>
__device__ __forceinline__ void batcher_sort(u32 (&k)[N]) {
    batcher_from<N, 1, 1>(k);
}

// Outputs d .. d+IT-1 of merging A (ascending at [s0, m0)) with B (descending at [m0, e0)) into
// registers, keys only. One co-rank search (B[j] sits at e0 - 1 - j), then IT steps without
// bounds checks. Reads stay within [s0 - 1 - IT, e0 + IT): a thread whose outputs run past the
// pair's end (d + IT > e0 - s0) reads outside the pair, up to IT words each way; callers leave
// that much slack around the tile and never store those outputs. The last step loads nothing.
template <int IT>
__device__ __forceinline__ void merge_rev(const u32* sk, int s0, int m0, int e0, int d,
                                          u32 (&k)[IT]) {
    const int na = m0 - s0, nb = e0 - m0;
    int lo = max(0, d - nb), hi = min(d, na);
    while (lo < hi) {
        const int mid = (lo + hi) >> 1;
        if (sk[pad(s0 + mid)] <= sk[pad(e0 - d + mid)]) lo = mid + 1;  // A[mid] vs B[d-1-mid]
        else hi = mid;
    }
    int pa = s0 + lo, pb = e0 - 1 - (d - lo);  // next of A (going up), next of B (going down)
    u32 ka = sk[pad(pa)], kb = sk[pad(pb)];
#pragma unroll
    for (int q = 0; q < IT; ++q) {
        const bool take_a = ka <= kb;
        k[q] = min(ka, kb);
        if (q + 1 < IT) {
            const int nxt = take_a ? pa + 1 : pb - 1;
            if (take_a) pa = nxt;
            else pb = nxt;
            const u32 kn = sk[pad(nxt)];
            ka = take_a ? kn : ka;
            kb = take_a ? kb : kn;
        }
    }
}

// A thread's IT outputs, the first at d of the pair [s0, e0), for positions < e0 only: ascending
// at s0 + d + q, or (desc) descending from the pair's end, at e0 - 1 - d - q.
template <int IT, bool PAIRS>
__device__ __forceinline__ void store_run(u32* sk, u32* sv, int s0, int e0, int d, bool desc,
                                          const u32 (&k)[IT], const u32 (&v)[IT]) {
    const int first = desc ? e0 - 1 - d : s0 + d, step = desc ? -1 : 1, cnt = e0 - s0 - d;
#pragma unroll
    for (int q = 0; q < IT; ++q)
        if (q < cnt) {
            sk[pad(first + step * q)] = k[q];
            if (PAIRS) sv[pad(first + step * q)] = v[q];
        }
}

// Block sort of keys: v4's tile, a Batcher network, then merges against reversed runs. Run r of
// length w is stored descending if r is odd (the B of its pair), so the final run is ascending.
template <int THREADS, int IT>
__device__ __forceinline__ void block_sort_rev(const u32* __restrict__ kin, u32* __restrict__ kout,
                                               int n) {
    constexpr int T = THREADS * IT;
    extern __shared__ u32 smem[];
    u32* sk = smem;
    const int tid = threadIdx.x;
    const int base = blockIdx.x * T;
    const int cnt = min(T, n - base);
    load_tile<THREADS, IT>(kin + base, sk, cnt, KEY_MAX);  // KEY_MAX past the end: sorts last
    __syncthreads();
    u32 k[IT];
    const int o0 = tid * IT;
#pragma unroll
    for (int q = 0; q < IT; ++q) k[q] = sk[pad(o0 + q)];
    batcher_sort<IT>(k);  // runs of IT
    static_assert(IT == 16 || IT == 32, "a thread's outputs fill one half or all of a 32-word row");
    for (int w = IT; w < T; w *= 2) {  // runs of w -> 2w
        const bool in_warp = 2 * w <= 32 * IT;  // see block_sort
        if (in_warp) __syncwarp(); else __syncthreads();  // every read of the last level is done
        // this thread's run r (of w) from the last level, descending if r is odd: its IT keys go
        // to [o0, o0 + IT) or, reversed, to the mirror image [lo, lo + IT) in the run; both are
        // IT-aligned, inside one padded row, so pad(lo + q) = pad(lo) + q
        const int r0 = o0 & ~(w - 1);
        const bool desc = (o0 / w) & 1;
        u32* row = sk + pad(desc ? 2 * r0 + w - IT - o0 : o0);
#pragma unroll
        for (int q = 0; q < IT; ++q) row[q] = desc ? k[IT - 1 - q] : k[q];
        if (in_warp) __syncwarp(); else __syncthreads();
        const int s0 = o0 & ~(2 * w - 1);
        merge_rev<IT>(sk, s0, s0 + w, s0 + 2 * w, o0 - s0, k);
    }
    __syncthreads();
    regs_to_smem<IT, false>(sk, nullptr, o0, T, k, k);
    __syncthreads();
    store_tile<THREADS, IT>(sk, kout + base, cnt);
}

// The words a v7/v8 tile buffer takes: GUARD words before position 0 (merge_rev reads up to IT + 1
// below a pair), the tile, and IT past it, padded. Values (PAIRS) follow at the same offset.
#define GUARD 64
__host__ __device__ constexpr int tile_words(int T, int it) {
    return GUARD + T + it + ((T + it) >> 5) + 1;
}

// One merge level inside a tile: P pairs of runs, pair p = [b[2p], b[2p+1]) and [b[2p+1], b[2p+2]).
// Each pair gets ceil(its keys / IT) threads of its own, in order (callers guarantee they fit
// in THREADS). Output of pair p replaces it; with REV (keys) the second run of every pair is read
// descending and pair p's output is written descending if p is odd.
template <int THREADS, int IT, int P, bool PAIRS, bool REV>
__device__ __forceinline__ void tile_level(u32* sk, u32* sv, const int (&b)[2 * P + 1]) {
    const int tid = threadIdx.x;
    int s0 = 0, m0 = 0, e0 = 0, d = -1, first = 0;
    bool desc = false;
#pragma unroll
    for (int p = 0; p < P; ++p) {
        const int nt = (b[2 * p + 2] - b[2 * p] + IT - 1) / IT;
        if (tid >= first && tid < first + nt) {
            s0 = b[2 * p]; m0 = b[2 * p + 1]; e0 = b[2 * p + 2];
            d = (tid - first) * IT;
            desc = REV && (p & 1);
        }
        first += nt;
    }
    u32 k[IT], v[IT];
    if (d >= 0) {
        if (REV) merge_rev<IT>(sk, s0, m0, e0, d, k);
        else merge_regs<IT, PAIRS, false>(sk, sv, s0, m0, e0, e0, e0, s0 + d, k, v);
    }
    __syncthreads();  // all reads of this level before any write
    if (d >= 0) store_run<IT, PAIRS>(sk, sv, s0, e0, d, desc, k, v);
    __syncthreads();
}

// The tile's WAYS segments into padded shared memory, as v5's load_segments, but with REV the odd
// segments land back to front: word i of the tile (segment w) is g[c[w] + i] forward or
// g[c[w] - i] reversed, with c[w] computed once. A scatter from aligned uint4 chunks was tried:
// its per-word range checks cost more than the 4x fewer loads saved (.notes/day38_gpu.md).
template <int THREADS, int IT, int WAYS, bool PAIRS, bool REV>
__device__ __forceinline__ void load_runs(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                          u32* sk, u32* sv, const int (&start)[WAYS],
                                          const int (&p)[WAYS + 1]) {
    const int tid = threadIdx.x, cnt = p[WAYS];
    int c[WAYS];
#pragma unroll
    for (int w = 0; w < WAYS; ++w) c[w] = (REV && (w & 1)) ? start[w] + p[w + 1] - 1 : start[w] - p[w];
    u32 rk[IT], rv[IT];
#pragma unroll
    for (int q = 0; q < IT; ++q) {
        const int i = min(tid + q * THREADS, cnt - 1);  // past cnt: reload the last word (v5)
        int src = c[0] + i;
#pragma unroll
        for (int w = 1; w < WAYS; ++w) src = i >= p[w] ? ((REV && (w & 1)) ? c[w] - i : c[w] + i) : src;
        rk[q] = __ldg(kin + src);
        if (PAIRS) rv[q] = __ldg(vin + src);
    }
#pragma unroll
    for (int q = 0; q < IT; ++q) {
        const int i = tid + q * THREADS;
        sk[pad(i)] = rk[q];
        if (PAIRS) sv[pad(i)] = rv[q];
    }
}

// A tile of a WAYS-way pass (v7: 4, v8: 8): segments of the WAYS runs, merged in log2(WAYS)
// levels into kout[o .. o + cnt). With REV (keys) the odd segments load reversed.
template <int THREADS, int IT, int WAYS, bool PAIRS>
__device__ __forceinline__ void mergeN_tile(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                            u32* __restrict__ kout, u32* __restrict__ vout,
                                            const int (&start)[WAYS], const int (&len)[WAYS], int o,
                                            int n) {
    constexpr int T = THREADS * IT;
    constexpr bool REV = !PAIRS;
    extern __shared__ u32 smem[];
    u32* sk = smem + GUARD;
    u32* sv = sk + tile_words(T, IT);
    int p[WAYS + 1];
    p[0] = 0;
#pragma unroll
    for (int w = 0; w < WAYS; ++w) p[w + 1] = p[w] + len[w];
    const int cnt = p[WAYS];
    if (cnt == 0) return;  // never (block-uniform)
    load_runs<THREADS, IT, WAYS, PAIRS, REV>(kin, vin, sk, sv, start, p);
    __syncthreads();
    if (WAYS == 8) {
        const int b[9] = {p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7], p[8]};
        tile_level<THREADS, IT, 4, PAIRS, REV>(sk, sv, b);
        const int c[5] = {p[0], p[2], p[4], p[6], p[8]};
        tile_level<THREADS, IT, 2, PAIRS, REV>(sk, sv, c);
        const int e[3] = {p[0], p[4], p[8]};
        tile_level<THREADS, IT, 1, PAIRS, REV>(sk, sv, e);
    } else {
        const int b[5] = {p[0], p[1], p[2], p[3], p[4]};
        tile_level<THREADS, IT, 2, PAIRS, REV>(sk, sv, b);
        const int e[3] = {p[0], p[2], p[4]};
        tile_level<THREADS, IT, 1, PAIRS, REV>(sk, sv, e);
    }
    store_span<THREADS, IT>(sk, kout, o, cnt);
    if (PAIRS) store_span<THREADS, IT>(sv, vout, o, cnt);
}

// v7 (WAYS 4) and v8 (WAYS 8) passes: v6's sampled cuts, cuts[b * WAYS + w].
template <int THREADS, int IT, int WAYS, bool PAIRS>
__device__ __forceinline__ void mergeN_cut(const u32* __restrict__ kin, const u32* __restrict__ vin,
                                           u32* __restrict__ kout, u32* __restrict__ vout,
                                           const int* __restrict__ cuts, int n, int L, int S, int K,
                                           int Q) {
    const int b = blockIdx.x, g = b / Q, k = b - g * Q;
    const long long gs = (long long)g * WAYS * L;
    int r[WAYS + 1];
#pragma unroll
    for (int w = 0; w <= WAYS; ++w) r[w] = run_start(gs, w, L, n);
    const int samples = (r[WAYS] - r[0] + S - 1) / S, tiles = (samples + K - 1) / K;
    const bool last = k + 1 == tiles;
    int start[WAYS], len[WAYS], o = r[0];
#pragma unroll
    for (int w = 0; w < WAYS; ++w) {
        const int c0 = cuts[(long long)b * WAYS + w];
        const int c1 = last ? r[w + 1] - r[w] : cuts[(long long)(b + 1) * WAYS + w];
        start[w] = r[w] + c0;
        len[w] = c1 - c0;
        o += c0;
    }
    mergeN_tile<THREADS, IT, WAYS, PAIRS>(kin, vin, kout, vout, start, len, o, n);
}

// ============================================================================================
// entry points
// ============================================================================================
#define ARGS const u32 *__restrict__ kin, const u32 *__restrict__ vin, u32 *__restrict__ kout, \
             u32 *__restrict__ vout, int n

extern "C" __global__ void sort_v1_merge_keys(ARGS, int w) { merge_v1<false>(kin, vin, kout, vout, n, w); }
extern "C" __global__ void sort_v1_merge_pairs(ARGS, int w) { merge_v1<true>(kin, vin, kout, vout, n, w); }

extern "C" __global__ void __launch_bounds__(V2_THREADS) sort_v2_block_keys(ARGS) {
    block_v2<false>(kin, vin, kout, vout, n);
}
extern "C" __global__ void __launch_bounds__(V2_THREADS) sort_v2_block_pairs(ARGS) {
    block_v2<true>(kin, vin, kout, vout, n);
}
extern "C" __global__ void __launch_bounds__(V2_THREADS) sort_v2_merge_keys(ARGS, int L) {
    merge_v2<false>(kin, vin, kout, vout, n, L);
}
extern "C" __global__ void __launch_bounds__(V2_THREADS) sort_v2_merge_pairs(ARGS, int L) {
    merge_v2<true>(kin, vin, kout, vout, n, L);
}

#define ITEMS 16
// <= 64 registers a thread at every block size: 65536 registers hold 1024 threads
#define BOUNDS(THREADS) __launch_bounds__(THREADS, 1024 / (THREADS))

#define V3_THREADS 256
extern "C" __global__ void BOUNDS(V3_THREADS) sort_v3_block_keys(ARGS) {
    block_sort<V3_THREADS, ITEMS, false>(kin, vin, kout, vout, n);
}
extern "C" __global__ void BOUNDS(V3_THREADS) sort_v3_block_pairs(ARGS) {
    block_sort<V3_THREADS, ITEMS, true>(kin, vin, kout, vout, n);
}
extern "C" __global__ void BOUNDS(V3_THREADS) sort_v3_merge_keys(ARGS, const int* __restrict__ part, int L) {
    merge2<V3_THREADS, ITEMS, false>(kin, vin, kout, vout, part, n, L);
}
extern "C" __global__ void BOUNDS(V3_THREADS) sort_v3_merge_pairs(ARGS, const int* __restrict__ part, int L) {
    merge2<V3_THREADS, ITEMS, true>(kin, vin, kout, vout, part, n, L);
}

#define V4_BLOCK(TH)                                                                              \
    extern "C" __global__ void BOUNDS(TH) sort_v4_block_t##TH##_keys(ARGS) {                      \
        block_sort<TH, ITEMS, false>(kin, vin, kout, vout, n);                                    \
    }                                                                                             \
    extern "C" __global__ void BOUNDS(TH) sort_v4_block_t##TH##_pairs(ARGS) {                     \
        block_sort<TH, ITEMS, true>(kin, vin, kout, vout, n);                                     \
    }
#define V4_MERGE(TH)                                                                              \
    extern "C" __global__ void BOUNDS(TH) sort_v4_merge_t##TH##_keys(                             \
        ARGS, const int4* __restrict__ split, int L) {                                            \
        merge4<TH, ITEMS, false>(kin, vin, kout, vout, split, n, L);                              \
    }                                                                                             \
    extern "C" __global__ void BOUNDS(TH) sort_v4_merge_t##TH##_pairs(                            \
        ARGS, const int4* __restrict__ split, int L) {                                            \
        merge4<TH, ITEMS, true>(kin, vin, kout, vout, split, n, L);                               \
    }
V4_BLOCK(256)
V4_BLOCK(512)
V4_BLOCK(1024)
// 16384-key runs from 512 threads of 32 keys (keys only): two blocks an SM instead of one
extern "C" __global__ void BOUNDS(512) sort_v4_block_t512_i32_keys(ARGS) {
    block_sort<512, 32, false>(kin, vin, kout, vout, n);
}
V4_MERGE(256)
V4_MERGE(512)
V4_MERGE(1024)

// v5: v4's plan, the merge with its loads in flight
#define V5_MERGE(TH)                                                                              \
    extern "C" __global__ void BOUNDS(TH) sort_v5_merge_t##TH##_keys(                             \
        ARGS, const int4* __restrict__ split, int L) {                                            \
        merge4_v5<TH, ITEMS, false>(kin, vin, kout, vout, split, n, L);                           \
    }                                                                                             \
    extern "C" __global__ void BOUNDS(TH) sort_v5_merge_t##TH##_pairs(                            \
        ARGS, const int4* __restrict__ split, int L) {                                            \
        merge4_v5<TH, ITEMS, true>(kin, vin, kout, vout, split, n, L);                            \
    }
V5_MERGE(256)
V5_MERGE(512)

// v6: cuts at sampled splitters (sort_v6_rank, a thread per sample), tiles of up to T = TH * 16
// keys (the driver picks S and K with (K + 3) S <= T)
extern "C" __global__ void sort_v6_rank(const u32* __restrict__ keys, int n, int L, int S, int K,
                                        int Q, int* __restrict__ cuts, int samples) {
    rank_samples<4>(keys, n, L, S, K, Q, cuts, samples);
}
#define V6_MERGE(TH)                                                                              \
    extern "C" __global__ void BOUNDS(TH) sort_v6_merge_t##TH##_keys(                             \
        ARGS, const int* __restrict__ cuts, int L, int S, int K, int Q) {                         \
        merge4_v6<TH, ITEMS, false>(kin, vin, kout, vout, cuts, n, L, S, K, Q);                   \
    }                                                                                             \
    extern "C" __global__ void BOUNDS(TH) sort_v6_merge_t##TH##_pairs(                            \
        ARGS, const int* __restrict__ cuts, int L, int S, int K, int Q) {                         \
        merge4_v6<TH, ITEMS, true>(kin, vin, kout, vout, cuts, n, L, S, K, Q);                    \
    }
V6_MERGE(256)
V6_MERGE(512)

// v7: keys sorted by block_sort_rev (512 x 32 or 256 x 32); pairs by v4's block sorts. 4-way
// passes on v6's cuts, tiles of up to TH * 16 keys.
#define V7_BLOCK(TH)                                                                              \
    extern "C" __global__ void BOUNDS(TH) sort_v7_block_t##TH##_i32_keys(ARGS) {                  \
        block_sort_rev<TH, 32>(kin, kout, n);                                                     \
    }
V7_BLOCK(256)
V7_BLOCK(512)
#define VN_MERGE(V, WAYS, TH)                                                                     \
    extern "C" __global__ void BOUNDS(TH) sort_##V##_merge_t##TH##_keys(                          \
        ARGS, const int* __restrict__ cuts, int L, int S, int K, int Q) {                         \
        mergeN_cut<TH, ITEMS, WAYS, false>(kin, vin, kout, vout, cuts, n, L, S, K, Q);            \
    }                                                                                             \
    extern "C" __global__ void __launch_bounds__(TH, 512 / (TH)) sort_##V##_merge_t##TH##_i32_keys( \
        ARGS, const int* __restrict__ cuts, int L, int S, int K, int Q) {                         \
        mergeN_cut<TH, 32, WAYS, false>(kin, vin, kout, vout, cuts, n, L, S, K, Q);               \
    }                                                                                             \
    extern "C" __global__ void BOUNDS(TH) sort_##V##_merge_t##TH##_pairs(                         \
        ARGS, const int* __restrict__ cuts, int L, int S, int K, int Q) {                         \
        mergeN_cut<TH, ITEMS, WAYS, true>(kin, vin, kout, vout, cuts, n, L, S, K, Q);             \
    }
VN_MERGE(v7, 4, 256)
VN_MERGE(v7, 4, 512)

// v8: v7 with 8-way passes (three levels a trip): sort_v8_rank ranks a sample among 8 runs
extern "C" __global__ void sort_v8_rank(const u32* __restrict__ keys, int n, int L, int S, int K,
                                        int Q, int* __restrict__ cuts, int samples) {
    rank_samples<8>(keys, n, L, S, K, Q, cuts, samples);
}
VN_MERGE(v8, 8, 256)
VN_MERGE(v8, 8, 512)
