// Day 30: the GPT-2 MLP sub-block forward in fp32, as llm.c runs it (one transformer block's
// second half):
//
//   y = x + fc2(gelu(fc1(layernorm(x))))        x, y [BT, C]
//
//   ln   = LayerNorm(x) * ln_w + ln_b           eps = 1e-5, over each row of C
//   h    = gelu(ln @ W1 + b1)                   W1 [C, 4C] (stored [in, out]), h [BT, 4C]
//   y    = x + h @ W2 + b2                      W2 [4C, C]
//   gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))   (GPT-2's tanh approximation)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 30
//
// The two GEMMs are 2 * BT * C * 4C * 2 FLOPs, ~99% of the arithmetic; they come from
// common/cuda/sgemm.cuh (day 8's 128x128 register-blocked tile, tuned on day 25), whose
// Epilogue hook hands each thread's finished outputs to the caller. The rest of the op is
// memory traffic, and that is what the versions remove:
//
//   v1  unfused, seven kernels: layernorm, GEMM, bias, GELU, GEMM, bias, residual. h [BT, 4C]
//       is written by the GEMM, then read and written again by the bias kernel and again by
//       GELU: three round trips of the largest tensor.
//   v2  fused epilogues, three kernels: layernorm; GEMM + bias + GELU (h written once, final);
//       GEMM + bias + residual (x read in the epilogue, y written once).
//   v3  v2 with fc2 split over K: fc2 has only cdiv(BT,128) * cdiv(C,128) tiles (384 at
//       8192x768, 1.45 waves of 264 resident blocks: the second wave runs half empty). The
//       slice blockIdx.z sums its share of K and adds it into y with a 16-byte
//       atomicAdd (red.global.add.v4.f32, sm_90). y starts as x + b2, written by the layernorm
//       kernel, which reads x anyway. The slice length is an argument: the driver picks the
//       split from the wave arithmetic. Sums in y arrive in any order: not bitwise
//       reproducible run to run.
//   v4  v3 with the layernorm fused into fc1's A-tile load: a stats kernel writes {m0, md, rstd}
//       per row (16 bytes, and y = x + b2) instead of the normalized [BT, C] matrix, and fc1
//       normalizes each float4 of x as it moves it from global memory to shared memory. One
//       write and one read of a [BT, C] matrix gone. Needs C % 4 == 0 (the driver runs v3
//       otherwise); its GEMM main loop is this file's own copy of the tile (sgemm.cuh's loads
//       are not a hook), the same 128x128x8 shape with 8x8 outputs a thread.
//   v5  v3 on day 25's faster tile, sgemm::Fast (cp.async straight to shared memory, two
//       stages, BK = 16, warptiling): same epilogues, only the GEMM main loop changes.
//   v3-v5 with a split of 1 (the driver's choice where more slices do not fill the waves
//       better: 5000x768, 4096x1024) run fc2 unsplit with v2's fused bias + residual epilogue
//       instead of atomics into a pre-initialized y.
//
// Entry points: *_vec take 16-byte loads (C % 4 == 0), *_scalar any C. Layernorm kernels:
// one warp per row, 8 rows a block; _iN holds the row in N float4 per lane (C <= 128 N),
// _loop any C.
#include <cstdint>

#include "elementwise.cuh"
#include "layernorm.cuh"
#include "sgemm.cuh"
#include "vec.cuh"
#include "warp.cuh"

using namespace cuda100;

// driver.py launches the GEMMs with TILE = 128 (grids) and GEMM_THREADS = 256: if sgemm.cuh's
// tile changes shape, change those with it. (Split-K slices are multiples of 8 floats for
// alignment; any K works with any BK.)
static_assert(sgemm::BM == 128 && sgemm::BN == 128 && sgemm::THREADS == 256,
              "sgemm.cuh's tile changed: update TILE, GEMM_THREADS, TILE_K in driver.py");

// ---------------------------------------------------------------------------------------
// LayerNorm rows (every version): warp per row. OUT: write the normalized row to out.
// INIT: write y = x + b2 (v3/v4: the start value that fc2's split-K slices add into).
// stats[row] = {m0, md, rstd, 0} always (16 bytes a row).
// ---------------------------------------------------------------------------------------
constexpr int LN_ROWS = 8;  // warps (rows) per 256-thread block

