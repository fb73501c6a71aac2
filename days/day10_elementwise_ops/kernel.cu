// Day 10: fused elementwise ops. One concrete op, as it appears after a Linear layer:
//
//   y[r, c] = act(x[r, c] * scale + bias[c])        x, y: [N, C] row-major; bias: [C]
//   act = GELU, tanh approximation (GPT-2):  0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))
//   act = ReLU:                              max(u, 0)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -cubin kernel.cu
// Run:               python run_day.py 10
//
// Every kernel uses the same 2D launch: threadIdx.x / blockIdx.x cover the columns (in units
// of VEC floats), threadIdx.y / blockIdx.y the rows, and each thread loops down the rows with a
// grid stride. A thread's column never changes, so its bias is loaded ONCE into registers and
// there is no `i % C` to find the column of an element.
//
// Versions:
//   v1  the unfused chain, one kernel per op, as eager PyTorch runs `gelu(x * s + b)`:
//         scale_v1:    t1 = x * s          (read x,  write t1)
//         add_bias_v1: t2 = t1 + b[c]      (read t1, write t2)
//         gelu_v1:     y  = gelu(t2)       (read t2, write y)      (relu_v1 for ReLU)
//       three launches and 3 reads + 3 writes per element instead of 1 + 1.
//   v2  one fused kernel, one float per thread per row: 1 read + 1 write per element.
//   v3  v2 with float4 loads and stores (16 bytes per instruction: a quarter of the memory
//       instructions, four times the bytes in flight per thread). Needs C % 4 == 0 (every row
//       16-byte aligned); for other widths the driver runs v2's kernel.
//   v4  v3 with 4 rows per loop iteration, all four loads issued before any math (64 bytes
//       in flight per thread), and streaming cache hints (__ldcs / __stcs: nobody reads x or y
//       again, so they should not push useful lines out of L2). C % 4 != 0: the same with
//       scalar loads (bias_act_v4_vec1_*).
//   v5  any width at float4 speed: the matrix as one flat array of float4 (rows may straddle
//       a float4), a grid-stride loop; the column of each element, needed only for its bias,
//       advances by a constant step per iteration (no division in the loop).
#include <cstdint>

#define ACT_RELU 0
#define ACT_GELU 1

// GELU, tanh form, computed as u * sigmoid(2z): 0.5 (1 + tanh z) = 1 / (1 + exp(-2z)).
// One expf and one fast division instead of tanhf; and for u << 0 it never forms 1 + tanh(z)
// (a cancellation near -1), so the negative tail keeps its relative precision.
// For u below about -10 exp(-2z) overflows to +inf and the result is u / inf = -0 (the true
// value is below 1e-37); __fdividef returns 0 for denominators above 2^126, equally harmless.
__device__ __forceinline__ float gelu_tanh(float u) {
    const float two_k = 1.5957691216057308f;  // 2 * sqrt(2 / pi)
    const float z2 = two_k * u * (1.f + 0.044715f * u * u);
    return __fdividef(u, 1.f + expf(-z2));
}

template <int ACT>
__device__ __forceinline__ float activate(float u) {
    if constexpr (ACT == ACT_GELU) return gelu_tanh(u);
    else return fmaxf(u, 0.f);
}

// ---------------------------------------------------------------------------------------
// v1: one kernel per op, each a plain elementwise loop. A thread owns column `col` and the
// rows blockIdx.y * blockDim.y + threadIdx.y, then every gridDim.y * blockDim.y rows further.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void scale_v1(const float* __restrict__ x, float* __restrict__ t1, int N,
                                    int C, float scale) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < N;
         r += (int64_t)gridDim.y * blockDim.y)
        t1[r * C + col] = x[r * C + col] * scale;
}

extern "C" __global__ void add_bias_v1(const float* __restrict__ t1,
                                       const float* __restrict__ bias, float* __restrict__ t2,
                                       int N, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    const float b = bias[col];
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < N;
         r += (int64_t)gridDim.y * blockDim.y)
        t2[r * C + col] = t1[r * C + col] + b;
}

template <int ACT>
__device__ __forceinline__ void activate_v1(const float* __restrict__ t2, float* __restrict__ y,
                                            int N, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < N;
         r += (int64_t)gridDim.y * blockDim.y)
        y[r * C + col] = activate<ACT>(t2[r * C + col]);
}

extern "C" __global__ void gelu_v1(const float* __restrict__ t2, float* __restrict__ y, int N,
                                   int C) {
    activate_v1<ACT_GELU>(t2, y, N, C);
}

extern "C" __global__ void relu_v1(const float* __restrict__ t2, float* __restrict__ y, int N,
                                   int C) {
    activate_v1<ACT_RELU>(t2, y, N, C);
}

