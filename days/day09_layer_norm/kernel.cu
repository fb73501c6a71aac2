// Day 9: LayerNorm forward over the rows of x [N, C] (N = B*T tokens, C channels).
//
//   mean[r] = sum_j x[r,j] / C
//   rstd[r] = 1 / sqrt(sum_j (x[r,j] - mean[r])^2 / C + eps)
//   out[r,j] = (x[r,j] - mean[r]) * rstd[r] * weight[j] + bias[j]
//
// mean and rstd are outputs too (the backward pass needs them).
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -cubin kernel.cu
// Run:               python run_day.py 9
//
// Every version computes the statistics the same way, the CORRECTED TWO-PASS algorithm:
//   m0  = sum(x) / C                                  (first pass; a float32, rounded)
//   a   = sum(x - m0),  q = sum((x - m0)^2)           (second pass, one reduction of two sums)
//   md  = a / C                                       (what m0 missed: the mean is m0 + md)
//   var = q / C - md^2                                (md is tiny, so no cancellation)
//   out = ((x - m0) - md) * rstd * w + b
// A row offset by 1e4 with unit spread needs its mean to ~1e-5 absolute, i.e. ~30 bits: one
// float32 has 24. Carrying the mean as two floats (m0, md) keeps out accurate. README.md and
// layernorm_demo_stats below show what the naive one-pass, the plain two-pass and Welford do.
//
// Versions (the llm.c ladder):
//   v1  one thread per row: three sequential loops over the row (sum; corrections; write).
//       Adjacent threads read addresses C floats apart: nothing is coalesced.
//   v2  three kernels, as a first port from PyTorch would have them: v2_mean (block per row),
//       v2_rstd (block per row), v2_normalize (one thread per element). x is read three times
//       and the mean travels between kernels through global memory as two floats (m0, md).
//   v3  one warp per row: lanes read consecutive floats (coalesced), reductions are register
//       shuffles with no shared memory and no barriers; still three loops over the row (the
//       second and third hit L1/L2).
//   v4  one block per row, the row read ONCE into registers with float4 loads (ITEMS float4 per
//       thread, a template parameter so the array stays in registers), both passes run on
//       registers, one write: 1 read + 1 write of x's size, the minimum. C % 4 != 0: scalar
//       loads (a row would start misaligned for float4). Rows wider than the registers hold
//       (C > 512 threads x 8 float4 = 16384, or C > 8192 when C % 4 != 0) take a three-loop
//       block kernel.
//   v5  one warp per row with the row in registers (the same body as v4 with warp shuffles
//       instead of block reductions): no __syncthreads at all and 8 rows per block, so many
//       more rows are in flight per SM. For C <= 2048 (C % 4 == 0) or C <= 1024 (otherwise);
//       the driver runs v4's kernel for wider rows.
//   v6  v5 made persistent and pipelined, for rows of C <= 1024 (C % 4 == 0; the driver runs
//       v5 elsewhere): a grid of exactly one wave, each warp walks rows `stride` apart and
//       loads its NEXT row into a second register array before it reduces and writes the
//       current one, so a warp's reads and writes overlap, and weight and bias are loaded into
//       registers once per warp, not once per row.
//   v7  rows fetched by Hopper's bulk-copy engine (cp.async.bulk, one instruction per row) into
//       per-warp shared-memory slots counted by mbarriers; the warp copies a row into registers
//       and refills the slot at once. Each block owns a contiguous, equal share of the rows.
//       For C <= 2048 with C % 4 == 0 on sm_90 (the driver runs v6 elsewhere).
//   v8  any width at float4 speed: each row cut into a scalar head (to its first 16-byte
//       boundary), a float4 body and a scalar tail. Rows of C <= 2048 on sm_90 take v7's
//       pipeline (the bulk copy moves the body; a warp's rows all split alike, so weight and
//       bias stay in registers); wider rows, and every row before sm_90, a block per row as in
//       v4 (weight and bias float4 put together from two aligned loads); C > 16387 three loops.
#include <cstdint>

// ---------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;  // a xor butterfly: every lane ends with the same (bitwise) sum
}

__device__ __forceinline__ float2 warp_sum2(float2 v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        v.x += __shfl_xor_sync(0xffffffffu, v.x, o);
        v.y += __shfl_xor_sync(0xffffffffu, v.y, o);
    }
    return v;
}

// Sum over the block: warps reduce, lane 0 of each parks its sum in buf, every warp reduces
// the parked sums. blockDim.x must be a multiple of 32. Every thread gets the result.
__device__ __forceinline__ float block_sum(float v, float* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    v = warp_sum(lane < nwarps ? buf[lane] : 0.f);
    __syncthreads();  // buf is reused by the next reduction
    return v;
}

__device__ __forceinline__ float2 block_sum2(float2 v, float2* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    v = warp_sum2(v);
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    v = warp_sum2(lane < nwarps ? buf[lane] : make_float2(0.f, 0.f));
    __syncthreads();
    return v;
}

// From the two sums of the second pass to (md, rstd). q/C - md^2 >= 0 in exact arithmetic;
// the clamp only guards a constant row against a rounding-negative result.
__device__ __forceinline__ void finish_stats(float a, float q, int C, float eps, float& md,
                                             float& r) {
    md = a / C;
    const float var = fmaxf(q / C - md * md, 0.f);
    r = 1.f / sqrtf(var + eps);
}

