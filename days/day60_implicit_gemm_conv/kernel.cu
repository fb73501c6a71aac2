// Day 60: a 3x3 convolution (stride 1, zero padding 1) as an implicit GEMM on tensor cores, bf16
// in, fp32 accumulate, bf16 out, channels last (NHWC): the 3x3 layers of ResNet-50.
//
//   y[n, p, q, k] = sum_{r, s < 3} sum_{c < C} x[n, p + r - 1, q + s - 1, c] * w[k, r, s, c]
//
//   x [N, H, W, C] (NHWC), w [K, 3, 3, C] (KRSC), y [N, H, W, K] (NHWC, P = H, Q = W);
//   x is 0 outside the image. Like cuDNN, a cross-correlation (the filter is not flipped).
//
// The GEMM view: M = N*H*W output pixels, N_gemm = K output channels, K_gemm = 9*C in (r, s, c)
// order. Row m of "A" is the 9*C inputs under output pixel m's window, column k of "B" is
// filter k (w[k] is already a row of 9*C values: K-major, as wgmma wants). A is never built
// (that would be the im2col copy, 9x the input): a k-block of 64 is one tap (r, s) and 64
// channels, and for it A's rows are 64 channels of the input pixels shifted by (r - 1, s - 1),
// 128 contiguous bytes each in NHWC. Each version fetches those rows its own way.
//
// Build on its own:  nvcc -gencode=arch=compute_90a,code=sm_90a -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 60
//
// Versions:
//   v1  direct: one thread an output (n, p, q, k), 8 channels at a time (16-byte loads of x and
//       w), fp32 sums on the CUDA cores. No tensor cores, no reuse but what L1/L2 catch.
//   v2  implicit GEMM on mma.sync (m16n8k16, day 42) with a 3-stage cp.async pipeline (day
//       43): a block's 128 pixels x 64 channels of one tap are gathered 16 bytes a thread, a
//       pixel whose shifted position falls outside the image copied as zeros (src-size 0): the
//       padding costs no branch in the math and no padded copy of x.
//   v3  TMA + wgmma, warp specialised (day 45's v3): the A tile is ONE tensor-map copy, a 4-D
//       box [1 image, 8 rows, 16 columns, 64 channels] of x at (n, p0 + r - 1, q0 + s - 1, c0):
//       the copy engine zero-fills every element outside the tensor, negative coordinates
//       included, which IS the padding. With the 128-byte swizzle the box lands as the 128 x
//       64 K-major tile wgmma reads. B is a 3-D box [BN filters, 1 tap, 64 channels] of w.
//   v4  v3 persistent (one block an SM walks the tiles), two k-blocks of wgmma in flight, and
//       the tile fitted to the layer: the box is BNI images x BP rows x BQ columns (BQ = the
//       image width when it fits, so no box column is wasted), BN in {64, 128, 256}, one or two
//       consumer warpgroups; for K <= 64 (r64) the whole filter can stay resident in shared
//       memory, loaded once a block. The driver picks the variant per layer (driver.plan; the
//       sweep .notes/day60_sweep.py times them all).
//   v5  three taps of a filter column from one TMA box with two halo rows (conv_t3): for
//       column tap s and a channel block the producer copies the tile's BP rows plus the two
//       rows above and below it, (BP + 2) x BQ pixels at (n, p0 - 1, q0 + s - 1, c0); tap
//       (r, s)'s A tile is that box from row r BQ on (BQ % 8 == 0 keeps every start on the
//       1024-byte swizzle grid, so only the wgmma descriptor moves). A channel block costs 3
//       boxes of BP + 2 rows instead of v4's 9 of BP rows, and a k-step feeds three taps.
//       Persistent as v4, with its own variants (t3r64, t3n64, t3n128, t3c1n128); where
//       driver.plan finds v4's kernel cheaper (many tiny images: a v5 tile holds one image),
//       v5 runs v4's kernel (driver.same_as).
#include <cuda_bf16.h>
#include <cstdint>

#include "mma.cuh"     // ldmatrix, mma.sync m16n8k16, the XOR-swizzled Layout, cp.async (day 42/43)
#include "tma.cuh"     // mbarriers and tensor-map copies (day 44)
#include "wgmma.cuh"   // warpgroup MMA (day 45)

