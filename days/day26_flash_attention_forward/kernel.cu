// Day 26: FlashAttention-2 forward in fp32 on CUDA cores.
//
//   for each (batch*head) bh, query row r:   s_rk = scale * q_r . k_k     (k <= r if causal)
//       lse_r = log sum_k exp(s_rk)          (natural log; saved for day 27's backward)
//       o_r   = sum_k exp(s_rk - lse_r) v_k
//   Q, K, V, O [BH, N, D] float32 (each position's D values contiguous), lse [BH, N].
//
// Build on its own:  nvcc -arch=sm_90 -O3 -I common/cuda -cubin -Xptxas -v kernel.cu
// Run:               python run_day.py 26
//
// Versions (entry points end in _d64 / _d128 for the head dim and _c0 / _c1 for causal):
//   v1  naive, three kernels and an N x N buffer per head: attn_v1_scores (S = scale Q K^T, one
//       thread per score reading global memory, -inf above the diagonal when causal),
//       attn_v1_softmax (one block per row: max, sum, P = exp(S - max) / sum in place, lse),
//       attn_v1_pv (O = P V, one thread per output). Memory: BH * N^2 floats of workspace.
//   v2  flash, one thread per query row: 128 rows a block, K and V streamed through shared
//       memory 32 keys at a time; each thread keeps its output row in registers and runs the
//       online softmax over its own scores. No N x N buffer: memory beyond the inputs and
//       outputs is the lse vector only.
//   v3  flash with register tiles (the FlashAttention-2 block): BLOCK_M query rows a block,
//       each thread owns TM rows x TN keys of the score tile and TM rows x D/TX columns of the
//       output; Q, K, V tiles in shared memory with 16-byte loads and a padded (conflict-free)
//       layout; P goes through shared memory to the P V product; in causal mode the key tiles
//       above the block's diagonal are never loaded. Plain loads, __expf.
//   v4  v3 + double-buffered K/V tiles with cp.async (tile t+1 streams in while tile t
//       computes) + exp2 with log2(e) folded into the scale. This is
//       cuda100::flash::forward<D, CAUSAL> of common/cuda/flash_attention.cuh, the code day 28
//       includes; the tile shape per head dim is chosen there (Tile<D>).
//   Sweep candidates (not versions, built with -DDAY26_SWEEP): flash_cand_<name>_d<D>_c<C>,
//   the v4 code with other tile shapes (.notes/day26_sweep.py times them).
//
// v3, v4 and the candidates live in common/cuda/flash_attention.cuh (detail::forward_tile);
// read that file's comments beside this one.
#include <cfloat>
#include <math.h>

#include "flash_attention.cuh"
#include "warp.cuh"

using cuda100::flash::Args;

// the dynamic shared memory of the flash kernels
extern __shared__ float4 day26_smem[];

// =========================================================================================
// v1: three kernels and the N x N score matrix in global memory
// =========================================================================================

// S[bh, r, c] = scale * q_r . k_c (or -inf when causal and c > r). grid (ceil(N/16),
// ceil(N/16), BH), block 16 x 16: thread (x, y) computes key c = 16 bx + x of query r = 16 by + y.
template <int D, bool CAUSAL>
__device__ void v1_scores(const float* __restrict__ q, const float* __restrict__ k,
                          float* __restrict__ S, int N, float scale) {
    const int c = blockIdx.x * 16 + threadIdx.x, r = blockIdx.y * 16 + threadIdx.y;
    if (r >= N || c >= N) return;
    const long long bh = blockIdx.z;
    const float* qr = q + (bh * N + r) * D;
    const float* kc = k + (bh * N + c) * D;
    float acc = 0.f;
    if (!CAUSAL || c <= r) {
#pragma unroll 8
        for (int d = 0; d < D; ++d) acc = fmaf(qr[d], kc[d], acc);
        acc *= scale;
    } else {
        acc = -INFINITY;
    }
    S[(bh * N + r) * N + c] = acc;
}

// One block (256 threads) per row of S: max, sum of exp, then P = exp(S - max) / sum written
// over S, and lse = max + log(sum). grid (N, BH).
__device__ void v1_softmax(float* __restrict__ S, float* __restrict__ lse, int N) {
    __shared__ float scratch[32];
    const long long row = static_cast<long long>(blockIdx.y) * N + blockIdx.x;
    float* s = S + row * N;
    float mx = -INFINITY;
    for (int c = threadIdx.x; c < N; c += blockDim.x) mx = fmaxf(mx, s[c]);
    mx = cuda100::block_max(mx, scratch);  // finite: key 0 is never masked
    float sum = 0.f;
    for (int c = threadIdx.x; c < N; c += blockDim.x) sum += expf(s[c] - mx);
    sum = cuda100::block_sum(sum, scratch);
    const float inv = 1.f / sum;
    for (int c = threadIdx.x; c < N; c += blockDim.x) s[c] = expf(s[c] - mx) * inv;
    if (threadIdx.x == 0) lse[row] = mx + logf(sum);
}

