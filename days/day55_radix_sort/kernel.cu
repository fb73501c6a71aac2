// Day 55: LSD radix sort of 32-bit keys and of key-value pairs, up to the onesweep design.
//
// A least-significant-digit radix sort orders 32-bit keys by a few bits at a time, lowest digit
// first; every pass is a STABLE counting sort by one digit (keys with equal digits keep their
// order), so after the last pass the keys are ordered by all 32 bits. A counting sort pass:
//   1. histogram: how many keys have each digit value,
//   2. exclusive scan of the histogram: where each digit's keys start in the output,
//   3. scatter: each key goes to its digit's start + the number of keys before it with the same
//      digit (its stable rank).
// On a GPU the keys are cut into tiles; the scatter of a tile needs, per digit, the count of
// that digit in all earlier tiles: a scan over tiles. How each version gets that scan is the
// ladder:
//
//   v1  4-bit digits, 8 passes, three kernels a pass: a 16-bin count per 1024-key tile, one
//       block that scans the whole [digit][tile] count table, a scatter that ranks each key in
//       its tile with ballots and writes it straight from registers.
//   v2  8-bit digits, 4 passes, still three kernels a pass but "reduce then scan": each block
//       owns a long run of tiles, so the count table is 256 x (blocks), not 256 x (tiles). The
//       downsweep ranks with __match_any_sync into per-warp counters and writes the tile out
//       through shared memory in digit order (coalesced runs instead of scattered words).
//       The keys are read twice a pass (upsweep and downsweep).
//   v3  onesweep (Adinets and Merrill, 2022): ONE kernel reads the keys once and builds all four
//       256-bin histograms; a tiny kernel scans them. Then ONE kernel a pass: each block takes
//       the next tile number from an atomic counter (tiles run in order of start, so waiting on
//       an earlier tile never waits on a block that is not running), ranks its tile, publishes
//       its per-digit counts, finds the counts of all earlier tiles by decoupled look-back over
//       a (tile, digit) status word (flag and count packed in 32 bits), publishes its inclusive
//       prefix, and scatters. Keys are read once and written once a pass.
//   v4  v3 with "early counts": the tile's digit counts are taken with shared atomics right
//       after the load and published before the (slower) ranking, so the tiles behind it find
//       them sooner; the tile shape (threads, keys a thread) and the ranking (match or ballots)
//       are template parameters (radix_v4_t{threads}_i{items}_{m|b}_{keys|pairs}; the driver's
//       V4 picks one; .notes/day55_sweep.py times the candidates).
//
// Keys: uint32, int32 or float32, ascending or descending, through one order-preserving map
// onto uint32 applied only when a digit is taken (key_bits; the keys are moved as they are, so
// -0.0 and NaN payloads survive). Values: any 32-bit word, carried with the keys.
// Every version is stable and takes any length n < 2^30 (the look-back packs a 30-bit count).
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day55_radix_sort/kernel.cu
#include "warp_scan.cuh"

using cuda100::warp_inclusive_scan;

#define FULL_MASK 0xffffffffu

// ------------------------------------------------------------------------------------------
// Keys of three types, either direction: the uint32 whose unsigned order is the wanted order.
// int32: flip the sign bit. float32: every NaN becomes one quiet NaN (sorted last) and -0.0
// becomes +0.0 (tied, so they keep their input order, as numpy's stable sort does); then flip
// the sign bit of positive numbers and every bit of negative ones. Descending: invert it all.
// `mode` is uniform over the grid, so these branches never diverge.
// ------------------------------------------------------------------------------------------
#define MODE_SIGNED 1
#define MODE_FLOAT 2
#define MODE_DESCENDING 4

__device__ __forceinline__ unsigned key_bits(unsigned raw, int mode) {
    unsigned b = raw;
    if (mode & MODE_FLOAT) {
        if ((b & 0x7fffffffu) > 0x7f800000u) b = 0x7fc00000u;
        else if (b == 0x80000000u) b = 0u;
        b = (b & 0x80000000u) ? ~b : (b | 0x80000000u);
    } else if (mode & MODE_SIGNED) {
        b ^= 0x80000000u;
    }
    return (mode & MODE_DESCENDING) ? ~b : b;
}

