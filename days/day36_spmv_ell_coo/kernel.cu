// Day 36: sparse matrix-vector product y = A x in fp32, in four storage formats.
//
//   y[r] = sum over the nonzeros A[r, c] of row r of A[r, c] * x[c]
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 36            (--bench: every pattern)
//
// The device code lives in common/cuda/spmv.cuh (day 37 builds its hybrid format from it);
// this file wraps it in entry points. Values are float, indices int. The formats (built on the
// host by formats.py, once, before any timing):
//   COO  (row, col, val) per nonzero, sorted by row
//   CSR  row pointers ptr[rows + 1], then col and val row by row
//   ELL  every row padded to the longest row's length, stored column-major (slot k of all rows
//        side by side): ecol/eval [width][pitch], padding col = -1
//
//   v1  COO, one thread per nonzero: atomicAdd(y[row], val * x[col]) after a kernel that
//       clears y. Perfectly balanced whatever the row lengths; 12 bytes a nonzero and an atomic
//       each; the order of the additions changes from run to run (not bitwise reproducible).
//   v2  CSR scalar: one thread per row walks its row. The warp's 32 threads read 32 different
//       rows (uncoalesced), and a warp lasts as long as its longest row.
//   v3  CSR vector: G lanes per row (G = the power of two >= the mean row length, 2..32), the
//       G lanes read the row side by side and add up with xor-shuffles. Coalesced; still one
//       row per group, so a row of 100000 keeps its group busy while the others wait.
//   v4  ELL, one thread per row, column-major: at slot k the warp reads 32 consecutive
//       columns and values (coalesced, no row pointers). Pays for every padding slot: the
//       width is the longest row.
//   v5  ELL with 16-byte loads: a thread takes 4 consecutive rows (one int4 of columns, one
//       float4 of values per slot), and stops at the first slot where all 4 rows are padding.
//   v6  CSR row blocks: the host cuts the rows into blocks of at most 2048 nonzeros and 256
//       rows (rows longer than 2048 are split over several blocks); a block stages its
//       products with coalesced 16-byte loads in shared memory and reduces every row with a
//       block-wide segmented scan, so every block does the same work whatever the row lengths.
//       Long rows: each chunk writes a partial, the last one to finish adds them in order.
// Matrix data is read with __ldcs (streamed, evict-first: x stays in L2), x through __ldg.
//
// Entry points: the kernel's version is in its name; v3 has one per group size (_g2 .. _g32),
// v6 one per ITEMS (nonzeros a thread: _i4, _i8, _i16 = 1024, 2048, 4096 a block of 256;
// .notes/day36_sweep.py times them).
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
spmv_csr_scalar_v2(const int* __restrict__ ptr, const int* __restrict__ col, const float* __restrict__ val,
                   const float* __restrict__ x, float* __restrict__ y, int rows) {
    spmv::csr_scalar(ptr, col, val, x, y, rows);
}

#define CSR_VECTOR(G)                                                                                     \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                 \
    spmv_csr_vector_v3_g##G(const int* __restrict__ ptr, const int* __restrict__ col,                     \
                            const float* __restrict__ val, const float* __restrict__ x,                   \
                            float* __restrict__ y, int rows) {                                            \
        spmv::csr_vector<G>(ptr, col, val, x, y, rows);                                                   \
    }
CSR_VECTOR(2)
CSR_VECTOR(4)
CSR_VECTOR(8)
CSR_VECTOR(16)
CSR_VECTOR(32)

extern "C" __global__ void __launch_bounds__(THREADS)
spmv_ell_v4(const int* __restrict__ ecol, const float* __restrict__ eval, int pitch, int width,
            const float* __restrict__ x, float* __restrict__ y, int rows) {
    spmv::ell_row(ecol, eval, pitch, width, x, y, rows);
}

extern "C" __global__ void __launch_bounds__(THREADS)
spmv_ell4_v5(const int* __restrict__ ecol, const float* __restrict__ eval, int pitch, int width,
             const float* __restrict__ x, float* __restrict__ y, int rows) {
    const int q = blockIdx.x * blockDim.x + threadIdx.x;   // rows 4q .. 4q + 3
    if (4 * q >= rows) return;
    spmv::store4(y, q, rows, spmv::ell4(ecol, eval, pitch, width, x, q));
}

#define ROWBLOCKS(ITEMS)                                                                                  \
    extern "C" __global__ void __launch_bounds__(THREADS)                                                 \
    spmv_csr_rowblocks_v6_i##ITEMS(const int4* __restrict__ blocks, const int* __restrict__ ptr,           \
                                   const int* __restrict__ col, const float* __restrict__ val,            \
                                   const float* __restrict__ x, float* __restrict__ y,                    \
                                   float* __restrict__ partials, int* __restrict__ counters) {            \
        spmv::csr_rowblocks<THREADS, ITEMS>(blocks, ptr, col, val, x, y, partials, counters);             \
    }
ROWBLOCKS(4)
ROWBLOCKS(8)
ROWBLOCKS(16)
