// Day 20: the backward pass of day 15's layer, and a chunked ("Liger style") fused
// linear + cross-entropy that never holds the full logits.
//
//   forward (day 15):  Z = X W + b,  logp = log_softmax(Z),  L = (1/m) sum_i -logp[i, y_i]
//   backward:          dZ = (exp(logp) - onehot(y)) / m          [m, c]
//                      dW = X^T dZ                               [d, c]
//                      db = 1^T dZ   (column sums)               [c]
//                      dX = dZ W^T                               [m, d]
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 20
//
// Versions of the backward (inputs X, W, logp (saved by the forward), y; outputs dW, db, dX):
//   v1  straightforward: fa2b_v1_dz writes dZ; fa2b_v1_transpose materializes X^T and W^T;
//       fa2b_v1_matmul (one thread per output, global memory only) computes dW = X^T dZ and
//       dX = dZ W^T; fa2b_v1_colsum (one thread per column) computes db. Long sums are
//       added in blocks of 256 terms (see SUM_BLOCK).
//   v2  the tiled SGEMM of day 15 with the transposes read through index math: the operand
//       loaders address X as X^T (fa2b_v2_gemm_tn) and W as W^T (fa2b_v2_gemm_nt), no copy.
//       dX's GEMM has a long K (= c) and few output tiles, so it is split over K (blockIdx.z)
//       into partial products that fa2b_v2_splitk_reduce sums in a fixed order.
//   v3  fused where it pays: no dZ buffer at all. Both GEMMs load logp and compute
//       dZ = (exp(logp) - [j == y]) / m on the fly in their tile loaders, and db (the column
//       sums of dZ) is accumulated inside the dW GEMM by the blocks of the first row tile,
//       which see every row of their columns anyway: fa2b_v3_gemm_tn_dz_db, fa2b_v3_gemm_nt_dz.
//
// Chunked linear + cross-entropy (loss = CE(H W + b, y), forward and backward; lce_*):
//   for each chunk of R rows: lce_gemm_logits_stats (logits of the chunk + per-tile softmax
//   statistics), lce_finish_grad (lse per row, the row's loss, and the logits turned into
//   their gradient in place), fa2b_v2_gemm_nt (+ reduce) for dH of the chunk, and
//   lce_gemm_tn_acc_db for dW += H_c^T dZ_c and db += colsum(dZ_c); lce_loss at the end.
//   Peak memory: one R x V chunk instead of the N x V logits and their N x V gradient.
#include <cfloat>
#include <cstdint>

// ---------------------------------------------------------------------------------------
// reductions
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ float block_sum(float v, float* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    v = warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? buf[lane] : 0.f;
    r = warp_sum(r);
    __syncthreads();
    return r;
}

struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
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

// dZ[r, j] from the saved log-probabilities: (exp(logp) - [j == y_r]) * inv_m
__device__ __forceinline__ float dz_of(float logp, bool is_label, float inv_m) {
    return (expf(logp) - (is_label ? 1.f : 0.f)) * inv_m;
}

// ---------------------------------------------------------------------------------------
// v1: straightforward kernels
// ---------------------------------------------------------------------------------------
// grid: x over column blocks, y over rows (looping when m > gridDim.y)
extern "C" __global__ void fa2b_v1_dz(const float* __restrict__ logp, const int* __restrict__ y,
                                      float* __restrict__ dZ, int m, int c, float inv_m) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c) return;
    for (int r = blockIdx.y; r < m; r += gridDim.y) {
        const int64_t i = (int64_t)r * c + j;
        dZ[i] = dz_of(logp[i], j == y[r], inv_m);
    }
}

// out[j, i] = in[i, j]; in is rows x cols. Reads coalesced, writes strided (naive on purpose).
extern "C" __global__ void fa2b_v1_transpose(const float* __restrict__ in, float* __restrict__ out,
                                             int rows, int cols) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    for (int i = blockIdx.y * blockDim.y + threadIdx.y; i < rows; i += gridDim.y * blockDim.y)
        out[(int64_t)j * rows + i] = in[(int64_t)i * cols + j];
}