// ---------------------------------------------------------------------------------------
// v2, v3, v4: one fused body. VEC floats per access (1 or 4), U rows per loop iteration,
// STREAM = evict-first loads/stores.
// ---------------------------------------------------------------------------------------
template <int VEC, bool STREAM>
__device__ __forceinline__ void load(const float* p, float (&v)[VEC]) {
    if constexpr (VEC == 4) {
        const float4* q = reinterpret_cast<const float4*>(p);
        const float4 t = STREAM ? __ldcs(q) : *q;
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else {
        v[0] = STREAM ? __ldcs(p) : *p;
    }
}

template <int VEC, bool STREAM>
__device__ __forceinline__ void store(float* p, const float (&v)[VEC]) {
    if constexpr (VEC == 4) {
        const float4 t = make_float4(v[0], v[1], v[2], v[3]);
        if constexpr (STREAM) __stcs(reinterpret_cast<float4*>(p), t);
        else *reinterpret_cast<float4*>(p) = t;
    } else {
        if constexpr (STREAM) __stcs(p, v[0]);
        else *p = v[0];
    }
}

template <int VEC, int ACT, int U, bool STREAM>
__device__ __forceinline__ void bias_act_body(const float* __restrict__ x,
                                              const float* __restrict__ bias,
                                              float* __restrict__ y, int N, int C, float scale) {
    const int ncols = C / VEC;  // VEC divides C by the launch contract
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= ncols) return;
    float b[VEC];
    load<VEC, false>(bias + (int64_t)col * VEC, b);  // once per thread, reused for every row

    const int64_t rstep = (int64_t)gridDim.y * blockDim.y * U;
    for (int64_t r0 = ((int64_t)blockIdx.y * blockDim.y + threadIdx.y) * U; r0 < N; r0 += rstep) {
        float v[U][VEC];
#pragma unroll
        for (int u = 0; u < U; ++u)  // all loads first: U independent requests in flight
            if (r0 + u < N) load<VEC, STREAM>(x + (r0 + u) * C + (int64_t)col * VEC, v[u]);
#pragma unroll
        for (int u = 0; u < U; ++u) {
            if (r0 + u < N) {
#pragma unroll
                for (int k = 0; k < VEC; ++k) v[u][k] = activate<ACT>(fmaf(v[u][k], scale, b[k]));
                store<VEC, STREAM>(y + (r0 + u) * C + (int64_t)col * VEC, v[u]);
            }
        }
    }
}

#define BIAS_ACT(NAME, VEC, ACT, U, STREAM)                                                    \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                    \
        const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,    \
        int N, int C, float scale) {                                                           \
        bias_act_body<VEC, ACT, U, STREAM>(x, bias, y, N, C, scale);                           \
    }

BIAS_ACT(bias_act_v2_gelu, 1, ACT_GELU, 1, false)
BIAS_ACT(bias_act_v2_relu, 1, ACT_RELU, 1, false)
BIAS_ACT(bias_act_v3_gelu, 4, ACT_GELU, 1, false)
BIAS_ACT(bias_act_v3_relu, 4, ACT_RELU, 1, false)
BIAS_ACT(bias_act_v4_vec4_gelu, 4, ACT_GELU, 4, true)
BIAS_ACT(bias_act_v4_vec4_relu, 4, ACT_RELU, 4, true)
BIAS_ACT(bias_act_v4_vec1_gelu, 1, ACT_GELU, 4, true)
BIAS_ACT(bias_act_v4_vec1_relu, 1, ACT_RELU, 4, true)

// ---------------------------------------------------------------------------------------
// v5: any width at float4 speed. An elementwise op does not care where rows begin: the
// [N, C] matrix is ONE contiguous array of N*C floats whose start is 16-byte aligned
// (cudaMalloc), so it is an array of float4 whatever C is (a float4 may straddle two rows).
// Only the bias needs to know the column. A thread's float4 i starts at column (4 i) mod C,
// and the grid-stride loop moves it by (4 * stride) mod C each step: one modulo before the
// loop, an add and a compare in it. Each element's bias is a scalar __ldg: the bias (4C bytes,
// read by every row) stays in L1. The last (N*C) % 4 floats: the first threads of block 0.
// An earlier v5 cut each row into a scalar head, an aligned float4 body and a scalar tail,
// keeping the bias in registers: 58% of the ceiling at 8191 x 3073 against this design's 90%
// (.notes/day09_10_oddwidth.md).
// ---------------------------------------------------------------------------------------
template <int ACT>
__device__ __forceinline__ void bias_act_flat(const float* __restrict__ x,
                                              const float* __restrict__ bias,
                                              float* __restrict__ y, int N, int C, float scale) {
    const int64_t total = (int64_t)N * C, n4 = total >> 2;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int col = (int)((4 * i) % C);                 // column of the float4's first element
    const int step = (int)((4 * stride) % C);
    for (; i < n4; i += stride) {
        float v[4];
        load<4, false>(x + 4 * i, v);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            int c = col + k;
            while (c >= C) c -= C;                // C < 4: a float4 spans several rows
            v[k] = activate<ACT>(fmaf(v[k], scale, __ldg(bias + c)));
        }
        store<4, false>(y + 4 * i, v);
        col += step;
        if (col >= C) col -= C;
    }
    if (blockIdx.x == 0 && threadIdx.x < total - 4 * n4) {
        const int64_t e = 4 * n4 + threadIdx.x;
        y[e] = activate<ACT>(fmaf(x[e], scale, __ldg(bias + (int)(e % C))));
    }
}

#define BIAS_ACT_FLAT(NAME, ACT)                                                                \
    extern "C" __global__ void __launch_bounds__(256) NAME(                                     \
        const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y,     \
        int N, int C, float scale) {                                                            \
        bias_act_flat<ACT>(x, bias, y, N, C, scale);                                            \
    }

BIAS_ACT_FLAT(bias_act_v5_gelu, ACT_GELU)
BIAS_ACT_FLAT(bias_act_v5_relu, ACT_RELU)
