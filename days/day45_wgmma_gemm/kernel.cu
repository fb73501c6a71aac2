// Day 45: a bf16 GEMM on Hopper's warpgroup tensor cores (wgmma), fed by the copy engine (TMA).
//
//   C[M, N] = A[M, K] . B[N, K]^T      bf16 in, fp32 accumulate, bf16 out
//
// A is row-major (K contiguous) and so is B, stored [N, K] like a Linear layer's weight: both
// operands are "K-major", the layout wgmma reads without transposition. Tensor maps (made in
// Python, common/tma.py, and uploaded to device memory: pycuda's launch cannot pass a
// 64-byte-aligned struct by value) describe A and B; out-of-range rows and columns of a box read as
// zero, so ragged M, N and K cost nothing but the partial tiles. Needs sm_90a:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -I ../../common/cuda -cubin kernel.cu
//
// Versions (each one idea on top of the last):
//   v1  one warpgroup, 64x128 tile, TMA loads into one shared buffer, wgmma m64n128k16
//   v2  128x256 tile: two warpgroups, each m64n256k16 on its half of A and all of B
//   v3  warp specialisation: a producer warpgroup (one thread issues TMA) runs a 4-stage ring
//       of mbarriers ahead of two consumer warpgroups; setmaxnreg moves registers to them
//   v4  persistent: one block per SM walks the tiles in a grouped order, so the producer
//       loads the next tile while the consumers store this one
//   v5  two k-blocks of wgmma in flight (wait_group 1): the tensor cores never wait for the
//       consumer to release a stage
//   v6  clusters of two blocks on neighbouring row tiles: each B tile is fetched once from L2
//       and multicast into both blocks' shared memory
#include <cuda_bf16.h>
#include <cstdint>

#include "tma.cuh"
#include "wgmma.cuh"

using namespace cuda100;
typedef __nv_bfloat16 bf16;

constexpr int BK = 64;                 // one 128-byte swizzle row of bf16 per tile row

extern __shared__ uint8_t smem_raw[];  // dynamic shared memory of v2..v6 (aligned below)

using tma::align1024;  // tiles start on the 128-byte swizzle's 1024-byte grid

// One k-block (64 deep) of a warpgroup's 64 x BN tile: four wgmma k16 steps. sA points at the
// warpgroup's 64 rows of A (64 x 64), sB at the BN rows of B (BN x 64).
template <int BN>
__device__ __forceinline__ void mma_kblock(float (&d)[BN / 2], const bf16 *sA, const bf16 *sB,
                                           bool first) {
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
        uint64_t da = wgmma::desc_k128(sA + kk * 16), db = wgmma::desc_k128(sB + kk * 16);
        int scale_d = (first && kk == 0) ? 0 : 1;
        if constexpr (BN == 256) wgmma::m64n256k16_bf16(d, da, db, scale_d);
        else if constexpr (BN == 128) wgmma::m64n128k16_bf16(d, da, db, scale_d);
        else wgmma::m64n64k16_bf16(d, da, db, scale_d);
    }
}

// A warpgroup's 64 x BN accumulators -> bf16 C, rows from row0, columns from col0 (bounds
// checked: the last tiles of a ragged shape are partial). Pairs of columns go out as one
// 4-byte bf16x2 store when N is even (then every pair is 4-byte aligned).
template <int BN>
__device__ __forceinline__ void store_tile(const float (&d)[BN / 2], bf16 *C, int M, int N,
                                           int row0, int col0) {
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const int r = row0 + 16 * warp + lane / 4;
    const bool pairs = (N % 2) == 0;
#pragma unroll
    for (int j = 0; j < BN / 8; ++j) {
        const int c = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int rr = r + 8 * h;
            if (rr >= M || c >= N) continue;
            const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            bf16 *p = C + (size_t)rr * N + c;
            if (pairs) {
                *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v0, v1);
            } else {
                p[0] = __float2bfloat16_rn(v0);
                if (c + 1 < N) p[1] = __float2bfloat16_rn(v1);
            }
        }
    }
}

template <int R>
__device__ __forceinline__ void zero(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) d[i] = 0.f;
}

