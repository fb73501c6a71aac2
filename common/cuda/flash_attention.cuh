// FlashAttention-2 forward in fp32 on CUDA cores (taught on day 26, flash_attention_forward;
// used by day 28, multi_head_attention).
//
//   O = softmax(scale * Q K^T [+ causal mask]) V        per (batch, head); Q, K, V, O [N, D]
//   lse[n] = log sum_k exp(scale * q_n . k_k)           natural log of the scaled scores
//
// One block computes BLOCK_M query rows of one (batch, head) and walks the keys in tiles of
// BLOCK_N rows; the N x N score matrix never exists outside registers (and one BLOCK_M x
// BLOCK_N tile of probabilities in shared memory).
//
// Interface (what day 28 calls):
//
//   cuda100::flash::Args a{q, k, v, o, lse, B, H, N, strides..., scale};
//   grid (ceil(N / Tile<D>::BLOCK_M), H, B), blockDim.x = Tile<D>::THREADS, the kernel
//   declared __launch_bounds__(Tile<D>::THREADS, Tile<D>::MIN_BLOCKS) (else ptxas may spill),
//   dynamic shared memory = smem_bytes<D>() bytes (> 48 KB: the kernel must opt in first,
//   common.gpu.opt_in_smem(fn, smem_bytes)), then inside the __global__ kernel:
//       cuda100::flash::forward<D, CAUSAL>(a);
//
// THE SHARED MEMORY IS DYNAMIC: forward() uses `extern __shared__` memory, smem_bytes<D>()
// of it (about 100-110 KB for D = 64 and 128), so the launch must pass shared_size =
// smem_bytes<D>() and the kernel must be allowed that much (cuFuncSetAttribute
// MAX_DYNAMIC_SHARED_SIZE_BYTES; pycuda: common.gpu.opt_in_smem). The host can read the number
// from the kernel's own export (day 26's flash_smem_bytes_d64 / _d128) or compute it with the
// same formula (Config::SMEM_FLOATS * 4).
//
// Assumptions the kernel makes (the caller guarantees them):
//   * D % 32 == 0 (D = 32, 64, 96, 128, ... ; D = 64 and 128 are the tested ones);
//   * every base pointer and every stride (q_b, q_h, q_n, k_*, v_*, o_*) is a multiple of 4
//     floats, so each position's D values start 16-byte aligned (true whenever D % 4 == 0 for
//     contiguous [B, N, H, D], [B, H, N, D] or fused [B, N, 3, H, D] layouts from cudaMalloc);
//   * N >= 1, B * H * N fits the 32-bit grid / int indices; strides are 64-bit;
//   * lse (when not nullptr) is [B, H, N] contiguous;
//   * blockDim.x == Tile<D>::THREADS, gridDim.x == ceil(N / BLOCK_M).
// Rows and keys past N are handled inside (zero-filled loads, masked scores, guarded stores).
// With CAUSAL, blocks are visited last-first (blockIdx.x = 0 takes the LAST query block), so
// the blocks with the most key tiles start first and the short ones fill the tail.
#pragma once

#include <math.h>

#include "cp_async.cuh"

