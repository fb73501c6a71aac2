// Day 28: multi-head self-attention forward in fp32, the layer of torch.nn.MultiheadAttention
// (batch_first=True, need_weights=False):
//
//     qkv = x @ W_qkv + b_qkv      x [B, T, C], W_qkv [C, 3C] ([in, out]), M = B*T rows
//     o   = softmax(q k^T / sqrt(d)) v   per batch and head, d = C / H (64 or 128)
//     y   = o @ W_o + b_o          W_o [C, C]
//
// Nothing here is a new GEMM or a new attention kernel: the GEMMs are day 8's block tile (day
// 25's in v5; common/cuda/sgemm.cuh, epilogues written below) and attention is day 26's FA-2
// forward (common/cuda/flash_attention.cuh), which reads Q, K, V and writes O through element
// strides. The day is about LAYOUT: where the projections put q, k and v, and how many kernels
// and bytes it takes to get them where attention reads them.
//
//   v1  three projection GEMMs (Q, K, V; bias epilogue) into [B, T, C] each, three permute
//       kernels to [B, H, T, d], attention on contiguous heads, a permute back to [B, T, C],
//       the output GEMM: 9 launches, 4 extra round trips of a [B, T, C] tensor
//   v2  ONE GEMM with the concatenated weight [C, 3C]; its rows ARE [B, T, 3, H, d], and
//       attention reads q, k, v there through strides (q_n = 3C, q_h = d) and writes O as
//       [B, T, H, d] = [B, T, C]: no permutes, 3 launches
//   v3  v2 + 1/sqrt(d) folded into the Q columns of the QKV epilogue (attention's scale = 1)
//   v4  v3 + the output GEMM split over K in S slices (blockIdx.z) adding their partial sums
//       with float4 atomics into y, which the QKV GEMM's epilogue has filled with b_o: more
//       blocks for a GEMM whose 128x128 tiles fill the GPU in 1.45 waves at B*T = 8192
//   v5  v4 with day 25's GEMM tile (sgemm::Fast: warp tiles, BK = 16, cp.async) in both GEMMs
//   mha_cand_fast_*: sweep candidates (.notes/day28_sweep.py), v3's shape on day 25's tile
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day28_multi_head_attention/kernel.cu
// Run: python run_day.py 28 [--bench]
#include "flash_attention.cuh"
#include "sgemm.cuh"

// the dynamic shared memory of day 26's tile (about 100 KB: launches opt in past 48 KB)
#define MHA_ATTN_SMEM(D) fl::smem_bytes<D>()

namespace sg = cuda100::sgemm;
namespace fl = cuda100::flash;

// ---- GEMM epilogues ----------------------------------------------------------------------
// Every N here (C, 3C) is a multiple of 4 (C = 64 * H) and every column block starts at a
// multiple of 4, so a thread's 4 columns are either all inside or all outside the matrix (n is 4);
// the scalar branch is kept for the general contract of gemm_tile.

__device__ __forceinline__ float4 load_bias(const float* bias, int col, int n) {
    if (n == 4) return *reinterpret_cast<const float4*>(bias + col);
    return make_float4(bias[col], n > 1 ? bias[col + 1] : 0.f, n > 2 ? bias[col + 2] : 0.f,
                       n > 3 ? bias[col + 3] : 0.f);
}

__device__ __forceinline__ void store(float* p, float4 v, int n) {
    if (n == 4) {
        *reinterpret_cast<float4*>(p) = v;
    } else {
        p[0] = v.x;
        if (n > 1) p[1] = v.y;
        if (n > 2) p[2] = v.z;
        if (n > 3) p[3] = v.w;
    }
}

__device__ __forceinline__ float4 axpb(float4 v, float s, float4 b) {  // (v + b) * s
    return make_float4((v.x + b.x) * s, (v.y + b.y) * s, (v.z + b.z) * s, (v.w + b.w) * s);
}

// Y[row, col..] = v + bias[col..]   (v1's projections, v1-v3's output GEMM, v2's QKV GEMM)
struct BiasStore {
    float* Y;
    int ldy;
    const float* bias;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        store(Y + (size_t)row * ldy + col, axpb(v, 1.f, load_bias(bias, col, n)), n);
    }
};

