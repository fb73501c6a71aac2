// wgmma_gemm.cuh: day 45's warp-specialised bf16 GEMM on Hopper (sm_90a), generalised for the
// days built on it: day 48 (split-K and stream-K) and day 49 (epilogue fusion).
//
//   C[M, N] = A[M, K] . B[N, K]^T       bf16 in (both K-major), fp32 accumulate
//
// The block (384 threads) is day 45's: warpgroup 0 is the PRODUCER (one thread issues TMA copies
// of A 128x64 and B BNx64 boxes into a ring of STAGES shared-memory stages, each with a `full`
// and an `empty` mbarrier); warpgroups 1 and 2 are CONSUMERS (each runs wgmma m64nBNk16 on its
// 64 rows of the 128-row tile, accumulators in registers). Blocks are persistent: each walks a
// list of WORK UNITS, and the producer runs ahead into the next unit while the consumers finish
// this one. What used to be fixed in day 45 is now a template argument:
//
//   Schedule   which units a block does. A unit is a tile (tm, tn) and the k-blocks
//              [kb0, kb1) of it that this block accumulates:
//                DataParallel  whole tiles, tile t = first, first + step, ... (day 45)
//                SplitK        tile x slice: S slices of the K range per tile (day 48)
//                StreamK       an equal share of all (tile, k-block) iterations per block,
//                              after `dp_tiles` whole tiles (day 48)
//   Epilogue   what the consumers do with a unit's accumulators:
//                StoreBF16     round to bf16 and store (day 45); its store_bf16() takes an
//                              element-wise op too (day 49's bias / GELU / residual)
//                SplitKFixup   day 48 v3: every slice writes an fp32 partial; the last slice
//                              of a tile to arrive (per-tile counter) adds all of them in
//                              slice order and runs the inner epilogue
//                StreamKFixup  day 48 v4: the block that did a tile's k-block 0 waits for the
//                              blocks that did the rest (one flag each), adds their partials
//                              in block order, runs the inner epilogue
//
// Interface of an epilogue (called by the 256 consumer threads; c = 0 or 1, the consumer
// warpgroup, whose 64 rows start at u.tm * BM + 64 c; `smem` = the dynamic shared memory after
// the ring, `extra` bytes of it, 1024-byte aligned):
//     __device__ void begin(const Unit &u, int c, uint8_t *smem);          before the unit's mainloop
//     __device__ void operator()(const Unit &u, float (&d)[BN / 2], int c, uint8_t *smem);
//     __device__ void end(int c, uint8_t *smem);                           after the block's last unit
// A kernel is (384 threads, __launch_bounds__(384, 1), dynamic shared memory
// smem_bytes<BN, STAGES>(extra), cluster dims (CLUSTER, 1, 1) when CLUSTER > 1):
//     Geometry g = Geometry::make(M, N, K, BN, CLUSTER);
//     DataParallel<8> s(g, blockIdx.x / CLUSTER, gridDim.x / CLUSTER, cluster_rank<CLUSTER>());
//     StoreBF16<BN> e{C, M, N};
//     run<BN, STAGES, CLUSTER, INFLIGHT>(amap, bmap, s, e);
// Tensor maps (common/tma.py, uploaded): A dims (K, M) box (64, 128), B dims (K, N) box
// (64, BN / CLUSTER), both 128-byte swizzle; K a multiple of 8 (rows of 16-byte multiples).
// Named barriers: 0 is __syncthreads, 1 joins the two consumer warpgroups (consumer_sync);
// epilogues may use 2 and up for their own.
//
// run_pingpong (at the end of this file; days 48 and 49 v5) is the other consumer schedule:
// each consumer warpgroup owns a whole 128 x 128 (or 64 x 256) tile and the two take turns on
// the tensor cores, so one warpgroup's epilogue runs under the other's mainloop. It takes the
// same schedules; its epilogues receive a warpgroup's whole tile (PingPongStoreBF16,
// PingPongSplitKFixup). run() above is unchanged by it.
#pragma once
#include <cuda_bf16.h>
#include <cstdint>

#include "tma.cuh"
#include "wgmma.cuh"

