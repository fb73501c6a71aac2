// Day 15: the forward pass of the fused affine layer ("FA2") of a minimal classifier.
//
//   Z = X W + b            X [m, d], W [d, c], b [c]        (logits, m x c)
//   logp = log_softmax(Z)  logp[i, j] = Z[i, j] - lse_i,    lse_i = log sum_j exp(Z[i, j])
//   loss = (1/m) sum_i -logp[i, y_i]                        y [m] int32 labels in [0, c)
//
// Outputs: loss (1 float) and logp [m, c] (the log-probabilities; A = exp(logp)).
// All fp32. lse_i is computed as max_i + log sum exp(Z - max_i), so logits of size 1e3 or
// 1e4 never overflow expf.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 15
//
// Every version uses the same shared-memory tiled SGEMM (128x128 block tile, BK = 8, 256
// threads, 8x8 outputs per thread in registers, double-buffered shared memory, the output
// tile written through shared memory so global stores are coalesced). The versions differ
// in what happens around it:
//   v1  unfused, 3 kernels: fa2_v1_matmul_bias (Z = XW + b) -> fa2_v1_logsoftmax (block per
//       row, three passes over Z: max, sum of exp, write logp) -> fa2_v1_loss (one block
//       gathers -logp[i, y_i] and reduces). Z and logp are separate m x c buffers.
//   v2  fa2_v2_matmul writes Z = XW (no bias), then ONE kernel per row, fa2_v2_row: it adds
//       the bias, keeps the row in shared memory (up to ~56K classes) while computing the
//       online max / sum of exp, writes logp from shared memory and adds the row's NLL to
//       the loss with atomicAdd. Z is read from global memory once.
//   v3  fa2_v3_matmul_stats: the GEMM epilogue adds the bias AND reduces each 128-column
//       slice of each row to a partial (max, sum exp), written to a small [m, c/128] buffer;
//       Z goes straight into the logp output. fa2_v3_finish merges a row's partials into
//       lse (no pass over Z for it), then rewrites the row in place (logp = z - lse) with
//       float4 loads/stores and records the row's loss; fa2_v3_loss sums the row losses in a
//       fixed order (deterministic, unlike v2's atomics). No m x c scratch at all.
#include <cfloat>
#include <cstdint>

// ---------------------------------------------------------------------------------------
// reductions
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// every thread gets the block's max (IS_MAX) or sum; buf holds 32 floats
template <bool IS_MAX>
__device__ float block_reduce(float v, float* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? buf[lane] : (IS_MAX ? -FLT_MAX : 0.f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads();  // buf may be reused right after
    return r;
}

// (max, sum of exp(x - max)) of a set of values; two states merge exactly (online softmax).
// The empty state is {-FLT_MAX, 0}: merging it changes nothing (0 * expf(...) = 0).
struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void online_add(MaxSum& st, float v) {
    if (v > st.m) {
        st.s = st.s * expf(st.m - v) + 1.f;
        st.m = v;
    } else {
        st.s += expf(v - st.m);
    }
}

__device__ MaxSum block_reduce_maxsum(MaxSum st, MaxSum* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1)
        st = merge(st, {__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)});
    if (lane == 0) buf[warp] = st;
    __syncthreads();
    MaxSum r = lane < nwarps ? buf[lane] : MaxSum{-FLT_MAX, 0.f};
    for (int o = 16; o > 0; o >>= 1)
        r = merge(r, {__shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o)});
    __syncthreads();
    return r;
}

// ---------------------------------------------------------------------------------------
// The SGEMM: C[M, N] = A[M, K] B[K, N], all row-major fp32, any M, N, K.
//
// Block tile 128 x 128, K step 8, 256 threads as a 16 x 16 grid (ty, tx). Thread (ty, tx)
// owns rows {ty*4 + i, 64 + ty*4 + i} and columns {tx*4 + j, 64 + tx*4 + j} (i, j < 4): an
// 8 x 8 register tile, read from shared memory as four float4 per k (two of A, two of B).
// The two halves 64 apart keep a quarter-warp's float4 reads on consecutive addresses
// (no bank conflicts). A is stored transposed in shared memory (As[k][m]) so its 8 values
// for one k are contiguous too; the row pad of 4 floats spreads the transposing stores
// over all banks.
//
// Global loads are scalar (rows of W have an odd length when c = 50257, so they are not
// 16-byte aligned) and are issued for tile t+1 before the math of tile t, into registers;
// they land in the other shared buffer after the math (one __syncthreads per K step).
// ---------------------------------------------------------------------------------------
constexpr int BM = 128, BN = 128, BK = 8;
constexpr int GEMM_THREADS = 256;
constexpr int AS_LD = BM + 4;                           // padded row of As
constexpr int AS_FLOATS = 2 * BK * AS_LD;               // double buffered
constexpr int BS_FLOATS = 2 * BK * BN;
constexpr int STAGE_FLOATS = (GEMM_THREADS / 32) * 4 * BN;  // epilogue: 4 rows per warp
constexpr int GEMM_SMEM_FLOATS =
    AS_FLOATS + BS_FLOATS > STAGE_FLOATS ? AS_FLOATS + BS_FLOATS : STAGE_FLOATS;

