// Day 59: fused dropout with a counter-based generator, forward and backward, no mask stored.
//
//   forward   y  = keep_i ? x_i  * s : 0        s = 1 / (1 - p)   (0 when p = 1)
//   backward  dx = keep_i ? dy_i * s : 0        the SAME keep_i, made again from (seed, offset)
//   keep_i    = w_g < thr,  thr = round((1 - p) 2^32),  w_g word g = offset + i of day 58's
//               stream (cuRAND's Philox4_32_10 host-API stream: chunk g / 4 is Philox block
//               (g / 4) >> 16 of subsequence (g / 4) & 0xFFFF, key = seed)
//
// So the mask is day 58's bernoulli(1 - p) at the same (seed, offset): common/rng.py can rebuild
// it, numpy can check it, and the backward pass never reads a stored mask (torch's dropout writes
// a byte per element in the forward and reads it back in the backward). Forward and backward
// are the same kernel with other pointers. A dropped element is 0 even where x is inf or NaN (a
// select, not a multiply by 0).
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I common/cuda -cubin -Xptxas -v kernel.cu
// Run:               python run_day.py 59
//
// Versions:
//   v1  one element per thread: the whole Philox block of its word for one bit of decision (3
//       of 4 words thrown away), scalar load and store.
//   v2  one chunk of 4 per thread: one Philox call decides 4 elements, float4 load and store
//       when the chunk lies inside the tensor and is 16-byte aligned (offset % 4 == 0); the
//       partial first and last chunks element by element.
//   v3  U chunks per thread, all U float4 loads issued before any Philox work (U x 16 bytes in
//       flight per thread to cover DRAM latency), a warp's accesses 512 contiguous bytes;
//       streaming cache hints (ld.global.cs / st.global.cs: every byte is touched once).
//       dropout_v3 is U = 4 with the hints; candidates dropout_v3_u<U>_cs<0|1> for
//       .notes/day59_sweep.py.
//   Fusion (extras): dropout_add_v3: out = residual + dropout(x + bias[col]) over [rows, C], the
//       transformer's "attention output + bias, dropout, residual" in one pass (3 reads, 1 write)
//       instead of three elementwise kernels.
//   copy_ceiling: a float4 copy with v3's layout, for the same-bytes comparison.

#include <cstdint>

#include "philox.cuh"

namespace P = cuda100::philox;

#ifndef DAY59_THREADS
#define DAY59_THREADS 256
#endif

struct Drop {
    uint2 key;
    unsigned long long offset;   // stream word of element 0
    unsigned long long thr;      // keep if word < thr, thr in [0, 2^32]
    float scale;                 // 1 / (1 - p), or 0
};

__device__ __forceinline__ Drop make_drop(uint32_t k0, uint32_t k1, unsigned long long offset,
                                          unsigned long long thr, float scale) {
    Drop d;
    d.key = make_uint2(k0, k1); d.offset = offset; d.thr = thr; d.scale = scale;
    return d;
}

__device__ __forceinline__ float apply(float x, uint32_t w, const Drop& d) {
    return P::bernoulli_word(w, d.thr) ? x * d.scale : 0.0f;
}

__device__ __forceinline__ float4 apply4(float4 x, uint4 w, const Drop& d) {
    return make_float4(apply(x.x, w.x, d), apply(x.y, w.y, d), apply(x.z, w.z, d),
                       apply(x.w, w.w, d));
}

__device__ __forceinline__ uint32_t word_of(uint4 w, int k) {
    return k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
}

// --- v1: one element per thread -----------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(DAY59_THREADS)
dropout_v1(const float* __restrict__ x, float* __restrict__ y, int n, uint32_t k0, uint32_t k1,
           unsigned long long offset, unsigned long long thr, float scale) {
    const Drop d = make_drop(k0, k1, offset, thr, scale);
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const unsigned long long g = offset + (unsigned long long)i;
    const uint4 w = P::curand_block(g >> 2, d.key);
    y[i] = apply(x[i], word_of(w, (int)(g & 3)), d);
}

// --- v2 / v3: chunks of 4 ---------------------------------------------------------------------
// Local chunk t covers elements base .. base + 3 with base = 4t - offset % 4.
__device__ __forceinline__ int chunks_of(int n, unsigned long long offset) {
    return (int)(((offset & 3) + (unsigned long long)n + 3) >> 2);
}

__device__ __forceinline__ bool vec_ok(const float* x, const float* y, unsigned long long offset) {
    return ((offset & 3) == 0) && (((reinterpret_cast<uintptr_t>(x) | reinterpret_cast<uintptr_t>(y)) & 15) == 0);
}

// a chunk that is not a whole aligned float4: element by element
__device__ __forceinline__ void chunk_scalar(const float* x, float* y, int n, int base, uint4 w,
                                             const Drop& d) {
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int e = base + k;
        if (e >= 0 && e < n) y[e] = apply(x[e], word_of(w, k), d);
    }
}

extern "C" __global__ void __launch_bounds__(DAY59_THREADS)
dropout_v2(const float* __restrict__ x, float* __restrict__ y, int n, uint32_t k0, uint32_t k1,
           unsigned long long offset, unsigned long long thr, float scale) {
    const Drop d = make_drop(k0, k1, offset, thr, scale);
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= chunks_of(n, offset)) return;
    const int base = 4 * t - (int)(offset & 3);
    const uint4 w = P::curand_block((offset >> 2) + (unsigned)t, d.key);
    if (vec_ok(x, y, offset) && base + 4 <= n) {   // base >= 0 when offset % 4 == 0
        const float4 v = *reinterpret_cast<const float4*>(x + base);
        *reinterpret_cast<float4*>(y + base) = apply4(v, w, d);
    } else {
        chunk_scalar(x, y, n, base, w, d);
    }
}

