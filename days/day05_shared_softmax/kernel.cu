// Day 5: row softmax with one block per row.
//
//   y[r, j] = exp(x[r, j] - max_r) / sum_k exp(x[r, k] - max_r)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 5
//
// Versions (all launched with one block per row; rows are independent):
//   v1  shared-memory tree reductions; three passes over the row (max, sum, write)
//   v2  warp-shuffle reductions (one shared slot per warp); still three passes
//   v3  online softmax: max and sum in ONE pass (rescale the running sum when the max
//       grows), then the write pass: two reads of the row instead of three
//   v4  the row is read once into registers (float4 loads where rows are 16-byte aligned),
//       max, exp and sum are done on registers, then one write: the minimum traffic,
//       one read and one write per element. Rows of <= 1024 floats get one warp each instead
//       of one block; rows too long for registers fall back to a two-pass float4 loop.
#include <cfloat>
#include <cstdint>

// ---------------------------------------------------------------------------------------
// v1: classic shared-memory tree reduction (blockDim.x must be a power of two)
// ---------------------------------------------------------------------------------------
__device__ float block_reduce_tree_max(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) buf[threadIdx.x] = fmaxf(buf[threadIdx.x], buf[threadIdx.x + stride]);
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();  // buf is reused by the next reduction
    return r;
}

__device__ float block_reduce_tree_sum(float v, float* buf) {
    buf[threadIdx.x] = v;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride >>= 1) {
        if (threadIdx.x < stride) buf[threadIdx.x] += buf[threadIdx.x + stride];
        __syncthreads();
    }
    float r = buf[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_v1(const float* __restrict__ x, float* __restrict__ y,
                                      int rows, int cols) {
    extern __shared__ float buf[];  // blockDim.x floats
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;

    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = block_reduce_tree_max(m, buf);

    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
    s = block_reduce_tree_sum(s, buf);

    const float inv = 1.f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
}

// ---------------------------------------------------------------------------------------
// v2: warp shuffles. A warp reduces 32 values in 5 register exchanges with no shared
// memory and no __syncthreads; only the 32 warp results go through shared memory.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

// Reduce across the block: each warp reduces, lane 0 parks its value, warp 0 reduces those.
// Every thread gets the result. `buf` holds 32 floats.
template <bool IS_MAX>
__device__ float block_reduce(float v, float* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? buf[lane] : (IS_MAX ? -FLT_MAX : 0.f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);  // every warp reduces the partials itself
    __syncthreads();                           // buf may be reused right after
    return r;
}

extern "C" __global__ void softmax_v2(const float* __restrict__ x, float* __restrict__ y,
                                      int rows, int cols) {
    __shared__ float buf[32];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;

    float m = -FLT_MAX;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) m = fmaxf(m, xr[j]);
    m = block_reduce<true>(m, buf);

    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += expf(xr[j] - m);
    s = block_reduce<false>(s, buf);

    const float inv = 1.f / s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - m) * inv;
}

// ---------------------------------------------------------------------------------------
// v3: online softmax (Milakov & Gimelshein 2018). Keep a running max m and a running sum s
// of exp(x - m); when a larger x arrives, rescale s by exp(m_old - m_new). Two partial
// states (m1, s1), (m2, s2) merge as m = max(m1, m2), s = s1 e^(m1-m) + s2 e^(m2-m).
// ---------------------------------------------------------------------------------------
struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    // a.m == -FLT_MAX with s == 0 (an empty state) contributes 0 either way
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}

__device__ __forceinline__ void online_add(MaxSum& st, float v) {
    if (v > st.m) {
        st.s = st.s * expf(st.m - v) + 1.f;
        st.m = v;
    } else {
        st.s += expf(v - st.m);
    }
}

__device__ MaxSum block_reduce_maxsum(MaxSum st, MaxSum* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)};
        st = merge(st, other);
    }
    if (lane == 0) buf[warp] = st;
    __syncthreads();
    MaxSum r = lane < nwarps ? buf[lane] : MaxSum{-FLT_MAX, 0.f};
    for (int o = 16; o > 0; o >>= 1) {
        MaxSum other{__shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o)};
        r = merge(r, other);
    }
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_v3(const float* __restrict__ x, float* __restrict__ y,
                                      int rows, int cols) {
    __shared__ MaxSum buf[32];
    const int64_t row = blockIdx.x;
    const float* xr = x + row * cols;
    float* yr = y + row * cols;

    MaxSum st{-FLT_MAX, 0.f};
    for (int j = threadIdx.x; j < cols; j += blockDim.x) online_add(st, xr[j]);
    st = block_reduce_maxsum(st, buf);

    const float inv = 1.f / st.s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) yr[j] = expf(xr[j] - st.m) * inv;
}

