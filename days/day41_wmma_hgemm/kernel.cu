// Day 41: tensor cores through WMMA. C[M, N] (fp32) = A[M, K] @ B[K, N], A and B bf16 row-major,
// fp32 accumulation.
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day41_wmma_hgemm/kernel.cu
//
// nvcuda::wmma is CUDA's portable tensor-core API: a warp loads 16 x 16 "fragments" of A and B
// (load_matrix_sync), multiplies them into a 16 x 16 fp32 accumulator fragment (mma_sync) and
// stores it (store_matrix_sync). Which lane holds which element is unspecified, so the only ways
// out of a fragment are whole-tile loads and stores. On sm_90 one bf16 mma_sync is two
// HMMA.16816.F32.BF16 instructions; the fragment loads become one 32-bit load per register
// (LD, not ldmatrix), plus an in-register transpose (MOVM) per register for a row-major B.
//
// Every kernel: A has leading dimension lda, B ldb (both multiples of 8, so 16-byte loads are
// aligned; the driver pads a copy when the caller's K or N is not a multiple of 8, and for v1 to
// multiples of 16 in all three dimensions), C has leading dimension N. K here is the (padded)
// reduction length: the columns of A and rows of B past the caller's K are zeros.
//
//   v1  naive: one warp per 16 x 16 tile of C, fragments loaded straight from global memory
//       (every A and B element is read by N/16 resp. M/16 warps, through L1/L2)
//   v2  shared tiles: a 64 x 64 block tile, BK = 32, 16 warps of one fragment each; the block
//       copies its A and B tiles to shared memory once (16-byte loads, zero fill at the edges)
//   v3  bigger warp tiles: 128 x 128 block tile, 4 warps of 64 x 64 (4 x 4 fragments each), so
//       every A fragment is used 4 times and every B fragment 4 times from registers
//   v4  v3 + padded shared rows (A rows 40 instead of 32 bf16, B rows 136 instead of 128): a
//       fragment load (lane 4g + t reads 4 bytes at row g, byte 4t) hits 32 different banks
//       instead of 4-way (A, 64-byte rows) and 8-way (B, 256-byte rows) conflicts
//   v5  v4 + double buffering: the next k-tile's global loads are in flight (in registers) while
//       the tensor cores work on this one; two shared buffers, one barrier per k-tile
// Sweep candidates (.notes/day41_sweep.py): hgemm_wmma_cand_<BM>x<BN>_w<WM>x<WN>_p<PAD>.
#include <mma.h>
#include <stdint.h>

#include <cuda_bf16.h>

#include "mma.cuh"   // StagedTile (16-byte global loads), pad_copy_bf16, st_shared_v4

using namespace nvcuda;
using cuda100::mma::StagedTile;

namespace {

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragB = wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

__device__ __forceinline__ const __nv_bfloat16* bf(const uint16_t* p) {
    return reinterpret_cast<const __nv_bfloat16*>(p);
}

// Store one accumulator fragment at C[row, col] (a 16 x 16 tile). Inside C with N % 8 == 0 the
// fragment goes straight to global memory (store_matrix_sync needs a 32-byte aligned pointer and
// ldm % 4 == 0); otherwise through the warp's 16 x 16 float staging area, from which each lane
// writes the elements that lie inside C.
__device__ __forceinline__ void store_fragment(const FragC& c, float* __restrict__ C, int M, int N,
                                               int row, int col, float* stage, int lane) {
    if (row + 16 <= M && col + 16 <= N && N % 8 == 0) {
        wmma::store_matrix_sync(C + (size_t)row * N + col, c, N, wmma::mem_row_major);
        return;
    }
    wmma::store_matrix_sync(stage, c, 16, wmma::mem_row_major);
    __syncwarp();
    for (int e = lane; e < 256; e += 32) {
        const int r = row + e / 16, q = col + e % 16;
        if (r < M && q < N) C[(size_t)r * N + q] = stage[e];
    }
    __syncwarp();   // the stage is reused by the warp's next fragment
}

}  // namespace

