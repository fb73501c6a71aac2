// Day 6: the roll call. Python drives the GPU: SourceModule, GPUArray, plain and prepared
// calls, streams, raw pointers shared with torch / CuPy, device printf, and what a launch costs.
//
//   ids[i] = i,   y[i] = alpha * x[i]        for i in [0, n)
//
// Every thread answers the roll call with its own number (ids) and its scaled value (y): an
// unanswered or doubly answered name shows up as a wrong integer, which is checked exactly.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 6
//
// Versions (the same arithmetic; they differ in how the grid covers the array and in how
// driver.py launches them):
//   v1  one element per thread, ceil(n / 256) blocks; launched with a plain call fn(...)
//   v2  grid-stride loop over one full wave of blocks (SMs x 8 on Hopper); prepared call
//   v3  grid-stride over 4-element groups: 16-byte loads and stores (float4 / int4),
//       streaming cache hints; the n % 4 tail by the first threads; prepared call
// Helpers (not versions):
//   roll_call_printf  threads whose numbers the host lists print "thread N reporting"
//   launch_probe      a near-empty kernel that counts its launches (the launch-overhead table)
#include <cstdint>
#include <cstdio>

extern "C" __global__ void roll_call_v1(const float* __restrict__ x, int* __restrict__ ids,
                                        float* __restrict__ y, float alpha, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {  // the last block may reach past the end
        ids[i] = (int)i;
        y[i] = alpha * x[i];
    }
}

extern "C" __global__ void roll_call_v2(const float* __restrict__ x, int* __restrict__ ids,
                                        float* __restrict__ y, float alpha, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        ids[i] = (int)i;
        y[i] = alpha * x[i];
    }
}

// x, ids and y must be 16-byte aligned (cudaMalloc / GPUArray / torch allocations are; a
// pointer into the middle of an array may not be: driver.py checks before launching).
extern "C" __global__ void roll_call_v3(const float* __restrict__ x, int* __restrict__ ids,
                                        float* __restrict__ y, float alpha, int64_t n) {
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t tid = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t n4 = n / 4;
    const float4* x4 = reinterpret_cast<const float4*>(x);
    int4* ids4 = reinterpret_cast<int4*>(ids);
    float4* y4 = reinterpret_cast<float4*>(y);
#pragma unroll 2
    for (int64_t v = tid; v < n4; v += stride) {
        const float4 a = __ldcs(x4 + v);  // read once: evict-first
        const int i = (int)(4 * v);
        __stcs(ids4 + v, make_int4(i, i + 1, i + 2, i + 3));
        __stcs(y4 + v, make_float4(alpha * a.x, alpha * a.y, alpha * a.z, alpha * a.w));
    }
    const int64_t t = 4 * n4 + tid;  // the last n % 4 elements (at most 3)
    if (t < n) {
        ids[t] = (int)t;
        y[t] = alpha * x[t];
    }
}

// The threads the host names (a device array of global thread numbers) print one line each
// and tick their name on the sheet. Numbers no thread has are never answered.
extern "C" __global__ void roll_call_printf(const int* __restrict__ called, int ncalled,
                                            int* __restrict__ answered) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    for (int k = 0; k < ncalled; ++k) {
        if (called[k] == g) {
            printf("thread %d reporting (block %d, warp %d, lane %d)\n", g, blockIdx.x,
                   threadIdx.x / 32, threadIdx.x % 32);
            atomicAdd(answered + k, 1);
        }
    }
}

// As little work as a kernel can do and still prove it ran: thread 0 of block 0 adds `step`
// (the host passes 1) to a counter. Its arguments (a pointer, a float, an int64) are packed
// like a real kernel's; `alpha` is not used.
extern "C" __global__ void launch_probe(unsigned long long* count, float alpha, int64_t step) {
    if (blockIdx.x == 0 && threadIdx.x == 0) atomicAdd(count, (unsigned long long)step);
}