enum Epilogue { EPI_STORE = 0, EPI_BIAS = 1, EPI_BIAS_STATS = 2 };

// tile row / column of a thread's register i (or j): 0..3 -> base + i, 4..7 -> base + 64 + i - 4
__device__ __forceinline__ int split_index(int base, int i) { return base + (i < 4 ? i : 60 + i); }

template <int EPI>
__device__ __forceinline__ void sgemm_block(const float* __restrict__ A, const float* __restrict__ B,
                                            const float* __restrict__ bias, float* __restrict__ C,
                                            float2* __restrict__ stats, int M, int N, int K) {
    __shared__ __align__(16) float smem[GEMM_SMEM_FLOATS];
    float* As = smem;              // [2][BK][AS_LD]
    float* Bs = smem + AS_FLOATS;  // [2][BK][BN]

    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;

    // loader roles: A: one row (tid/2) x 4 consecutive k; B: one k row (tid/32) x 4 columns 32 apart
    const int a_row = tid >> 1, a_k = (tid & 1) * 4;
    const int b_k = tid >> 5, b_col = tid & 31;
    const int64_t a_base = (int64_t)(m0 + a_row) * K;
    const bool a_row_ok = m0 + a_row < M;

    float ra[4], rb[4];
    auto load_tile = [&](int k0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gk = k0 + a_k + j;
            ra[j] = (a_row_ok && gk < K) ? A[a_base + gk] : 0.f;
        }
        const int gk = k0 + b_k;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int gn = n0 + b_col + 32 * j;
            rb[j] = (gk < K && gn < N) ? B[(int64_t)gk * N + gn] : 0.f;
        }
    };
    auto store_tile = [&](int buf) {
        float* as = As + buf * BK * AS_LD;
        float* bs = Bs + buf * BK * BN;
#pragma unroll
        for (int j = 0; j < 4; ++j) as[(a_k + j) * AS_LD + a_row] = ra[j];
#pragma unroll
        for (int j = 0; j < 4; ++j) bs[b_k * BN + b_col + 32 * j] = rb[j];
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    const int ktiles = (K + BK - 1) / BK;
    load_tile(0);
    store_tile(0);
    __syncthreads();
    for (int t = 0; t < ktiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < ktiles) load_tile((t + 1) * BK);  // in flight during the math below
        const float* as = As + cur * BK * AS_LD;
        const float* bs = Bs + cur * BK * BN;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(as + k * AS_LD + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4*>(as + k * AS_LD + 64 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4*>(bs + k * BN + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4*>(bs + k * BN + 64 + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (t + 1 < ktiles) store_tile(cur ^ 1);  // the other buffer: last read before the previous barrier
        __syncthreads();
    }

    // ---- epilogue --------------------------------------------------------------------------
    const int row0 = ty * 4, col0 = tx * 4;  // tile coordinates of register (0, 0)
    if (EPI != EPI_STORE) {
        float bj[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int gn = n0 + split_index(col0, j);
            bj[j] = gn < N ? bias[gn] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] += bj[j];
    }
    if (EPI == EPI_BIAS_STATS) {
        // (max, sum exp) of each of this thread's 8 rows over its valid columns, then merged
        // across the 16 lanes (tx = 0..15, same ty) that hold the rest of the 128 columns.
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            MaxSum st{-FLT_MAX, 0.f};
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (n0 + split_index(col0, j) < N) st.m = fmaxf(st.m, acc[i][j]);
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (n0 + split_index(col0, j) < N) st.s += expf(acc[i][j] - st.m);
#pragma unroll
            for (int o = 1; o < 16; o <<= 1)
                st = merge(st, {__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)});
            const int gm = m0 + split_index(row0, i);
            if (tx == 0 && gm < M) stats[(int64_t)gm * gridDim.y + blockIdx.y] = make_float2(st.m, st.s);
        }
    }

    // Write the 128 x 128 tile through shared memory so that a warp stores 32 consecutive
    // floats of one row per instruction. Warp w owns tile rows 8w..8w+7 and 64+8w..64+8w+7;
    // in round q it stages rows {8w + 4h + q, 64 + 8w + 4h + q} for h = 0, 1 (its two
    // half-warps): 4 rows x 128 floats in its own 2 KB of the (now free) shared memory.
    const int warp = tid >> 5, lane = tid & 31, h = ty & 1;
    float* stage = smem + warp * 4 * BN;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // half 0: register row q, half 1: row q + 4
            const int i = q + 4 * half;
            float* dst = stage + (h * 2 + half) * BN;
            *reinterpret_cast<float4*>(dst + col0) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
            *reinterpret_cast<float4*>(dst + 64 + col0) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
        }
        __syncwarp();
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int tile_row = (r & 1) * 64 + warp * 8 + (r >> 1) * 4 + q;
            const int gm = m0 + tile_row;
            if (gm < M) {
                float* crow = C + (int64_t)gm * N;
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    const int gn = n0 + lane + 32 * s;
                    if (gn < N) crow[gn] = stage[r * BN + lane + 32 * s];
                }
            }
        }
        __syncwarp();  // the next round overwrites the staging rows
    }
}

