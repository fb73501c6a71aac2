// Day 25: the fp32 SGEMM ladder, continued from day 8, against cuBLAS.
//
//   C[M, N] = A[M, K] @ B[K, N], fp32, row-major, any M, N, K >= 1.
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day25_cublas_integration/kernel.cu
//
// The block tile lives in common/cuda/sgemm.cuh (day8::gemm_tile is day 8's v7; gemm_tile_cfg
// is this day's configurable tile). This file only maps blocks to tiles and instantiates them:
//   v1  day 8's v7 through sgemm.cuh: 128x128 block, 16x16 threads, 8x8 outputs each, BK = 8,
//       next tile prefetched into registers, two shared buffers
//   v2  warptiling: each warp owns a 32x64 sub-tile, its lanes a 4x8 grid of 8x8 outputs
//       (2x2 pieces of 4x4); float4 shared loads, conflict-free (see README)
//   v3  v2 with BK = 16: half the barriers a K step, the k loop fully unrolled
//   v4  cp.async: global -> shared without registers (16-byte cp.async.cg, zero-filled past the
//       edges), A kept k-contiguous in shared memory, the next stage in flight during the FMAs
//   v5  v4 + grouped block order (8 tile-rows a group) for L2 reuse
//   v6  autotuned: the driver picks one of the sgemm_v6_<config> kernels per shape from a
//       table measured on the GPU (.notes/day25_sweep.py)
// Every kernel exists twice: _vec4 (16-byte loads and stores: K % 4 == 0 and N % 4 == 0) and
// _scalar (any shape). Grid (cdiv(N, BN), cdiv(M, BM)), one block per BMxBN tile of C;
// blockDim.x = the config's threads.
#include "sgemm.cuh"

namespace sg = cuda100::sgemm;

// Tile (bm, bn) of block (blockIdx.x, blockIdx.y) in a grid of tiles_n x tiles_m blocks.
// GROUP = 1: block (x, y) takes tile-row y, tile-column x. GROUP > 1: the blocks, in launch
// order, walk down GROUP tile-rows before moving one tile-column right, so blocks that run at
// the same time share B's column panels and GROUP row panels of A (L2 reuse).
template <int BM, int BN, int GROUP>
__device__ __forceinline__ void tile_of(int M, int& bm, int& bn) {
    if (GROUP <= 1) {
        bm = blockIdx.y * BM;
        bn = blockIdx.x * BN;
        return;
    }
    const int tiles_m = (M + BM - 1) / BM, tiles_n = gridDim.x;
    const int id = blockIdx.y * tiles_n + blockIdx.x;
    const int per_group = GROUP * tiles_n, first = (id / per_group) * GROUP;
    const int rows = min(tiles_m - first, GROUP), in = id % per_group;
    bm = (first + in % rows) * BM;
    bn = (in / rows) * BN;
}

// v1: day 8's tile, row-major block order
template <bool VEC>
__device__ __forceinline__ void day8_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    int bm, bn;
    tile_of<sg::day8::BM, sg::day8::BN, 1>(M, bm, bn);
    sg::day8::gemm_tile<VEC>(A, K, B, N, M, N, K, bm, bn, sg::Store<VEC>{C, N});
}
extern "C" __global__ void __launch_bounds__(sg::day8::THREADS, 2)
sgemm_v1_vec4(const float* A, const float* B, float* C, int M, int N, int K) {
    day8_gemm<true>(A, B, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(sg::day8::THREADS, 2)
sgemm_v1_scalar(const float* A, const float* B, float* C, int M, int N, int K) {
    day8_gemm<false>(A, B, C, M, N, K);
}

template <class Cfg, int GROUP, bool VEC>
__device__ __forceinline__ void cfg_gemm(const float* A, const float* B, float* C, int M, int N, int K) {
    int bm, bn;
    tile_of<Cfg::BM, Cfg::BN, GROUP>(M, bm, bn);
    sg::gemm_tile_cfg<Cfg, VEC>(A, K, B, N, M, N, K, bm, bn, sg::Store<VEC>{C, N});
}

// 512 threads an SM at least: 2 blocks of 256, 4 of 128, 8 of 64 (128 registers a thread)
#define SGEMM_ENTRY(NAME, CFG, GROUP)                                                          \
    extern "C" __global__ void __launch_bounds__(CFG::THREADS, 512 / CFG::THREADS)             \
        NAME##_vec4(const float* A, const float* B, float* C, int M, int N, int K) {           \
        cfg_gemm<CFG, GROUP, true>(A, B, C, M, N, K);                                          \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(CFG::THREADS, 512 / CFG::THREADS)             \
        NAME##_scalar(const float* A, const float* B, float* C, int M, int N, int K) {         \
        cfg_gemm<CFG, GROUP, false>(A, B, C, M, N, K);                                         \
    }

//                    BM   BN   BK TY stages cp.async A-vector
using V2 = sg::Config<128, 128, 8, 4, 2, false>;
using V3 = sg::Config<128, 128, 16, 4, 2, false>;
using V4 = sg::Config<128, 128, 16, 4, 2, true, 4>;
SGEMM_ENTRY(sgemm_v2, V2, 1)
SGEMM_ENTRY(sgemm_v3, V3, 1)
SGEMM_ENTRY(sgemm_v4, V4, 1)
SGEMM_ENTRY(sgemm_v5, V4, 8)

// v6's candidates (name: BMxBN, BK, stages, TY = lanes down a warp's rows, A-vector width),
// every one with grouped block order. The driver's TUNED table picks one per shape.
using T1 = sg::Config<128, 128, 16, 4, 2, true, 4>;   // = v5
using T4 = sg::Config<128, 128, 16, 8, 2, true, 4>;   // warp tile 64x32
using T5 = sg::Config<128, 128, 16, 4, 2, true, 2>;   // float2 A reads: fewer registers
using T6 = sg::Config<128, 64, 16, 4, 3, true, 4>;    // 128 threads
using T7 = sg::Config<64, 128, 16, 4, 3, true, 4>;    // 128 threads
using T8 = sg::Config<64, 64, 16, 4, 3, true, 4>;     // 64 threads
SGEMM_ENTRY(sgemm_v6_128x128_k16_s2_t4_a4, T1, 8)
SGEMM_ENTRY(sgemm_v6_128x128_k16_s2_t8_a4, T4, 8)
SGEMM_ENTRY(sgemm_v6_128x128_k16_s2_t4_a2, T5, 8)
SGEMM_ENTRY(sgemm_v6_128x64_k16_s3_t4_a4, T6, 8)
SGEMM_ENTRY(sgemm_v6_64x128_k16_s3_t4_a4, T7, 8)
SGEMM_ENTRY(sgemm_v6_64x64_k16_s3_t4_a4, T8, 8)

// For the bf16 cuBLAS baseline only (not a rung): x -> bf16, round to nearest even, on the device.
#include <cuda_bf16.h>
extern "C" __global__ void f32_to_bf16(const float* __restrict__ x, __nv_bfloat16* __restrict__ y,
                                       long long n) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        y[i] = __float2bfloat16_rn(x[i]);
}
