// Day 4: the simplest row softmax, one thread per row.
//
//   y[r, j] = exp(x[r, j]) / sum_k exp(x[r, k])                 (v1, as the formula reads)
//           = exp(x[r, j] - m_r) / sum_k exp(x[r, k] - m_r)    (v2, m_r = max_k x[r, k])
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 4
//
// Versions:
//   v1  naive: expf(x) overflows to inf once x > 88.7 (float32's largest exp), and the
//       row becomes inf / inf = NaN. Correct only for small inputs.
//   v2  subtract the row max first: every exponent is <= 0, so exp is in (0, 1] and the
//       sum is at least 1. Mathematically the same function, numerically safe.
// One thread walking a whole row is simple but slow: neighbouring threads read addresses a
// row apart (uncoalesced), and there are only as many threads as rows. Day 5 fixes both.
#include <cfloat>
#include <cstdint>

extern "C" __global__ void softmax_v1(const float* __restrict__ x, float* __restrict__ y,
                                      int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (int64_t)r * cols;
    float* yr = y + (int64_t)r * cols;
    float s = 0.f;
    for (int j = 0; j < cols; ++j) s += expf(xr[j]);
    for (int j = 0; j < cols; ++j) yr[j] = expf(xr[j]) / s;
}

extern "C" __global__ void softmax_v2(const float* __restrict__ x, float* __restrict__ y,
                                      int rows, int cols) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float* xr = x + (int64_t)r * cols;
    float* yr = y + (int64_t)r * cols;
    float m = -FLT_MAX;
    for (int j = 0; j < cols; ++j) m = fmaxf(m, xr[j]);
    float s = 0.f;
    for (int j = 0; j < cols; ++j) s += expf(xr[j] - m);
    const float inv = 1.f / s;
    for (int j = 0; j < cols; ++j) yr[j] = expf(xr[j] - m) * inv;
}