// ---------------------------------------------------------------------------------------
// v1: three kernels, every intermediate in global memory
// ---------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)
    fa2_v1_matmul_bias(const float* __restrict__ X, const float* __restrict__ W,
                       const float* __restrict__ b, float* __restrict__ Z, int m, int d, int c) {
    sgemm_block<EPI_BIAS>(X, W, b, Z, nullptr, m, c, d);
}

// block per row, three passes over the row (max; sum of exp; write), as on day 5
extern "C" __global__ void fa2_v1_logsoftmax(const float* __restrict__ Z, float* __restrict__ logp,
                                             int m, int c) {
    __shared__ float buf[32];
    const float* zr = Z + (int64_t)blockIdx.x * c;
    float* lr = logp + (int64_t)blockIdx.x * c;

    float mx = -FLT_MAX;
    for (int j = threadIdx.x; j < c; j += blockDim.x) mx = fmaxf(mx, zr[j]);
    mx = block_reduce<true>(mx, buf);

    float s = 0.f;
    for (int j = threadIdx.x; j < c; j += blockDim.x) s += expf(zr[j] - mx);
    s = block_reduce<false>(s, buf);

    const float lse = mx + logf(s);
    for (int j = threadIdx.x; j < c; j += blockDim.x) lr[j] = zr[j] - lse;
}

// one block: loss = (1/m) sum_i -logp[i, y_i]
extern "C" __global__ void fa2_v1_loss(const float* __restrict__ logp, const int* __restrict__ y,
                                       float* __restrict__ loss, int m, int c) {
    __shared__ float buf[32];
    float s = 0.f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) s -= logp[(int64_t)i * c + y[i]];
    s = block_reduce<false>(s, buf);
    if (threadIdx.x == 0) loss[0] = s / (float)m;
}

// ---------------------------------------------------------------------------------------
// v2: matmul, then one fused kernel per row that reads Z once
// ---------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)
    fa2_v2_matmul(const float* __restrict__ X, const float* __restrict__ W, float* __restrict__ Z,
                  int m, int d, int c) {
    sgemm_block<EPI_STORE>(X, W, nullptr, Z, nullptr, m, c, d);
}

