// Day 15: the forward pass of the fused affine layer ("FA2") of a minimal classifier.
//
//   Z = X W + b            X [m, d], W [d, c], b [c]        (logits, m x c)
//   lse_i = log sum_j exp(Z[i, j])                          (the softmax normalizer of row i)
//   logp = log_softmax(Z)  logp[i, j] = Z[i, j] - lse_i
//   loss = (1/m) sum_i -logp[i, y_i] = (1/m) sum_i (lse_i - Z[i, y_i])     y [m] int32 labels
//
// Outputs: loss (1 float) and lse [m] (what a backward pass needs besides the logits); every
// version can also write logp [m, c] (the log-probabilities; A = exp(logp)).
// All fp32. lse_i is computed as max_i + log sum exp(Z - max_i), so logits of size 1e3 or
// 1e4 never overflow expf.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 15
//
// v1-v3 share one shared-memory tiled SGEMM (128x128 block tile, BK = 8, 256 threads, 8x8
// outputs per thread in registers, double-buffered shared memory, the output tile written
// through shared memory so global stores are coalesced). They differ in what happens around it:
//   v1  unfused, 3 kernels: fa2_v1_matmul_bias (Z = XW + b) -> fa2_v1_logsoftmax (block per
//       row, three passes over Z: max, sum of exp, write logp) -> fa2_v1_loss (one block
//       gathers -logp[i, y_i] and reduces). Z and logp are separate m x c buffers.
//   v2  fa2_v2_matmul writes Z = XW (no bias), then ONE kernel per row, fa2_v2_row: it adds
//       the bias, keeps the row in shared memory (up to ~56K classes) while computing the
//       online max / sum of exp, writes logp from shared memory and adds the row's NLL to
//       the loss with atomicAdd. Z is read from global memory once.
//   v3  fa2_v3_matmul_stats: the GEMM epilogue adds the bias AND reduces each 128-column
//       slice of each row to a partial (max, sum exp), written to a small [m, c/128] buffer;
//       Z goes straight into the logp buffer. fa2_v3_finish merges a row's partials into
//       lse (no pass over Z for it), then rewrites the row in place (logp = z - lse) with
//       float4 loads/stores and records the row's loss; fa2_v3_loss sums the row losses in a
//       fixed order (deterministic, unlike v2's atomics).
//   v4  the loss needs only lse and z[i, y_i], so the logits need never be stored.
//       fa2_v4_gemm_stats: a new tile (warp-tiled threads, a persistent grid whose blocks
//       walk the tiles with the load pipeline running on from one tile into the next) whose
//       epilogue adds the bias, reduces each row's 128 columns to (max, sum exp), and picks
//       out the label's logit; fa2_v4_lse merges the partials into lse and the row losses;
//       fa2_v4_loss sums them in a fixed order. The m x c logits exist only in registers.
//       Asked for logp, v4 runs fa2_v4_gemm_logits (the same tile, also storing Z) and
//       fa2_v4_subtract (logp = z - lse in place).
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
                                             float* __restrict__ lse_out, int m, int c) {
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
    if (threadIdx.x == 0) lse_out[blockIdx.x] = lse;
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
               float* __restrict__ logp, float* __restrict__ lse_out, float* __restrict__ loss, int m,
               int c, int staged) {
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
        lse_out[row] = lse;
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

// logp = z - lse over one row, in place: float4 accesses between a scalar head (up to the
// first 16-byte boundary: a row starting at element row * c sits (row * c) mod 4 floats past
// one) and a scalar tail; four independent float4 loads in flight per thread before any store.
// Called by every thread of the block.
__device__ __forceinline__ void subtract_in_place(float* zr, int64_t row, int c, float lse) {
    const int head = min((int)((4 - ((row * c) & 3)) & 3), c);  // elements before a 16 B boundary
    const int n4 = (c - head) >> 2;
    const int tail = c - head - 4 * n4;
    if ((int)threadIdx.x < head) zr[threadIdx.x] -= lse;
    if ((int)threadIdx.x < tail) zr[head + 4 * n4 + threadIdx.x] -= lse;
    float4* z4 = reinterpret_cast<float4*>(zr + head);
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

// One block per row: lse from the row's ntiles partials (into lse_out), the row's loss
// lse - z[y] into row_loss (summed by fa2_v3_loss), then logp = z - lse in place.
extern "C" __global__ void __launch_bounds__(256)
    fa2_v3_finish(float* logp, const float2* __restrict__ stats, const int* __restrict__ y,
                  float* __restrict__ lse_out, float* __restrict__ row_loss, int m, int c,
                  int ntiles) {
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
    if (threadIdx.x == 0) {
        lse_out[row] = lse;
        row_loss[row] = lse - zy;
    }
    subtract_in_place(zr, row, c, lse);
}

// loss = (1/m) sum of the row losses, by one block: thread t sums rows t, t + blockDim, ... in
// order, then a fixed shuffle tree: the same inputs give the same bits every run
__device__ __forceinline__ void mean_of_row_losses(const float* __restrict__ row_loss,
                                                   float* __restrict__ loss, int m) {
    __shared__ float buf[32];
    float s = 0.f;
    for (int i = threadIdx.x; i < m; i += blockDim.x) s += row_loss[i];
    s = block_reduce<false>(s, buf);
    if (threadIdx.x == 0) loss[0] = s / (float)m;
}

extern "C" __global__ void fa2_v3_loss(const float* __restrict__ row_loss, float* __restrict__ loss,
                                       int m) {
    mean_of_row_losses(row_loss, loss, m);
}

// ---------------------------------------------------------------------------------------
// v4: the loss without the logits
// ---------------------------------------------------------------------------------------
// The loss needs two numbers per row: lse_i and z[i, y_i]. v3 already gets lse from per-tile
// (max, sum exp) partials; v4 also takes z[i, y_i] in the epilogue (the one thread that holds
// column y_i of row i stores it), so the m x c logits are never written at all.
//
// The tile is new too (v1-v3 use day 8's v7 with scalar loads):
// * Warp tiling. The 8 warps split the 128 x 128 tile into WM x WN warp tiles (FA2_WARPS_M = 4:
//   4 x 2 warp tiles of 32 x 64 outputs). Lane (ly, lx) of a warp owns rows ly*4 .. +3 and
//   WTM/2 + ly*4 .. +3 and columns lx*4 .. +3 and WTN/2 + lx*4 .. +3 of its warp tile: still
//   8 x 8 outputs per thread, but per k a warp reads 24 distinct float4 of shared memory (384
//   bytes) where v1-v3's 16-row x 128-column warp tile reads 36 (576 bytes).
// * A persistent grid. The driver launches as many blocks as fit on the GPU at once, and block
//   b walks the tiles b, b + gridDim.x, ... With K = 256 a tile is only 32 steps of BK = 8, so
//   what a tile costs besides its steps matters: here the loads of a tile's first step are
//   issued during the last step of the previous tile, and its epilogue runs while they travel.
// * No branch around the prefetch: every step issues its loads from clamped (always valid)
//   addresses, and the elements outside the matrices are zeroed when the registers are written
//   to shared memory, after the math of the step.
// * Tile order: tile t is row tile t % tiles_m of column tile t / tiles_m, so the blocks
//   running at once share a few 128-column slices of W (each read from DRAM about once) and
//   all of X (4 MB at the benchmark size).
// FA2_WARPS_M (8, 4, 2 or 1 warps along the rows) and FA2_BK (8 or 16) are compile-time knobs;
// .notes/day15_20_gemm_sweep.py times the alternatives on the GPU.
#ifndef FA2_WARPS_M
#define FA2_WARPS_M 2
#endif
// The stats kernel (the loss without the logits: the benchmark's path) keeps fewer live
// registers than the one that also stores Z, so it can take the 1 x 8 warp layout, which the
// sweep found fastest (H200, 2026-11-23: 3.00 ms against 3.11 for 2 x 4); the logits kernel
// would spill 8 bytes with it and keeps 2 x 4.
#ifndef FA2_WARPS_M_STATS
#define FA2_WARPS_M_STATS 1
#endif
#ifndef FA2_BK
#define FA2_BK 8
#endif

namespace v4 {
constexpr int BM = 128, BN = 128, THREADS = 256;
constexpr int BK = FA2_BK, KSUB = BK / 8;     // a step is KSUB slices of 8 k's
constexpr int LD = 132;                       // shared row of 128 + 4: the transposing stores
                                              // of X's tile hit 32 different banks
constexpr int WM = FA2_WARPS_M, WN = 8 / WM;  // warps along the tile's rows and columns
constexpr int WTM = BM / WM, WTN = BN / WN;   // one warp's tile
constexpr int LM = WTM / 8, LN = WTN / 8;     // its lanes along rows and columns (LM x LN = 32)
constexpr int E = 4 * KSUB;                   // elements of each operand a thread loads per step
// epilogue staging: a warp stages LM rows of WTN floats; the row pitch puts the rows that one
// quarter-warp's float4 stores touch on different banks
constexpr int STAGE_LD = WTN + (((LN * 4 - WTN) % 32) + 32) % 32;
static_assert(BK == 8 || BK == 16, "FA2_BK is 8 or 16");
static_assert((WM == 1 || WM == 2 || WM == 4 || WM == 8) && LM * LN == 32, "FA2_WARPS_M is 1, 2, 4 or 8");
}  // namespace v4

// Z = X W + b for the tiles of this block, and per tile: stats[r, t] = (max, sum exp) of row r
// over column tile t, zlab[r] = z[r, y_r] (written by the tile holding column y_r), and with
// STORE_Z the logits themselves into Z. M = m rows, K = d features, N = c classes (all >= 1).
template <bool STORE_Z, int WM>
__device__ __forceinline__ void v4_logits_tiles(const float* __restrict__ X,
                                                const float* __restrict__ W,
                                                const float* __restrict__ bias,
                                                const int* __restrict__ labels,
                                                float2* __restrict__ stats, float* __restrict__ zlab,
                                                float* __restrict__ Z, int M, int K, int N) {
    // (v4's constants shadow the global BM, BN, BK of v1-v3's tile in here)
    constexpr int BM = v4::BM, BN = v4::BN, BK = v4::BK, KSUB = v4::KSUB, LD = v4::LD, E = v4::E;
    constexpr int WN = 8 / WM, WTM = BM / WM, WTN = BN / WN, LM = WTM / 8, LN = WTN / 8;
    constexpr int STAGE_LD = WTN + (((LN * 4 - WTN) % 32) + 32) % 32;
    static_assert((WM == 1 || WM == 2 || WM == 4 || WM == 8) && LM * LN == 32, "WM is 1, 2, 4 or 8");
    constexpr int BUF = 2 * BK * LD;                           // one operand, two buffers
    constexpr int STAGE = STORE_Z ? 8 * LM * STAGE_LD : 0;     // 8 warps' staging rows
    constexpr int RED = WN > 1 ? 2 * WN * BM : 0;              // WN partials per row (float2)
    __shared__ __align__(16) float smem[2 * BUF + STAGE + (RED > 0 ? RED : 2)];
    float* As = smem;                                          // [2][BK][LD]: As[k][m]
    float* Bs = smem + BUF;                                    // [2][BK][LD]: Bs[k][n]
    float* stage = smem + 2 * BUF;
    MaxSum* red = reinterpret_cast<MaxSum*>(smem + 2 * BUF + STAGE);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN, ly = lane / LN, lx = lane % LN;
    const int arow = wm * WTM + ly * 4, bcol = wn * WTN + lx * 4;  // this thread's first row/col
    // tile coordinates of the thread's register (i, j): two blocks of 4, half a warp tile apart
    auto row_of = [&](int i) { return arow + (i >> 2) * (WTM / 2) + (i & 3); };
    auto col_of = [&](int j) { return bcol + (j >> 2) * (WTN / 2) + (j & 3); };

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int tiles = tiles_m * tiles_n;

    // Loads of one step into registers. X: thread -> row tid/2, k = (tid&1)*4 + 8h + j (the
    // 2 x 4 threads of a row read its 8 consecutive k's); W: thread -> k = tid/32 + 8h,
    // columns tid%32 + 32j (a warp reads 32 consecutive floats). Addresses are clamped into
    // the matrices; store() zeroes what lies outside.
    float ra[E], rb[E];
    auto load = [&](int tm0, int tn0, int k0) {
        const float* pa = X + (int64_t)min(tm0 + (tid >> 1), M - 1) * K;
#pragma unroll
        for (int h = 0; h < KSUB; ++h)
#pragma unroll
            for (int j = 0; j < 4; ++j) ra[4 * h + j] = pa[min(k0 + (tid & 1) * 4 + 8 * h + j, K - 1)];
#pragma unroll
        for (int h = 0; h < KSUB; ++h) {
            const float* pb = W + (int64_t)min(k0 + (tid >> 5) + 8 * h, K - 1) * N;
#pragma unroll
            for (int j = 0; j < 4; ++j) rb[4 * h + j] = pb[min(tn0 + (tid & 31) + 32 * j, N - 1)];
        }
    };
    // ... and into shared memory buffer `b`, X's tile transposed (As[k][m]), zeros outside
    auto store = [&](int tm0, int tn0, int k0, int b) {
        float* as = As + b * BK * LD;
        float* bs = Bs + b * BK * LD;
        const bool row_ok = tm0 + (tid >> 1) < M;
#pragma unroll
        for (int h = 0; h < KSUB; ++h)
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int k = (tid & 1) * 4 + 8 * h + j;
                as[k * LD + (tid >> 1)] = (row_ok && k0 + k < K) ? ra[4 * h + j] : 0.f;
            }
#pragma unroll
        for (int h = 0; h < KSUB; ++h) {
            const int k = (tid >> 5) + 8 * h;
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const int n = (tid & 31) + 32 * j;
                bs[k * LD + n] = (k0 + k < K && tn0 + n < N) ? rb[4 * h + j] : 0.f;
            }
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

    // acc += this step's A tile x B tile: per k, four float4 shared loads and 64 FMAs
    auto mma = [&](int b) {
        const float* as = As + b * BK * LD;
        const float* bs = Bs + b * BK * LD;
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(as + k * LD + arow);
            const float4 a1 = *reinterpret_cast<const float4*>(as + k * LD + arow + WTM / 2);
            const float4 b0 = *reinterpret_cast<const float4*>(bs + k * LD + bcol);
            const float4 b1 = *reinterpret_cast<const float4*>(bs + k * LD + bcol + WTN / 2);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float bb[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], bb[j], acc[i][j]);
        }
    };

    // the tile (tm0, tn0) is complete in acc: bias, label logit, row statistics, maybe Z
    auto epilogue = [&](int tm0, int tn0) {
        // each group of global loads is issued together (clamped addresses, no branches), so
        // their latencies overlap
        {
            float bj[8];
#pragma unroll
            for (int j = 0; j < 8; ++j) bj[j] = bias[min(tn0 + col_of(j), N - 1)];
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += bj[j];
        }
        // z[r, y_r]: the thread holding column y_r of row r stores it (once in the whole grid)
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // four rows' labels in flight at a time
            int y[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) y[q] = labels[min(tm0 + row_of(4 * half + q), M - 1)];
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int i = 4 * half + q, r = tm0 + row_of(i);
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    if (r < M && tn0 + col_of(j) == y[q]) zlab[r] = acc[i][j];
            }
        }
        // (max, sum exp) of each of the thread's 8 rows over its valid columns, merged over the
        // LN lanes that share the rows (lane = ly * LN + lx), then over the WN warps (shared memory)
        const int tn = tn0 / BN;
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            MaxSum st{-FLT_MAX, 0.f};
#pragma unroll
            for (int j = 0; j < 8; ++j)
                if (tn0 + col_of(j) < N) st.m = fmaxf(st.m, acc[i][j]);
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                const float e = expf(acc[i][j] - st.m);
                st.s += tn0 + col_of(j) < N ? e : 0.f;
            }
