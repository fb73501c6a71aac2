// Day 3: matrix add, C = A + B for row-major ROWS x COLS matrices, and how to lay threads
// over a 2-D problem.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 3
//
// Versions:
//   v1  2-D grid, threadIdx.x walks down the ROWS: neighbouring threads are a whole row
//       apart in memory, so a warp touches 32 different lines per load (uncoalesced)
//   v2  2-D grid, threadIdx.x walks along the COLUMNS: a warp reads 32 consecutive floats
//   v3  flattened 1-D: a row-major matrix is one contiguous array of ROWS*COLS floats
//   v4  flattened 1-D with float4 and a grid-stride loop
//   v5  flattened 1-D with float4 and no loop: one float4 per thread, as many blocks as needed
// Every 2-D version guards both dimensions: the grid overhangs the matrix on the right and
// at the bottom whenever ROWS or COLS is not a multiple of the block.
#include <cstdint>

extern "C" __global__ void madd_v1(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;  // x -> row: the wrong way round
    const int k = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && k < cols) {
        const int64_t i = (int64_t)r * cols + k;
        c[i] = a[i] + b[i];
    }
}

extern "C" __global__ void madd_v2(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int rows, int cols) {
    const int k = blockIdx.x * blockDim.x + threadIdx.x;  // x -> column: coalesced
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r < rows && k < cols) {
        const int64_t i = (int64_t)r * cols + k;
        c[i] = a[i] + b[i];
    }
}

extern "C" __global__ void madd_v3(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void madd_v4(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const float4* a4 = reinterpret_cast<const float4*>(a);
    const float4* b4 = reinterpret_cast<const float4*>(b);
    float4* c4 = reinterpret_cast<float4*>(c);
    const int64_t n4 = n / 4;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t i = t; i < n4; i += stride) {
        const float4 x = a4[i], y = b4[i];
        c4[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    }
    if (t < n - 4 * n4) c[4 * n4 + t] = a[4 * n4 + t] + b[4 * n4 + t];
}

// v5: day 2's v4 on the flattened matrix: each thread adds one float4 and leaves, the
// threads past the last float4 add the n % 4 leftover floats; the block scheduler walks the
// array in order instead of a grid-stride loop.
extern "C" __global__ void madd_v5(const float* __restrict__ a, const float* __restrict__ b,
                                   float* __restrict__ c, int64_t n) {
    const int64_t n4 = n / 4;
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n4) {
        const float4 x = reinterpret_cast<const float4*>(a)[i];
        const float4 y = reinterpret_cast<const float4*>(b)[i];
        reinterpret_cast<float4*>(c)[i] = make_float4(x.x + y.x, x.y + y.y, x.z + y.z, x.w + y.w);
    } else if (i < n4 + (n - 4 * n4)) {
        const int64_t j = 4 * n4 + (i - n4);
        c[j] = a[j] + b[j];
    }
}
