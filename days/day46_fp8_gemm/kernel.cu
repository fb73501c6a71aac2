// Day 46: an fp8 (e4m3) GEMM with per-tensor scales on Hopper's warpgroup tensor cores.
//
//   C[M, N] = scale_a * scale_b * (A[M, K] . B[N, K]^T)     A, B fp8 e4m3, C bf16
//
// A and B hold fp8 codes (one byte each; the host quantizes x / scale, common/fp8.py); the two
// per-tensor scales live on the device (scales[0] = scale_a, scales[1] = scale_b, as
// torch._scaled_mm takes them) and are applied once, in the epilogue. Both operands are
// K-major: for 8-bit types wgmma has no transpose, so that is the only layout it reads.
//
// Everything but the instruction is day 45's: a k32 fp8 wgmma reads 32 bytes of each row, as a
// k16 bf16 one does, so a 128-byte swizzle row is 128 fp8 values (BK = 128), the stages are
// the same 48 KB, the descriptors the same. The kernel bodies are day 45's, generalised over
// the operand type in common/cuda/wgmma_gemm_op.cuh; this file supplies the fp8 part (an `Op`).
// Needs sm_90a:
//   nvcc -gencode=arch=compute_90a,code=sm_90a -I ../../common/cuda -cubin kernel.cu
//
// Versions:
//   v1  day 45's v2 in fp8: a 128x256 tile, two warpgroups of m64n256k32, one shared buffer
//   v2  warp specialisation: producer warpgroup, 4-stage mbarrier ring, persistent blocks in a
//       grouped tile order, two k-blocks in flight (day 45's v5)
//   v3  clusters of two blocks along M: each B tile fetched once, multicast to both (day 45's v6)
//   v4  v3 with two-level accumulation: the tensor cores' fp8 accumulator keeps about 13
//       mantissa bits, so every k-block (128 deep) is summed by wgmma into a fresh register
//       tile and then added into fp32 accumulators on the CUDA cores (what cuBLAS does unless
//       asked for "fast accumulation"); to fit the registers, each warpgroup runs its 256
//       columns as two halves of m64n128k32
#include <cuda_bf16.h>
#include <cstdint>

#include "wgmma_gemm_op.cuh"

using namespace cuda100;
namespace wg = cuda100::wgmma_op;
typedef __nv_bfloat16 bf16;

struct Fp8Epilogue {
    bf16 *C;
    const float *scales;    // [scale_a, scale_b] in device memory
};

// A warpgroup's 64 x 256 fp32 accumulators (day 45's register layout) -> bf16 C, times the
// product of the scales; rows from row0, columns from col0, bounds checked (ragged tiles).
// Pairs of columns go out as one 4-byte bf16x2 store when N is even.
__device__ __forceinline__ void store_scaled(const float (&d)[128], const Fp8Epilogue &e, int M,
                                             int N, int row0, int col0) {
    const float s = e.scales[0] * e.scales[1];
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
            const float v0 = s * d[4 * j + 2 * h], v1 = s * d[4 * j + 2 * h + 1];
            bf16 *p = e.C + (size_t)rr * N + c;
            if (pairs) {
                *reinterpret_cast<__nv_bfloat162 *>(p) = __floats2bfloat162_rn(v0, v1);
            } else {
                p[0] = __float2bfloat16_rn(v0);
                if (c + 1 < N) p[1] = __float2bfloat16_rn(v1);
            }
        }
    }
}

// Fast accumulation: the wgmma accumulators run over all of K (as cuBLAS's use_fast_accum).
struct Fp8Fast : wg::K32Accumulator<float, wgmma::m64n256k32_e4m3> {
    using Epilogue = Fp8Epilogue;
    static __device__ __forceinline__ void store(const Acc &a, const Epilogue &e, int M, int N,
                                                 int row0, int col0) {
        store_scaled(a.d, e, M, N, row0, col0);
    }
};

// Two-level accumulation: per k-block and per half of the 256 columns, four m64n128k32 sum 128
// products of each output into t (the tensor cores' own accumulation, 13-bit mantissa), then
// t is added into the fp32 d. Columns 128h.. of the n256 layout are d[64h ..]: the n128 layout
// of t, shifted (the 8-column blocks are numbered on). t is a local of each half: its first
// wgmma ignores its old value (scale_d = 0), so nothing keeps it alive across the epilogue.
// `first` is not needed: the body zeroes d before each tile (a branch on it here made ptxas
// duplicate the loop body and spill).
struct Fp8Promoted : Fp8Fast {              // its zero, Acc and store; its own k-block