namespace cuda100 {
namespace flash {

struct Args {
    const float *q, *k, *v;
    float* o;
    float* lse;                // may be nullptr (not saved); else [B, H, N] contiguous
    int B, H, N;               // batch, heads, sequence length (queries = keys)
    long long q_b, q_h, q_n;   // element strides of Q over batch, head, position;
    long long k_b, k_h, k_n;   //   the D values of one position are contiguous
    long long v_b, v_h, v_n;
    long long o_b, o_h, o_n;
    float scale;               // usually 1/sqrt(D)
};

namespace detail {

// --- cp.async (16 bytes, global -> shared, bypassing registers and L1): common/cuda/cp_async.cuh
// src_size = 0 writes 16 zero bytes and reads nothing: the zero-fill for rows past N.
using cuda100::cp_async16;
using cuda100::cp_async_commit;
using cuda100::cp_async_wait;

// --- the tile configuration ------------------------------------------------------------------
// BM query rows x BN keys a block; each thread owns TM rows x TN keys of the score tile and the
// same TM rows x (D / TX) columns of the output. Threads form a TY x TX grid: TX = BN / TN
// threads share a row (adjacent lanes of one warp, so a row's max and sum are warp shuffles),
// TY = BM / TM row groups. Thread (ty, tx) owns rows ty + TY*i and keys tx + TX*j (strided,
// which makes the shared-memory reads conflict-free, see below) and output float4 columns
// tx + TX*m.
template <int D, int BM, int BN, int TM, int TN, bool PIPE>
struct Config {
    static constexpr int TX = BN / TN, TY = BM / TM, THREADS = TX * TY;
    static constexpr int DV4 = D / (4 * TX);  // float4 output columns per thread
    // Padding: a row of Q and K is D + 4 floats, so rows r and r+1 start 4 banks apart and
    // 8 lanes reading float4s of 8 different rows (one quarter-warp) hit 32 different banks.
    static constexpr int LDQ = D + 4, LDK = D + 4;
    static constexpr int LDV = D;             // every lane reads the same V row: no padding
    static constexpr int LDP = BN + TX;       // P row: TX lanes x (32 / TX) rows -> 32 banks
    static constexpr int STAGES = PIPE ? 2 : 1;
    static constexpr int SMEM_FLOATS = BM * LDQ + STAGES * BN * (LDK + LDV) + BM * LDP;
    // Blocks that fit an SM by shared memory (228 KB an SM, 1 KB reserved per block): the
    // kernel's __launch_bounds__(THREADS, MIN_BLOCKS) lets ptxas use every register that
    // occupancy leaves (without it, ptxas aims at more blocks and spills)
    static constexpr int SMEM_BLOCKS = (228 * 1024) / (SMEM_FLOATS * 4 + 1024);
    static constexpr int MIN_BLOCKS = SMEM_BLOCKS < 1 ? 1 : SMEM_BLOCKS > 4 ? 4 : SMEM_BLOCKS;
    static_assert(D % 32 == 0, "head dim must be a multiple of 32");
    static_assert(TX >= 4 && TX <= 32 && (TX & (TX - 1)) == 0, "TX: a power of 2 in [4, 32]");
    static_assert(THREADS % 32 == 0, "whole warps");
    static_assert(BM % TM == 0 && BN % TN == 0 && BN % 32 == 0, "tile shape");
    static_assert(D % (4 * TX) == 0, "output columns per thread");
};

// Copy R rows of D floats (row i at g + (row0 + i) * stride) into shared s (row pitch LDS);
// rows at or past N become zeros. ASYNC: cp.async (the caller commits and waits); else plain
// 16-byte loads and stores. Consecutive threads take consecutive float4s of a row: coalesced.
template <int R, int D, int LDS, int THREADS, bool ASYNC>
__device__ __forceinline__ void load_rows(float* s, const float* __restrict__ g, long long stride,
                                          int row0, int N) {
    constexpr int V4 = D / 4, TOTAL = R * V4, ITERS = (TOTAL + THREADS - 1) / THREADS;
#pragma unroll
    for (int it = 0; it < ITERS; ++it) {
        const int idx = it * THREADS + static_cast<int>(threadIdx.x);
        if (TOTAL % THREADS == 0 || idx < TOTAL) {
            const int r = idx / V4, c = idx % V4;
            const int gr = row0 + r;
            const bool ok = gr < N;
            const float* src = g + static_cast<long long>(ok ? gr : 0) * stride + 4 * c;
            float* dst = s + r * LDS + 4 * c;
            if (ASYNC) {
                cp_async16(dst, src, ok);
            } else {
                *reinterpret_cast<float4*>(dst) =
                    ok ? *reinterpret_cast<const float4*>(src) : make_float4(0.f, 0.f, 0.f, 0.f);
            }
        }
    }
}

__device__ __forceinline__ float fast_exp(float x, bool base2) {
    return base2 ? exp2f(x) : __expf(x);
}

// The forward of one block. PIPE: K/V tiles double-buffered with cp.async (tile t+1 loads
// while tile t computes); else one buffer, loaded with plain float4 loads between barriers.
// EXP2: scores are scaled by scale * log2(e) and exponentiated with exp2 (one MUFU.EX2 and no
// multiply per score); else scale and __expf.
template <int D, int BM, int BN, int TM, int TN, bool PIPE, bool EXP2, bool CAUSAL>
__device__ __forceinline__ void forward_tile(const Args& a, float* smem) {
    using C = Config<D, BM, BN, TM, TN, PIPE>;
    constexpr int TX = C::TX, TY = C::TY, THREADS = C::THREADS, DV4 = C::DV4;
    constexpr int LDQ = C::LDQ, LDK = C::LDK, LDV = C::LDV, LDP = C::LDP;

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int tx = lane % TX;
    const int ty = warp * (32 / TX) + lane / TX;
    const int N = a.N;
    const int mblk = CAUSAL ? static_cast<int>(gridDim.x - 1 - blockIdx.x) : blockIdx.x;
    const int m0 = mblk * BM;
    const int h = blockIdx.y, b = blockIdx.z;

    const float* __restrict__ q = a.q + b * a.q_b + h * a.q_h;
    const float* __restrict__ k = a.k + b * a.k_b + h * a.k_h;
    const float* __restrict__ v = a.v + b * a.v_b + h * a.v_h;
    float* __restrict__ o = a.o + b * a.o_b + h * a.o_h;

    float* Qs = smem;                             // [BM][LDQ]
    float* Ks = Qs + BM * LDQ;                    // [STAGES][BN][LDK]
    float* Vs = Ks + C::STAGES * BN * LDK;        // [STAGES][BN][LDV]
    float* Ps = Vs + C::STAGES * BN * LDV;        // [BM][LDP]

    // keys this block needs: all N, or (causal) those <= its last row
    const int n_end = CAUSAL ? min(N, m0 + BM) : N;
    const int ntiles = (n_end + BN - 1) / BN;     // >= 1 (m0 < N, N >= 1)
    const float sc = EXP2 ? a.scale * 1.4426950408889634f : a.scale;

    float acc[TM][DV4][4];
    float mrow[TM], lrow[TM];  // running max (of scaled scores) and this thread's partial sum
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        mrow[i] = -INFINITY;
        lrow[i] = 0.f;
#pragma unroll
        for (int mm = 0; mm < DV4; ++mm)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][mm][e] = 0.f;
    }