// ---------------------------------------------------------------------------------------
// v1: one thread per row
// ---------------------------------------------------------------------------------------
extern "C" __global__ void layernorm_v1(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ out,
                                        float* __restrict__ mean, float* __restrict__ rstd,
                                        int N, int C, float eps) {
    const int row = blockIdx.x * blockDim.x + threadIdx.x;
    if (row >= N) return;
    const float* xr = x + (int64_t)row * C;
    float* outr = out + (int64_t)row * C;

    // A first estimate of the mean, summed as differences from the row's first element: a
    // plain float sum of 16389 copies of 2500.25 drifts by ~0.03, and then the variance below
    // (a difference of two nearly equal numbers) comes out ~1e-5 instead of 0.
    const float x0 = xr[0];
    float s = 0.f;
    for (int j = 0; j < C; ++j) s += xr[j] - x0;
    const float m0 = x0 + s / C;

    float a = 0.f, q = 0.f;
    for (int j = 0; j < C; ++j) {
        const float d = xr[j] - m0;
        a += d;
        q += d * d;
    }
    float md, r;
    finish_stats(a, q, C, eps, md, r);

    for (int j = 0; j < C; ++j) outr[j] = ((xr[j] - m0) - md) * r * w[j] + b[j];
    mean[row] = m0 + md;
    rstd[row] = r;
}

// ---------------------------------------------------------------------------------------
// v2: three kernels. shift[] and corr[] are scratch arrays of N floats (m0 and md).
// ---------------------------------------------------------------------------------------
extern "C" __global__ void layernorm_v2_mean(const float* __restrict__ x,
                                             float* __restrict__ shift, int N, int C) {
    __shared__ float buf[32];
    const float* xr = x + (int64_t)blockIdx.x * C;
    float s = 0.f;
    for (int j = threadIdx.x; j < C; j += blockDim.x) s += xr[j];
    s = block_sum(s, buf);
    if (threadIdx.x == 0) shift[blockIdx.x] = s / C;
}

extern "C" __global__ void layernorm_v2_rstd(const float* __restrict__ x,
                                             const float* __restrict__ shift,
                                             float* __restrict__ corr, float* __restrict__ mean,
                                             float* __restrict__ rstd, int N, int C, float eps) {
    __shared__ float2 buf[32];
    const int row = blockIdx.x;
    const float* xr = x + (int64_t)row * C;
    const float m0 = shift[row];
    float2 aq = make_float2(0.f, 0.f);
    for (int j = threadIdx.x; j < C; j += blockDim.x) {
        const float d = xr[j] - m0;
        aq.x += d;
        aq.y += d * d;
    }
    aq = block_sum2(aq, buf);
    if (threadIdx.x == 0) {
        float md, r;
        finish_stats(aq.x, aq.y, C, eps, md, r);
        corr[row] = md;
        mean[row] = m0 + md;
        rstd[row] = r;
    }
}

// 2D grid: blockIdx.x covers columns, blockIdx.y walks rows (gridDim.y <= 65535, so a loop).
// Each thread keeps its column's weight and bias in registers for all its rows.
extern "C" __global__ void layernorm_v2_normalize(const float* __restrict__ x,
                                                  const float* __restrict__ w,
                                                  const float* __restrict__ b,
                                                  const float* __restrict__ shift,
                                                  const float* __restrict__ corr,
                                                  const float* __restrict__ rstd,
                                                  float* __restrict__ out, int N, int C) {
    const int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= C) return;
    const float wc = w[col], bc = b[col];
    for (int row = blockIdx.y; row < N; row += gridDim.y) {
        const int64_t i = (int64_t)row * C + col;
        out[i] = ((x[i] - shift[row]) - corr[row]) * rstd[row] * wc + bc;
    }
}

// ---------------------------------------------------------------------------------------
// v3: one warp per row (blockDim.x / 32 rows per block)
// ---------------------------------------------------------------------------------------
extern "C" __global__ void layernorm_v3(const float* __restrict__ x, const float* __restrict__ w,
                                        const float* __restrict__ b, float* __restrict__ out,
                                        float* __restrict__ mean, float* __restrict__ rstd,
                                        int N, int C, float eps) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;  // the whole warp leaves together: shuffles below stay full-warp
    const float* xr = x + (int64_t)row * C;
    float* outr = out + (int64_t)row * C;

    float s = 0.f;
    for (int j = lane; j < C; j += 32) s += xr[j];
    const float m0 = warp_sum(s) / C;

    float2 aq = make_float2(0.f, 0.f);
    for (int j = lane; j < C; j += 32) {
        const float d = xr[j] - m0;
        aq.x += d;
        aq.y += d * d;
    }
    aq = warp_sum2(aq);
    float md, r;
    finish_stats(aq.x, aq.y, C, eps, md, r);

    for (int j = lane; j < C; j += 32) outr[j] = ((xr[j] - m0) - md) * r * w[j] + b[j];
    if (lane == 0) {
        mean[row] = m0 + md;
        rstd[row] = r;
    }
}

// ---------------------------------------------------------------------------------------
// v4 and v5: the row in registers. One body, two ways to share a row:
//   WARP = false: a block per row (v4), stride blockDim.x, block reductions
//   WARP = true:  a warp per row (v5), stride 32, shuffle reductions, no shared memory
// Thread t holds the VEC-float vectors t, t + stride, t + 2 stride, ... (ITEMS of them), so
// each load instruction of a warp reads 32 consecutive vectors (coalesced). VEC = 4 needs
// C % 4 == 0 (then every row starts 16-byte aligned); VEC = 1 takes any C.
// ---------------------------------------------------------------------------------------
template <int VEC>
__device__ __forceinline__ void load_stream(const float* p, float (&v)[VEC]) {
    if constexpr (VEC == 4) {
        const float4 t = __ldcs(reinterpret_cast<const float4*>(p));  // read once: evict first
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else {
        v[0] = __ldcs(p);
    }
}

template <int VEC>
__device__ __forceinline__ void load_cached(const float* p, float (&v)[VEC]) {
    if constexpr (VEC == 4) {
        const float4 t = __ldg(reinterpret_cast<const float4*>(p));  // weight/bias: every row
        v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
    } else {
        v[0] = __ldg(p);
    }
}

template <int VEC>
__device__ __forceinline__ void store_stream(float* p, const float (&v)[VEC]) {
    if constexpr (VEC == 4) {
        __stcs(reinterpret_cast<float4*>(p), make_float4(v[0], v[1], v[2], v[3]));
    } else {
        __stcs(p, v[0]);
    }
}

template <int VEC, int ITEMS, bool WARP>
__device__ __forceinline__ void layernorm_row_in_registers(
    const float* __restrict__ xr, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ outr, float* __restrict__ mean_out, float* __restrict__ rstd_out, int C,
    float eps) {
    __shared__ float buf[32];
    __shared__ float2 buf2[32];
    const int t = WARP ? (threadIdx.x & 31) : threadIdx.x;
    const int stride = WARP ? 32 : blockDim.x;
    const int nvec = C / VEC;

    float v[ITEMS][VEC];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + i * stride;
        if (j < nvec) {
            load_stream<VEC>(xr + j * VEC, v[i]);
#pragma unroll
            for (int k = 0; k < VEC; ++k) s += v[i][k];
        }
    }
    if constexpr (WARP) s = warp_sum(s);
    else s = block_sum(s, buf);
    const float m0 = s / C;

    float2 aq = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + i * stride;
        if (j < nvec) {
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                v[i][k] -= m0;  // keep x - m0 (exact when x is close to m0)
                aq.x += v[i][k];
                aq.y += v[i][k] * v[i][k];
            }
        }
    }
    if constexpr (WARP) aq = warp_sum2(aq);
    else aq = block_sum2(aq, buf2);
    float md, r;
    finish_stats(aq.x, aq.y, C, eps, md, r);