// --- v1: one warp, one 16 x 16 tile, fragments from global memory -----------------------------------
// Block: 4 warps as 2 x 2 -> a 32 x 32 tile of C. A is [ceil16(M), K] and B [K, ceil16(N)] here
// (K, lda, ldb multiples of 16): every fragment a warp loads lies inside the padded buffers.
extern "C" __global__ void __launch_bounds__(128) hgemm_wmma_v1(
    const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C, int M,
    int N, int K, int lda, int ldb) {
    __shared__ __align__(32) float stage[4][256];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int tiles_n = (N + 31) / 32;
    const int row = (blockIdx.x / tiles_n) * 32 + (warp / 2) * 16;
    const int col = (blockIdx.x % tiles_n) * 32 + (warp % 2) * 16;
    if (row >= M || col >= N) return;   // no barriers below: a warp may leave on its own
    FragA a;
    FragB b;
    FragC c;
    wmma::fill_fragment(c, 0.f);
    for (int k = 0; k < K; k += 16) {
        wmma::load_matrix_sync(a, bf(A + (size_t)row * lda + k), lda);
        wmma::load_matrix_sync(b, bf(B + (size_t)k * ldb + col), ldb);
        wmma::mma_sync(c, a, b, c);
    }
    store_fragment(c, C, M, N, row, col, stage[warp], lane);
}

// --- v2: a 64 x 64 block tile through shared memory, one fragment per warp --------------------------
// 512 threads: threads 0-255 copy one 16-byte chunk of the 64 x 32 A tile each, 256-511 one chunk
// of the 32 x 64 B tile. Dynamic shared memory: As 4 KB + Bs 4 KB + 16 staging tiles of 1 KB.
constexpr int V2_BM = 64, V2_BN = 64, V2_BK = 32, V2_THREADS = 512;
constexpr int V2_SMEM = (V2_BM * V2_BK + V2_BK * V2_BN) * 2 + 16 * 1024;

extern "C" __global__ void __launch_bounds__(V2_THREADS) hgemm_wmma_v2(
    const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C, int M,
    int N, int K, int lda, int ldb) {
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t* As = reinterpret_cast<uint16_t*>(smem);               // [64][32]
    uint16_t* Bs = As + V2_BM * V2_BK;                               // [32][64]
    float* stage = reinterpret_cast<float*>(Bs + V2_BK * V2_BN);     // [16][256]
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int tiles_n = (N + V2_BN - 1) / V2_BN;
    const int bm = (blockIdx.x / tiles_n) * V2_BM, bn = (blockIdx.x % tiles_n) * V2_BN;
    const int wr = (warp / 4) * 16, wc = (warp % 4) * 16;
    // this thread's chunk: A row tid/4, k chunk tid%4; or B row (tid-256)/8, n chunk (tid-256)%8
    const bool loads_a = tid < 256;
    const int f = loads_a ? tid : tid - 256;
    const int lr = loads_a ? f / 4 : f / 8, lc = loads_a ? (f % 4) * 8 : (f % 8) * 8;
    uint16_t* sdst = loads_a ? As + lr * V2_BK + lc : Bs + lr * V2_BN + lc;

    FragA a;
    FragB b;
    FragC c;
    wmma::fill_fragment(c, 0.f);
    for (int k0 = 0; k0 < K; k0 += V2_BK) {
        uint4 v = make_uint4(0u, 0u, 0u, 0u);
        if (loads_a) {
            if (bm + lr < M && k0 + lc < K)
                v = __ldg(reinterpret_cast<const uint4*>(A + (size_t)(bm + lr) * lda + k0 + lc));
        } else if (k0 + lr < K && bn + lc < N) {
            v = __ldg(reinterpret_cast<const uint4*>(B + (size_t)(k0 + lr) * ldb + bn + lc));
        }
        *reinterpret_cast<uint4*>(sdst) = v;
        __syncthreads();
#pragma unroll
        for (int kk = 0; kk < V2_BK; kk += 16) {
            wmma::load_matrix_sync(a, bf(As + wr * V2_BK + kk), V2_BK);
            wmma::load_matrix_sync(b, bf(Bs + kk * V2_BN + wc), V2_BN);
            wmma::mma_sync(c, a, b, c);
        }
        __syncthreads();   // the tiles are overwritten by the next step
    }
    store_fragment(c, C, M, N, bm + wr, bn + wc, stage + warp * 256, lane);
}