template <int BITS>
__device__ __forceinline__ unsigned digit_of(unsigned raw, int shift, int mode) {
    return (key_bits(raw, mode) >> shift) & ((1u << BITS) - 1u);
}

__device__ __forceinline__ unsigned lanemask_lt() {
    unsigned m;
    asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
    return m;
}

// ------------------------------------------------------------------------------------------
// The tile: THREADS x ITEMS keys in a warp-striped layout. Warp w owns keys
// [w * 32 * ITEMS, (w + 1) * 32 * ITEMS) of the tile; its item k in lane l is key
// w * 32 * ITEMS + 32 k + l. Each load instruction of a warp reads one 128-byte line, and the
// order (warp, item, lane) IS the keys' order, which makes the ranking below stable.
// Keys past the end of the array (the last tile) get the digit RADIX: they match no real key,
// are never counted and never written.
// ------------------------------------------------------------------------------------------
template <int ITEMS>
__device__ __forceinline__ int striped_index(int k) {
    return (threadIdx.x >> 5) * 32 * ITEMS + 32 * k + (threadIdx.x & 31);
}

template <int ITEMS>
__device__ __forceinline__ void load_striped(const unsigned* __restrict__ src, int valid,
                                             unsigned (&x)[ITEMS]) {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = striped_index<ITEMS>(k);
        x[k] = i < valid ? src[i] : 0u;
    }
}

template <int THREADS, int ITEMS, int BITS>
struct TileShared {
    static constexpr int RADIX = 1 << BITS, WARPS = THREADS / 32, TILE = THREADS * ITEMS;
    static constexpr int CNT = WARPS * RADIX;
    union {
        unsigned cnt[CNT];   // ranking: warp w's counter of digit d is cnt[w * RADIX + d]
        unsigned buf[TILE];  // scatter: the tile's keys (then its values) in digit order
    };
    unsigned total[RADIX];   // keys of digit d in the tile
    unsigned start[RADIX];   // tile rank of the first of them (exclusive scan of total)
    unsigned run[RADIX];     // v2: where digit d's next key goes in the output
    unsigned hist[RADIX];    // v4: the early counts
    int gbase[RADIX];        // output index of the key of tile rank r and digit d: gbase[d] + r
    unsigned warp_sums[32];
    int tile;
};

// Stable rank of each key among the keys of its warp with the same digit, counted in key order.
// (Digits are recomputed from the keys wherever needed: a few ALU operations, where keeping
// them would cost ITEMS registers.)
// For item k, the lanes holding the same digit find each other (`peers`): with one
// __match_any_sync (MATCH) or with BITS + 1 ballots (one per digit bit, one for "real key").
// The lowest peer reads the warp's counter of that digit and adds the group's size; every peer
// gets counter + (peers in lower lanes). The counters are private to the warp, so no atomics:
// __syncwarp orders one item's update before the next item's read.
template <int BITS, int ITEMS>
__device__ __forceinline__ unsigned item_digit(const unsigned (&key)[ITEMS], int k, int valid,
                                               int shift, int mode) {
    return striped_index<ITEMS>(k) < valid ? digit_of<BITS>(key[k], shift, mode) : (1u << BITS);
}

template <int BITS, int ITEMS, bool MATCH>
__device__ __forceinline__ void warp_rank(const unsigned (&key)[ITEMS], int valid, int shift,
                                          int mode, unsigned* cnt, unsigned (&within)[ITEMS]) {
    constexpr unsigned RADIX = 1u << BITS;
    const int lane = threadIdx.x & 31;
    const unsigned lt = lanemask_lt();
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const unsigned d = item_digit<BITS, ITEMS>(key, k, valid, shift, mode);
        unsigned peers;
        if (MATCH) {
            peers = __match_any_sync(FULL_MASK, d);
        } else {
            const unsigned real = __ballot_sync(FULL_MASK, d < RADIX);
            peers = d < RADIX ? real : ~real;
#pragma unroll
            for (int b = 0; b < BITS; ++b) {
                const unsigned bit = (d >> b) & 1u;
                const unsigned ones = __ballot_sync(FULL_MASK, bit);
                peers &= bit ? ones : ~ones;
            }
        }
        const int leader = __ffs(peers) - 1;
        unsigned base = 0;
        if (lane == leader && d < RADIX) {
            base = cnt[d];
            cnt[d] = base + __popc(peers);
        }
        base = __shfl_sync(FULL_MASK, base, leader);
        within[k] = base + __popc(peers & lt);
        __syncwarp();
    }
}