#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + i * stride;
        if (j < nvec) {
            float wv[VEC], bv[VEC], o[VEC];
            load_cached<VEC>(w + j * VEC, wv);
            load_cached<VEC>(b + j * VEC, bv);
#pragma unroll
            for (int k = 0; k < VEC; ++k) o[k] = (v[i][k] - md) * r * wv[k] + bv[k];
            store_stream<VEC>(outr + j * VEC, o);
        }
    }
    if (t == 0) {
        *mean_out = m0 + md;
        *rstd_out = r;
    }
}

#define LN_V4(VEC, ITEMS)                                                                      \
    extern "C" __global__ void __launch_bounds__(512) layernorm_v4_vec##VEC##_items##ITEMS(   \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, \
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N,    \
        int C, float eps) {                                                                    \
        const int row = blockIdx.x;                                                            \
        layernorm_row_in_registers<VEC, ITEMS, false>(x + (int64_t)row * C, w, b,              \
                                                      out + (int64_t)row * C, mean + row,      \
                                                      rstd + row, C, eps);                     \
    }

LN_V4(4, 1)
LN_V4(4, 2)
LN_V4(4, 4)
LN_V4(4, 8)
LN_V4(1, 1)
LN_V4(1, 2)
LN_V4(1, 4)
LN_V4(1, 8)
LN_V4(1, 16)

// v5: 8 warps per block, one row each.
#define LN_V5(VEC, ITEMS)                                                                      \
    extern "C" __global__ void __launch_bounds__(256) layernorm_v5_vec##VEC##_items##ITEMS(   \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, \
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N,    \
        int C, float eps) {                                                                    \
        const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);                   \
        if (row >= N) return;                                                                  \
        layernorm_row_in_registers<VEC, ITEMS, true>(x + (int64_t)row * C, w, b,               \
                                                     out + (int64_t)row * C, mean + row,       \
                                                     rstd + row, C, eps);                      \
    }

LN_V5(4, 1)
LN_V5(4, 2)
LN_V5(4, 4)
LN_V5(4, 6)
LN_V5(4, 8)
LN_V5(4, 12)
LN_V5(4, 16)
LN_V5(1, 1)
LN_V5(1, 2)
LN_V5(1, 4)
LN_V5(1, 8)
LN_V5(1, 16)
LN_V5(1, 32)

// v4 for rows too wide for registers: block per row, three loops with VEC-wide loads (the
// second and third reads of the row mostly hit L2: a block's row is at most a few hundred KB).
template <int VEC>
__device__ __forceinline__ void layernorm_row_three_loops(
    const float* __restrict__ xr, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ outr, float* __restrict__ mean_out, float* __restrict__ rstd_out, int C,
    float eps) {
    __shared__ float buf[32];
    __shared__ float2 buf2[32];
    const int nvec = C / VEC;
    float s = 0.f;
    for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
        float v[VEC];
        load_cached<VEC>(xr + j * VEC, v);  // keep it: it is read twice more
#pragma unroll
        for (int k = 0; k < VEC; ++k) s += v[k];
    }
    const float m0 = block_sum(s, buf) / C;

    float2 aq = make_float2(0.f, 0.f);
    for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
        float v[VEC];
        load_cached<VEC>(xr + j * VEC, v);
#pragma unroll
        for (int k = 0; k < VEC; ++k) {
            const float d = v[k] - m0;
            aq.x += d;
            aq.y += d * d;
        }
    }
    aq = block_sum2(aq, buf2);
    float md, r;
    finish_stats(aq.x, aq.y, C, eps, md, r);

    for (int j = threadIdx.x; j < nvec; j += blockDim.x) {
        float v[VEC], wv[VEC], bv[VEC], o[VEC];
        load_stream<VEC>(xr + j * VEC, v);  // last read
        load_cached<VEC>(w + j * VEC, wv);
        load_cached<VEC>(b + j * VEC, bv);
#pragma unroll
        for (int k = 0; k < VEC; ++k) o[k] = ((v[k] - m0) - md) * r * wv[k] + bv[k];
        store_stream<VEC>(outr + j * VEC, o);
    }
    if (threadIdx.x == 0) {
        *mean_out = m0 + md;
        *rstd_out = r;
    }
}

#define LN_V4_LONG(VEC)                                                                        \
    extern "C" __global__ void __launch_bounds__(512) layernorm_v4_long_vec##VEC(             \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, \
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N,    \
        int C, float eps) {                                                                    \
        const int row = blockIdx.x;                                                            \
        layernorm_row_three_loops<VEC>(x + (int64_t)row * C, w, b, out + (int64_t)row * C,    \
                                       mean + row, rstd + row, C, eps);                        \
    }