namespace cuda100 {
namespace wsgemm {

typedef __nv_bfloat16 bf16;

constexpr int BK = 64;                 // a k-block: one 128-byte swizzle row of bf16
constexpr int BM = 128;                // tile rows: two consumer warpgroups of 64
constexpr int THREADS = 384;           // producer warpgroup + two consumer warpgroups
constexpr int CONSUMER_THREADS = 256;
constexpr int PRODUCER_REGS = 40;      // setmaxnreg: 40 x 128 + 232 x 256 = 64512 <= 65536
constexpr int CONSUMER_REGS = 232;

template <int BN>
struct Tile {
    static_assert(BN == 128 || BN == 256, "BN is 128 or 256 (wgmma m64n128k16 / m64n256k16)");
    static constexpr int ACC = BN / 2;                       // fp32 accumulators per consumer thread
    static constexpr int STAGE_BYTES = (BM + BN) * BK * 2;   // one k-block of A and B, bf16
    static constexpr int ELEMS = BM * BN;                    // floats of one fp32 partial tile
};

// Dynamic shared memory of a kernel: the ring, `extra` bytes for the epilogue, 1024 to align.
template <int BN, int STAGES>
__host__ __device__ constexpr int smem_bytes(int extra = 0) {
    return STAGES * Tile<BN>::STAGE_BYTES + extra + 1024;
}

using tma::align1024;

template <int CLUSTER>
__device__ __forceinline__ int cluster_rank() {
    uint32_t r = 0;
    if constexpr (CLUSTER > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return (int)r;
}

__device__ __forceinline__ void cluster_sync() {
    asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// ---------------------------------------------------------------------------------------------
// Problem geometry and work units

struct Geometry {
    int M, N, K;
    int tiles_m, tiles_n;   // 128-row (bm-row) and BN-column tiles
    int nk;                 // k-blocks of 64
    int cluster;            // blocks per cluster along M (they share B by multicast)
    int units_m;            // row units of the schedule: pairs of row tiles when cluster = 2

    // bm: tile rows (128; the ping-pong kernel's 64 x 256 tiles pass 64)
    __device__ static Geometry make(int M, int N, int K, int bn, int cluster, int bm = BM) {
        Geometry g;
        g.M = M; g.N = N; g.K = K;
        g.tiles_m = (M + bm - 1) / bm;
        g.tiles_n = (N + bn - 1) / bn;
        g.nk = (K + BK - 1) / BK;
        g.cluster = cluster;
        g.units_m = (g.tiles_m + cluster - 1) / cluster;
        return g;
    }
    // tiles in the schedule's order (cluster tiles of cluster x 1 tiles when cluster > 1)
    __device__ int tiles() const { return units_m * tiles_n; }
};

struct Unit {
    int tile;       // index of the (cluster) tile in the schedule's order
    int tm, tn;     // this block's row tile and column tile; tm >= tiles_m only for the empty
                    // half of a cluster pair (its loads read zeros, epilogues store nothing)
    int kb0, kb1;   // the k-blocks [kb0, kb1) this unit accumulates
    int slice;      // SplitK: which slice of K (0 otherwise)
};

// Tile t of the order -> (row unit, column tile). GROUP > 0: groups of GROUP row units, walked
// down the columns of a group, so the blocks running together share A and B panels in L2
// (day 45); GROUP == 0: row-major.
template <int GROUP>
__device__ __forceinline__ void tile_order(int t, int units_m, int tiles_n, int &um, int &tn) {
    if constexpr (GROUP == 0) {
        um = t / tiles_n;
        tn = t % tiles_n;
    } else {
        const int per_group = GROUP * tiles_n;
        const int g = t / per_group, first = g * GROUP;
        const int rows = min(units_m - first, GROUP);
        const int in = t - g * per_group;
        um = first + in % rows;
        tn = in / rows;
    }
}

template <int GROUP>
__device__ __forceinline__ Unit make_unit(const Geometry &g, int t, int kb0, int kb1, int rank,
                                          int slice = 0) {
    Unit u;
    int um;
    tile_order<GROUP>(t, g.units_m, g.tiles_n, um, u.tn);
    u.tile = t;
    u.tm = um * g.cluster + rank;
    u.kb0 = kb0;
    u.kb1 = kb1;
    u.slice = slice;
    return u;
}

// ---------------------------------------------------------------------------------------------
// Schedules: `bool next(Unit &u)` gives the block's units in order. The producer and the
// consumers each walk their own copy; both see the same list.

// Whole tiles: first, first + step, ... (persistent: first = block, step = blocks; one tile per
// block: first = linear block index, step = tiles).
template <int GROUP>
struct DataParallel {
    Geometry g;
    int t, step, rank;
    __device__ DataParallel(const Geometry &g_, int first, int step_, int rank_)
        : g(g_), t(first), step(step_), rank(rank_) {}
    __device__ bool next(Unit &u) {
        if (t >= g.tiles()) return false;
        u = make_unit<GROUP>(g, t, 0, g.nk, rank);
        t += step;
        return true;
    }
};

// The number of slices a kernel really uses: at least 1, at most one k-block each.
__device__ __forceinline__ int clamp_slices(int slices, int nk) { return max(1, min(slices, nk)); }

// Split-K: unit u = slice * tiles + tile (slice-major: the units that run at the same time are
// the same slice of neighbouring tiles, which share A and B panels at the same k); slice s
// covers k-blocks [s nk / S, (s + 1) nk / S).
template <int GROUP>
struct SplitK {
    Geometry g;
    int u, step, rank, slices;
    __device__ SplitK(const Geometry &g_, int slices_, int first, int step_, int rank_)
        : g(g_), u(first), step(step_), rank(rank_), slices(clamp_slices(slices_, g_.nk)) {}
    __device__ int kb_begin(int s) const { return (int)((long long)s * g.nk / slices); }
    __device__ bool next(Unit &out) {
        const int tiles = g.tiles();
        if (u >= tiles * slices) return false;
        const int s = u / tiles, t = u - s * tiles;
        out = make_unit<GROUP>(g, t, kb_begin(s), kb_begin(s + 1), rank, s);
        u += step;
        return true;
    }
};

// Stream-K: the first dp_tiles tiles go whole to blocks round-robin (data-parallel waves); the
// iterations (tile, k-block) of the remaining tiles, numbered tile-major, are cut into
// sk_blocks contiguous ranges, one per block (blocks >= sk_blocks get none): q = iters /
// sk_blocks each, and the first iters % sk_blocks blocks one more. A range crosses tile
// boundaries, so a tile may be shared by several consecutive blocks: the one that holds its
// k-block 0 (the tile's OWNER; for it that is the range's last unit) finishes it; the others
// (whose ranges start inside the tile: their first unit) hand over fp32 partials.
// 32-bit iteration counts: the host keeps tiles x nk below 2^31. The plan keeps the launch's
// own numbers and derives the rest where it is needed (values kept live from the prologue
// through the mainloop cost consumer registers; kernel parameters can be re-read instead).
struct StreamKPlan {
    int tiles, nk, dp_arg, sk_arg;    // tiles, k-blocks, the launch's dp_tiles and sk_blocks
    __device__ int dp_tiles() const { return max(0, min(dp_arg, tiles)); }
    __device__ int iters() const { return (tiles - dp_tiles()) * nk; }
    // never more ranges than iterations: every range holds at least one
    __device__ int sk_blocks() const { return max(1, min(sk_arg, iters())); }
};

struct StreamKRanges {
    int blocks, q, r;       // ranges; iterations per range, and how many ranges hold one more
    __device__ explicit StreamKRanges(const StreamKPlan &p) {
        const int iters = p.iters();
        blocks = p.sk_blocks();
        q = iters / blocks;
        r = iters - q * blocks;
    }
    // first stream-K iteration of block b's range (b >= blocks: empty ranges at the end)
    __device__ int begin(int b) const {
        b = min(b, blocks);
        return b * q + min(b, r);
    }
};

// (The ranges are worked out on the first next(), inside the producer's or the consumers' own
// code: a value computed before the warpgroups part ways lives through setmaxnreg, and ptxas
// spills it.)
template <int GROUP>
struct StreamK {
    Geometry g;
    StreamKPlan p;
    int blk, t, step, rank;
    int it, hi;            // this block's remaining stream-K iterations [it, hi); it < 0: not yet
    __device__ StreamK(const Geometry &g_, const StreamKPlan &p_, int blk_, int blocks, int rank_)
        : g(g_), p(p_), blk(blk_), t(blk_), step(blocks), rank(rank_), it(-1), hi(0) {}
    __device__ bool next(Unit &u) {
        if (t < p.dp_tiles()) {
            u = make_unit<GROUP>(g, t, 0, g.nk, rank);
            t += step;
            return true;
        }
        if (it < 0) {
            const StreamKRanges rg(p);
            it = rg.begin(blk);
            hi = rg.begin(blk + 1);
        }
        if (it >= hi) return false;
        const int tile = it / g.nk;
        const int k0 = it - tile * g.nk;
        const int k1 = min(g.nk, k0 + (hi - it));
        u = make_unit<GROUP>(g, p.dp_tiles() + tile, k0, k1, rank);
        it += k1 - k0;
        return true;
    }
};

// ---------------------------------------------------------------------------------------------
// The mainloop pieces

// One k-block (64 deep) of a warpgroup's 64 x BN tile: four wgmma k16 steps. sA: the
// warpgroup's 64 rows of A (64 x 64), sB: the BN rows of B (BN x 64), as TMA swizzled them.
template <int BN>
__device__ __forceinline__ void mma_kblock(float (&d)[BN / 2], const bf16 *sA, const bf16 *sB,
                                           bool first) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        const uint64_t da = wgmma::desc_k128(sA + kk * 16), db = wgmma::desc_k128(sB + kk * 16);
        const int scale_d = (first && kk == 0) ? 0 : 1;
        if constexpr (BN == 256) wgmma::m64n256k16_bf16(d, da, db, scale_d);
        else wgmma::m64n128k16_bf16(d, da, db, scale_d);
    }
}

// The producer (one thread): walk the schedule's units and fill the ring. A stage is the
// it-th k-block overall (it counts on across units), refilled in round r >= 1 only after
// empty[s]'s phase r - 1; full[s] is armed with the stage's bytes. Tiles are TM x TN; with a
// cluster of two, each block fetches half of B's box and multicasts it to both. WAIT waits on
// an mbarrier phase (tma::mbar_wait, or the ping-pong kernel's watchdog).
template <int TM, int TN, int STAGE_BYTES, int STAGES, int CLUSTER,
          void (*WAIT)(uint64_t *, uint32_t), class Sched>
__device__ __forceinline__ void produce(const CUtensorMap *amap, const CUtensorMap *bmap,
                                        Sched &sched, uint8_t *base, uint64_t *full,
                                        uint64_t *empty, int rank) {
    Unit u;
    int it = 0;                                         // k-blocks loaded so far (all units)
    while (sched.next(u)) {
        const int m0 = u.tm * TM, n0 = u.tn * TN;
        for (int kb = u.kb0; kb < u.kb1; ++kb, ++it) {
            const int s = it % STAGES, r = it / STAGES;
            if (r > 0) WAIT(&empty[s], (r - 1) & 1);
            bf16 *sA = reinterpret_cast<bf16 *>(base + s * STAGE_BYTES);
            bf16 *sB = sA + TM * BK;
            tma::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
            tma::load_2d(sA, amap, &full[s], kb * BK, m0);
            if constexpr (CLUSTER > 1) {
                constexpr int HALF = TN / 2;
                tma::load_2d_multicast(sB + rank * HALF * BK, bmap, &full[s], kb * BK,
                                       n0 + rank * HALF, (uint16_t)((1 << CLUSTER) - 1));
            } else {
                tma::load_2d(sB, bmap, &full[s], kb * BK, n0);
            }
        }
    }
}

// The whole kernel body. Sched: a schedule (above); Epi: an epilogue (below, or the day's own).
// INFLIGHT: wgmma groups a consumer keeps in flight (1: wait for each k-block; 2: release the
// previous k-block's stage while this one runs). CLUSTER: 1, or 2 blocks along M sharing B by
// multicast (each fetches half of the B box into both blocks' shared memory).
template <int BN, int STAGES, int CLUSTER, int INFLIGHT, class Sched, class Epi>
__device__ __forceinline__ void run(const CUtensorMap *amap, const CUtensorMap *bmap, Sched sched,
                                    Epi &epi) {
    using T = Tile<BN>;
    static_assert(INFLIGHT == 1 || INFLIGHT == 2, "INFLIGHT is 1 or 2");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER is 1 or 2");
    extern __shared__ uint8_t wsgemm_smem[];
    uint8_t *base = align1024(wsgemm_smem);
    uint8_t *extra = base + STAGES * T::STAGE_BYTES;       // the epilogue's shared memory
    __shared__ uint64_t full[STAGES], empty[STAGES];
    const int wg = threadIdx.x / 128;
    const int rank = cluster_rank<CLUSTER>();

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tma::mbar_init(&full[s], 1);                // the producer's arrive.expect_tx
            tma::mbar_init(&empty[s], 2 * CLUSTER);     // every consumer warpgroup of the cluster
        }
        tma::fence_barrier_init();
    }
    if constexpr (CLUSTER > 1) cluster_sync();
    else __syncthreads();

