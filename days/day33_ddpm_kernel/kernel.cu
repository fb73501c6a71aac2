// Day 33: one DDPM noising step and one denoising step, with the noise drawn on the GPU from a
// counter-based generator (Philox-4x32-10, common/cuda/philox.cuh).
//
//   noising   x_t    = a_b x0 + s_b eps                 a_b = sqrt(abar_t), s_b = sqrt(1 - abar_t)
//   denoising x_prev = c0_b x_t - c1_b eps_theta + sig_b z
//                      c0 = 1/sqrt(alpha_t), c1 = beta_t / (sqrt(1 - abar_t) sqrt(alpha_t)),
//                      sig = sqrt(beta_t) (0 at t = 0)
// over a batch of B images of N floats each (flattened: n = B * N elements; image b = e / N
// has its own timestep, so its own coefficients, read from a [B] table the host builds).
// eps and z are standard normals: element e of a tensor is normal e of the stream
// (seed, subsequence): Philox block e / 4 gives four words, Box-Muller turns words (0, 1) into
// normals 4(e/4) + 0, 1 and words (2, 3) into normals + 2, 3. Every version draws the same
// numbers; only who computes them, and how often, changes.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -I common/cuda -cubin -Xptxas -v kernel.cu
// Run:               python run_day.py 33
//
// Versions (the noising op writes x_t and eps, the step writes x_prev):
//   v1  naive, two kernels per op: ddpm_gen_v1 draws the noise into a buffer (one thread per
//       element, each computing the whole Philox block of its element and keeping one of its
//       four normals), then ddpm_noise_apply_v1 / ddpm_step_apply_v1 read it back. The noising
//       op's buffer is its eps output (read once more); the step's is a scratch buffer (written
//       and read: 8 extra bytes per element).
//   v2  fused: one kernel per op, one thread per element, the noise made in registers and never
//       stored. Still one Philox block per ELEMENT: 3 of its 4 words thrown away.
//   v3  one thread per 4 elements: one Philox block gives all four normals; float4 loads and
//       stores; any length (the last n % 4 elements by one thread, scalar). Accurate math
//       (logf, sqrtf, sincospif).
//   v4  v3 with sin and cos from the special-function unit (__sincosf on (-pi, pi)) instead of
//       sincospif's polynomials: fewer instructions per element.
//   Sweep candidates (built with -DDAY33_SWEEP): ddpm_{noise,step}_cand_u<U>_f<FAST>, the v3/v4
//   code with U groups of 4 per thread (.notes/day33_sweep.py times them).
// Also: philox_blocks (the block function on arbitrary counters and keys), philox_stream
// (the blocks of a stream) and philox_normals (the normals of a stream), for the bit-exact
// check and the statistics.

#include <cstdint>

#include "philox.cuh"

namespace P = cuda100::philox;

#ifndef DAY33_THREADS
#define DAY33_THREADS 256
#endif

__device__ __forceinline__ uint2 key2(uint32_t k0, uint32_t k1) { return make_uint2(k0, k1); }
__device__ __forceinline__ unsigned long long sub64(uint32_t s0, uint32_t s1) {
    return ((unsigned long long)s1 << 32) | s0;
}

// Normal number e of the stream, made alone: the whole block e / 4, one pair's Box-Muller,
// one of its two outputs (what v1 and v2 do for every element).
template <bool FAST = false>
__device__ __forceinline__ float normal_at(uint32_t e, unsigned long long sub, uint2 key) {
    const uint4 w = P::philox4x32_10(P::counter_of(e >> 2, sub), key);
    const bool hi = e & 2;
    const uint32_t a = hi ? w.z : w.x, b = hi ? w.w : w.y;
    const float2 z = FAST ? P::box_muller_fast(a, b) : P::box_muller(a, b);
    return (e & 1) ? z.y : z.x;
}