using namespace cuda100;
typedef __nv_bfloat16 bf16;

extern __shared__ uint8_t smem_raw[];

__device__ __forceinline__ float bf16_lo(uint32_t u) { return __uint_as_float(u << 16); }
__device__ __forceinline__ float bf16_hi(uint32_t u) { return __uint_as_float(u & 0xFFFF0000u); }

// ---------------------------------------------------------------------------------------------
// v1: one thread an output element; k is the fastest index, so a warp's 32 threads share the
// pixel (x loads are broadcasts) and read 32 different filters. C % 8 == 0 (the driver's rule):
// every pixel's channels start 16-byte aligned.
extern "C" __global__ void __launch_bounds__(256)
conv_v1(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, uint16_t *__restrict__ y,
        int N, int H, int W, int C, int K) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N * H * W * K) return;                 // < 2^31: the driver checks it
    const int k = i % K, pix = i / K;
    const int q = pix % W, p = (pix / W) % H, n = pix / (W * H);
    const int c8 = C / 8;
    float acc = 0.f;
    for (int r = 0; r < 3; ++r) {
        const int ih = p + r - 1;
        if (ih < 0 || ih >= H) continue;
        for (int s = 0; s < 3; ++s) {
            const int iw = q + s - 1;
            if (iw < 0 || iw >= W) continue;
            const uint4 *xp = reinterpret_cast<const uint4 *>(x + ((size_t)(n * H + ih) * W + iw) * C);
            const uint4 *wp = reinterpret_cast<const uint4 *>(w + ((size_t)k * 9 + r * 3 + s) * C);
            for (int j = 0; j < c8; ++j) {
                const uint4 a = __ldg(xp + j), b = __ldg(wp + j);
                acc = fmaf(bf16_lo(a.x), bf16_lo(b.x), acc); acc = fmaf(bf16_hi(a.x), bf16_hi(b.x), acc);
                acc = fmaf(bf16_lo(a.y), bf16_lo(b.y), acc); acc = fmaf(bf16_hi(a.y), bf16_hi(b.y), acc);
                acc = fmaf(bf16_lo(a.z), bf16_lo(b.z), acc); acc = fmaf(bf16_hi(a.z), bf16_hi(b.z), acc);
                acc = fmaf(bf16_lo(a.w), bf16_lo(b.w), acc); acc = fmaf(bf16_hi(a.w), bf16_hi(b.w), acc);
            }
        }
    }
    y[i] = __bfloat16_as_ushort(__float2bfloat16_rn(acc));
}

// ---------------------------------------------------------------------------------------------
// v2: implicit GEMM on mma.sync. Block tile 128 pixels (flattened m = (n*H + p)*W + q) x 128
// output channels, k-block = one tap x 64 channels; 8 warps as 2 (M) x 4 (N), 64 x 32 each.
// Shared tiles are 128 rows x 128 bytes with the XOR swizzle of mma.cuh (conflict-free
// ldmatrix); A[row] = x at pixel m shifted by the tap, B[row] = w[k][tap][c0 .. c0 + 63].
namespace v2 {
constexpr int BM = 128, BN = 128, THREADS = 256, STAGES = 3;
constexpr int TILE = 128 * 128;                 // bytes of one A or B tile
constexpr int STAGE = 2 * TILE;
using L = mma::Layout<64, true>;                // 64 bf16 = 128-byte rows, 8 chunks, swizzled
}  // namespace v2

