// Day 1: hello CUDA. Who am I (block, thread, warp, lane, SM), hello from chosen threads,
// and the first real kernel: a copy, timed against the driver's own device-to-device copy.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 1
//
// Versions (all compute y = x for n floats):
//   v1  one element per thread: the grid has ceil(n / 256) blocks
//   v2  one float4 (16 bytes) per thread: a quarter of the threads, 16-byte loads and stores
#include <cstdint>
#include <cstdio>

__device__ __forceinline__ unsigned sm_id() {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));  // which multiprocessor runs this thread
    return id;
}

// Each thread prints a line if it is one of the chosen ones (every `every`-th thread of a block).
extern "C" __global__ void hello(int every) {
    if (threadIdx.x % every == 0) {
        printf("hello from block %d, thread %3d (warp %d, lane %2d) on SM %u\n", blockIdx.x,
               threadIdx.x, threadIdx.x / warpSize, threadIdx.x % warpSize, sm_id());
    }
}

// Every thread writes what it knows about itself, so the host can check the indexing:
// ids[6 * g + 0..5] = global index, block, thread, warp, lane, SM.
// g fits an int because the host keeps n + blockDim.x below 2^31; 6 * g may not (it passes
// 2^31 at g = 357913942), so the row offset is computed in 64 bits.
extern "C" __global__ void whoami(int* ids, int n) {
    const int g = blockIdx.x * blockDim.x + threadIdx.x;
    if (g >= n) return;  // the last block may be partly outside the array
    int* me = ids + 6 * (int64_t)g;
    me[0] = g;
    me[1] = blockIdx.x;
    me[2] = threadIdx.x;
    me[3] = threadIdx.x / warpSize;
    me[4] = threadIdx.x % warpSize;
    me[5] = (int)sm_id();
}

// v1: one element per thread. Consecutive threads touch consecutive floats, so each warp
// reads and writes one contiguous 128-byte line: coalesced.
extern "C" __global__ void copy_v1(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i];
}

// v2: one float4 per thread (16-byte LDG.128 / STG.128), then the n % 4 leftovers.
// cudaMalloc returns 256-byte aligned memory, so x and y can be read as float4.
extern "C" __global__ void copy_v2(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t n4 = n / 4;
    if (i < n4) reinterpret_cast<float4*>(y)[i] = reinterpret_cast<const float4*>(x)[i];
    if (i < n - 4 * n4) y[4 * n4 + i] = x[4 * n4 + i];  // the tail, by the first threads
}