// ---------------------------------------------------------------------------------------------
// v1: noise into a buffer, then an elementwise kernel
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void ddpm_gen_v1(float* __restrict__ z, int n, uint32_t k0, uint32_t k1,
                                       uint32_t s0, uint32_t s1) {
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (uint32_t)n) return;
    z[e] = normal_at(e, sub64(s0, s1), key2(k0, k1));
}

extern "C" __global__ void ddpm_noise_apply_v1(const float* __restrict__ x0,
                                               const float* __restrict__ eps,
                                               const float2* __restrict__ coef,
                                               float* __restrict__ xt, int n, int N) {
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (uint32_t)n) return;
    const float2 c = coef[e / (uint32_t)N];
    xt[e] = fmaf(c.x, x0[e], c.y * eps[e]);
}

extern "C" __global__ void ddpm_step_apply_v1(const float* __restrict__ xt,
                                              const float* __restrict__ eps_theta,
                                              const float* __restrict__ z,
                                              const float4* __restrict__ coef,
                                              float* __restrict__ xp, int n, int N) {
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (uint32_t)n) return;
    const float4 c = coef[e / (uint32_t)N];
    xp[e] = fmaf(c.x, xt[e], fmaf(-c.y, eps_theta[e], c.z * z[e]));
}

// ---------------------------------------------------------------------------------------------
// v2: fused, one thread per element (one Philox block per element)
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void ddpm_noise_v2(const float* __restrict__ x0,
                                         const float2* __restrict__ coef,
                                         float* __restrict__ xt, float* __restrict__ eps, int n,
                                         int N, uint32_t k0, uint32_t k1, uint32_t s0,
                                         uint32_t s1) {
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (uint32_t)n) return;
    const float z = normal_at(e, sub64(s0, s1), key2(k0, k1));
    const float2 c = coef[e / (uint32_t)N];
    xt[e] = fmaf(c.x, x0[e], c.y * z);
    eps[e] = z;
}

extern "C" __global__ void ddpm_step_v2(const float* __restrict__ xt,
                                        const float* __restrict__ eps_theta,
                                        const float4* __restrict__ coef,
                                        float* __restrict__ xp, int n, int N, uint32_t k0,
                                        uint32_t k1, uint32_t s0, uint32_t s1) {
    const uint32_t e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (uint32_t)n) return;
    const float z = normal_at(e, sub64(s0, s1), key2(k0, k1));
    const float4 c = coef[e / (uint32_t)N];
    xp[e] = fmaf(c.x, xt[e], fmaf(-c.y, eps_theta[e], c.z * z));
}

// ---------------------------------------------------------------------------------------------
// v3 / v4: one Philox block per group of 4 elements, float4 loads and stores
// ---------------------------------------------------------------------------------------------

// Which image each of the elements e0 .. e0 + 3 belongs to: one division for e0, then a step
// to the next image each time an element reaches the current image's end (images of N < 4
// elements can end several times inside one group). `coef` is re-read only at a crossing.
template <typename C>
struct ImageWalk {
    const C* __restrict__ coef;
    uint32_t b, end, N;
    C c;
    __device__ __forceinline__ ImageWalk(const C* __restrict__ coef_, uint32_t e0, uint32_t N_)
        : coef(coef_), N(N_) {
        b = e0 / N;
        end = (b + 1) * N;            // < 2^32: b * N <= e0 < n < 2^31 and N < 2^31
        c = __ldg(coef + b);
    }
    __device__ __forceinline__ const C& at(uint32_t e) {   // e = e0, e0 + 1, ... in order
        if (e == end) {
            ++b;
            end += N;
            c = __ldg(coef + b);
        }
        return c;
    }
};

