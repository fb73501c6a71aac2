// Day 53: a caching allocator -- the kernels of the training step it feeds.
//
// This day is about the HOST: where the temporaries of a training step get their memory. The
// kernels are one SGD step of a two-layer MLP with a GELU, in fp32, written as an eager
// framework runs it (every intermediate is a fresh tensor, transposes are materialised):
//
//   forward    z  = x @ W1              x [B, D], W1 [D, H], z [B, H]
//              h  = gelu(z)                                   (day 10's tanh GELU)
//              o  = h @ W2              W2 [H, D], o [B, D]
//   loss       L  = sum((o - t)^2) / (2B)   ->   do = (o - t) / B
//   backward   dW2 = h^T @ do           (h^T materialised: transpose kernel)
//              dh  = do @ W2^T          (W2^T materialised)
//              dz  = dh * gelu'(z)
//              dW1 = x^T @ dz           (x^T materialised)
//   update     W1' = W1 - lr dW1,  W2' = W2 - lr dW2
//
// 13 kernels a step: 5 GEMMs, 3 transposes, 5 element-wise. Every step allocates 9 temporaries
// (z, h, o, do, h^T, W2^T, dh, dz, x^T) and frees each after its last use; the versions differ only in the allocator behind those calls (driver.py):
//   v1  cuMemAlloc / cuMemFree per tensor per step
//   v2  cuMemAllocAsync / cuMemFreeAsync: the driver's stream-ordered pool
//   v3  common/mempool.py's CachingAllocator (size classes, stream-ordered reuse)
//   v4  every temporary allocated once, ahead of the steps (the floor: no allocator at all)
// The device code is the same for all four; each version has its own copies of the entry
// points (mlp_*_vN) so that a profiler can tell the versions apart (run_day.py --ncu).
//
// Build alone: nvcc -arch=sm_90 -O3 -std=c++17 -I ../../common/cuda -cubin kernel.cu
//
// The GEMM is day 8's 128 x 128 tile (common/cuda/sgemm.cuh): C = A @ B, all row-major, with
// 16-byte loads when every leading dimension is a multiple of 4 (the _vec entry) and a scalar
// path for any shape (the _scalar entry).

#include "elementwise.cuh"
#include "sgemm.cuh"

using namespace cuda100;

#define EW_THREADS 256
#define TR_TILE 32
#define TR_ROWS 8

// d gelu(u) / du for gelu(u) = 0.5 u (1 + tanh(k (u + 0.044715 u^3))), k = sqrt(2 / pi)
__device__ __forceinline__ float gelu_grad(float u) {
    const float k = 0.7978845608028654f, c = 0.044715f;
    const float t = tanhf(k * (u + c * u * u * u));
    return 0.5f * (1.f + t) + 0.5f * u * (1.f - t * t) * k * (1.f + 3.f * c * u * u);
}

__device__ __forceinline__ long long flat_index() {
    return (long long)blockIdx.x * blockDim.x + threadIdx.x;
}

// out[c, r] = in[r, c] for in [R, C]: a 32 x 32 tile through shared memory (one padding
// column: a column of the tile is read without bank conflicts), both sides coalesced.
__device__ __forceinline__ void transpose_tile(const float* __restrict__ in, float* __restrict__ out,
                                               int R, int C) {
    __shared__ float tile[TR_TILE][TR_TILE + 1];
    const int c0 = blockIdx.x * TR_TILE, r0 = blockIdx.y * TR_TILE;
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int i = ty; i < TR_TILE; i += TR_ROWS) {
        const int r = r0 + i, c = c0 + tx;
        if (r < R && c < C) tile[i][tx] = in[(size_t)r * C + c];
    }
    __syncthreads();
#pragma unroll
    for (int i = ty; i < TR_TILE; i += TR_ROWS) {
        const int c = c0 + i, r = r0 + tx;   // out row c, column r
        if (c < C && r < R) out[(size_t)c * R + r] = tile[tx][i];
    }
}

#define STEP_KERNELS(V)                                                                          \
    extern "C" __global__ void __launch_bounds__(sgemm::THREADS, 2) mlp_gemm_vec_##V(            \
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm, int M, \
        int N, int K) {                                                                          \
        sgemm::gemm_tile<true>(A, K, B, N, M, N, K, blockIdx.y * sgemm::BM,                      \
                               blockIdx.x * sgemm::BN, sgemm::Store<true>{Cm, N});               \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(sgemm::THREADS, 2) mlp_gemm_scalar_##V(         \
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm, int M, \
        int N, int K) {                                                                          \
        sgemm::gemm_tile<false>(A, K, B, N, M, N, K, blockIdx.y * sgemm::BM,                     \
                                blockIdx.x * sgemm::BN, sgemm::Store<false>{Cm, N});             \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(EW_THREADS) mlp_gelu_##V(                       \
        const float* __restrict__ z, float* __restrict__ h, long long n) {                       \
        const long long i = flat_index();                                                        \
        if (i < n) h[i] = gelu(z[i]);                                                            \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(EW_THREADS) mlp_gelu_back_##V(                  \
        const float* __restrict__ dh, const float* __restrict__ z, float* __restrict__ dz,       \
        long long n) {                                                                           \
        const long long i = flat_index();                                                        \
        if (i < n) dz[i] = dh[i] * gelu_grad(z[i]);                                              \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(EW_THREADS) mlp_mse_grad_##V(                   \
        const float* __restrict__ o, const float* __restrict__ t, float* __restrict__ d,         \
        float scale, long long n) {                                                              \
        const long long i = flat_index();                                                        \
        if (i < n) d[i] = (o[i] - t[i]) * scale;                                                 \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(EW_THREADS) mlp_sgd_##V(                        \
        const float* __restrict__ w, const float* __restrict__ g, float* __restrict__ w_new,     \
        float lr, long long n) {                                                                 \
        const long long i = flat_index();                                                        \
        if (i < n) w_new[i] = w[i] - lr * g[i];                                                  \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(TR_TILE * TR_ROWS) mlp_transpose_##V(           \
        const float* __restrict__ in, float* __restrict__ out, int R, int C) {                   \
        transpose_tile(in, out, R, C);                                                           \
    }

// each line defines mlp_gemm_vec_vN, mlp_gemm_scalar_vN, mlp_gelu_vN, mlp_gelu_back_vN,
// mlp_mse_grad_vN, mlp_sgd_vN and mlp_transpose_vN for one version:
STEP_KERNELS(v1)  // mlp_*_v1: the step whose temporaries come from cuMemAlloc / cuMemFree
STEP_KERNELS(v2)  // mlp_*_v2: from cuMemAllocAsync / cuMemFreeAsync
STEP_KERNELS(v3)  // mlp_*_v3: from CachingAllocator
STEP_KERNELS(v4)  // mlp_*_v4: from buffers allocated once
