// Day 43: cp.async multi-stage pipelines (Ampere style). C[M, N] (fp32) = A[M, K] @ B[K, N], A and
// B bf16 row-major, fp32 accumulation (day 41's problem, day 42's warp tiles).
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day43_async_copy_pipeline/kernel.cu
//
// Day 42's v3 prefetched the next k-tile through registers: 24 registers a thread held the data
// between the global load and the shared store, and the store waited for the load. cp.async
// (common/cuda/cp_async.cuh) copies global -> shared without registers, so a block can keep
// several k-tiles in flight: STAGES shared buffers form a ring; while the tensor cores work on
// tile kt, the copies of tiles kt+1 .. kt+STAGES-1 are on their way.
//
//   prologue: issue tiles 0 .. STAGES-2, one commit group each
//   for kt:   wait until at most STAGES-2 groups are in flight (tile kt has landed), barrier;
//             issue tile kt+STAGES-1 into the buffer tile kt-1 used (every warp is past it: the
//             barrier), commit; multiply tile kt
// One barrier a k-tile. An empty group is committed past the last tile, so the wait count is the
// same in every iteration.
//
// The warp tile (WarpTile in common/cuda/mma.cuh: ldmatrix + mma.sync m16n8k16, 64 x 64 a warp)
// and the swizzled shared layout are day 42's; A and B leading dimensions are multiples of 8 (the
// driver pads a copy otherwise: day 41's operands()).
//
//   v1  cp.async, 2 stages: 128 x 256 block tile, BK = 32, 8 warps of 64 x 64 (day 42 v3's tile)
//   v2  4 stages (three k-tiles in flight)
//   v3  v2 + grouped tile order: blocks walk GROUP = 8 tile-rows down before moving one tile
//       column right, so the blocks running at once share A and B strips in L2
//   v4  the sweep's choice (.notes/day43_sweep.py): BK = 64, 3 stages, GROUP = 8 until measured
// Sweep candidates: hgemm_async_cand_<BM>x<BN>_k<BK>_s<STAGES>_g<GROUP>.
#include <stdint.h>

#include "cp_async.cuh"
#include "mma.cuh"

using namespace cuda100::mma;

template <int BM_, int BN_, int BK_, int WM_, int WN_, int STAGES_, int GROUP_>
struct Cfg {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
    static constexpr int STAGES = STAGES_, GROUP = GROUP_;
    static constexpr int WARPS_N = BN / WN, THREADS = 32 * (BM / WM) * (BN / WN);
    static constexpr int A_BYTES = BM * BK * 2, STAGE_BYTES = (BM * BK + BK * BN) * 2;
    static constexpr int SMEM = STAGES * STAGE_BYTES;
    static_assert(STAGES >= 2 && BK % 16 == 0 && BM % WM == 0 && BN % WN == 0, "config");
    static_assert(SMEM <= 227 * 1024, "shared memory of one block");
};

// Which tile of C block `bid` computes. GROUP = 0: row by row. GROUP > 0: down GROUP tile-rows,
// then one tile-column right; the last group may have fewer rows (day 25's grouped order).
template <int GROUP>
__device__ __forceinline__ void tile_of(int bid, int tiles_m, int tiles_n, int& tm, int& tn) {
    if (GROUP == 0) {
        tm = bid / tiles_n;
        tn = bid % tiles_n;
    } else {
        const int per_group = GROUP * tiles_n;
        const int first = (bid / per_group) * GROUP;
        const int rows = min(tiles_m - first, GROUP);
        const int inside = bid % per_group;
        tm = first + inside % rows;
        tn = inside / rows;
    }
}

