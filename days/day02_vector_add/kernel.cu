// Day 2: vector add, c = a + b, and the three ways to map threads onto it.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 2
//
// Versions:
//   v1  one element per thread; the grid covers n exactly (ceil(n / 256) blocks)
//   v2  grid-stride loop: a fixed grid (a few blocks per SM) walks the whole array, so one
//       launch shape serves any n and each thread has several loads in flight
//   v3  v2 with float4: 16-byte loads/stores, a quarter of the instructions per byte
//   v4  no loop at all: one float4 per thread and as many blocks as the array needs; the few
//       threads past the last float4 add the n % 4 leftover floats
#include <cstdint>

extern "C" __global__ void vadd_v1(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];  // the guard: the last block usually overhangs n
}

extern "C" __global__ void vadd_v2(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        c[i] = a[i] + b[i];
}

// float4 body over n / 4 vectors, unrolled twice so each thread issues two independent
// 16-byte loads of a and of b before it needs either; the scalar tail (n % 4) at the end.
extern "C" __global__ void vadd_v3(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    const int64_t n4 = n / 4;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + stride < n4; i += 2 * stride) {
        const float4 x0 = a4[i], y0 = b4[i];
        const float4 x1 = a4[i + stride], y1 = b4[i + stride];
        c4[i] = make_float4(x0.x + y0.x, x0.y + y0.y, x0.z + y0.z, x0.w + y0.w);
        c4[i + stride] = make_float4(x1.x + y1.x, x1.y + y1.y, x1.z + y1.z, x1.w + y1.w);
    }
    if (i < n4) {
        const float4 x0 = a4[i], y0 = b4[i];
        c4[i] = make_float4(x0.x + y0.x, x0.y + y0.y, x0.z + y0.z, x0.w + y0.w);
    }
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (t < n - 4 * n4) c[4 * n4 + t] = a[4 * n4 + t] + b[4 * n4 + t];
}

// v4: the GPU's block scheduler does the looping. Each thread adds ONE float4 and leaves; the
// grid has ceil((n / 4 + n % 4) / 256) blocks (2^28 floats: 262144 blocks), which the hardware
// starts in order as earlier ones finish, so at any moment the running blocks work on one
// contiguous stretch of the arrays. On an H200 this moved the 2-read-1-write mix 4-5% faster
// than a resident wave with a grid-stride loop (.notes/stream_sweep.py, 2026-11-23).
extern "C" __global__ void vadd_v4(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const int64_t n4 = n / 4;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        const float4 x = reinterpret_cast<const float4*>(a)[i];
        const float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    } else if (i < n4 + (n - 4 * n4)) {
        const int64_t j = 4 * n4 + (i - n4);  // one of the n % 4 leftover floats
        c[j] = a[j] + b[j];
    }
}
