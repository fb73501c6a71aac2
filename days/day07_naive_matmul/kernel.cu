// Day 7: naive matrix multiply, one thread per output element, global memory only.
//
//   C[M, N] = A[M, K] @ B[K, N]        row-major fp32:  C[r, c] = sum_k A[r, k] * B[k, c]
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 7            (2048x2048x2048, both versions and cuBLAS)
//
// Both versions run the SAME loop: thread (r, c) walks k = 0..K-1, reading row r of A and
// column c of B straight from global memory, and writes one float of C. Both launch 32x8
// blocks (256 threads). Only the mapping of threads to (r, c) differs:
//
//   v1  threadIdx.x runs along the ROWS of C: the 32 threads of a warp have 32 different
//       rows r and the same column c. Every A load of the warp touches 32 different rows
//       (32 cache lines, K*4 bytes apart), and the C store scatters over 32 rows too.
//   v2  threadIdx.x runs along the COLUMNS of C: a warp has one row r and 32 consecutive
//       columns c. Its A load is one address (a broadcast), its B load and its C store are
//       128 contiguous bytes (one coalesced transaction each).
//
// Offsets are computed in 64-bit (size_t) so matrices above 2^31 elements index correctly.

#include <cstddef>

// v1: x -> row. Launch: block (32, 8), grid (ceil(M / 32), ceil(N / 8)).
extern "C" __global__ void matmul_naive_v1(const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;  // consecutive lanes: consecutive rows
    const int col = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;

    const float* a = A + (size_t)row * K;  // row `row` of A: contiguous in k
    const float* b = B + col;              // column `col` of B: stride N in k
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += a[k] * b[(size_t)k * N];
    C[(size_t)row * N + col] = acc;
}

// v2: x -> column. Launch: block (32, 8), grid (ceil(N / 32), ceil(M / 8)).
extern "C" __global__ void matmul_naive_v2(const float* __restrict__ A,
                                           const float* __restrict__ B,
                                           float* __restrict__ C, int M, int N, int K) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;  // consecutive lanes: consecutive columns
    const int row = blockIdx.y * blockDim.y + threadIdx.y;
    if (row >= M || col >= N) return;

    const float* a = A + (size_t)row * K;
    const float* b = B + col;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += a[k] * b[(size_t)k * N];
    C[(size_t)row * N + col] = acc;
}