    if (wg == 0) {
        wgmma::setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0)
            produce<BM, BN, T::STAGE_BYTES, STAGES, CLUSTER, tma::mbar_wait>(amap, bmap, sched, base,
                                                                             full, empty, rank);
    } else {
        wgmma::setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;
        const bool releaser = threadIdx.x % 128 < CLUSTER;   // one arrival per block of the cluster
        float d[T::ACC];
#pragma unroll
        for (int i = 0; i < T::ACC; ++i) d[i] = 0.f;
        Unit u;
        int it = 0;
        while (sched.next(u)) {
            epi.begin(u, c, extra);
            for (int kb = u.kb0; kb < u.kb1; ++kb, ++it) {
                const int s = it % STAGES, r = it / STAGES;
                tma::mbar_wait(&full[s], r & 1);
                const bf16 *sA = reinterpret_cast<const bf16 *>(base + s * T::STAGE_BYTES);
                const bf16 *sB = sA + BM * BK;
                wgmma::fence_regs(d);
                wgmma::fence();
                wsgemm::mma_kblock<BN>(d, sA + c * 64 * BK, sB, kb == u.kb0);
                wgmma::commit();
                wgmma::wait<INFLIGHT - 1>();
                wgmma::fence_regs(d);
                if (kb - u.kb0 >= INFLIGHT - 1 && releaser) {
                    uint64_t *e = &empty[(it - (INFLIGHT - 1)) % STAGES];
                    if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(e, threadIdx.x % 128);
                    else tma::mbar_arrive(e);
                }
            }
            if constexpr (INFLIGHT > 1) {
                wgmma::wait<0>();
                wgmma::fence_regs(d);
                if (releaser) {
                    uint64_t *e = &empty[(it - 1) % STAGES];
                    if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(e, threadIdx.x % 128);
                    else tma::mbar_arrive(e);
                }
            }
            epi(u, d, c, extra);
        }
        epi.end(c, extra);
    }
    // no block of a cluster may leave while its partner can still multicast into it
    if constexpr (CLUSTER > 1) cluster_sync();
}

