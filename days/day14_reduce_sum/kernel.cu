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
// v7 and v8 run a fixed grid that fills the GPU (8 blocks per SM), then reduce its partials
// (one per block, ~1000) with one more block; v9 does it all in one launch.
//
//   v1  interleaved addressing, divergent branch: `if (tid % (2*stride) == 0)`; half the
//       threads of every warp idle at the first step, and % by a runtime value is a division
//   v2  interleaved addressing, strided index: `idx = 2*stride*tid`; the working threads are
//       contiguous, but a warp's shared-memory accesses now fall on the same banks: 2-, 4-,
//       8-, 8-, 8-, 4-, 2-way conflicts at strides 1, 2, 4, ..., 64 (see v2 below)
//   v3  sequential addressing: `if (tid < stride) s[tid] += s[tid + stride]`; contiguous
//       threads read contiguous words: working threads contiguous, and no bank conflicts
//   v4  first add during the load: each thread loads two elements and adds them, so a block
//       covers 2x the data and no thread is idle at the first step
//   v5  the last warp unrolled: once 64 values remain, one warp finishes with __syncwarp
//       instead of __syncthreads (3 block barriers instead of v4's 9; the block size is a
//       compile-time constant, so every loop unrolls)
//   v6  warp shuffles: __shfl_down_sync adds across a warp in registers; shared memory holds
//       only one value per warp, and a block has one barrier instead of nine
//   v7  grid-stride loop: a fixed grid (a few blocks per SM) where each thread sums many
//       elements in a register first; the partials (one per block) are reduced by one more
//       launch of the same kernel with one block: deterministic two-pass
//       (reduce_v7_atomic: the same, but every block atomicAdds its partial into y; the
//       order of those float additions changes from run to run; see extras)
//   v8  v7 with 16-byte float4 loads, four loads in flight per thread per iteration and four
//       independent accumulators (more bytes in flight, shorter dependency chains)
//   v9  v8 in one launch: each block publishes its partial, takes a ticket with atomicInc,
//       and the last block to finish sums the partials in block order (still deterministic)
//   v10 v9 with contiguous reads: each step of a block reads one 32 KB chunk (4 float4 a
//       thread, 512 threads), instead of four loads a whole grid apart
#include <cstdint>

#define THREADS 256  // every version runs 256 threads a block (a power of two: the trees halve it)
#define BLOCKS_PER_SM 8  // v7-v9: 8 x 256 = 2048 threads fill a Hopper SM; launch bounds keep
                         // them at <= 32 registers so all 8 blocks fit (the driver launches 8 per SM)

// ---------------------------------------------------------------------------------------
// v1: interleaved addressing with a divergent branch (the textbook starting point)
// 1 + 8 block barriers (after the load, then one per step of the tree)
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
// contiguous (threads 0..127, then 0..63, ...), so whole warps retire. The price: lane t of a
// warp touches word 2*s*t, in bank (2*s*t) % 32, and several lanes ask one bank for different
// words. Counting distinct words per bank in one warp's request (s = stride):
//   s = 1: 2-way, 2: 4-way, 4: 8-way, 8: 8-way, 16: 8-way, 32: 4-way, 64: 2-way, 128: none.
// Never more than 8-way: the 256-word array holds only 8 words in each bank. (v1 has no
// conflicts: its working lanes touch words 32w + lane, all in different banks.)
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
// warp's threads need no block barrier, only __syncwarp() between a write and the reads of
// it, and between those reads and the next write (the old `volatile` trick without
// __syncwarp is a race since Volta's independent thread scheduling). Barriers per block: 3
// (after the load, strides 128 and 64) instead of v4's 9. THREADS is a compile-time
// constant: the loop unrolls.
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
// memory holds one value per warp (8), and warp 0 reduces those the same way: one block
// barrier in all.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;  // complete in lane 0
}

