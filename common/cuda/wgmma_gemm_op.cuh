// wgmma_gemm_op.cuh: day 45's TMA + wgmma GEMM bodies, generalised over the OPERAND TYPE
// (days 46 and 47 instantiate them for fp8 e4m3 and int8; sm_90a). wgmma_gemm.cuh generalises
// the same bodies over the schedule and the epilogue for bf16 (days 48, 49).
//
//   C[M, N] = A[M, K] . B[N, K]^T, both operands K-major, tiles of 128 x 256 outputs.
//
// A shared-memory tile row is one 128-byte swizzle row along K whatever the element type: 64
// bf16 or 128 fp8/int8 values. So the copy engine's boxes, the stage sizes (48 KB of A and B a
// k-block), the mbarrier ring and the wgmma descriptors are the same for every type; only the
// instruction, the accumulator registers and the epilogue differ. Those come from an `Op`:
//
//   struct Op {
//       static constexpr int BK;                 // elements of K a k-block (128 / element bytes)
//       struct Acc;                              // one consumer warpgroup's registers
//       struct Epilogue;                         // what the store needs (C, scales)
//       template <int INFLIGHT>
//       static void kblock(Acc &, const uint8_t *sA, const uint8_t *sB, bool first);
//           // one k-block on the warpgroup's 64 rows of A (sA) and all 256 rows of B (sB):
//           // fence, issue, commit, then wait until at most INFLIGHT - 1 groups are pending;
//           // first: the tile's first k-block (start the sums instead of adding to them)
//           // (with K = 0 no k-block runs and the zeros are stored)
//       static void drain(Acc &);                // wait for every group still in flight
//       static void zero(Acc &);                 // before each tile
//       static void store(const Acc &, const Epilogue &, int M, int N, int row0, int col0);
//   };
//
// one_buffer<Op>: day 45's v2 (two consumer warpgroups, one shared buffer, no overlap).
// warp_specialised<Op, STAGES, PERSISTENT, INFLIGHT, CLUSTER, GROUP>: day 45's v3..v6 (a
// producer warpgroup and an mbarrier ring; persistent tiles in a grouped order; clusters of
// CLUSTER blocks along M that multicast B). Day 45's kernel.cu explains each line.
// Tensor maps (common/tma.py, uploaded): A dims (K, M) box (BK, 128), B dims (K, N) box
// (BK, 256 / CLUSTER), 128-byte swizzle; rows a multiple of 16 bytes.
#pragma once
#include <cstdint>

#include "tma.cuh"
#include "wgmma.cuh"

namespace cuda100 {
namespace wgmma_op {

constexpr int BM = 128, BN = 256;          // block tile; each consumer warpgroup owns 64 rows
constexpr int ROW_BYTES = 128;             // a tile row along K: one 128-byte swizzle span
constexpr int A_BYTES = BM * ROW_BYTES;    // 16 KB
constexpr int STAGE_BYTES = (BM + BN) * ROW_BYTES;   // 48 KB: A 128 rows + B 256 rows
constexpr int ONE_BUFFER_THREADS = 256, WS_THREADS = 384;

using tma::align1024;

// Tile t of the grouped order: GROUP row-tiles at a time, down the columns of a group.
template <int GROUP>
__device__ __forceinline__ void tile_coords(int t, int tiles_m, int tiles_n, int &tm, int &tn) {
    const int per_group = GROUP * tiles_n;
    const int g = t / per_group, first = g * GROUP;
    const int rows = min(tiles_m - first, GROUP);
    const int in = t - g * per_group;
    tm = first + in % rows;
    tn = in / rows;
}

// ---------------------------------------------------------------------------------------------
// The k-block, drain and zero of an Op whose warpgroup holds one m64n256 accumulator (128
// registers of T a thread) and issues one k32 instruction MMA per 32 bytes of K: the fp8 and
// int8 GEMMs of days 46 and 47 differ only in MMA and T. An Op derives from it and adds its
// Epilogue and store.
template <typename T, void (*MMA)(T (&)[128], uint64_t, uint64_t, int)>
struct K32Accumulator {
    static constexpr int BK = 128;           // 8-bit values a 128-byte row
    struct Acc { T d[128]; };

