// Warp- and block-level reductions (taught on day 5, shared softmax, and day 14, reduce_sum),
// and the online-softmax state (day 5 v3). Every thread of a warp must call the warp_*
// functions (full mask); every thread of the block must call the block_* functions.
#pragma once

namespace cuda100 {

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  // every lane holds the sum
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Sum over the block (blockDim.x a multiple of 32, at most 1024). `scratch` holds 32 floats
// of shared memory; the result is returned to every thread. Safe to call twice in a row: the
// leading barrier keeps a second call from overwriting scratch while the first is read.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : 0.f;
    return warp_sum(v);
}

__device__ __forceinline__ float block_max(float v, float* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    v = lane < warps ? scratch[lane] : -INFINITY;
    return warp_max(v);
}

// Online softmax (day 5 v3): the running maximum m and the sum s of exp(x - m) over the values
// seen so far. Two states merge exactly: rescale the one with the smaller maximum.
struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum maxsum_empty() { return {-INFINITY, 0.f}; }

__device__ __forceinline__ MaxSum maxsum_merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    if (m == -INFINITY) return {m, 0.f};  // both empty: no exp(-inf - -inf) = NaN
    return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
}

__device__ __forceinline__ void maxsum_add(MaxSum& st, float x) { st = maxsum_merge(st, {x, 1.f}); }

__device__ __forceinline__ MaxSum warp_maxsum(MaxSum st) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)};
        st = maxsum_merge(st, other);
    }
    return st;
}

}  // namespace cuda100