template <bool CS>
__device__ __forceinline__ float4 load4(const float* p) {
    return CS ? __ldcs(reinterpret_cast<const float4*>(p)) : __ldg(reinterpret_cast<const float4*>(p));
}

template <bool CS>
__device__ __forceinline__ void store4(float* p, float4 v) {
    if (CS) __stcs(reinterpret_cast<float4*>(p), v);
    else *reinterpret_cast<float4*>(p) = v;
}

// U chunks per thread: chunk u of thread x in block b is (b U + u) blockDim + x. The fast path
// (aligned, every chunk of the block's span inside the tensor) loads all U float4 first.
template <int U, bool CS>
__device__ __forceinline__ void dropout_chunks(const float* __restrict__ x, float* __restrict__ y,
                                               int n, const Drop& d) {
    const int m = chunks_of(n, d.offset);
    const int t0 = blockIdx.x * U * blockDim.x + threadIdx.x;
    const bool whole = vec_ok(x, y, d.offset) && 4 * (t0 + (U - 1) * (int)blockDim.x) + 4 <= n;
    if (whole) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = load4<CS>(x + 4 * (t0 + u * (int)blockDim.x));
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int t = t0 + u * blockDim.x;
            const uint4 w = P::curand_block((d.offset >> 2) + (unsigned)t, d.key);
            store4<CS>(y + 4 * t, apply4(v[u], w, d));
        }
        return;
    }
    const bool vec = vec_ok(x, y, d.offset);
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int t = t0 + u * blockDim.x;
        if (t >= m) break;
        const int base = 4 * t - (int)(d.offset & 3);
        const uint4 w = P::curand_block((d.offset >> 2) + (unsigned)t, d.key);
        if (vec && base + 4 <= n) store4<CS>(y + base, apply4(load4<CS>(x + base), w, d));
        else chunk_scalar(x, y, n, base, w, d);
    }
}

#define DAY59_ARGS const float* __restrict__ x, float* __restrict__ y, int n, uint32_t k0, \
                   uint32_t k1, unsigned long long offset, unsigned long long thr, float scale

extern "C" __global__ void __launch_bounds__(DAY59_THREADS) dropout_v3(DAY59_ARGS) {
    dropout_chunks<4, true>(x, y, n, make_drop(k0, k1, offset, thr, scale));
}

#define DAY59_CAND(U, CS)                                                                   \
    extern "C" __global__ void __launch_bounds__(DAY59_THREADS)                              \
    dropout_v3_u##U##_cs##CS(DAY59_ARGS) {                                                   \
        dropout_chunks<U, CS>(x, y, n, make_drop(k0, k1, offset, thr, scale));               \
    }
DAY59_CAND(1, 0)
DAY59_CAND(2, 0)
DAY59_CAND(4, 0)
DAY59_CAND(2, 1)
DAY59_CAND(4, 1)
DAY59_CAND(8, 1)

// --- fusion: out = residual + dropout(x + bias[col]) over [rows, C] ----------------------------
// Element i is (row i / C, column i % C); its stream word is offset + i, as in dropout_v3.
// float4 path when C % 4 == 0 and offset % 4 == 0 (a chunk never crosses a row then); else
// element by element. 2 chunks per thread.
extern "C" __global__ void __launch_bounds__(DAY59_THREADS)
dropout_add_v3(const float* __restrict__ x, const float* __restrict__ bias,
               const float* __restrict__ res, float* __restrict__ out, int n, int C, uint32_t k0,
               uint32_t k1, unsigned long long offset, unsigned long long thr, float scale) {
    const Drop d = make_drop(k0, k1, offset, thr, scale);
    const int m = chunks_of(n, offset);
    const int t0 = blockIdx.x * 2 * blockDim.x + threadIdx.x;
    const bool vec = (C % 4 == 0) && vec_ok(x, out, offset) &&
                     (((reinterpret_cast<uintptr_t>(res) | reinterpret_cast<uintptr_t>(bias)) & 15) == 0);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const int t = t0 + u * blockDim.x;
        if (t >= m) break;
        const int base = 4 * t - (int)(offset & 3);
        const uint4 w = P::curand_block((offset >> 2) + (unsigned)t, d.key);
        if (vec && base + 4 <= n) {
            const float4 xv = __ldcs(reinterpret_cast<const float4*>(x + base));
            const float4 rv = __ldcs(reinterpret_cast<const float4*>(res + base));
            const float4 bv = __ldg(reinterpret_cast<const float4*>(bias + base % C));
            const float4 a = apply4(make_float4(xv.x + bv.x, xv.y + bv.y, xv.z + bv.z, xv.w + bv.w), w, d);
            __stcs(reinterpret_cast<float4*>(out + base),
                   make_float4(rv.x + a.x, rv.y + a.y, rv.z + a.z, rv.w + a.w));
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int e = base + k;
                if (e >= 0 && e < n)
                    out[e] = res[e] + apply(x[e] + bias[e % C], word_of(w, k), d);
            }
        }
    }
}

// The same-bytes copy (float4, 4 per thread, v3's layout): what a dropout pass cannot beat.
extern "C" __global__ void __launch_bounds__(DAY59_THREADS)
copy_ceiling(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    const int t0 = blockIdx.x * 4 * blockDim.x + threadIdx.x;
#pragma unroll
    for (int u = 0; u < 4; ++u) {
        const int t = t0 + u * blockDim.x;
        if (t < n4) __stcs(y + t, __ldcs(x + t));
    }
}
