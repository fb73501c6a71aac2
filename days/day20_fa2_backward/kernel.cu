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
//   v3  no dZ buffer: both GEMMs load logp and compute dZ = (exp(logp) - [j == y]) / m in
//       their tile loaders, right after the loads; db (the column sums of dZ) is accumulated
//       inside the dW GEMM by the blocks of the first row tile, which see every row of their
//       columns anyway: fa2b_v3_gemm_tn_dz_db, fa2b_v3_gemm_nt_dz.
//   v4  day 15 v4's tile (warp tiling, persistent blocks walking the tiles, the pipeline running
//       on from one tile into the next), generalized to transposed operands. dZ is computed
//       when a step's registers are written to shared memory, after the math of the step (not
//       right after the loads, where v3 waits for them), as exp(v - shift[row]) - [col == y]:
//       shift = 0 for logp, shift = lse for raw logits; 1/m is applied once, in the epilogue.
//       fa2b_v4_gemm_tn_dz_db (dW, db), fa2b_v4_gemm_nt_dz (dX, split over K).
//
// Linear + cross-entropy (loss = CE(H W + b, y), forward and backward; lce_*), built from v4's
// tile: lce_gemm_logits (Z = H W + b into a chunk buffer, with per-tile (max, sum exp) and the
// labels' logits), lce_lse (lse and loss per row); then, fused, the two gradient GEMMs compute
// dZ = (exp(z - lse) - onehot) / N from the logits as they load them (fa2b_v4_gemm_nt_dz for dH,
// lce_gemm_tn_dz_acc_db / fa2b_v4_gemm_tn_dz_db for dW and db); or, unfused, lce_grad writes dZ
// into its own N x V buffer for lce_gemm_nt and lce_gemm_tn_db. lce_loss averages the row losses.
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
//   COLSUM: the blocks of row tile 0 also sum B's columns over K into colsum.
//   Split-K: block z takes K range [z * k_chunk, (z + 1) * k_chunk) and writes C + z * M * N.
// ---------------------------------------------------------------------------------------
constexpr int BM = 128, BN = 128, BK = 8;
constexpr int GEMM_THREADS = 256;
constexpr int LD = 132;  // shared row of 128 + 4 pad: transposing stores hit every bank once
constexpr int AS_FLOATS = 2 * BK * LD;
constexpr int BS_FLOATS = 2 * BK * LD;
constexpr int STAGE_FLOATS = (GEMM_THREADS / 32) * 4 * BN;  // epilogue: 4 rows per warp
constexpr int GEMM_SMEM_FLOATS =
    AS_FLOATS + BS_FLOATS > STAGE_FLOATS ? AS_FLOATS + BS_FLOATS : STAGE_FLOATS;

__device__ __forceinline__ int split_index(int base, int i) { return base + (i < 4 ? i : 60 + i); }

template <bool A_T, bool B_T, bool A_DZ, bool B_DZ, bool COLSUM>
__device__ __forceinline__ void gemm_block(const float* __restrict__ A, const float* __restrict__ B,
                                           float* __restrict__ C, float* __restrict__ colsum,
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

    if (colsum_block && tid < BN && n0 + tid < N) colsum[n0 + tid] = csum;

    // ---- epilogue --------------------------------------------------------------------------
    // ---- epilogue: through shared memory, so a warp writes 32 consecutive floats of a row
    // per instruction
    const int col0 = tx * 4;
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
                        crow[gn] = stage[r * BN + lane + 32 * s];
                    }
                }
            }
        }
        __syncwarp();
    }
}

// Every GEMM entry point of v2 and v3 takes the same arguments (unused ones are null / ignored):
//   A, B, C, colsum, labels, inv_m, M, N, K, lda, ldb, k_chunk
#define GEMM_ENTRY(NAME, A_T, B_T, A_DZ, B_DZ, COLSUM)                                           \
    extern "C" __global__ void __launch_bounds__(GEMM_THREADS, 2)                               \
        NAME(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,    \
             float* __restrict__ colsum, const int* __restrict__ labels, float inv_m, int M,     \
             int N, int K, int lda, int ldb, int k_chunk) {                                      \
        gemm_block<A_T, B_T, A_DZ, B_DZ, COLSUM>(A, B, C, colsum, labels, inv_m, M, N, K, lda,  \
                                                 ldb, k_chunk);                                  \
    }

