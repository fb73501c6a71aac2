// Day 19: softmax backward, and the fused softmax + cross-entropy gradient.
//
//   given A = softmax(Z) (row-wise) and the upstream gradient dA = dL/dA:
//     dZ[r, j] = A[r, j] * (dA[r, j] - dot_r),      dot_r = sum_k dA[r, k] A[r, k]
//   given logits Z and labels y, for L = (1/rows) sum_r -log softmax(Z)[r, y_r]:
//     dZ[r, j] = (softmax(Z)[r, j] - [j == y_r]) / rows
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 19
//
// Versions of the softmax backward (one row = one dot product, then an elementwise pass):
//   v1  two kernels: smbwd_v1_rowdot (block per row -> dot[rows] in global memory), then
//       smbwd_v1_apply (elementwise over the whole matrix): A and dA are each read twice.
//   v2  smbwd_v2: fused, one block per row: pass 1 computes the dot (block reduction), pass
//       2 reads the row again (mostly from L2) and writes dZ. One launch, no dot buffer.
//   v3  smbwd_v3_items{1,2,4,8}: the row of A and of dA is loaded ONCE into registers with
//       float4 loads (a scalar head up to the first 16-byte boundary and a scalar tail, so any
//       width vectorizes), the dot is reduced, dZ is computed from registers: one read of each
//       input and one write, the minimum traffic. Rows wider than 8 float4 x 512 threads use
//       smbwd_v3_long (the same float4 code in two passes).
// The fused softmax + cross-entropy gradient (not a version of the above: its own function):
//   softmax_ce_grad_items{1,2,4,8}    row in registers (up to 16K classes)
//   softmax_ce_grad_smem              row staged in shared memory (up to ~57K classes, e.g.
//                                     GPT-2's 50257): still one read and one write
//   softmax_ce_grad_long              two passes (online max/sum, then write) for longer rows
#include <cfloat>
#include <cstdint>

// ---------------------------------------------------------------------------------------
// reductions
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// every thread gets the block's sum (or max); buf holds 32 floats
template <bool IS_MAX>
__device__ float block_reduce(float v, float* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int nwarps = (blockDim.x + 31) >> 5;
    v = IS_MAX ? warp_max(v) : warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    float r = lane < nwarps ? buf[lane] : (IS_MAX ? -FLT_MAX : 0.f);
    r = IS_MAX ? warp_max(r) : warp_sum(r);
    __syncthreads();  // buf may be reused right after
    return r;
}

struct MaxSum {
    float m, s;
};

__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
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
    for (int o = 16; o > 0; o >>= 1)
        st = merge(st, {__shfl_xor_sync(0xffffffffu, st.m, o), __shfl_xor_sync(0xffffffffu, st.s, o)});
    if (lane == 0) buf[warp] = st;
    __syncthreads();
    MaxSum r = lane < nwarps ? buf[lane] : MaxSum{-FLT_MAX, 0.f};
    for (int o = 16; o > 0; o >>= 1)
        r = merge(r, {__shfl_xor_sync(0xffffffffu, r.m, o), __shfl_xor_sync(0xffffffffu, r.s, o)});
    __syncthreads();
    return r;
}

// A row of `cols` floats that starts `off` floats into a 16-byte aligned buffer splits into
// a scalar head (up to the first 16-byte boundary), n4 aligned float4, and a scalar tail.
// Every array indexed like the row (A, dA, dZ) shares the same split.
struct RowSplit {
    int head, n4, tail;
};

__device__ __forceinline__ RowSplit split_row(int64_t off, int cols) {
    RowSplit s;
    s.head = min((int)((4 - (off & 3)) & 3), cols);
    s.n4 = (cols - s.head) >> 2;
    s.tail = cols - s.head - 4 * s.n4;
    return s;
}

// ---------------------------------------------------------------------------------------
// v1: a row-dot kernel, then an elementwise kernel
// ---------------------------------------------------------------------------------------
extern "C" __global__ void smbwd_v1_rowdot(const float* __restrict__ A, const float* __restrict__ dA,
                                           float* __restrict__ dot, int rows, int cols) {
    __shared__ float buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += A[off + j] * dA[off + j];
    s = block_reduce<false>(s, buf);
    if (threadIdx.x == 0) dot[blockIdx.x] = s;
}