LN_V4_LONG(4)
LN_V4_LONG(1)

// ---------------------------------------------------------------------------------------
// Not a version: the ways to get a row's statistics wrong (or right), side by side, for the
// stability table (driver.extras, tests/days/test_day09.py). One warp per row, scalar loads.
//   method 0  one pass, var = E[x^2] - E[x]^2              (cancels catastrophically)
//   method 1  Welford per lane, Chan's merge over shuffles (variance right, mean a float32)
//   method 2  two-pass: mean, then E[(x - mean)^2]          (variance right, mean a float32)
//   method 3  corrected two-pass, what every version does   (mean carried as two floats)
// ---------------------------------------------------------------------------------------
struct Welford {
    float n, mean, m2;
};

__device__ __forceinline__ Welford welford_merge(Welford a, Welford b) {
    const float n = a.n + b.n;
    if (n == 0.f) return a;
    const float delta = b.mean - a.mean;
    const float fb = b.n / n;
    return {n, a.mean + delta * fb, a.m2 + b.m2 + delta * delta * a.n * fb};
}

extern "C" __global__ void layernorm_demo_stats(const float* __restrict__ x,
                                                const float* __restrict__ w,
                                                const float* __restrict__ b,
                                                float* __restrict__ out, float* __restrict__ mean,
                                                float* __restrict__ rstd, int N, int C, float eps,
                                                int method) {
    const int lane = threadIdx.x & 31;
    const int row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (row >= N) return;
    const float* xr = x + (int64_t)row * C;
    float* outr = out + (int64_t)row * C;
    float m, md = 0.f, var;
    if (method == 0) {
        float2 sq = make_float2(0.f, 0.f);
        for (int j = lane; j < C; j += 32) {
            sq.x += xr[j];
            sq.y += xr[j] * xr[j];
        }
        sq = warp_sum2(sq);
        m = sq.x / C;
        var = sq.y / C - m * m;  // may even come out negative: rstd = NaN
    } else if (method == 1) {
        Welford st{0.f, 0.f, 0.f};
        for (int j = lane; j < C; j += 32) {
            st.n += 1.f;
            const float d = xr[j] - st.mean;
            st.mean += d / st.n;
            st.m2 += d * (xr[j] - st.mean);
        }
        for (int o = 16; o > 0; o >>= 1) {
            Welford other{__shfl_xor_sync(0xffffffffu, st.n, o),
                          __shfl_xor_sync(0xffffffffu, st.mean, o),
                          __shfl_xor_sync(0xffffffffu, st.m2, o)};
            st = welford_merge(st, other);
        }
        m = __shfl_sync(0xffffffffu, st.mean, 0);  // the merge is not symmetric bit for bit:
        var = __shfl_sync(0xffffffffu, st.m2, 0) / C;  // take lane 0's result everywhere
    } else {
        float s = 0.f;
        for (int j = lane; j < C; j += 32) s += xr[j];
        m = warp_sum(s) / C;
        float2 aq = make_float2(0.f, 0.f);
        for (int j = lane; j < C; j += 32) {
            const float d = xr[j] - m;
            aq.x += d;
            aq.y += d * d;
        }
        aq = warp_sum2(aq);
        if (method == 2) {
            var = aq.y / C;
        } else {
            md = aq.x / C;
            var = fmaxf(aq.y / C - md * md, 0.f);
        }
    }
    const float r = rsqrtf(var + eps);
    for (int j = lane; j < C; j += 32) outr[j] = ((xr[j] - m) - md) * r * w[j] + b[j];
    if (lane == 0) {
        mean[row] = m + md;
        rstd[row] = r;
    }
}

// ---------------------------------------------------------------------------------------
// v6: persistent warps, the next row in flight while the current one is normalized.
// ---------------------------------------------------------------------------------------
template <int ITEMS>
__device__ __forceinline__ void load_row4(const float* __restrict__ xr, int nvec, int lane,
                                          float4 (&v)[ITEMS]) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) v[i] = __ldcs(reinterpret_cast<const float4*>(xr) + j);
    }
}

// weight and bias as float4 registers, the same lane layout as the row
template <int ITEMS>
__device__ __forceinline__ void load_wb4(const float* __restrict__ w, const float* __restrict__ b,
                                         int nvec, int lane, float4 (&wv)[ITEMS],
                                         float4 (&bv)[ITEMS]) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) {
            wv[i] = __ldg(reinterpret_cast<const float4*>(w) + j);
            bv[i] = __ldg(reinterpret_cast<const float4*>(b) + j);
        }
    }
}

// The corrected two-pass statistics of a row held by a warp: v becomes v - m0 in place,
// and the row's mean is m0 + md, its rstd r.
template <int ITEMS>
__device__ __forceinline__ void row_stats4(float4 (&v)[ITEMS], int C, int nvec, int lane,
                                           float eps, float& m0, float& md, float& r) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (lane + 32 * i < nvec) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    m0 = warp_sum(s) / C;

    float2 aq = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (lane + 32 * i < nvec) {
            v[i].x -= m0; v[i].y -= m0; v[i].z -= m0; v[i].w -= m0;
            aq.x += (v[i].x + v[i].y) + (v[i].z + v[i].w);
            aq.y += (v[i].x * v[i].x + v[i].y * v[i].y) + (v[i].z * v[i].z + v[i].w * v[i].w);
        }
    }
    aq = warp_sum2(aq);
    finish_stats(aq.x, aq.y, C, eps, md, r);
}