// ---------------------------------------------------------------------------------------------
// Epilogue helpers

// This consumer thread's first row and column in its warpgroup's 64 x BN accumulator tile
// (wgmma.cuh's layout): d[4j + 2h + e] is row  r0 + 8h, column  c0 + 8j + e.
__device__ __forceinline__ void frag_origin(int &r0, int &c0) {
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    r0 = 16 * warp + lane / 4;
    c0 = 2 * (lane % 4);
}

// An element-wise op applied before rounding: f(v0, v1, row, col, both) changes v0 (column col)
// and v1 (col + 1); both = false when col + 1 is past N (then v1 is not stored).
struct Identity {
    __device__ __forceinline__ void operator()(float &, float &, int, int, bool) const {}
};

// A warpgroup's 64 x BN accumulators -> bf16 C (leading dimension N), rows from row0, columns
// from col0, bounds checked (partial tiles). Pairs of columns go out as one 4-byte store when
// N is even (every pair 4-byte aligned); one at a time otherwise.
template <int BN, class Op = Identity>
__device__ __forceinline__ void store_bf16(float (&d)[BN / 2], bf16 *C, int M, int N, int row0,
                                           int col0, const Op &op = Op()) {
    int r0, c0;
    frag_origin(r0, c0);
    const bool pairs = (N % 2) == 0;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int col = col0 + 8 * j + c0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int row = row0 + r0 + 8 * h;
            if (row >= M || col >= N) continue;
            float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            const bool both = col + 1 < N;
            op(v0, v1, row, col, both);
            bf16 *p = C + (size_t)row * N + col;
            if (pairs) {
                *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v0, v1);
            } else {
                p[0] = __float2bfloat16_rn(v0);
                if (both) p[1] = __float2bfloat16_rn(v1);
            }
        }
    }
}

// The plain epilogue: round to bf16 and store (day 45's).
template <int BN>
struct StoreBF16 {
    bf16 *C;
    int M, N;
    __device__ void begin(const Unit &, int, uint8_t *) {}
    __device__ void operator()(const Unit &u, float (&d)[BN / 2], int c, uint8_t *) {
        wsgemm::store_bf16<BN>(d, C, M, N, u.tm * BM + 64 * c, u.tn * BN);
    }
    __device__ void end(int, uint8_t *) {}
};

// fp32 partial tiles in a workspace, kept in the accumulators' own order: float4 chunk i
// (d[4i .. 4i+3]) of consumer thread tc (0..THR-1) lives at float4 index i * THR + tc of the
// tile's slot (BM x BN floats; THR = 256: both consumer warpgroups, 128: one, as in the
// ping-pong kernel), so each warp instruction moves 512 contiguous bytes. .cg: cached in L2
// only (a partial is written by one SM and read by another).
template <int R, int THR = CONSUMER_THREADS>
__device__ __forceinline__ void partial_store(float *slot, const float (&d)[R], int tc) {
    float4 *p = reinterpret_cast<float4 *>(slot) + tc;
#pragma unroll
    for (int i = 0; i < R / 4; ++i)
        __stcg(p + i * THR, make_float4(d[4 * i], d[4 * i + 1], d[4 * i + 2], d[4 * i + 3]));
}

