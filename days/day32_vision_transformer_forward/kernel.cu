// Day 32: a Vision Transformer (ViT) forward in fp32, image to logits, on kernels the earlier
// days taught (pre-LN blocks, as ViT/DeiT are built):
//
//   images [B, 3, S, S] -> patches [B*NP, 3PP]      NP = (S/P)^2 patches of P x P pixels
//   x = [cls ; patches @ patch_w + patch_b] + pos   x [B, T, C], T = NP + 1 (the class token)
//   L times:
//     qkv = LN1(x) @ qkv_w + qkv_b                  [B*T, 3C] = [B, T, 3, H, D]
//     x  += attention(qkv) @ proj_w + proj_b        softmax(q k^T / sqrt(D)) v, per head
//     x  += gelu(LN2(x) @ fc1_w + fc1_b) @ fc2_w + fc2_b
//   logits = LN(x[:, 0]) @ head_w + head_b          the class token of each image
//
// Weights are [in, out] (a GEMM's B operand); per-block weights are stacked [L, ...] and the
// driver moves the pointers by one layer. GELU is the tanh form; LayerNorm eps is an argument.
//
// Build alone: nvcc -arch=sm_90 -O3 -std=c++17 -I common/cuda -cubin -Xptxas -v \
//                   days/day32_vision_transformer_forward/kernel.cu
// Run:         python run_day.py 32 [--bench]
//
// Nothing big is new here: the GEMMs are day 8's block tile (common/cuda/sgemm.cuh) with
// epilogues as on day 30, attention is day 26's FlashAttention-2 forward reading q, k and v
// straight out of the fused QKV buffer through strides as on day 28, LayerNorm is day 9's
// warp-per-row statistics (common/cuda/layernorm.cuh). What is new is the image end (patchify:
// pixels to GEMM rows, the class token, the position embeddings) and the shapes: T = 197 at
// 224/16 is a multiple of no tile, and C = 192 is 1.5 GEMM tiles of 128.
//
//   v1  unfused: every op its own kernel. Patchify one element a thread, the embedding GEMM,
//       an "assemble" kernel (bias, class token, positions); per block LayerNorm, GEMM, bias,
//       attention, GEMM, bias, residual, LayerNorm, GEMM, bias, GELU, GEMM, bias, residual
//       (14 launches); the final LayerNorm on the class rows, the head GEMM, its bias.
//   v2  fused epilogues: patchify moves 16 bytes a thread and writes the class rows
//       (cls + pos[0]) itself; the embedding GEMM's epilogue adds the bias and the position
//       and stores row (b, p) as token 1 + p of image b; the QKV epilogue adds the bias and
//       folds 1/sqrt(D) into q; the projection and fc2 epilogues add bias and residual into x
//       in place; fc1's adds bias and GELU (7 launches a block).
//   v3  v2 with the GEMM tile fitted to each GEMM's shape: besides day 8's 128 x 128 tile
//       (256 threads), day 25's configurable tile (sgemm::Config, register-staged like day 8)
//       at 128 x 64 (128 threads) and 64 x 64 (64 threads). N = C = 192 is 1.5 tiles of 128
//       (a quarter of the 128-wide tile's columns are padding) and at B*T = 12608 rows its
//       99 x 2 = 198 blocks are one partial wave on 132 SMs; 64-wide tiles have no padding and
//       spread the same work over more, smaller blocks. The driver picks the tile per GEMM
//       from N (driver.tile_for: NARROW_TILE where N % 128 != 0 but N % 64 == 0, WIDE_TILE
//       where N % 128 == 0; .notes/day32_sweep.py times all three on every GEMM).
//
// Entry points: *_vec take 16-byte loads (the GEMM's K and N and its A and B rows multiples of
// 4 floats), *_scalar any shape. C = H * D with D in {32, 64, 128}, so C % 32 == 0 always: the
// [B*T, C] and [B*T, 3C] buffers are float4 throughout; the MLP width, the patch length 3PP and
// the class count may be anything.
#include <type_traits>

