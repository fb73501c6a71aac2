// Day 51: streams, events and copy/compute overlap.
//
// The op is a pipeline from host memory to host memory: copy x (float32, in the host's RAM)
// to the GPU, compute y = 1/sqrt(x) by `steps` Newton iterations per element, copy y back.
// The kernel is a stand-in for any compute-heavy elementwise work (a simulation step, a
// decoder, a cipher round) whose cost we can dial: `steps` sets the arithmetic per element,
// and because the Newton iteration corrects its own rounding errors, the answer after 4 or
// after 4000 steps is 1/sqrt(x) to within an ulp or two, so numpy checks it in one line.
//
// What changes between versions is almost all HOST code (driver.py): where the host arrays
// live and how the copies and launches are spread over streams. The kernel is the same one in
// v1-v5 (one entry point per version, so `run_day.py 51 --ncu --version vN` can pick it):
//   v1  pageable host memory, synchronous copies, one launch: copy in, compute, copy out
//   v2  pinned (page-locked) host memory, async copies on one stream: still serial
//   v3  the array cut into chunks, round-robin over 2 streams (each: copy in, compute, copy out)
//   v4  the same over 4 streams and more chunks, so both copy directions and the SMs are busy
//   v5  one stream per engine (copy in / compute / copy out), chained per chunk by events
//   v6  no copies: the kernel reads x from and writes y to mapped pinned host memory over the
//       bus (zero-copy); a grid-stride loop that loads its next element before computing the
//       current one, so the bus latency hides behind arithmetic
//
// Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v days/day51_streams_overlap/kernel.cu

// 1/sqrt(x) for a positive finite float by `steps` Newton steps (steps >= 3 to converge).
// The seed is the classic bit trick: halving the exponent field of the float's bit pattern
// and subtracting from a magic constant gives 1/sqrt(x) within 3.5% for every normal x. Each
// step r <- r (1.5 - x/2 r^2) squares the relative error (3.5% -> 0.2% -> 5e-6 -> 3e-11), and
// once converged it keeps r within ~1-2 ulp: the error of a step is not carried into the next.
// One step is 3 instructions (FMUL, FFMA, FMUL) = 4 FLOPs. h r is formed before it meets r
// again, so nothing squares r itself: r*r would overflow for x below 3e-39, and (x/2) r r
// stays near 1/2 for every x.
__device__ __forceinline__ float rsqrt_newton(float x, int steps) {
    // x < 2^-64 (including subnormals, whose halving would drop bits and whose bit pattern
    // gives no seed): scale by 2^64, an exact power of two, and scale the answer by 2^32.
    const bool tiny = x < 5.42101086e-20f;                     // 2^-64
    const float xs = tiny ? x * 18446744073709551616.0f : x;   // x * 2^64
    const float h = 0.5f * xs;
    float r = __int_as_float(0x5f3759df - (__float_as_int(xs) >> 1));
#pragma unroll 8
    for (int k = 0; k < steps; ++k) {
        const float t = h * r;               // FMUL
        r = r * fmaf(-t, r, 1.5f);           // FFMA, FMUL: r (1.5 - h r^2)
    }
    return tiny ? r * 4294967296.0f : r;     // * 2^32
}

// v1-v5: one thread per element of a chunk of `n` elements (the host passes the chunk's
// pointers). 64-bit index: a grid of cdiv(n, 256) blocks times 256 can pass 2^31.
__device__ __forceinline__ void rsqrt_chunk(const float* __restrict__ x, float* __restrict__ y,
                                            int n, int steps) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = rsqrt_newton(x[i], steps);
}

#define CHUNK_ENTRY(NAME)                                                                   \
    extern "C" __global__ void __launch_bounds__(256)                                       \
    NAME(const float* __restrict__ x, float* __restrict__ y, int n, int steps) {            \
        rsqrt_chunk(x, y, n, steps);                                                        \
    }
CHUNK_ENTRY(rsqrt_newton_v1)
CHUNK_ENTRY(rsqrt_newton_v2)
CHUNK_ENTRY(rsqrt_newton_v3)
CHUNK_ENTRY(rsqrt_newton_v4)
CHUNK_ENTRY(rsqrt_newton_v5)

// v6: x and y are in the host's RAM (mapped pinned memory: under unified addressing the host
// pointer is valid on the GPU). A load crosses the bus (PCIe) and takes microseconds, not the
// ~0.5-1 us of HBM; a store is posted (the SM does not wait for it). The grid is one resident
// wave (SMs x blocks per SM); each thread walks the array with a stride of the whole grid and
// issues the load of its NEXT element before computing the current one, so the load's latency
// is covered by `steps` Newton steps of arithmetic instead of stalling the warp.
extern "C" __global__ void __launch_bounds__(256)
rsqrt_newton_v6_mapped(const float* x, float* y, int n, int steps) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    float next = i < n ? x[i] : 1.0f;
    while (i < n) {
        const float cur = next;
        const long long j = i + stride;
        if (j < n) next = x[j];              // in flight while `cur` is computed
        y[i] = rsqrt_newton(cur, steps);
        i = j;
    }
}
