// Day 21: matrix transpose.
//
//   out[c, r] = in[r, c]        in: [rows, cols] float32, row-major;  out: [cols, rows]
//
// Build on its own:  nvcc -arch=sm_90 -O3 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 21          (python run_day.py 21 --bench for every shape)
//
// A transpose does no arithmetic: it reads every element once and writes it once, so the
// figure of merit is bandwidth against a plain copy of the same bytes. The whole difficulty is
// that the input is walked along rows and the output along columns: one of the two sides is
// strided unless the data takes a detour through shared memory.
//
// Every kernel takes a 1-D grid of tiles, tile = blockIdx.x, tiles ordered row-major over the
// input (tile column fastest), so no grid dimension limits the shape. Indices are 32-bit:
// the driver refuses rows * cols >= 2^31.
//
// Versions:
//   v1  naive: one thread per element, blocks of 32 x 8 threads. A warp reads 32 consecutive
//       floats of one input row (coalesced: 128 bytes, 4 sectors) and writes them to 32
//       different output rows (strided: 32 sectors of 32 bytes, each carrying 4 useful bytes).
//   v2  a 32 x 32 tile in shared memory, 32 x 32 threads: read a tile row-wise (coalesced),
//       __syncthreads(), write it row-wise to the output by reading shared memory column-wise.
//       With 32 floats a tile row, the column read tile[lane][c] hits bank (32*lane + c) % 32
//       = c for every lane: a 32-way bank conflict, 32 shared-memory passes per warp read.
//   v3  v2 with a padded tile, tile[32][33]: the column read hits bank (33*lane + c) % 32 =
//       (lane + c) % 32, 32 different banks: one pass.
//   v4  v2's unpadded tile with an XOR swizzle: element (r, c) lives at tile[r][c ^ r]. A row
//       write (fixed r, c = lane) lands in column lane ^ r, a permutation of 0..31; the column
//       read (r = lane, fixed c) reads tile[lane][c ^ lane], bank c ^ lane, again all
//       different. No conflicts and no wasted shared memory.
//   v5  v3's padded tile with 32 x 8 threads, 4 elements each: a quarter of the threads, the
//       same shared memory, 4 independent loads in flight per thread before the barrier.
//   v6  the Hopper design: a 64 x 64 tile (16 KB) for 256 threads, 16 elements each, and
//       16-byte global loads where rows are 16-byte aligned (cols % 4 == 0) and 16-byte
//       global stores where output rows are (rows % 4 == 0); each side falls back to 4-byte
//       accesses on its own, so every shape is taken. A warp's lanes are laid out 8 x 4
//       (8 float4 along a row, 4 rows) so that both the scattered shared-memory stores of the
//       load phase and the column reads of the store phase hit 32 different banks of the
//       padded tile (the bank arithmetic is written at the kernel). The tile shape, the
//       threads per block and the tile order are template parameters; the candidates are
//       instantiated below (.notes/day21_sweep.py times them).
#include "vec.cuh"

using cuda100::load4;
using cuda100::store4;

// ---------------------------------------------------------------------------------------
// v1: one thread per element
// ---------------------------------------------------------------------------------------
extern "C" __global__ void transpose_v1(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
    const int tiles_c = (cols + 31) / 32;
    const int r = (blockIdx.x / tiles_c) * 8 + threadIdx.y;
    const int c = (blockIdx.x % tiles_c) * 32 + threadIdx.x;
    if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
}

// ---------------------------------------------------------------------------------------
// v2-v4: a 32 x 32 tile, 32 x 32 threads, one element each. PAD is the tile's extra column,
// SWIZZLE stores element (r, c) at column c ^ r.
// ---------------------------------------------------------------------------------------
template <int PAD, bool SWIZZLE>
__device__ __forceinline__ void transpose_tile32(const float* __restrict__ in,
                                                 float* __restrict__ out, int rows, int cols) {
    __shared__ float tile[32][32 + PAD];
    const int tiles_c = (cols + 31) / 32;
    const int r0 = (blockIdx.x / tiles_c) * 32, c0 = (blockIdx.x % tiles_c) * 32;
    const int tx = threadIdx.x, ty = threadIdx.y;

    // read: row ty of the tile, lane tx along it (coalesced); store tile row ty
    int r = r0 + ty, c = c0 + tx;
    if (r < rows && c < cols) tile[ty][SWIZZLE ? (tx ^ ty) : tx] = in[r * cols + c];
    __syncthreads();
    // write: output row c0 + ty holds tile COLUMN ty; lane tx takes tile row tx
    const int orow = c0 + ty, ocol = r0 + tx;
    if (orow < cols && ocol < rows) out[orow * rows + ocol] = tile[tx][SWIZZLE ? (ty ^ tx) : ty];
}