#pragma unroll
            for (int o = 1; o < LN; o <<= 1)
                st = merge(st, {__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)});
            if (WN == 1) {
                const int r = tm0 + row_of(i);
                if (lx == 0 && r < M) stats[(int64_t)r * tiles_n + tn] = make_float2(st.m, st.s);
            } else if (lx == 0) {
                red[wn * BM + row_of(i)] = st;
            }
        }
        if (WN > 1) {
            __syncthreads();
            if (tid < BM && tm0 + tid < M) {
                MaxSum st = red[tid];
#pragma unroll
                for (int w = 1; w < WN; ++w) st = merge(st, red[w * BM + tid]);
                // (unsigned: every term is >= 0, and it spares a register for a sign)
                stats[(size_t)(unsigned)(tm0 + tid) * (unsigned)tiles_n + (unsigned)tn] =
                    make_float2(st.m, st.s);
            }
            // red is written again only in the next tile's epilogue, after at least one barrier
        }
        if (STORE_Z) {
            // through shared memory, so that a warp stores 32 consecutive floats of a row per
            // instruction: in round i the warp's LM lane rows stage their row i (LM x WTN floats)
            float* st = stage + warp * LM * STAGE_LD;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                *reinterpret_cast<float4*>(st + ly * STAGE_LD + lx * 4) =
                    make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
                *reinterpret_cast<float4*>(st + ly * STAGE_LD + WTN / 2 + lx * 4) =
                    make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
                __syncwarp();
#pragma unroll
                for (int rr = 0; rr < LM; ++rr) {
                    const int r = tm0 + wm * WTM + (i >> 2) * (WTM / 2) + rr * 4 + (i & 3);
                    if (r < M) {
#pragma unroll
                        for (int s = 0; s < WTN / 32 || s == 0; ++s) {
                            const int cl = s * 32 + lane;  // column in the warp tile
                            const int c = tn0 + wn * WTN + cl;
                            if (cl < WTN && c < N) Z[(int64_t)r * N + c] = st[rr * STAGE_LD + cl];
                        }
                    }
                }
                __syncwarp();  // the next round overwrites the staging rows
            }
        }
    };

    int tile = blockIdx.x;
    if (tile >= tiles) return;
    int m0 = (tile % tiles_m) * BM, n0 = (tile / tiles_m) * BN, k0 = 0;  // the step being computed
    load(m0, n0, k0);
    store(m0, n0, k0, 0);
    __syncthreads();
    // The step after (tile, k0): the next k-slice of this tile or the first of the next tile. It
    // is worked out twice per step, for the loads and again for the store, so that its
    // coordinates need no registers across the math.
    auto next_step = [&](int& nt, int& nm0, int& nn0, int& nk0) {
        nt = tile, nm0 = m0, nn0 = n0, nk0 = k0 + BK;
        if (nk0 >= K) {
            nt = tile + gridDim.x;
            nk0 = 0;
            if (nt < tiles) {
                nm0 = (nt % tiles_m) * BM;
                nn0 = (nt / tiles_m) * BN;
            }
        }
    };
    int buf = 0;
    for (;;) {
        const bool last = k0 + BK >= K;  // the tile's last step
        const bool more = !last || tile + (int)gridDim.x < tiles;
        {
            int nt, nm0, nn0, nk0;
            next_step(nt, nm0, nn0, nk0);
            load(nm0, nn0, nk0);  // in flight during the math (past the last tile: harmless reloads)
        }
        mma(buf);
        if (last) {
            epilogue(m0, n0);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
        }
        if (!more) break;
        int nt, nm0, nn0, nk0;
        next_step(nt, nm0, nn0, nk0);
        store(nm0, nn0, nk0, buf ^ 1);  // the other buffer: last read before the previous barrier
        __syncthreads();
        buf ^= 1;
        tile = nt;
        m0 = nm0;
        n0 = nn0;
        k0 = nk0;
    }
}

