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
//   v4  the row is read once into registers (float4 loads when cols % 4 == 0, so every row
//       is 16-byte aligned; scalars otherwise), max, exp and sum are done on registers, then
//       one write: the minimum traffic, one read and one write per element. The part of a row
//       that does not fit in registers (beyond 16384 floats) is read a second time.
//   v5  v4 with ONE WARP per row for rows of up to 1024 floats: no barriers, no shared memory
//       (rows wider than that run v4's kernel: the table says "= v4")
//   v6  any width: every row is a scalar head (up to the next 16-byte boundary), an aligned
//       float4 body and a scalar tail, so odd widths get 16-byte loads too; rows longer than
//       registers hold keep the rest in shared memory (227 KB a block on Hopper: a 50257-float
//       vocabulary row fits), so even they are read from memory once.
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
// v4-v6: one read, one write. A GROUP of TPR threads owns a row (TPR = 32: one warp; TPR =
// blockDim.x: the whole block). Thread t of the group keeps body vectors t, t + TPR, ...,
// t + (ITEMS-1)*TPR in registers (ITEMS is a template parameter, so the array is unrolled and
// never goes to local memory). With SMEM the next `smem_vecs` vectors go to shared memory
// (each thread stores and later reloads only its own, so no barrier is needed for them).
// Whatever is left (rows longer than registers + shared memory) is reduced online while it
// streams past and read again for the write.
// ---------------------------------------------------------------------------------------
template <int VEC> struct Vec;
template <> struct Vec<1> { using T = float; };
template <> struct Vec<4> { using T = float4; };

__device__ __forceinline__ float& lane_of(float& v, int) { return v; }
__device__ __forceinline__ float& lane_of(float4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

template <int VEC>
__device__ __forceinline__ float vmax(typename Vec<VEC>::T v, float m) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) m = fmaxf(m, lane_of(v, k));
    return m;
}

// exp(v - m) in place; returns the sum of the lanes
template <int VEC>
__device__ __forceinline__ float vexp(typename Vec<VEC>::T& v, float m) {
    float s = 0.f;
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
        lane_of(v, k) = expf(lane_of(v, k) - m);
        s += lane_of(v, k);
    }
    return s;
}

template <int VEC>
__device__ __forceinline__ void vscale(typename Vec<VEC>::T& v, float a) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) lane_of(v, k) *= a;
}

// max / sum over the group: shuffles for a warp, shuffles + 32 shared slots for a block
template <int TPR, bool IS_MAX>
__device__ __forceinline__ float group_reduce(float v, float* red) {
    if (TPR == 32) return IS_MAX ? warp_max(v) : warp_sum(v);
    return block_reduce<IS_MAX>(v, red);
}

template <int TPR, int VEC, int ITEMS, bool HEADTAIL, bool SMEM>
__device__ __forceinline__ void softmax_row(const float* __restrict__ xr, float* __restrict__ yr,
                                            int cols, int smem_vecs, float* red,
                                            typename Vec<VEC>::T* stage) {
    using T = typename Vec<VEC>::T;
    const int t = TPR == 32 ? (threadIdx.x & 31) : threadIdx.x;

    // head: the elements before the first 16-byte boundary of the row (x and y rows share
    // their alignment: both buffers start 256-byte aligned and rows have the same length)
    int head = 0;
    if (HEADTAIL) head = min((4 - (int)((reinterpret_cast<uintptr_t>(xr) >> 2) & 3)) & 3, cols);
    const int nvec = (cols - head) / VEC;
    const int tail = cols - head - nvec * VEC;
    const T* xv = reinterpret_cast<const T*>(xr + head);
    T* yv = reinterpret_cast<T*>(yr + head);
    const int in_regs = ITEMS * TPR;
    const int on_chip = in_regs + (SMEM ? smem_vecs : 0);

    // 1. read the row once: registers, then shared memory; the rest streams through
    T v[ITEMS];
    float m = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + i * TPR;
        if (j < nvec) {
            v[i] = xv[j];
            m = vmax<VEC>(v[i], m);
        }
    }
    if (SMEM) {
        for (int j = in_regs + t; j < min(nvec, on_chip); j += TPR) {
            const T w = xv[j];
            stage[j - in_regs] = w;
            m = vmax<VEC>(w, m);
        }
    }
    MaxSum rest{-FLT_MAX, 0.f};  // online state of the part that stays in global memory
    for (int j = on_chip + t; j < nvec; j += TPR) {
        T w = xv[j];
#pragma unroll
        for (int k = 0; k < VEC; ++k) online_add(rest, lane_of(w, k));
    }
    float h = 0.f, tl = 0.f;  // this thread's head and tail element, if it has one
    if (HEADTAIL) {
        if (t < head) m = fmaxf(m, h = xr[t]);
        if (t < tail) m = fmaxf(m, tl = xr[head + nvec * VEC + t]);
    }
    const float mx = group_reduce<TPR, true>(fmaxf(m, rest.m), red);

    // 2. exponentials (kept where the values are) and their sum
    float s = rest.s > 0.f ? rest.s * expf(rest.m - mx) : 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (t + i * TPR < nvec) s += vexp<VEC>(v[i], mx);
    if (SMEM) {
        for (int j = in_regs + t; j < min(nvec, on_chip); j += TPR) {
            T w = stage[j - in_regs];
            s += vexp<VEC>(w, mx);
            stage[j - in_regs] = w;
        }
    }
    if (HEADTAIL) {
        if (t < head) s += (h = expf(h - mx));
        if (t < tail) s += (tl = expf(tl - mx));
    }
    const float inv = 1.f / group_reduce<TPR, false>(s, red);

    // 3. one write (plain stores: on Hopper they stream out faster than evict-first ones)
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + i * TPR;
        if (j < nvec) {
            vscale<VEC>(v[i], inv);
            yv[j] = v[i];
        }
    }
    if (SMEM) {
        for (int j = in_regs + t; j < min(nvec, on_chip); j += TPR) {
            T w = stage[j - in_regs];
            vscale<VEC>(w, inv);
            yv[j] = w;
        }
    }
    for (int j = on_chip + t; j < nvec; j += TPR) {  // read again (from L2 with luck)
        T w = xv[j];
#pragma unroll
        for (int k = 0; k < VEC; ++k) lane_of(w, k) = expf(lane_of(w, k) - mx) * inv;
        yv[j] = w;
    }
    if (HEADTAIL) {
        if (t < head) yr[t] = h * inv;
        if (t < tail) yr[head + nvec * VEC + t] = tl * inv;
    }
}