template <int ITEMS>
__device__ __forceinline__ void normalize_row4(float4 (&v)[ITEMS], const float4 (&wv)[ITEMS],
                                               const float4 (&bv)[ITEMS], float* __restrict__ outr,
                                               float* __restrict__ mean_out,
                                               float* __restrict__ rstd_out, int C, int nvec,
                                               int lane, float eps) {
    float m0, md, r;
    row_stats4<ITEMS>(v, C, nvec, lane, eps, m0, md, r);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) {
            float4 o;
            o.x = (v[i].x - md) * r * wv[i].x + bv[i].x;
            o.y = (v[i].y - md) * r * wv[i].y + bv[i].y;
            o.z = (v[i].z - md) * r * wv[i].z + bv[i].z;
            o.w = (v[i].w - md) * r * wv[i].w + bv[i].w;
            __stcs(reinterpret_cast<float4*>(outr) + j, o);
        }
    }
    if (lane == 0) {
        *mean_out = m0 + md;
        *rstd_out = r;
    }
}

// Two register arrays, a and b, take turns: while one row is reduced and written from one,
// the loads of the next row into the other are already on their way. The warp's rows are
// row, row + stride, ... below end.
template <int ITEMS>
__device__ __forceinline__ void layernorm_v6_rows(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int row,
    int stride, int end, int C, float eps) {
    const int lane = threadIdx.x & 31;
    const int nvec = C / 4;
    float4 wv[ITEMS], bv[ITEMS], a[ITEMS], bb[ITEMS];
    load_wb4<ITEMS>(w, b, nvec, lane, wv, bv);
    if (row < end) load_row4<ITEMS>(x + (int64_t)row * C, nvec, lane, a);
    while (row < end) {
        const int r1 = row + stride;
        if (r1 < end) load_row4<ITEMS>(x + (int64_t)r1 * C, nvec, lane, bb);
        normalize_row4<ITEMS>(a, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec,
                              lane, eps);
        if (r1 >= end) break;
        const int r2 = r1 + stride;
        if (r2 < end) load_row4<ITEMS>(x + (int64_t)r2 * C, nvec, lane, a);
        normalize_row4<ITEMS>(bb, wv, bv, out + (int64_t)r1 * C, mean + r1, rstd + r1, C, nvec,
                              lane, eps);
        row = r2;
    }
}

// One wave of blocks; warp g of the grid takes rows g, g + (warps in the grid), ...
#define LN_V6(ITEMS)                                                                            \
    extern "C" __global__ void __launch_bounds__(256) layernorm_v6_items##ITEMS(               \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,  \
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N,     \
        int C, float eps) {                                                                     \
        layernorm_v6_rows<ITEMS>(x, w, b, out, mean, rstd,                                      \
                                 blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5),           \
                                 gridDim.x * (blockDim.x >> 5), N, C, eps);                     \
    }

LN_V6(1)
LN_V6(2)
LN_V6(4)
LN_V6(6)
LN_V6(8)

// ---------------------------------------------------------------------------------------
// v7: rows fetched by Hopper's bulk-copy engine (cp.async.bulk) into shared-memory slots.
// ---------------------------------------------------------------------------------------
// v6 asks for a row with ITEMS float4 loads per lane and holds the next row in a second
// register array, so each warp has at most two rows in flight and spends half its registers
// on them. Here ONE lane asks the copy engine (the same unit behind TMA) for a whole row,
// C * 4 bytes in one instruction, delivered into a SLOT of shared memory; an mbarrier counts
// the bytes as they land. The warp copies the row from its slot into registers, hands the
// slot straight back to the copy engine for its next row, and normalizes from registers
// while that row is on its way.
//
// Rows: block b owns the contiguous rows [N*b/G, N*(b+1)/G) (G = gridDim.x), so every block
// gets the same number of rows to within one (v6's grid-stride split gives some warps a
// whole row more than others). Warp w of a block takes the block's rows w, w + W, w + 2W, ...
// (W warps per block); its t-th row goes into its own slot t % P (P slots per warp), and that
// slot's mbarrier completes phase t / P when the row has landed. Slots belong to one warp, so
// the warp that read a slot is the only one that refills it: no other warp has to be told.
//
// Measured (.notes/day09_experiments.md): P = 1 or 2 slots per warp is best. More rows in flight per SM (more slots,
// or L2 prefetches of rows further ahead) made it SLOWER: the rows then land all together late
// and the writes start late. Dynamic row assignment through a global atomic counter was much
// slower (the atomics queue behind the memory traffic).
//
// Needs sm_90 (cp.async.bulk, mbarrier transaction counts) and C % 4 == 0 (16-byte rows);
// the driver runs v6 elsewhere. Shared memory: W * P * C * 4 bytes of slots, W * P * 8 of
// barriers (rounded up to 128).
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
#endif
}

// Make the initialized barriers visible to the copy engine (the "async proxy").
__device__ __forceinline__ void mbar_init_fence() {
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}

// Order this thread's earlier ordinary shared-memory reads before later copy-engine writes:
// the warp has read a slot, and the next bulk copy will overwrite it. (Measured: free.)
__device__ __forceinline__ void fence_proxy_async_smem() {
#if __CUDA_ARCH__ >= 900
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// One lane: tell the barrier to expect `bytes`, then start the copy that will deliver them.
__device__ __forceinline__ void bulk_load(void* dst_smem, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                 ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 ::"r"(smem_addr(dst_smem)), "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
#endif
}

// Spin until the barrier's phase with this parity has completed (the row is in the slot).
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
#if __CUDA_ARCH__ >= 900
    uint32_t done = 0;
    while (!done) {
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.u32 %0, 1, 0, p;\n\t}"
                     : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
    }
#endif
}