// After warp_rank over the whole tile cnt[w][d] is warp w's count of digit d. Turn it into the
// tile rank of warp w's first key of digit d (all keys of smaller digits, then digit d's keys in
// earlier warps), and fill total[] and start[]. Thread d walks the warps of digit d; the 2^BITS
// digit totals are scanned by the first warps. Every thread of the block calls it;
// THREADS >= 2^BITS. Ends with a barrier.
template <int BITS, int WARPS>
__device__ __forceinline__ void tile_offsets(unsigned* cnt, unsigned* total, unsigned* start,
                                             unsigned* warp_sums) {
    constexpr int RADIX = 1 << BITS, SCAN_WARPS = (RADIX + 31) / 32;
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    unsigned run = 0;
    if (t < RADIX) {
#pragma unroll 4
        for (int i = 0; i < WARPS; ++i) {
            const unsigned c = cnt[i * RADIX + t];
            cnt[i * RADIX + t] = run;
            run += c;
        }
        total[t] = run;
    }
    unsigned incl = 0;
    if (w < SCAN_WARPS) {
        incl = (unsigned)warp_inclusive_scan((int)(t < RADIX ? run : 0u));
        if (lane == 31) warp_sums[w] = incl;
    }
    __syncthreads();
    if (t < RADIX) {
        unsigned s = incl - run;
        for (int i = 0; i < w; ++i) s += warp_sums[i];
        start[t] = s;
#pragma unroll 4
        for (int i = 0; i < WARPS; ++i) cnt[i * RADIX + t] += s;
    }
    __syncthreads();
}

// Write the ranked tile: keys to shared memory at their tile rank (now in digit order), then
// out from shared memory in order, thread t taking ranks t, t + THREADS, ...: consecutive
// threads write consecutive addresses within a digit's run. Values follow the same path.
template <int THREADS, int ITEMS, bool PAIRS>
__device__ __forceinline__ void scatter_exchange(const unsigned (&key)[ITEMS],
                                                 const unsigned (&rank)[ITEMS], int valid,
                                                 int tile_start, int shift, int mode,
                                                 const int* gbase, unsigned* buf,
                                                 unsigned* __restrict__ kout,
                                                 const unsigned* __restrict__ vin,
                                                 unsigned* __restrict__ vout) {
    // Values are loaded here, in flight while the keys go out, unless that costs too many
    // registers (three arrays of ITEMS live at once); then after the keys.
    constexpr bool VALUES_FIRST = ITEMS <= 16;
    unsigned val[ITEMS];
    if (PAIRS && VALUES_FIRST) load_striped<ITEMS>(vin + tile_start, valid, val);
#pragma unroll
    for (int k = 0; k < ITEMS; ++k)
        if (striped_index<ITEMS>(k) < valid) buf[rank[k]] = key[k];
    __syncthreads();
    unsigned digs[(ITEMS + 3) / 4];  // the digits of the keys written, 4 to a register (PAIRS)
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const int i = k * THREADS + threadIdx.x;
        if ((k & 3) == 0) digs[k >> 2] = 0u;
        if (i < valid) {
            const unsigned x = buf[i], d = digit_of<8>(x, shift, mode);
            kout[gbase[d] + i] = x;
            digs[k >> 2] |= d << (8 * (k & 3));
        }
    }
    if (PAIRS) {
        if (!VALUES_FIRST) load_striped<ITEMS>(vin + tile_start, valid, val);
        __syncthreads();  // every key read out of buf
#pragma unroll
        for (int k = 0; k < ITEMS; ++k)
            if (striped_index<ITEMS>(k) < valid) buf[rank[k]] = val[k];
        __syncthreads();
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const int i = k * THREADS + threadIdx.x;
            if (i < valid) vout[gbase[(digs[k >> 2] >> (8 * (k & 3))) & 255u] + i] = buf[i];
        }
    }
}