    load_rows<BM, D, LDQ, THREADS, PIPE>(Qs, q, a.q_n, m0, N);
    if (PIPE) {
        load_rows<BN, D, LDK, THREADS, true>(Ks, k, a.k_n, 0, N);
        load_rows<BN, D, LDV, THREADS, true>(Vs, v, a.v_n, 0, N);
        cp_async_commit();
    }

    for (int t = 0; t < ntiles; ++t) {
        const int n0 = t * BN;
        const int buf = PIPE ? (t & 1) : 0;
        if (PIPE) {
            if (t + 1 < ntiles) {  // the next tile streams in while this one computes
                load_rows<BN, D, LDK, THREADS, true>(Ks + (buf ^ 1) * BN * LDK, k, a.k_n, n0 + BN, N);
                load_rows<BN, D, LDV, THREADS, true>(Vs + (buf ^ 1) * BN * LDV, v, a.v_n, n0 + BN, N);
                cp_async_commit();
                cp_async_wait<1>();  // everything but the newest group: tile t (and Q) landed
            } else {
                cp_async_wait<0>();
            }
        } else {
            load_rows<BN, D, LDK, THREADS, false>(Ks, k, a.k_n, n0, N);
            load_rows<BN, D, LDV, THREADS, false>(Vs, v, a.v_n, n0, N);
        }
        __syncthreads();  // tile t (and Q) visible to every thread

        // S = Q K^T for this thread's TM x TN scores: per 4 dims, TM + TN float4 reads feed
        // 4 * TM * TN FMAs
        const float* Kb = Ks + buf * BN * LDK;
        float s[TM][TN];
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) s[i][j] = 0.f;
#pragma unroll 2
        for (int d = 0; d < D; d += 4) {
            float4 qf[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                qf[i] = *reinterpret_cast<const float4*>(Qs + (ty + TY * i) * LDQ + d);
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const float4 kf = *reinterpret_cast<const float4*>(Kb + (tx + TX * j) * LDK + d);
#pragma unroll
                for (int i = 0; i < TM; ++i) {
                    s[i][j] = fmaf(qf[i].x, kf.x, s[i][j]);
                    s[i][j] = fmaf(qf[i].y, kf.y, s[i][j]);
                    s[i][j] = fmaf(qf[i].z, kf.z, s[i][j]);
                    s[i][j] = fmaf(qf[i].w, kf.w, s[i][j]);
                }
            }
        }

