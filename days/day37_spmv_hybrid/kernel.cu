// Day 37: hybrid ELL + COO sparse matrix-vector product y = A x in fp32.
//
// ELL is fast when rows are about equally long (coalesced, no row pointers) and hopeless when
// a few rows are very long (every row padded to the longest). COO does not care about row
// lengths but pays 12 bytes and an atomic per nonzero. The hybrid (HYB) stores the first K
// entries of every row in ELL (width K, chosen on the host from the row-length histogram:
// formats.choose_k) and the rest, the overflow of the long rows, in COO sorted by row.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 37
//
// The ELL and COO code is day 36's (common/cuda/spmv.cuh); what is new is how the two parts are
// put together and how the overflow is reduced.
//   v1  pure COO: day 36 v1 (clear y, one thread per nonzero, atomicAdd)
//   v2  pure ELL: day 36 v5 (4 rows a thread, 16-byte loads, width = the longest row)
//   v3  HYB in two launches: the ELL part (width K) writes y, then the COO part adds the
//       overflow with one atomicAdd per entry. No clearing of y: the first kernel writes it.
//   v4  HYB in one kernel: blocks [0, ell_blocks) run the ELL part, the rest the COO part, side
//       by side (no gap between the two launches, the COO tail overlaps the ELL work). Both
//       write the rows that have overflow, so y is cleared first and those rows are added with
//       atomics; a bit mask (one bit a row) says which rows, the others get a plain store.
//   v5  v4 with the overflow reduced inside each warp before it reaches y: a warp takes 128
//       consecutive overflow entries (one int4 of rows, of columns, one float4 of values a
//       lane), runs a segmented scan over them (a segment = one row) and adds each row's sum
//       with one atomicAdd: a row of 100000 overflow entries costs ~800 atomics, not 100000.
//       The padding after the last entry has row -1 and adds nothing.
// Additions into y arrive in any order in v1 and v3-v5: not bitwise reproducible run to run.
#include "spmv.cuh"

using namespace cuda100;

constexpr int THREADS = 256;

extern "C" __global__ void __launch_bounds__(THREADS) spmv_zero_v1(float* __restrict__ y, int n) {
    spmv::zero(y, n);
}

extern "C" __global__ void __launch_bounds__(THREADS)
spmv_coo_v1(const int* __restrict__ row, const int* __restrict__ col, const float* __restrict__ val,
            const float* __restrict__ x, float* __restrict__ y, int nnz) {
    spmv::coo_atomic(row, col, val, x, y, nnz, blockIdx.x);
}

extern "C" __global__ void __launch_bounds__(THREADS)
spmv_ell4_v2(const int* __restrict__ ecol, const float* __restrict__ eval, int pitch, int width,
             const float* __restrict__ x, float* __restrict__ y, int rows) {
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * q >= rows) return;
    spmv::store4(y, q, rows, spmv::ell4(ecol, eval, pitch, width, x, q));
}

// v3: the ELL part (writes every row) ...
extern "C" __global__ void __launch_bounds__(THREADS)
hyb_ell_v3(const int* __restrict__ ecol, const float* __restrict__ eval, int pitch, int k,
           const float* __restrict__ x, float* __restrict__ y, int rows) {
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (4 * q >= rows) return;
    spmv::store4(y, q, rows, spmv::ell4(ecol, eval, pitch, k, x, q));
}

// ... then the overflow, one atomic per entry (launched after it on the same stream).
extern "C" __global__ void __launch_bounds__(THREADS)
hyb_coo_v3(const int* __restrict__ orow, const int* __restrict__ ocol, const float* __restrict__ oval,
           const float* __restrict__ x, float* __restrict__ y, int overflow) {
    spmv::coo_atomic(orow, ocol, oval, x, y, overflow, blockIdx.x);
}

