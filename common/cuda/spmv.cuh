// Sparse matrix-vector product y = A x in fp32 (values float, indices int): the kernels of day 36
// (spmv_ell_coo: COO, CSR scalar / vector / row blocks, ELL) that day 37 (spmv_hybrid) builds
// its hybrid ELL + COO format from, and the segmented warp scan both days reduce rows with.
//
// Storage (built on the host by days/day36_spmv_ell_coo/formats.py):
//   CSR  ptr[rows + 1], col[nnz], val[nnz]; row r owns [ptr[r], ptr[r + 1]), columns sorted
//   COO  row[nnz] beside CSR's col and val (the same order: sorted by row)
//   ELL  ecol[width][pitch], eval[width][pitch], column-major: slot k of row r at k*pitch + r;
//        pitch = rows rounded up to 4, a row's entries in its first slots, padding col = -1
//        (value 0) after them; every row of the pitch padding is all -1
//
// Matrix data is read once: it goes through __ldcs (evict-first), so it does not push x out of
// L2; x is gathered through the read-only path (__ldg). Products go through one FMA each.
// Every function here is __device__; the kernel.cu files wrap them in extern "C" entry points.
#pragma once

#include "warp.cuh"

namespace cuda100 {
namespace spmv {

constexpr unsigned FULL = 0xffffffffu;

__device__ __forceinline__ float xval(const float* x, int c) { return __ldg(x + c); }

// y[0:n) = 0, one element a thread (the atomics of COO need y cleared first).
__device__ __forceinline__ void zero(float* y, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = 0.f;
}

// --- COO: one thread per nonzero, atomicAdd into y ------------------------------------------
// Element i = block * blockDim.x + threadIdx.x. The order in which the additions land in y[r]
// changes from run to run: the sums are not bitwise reproducible (fp32 rounding only).
__device__ __forceinline__ void coo_atomic(const int* __restrict__ row, const int* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ x,
                                           float* __restrict__ y, int nnz, int block) {
    const int i = block * blockDim.x + threadIdx.x;
    if (i < nnz) atomicAdd(y + __ldcs(row + i), __ldcs(val + i) * xval(x, __ldcs(col + i)));
}

// --- CSR scalar: one thread per row ---------------------------------------------------------
__device__ __forceinline__ void csr_scalar(const int* __restrict__ ptr, const int* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ x,
                                           float* __restrict__ y, int rows) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.f;
    const int end = ptr[r + 1];
    for (int i = ptr[r]; i < end; ++i) s += __ldcs(val + i) * xval(x, __ldcs(col + i));
    y[r] = s;
}

// --- CSR vector: G lanes (a power of two <= 32) per row --------------------------------------
// The G lanes of a row read its entries side by side (coalesced), then add their partial sums
// with G/2, G/4, ... 1 xor-shuffles, which stay inside the aligned group of G lanes. No lane
// leaves before the shuffles (full mask).
template <int G>
__device__ __forceinline__ void csr_vector(const int* __restrict__ ptr, const int* __restrict__ col,
                                           const float* __restrict__ val, const float* __restrict__ x,
                                           float* __restrict__ y, int rows) {
    static_assert(G >= 1 && G <= 32 && (G & (G - 1)) == 0, "G must be a power of two <= 32");
    const int r = (blockIdx.x * blockDim.x + threadIdx.x) / G;
    const int lane = threadIdx.x & (G - 1);
    float s = 0.f;
    if (r < rows) {
        const int end = ptr[r + 1];
        for (int i = ptr[r] + lane; i < end; i += G) s += __ldcs(val + i) * xval(x, __ldcs(col + i));
    }
#pragma unroll
    for (int o = G / 2; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    if (r < rows && lane == 0) y[r] = s;
}

// --- ELL --------------------------------------------------------------------------------------
// One thread per row, every one of the `width` slots visited (the padding's column is loaded;
// its value and x are not).
__device__ __forceinline__ void ell_row(const int* __restrict__ ecol, const float* __restrict__ eval,
                                        int pitch, int width, const float* __restrict__ x,
                                        float* __restrict__ y, int rows) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float s = 0.f;
    for (int k = 0; k < width; ++k) {
        const int c = __ldcs(ecol + k * pitch + r);
        if (c >= 0) s += __ldcs(eval + k * pitch + r) * xval(x, c);
    }
    y[r] = s;
}

// Rows 4q .. 4q+3 with 16-byte loads: slot k of four consecutive rows is one int4 of columns
// and one float4 of values (pitch % 4 == 0 keeps them aligned). The loop stops at the first
// slot where all four rows are padding (their entries come first, so nothing follows).
// Returns the four sums; rows past the end of the matrix are padding and sum to 0.
__device__ __forceinline__ float4 ell4(const int* __restrict__ ecol, const float* __restrict__ eval,
                                       int pitch, int width, const float* __restrict__ x, int q) {
    const int4* c4 = reinterpret_cast<const int4*>(ecol) + q;
    const float4* v4 = reinterpret_cast<const float4*>(eval) + q;
    const int step = pitch >> 2;
    float4 s = make_float4(0.f, 0.f, 0.f, 0.f);
    for (int k = 0; k < width; ++k) {
        const int4 c = __ldcs(c4 + k * step);
        if ((c.x & c.y & c.z & c.w) < 0) break;   // sign bit in all four: all padding
        const float4 v = __ldcs(v4 + k * step);
        if (c.x >= 0) s.x += v.x * xval(x, c.x);
        if (c.y >= 0) s.y += v.y * xval(x, c.y);
        if (c.z >= 0) s.z += v.z * xval(x, c.z);
        if (c.w >= 0) s.w += v.w * xval(x, c.w);
    }
    return s;
}

// The four sums of ell4 into y (a 16-byte store where all four rows exist).
__device__ __forceinline__ void store4(float* __restrict__ y, int q, int rows, float4 s) {
    const int r = 4 * q;
    if (r + 3 < rows) {
        *reinterpret_cast<float4*>(y + r) = s;
    } else {
        if (r < rows) y[r] = s.x;
        if (r + 1 < rows) y[r + 1] = s.y;
        if (r + 2 < rows) y[r + 2] = s.z;
    }
}

// --- segmented scans ------------------------------------------------------------------------
// Inclusive segmented sum over the 32 lanes: a lane with head = true starts a new segment, and
// each lane gets the sum of v from its segment's first lane up to itself (Hillis-Steele with
// __shfl_up_sync, adding only values from lanes inside the same segment). Every lane of the
// warp must call it.
__device__ __forceinline__ float warp_segscan(float v, bool head) {
    const int lane = threadIdx.x & 31;
    const unsigned heads = __ballot_sync(FULL, head) & (FULL >> (31 - lane));  // heads <= lane
    const int start = heads ? 31 - __clz(heads) : 0;                            // my segment's first lane
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
        const float up = __shfl_up_sync(FULL, v, d);
        if (lane - d >= start) v += up;
    }
    return v;
}