    template <int INFLIGHT>
    static __device__ __forceinline__ void kblock(Acc &a, const uint8_t *sA, const uint8_t *sB,
                                                  bool first) {
        static_assert(INFLIGHT == 1, "the promotion reads t right after its wgmma");
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            float t[64];
            wgmma::fence_regs(t);
            wgmma::fence();
#pragma unroll
            for (int kk = 0; kk < BK / 32; ++kk) {
                wgmma::m64n128k32_e4m3(t, wgmma::desc_k128(sA + 32 * kk),
                                       wgmma::desc_k128(sB + h * 128 * wg::ROW_BYTES + 32 * kk),
                                       kk == 0 ? 0 : 1);
            }
            wgmma::commit();
            wgmma::wait<0>();
            wgmma::fence_regs(t);
            // d was zeroed before the tile (Op::zero), so no k-block is special here
#pragma unroll
            for (int i = 0; i < 64; ++i) a.d[64 * h + i] += t[i];
        }
    }
    static __device__ __forceinline__ void drain(Acc &) {}
};

#define FP8_ARGS const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap, \
                 bf16 *C, const float *__restrict__ scales, int M, int N, int K

// v1: one buffer, 256 threads, grid (N / 256, M / 128)
extern "C" __global__ void __launch_bounds__(wg::ONE_BUFFER_THREADS) fp8_gemm_v1(FP8_ARGS) {
    wg::one_buffer<Fp8Fast>(amap, bmap, Fp8Epilogue{C, scales}, M, N, K);
}

// v2..v4 and the sweep's candidates: 384 threads, 4 stages. Names: _f INFLIGHT, _g GROUP, _c1
// no cluster; the plain vN names are the versions.
#define WS_KERNEL(name, OP, INFLIGHT, CLUSTER, GROUP)                                         \
    extern "C" __global__ void __launch_bounds__(wg::WS_THREADS, 1) name(FP8_ARGS) {          \
        wg::warp_specialised<OP, 4, true, INFLIGHT, CLUSTER, GROUP>(                          \
            amap, bmap, Fp8Epilogue{C, scales}, M, N, K);                                     \
    }
#define WS_CLUSTER_KERNEL(name, OP, INFLIGHT, GROUP)                                          \
    extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(wg::WS_THREADS, 1) \
    name(FP8_ARGS) {                                                                          \
        wg::warp_specialised<OP, 4, true, INFLIGHT, 2, GROUP>(                                \
            amap, bmap, Fp8Epilogue{C, scales}, M, N, K);                                     \
    }

WS_KERNEL(fp8_gemm_v2, Fp8Fast, 2, 1, 8)
WS_CLUSTER_KERNEL(fp8_gemm_v3, Fp8Fast, 2, 8)
WS_CLUSTER_KERNEL(fp8_gemm_v4, Fp8Promoted, 1, 8)

// sweep candidates (.notes/day46_sweep.py): v3 with one k-block in flight or a wider group;
// v4 with a wider group or without the cluster
WS_CLUSTER_KERNEL(fp8_gemm_v3_f1_g8, Fp8Fast, 1, 8)
WS_CLUSTER_KERNEL(fp8_gemm_v3_f2_g16, Fp8Fast, 2, 16)
WS_CLUSTER_KERNEL(fp8_gemm_v4_g16, Fp8Promoted, 1, 16)
WS_KERNEL(fp8_gemm_v4_c1, Fp8Promoted, 1, 1, 8)

// ---------------------------------------------------------------------------------------------
// K not a multiple of 16: a row of A or B is then no multiple of 16 bytes, which a tensor map
// cannot describe. Copy into [rows, K16] with zero bytes (fp8 +0) after K (timed with the GEMM).
extern "C" __global__ void pad_k_u8(const uint8_t *__restrict__ src, uint8_t *__restrict__ dst,
                                    int rows, int K, int K16) {
    tma::pad_rows(src, dst, rows, K, K16);
}