// Sum over the block (blockDim.x == NT); the result is complete in thread 0.
// Callers that use it twice put a __syncthreads() in between (warp_sums is reused).
template <int NT = THREADS>
__device__ __forceinline__ float block_sum(float v) {
    __shared__ float warp_sums[NT / 32];
    const unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    v = warp_sum(v);
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < NT / 32 ? warp_sums[lane] : 0.f;
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
// v7: grid-stride loop. The grid is a fixed BLOCKS_PER_SM blocks per SM, not n / 512 blocks:
// each thread walks the array with stride gridDim.x * THREADS (every step is still a
// coalesced warp read) and keeps its running sum in a register: at 2^28 floats on 132 SMs,
// ~1000 elements per thread, one tree per block at the end instead of one per 512 elements.
// nvcc unrolls the loop 4 times (4 loads issued before the first add, in the SASS).
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
// The last block to finish sums the G partials in block order (v9 and v10). `v` is this
// block's sum, complete in thread 0.
template <int NT>
__device__ __forceinline__ void last_block_sums(float v, float* __restrict__ partials,
                                                unsigned* __restrict__ ticket, float* __restrict__ y) {
    __shared__ bool is_last;
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
    for (unsigned i = threadIdx.x; i < gridDim.x; i += NT) s += __ldcg(partials + i);  // L2, not L1
    s = block_sum<NT>(s);
    if (threadIdx.x == 0) y[0] = s;
}

extern "C" __global__ void __launch_bounds__(THREADS, BLOCKS_PER_SM)
reduce_v9(const float* __restrict__ x, float* __restrict__ partials, unsigned* __restrict__ ticket,
          float* __restrict__ y, long long n) {
    last_block_sums<THREADS>(block_sum(grid_stride_sum_vec4(x, n)), partials, ticket, y);
}

// ---------------------------------------------------------------------------------------
// v10: v9 reading the way the fastest read-only stream on this GPU reads. v8/v9's four loads
// a thread are a whole grid apart (4 MB at 2^28); here each step of a block reads ONE
// contiguous chunk of 4 x 512 float4 (32 KB): thread t loads float4 t, t + 512, t + 1024 and
// t + 1536 of the chunk, into four accumulators. Blocks of 512, four an SM. A sweep of read
// patterns on an H200 (.notes/reduce_sweep.py, 2026-11-23) put this 1-1.5% ahead of v9 and of
// CUB at 2^28 and 2^28 + 3.
// ---------------------------------------------------------------------------------------
#define V10_THREADS 512
#define V10_BLOCKS_PER_SM 4
#define V10_UNROLL 4

__device__ __forceinline__ float chunk_sum_vec4(const float* __restrict__ x, long long n) {
    const float4* __restrict__ x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = n >> 2;
    const long long step = (long long)gridDim.x * V10_THREADS * V10_UNROLL;
    float acc[V10_UNROLL] = {0.f, 0.f, 0.f, 0.f};
    long long base = (long long)blockIdx.x * V10_THREADS * V10_UNROLL + threadIdx.x;
    for (; base + (V10_UNROLL - 1) * V10_THREADS < n4; base += step) {
        float4 v[V10_UNROLL];
#pragma unroll
        for (int u = 0; u < V10_UNROLL; ++u) v[u] = __ldcs(x4 + base + u * V10_THREADS);
#pragma unroll
        for (int u = 0; u < V10_UNROLL; ++u) acc[u] += sum4(v[u]);
    }
#pragma unroll
    for (int u = 0; u < V10_UNROLL; ++u)  // the last, partial chunk of this block
        if (base + u * V10_THREADS < n4) acc[u] += sum4(__ldcs(x4 + base + u * V10_THREADS));
    const long long t = (n4 << 2) + (long long)blockIdx.x * V10_THREADS + threadIdx.x;
    if (t < n) acc[0] += x[t];  // the n % 4 leftover floats (first threads of block 0)
    return (acc[0] + acc[1]) + (acc[2] + acc[3]);
}

extern "C" __global__ void __launch_bounds__(V10_THREADS, V10_BLOCKS_PER_SM)
reduce_v10(const float* __restrict__ x, float* __restrict__ partials, unsigned* __restrict__ ticket,
           float* __restrict__ y, long long n) {
    last_block_sums<V10_THREADS>(block_sum<V10_THREADS>(chunk_sum_vec4(x, n)), partials, ticket, y);
}