#include "elementwise.cuh"
#include "flash_attention.cuh"
#include "layernorm.cuh"
#include "sgemm.cuh"
#include "vec.cuh"

using namespace cuda100;
namespace sg = cuda100::sgemm;
namespace fl = cuda100::flash;

constexpr int CHANNELS = 3;

__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// =========================================================================================
// Patchify: image pixels to GEMM rows. Patch p = py * G + px of image b (G = S / P) is row
// b * NP + p of patches [B*NP, KP], KP = 3 P P, listing pixel (c, i, j) of the patch at
// column (c * P + i) * P + j: images[b, c, py*P + i, px*P + j].
// =========================================================================================

// v1: one element a thread, 4-byte loads (consecutive threads: consecutive columns of a patch
// row, so the stores are coalesced; the loads walk P pixels of an image row, then jump a row).
extern "C" __global__ void vit_patchify_v1(const float* __restrict__ img, float* __restrict__ patches,
                                           int S, int P, long long total) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total) return;
    const int G = S / P, NP = G * G, KP = CHANNELS * P * P;
    const int k = (int)(e % KP);
    const long long m = e / KP;
    const int p = (int)(m % NP);
    const long long b = m / NP;
    const int c = k / (P * P), r = k % (P * P), i = r / P, j = r % P;
    const int py = p / G, px = p % G;
    patches[e] = img[((b * CHANNELS + c) * S + py * P + i) * (long long)S + px * P + j];
}

// v1: x[b, t] = (t == 0 ? cls : emb[b, t-1] + patch_b) + pos[t], a float4 a thread (C % 4 == 0)
extern "C" __global__ void vit_assemble_v1(const float* __restrict__ emb, const float* __restrict__ patch_b,
                                           const float* __restrict__ cls, const float* __restrict__ pos,
                                           float* __restrict__ x, int T, int C, long long total4) {
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= total4) return;
    const long long idx = 4 * e;
    const int c = (int)(idx % C);
    const long long row = idx / C;
    const int t = (int)(row % T);
    const long long b = row / T;
    float4 v;
    if (t == 0) {
        v = load4(cls + c);
    } else {
        v = add4(load4(emb + (b * (T - 1) + t - 1) * C + c), load4(patch_b + c));
    }
    store4(x + idx, add4(v, load4(pos + (long long)t * C + c)));
}

// v2, v3: VEC (P % 4 == 0) moves 4 pixels a thread: j .. j+3 lie in one patch row (j % 4 == 0
// because k % 4 == 0 and P % 4 == 0) and start 16-byte aligned in the image (S, px*P, j are
// multiples of 4). The threads past the patches write the class rows x[b, 0] = cls + pos[0],
// a float4 each: the embedding GEMM then writes every other row of x.
template <bool VEC>
__device__ __forceinline__ void patchify_cls(const float* __restrict__ img, const float* __restrict__ cls,
                                             const float* __restrict__ pos, float* __restrict__ patches,
                                             float* __restrict__ x, int B, int S, int P, int C) {
    constexpr int W = VEC ? 4 : 1;
    const int G = S / P, NP = G * G, KP = CHANNELS * P * P, T = NP + 1;
    const long long units = (long long)B * NP * KP / W;     // VEC: KP % 4 == 0
    const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (e < units) {
        const long long idx = e * W;
        const int k = (int)(idx % KP);
        const long long m = idx / KP;
        const int p = (int)(m % NP);
        const long long b = m / NP;
        const int c = k / (P * P), r = k % (P * P), i = r / P, j = r % P;
        const int py = p / G, px = p % G;
        const float* src = img + ((b * CHANNELS + c) * S + py * P + i) * (long long)S + px * P + j;
        if (VEC) {
            store4(patches + idx, load4(src));
        } else {
            patches[idx] = *src;
        }
    } else if (e < units + (long long)B * C / 4) {
        const long long q = 4 * (e - units);
        const long long b = q / C;
        const int c = (int)(q % C);
        store4(x + b * T * C + c, add4(load4(cls + c), load4(pos + c)));
    }
}