// v2: dW = X^T dZ (X read as its transpose), dX = dZ W^T (W read as its transpose, split-K)
GEMM_ENTRY(fa2b_v2_gemm_tn, true, false, false, false, false)
GEMM_ENTRY(fa2b_v2_gemm_nt, false, true, false, false, false)
// v3: dZ computed from logp inside the loaders; db fused into the dW GEMM
GEMM_ENTRY(fa2b_v3_gemm_tn_dz_db, true, false, false, true, true)
GEMM_ENTRY(fa2b_v3_gemm_nt_dz, false, true, true, false, false)

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
// v4: day 15 v4's tile, for transposed operands and dZ operands
// ---------------------------------------------------------------------------------------
// C = scale * op(A) op(B), with the operands as v2 reads them (A_T: A(m, k) = A[k * lda + m],
// B_T: B(k, n) = B[n * ldb + k]) and, for a dZ operand, the value exp(v - shift[row]) - [col ==
// labels[row]] in place of the loaded v (row and col of the m x c matrix dZ; shift null: 0).
// Day 15 v4's kernel.cu explains the tile; in short: 128 x 128 tiles, 8 warps in WM x WN warp
// tiles, 8 x 8 outputs per thread, BK = FA2_BK, double-buffered shared memory filled from
// registers, blocks walking work units u = blockIdx.x, blockIdx.x + gridDim.x, ... with the
// first loads of the next unit issued during the last step of the current one.
// A work unit is one output tile and one range of K: splits = ceil(K / k_chunk) ranges (split-K,
// for dX: few output tiles, K = c), unit u -> split u / (tiles_m * tiles_n), then its tile in
// the order N_FAST (the column tiles of one row tile side by side: for dX, both of the d = 256
// columns read the same rows of dZ) or row tiles first (for dW and the logits: the row tiles
// of one column slice side by side).
// Epilogues: T_STORE: C[split] = scale * acc (C + split * M * N; split-K partials for a later
// reduce); T_ACCUM: C += scale * acc; T_LOGITS: acc + bias into C = Z, with day 15 v4's per-tile
// (max, sum exp) into stats and the labels' logits into zlab. COLSUM: the units of row tile 0
// also sum their B tiles' columns (dZ's column sums: db) into colsum, scaled (= or += as C).
#ifndef FA2_WARPS_M
#define FA2_WARPS_M 1
#endif
#ifndef FA2_BK
#define FA2_BK 8
#endif

namespace v4 {
constexpr int BM = 128, BN = 128, THREADS = 256;
constexpr int BK = FA2_BK, KSUB = BK / 8;     // a step is KSUB slices of 8 k's
constexpr int LD = 132;                       // shared row of 128 + 4 (transposing stores)
constexpr int WM = FA2_WARPS_M, WN = 8 / WM;  // warps along the tile's rows and columns
constexpr int WTM = BM / WM, WTN = BN / WN;   // one warp's tile
constexpr int LM = WTM / 8, LN = WTN / 8;     // its lanes along rows and columns (LM x LN = 32)
constexpr int E = 4 * KSUB;                   // elements of each operand a thread loads per step
constexpr int STAGE_LD = WTN + (((LN * 4 - WTN) % 32) + 32) % 32;  // epilogue staging pitch
static_assert(BK == 8 || BK == 16, "FA2_BK is 8 or 16");
static_assert((WM == 1 || WM == 2 || WM == 4 || WM == 8) && LM * LN == 32, "FA2_WARPS_M is 1, 2, 4 or 8");
}  // namespace v4