extern "C" __global__ void __launch_bounds__(v2::THREADS)
conv_v2(const uint16_t *__restrict__ x, const uint16_t *__restrict__ w, uint16_t *__restrict__ y,
        int N, int H, int W, int C, int K) {
    using namespace v2;
    const uint32_t sbase = (smem_u32(smem_raw) + 127) & ~127u;
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int M = N * H * W;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int CB = (C + 63) / 64, nk = 9 * CB;

    // This thread copies chunk `chunk` (8 channels) of rows tid/8 + 32 i (i < 4) of A and B.
    const int chunk = tid & 7;
    int a_pix[4], a_p[4], a_q[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int m = m0 + (tid >> 3) + 32 * i;
        a_pix[i] = m;
        a_q[i] = m % W;
        a_p[i] = m < M ? (m / W) % H : -4;       // -4: every tap's row is outside the image
    }

    auto load = [&](int kb, int stage) {
        const int tap = kb / CB, cb = kb - tap * CB;
        const int r = tap / 3, s = tap - 3 * r;
        const int c = cb * 64 + chunk * 8;
        const bool cok = c < C;
        const uint32_t sA = sbase + stage * STAGE, sB = sA + TILE;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int row = (tid >> 3) + 32 * i;
            const int ih = a_p[i] + r - 1, iw = a_q[i] + s - 1;
            const bool ok = cok && ih >= 0 && ih < H && iw >= 0 && iw < W;
            const uint16_t *src = ok ? x + (size_t)(a_pix[i] + (r - 1) * W + (s - 1)) * C + c : x;
            cp_async16_u32(sA + L::offset(row, chunk), src, ok);
            const bool okb = cok && n0 + row < K;
            const uint16_t *srcb = okb ? w + ((size_t)(n0 + row) * 9 + tap) * C + c : w;
            cp_async16_u32(sB + L::offset(row, chunk), srcb, okb);
        }
    };

    const int wm0 = 64 * (warp & 1), wn0 = 32 * (warp >> 1);
    float acc[4][4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;

#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < nk) load(s, s);
        cp_async_commit();
    }
    for (int kb = 0; kb < nk; ++kb) {
        cp_async_wait<STAGES - 2>();    // k-block kb has landed (this thread's copies) ...
        __syncthreads();                // ... everyone's, and everyone is done with kb - 1
        const int nxt = kb + STAGES - 1;
        if (nxt < nk) load(nxt, nxt % STAGES);
        cp_async_commit();
        const uint32_t sA = sbase + (kb % STAGES) * STAGE, sB = sA + TILE;
#pragma unroll
        for (int ks = 0; ks < 4; ++ks) {
            uint32_t a[4][4], b[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i)
                mma::ldmatrix_x4(a[i], sA + L::offset(wm0 + 16 * i + (lane & 15), 2 * ks + (lane >> 4)));
#pragma unroll
            for (int jj = 0; jj < 2; ++jj) {
                // B is stored [n][k]: a plain (non-transposed) ldmatrix gives the "col" fragment.
                // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15).
                uint32_t t[4];
                mma::ldmatrix_x4(t, sB + L::offset(wn0 + 16 * jj + ((lane >> 4) << 3) + (lane & 7),
                                                   2 * ks + ((lane >> 3) & 1)));
                b[2 * jj][0] = t[0];
                b[2 * jj][1] = t[1];
                b[2 * jj + 1][0] = t[2];
                b[2 * jj + 1][1] = t[3];
            }
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j) mma::mma_bf16_16816(acc[i][j], a[i], b[j][0], b[j][1]);
        }
    }
    cp_async_wait<0>();

    // Epilogue: acc[i][j] = rows wm0 + 16 i + g (+8), columns wn0 + 8 j + 2 t (+1); y is [M, K].
    const int g = lane >> 2, t = lane & 3;
    const bool pairs = (K & 1) == 0;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int m = m0 + wm0 + 16 * i + 8 * h + g;
            if (m >= M) continue;
            uint16_t *yr = y + (size_t)m * K;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = n0 + wn0 + 8 * j + 2 * t;
                const float v0 = acc[i][j][2 * h], v1 = acc[i][j][2 * h + 1];
                if (pairs && n + 1 < K) {
                    __nv_bfloat162 v = __floats2bfloat162_rn(v0, v1);
                    *reinterpret_cast<uint32_t *>(yr + n) = *reinterpret_cast<uint32_t *>(&v);
                } else {
                    if (n < K) yr[n] = __bfloat16_as_ushort(__float2bfloat16_rn(v0));
                    if (n + 1 < K) yr[n + 1] = __bfloat16_as_ushort(__float2bfloat16_rn(v1));
                }
            }
        }
}