// Exclusive scan of c[0..m) in place by one block of 1024 threads, 4096 entries a round with a
// running carry (v1: the 16 x tiles table, v2: the 256 x blocks table).
extern "C" __global__ void __launch_bounds__(1024) radix_scan_counts_v1(unsigned* __restrict__ c,
                                                                        int m) {
    __shared__ unsigned ws[32];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    unsigned carry = 0;
    for (int base = 0; base < m; base += 4096) {
        unsigned v[4], sum = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = base + 4 * t + j;
            v[j] = i < m ? c[i] : 0u;
            sum += v[j];
        }
        const unsigned incl = (unsigned)warp_inclusive_scan((int)sum);
        if (lane == 31) ws[w] = incl;
        __syncthreads();
        if (w == 0) ws[lane] = (unsigned)warp_inclusive_scan((int)ws[lane]);
        __syncthreads();
        unsigned run = carry + (w ? ws[w - 1] : 0u) + incl - sum;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int i = base + 4 * t + j;
            if (i < m) c[i] = run;
            run += v[j];
        }
        carry += ws[31];
        __syncthreads();  // ws is rewritten next round
    }
}

// ------------------------------------------------------------------------------------------
// v1: 4-bit digits, tiles of 256 x 4 keys; per pass radix_v1_count, radix_scan_counts_v1 over
// counts[d * tiles + tile], radix_v1_scatter.
// ------------------------------------------------------------------------------------------
#define V1_THREADS 256
#define V1_ITEMS 4

extern "C" __global__ void __launch_bounds__(V1_THREADS)
radix_v1_count(const unsigned* __restrict__ kin, int n, int shift, int mode,
               unsigned* __restrict__ counts, int tiles) {
    __shared__ unsigned h[16];
    const int t = threadIdx.x;
    if (t < 16) h[t] = 0u;
    __syncthreads();
    const int tile_start = blockIdx.x * V1_THREADS * V1_ITEMS;
#pragma unroll
    for (int k = 0; k < V1_ITEMS; ++k) {
        const int i = tile_start + k * V1_THREADS + t;
        if (i < n) atomicAdd(&h[digit_of<4>(kin[i], shift, mode)], 1u);
    }
    __syncthreads();
    if (t < 16) counts[t * tiles + blockIdx.x] = h[t];
}

template <bool PAIRS>
__device__ __forceinline__ void v1_scatter(const unsigned* __restrict__ kin, const unsigned* __restrict__ vin,
                                           unsigned* __restrict__ kout, unsigned* __restrict__ vout,
                                           int n, int shift, int mode,
                                           const unsigned* __restrict__ offsets, int tiles) {
    using S = TileShared<V1_THREADS, V1_ITEMS, 4>;
    __shared__ S s;
    const int t = threadIdx.x, warp = t >> 5, tile = blockIdx.x;
    const int tile_start = tile * S::TILE, valid = min(S::TILE, n - tile_start);
    for (int i = t; i < S::CNT; i += V1_THREADS) s.cnt[i] = 0u;
    unsigned key[V1_ITEMS], rank[V1_ITEMS];
    load_striped<V1_ITEMS>(kin + tile_start, valid, key);
    __syncthreads();
    warp_rank<4, V1_ITEMS, false>(key, valid, shift, mode, s.cnt + warp * 16, rank);
    __syncthreads();
    tile_offsets<4, S::WARPS>(s.cnt, s.total, s.start, s.warp_sums);
    if (t < 16) s.gbase[t] = (int)offsets[t * tiles + tile] - (int)s.start[t];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < V1_ITEMS; ++k) {
        const unsigned d = item_digit<4, V1_ITEMS>(key, k, valid, shift, mode);
        if (d < 16u) {
            const int p = s.gbase[d] + (int)(rank[k] + s.cnt[warp * 16 + d]);
            kout[p] = key[k];
            if (PAIRS) vout[p] = vin[tile_start + striped_index<V1_ITEMS>(k)];
        }
    }
}