// grid: x over column blocks, y over rows (looping when rows > gridDim.y)
extern "C" __global__ void smbwd_v1_apply(const float* __restrict__ A, const float* __restrict__ dA,
                                          const float* __restrict__ dot, float* __restrict__ dZ,
                                          int rows, int cols) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    for (int r = blockIdx.y; r < rows; r += gridDim.y) {
        const int64_t i = (int64_t)r * cols + j;
        dZ[i] = A[i] * (dA[i] - dot[r]);
    }
}

// ---------------------------------------------------------------------------------------
// v2: one block per row, two passes over the row inside one kernel
// ---------------------------------------------------------------------------------------
extern "C" __global__ void smbwd_v2(const float* __restrict__ A, const float* __restrict__ dA,
                                    float* __restrict__ dZ, int rows, int cols) {
    __shared__ float buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    const float* a = A + off;
    const float* da = dA + off;
    float s = 0.f;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) s += a[j] * da[j];
    s = block_reduce<false>(s, buf);
    float* dz = dZ + off;
    for (int j = threadIdx.x; j < cols; j += blockDim.x) dz[j] = a[j] * (da[j] - s);
}

// ---------------------------------------------------------------------------------------
// v3: the row in registers, float4 loads, one read and one write
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }

__device__ __forceinline__ float4 bwd4(float4 a, float4 da, float s) {
    return make_float4(a.x * (da.x - s), a.y * (da.y - s), a.z * (da.z - s), a.w * (da.w - s));
}

// ITEMS float4 of A and of dA per thread: rows up to ITEMS * 4 * blockDim.x floats (+ head/tail)
template <int ITEMS>
__device__ __forceinline__ void smbwd_row_in_registers(const float* __restrict__ A,
                                                       const float* __restrict__ dA,
                                                       float* __restrict__ dZ, int cols) {
    __shared__ float buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    const RowSplit sp = split_row(off, cols);
    const float* a = A + off;
    const float* da = dA + off;
    float* dz = dZ + off;
    const float4* a4 = reinterpret_cast<const float4*>(a + sp.head);
    const float4* da4 = reinterpret_cast<const float4*>(da + sp.head);
    const int t = threadIdx.x;

    float4 av[ITEMS], dv[ITEMS];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int k = t + i * blockDim.x;
        if (k < sp.n4) {
            av[i] = __ldcs(a4 + k);  // streaming: read once, not again
            dv[i] = __ldcs(da4 + k);
        }
    }
    // head and tail scalars: threads 0..2 hold at most one of each
    float ah = 0.f, dh = 0.f, at = 0.f, dt = 0.f;
    const int tail0 = sp.head + 4 * sp.n4;
    if (t < sp.head) { ah = a[t]; dh = da[t]; }
    if (t < sp.tail) { at = a[tail0 + t]; dt = da[tail0 + t]; }
    s = ah * dh + at * dt;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (t + i * (int)blockDim.x < sp.n4) s += dot4(av[i], dv[i]);
    s = block_reduce<false>(s, buf);

    float4* dz4 = reinterpret_cast<float4*>(dz + sp.head);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int k = t + i * blockDim.x;
        if (k < sp.n4) __stcs(dz4 + k, bwd4(av[i], dv[i], s));
    }
    if (t < sp.head) dz[t] = ah * (dh - s);
    if (t < sp.tail) dz[tail0 + t] = at * (dt - s);
}

#define SMBWD_V3(ITEMS)                                                                        \
    extern "C" __global__ void __launch_bounds__(512) smbwd_v3_items##ITEMS(                  \
        const float* __restrict__ A, const float* __restrict__ dA, float* __restrict__ dZ,    \
        int rows, int cols) {                                                                  \
        smbwd_row_in_registers<ITEMS>(A, dA, dZ, cols);                                        \
    }

SMBWD_V3(1)
SMBWD_V3(2)
SMBWD_V3(4)
SMBWD_V3(8)