// O[bh, r, d] = sum_c P[bh, r, c] V[bh, c, d] (c <= r when causal: P is 0 above anyway).
// grid (ceil(D/32), ceil(N/8), BH), block 32 x 8: threads of a warp take consecutive d.
template <int D, bool CAUSAL>
__device__ void v1_pv(const float* __restrict__ P, const float* __restrict__ v,
                      float* __restrict__ o, int N) {
    const int d = blockIdx.x * 32 + threadIdx.x, r = blockIdx.y * 8 + threadIdx.y;
    if (r >= N || d >= D) return;
    const long long bh = blockIdx.z;
    const float* p = P + (bh * N + r) * N;
    const float* vv = v + bh * N * D + d;
    const int cend = CAUSAL ? r + 1 : N;
    float acc = 0.f;
    for (int c = 0; c < cend; ++c) acc = fmaf(p[c], vv[static_cast<long long>(c) * D], acc);
    o[(bh * N + r) * D + d] = acc;
}

// =========================================================================================
// v2: flash attention, one thread per query row
// =========================================================================================
constexpr int V2_ROWS = 128;  // threads (= query rows) per block
constexpr int V2_KEYS = 32;   // keys per shared-memory tile

// grid (ceil(N / 128), BH), block 128, v2_smem_bytes(D) of dynamic shared memory: this block's
// Q rows (padded by 1 float so the threads, each reading its own row at the same d, hit 32
// different banks) and one K and one V tile (every thread reads the same key: a broadcast).
constexpr int v2_smem_bytes(int D) { return (V2_ROWS * (D + 1) + 2 * V2_KEYS * D) * 4; }