extern "C" __global__ void vit_patchify_v2_v3_vec(const float* __restrict__ img, const float* __restrict__ cls,
                                                  const float* __restrict__ pos, float* __restrict__ patches,
                                                  float* __restrict__ x, int B, int S, int P, int C) {
    patchify_cls<true>(img, cls, pos, patches, x, B, S, P, C);
}
extern "C" __global__ void vit_patchify_v2_v3_scalar(const float* __restrict__ img, const float* __restrict__ cls,
                                                     const float* __restrict__ pos, float* __restrict__ patches,
                                                     float* __restrict__ x, int B, int S, int P, int C) {
    patchify_cls<false>(img, cls, pos, patches, x, B, S, P, C);
}

// =========================================================================================
// LayerNorm: one warp a row, 8 rows a 256-thread block (day 9's corrected two-pass statistics,
// layernorm.cuh). Row r of x starts at x + r * ldx (ldx = C for every token, T * C for the
// class tokens only); out is [rows, C] contiguous. _iN holds a row in N float4 a lane
// (C <= 128 N; C % 4 == 0 always here), _loop any C.
// =========================================================================================
constexpr int LN_ROWS = 8;

template <int ITEMS>
__device__ __forceinline__ void ln_rows(const float* __restrict__ x, long long ldx,
                                        const float* __restrict__ w, const float* __restrict__ b,
                                        float* __restrict__ out, int rows, int C, float eps) {
    const int row = blockIdx.x * LN_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= rows) return;  // a whole warp leaves: the shuffles see full warps only
    const float* xr = x + row * ldx;
    float* orow = out + (long long)row * C;
    if constexpr (ITEMS > 0) {
        float4 v[ITEMS];
        const float4 s = ln::warp_row_stats_regs<ITEMS>(xr, C, eps, v);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int c = (lane + 32 * i) * 4;
            if (c >= C) continue;
            const float4 wv = load4(w + c), bv = load4(b + c);
            store4(orow + c, make_float4(ln::normalize(v[i].x, s, wv.x, bv.x),
                                         ln::normalize(v[i].y, s, wv.y, bv.y),
                                         ln::normalize(v[i].z, s, wv.z, bv.z),
                                         ln::normalize(v[i].w, s, wv.w, bv.w)));
        }
    } else {
        const float4 s = ln::warp_row_stats_loop(xr, C, eps);
        for (int c = lane; c < C; c += 32) orow[c] = ln::normalize(xr[c], s, w[c], b[c]);
    }
}

#define LN_ENTRY(ITEMS, SUFFIX)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) vit_layernorm_##SUFFIX##_v1_v2_v3(        \
        const float* __restrict__ x, long long ldx, const float* __restrict__ w,               \
        const float* __restrict__ b, float* __restrict__ out, int rows, int C, float eps) {    \
        ln_rows<ITEMS>(x, ldx, w, b, out, rows, C, eps);                                       \
    }
LN_ENTRY(1, i1)
LN_ENTRY(2, i2)
LN_ENTRY(3, i3)
LN_ENTRY(4, i4)
LN_ENTRY(6, i6)
LN_ENTRY(8, i8)
LN_ENTRY(12, i12)
LN_ENTRY(16, i16)
LN_ENTRY(0, loop)

