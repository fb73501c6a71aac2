// Day 58: cuRAND's Philox4_32_10 stream by hand: 32-bit words, uniform floats, normal floats
// and Bernoulli draws, each the same bits curandGenerate / curandGenerateUniform /
// curandGenerateNormal(0, 1) write for the same seed and offset (common/cuda/philox.cuh has
// the block function, the host API's counter layout and the float mappings).
//
//   element i of a call with generator offset o is word g = o + i of the stream; word g is word
//   g % 4 of block philox4x32_10(counter(chunk g / 4), key(seed)), and chunk j's counter is
//   (block j >> 16, subsequence j & 0xFFFF): cuRAND's host API runs 65536 states side by side.
//
// Outputs (template DIST): U32 the words; UNIFORM fma(u, a, b) with u = w 2^-32 + 2^-33 in
// (0, 1]; NORMAL fma(z, a, b) with z from Box-Muller on the word pair (g & ~1, g | 1) (even g
// r sin v, odd g r cos v); BERNOULLI a where w < thr (thr = round(p 2^32)), else b. For
// UNIFORM and NORMAL, (a, b) = (1, 0) writes z itself, untouched (-0.0 stays -0.0, as cuRAND's).
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I common/cuda -cubin -Xptxas -v kernel.cu
// Run:               python run_day.py 58
//
// Versions (the day's case is NORMAL; rng_<dist>_<version> exists for every distribution):
//   v1  one output per thread: the thread computes the whole Philox block of its word (ten
//       rounds) and keeps one word; for a normal, one whole Box-Muller pair and keeps one half.
//       4x the Philox work and 2x the Box-Muller work of the stream, scalar stores.
//   v2  one chunk per thread: one Philox call -> four outputs, a float4 store (16 bytes) when
//       the chunk lies inside the output and the output is 16-byte aligned there (offset % 4
//       == 0); the partial first and last chunks element by element.
//   v3  v2 with U chunks per thread (U Philox calls in flight: independent IMAD chains to hide
//       latency) and the chunks of a warp contiguous (each store instruction of a warp writes
//       512 contiguous bytes); optional streaming stores (st.global.cs: the output is not read
//       again by this kernel, so evict it first). Candidates rng_<dist>_v3_u<U>_cs<0|1> for
//       .notes/day58_sweep.py; v3 itself is u2, cs0.
//   fill_ceiling: float4 stores of a constant, the write-only ceiling the versions are held to.

#include <cstdint>

#include "philox.cuh"

namespace P = cuda100::philox;

enum Dist { U32 = 0, UNIFORM = 1, NORMAL = 2, BERNOULLI = 3 };

#ifndef DAY58_THREADS
#define DAY58_THREADS 256
#endif

struct Args {
    uint32_t* out;
    int n;                       // outputs
    uint2 key;                   // seed
    unsigned long long offset;   // generator offset (words)
    float a, b;                  // affine (UNIFORM, NORMAL) or the two values (BERNOULLI)
    unsigned long long thr;      // BERNOULLI threshold in [0, 2^32]
};

__device__ __forceinline__ Args make_args(uint32_t* out, int n, uint32_t k0, uint32_t k1,
                                          unsigned long long offset, float a, float b,
                                          unsigned long long thr) {
    Args p;
    p.out = out; p.n = n; p.key = make_uint2(k0, k1); p.offset = offset; p.a = a; p.b = b;
    p.thr = thr;
    return p;
}

__device__ __forceinline__ uint32_t affine(float z, const Args& p) {
    // (1, 0) leaves z's bits alone: fmaf(-0.0f, 1, 0) would be +0.0f
    return __float_as_uint((p.a == 1.0f && p.b == 0.0f) ? z : fmaf(z, p.a, p.b));
}

// The four outputs of one chunk (as 32-bit patterns).
template <int DIST>
__device__ __forceinline__ uint4 chunk_values(uint4 w, const Args& p) {
    if (DIST == U32) return w;
    if (DIST == UNIFORM)
        return make_uint4(affine(P::uniform_curand(w.x), p), affine(P::uniform_curand(w.y), p),
                          affine(P::uniform_curand(w.z), p), affine(P::uniform_curand(w.w), p));
    if (DIST == NORMAL) {
        const float4 z = P::normal4_curand(w);
        return make_uint4(affine(z.x, p), affine(z.y, p), affine(z.z, p), affine(z.w, p));
    }
    const uint32_t one = __float_as_uint(p.a), zero = __float_as_uint(p.b);
    return make_uint4(P::bernoulli_word(w.x, p.thr) ? one : zero,
                      P::bernoulli_word(w.y, p.thr) ? one : zero,
                      P::bernoulli_word(w.z, p.thr) ? one : zero,
                      P::bernoulli_word(w.w, p.thr) ? one : zero);
}

// Output word g alone (v1): the block of its chunk, then one value.
template <int DIST>
__device__ __forceinline__ uint32_t one_value(unsigned long long g, const Args& p) {
    const uint4 w = P::curand_block(g >> 2, p.key);
    const int k = (int)(g & 3);
    if (DIST == NORMAL) {
        const bool hi = k & 2;                       // pair (z, w) or (x, y)
        const float2 z = P::box_muller_curand(hi ? w.z : w.x, hi ? w.w : w.y);
        return affine((k & 1) ? z.y : z.x, p);
    }
    const uint32_t x = k == 0 ? w.x : k == 1 ? w.y : k == 2 ? w.z : w.w;
    const uint4 v = chunk_values<DIST>(make_uint4(x, x, x, x), p);   // (the compiler keeps one)
    return v.x;
}