template <int D, bool CAUSAL>
__device__ void v2_rows(const float* __restrict__ q, const float* __restrict__ k,
                        const float* __restrict__ v, float* __restrict__ o,
                        float* __restrict__ lse, int N, float scale) {
    constexpr int LDQ = D + 1;
    float* Ks = reinterpret_cast<float*>(day26_smem);  // [V2_KEYS][D], 16-byte aligned
    float* Vs = Ks + V2_KEYS * D;                       // [V2_KEYS][D]
    float* Qs = Vs + V2_KEYS * D;                       // [V2_ROWS][D + 1]
    const int tid = threadIdx.x;
    const int m0 = (CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * V2_ROWS;
    const int r = m0 + tid;
    const long long bh = blockIdx.y;
    q += bh * N * D; k += bh * N * D; v += bh * N * D;

    // Q rows: consecutive threads read consecutive floats (coalesced); rows past N are 0
    for (int i = tid; i < V2_ROWS * D; i += V2_ROWS) {
        const int rr = i / D, d = i % D;
        Qs[rr * LDQ + d] = (m0 + rr < N) ? q[static_cast<long long>(m0 + rr) * D + d] : 0.f;
    }
    float acc[D];
#pragma unroll
    for (int d = 0; d < D; ++d) acc[d] = 0.f;
    float m = -INFINITY, l = 0.f;

    const int n_end = CAUSAL ? min(N, m0 + V2_ROWS) : N;
    for (int n0 = 0; n0 < n_end; n0 += V2_KEYS) {
        __syncthreads();  // the previous tile is consumed (and, the first time, Qs written)
        for (int i = tid; i < V2_KEYS * D / 4; i += V2_ROWS) {
            const int kk = i / (D / 4), d4 = i % (D / 4);
            const bool ok = n0 + kk < N;
            const long long off = static_cast<long long>(n0 + kk) * D + 4 * d4;
            reinterpret_cast<float4*>(Ks)[i] = ok ? *reinterpret_cast<const float4*>(k + off) : make_float4(0, 0, 0, 0);
            reinterpret_cast<float4*>(Vs)[i] = ok ? *reinterpret_cast<const float4*>(v + off) : make_float4(0, 0, 0, 0);
        }
        __syncthreads();
        float s[V2_KEYS];
#pragma unroll
        for (int j = 0; j < V2_KEYS; ++j) s[j] = 0.f;
#pragma unroll 4
        for (int d = 0; d < D; d += 4) {
            const float q0 = Qs[tid * LDQ + d], q1 = Qs[tid * LDQ + d + 1];
            const float q2 = Qs[tid * LDQ + d + 2], q3 = Qs[tid * LDQ + d + 3];
#pragma unroll
            for (int j = 0; j < V2_KEYS; ++j) {
                const float4 kf = *reinterpret_cast<const float4*>(Ks + j * D + d);
                s[j] = fmaf(q0, kf.x, fmaf(q1, kf.y, fmaf(q2, kf.z, fmaf(q3, kf.w, s[j]))));
            }
        }
        float mx = m;
#pragma unroll
        for (int j = 0; j < V2_KEYS; ++j) {
            const int c = n0 + j;
            s[j] = (c < N && (!CAUSAL || c <= r)) ? s[j] * scale : -INFINITY;
            mx = fmaxf(mx, s[j]);
        }
        const float msafe = mx == -INFINITY ? 0.f : mx;  // all keys so far masked (rows >= N)
        const float alpha = __expf(m - msafe);
        m = mx;
        l *= alpha;
#pragma unroll
        for (int d = 0; d < D; ++d) acc[d] *= alpha;
#pragma unroll
        for (int j = 0; j < V2_KEYS; ++j) {
            const float p = __expf(s[j] - msafe);
            l += p;
#pragma unroll
            for (int d = 0; d < D; d += 4) {
                const float4 vf = *reinterpret_cast<const float4*>(Vs + j * D + d);
                acc[d] = fmaf(p, vf.x, acc[d]);
                acc[d + 1] = fmaf(p, vf.y, acc[d + 1]);
                acc[d + 2] = fmaf(p, vf.z, acc[d + 2]);
                acc[d + 3] = fmaf(p, vf.w, acc[d + 3]);
            }
        }
    }
    if (r < N) {
        const float inv = 1.f / l;
        float* orow = o + (bh * N + r) * D;
#pragma unroll
        for (int d = 0; d < D; d += 4)
            *reinterpret_cast<float4*>(orow + d) =
                make_float4(acc[d] * inv, acc[d + 1] * inv, acc[d + 2] * inv, acc[d + 3] * inv);
        lse[bh * N + r] = m + logf(l);
    }
}

// =========================================================================================
// v3, v4 and the sweep candidates: the register-tiled block of flash_attention.cuh
// =========================================================================================

// Fill Args from plain scalars: contiguous [B, H, N, D] tensors (the day's layout is B = 1,
// H = BH) or any strides (multiples of 4 floats, 16-byte aligned bases; see the header).
#define FLASH_ARGS                                                                            \
    Args a;                                                                                   \
    a.q = q; a.k = k; a.v = v; a.o = o; a.lse = lse;                                          \
    a.B = B; a.H = H; a.N = N;                                                                \
    a.q_b = q_b; a.q_h = q_h; a.q_n = q_n; a.k_b = k_b; a.k_h = k_h; a.k_n = k_n;             \
    a.v_b = v_b; a.v_h = v_h; a.v_n = v_n; a.o_b = o_b; a.o_h = o_h; a.o_n = o_n;             \
    a.scale = scale;

#define FLASH_PARAMS                                                                          \
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,    \
        float* __restrict__ o, float* __restrict__ lse, int B, int H, int N, long long q_b,   \
        long long q_h, long long q_n, long long k_b, long long k_h, long long k_n,            \
        long long v_b, long long v_h, long long v_n, long long o_b, long long o_h,            \
        long long o_n, float scale

// An entry point for forward_tile<D, BM, BN, TM, TN, PIPE, EXP2, CAUSAL>, and a __device__
// int `<name>_smem` holding its dynamic shared-memory bytes (the driver reads it).
#define FLASH_ENTRY(name, D, BM, BN, TM, TN, PIPE, EXP2, CAUSAL)                              \
    extern "C" __device__ int name##_smem =                                                   \
        cuda100::flash::detail::Config<D, BM, BN, TM, TN, PIPE>::SMEM_FLOATS * 4;             \
    extern "C" __global__ void __launch_bounds__(                                             \
        (cuda100::flash::detail::Config<D, BM, BN, TM, TN, PIPE>::THREADS),                   \
        (cuda100::flash::detail::Config<D, BM, BN, TM, TN, PIPE>::MIN_BLOCKS))                \
        name(FLASH_PARAMS) {                                                                  \
        FLASH_ARGS                                                                            \
        cuda100::flash::detail::forward_tile<D, BM, BN, TM, TN, PIPE, EXP2, CAUSAL>(          \
            a, reinterpret_cast<float*>(day26_smem));                                         \
    }

// =========================================================================================
// entry points
// =========================================================================================
#define V1_ENTRIES(D, C)                                                                      \
    extern "C" __global__ void __launch_bounds__(256) attn_v1_scores_d##D##_c##C(             \
        const float* q, const float* k, float* S, int N, float scale) {                       \
        v1_scores<D, C>(q, k, S, N, scale);                                                   \
    }                                                                                         \
    extern "C" __global__ void __launch_bounds__(256) attn_v1_pv_d##D##_c##C(                 \
        const float* P, const float* v, float* o, int N) {                                    \
        v1_pv<D, C>(P, v, o, N);                                                              \
    }                                                                                         \
    extern "C" __device__ int attn_v2_d##D##_c##C##_smem = v2_smem_bytes(D);                  \
    extern "C" __global__ void __launch_bounds__(V2_ROWS) attn_v2_d##D##_c##C(                \
        const float* q, const float* k, const float* v, float* o, float* lse, int N,          \
        float scale) {                                                                        \
        v2_rows<D, C>(q, k, v, o, lse, N, scale);                                             \
    }