// ---------------------------------------------------------------------------------------------
// v3 / v4: TMA + wgmma, warp specialised. The 3-D and 4-D tiled copies (tma::load_3d/4d) take
// signed coordinates: a negative one or one past the end reads zeros.
using tma::align1024;
using tma::load_3d;
using tma::load_4d;

// One k-block (one tap, 64 channels) of a warpgroup's 64 x BN tile: four k16 steps, +32 bytes
// along the swizzled 128-byte rows each (wgmma applies the swizzle to the final address).
template <int BN>
__device__ __forceinline__ void mma_kblock(float (&d)[BN / 2], const uint8_t *sA, const uint8_t *sB,
                                           bool first) {
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        const uint64_t da = wgmma::desc_k128(sA + 32 * kk), db = wgmma::desc_k128(sB + 32 * kk);
        const int scale_d = (first && kk == 0) ? 0 : 1;
        if constexpr (BN == 256) wgmma::m64n256k16_bf16(d, da, db, scale_d);
        else if constexpr (BN == 128) wgmma::m64n128k16_bf16(d, da, db, scale_d);
        else wgmma::m64n64k16_bf16(d, da, db, scale_d);
    }
}

// The geometry of a tile: a box of BNI images x BP rows x BQ columns of output pixels (row m of
// the A tile is pixel (m / (BQ BP), m / BQ % BP, m % BQ) of the box: the copy engine writes the
// box innermost dimension first) x BN output channels. Tile u of the grid: the channel tile is
// the fastest index, so blocks running at the same time share their A boxes in L2.
struct Geo {
    int N, P, Q, C, K, BQ, BP, BNI;
    int tq, tp, tk, units, CB, nk;
    __device__ __forceinline__ Geo(int N_, int P_, int Q_, int C_, int K_, int BQ_, int BP_, int BNI_,
                                   int BN)
        : N(N_), P(P_), Q(Q_), C(C_), K(K_), BQ(BQ_), BP(BP_), BNI(BNI_) {
        tq = (Q + BQ - 1) / BQ;
        tp = (P + BP - 1) / BP;
        tk = (K + BN - 1) / BN;
        units = tq * tp * ((N + BNI - 1) / BNI) * tk;   // < 2^31: the driver checks it
        CB = (C + 63) / 64;
        nk = 9 * CB;
    }
    __device__ __forceinline__ void tile(int u, int BN, int &n0, int &p0, int &q0, int &k0) const {
        const int kt = u % tk, sp = u / tk;
        const int qt = sp % tq, rest = sp / tq;
        q0 = qt * BQ;
        p0 = (rest % tp) * BP;
        n0 = (rest / tp) * BNI;
        k0 = kt * BN;
    }
};

// A warpgroup's 64 x BN accumulators (rows 64 c .. 64 c + 63 of the tile) -> bf16 y (NHWC),
// pixels outside the image or the box and channels >= K skipped.
template <int BN>
__device__ __forceinline__ void store_tile(const float (&d)[BN / 2], bf16 *y, const Geo &g, int c,
                                           int n0, int p0, int q0, int k0) {
    const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
    const int rows = g.BQ * g.BP * g.BNI;
    const bool pairs = (g.K & 1) == 0;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int m = 64 * c + 16 * warp + lane / 4 + 8 * h;
        const int ql = m % g.BQ, pl = (m / g.BQ) % g.BP, ni = m / (g.BQ * g.BP);
        const int n = n0 + ni, p = p0 + pl, q = q0 + ql;
        if (m >= rows || n >= g.N || p >= g.P || q >= g.Q) continue;
        bf16 *yr = y + ((size_t)(n * g.P + p) * g.Q + q) * g.K;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int k = k0 + 8 * j + 2 * (lane % 4);
            const float v0 = d[4 * j + 2 * h], v1 = d[4 * j + 2 * h + 1];
            if (pairs && k + 1 < g.K) {
                *reinterpret_cast<__nv_bfloat162 *>(yr + k) = __floats2bfloat162_rn(v0, v1);
            } else {
                if (k < g.K) yr[k] = __float2bfloat16_rn(v0);
                if (k + 1 < g.K) yr[k + 1] = __float2bfloat16_rn(v1);
            }
        }
    }
}