// --- v3-v5: 128 x 128 block tile, 4 warps of 64 x 64 ------------------------------------------------
// PAD: bf16 added to each shared row (0 in v3, 8 in v4/v5). DOUBLE: two shared buffers with the
// next tile prefetched into registers (v5). Dynamic shared memory: BUFS x (As + Bs) + 1 KB of
// staging a warp. BM, BN, WM, WN are template parameters for the sweep's candidates.
constexpr int BK = 32;

template <int BM_, int BN_, int WM_, int WN_, int PAD, bool DOUBLE>
struct Big {
    static constexpr int BM = BM_, BN = BN_, WM = WM_, WN = WN_;
    static constexpr int FM = WM / 16, FN = WN / 16;                 // fragments a warp
    static constexpr int WARPS_N = BN / WN, WARPS = (BM / WM) * (BN / WN), THREADS = 32 * WARPS;
    static constexpr int A_LD = BK + PAD, B_LD = BN + PAD;
    static constexpr int A_ELEMS = BM * A_LD, B_ELEMS = BK * B_LD;
    static constexpr int BUFS = DOUBLE ? 2 : 1;
    static constexpr int SMEM = BUFS * (A_ELEMS + B_ELEMS) * 2 + WARPS * 1024;
    // row-major, rows A_LD / B_LD elements apart (16-byte chunks stay 16-byte aligned)
    struct LA {
        __device__ __forceinline__ static int offset(int r, int c) { return (r * A_LD + 8 * c) * 2; }
    };
    struct LB {
        __device__ __forceinline__ static int offset(int r, int c) { return (r * B_LD + 8 * c) * 2; }
    };
};

template <class G>
__device__ __forceinline__ void wmma_big(const uint16_t* __restrict__ A, const uint16_t* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K, int lda, int ldb) {
    constexpr int FM = G::FM, FN = G::FN;
    extern __shared__ __align__(128) unsigned char smem[];
    uint16_t* sm = reinterpret_cast<uint16_t*>(smem);
    float* stage = reinterpret_cast<float*>(sm + G::BUFS * (G::A_ELEMS + G::B_ELEMS));
    const uint32_t s0 = cuda100::smem_u32(smem);
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int tiles_n = (N + G::BN - 1) / G::BN;
    const int bm = (blockIdx.x / tiles_n) * G::BM, bn = (blockIdx.x % tiles_n) * G::BN;
    const int wr = (warp / G::WARPS_N) * G::WM, wc = (warp % G::WARPS_N) * G::WN;

    FragC c[FM][FN];
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j) wmma::fill_fragment(c[i][j], 0.f);

    StagedTile<G::BM, BK, G::THREADS> ta;
    StagedTile<BK, G::BN, G::THREADS> tb;
    const int KT = (K + BK - 1) / BK;

    auto compute = [&](int buf) {
        const uint16_t* As = sm + buf * (G::A_ELEMS + G::B_ELEMS);
        const uint16_t* Bs = As + G::A_ELEMS;
#pragma unroll
        for (int kk = 0; kk < BK; kk += 16) {
            FragB b[FN];   // the warp's B fragments stay in registers while its A rows pass
#pragma unroll
            for (int j = 0; j < FN; ++j)
                wmma::load_matrix_sync(b[j], bf(Bs + kk * G::B_LD + wc + 16 * j), G::B_LD);
#pragma unroll
            for (int i = 0; i < FM; ++i) {
                FragA a;
                wmma::load_matrix_sync(a, bf(As + (wr + 16 * i) * G::A_LD + kk), G::A_LD);
#pragma unroll
                for (int j = 0; j < FN; ++j) wmma::mma_sync(c[i][j], a, b[j], c[i][j]);
            }
        }
    };
    auto stash = [&](int buf) {
        const uint32_t base = s0 + buf * (G::A_ELEMS + G::B_ELEMS) * 2;
        ta.template store<typename G::LA>(base, tid);
        tb.template store<typename G::LB>(base + G::A_ELEMS * 2, tid);
    };

    if (G::BUFS == 1) {
        for (int kt = 0; kt < KT; ++kt) {
            ta.load(A, lda, bm, kt * BK, M, K, tid);
            tb.load(B, ldb, kt * BK, bn, K, N, tid);
            stash(0);
            __syncthreads();
            compute(0);
            __syncthreads();
        }
    } else {
        ta.load(A, lda, bm, 0, M, K, tid);
        tb.load(B, ldb, 0, bn, K, N, tid);
        stash(0);
        __syncthreads();
        for (int kt = 0; kt < KT; ++kt) {
            const bool next = kt + 1 < KT;
            if (next) {   // in flight while the tensor cores work on tile kt
                ta.load(A, lda, bm, (kt + 1) * BK, M, K, tid);
                tb.load(B, ldb, (kt + 1) * BK, bn, K, N, tid);
            }
            compute(kt & 1);
            // buffer (kt+1)&1 was last read in step kt-1, and every thread has passed the barrier
            // that ended step kt-1: it is free to overwrite while others still read buffer kt&1
            if (next) stash((kt + 1) & 1);
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < FM; ++i)
#pragma unroll
        for (int j = 0; j < FN; ++j)
            store_fragment(c[i][j], C, M, N, bm + wr + 16 * i, bn + wc + 16 * j, stage + warp * 256, lane);
}