// v3: the Q third of the row (col < C) is also multiplied by q_scale = 1/sqrt(d), so the
// scores come out of attention's QK^T already scaled. C % 4 == 0: no float4 straddles C.
struct QkvScaledStore {
    float* QKV;
    const float* bias;
    int C;
    float q_scale;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        const float s = col < C ? q_scale : 1.f;
        store(QKV + (size_t)row * 3 * C + col, axpb(v, s, load_bias(bias, col, n)), n);
    }
};

// v4: v3's epilogue, and the blocks that own Q columns also write b_o into the same columns
// of y (Q's columns 0..C-1 and y's columns 0..C-1 are one range), so that the split-K output
// GEMM can add its partial sums onto it. One extra [M, C] write inside a compute-bound GEMM.
struct QkvScaledStoreInitY {
    float* QKV;
    const float* bias;
    float* Y;
    const float* bias_o;
    int C;
    float q_scale;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        const bool q = col < C;
        store(QKV + (size_t)row * 3 * C + col, axpb(v, q ? q_scale : 1.f, load_bias(bias, col, n)),
              n);
        if (q) store(Y + (size_t)row * C + col, load_bias(bias_o, col, n), n);
    }
};

// v4's output GEMM: y[row, col..] += v, one 16-byte atomic add (sm_90: float4 atomics on global
// memory) per thread and 4 columns. Only the float4 form: y's width C is a multiple of 4, so n is
// always 4 here (and a scalar fallback costs day 25's tile registers: it spills with one).
struct AtomicAdd4 {
    float* Y;
    int ldy;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int) const {
        atomicAdd(reinterpret_cast<float4*>(Y + (size_t)row * ldy + col), v);
    }
};

// Every GEMM below takes the 16-byte path (VEC = true): it needs lda, ldb, K and N % 4 == 0 and
// 16-byte aligned A and B. lda, ldb, N are C or 3C (C = 64 * H), K is C or a slice of it that is a
// multiple of 8, and every pointer is a buffer start or moved by a multiple of 4 floats (W_qkv + C,
// k0 = a multiple of 8). Both tiles are 128 x 128 with 256 threads: grid (ceil(N / 128),
// ceil(M / 128)). FAST = false: day 8's v7 (sgemm::gemm_tile); true: day 25's fastest
// configuration (sgemm::Fast: warp tiles, BK = 16, cp.async double buffering; v5).
template <bool FAST, class Epilogue>
__device__ __forceinline__ void gemm(const float* __restrict__ A, int lda,
                                     const float* __restrict__ B, int ldb, int M, int N, int K,
                                     const Epilogue& epi) {
    if constexpr (FAST) {
        static_assert(sg::Fast::THREADS == sg::THREADS && sg::Fast::BM == sg::BM &&
                          sg::Fast::BN == sg::BN, "the driver launches both tiles alike");
        sg::gemm_tile_cfg<sg::Fast, true>(A, lda, B, ldb, M, N, K, blockIdx.y * sg::BM,
                                          blockIdx.x * sg::BN, epi);
    } else {
        sg::gemm_tile<true>(A, lda, B, ldb, M, N, K, blockIdx.y * sg::BM, blockIdx.x * sg::BN, epi);
    }
}

#define GEMM_KERNEL extern "C" __global__ void __launch_bounds__(sg::THREADS, 2)

// ---- v1: one projection at a time, permutes around attention -------------------------------

// Y[M, N] = X[M, K] @ W[:, 0:N] + bias (W's rows are ldw floats apart: v1 reads the Q, K or V
// third of W_qkv by moving the pointer C or 2C columns and keeping ldw = 3C)
GEMM_KERNEL mha_v1_linear(const float* __restrict__ X, const float* __restrict__ W, int ldw,
                          const float* __restrict__ bias, float* __restrict__ Y, int M, int N,
                          int K) {
    gemm<false>(X, K, W, ldw, M, N, K, BiasStore{Y, N, bias});
}

// [B, T, H, D] -> [B, H, T, D], one float4 a thread (D % 4 == 0); thread i writes dst's i-th
// float4, so the writes are contiguous and each group of D/4 threads reads D contiguous floats
extern "C" __global__ void mha_v1_split_heads(const float* __restrict__ src, float* __restrict__ dst,
                                              int B, int T, int H, int D) {
    const int D4 = D / 4;
    const long long total = (long long)B * H * T * D4;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int d4 = (int)(i % D4);
        long long r = i / D4;
        const int t = (int)(r % T);
        r /= T;
        const int h = (int)(r % H);
        const long long b = r / H;
        const float4 v = *reinterpret_cast<const float4*>(src + ((b * T + t) * H + h) * D + 4 * d4);
        *reinterpret_cast<float4*>(dst + 4 * i) = v;
    }
}