        // scale; mask keys past N and (causal) keys after the query. Only the last tile and
        // the tiles crossing the diagonal need the test.
        const bool masked = (n0 + BN > N) || (CAUSAL && n0 + BN - 1 > m0);
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                float x = s[i][j] * sc;
                if (masked) {
                    const int col = n0 + tx + TX * j, row = m0 + ty + TY * i;
                    if (col >= N || (CAUSAL && col > row)) x = -INFINITY;
                }
                s[i][j] = x;
            }

        // online softmax: new row max (over the TX lanes sharing the row), rescale the running
        // sum and the output accumulator by exp(m_old - m_new), p = exp(s - m_new)
#pragma unroll
        for (int i = 0; i < TM; ++i) {
            float mx = s[i][0];
#pragma unroll
            for (int j = 1; j < TN; ++j) mx = fmaxf(mx, s[i][j]);
#pragma unroll
            for (int off = TX / 2; off > 0; off >>= 1)
                mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
            const float mnew = fmaxf(mrow[i], mx);
            // a row whose keys so far are all masked keeps m = -inf: subtract 0 instead, so
            // exp(-inf - -inf) = NaN never happens (p = exp(-inf) = 0 for masked scores)
            const float msafe = mnew == -INFINITY ? 0.f : mnew;
            const float alpha = fast_exp(mrow[i] - msafe, EXP2);
            mrow[i] = mnew;
            float sum = 0.f;
#pragma unroll
            for (int j = 0; j < TN; ++j) {
                const float p = fast_exp(s[i][j] - msafe, EXP2);
                s[i][j] = p;
                sum += p;
            }
            lrow[i] = lrow[i] * alpha + sum;
#pragma unroll
            for (int mm = 0; mm < DV4; ++mm)
#pragma unroll
                for (int e = 0; e < 4; ++e) acc[i][mm][e] *= alpha;
        }

        // P goes through shared memory: the P V product needs every key of a row, and a
        // thread holds only TN of them
#pragma unroll
        for (int i = 0; i < TM; ++i)
#pragma unroll
            for (int j = 0; j < TN; ++j) Ps[(ty + TY * i) * LDP + tx + TX * j] = s[i][j];
        __syncthreads();

