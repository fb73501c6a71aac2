// Day 18: the attention QKV permute (llm.c) fused with the Q scale, and its inverse.
//
// Forward: the fused QKV projection writes qkv[B, T, 3, NH, HS] (per token: all of Q, then
// all of K, then all of V, each NH heads of HS floats). Attention wants each head's rows
// together: q, k, v[B, NH, T, HS], with q scaled by `scale` (1/sqrt(HS)) so the scores
// q @ k^T come out pre-scaled:
//
//   q[b, h, t, e] = scale * qkv[b, t, 0, h, e]
//   k[b, h, t, e] =         qkv[b, t, 1, h, e]
//   v[b, h, t, e] =         qkv[b, t, 2, h, e]
//
// Backward (the inverse permute, kernels unpermute_*): the gradients dq, dk, dv[B, NH, T, HS]
// go back to dqkv[B, T, 3, NH, HS]; the Q part picks up the same factor (d/dx of scale*x):
//
//   dqkv[b, t, 0, h, e] = scale * dq[b, h, t, e],  dqkv[b, t, 1, h, e] = dk[...],  ...
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 18        (8x1024x12x64, GPT-2 small, B = 8)
//
// Versions of the forward (all produce q, k, v; indices are 32-bit: the driver keeps
// 3*B*T*NH*HS < 2^31):
//   v1  unfused: three permute kernels (one per output, one element per thread, the output
//       index unflattened with div/mod and the input index flattened again), then a fourth
//       kernel that scales q in place: q is written, read and written again
//   v2  one fused kernel: thread i computes output element i of q, k AND v (three loads,
//       three stores, the scale applied on the way): every byte read once, written once
//   v3  v2 with vector loads and stores along HS: float4 when HS % 4 == 0, float2 when
//       HS % 2 == 0, scalar otherwise (then it is v2)
// The inverse comes as unpermute_vec1 (scalar, the v2 pattern) and unpermute_vec2/_vec4.

#include <cstdint>

// ---------------------------------------------------------------------------------------
// v1: separate kernels
// ---------------------------------------------------------------------------------------
extern "C" __global__ void permute_v1_copy(const float* __restrict__ qkv, float* __restrict__ out,
                                           int which, int B, int T, int NH, int HS) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;  // output element, [B, NH, T, HS]
    if (idx >= B * NH * T * HS) return;
    const int e = idx % HS;
    const int t = (idx / HS) % T;
    const int h = (idx / (HS * T)) % NH;
    const int b = idx / (HS * T * NH);
    out[idx] = qkv[(((b * T + t) * 3 + which) * NH + h) * HS + e];
}

extern "C" __global__ void permute_v1_scale(float* __restrict__ x, int n, float scale) {
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n) x[idx] *= scale;
}

// ---------------------------------------------------------------------------------------
// v2 / v3 and the inverse: one thread per output VECTOR of q (and the same of k and v)
// ---------------------------------------------------------------------------------------
template <int VEC> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<2> { using T = float2; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ float scaled(float x, float s) { return x * s; }
__device__ __forceinline__ float2 scaled(float2 x, float s) { return make_float2(x.x * s, x.y * s); }
__device__ __forceinline__ float4 scaled(float4 x, float s) {
    return make_float4(x.x * s, x.y * s, x.z * s, x.w * s);
}

// Where q's vector `idx` ([B, NH, T, HSV] order) sits in qkv ([B, T, 3, NH, HSV]), in vectors;
// k's is NH*HSV further, v's 2*NH*HSV further.
__device__ __forceinline__ int qkv_offset(int idx, int T, int NH, int HSV) {
    const int e = idx % HSV;
    int r = idx / HSV;
    const int t = r % T;
    r /= T;
    const int h = r % NH;
    const int b = r / NH;
    return ((b * T + t) * 3 * NH + h) * HSV + e;
}

template <int VEC>
__device__ __forceinline__ void permute_fused(const float* __restrict__ qkv, float* __restrict__ q,
                                              float* __restrict__ k, float* __restrict__ v, int B,
                                              int T, int NH, int HS, float scale) {
    using V = typename Vec<VEC>::T;
    const int HSV = HS / VEC;  // VEC divides HS by the launch contract
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * NH * T * HSV) return;
    const V* in = reinterpret_cast<const V*>(qkv);
    const int src = qkv_offset(idx, T, NH, HSV), stride = NH * HSV;
    const V xq = in[src], xk = in[src + stride], xv = in[src + 2 * stride];  // 3 loads in flight
    reinterpret_cast<V*>(q)[idx] = scaled(xq, scale);
    reinterpret_cast<V*>(k)[idx] = xk;
    reinterpret_cast<V*>(v)[idx] = xv;
}

template <int VEC>
__device__ __forceinline__ void unpermute_fused(const float* __restrict__ dq,
                                                const float* __restrict__ dk,
                                                const float* __restrict__ dv,
                                                float* __restrict__ dqkv, int B, int T, int NH,
                                                int HS, float scale) {
    using V = typename Vec<VEC>::T;
    const int HSV = HS / VEC;
    const int idx = blockIdx.x * blockDim.x + threadIdx.x;  // read order: [B, NH, T, HSV]
    if (idx >= B * NH * T * HSV) return;
    const V gq = reinterpret_cast<const V*>(dq)[idx];
    const V gk = reinterpret_cast<const V*>(dk)[idx];
    const V gv = reinterpret_cast<const V*>(dv)[idx];
    V* out = reinterpret_cast<V*>(dqkv);
    const int dst = qkv_offset(idx, T, NH, HSV), stride = NH * HSV;
    out[dst] = scaled(gq, scale);
    out[dst + stride] = gk;
    out[dst + 2 * stride] = gv;
}

extern "C" __global__ void permute_v2(const float* __restrict__ qkv, float* __restrict__ q,
                                      float* __restrict__ k, float* __restrict__ v, int B, int T,
                                      int NH, int HS, float scale) {
    permute_fused<1>(qkv, q, k, v, B, T, NH, HS, scale);
}

#define PERMUTE_V3(VEC)                                                                        \
    extern "C" __global__ void permute_v3_vec##VEC(                                           \
        const float* __restrict__ qkv, float* __restrict__ q, float* __restrict__ k,          \
        float* __restrict__ v, int B, int T, int NH, int HS, float scale) {                   \
        permute_fused<VEC>(qkv, q, k, v, B, T, NH, HS, scale);                                \
    }                                                                                          \
    extern "C" __global__ void unpermute_vec##VEC(                                            \
        const float* __restrict__ dq, const float* __restrict__ dk,                           \
        const float* __restrict__ dv, float* __restrict__ dqkv, int B, int T, int NH, int HS, \
        float scale) {                                                                         \
        unpermute_fused<VEC>(dq, dk, dv, dqkv, B, T, NH, HS, scale);                          \
    }

PERMUTE_V3(4)
PERMUTE_V3(2)
PERMUTE_V3(1)
