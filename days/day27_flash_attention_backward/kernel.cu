// Day 27: FlashAttention-2 backward in fp32 on CUDA cores.
//
//   given Q, K, V, O, dO [BH, N, d] (row-major, one [N, d] matrix per batch*head) and the
//   forward's row logsumexp LSE [BH, N] (natural log of sum_j exp(scale * q_i . k_j)):
//     P_ij  = exp(scale * q_i . k_j - LSE_i)        (0 where causal masks j > i)
//     dV    = P^T dO
//     dP_ij = dO_i . v_j
//     D_i   = dO_i . o_i  = sum_j P_ij dP_ij        (the "D trick": one dot product a row)
//     dS_ij = P_ij (dP_ij - D_i)
//     dQ    = scale * dS K,        dK = scale * dS^T Q
//
// Build on its own:  nvcc -arch=sm_90 -O3 -I common/cuda -cubin kernel.cu
// Run:               python run_day.py 27
//
// Accuracy: dK, dV (and dQ) are sums over up to N terms. One fp32 accumulator fed N terms in a
// row has a rounding error growing like sqrt(N); every version sums a tile (64 terms) into a
// partial first and adds the partials, which keeps the error near that of a blocked BLAS sum
// (the float32 numpy computation the tolerance is set from).
//
// Every version first runs fa_bwd_preprocess (D = rowsum(dO * O), one warp a row; for v2 it
// also zeroes dQ, which v2 accumulates with atomics).
//   v1  naive: fa_bwd_v1_scores writes P and dS as two [BH, N, N] matrices in global memory
//       (one thread per score), then fa_bwd_v1_dkdv (dK, dV: one thread per output, a loop
//       over the N query rows) and fa_bwd_v1_dq (dQ: a loop over the N keys).
//   v2  flash, one block per tile of BN keys (K/V outer): K_j, V_j stay in shared memory while
//       the block walks the query tiles Q_i, dO_i; it recomputes S = Q_i K_j^T and
//       dP = dO_i V_j^T (4x4 register tiles a thread), forms P and dS, accumulates dV and dK in
//       registers and adds its share of dQ = dS K_j into global memory with atomicAdd. Nothing
//       N x N is stored. Causal blocks start at the diagonal tile. Unpadded shared tiles
//       (the 16 K rows a warp reads start in one bank), the S/dP loop written one float at
//       a time (nvcc merges four into one 16-byte LDS.128 itself), expf.
//   v3  deterministic: the same dK/dV kernel without the atomics, and a separate dQ kernel
//       (one block per query tile, Q-outer) that recomputes S and dP over the key tiles and
//       keeps dQ in registers. Every sum is done in a fixed order; the price is computing
//       S and dP twice.
//   v4  v3 made fast: shared tiles padded (K/V rows by 4 floats, P/dS rows by 16) so the
//       eight 16-byte reads of a quarter-warp cover the 32 banks once; float4 shared loads
//       written out in every inner loop; exp2f with log2(e) folded into the scale and LSE;
//       the causal/edge mask applied only on tiles that cross the diagonal or the end of
//       the sequence.
//       fa_bwd_v4_*_bmXX_bnYY_bZ are the tile candidates .notes/day27_sweep.py times
//       (BM query rows x BN keys a tile, Z = minimum blocks per SM for __launch_bounds__).
//   v5  v4's tiles with v2's atomic dQ: one kernel doing five products of 2 x pairs x d
//       FLOPs instead of v3/v4's seven, at the price of atomics and of run-to-run bit
//       differences in dQ (the order of the float adds varies).
//   v6  v5 rebuilt for the instruction and shared-memory budget: the 256 threads keep v5's
//       16 x 16 grid but a warp covers 4 x 8 of it (v5: 2 x 16), so every 16-byte shared read
//       of all five products is one wavefront; P/dS rows padded by 8; the S/dP loop written
//       as one fmaf per term (v4/v5's four-term dot compiles to FMUL + 3 FFMA + FADD); Q, dO,
//       LSE, D of the next query tile copied with cp.async while the current one computes;
//       dQ added with 16-byte red.global.add.v4.f32 (a quarter of v5's atomics).
//       fa_bwd_v6_d*_bmXX_bnYY_sS_bZ are its candidates (S = 1 or 2 Q/dO stages);
//       .notes/day27_sweep_v6.py times them.
#include "vec.cuh"
#include "warp.cuh"

using namespace cuda100;

#define FA_LOG2E 1.4426950408889634f
#define FA_THREADS 256  // every flash kernel: 16 x 16 threads
#define FA_SUM_BLOCK 64  // v1's blocked sums: 64 terms a partial sum

// ---------------------------------------------------------------------------------------
// D = rowsum(dO * O): one warp per row of [rows, d] (d % 4 == 0); optionally zero dQ's row
// ---------------------------------------------------------------------------------------
extern "C" __global__ void fa_bwd_preprocess(const float* __restrict__ O,
                                             const float* __restrict__ dO,
                                             float* __restrict__ Dv, float* __restrict__ dQ,
                                             int rows, int d) {
    const int row = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;  // warp-uniform
    const int lane = threadIdx.x & 31;
    if (row >= rows) return;  // the whole warp leaves together
    const size_t base = (size_t)row * d;
    float s = 0.f;
    for (int e = 4 * lane; e < d; e += 128) {
        const float4 a = load4(O + base + e), g = load4(dO + base + e);
        s += a.x * g.x + a.y * g.y + a.z * g.z + a.w * g.w;
    }
    s = warp_sum(s);
    if (lane == 0) Dv[row] = s;
    if (dQ != nullptr)
        for (int e = 4 * lane; e < d; e += 128) store4(dQ + base + e, make4(0.f));
}