// Exclusive segmented scan over the block of per-thread (agg, flag) pairs, in thread order:
// agg is the sum of a thread's elements after its last segment head (all of them if it has
// none), flag whether it has a head. Returns what flows into the thread from the threads before
// it: the sum of their elements since the last head among them. `wsum` and `wflag` hold 32
// entries of shared memory. Every thread of the block must call it (blockDim.x % 32 == 0).
__device__ __forceinline__ float block_segscan_exclusive(float agg, bool flag, float* wsum, int* wflag) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    const unsigned flags = __ballot_sync(FULL, flag);
    const float incl = warp_segscan(agg, flag);
    float excl = __shfl_up_sync(FULL, incl, 1);
    if (lane == 0) excl = 0.f;
    if (lane == 31) {
        wsum[warp] = incl;
        wflag[warp] = flags != 0u;
    }
    __syncthreads();
    if (warp == 0) {
        const float t = lane < warps ? wsum[lane] : 0.f;
        const bool f = lane < warps ? wflag[lane] != 0 : false;
        const float ti = warp_segscan(t, f);
        float te = __shfl_up_sync(FULL, ti, 1);
        if (lane == 0) te = 0.f;
        __syncwarp();
        if (lane < warps) wsum[lane] = te;   // what flows into warp `lane` from the warps before
    }
    __syncthreads();
    const bool head_below = (flags & ((1u << lane) - 1u)) != 0u;  // a head in my warp before me
    return head_below ? excl : excl + wsum[warp];
}

// --- products of a contiguous run of nonzeros ------------------------------------------------
// f(e, val[z0 + e] * x[col[z0 + e]]) for every e in [0, n), shared out over `threads` threads:
// a head of at most 3 elements up to a 16-byte boundary, int4/float4 loads for the body, then a
// tail of at most 3.
template <typename F>
__device__ __forceinline__ void for_each_product(const int* __restrict__ col, const float* __restrict__ val,
                                                 const float* __restrict__ x, int z0, int n, int tid,
                                                 int threads, F f) {
    const int head = min(n, (4 - (z0 & 3)) & 3);
    const int nv = (n - head) >> 2;
    const int tail0 = head + 4 * nv;
    if (tid < head) f(tid, __ldcs(val + z0 + tid) * xval(x, __ldcs(col + z0 + tid)));
    const int4* c4 = reinterpret_cast<const int4*>(col + z0 + head);
    const float4* v4 = reinterpret_cast<const float4*>(val + z0 + head);
    for (int q = tid; q < nv; q += threads) {
        const int4 c = __ldcs(c4 + q);
        const float4 v = __ldcs(v4 + q);
        const int e = head + 4 * q;
        f(e, v.x * xval(x, c.x));
        f(e + 1, v.y * xval(x, c.y));
        f(e + 2, v.z * xval(x, c.z));
        f(e + 3, v.w * xval(x, c.w));
    }
    if (tid < n - tail0) f(tail0 + tid, __ldcs(val + z0 + tail0 + tid) * xval(x, __ldcs(col + z0 + tail0 + tid)));
}