enum TileEpilogue { T_STORE = 0, T_ACCUM = 1, T_LOGITS = 2 };

template <bool A_T, bool B_T, bool A_DZ, bool B_DZ, bool COLSUM, int EPI, bool N_FAST, bool SPLIT_K>
__device__ __forceinline__ void v4_tiles(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, const float* __restrict__ bias,
                                         float2* __restrict__ stats, float* __restrict__ zlab,
                                         float* __restrict__ colsum, const int* __restrict__ labels,
                                         const float* __restrict__ shift, float scale, int M, int N,
                                         int K, int lda, int ldb, int k_chunk) {
    static_assert(!(A_DZ && A_T) && !(B_DZ && B_T), "dZ operands are read row-major");
    // (v4's constants shadow the global BM, BN, BK of v2/v3's tile in here)
    constexpr int BM = v4::BM, BN = v4::BN, BK = v4::BK, KSUB = v4::KSUB, LD = v4::LD, E = v4::E;
    constexpr int WN = v4::WN, WTM = v4::WTM, WTN = v4::WTN, LM = v4::LM, LN = v4::LN;
    constexpr int STAGE_LD = v4::STAGE_LD;
    constexpr int BUF = 2 * BK * LD;                                   // one operand, two buffers
    constexpr int STAGE = 8 * LM * STAGE_LD;                           // 8 warps' staging rows
    constexpr int RED = (EPI == T_LOGITS && WN > 1) ? 2 * WN * BM : 2;  // WN partials per row
    __shared__ __align__(16) float smem[2 * BUF + STAGE + RED];
    float* As = smem;                                                  // [2][BK][LD]: As[k][m]
    float* Bs = smem + BUF;                                            // [2][BK][LD]: Bs[k][n]
    float* stage = smem + 2 * BUF;
    MaxSum* red = reinterpret_cast<MaxSum*>(smem + 2 * BUF + STAGE);

    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int wm = warp / WN, wn = warp % WN, ly = lane / LN, lx = lane % LN;
    const int arow = wm * WTM + ly * 4, bcol = wn * WTN + lx * 4;
    auto row_of = [&](int i) { return arow + (i >> 2) * (WTM / 2) + (i & 3); };
    auto col_of = [&](int j) { return bcol + (j >> 2) * (WTN / 2) + (j & 3); };

    const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
    const int units = tiles_m * tiles_n * (SPLIT_K ? (K + k_chunk - 1) / k_chunk : 1);
    // unit u: its tile (tm0, tn0) and its K range [k0, ke) (without SPLIT_K: all of K)
    auto unit_of = [&](int u, int& tm0, int& tn0, int& k0, int& ke) {
        const int t = SPLIT_K ? u % (tiles_m * tiles_n) : u;
        const int split = SPLIT_K ? u / (tiles_m * tiles_n) : 0;
        if (N_FAST) {
            tn0 = (t % tiles_n) * BN;
            tm0 = (t / tiles_n) * BM;
        } else {
            tm0 = (t % tiles_m) * BM;
            tn0 = (t / tiles_m) * BN;
        }
        k0 = SPLIT_K ? split * k_chunk : 0;
        ke = SPLIT_K ? min(K, k0 + k_chunk) : K;
    };

    // Loads of one step into registers (clamped addresses; store() zeroes what lies outside).
    // Row-major A (and B_T): thread -> row tid/2, k = (tid&1)*4 + 8h + j. A_T (and row-major
    // B): thread -> k = tid/32 + 8h, rows (columns) tid%32 + 32j: 32 consecutive floats a warp.
    float ra[E], rb[E];
    int lab_a = 0, lab_b[KSUB];  // dZ operands: the labels and shifts of the thread's rows
    float sh_a = 0.f, sh_b[KSUB];
    auto load = [&](int tm0, int tn0, int k0) {
        if (!A_T) {
            const int r = min(tm0 + (tid >> 1), M - 1);
            const float* p = A + (int64_t)r * lda;
#pragma unroll
            for (int h = 0; h < KSUB; ++h)
#pragma unroll
                for (int j = 0; j < 4; ++j) ra[4 * h + j] = p[min(k0 + (tid & 1) * 4 + 8 * h + j, K - 1)];
            if (A_DZ) {
                lab_a = labels[r];
                sh_a = shift ? shift[r] : 0.f;
            }
        } else {
#pragma unroll
            for (int h = 0; h < KSUB; ++h) {
                const float* p = A + (int64_t)min(k0 + (tid >> 5) + 8 * h, K - 1) * lda;
#pragma unroll
                for (int j = 0; j < 4; ++j) ra[4 * h + j] = p[min(tm0 + (tid & 31) + 32 * j, M - 1)];
            }
        }
        if (!B_T) {
#pragma unroll
            for (int h = 0; h < KSUB; ++h) {
                const int k = min(k0 + (tid >> 5) + 8 * h, K - 1);
                const float* p = B + (int64_t)k * ldb;
#pragma unroll
                for (int j = 0; j < 4; ++j) rb[4 * h + j] = p[min(tn0 + (tid & 31) + 32 * j, N - 1)];
                if (B_DZ) {
                    lab_b[h] = labels[k];
                    sh_b[h] = shift ? shift[k] : 0.f;
                }
            }
        } else {
            const float* p = B + (int64_t)min(tn0 + (tid >> 1), N - 1) * ldb;
#pragma unroll
            for (int h = 0; h < KSUB; ++h)
#pragma unroll
                for (int j = 0; j < 4; ++j) rb[4 * h + j] = p[min(k0 + (tid & 1) * 4 + 8 * h + j, K - 1)];
        }
    };
    // ... into shared memory buffer b, k-major for both operands; dZ is computed here, after
    // the math of the step, when the loads have long arrived; zeros outside M, N and [k0, ke)
    auto store = [&](int tm0, int tn0, int k0, int ke, int b) {
        float* as = As + b * BK * LD;
        float* bs = Bs + b * BK * LD;
        if (!A_T) {
            const bool row_ok = tm0 + (tid >> 1) < M;
#pragma unroll
            for (int h = 0; h < KSUB; ++h)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int kl = (tid & 1) * 4 + 8 * h + j;
                    float v = ra[4 * h + j];
                    if (A_DZ) v = expf(v - sh_a) - (k0 + kl == lab_a ? 1.f : 0.f);
                    as[kl * LD + (tid >> 1)] = (row_ok && k0 + kl < ke) ? v : 0.f;
                }
        } else {
#pragma unroll
            for (int h = 0; h < KSUB; ++h) {
                const int kl = (tid >> 5) + 8 * h;
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int ml = (tid & 31) + 32 * j;
                    as[kl * LD + ml] = (k0 + kl < ke && tm0 + ml < M) ? ra[4 * h + j] : 0.f;
                }
            }
        }
        if (!B_T) {
#pragma unroll
            for (int h = 0; h < KSUB; ++h) {
                const int kl = (tid >> 5) + 8 * h;
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int nl = (tid & 31) + 32 * j;
                    float v = rb[4 * h + j];
                    if (B_DZ) v = expf(v - sh_b[h]) - (tn0 + nl == lab_b[h] ? 1.f : 0.f);
                    bs[kl * LD + nl] = (k0 + kl < ke && tn0 + nl < N) ? v : 0.f;
                }
            }
        } else {
            const bool col_ok = tn0 + (tid >> 1) < N;
#pragma unroll
            for (int h = 0; h < KSUB; ++h)
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const int kl = (tid & 1) * 4 + 8 * h + j;
                    bs[kl * LD + (tid >> 1)] = (col_ok && k0 + kl < ke) ? rb[4 * h + j] : 0.f;
                }
        }
    };

    float acc[8][8];
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
    float csum = 0.f;  // COLSUM: column tid of the B tiles, summed over the unit's K range

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

    // acc -> out (row pitch N) through shared memory, so that a warp stores 32 consecutive floats
    // of a row per instruction: in round i the warp's LM lane rows stage their row i
    auto write_tile = [&](float* __restrict__ out, int tm0, int tn0) {
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
                        const int cl = s * 32 + lane;
                        const int c = tn0 + wn * WTN + cl;
                        if (cl < WTN && c < N) {
                            float* p = out + (int64_t)r * N + c;
                            const float v = st[rr * STAGE_LD + cl];
                            *p = EPI == T_ACCUM ? *p + v : v;
                        }
                    }
                }
            }
            __syncwarp();  // the next round overwrites the staging rows
        }
    };

    auto epilogue = [&](int u, int tm0, int tn0) {
        if (COLSUM && tm0 == 0 && tid < BN && tn0 + tid < N) {
            float* p = colsum + tn0 + tid;
            *p = (EPI == T_ACCUM ? *p : 0.f) + scale * csum;
        }
        if constexpr (EPI != T_LOGITS) {
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] *= scale;
            const int split = SPLIT_K ? u / (tiles_m * tiles_n) : 0;  // this K range's partial
            write_tile(C + (int64_t)split * M * N, tm0, tn0);
        } else {
            {
                float bj[8];
#pragma unroll
                for (int j = 0; j < 8; ++j) bj[j] = bias[min(tn0 + col_of(j), N - 1)];
#pragma unroll
                for (int i = 0; i < 8; ++i)
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] += bj[j];
            }
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
                    stats[(size_t)(unsigned)(tm0 + tid) * (unsigned)((N + BN - 1) / BN) + (unsigned)tn] =
                        make_float2(st.m, st.s);
                }
            }
            write_tile(C, tm0, tn0);
        }
    };

    int u = blockIdx.x;
    if (u >= units) return;
    int m0, n0, k0, ke;  // the unit being computed and the k of its current step
    unit_of(u, m0, n0, k0, ke);
    load(m0, n0, k0);
    store(m0, n0, k0, ke, 0);
    __syncthreads();
    // The step after (u, k0): the next k-slice of this unit or the first of the next unit. It
    // is worked out twice per step, for the loads and again for the store, so that its
    // coordinates need no registers across the math.
    auto next_step = [&](int& nu, int& nm0, int& nn0, int& nk0, int& nke) {
        nu = u, nm0 = m0, nn0 = n0, nk0 = k0 + BK, nke = ke;
        if (nk0 >= ke) {
            nu = u + gridDim.x;
            if (nu < units) unit_of(nu, nm0, nn0, nk0, nke);
        }
    };
    int buf = 0;
    for (;;) {
        const bool last = k0 + BK >= ke;              // the unit's last step
        const bool more = !last || u + (int)gridDim.x < units;
        {
            int nu, nm0, nn0, nk0, nke;
            next_step(nu, nm0, nn0, nk0, nke);
            load(nm0, nn0, nk0);  // in flight during the math (past the last unit: harmless reloads)
        }
        mma(buf);
        if (COLSUM && m0 == 0 && tid < BN) {
            const float* bs = Bs + buf * BK * LD;
#pragma unroll
            for (int k = 0; k < BK; ++k) csum += bs[k * LD + tid];
        }
        if (last) {
            epilogue(u, m0, n0);
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;
            csum = 0.f;
        }
        if (!more) break;
        int nu, nm0, nn0, nk0, nke;
        next_step(nu, nm0, nn0, nk0, nke);
        store(nm0, nn0, nk0, nke, buf ^ 1);  // the other buffer: last read before the previous barrier
        __syncthreads();
        buf ^= 1;
        u = nu;
        m0 = nm0;
        n0 = nn0;
        k0 = nk0;
        ke = nke;
    }
}