// rows too wide for registers: the same float4 split, two passes (the second mostly from L2)
extern "C" __global__ void __launch_bounds__(1024) smbwd_v3_long(const float* __restrict__ A,
                                                                 const float* __restrict__ dA,
                                                                 float* __restrict__ dZ,
                                                                 int rows, int cols) {
    __shared__ float buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    const RowSplit sp = split_row(off, cols);
    const float* a = A + off;
    const float* da = dA + off;
    float* dz = dZ + off;
    const float4* a4 = reinterpret_cast<const float4*>(a + sp.head);
    const float4* da4 = reinterpret_cast<const float4*>(da + sp.head);
    const int t = threadIdx.x, T = blockDim.x, tail0 = sp.head + 4 * sp.n4;

    float s = 0.f;
    if (t < sp.head) s += a[t] * da[t];
    if (t < sp.tail) s += a[tail0 + t] * da[tail0 + t];
    for (int base = t; base < sp.n4; base += 4 * T) {  // four float4 pairs in flight
        float4 av[4], dv[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < sp.n4) { av[u] = a4[base + u * T]; dv[u] = da4[base + u * T]; }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < sp.n4) s += dot4(av[u], dv[u]);
    }
    s = block_reduce<false>(s, buf);

    float4* dz4 = reinterpret_cast<float4*>(dz + sp.head);
    if (t < sp.head) dz[t] = a[t] * (da[t] - s);
    if (t < sp.tail) dz[tail0 + t] = a[tail0 + t] * (da[tail0 + t] - s);
    for (int base = t; base < sp.n4; base += 4 * T) {
        float4 av[4], dv[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < sp.n4) { av[u] = __ldcs(a4 + base + u * T); dv[u] = __ldcs(da4 + base + u * T); }
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < sp.n4) __stcs(dz4 + base + u * T, bwd4(av[u], dv[u], s));
    }
}

// ---------------------------------------------------------------------------------------
// The fused softmax + cross-entropy gradient: dZ = (softmax(Z) - onehot(y)) * scale
// (scale = 1/rows for a mean loss). A is recomputed from the logits in the same kernel.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float ce_grad(float e, float inv_sum, float scale, bool is_label) {
    return (e * inv_sum - (is_label ? 1.f : 0.f)) * scale;
}

__device__ __forceinline__ float4 ce_grad4(float4 e, float inv_sum, float scale, int j0, int label) {
    return make_float4(ce_grad(e.x, inv_sum, scale, j0 == label), ce_grad(e.y, inv_sum, scale, j0 + 1 == label),
                       ce_grad(e.z, inv_sum, scale, j0 + 2 == label), ce_grad(e.w, inv_sum, scale, j0 + 3 == label));
}

__device__ __forceinline__ float max4(float4 v) { return fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)); }

__device__ __forceinline__ float4 exp4(float4 v, float m) {
    return make_float4(expf(v.x - m), expf(v.y - m), expf(v.z - m), expf(v.w - m));
}

template <int ITEMS>
__device__ __forceinline__ void ce_row_in_registers(const float* __restrict__ Z, const int* __restrict__ y,
                                                    float* __restrict__ dZ, int cols, float scale) {
    __shared__ float buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    const RowSplit sp = split_row(off, cols);
    const float* z = Z + off;
    float* dz = dZ + off;
    const float4* z4 = reinterpret_cast<const float4*>(z + sp.head);
    const int t = threadIdx.x, tail0 = sp.head + 4 * sp.n4;
    const int label = y[blockIdx.x];

    float4 v[ITEMS];
    float m = -FLT_MAX;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int k = t + i * blockDim.x;
        if (k < sp.n4) {
            v[i] = __ldcs(z4 + k);
            m = fmaxf(m, max4(v[i]));
        }
    }
    float zh = -FLT_MAX, zt = -FLT_MAX;
    if (t < sp.head) zh = z[t];
    if (t < sp.tail) zt = z[tail0 + t];
    m = block_reduce<true>(fmaxf(m, fmaxf(zh, zt)), buf);

    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (t + i * (int)blockDim.x < sp.n4) {
            v[i] = exp4(v[i], m);
            s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
        }
    }
    const float eh = t < sp.head ? expf(zh - m) : 0.f;
    const float et = t < sp.tail ? expf(zt - m) : 0.f;
    s = block_reduce<false>(s + eh + et, buf);

    const float inv = 1.f / s;
    float4* dz4 = reinterpret_cast<float4*>(dz + sp.head);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int k = t + i * blockDim.x;
        if (k < sp.n4) __stcs(dz4 + k, ce_grad4(v[i], inv, scale, sp.head + 4 * k, label));
    }
    if (t < sp.head) dz[t] = ce_grad(eh, inv, scale, t == label);
    if (t < sp.tail) dz[tail0 + t] = ce_grad(et, inv, scale, tail0 + t == label);
}

#define CE_GRAD(ITEMS)                                                                          \
    extern "C" __global__ void __launch_bounds__(512) softmax_ce_grad_items##ITEMS(            \
        const float* __restrict__ Z, const int* __restrict__ y, float* __restrict__ dZ,         \
        int rows, int cols, float scale) {                                                      \
        ce_row_in_registers<ITEMS>(Z, y, dZ, cols, scale);                                      \
    }