#define V1_ARGS const unsigned* __restrict__ kin, const unsigned* __restrict__ vin,          \
    unsigned* __restrict__ kout, unsigned* __restrict__ vout, int n, int shift, int mode,      \
    const unsigned* __restrict__ offsets, int tiles
#define V1_PASS kin, vin, kout, vout, n, shift, mode, offsets, tiles

extern "C" __global__ void __launch_bounds__(V1_THREADS) radix_v1_scatter_keys(V1_ARGS) {
    v1_scatter<false>(V1_PASS);
}
extern "C" __global__ void __launch_bounds__(V1_THREADS) radix_v1_scatter_pairs(V1_ARGS) {
    v1_scatter<true>(V1_PASS);
}

// ------------------------------------------------------------------------------------------
// v2: reduce then scan, 8-bit digits. Block b owns tiles [b * per_block, (b + 1) * per_block).
// radix_v2_upsweep counts its keys' digits -> counts[d * blocks + b]; radix_scan_counts_v1 scans
// that table; radix_v2_downsweep walks its tiles in order with a running offset per digit.
// ------------------------------------------------------------------------------------------
#define V2_THREADS 512
#define V2_ITEMS 15

// Count the digits of keys [begin, end) into h (256 shared counters); begin is a multiple of 4
// and kin 16-byte aligned, so the body reads uint4s.
template <int THREADS>
__device__ __forceinline__ void count_range(const unsigned* __restrict__ kin, int begin, int end,
                                            int shift, int mode, unsigned* h) {
    const uint4* k4 = reinterpret_cast<const uint4*>(kin + begin);
    const int m4 = (end - begin) >> 2;
#pragma unroll 4
    for (int i = threadIdx.x; i < m4; i += THREADS) {
        const uint4 v = k4[i];
        atomicAdd(&h[digit_of<8>(v.x, shift, mode)], 1u);
        atomicAdd(&h[digit_of<8>(v.y, shift, mode)], 1u);
        atomicAdd(&h[digit_of<8>(v.z, shift, mode)], 1u);
        atomicAdd(&h[digit_of<8>(v.w, shift, mode)], 1u);
    }
    for (int i = begin + 4 * m4 + threadIdx.x; i < end; i += THREADS)
        atomicAdd(&h[digit_of<8>(kin[i], shift, mode)], 1u);
}

extern "C" __global__ void __launch_bounds__(V2_THREADS)
radix_v2_upsweep(const unsigned* __restrict__ kin, int n, int shift, int mode,
                 unsigned* __restrict__ counts, int per_block) {
    __shared__ unsigned h[256];
    const int t = threadIdx.x;
    if (t < 256) h[t] = 0u;
    __syncthreads();
    const long long span = (long long)per_block * (V2_THREADS * V2_ITEMS);
    const int begin = (int)(blockIdx.x * span);
    const int end = (int)min((long long)n, begin + span);
    count_range<V2_THREADS>(kin, begin, end, shift, mode, h);
    __syncthreads();
    if (t < 256) counts[t * gridDim.x + blockIdx.x] = h[t];
}