        // O += P V: per 4 keys, TM float4 reads of P and 4 * DV4 float4 reads of V feed
        // 16 * TM * DV4 FMAs
        const float* Vb = Vs + buf * BN * LDV;
#pragma unroll 2
        for (int c = 0; c < BN; c += 4) {
            float4 pf[TM];
#pragma unroll
            for (int i = 0; i < TM; ++i)
                pf[i] = *reinterpret_cast<const float4*>(Ps + (ty + TY * i) * LDP + c);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
#pragma unroll
                for (int mm = 0; mm < DV4; ++mm) {
                    const float4 vf =
                        *reinterpret_cast<const float4*>(Vb + (c + kk) * LDV + 4 * (tx + TX * mm));
#pragma unroll
                    for (int i = 0; i < TM; ++i) {
                        const float p = kk == 0 ? pf[i].x : kk == 1 ? pf[i].y : kk == 2 ? pf[i].z : pf[i].w;
                        acc[i][mm][0] = fmaf(p, vf.x, acc[i][mm][0]);
                        acc[i][mm][1] = fmaf(p, vf.y, acc[i][mm][1]);
                        acc[i][mm][2] = fmaf(p, vf.z, acc[i][mm][2]);
                        acc[i][mm][3] = fmaf(p, vf.w, acc[i][mm][3]);
                    }
                }
            }
        }
        __syncthreads();  // everyone is done with K/V[buf] and P before they are overwritten
    }

    // finish: the row sum over the TX lanes, O = acc / l, lse = m + log(l)
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        float l = lrow[i];
#pragma unroll
        for (int off = TX / 2; off > 0; off >>= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
        const int row = m0 + ty + TY * i;
        if (row < N) {
            const float inv = 1.f / l;  // l >= 1: the row's maximum contributes exp(0)
            float* orow = o + static_cast<long long>(row) * a.o_n;
#pragma unroll
            for (int mm = 0; mm < DV4; ++mm)
                *reinterpret_cast<float4*>(orow + 4 * (tx + TX * mm)) =
                    make_float4(acc[i][mm][0] * inv, acc[i][mm][1] * inv, acc[i][mm][2] * inv,
                                acc[i][mm][3] * inv);
            if (a.lse != nullptr && tx == 0)
                a.lse[(static_cast<long long>(b) * a.H + h) * N + row] =
                    EXP2 ? (mrow[i] + log2f(l)) * 0.6931471805599453f : mrow[i] + logf(l);
        }
    }
}

}  // namespace detail

// The tile forward() uses for head dim D (day 26's sweep picks these; see its README).
template <int D>
struct Tile {
    static constexpr int BLOCK_M = 64, BLOCK_N = 64, TM = 4, TN = 8;
    using Cfg = detail::Config<D, BLOCK_M, BLOCK_N, TM, TN, true>;
    static constexpr int THREADS = Cfg::THREADS, MIN_BLOCKS = Cfg::MIN_BLOCKS;
};
template <>
struct Tile<128> {
    static constexpr int BLOCK_M = 64, BLOCK_N = 32, TM = 4, TN = 4;
    using Cfg = detail::Config<128, BLOCK_M, BLOCK_N, TM, TN, true>;
    static constexpr int THREADS = Cfg::THREADS, MIN_BLOCKS = Cfg::MIN_BLOCKS;
};

// Dynamic shared memory forward<D, *> needs, in bytes (pass it as the launch's shared size).
template <int D>
constexpr int smem_bytes() {
    return Tile<D>::Cfg::SMEM_FLOATS * 4;
}

extern __shared__ float4 flash_dynamic_smem[];

// The whole forward of one block: grid (ceil(N / BLOCK_M), H, B), blockDim.x = THREADS,
// smem_bytes<D>() bytes of dynamic shared memory.
template <int D, bool CAUSAL>
__device__ __forceinline__ void forward(const Args& a) {
    using T = Tile<D>;
    detail::forward_tile<D, T::BLOCK_M, T::BLOCK_N, T::TM, T::TN, true, true, CAUSAL>(
        a, reinterpret_cast<float*>(flash_dynamic_smem));
}

}  // namespace flash
}  // namespace cuda100
