// Day 11: 1D convolution, "same" length, zero padding.
//
//   y[i] = sum_{j=0}^{K-1} w[j] * x[i + j - r],     K = 2r + 1,   x[k] = 0 outside [0, n)
//
// (a cross-correlation, as torch.nn.functional.conv1d computes it: the filter is not flipped)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -cubin kernel.cu
// Run:               python run_day.py 11
//
// Versions (one output per thread unless said otherwise):
//   v1  naive: x and w both read from global memory, a bounds test per tap.
//   v2  the filter in __constant__ memory (c_w, set from the host with module.get_global +
//       memcpy_htod, the pycuda form of cudaMemcpyToSymbol). All threads of a warp read the
//       same w[j] at the same time: the constant cache broadcasts it in one access.
//   v3  a shared-memory tile: each block loads the blockDim.x inputs it needs plus r halo
//       cells on each side (zeros outside [0, n)) once, with coalesced loads; every tap then
//       reads shared memory. The bounds tests move out of the inner loop.
//   v4  register blocking: each thread computes 8 consecutive outputs from a window of
//       8 + 2r inputs held in registers (loaded from the tile with 16-byte shared loads), so a
//       tap costs one FMA and no load; the tile interior arrives with float4 global loads.
//       The radius is a template parameter (r = 0..15, K <= 31): every loop is unrolled and
//       w[j] becomes an immediate constant-bank operand of the FMA. Wider filters run v3.
#include <cstdint>

#define MAX_K 1023  // the constant buffer: 4 KB of the 64 KB constant space

__constant__ float c_w[MAX_K];

// ---------------------------------------------------------------------------------------
// v1: naive
// ---------------------------------------------------------------------------------------
extern "C" __global__ void conv1d_v1(const float* __restrict__ x, const float* __restrict__ w,
                                     float* __restrict__ y, int n, int K) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int r = K / 2;
    float acc = 0.f;
    for (int j = 0; j < K; ++j) {
        const int k = i + j - r;
        if (k >= 0 && k < n) acc += w[j] * x[k];
    }
    y[i] = acc;
}

// ---------------------------------------------------------------------------------------
// v2: the filter in constant memory
// ---------------------------------------------------------------------------------------
extern "C" __global__ void conv1d_v2(const float* __restrict__ x, float* __restrict__ y, int n,
                                     int K) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int r = K / 2;
    float acc = 0.f;
    for (int j = 0; j < K; ++j) {
        const int k = i + j - r;
        if (k >= 0 && k < n) acc += c_w[j] * x[k];
    }
    y[i] = acc;
}

// ---------------------------------------------------------------------------------------
// v3: shared-memory tile with halo cells. Dynamic shared memory: blockDim.x + K - 1 floats.
//   tile[k] = x[base - r + k],  k = 0 .. blockDim.x + 2r - 1   (0 outside the signal)
// so output base + t needs tile[t .. t + K - 1].
// ---------------------------------------------------------------------------------------
extern "C" __global__ void conv1d_v3(const float* __restrict__ x, float* __restrict__ y, int n,
                                     int K) {
    extern __shared__ float tile[];
    const int r = K / 2;
    const int base = blockIdx.x * blockDim.x;
    const int len = blockDim.x + 2 * r;
    for (int k = threadIdx.x; k < len; k += blockDim.x) {  // interior and both halos
        const int g = base - r + k;
        tile[k] = (g >= 0 && g < n) ? x[g] : 0.f;
    }
    __syncthreads();
    const int i = base + threadIdx.x;
    if (i >= n) return;  // after the barrier: every thread helped load the tile
    float acc = 0.f;
    for (int j = 0; j < K; ++j) acc += c_w[j] * tile[threadIdx.x + j];
    y[i] = acc;
}

// ---------------------------------------------------------------------------------------
// v4: register blocking, radius R known at compile time.
//
// Shared layout (floats): [L0 pad][R left halo][TILE interior][R right halo][pad]
//   with L0 = (-R) mod 4, so the interior starts at PAD = L0 + R, a multiple of 4 (16-byte
//   aligned float4 stores), and tile[PAD + g - base] = x[g] for g in [base - R, base+TILE+R).
// Thread t owns outputs base + 8t .. base + 8t + 7. Output base + 8t + m, tap j, needs
//   x[base + 8t + m - R + j] = tile[8t + L0 + m + j],
// so the thread loads the window tile[8t .. 8t + WL - 1] (WL = L0 + 8 + 2R rounded up to 4)
// into registers with float4 loads, and win[L0 + m + j] is a compile-time register index.
// ---------------------------------------------------------------------------------------
constexpr int V4_THREADS = 256;
constexpr int V4_ITEMS = 8;                         // outputs per thread
constexpr int V4_TILE = V4_THREADS * V4_ITEMS;      // 2048 outputs per block