template <bool PAIRS>
__device__ __forceinline__ void v2_downsweep(const unsigned* __restrict__ kin, const unsigned* __restrict__ vin,
                                             unsigned* __restrict__ kout, unsigned* __restrict__ vout,
                                             int n, int shift, int mode,
                                             const unsigned* __restrict__ offsets, int per_block) {
    using S = TileShared<V2_THREADS, V2_ITEMS, 8>;
    __shared__ S s;
    const int t = threadIdx.x, warp = t >> 5;
    const int tiles = (n + S::TILE - 1) / S::TILE;
    const int first = blockIdx.x * per_block, last = min(tiles, first + per_block);
    if (t < 256) s.run[t] = offsets[t * gridDim.x + blockIdx.x];
    for (int tile = first; tile < last; ++tile) {
        const int tile_start = tile * S::TILE, valid = min(S::TILE, n - tile_start);
        for (int i = t; i < S::CNT; i += V2_THREADS) s.cnt[i] = 0u;
        unsigned key[V2_ITEMS], rank[V2_ITEMS];
        load_striped<V2_ITEMS>(kin + tile_start, valid, key);
        __syncthreads();
        warp_rank<8, V2_ITEMS, true>(key, valid, shift, mode, s.cnt + warp * 256, rank);
        __syncthreads();
        tile_offsets<8, S::WARPS>(s.cnt, s.total, s.start, s.warp_sums);
        if (t < 256) {
            s.gbase[t] = (int)s.run[t] - (int)s.start[t];
            s.run[t] += s.total[t];
        }
#pragma unroll
        for (int k = 0; k < V2_ITEMS; ++k) {
            const unsigned d = item_digit<8, V2_ITEMS>(key, k, valid, shift, mode);
            if (d < 256u) rank[k] += s.cnt[warp * 256 + d];
        }
        __syncthreads();  // cnt read, gbase written: buf (over cnt) may be filled
        scatter_exchange<V2_THREADS, V2_ITEMS, PAIRS>(key, rank, valid, tile_start, shift, mode,
                                                      s.gbase, s.buf, kout, vin, vout);
        __syncthreads();  // buf read out before the next tile clears cnt
    }
}

#define V2_ARGS const unsigned* __restrict__ kin, const unsigned* __restrict__ vin,          \
    unsigned* __restrict__ kout, unsigned* __restrict__ vout, int n, int shift, int mode,      \
    const unsigned* __restrict__ offsets, int per_block
#define V2_PASS kin, vin, kout, vout, n, shift, mode, offsets, per_block

extern "C" __global__ void __launch_bounds__(V2_THREADS, 2) radix_v2_downsweep_keys(V2_ARGS) {
    v2_downsweep<false>(V2_PASS);
}
extern "C" __global__ void __launch_bounds__(V2_THREADS, 2) radix_v2_downsweep_pairs(V2_ARGS) {
    v2_downsweep<true>(V2_PASS);
}

// ------------------------------------------------------------------------------------------
// v3 and v4: onesweep.
// radix_v3_histogram: all four 8-bit digit histograms in one read of the keys -> hist[4][256]
// radix_v3_scan:      their exclusive scans -> starts[4][256] (where each digit's keys begin)
// then per pass p one radix_v3_pass / radix_v4_* kernel, a block per tile.
// ------------------------------------------------------------------------------------------
#define HIST_THREADS 512

__device__ __forceinline__ void add_digits(unsigned* h, unsigned raw, int mode) {
    const unsigned b = key_bits(raw, mode);
    atomicAdd(h + (b & 255u), 1u);
    atomicAdd(h + 256 + ((b >> 8) & 255u), 1u);
    atomicAdd(h + 512 + ((b >> 16) & 255u), 1u);
    atomicAdd(h + 768 + (b >> 24), 1u);
}

extern "C" __global__ void __launch_bounds__(HIST_THREADS)
radix_v3_histogram(const unsigned* __restrict__ kin, int n, int mode, unsigned* __restrict__ hist) {
    __shared__ unsigned h[4 * 256];
    const int t = threadIdx.x;
    for (int i = t; i < 1024; i += HIST_THREADS) h[i] = 0u;
    __syncthreads();
    const uint4* k4 = reinterpret_cast<const uint4*>(kin);
    const int n4 = n >> 2, stride = gridDim.x * HIST_THREADS;
#pragma unroll 4
    for (int i = blockIdx.x * HIST_THREADS + t; i < n4; i += stride) {
        const uint4 v = k4[i];
        add_digits(h, v.x, mode);
        add_digits(h, v.y, mode);
        add_digits(h, v.z, mode);
        add_digits(h, v.w, mode);
    }
    for (int i = 4 * n4 + blockIdx.x * HIST_THREADS + t; i < n; i += stride) add_digits(h, kin[i], mode);
    __syncthreads();
    for (int i = t; i < 1024; i += HIST_THREADS)
        if (h[i]) atomicAdd(hist + i, h[i]);
}