CE_GRAD(1)
CE_GRAD(2)
CE_GRAD(4)
CE_GRAD(8)

// The row staged in dynamic shared memory (cols + 3 floats). Element j of the row goes to
// srow[pad + j] with pad = off & 3, so that shared and global addresses agree mod 16 bytes
// and the body moves as float4 both ways. One global read, one global write.
extern "C" __global__ void __launch_bounds__(1024) softmax_ce_grad_smem(const float* __restrict__ Z,
                                                                        const int* __restrict__ y,
                                                                        float* __restrict__ dZ,
                                                                        int rows, int cols, float scale) {
    extern __shared__ __align__(16) float srow[];
    __shared__ float buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    const RowSplit sp = split_row(off, cols);
    const int pad = (int)(off & 3);
    float* s_el = srow + pad;  // s_el[j] = element j; s_el + head is 16-byte aligned
    const float* z = Z + off;
    float* dz = dZ + off;
    const float4* z4 = reinterpret_cast<const float4*>(z + sp.head);
    float4* s4 = reinterpret_cast<float4*>(s_el + sp.head);
    const int t = threadIdx.x, T = blockDim.x, tail0 = sp.head + 4 * sp.n4;
    const int label = y[blockIdx.x];

    // 1. global -> shared (four float4 in flight per thread), running max
    float m = -FLT_MAX;
    for (int base = t; base < sp.n4; base += 4 * T) {
        float4 v[4];
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < sp.n4) v[u] = __ldcs(z4 + base + u * T);
#pragma unroll
        for (int u = 0; u < 4; ++u)
            if (base + u * T < sp.n4) {
                s4[base + u * T] = v[u];
                m = fmaxf(m, max4(v[u]));
            }
    }
    if (t < sp.head) { s_el[t] = z[t]; m = fmaxf(m, s_el[t]); }
    if (t < sp.tail) { s_el[tail0 + t] = z[tail0 + t]; m = fmaxf(m, s_el[tail0 + t]); }
    m = block_reduce<true>(m, buf);  // its barrier also publishes the staged row

    // 2. exp in place in shared memory, sum. Each thread rewrites exactly the elements it
    //    loaded in step 1 (same index formula), so no barrier is needed between 1 and 2 for them.
    float s = 0.f;
    for (int k = t; k < sp.n4; k += T) {
        const float4 e = exp4(s4[k], m);
        s4[k] = e;
        s += (e.x + e.y) + (e.z + e.w);
    }
    if (t < sp.head) { s_el[t] = expf(s_el[t] - m); s += s_el[t]; }
    if (t < sp.tail) { s_el[tail0 + t] = expf(s_el[tail0 + t] - m); s += s_el[tail0 + t]; }
    s = block_reduce<false>(s, buf);

    // 3. shared -> global
    const float inv = 1.f / s;
    float4* dz4 = reinterpret_cast<float4*>(dz + sp.head);
    for (int k = t; k < sp.n4; k += T) __stcs(dz4 + k, ce_grad4(s4[k], inv, scale, sp.head + 4 * k, label));
    if (t < sp.head) dz[t] = ce_grad(s_el[t], inv, scale, t == label);
    if (t < sp.tail) dz[tail0 + t] = ce_grad(s_el[tail0 + t], inv, scale, tail0 + t == label);
}

// rows longer than shared memory: online max/sum in one pass, then the write pass
extern "C" __global__ void __launch_bounds__(1024) softmax_ce_grad_long(const float* __restrict__ Z,
                                                                        const int* __restrict__ y,
                                                                        float* __restrict__ dZ,
                                                                        int rows, int cols, float scale) {
    __shared__ MaxSum buf[32];
    const int64_t off = (int64_t)blockIdx.x * cols;
    const float* z = Z + off;
    float* dz = dZ + off;
    const int label = y[blockIdx.x];
    MaxSum st{-FLT_MAX, 0.f};
    for (int j = threadIdx.x; j < cols; j += blockDim.x) online_add(st, z[j]);
    st = block_reduce_maxsum(st, buf);
    const float inv = 1.f / st.s;
    for (int j = threadIdx.x; j < cols; j += blockDim.x)
        dz[j] = ce_grad(expf(z[j] - st.m), inv, scale, j == label);
}