// ---------------------------------------------------------------------------------------
// v1: naive, P and dS materialized ([BH, N, N] each)
// ---------------------------------------------------------------------------------------
// block (32, 8): x = key j, y = query row i, z = batch*head
extern "C" __global__ void fa_bwd_v1_scores(const float* __restrict__ Q, const float* __restrict__ K,
                                            const float* __restrict__ V, const float* __restrict__ dO,
                                            const float* __restrict__ LSE,
                                            const float* __restrict__ Dv, float* __restrict__ P,
                                            float* __restrict__ dS, int N, int d, float scale,
                                            int causal) {
    const int j = blockIdx.x * 32 + threadIdx.x, i = blockIdx.y * 8 + threadIdx.y;
    const size_t bh = blockIdx.z;
    if (i >= N || j >= N) return;
    const float* q = Q + (bh * N + i) * d;
    const float* g = dO + (bh * N + i) * d;
    const float* k = K + (bh * N + j) * d;
    const float* v = V + (bh * N + j) * d;
    float s = 0.f, dp = 0.f;
    for (int e = 0; e < d; ++e) {
        s += q[e] * k[e];
        dp += g[e] * v[e];
    }
    const float p = (causal && j > i) ? 0.f : expf(scale * s - LSE[bh * N + i]);
    const size_t at = (bh * N + i) * N + j;
    P[at] = p;
    dS[at] = p * (dp - Dv[bh * N + i]);
}

// block (32, 8): x = column e of d, y = key j; dV_j = sum_i P_ij dO_i, dK_j = scale sum_i dS_ij Q_i
extern "C" __global__ void fa_bwd_v1_dkdv(const float* __restrict__ Q, const float* __restrict__ dO,
                                          const float* __restrict__ P, const float* __restrict__ dS,
                                          float* __restrict__ dK, float* __restrict__ dV, int N,
                                          int d, float scale) {
    const int e = blockIdx.x * 32 + threadIdx.x, j = blockIdx.y * 8 + threadIdx.y;
    const size_t bh = blockIdx.z;
    if (e >= d || j >= N) return;
    float ak = 0.f, av = 0.f;
    for (int i0 = 0; i0 < N; i0 += FA_SUM_BLOCK) {  // blocked sum: see the header
        float tk = 0.f, tv = 0.f;
        for (int i = i0; i < min(i0 + FA_SUM_BLOCK, N); ++i) {
            const size_t at = (bh * N + i) * N + j;
            tv += P[at] * dO[(bh * N + i) * d + e];
            tk += dS[at] * Q[(bh * N + i) * d + e];
        }
        av += tv;
        ak += tk;
    }
    dV[(bh * N + j) * d + e] = av;
    dK[(bh * N + j) * d + e] = scale * ak;
}

// block (32, 8): x = column e, y = query row i; dQ_i = scale sum_j dS_ij K_j
extern "C" __global__ void fa_bwd_v1_dq(const float* __restrict__ K, const float* __restrict__ dS,
                                        float* __restrict__ dQ, int N, int d, float scale) {
    const int e = blockIdx.x * 32 + threadIdx.x, i = blockIdx.y * 8 + threadIdx.y;
    const size_t bh = blockIdx.z;
    if (e >= d || i >= N) return;
    float a = 0.f;
    const float* row = dS + (bh * N + i) * N;
    for (int j0 = 0; j0 < N; j0 += FA_SUM_BLOCK) {
        float t = 0.f;
        for (int j = j0; j < min(j0 + FA_SUM_BLOCK, N); ++j) t += row[j] * K[(bh * N + j) * d + e];
        a += t;
    }
    dQ[(bh * N + i) * d + e] = scale * a;
}

// ---------------------------------------------------------------------------------------
// flash versions (v2-v4): shared tiles and the thread layout
// ---------------------------------------------------------------------------------------
// Thread t = 16 ty + tx. In a [BM x BN] score tile it owns rows ty + 16 r (r < BM/16) and
// columns tx + 16 c (c < BN/16). In a [rows x d] gradient tile it owns column groups
// 64 g + 4 tx .. +3 (g < d/64); the rows are ty*RN + a in dK/dV (RN = BN/16 consecutive keys,
// so a float4 of a P/dS row serves four of them) and ty + 16 a in dQ.
template <int D, int BM, int BN, bool FAST>
struct Tiles {
    static_assert(D % 64 == 0, "d must be a multiple of 64");
    static_assert(BM % 16 == 0 && BN % 16 == 0, "tiles are multiples of 16");
    static constexpr int DP = FAST ? D + 4 : D;     // row stride of the Q, dO, K, V tiles
    static constexpr int BP = FAST ? BN + 16 : BN;  // row stride of the P, dS tiles
    static constexpr int RM = BM / 16, RN = BN / 16, CG = D / 64;
};

// rows [row0, row0 + ROWS) of a [N, D] matrix into a [ROWS, DP] shared tile, zeros past N
template <int ROWS, int D, int DP>
__device__ __forceinline__ void load_rows(float* s, const float* __restrict__ g, int row0, int N) {
    constexpr int V4 = D / 4;
    for (int idx = threadIdx.x; idx < ROWS * V4; idx += FA_THREADS) {
        const int r = idx / V4, c = (idx % V4) * 4;
        float4 v = make4(0.f);
        if (row0 + r < N) v = load4(g + (size_t)(row0 + r) * D + c);
        store4(s + r * DP + c, v);
    }
}

// lse (times log2 e for exp2f) and D of rows [i0, i0 + BM), zeros past N
template <int BM, bool FAST>
__device__ __forceinline__ void load_row_stats(float* lse_s, float* d_s, const float* __restrict__ LSE,
                                               const float* __restrict__ Dv, int i0, int N) {
    for (int r = threadIdx.x; r < BM; r += FA_THREADS) {
        const bool ok = i0 + r < N;
        lse_s[r] = ok ? LSE[i0 + r] * (FAST ? FA_LOG2E : 1.f) : 0.f;
        d_s[r] = ok ? Dv[i0 + r] : 0.f;
    }
}