// One block of 1024 threads: thread t scans digit t & 255 of pass t >> 8 (8 warps a pass).
extern "C" __global__ void __launch_bounds__(1024)
radix_v3_scan(const unsigned* __restrict__ hist, unsigned* __restrict__ starts) {
    __shared__ unsigned ws[32];
    const int t = threadIdx.x, lane = t & 31, w = t >> 5;
    const unsigned v = hist[t];
    const unsigned incl = (unsigned)warp_inclusive_scan((int)v);
    if (lane == 31) ws[w] = incl;
    __syncthreads();
    unsigned before = 0;
    for (int i = w & ~7; i < w; ++i) before += ws[i];
    starts[t] = before + incl - v;
}

// The look-back's status words: status[tile * 256 + d] = flag << 30 | count, one 32-bit word,
// so a reader that sees a flag sees its count (one store publishes both: no fence between
// them). X (0): nothing yet; A (1): the tile's own count of digit d; P (2): the inclusive
// prefix, the count of digit d in tiles 0..tile. Counts are < 2^30 (n < 2^30). The words of
// a pass start at zero: the driver clears pass 0's, pass p clears pass p + 1's (its own tile's
// row of the other buffer, which pass p - 1 used and has finished with).
#define FLAG_A 1u
#define FLAG_P 2u
#define COUNT_MASK 0x3fffffffu
// A wait this long (~1 s with the back-off) is a tile that will never publish: a bug. Trap,
// so the host sees an error instead of a hung GPU.
#define SPIN_LIMIT (1u << 24)

