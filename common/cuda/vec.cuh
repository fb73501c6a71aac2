// 16-byte loads and stores (taught on day 2, vector_add, and day 5 v4): a float4 access moves
// four floats in one instruction, but needs a 16-byte aligned address. A row of a row-major
// [rows, cols] float matrix starts 16-byte aligned only when cols % 4 == 0 (and the base
// pointer is aligned, as every cudaMalloc'd buffer is).
#pragma once

namespace cuda100 {

__device__ __forceinline__ float4 load4(const float* p) { return *reinterpret_cast<const float4*>(p); }

// read-only path, not kept in L1 (streamed data read once)
__device__ __forceinline__ float4 load4_stream(const float* p) {
    return __ldcs(reinterpret_cast<const float4*>(p));
}

__device__ __forceinline__ void store4(float* p, float4 v) { *reinterpret_cast<float4*>(p) = v; }

__device__ __forceinline__ bool aligned16(const void* p) {
    return (reinterpret_cast<unsigned long long>(p) & 15ull) == 0;
}

__device__ __forceinline__ float4 make4(float a) { return make_float4(a, a, a, a); }

}  // namespace cuda100