template <int ITEMS>
__device__ __forceinline__ void layernorm_v7_body(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C,
    float eps, int P) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * P;  // barriers, then slots
    float* slots = reinterpret_cast<float*>(smem + ((nwarps * P * 8 + 127) & ~127)) +
                   (size_t)warp * P * C;

    const int row0 = (int)((int64_t)N * blockIdx.x / gridDim.x);
    const int row1 = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    const int nrows = (row1 - row0 - warp + nwarps - 1) / nwarps;  // rows of this warp
    const uint32_t row_bytes = (uint32_t)C * 4u;
    auto row_of = [&](int t) { return row0 + warp + t * nwarps; };  // the warp's t-th row

    if (lane == 0) {
        for (int s = 0; s < P; ++s) mbar_init(&bars[s], 1);
        mbar_init_fence();
        for (int t = 0; t < P && t < nrows; ++t)
            bulk_load(slots + (size_t)t * C, x + (int64_t)row_of(t) * C, row_bytes, &bars[t]);
    }
    __syncwarp();

    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
    load_wb4<ITEMS>(w, b, nvec, lane, wv, bv);
    for (int t = 0; t < nrows; ++t) {
        const int s = t % P, row = row_of(t);
        mbar_wait(&bars[s], (uint32_t)(t / P) & 1u);  // phase t / P of slot s: row t landed
        const float4* xs = reinterpret_cast<const float4*>(slots + (size_t)s * C);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = lane + 32 * i;
            if (j < nvec) v[i] = xs[j];
        }
        __syncwarp();  // every lane has its part of the row: the slot is free
        if (lane == 0 && t + P < nrows) {
            fence_proxy_async_smem();
            bulk_load(slots + (size_t)s * C, x + (int64_t)row_of(t + P) * C, row_bytes, &bars[s]);
        }
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec,
                              lane, eps);
    }
}

// 256 threads (8 warps) per block: two blocks fit an SM at C = 768 (registers), one at 2048.
#define LN_V7(ITEMS)                                                                            \
    extern "C" __global__ void __launch_bounds__(256, 1) layernorm_v7_items##ITEMS(             \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,  \
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N,     \
        int C, float eps, int slots_per_warp) {                                                 \
        layernorm_v7_body<ITEMS>(x, w, b, out, mean, rstd, N, C, eps, slots_per_warp);          \
    }

LN_V7(1)
LN_V7(2)
LN_V7(4)
LN_V7(6)
LN_V7(8)
LN_V7(12)
LN_V7(16)

// ---------------------------------------------------------------------------------------
// v8: any width at float4 speed
// ---------------------------------------------------------------------------------------
// float4 loads and stores need 16-byte addresses. Row r starts at float r*C, so when C % 4 != 0
// three rows in four (one in two when C % 4 == 2) start between two 16-byte boundaries, and
// v4-v7 take scalar loads for EVERY row. v8 cuts each row at its boundaries instead:
//
//     | head |            body: float4, 16-byte aligned            | tail |
//       h = (-r*C) mod 4 floats (0..3)     nb float4                 0..3 floats
//
// The body moves as float4 (or as one bulk copy); the head and tail, at most 6 floats, are one
// float each for lanes (threads) 0 .. extras-1. When C % 4 == 0 every head and tail is empty and
// v8 does what v7 (C <= 2048) or v4 (wider rows) do, a few predicates later.
//
// The catch is weight and bias: they are indexed by column, and the body's float4 j holds columns
// h + 4j .. h + 4j + 3, which for h != 0 is not a float4 of w. Two ways round it:
//   rows kernel (C <= 2048, sm_90): v7's warps and slots. Warp w takes rows w, w + W, w + 2W,...
//     of its block's share, and with W % 4 == 0 they all have the same head, so the warp loads
//     w and b in its rows' layout ONCE (scalar loads), and again only if a row's head differs.
//   block kernel (wider rows, and every row before sm_90): one row per block, so w and b are read
//     for every row; each float4 of them is put together from two aligned float4 loads
//     (load4_shifted), not from four scalar loads.
// Rows wider than the block kernel's registers hold (C > 16387) take a block kernel with three
// loops over the row, split the same way.
//
// Assumes x, w, b and out start 16-byte aligned (cudaMalloc aligns to 256 bytes).

struct RowSplit {
    int head;    // floats before the row's first 16-byte boundary (0..3)
    int body;    // float4 from there on
    int extras;  // head + tail floats (0..6): lane k < extras holds one of them
};

// The split of the row that starts at float `off`.
__device__ __forceinline__ RowSplit split_row(int64_t off, int C) {
    const int h = min((int)(-off & 3), C);
    const int nb = (C - h) >> 2;
    return {h, nb, C - 4 * nb};
}

// The column of extra float k (k < extras): the head's columns 0..h-1, then the tail's.
__device__ __forceinline__ int extra_col(int k, const RowSplit& sp) {
    return k < sp.head ? k : 4 * sp.body + k;
}

// Columns h + 4j .. h + 4j + 3 of p (C floats, 16-byte aligned). FUNNEL: from aligned float4
// loads, the float4 of columns 4j.. and, for h > 0, as much of the next one as is needed and
// inside the row, then a shift by h (the block kernel, once per row). FUNNEL = false: four
// scalar loads (the rows kernel, once per warp; .notes/day09_10_oddwidth_sweep.py times both
// in the block kernel).
template <bool FUNNEL = true>
__device__ __forceinline__ float4 load4_shifted(const float* __restrict__ p, int h, int j, int C) {
    if constexpr (!FUNNEL) {
        const float* q = p + h + 4 * j;
        return make_float4(__ldg(q), __ldg(q + 1), __ldg(q + 2), __ldg(q + 3));
    } else {
        const float4* p4 = reinterpret_cast<const float4*>(p);
        const float4 lo = __ldg(p4 + j);
        if (h == 0) return lo;
        float4 hi;  // columns 4j+4 .. 4j+7, of which the first h are used (and exist)
        if (4 * j + 8 <= C) {
            hi = __ldg(p4 + j + 1);
        } else {
            const float* q = p + 4 * j + 4;
            hi = make_float4(__ldg(q), h > 1 ? __ldg(q + 1) : 0.f, h > 2 ? __ldg(q + 2) : 0.f, 0.f);
        }
        if (h == 1) return make_float4(lo.y, lo.z, lo.w, hi.x);
        if (h == 2) return make_float4(lo.z, lo.w, hi.x, hi.y);
        return make_float4(lo.w, hi.x, hi.y, hi.z);
    }
}

