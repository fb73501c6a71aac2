// Day 17: prefix sums (scans) of int32.
//
//   inclusive:  y[i] = x[0] + x[1] + ... + x[i]
//   exclusive:  y[i] = x[0] + ... + x[i-1]          (y[0] = 0)
//
// Integer addition modulo 2^32 (two's complement wrap-around) is associative, so every
// algorithm below gives bit-identical results; the kernels compute in `unsigned` so that the
// wrap-around is defined behaviour in C++ (signed overflow is not).
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 17
//
// Versions (every one takes `exclusive` = 0 or 1, and any length n >= 1):
//   v1  Hillis-Steele inside a block of 512 (log2(512) = 9 steps, every element added at
//       every step: O(n log n) adds, double-buffered shared memory), then scan-then-
//       propagate: the block totals are scanned by the same kernel (recursively) and a
//       third kernel adds each block's offset. Traffic ~16n bytes (y is written, then read
//       and written again by the add pass)
//   v2  Blelloch work-efficient scan inside a block of 1024 elements (512 threads x 2):
//       up-sweep builds a reduction tree in place, down-sweep turns it into an exclusive
//       scan: O(n) adds. One padding word every 32 keeps the tree free of bank conflicts.
//       Same scan-then-propagate driver as v1 (~16n bytes)
//   v3  reduce-then-scan in three phases over G segments (G = one wave of blocks):
//       (1) each block sums its segment, (2) one block scans the G sums, (3) each block scans
//       its segment tile by tile with warp shuffles, starting from its segment's offset.
//       x is read twice, y written once: ~12n bytes
//   v4  single pass with decoupled look-back (Merrill & Garland, 2016). Tiles of 8192 get
//       their index from an atomic counter (so every lower tile is already running: no
//       deadlock). A tile publishes its aggregate, then warp 0 looks back over its
//       predecessors' status words (aggregate or inclusive prefix), 32 at a time, until it
//       meets an inclusive prefix, publishes its own inclusive prefix, and writes. x read
//       once, y written once: 8n bytes, the minimum. The status words are zeroed by a memset
//       before each launch
//   v5  v4's algorithm in lighter blocks (tiles of 3072: 128 threads x 24 ints), so many
//       tiles are in flight on every SM; the whole block looks back (each warp reads 32
//       predecessors, 128 per round trip); status words carry a launch number (epoch), so
//       no memset is needed between launches
//
// Templates: v3-v5 share the tile code (load, scan in registers, store), parameterized by
// warps per block and chunks of 128 ints per warp; v5 is a template too, so that
// .notes/day17_scan_sweep.py can build and time other tile shapes from this file.
#include <cstdint>

__device__ __forceinline__ unsigned warp_inclusive_scan(unsigned v) {
    const unsigned lane = threadIdx.x & 31;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const unsigned t = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= (unsigned)o) v += t;
    }
    return v;
}

__device__ __forceinline__ unsigned warp_sum(unsigned v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  // in every lane
}

// ---------------------------------------------------------------------------------------
// v1: Hillis-Steele. At step k every element adds the one 2^k to its left. Reading and
// writing the same array in one step would race (a thread could read a value another thread
// already updated), so two buffers alternate. The kernel may run in place (x == y): a block
// reads only its own elements, before it writes them.
// ---------------------------------------------------------------------------------------
#define V1_THREADS 512

extern "C" __global__ void __launch_bounds__(V1_THREADS)
scan_v1_block(const unsigned* x, unsigned* y, unsigned* block_sums, long long n, int exclusive) {
    __shared__ unsigned buf[2][V1_THREADS];
    const int tid = threadIdx.x;
    const long long i = (long long)blockIdx.x * V1_THREADS + tid;
    const unsigned v = i < n ? x[i] : 0u;
    buf[0][tid] = v;
    __syncthreads();
    int src = 0;
#pragma unroll
    for (int offset = 1; offset < V1_THREADS; offset <<= 1) {
        unsigned s = buf[src][tid];
        if (tid >= offset) s += buf[src][tid - offset];
        buf[src ^ 1][tid] = s;
        src ^= 1;
        __syncthreads();
    }
    const unsigned incl = buf[src][tid];
    if (i < n) y[i] = exclusive ? incl - v : incl;
    if (tid == V1_THREADS - 1) block_sums[blockIdx.x] = incl;  // the block's total
}