// ---------------------------------------------------------------------------------------------
// v1: one warpgroup (128 threads), a 64 x 128 tile, one shared buffer. Thread 0 arms the
// mbarrier with the bytes of both boxes and issues the two copies; everyone waits on the
// barrier's phase (it flips once per k-block), runs four wgmma, waits for them, and syncs
// before the buffer is overwritten. Copy and math never overlap: the baseline of the ladder.
extern "C" __global__ void __launch_bounds__(128)
gemm_v1(const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap,
        bf16 *C, int M, int N, int K) {
    constexpr int BM = 64, BN = 128;
    __shared__ alignas(1024) bf16 sA[BM * BK];
    __shared__ alignas(1024) bf16 sB[BN * BK];
    __shared__ uint64_t bar;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    if (threadIdx.x == 0) {
        tma::mbar_init(&bar, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();
    float d[BN / 2];
    zero(d);
    const int nk = (K + BK - 1) / BK;
    for (int kb = 0; kb < nk; ++kb) {
        if (threadIdx.x == 0) {
            tma::mbar_arrive_expect_tx(&bar, (BM + BN) * BK * sizeof(bf16));
            tma::load_2d(sA, amap, &bar, kb * BK, m0);
            tma::load_2d(sB, bmap, &bar, kb * BK, n0);
        }
        tma::mbar_wait(&bar, kb & 1);
        wgmma::fence_regs(d);
        wgmma::fence();
        mma_kblock<BN>(d, sA, sB, kb == 0);
        wgmma::commit();
        wgmma::wait<0>();
        wgmma::fence_regs(d);
        __syncthreads();          // all of the warpgroup has read the buffer
    }
    store_tile<BN>(d, C, M, N, m0, n0);
}

// ---------------------------------------------------------------------------------------------
// v2: a 128 x 256 tile: two warpgroups, each the m64n256 instruction on its 64 rows of A and
// all 256 rows of B. Per k-block a block loads 48 KB and does 4x the math of v1's 24 KB: the
// copy is amortised, and B is read from L2 half as often per output.
extern "C" __global__ void __launch_bounds__(256)
gemm_v2(const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap,
        bf16 *C, int M, int N, int K) {
    constexpr int BM = 128, BN = 256;
    bf16 *sA = reinterpret_cast<bf16 *>(align1024(smem_raw));
    bf16 *sB = sA + BM * BK;
    __shared__ uint64_t bar;
    const int wg = threadIdx.x / 128;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    if (threadIdx.x == 0) {
        tma::mbar_init(&bar, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();
    float d[BN / 2];
    zero(d);
    const int nk = (K + BK - 1) / BK;
    for (int kb = 0; kb < nk; ++kb) {
        if (threadIdx.x == 0) {
            tma::mbar_arrive_expect_tx(&bar, (BM + BN) * BK * sizeof(bf16));
            tma::load_2d(sA, amap, &bar, kb * BK, m0);
            tma::load_2d(sB, bmap, &bar, kb * BK, n0);
        }
        tma::mbar_wait(&bar, kb & 1);
        wgmma::fence_regs(d);
        wgmma::fence();
        mma_kblock<BN>(d, sA + wg * 64 * BK, sB, kb == 0);
        wgmma::commit();
        wgmma::wait<0>();
        wgmma::fence_regs(d);
        __syncthreads();
    }
    store_tile<BN>(d, C, M, N, m0 + 64 * wg, n0);
}

// ---------------------------------------------------------------------------------------------
// v3..v6: warp-specialised. Warpgroup 0 is the producer: it keeps only 24 registers a thread
// and one of its threads issues the copies. Warpgroups 1 and 2 are consumers with 240.
// STAGES buffers of (A 128x64, B 256x64) = 48 KB each; per stage two mbarriers:
//   full[s]  completes when the copy engine has delivered the stage's bytes (1 arrival: the
//            producer's arrive.expect_tx, plus the transaction bytes);
//   empty[s] completes when every consumer warpgroup (of every block of the cluster that the
//            stage's B is multicast to) has finished reading it.
// A stage is used for the it-th k-block overall (it counts on across tiles); round r = it /
// STAGES; full[s]'s phase r completes for round r, so waiters use parity r & 1; the producer
// re-fills stage s in round r >= 1 after empty[s]'s phase r - 1.
constexpr int WS_BM = 128, WS_BN = 256, WS_THREADS = 384;
constexpr int STAGE_BYTES = (WS_BM + WS_BN) * BK * 2;

// Tile t of the grouped order: GROUP row-tiles at a time, down the columns of a group, so
// blocks running together share A and B panels in L2.
template <int GROUP>
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int &tm, int &tn) {
    const int per_group = GROUP * tiles_n;
    const int g = t / per_group, first = g * GROUP;
    const int rows = min(tiles_m - first, GROUP);
    const int in = t - g * per_group;
    tm = first + in % rows;
    tn = in / rows;
}

// PERSISTENT: loop over tiles; INFLIGHT: wgmma groups kept in flight (1 or 2);
// CLUSTER: blocks per cluster along M (1 or 2), sharing B by multicast.
template <int STAGES, bool PERSISTENT, int INFLIGHT, int CLUSTER, int GROUP>
__device__ __forceinline__ void gemm_ws(const CUtensorMap *amap, const CUtensorMap *bmap,
                                        bf16 *C, int M, int N, int K) {
    uint8_t *base = align1024(smem_raw);
    __shared__ uint64_t full[STAGES], empty[STAGES];
    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + WS_BM - 1) / WS_BM, tiles_n = (N + WS_BN - 1) / WS_BN;
    const int nk = (K + BK - 1) / BK;
    uint32_t rank = 0;                   // this block's rank in its cluster
    if constexpr (CLUSTER > 1) asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tma::mbar_init(&full[s], 1);
            tma::mbar_init(&empty[s], 2 * CLUSTER);
        }
        tma::fence_barrier_init();
    }
    if constexpr (CLUSTER > 1) {
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    } else {
        __syncthreads();
    }

    // This block's tiles: tile t of the grouped order (a cluster takes CLUSTER neighbouring
    // row tiles of one column: its tile index counts cluster tiles of CLUSTER x 1).
    const int units_m = (tiles_m + CLUSTER - 1) / CLUSTER;
    const int units = units_m * tiles_n;
    const int first = PERSISTENT ? (int)(blockIdx.x / CLUSTER) : (int)(blockIdx.y * tiles_n + blockIdx.x);
    const int step = PERSISTENT ? (int)(gridDim.x / CLUSTER) : units;

    if (wg == 0) {
        wgmma::setmaxnreg_dec<24>();
        if (threadIdx.x == 0) {
            int it = 0;
            for (int u = first; u < units; u += step) {
                int um, tn;
                if constexpr (PERSISTENT) tile_coords<GROUP>(u, units_m, tiles_n, um, tn);
                else { um = u / tiles_n; tn = u % tiles_n; }
                const int m0 = (um * CLUSTER + (int)rank) * WS_BM, n0 = tn * WS_BN;
                for (int kb = 0; kb < nk; ++kb, ++it) {
                    const int s = it % STAGES, r = it / STAGES;
                    if (r > 0) tma::mbar_wait(&empty[s], (r - 1) & 1);
                    bf16 *sA = reinterpret_cast<bf16 *>(base + s * STAGE_BYTES);
                    bf16 *sB = sA + WS_BM * BK;
                    tma::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
                    tma::load_2d(sA, amap, &full[s], kb * BK, m0);
                    if constexpr (CLUSTER > 1) {
                        // each block fetches half of the B box and multicasts it to both
                        constexpr int HALF = WS_BN / 2;
                        tma::load_2d_multicast(sB + rank * HALF * BK, bmap, &full[s], kb * BK,
                                               n0 + (int)rank * HALF, (uint16_t)((1 << CLUSTER) - 1));
                    } else {
                        tma::load_2d(sB, bmap, &full[s], kb * BK, n0);
                    }
                }
            }
        }
    } else {
        wgmma::setmaxnreg_inc<240>();
        const int c = wg - 1;
        float d[WS_BN / 2];
        zero(d);
        int it = 0;
        for (int u = first; u < units; u += step) {
            int um, tn;
            if constexpr (PERSISTENT) tile_coords<GROUP>(u, units_m, tiles_n, um, tn);
            else { um = u / tiles_n; tn = u % tiles_n; }
            const int m0 = (um * CLUSTER + (int)rank) * WS_BM, n0 = tn * WS_BN;
            for (int kb = 0; kb < nk; ++kb, ++it) {
                const int s = it % STAGES, r = it / STAGES;
                tma::mbar_wait(&full[s], r & 1);
                const bf16 *sA = reinterpret_cast<const bf16 *>(base + s * STAGE_BYTES);
                const bf16 *sB = sA + WS_BM * BK;
                wgmma::fence_regs(d);
                wgmma::fence();
                mma_kblock<WS_BN>(d, sA + c * 64 * BK, sB, kb == 0);
                wgmma::commit();
                // INFLIGHT 2: wait only for the previous k-block's group, release its stage
                wgmma::wait<INFLIGHT - 1>();
                wgmma::fence_regs(d);
                const int done = it - (INFLIGHT - 1);
                if (kb >= INFLIGHT - 1 && threadIdx.x % 128 < CLUSTER) {
                    if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(&empty[done % STAGES], threadIdx.x % 128);
                    else tma::mbar_arrive(&empty[done % STAGES]);
                }
            }
            if constexpr (INFLIGHT > 1) {
                wgmma::wait<0>();
                wgmma::fence_regs(d);
                if (threadIdx.x % 128 < CLUSTER) {
                    if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(&empty[(it - 1) % STAGES], threadIdx.x % 128);
                    else tma::mbar_arrive(&empty[(it - 1) % STAGES]);
                }
            }
            store_tile<WS_BN>(d, C, M, N, m0 + 64 * c, n0);
        }
    }
    if constexpr (CLUSTER > 1) {
        // no block may leave while its partner can still multicast into it or arrive on it
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    }
}