#define WMMA_BIG(NAME, G, MINB)                                                                     \
    extern "C" __global__ void __launch_bounds__(G::THREADS, MINB) NAME(                           \
        const uint16_t* __restrict__ A, const uint16_t* __restrict__ B, float* __restrict__ C, int M, \
        int N, int K, int lda, int ldb) {                                                           \
        wmma_big<G>(A, B, C, M, N, K, lda, ldb);                                                     \
    }

using V3 = Big<128, 128, 64, 64, 0, false>;
using V4 = Big<128, 128, 64, 64, 8, false>;
using V5 = Big<128, 128, 64, 64, 8, true>;
WMMA_BIG(hgemm_wmma_v3, V3, 2)
WMMA_BIG(hgemm_wmma_v4, V4, 2)
WMMA_BIG(hgemm_wmma_v5, V5, 2)

// sweep candidates (.notes/day41_sweep.py): hgemm_wmma_cand_<BM>x<BN>_w<WM>x<WN>_p<PAD>, all
// double-buffered; the first is v5's kernel
using C1 = Big<128, 256, 64, 64, 8, true>;
using C2 = Big<256, 128, 64, 64, 8, true>;
using C3 = Big<128, 128, 64, 32, 8, true>;
using C4 = Big<128, 128, 64, 64, 16, true>;
WMMA_BIG(hgemm_wmma_cand_128x128_w64x64_p8, V5, 2)
WMMA_BIG(hgemm_wmma_cand_128x256_w64x64_p8, C1, 1)
WMMA_BIG(hgemm_wmma_cand_256x128_w64x64_p8, C2, 1)
WMMA_BIG(hgemm_wmma_cand_128x128_w64x32_p8, C3, 1)
WMMA_BIG(hgemm_wmma_cand_128x128_w64x64_p16, C4, 2)

constexpr int V3_SMEM = V3::SMEM, V4_SMEM = V4::SMEM, V5_SMEM = V5::SMEM;

// dynamic shared memory of each version and candidate, bytes (the driver reads this array:
// module.get_global); order: v1..v5, then the candidates as listed above
extern "C" __constant__ int hgemm_wmma_smem[11] = {0, 0, V2_SMEM, V3_SMEM, V4_SMEM, V5_SMEM,
                                                   V5::SMEM, C1::SMEM, C2::SMEM, C3::SMEM, C4::SMEM};

// --- zero-padded copies for shapes whose rows are not 16-byte aligned -----------------------------
extern "C" __global__ void __launch_bounds__(256) pad_bf16(const uint16_t* __restrict__ src, int rows,
                                                           int cols, uint16_t* __restrict__ dst,
                                                           int rows_p, int cols_p) {
    cuda100::mma::pad_copy_bf16(src, rows, cols, dst, rows_p, cols_p);
}