template <class C>
__device__ __forceinline__ void async_gemm(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B,
                                           float* __restrict__ Cm, int M, int N, int K, int lda, int ldb) {
    using LA = Layout<C::BK, true>;
    using LB = Layout<C::BN, true>;
    using W = WarpTile<C::WM, C::WN>;
    constexpr int KS = C::BK / 16;
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t s0 = cuda100::smem_u32(smem);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    int tm, tn;
    tile_of<C::GROUP>(blockIdx.x, (M + C::BM - 1) / C::BM, (N + C::BN - 1) / C::BN, tm, tn);
    const int bm = tm * C::BM, bn = tn * C::BN;
    const int wm0 = (warp / C::WARPS_N) * C::WM, wn0 = (warp % C::WARPS_N) * C::WN;
    const int KT = (K + C::BK - 1) / C::BK;

    auto issue = [&](int kt) {   // the copies of k-tile kt into its ring buffer (none past the end)
        if (kt < KT) {
            const uint32_t sa = s0 + (kt % C::STAGES) * C::STAGE_BYTES;
            copy_tile_async<C::BM, C::BK, C::THREADS, LA>(sa, A, lda, bm, kt * C::BK, M, K, tid);
            copy_tile_async<C::BK, C::BN, C::THREADS, LB>(sa + C::A_BYTES, B, ldb, kt * C::BK, bn, K, N, tid);
        }
        cuda100::cp_async_commit();
    };

    W w;
    w.zero();
#pragma unroll
    for (int s = 0; s < C::STAGES - 1; ++s) issue(s);
    for (int kt = 0; kt < KT; ++kt) {
        cuda100::cp_async_wait<C::STAGES - 2>();   // this thread's copies of tile kt have landed
        __syncthreads();                           // everyone's; and everyone is done with tile kt-1
        issue(kt + C::STAGES - 1);                 // into tile kt-1's buffer
        const uint32_t sa = s0 + (kt % C::STAGES) * C::STAGE_BYTES, sb = sa + C::A_BYTES;
        typename W::Frags f[2];                    // k16 slice s+1 loads while slice s multiplies
        W::template load<LA, LB>(f[0], sa, sb, wm0, wn0, 0, lane);
#pragma unroll
        for (int ks = 0; ks < KS; ++ks) {
            if (ks + 1 < KS) W::template load<LA, LB>(f[(ks + 1) & 1], sa, sb, wm0, wn0, ks + 1, lane);
            w.mma(f[ks & 1]);
        }
    }
    cuda100::cp_async_wait<0>();   // only empty groups are left; leave nothing in flight
    w.store(Cm, N, M, N, bm + wm0, bn + wn0, lane);
}

#define ASYNC_GEMM(NAME, CFG, MINB)                                                                 \
    extern "C" __global__ void __launch_bounds__(CFG::THREADS, MINB) NAME(                         \
        const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C, int M, \
        int N, int K, int lda, int ldb) {                                                           \
        async_gemm<CFG>(A, B, C, M, N, K, lda, ldb);                                                 \
    }

//                    BM   BN   BK  WM  WN  STAGES GROUP
using V1 = Cfg<128, 256, 32, 64, 64, 2, 0>;
using V2 = Cfg<128, 256, 32, 64, 64, 4, 0>;
using V3 = Cfg<128, 256, 32, 64, 64, 4, 8>;
using V4 = Cfg<128, 256, 64, 64, 64, 3, 8>;
ASYNC_GEMM(hgemm_async_v1, V1, 1)
ASYNC_GEMM(hgemm_async_v2, V2, 1)
ASYNC_GEMM(hgemm_async_v3, V3, 1)
ASYNC_GEMM(hgemm_async_v4, V4, 1)

// sweep candidates (.notes/day43_sweep.py)
using C1 = Cfg<128, 256, 32, 64, 64, 3, 8>;
using C2 = Cfg<128, 256, 32, 64, 64, 5, 8>;
using C3 = Cfg<128, 256, 64, 64, 64, 4, 8>;
using C4 = Cfg<128, 256, 32, 64, 64, 4, 16>;
using C5 = Cfg<256, 128, 32, 64, 64, 4, 8>;
using C6 = Cfg<256, 128, 64, 64, 64, 3, 8>;
using C7 = Cfg<128, 128, 32, 64, 64, 4, 8>;
using C8 = Cfg<128, 128, 64, 64, 64, 3, 8>;
ASYNC_GEMM(hgemm_async_cand_128x256_k32_s3_g8, C1, 1)
ASYNC_GEMM(hgemm_async_cand_128x256_k32_s4_g8, V3, 1)
ASYNC_GEMM(hgemm_async_cand_128x256_k32_s5_g8, C2, 1)
ASYNC_GEMM(hgemm_async_cand_128x256_k64_s3_g8, V4, 1)
ASYNC_GEMM(hgemm_async_cand_128x256_k64_s4_g8, C3, 1)
ASYNC_GEMM(hgemm_async_cand_128x256_k32_s4_g16, C4, 1)
ASYNC_GEMM(hgemm_async_cand_256x128_k32_s4_g8, C5, 1)
ASYNC_GEMM(hgemm_async_cand_256x128_k64_s3_g8, C6, 1)
ASYNC_GEMM(hgemm_async_cand_128x128_k32_s4_g8, C7, 2)
ASYNC_GEMM(hgemm_async_cand_128x128_k64_s3_g8, C8, 2)

extern "C" __global__ void __launch_bounds__(256) pad_bf16(const uint16_t* __restrict__ src, int rows,
                                                           int cols, uint16_t* __restrict__ dst,
                                                           int rows_p, int cols_p) {
    pad_copy_bf16(src, rows, cols, dst, rows_p, cols_p);
}