// S = Q_i K_j^T and dP = dO_i V_j^T, this thread's RM x RN of each
template <int D, int BM, int BN, bool FAST>
__device__ __forceinline__ void scores(const float* Qs, const float* dOs, const float* Ks,
                                       const float* Vs, float (&s)[BM / 16][BN / 16],
                                       float (&dp)[BM / 16][BN / 16], int ty, int tx) {
    using T = Tiles<D, BM, BN, FAST>;
#pragma unroll
    for (int r = 0; r < T::RM; ++r)
#pragma unroll
        for (int c = 0; c < T::RN; ++c) s[r][c] = dp[r][c] = 0.f;
    if constexpr (FAST) {
#pragma unroll 2
        for (int k = 0; k < D; k += 4) {
            float4 kk[T::RN], vv[T::RN];
#pragma unroll
            for (int c = 0; c < T::RN; ++c) {
                kk[c] = load4(Ks + (tx + 16 * c) * T::DP + k);
                vv[c] = load4(Vs + (tx + 16 * c) * T::DP + k);
            }
#pragma unroll
            for (int r = 0; r < T::RM; ++r) {
                const float4 q = load4(Qs + (ty + 16 * r) * T::DP + k);
                const float4 g = load4(dOs + (ty + 16 * r) * T::DP + k);
#pragma unroll
                for (int c = 0; c < T::RN; ++c) {
                    s[r][c] += q.x * kk[c].x + q.y * kk[c].y + q.z * kk[c].z + q.w * kk[c].w;
                    dp[r][c] += g.x * vv[c].x + g.y * vv[c].y + g.z * vv[c].z + g.w * vv[c].w;
                }
            }
        }
    } else {
#pragma unroll 4
        for (int k = 0; k < D; ++k) {
            float kk[T::RN], vv[T::RN];
#pragma unroll
            for (int c = 0; c < T::RN; ++c) {
                kk[c] = Ks[(tx + 16 * c) * T::DP + k];
                vv[c] = Vs[(tx + 16 * c) * T::DP + k];
            }
#pragma unroll
            for (int r = 0; r < T::RM; ++r) {
                const float q = Qs[(ty + 16 * r) * T::DP + k], g = dOs[(ty + 16 * r) * T::DP + k];
#pragma unroll
                for (int c = 0; c < T::RN; ++c) {
                    s[r][c] += q * kk[c];
                    dp[r][c] += g * vv[c];
                }
            }
        }
    }
}

// P and dS from S and dP (masked to 0 past N and, causal, above the diagonal); dS always
// stored to dSs, P to Ps when Ps != nullptr
template <int D, int BM, int BN, bool FAST>
__device__ __forceinline__ void probs(const float (&s)[BM / 16][BN / 16],
                                      const float (&dp)[BM / 16][BN / 16], const float* lse_s,
                                      const float* d_s, float* Ps, float* dSs, float sl, int i0,
                                      int j0, int N, int causal, int ty, int tx) {
    using T = Tiles<D, BM, BN, FAST>;
    // FAST: a tile wholly inside the sequence and wholly at or below the diagonal skips the mask
    const bool mask = !FAST || i0 + BM > N || j0 + BN > N || (causal && j0 + BN - 1 > i0);
#pragma unroll
    for (int r = 0; r < T::RM; ++r) {
        const int rr = ty + 16 * r, qi = i0 + rr;
        const float lse = lse_s[rr], dd = d_s[rr];
#pragma unroll
        for (int c = 0; c < T::RN; ++c) {
            const int cc = tx + 16 * c, kj = j0 + cc;
            float p = FAST ? exp2f(fmaf(s[r][c], sl, -lse)) : expf(s[r][c] * sl - lse);
            if (mask && (qi >= N || kj >= N || (causal && kj > qi))) p = 0.f;
            if (Ps != nullptr) Ps[rr * T::BP + cc] = p;
            dSs[rr * T::BP + cc] = p * (dp[r][c] - dd);
        }
    }
}

// acc[a][4g + l] += sum_c dS[ty + 16 a][c] K[c][64 g + 4 tx + l] over the BN keys of the tile
template <int D, int BM, int BN, bool FAST, int BP = Tiles<D, BM, BN, FAST>::BP>
__device__ __forceinline__ void dq_tile(const float* dSs, const float* Ks,
                                        float (&acc)[BM / 16][D / 16], int ty, int tx) {
    using T = Tiles<D, BM, BN, FAST>;
#pragma unroll 2
    for (int c = 0; c < BN; c += 4) {
        float4 kv[4][T::CG];
#pragma unroll
        for (int u = 0; u < 4; ++u)
#pragma unroll
            for (int g = 0; g < T::CG; ++g) kv[u][g] = load4(Ks + (c + u) * T::DP + 64 * g + 4 * tx);
#pragma unroll
        for (int a = 0; a < T::RM; ++a) {
            const float4 ds = load4(dSs + (ty + 16 * a) * BP + c);
            const float w[4] = {ds.x, ds.y, ds.z, ds.w};
#pragma unroll
            for (int u = 0; u < 4; ++u)
#pragma unroll
                for (int g = 0; g < T::CG; ++g) {
                    acc[a][4 * g + 0] += w[u] * kv[u][g].x;
                    acc[a][4 * g + 1] += w[u] * kv[u][g].y;
                    acc[a][4 * g + 2] += w[u] * kv[u][g].z;
                    acc[a][4 * g + 3] += w[u] * kv[u][g].w;
                }
        }
    }
}

template <int N_ROWS, int COLS>
__device__ __forceinline__ void zero(float (&a)[N_ROWS][COLS]) {
#pragma unroll
    for (int r = 0; r < N_ROWS; ++r)
#pragma unroll
        for (int c = 0; c < COLS; ++c) a[r][c] = 0.f;
}

template <int D, int BM, int BN, bool FAST>
__host__ __device__ constexpr int dkdv_smem_floats() {
    using T = Tiles<D, BM, BN, FAST>;
    return 2 * BN * T::DP + 2 * BM * T::DP + 2 * BM * T::BP + 2 * BM;
}

template <int D, int BM, int BN, bool FAST>
__host__ __device__ constexpr int dq_smem_floats() {
    using T = Tiles<D, BM, BN, FAST>;
    return 2 * BN * T::DP + 2 * BM * T::DP + BM * T::BP + 2 * BM;
}