template <int R, bool ADD, int THR = CONSUMER_THREADS>
__device__ __forceinline__ void partial_in(float (&d)[R], const float *slot, int tc) {
    const float4 *p = reinterpret_cast<const float4 *>(slot) + tc;
#pragma unroll
    for (int i = 0; i < R / 4; ++i) {
        const float4 v = __ldcg(p + i * THR);
        if constexpr (ADD) {
            d[4 * i] += v.x; d[4 * i + 1] += v.y; d[4 * i + 2] += v.z; d[4 * i + 3] += v.w;
        } else {
            d[4 * i] = v.x; d[4 * i + 1] = v.y; d[4 * i + 2] = v.z; d[4 * i + 3] = v.w;
        }
    }
}

template <int R, int THR = CONSUMER_THREADS>
__device__ __forceinline__ void partial_load(float (&d)[R], const float *slot, int tc) {
    wsgemm::partial_in<R, false, THR>(d, slot, tc);
}

template <int R, int THR = CONSUMER_THREADS>
__device__ __forceinline__ void partial_add(float (&d)[R], const float *slot, int tc) {
    wsgemm::partial_in<R, true, THR>(d, slot, tc);
}

// The two consumer warpgroups only (named barrier 1; the producer never joins it).
__device__ __forceinline__ void consumer_sync() {
    asm volatile("bar.sync 1, %0;" ::"n"(CONSUMER_THREADS) : "memory");
}