template <int R>
__device__ __forceinline__ void zero(float (&d)[R]) {
#pragma unroll
    for (int i = 0; i < R; ++i) d[i] = 0.f;
}

// Warpgroup 0 produces (one thread issues the copies), warpgroups 1..CONS consume: consumer c
// multiplies rows 64 c .. 64 c + 63 of the A tile by all BN rows of the B tile. STAGES buffers
// of (A: 64 CONS rows, B: BN rows) x 128 bytes; per stage two mbarriers:
//   full[s]   the producer's arrive.expect_tx + the copy engine's bytes (both boxes, whole:
//             zero-filled elements count too);
//   empty[s]  one arrival per consumer warpgroup once its wgmma have read the stage.
// it counts k-blocks over all of a block's tiles; stage s = it % STAGES is in round it / STAGES,
// whose full phase waiters meet with parity round & 1; the producer refills s in round r >= 1
// after empty[s]'s phase r - 1. The loop over tiles u = blockIdx.x, + gridDim.x, ... serves both
// a grid of one block a tile (v3) and a persistent grid (v4): only the launch differs.
// INFLIGHT 2: a k-block's wgmma group is waited for one k-block later (its stage released then).
// REGS: setmaxnreg (384-thread, one block an SM launches only: 40 + 2 x 232 registers a thread).
// RESIDENT_B (K <= BN only, the driver's rule): the whole filter, 9 CB tiles of BN x 64, is
// copied once into shared memory after the ring (its own mbarrier, waited for once) and the
// stages carry A alone: a persistent block then fetches w once instead of once a tile.
template <int BN, int CONS, int STAGES, int INFLIGHT, bool REGS, bool RESIDENT_B = false>
__device__ __forceinline__ void conv_ws(const CUtensorMap *xmap, const CUtensorMap *wmap, bf16 *y,
                                        int N, int P, int Q, int C, int K, int BQ, int BP, int BNI) {
    constexpr int A_BYTES = 64 * CONS * 128, B_BYTES = BN * 128;
    constexpr int STAGE = RESIDENT_B ? A_BYTES : A_BYTES + B_BYTES;
    uint8_t *base = align1024(smem_raw);
    uint8_t *resident = base + STAGES * STAGE;          // RESIDENT_B: k-block kb's B tile at + kb B_BYTES
    __shared__ uint64_t full[STAGES], empty[STAGES], bfull;
    const Geo g(N, P, Q, C, K, BQ, BP, BNI, BN);
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tma::mbar_init(&full[s], 1);
            tma::mbar_init(&empty[s], CONS);
        }
        tma::mbar_init(&bfull, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {
        if constexpr (REGS) wgmma::setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {
            if constexpr (RESIDENT_B) {
                tma::mbar_arrive_expect_tx(&bfull, (uint32_t)g.nk * B_BYTES);
                for (int kb = 0; kb < g.nk; ++kb) {
                    const int tap = kb / g.CB;
                    load_3d(resident + kb * B_BYTES, wmap, &bfull, (kb - tap * g.CB) * 64, tap, 0);
                }
            }
            const uint32_t tx = (uint32_t)(BQ * BP * BNI) * 128u + (RESIDENT_B ? 0 : B_BYTES);
            int it = 0;
            for (int u = blockIdx.x; u < g.units; u += gridDim.x) {
                int n0, p0, q0, k0;
                g.tile(u, BN, n0, p0, q0, k0);
                for (int kb = 0; kb < g.nk; ++kb, ++it) {
                    const int s = it % STAGES, round = it / STAGES;
                    if (round > 0) tma::mbar_wait(&empty[s], (round - 1) & 1);
                    const int tap = kb / g.CB, c0 = (kb - tap * g.CB) * 64;
                    const int r = tap / 3, ss = tap - 3 * r;
                    uint8_t *sA = base + s * STAGE;
                    tma::mbar_arrive_expect_tx(&full[s], tx);
                    // x at (c0, q0 + s - 1, p0 + r - 1, n0): the box shifted by the tap
                    load_4d(sA, xmap, &full[s], c0, q0 + ss - 1, p0 + r - 1, n0);
                    if constexpr (!RESIDENT_B) load_3d(sA + A_BYTES, wmap, &full[s], c0, tap, k0);
                }
            }
        }
    } else {
        if constexpr (REGS) wgmma::setmaxnreg_inc<232>();
        const int c = wg - 1;
        float d[BN / 2];
        zero(d);
        if constexpr (RESIDENT_B) tma::mbar_wait(&bfull, 0);
        int it = 0;
        for (int u = blockIdx.x; u < g.units; u += gridDim.x) {
            int n0, p0, q0, k0;
            g.tile(u, BN, n0, p0, q0, k0);
            for (int kb = 0; kb < g.nk; ++kb, ++it) {
                const int s = it % STAGES, round = it / STAGES;
                tma::mbar_wait(&full[s], round & 1);
                const uint8_t *sA = base + s * STAGE;
                wgmma::fence_regs(d);
                wgmma::fence();
                const uint8_t *sB = RESIDENT_B ? resident + kb * B_BYTES : sA + A_BYTES;
                mma_kblock<BN>(d, sA + c * 64 * 128, sB, kb == 0);
                wgmma::commit();
                wgmma::wait<INFLIGHT - 1>();
                wgmma::fence_regs(d);
                if (kb >= INFLIGHT - 1 && threadIdx.x % 128 == 0)
                    tma::mbar_arrive(&empty[(it - (INFLIGHT - 1)) % STAGES]);
            }
            if constexpr (INFLIGHT > 1) {
                wgmma::wait<0>();
                wgmma::fence_regs(d);
                if (threadIdx.x % 128 == 0) tma::mbar_arrive(&empty[(it - 1) % STAGES]);
            }
            store_tile<BN>(d, y, g, c, n0, p0, q0, k0);
        }
    }
}

