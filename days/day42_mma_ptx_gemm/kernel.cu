// Day 42: mma.sync + ldmatrix in inline PTX, swizzled shared memory. C[M, N] (fp32) =
// A[M, K] @ B[K, N], A and B bf16 row-major, fp32 accumulation (day 41's problem).
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day42_mma_ptx_gemm/kernel.cu
//
// Day 41 left the fragment layout to WMMA, which on sm_90 loads every fragment register with its
// own 32-bit load and transposes B in registers (MOVM). Here the warp drives the tensor core
// itself (common/cuda/mma.cuh): ldmatrix.x4 fills the four A registers of an m16n8k16 tile in
// one instruction, ldmatrix.x4.trans the B registers of two n8 tiles, mma.sync.m16n8k16 does
// 16 x 8 x 16 multiply-adds, and the fp32 results are stored straight from the registers whose
// layout we now know (no staging through shared memory).
//
// A has leading dimension lda, B ldb, both multiples of 8 (the driver pads a copy when K or N is
// not: day 41's operands()); C has leading dimension N; K is the padded reduction length.
//
//   v1  mma.sync m16n8k16 + ldmatrix from plain shared tiles: 128 x 128 block tile, BK = 32,
//       8 warps of 64 x 32 (4 x 4 mma tiles), one shared buffer; 16-byte loads through registers
//   v2  v1 with XOR-swizzled shared tiles: the 8 rows an ldmatrix matrix reads land in 8
//       different bank groups (plain 64-byte A rows: 4-way conflicts, 256-byte B rows: 8-way)
//   v3  larger warp tiles and double buffering: 128 x 256 block tile, 8 warps of 64 x 64 (each A
//       fragment feeds 8 mma, each B fragment 4); the next k-tile's global loads in flight in
//       registers during the MMAs (two shared buffers, one barrier a k-tile); fragments of k16
//       slice s+1 loaded while slice s multiplies (register double buffering)
// Sweep candidates (.notes/day42_sweep.py): hgemm_mma_cand_<BM>x<BN>_w<WM>x<WN>[_nofb].
#include <stdint.h>

#include "mma.cuh"

using namespace cuda100::mma;

template <int BM_, int BN_, int BK_, int WM_, int WN_>
struct Shape {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, WM = WM_, WN = WN_;
    static constexpr int WARPS_N = BN / WN, WARPS = (BM / WM) * (BN / WN), THREADS = 32 * WARPS;
    static constexpr int STAGE_BYTES = (BM * BK + BK * BN) * 2;
    static_assert(BM % WM == 0 && BN % WN == 0 && BK % 16 == 0, "tiles");
};

