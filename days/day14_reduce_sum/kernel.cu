// Day 14: parallel reduction, the sum of n float32 values.
//
//   y[0] = x[0] + x[1] + ... + x[n-1]          (accumulated in float32)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 14
//
// Every version is a complete reduction to one number. Versions v1-v6 reduce one tile per
// block to one partial sum; the driver launches the same kernel again on the partial sums
// until one value is left (2^28 floats: 2^20 -> 2^12 -> 2^4 -> 1 for v1, four launches).
// v7 and v8 run a fixed grid that fills the GPU, then reduce its few hundred partials with
// one more block; v9 does it all in one launch.
//
//   v1  interleaved addressing, divergent branch: `if (tid % (2*stride) == 0)`; half the
//       threads of every warp idle at the first step, and % by a runtime value is a division
//   v2  interleaved addressing, strided index: `idx = 2*stride*tid`; no divergence, but the
//       shared-memory accesses now hit the same bank 2, 4, 8, ... ways (bank conflicts)
//   v3  sequential addressing: `if (tid < stride) s[tid] += s[tid + stride]`; contiguous
//       threads read contiguous words: no divergence inside busy warps, no conflicts
//   v4  first add during the load: each thread loads two elements and adds them, so a block
//       covers 2x the data and no thread is idle at the first step
//   v5  the last warp unrolled: once 32 threads remain they need no __syncthreads, only
//       __syncwarp (the block size is a compile-time constant, so every loop unrolls)
//   v6  warp shuffles: __shfl_down_sync adds across a warp in registers; shared memory holds
//       only one value per warp, and there are two barriers instead of eight
//   v7  grid-stride loop: a fixed grid (a few blocks per SM) where each thread sums many
//       elements in a register first; the partials (one per block) are reduced by one more
//       launch of the same kernel with one block: deterministic two-pass
//       (reduce_v7_atomic: the same, but every block atomicAdds its partial into y; the
//       order of those float additions changes from run to run; see extras)
//   v8  v7 with 16-byte float4 loads, four loads in flight per thread per iteration and four
//       independent accumulators (more bytes in flight, shorter dependency chains)
//   v9  v8 in one launch: each block publishes its partial, takes a ticket with atomicInc,
//       and the last block to finish sums the partials in block order (still deterministic)
#include <cstdint>

#define THREADS 256  // every version runs 256 threads a block (a power of two: the trees halve it)
#define BLOCKS_PER_SM 8  // v7-v9: 8 x 256 = 2048 threads fill a Hopper SM; launch bounds keep
                         // them at <= 32 registers so all 8 blocks fit (the driver launches 8 per SM)