template <int DIST>
__device__ __forceinline__ void v1(const Args& p) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < p.n) p.out[i] = one_value<DIST>(p.offset + (unsigned long long)i, p);
}

// Local chunk t covers outputs base .. base + 3, base = 4t - offset % 4 (the first chunk may
// start before output 0, the last end after output n - 1).
template <int DIST, bool CS>
__device__ __forceinline__ void store_chunk(int t, const Args& p) {
    const int base = 4 * t - (int)(p.offset & 3);
    const uint4 v = chunk_values<DIST>(P::curand_block((p.offset >> 2) + (unsigned)t, p.key), p);
    uint32_t* dst = p.out + base;
    const bool vec = ((p.offset & 3) == 0) && ((reinterpret_cast<uintptr_t>(p.out) & 15) == 0);
    if (vec && base >= 0 && base + 4 <= p.n) {     // the whole chunk, 16-byte aligned
        if (CS) __stcs(reinterpret_cast<uint4*>(dst), v);
        else *reinterpret_cast<uint4*>(dst) = v;
        return;
    }
    const uint32_t vals[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int k = 0; k < 4; ++k)
        if (base + k >= 0 && base + k < p.n) dst[k] = vals[k];
}

__device__ __forceinline__ int chunks_of(const Args& p) {
    return (int)(((p.offset & 3) + (unsigned long long)p.n + 3) >> 2);
}

template <int DIST>
__device__ __forceinline__ void v2(const Args& p) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < chunks_of(p)) store_chunk<DIST, false>(t, p);
}

// U chunks per thread: a block covers U * blockDim consecutive chunks, chunk u of thread x is
// (block * U + u) * blockDim + x, so the lanes of a warp store 32 consecutive chunks at once.
template <int DIST, int U, bool CS>
__device__ __forceinline__ void v3(const Args& p) {
    const int m = chunks_of(p);
    const int t0 = blockIdx.x * U * blockDim.x + threadIdx.x;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int t = t0 + u * blockDim.x;
        if (t < m) store_chunk<DIST, CS>(t, p);
    }
}

#define DAY58_ARGS uint32_t* __restrict__ out, int n, uint32_t k0, uint32_t k1, \
                   unsigned long long offset, float a, float b, unsigned long long thr
#define DAY58_PASS make_args(out, n, k0, k1, offset, a, b, thr)

#define DAY58_VERSIONS(NAME, DIST)                                                         \
    extern "C" __global__ void __launch_bounds__(DAY58_THREADS)                             \
    rng_##NAME##_v1(DAY58_ARGS) { v1<DIST>(DAY58_PASS); }                                   \
    extern "C" __global__ void __launch_bounds__(DAY58_THREADS)                             \
    rng_##NAME##_v2(DAY58_ARGS) { v2<DIST>(DAY58_PASS); }                                   \
    extern "C" __global__ void __launch_bounds__(DAY58_THREADS)                             \
    rng_##NAME##_v3(DAY58_ARGS) { v3<DIST, 2, false>(DAY58_PASS); }

DAY58_VERSIONS(u32, U32)
DAY58_VERSIONS(uniform, UNIFORM)
DAY58_VERSIONS(normal, NORMAL)
DAY58_VERSIONS(bernoulli, BERNOULLI)

// sweep candidates of v3 (.notes/day58_sweep.py): U chunks per thread, streaming stores or not
#define DAY58_CAND(NAME, DIST, U, CS)                                                      \
    extern "C" __global__ void __launch_bounds__(DAY58_THREADS)                             \
    rng_##NAME##_v3_u##U##_cs##CS(DAY58_ARGS) { v3<DIST, U, CS>(DAY58_PASS); }

DAY58_CAND(normal, NORMAL, 1, 0)
DAY58_CAND(normal, NORMAL, 2, 0)
DAY58_CAND(normal, NORMAL, 4, 0)
DAY58_CAND(normal, NORMAL, 2, 1)
DAY58_CAND(normal, NORMAL, 4, 1)
DAY58_CAND(uniform, UNIFORM, 1, 0)
DAY58_CAND(uniform, UNIFORM, 2, 0)
DAY58_CAND(uniform, UNIFORM, 4, 0)
DAY58_CAND(uniform, UNIFORM, 2, 1)
DAY58_CAND(uniform, UNIFORM, 4, 1)

// The write-only ceiling: n4 float4 stores of a constant, 2 per thread, laid out as v3's.
extern "C" __global__ void __launch_bounds__(DAY58_THREADS)
fill_ceiling(uint4* __restrict__ out, int n4, uint32_t value) {
    const int t0 = blockIdx.x * 2 * blockDim.x + threadIdx.x;
    const uint4 v = make_uint4(value, value, value, value);
#pragma unroll
    for (int u = 0; u < 2; ++u) {
        const int t = t0 + u * blockDim.x;
        if (t < n4) out[t] = v;
    }
}