// Flags and counters between blocks, at GPU scope (release: my earlier writes are visible to
// whoever acquires what I wrote; acquire: I see what the releaser wrote before).
__device__ __forceinline__ int atomic_add_acq_rel(int *p, int v) {
    int old;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;" : "=r"(old) : "l"(p), "r"(v) : "memory");
    return old;
}
__device__ __forceinline__ void store_release(int *p, int v) {
    asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ int load_acquire(const int *p) {
    int v;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Split-K fixed up in the GEMM (day 48 v3). Every slice of a tile writes its fp32 partial to
// its slot; a per-tile counter counts the slices done; the slice that brings it to S is the
// last: it resets the counter (ready for the next launch), adds the S partials in slice order
// 0, 1, ..., S-1 (a fixed order: the bits do not depend on which slice came last) and runs the
// inner epilogue. ws: S x tiles_m x tiles_n slots of BM x BN floats; sem: tiles_m x tiles_n
// ints, zero before the first launch.
template <int BN, class Inner>
struct SplitKFixup {
    Inner inner;
    float *ws;
    int *sem;
    int slices;             // clamp_slices(S, nk): what the schedule uses
    int tiles_m, tiles_n;
    __device__ void begin(const Unit &u, int c, uint8_t *smem) { inner.begin(u, c, smem); }
    __device__ void end(int c, uint8_t *smem) { inner.end(c, smem); }
    __device__ void operator()(const Unit &u, float (&d)[BN / 2], int c, uint8_t *smem) {
        if (slices == 1) {
            inner(u, d, c, smem);
            return;
        }
        if (u.tm >= tiles_m) return;                    // a cluster pair's empty half
        __shared__ int last;
        const int tc = threadIdx.x - 128;
        const int tile = u.tm * tiles_n + u.tn;
        const size_t per_slice = (size_t)tiles_m * tiles_n * Tile<BN>::ELEMS;
        float *slot0 = ws + (size_t)tile * Tile<BN>::ELEMS;
        wsgemm::partial_store(slot0 + u.slice * per_slice, d, tc);
        __threadfence();                                // my partial before the count
        consumer_sync();
        if (tc == 0) {
            last = atomic_add_acq_rel(&sem[tile], 1) == slices - 1;
            if (last) sem[tile] = 0;
        }
        consumer_sync();
        if (!last) return;
        wsgemm::partial_load(d, slot0, tc);
        for (int s = 1; s < slices; ++s) wsgemm::partial_add(d, slot0 + s * per_slice, tc);
        inner(u, d, c, smem);
    }
};

// Stream-K fix-up (day 48 v4). A unit that starts inside its tile (kb0 > 0) is a block's first
// stream-K unit: it writes its partial to the block's slot and raises the block's flag. A unit
// that starts the tile but stops short of its end (kb0 == 0, kb1 < nk) belongs to the tile's
// owner: the rest of the tile was done by the next blocks (blk + 1, ...: each range starts
// where the previous ended), so the owner waits for each flag in block order, adds that
// partial and clears the flag (ready for the next launch), then runs the inner epilogue. The
// sum order (owner, blk + 1, blk + 2, ...) is fixed by the plan: the bits are reproducible.
// ws: blocks x cluster slots of BM x BN floats; flags: blocks x cluster ints, zero at start.
// Deadlock-free when every block is resident at once (one block per SM, grid <= SMs): an owner
// waits only for higher blocks, whose flags are raised before they wait for anything.
template <int BN, class Inner>
struct StreamKFixup {
    Inner inner;
    float *ws;
    int *flags;
    StreamKPlan plan;
    int rank, cluster, tiles_m;     // the block's index in the plan: blockIdx.x / cluster
    __device__ void begin(const Unit &u, int c, uint8_t *smem) { inner.begin(u, c, smem); }
    __device__ void end(int c, uint8_t *smem) { inner.end(c, smem); }
    __device__ void operator()(const Unit &u, float (&d)[BN / 2], int c, uint8_t *smem) {
        if (u.kb0 == 0 && u.kb1 == plan.nk) {           // a whole tile: nothing to fix up
            inner(u, d, c, smem);
            return;
        }
        if (u.tm >= tiles_m) return;                    // a cluster pair's empty half
        const int tc = threadIdx.x - 128;
        const int blk = blockIdx.x / cluster;
        if (u.kb0 > 0) {                                // hand the partial to the owner
            wsgemm::partial_store(ws + (size_t)(blk * cluster + rank) * Tile<BN>::ELEMS, d, tc);
            __threadfence();
            consumer_sync();
            if (tc == 0) store_release(&flags[blk * cluster + rank], 1);
            return;
        }
        const StreamKRanges rg(plan);
        const int end = (u.tile - plan.dp_tiles() + 1) * plan.nk;   // the tile's last iteration + 1
        for (int b = blk + 1; b < rg.blocks; ++b) {
            if (rg.begin(b) >= end) break;              // b's range starts in a later tile
            int *f = &flags[b * cluster + rank];
            if (tc == 0) {
                while (load_acquire(f) == 0) {}
                *f = 0;
            }
            consumer_sync();
            wsgemm::partial_add(d, ws + (size_t)(b * cluster + rank) * Tile<BN>::ELEMS, tc);
        }
        inner(u, d, c, smem);
    }
};

// =============================================================================================
// Ping-pong consumers (days 48 v5 and 49 v5)
//
// In run() above both consumer warpgroups work on the same 128-row tile: they finish its last
// k-block together and run the epilogue together, and while they do, nobody issues wgmma. With
// a short K (GPT-2's fc1: 12 k-blocks a tile) the epilogue is a large share of the time. The
// ping-pong kernel gives each consumer warpgroup a WHOLE tile of its own (PM x PN, 128
// accumulators a thread: two m64n128 fragments for 128 x 128, or one m64n256 for 64 x 256) and
// lets the two take turns:
//
//     warpgroup 1:  [mainloop t0][epilogue t0]            [mainloop t2][epilogue t2]
//     warpgroup 2:               [mainloop t1      ][epilogue t1]      [mainloop t3] ...
//     tensor pipe:  [    t0     ][    t1           ][    t2           ][    t3     ]
//
// The block's units are dealt alternately: unit i belongs to warpgroup i % 2. A warpgroup
// starts the mainloop of unit i only when the owner of unit i - 1 has ISSUED all of its wgmma
// (the `turn` mbarriers: owner of i - 1 arrives on turn[owner of i] right after its last
// k-block's wgmma; the tensor pipe queues the two warpgroups' instructions back to back), so
// the two mainloops never share the tensor cores and one warpgroup's epilogue runs while the
// other's mainloop does. The ring is consumed strictly in unit order, so the producer loads
// exactly as in run(): every unit's k-blocks, in the schedule's order. Each stage has ONE
// consumer warpgroup (per block of the cluster): its `empty` barrier counts CLUSTER arrivals.
// Both consumer warpgroups walk the whole unit list (to know the ring position of their own
// units). The turns are mbarriers, not named barriers: the arrival after the block's last unit,
// which nobody waits for, just completes a phase of a barrier nobody reads again (a named
// barrier would be left half-arrived at exit), and a wait can be bounded (below).
//
// Every mbarrier wait of this kernel goes through mbar_wait_watchdog(): a wait longer than
// WATCHDOG_CYCLES (2^34 cycles, about 9 s at 1.98 GHz; a legitimate one lasts microseconds, or
// milliseconds under compute-sanitizer) faults, so a protocol bug ends the launch with an error
// instead of hanging the process.
//
// Interface of a ping-pong epilogue (called by the 128 threads of ONE consumer warpgroup, c = 0
// or 1; F = PM / 64 fragments of 64 x PN, fragment f's rows start at u.tm * PM + 64 f, its
// columns at u.tn * PN; d[f] in wgmma.cuh's layout, as a cooperative warpgroup's d):
//     __device__ void begin(const Unit &u, int c, uint8_t *smem);
//     __device__ void operator()(const Unit &u, float (&d)[PM / 64][PN / 2], int c, uint8_t *smem);
//     __device__ void end(int c, uint8_t *smem);
// A kernel (384 threads, __launch_bounds__(384, 1), dynamic shared memory
// pingpong_smem_bytes<PM, PN, STAGES>(extra), cluster dims (CLUSTER, 1, 1) when CLUSTER > 1):
//     struct Setup {                 // the kernel's parameters, nothing computed from them
//         ...
//         __device__ SomeSchedule schedule() const;   // e.g. DataParallel<8>(Geometry::make(
//                                                     //   M, N, K, PN, CLUSTER, PM), ...)
//         __device__ SomeEpilogue epilogue() const;
//     };
//     run_pingpong<PM, PN, STAGES, CLUSTER, INFLIGHT>(amap, bmap, Setup{...});
// Tensor maps: A box (64, PM), B box (64, PN / CLUSTER), 128-byte swizzle. Named barriers:
// 2 + c is warpgroup c's own (wg_sync); the two warpgroups never meet at a named barrier.

template <int PM, int PN>
struct PingPong {
    static_assert((PM == 128 && PN == 128) || (PM == 64 && PN == 256),
                  "a ping-pong tile is 128 x 128 (two m64n128) or 64 x 256 (one m64n256): "
                  "128 fp32 accumulators a thread");
    static constexpr int FRAGS = PM / 64;                     // 64-row wgmma fragments
    static constexpr int ACC = PN / 2;                        // fp32 accumulators a fragment
    static constexpr int STAGE_BYTES = (PM + PN) * BK * 2;    // one k-block of A and B, bf16
    static constexpr int ELEMS = PM * PN;                     // floats of one fp32 partial tile
};

template <int PM, int PN, int STAGES>
__host__ __device__ constexpr int pingpong_smem_bytes(int extra = 0) {
    return STAGES * PingPong<PM, PN>::STAGE_BYTES + extra + 1024;
}

constexpr long long WATCHDOG_CYCLES = 1ll << 34;

__device__ __forceinline__ bool mbar_try_wait(uint64_t *bar, uint32_t parity) {
    uint32_t done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(tma::smem_addr(bar)), "r"(parity) : "memory");
    return done != 0;
}

// tma::mbar_wait with a watchdog (see above). It fires by storing to address 0: the launch ends
// with "an illegal memory access was encountered" (compute-sanitizer: an invalid write of 4
// bytes at 0x0 on this line). Not __trap(): with a trap in the loop, ptxas spilled 16-36 bytes
// of the consumers' loop state in day 49's fc2 kernels; the store costs nothing.
__device__ __forceinline__ void mbar_wait_watchdog(uint64_t *bar, uint32_t parity) {
    if (mbar_try_wait(bar, parity)) return;
    const long long t0 = clock64();
    while (!mbar_try_wait(bar, parity))
        if (clock64() - t0 > WATCHDOG_CYCLES)
            asm volatile("st.global.u32 [%0], %1;" ::"l"(0ull), "r"(0xdead) : "memory");
}

// Warpgroup c's own 128 threads (named barrier 2 + c).
__device__ __forceinline__ void wg_sync(int c) {
    asm volatile("bar.sync %0, 128;" ::"r"(2 + c) : "memory");
}

// One k-block of a warpgroup's PM x PN tile: for each k16 step, one wgmma per 64-row fragment
// (both fragments read the same B rows). sA: PM rows of A (PM x 64), sB: PN rows of B.
template <int PM, int PN>
__device__ __forceinline__ void mma_kblock_pp(float (&d)[PM / 64][PN / 2], const bf16 *sA,
                                              const bf16 *sB, bool first) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        const uint64_t db = wgmma::desc_k128(sB + kk * 16);
        const int scale_d = (first && kk == 0) ? 0 : 1;
#pragma unroll
        for (int f = 0; f < PM / 64; ++f) {
            const uint64_t da = wgmma::desc_k128(sA + f * 64 * BK + kk * 16);
            if constexpr (PN == 256) wgmma::m64n256k16_bf16(d[f], da, db, scale_d);
            else wgmma::m64n128k16_bf16(d[f], da, db, scale_d);
        }
    }
}