// Long float32 sums (K = c = 50257 for dX) are added in blocks of SUM_BLOCK terms, then the
// block sums: one running sum of 50257 terms loses ~5e-6 relative here (the label's term
// dominates the partial sum and every later tiny term is rounded against it), two levels
// about ten times less. The tiled versions get the same effect from their split-K.
constexpr int SUM_BLOCK = 256;

// C[M, N] = A[M, K] B[K, N], one thread per output, straight from global memory. Threads of a
// warp take consecutive columns: B's reads are coalesced, A's are one broadcast address.
extern "C" __global__ void fa2b_v1_matmul(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K) {
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= N) return;
    for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < M; r += gridDim.y * blockDim.y) {
        const float* a = A + (int64_t)r * K;
        float acc = 0.f;
        for (int k0 = 0; k0 < K; k0 += SUM_BLOCK) {
            const int k1 = min(K, k0 + SUM_BLOCK);
            float part = 0.f;
            for (int k = k0; k < k1; ++k) part = fmaf(a[k], B[(int64_t)k * N + n], part);
            acc += part;
        }
        C[(int64_t)r * N + n] = acc;
    }
}

// db[j] = sum_r dZ[r, j], one thread per column (consecutive threads read consecutive floats)
extern "C" __global__ void fa2b_v1_colsum(const float* __restrict__ dZ, float* __restrict__ db,
                                          int m, int c) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= c) return;
    float s = 0.f;
    for (int r0 = 0; r0 < m; r0 += SUM_BLOCK) {
        const int r1 = min(m, r0 + SUM_BLOCK);
        float part = 0.f;
        for (int r = r0; r < r1; ++r) part += dZ[(int64_t)r * c + j];
        s += part;
    }
    db[j] = s;
}

// ---------------------------------------------------------------------------------------
// The tiled SGEMM (day 15's: 128 x 128 block tile, BK = 8, 256 threads, 8 x 8 outputs per
// thread, double-buffered shared memory, output written through shared memory), generalized:
//   A_T = false: A(m, k) = A[m * lda + k]     A_T = true: A(m, k) = A[k * lda + m]  (A = X^T)
//   B_T = false: B(k, n) = B[k * ldb + n]     B_T = true: B(k, n) = B[n * ldb + k]  (B = W^T)
// The loaders pick the thread-to-element mapping that keeps the global reads of each layout
// coalesced; both tiles land in shared memory k-major (As[k][m], Bs[k][n]) either way, so the
// math loop does not know about transposes.
//   A_DZ / B_DZ: the operand is dZ, computed on the fly from logp and the labels.
//   EPI_STORE: C = AB; EPI_ACCUM: C += AB; EPI_BIAS_STATS: C = AB + bias and per-(row, column
//   tile) softmax statistics (max, sum exp) into stats (day 15 v3's epilogue).
//   COLSUM: the blocks of row tile 0 also sum B's columns over K into colsum (= or += by EPI).
//   Split-K: block z takes K range [z * k_chunk, (z + 1) * k_chunk) and writes C + z * M * N.
// ---------------------------------------------------------------------------------------
constexpr int BM = 128, BN = 128, BK = 8;
constexpr int GEMM_THREADS = 256;
constexpr int LD = 132;  // shared row of 128 + 4 pad: transposing stores hit every bank once
constexpr int AS_FLOATS = 2 * BK * LD;
constexpr int BS_FLOATS = 2 * BK * LD;
constexpr int STAGE_FLOATS = (GEMM_THREADS / 32) * 4 * BN;
constexpr int GEMM_SMEM_FLOATS =
    AS_FLOATS + BS_FLOATS > STAGE_FLOATS ? AS_FLOATS + BS_FLOATS : STAGE_FLOATS;