template <int ITEMS, bool OUT, bool INIT>
__device__ __forceinline__ void ln_rows(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ out,
                                        float4* __restrict__ stats, const float* __restrict__ b2,
                                        float* __restrict__ y, int M, int C, float eps) {
    const int row = blockIdx.x * LN_ROWS + (threadIdx.x >> 5), lane = threadIdx.x & 31;
    if (row >= M) return;  // a whole warp leaves: the shuffles below see full warps only
    const float* xr = x + (size_t)row * C;
    if constexpr (ITEMS > 0) {
        float4 v[ITEMS];
        const float4 s = ln::warp_row_stats_regs<ITEMS>(xr, C, eps, v);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int c = (lane + 32 * i) * 4;
            if (c >= C) continue;
            if (OUT) {
                const float4 wv = load4(w + c), bv = load4(b + c);
                store4(out + (size_t)row * C + c,
                       make_float4(ln::normalize(v[i].x, s, wv.x, bv.x), ln::normalize(v[i].y, s, wv.y, bv.y),
                                   ln::normalize(v[i].z, s, wv.z, bv.z), ln::normalize(v[i].w, s, wv.w, bv.w)));
            }
            if (INIT) {
                const float4 bv = load4(b2 + c);
                store4(y + (size_t)row * C + c,
                       make_float4(v[i].x + bv.x, v[i].y + bv.y, v[i].z + bv.z, v[i].w + bv.w));
            }
        }
        if (lane == 0) stats[row] = s;
    } else {
        const float4 s = ln::warp_row_stats_loop(xr, C, eps);
        for (int c = lane; c < C; c += 32) {
            const float xv = xr[c];
            if (OUT) out[(size_t)row * C + c] = ln::normalize(xv, s, w[c], b[c]);
            if (INIT) y[(size_t)row * C + c] = xv + b2[c];
        }
        if (lane == 0) stats[row] = s;
    }
}

#define LN_ENTRY(NAME, ITEMS, OUT, INIT)                                                        \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                     \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, \
        float* __restrict__ out, float4* __restrict__ stats, const float* __restrict__ b2,     \
        float* __restrict__ y, int M, int C, float eps) {                                      \
        ln_rows<ITEMS, OUT, INIT>(x, w, b, out, stats, b2, y, M, C, eps);                      \
    }
