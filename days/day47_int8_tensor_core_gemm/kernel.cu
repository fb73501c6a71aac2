// Day 47: an int8 GEMM on Hopper's warpgroup tensor cores (day 39's dp4a GEMM, revisited).
//
//   C[M, N] = A[M, K] . B[N, K]^T      int8 in, int32 accumulate (exact), int32 out
//
// Day 39 summed int8 products four at a time with dp4a on the CUDA cores. Here the same
// products go through wgmma (`wgmma.mma_async ... m64n256k32.s32.s8.s8`): 64 x 256 x 32
// multiply-adds per instruction, the sums kept in int32 registers, exact (a product is at most
// 2^14, so K up to 131071 cannot overflow). Both operands K-major (no transpose for 8-bit
// types): B is stored [N, K], the transpose of day 39's layout.
//
// Everything else is day 45's machinery, byte for byte: a k32 int8 wgmma reads 32 bytes of a
// row like a k16 bf16 one, so a 128-byte swizzle row holds 128 int8 values (BK = 128), the
// 48 KB stages, the tensor maps and the descriptors are unchanged. The kernel bodies are day
// 45's, generalised over the operand type in common/cuda/wgmma_gemm_op.cuh (day 46 uses them
// for fp8); this file supplies the int8 part (an `Op`). Needs sm_90a:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -I ../../common/cuda -cubin kernel.cu
//
// Versions:
//   v1  a 128x256 tile, two warpgroups of m64n256k32 s8, one shared buffer (day 45's v2)
//   v2  warp specialisation: producer warpgroup, 4-stage mbarrier ring, persistent blocks in a
//       grouped tile order, two k-blocks in flight (day 45's v5)
//   v3  clusters of two blocks along M: each B tile fetched once, multicast to both (day 45's v6)
#include <cstdint>

#include "wgmma_gemm_op.cuh"

using namespace cuda100;
namespace wg = cuda100::wgmma_op;

struct I32Epilogue {
    int *C;
};

struct Int8 : wg::K32Accumulator<int, wgmma::m64n256k32_s8> {
    using Epilogue = I32Epilogue;

    // A warpgroup's 64 x 256 int32 sums (day 45's register layout: d[4j + 2h + {0, 1}] is row
    // 16 warp + lane / 4 + 8h, columns 8j + 2 (lane % 4) + {0, 1}) -> C, bounds checked. Pairs
    // of columns go out as one 8-byte store when N is even (then every pair is 8-byte aligned).
    static __device__ __forceinline__ void store(const Acc &a, const Epilogue &e, int M, int N,
                                                 int row0, int col0) {
        const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
        const int r = row0 + 16 * warp + lane / 4;
        const bool pairs = (N % 2) == 0;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int c = col0 + 8 * j + 2 * (lane % 4);
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int rr = r + 8 * h;
                if (rr >= M || c >= N) continue;
                int *p = e.C + (size_t)rr * N + c;
                if (pairs) {
                    *reinterpret_cast<int2 *>(p) = make_int2(a.d[4 * j + 2 * h], a.d[4 * j + 2 * h + 1]);
                } else {
                    p[0] = a.d[4 * j + 2 * h];
                    if (c + 1 < N) p[1] = a.d[4 * j + 2 * h + 1];
                }
            }
        }
    }
};

#define S8_ARGS const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap, \
                int *C, int M, int N, int K

// v1: one buffer, 256 threads, grid (N / 256, M / 128)
extern "C" __global__ void __launch_bounds__(wg::ONE_BUFFER_THREADS) s8_gemm_v1(S8_ARGS) {
    wg::one_buffer<Int8>(amap, bmap, I32Epilogue{C}, M, N, K);
}

// v2, v3 and the sweep's candidates: 384 threads, 4 stages. Names: _f INFLIGHT, _g GROUP.
#define WS_KERNEL(name, INFLIGHT, GROUP)                                                      \
    extern "C" __global__ void __launch_bounds__(wg::WS_THREADS, 1) name(S8_ARGS) {           \
        wg::warp_specialised<Int8, 4, true, INFLIGHT, 1, GROUP>(amap, bmap, I32Epilogue{C},   \
                                                                M, N, K);                     \
    }
#define WS_CLUSTER_KERNEL(name, INFLIGHT, GROUP)                                              \
    extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(wg::WS_THREADS, 1) \
    name(S8_ARGS) {                                                                           \
        wg::warp_specialised<Int8, 4, true, INFLIGHT, 2, GROUP>(amap, bmap, I32Epilogue{C},   \
                                                                M, N, K);                     \
    }

WS_KERNEL(s8_gemm_v2, 2, 8)
WS_CLUSTER_KERNEL(s8_gemm_v3, 2, 8)

// sweep candidates (.notes/day47_sweep.py)
WS_KERNEL(s8_gemm_v2_f1_g8, 1, 8)
WS_CLUSTER_KERNEL(s8_gemm_v3_f1_g8, 1, 8)
WS_CLUSTER_KERNEL(s8_gemm_v3_f2_g16, 2, 16)

// ---------------------------------------------------------------------------------------------
// K not a multiple of 16: a row is then no multiple of 16 bytes, which a tensor map cannot
// describe. Copy into [rows, K16] with zeros after K (timed with the GEMM; zeros add nothing).
extern "C" __global__ void pad_k_s8(const int8_t *__restrict__ src, int8_t *__restrict__ dst,
                                    int rows, int K, int K16) {
    tma::pad_rows(src, dst, rows, K, K16);
}