extern "C" __global__ void __launch_bounds__(256) attn_v1_softmax(float* S, float* lse, int N) {
    v1_softmax(S, lse, N);
}

V1_ENTRIES(64, 0)
V1_ENTRIES(64, 1)
V1_ENTRIES(128, 0)
V1_ENTRIES(128, 1)

// v3: the register-tiled block, one buffer, plain loads, __expf
FLASH_ENTRY(attn_v3_d64_c0, 64, 64, 64, 4, 8, false, false, false)
FLASH_ENTRY(attn_v3_d64_c1, 64, 64, 64, 4, 8, false, false, true)
FLASH_ENTRY(attn_v3_d128_c0, 128, 64, 32, 4, 4, false, false, false)
FLASH_ENTRY(attn_v3_d128_c1, 128, 64, 32, 4, 4, false, false, true)

// v4: cuda100::flash::forward<D, CAUSAL>, exactly what day 28 runs (Tile<D> of the header)
#define V4_ENTRY(D, C)                                                                        \
    extern "C" __device__ int attn_v4_d##D##_c##C##_smem = cuda100::flash::smem_bytes<D>();   \
    extern "C" __global__ void __launch_bounds__(cuda100::flash::Tile<D>::THREADS,            \
                                                 cuda100::flash::Tile<D>::MIN_BLOCKS)         \
        attn_v4_d##D##_c##C(FLASH_PARAMS) {                                                   \
        FLASH_ARGS                                                                            \
        cuda100::flash::forward<D, C>(a);                                                     \
    }
V4_ENTRY(64, 0)
V4_ENTRY(64, 1)
V4_ENTRY(128, 0)
V4_ENTRY(128, 1)

// Sweep candidates: v4's code (PIPE, EXP2) with other tiles. Name: bm<BM>n<BN>t<TM>x<TN>.
// Built only with -DDAY26_SWEEP (.notes/day26_sweep.py), so the day's own build stays short.
#ifdef DAY26_SWEEP
#define CAND(D, BM, BN, TM, TN)                                                               \
    FLASH_ENTRY(flash_cand_bm##BM##n##BN##t##TM##x##TN##_d##D##_c0, D, BM, BN, TM, TN, true, true, false) \
    FLASH_ENTRY(flash_cand_bm##BM##n##BN##t##TM##x##TN##_d##D##_c1, D, BM, BN, TM, TN, true, true, true)

CAND(64, 64, 64, 4, 8)    // = v4's d64 tile: 128 threads, 32 scores a thread, 103 KB
CAND(64, 64, 32, 4, 4)    // 128 threads, 16 scores a thread, smaller K/V tiles (70 KB: 3 blocks/SM)
CAND(64, 32, 64, 2, 8)    // 128 threads, 32 rows a block: twice the blocks (85 KB)
CAND(64, 128, 64, 8, 4)   // 256 threads, Q reused over 128 rows (143 KB: 1 block/SM)
CAND(128, 64, 32, 4, 4)   // = v4's d128 tile (111 KB)
CAND(128, 64, 64, 4, 8)   // 128 threads, 32 scores a thread (185 KB: 1 block/SM)
CAND(128, 32, 64, 2, 8)   // 128 threads, 32 rows a block
CAND(128, 128, 32, 4, 4)  // 256 threads, Q reused over 128 rows (155 KB)
#endif  // DAY26_SWEEP