// The corrected two-pass statistics of a split row: the body in v (t's float4 j = t + stride*i),
// t's extra float in ex (when t < extras). v and ex become x - m0 in place. WARP: the row
// belongs to one warp (t = lane, stride 32), else to the block.
template <int ITEMS, bool WARP>
__device__ __forceinline__ void row_stats_split(float4 (&v)[ITEMS], float& ex, const RowSplit& sp,
                                                int t, int stride, int C, float eps, float& m0,
                                                float& md, float& r) {
    __shared__ float buf[32];
    __shared__ float2 buf2[32];
    const bool has_ex = t < sp.extras;
    float s = has_ex ? ex : 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i)
        if (t + stride * i < sp.body) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    if constexpr (WARP) s = warp_sum(s);
    else s = block_sum(s, buf);
    m0 = s / C;

    float2 aq = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (t + stride * i < sp.body) {
            v[i].x -= m0; v[i].y -= m0; v[i].z -= m0; v[i].w -= m0;
            aq.x += (v[i].x + v[i].y) + (v[i].z + v[i].w);
            aq.y += (v[i].x * v[i].x + v[i].y * v[i].y) + (v[i].z * v[i].z + v[i].w * v[i].w);
        }
    }
    if (has_ex) {
        ex -= m0;
        aq.x += ex;
        aq.y += ex * ex;
    }
    if constexpr (WARP) aq = warp_sum2(aq);
    else aq = block_sum2(aq, buf2);
    finish_stats(aq.x, aq.y, C, eps, md, r);
}

__device__ __forceinline__ float4 affine4(float4 d, float md, float r, float4 w, float4 b) {
    return make_float4((d.x - md) * r * w.x + b.x, (d.y - md) * r * w.y + b.y,
                       (d.z - md) * r * w.z + b.z, (d.w - md) * r * w.w + b.w);
}

// --- the rows kernel: v7's pipeline on split rows ----------------------------------------

// Weight and bias in the layout of rows with this split: lane's float4 i holds columns
// head + 4 (lane + 32 i) ..; we, be the columns of the lane's extra float.
template <int ITEMS>
__device__ __forceinline__ void load_wb_split(const float* __restrict__ w,
                                              const float* __restrict__ b, const RowSplit& sp,
                                              int lane, float4 (&wv)[ITEMS], float4 (&bv)[ITEMS],
                                              float& we, float& be) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < sp.body) {
            wv[i] = load4_shifted<false>(w, sp.head, j, 0);
            bv[i] = load4_shifted<false>(b, sp.head, j, 0);
        }
    }
    if (lane < sp.extras) {
        const int c = extra_col(lane, sp);
        we = __ldg(w + c);
        be = __ldg(b + c);
    }
}

// A barrier phase with nothing to wait for (a row with no body): arrive, and it completes.
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#if __CUDA_ARCH__ >= 900
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
#endif
}

// W warps per block (blockDim.x / 32, a multiple of 4), P slots per warp of C / 4 float4 each.
// Rows as in v7: block b owns rows [N b / G, N (b+1) / G), warp w its rows w, w + W, ...; the
// t-th goes to slot t % P. A row's body arrives by bulk copy; its extras (head and tail) by one
// scalar load per lane, issued with the bulk copy and kept in e[slot] until the row's turn.
template <int ITEMS, int P>
__device__ __forceinline__ void layernorm_v8_rows_body(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C,
    float eps) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int slot_vec = C >> 2;  // the longest body a row can have
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * P;
    float4* slots = reinterpret_cast<float4*>(smem + ((nwarps * P * 8 + 127) & ~127)) +
                    (size_t)warp * P * slot_vec;

    const int row0 = (int)((int64_t)N * blockIdx.x / gridDim.x);
    const int row1 = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    const int nrows = (row1 - row0 - warp + nwarps - 1) / nwarps;  // rows of this warp
    auto row_of = [&](int t) { return row0 + warp + t * nwarps; };  // the warp's t-th row

    // Ask for the warp's t-th row: its body into slot s (lane 0, one bulk copy), its extras
    // into e (one scalar load per lane that has one).
    auto fetch = [&](int t, int s, float& e) {
        const int64_t off = (int64_t)row_of(t) * C;
        const RowSplit sp = split_row(off, C);
        if (lane == 0) {
            if (sp.body > 0)
                bulk_load(slots + (size_t)s * slot_vec, x + off + sp.head, 16u * sp.body, &bars[s]);
            else
                mbar_arrive(&bars[s]);
        }
        if (lane < sp.extras) e = __ldcs(x + off + extra_col(lane, sp));
    };

    if (lane == 0) {
#pragma unroll
        for (int s = 0; s < P; ++s) mbar_init(&bars[s], 1);
        mbar_init_fence();
    }
    __syncwarp();

    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
    float we = 0.f, be = 0.f, e[P];
    int wb_head = -1;  // the head length wv, bv are laid out for
#pragma unroll
    for (int s = 0; s < P; ++s) {
        e[s] = 0.f;
        if (s < nrows) fetch(s, s, e[s]);
    }

    for (int t0 = 0; t0 < nrows; t0 += P) {
#pragma unroll
        for (int s = 0; s < P; ++s) {
            const int t = t0 + s;
            if (t >= nrows) break;
            const int row = row_of(t);
            const int64_t off = (int64_t)row * C;
            const RowSplit sp = split_row(off, C);
            if (sp.head != wb_head) {  // the first row (and never again when W % 4 == 0)
                load_wb_split<ITEMS>(w, b, sp, lane, wv, bv, we, be);
                wb_head = sp.head;
            }
            mbar_wait(&bars[s], (uint32_t)(t / P) & 1u);
            const float4* xs = slots + (size_t)s * slot_vec;
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int j = lane + 32 * i;
                if (j < sp.body) v[i] = xs[j];
            }
            float ex = e[s];
            __syncwarp();  // every lane has its part of the row: the slot is free
            if (t + P < nrows) {
                if (lane == 0) fence_proxy_async_smem();
                fetch(t + P, s, e[s]);
            }
            float m0, md, r;
            row_stats_split<ITEMS, true>(v, ex, sp, lane, 32, C, eps, m0, md, r);
            float4* ob = reinterpret_cast<float4*>(out + off + sp.head);
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) {
                const int j = lane + 32 * i;
                if (j < sp.body) __stcs(ob + j, affine4(v[i], md, r, wv[i], bv[i]));
            }
            if (lane < sp.extras) __stcs(out + off + extra_col(lane, sp), (ex - md) * r * we + be);
            if (lane == 0) {
                mean[row] = m0 + md;
                rstd[row] = r;
            }
        }
    }
}