// ---------------------------------------------------------------------------------------
// v4: one read, one write. Each thread keeps ITEMS vectors of VEC floats in registers
// (ITEMS is a template parameter so the array is fully unrolled and never spills to local
// memory). VEC = 4 uses 16-byte loads and needs cols % 4 == 0 (so every row starts
// 16-byte aligned); VEC = 1 takes any width.
// ---------------------------------------------------------------------------------------
template <int VEC> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ float& lane_of(float& v, int) { return v; }
__device__ __forceinline__ float& lane_of(float4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

template <int VEC, int ITEMS>
__device__ __forceinline__ void softmax_row_in_registers(const float* __restrict__ xr,
                                                         float* __restrict__ yr, int cols) {
    using T = typename Vec<VEC>::T;
    __shared__ float buf[32];
    const int nvec = cols / VEC;  // VEC divides cols by the launch contract
    const T* xv = reinterpret_cast<const T*>(xr);
    T* yv = reinterpret_cast<T*>(yr);

    T v[ITEMS];
    float m = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        if (j < nvec) {
            v[i] = __ldcs(xv + j);  // streaming load: this row is not read again
#pragma unroll
            for (int k = 0; k < VEC; ++k) m = fmaxf(m, lane_of(v[i], k));
        }
    }
    m = block_reduce<true>(m, buf);

    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        if (j < nvec) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                float e = expf(lane_of(v[i], k) - m);
                lane_of(v[i], k) = e;
                s += e;
            }
        }
    }
    s = block_reduce<false>(s, buf);

    const float inv = 1.f / s;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = threadIdx.x + i * blockDim.x;
        if (j < nvec) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) lane_of(v[i], k) *= inv;
            __stcs(yv + j, v[i]);  // streaming store: evict-first, nobody reads y here
        }
    }
}

#define SOFTMAX_V4(VEC, ITEMS)                                                                 \
    extern "C" __global__ void __launch_bounds__(256) softmax_v4_vec##VEC##_items##ITEMS(     \
        const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {             \
        const int64_t row = blockIdx.x;                                                        \
        softmax_row_in_registers<VEC, ITEMS>(x + row * cols, y + row * cols, cols);            \
    }

SOFTMAX_V4(4, 1)
SOFTMAX_V4(4, 2)
SOFTMAX_V4(4, 4)
SOFTMAX_V4(4, 8)
SOFTMAX_V4(4, 16)
SOFTMAX_V4(1, 1)
SOFTMAX_V4(1, 2)
SOFTMAX_V4(1, 4)
SOFTMAX_V4(1, 8)
SOFTMAX_V4(1, 16)
SOFTMAX_V4(1, 32)
SOFTMAX_V4(1, 64)

// Short rows (<= 1024 floats): a whole block per row would spend more time in its two block
// reductions (four barriers) than in moving 4 KB. Give each row ONE WARP instead: 8 rows per
// block of 256 threads, reductions by shuffles only, no shared memory, no barriers.
template <int VEC, int ITEMS>
__device__ __forceinline__ void softmax_row_in_warp(const float* __restrict__ xr,
                                                    float* __restrict__ yr, int cols) {
    using T = typename Vec<VEC>::T;
    const int lane = threadIdx.x & 31;
    const int nvec = cols / VEC;
    const T* xv = reinterpret_cast<const T*>(xr);
    T* yv = reinterpret_cast<T*>(yr);

    T v[ITEMS];
    float m = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + i * 32;
        if (j < nvec) {
            v[i] = __ldcs(xv + j);
#pragma unroll
            for (int k = 0; k < VEC; ++k) m = fmaxf(m, lane_of(v[i], k));
        }
    }
    m = warp_max(m);
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + i * 32;
        if (j < nvec) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                float e = expf(lane_of(v[i], k) - m);
                lane_of(v[i], k) = e;
                s += e;
            }
        }
    }
    const float inv = 1.f / warp_sum(s);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + i * 32;
        if (j < nvec) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) lane_of(v[i], k) *= inv;
            __stcs(yv + j, v[i]);
        }
    }
}

#define SOFTMAX_V4_WARP(VEC, ITEMS)                                                            \
    extern "C" __global__ void __launch_bounds__(256) softmax_v4_warp_vec##VEC##_items##ITEMS( \
        const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {             \
        const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;        \
        if (row >= rows) return; /* whole warps leave together: shuffles stay full-mask */   \
        softmax_row_in_warp<VEC, ITEMS>(x + row * cols, y + row * cols, cols);                 \
    }

SOFTMAX_V4_WARP(4, 1)
SOFTMAX_V4_WARP(4, 2)
SOFTMAX_V4_WARP(4, 4)
SOFTMAX_V4_WARP(4, 8)
SOFTMAX_V4_WARP(1, 4)
SOFTMAX_V4_WARP(1, 8)
SOFTMAX_V4_WARP(1, 16)
SOFTMAX_V4_WARP(1, 32)

// Rows longer than 256 threads x 16 float4 (16384 floats; 16384 scalars for odd widths) do not
// fit in registers: two passes like v3, with 16-byte loads. The second read hits L2 only while the
// rows in flight fit in it: at 1024 x 65536, 8 blocks per SM x 132 SMs x 256 KB rows do not
// (measured 64% of the copy ceiling there, 2026-11-22).
extern "C" __global__ void softmax_v4_long_vec4(const float* __restrict__ x,
                                                float* __restrict__ y, int rows, int cols) {
    __shared__ MaxSum buf[32];
    const int64_t row = blockIdx.x;
    const float4* xr = reinterpret_cast<const float4*>(x + row * cols);
    float4* yr = reinterpret_cast<float4*>(y + row * cols);
    const int n4 = cols / 4;

    MaxSum st{-FLT_MAX, 0.f};
    for (int j = threadIdx.x; j < n4; j += blockDim.x) {
        float4 v = xr[j];
        online_add(st, v.x);
        online_add(st, v.y);
        online_add(st, v.z);
        online_add(st, v.w);
    }
    st = block_reduce_maxsum(st, buf);

    const float inv = 1.f / st.s;
    for (int j = threadIdx.x; j < n4; j += blockDim.x) {
        float4 v = __ldcs(xr + j);
        v.x = expf(v.x - st.m) * inv;
        v.y = expf(v.y - st.m) * inv;
        v.z = expf(v.z - st.m) * inv;
        v.w = expf(v.w - st.m) * inv;
        __stcs(yr + j, v);
    }
}