enum Epilogue { EPI_STORE = 0, EPI_ACCUM = 1, EPI_BIAS_STATS = 2 };

__device__ __forceinline__ int split_index(int base, int i) { return base + (i < 4 ? i : 60 + i); }

template <bool A_T, bool B_T, bool A_DZ, bool B_DZ, int EPI, bool COLSUM>
__device__ __forceinline__ void gemm_block(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, const float* __restrict__ bias,
                                           float2* __restrict__ stats, float* __restrict__ colsum,
                                           const int* __restrict__ labels, float inv_m, int M, int N,
                                           int K, int lda, int ldb, int k_chunk) {
    static_assert(!(A_DZ && A_T) && !(B_DZ && B_T), "dZ operands are read row-major");
    __shared__ __align__(16) float smem[GEMM_SMEM_FLOATS];
    float* As = smem;              // [2][BK][LD]
    float* Bs = smem + AS_FLOATS;  // [2][BK][LD]

    const int tid = threadIdx.x;
    const int tx = tid & 15, ty = tid >> 4;
    const int m0 = blockIdx.x * BM, n0 = blockIdx.y * BN;
    const int k_begin = blockIdx.z * k_chunk;
    const int k_end = min(K, k_begin + k_chunk);
    C += (int64_t)blockIdx.z * M * N;  // this split's partial product (z = 0 without split-K)

    // A_DZ: this thread's A row is fixed (row-major loader), so is its label
    int a_label = -1;
    if (A_DZ && m0 + (tid >> 1) < M) a_label = labels[m0 + (tid >> 1)];

    float ra[4], rb[4];
    auto load_tile = [&](int k0) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int r, k;
            if (A_T) { r = m0 + (tid & 31) + 32 * j; k = k0 + (tid >> 5); }   // 32 consecutive m
            else     { r = m0 + (tid >> 1); k = k0 + (tid & 1) * 4 + j; }     // 4 consecutive k
            float v = 0.f;
            if (r < M && k < k_end) {
                v = A_T ? A[(int64_t)k * lda + r] : A[(int64_t)r * lda + k];
                if (A_DZ) v = dz_of(v, k == a_label, inv_m);
            }
            ra[j] = v;
        }
        int b_label = -1;
        if (B_DZ) {
            const int k = k0 + (tid >> 5);
            if (k < k_end) b_label = labels[k];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            int k, n;
            if (B_T) { n = n0 + (tid >> 1); k = k0 + (tid & 1) * 4 + j; }     // 4 consecutive k
            else     { k = k0 + (tid >> 5); n = n0 + (tid & 31) + 32 * j; }   // 32 consecutive n
            float v = 0.f;
            if (k < k_end && n < N) {
                v = B_T ? B[(int64_t)n * ldb + k] : B[(int64_t)k * ldb + n];
                if (B_DZ) v = dz_of(v, n == b_label, inv_m);
            }
            rb[j] = v;
        }
    };
    auto store_tile = [&](int buf) {
        float* as = As + buf * BK * LD;
        float* bs = Bs + buf * BK * LD;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (A_T) as[(tid >> 5) * LD + (tid & 31) + 32 * j] = ra[j];
            else     as[((tid & 1) * 4 + j) * LD + (tid >> 1)] = ra[j];
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (B_T) bs[((tid & 1) * 4 + j) * LD + (tid >> 1)] = rb[j];
            else     bs[(tid >> 5) * LD + (tid & 31) + 32 * j] = rb[j];
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    float csum = 0.f;  // COLSUM: column n0 + tid (tid < 128) of B, summed over this block's K
    const bool colsum_block = COLSUM && blockIdx.x == 0;

    const int ktiles = (k_end - k_begin + BK - 1) / BK;
    if (ktiles > 0) {
        load_tile(k_begin);
        store_tile(0);
    }
    __syncthreads();
    for (int t = 0; t < ktiles; ++t) {
        const int cur = t & 1;
        if (t + 1 < ktiles) load_tile(k_begin + (t + 1) * BK);
        const float* as = As + cur * BK * LD;
        const float* bs = Bs + cur * BK * LD;
        if (colsum_block && tid < BN) {
#pragma unroll
            for (int k = 0; k < BK; ++k) csum += bs[k * LD + tid];
        }
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(as + k * LD + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4*>(as + k * LD + 64 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4*>(bs + k * LD + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4*>(bs + k * LD + 64 + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
        }
        if (t + 1 < ktiles) store_tile(cur ^ 1);
        __syncthreads();
    }

    if (colsum_block && tid < BN && n0 + tid < N) {
        if (EPI == EPI_ACCUM) colsum[n0 + tid] += csum;
        else colsum[n0 + tid] = csum;
    }

    // ---- epilogue --------------------------------------------------------------------------
    const int row0 = ty * 4, col0 = tx * 4;
    if (EPI == EPI_BIAS_STATS) {
        float bj[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) {
            const int gn = n0 + split_index(col0, j);
            bj[j] = gn < N ? bias[gn] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            MaxSum st{-FLT_MAX, 0.f};
#pragma unroll
            for (int j = 0; j < 8; ++j) {
                acc[i][j] += bj[j];
                if (n0 + split_index(col0, j) < N) st.m = fmaxf(st.m, acc[i][j]);
            }
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

    // through shared memory: a warp writes 32 consecutive floats of a row per instruction
    const int warp = tid >> 5, lane = tid & 31, h = ty & 1;
    float* stage = smem + warp * 4 * BN;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
            const int i = q + 4 * half;
            float* dst = stage + (h * 2 + half) * BN;
            *reinterpret_cast<float4*>(dst + col0) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
            *reinterpret_cast<float4*>(dst + 64 + col0) = make_float4(acc[i][4], acc[i][5], acc[i][6], acc[i][7]);
        }
        __syncwarp();
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int gm = m0 + (r & 1) * 64 + warp * 8 + (r >> 1) * 4 + q;
            if (gm < M) {
                float* crow = C + (int64_t)gm * N;
#pragma unroll
                for (int s = 0; s < 4; ++s) {
                    const int gn = n0 + lane + 32 * s;
                    if (gn < N) {
                        const float v = stage[r * BN + lane + 32 * s];
                        if (EPI == EPI_ACCUM) crow[gn] += v;
                        else crow[gn] = v;
                    }
                }
            }
        }
        __syncwarp();
    }
}

// Every GEMM entry point takes the same arguments (unused ones are null / ignored):
//   A, B, C, bias, stats, colsum, labels, inv_m, M, N, K, lda, ldb, k_chunk
#define GEMM_ENTRY(NAME, A_T, B_T, A_DZ, B_DZ, EPI, COLSUM)                                      \
    extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)                               \
        NAME(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,    \
             const float* __restrict__ bias, float2* __restrict__ stats,                         \
             float* __restrict__ colsum, const int* __restrict__ labels, float inv_m, int M,     \
             int N, int K, int lda, int ldb, int k_chunk) {                                      \
        gemm_block<A_T, B_T, A_DZ, B_DZ, EPI, COLSUM>(A, B, C, bias, stats, colsum, labels,      \
                                                      inv_m, M, N, K, lda, ldb, k_chunk);        \
    }

// v2: dW = X^T dZ (X read as its transpose), dX = dZ W^T (W read as its transpose, split-K)
GEMM_ENTRY(fa2b_v2_gemm_tn, true, false, false, false, EPI_STORE, false)
GEMM_ENTRY(fa2b_v2_gemm_nt, false, true, false, false, EPI_STORE, false)
// v3: dZ computed from logp inside the loaders; db fused into the dW GEMM
GEMM_ENTRY(fa2b_v3_gemm_tn_dz_db, true, false, false, true, EPI_STORE, true)
GEMM_ENTRY(fa2b_v3_gemm_nt_dz, false, true, true, false, EPI_STORE, false)
// chunked linear + cross-entropy
GEMM_ENTRY(lce_gemm_logits_stats, false, false, false, false, EPI_BIAS_STATS, false)
GEMM_ENTRY(lce_gemm_tn_acc_db, true, false, false, false, EPI_ACCUM, true)

// out[i] = sum_s ws[s * n + i], s = 0..splits-1 in order (deterministic)
extern "C" __global__ void fa2b_v2_splitk_reduce(const float* __restrict__ ws, float* __restrict__ out,
                                                 int64_t n, int splits) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float s = 0.f;
        for (int k = 0; k < splits; ++k) s += ws[k * n + i];
        out[i] = s;
    }
}