// Relaxed device-scope accesses: one indivisible 32-bit load/store served by L2 (never a stale
// L1 line). Nothing else is ordered by them, and nothing else needs to be: the count travels in
// the same word as its flag.
__device__ __forceinline__ unsigned ld_relaxed(const unsigned* p) {
    unsigned v;
    asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void st_relaxed(unsigned* p, unsigned v) {
    asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Digit d's count in tiles 0..tile-1, walking back one tile at a time: add A counts until a P
// (an inclusive prefix that already holds everything before it). Tile 0 always publishes P,
// so the walk ends. Every earlier tile was taken by a block that is already running.
__device__ __forceinline__ unsigned look_back(const unsigned* status, int tile, int d) {
    unsigned prefix = 0;
    for (int p = tile - 1; p >= 0; --p) {
        unsigned w, spins = 0;
        while (((w = ld_relaxed(status + p * 256 + d)) >> 30) == 0u) {
            if (++spins == SPIN_LIMIT) __trap();
            if (spins > 8) __nanosleep(64);
        }
        prefix += w & COUNT_MASK;
        if ((w >> 30) == FLAG_P) break;
    }
    return prefix;
}

template <int THREADS, int ITEMS, bool MATCH, bool EARLY, bool PAIRS>
__device__ __forceinline__ void onesweep_pass(const unsigned* __restrict__ kin, const unsigned* __restrict__ vin,
                                              unsigned* __restrict__ kout, unsigned* __restrict__ vout,
                                              int n, int shift, int mode,
                                              const unsigned* __restrict__ starts,
                                              unsigned* __restrict__ counter,
                                              unsigned* __restrict__ status,
                                              unsigned* __restrict__ status_next) {
    static_assert(THREADS >= 256 && THREADS % 32 == 0, "a thread per digit");
    using S = TileShared<THREADS, ITEMS, 8>;
    __shared__ S s;
    const int t = threadIdx.x, warp = t >> 5;
    // Tiles in the order blocks start, not blockIdx.x: every lower tile is already running.
    if (t == 0) s.tile = (int)atomicAdd(counter, 1u);
    for (int i = t; i < S::CNT; i += THREADS) s.cnt[i] = 0u;
    if (EARLY && t < 256) s.hist[t] = 0u;
    __syncthreads();
    const int tile = s.tile;
    const int tile_start = tile * S::TILE, valid = min(S::TILE, n - tile_start);
    if (status_next != nullptr && t < 256) status_next[tile * 256 + t] = 0u;

    unsigned key[ITEMS], rank[ITEMS];
    load_striped<ITEMS>(kin + tile_start, valid, key);

    if (EARLY) {  // count and publish first: the tiles behind wait less
#pragma unroll
        for (int k = 0; k < ITEMS; ++k) {
            const unsigned d = item_digit<8, ITEMS>(key, k, valid, shift, mode);
            if (d < 256u) atomicAdd(&s.hist[d], 1u);
        }
        __syncthreads();
        if (t < 256) st_relaxed(status + tile * 256 + t, ((tile == 0 ? FLAG_P : FLAG_A) << 30) | s.hist[t]);
    }
    warp_rank<8, ITEMS, MATCH>(key, valid, shift, mode, s.cnt + warp * 256, rank);
    __syncthreads();
    tile_offsets<8, S::WARPS>(s.cnt, s.total, s.start, s.warp_sums);
    if (t < 256) {
        const unsigned total = s.total[t];
        if (!EARLY) st_relaxed(status + tile * 256 + t, ((tile == 0 ? FLAG_P : FLAG_A) << 30) | total);
        const unsigned prefix = look_back(status, tile, t);
        if (tile > 0) st_relaxed(status + tile * 256 + t, (FLAG_P << 30) | (prefix + total));
        s.gbase[t] = (int)(starts[t] + prefix) - (int)s.start[t];
    }
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
        const unsigned d = item_digit<8, ITEMS>(key, k, valid, shift, mode);
        if (d < 256u) rank[k] += s.cnt[warp * 256 + d];
    }
    __syncthreads();  // cnt read, gbase written: buf (over cnt) may be filled
    scatter_exchange<THREADS, ITEMS, PAIRS>(key, rank, valid, tile_start, shift, mode, s.gbase,
                                            s.buf, kout, vin, vout);
}

#define PASS_ARGS const unsigned* __restrict__ kin, const unsigned* __restrict__ vin,        \
    unsigned* __restrict__ kout, unsigned* __restrict__ vout, int n, int shift, int mode,      \
    const unsigned* __restrict__ starts, unsigned* __restrict__ counter,                     \
    unsigned* __restrict__ status, unsigned* __restrict__ status_next
#define PASS_PASS kin, vin, kout, vout, n, shift, mode, starts, counter, status, status_next
// At least 1024 threads an SM resident (<= 64 registers a thread): enough loads in flight
// while other blocks rank or wait on their look-back.
#define MIN_BLOCKS(T) ((1024 / (T)) > 0 ? (1024 / (T)) : 1)

// v3: 512 threads x 15 keys, ranking by __match_any_sync, counts published after the ranking.
extern "C" __global__ void __launch_bounds__(512, 2) radix_v3_pass_keys(PASS_ARGS) {
    onesweep_pass<512, 15, true, false, false>(PASS_PASS);
}
extern "C" __global__ void __launch_bounds__(512, 2) radix_v3_pass_pairs(PASS_ARGS) {
    onesweep_pass<512, 15, true, false, true>(PASS_PASS);
}

// v4: early counts; shape and ranking as instantiated here (driver.V4 picks one).
#define V4_PASS(T, I, M, TAG)                                                                   \
    extern "C" __global__ void __launch_bounds__(T, MIN_BLOCKS(T))                              \
        radix_v4_t##T##_i##I##_##TAG##_keys(PASS_ARGS) {                                        \
        onesweep_pass<T, I, M, true, false>(PASS_PASS);                                         \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(T, MIN_BLOCKS(T))                              \
        radix_v4_t##T##_i##I##_##TAG##_pairs(PASS_ARGS) {                                       \
        onesweep_pass<T, I, M, true, true>(PASS_PASS);                                          \
    }

V4_PASS(512, 15, true, m)
V4_PASS(512, 15, false, b)
V4_PASS(512, 19, true, m)
V4_PASS(384, 19, true, m)
V4_PASS(256, 19, true, m)
V4_PASS(1024, 8, true, m)
// after the first sweep (ballots won at 512 x 15): ballot ranking at other shapes
V4_PASS(512, 19, false, b)
V4_PASS(384, 19, false, b)
V4_PASS(256, 19, false, b)
V4_PASS(512, 12, false, b)
V4_PASS(256, 15, false, b)