template <int PM, int PN>
__device__ __forceinline__ void fence_frags(float (&d)[PM / 64][PN / 2]) {
#pragma unroll
    for (int f = 0; f < PM / 64; ++f) wgmma::fence_regs(d[f]);
}

// The ping-pong kernel body: as run(), with a PM x PN tile per consumer warpgroup. The schedule
// and the epilogue come from `setup` (setup.schedule(), setup.epilogue(); a struct of the
// kernel's parameters), built inside the producer's and the consumers' own code: values
// computed before the warpgroups part ways live through setmaxnreg, and ptxas spills them (the
// 64 x 256 kernel of day 48 did, 36 bytes, when its schedule and epilogue were built in the
// kernel's entry).
template <int PM, int PN, int STAGES, int CLUSTER, int INFLIGHT, class Setup>
__device__ __forceinline__ void run_pingpong(const CUtensorMap *amap, const CUtensorMap *bmap,
                                             const Setup &setup) {
    using P = PingPong<PM, PN>;
    static_assert(INFLIGHT == 1 || INFLIGHT == 2, "INFLIGHT is 1 or 2");
    static_assert(CLUSTER == 1 || CLUSTER == 2, "CLUSTER is 1 or 2");
    static_assert(STAGES >= 2, "the ring needs two stages at least (INFLIGHT holds one back)");
    extern __shared__ uint8_t wsgemm_smem[];
    uint8_t *base = align1024(wsgemm_smem);
    uint8_t *extra = base + STAGES * P::STAGE_BYTES;       // the epilogue's shared memory
    __shared__ uint64_t full[STAGES], empty[STAGES], turn[2];
    const int wg = threadIdx.x / 128;
    const int rank = cluster_rank<CLUSTER>();

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tma::mbar_init(&full[s], 1);                // the producer's arrive.expect_tx
            tma::mbar_init(&empty[s], CLUSTER);         // the stage's consumer, in every block
        }
        tma::mbar_init(&turn[0], 128);                  // every thread of the other warpgroup
        tma::mbar_init(&turn[1], 128);
        tma::fence_barrier_init();
    }
    if constexpr (CLUSTER > 1) cluster_sync();
    else __syncthreads();

    if (wg == 0) {
        wgmma::setmaxnreg_dec<PRODUCER_REGS>();
        if (threadIdx.x == 0) {
            auto sched = setup.schedule();
            produce<PM, PN, P::STAGE_BYTES, STAGES, CLUSTER, mbar_wait_watchdog>(amap, bmap, sched,
                                                                                base, full, empty, rank);
        }
    } else {
        wgmma::setmaxnreg_inc<CONSUMER_REGS>();
        const int c = wg - 1;
        const bool releaser = threadIdx.x % 128 < CLUSTER;   // one arrival per block of the cluster
        float d[P::FRAGS][P::ACC];
#pragma unroll
        for (int f = 0; f < P::FRAGS; ++f)
#pragma unroll
            for (int i = 0; i < P::ACC; ++i) d[f][i] = 0.f;
        auto sched = setup.schedule();
        auto epi = setup.epilogue();
        Unit u;
        int it = 0;             // ring position of unit i's first k-block
        int i = 0;              // unit index in the block's list
        while (sched.next(u)) {
            if ((i & 1) == c) {
                epi.begin(u, c, extra);
                // unit i > 0 is this warpgroup's wait number (i + c) / 2 - 1 on turn[c] (i and c
                // have the same parity): phase parity ((i + c) / 2 - 1) & 1
                if (i > 0) mbar_wait_watchdog(&turn[c], (((i + c) >> 1) & 1) ^ 1);
                int p = it;
                for (int kb = u.kb0; kb < u.kb1; ++kb, ++p) {
                    const int s = p % STAGES, r = p / STAGES;
                    mbar_wait_watchdog(&full[s], r & 1);
                    const bf16 *sA = reinterpret_cast<const bf16 *>(base + s * P::STAGE_BYTES);
                    const bf16 *sB = sA + PM * BK;
                    fence_frags<PM, PN>(d);
                    wgmma::fence();
                    mma_kblock_pp<PM, PN>(d, sA, sB, kb == u.kb0);
                    wgmma::commit();
                    wgmma::wait<INFLIGHT - 1>();
                    fence_frags<PM, PN>(d);
                    if (kb - u.kb0 >= INFLIGHT - 1 && releaser) {
                        uint64_t *e = &empty[(p - (INFLIGHT - 1)) % STAGES];
                        if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(e, threadIdx.x % 128);
                        else tma::mbar_arrive(e);
                    }
                }
                // every wgmma of this unit is issued: the next unit's owner may start its own
                // (after the block's last unit nobody waits for this arrival: harmless)
                tma::mbar_arrive(&turn[1 - c]);
                if constexpr (INFLIGHT > 1) {
                    wgmma::wait<0>();
                    fence_frags<PM, PN>(d);
                    if (releaser) {
                        uint64_t *e = &empty[(p - 1) % STAGES];
                        if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(e, threadIdx.x % 128);
                        else tma::mbar_arrive(e);
                    }
                }
                epi(u, d, c, extra);
            }
            it += u.kb1 - u.kb0;
            ++i;
        }
        epi.end(c, extra);
    }
    // no block of a cluster may leave while its partner can still multicast into it
    if constexpr (CLUSTER > 1) cluster_sync();
}