// Scan-then-propagate, last step: block b (b >= 1) adds the inclusive scan of the block
// totals up to block b-1. Launched with one block per data block except the first.
__device__ __forceinline__ void add_block_offsets(unsigned* y, const unsigned* scanned_sums,
                                                  long long n, int per_block) {
    const long long b = (long long)blockIdx.x + 1;
    const unsigned off = scanned_sums[b - 1];
    for (int j = threadIdx.x; j < per_block; j += blockDim.x) {
        const long long i = b * per_block + j;
        if (i < n) y[i] += off;
    }
}

extern "C" __global__ void scan_v1_add(unsigned* y, const unsigned* scanned_sums, long long n,
                                       int per_block) {
    add_block_offsets(y, scanned_sums, n, per_block);
}

// ---------------------------------------------------------------------------------------
// v2: Blelloch. A block scans 1024 elements with 512 threads. Up-sweep: 10 levels of a
// binary tree built in place (at the end the last word holds the block total). Down-sweep:
// clear the root, then at each level a node passes its value to its left child and
// left + right to its right child: an exclusive scan, n - 1 adds each way. The tree's
// strided indices would collide on banks (at stride 32 every access hits one bank), so
// word i is stored at i + i / 32.
// ---------------------------------------------------------------------------------------
#define V2_THREADS 512
#define V2_ELEMS (2 * V2_THREADS)
#define V2_PAD(i) ((i) + ((i) >> 5))

extern "C" __global__ void __launch_bounds__(V2_THREADS)
scan_v2_block(const unsigned* x, unsigned* y, unsigned* block_sums, long long n, int exclusive) {
    __shared__ unsigned s[V2_ELEMS + V2_ELEMS / 32];
    const int tid = threadIdx.x;
    const long long base = (long long)blockIdx.x * V2_ELEMS;
    const int ia = tid, ib = tid + V2_THREADS;  // two coalesced loads per thread
    const unsigned va = base + ia < n ? x[base + ia] : 0u;
    const unsigned vb = base + ib < n ? x[base + ib] : 0u;
    s[V2_PAD(ia)] = va;
    s[V2_PAD(ib)] = vb;

    int offset = 1;
#pragma unroll
    for (int d = V2_ELEMS / 2; d > 0; d >>= 1) {  // up-sweep
        __syncthreads();
        if (tid < d) {
            const int a = offset * (2 * tid + 1) - 1, b = offset * (2 * tid + 2) - 1;
            s[V2_PAD(b)] += s[V2_PAD(a)];
        }
        offset <<= 1;
    }
    if (tid == 0) {  // thread 0 wrote the root in the last up-sweep step itself
        block_sums[blockIdx.x] = s[V2_PAD(V2_ELEMS - 1)];
        s[V2_PAD(V2_ELEMS - 1)] = 0;
    }
#pragma unroll
    for (int d = 1; d < V2_ELEMS; d <<= 1) {  // down-sweep
        offset >>= 1;
        __syncthreads();
        if (tid < d) {
            const int a = offset * (2 * tid + 1) - 1, b = offset * (2 * tid + 2) - 1;
            const unsigned t = s[V2_PAD(a)];
            s[V2_PAD(a)] = s[V2_PAD(b)];
            s[V2_PAD(b)] += t;
        }
    }
    __syncthreads();
    const unsigned ea = s[V2_PAD(ia)], eb = s[V2_PAD(ib)];  // exclusive scan
    if (base + ia < n) y[base + ia] = exclusive ? ea : ea + va;
    if (base + ib < n) y[base + ib] = exclusive ? eb : eb + vb;
}