// [B, H, T, D] -> [B, T, H, D]: the inverse (thread i writes dst's i-th float4)
extern "C" __global__ void mha_v1_merge_heads(const float* __restrict__ src, float* __restrict__ dst,
                                              int B, int T, int H, int D) {
    const int D4 = D / 4;
    const long long total = (long long)B * H * T * D4;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < total;
         i += (long long)gridDim.x * blockDim.x) {
        const int d4 = (int)(i % D4);
        long long r = i / D4;
        const int h = (int)(r % H);
        r /= H;
        const int t = (int)(r % T);
        const long long b = r / T;
        const float4 v = *reinterpret_cast<const float4*>(src + ((b * H + h) * T + t) * D + 4 * d4);
        *reinterpret_cast<float4*>(dst + 4 * i) = v;
    }
}

// ---- v2: one QKV GEMM, attention through strides, the output GEMM --------------------------

// QKV[M, 3C] = X @ W_qkv + b_qkv: row m = (b, t) holds [q | k | v] = [3, H, d]
GEMM_KERNEL mha_v2_qkv(const float* __restrict__ X, const float* __restrict__ W,
                       const float* __restrict__ bias, float* __restrict__ QKV, int M, int C) {
    gemm<false>(X, C, W, 3 * C, M, 3 * C, C, BiasStore{QKV, 3 * C, bias});
}

// Y[M, C] = O @ W_o + b_o (v2 and v3; v1 runs the same tile through mha_v1_linear)
GEMM_KERNEL mha_v2_out(const float* __restrict__ O, const float* __restrict__ W,
                       const float* __restrict__ bias, float* __restrict__ Y, int M, int C) {
    gemm<false>(O, C, W, C, M, C, C, BiasStore{Y, C, bias});
}

// ---- v3: the softmax scale folded into Q ----------------------------------------------------

GEMM_KERNEL mha_v3_qkv(const float* __restrict__ X, const float* __restrict__ W,
                       const float* __restrict__ bias, float* __restrict__ QKV, int M, int C,
                       float q_scale) {
    gemm<false>(X, C, W, 3 * C, M, 3 * C, C, QkvScaledStore{QKV, bias, C, q_scale});
}

// ---- v4: y pre-filled with b_o by the QKV GEMM, split-K output GEMM -------------------------
// ---- v5: the same with day 25's tile -------------------------------------------------------

template <bool FAST>
__device__ __forceinline__ void qkv_init_y(const float* X, const float* W, const float* bias,
                                           float* QKV, const float* bias_o, float* Y, int M,
                                           int C, float q_scale) {
    gemm<FAST>(X, C, W, 3 * C, M, 3 * C, C, QkvScaledStoreInitY{QKV, bias, Y, bias_o, C, q_scale});
}

// y += O[:, k0:k0+len] @ W_o[k0:k0+len, :] for slice z = blockIdx.z, k0 = z * kchunk
// (kchunk a multiple of 8; the last slice may be shorter; the driver launches no empty slice)
template <bool FAST>
__device__ __forceinline__ void out_split_k(const float* O, const float* W, float* Y, int M, int C,
                                            int kchunk) {
    const int k0 = blockIdx.z * kchunk;
    const int len = max(0, min(kchunk, C - k0));
    gemm<FAST>(O + k0, C, W + (size_t)k0 * C, C, M, C, len, AtomicAdd4{Y, C});
}

GEMM_KERNEL mha_v4_qkv(const float* __restrict__ X, const float* __restrict__ W,
                       const float* __restrict__ bias, float* __restrict__ QKV,
                       const float* __restrict__ bias_o, float* __restrict__ Y, int M, int C,
                       float q_scale) {
    qkv_init_y<false>(X, W, bias, QKV, bias_o, Y, M, C, q_scale);
}

GEMM_KERNEL mha_v4_out(const float* __restrict__ O, const float* __restrict__ W,
                       float* __restrict__ Y, int M, int C, int kchunk) {
    out_split_k<false>(O, W, Y, M, C, kchunk);
}

GEMM_KERNEL mha_v5_qkv(const float* __restrict__ X, const float* __restrict__ W,
                       const float* __restrict__ bias, float* __restrict__ QKV,
                       const float* __restrict__ bias_o, float* __restrict__ Y, int M, int C,
                       float q_scale) {
    qkv_init_y<true>(X, W, bias, QKV, bias_o, Y, M, C, q_scale);
}