#define LN_FAMILY(PREFIX, OUT, INIT)                \
    LN_ENTRY(PREFIX##_i2, 2, OUT, INIT)             \
    LN_ENTRY(PREFIX##_i4, 4, OUT, INIT)             \
    LN_ENTRY(PREFIX##_i6, 6, OUT, INIT)             \
    LN_ENTRY(PREFIX##_i8, 8, OUT, INIT)             \
    LN_ENTRY(PREFIX##_i16, 16, OUT, INIT)           \
    LN_ENTRY(PREFIX##_loop, 0, OUT, INIT)

LN_FAMILY(mlp_layernorm_v1, true, false)   // v1, v2: normalized rows
LN_FAMILY(mlp_layernorm_v3, true, true)    // v3: normalized rows + y = x + b2
LN_FAMILY(mlp_stats_v4, false, true)       // v4: statistics + y = x + b2 only
LN_FAMILY(mlp_stats_noinit_v4, false, false)  // v4 when fc2 is not split: statistics only

// ---------------------------------------------------------------------------------------
// v1: a plain GEMM and three elementwise kernels (flat float4 body, scalar tail)
// ---------------------------------------------------------------------------------------
template <bool VEC, class Epi>
__device__ __forceinline__ void gemm(const float* __restrict__ A, int lda, const float* __restrict__ B,
                                     int ldb, int M, int N, int K, const Epi& epi) {
    sgemm::gemm_tile<VEC>(A, lda, B, ldb, M, N, K, blockIdx.y * sgemm::BM, blockIdx.x * sgemm::BN, epi);
}

#define GEMM_V1(NAME, VEC)                                                                      \
    extern "C" __global__ void __launch_bounds__(sgemm::THREADS, 2) NAME(                       \
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm, int M, \
        int N, int K) {                                                                         \
        gemm<VEC>(A, K, B, N, M, N, K, sgemm::Store<VEC>{Cm, N});                               \
    }
GEMM_V1(mlp_gemm_v1_vec, true)
GEMM_V1(mlp_gemm_v1_scalar, false)

// v1's element-wise kernels (bodies: common/cuda/elementwise.cuh)
extern "C" __global__ void mlp_bias_v1_vec(float* y, const float* bias, long long n, int N) {
    add_bias_rows<true>(y, bias, n, N);
}
extern "C" __global__ void mlp_bias_v1_scalar(float* y, const float* bias, long long n, int N) {
    add_bias_rows<false>(y, bias, n, N);
}
// h = gelu(h) in place
extern "C" __global__ void mlp_gelu_v1(float* __restrict__ h, long long n) { gelu_in_place(h, n); }
// y += x
extern "C" __global__ void mlp_residual_v1(float* __restrict__ y, const float* __restrict__ x,
                                           long long n) {
    add_in_place(y, x, n);
}

// ---------------------------------------------------------------------------------------
// v2: the epilogues. Each gets C[row, col .. col+n-1] of the tile (n = 1..4, col % 4 == 0);
// load_n / store_n (common/cuda/elementwise.cuh) move those n floats.
// ---------------------------------------------------------------------------------------
// h = gelu(acc + b1)
template <bool VEC>
struct BiasGelu {
    const float* bias;
    float* out;
    int ld;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        const float4 b = load_n<VEC>(bias + col, n);
        store_n<VEC>(out + (size_t)row * ld + col,
                     make_float4(gelu(v.x + b.x), gelu(v.y + b.y), gelu(v.z + b.z), gelu(v.w + b.w)), n);
    }
};

// y = acc + b2 + x
template <bool VEC>
struct BiasResidual {
    const float* bias;
    const float* res;
    float* out;
    int ld;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        const size_t i = (size_t)row * ld + col;
        const float4 b = load_n<VEC>(bias + col, n), r = load_n<VEC>(res + i, n);
        store_n<VEC>(out + i, make_float4(v.x + b.x + r.x, v.y + b.y + r.y, v.z + b.z + r.z,
                                          v.w + b.w + r.w), n);
    }
};

#define FC1_V2(NAME, VEC)                                                                       \
    extern "C" __global__ void __launch_bounds__(sgemm::THREADS, 2) NAME(                       \
        const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ b1, \
        float* __restrict__ h, int M, int N, int K) {                                           \
        gemm<VEC>(A, K, B, N, M, N, K, BiasGelu<VEC>{b1, h, N});                                \
    }
FC1_V2(mlp_fc1_v2_vec, true)
FC1_V2(mlp_fc1_v2_scalar, false)

#define FC2_V2(NAME, VEC)                                                                       \
    extern "C" __global__ void __launch_bounds__(sgemm::THREADS, 2) NAME(                       \
        const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ b2, \
        const float* __restrict__ x, float* __restrict__ y, int M, int N, int K) {              \
        gemm<VEC>(A, K, B, N, M, N, K, BiasResidual<VEC>{b2, x, y, N});                         \
    }
FC2_V2(mlp_fc2_v2_vec, true)
FC2_V2(mlp_fc2_v2_scalar, false)

// ---------------------------------------------------------------------------------------
// v3: fc2 split over K; each slice adds its partial tile into y (= x + b2 beforehand)
// ---------------------------------------------------------------------------------------
template <bool VEC>
struct AtomicAdd {
    float* out;
    int ld;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        float* p = out + (size_t)row * ld + col;
        if (VEC) {
            atomicAdd(reinterpret_cast<float4*>(p), v);  // one red.global.add.v4.f32 (sm_90)
        } else {
            atomicAdd(p, v.x);
            if (n > 1) atomicAdd(p + 1, v.y);
            if (n > 2) atomicAdd(p + 2, v.z);
            if (n > 3) atomicAdd(p + 3, v.w);
        }
    }
};

// slice z of ksplit takes k in [z * kslice, min(K, (z + 1) * kslice)); kslice is a multiple of
// the tile's BK (so a slice's A rows stay 16-byte aligned). An empty slice leaves at once.
#define FC2_V3(NAME, VEC)                                                                       \
    extern "C" __global__ void __launch_bounds__(sgemm::THREADS, 2) NAME(                       \
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ y, int M, \
        int N, int K, int kslice) {                                                             \
        const int k0 = blockIdx.z * kslice, kz = min(kslice, K - k0);                           \
        if (kz <= 0) return;                                                                    \
        gemm<VEC>(A + k0, K, B + (size_t)k0 * N, N, M, N, kz, AtomicAdd<VEC>{y, N});            \
    }
FC2_V3(mlp_fc2_v3_vec, true)
FC2_V3(mlp_fc2_v3_scalar, false)

// ---------------------------------------------------------------------------------------
// v4: fc1 with the layernorm applied to A as it is loaded (C % 4 == 0 only).
// The tile below is the same shape as sgemm.cuh's: 256 threads, 128x128 outputs a block,
// BK = 8, 8x8 outputs a thread, A stored transposed in shared memory, double-buffered.
// Thread tid loads A[bm + tid/2, k0 + (tid%2)*4 .. +3] (its row never changes: its stats are
// loaded once) and B[k0 + tid/32, bn + (tid%32)*4 .. +3].
// ---------------------------------------------------------------------------------------
namespace lnf {
constexpr int TM = 128, TN = 128, TK = 8, THREADS = 256, LDA = TM + 4;
}

extern "C" __global__ void __launch_bounds__(lnf::THREADS, 2)
    mlp_fc1_v4_vec(const float* __restrict__ x, const float4* __restrict__ stats,
                   const float* __restrict__ lnw, const float* __restrict__ lnb,
                   const float* __restrict__ W1, const float* __restrict__ b1, float* __restrict__ h,
                   int M, int N, int K) {
    using namespace lnf;
    __shared__ __align__(16) float As[2][TK * LDA];
    __shared__ __align__(16) float Bs[2][TK * TN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int bm = blockIdx.y * TM, bn = blockIdx.x * TN;
    const int ar = bm + tid / 2, akl = (tid % 2) * 4;       // A row, k offset in the tile
    const int bkl = tid / 32, bc = bn + (tid % 32) * 4;     // B row in the tile, column
    const float4 st = ar < M ? stats[ar] : make_float4(0.f, 0.f, 0.f, 0.f);
    const float* xa = x + (size_t)min(ar, M - 1) * K;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);

    // k0's float4 of A, normalized (K % 4 == 0: ak < K means all four are inside the row)
    auto load_a = [&](int k0) {
        const int ak = k0 + akl;
        if (ar >= M || ak >= K) return zero;
        const float4 v = load4(xa + ak), wv = load4(lnw + ak), bv = load4(lnb + ak);
        return make_float4(ln::normalize(v.x, st, wv.x, bv.x), ln::normalize(v.y, st, wv.y, bv.y),
                           ln::normalize(v.z, st, wv.z, bv.z), ln::normalize(v.w, st, wv.w, bv.w));
    };
    auto load_b = [&](int k0) {
        const int bk = k0 + bkl;
        return (bk < K && bc < N) ? load4(W1 + (size_t)bk * N + bc) : zero;
    };
    auto stash = [&](float4 a, float4 b, float* as, float* bs) {
        const int m = tid / 2;
        as[(akl + 0) * LDA + m] = a.x;
        as[(akl + 1) * LDA + m] = a.y;
        as[(akl + 2) * LDA + m] = a.z;
        as[(akl + 3) * LDA + m] = a.w;
        store4(bs + bkl * TN + (tid % 32) * 4, b);
    };

    float acc[8][8] = {};
    stash(load_a(0), load_b(0), As[0], Bs[0]);
    __syncthreads();
    const int tiles = (K + TK - 1) / TK;
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        const float4 na = load_a((t + 1) * TK), nb = load_b((t + 1) * TK);
        const float* as = As[cur];
        const float* bs = Bs[cur];
#pragma unroll
        for (int k = 0; k < TK; ++k) {
            const float4 a0 = load4(as + k * LDA + ty * 4), a1 = load4(as + k * LDA + 64 + ty * 4);
            const float4 b0 = load4(bs + k * TN + tx * 4), b1v = load4(bs + k * TN + 64 + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1v.x, b1v.y, b1v.z, b1v.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        stash(na, nb, As[cur ^ 1], Bs[cur ^ 1]);
        __syncthreads();
    }
    const BiasGelu<true> epi{b1, h, N};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            const int col = bn + hh * 64 + tx * 4;
            if (col < N)
                epi(row, col, make_float4(acc[i][hh * 4], acc[i][hh * 4 + 1], acc[i][hh * 4 + 2],
                                          acc[i][hh * 4 + 3]),
                    min(4, N - col));
        }
    }
}

// ---------------------------------------------------------------------------------------
// v5: v3 on day 25's faster tile, sgemm::Fast (cp.async global -> shared, two stages, BK = 16,
// warptiling; 128x128 outputs, 256 threads, 36,864 bytes of static shared memory). The
// epilogues are the same functors: only the main loop changes.
// ---------------------------------------------------------------------------------------
template <bool VEC, class Epi>
__device__ __forceinline__ void gemm_fast(const float* __restrict__ A, int lda,
                                          const float* __restrict__ B, int ldb, int M, int N,
                                          int K, const Epi& epi) {
    sgemm::gemm_tile_cfg<sgemm::Fast, VEC>(A, lda, B, ldb, M, N, K, blockIdx.y * sgemm::Fast::BM,
                                           blockIdx.x * sgemm::Fast::BN, epi);
}
static_assert(sgemm::Fast::BM == 128 && sgemm::Fast::BN == 128 && sgemm::Fast::THREADS == 256,
              "sgemm::Fast changed shape: update TILE / GEMM_THREADS in driver.py");

#define FC1_V5(NAME, VEC)                                                                       \
    extern "C" __global__ void __launch_bounds__(sgemm::Fast::THREADS, 2) NAME(                 \
        const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ b1, \
        float* __restrict__ h, int M, int N, int K) {                                           \
        gemm_fast<VEC>(A, K, B, N, M, N, K, BiasGelu<VEC>{b1, h, N});                           \
    }
FC1_V5(mlp_fc1_v5_vec, true)
FC1_V5(mlp_fc1_v5_scalar, false)

#define FC2_V5(NAME, VEC)                                                                       \
    extern "C" __global__ void __launch_bounds__(sgemm::Fast::THREADS, 2) NAME(                 \
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ y, int M, \
        int N, int K, int kslice) {                                                             \
        const int k0 = blockIdx.z * kslice, kz = min(kslice, K - k0);                           \
        /* the driver makes no empty slice; were one empty, the VEC loads (predicated on     */ \
        /* k < kz) would read nothing and the epilogue add zeros. The early return costs the */ \
        /* VEC kernel a register spill, so only the scalar kernel keeps it.                  */ \
        if (!VEC && kz <= 0) return;                                                            \
        gemm_fast<VEC>(A + k0, K, B + (size_t)k0 * N, N, M, N, kz, AtomicAdd<VEC>{y, N});       \
    }
FC2_V5(mlp_fc2_v5_vec, true)
FC2_V5(mlp_fc2_v5_scalar, false)

// the unsplit fc2 with v2's fused bias + residual, on the Fast tile (a sweep candidate: the
// split's atomics against one pass that reads x in the epilogue)
#define FC2_V5_FUSED(NAME, VEC)                                                                 \
    extern "C" __global__ void __launch_bounds__(sgemm::Fast::THREADS, 2) NAME(                 \
        const float* __restrict__ A, const float* __restrict__ B, const float* __restrict__ b2, \
        const float* __restrict__ x, float* __restrict__ y, int M, int N, int K) {              \
        gemm_fast<VEC>(A, K, B, N, M, N, K, BiasResidual<VEC>{b2, x, y, N});                    \
    }
FC2_V5_FUSED(mlp_fc2res_v5_vec, true)
FC2_V5_FUSED(mlp_fc2res_v5_scalar, false)