// ---------------------------------------------------------------------------------------
// Chunked linear + cross-entropy: the per-row finishing kernel and the loss
// ---------------------------------------------------------------------------------------
// One block per row of the chunk: lse from the row's ntiles (max, sum) partials; the row's
// loss lse - z[y] into row_loss; dZ = (exp(z - lse) - [j == y]) * inv_n into dZ, which may
// be Z itself (in place: each element is read and then written by the same thread; z[y] is
// read before the first barrier, every write comes after it).
extern "C" __global__ void __launch_bounds__(256)
    lce_finish_grad(const float* Z, float* dZ, const float2* __restrict__ stats,
                    const int* __restrict__ y, float* __restrict__ row_loss, int rows, int V,
                    int ntiles, float inv_n) {
    __shared__ MaxSum red[32];
    const int64_t row = blockIdx.x;
    const float* z = Z + row * V;
    float* dz = dZ + row * V;
    const int label = y[row];
    float zy = 0.f;
    if (threadIdx.x == 0) zy = z[label];

    MaxSum st{-FLT_MAX, 0.f};
    for (int t = threadIdx.x; t < ntiles; t += blockDim.x) {
        const float2 p = stats[row * ntiles + t];
        st = merge(st, {p.x, p.y});
    }
    st = block_reduce_maxsum(st, red);
    const float lse = st.m + logf(st.s);
    if (threadIdx.x == 0) row_loss[row] = lse - zy;

    // float4 body between a scalar head and tail (Z and dZ rows share their 16-byte phase)
    const int head = min((int)((4 - ((row * V) & 3)) & 3), V);
    const int n4 = (V - head) >> 2;
    const int tail = V - head - 4 * n4;
    const int t = threadIdx.x, T = blockDim.x, tail0 = head + 4 * n4;
    if (t < head) dz[t] = dz_of(z[t] - lse, t == label, inv_n);
    if (t < tail) dz[tail0 + t] = dz_of(z[tail0 + t] - lse, tail0 + t == label, inv_n);
    const float4* z4 = reinterpret_cast<const float4*>(z + head);
    float4* dz4 = reinterpret_cast<float4*>(dz + head);
    for (int base = t; base < n4; base += 4 * T) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < n4) v[u] = z4[base + u * T];
#pragma unroll
        for (int u = 0; u < 4; ++u) {
            const int k = base + u * T;
            if (k < n4) {
                const int j = head + 4 * k;
                v[u] = make_float4(dz_of(v[u].x - lse, j == label, inv_n), dz_of(v[u].y - lse, j + 1 == label, inv_n),
                                   dz_of(v[u].z - lse, j + 2 == label, inv_n), dz_of(v[u].w - lse, j + 3 == label, inv_n));
                dz4[k] = v[u];
            }
        }
    }
}

// one block: loss = (1/n) sum of the row losses, in a fixed order
extern "C" __global__ void lce_loss(const float* __restrict__ row_loss, float* __restrict__ loss, int n) {
    __shared__ float buf[32];
    float s = 0.f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) s += row_loss[i];
    s = block_sum(s, buf);
    if (threadIdx.x == 0) loss[0] = s / (float)n;
}