#define WS_ARGS const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap, \
                bf16 *C, int M, int N, int K

extern "C" __global__ void __launch_bounds__(WS_THREADS, 1) gemm_v3(WS_ARGS) {
    gemm_ws<4, false, 1, 1, 8>(amap, bmap, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1) gemm_v4(WS_ARGS) {
    gemm_ws<4, true, 1, 1, 8>(amap, bmap, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1) gemm_v5(WS_ARGS) {
    gemm_ws<4, true, 2, 1, 8>(amap, bmap, C, M, N, K);
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(WS_THREADS, 1) gemm_v6(WS_ARGS) {
    gemm_ws<4, true, 2, 2, 8>(amap, bmap, C, M, N, K);
}

// ---------------------------------------------------------------------------------------------
// K not a multiple of 8: a row of A or B is then no multiple of 16 bytes, which a tensor map
// cannot describe. Copy into [rows, K8] with zero columns first (timed with the GEMM).
extern "C" __global__ void pad_k_v0(const bf16 *__restrict__ src, bf16 *__restrict__ dst,
                                    int rows, int K, int K8) {
    tma::pad_rows(src, dst, rows, K, K8);
}

#ifdef DAY45_SWEEP
// .notes/day45_sweep.py: the grouped order's group size, and v6's cluster with fewer stages
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(WS_THREADS, 1) gemm_v6_g4(WS_ARGS) {
    gemm_ws<4, true, 2, 2, 4>(amap, bmap, C, M, N, K);
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(WS_THREADS, 1) gemm_v6_g16(WS_ARGS) {
    gemm_ws<4, true, 2, 2, 16>(amap, bmap, C, M, N, K);
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(WS_THREADS, 1) gemm_v6_i1(WS_ARGS) {
    gemm_ws<4, true, 1, 2, 8>(amap, bmap, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(WS_THREADS, 1) gemm_v4_g16(WS_ARGS) {
    gemm_ws<4, true, 1, 1, 16>(amap, bmap, C, M, N, K);
}
#endif