GEMM_KERNEL mha_v5_out(const float* __restrict__ O, const float* __restrict__ W,
                       float* __restrict__ Y, int M, int C, int kchunk) {
    out_split_k<true>(O, W, Y, M, C, kchunk);
}

// ---- sweep candidates (.notes/day28_sweep.py): v3's shape with day 25's tile ---------------
// No split, no atomics: v3's epilogues on sgemm::Fast. Same signatures as mha_v3_qkv and
// mha_v2_out; the sweep times them against v4/v5 (is the split worth its atomics?).

GEMM_KERNEL mha_cand_fast_qkv(const float* __restrict__ X, const float* __restrict__ W,
                              const float* __restrict__ bias, float* __restrict__ QKV, int M,
                              int C, float q_scale) {
    gemm<true>(X, C, W, 3 * C, M, 3 * C, C, QkvScaledStore{QKV, bias, C, q_scale});
}

GEMM_KERNEL mha_cand_fast_out(const float* __restrict__ O, const float* __restrict__ W,
                              const float* __restrict__ bias, float* __restrict__ Y, int M, int C) {
    gemm<true>(O, C, W, C, M, C, C, BiasStore{Y, C, bias});
}

// ---- attention: day 26's FlashAttention-2 forward, one kernel for every version ------------
// Grid (ceil(N / BLOCK_M), H, B). v1 passes contiguous [B, H, T, d] strides, v2-v5 the strides
// of the QKV buffer ([B, T, 3, H, d]) and of O ([B, T, H, d]). The names end in every version
// that launches them (run_day.py --ncu --version vN picks kernels by `_vN`).

// Launch bounds: Tile<D>::THREADS, and 2 blocks an SM, which is what the tile's ~100 KB of
// shared memory allows anyway (2 x 128 threads x 255 registers fit the 64K register file).
// With the thread count alone ptxas picks 168 registers for d64 causal and spills 24 bytes;
// told 2 blocks it takes 224 and spills nothing.
#define ATTN_MIN_BLOCKS(D) (fl::Tile<D>::THREADS <= 128 ? 2 : 1)
#define MHA_ATTN(D, CAUSAL, NAME)                                                              \
    extern "C" __global__ void __launch_bounds__(fl::Tile<D>::THREADS, ATTN_MIN_BLOCKS(D))    \
        NAME(const float* __restrict__ q, const float* __restrict__ k,                         \
             const float* __restrict__ v, float* __restrict__ o, int B, int H, int N,          \
             long long q_b, long long q_h, long long q_n, long long k_b, long long k_h,        \
             long long k_n, long long v_b, long long v_h, long long v_n, long long o_b,        \
             long long o_h, long long o_n, float scale) {                                      \
        fl::Args a;                                                                            \
        a.q = q, a.k = k, a.v = v, a.o = o;                                                    \
        a.lse = nullptr; /* a layer's forward keeps no logsumexp (a backward would) */         \
        a.B = B, a.H = H, a.N = N;                                                             \
        a.q_b = q_b, a.q_h = q_h, a.q_n = q_n;                                                 \
        a.k_b = k_b, a.k_h = k_h, a.k_n = k_n;                                                 \
        a.v_b = v_b, a.v_h = v_h, a.v_n = v_n;                                                 \
        a.o_b = o_b, a.o_h = o_h, a.o_n = o_n;                                                 \
        a.scale = scale;                                                                       \
        fl::forward<D, CAUSAL>(a);                                                             \
    }

MHA_ATTN(64, false, mha_attn_d64_full_v1_v2_v3_v4_v5)
MHA_ATTN(64, true, mha_attn_d64_causal_v1_v2_v3_v4_v5)
MHA_ATTN(128, false, mha_attn_d128_full_v1_v2_v3_v4_v5)
MHA_ATTN(128, true, mha_attn_d128_causal_v1_v2_v3_v4_v5)

// The attention tile, read by the driver (module.get_global) so the grid and the dynamic shared
// memory follow whatever day 26's header chooses: {BLOCK_M, THREADS, dynamic smem bytes} for
// d = 64, then for d = 128.
extern "C" __device__ int mha_attn_config[6] = {
    fl::Tile<64>::BLOCK_M,  fl::Tile<64>::THREADS,  MHA_ATTN_SMEM(64),
    fl::Tile<128>::BLOCK_M, fl::Tile<128>::THREADS, MHA_ATTN_SMEM(128)};