// 8 warps per block (W % 4 == 0: a warp's rows share one split). MINB blocks per SM: up to 8
// float4 per lane (C <= 1024) two blocks, one slot per warp (at 8 float4 that asks ptxas to fit
// 128 registers, which it does without spilling); beyond, one block with two slots per warp
// (v8_config in driver.py).
#define LN_V8_ROWS(ITEMS, P, MINB)                                                              \
    extern "C" __global__ void __launch_bounds__(256, MINB)                                     \
        layernorm_v8_rows_items##ITEMS##_p##P(                                                   \
            const float* __restrict__ x, const float* __restrict__ w,                            \
            const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,      \
            float* __restrict__ rstd, int N, int C, float eps) {                                 \
        layernorm_v8_rows_body<ITEMS, P>(x, w, b, out, mean, rstd, N, C, eps);                  \
    }

LN_V8_ROWS(1, 1, 2)
LN_V8_ROWS(2, 1, 2)
LN_V8_ROWS(4, 1, 2)
LN_V8_ROWS(6, 1, 2)
LN_V8_ROWS(8, 1, 2)
LN_V8_ROWS(12, 2, 1)
LN_V8_ROWS(16, 2, 1)

// --- the block kernel: v4's block per row on split rows ----------------------------------
template <int ITEMS, bool FUNNEL = true>
__device__ __forceinline__ void layernorm_v8_block_row(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int row, int C,
    float eps) {
    const int t = threadIdx.x, stride = blockDim.x;
    const int64_t off = (int64_t)row * C;
    const RowSplit sp = split_row(off, C);
    const float4* xb = reinterpret_cast<const float4*>(x + off + sp.head);  // 16-byte aligned
    float4 v[ITEMS];
    float ex = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + stride * i;
        if (j < sp.body) v[i] = __ldcs(xb + j);
    }
    if (t < sp.extras) ex = __ldcs(x + off + extra_col(t, sp));
    float m0, md, r;
    row_stats_split<ITEMS, false>(v, ex, sp, t, stride, C, eps, m0, md, r);
    float4* ob = reinterpret_cast<float4*>(out + off + sp.head);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = t + stride * i;
        if (j < sp.body)
            __stcs(ob + j, affine4(v[i], md, r, load4_shifted<FUNNEL>(w, sp.head, j, C),
                                   load4_shifted<FUNNEL>(b, sp.head, j, C)));
    }
    if (t < sp.extras) {
        const int c = extra_col(t, sp);
        __stcs(out + off + c, (ex - md) * r * __ldg(w + c) + __ldg(b + c));
    }
    if (t == 0) {
        mean[row] = m0 + md;
        rstd[row] = r;
    }
}

#define LN_V8_BLOCK(ITEMS)                                                                      \
    extern "C" __global__ void __launch_bounds__(512) layernorm_v8_block_items##ITEMS(          \
        const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,  \
        float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N,     \
        int C, float eps) {                                                                     \
        layernorm_v8_block_row<ITEMS>(x, w, b, out, mean, rstd, blockIdx.x, C, eps);            \
    }

LN_V8_BLOCK(1)
LN_V8_BLOCK(2)
LN_V8_BLOCK(4)
LN_V8_BLOCK(8)

// --- rows wider than registers: three loops over the split row, block per row ------------
extern "C" __global__ void __launch_bounds__(512) layernorm_v8_long(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C,
    float eps) {
    __shared__ float buf[32];
    __shared__ float2 buf2[32];
    const int row = blockIdx.x, t = threadIdx.x, stride = blockDim.x;
    const int64_t off = (int64_t)row * C;
    const RowSplit sp = split_row(off, C);
    const float4* xb = reinterpret_cast<const float4*>(x + off + sp.head);
    const bool has_ex = t < sp.extras;
    const float ex = has_ex ? __ldg(x + off + extra_col(t, sp)) : 0.f;

    float s = ex;
    for (int j = t; j < sp.body; j += stride) {
        const float4 q = __ldg(xb + j);  // kept in cache: read twice more
        s += (q.x + q.y) + (q.z + q.w);
    }
    const float m0 = block_sum(s, buf) / C;

    float2 aq = make_float2(0.f, 0.f);
    if (has_ex) {
        aq.x = ex - m0;
        aq.y = aq.x * aq.x;
    }
    for (int j = t; j < sp.body; j += stride) {
        const float4 q = __ldg(xb + j);
        const float4 d = make_float4(q.x - m0, q.y - m0, q.z - m0, q.w - m0);
        aq.x += (d.x + d.y) + (d.z + d.w);
        aq.y += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);
    }
    aq = block_sum2(aq, buf2);
    float md, r;
    finish_stats(aq.x, aq.y, C, eps, md, r);

    float4* ob = reinterpret_cast<float4*>(out + off + sp.head);
    for (int j = t; j < sp.body; j += stride) {
        const float4 q = __ldcs(xb + j);  // last read
        const float4 d = make_float4(q.x - m0, q.y - m0, q.z - m0, q.w - m0);
        __stcs(ob + j, affine4(d, md, r, load4_shifted(w, sp.head, j, C),
                               load4_shifted(b, sp.head, j, C)));
    }
    if (has_ex) {
        const int c = extra_col(t, sp);
        __stcs(out + off + c, ((ex - m0) - md) * r * __ldg(w + c) + __ldg(b + c));
    }
    if (t == 0) {
        mean[row] = m0 + md;
        rstd[row] = r;
    }
}