extern "C" __global__ void scan_v2_add(unsigned* y, const unsigned* scanned_sums, long long n,
                                       int per_block) {
    add_block_offsets(y, scanned_sums, n, per_block);
}

// ---------------------------------------------------------------------------------------
// Tiles for v3-v5: a block of WARPS warps scans a tile of WARPS x CH x 128 ints. Each warp
// owns CH x 128 consecutive ints as CH chunks of 128; in chunk j, lane l holds ints
// [4l, 4l + 4) as one uint4, so every load and store instruction of a warp covers 512
// contiguous bytes (coalesced, 16 B per thread). Scanning a chunk: each lane scans its 4 ints
// in registers, a warp shuffle scan of the 32 lane totals gives each lane what precedes it,
// and the chunk total carries to the next chunk. v3 and v4: 8 warps x 8 chunks = 8192 ints.
// STREAM: loads and stores with the evict-first (streaming) hint, or plain ones.
// ---------------------------------------------------------------------------------------
#define T_THREADS 256
#define T_WARPS (T_THREADS / 32)
#define CHUNKS 8
#define TILE (T_WARPS * CHUNKS * 128)  // 8192

template <int WARPS, int CH, bool STREAM>
__device__ __forceinline__ void load_tile(const unsigned* __restrict__ x, long long tile_base,
                                          long long n, uint4 (&v)[CH]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < CH; ++j) {
        const long long e = tile_base + warp * (CH * 128) + j * 128 + lane * 4;
        if (e + 3 < n) {
            const uint4* p = reinterpret_cast<const uint4*>(x + e);  // 16-byte aligned: e % 4 == 0
            if constexpr (STREAM) v[j] = __ldcs(p);
            else v[j] = *p;
        } else {
            v[j].x = e < n ? x[e] : 0u;
            v[j].y = e + 1 < n ? x[e + 1] : 0u;
            v[j].z = e + 2 < n ? x[e + 2] : 0u;
            v[j].w = 0u;  // e + 3 >= n here
        }
    }
}

template <int WARPS, int CH, bool STREAM>
__device__ __forceinline__ void store_tile(unsigned* __restrict__ y, long long tile_base,
                                           long long n, const uint4 (&v)[CH], unsigned add) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int j = 0; j < CH; ++j) {
        const long long e = tile_base + warp * (CH * 128) + j * 128 + lane * 4;
        const uint4 o = make_uint4(v[j].x + add, v[j].y + add, v[j].z + add, v[j].w + add);
        if (e + 3 < n) {
            uint4* p = reinterpret_cast<uint4*>(y + e);
            if constexpr (STREAM) __stcs(p, o);  // streaming: y is not read back
            else *p = o;
        } else {
            if (e < n) y[e] = o.x;
            if (e + 1 < n) y[e + 1] = o.y;
            if (e + 2 < n) y[e + 2] = o.z;
        }
    }
}

// Scan a tile held in registers, in place, relative to the start of the tile. On return
// v holds the inclusive (or exclusive) scan minus what precedes the thread's warp,
// *warp_offset what precedes the warp inside the tile, and the tile's total is returned.
// warp_tot: WARPS words of shared memory, not written again until after the next barrier.
template <int WARPS, int CH>
__device__ __forceinline__ unsigned scan_tile(uint4 (&v)[CH], bool exclusive, unsigned* warp_tot,
                                              unsigned* warp_offset) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned running = 0;  // sum of the warp's earlier chunks
