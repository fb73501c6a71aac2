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
#include "wgmma_gemm.cuh"

using namespace cuda100;
typedef __nv_bfloat16 bf16;

constexpr int BK = 64;                 // one 128-byte swizzle row of bf16 per tile row

extern __shared__ uint8_t smem_raw[];  // dynamic shared memory of v2..v6 (aligned below)

__device__ __forceinline__ uint8_t *align1024(uint8_t *p) {
    // The 128-byte swizzle pattern repeats every 1024 bytes: tiles must start on that grid,
    // in the copy engine's view and in wgmma's.
    uint32_t a = tma::smem_addr(p);
    return p + ((1024 - (a & 1023)) & 1023);
}

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
// v3..v6: warp-specialised: common/cuda/wgmma_gemm.cuh (wsgemm::run) is this kernel, with the
// work list (a Schedule) and the end of a tile (an Epilogue) as template arguments (day 48
// adds split-K and stream-K schedules to it, day 49 fused epilogues).
namespace W = cuda100::wsgemm;

#define WS_ARGS const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap, \
                bf16 *C, int M, int N, int K

// PERSISTENT: one block per SM over tiles in the grouped order; else one block per tile
// (row-major, grid (tiles_n, tiles_m)). INFLIGHT: wgmma groups in flight. CLUSTER: 1 or 2.
template <bool PERSISTENT, int INFLIGHT, int CLUSTER>
__device__ __forceinline__ void gemm_ws(WS_ARGS) {
    const W::Geometry g = W::Geometry::make(M, N, K, 256, CLUSTER);
    W::StoreBF16<256> epi{C, M, N};
    if constexpr (PERSISTENT) {
        W::DataParallel<8> s(g, blockIdx.x / CLUSTER, gridDim.x / CLUSTER, W::cluster_rank<CLUSTER>());
        W::run<256, 4, CLUSTER, INFLIGHT>(amap, bmap, s, epi);
    } else {
        W::DataParallel<0> s(g, blockIdx.y * g.tiles_n + blockIdx.x, g.tiles(), 0);
        W::run<256, 4, 1, INFLIGHT>(amap, bmap, s, epi);
    }
}

extern "C" __global__ void __launch_bounds__(W::THREADS, 1) gemm_v3(WS_ARGS) { gemm_ws<false, 1, 1>(amap, bmap, C, M, N, K); }
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) gemm_v4(WS_ARGS) { gemm_ws<true, 1, 1>(amap, bmap, C, M, N, K); }
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) gemm_v5(WS_ARGS) { gemm_ws<true, 2, 1>(amap, bmap, C, M, N, K); }
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(W::THREADS, 1) gemm_v6(WS_ARGS) {
    gemm_ws<true, 2, 2>(amap, bmap, C, M, N, K);
}

// ---------------------------------------------------------------------------------------------
// K not a multiple of 8: a row of A or B is then no multiple of 16 bytes, which a tensor map
// cannot describe. Copy into [rows, K8] with zero columns first (timed with the GEMM).
extern "C" __global__ void pad_k_v0(const bf16 *__restrict__ src, bf16 *__restrict__ dst,
                                    int rows, int K, int K8) {
    const size_t total = (size_t)rows * K8;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total;
         i += (size_t)gridDim.x * blockDim.x) {
        const int r = (int)(i / K8), k = (int)(i % K8);
        dst[i] = k < K ? src[(size_t)r * K + k] : __float2bfloat16_rn(0.f);
    }
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