// One row per block (TPR = BLOCK) or one row per warp (TPR = 32, BLOCK / 32 rows a block).
template <int BLOCK, int TPR, int VEC, int ITEMS, bool HEADTAIL, bool SMEM>
__device__ __forceinline__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y,
                                             int rows, int cols, int smem_vecs) {
    __shared__ float red[32];
    extern __shared__ float4 stage[];  // SMEM only: smem_vecs vectors, sized at launch
    const int64_t row = TPR == 32 ? (int64_t)blockIdx.x * (BLOCK / 32) + threadIdx.x / 32
                                  : (int64_t)blockIdx.x;
    if (row >= rows) return;  // whole warps leave together: shuffles keep the full mask
    softmax_row<TPR, VEC, ITEMS, HEADTAIL, SMEM>(
        x + row * cols, y + row * cols, cols, smem_vecs, red,
        reinterpret_cast<typename Vec<VEC>::T*>(stage));
}

// __launch_bounds__(BLOCK, 1): the register cap is what one block of BLOCK threads allows
// (with the default minimum the compiler spilled 8 bytes in two of the warp kernels)
#define SOFTMAX_ROWS(NAME, BLOCK, TPR, VEC, ITEMS, HEADTAIL, SMEM)                             \
    extern "C" __global__ void __launch_bounds__(BLOCK, 1) NAME(                              \
        const float* __restrict__ x, float* __restrict__ y, int rows, int cols, int smem_vecs) { \
        softmax_rows<BLOCK, TPR, VEC, ITEMS, HEADTAIL, SMEM>(x, y, rows, cols, smem_vecs);     \
    }

// v4: a block of 256 per row; float4 when cols % 4 == 0, scalars otherwise
#define V4(VEC, ITEMS) SOFTMAX_ROWS(softmax_v4_vec##VEC##_items##ITEMS, 256, 256, VEC, ITEMS, false, false)
V4(4, 1) V4(4, 2) V4(4, 4) V4(4, 8) V4(4, 16)
V4(1, 4) V4(1, 8) V4(1, 16) V4(1, 32) V4(1, 64)

// v5: a warp per row for rows of <= 1024 floats (8 rows a block of 256)
#define V5(VEC, ITEMS) SOFTMAX_ROWS(softmax_v5_warp_vec##VEC##_items##ITEMS, 256, 32, VEC, ITEMS, false, false)
V5(4, 1) V5(4, 2) V5(4, 4) V5(4, 8)
V5(1, 4) V5(1, 8) V5(1, 16) V5(1, 32)

// v6: any width with float4: a warp per row up to 1024 (+3) floats, a block of 256 up to 16384,
// beyond that one block of 1024 an SM with 8 float4 a thread in registers and the rest of the
// row (up to ~57,000 floats) in shared memory
#define V6W(ITEMS) SOFTMAX_ROWS(softmax_v6_warp_items##ITEMS, 256, 32, 4, ITEMS, true, false)
#define V6B(ITEMS) SOFTMAX_ROWS(softmax_v6_block_items##ITEMS, 256, 256, 4, ITEMS, true, false)
V6W(1) V6W(2) V6W(4) V6W(8)
V6B(1) V6B(2) V6B(4) V6B(8) V6B(16)
SOFTMAX_ROWS(softmax_v6_long, 1024, 1024, 4, 8, true, true)