// ---------------------------------------------------------------------------------------
// K/V-outer kernel: grid (BH, cdiv(N, BN)); the heads are x, so the blocks launched first
// are tile 0 of every head (under a causal mask, the tiles with the most work). dK, dV of keys [j0, j0 + BN) in registers;
// ATOMIC_DQ (v2) also adds scale * dS K_j into dQ (zeroed by the preprocess kernel).
// ---------------------------------------------------------------------------------------
template <int D, int BM, int BN, bool FAST, bool ATOMIC_DQ>
__device__ __forceinline__ void dkdv_body(const float* __restrict__ Q, const float* __restrict__ K,
                                          const float* __restrict__ V, const float* __restrict__ dO,
                                          const float* __restrict__ LSE,
                                          const float* __restrict__ Dv, float* __restrict__ dQ,
                                          float* __restrict__ dK, float* __restrict__ dV, int N,
                                          float scale, int causal) {
    using T = Tiles<D, BM, BN, FAST>;
    static_assert(BN % 64 == 0, "dK/dV rows come four at a time from one float4 of P");
    extern __shared__ float4 smem4[];
    float* Ks = reinterpret_cast<float*>(smem4);
    float* Vs = Ks + BN * T::DP;
    float* Qs = Vs + BN * T::DP;
    float* dOs = Qs + BM * T::DP;
    float* Ps = dOs + BM * T::DP;
    float* dSs = Ps + BM * T::BP;
    float* lse_s = dSs + BM * T::BP;
    float* d_s = lse_s + BM;

    const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    const int j0 = blockIdx.y * BN;  // < N: the grid has cdiv(N, BN) blocks in y
    const size_t bh = blockIdx.x, head = bh * (size_t)N * D;
    Q += head; K += head; V += head; dO += head; dK += head; dV += head;
    if (ATOMIC_DQ) dQ += head;
    LSE += bh * N; Dv += bh * N;
    const float sl = FAST ? scale * FA_LOG2E : scale;

    load_rows<BN, D, T::DP>(Ks, K, j0, N);
    load_rows<BN, D, T::DP>(Vs, V, j0, N);
    float ak[T::RN][D / 16], av[T::RN][D / 16];
    zero(ak);
    zero(av);

    const int n_i = (N + BM - 1) / BM;
    for (int it = causal ? j0 / BM : 0; it < n_i; ++it) {  // causal: rows >= j0 only
        const int i0 = it * BM;
        __syncthreads();  // the last tile's readers of Qs, dOs, Ps, dSs are done
        load_rows<BM, D, T::DP>(Qs, Q, i0, N);
        load_rows<BM, D, T::DP>(dOs, dO, i0, N);
        load_row_stats<BM, FAST>(lse_s, d_s, LSE, Dv, i0, N);
        __syncthreads();

        float s[T::RM][T::RN], dp[T::RM][T::RN];
        scores<D, BM, BN, FAST>(Qs, dOs, Ks, Vs, s, dp, ty, tx);
        probs<D, BM, BN, FAST>(s, dp, lse_s, d_s, Ps, dSs, sl, i0, j0, N, causal, ty, tx);
        __syncthreads();

        // dV[key][e] += sum_r P[r][key] dO[r][e];  dK[key][e] += sum_r dS[r][key] Q[r][e],
        // summed over this tile's BM rows first, then added to the running total
        float tk[T::RN][D / 16], tv[T::RN][D / 16];
        zero(tk);
        zero(tv);
#pragma unroll 2
        for (int r = 0; r < BM; ++r) {
            float p[T::RN], ds[T::RN];
#pragma unroll
            for (int a = 0; a < T::RN; a += 4) {
                const float4 p4 = load4(Ps + r * T::BP + ty * T::RN + a);
                const float4 d4 = load4(dSs + r * T::BP + ty * T::RN + a);
                p[a] = p4.x; p[a + 1] = p4.y; p[a + 2] = p4.z; p[a + 3] = p4.w;
                ds[a] = d4.x; ds[a + 1] = d4.y; ds[a + 2] = d4.z; ds[a + 3] = d4.w;
            }
#pragma unroll
            for (int g = 0; g < T::CG; ++g) {
                const float4 go = load4(dOs + r * T::DP + 64 * g + 4 * tx);
                const float4 qv = load4(Qs + r * T::DP + 64 * g + 4 * tx);
#pragma unroll
                for (int a = 0; a < T::RN; ++a) {
                    tv[a][4 * g + 0] += p[a] * go.x;
                    tv[a][4 * g + 1] += p[a] * go.y;
                    tv[a][4 * g + 2] += p[a] * go.z;
                    tv[a][4 * g + 3] += p[a] * go.w;
                    tk[a][4 * g + 0] += ds[a] * qv.x;
                    tk[a][4 * g + 1] += ds[a] * qv.y;
                    tk[a][4 * g + 2] += ds[a] * qv.z;
                    tk[a][4 * g + 3] += ds[a] * qv.w;
                }
            }
        }
#pragma unroll
        for (int a = 0; a < T::RN; ++a)
#pragma unroll
            for (int e = 0; e < D / 16; ++e) {
                ak[a][e] += tk[a][e];
                av[a][e] += tv[a][e];
            }

        if constexpr (ATOMIC_DQ) {  // this block's share of dQ_i: scale * dS K_j
            float aq[T::RM][D / 16];
            zero(aq);
            dq_tile<D, BM, BN, FAST>(dSs, Ks, aq, ty, tx);
#pragma unroll
            for (int a = 0; a < T::RM; ++a) {
                const int qi = i0 + ty + 16 * a;
                if (qi < N) {
#pragma unroll
                    for (int g = 0; g < T::CG; ++g)
#pragma unroll
                        for (int l = 0; l < 4; ++l)
                            atomicAdd(dQ + (size_t)qi * D + 64 * g + 4 * tx + l, scale * aq[a][4 * g + l]);
                }
            }
        }
    }

#pragma unroll
    for (int a = 0; a < T::RN; ++a) {
        const int kj = j0 + ty * T::RN + a;
        if (kj < N) {
#pragma unroll
            for (int g = 0; g < T::CG; ++g) {
                const size_t at = (size_t)kj * D + 64 * g + 4 * tx;
                store4(dV + at, make_float4(av[a][4 * g], av[a][4 * g + 1], av[a][4 * g + 2],
                                            av[a][4 * g + 3]));
                store4(dK + at, make_float4(scale * ak[a][4 * g], scale * ak[a][4 * g + 1],
                                            scale * ak[a][4 * g + 2], scale * ak[a][4 * g + 3]));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// Q-outer dQ kernel (v3, v4): grid (BH, cdiv(N, BM)), heads in x as above. dQ of rows [i0, i0 + BM) in registers.
// ---------------------------------------------------------------------------------------
template <int D, int BM, int BN, bool FAST>
__device__ __forceinline__ void dq_body(const float* __restrict__ Q, const float* __restrict__ K,
                                        const float* __restrict__ V, const float* __restrict__ dO,
                                        const float* __restrict__ LSE, const float* __restrict__ Dv,
                                        float* __restrict__ dQ, int N, float scale, int causal) {
    using T = Tiles<D, BM, BN, FAST>;
    extern __shared__ float4 smem4[];
    float* Qs = reinterpret_cast<float*>(smem4);
    float* dOs = Qs + BM * T::DP;
    float* Ks = dOs + BM * T::DP;
    float* Vs = Ks + BN * T::DP;
    float* dSs = Vs + BN * T::DP;
    float* lse_s = dSs + BM * T::BP;
    float* d_s = lse_s + BM;

    const int ty = threadIdx.x >> 4, tx = threadIdx.x & 15;
    const int n_i = (N + BM - 1) / BM;
    // causal: the last query tiles have the most keys; hand them out first
    const int i0 = (causal ? n_i - 1 - (int)blockIdx.y : (int)blockIdx.y) * BM;
    const size_t bh = blockIdx.x, head = bh * (size_t)N * D;
    Q += head; K += head; V += head; dO += head; dQ += head;
    LSE += bh * N; Dv += bh * N;
    const float sl = FAST ? scale * FA_LOG2E : scale;

    load_rows<BM, D, T::DP>(Qs, Q, i0, N);
    load_rows<BM, D, T::DP>(dOs, dO, i0, N);
    load_row_stats<BM, FAST>(lse_s, d_s, LSE, Dv, i0, N);
    float aq[T::RM][D / 16];
    zero(aq);

    const int n_j_all = (N + BN - 1) / BN;
    const int last_row = min(i0 + BM, N) - 1;  // causal: keys <= last_row only
    const int n_j = causal ? min(n_j_all, last_row / BN + 1) : n_j_all;
    for (int jt = 0; jt < n_j; ++jt) {
        const int j0 = jt * BN;
        __syncthreads();  // Q tile visible (first pass); the last tile's readers are done
        load_rows<BN, D, T::DP>(Ks, K, j0, N);
        load_rows<BN, D, T::DP>(Vs, V, j0, N);
        __syncthreads();
        float s[T::RM][T::RN], dp[T::RM][T::RN];
        scores<D, BM, BN, FAST>(Qs, dOs, Ks, Vs, s, dp, ty, tx);
        probs<D, BM, BN, FAST>(s, dp, lse_s, d_s, nullptr, dSs, sl, i0, j0, N, causal, ty, tx);
        __syncthreads();
        float tq[T::RM][D / 16];  // this key tile's terms, then added to the running total
        zero(tq);
        dq_tile<D, BM, BN, FAST>(dSs, Ks, tq, ty, tx);
#pragma unroll
        for (int a = 0; a < T::RM; ++a)
#pragma unroll
            for (int e = 0; e < D / 16; ++e) aq[a][e] += tq[a][e];
    }

#pragma unroll
    for (int a = 0; a < T::RM; ++a) {
        const int qi = i0 + ty + 16 * a;
        if (qi < N) {
#pragma unroll
            for (int g = 0; g < T::CG; ++g)
                store4(dQ + (size_t)qi * D + 64 * g + 4 * tx,
                       make_float4(scale * aq[a][4 * g], scale * aq[a][4 * g + 1],
                                   scale * aq[a][4 * g + 2], scale * aq[a][4 * g + 3]));
        }
    }
}

// ---------------------------------------------------------------------------------------
// v6: one fused K/V-outer kernel (v5's five products) with
//   - a warp shape of 4 rows x 8 columns of the 16 x 16 thread grid (v2-v5: 2 x 16), so every
//     16-byte shared read of every product is one wavefront (see v6_thread below);
//   - P/dS rows padded by 8 floats (v4: 16), which the 4-row warp shape needs;
//   - Q, dO, LSE and D of the next query tile copied with cp.async while this one computes
//     (STAGES = 2; STAGES = 1 loads after the tile, leaving room for two blocks an SM);
//   - dQ added with 16-byte red.global.add.v4.f32 (sm_90): a quarter of v5's atomics.
// ---------------------------------------------------------------------------------------

// cp.async (16 or 4 bytes global -> shared, no registers in between); valid = false writes
// zeros and reads nothing (rows past N). The host emulator replaces these three helpers and
// fa_red_add4 (.notes/day27_emulate.py).
__device__ __forceinline__ void fa_cp_async16(float* smem, const float* gmem, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void fa_cp_async4(float* smem, const float* gmem, bool valid) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 4 : 0));
}
__device__ __forceinline__ void fa_cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void fa_cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// *p += v (four floats, 16-byte aligned), one vector reduction in L2; the result is not returned
__device__ __forceinline__ void fa_red_add4(float* p, float4 v) {
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(v.x), "f"(v.y),
                 "f"(v.z), "f"(v.w)
                 : "memory");
}

// rows [row0, row0 + ROWS) of a [N, D] matrix into a [ROWS, DP] shared tile with cp.async,
// zeros past N (the source of a zero row is row 0, a valid address that is not read). A fixed
// number of 16-byte copies a thread (ROWS * D / 4 / 256), so the loop unrolls completely.
template <int ROWS, int D, int DP>
__device__ __forceinline__ void load_rows_async(float* s, const float* __restrict__ g, int row0, int N) {
    constexpr int V4 = D / 4, PER = ROWS * V4 / FA_THREADS;
    static_assert(ROWS * V4 % FA_THREADS == 0 && FA_THREADS % V4 == 0, "whole rows per pass");
    const int r0 = threadIdx.x / V4, c = (threadIdx.x % V4) * 4;
#pragma unroll
    for (int k = 0; k < PER; ++k) {
        const int r = r0 + k * (FA_THREADS / V4);
        const bool ok = row0 + r < N;
        fa_cp_async16(s + r * DP + c, g + (size_t)(ok ? row0 + r : 0) * D + c, ok);
    }
}

// S = Q_i K_j^T and dP = dO_i V_j^T as v4's scores(), but each product term is its own fmaf
// into the accumulator. v4 writes s += q.x*k.x + q.y*k.y + q.z*k.z + q.w*k.w, which nvcc
// compiles to FMUL + 3 FFMA + FADD: five instructions for four multiply-adds (the SASS of
// the v5 kernels shows 192 FFMA, 64 FMUL, 64 FADD in this loop).
template <int D, int BM, int BN>
__device__ __forceinline__ void scores_fma(const float* Qs, const float* dOs, const float* Ks,
                                           const float* Vs, float (&s)[BM / 16][BN / 16],
                                           float (&dp)[BM / 16][BN / 16], int ty, int tx) {
    using T = Tiles<D, BM, BN, true>;
    zero(s);
    zero(dp);
#pragma unroll 2
    for (int k = 0; k < D; k += 4) {
        float4 kk[T::RN], vv[T::RN];
#pragma unroll
        for (int c = 0; c < T::RN; ++c) {
            kk[c] = load4(Ks + (tx + 16 * c) * T::DP + k);
            vv[c] = load4(Vs + (tx + 16 * c) * T::DP + k);
        }
#pragma unroll
        for (int r = 0; r < T::RM; ++r) {
            const float4 q = load4(Qs + (ty + 16 * r) * T::DP + k);
            const float4 g = load4(dOs + (ty + 16 * r) * T::DP + k);
#pragma unroll
            for (int c = 0; c < T::RN; ++c) {
                s[r][c] = fmaf(q.x, kk[c].x, s[r][c]);
                s[r][c] = fmaf(q.y, kk[c].y, s[r][c]);
                s[r][c] = fmaf(q.z, kk[c].z, s[r][c]);
                s[r][c] = fmaf(q.w, kk[c].w, s[r][c]);
                dp[r][c] = fmaf(g.x, vv[c].x, dp[r][c]);
                dp[r][c] = fmaf(g.y, vv[c].y, dp[r][c]);
                dp[r][c] = fmaf(g.z, vv[c].z, dp[r][c]);
                dp[r][c] = fmaf(g.w, vv[c].w, dp[r][c]);
            }
        }
    }
}

template <int D, int BM, int BN, int STAGES>
struct V6 {
    using T = Tiles<D, BM, BN, true>;
    static constexpr int DP = T::DP;       // Q, dO, K, V rows: d + 4 floats
    static constexpr int BP = BN + 8;      // P, dS rows: 4 rows of a warp start 8 banks apart
    static constexpr int RM = T::RM, RN = T::RN, CG = T::CG;
    static constexpr int SMEM_FLOATS = 2 * BN * DP + STAGES * (2 * BM * DP + 2 * BM) + 2 * BM * BP;
};

template <int D, int BM, int BN, int STAGES>
__host__ __device__ constexpr int v6_smem_floats() { return V6<D, BM, BN, STAGES>::SMEM_FLOATS; }

// Thread t of warp w = t / 32, lane l = t % 32 gets (ty, tx) = (4 (w / 2) + l / 8, 8 (w % 2) + l % 8):
// the same 16 x 16 grid and the same ownership rules as v2-v5 (rows ty + 16 r, keys tx + 16 c;
// dK/dV keys ty*RN + a, columns 64 g + 4 tx; dQ rows ty + 16 a), but one warp now covers 4
// consecutive ty and 8 consecutive tx. Per 16-byte shared read, a warp touches:
//   S, dP:  Q/dO rows ty + 16 r: 4 rows d + 4 floats apart -> banks 4 ty + 0..3: 4 distinct
//           float4 in distinct banks; K/V rows tx + 16 c: 8 rows -> banks 4 tx + 0..3 cover
//           the 32 banks once. One wavefront each (2 x 16 threads: 16 K rows = 2 wavefronts).
//   P/dS writes: rows ty + 16 r (4, BN + 8 floats apart: banks 8 ty) x 8 consecutive keys:
//           32 distinct banks (with v4's BN + 16 rows 0 and 2 would share banks).
//   dV/dK:  P/dS row r at keys ty*RN..: 4 float4 (RN = 4: adjacent; RN = 8: 8 floats apart,
//           banks 0, 8, 16, 24 + 0..3); dO/Q row r at 4 tx: 8 adjacent float4. One wavefront.
//   dQ:     dS rows ty + 16 a at key c: banks 8 ty + 0..3; K row c at 4 tx: 8 adjacent float4.
__device__ __forceinline__ void v6_thread(int& ty, int& tx) {
    const int w = threadIdx.x >> 5, l = threadIdx.x & 31;
    ty = 4 * (w >> 1) + (l >> 3);
    tx = 8 * (w & 1) + (l & 7);
}

template <int D, int BM, int BN, int STAGES>
__device__ __forceinline__ void fused_body(const float* __restrict__ Q, const float* __restrict__ K,
                                           const float* __restrict__ V, const float* __restrict__ dO,
                                           const float* __restrict__ LSE, const float* __restrict__ Dv,
                                           float* __restrict__ dQ, float* __restrict__ dK,
                                           float* __restrict__ dV, int N, float scale, int causal) {
    using C = V6<D, BM, BN, STAGES>;
    static_assert(BN % 64 == 0, "dK/dV rows come four at a time from one float4 of P");
    static_assert(STAGES == 1 || STAGES == 2, "one or two Q/dO buffers");
    constexpr int DP = C::DP, BP = C::BP, RM = C::RM, RN = C::RN, CG = C::CG;
    constexpr int QBUF = 2 * BM * DP + 2 * BM;  // one stage: Q, dO, lse, D
    extern __shared__ float4 smem4[];
    float* Ks = reinterpret_cast<float*>(smem4);
    float* Vs = Ks + BN * DP;
    float* Ps = Vs + BN * DP;
    float* dSs = Ps + BM * BP;
    float* stage0 = dSs + BM * BP;  // stage b: Qs, dOs, lse_s, d_s at stage0 + b * QBUF

    int ty, tx;
    v6_thread(ty, tx);
    const int j0 = blockIdx.y * BN;  // < N
    const size_t bh = blockIdx.x, head = bh * (size_t)N * D;
    Q += head; K += head; V += head; dO += head; dK += head; dV += head; dQ += head;
    LSE += bh * N; Dv += bh * N;
    const float sl = scale * FA_LOG2E;

    // Q, dO, LSE, D of query tile `it` into stage b (one cp.async group once committed)
    auto issue = [&](int it, int b) {
        float* st = stage0 + b * QBUF;
        const int i0 = it * BM;
        load_rows_async<BM, D, DP>(st, Q, i0, N);
        load_rows_async<BM, D, DP>(st + BM * DP, dO, i0, N);
        static_assert(BM <= FA_THREADS, "one row statistic a thread");
        if (threadIdx.x < BM) {
            const int r = threadIdx.x;
            const bool ok = i0 + r < N;
            fa_cp_async4(st + 2 * BM * DP + r, LSE + (ok ? i0 + r : 0), ok);
            fa_cp_async4(st + 2 * BM * DP + BM + r, Dv + (ok ? i0 + r : 0), ok);
        }
    };

    const int n_i = (N + BM - 1) / BM;
    const int first = causal ? j0 / BM : 0;  // causal: rows >= j0 only
    load_rows_async<BN, D, DP>(Ks, K, j0, N);
    load_rows_async<BN, D, DP>(Vs, V, j0, N);
    issue(first, 0);
    fa_cp_async_commit();

    float ak[RN][D / 16], av[RN][D / 16];
    zero(ak);
    zero(av);
    int b = 0;
    for (int it = first; it < n_i; ++it) {
        const int i0 = it * BM;
        fa_cp_async_wait_all();  // this thread's copies of tile `it` (and K, V) landed
        __syncthreads();         // everyone's landed; everyone is done with tile it - 1
        if (STAGES == 2 && it + 1 < n_i) {  // the next tile loads while this one computes
            issue(it + 1, b ^ 1);
            fa_cp_async_commit();
        }
        const float* Qs = stage0 + b * QBUF;
        const float* dOs = Qs + BM * DP;
        const float* lse_s = dOs + BM * DP;
        const float* d_s = lse_s + BM;

        {   // S, dP -> P, dS in shared memory
            float s[RM][RN], dp[RM][RN];
            scores_fma<D, BM, BN>(Qs, dOs, Ks, Vs, s, dp, ty, tx);
            const bool mask = i0 + BM > N || j0 + BN > N || (causal && j0 + BN - 1 > i0);
#pragma unroll
            for (int r = 0; r < RM; ++r) {
                const int rr = ty + 16 * r, qi = i0 + rr;
                const float lse = lse_s[rr] * FA_LOG2E, dd = d_s[rr];
#pragma unroll
                for (int c = 0; c < RN; ++c) {
                    const int cc = tx + 16 * c, kj = j0 + cc;
                    float p = exp2f(fmaf(s[r][c], sl, -lse));
                    if (mask && (qi >= N || kj >= N || (causal && kj > qi))) p = 0.f;
                    Ps[rr * BP + cc] = p;
                    dSs[rr * BP + cc] = p * (dp[r][c] - dd);
                }
            }
        }
        __syncthreads();

        {   // dV += P^T dO, dK += dS^T Q: this tile's BM rows into tv, tk, then the totals
            float tk[RN][D / 16], tv[RN][D / 16];
            zero(tk);
            zero(tv);
#pragma unroll 4
            for (int r = 0; r < BM; ++r) {
                float p[RN], ds[RN];
#pragma unroll
                for (int a = 0; a < RN; a += 4) {
                    const float4 p4 = load4(Ps + r * BP + ty * RN + a);
                    const float4 d4 = load4(dSs + r * BP + ty * RN + a);
                    p[a] = p4.x; p[a + 1] = p4.y; p[a + 2] = p4.z; p[a + 3] = p4.w;
                    ds[a] = d4.x; ds[a + 1] = d4.y; ds[a + 2] = d4.z; ds[a + 3] = d4.w;
                }
#pragma unroll
                for (int g = 0; g < CG; ++g) {
                    const float4 go = load4(dOs + r * DP + 64 * g + 4 * tx);
                    const float4 qv = load4(Qs + r * DP + 64 * g + 4 * tx);
#pragma unroll
                    for (int a = 0; a < RN; ++a) {
                        tv[a][4 * g + 0] += p[a] * go.x;
                        tv[a][4 * g + 1] += p[a] * go.y;
                        tv[a][4 * g + 2] += p[a] * go.z;
                        tv[a][4 * g + 3] += p[a] * go.w;
                        tk[a][4 * g + 0] += ds[a] * qv.x;
                        tk[a][4 * g + 1] += ds[a] * qv.y;
                        tk[a][4 * g + 2] += ds[a] * qv.z;
                        tk[a][4 * g + 3] += ds[a] * qv.w;
                    }
                }
            }
#pragma unroll
            for (int a = 0; a < RN; ++a)
#pragma unroll
                for (int e = 0; e < D / 16; ++e) {
                    ak[a][e] += tk[a][e];
                    av[a][e] += tv[a][e];
                }
        }

        {   // this block's share of dQ_i = scale dS K_j, 16 bytes per reduction
            float aq[RM][D / 16];
            zero(aq);
            dq_tile<D, BM, BN, true, BP>(dSs, Ks, aq, ty, tx);
#pragma unroll
            for (int a = 0; a < RM; ++a) {
                const int qi = i0 + ty + 16 * a;
                if (qi < N) {
#pragma unroll
                    for (int g = 0; g < CG; ++g)
                        fa_red_add4(dQ + (size_t)qi * D + 64 * g + 4 * tx,
                                    make_float4(scale * aq[a][4 * g], scale * aq[a][4 * g + 1],
                                                scale * aq[a][4 * g + 2], scale * aq[a][4 * g + 3]));
                }
            }
        }

        if (STAGES == 1 && it + 1 < n_i) {
            __syncthreads();  // everyone is done with the only Q/dO stage
            issue(it + 1, 0);
            fa_cp_async_commit();
        }
        b ^= STAGES - 1;
    }

#pragma unroll
    for (int a = 0; a < RN; ++a) {
        const int kj = j0 + ty * RN + a;
        if (kj < N) {
#pragma unroll
            for (int g = 0; g < CG; ++g) {
                const size_t at = (size_t)kj * D + 64 * g + 4 * tx;
                store4(dV + at, make_float4(av[a][4 * g], av[a][4 * g + 1], av[a][4 * g + 2],
                                            av[a][4 * g + 3]));
                store4(dK + at, make_float4(scale * ak[a][4 * g], scale * ak[a][4 * g + 1],
                                            scale * ak[a][4 * g + 2], scale * ak[a][4 * g + 3]));
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// entry points. Arguments of every flash kernel: Q, K, V, dO, LSE, D, dQ, dK, dV, N, scale,
// causal (the dQ kernels ignore dK, dV; the v3/v4 dK/dV kernels ignore dQ).
// ---------------------------------------------------------------------------------------
#define FA_ARGS                                                                                  \
    const float *__restrict__ Q, const float *__restrict__ K, const float *__restrict__ V,        \
        const float *__restrict__ dO, const float *__restrict__ LSE, const float *__restrict__ Dv, \
        float *__restrict__ dQ, float *__restrict__ dK, float *__restrict__ dV, int N, float scale, \
        int causal

#define FA_DKDV(name, D, BM, BN, FAST, ATOMIC, MINB)                                           \
    extern "C" __global__ void __launch_bounds__(FA_THREADS, MINB) name(FA_ARGS) {              \
        dkdv_body<D, BM, BN, FAST, ATOMIC>(Q, K, V, dO, LSE, Dv, dQ, dK, dV, N, scale, causal); \
    }
#define FA_DQ(name, D, BM, BN, FAST, MINB)                                                     \
    extern "C" __global__ void __launch_bounds__(FA_THREADS, MINB) name(FA_ARGS) {              \
        dq_body<D, BM, BN, FAST>(Q, K, V, dO, LSE, Dv, dQ, N, scale, causal);                    \
    }

// v2: one kernel, dQ by atomics (64 x 64 tiles)
FA_DKDV(fa_bwd_v2_d64, 64, 64, 64, false, true, 1)
FA_DKDV(fa_bwd_v2_d128, 128, 64, 64, false, true, 1)
// v3: deterministic, two kernels, v2's layouts
FA_DKDV(fa_bwd_v3_dkdv_d64, 64, 64, 64, false, false, 1)
FA_DKDV(fa_bwd_v3_dkdv_d128, 128, 64, 64, false, false, 1)
FA_DQ(fa_bwd_v3_dq_d64, 64, 64, 64, false, 1)
FA_DQ(fa_bwd_v3_dq_d128, 128, 64, 64, false, 1)
// v4: padded layouts, float4 shared loads, exp2, mask only where needed. Candidates
// (BM x BN, minimum blocks per SM for __launch_bounds__); the driver's V4_TILES picks one each.
FA_DKDV(fa_bwd_v4_dkdv_d64_bm64_bn64_b1, 64, 64, 64, true, false, 1)
FA_DKDV(fa_bwd_v4_dkdv_d64_bm64_bn128_b1, 64, 64, 128, true, false, 1)
FA_DKDV(fa_bwd_v4_dkdv_d64_bm32_bn64_b2, 64, 32, 64, true, false, 2)
FA_DKDV(fa_bwd_v4_dkdv_d64_bm32_bn128_b1, 64, 32, 128, true, false, 1)
FA_DKDV(fa_bwd_v4_dkdv_d128_bm64_bn64_b1, 128, 64, 64, true, false, 1)
FA_DKDV(fa_bwd_v4_dkdv_d128_bm32_bn64_b1, 128, 32, 64, true, false, 1)
FA_DQ(fa_bwd_v4_dq_d64_bm64_bn64_b1, 64, 64, 64, true, 1)
FA_DQ(fa_bwd_v4_dq_d64_bm64_bn64_b2, 64, 64, 64, true, 2)
FA_DQ(fa_bwd_v4_dq_d64_bm128_bn64_b1, 64, 128, 64, true, 1)
FA_DQ(fa_bwd_v4_dq_d64_bm64_bn32_b2, 64, 64, 32, true, 2)
FA_DQ(fa_bwd_v4_dq_d128_bm64_bn64_b1, 128, 64, 64, true, 1)
FA_DQ(fa_bwd_v4_dq_d128_bm32_bn64_b1, 128, 32, 64, true, 1)
// v5: v4's fast tiles with v2's atomic dQ (one kernel, five products instead of seven)
FA_DKDV(fa_bwd_v5_d64_bm64_bn64_b1, 64, 64, 64, true, true, 1)
FA_DKDV(fa_bwd_v5_d64_bm32_bn64_b2, 64, 32, 64, true, true, 2)
FA_DKDV(fa_bwd_v5_d128_bm64_bn64_b1, 128, 64, 64, true, true, 1)
FA_DKDV(fa_bwd_v5_d128_bm32_bn64_b1, 128, 32, 64, true, true, 1)
// v6: one fused kernel, 4 x 8 warps, cp.async Q/dO stages, 16-byte dQ reductions. Candidates
// fa_bwd_v6_d{D}_bmBM_bnBN_sSTAGES_bMINB; driver.V6_TILES picks one per head dimension.
#define FA_V6(name, D, BM, BN, STAGES, MINB)                                                    \
    extern "C" __global__ void __launch_bounds__(FA_THREADS, MINB) name(FA_ARGS) {              \
        fused_body<D, BM, BN, STAGES>(Q, K, V, dO, LSE, Dv, dQ, dK, dV, N, scale, causal);       \
    }
FA_V6(fa_bwd_v6_d64_bm64_bn64_s2_b1, 64, 64, 64, 2, 1)
FA_V6(fa_bwd_v6_d64_bm32_bn64_s2_b2, 64, 32, 64, 2, 2)
FA_V6(fa_bwd_v6_d64_bm64_bn128_s2_b1, 64, 64, 128, 2, 1)
FA_V6(fa_bwd_v6_d64_bm32_bn128_s2_b1, 64, 32, 128, 2, 1)
FA_V6(fa_bwd_v6_d128_bm32_bn64_s2_b1, 128, 32, 64, 2, 1)
FA_V6(fa_bwd_v6_d128_bm64_bn64_s1_b1, 128, 64, 64, 1, 1)