// staged = 1: the row (c floats) is kept in dynamic shared memory between the two loops, so
// Z is read once; staged = 0 (rows too long for shared memory): the second loop reads Z again.
// `loss` must be zero before the launch (the driver clears it); rows add loss_i / m to it.
extern "C" __global__ void __launch_bounds__(1024)
    fa2_v2_row(const float* __restrict__ Z, const float* __restrict__ b, const int* __restrict__ y,
               float* __restrict__ logp, float* __restrict__ loss, int m, int c, int staged) {
    extern __shared__ float row_buf[];
    __shared__ MaxSum red[32];
    const int64_t row = blockIdx.x;
    const float* zr = Z + row * c;
    float* lr = logp + row * c;

    MaxSum st{-FLT_MAX, 0.f};
    const int T = blockDim.x;
    for (int base = threadIdx.x; base < c; base += 4 * T) {
        float v[4];  // four loads in flight per thread before they are used
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int j = base + u * T;
            v[u] = j < c ? zr[j] + b[j] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int j = base + u * T;
            if (j < c) {
                if (staged) row_buf[j] = v[u];
                online_add(st, v[u]);
            }
        }
    }
    st = block_reduce_maxsum(st, red);  // its __syncthreads also publishes row_buf
    const float lse = st.m + logf(st.s);

    for (int j = threadIdx.x; j < c; j += blockDim.x) {
        const float v = staged ? row_buf[j] : zr[j] + b[j];
        lr[j] = v - lse;
    }
    if (threadIdx.x == 0) {
        const int t = y[row];
        const float zt = staged ? row_buf[t] : zr[t] + b[t];
        atomicAdd(loss, (lse - zt) / (float)m);  // order of the adds varies from run to run
    }
}

// ---------------------------------------------------------------------------------------
// v3: bias and per-tile softmax statistics in the GEMM epilogue; an in-place finishing pass
// ---------------------------------------------------------------------------------------
// Z is written into `logp` (the output buffer); stats[i, t] = (max, sum exp) of row i over
// column tile t (gridDim.y tiles).
extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)
    fa2_v3_matmul_stats(const float* __restrict__ X, const float* __restrict__ W,
                        const float* __restrict__ b, float* __restrict__ logp,
                        float2* __restrict__ stats, int m, int d, int c) {
    sgemm_block<EPI_BIAS_STATS>(X, W, b, logp, stats, m, c, d);
}

// One block per row: lse from the row's ntiles partials, then logp = z - lse in place with
// float4 accesses (a scalar head up to the first 16-byte boundary and a scalar tail), and
// the row's loss lse - z[y] into row_loss (summed by fa2_v3_loss).
extern "C" __global__ void __launch_bounds__(256)
    fa2_v3_finish(float* logp, const float2* __restrict__ stats, const int* __restrict__ y,
                  float* __restrict__ row_loss, int m, int c, int ntiles) {
    __shared__ MaxSum red[32];
    const int64_t row = blockIdx.x;
    float* zr = logp + row * c;

    float zy = 0.f;
    if (threadIdx.x == 0) zy = zr[y[row]];  // read before the barrier below; written after it

    MaxSum st{-FLT_MAX, 0.f};
    for (int t = threadIdx.x; t < ntiles; t += blockDim.x) {
        const float2 p = stats[row * ntiles + t];
        st = merge(st, {p.x, p.y});
    }
    st = block_reduce_maxsum(st, red);
    const float lse = st.m + logf(st.s);
    if (threadIdx.x == 0) row_loss[row] = lse - zy;

    const int head = min((int)((4 - ((row * c) & 3)) & 3), c);  // elements before a 16 B boundary
    const int n4 = (c - head) >> 2;
    const int tail = c - head - 4 * n4;
    if ((int)threadIdx.x < head) zr[threadIdx.x] -= lse;
    if ((int)threadIdx.x < tail) zr[head + 4 * n4 + threadIdx.x] -= lse;
    float4* z4 = reinterpret_cast<float4*>(zr + head);
    // four independent float4 loads in flight per thread before any store
    for (int base = threadIdx.x; base < n4; base += 4 * blockDim.x) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int k = base + u * blockDim.x;
            if (k < n4) v[u] = __ldcs(z4 + k);
        }
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int k = base + u * blockDim.x;
            if (k < n4) {
                v[u].x -= lse;
                v[u].y -= lse;
                v[u].z -= lse;
                v[u].w -= lse;
                __stcs(z4 + k, v[u]);
            }
        }
    }
}

// one block; thread t sums rows t, t + blockDim, ... in order, then a fixed shuffle tree:
// the same inputs give the same bits every run
extern "C" __global__ void fa2_v3_loss(const float* __restrict__ row_loss, float* __restrict__ loss,
                                       int m) {
    __shared__ float buf[32];
    float s = 0.f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) s += row_loss[i];
    s = block_reduce<false>(s, buf);
    if (threadIdx.x == 0) loss[0] = s / (float)m;
}