extern "C" __global__ void transpose_v2(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
    transpose_tile32<0, false>(in, out, rows, cols);  // column read: 32-way bank conflict
}

extern "C" __global__ void transpose_v3(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
    transpose_tile32<1, false>(in, out, rows, cols);  // 33 columns: conflict-free
}

extern "C" __global__ void transpose_v4(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
    transpose_tile32<0, true>(in, out, rows, cols);   // XOR swizzle: conflict-free, no padding
}

// ---------------------------------------------------------------------------------------
// v5: the padded 32 x 32 tile with 32 x 8 threads, 4 elements each (rows ty, ty+8, ...)
// ---------------------------------------------------------------------------------------
extern "C" __global__ void transpose_v5(const float* __restrict__ in, float* __restrict__ out,
                                        int rows, int cols) {
    __shared__ float tile[32][33];
    const int tiles_c = (cols + 31) / 32;
    const int r0 = (blockIdx.x / tiles_c) * 32, c0 = (blockIdx.x % tiles_c) * 32;
    const int tx = threadIdx.x, ty = threadIdx.y;
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {  // four independent loads before the first store
        const int r = r0 + ty + 8 * j, c = c0 + tx;
        v[j] = (r < rows && c < cols) ? in[r * cols + c] : 0.f;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j) tile[ty + 8 * j][tx] = v[j];
    __syncthreads();
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int orow = c0 + ty + 8 * j, ocol = r0 + tx;
        if (orow < cols && ocol < rows) out[orow * rows + ocol] = tile[tx][ty + 8 * j];
    }
}