// ---------------------------------------------------------------------------------------
// v1: interleaved addressing with a divergent branch (the textbook starting point)
// ---------------------------------------------------------------------------------------
extern "C" __global__ void reduce_v1(const float* __restrict__ x, float* __restrict__ out,
                                     long long n) {
    __shared__ float s[THREADS];
    const unsigned tid = threadIdx.x;
    const long long i = (long long)blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? x[i] : 0.f;
    __syncthreads();
    // step 1: threads 0,2,4,.. add their right neighbour; step 2: threads 0,4,8,.. ; ...
    // Every warp stays busy at every step while only 1/2, 1/4, ... of its threads work.
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        if (tid % (2 * stride) == 0) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

// ---------------------------------------------------------------------------------------
// v2: the same tree, but thread t works on index 2*stride*t: the working threads are now
// contiguous (threads 0..127, then 0..63, ...), so whole warps retire. The price: at stride
// s, consecutive threads touch words 2s apart, i.e. bank (2*s*t) % 32: a 2s-way conflict.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void reduce_v2(const float* __restrict__ x, float* __restrict__ out,
                                     long long n) {
    __shared__ float s[THREADS];
    const unsigned tid = threadIdx.x;
    const long long i = (long long)blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (unsigned stride = 1; stride < blockDim.x; stride *= 2) {
        const unsigned idx = 2 * stride * tid;
        if (idx < blockDim.x) s[idx] += s[idx + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

// ---------------------------------------------------------------------------------------
// v3: sequential addressing. Fold the upper half onto the lower half: thread t adds word
// t + stride into word t. 32 consecutive threads touch 32 consecutive words: 32 banks.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void reduce_v3(const float* __restrict__ x, float* __restrict__ out,
                                     long long n) {
    __shared__ float s[THREADS];
    const unsigned tid = threadIdx.x;
    const long long i = (long long)blockIdx.x * blockDim.x + tid;
    s[tid] = i < n ? x[i] : 0.f;
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

// ---------------------------------------------------------------------------------------
// v4: first add during the load. In v3 half the threads only load a value and leave; here
// each thread loads two elements a block apart (both loads coalesced) and adds them, so a
// block of 256 threads reduces 512 elements and the grid is half as large.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float load_two(const float* __restrict__ x, long long n) {
    const long long i = (long long)blockIdx.x * (2 * THREADS) + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    if (i + THREADS < n) v += x[i + THREADS];
    return v;
}

extern "C" __global__ void reduce_v4(const float* __restrict__ x, float* __restrict__ out,
                                     long long n) {
    __shared__ float s[THREADS];
    const unsigned tid = threadIdx.x;
    s[tid] = load_two(x, n);
    __syncthreads();
    for (unsigned stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = s[0];
}

// ---------------------------------------------------------------------------------------
// v5: unroll the last warp. When 64 partial sums are left, one warp finishes the job: a
// warp's threads need no block barrier, only __syncwarp() between a read and the write that
// could overwrite it (the old `volatile` trick without __syncwarp is a race since Volta's
// independent thread scheduling). THREADS is a compile-time constant: the loop unrolls.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void reduce_v5(const float* __restrict__ x, float* __restrict__ out,
                                     long long n) {
    __shared__ float s[THREADS];
    const unsigned tid = threadIdx.x;
    s[tid] = load_two(x, n);
    __syncthreads();
#pragma unroll
    for (unsigned stride = THREADS / 2; stride > 32; stride >>= 1) {
        if (tid < stride) s[tid] += s[tid + stride];
        __syncthreads();
    }
    if (tid < 32) {
        float v = s[tid] + s[tid + 32];
#pragma unroll
        for (unsigned o = 16; o > 0; o >>= 1) {
            s[tid] = v;
            __syncwarp();       // every lane's write lands before any lane reads it
            v += s[tid + o];
            __syncwarp();       // every lane's read is done before the next write
        }
        if (tid == 0) out[blockIdx.x] = v;
    }
}

// ---------------------------------------------------------------------------------------
// v6: warp shuffles. __shfl_down_sync(mask, v, o) hands each lane the register v of lane
// (lane + o): five shuffle-and-adds reduce a warp with no shared memory at all. Shared
// memory holds one value per warp (8), and warp 0 reduces those the same way.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;  // complete in lane 0
}

// Sum over the block (blockDim.x == THREADS); the result is complete in thread 0.
// Callers that use it twice put a __syncthreads() in between (warp_sums is reused).
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_sums[THREADS / 32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < THREADS / 32 ? warp_sums[lane] : 0.f;
        v = warp_sum(v);
    }
    return v;
}

extern "C" __global__ void reduce_v6(const float* __restrict__ x, float* __restrict__ out,
                                     long long n) {
    const float v = block_sum(load_two(x, n));
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// ---------------------------------------------------------------------------------------
// v7: grid-stride loop. The grid is a fixed few blocks per SM, not n / 512 blocks: each
// thread walks the array with stride gridDim.x * THREADS (every step is still a coalesced
// warp read) and keeps its running sum in a register. The tree work per element drops from
// ~1 to ~1/1000, and block start-up costs are paid once per thread instead of per element.
// The driver launches it twice: G blocks -> G partials, then 1 block -> y.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float grid_stride_sum(const float* __restrict__ x, long long n) {
    float v = 0.f;
    const long long stride = (long long)gridDim.x * THREADS;
    for (long long i = (long long)blockIdx.x * THREADS + threadIdx.x; i < n; i += stride) v += x[i];
    return v;
}

extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_v7(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const float v = block_sum(grid_stride_sum(x, n));
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// Not a version of the ladder: v7 with one atomicAdd per block into y (y must be zeroed
// first). One launch instead of two, but the blocks finish in a different order every run,
// and float addition is not associative, so the last bits of y change from run to run.
extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_v7_atomic(const float* __restrict__ x, float* __restrict__ y, long long n) {
    const float v = block_sum(grid_stride_sum(x, n));
    if (threadIdx.x == 0) atomicAdd(y, v);
}

// ---------------------------------------------------------------------------------------
// v8: float4 loads, four in flight per thread, four independent accumulators. A warp's
// float4 load moves 512 contiguous bytes in one instruction, and four independent loads per
// iteration keep 4 x 16 B per thread in flight while the adds of the previous iteration run.
// The array base is 256-byte aligned (cudaMalloc), so x4 is aligned; the last n % 4 floats
// are added by the first threads of the grid.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }

__device__ __forceinline__ float grid_stride_sum_vec4(const float* __restrict__ x, long long n) {
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = n >> 2;
    const long long stride = (long long)gridDim.x * THREADS;
    const long long first = (long long)blockIdx.x * THREADS + threadIdx.x;
    float a0 = 0.f, a1 = 0.f, a2 = 0.f, a3 = 0.f;
    long long i = first;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        // __ldcs: streaming (evict-first) loads; nothing reads x again
        const float4 v0 = __ldcs(x4 + i);
        const float4 v1 = __ldcs(x4 + i + stride);
        const float4 v2 = __ldcs(x4 + i + 2 * stride);
        const float4 v3 = __ldcs(x4 + i + 3 * stride);
        a0 += sum4(v0);
        a1 += sum4(v1);
        a2 += sum4(v2);
        a3 += sum4(v3);
    }
    for (; i < n4; i += stride) a0 += sum4(__ldcs(x4 + i));
    const long long t = (n4 << 2) + first;  // the n % 4 leftover floats
    if (t < n) a1 += x[t];
    return (a0 + a1) + (a2 + a3);
}

extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_v8(const float* __restrict__ x, float* __restrict__ out, long long n) {
    const float v = block_sum(grid_stride_sum_vec4(x, n));
    if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// ---------------------------------------------------------------------------------------
// v9: v8 in a single launch. Each block writes its partial, makes it visible device-wide
// (__threadfence), then takes a ticket. atomicInc(ticket, G - 1) returns 0, 1, ..., G - 1
// and wraps the counter back to 0 after the last block, ready for the next launch. The
// block that draws G - 1 knows every other partial is written; it sums them in block order,
// so the result does not depend on which block finished last.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_v9(const float* __restrict__ x, float* __restrict__ partials, unsigned* __restrict__ ticket,
          float* __restrict__ y, long long n) {
    __shared__ bool is_last;
    const float v = block_sum(grid_stride_sum_vec4(x, n));
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = v;
        __threadfence();  // release: the partial is visible before the ticket is taken
        const unsigned t = atomicInc(ticket, gridDim.x - 1);
        __threadfence();  // acquire: the other blocks' partials are read after the ticket
        is_last = (t == gridDim.x - 1);
    }
    __syncthreads();      // also separates the two uses of block_sum's shared memory
    if (!is_last) return;
    float s = 0.f;
    for (unsigned i = threadIdx.x; i < gridDim.x; i += THREADS) s += __ldcg(partials + i);  // L2, not L1
    s = block_sum(s);
    if (threadIdx.x == 0) y[0] = s;
}