// Every v4 entry point takes the same arguments (unused ones are null / ignored):
//   A, B, C, bias, stats, zlab, colsum, labels, shift, scale, M, N, K, lda, ldb, k_chunk
#define TILE_ENTRY(NAME, A_T, B_T, A_DZ, B_DZ, COLSUM, EPI, N_FAST, SPLIT_K)                      \
    extern "C" __global__ void __launch_bounds__(v4::THREADS, 2)                                 \
        NAME(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,     \
             const float* __restrict__ bias, float2* __restrict__ stats, float* __restrict__ zlab,\
             float* __restrict__ colsum, const int* __restrict__ labels,                          \
             const float* __restrict__ shift, float scale, int M, int N, int K, int lda, int ldb, \
             int k_chunk) {                                                                       \
        v4_tiles<A_T, B_T, A_DZ, B_DZ, COLSUM, EPI, N_FAST, SPLIT_K>(                            \
            A, B, C, bias, stats, zlab, colsum, labels, shift, scale, M, N, K, lda, ldb, k_chunk);\
    }

// v4 (and the fused linear + cross-entropy): dW = scale X^T dZ and db; dX = scale dZ W^T
// (dX: few output tiles and K = c, so it is split over K and its units go column tile first)
TILE_ENTRY(fa2b_v4_gemm_tn_dz_db, true, false, false, true, true, T_STORE, false, false)
TILE_ENTRY(fa2b_v4_gemm_nt_dz, false, true, true, false, false, T_STORE, true, true)
// linear + cross-entropy: the logits of a chunk; dW += and db += over the chunks
TILE_ENTRY(lce_gemm_logits, false, false, false, false, false, T_LOGITS, false, false)
TILE_ENTRY(lce_gemm_tn_dz_acc_db, true, false, false, true, true, T_ACCUM, false, false)
// the unfused path's GEMMs read a stored dZ
TILE_ENTRY(lce_gemm_tn_db, true, false, false, false, true, T_STORE, false, false)
TILE_ENTRY(lce_gemm_nt, false, true, false, false, false, T_STORE, true, true)