__device__ __forceinline__ float get(const float4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ __forceinline__ void set(float4& v, int k, float x) {
    if (k == 0) v.x = x; else if (k == 1) v.y = x; else if (k == 2) v.z = x; else v.w = x;
}

// x_t and eps for groups g = base + u * blockDim.x (u < U) of 4 elements; the group that holds
// the last n % 4 elements goes scalar.
template <int U, bool FAST>
__device__ __forceinline__ void noise_vec(const float* __restrict__ x0,
                                          const float2* __restrict__ coef,
                                          float* __restrict__ xt, float* __restrict__ eps,
                                          uint32_t n, uint32_t N, uint2 key,
                                          unsigned long long sub) {
    const uint32_t groups = (n + 3) / 4;
    const uint32_t base = blockIdx.x * (U * blockDim.x) + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const uint32_t g = base + u * blockDim.x;
        if (g >= groups) break;
        const uint32_t e0 = 4 * g;
        const float4 z = P::normal4_at<FAST>(g, sub, key);
        ImageWalk<float2> img(coef, e0, N);
        if (e0 + 4 <= n) {
            const float4 x = reinterpret_cast<const float4*>(x0)[g];
            float4 y;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float2 c = img.at(e0 + k);
                set(y, k, fmaf(c.x, get(x, k), c.y * get(z, k)));
            }
            reinterpret_cast<float4*>(xt)[g] = y;
            reinterpret_cast<float4*>(eps)[g] = z;
        } else {
            for (uint32_t k = 0; e0 + k < n; ++k) {
                const float2 c = img.at(e0 + k);
                xt[e0 + k] = fmaf(c.x, x0[e0 + k], c.y * get(z, k));
                eps[e0 + k] = get(z, k);
            }
        }
    }
}

template <int U, bool FAST>
__device__ __forceinline__ void step_vec(const float* __restrict__ xt,
                                         const float* __restrict__ eps_theta,
                                         const float4* __restrict__ coef,
                                         float* __restrict__ xp, uint32_t n, uint32_t N,
                                         uint2 key, unsigned long long sub) {
    const uint32_t groups = (n + 3) / 4;
    const uint32_t base = blockIdx.x * (U * blockDim.x) + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const uint32_t g = base + u * blockDim.x;
        if (g >= groups) break;
        const uint32_t e0 = 4 * g;
        const float4 z = P::normal4_at<FAST>(g, sub, key);
        ImageWalk<float4> img(coef, e0, N);
        if (e0 + 4 <= n) {
            const float4 x = reinterpret_cast<const float4*>(xt)[g];
            const float4 et = reinterpret_cast<const float4*>(eps_theta)[g];
            float4 y;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float4 c = img.at(e0 + k);
                set(y, k, fmaf(c.x, get(x, k), fmaf(-c.y, get(et, k), c.z * get(z, k))));
            }
            reinterpret_cast<float4*>(xp)[g] = y;
        } else {
            for (uint32_t k = 0; e0 + k < n; ++k) {
                const float4 c = img.at(e0 + k);
                xp[e0 + k] = fmaf(c.x, xt[e0 + k], fmaf(-c.y, eps_theta[e0 + k], c.z * get(z, k)));
            }
        }
    }
}

#define NOISE_VEC(NAME, U, FAST)                                                                 \
    extern "C" __global__ void __launch_bounds__(DAY33_THREADS) NAME(                            \
        const float* __restrict__ x0, const float2* __restrict__ coef, float* __restrict__ xt,   \
        float* __restrict__ eps, int n, int N, uint32_t k0, uint32_t k1, uint32_t s0,            \
        uint32_t s1) {                                                                           \
        noise_vec<U, FAST>(x0, coef, xt, eps, n, N, key2(k0, k1), sub64(s0, s1));                \
    }
#define STEP_VEC(NAME, U, FAST)                                                                  \
    extern "C" __global__ void __launch_bounds__(DAY33_THREADS) NAME(                            \
        const float* __restrict__ xt, const float* __restrict__ eps_theta,                       \
        const float4* __restrict__ coef, float* __restrict__ xp, int n, int N, uint32_t k0,      \
        uint32_t k1, uint32_t s0, uint32_t s1) {                                                 \
        step_vec<U, FAST>(xt, eps_theta, coef, xp, n, N, key2(k0, k1), sub64(s0, s1));           \
    }