#pragma unroll
    for (int j = 0; j < CH; ++j) {
        const unsigned a = v[j].x, b = a + v[j].y, c = b + v[j].z, d = c + v[j].w;
        const unsigned incl = warp_inclusive_scan(d);
        const unsigned before = running + incl - d;  // this warp's ints before my four
        running += __shfl_sync(0xffffffffu, incl, 31);
        v[j] = exclusive ? make_uint4(before, before + a, before + b, before + c)
                         : make_uint4(before + a, before + b, before + c, before + d);
    }
    if (lane == 0) warp_tot[warp] = running;
    __syncthreads();
    unsigned off = 0, total = 0;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
        const unsigned t = warp_tot[w];
        off += w < warp ? t : 0u;
        total += t;
    }
    *warp_offset = off;
    return total;
}

// ---------------------------------------------------------------------------------------
// v3 phase 1: block b sums the tiles [b * tiles_per_seg, (b + 1) * tiles_per_seg).
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ long long num_tiles(long long n) { return (n + TILE - 1) / TILE; }

extern "C" __global__ void __launch_bounds__(T_THREADS)
scan_v3_reduce(const unsigned* __restrict__ x, unsigned* __restrict__ seg_sums, long long n,
               int tiles_per_seg) {
    __shared__ unsigned warp_tot[T_WARPS];
    const long long t0 = (long long)blockIdx.x * tiles_per_seg;
    const long long t1 = min(t0 + tiles_per_seg, num_tiles(n));
    unsigned s = 0;
    for (long long t = t0; t < t1; ++t) {
        uint4 v[CHUNKS];
        load_tile<T_WARPS, CHUNKS, true>(x, t * TILE, n, v);
#pragma unroll
        for (int j = 0; j < CHUNKS; ++j) s += (v[j].x + v[j].y) + (v[j].z + v[j].w);
    }
    s = warp_sum(s);
    if ((threadIdx.x & 31) == 0) warp_tot[threadIdx.x >> 5] = s;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned total = 0;
        for (int w = 0; w < T_WARPS; ++w) total += warp_tot[w];
        seg_sums[blockIdx.x] = total;
    }
}

// v3 phase 2: one block of 1024 threads turns the g <= 1024 segment sums into exclusive
// offsets, in place.
extern "C" __global__ void __launch_bounds__(1024) scan_v3_partials(unsigned* sums, int g) {
    __shared__ unsigned warp_tot[32];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const unsigned v = (int)threadIdx.x < g ? sums[threadIdx.x] : 0u;
    const unsigned incl = warp_inclusive_scan(v);
    if (lane == 31) warp_tot[warp] = incl;
    __syncthreads();
    if (warp == 0) warp_tot[lane] = warp_inclusive_scan(warp_tot[lane]);
    __syncthreads();
    const unsigned before = warp ? warp_tot[warp - 1] : 0u;
    if ((int)threadIdx.x < g) sums[threadIdx.x] = before + incl - v;
}

// v3 phase 3: scan the segment tile by tile, carrying the running total from tile to tile.
// warp_tot alternates between two buffers, so one barrier per tile is enough.
extern "C" __global__ void __launch_bounds__(T_THREADS)
scan_v3_downsweep(const unsigned* __restrict__ x, unsigned* __restrict__ y,
                  const unsigned* __restrict__ seg_offsets, long long n, int tiles_per_seg,
                  int exclusive) {
    __shared__ unsigned warp_tot[2][T_WARPS];
    const long long t0 = (long long)blockIdx.x * tiles_per_seg;
    const long long t1 = min(t0 + tiles_per_seg, num_tiles(n));
    unsigned carry = seg_offsets[blockIdx.x];
    for (long long t = t0; t < t1; ++t) {
        uint4 v[CHUNKS];
        load_tile<T_WARPS, CHUNKS, true>(x, t * TILE, n, v);
        unsigned warp_offset;
        const unsigned total = scan_tile<T_WARPS, CHUNKS>(v, exclusive != 0, warp_tot[t & 1], &warp_offset);
        store_tile<T_WARPS, CHUNKS, true>(y, t * TILE, n, v, carry + warp_offset);
        carry += total;
    }
}