// The overflow of one warp tile: entries [128 tile, 128 tile + 128), 4 consecutive a lane,
// sorted by row (-1: padding). A lane sums its entries row by row; the lanes' partial sums are
// joined by an exclusive segmented scan (day 36's warp_segscan); the sum at a row's last entry
// in the tile goes to y with one atomicAdd.
__device__ __forceinline__ void coo_segmented_tile(const int4* __restrict__ orow4, const int4* __restrict__ ocol4,
                                                   const float4* __restrict__ oval4,
                                                   const float* __restrict__ x, float* __restrict__ y,
                                                   int n4, int tile) {
    const int lane = threadIdx.x & 31;
    const int q = tile * 32 + lane;
    int key[4] = {-1, -1, -1, -1};
    float p[4] = {0.f, 0.f, 0.f, 0.f};
    if (q < n4) {
        const int4 r = __ldcs(orow4 + q);
        const int4 c = __ldcs(ocol4 + q);
        const float4 v = __ldcs(oval4 + q);
        key[0] = r.x; key[1] = r.y; key[2] = r.z; key[3] = r.w;
        p[0] = r.x >= 0 ? v.x * spmv::xval(x, c.x) : 0.f;
        p[1] = r.y >= 0 ? v.y * spmv::xval(x, c.y) : 0.f;
        p[2] = r.z >= 0 ? v.z * spmv::xval(x, c.z) : 0.f;
        p[3] = r.w >= 0 ? v.w * spmv::xval(x, c.w) : 0.f;
    }
    const int before = __shfl_up_sync(spmv::FULL, key[3], 1);    // the previous lane's last row
    const int after = __shfl_down_sync(spmv::FULL, key[0], 1);   // the next lane's first row
    bool head[4], tail[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        head[i] = i == 0 ? (lane == 0 || key[0] != before) : key[i] != key[i - 1];
        tail[i] = i == 3 ? (lane == 31 || key[3] != after) : key[i] != key[i + 1];
    }
    float agg = 0.f;
    bool flag = false;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        if (head[i]) { agg = 0.f; flag = true; }
        agg += p[i];
    }
    const float incl = spmv::warp_segscan(agg, flag);
    float s = __shfl_up_sync(spmv::FULL, incl, 1);   // what flows in from the lanes before
    if (lane == 0) s = 0.f;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        if (head[i]) s = 0.f;
        s += p[i];
        if (tail[i] && key[i] >= 0) atomicAdd(y + key[i], s);
    }
}

// v4 / v5: one kernel, ELL blocks first, then overflow blocks. y is cleared before it.
template <bool SEGMENTED>
__device__ __forceinline__ void hyb_fused(const int* __restrict__ ecol, const float* __restrict__ eval,
                                          int pitch, int k, const unsigned* __restrict__ mask,
                                          const int* __restrict__ orow, const int* __restrict__ ocol,
                                          const float* __restrict__ oval, int overflow, int n4,
                                          const float* __restrict__ x, float* __restrict__ y,
                                          int rows, int ell_blocks) {
    if (blockIdx.x < ell_blocks) {   // rows 4q .. 4q + 3
        const int q = blockIdx.x * blockDim.x + threadIdx.x;
        if (4 * q >= rows) return;
        const float4 s = spmv::ell4(ecol, eval, pitch, k, x, q);
        const unsigned m = (__ldg(mask + (q >> 3)) >> ((q & 7) * 4)) & 0xFu;   // their overflow bits
        if (m == 0u) {
            spmv::store4(y, q, rows, s);   // no overflow in these rows: nobody else writes them
            return;
        }
        const float v[4] = {s.x, s.y, s.z, s.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = 4 * q + i;
            if (r < rows) {
                if ((m >> i) & 1u) atomicAdd(y + r, v[i]);
                else y[r] = v[i];
            }
        }
        return;
    }
    const int b = blockIdx.x - ell_blocks;
    if (SEGMENTED) {
        coo_segmented_tile(reinterpret_cast<const int4*>(orow), reinterpret_cast<const int4*>(ocol),
                           reinterpret_cast<const float4*>(oval), x, y, n4,
                           b * (THREADS / 32) + (threadIdx.x >> 5));
    } else {
        spmv::coo_atomic(orow, ocol, oval, x, y, overflow, b);
    }
}

#define HYB_FUSED(NAME, SEG)                                                                              \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                 \
    NAME(const int* __restrict__ ecol, const float* __restrict__ eval, int pitch, int k,                  \
         const unsigned* __restrict__ mask, const int* __restrict__ orow, const int* __restrict__ ocol,   \
         const float* __restrict__ oval, int overflow, int n4, const float* __restrict__ x,               \
         float* __restrict__ y, int rows, int ell_blocks) {                                               \
        hyb_fused<SEG>(ecol, eval, pitch, k, mask, orow, ocol, oval, overflow, n4, x, y, rows,            \
                       ell_blocks);                                                                       \
    }
HYB_FUSED(hyb_fused_v4, false)
HYB_FUSED(hyb_fused_v5, true)