// =========================================================================================
// GEMMs: out = epilogue(A @ B), A [M, K] (lda = K), B [K, N] (ldb = N), out rows N floats.
// One Epi<MODE> gets 1-4 finished columns of one row at a time (col % 4 == 0):
//   STORE      out[row, col] = v                                   (v1, every GEMM)
//   BIAS       out = v + bias                                      (the head)
//   BIAS_GELU  out = gelu(v + bias)                                (fc1)
//   BIAS_RES   out = out + v + bias, in place on the residual x    (projection, fc2)
//   QKV        out = (v + bias) * (col < p0 ? f : 1)               (p0 = C, f = 1/sqrt(D))
//   EMBED      row (b, p) = b * p0 + p (p0 = NP) is stored as token 1 + p of image b:
//              x[b*(NP+1) + 1 + p, col] = v + bias + add[(1 + p) * N + col] (add = pos)
// =========================================================================================
enum { E_STORE, E_BIAS, E_BIAS_GELU, E_BIAS_RES, E_QKV, E_EMBED };

template <int MODE, bool VEC>
struct Epi {
    float* out;            // not __restrict__: BIAS_RES reads and writes it
    const float* bias;
    const float* add;
    int ld;
    int p0;
    float f;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        size_t r = row;
        if (MODE == E_EMBED) {
            const int b = row / p0, p = row - b * p0;
            r = (size_t)b * (p0 + 1) + 1 + p;
            v = add4(v, load_n<VEC>(add + (size_t)(1 + p) * ld + col, n));
        }
        float* o = out + r * ld + col;
        if (MODE != E_STORE) v = add4(v, load_n<VEC>(bias + col, n));
        if (MODE == E_QKV) {   // C % 4 == 0: a float4 never straddles q and k
            const float s = col < p0 ? f : 1.f;
            v.x *= s, v.y *= s, v.z *= s, v.w *= s;
        }
        if (MODE == E_BIAS_GELU) v = make_float4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w));
        if (MODE == E_BIAS_RES) v = add4(v, load_n<VEC>(o, n));
        store_n<VEC>(o, v, n);
    }
};

// The tiles. T128: day 8's v7 (sg::gemm_tile, 256 threads, 8x8 outputs a thread). T128x64 and
// T64: day 25's configurable tile with day 8's register staging (BK = 8, two buffers, A stored
// transposed), warps of 32 x 64 outputs, 8x8 a lane: 128 and 64 threads.
using T128x64 = sg::Config<128, 64, 8, 4, 2, false>;
using T64 = sg::Config<64, 64, 8, 4, 2, false>;
static_assert(sg::BM == 128 && sg::BN == 128 && sg::THREADS == 256, "driver.TILES: day 8's tile");
static_assert(T128x64::THREADS == 128 && T64::THREADS == 64, "driver.TILES: threads per tile");

template <int TILE, bool VEC, class E>
__device__ __forceinline__ void gemm(const float* __restrict__ A, const float* __restrict__ B, int M,
                                     int N, int K, const E& epi) {
    if constexpr (TILE == 0) {
        sg::gemm_tile<VEC>(A, K, B, N, M, N, K, blockIdx.y * sg::BM, blockIdx.x * sg::BN, epi);
    } else {
        using C = typename std::conditional<TILE == 1, T128x64, T64>::type;
        sg::gemm_tile_cfg<C, VEC>(A, K, B, N, M, N, K, blockIdx.y * C::BM, blockIdx.x * C::BN, epi);
    }
}

// launch bounds: the tile's threads, and 512 threads' worth of blocks an SM, so the tile gets
// up to 128 registers a thread; except the 64 x 64 tile, whose QKV and GELU epilogues spill at
// 128 (and still at a bound of 7 blocks): a bound of 6 blocks lets ptxas take 138-140, which
// still fits 7 blocks (448 threads) an SM (140 x 32 rounds to 4608 registers a warp; 65536 /
// 4608 = 14 warps)
#define TILE_THREADS(TILE) ((TILE) == 0 ? 256 : (TILE) == 1 ? 128 : 64)
#define TILE_MIN_BLOCKS(TILE) ((TILE) == 0 ? 2 : (TILE) == 1 ? 4 : 6)
#define VIT_GEMM(NAME, TILE, MODE, VEC)                                                          \
    extern "C" __global__ void __launch_bounds__(TILE_THREADS(TILE), TILE_MIN_BLOCKS(TILE))      \
        NAME(const float* __restrict__ A, const float* __restrict__ B, const float* bias,        \
             const float* add, float* out, int M, int N, int K, int p0, float f) {               \
        gemm<TILE, VEC>(A, B, M, N, K, Epi<MODE, VEC>{out, bias, add, N, p0, f});                \
    }