// ---------------------------------------------------------------------------------------
// v4: decoupled look-back. Each tile has a 64-bit status word: flag in the high half,
// value in the low half, so flag and value are published together by one store and no
// reader can see a flag without its value (no fence needed between them).
//   X (0): nothing yet    A (1): value = the tile's aggregate (its own total)
//   P (2): value = the tile's inclusive prefix (everything up to and including the tile)
// The status words and the tile counter are zeroed by the driver before each launch.
// ---------------------------------------------------------------------------------------
#define FLAG_X 0ull
#define FLAG_A 1ull
#define FLAG_P 2ull

__device__ __forceinline__ unsigned long long pack_status(unsigned long long flag, unsigned value) {
    return (flag << 32) | value;
}

// Relaxed, device-scope 64-bit accesses: one indivisible load/store that reads/writes L2
// (never a stale L1 line), with no ordering cost beyond that.
__device__ __forceinline__ unsigned long long load_status(const unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
}

__device__ __forceinline__ void store_status(unsigned long long* p, unsigned long long v) {
    asm volatile("st.relaxed.gpu.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// Run by warp 0 of tile `tile` (> 0) once its aggregate is published: walk back over the
// predecessors 32 at a time (lane k looks at tile pred - k). Wait until none of the 32 is X;
// if one of them is P, the sum of the values up to and including the nearest P is the
// exclusive prefix (plus what earlier windows gathered); otherwise add all 32 aggregates
// and move the window back.
__device__ __forceinline__ unsigned look_back(const unsigned long long* status, long long tile) {
    const int lane = threadIdx.x & 31;
    unsigned prefix = 0;
    long long pred = tile - 1;
    while (true) {
        const long long idx = pred - lane;
        unsigned long long st;
        do {
            st = idx >= 0 ? load_status(status + idx) : pack_status(FLAG_P, 0u);
        } while (__any_sync(0xffffffffu, (st >> 32) == FLAG_X));
        const unsigned p_lanes = __ballot_sync(0xffffffffu, (st >> 32) == FLAG_P);
        unsigned value = (unsigned)st;
        if (p_lanes) {
            const int nearest = __ffs(p_lanes) - 1;
            if (lane > nearest) value = 0;  // tiles before the nearest P are inside its prefix
            return prefix + warp_sum(value);
        }
        prefix += warp_sum(value);
        pred -= 32;
    }
}

extern "C" __global__ void __launch_bounds__(T_THREADS)
scan_v4(const unsigned* __restrict__ x, unsigned* __restrict__ y,
        unsigned long long* __restrict__ status, unsigned* __restrict__ tile_counter,
        long long n, int exclusive) {
    __shared__ unsigned s_tile, s_prefix;
    __shared__ unsigned warp_tot[T_WARPS];
    // Tiles in the order blocks start, not blockIdx.x: every lower tile is already running,
    // so the look-back below never waits on a block that has not been scheduled.
    if (threadIdx.x == 0) s_tile = atomicAdd(tile_counter, 1u);
    __syncthreads();
    const long long tile = s_tile;

    uint4 v[CHUNKS];
    load_tile<T_WARPS, CHUNKS, true>(x, tile * TILE, n, v);
    unsigned warp_offset;
    const unsigned total = scan_tile<T_WARPS, CHUNKS>(v, exclusive != 0, warp_tot, &warp_offset);

    if (threadIdx.x < 32) {
        unsigned prefix = 0;
        if (tile == 0) {
            if (threadIdx.x == 0) store_status(status, pack_status(FLAG_P, total));
        } else {
            if (threadIdx.x == 0) store_status(status + tile, pack_status(FLAG_A, total));
            prefix = look_back(status, tile);
            if (threadIdx.x == 0) store_status(status + tile, pack_status(FLAG_P, prefix + total));
        }
        if (threadIdx.x == 0) s_prefix = prefix;
    }
    __syncthreads();
    store_tile<T_WARPS, CHUNKS, true>(y, tile * TILE, n, v, s_prefix + warp_offset);
}

// ---------------------------------------------------------------------------------------
// v5: status words that need no reset, and a look-back by the whole block.
//
// A status word is (epoch << 34) | (flag << 32) | value: the high half carries the launch's
// number (the driver counts launches, 1 .. 2^30 - 1) beside the flag, so a word written by
// an earlier launch reads as X and the status words are never cleared (no memset launch).
// The tile counter is reset the same way without a launch: launch e takes tickets from
// counters[e & 1], and one thread of it zeroes counters[(e + 1) & 1] for launch e + 1 (the
// launch before e used that counter and has finished: launches on one stream run in order).
// Flag and value still travel in one 64-bit store and one 64-bit load (st/ld.relaxed.gpu,
// above), so a reader that sees a flag sees its value.
// ---------------------------------------------------------------------------------------
#define LB_X 0u
#define LB_A 1u
#define LB_P 2u
// A look-back that has seen an unpublished predecessor this many times in a row is waiting
// for a tile that will never come: a bug. Trap (an error the host sees) instead of hanging.
#define LB_SPIN_LIMIT (1u << 22)

__device__ __forceinline__ unsigned long long lb_pack(unsigned epoch, unsigned flag, unsigned value) {
    return ((unsigned long long)((epoch << 2) | flag) << 32) | value;
}

__device__ __forceinline__ unsigned lb_flag(unsigned long long st, unsigned epoch) {
    const unsigned hi = (unsigned)(st >> 32);
    return (hi >> 2) == epoch ? (hi & 3u) : LB_X;  // another launch's word: nothing yet
}

// The exclusive prefix of tile `tile` (> 0), in every thread of the block; call it from all
// of them. Warp w reads the status words of tiles newest - 32w - lane (newest = tile - 1 in
// the first round), so one round trip to L2 sees WARPS * 32 predecessors. A warp waits until
// none of its 32 is X; then it sums the values of its lanes up to and including its nearest
// P (all 32 if it has none). The nearest warp with a P ends the walk: the prefix is the sum
// of that warp's part and every nearer warp's 32 aggregates. Without a P anywhere, all the
// aggregates are added and the next round starts WARPS * 32 tiles further back.
// lb_sum, lb_found: WARPS words of shared memory each.
template <int WARPS>
__device__ __forceinline__ unsigned block_look_back(const unsigned long long* status, long long tile,
                                                    unsigned epoch, unsigned retry_ns,
                                                    unsigned* lb_sum, int* lb_found) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    unsigned prefix = 0;
    long long newest = tile - 1;
    for (;;) {
        const long long idx = newest - 32 * warp - lane;
        unsigned flag, value;
        for (unsigned spins = 0;; ++spins) {
            if (idx >= 0) {
                const unsigned long long st = load_status(status + idx);
                flag = lb_flag(st, epoch);
                value = (unsigned)st;
            } else {  // before tile 0: an inclusive prefix of nothing
                flag = LB_P;
                value = 0u;
            }
            if (!__any_sync(0xffffffffu, flag == LB_X)) break;
            if (spins == LB_SPIN_LIMIT) __trap();
            if (retry_ns) __nanosleep(retry_ns);
        }
        const unsigned p_lanes = __ballot_sync(0xffffffffu, flag == LB_P);
        if (p_lanes && lane > __ffs(p_lanes) - 1) value = 0u;  // inside the nearest P's prefix
        value = warp_sum(value);
        if (lane == 0) {
            lb_sum[warp] = value;
            lb_found[warp] = p_lanes != 0u;
        }
        __syncthreads();
        bool found = false;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) {
            if (!found) {
                prefix += lb_sum[w];
                found = lb_found[w] != 0;
            }
        }
        __syncthreads();  // lb_* are rewritten by the next round (or the next tile's walk)
        if (found) return prefix;
        newest -= 32 * WARPS;
    }
}