// ---------------------------------------------------------------------------------------
// Linear + cross-entropy: lse and loss per row, the unfused path's dZ, the mean loss
// ---------------------------------------------------------------------------------------
// One warp per row (8 rows per 256-thread block): the row's ntiles (max, sum exp) partials
// merge into lse; its loss is lse - z[y] (zlab, from lce_gemm_logits's epilogue).
extern "C" __global__ void __launch_bounds__(256)
    lce_lse(const float2* __restrict__ stats, const float* __restrict__ zlab,
            float* __restrict__ lse_out, float* __restrict__ row_loss, int rows, int ntiles) {
    const int row = blockIdx.x * 8 + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;  // the whole warp
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

// The unfused path: dZ = (exp(z - lse) - [j == y]) * inv_n into its own buffer, one block per
// row, float4 body between a scalar head and tail (Z and dZ rows share their 16-byte phase).
extern "C" __global__ void __launch_bounds__(256)
    lce_grad(const float* __restrict__ Z, float* __restrict__ dZ, const float* __restrict__ lse,
             const int* __restrict__ y, int rows, int V, float inv_n) {
    const int64_t row = blockIdx.x;
    const float* z = Z + row * V;
    float* dz = dZ + row * V;
    const int label = y[row];
    const float l = lse[row];
    const int head = min((int)((4 - ((row * V) & 3)) & 3), V);
    const int n4 = (V - head) >> 2;
    const int tail = V - head - 4 * n4;
    const int t = threadIdx.x, T = blockDim.x, tail0 = head + 4 * n4;
    if (t < head) dz[t] = dz_of(z[t] - l, t == label, inv_n);
    if (t < tail) dz[tail0 + t] = dz_of(z[tail0 + t] - l, tail0 + t == label, inv_n);
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
                dz4[k] = make_float4(dz_of(v[u].x - l, j == label, inv_n), dz_of(v[u].y - l, j + 1 == label, inv_n),
                                     dz_of(v[u].z - l, j + 2 == label, inv_n), dz_of(v[u].w - l, j + 3 == label, inv_n));
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
