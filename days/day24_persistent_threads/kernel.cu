// Day 24: persistent kernels and work queues.
//
// The workload: T independent TASKS, task t = the softmax of the segment
// x[off[t] .. off[t+1]) of a flat array (ragged lengths: uniform small, or power-law skewed),
// written to the same range of y. Every version runs the same block-level task code
// (segment_softmax: one block of 256 threads, an online max+sum pass, then a write pass);
// they differ in how tasks reach blocks:
//   v1  seg_softmax_v1_task        one launch per task (a host loop of T launches, grid = 1)
//   v2  seg_softmax_v2_block       one launch, one block per task (grid = T)
//   v3  seg_softmax_v3_static      persistent: grid = SMs x blocks that fit on an SM; block b
//                                  takes tasks b, b + G, b + 2G, ... (a static split)
//   v4  seg_softmax_v4_queue       persistent, a work queue: a block takes the next task from
//                                  an atomic counter (zeroed before each launch by a memset in
//                                  the same stream) whenever it finishes one
//   v5  seg_softmax_v5_lpt         v4 over the tasks ordered largest first (the order is an
//                                  input, sorted once on the host): the longest tasks start
//                                  first, so no long task starts last (Graham's LPT rule)
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day24_persistent_threads/kernel.cu
#include "warp.cuh"

using namespace cuda100;

constexpr int THREADS = 256;
constexpr int WARPS = THREADS / 32;

constexpr int UNROLL = 4;  // loads a thread issues before using any: 4 KB in flight a block

// Online (max, sum) with one exp per element: a new maximum rescales the sum.
__device__ __forceinline__ void online_add(MaxSum& st, float v) {
    if (v > st.m) {
        st.s = st.s * __expf(st.m - v) + 1.f;  // first element: 0 * exp(-inf) + 1 = 1
        st.m = v;
    } else {
        st.s += __expf(v - st.m);
    }
}

// Softmax of x[begin, begin + len) into y, by the whole block (every thread must call it).
// Pass 1: each thread an online (max, sum) over its strided elements, UNROLL loads in flight,
// merged across the block (warp shuffles, then the 8 warp states through shared memory).
// Pass 2: write exp(x - m) / s (the second read of x mostly hits L1/L2: a task is at most a
// few hundred KB and was just read). Ends with a barrier, so the caller may reuse shared
// memory for the next task.
__device__ __forceinline__ void segment_softmax(const float* __restrict__ x, float* __restrict__ y,
                                                int begin, int len) {
    __shared__ MaxSum part[WARPS];
    __shared__ MaxSum total;
    const float* xs = x + begin;
    float* ys = y + begin;
    MaxSum st = maxsum_empty();
    for (int i0 = threadIdx.x; i0 < len; i0 += UNROLL * THREADS) {
        float v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int i = i0 + u * THREADS;
            v[u] = i < len ? xs[i] : -INFINITY;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)
            if (i0 + u * THREADS < len) online_add(st, v[u]);
    }
    st = warp_maxsum(st);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) part[warp] = st;
    __syncthreads();
    if (warp == 0) {
        MaxSum w = lane < WARPS ? part[lane] : maxsum_empty();
        w = warp_maxsum(w);
        if (lane == 0) total = w;
    }
    __syncthreads();
    const float m = total.m, inv = 1.f / total.s;
    for (int i0 = threadIdx.x; i0 < len; i0 += UNROLL * THREADS) {
        float v[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int i = i0 + u * THREADS;
            v[u] = i < len ? xs[i] : 0.f;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int i = i0 + u * THREADS;
            if (i < len) ys[i] = __expf(v[u] - m) * inv;
        }
    }
    __syncthreads();  // every thread has read `total` before the next task overwrites it
}

// v1: the host launches this T times, task = 0 .. T-1 (grid = 1 block).
extern "C" __global__ void __launch_bounds__(THREADS)
    seg_softmax_v1_task(const float* __restrict__ x, float* __restrict__ y,
                        const int* __restrict__ off, int task) {
    segment_softmax(x, y, off[task], off[task + 1] - off[task]);
}

// v2: grid = T blocks, block t does task t (the hardware's block scheduler balances the load,
// but every task pays a block's launch, and a grid of T blocks is limited to 2^31 - 1).
extern "C" __global__ void __launch_bounds__(THREADS)
    seg_softmax_v2_block(const float* __restrict__ x, float* __restrict__ y,
                         const int* __restrict__ off, int tasks) {
    const int t = blockIdx.x;
    if (t < tasks) segment_softmax(x, y, off[t], off[t + 1] - off[t]);
}

// v3: a persistent grid of G blocks (one full wave); block b takes tasks b, b + G, ...
extern "C" __global__ void __launch_bounds__(THREADS)
    seg_softmax_v3_static(const float* __restrict__ x, float* __restrict__ y,
                          const int* __restrict__ off, int tasks) {
    for (int t = blockIdx.x; t < tasks; t += gridDim.x)  // block-uniform: every thread iterates
        segment_softmax(x, y, off[t], off[t + 1] - off[t]);
}

// v4 and v5: a persistent grid pulling tasks from a queue. Thread 0 takes the next ticket from
// the counter and shares it through shared memory; a ticket >= tasks means the queue is empty.
// `order` maps tickets to tasks (nullptr: ticket k is task k).
__device__ __forceinline__ void queue_loop(const float* __restrict__ x, float* __restrict__ y,
                                           const int* __restrict__ off,
                                           const int* __restrict__ order, int tasks,
                                           int* __restrict__ counter) {
    __shared__ int ticket;
    while (true) {
        if (threadIdx.x == 0) ticket = atomicAdd(counter, 1);
        __syncthreads();
        const int k = ticket;
        if (k >= tasks) return;  // block-uniform: every thread read the same ticket
        const int t = order ? order[k] : k;
        segment_softmax(x, y, off[t], off[t + 1] - off[t]);  // ends with a barrier: thread 0
                                                              // may overwrite `ticket` after it
    }
}

extern "C" __global__ void __launch_bounds__(THREADS)
    seg_softmax_v4_queue(const float* __restrict__ x, float* __restrict__ y,
                         const int* __restrict__ off, int tasks, int* __restrict__ counter) {
    queue_loop(x, y, off, nullptr, tasks, counter);
}

extern "C" __global__ void __launch_bounds__(THREADS)
    seg_softmax_v5_lpt(const float* __restrict__ x, float* __restrict__ y,
                       const int* __restrict__ off, const int* __restrict__ order, int tasks,
                       int* __restrict__ counter) {
    queue_loop(x, y, off, order, tasks, counter);
}