// Z is not stored: the logits live in registers only
extern "C" __global__ void __launch_bounds__(v4::THREADS, 2)
    fa2_v4_gemm_stats(const float* __restrict__ X, const float* __restrict__ W,
                      const float* __restrict__ b, const int* __restrict__ y,
                      float2* __restrict__ stats, float* __restrict__ zlab, int m, int d, int c) {
    v4_logits_tiles<false, FA2_WARPS_M_STATS>(X, W, b, y, stats, zlab, nullptr, m, d, c);
}

// the same, and Z into `logits` (v4 asked for logp: fa2_v4_subtract then makes it logp)
extern "C" __global__ void __launch_bounds__(v4::THREADS, 2)
    fa2_v4_gemm_logits(const float* __restrict__ X, const float* __restrict__ W,
                       const float* __restrict__ b, const int* __restrict__ y,
                       float2* __restrict__ stats, float* __restrict__ zlab,
                       float* __restrict__ logits, int m, int d, int c) {
    v4_logits_tiles<true, FA2_WARPS_M>(X, W, b, y, stats, zlab, logits, m, d, c);
}

// One warp per row (8 rows per 256-thread block): merge the row's ntiles partials into lse,
// and its loss lse - z[y] into row_loss.
extern "C" __global__ void __launch_bounds__(256)
    fa2_v4_lse(const float2* __restrict__ stats, const float* __restrict__ zlab,
               float* __restrict__ lse_out, float* __restrict__ row_loss, int m, int ntiles) {
    const int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= m) return;  // the whole warp: the shuffles below see 32 lanes
    MaxSum st{-FLT_MAX, 0.f};
    for (int t = lane; t < ntiles; t += 32) {
        const float2 p = stats[(int64_t)row * ntiles + t];
        st = merge(st, {p.x, p.y});
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        st = merge(st, {__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)});
    if (lane == 0) {
        const float lse = st.m + logf(st.s);
        lse_out[row] = lse;
        row_loss[row] = lse - zlab[row];
    }
}

// logp = z - lse in place, one block per row (only when the caller asked for logp)
extern "C" __global__ void __launch_bounds__(256)
    fa2_v4_subtract(float* logp, const float* __restrict__ lse, int m, int c) {
    const int64_t row = blockIdx.x;
    subtract_in_place(logp + row * c, row, c, lse[row]);
}

extern "C" __global__ void fa2_v4_loss(const float* __restrict__ row_loss, float* __restrict__ loss,
                                       int m) {
    mean_of_row_losses(row_loss, loss, m);
}