// Publish (A, total), find the exclusive prefix, publish (P, prefix + total); every thread
// gets the prefix. Tile 0 publishes P at once.
template <int WARPS>
__device__ __forceinline__ unsigned publish_and_look_back(unsigned long long* status, unsigned tile,
                                                          unsigned total, unsigned epoch,
                                                          unsigned first_ns, unsigned retry_ns,
                                                          unsigned* lb_sum, int* lb_found) {
    if (tile == 0) {
        if (threadIdx.x == 0) store_status(status, lb_pack(epoch, LB_P, total));
        return 0u;
    }
    if (threadIdx.x == 0) store_status(status + tile, lb_pack(epoch, LB_A, total));
    if (first_ns) __nanosleep(first_ns);  // give the predecessors time to publish
    const unsigned prefix = block_look_back<WARPS>(status, tile, epoch, retry_ns, lb_sum, lb_found);
    if (threadIdx.x == 0) store_status(status + tile, lb_pack(epoch, LB_P, prefix + total));
    return prefix;
}

// ---------------------------------------------------------------------------------------
// v5: one tile per block, as v4, in lighter blocks: more tiles in flight per SM, and each
// block's wait on its look-back hidden by the other blocks of its SM.
// Launch: grid = number of tiles, WARPS * 32 threads.
// ---------------------------------------------------------------------------------------
template <int WARPS, int CH, bool STREAM>
__device__ __forceinline__ void scan_v5_body(const unsigned* __restrict__ x, unsigned* __restrict__ y,
                                             unsigned long long* __restrict__ status,
                                             unsigned* __restrict__ counters, long long n,
                                             int exclusive, unsigned epoch, unsigned first_ns,
                                             unsigned retry_ns) {
    constexpr int TILE_N = WARPS * CH * 128;
    __shared__ unsigned s_tile;
    __shared__ unsigned warp_tot[WARPS], lb_sum[WARPS];
    __shared__ int lb_found[WARPS];
    if (threadIdx.x == 0) {
        s_tile = atomicAdd(counters + (epoch & 1u), 1u);  // tiles in the order blocks start
        if (blockIdx.x == 0) counters[(epoch & 1u) ^ 1u] = 0u;  // the next launch's counter
    }
    __syncthreads();
    const unsigned tile = s_tile;
    if ((long long)tile * TILE_N >= n) return;  // never, unless the counter was not reset
    uint4 v[CH];
    load_tile<WARPS, CH, STREAM>(x, (long long)tile * TILE_N, n, v);
    unsigned warp_offset;
    const unsigned total = scan_tile<WARPS, CH>(v, exclusive != 0, warp_tot, &warp_offset);
    const unsigned prefix = publish_and_look_back<WARPS>(status, tile, total, epoch, first_ns,
                                                         retry_ns, lb_sum, lb_found);
    store_tile<WARPS, CH, STREAM>(y, (long long)tile * TILE_N, n, v, prefix + warp_offset);
}

// ---------------------------------------------------------------------------------------
// The shipped shape (driver.py's V5 repeats it; a test checks that they agree).
// .notes/day17_scan_sweep.py instantiates the same body with other shapes.
// ---------------------------------------------------------------------------------------
#define V5_WARPS 4
#define V5_CHUNKS 6

#define SCAN_LB_ARGS const unsigned* __restrict__ x, unsigned* __restrict__ y,                 \
    unsigned long long* __restrict__ status, unsigned* __restrict__ counters, long long n,   \
    int exclusive, unsigned epoch, unsigned first_ns, unsigned retry_ns
#define SCAN_LB_PASS x, y, status, counters, n, exclusive, epoch, first_ns, retry_ns

extern "C" __global__ void __launch_bounds__(V5_WARPS * 32) scan_v5(SCAN_LB_ARGS) {
    scan_v5_body<V5_WARPS, V5_CHUNKS, false>(SCAN_LB_PASS);
}
