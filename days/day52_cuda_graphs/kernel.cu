// Day 52: CUDA graphs -- capture and replay many small kernels.
//
// The op: a chain of K tiny dependent kernels over a vector of n floats,
//     y = f_{K-1}( ... f_1( f_0(x) ) ... ),   f_k(v) = fmaf(a[k], v, b[k])  element by element.
// Step k cannot start before step k-1 has finished (it reads what k-1 wrote), so the K kernels
// run one after another, and each does almost nothing: at n = 1024 a kernel is 4 blocks of 256
// threads that read and write 4 KB. The time of the chain is therefore the time to LAUNCH K
// kernels, and that is what the versions change. Every version computes the same fmaf sequence
// per element, so all four give the same bits.
//
// Build alone: nvcc -arch=sm_90 -cubin -Xptxas -v kernel.cu
//
// Versions (the first three run the SAME device code; only the host side differs):
//   v1  chain_step_v1: K launches from Python with prepared_call on the default stream
//   v2  chain_step_v2: K launches with prepared_async_call on a created stream
//   v3  chain_step_v3: the K launches captured once into a CUDA graph (stream capture) and
//       replayed with ONE cuGraphLaunch; the GPU walks the K nodes without the host
//   v4  chain_fused_v4: a different program, "what if you fuse": one launch, each thread
//       applies all K steps to its element in registers (possible because every step is
//       elementwise; a chain of GEMMs or reductions could not be fused like this)

#define THREADS 256

// One step. src == dst for every step but the first (in place): each thread reads its element
// and then writes it, so no __restrict__ on src/dst.
__device__ __forceinline__ void chain_step(const float* src, float* dst,
                                           const float* __restrict__ a,
                                           const float* __restrict__ b, int k, int n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = fmaf(__ldg(a + k), src[i], __ldg(b + k));
}

extern "C" __global__ void __launch_bounds__(THREADS)
chain_step_v1(const float* src, float* dst, const float* a, const float* b, int k, int n) {
    chain_step(src, dst, a, b, k, n);
}

extern "C" __global__ void __launch_bounds__(THREADS)
chain_step_v2(const float* src, float* dst, const float* a, const float* b, int k, int n) {
    chain_step(src, dst, a, b, k, n);
}

extern "C" __global__ void __launch_bounds__(THREADS)
chain_step_v3(const float* src, float* dst, const float* a, const float* b, int k, int n) {
    chain_step(src, dst, a, b, k, n);
}

// All K steps in one kernel. The loads of a[k], b[k] do not depend on v (every thread reads the
// same address: one broadcast transaction per warp, from L1 after the first block), so with the
// loop unrolled they are issued ahead and the chain costs ~K dependent FMAs per thread.
extern "C" __global__ void __launch_bounds__(THREADS)
chain_fused_v4(const float* __restrict__ x, float* __restrict__ y, const float* __restrict__ a,
               const float* __restrict__ b, int steps, int n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float v = x[i];
#pragma unroll 8
    for (int k = 0; k < steps; ++k) v = fmaf(__ldg(a + k), v, __ldg(b + k));
    y[i] = v;
}
