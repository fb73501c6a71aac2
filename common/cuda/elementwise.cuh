// Element-wise pieces of the transformer days (GELU taught on day 10, elementwise_ops; the GEMM
// epilogues and the unfused rungs on day 30, gpt2_style_ops; days 32 and 40 reuse them):
// the tanh GELU, a float4 of n = 1..4 floats for an epilogue at a ragged column edge, and the
// bodies of the in-place kernels an unfused version launches one after another.
#pragma once

#include "vec.cuh"

namespace cuda100 {

// gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))   (GPT-2's tanh form)
__device__ __forceinline__ float gelu(float u) {
    const float k0 = 0.7978845608028654f, k1 = 0.044715f;  // sqrt(2/pi)
    return 0.5f * u * (1.f + tanhf(k0 * (u + k1 * u * u * u)));
}

// p[0 .. n-1] as a float4, zeros after; VEC and n == 4: one 16-byte load
template <bool VEC>
__device__ __forceinline__ float4 load_n(const float* p, int n) {
    if (VEC && n == 4) return load4(p);
    return make_float4(p[0], n > 1 ? p[1] : 0.f, n > 2 ? p[2] : 0.f, n > 3 ? p[3] : 0.f);
}

// the first n of v's floats to p[0 .. n-1]; VEC and n == 4: one 16-byte store
template <bool VEC>
__device__ __forceinline__ void store_n(float* p, float4 v, int n) {
    if (VEC && n == 4) {
        store4(p, v);
    } else {
        p[0] = v.x;
        if (n > 1) p[1] = v.y;
        if (n > 2) p[2] = v.z;
        if (n > 3) p[3] = v.w;
    }
}

// --- the unfused rungs: one thread a float4 (or, !VEC, an element) of a flat array ----------

// y[r, c] += bias[c] over n = rows * N elements: VEC (N % 4 == 0) a float4 a thread
template <bool VEC>
__device__ __forceinline__ void add_bias_rows(float* __restrict__ y, const float* __restrict__ bias,
                                              long long n, int N) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (VEC) {
        const long long e = 4 * i;
        if (e >= n) return;
        const int c = (int)(e % N);
        const float4 v = load4(y + e), bv = load4(bias + c);
        store4(y + e, make_float4(v.x + bv.x, v.y + bv.y, v.z + bv.z, v.w + bv.w));
    } else {
        if (i >= n) return;
        y[i] += bias[i % N];
    }
}

// h = gelu(h) over n elements (a cudaMalloc'd buffer: 16-byte aligned; a scalar tail)
__device__ __forceinline__ void gelu_in_place(float* __restrict__ h, long long n) {
    const long long e = 4 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (e + 3 < n) {
        const float4 v = load4(h + e);
        store4(h + e, make_float4(gelu(v.x), gelu(v.y), gelu(v.z), gelu(v.w)));
    } else {
        for (long long j = e; j < n; ++j) h[j] = gelu(h[j]);
    }
}

// y += x over n elements (a residual)
__device__ __forceinline__ void add_in_place(float* __restrict__ y, const float* __restrict__ x,
                                             long long n) {
    const long long e = 4 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (e + 3 < n) {
        const float4 v = load4(y + e), r = load4(x + e);
        store4(y + e, make_float4(v.x + r.x, v.y + r.y, v.z + r.z, v.w + r.w));
    } else {
        for (long long j = e; j < n; ++j) y[j] += x[j];
    }
}

}  // namespace cuda100