#ifndef DAY33_V3_U
#define DAY33_V3_U 1      // groups of 4 per thread (the sweep's candidates: 1, 2, 4)
#endif
#ifndef DAY33_V4_U
#define DAY33_V4_U 1
#endif
NOISE_VEC(ddpm_noise_v3, DAY33_V3_U, false)
STEP_VEC(ddpm_step_v3, DAY33_V3_U, false)
NOISE_VEC(ddpm_noise_v4, DAY33_V4_U, true)
STEP_VEC(ddpm_step_v4, DAY33_V4_U, true)

#ifdef DAY33_SWEEP
NOISE_VEC(ddpm_noise_cand_u1_f0, 1, false) STEP_VEC(ddpm_step_cand_u1_f0, 1, false)
NOISE_VEC(ddpm_noise_cand_u2_f0, 2, false) STEP_VEC(ddpm_step_cand_u2_f0, 2, false)
NOISE_VEC(ddpm_noise_cand_u4_f0, 4, false) STEP_VEC(ddpm_step_cand_u4_f0, 4, false)
NOISE_VEC(ddpm_noise_cand_u1_f1, 1, true) STEP_VEC(ddpm_step_cand_u1_f1, 1, true)
NOISE_VEC(ddpm_noise_cand_u2_f1, 2, true) STEP_VEC(ddpm_step_cand_u2_f1, 2, true)
NOISE_VEC(ddpm_noise_cand_u4_f1, 4, true) STEP_VEC(ddpm_step_cand_u4_f1, 4, true)
#endif

// ---------------------------------------------------------------------------------------------
// The generator on its own
// ---------------------------------------------------------------------------------------------

// out[i] = Philox-4x32-10(ctr[i], key[i]): the block function on arbitrary inputs
extern "C" __global__ void philox_blocks(const uint4* __restrict__ ctr, const uint2* __restrict__ key,
                                         uint4* __restrict__ out, int n) {
    const uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (uint32_t)n) out[i] = P::philox4x32_10(ctr[i], key[i]);
}

// out[g] = block g of stream (seed, subsequence): the words every DDPM kernel draws
extern "C" __global__ void philox_stream(uint4* __restrict__ out, int blocks, uint32_t k0,
                                         uint32_t k1, uint32_t s0, uint32_t s1) {
    const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g < (uint32_t)blocks) out[g] = P::philox4x32_10(P::counter_of(g, sub64(s0, s1)), key2(k0, k1));
}

// the first n normals of stream (seed, subsequence), as v3 (accurate) or v4 (fast) draws them
template <bool FAST>
__device__ __forceinline__ void normals(float* __restrict__ out, uint32_t n, uint2 key,
                                        unsigned long long sub) {
    const uint32_t g = blockIdx.x * blockDim.x + threadIdx.x;
    const uint32_t e0 = 4 * g;
    if (e0 >= n) return;
    const float4 z = P::normal4_at<FAST>(g, sub, key);
    if (e0 + 4 <= n) {
        reinterpret_cast<float4*>(out)[g] = z;
    } else {
        for (uint32_t k = 0; e0 + k < n; ++k) out[e0 + k] = get(z, k);
    }
}
extern "C" __global__ void philox_normals(float* out, int n, uint32_t k0, uint32_t k1,
                                          uint32_t s0, uint32_t s1) {
    normals<false>(out, n, key2(k0, k1), sub64(s0, s1));
}
extern "C" __global__ void philox_normals_fast(float* out, int n, uint32_t k0, uint32_t k1,
                                               uint32_t s0, uint32_t s1) {
    normals<true>(out, n, key2(k0, k1), sub64(s0, s1));
}