    template <int INFLIGHT>
    static __device__ __forceinline__ void kblock(Acc &a, const uint8_t *sA, const uint8_t *sB,
                                                  bool first) {
        wgmma::fence_regs(a.d);
        wgmma::fence();
#pragma unroll
        for (int kk = 0; kk < BK / 32; ++kk) {
            MMA(a.d, wgmma::desc_k128(sA + 32 * kk), wgmma::desc_k128(sB + 32 * kk),
                (first && kk == 0) ? 0 : 1);
        }
        wgmma::commit();
        wgmma::wait<INFLIGHT - 1>();
        wgmma::fence_regs(a.d);
    }
    static __device__ __forceinline__ void drain(Acc &a) {
        wgmma::wait<0>();
        wgmma::fence_regs(a.d);
    }
    static __device__ __forceinline__ void zero(Acc &a) {
#pragma unroll
        for (int i = 0; i < 128; ++i) a.d[i] = T(0);
    }
};

// ---------------------------------------------------------------------------------------------
// Two consumer warpgroups (256 threads), one buffer: thread 0 loads a k-block, everyone waits,
// each warpgroup multiplies its 64 rows, and a barrier frees the buffer. Grid (N / 256, M / 128).
template <class Op>
__device__ __forceinline__ void one_buffer(const CUtensorMap *amap, const CUtensorMap *bmap,
                                           const typename Op::Epilogue &epi, int M, int N, int K) {
    extern __shared__ uint8_t wgmma_op_smem[];
    uint8_t *sA = align1024(wgmma_op_smem);
    uint8_t *sB = sA + A_BYTES;
    __shared__ uint64_t bar;
    const int wg = threadIdx.x / 128;
    const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
    if (threadIdx.x == 0) {
        tma::mbar_init(&bar, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();
    typename Op::Acc acc;
    Op::zero(acc);
    const int nk = (K + Op::BK - 1) / Op::BK;
    for (int kb = 0; kb < nk; ++kb) {
        if (threadIdx.x == 0) {
            tma::mbar_arrive_expect_tx(&bar, STAGE_BYTES);
            tma::load_2d(sA, amap, &bar, kb * Op::BK, m0);
            tma::load_2d(sB, bmap, &bar, kb * Op::BK, n0);
        }
        tma::mbar_wait(&bar, kb & 1);
        Op::template kblock<1>(acc, sA + wg * 64 * ROW_BYTES, sB, kb == 0);
        __syncthreads();          // both warpgroups have read the buffer
    }
    Op::store(acc, epi, M, N, m0 + 64 * wg, n0);
}

// ---------------------------------------------------------------------------------------------
// Warp-specialised: warpgroup 0 produces (24 registers a thread, one thread issues the copies),
// warpgroups 1 and 2 consume (240). STAGES buffers of 48 KB; full[s] completes when a stage's
// bytes have landed, empty[s] when every consumer warpgroup (of every block its B went to) has
// read it. The it-th k-block overall uses stage it % STAGES in round it / STAGES.
// Launch with __launch_bounds__(384, 1): ptxas then knows the register count at entry (168)
// and compiles the consumers' code for the 240 that setmaxnreg gives them.
template <class Op, int STAGES, bool PERSISTENT, int INFLIGHT, int CLUSTER, int GROUP>
__device__ __forceinline__ void warp_specialised(const CUtensorMap *amap, const CUtensorMap *bmap,
                                                 const typename Op::Epilogue &epi, int M, int N,
                                                 int K) {
    extern __shared__ uint8_t wgmma_op_smem[];
    uint8_t *base = align1024(wgmma_op_smem);
    __shared__ uint64_t full[STAGES], empty[STAGES];
    const int wg = threadIdx.x / 128;
    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int nk = (K + Op::BK - 1) / Op::BK;
    uint32_t rank = 0;
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
                const int m0 = (um * CLUSTER + (int)rank) * BM, n0 = tn * BN;
                for (int kb = 0; kb < nk; ++kb, ++it) {
                    const int s = it % STAGES, r = it / STAGES;
                    if (r > 0) tma::mbar_wait(&empty[s], (r - 1) & 1);
                    uint8_t *sA = base + s * STAGE_BYTES;
                    uint8_t *sB = sA + A_BYTES;
                    tma::mbar_arrive_expect_tx(&full[s], STAGE_BYTES);
                    tma::load_2d(sA, amap, &full[s], kb * Op::BK, m0);
                    if constexpr (CLUSTER > 1) {
                        // each block fetches 1/CLUSTER of the B box and multicasts it to all
                        constexpr int PART = BN / CLUSTER;
                        tma::load_2d_multicast(sB + rank * PART * ROW_BYTES, bmap, &full[s],
                                               kb * Op::BK, n0 + (int)rank * PART,
                                               (uint16_t)((1 << CLUSTER) - 1));
                    } else {
                        tma::load_2d(sB, bmap, &full[s], kb * Op::BK, n0);
                    }
                }
            }
        }
    } else {
        wgmma::setmaxnreg_inc<240>();
        const int c = wg - 1;
        typename Op::Acc acc;
        int it = 0;
        for (int u = first; u < units; u += step) {
            int um, tn;
            if constexpr (PERSISTENT) tile_coords<GROUP>(u, units_m, tiles_n, um, tn);
            else { um = u / tiles_n; tn = u % tiles_n; }
            const int m0 = (um * CLUSTER + (int)rank) * BM, n0 = tn * BN;
            Op::zero(acc);
            for (int kb = 0; kb < nk; ++kb, ++it) {
                const int s = it % STAGES, r = it / STAGES;
                tma::mbar_wait(&full[s], r & 1);
                const uint8_t *sA = base + s * STAGE_BYTES;
                Op::template kblock<INFLIGHT>(acc, sA + c * 64 * ROW_BYTES, sA + A_BYTES, kb == 0);
                // INFLIGHT 2: the previous k-block's group is done; release its stage
                const int done = it - (INFLIGHT - 1);
                if (kb >= INFLIGHT - 1 && threadIdx.x % 128 < CLUSTER) {
                    if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(&empty[done % STAGES], threadIdx.x % 128);
                    else tma::mbar_arrive(&empty[done % STAGES]);
                }
            }
            if constexpr (INFLIGHT > 1) {
                Op::drain(acc);
                if (nk > 0 && threadIdx.x % 128 < CLUSTER) {
                    if constexpr (CLUSTER > 1) tma::mbar_arrive_cluster(&empty[(it - 1) % STAGES], threadIdx.x % 128);
                    else tma::mbar_arrive(&empty[(it - 1) % STAGES]);
                }
            }
            Op::store(acc, epi, M, N, m0 + 64 * c, n0);
        }
    }
    if constexpr (CLUSTER > 1) {
        // no block may leave while its partner can still multicast into it or arrive on it
        asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::: "memory");
    }
}

}  // namespace wgmma_op
}  // namespace cuda100