// t3: one box serves the three taps of a filter column. For column tap s and a channel block,
// the producer copies ONE box of x with the tile's BP rows plus the halo's two, (BP + 2) x BQ
// pixels at (c0, q0 + s - 1, p0 - 1, n0); tap (r, s) then reads its A tile as the rows
// r * BQ .. r * BQ + 63 (+ 64 c for consumer c) of that box: output pixel (pl, ql) = row
// pl * BQ + ql, and row pl * BQ + ql + r * BQ of the box is input pixel (p0 - 1 + pl + r,
// q0 + s - 1 + ql), exactly tap (r, s)'s. A k-step (a "stage") is thus (s, channel block): 3 CB
// of them a tile instead of 9 CB, and the L2 -> shared traffic of A drops from 9 BP BQ to
// 3 (BP + 2) BQ rows a channel block (84 KB instead of 126 KB a 56 x 2 tile).
// The driver's rules (driver.tile_t3): BNI = 1 (a row shift must not cross into the next image),
// BQ % 8 == 0 (every tap's A tile then starts on the 1024-byte grid of the 128-byte swizzle:
// (r BQ + 64 c) x 128 bytes), (BP + 2) BQ <= A_ROWS (the box fits the stage) and
// 2 BQ + 64 CONS <= A_ROWS (the last tap's rows stay inside the stage; rows past the box are
// stale and only reach output rows m >= BP BQ, which the epilogue never stores).
// B: the three taps' BN x 64 tiles, three 3-D copies a stage (or, RESIDENT_B, the resident
// filter's tap (r, s) tile). Barriers and phases exactly as conv_ws, "it" counting stages.
template <int BN, int CONS, int STAGES, int A_ROWS, bool REGS, bool RESIDENT_B>
__device__ __forceinline__ void conv_t3(const CUtensorMap *xmap, const CUtensorMap *wmap, bf16 *y,
                                        int N, int P, int Q, int C, int K, int BQ, int BP, int BNI) {
    constexpr int INFLIGHT = 2;
    constexpr int A_BYTES = A_ROWS * 128, B_BYTES = BN * 128;
    constexpr int STAGE = RESIDENT_B ? A_BYTES : A_BYTES + 3 * B_BYTES;
    static_assert(A_BYTES % 1024 == 0 && B_BYTES % 1024 == 0, "tiles on the 1024-byte grid");
    static_assert(A_ROWS >= 64 * CONS, "a consumer's rows inside the stage");
    uint8_t *base = align1024(smem_raw);
    uint8_t *resident = base + STAGES * STAGE;          // RESIDENT_B: tap-major, + (tap CB + cb) B_BYTES
    __shared__ uint64_t full[STAGES], empty[STAGES], bfull;
    const Geo g(N, P, Q, C, K, BQ, BP, BNI, BN);
    const int nj = 3 * g.CB;                            // stages a tile: (column tap s, channel block)
    const int wg = threadIdx.x / 128;

    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; ++s) {
            tma::mbar_init(&full[s], 1);
            tma::mbar_init(&empty[s], CONS);
        }
        tma::mbar_init(&bfull, 1);
        tma::fence_barrier_init();
    }
    __syncthreads();

    if (wg == 0) {
        if constexpr (REGS) wgmma::setmaxnreg_dec<40>();
        if (threadIdx.x == 0) {
            if constexpr (RESIDENT_B) {
                tma::mbar_arrive_expect_tx(&bfull, (uint32_t)g.nk * B_BYTES);
                for (int kb = 0; kb < g.nk; ++kb) {
                    const int tap = kb / g.CB;
                    load_3d(resident + kb * B_BYTES, wmap, &bfull, (kb - tap * g.CB) * 64, tap, 0);
                }
            }
            const uint32_t tx = (uint32_t)(BQ * (BP + 2) * BNI) * 128u + (RESIDENT_B ? 0 : 3 * B_BYTES);
            int it = 0;
            for (int u = blockIdx.x; u < g.units; u += gridDim.x) {
                int n0, p0, q0, k0;
                g.tile(u, BN, n0, p0, q0, k0);
                for (int j = 0; j < nj; ++j, ++it) {
                    const int st = it % STAGES, round = it / STAGES;
                    if (round > 0) tma::mbar_wait(&empty[st], (round - 1) & 1);
                    const int s = j / g.CB, c0 = (j - s * g.CB) * 64;
                    uint8_t *sA = base + st * STAGE;
                    tma::mbar_arrive_expect_tx(&full[st], tx);
                    // x at (c0, q0 + s - 1, p0 - 1, n0): the tile's rows and the halo's two
                    load_4d(sA, xmap, &full[st], c0, q0 + s - 1, p0 - 1, n0);
                    if constexpr (!RESIDENT_B) {
                        for (int r = 0; r < 3; ++r)
                            load_3d(sA + A_BYTES + r * B_BYTES, wmap, &full[st], c0, 3 * r + s, k0);
                    }
                }
            }
        }
    } else {
        if constexpr (REGS) wgmma::setmaxnreg_inc<232>();
        const int c = wg - 1;
        float d[BN / 2];
        zero(d);
        if constexpr (RESIDENT_B) tma::mbar_wait(&bfull, 0);
        int it = 0;
        for (int u = blockIdx.x; u < g.units; u += gridDim.x) {
            int n0, p0, q0, k0;
            g.tile(u, BN, n0, p0, q0, k0);
            for (int j = 0; j < nj; ++j, ++it) {
                const int st = it % STAGES, round = it / STAGES;
                const int s = j / g.CB, cb = j - s * g.CB;
                tma::mbar_wait(&full[st], round & 1);
                const uint8_t *sA = base + st * STAGE;
                wgmma::fence_regs(d);
                wgmma::fence();
#pragma unroll
                for (int r = 0; r < 3; ++r) {
                    const uint8_t *sB = RESIDENT_B ? resident + ((3 * r + s) * g.CB + cb) * B_BYTES
                                                   : sA + A_BYTES + r * B_BYTES;
                    mma_kblock<BN>(d, sA + (r * BQ + 64 * c) * 128, sB, j == 0 && r == 0);
                }
                wgmma::commit();
                wgmma::wait<INFLIGHT - 1>();
                wgmma::fence_regs(d);
                if (j >= INFLIGHT - 1 && threadIdx.x % 128 == 0)
                    tma::mbar_arrive(&empty[(it - (INFLIGHT - 1)) % STAGES]);
            }
            wgmma::wait<0>();
            wgmma::fence_regs(d);
            if (threadIdx.x % 128 == 0) tma::mbar_arrive(&empty[(it - 1) % STAGES]);
            store_tile<BN>(d, y, g, c, n0, p0, q0, k0);
        }
    }
}

