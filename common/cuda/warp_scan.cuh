// Warp- and block-level inclusive scans with shuffles (taught on day 23, warp_shuffle; day 17
// builds scans from shared memory). Every thread of the warp must call the warp_* functions
// (full mask); every thread of the block must call block_inclusive_scan.
#pragma once

namespace cuda100 {

// Inclusive prefix sum over the 32 lanes (Hillis-Steele with __shfl_up_sync): lane i gets
// v_0 + ... + v_i. At step d lane i adds the value d lanes below it; lanes below d keep theirs
// (__shfl_up_sync returns a lane its own value when lane - d < 0, so the guard is needed).
__device__ __forceinline__ float warp_inclusive_scan(float v) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    return v;
}

// The same for integers (counts, offsets).
__device__ __forceinline__ int warp_inclusive_scan(int v) {
    const int lane = threadIdx.x & 31;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const int up = __shfl_up_sync(0xffffffffu, v, d);
        if (lane >= d) v += up;
    }
    return v;
}

// Inclusive prefix sum over the block (blockDim.x a multiple of 32, at most 1024), of floats or
// ints. `scratch` holds 32 values of shared memory. Each warp scans its lanes; the warps' totals
// go to scratch, warp 0 scans them, and every thread adds the total of the warps before its own.
// Safe to call twice in a row (the leading barrier protects scratch).
template <typename T>
__device__ __forceinline__ T block_inclusive_scan(T v, T* scratch) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_inclusive_scan(v);
    __syncthreads();
    if (lane == 31) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        T t = lane < warps ? scratch[lane] : T(0);
        t = warp_inclusive_scan(t);
        if (lane < warps) scratch[lane] = t;
    }
    __syncthreads();
    return warp > 0 ? v + scratch[warp - 1] : v;
}

}  // namespace cuda100