// ---------------------------------------------------------------------------------------
// v6: TR x TC tile (TR input rows, TC input columns; both multiples of 32), NT threads,
// padded to TC + 1 columns. VL: 16-byte loads (cols % 4 == 0), VS: 16-byte stores
// (rows % 4 == 0). COLMAJOR: consecutive blocks walk DOWN a column of tiles instead of
// along a row of tiles.
//
// Bank arithmetic (P = TC + 1 words a tile row, P % 32 == 1, so word (row, col) is in bank
// (row + col) % 32):
//   load phase, VL: float4 f = tid + i*NT; lane = f % 32 = 8a + b takes tile row 4g + a and
//     columns 32q + 4b .. +3. Its k-th scalar store hits bank (4g + a + 4b + k) % 32: over
//     the 32 lanes a + 4b runs through 0..31 once, so every store is one pass.
//     Scalar (!VL): lane = column, one row a warp: bank (row + lane) % 32, one pass.
//   store phase, VS: lane = 8a + b takes output row (tile column) 4g + a and output columns
//     (tile rows) 32q + 4b .. +3; its k-th scalar read of the tile column hits bank
//     (32q + 4b + k + 4g + a) % 32 = (4b + a + k + 4g) % 32: 32 different banks, one pass.
//     Scalar (!VS): lane = tile row, bank (lane + col) % 32, one pass.
// A warp's 16-byte global accesses cover 4 rows x 128 contiguous bytes: whole 32-byte
// sectors, 16 of them, for 512 useful bytes.
// ---------------------------------------------------------------------------------------
template <int TR, int TC, int NT, bool VL, bool VS, bool COLMAJOR>
__device__ __forceinline__ void transpose_big_tile(const float* __restrict__ in,
                                                   float* __restrict__ out, int rows, int cols) {
    static_assert(TR % 32 == 0 && TC % 32 == 0 && NT % 32 == 0, "tiles and blocks of whole warps");
    static_assert((TR * TC / 4) % NT == 0, "every thread moves the same number of float4");
    constexpr int P = TC + 1;
    constexpr int N4 = TR * TC / 4 / NT;  // float4 a thread moves (VL / VS)
    constexpr int N1 = TR * TC / NT;      // scalars a thread moves (otherwise)
    __shared__ float tile[TR * P];

    int tr, tc;
    if (COLMAJOR) {
        const int tiles_r = (rows + TR - 1) / TR;
        tr = blockIdx.x % tiles_r; tc = blockIdx.x / tiles_r;
    } else {
        const int tiles_c = (cols + TC - 1) / TC;
        tr = blockIdx.x / tiles_c; tc = blockIdx.x % tiles_c;
    }
    const int r0 = tr * TR, c0 = tc * TC;
    const int tid = threadIdx.x;

    // ---- load phase: all loads first (independent, in flight together), then the stores
    if constexpr (VL) {
        float4 v[N4];
#pragma unroll
        for (int i = 0; i < N4; ++i) {
            const int f = tid + i * NT, b = f & 7, a = (f >> 3) & 3, rest = f >> 5;
            const int row = 4 * (rest / (TC / 32)) + a, col = 32 * (rest % (TC / 32)) + 4 * b;
            const int gr = r0 + row, gc = c0 + col;   // cols % 4 == 0: gc < cols => gc + 3 < cols
            v[i] = (gr < rows && gc < cols) ? load4(in + gr * cols + gc) : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int i = 0; i < N4; ++i) {
            const int f = tid + i * NT, b = f & 7, a = (f >> 3) & 3, rest = f >> 5;
            const int row = 4 * (rest / (TC / 32)) + a, col = 32 * (rest % (TC / 32)) + 4 * b;
            float* s = tile + row * P + col;
            s[0] = v[i].x; s[1] = v[i].y; s[2] = v[i].z; s[3] = v[i].w;
        }
    } else {
        float v[N1];
#pragma unroll
        for (int i = 0; i < N1; ++i) {
            const int e = tid + i * NT, row = e / TC, col = e % TC;
            const int gr = r0 + row, gc = c0 + col;
            v[i] = (gr < rows && gc < cols) ? in[gr * cols + gc] : 0.f;
        }
#pragma unroll
        for (int i = 0; i < N1; ++i) {
            const int e = tid + i * NT;
            tile[(e / TC) * P + e % TC] = v[i];
        }
    }
    __syncthreads();

    // ---- store phase: output row c0 + j is tile column j
    if constexpr (VS) {
#pragma unroll
        for (int i = 0; i < N4; ++i) {
            const int f = tid + i * NT, b = f & 7, a = (f >> 3) & 3, rest = f >> 5;
            const int j = 4 * (rest / (TR / 32)) + a;        // tile column = output row
            const int t = 32 * (rest % (TR / 32)) + 4 * b;  // first of 4 tile rows = output cols
            const int orow = c0 + j, ocol = r0 + t;          // rows % 4 == 0: ocol + 3 < rows
            if (orow < cols && ocol < rows) {
                const float* s = tile + t * P + j;
                store4(out + orow * rows + ocol, make_float4(s[0], s[P], s[2 * P], s[3 * P]));
            }
        }
    } else {
#pragma unroll
        for (int i = 0; i < N1; ++i) {
            const int e = tid + i * NT, t = e % TR, j = e / TR;
            const int orow = c0 + j, ocol = r0 + t;
            if (orow < cols && ocol < rows) out[orow * rows + ocol] = tile[t * P + j];
        }
    }
}

// entry points: transpose_v6_<TR>x<TC>_n<NT>[_col]_<l4|l1><s4|s1>
#define V6_ONE(TR, TC, NT, CM, SUF, VL, VS, VSUF)                                                \
    extern "C" __global__ void __launch_bounds__(NT)                                             \
        transpose_v6_##TR##x##TC##_n##NT##SUF##_##VSUF(const float* __restrict__ in,             \
                                                       float* __restrict__ out, int rows,        \
                                                       int cols) {                               \
        transpose_big_tile<TR, TC, NT, VL, VS, CM>(in, out, rows, cols);                        \
    }
#define V6(TR, TC, NT, CM, SUF)                        \
    V6_ONE(TR, TC, NT, CM, SUF, true, true, l4s4)      \
    V6_ONE(TR, TC, NT, CM, SUF, true, false, l4s1)     \
    V6_ONE(TR, TC, NT, CM, SUF, false, true, l1s4)     \
    V6_ONE(TR, TC, NT, CM, SUF, false, false, l1s1)

V6(64, 64, 256, false, )       // the default: 16 elements a thread, 16.6 KB of shared memory
V6(64, 64, 128, false, )       // 32 elements a thread in flight
V6(64, 64, 512, false, )       // 8 elements a thread, more warps
V6(32, 32, 128, false, )       // v5's tile with 16-byte accesses
V6(128, 64, 256, false, )      // taller tile: 128 input rows, 256-byte output runs -> 512
V6(64, 128, 256, false, )      // wider tile: 512-byte input runs
V6(64, 64, 256, true, _col)    // the default, tiles walked down columns
V6(64, 64, 512, true, _col)    // more warps, walked down columns
V6(128, 64, 256, true, _col)   // taller tile, walked down columns