// The plain ping-pong epilogue: each fragment rounded to bf16 and stored from registers
// (store_bf16), with an optional element-wise op.
template <int PM, int PN, class Op = Identity>
struct PingPongStoreBF16 {
    bf16 *C;
    int M, N;
    Op op;
    __device__ void begin(const Unit &, int, uint8_t *) {}
    __device__ void operator()(const Unit &u, float (&d)[PM / 64][PN / 2], int, uint8_t *) {
#pragma unroll
        for (int f = 0; f < PM / 64; ++f)
            wsgemm::store_bf16<PN>(d[f], C, M, N, u.tm * PM + 64 * f, u.tn * PN, op);
    }
    __device__ void end(int, uint8_t *) {}
};

// Split-K fixed up in the ping-pong GEMM (day 48 v5): SplitKFixup's protocol with one
// warpgroup per unit. Every slice writes its fp32 partial (thread t's fragment f, float4 chunk
// i at float4 index (f * PN / 8 + i) * 128 + t of the tile's slot), the warpgroup counts it on
// the tile's counter, and the slice that completes the count adds the S partials in slice order
// and runs the inner (ping-pong) epilogue. ws: S x tiles_m x tiles_n slots of PM x PN floats;
// sem: tiles_m x tiles_n ints, zero before the first launch (the last slice resets its own).
// slices == 1: the inner epilogue straight away (plain tiling).
template <int PM, int PN, class Inner>
struct PingPongSplitKFixup {
    Inner inner;
    float *ws;
    int *sem;
    int slices;             // clamp_slices(S, nk): what the schedule uses
    int tiles_m, tiles_n;
    __device__ void begin(const Unit &u, int c, uint8_t *smem) { inner.begin(u, c, smem); }
    __device__ void end(int c, uint8_t *smem) { inner.end(c, smem); }
    __device__ void operator()(const Unit &u, float (&d)[PM / 64][PN / 2], int c, uint8_t *smem) {
        if (slices == 1) {
            inner(u, d, c, smem);
            return;
        }
        if (u.tm >= tiles_m) return;                    // a cluster pair's empty half
        constexpr int FRAG = 64 * PN;                   // floats of one fragment's partial
        __shared__ int last[2];                         // one flag per consumer warpgroup
        const int t = threadIdx.x % 128;
        const int tile = u.tm * tiles_n + u.tn;
        const size_t per_slice = (size_t)tiles_m * tiles_n * PingPong<PM, PN>::ELEMS;
        float *slot0 = ws + (size_t)tile * PingPong<PM, PN>::ELEMS;
#pragma unroll
        for (int f = 0; f < PM / 64; ++f)
            wsgemm::partial_store<PN / 2, 128>(slot0 + u.slice * per_slice + f * FRAG, d[f], t);
        __threadfence();                                // my partial before the count
        wg_sync(c);
        if (t == 0) {
            last[c] = atomic_add_acq_rel(&sem[tile], 1) == slices - 1;
            if (last[c]) sem[tile] = 0;
        }
        wg_sync(c);
        if (!last[c]) return;
#pragma unroll
        for (int f = 0; f < PM / 64; ++f) wsgemm::partial_load<PN / 2, 128>(d[f], slot0 + f * FRAG, t);
        for (int s = 1; s < slices; ++s) {
#pragma unroll
            for (int f = 0; f < PM / 64; ++f)
                wsgemm::partial_add<PN / 2, 128>(d[f], slot0 + s * per_slice + f * FRAG, t);
        }
        inner(u, d, c, smem);
    }
};

}  // namespace wsgemm
}  // namespace cuda100