// v1: plain stores, day 8's tile
VIT_GEMM(vit_gemm_v1_vec, 0, E_STORE, true)
VIT_GEMM(vit_gemm_v1_scalar, 0, E_STORE, false)
// v2 (and v3 where day 8's tile is chosen): fused epilogues on day 8's tile
VIT_GEMM(vit_embed_t128_v2_v3_vec, 0, E_EMBED, true)
VIT_GEMM(vit_embed_t128_v2_v3_scalar, 0, E_EMBED, false)
VIT_GEMM(vit_qkv_t128_v2_v3_vec, 0, E_QKV, true)           // N = 3C, K = C: always vec
VIT_GEMM(vit_res_t128_v2_v3_vec, 0, E_BIAS_RES, true)
VIT_GEMM(vit_res_t128_v2_v3_scalar, 0, E_BIAS_RES, false)  // fc2 with M % 4 != 0
VIT_GEMM(vit_gelu_t128_v2_v3_vec, 0, E_BIAS_GELU, true)
VIT_GEMM(vit_gelu_t128_v2_v3_scalar, 0, E_BIAS_GELU, false)
VIT_GEMM(vit_bias_t128_v2_v3_vec, 0, E_BIAS, true)         // the head
VIT_GEMM(vit_bias_t128_v2_v3_scalar, 0, E_BIAS, false)
// v3: the 64-wide tiles (16-byte shapes only; the driver keeps day 8's tile for the others)
VIT_GEMM(vit_embed_t128x64_v3_vec, 1, E_EMBED, true)
VIT_GEMM(vit_qkv_t128x64_v3_vec, 1, E_QKV, true)
VIT_GEMM(vit_res_t128x64_v3_vec, 1, E_BIAS_RES, true)
VIT_GEMM(vit_gelu_t128x64_v3_vec, 1, E_BIAS_GELU, true)
VIT_GEMM(vit_embed_t64_v3_vec, 2, E_EMBED, true)
VIT_GEMM(vit_qkv_t64_v3_vec, 2, E_QKV, true)
VIT_GEMM(vit_res_t64_v3_vec, 2, E_BIAS_RES, true)
VIT_GEMM(vit_gelu_t64_v3_vec, 2, E_BIAS_GELU, true)

// =========================================================================================
// v1's elementwise kernels (flat; float4 where the row length allows)
// =========================================================================================

// bodies: common/cuda/elementwise.cuh
extern "C" __global__ void vit_bias_v1_vec(float* y, const float* bias, long long n, int N) {
    add_bias_rows<true>(y, bias, n, N);
}
extern "C" __global__ void vit_bias_v1_scalar(float* y, const float* bias, long long n, int N) {
    add_bias_rows<false>(y, bias, n, N);
}
// h = gelu(h)
extern "C" __global__ void vit_gelu_v1(float* __restrict__ h, long long n) { gelu_in_place(h, n); }
// x += y
extern "C" __global__ void vit_residual_v1(float* __restrict__ x, const float* __restrict__ y,
                                           long long n) {
    add_in_place(x, y, n);
}

// =========================================================================================
// Attention: day 26's FlashAttention-2 forward (flash_attention.cuh), reading q, k and v in
// the QKV GEMM's output rows [B, T, 3, H, D] through strides and writing o as [B, T, H, D] =
// [B*T, C] (day 28's v2 layout): grid (ceil(T / BLOCK_M), H, B), no mask.
// =========================================================================================
#define ATTN_PARAMS                                                                             \
    const float* __restrict__ q, const float* __restrict__ k, const float* __restrict__ v,     \
        float* __restrict__ o, int B, int H, int N, long long q_b, long long q_h, long long q_n, \
        long long k_b, long long k_h, long long k_n, long long v_b, long long v_h,             \
        long long v_n, long long o_b, long long o_h, long long o_n, float scale