#define WS_ARGS const CUtensorMap *__restrict__ xmap, const CUtensorMap *__restrict__ wmap, bf16 *y, \
                int N, int P, int Q, int C, int K, int BQ, int BP, int BNI
#define WS_PASS xmap, wmap, y, N, P, Q, C, K, BQ, BP, BNI

// v3: one block a tile, 8 x 16 pixels x 128 channels, 4 stages, one wgmma group in flight
extern "C" __global__ void __launch_bounds__(384, 1) conv_v3(WS_ARGS) {
    conv_ws<128, 2, 4, 1, true>(WS_PASS);
}

// v4 variants (the driver's V4_VARIANTS: name -> BN, consumers, stages, blocks an SM):
//   n64    BN 64, 2 consumers, 6 stages (24 KB each)       the 64-channel layers
//   n64x2  BN 64, 2 consumers, 4 stages, two blocks an SM  (no setmaxnreg: 85 registers a thread)
//   n128   BN 128, 2 consumers, 4 stages (32 KB each)
//   n256   BN 256, 2 consumers, 4 stages (48 KB each)
//   c1n128 BN 128, 1 consumer (64-row tiles), 6 stages     many small tiles for the small layers
//   c1n256 BN 256, 1 consumer, 4 stages
//   r64    BN 64, 2 consumers, 8 stages of A alone (16 KB each), the filter resident (K <= 64,
//          9 CB x 8 KB: 72 KB for C = 64)
extern "C" __global__ void __launch_bounds__(384, 1) conv_v4_n64(WS_ARGS) {
    conv_ws<64, 2, 6, 2, true>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(384, 2) conv_v4_n64x2(WS_ARGS) {
    conv_ws<64, 2, 4, 2, false>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(384, 1) conv_v4_n128(WS_ARGS) {
    conv_ws<128, 2, 4, 2, true>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(384, 1) conv_v4_n256(WS_ARGS) {
    conv_ws<256, 2, 4, 2, true>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(256, 1) conv_v4_c1n128(WS_ARGS) {
    conv_ws<128, 1, 6, 2, false>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(256, 1) conv_v4_c1n256(WS_ARGS) {
    conv_ws<256, 1, 4, 2, false>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(384, 1) conv_v4_r64(WS_ARGS) {
    conv_ws<64, 2, 8, 2, true, true>(WS_PASS);
}

// v5 variants (driver.V5_VARIANTS and T3_ROWS: name -> BN, consumers, stages, A rows a stage,
// B resident):
//   t3r64  BN 64, 2 consumers, 5 stages of A (240 rows, 30 KB), the filter resident (K, C <= 64)
//   t3n64  BN 64, 2 consumers, 4 stages of A (240 rows) + 3 B tiles (24 KB): 54 KB each
//   t3n128 BN 128, 2 consumers, 3 stages of A (192 rows) + 3 B tiles (48 KB): 72 KB each
//   t3c1n128 BN 128, 1 consumer, 3 stages of A (80 rows: a 7 x 8 tile's 9 x 8 box) + 3 B tiles
extern "C" __global__ void __launch_bounds__(384, 1) conv_v5_t3r64(WS_ARGS) {
    conv_t3<64, 2, 5, 240, true, true>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(384, 1) conv_v5_t3n64(WS_ARGS) {
    conv_t3<64, 2, 4, 240, true, false>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(384, 1) conv_v5_t3n128(WS_ARGS) {
    conv_t3<128, 2, 3, 192, true, false>(WS_PASS);
}
extern "C" __global__ void __launch_bounds__(256, 1) conv_v5_t3c1n128(WS_ARGS) {
    conv_t3<128, 1, 3, 80, false, false>(WS_PASS);
}