__host__ __device__ constexpr int round_up4(int v) { return (v + 3) / 4 * 4; }

template <int R>
__device__ __forceinline__ void conv1d_registers(const float* __restrict__ x,
                                                 float* __restrict__ y, int n) {
    constexpr int K = 2 * R + 1;
    constexpr int L0 = (4 - R % 4) % 4;
    constexpr int PAD = L0 + R;
    constexpr int WL = round_up4(L0 + V4_ITEMS + 2 * R);
    constexpr int USED = PAD + V4_TILE + R;                       // written cells end here
    constexpr int SMEM = round_up4(USED > V4_TILE - V4_ITEMS + WL ? USED : V4_TILE - V4_ITEMS + WL);
    __shared__ __align__(16) float tile[SMEM];

    const int64_t base = (int64_t)blockIdx.x * V4_TILE;
    // interior: V4_TILE / 4 float4, two per thread; 16-byte aligned since base % 4 == 0
    for (int q = threadIdx.x; q < V4_TILE / 4; q += V4_THREADS) {
        const int64_t g = base + 4 * q;
        float4 v;
        if (g + 3 < n) {
            v = *reinterpret_cast<const float4*>(x + g);
        } else {  // the last tile: element by element, zeros past the end
            v.x = g < n ? x[g] : 0.f;
            v.y = g + 1 < n ? x[g + 1] : 0.f;
            v.z = g + 2 < n ? x[g + 2] : 0.f;
            v.w = g + 3 < n ? x[g + 3] : 0.f;
        }
        *reinterpret_cast<float4*>(&tile[PAD + 4 * q]) = v;
    }
    // halos (zeros outside the signal) and the unused pad cells (zeroed, never used in a sum)
    for (int k = threadIdx.x; k < 2 * R; k += V4_THREADS) {
        const int64_t g = k < R ? base - R + k : base + V4_TILE + (k - R);
        tile[k < R ? L0 + k : PAD + V4_TILE + (k - R)] = (g >= 0 && g < n) ? x[g] : 0.f;
    }
    if constexpr (L0 > 0) {
        if (threadIdx.x < L0) tile[threadIdx.x] = 0.f;
    }
    if constexpr (SMEM > USED) {
        if (threadIdx.x < SMEM - USED) tile[USED + threadIdx.x] = 0.f;
    }
    __syncthreads();

    float win[WL];
    const float4* tv = reinterpret_cast<const float4*>(&tile[threadIdx.x * V4_ITEMS]);
#pragma unroll
    for (int q = 0; q < WL / 4; ++q) {
        const float4 v = tv[q];
        win[4 * q] = v.x;
        win[4 * q + 1] = v.y;
        win[4 * q + 2] = v.z;
        win[4 * q + 3] = v.w;
    }
    float out[V4_ITEMS];
#pragma unroll
    for (int m = 0; m < V4_ITEMS; ++m) {
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < K; ++j) acc = fmaf(c_w[j], win[L0 + m + j], acc);
        out[m] = acc;
    }

    const int64_t o = base + threadIdx.x * V4_ITEMS;
    if (o + V4_ITEMS <= n) {
        float4* yv = reinterpret_cast<float4*>(y + o);  // o % 8 == 0: 32-byte aligned
        yv[0] = make_float4(out[0], out[1], out[2], out[3]);
        yv[1] = make_float4(out[4], out[5], out[6], out[7]);
    } else {
#pragma unroll
        for (int m = 0; m < V4_ITEMS; ++m)
            if (o + m < n) y[o + m] = out[m];
    }
}

#define CONV_V4(R)                                                                             \
    extern "C" __global__ void __launch_bounds__(V4_THREADS) conv1d_v4_r##R(                   \
        const float* __restrict__ x, float* __restrict__ y, int n) {                           \
        conv1d_registers<R>(x, y, n);                                                          \
    }

CONV_V4(0)
CONV_V4(1)
CONV_V4(2)
CONV_V4(3)
CONV_V4(4)
CONV_V4(5)
CONV_V4(6)
CONV_V4(7)
CONV_V4(8)
CONV_V4(9)
CONV_V4(10)
CONV_V4(11)
CONV_V4(12)
CONV_V4(13)
CONV_V4(14)
CONV_V4(15)