#define ATTN_ARGS                                                                               \
    fl::Args a;                                                                                 \
    a.q = q, a.k = k, a.v = v, a.o = o;                                                         \
    a.lse = nullptr; /* inference keeps no logsumexp */                                         \
    a.B = B, a.H = H, a.N = N;                                                                  \
    a.q_b = q_b, a.q_h = q_h, a.q_n = q_n, a.k_b = k_b, a.k_h = k_h, a.k_n = k_n;               \
    a.v_b = v_b, a.v_h = v_h, a.v_n = v_n, a.o_b = o_b, a.o_h = o_h, a.o_n = o_n;               \
    a.scale = scale;

// the header's tile for head dim D (Tile<D>); 2 blocks an SM at 128 threads (day 28's bound)
#define ATTN_MIN_BLOCKS(D) (fl::Tile<D>::THREADS <= 128 ? 2 : 1)
#define VIT_ATTN(D)                                                                             \
    extern "C" __global__ void __launch_bounds__(fl::Tile<D>::THREADS, ATTN_MIN_BLOCKS(D))      \
        vit_attn_d##D##_v1_v2_v3(ATTN_PARAMS) {                                                 \
        ATTN_ARGS                                                                               \
        fl::forward<D, false>(a);                                                               \
    }
VIT_ATTN(32)
VIT_ATTN(64)
VIT_ATTN(128)

// sweep candidates (.notes/day32_sweep.py) for D = 64 at ragged T: narrower key tiles (T = 197
// is 4 tiles of 64 keys, 256 computed, or 7 of 32, 224) or query tiles (4 x 64 or 7 x 32 rows)
#define VIT_ATTN_CAND(NAME, D, BM, BN, TM, TN)                                                  \
    extern "C" __global__ void __launch_bounds__(                                               \
        (fl::detail::Config<D, BM, BN, TM, TN, true>::THREADS),                                 \
        (fl::detail::Config<D, BM, BN, TM, TN, true>::MIN_BLOCKS)) NAME(ATTN_PARAMS) {          \
        ATTN_ARGS                                                                               \
        fl::detail::forward_tile<D, BM, BN, TM, TN, true, true, false>(                         \
            a, reinterpret_cast<float*>(fl::flash_dynamic_smem));                               \
    }
VIT_ATTN_CAND(vit_attn_cand_d64_bm64_bn32, 64, 64, 32, 4, 4)
VIT_ATTN_CAND(vit_attn_cand_d64_bm32_bn64, 64, 32, 64, 2, 8)
VIT_ATTN_CAND(vit_attn_cand_d64_bm32_bn32, 64, 32, 32, 2, 4)

// {BLOCK_M, THREADS, dynamic shared memory bytes} of each attention kernel, in the order of
// driver.ATTN_KERNELS: the driver reads them (module.get_global) so grids and shared memory
// follow whatever the header's owner tunes Tile<D> to.
#define CFG3(D, BM, BN, TM, TN)                                                                 \
    BM, fl::detail::Config<D, BM, BN, TM, TN, true>::THREADS,                                   \
        fl::detail::Config<D, BM, BN, TM, TN, true>::SMEM_FLOATS * 4
#define TILE3(D) fl::Tile<D>::BLOCK_M, fl::Tile<D>::THREADS, fl::smem_bytes<D>()
extern "C" __device__ int vit_attn_config[18] = {
    TILE3(32), TILE3(64), TILE3(128),
    CFG3(64, 64, 32, 4, 4), CFG3(64, 32, 64, 2, 8), CFG3(64, 32, 32, 2, 4)};