// --- CSR row blocks (day 36 v6) -------------------------------------------------------------
// The host cuts the rows into blocks of whole consecutive rows holding at most NZ = THREADS *
// ITEMS nonzeros and at most THREADS rows: int4 {first row, end row, first nonzero, end
// nonzero}. A row longer than NZ gets blocks of its own, one per chunk of NZ nonzeros:
// {row, -chunks, chunk start, chunk end}, consecutive in the block list.
//
// A block of rows: (1) stages its products val * x[col] in shared memory with coalesced 16-byte
// loads, whatever the row lengths; (2) marks the last element of every row with the row's index
// (and writes 0 for empty rows); (3) each thread takes ITEMS consecutive products and the block
// runs a segmented scan over them (a segment = a row): the running sum at a row's last element is
// the row's sum, written by the thread that holds it. Every thread does the same work in every
// block, whether the rows are of length 1 or 2000.
// A chunk of a long row: the block sums its chunk (block_sum), writes the partial to
// partials[block], and counts itself in counters[first chunk]; the last chunk to arrive adds
// the row's partials in chunk order (deterministic) and writes y[row], then resets the counter
// to 0 for the next launch (counters start zeroed).
__device__ __forceinline__ int padded(int e) { return e + (e >> 5); }  // 1 float in 33 left out: no bank conflicts

template <int THREADS, int ITEMS>
__device__ __forceinline__ void csr_rowblocks(const int4* __restrict__ blocks, const int* __restrict__ ptr,
                                              const int* __restrict__ col, const float* __restrict__ val,
                                              const float* __restrict__ x, float* __restrict__ y,
                                              float* __restrict__ partials, int* __restrict__ counters) {
    constexpr int NZ = THREADS * ITEMS;
    __shared__ float prod[NZ + NZ / 32];
    __shared__ int last_of[NZ + NZ / 32];   // row index at a row's last element, else -1
    __shared__ float wsum[32];
    __shared__ int wflag[32];
    const int tid = threadIdx.x;
    const int4 d = blocks[blockIdx.x];

    if (d.y < 0) {   // a chunk of a long row (the whole block takes this branch)
        float s = 0.f;
        for_each_product(col, val, x, d.z, d.w - d.z, tid, THREADS, [&](int, float p) { s += p; });
        s = block_sum(s, wsum);
        if (tid == 0) {
            const int r = d.x, chunks = -d.y;
            const int first = blockIdx.x - (d.z - ptr[r]) / NZ;
            partials[blockIdx.x] = s;
            __threadfence();                              // the partial is visible before the count
            if (atomicAdd(counters + first, 1) == chunks - 1) {
                __threadfence();
                float t = 0.f;
                for (int c = 0; c < chunks; ++c) t += __ldcg(partials + first + c);  // from L2
                y[r] = t;
                counters[first] = 0;
            }
        }
        return;
    }

    const int r0 = d.x, nr = d.y - d.x, z0 = d.z, n = d.w - d.z;
    for (int e = tid; e < n; e += THREADS) last_of[padded(e)] = -1;
    for_each_product(col, val, x, z0, n, tid, THREADS, [&](int e, float p) { prod[padded(e)] = p; });
    __syncthreads();
    for (int t = tid; t < nr; t += THREADS) {
        const int r = r0 + t, a = ptr[r] - z0, b = ptr[r + 1] - z0;
        if (b > a) last_of[padded(b - 1)] = r;
        else y[r] = 0.f;
    }
    __syncthreads();

    const int e0 = tid * ITEMS;
    float p[ITEMS];
    int last[ITEMS];
    bool head[ITEMS];
    float agg = 0.f;
    bool flag = false;
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        const int e = e0 + j;
        const bool in = e < n;
        p[j] = in ? prod[padded(e)] : 0.f;
        last[j] = in ? last_of[padded(e)] : -1;
        head[j] = in && (e == 0 || last_of[padded(e - 1)] >= 0);   // first element of a row
        if (head[j]) { agg = 0.f; flag = true; }
        agg += p[j];
    }
    float s = block_segscan_exclusive(agg, flag, wsum, wflag);
#pragma unroll
    for (int j = 0; j < ITEMS; ++j) {
        if (head[j]) s = 0.f;
        s += p[j];
        if (last[j] >= 0) y[last[j]] = s;
    }
}

}  // namespace spmv
}  // namespace cuda100