// SWZ: swizzled tiles; PIPE: two shared buffers with the next tile prefetched into registers;
// FRAG2: fragments of the next k16 slice loaded before this slice's MMAs.
template <class S, bool SWZ, bool PIPE, bool FRAG2>
__device__ __forceinline__ void mma_gemm(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K, int lda, int ldb) {
    using LA = Layout<S::BK, SWZ>;
    using LB = Layout<S::BN, SWZ>;
    using W = WarpTile<S::WM, S::WN>;
    constexpr int KS = S::BK / 16;   // k16 slices a k-tile
    extern __shared__ __align__(128) unsigned char smem[];
    const uint32_t s0 = cuda100::smem_u32(smem);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int tiles_n = (N + S::BN - 1) / S::BN;
    const int bm = (blockIdx.x / tiles_n) * S::BM, bn = (blockIdx.x % tiles_n) * S::BN;
    const int wm0 = (warp / S::WARPS_N) * S::WM, wn0 = (warp % S::WARPS_N) * S::WN;
    const int KT = (K + S::BK - 1) / S::BK;

    W w;
    w.zero();
    StagedTile<S::BM, S::BK, S::THREADS> ta;
    StagedTile<S::BK, S::BN, S::THREADS> tb;
    auto fetch = [&](int kt) {
        ta.load(A, lda, bm, kt * S::BK, M, K, tid);
        tb.load(B, ldb, kt * S::BK, bn, K, N, tid);
    };
    auto stash = [&](int buf) {
        const uint32_t sa = s0 + buf * S::STAGE_BYTES;
        ta.template store<LA>(sa, tid);
        tb.template store<LB>(sa + S::BM * S::BK * 2, tid);
    };
    auto compute = [&](int buf) {
        const uint32_t sa = s0 + buf * S::STAGE_BYTES, sb = sa + S::BM * S::BK * 2;
        if (FRAG2) {
            typename W::Frags f[2];
            W::template load<LA, LB>(f[0], sa, sb, wm0, wn0, 0, lane);
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                if (ks + 1 < KS) W::template load<LA, LB>(f[(ks + 1) & 1], sa, sb, wm0, wn0, ks + 1, lane);
                w.mma(f[ks & 1]);
            }
        } else {
#pragma unroll
            for (int ks = 0; ks < KS; ++ks) {
                typename W::Frags f;
                W::template load<LA, LB>(f, sa, sb, wm0, wn0, ks, lane);
                w.mma(f);
            }
        }
    };

    if (!PIPE) {
        for (int kt = 0; kt < KT; ++kt) {
            fetch(kt);
            stash(0);
            __syncthreads();
            compute(0);
            __syncthreads();   // the buffer is refilled by the next step
        }
    } else {
        fetch(0);
        stash(0);
        __syncthreads();
        for (int kt = 0; kt < KT; ++kt) {
            const bool next = kt + 1 < KT;
            if (next) fetch(kt + 1);          // global loads in flight during the MMAs below
            compute(kt & 1);
            if (next) stash((kt + 1) & 1);    // last read in step kt-1: every thread is past it
            __syncthreads();
        }
    }
    w.store(C, N, M, N, bm + wm0, bn + wn0, lane);
}

#define MMA_GEMM(NAME, S, SWZ, PIPE, FRAG2, MINB)                                                   \
    extern "C" __global__ void __launch_bounds__(S::THREADS, MINB) NAME(                           \
        const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C, int M, \
        int N, int K, int lda, int ldb) {                                                           \
        mma_gemm<S, SWZ, PIPE, FRAG2>(A, B, C, M, N, K, lda, ldb);                                   \
    }

using S128 = Shape<128, 128, 32, 64, 32>;    // v1, v2: 8 warps of 64 x 32
using S128x256 = Shape<128, 256, 32, 64, 64>;  // v3: 8 warps of 64 x 64
using S256x128 = Shape<256, 128, 32, 64, 64>;
using S128w64 = Shape<128, 128, 32, 64, 64>;   // 4 warps of 64 x 64
MMA_GEMM(hgemm_mma_v1, S128, false, false, false, 2)
MMA_GEMM(hgemm_mma_v2, S128, true, false, false, 2)
MMA_GEMM(hgemm_mma_v3, S128x256, true, true, true, 1)
// sweep candidates (.notes/day42_sweep.py); the first is v3's kernel
MMA_GEMM(hgemm_mma_cand_128x256_w64x64, S128x256, true, true, true, 1)
MMA_GEMM(hgemm_mma_cand_128x256_w64x64_nofb, S128x256, true, true, false, 1)
MMA_GEMM(hgemm_mma_cand_256x128_w64x64, S256x128, true, true, true, 1)
MMA_GEMM(hgemm_mma_cand_128x128_w64x64_nofb, S128w64, true, true, false, 1)
MMA_GEMM(hgemm_mma_cand_128x128_w64x32, S128, true, true, true, 1)

extern "C" __global__ void __launch_bounds__(256) pad_bf16(const uint16_t* __restrict__ src, int rows,
                                                           int cols, uint16_t* __restrict__ dst,
                                                           int rows_p, int cols_p) {
    pad_copy_bf16(src, rows, cols, dst, rows_p, cols_p);
}
