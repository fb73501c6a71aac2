// Warp-level tensor-core GEMM pieces in PTX: ldmatrix, mma.sync m16n8k16 (bf16 in, fp32
// accumulate), XOR-swizzled shared tiles, a warp tile's fragments and its fp32 epilogue (taught on
// day 42, mma_ptx_gemm; day 43's cp.async pipelines and the later tensor-core days build on them).
//
// Fragments of mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32 (PTX ISA, "Matrix fragments for
// mma.m16n8k16"): lane = 4 * g + t (g = lane / 4 in 0..7, t = lane % 4 in 0..3); a .b32 register
// holds two bf16, the lower-indexed one in the low half.
//     A (16 x 16, row-major):  a[0] = A[g][2t, 2t+1]      a[1] = A[g+8][2t, 2t+1]
//                              a[2] = A[g][2t+8, 2t+9]    a[3] = A[g+8][2t+8, 2t+9]
//     B (16 x 8, "col"):       b[0] = B[2t, 2t+1][g]      b[1] = B[2t+8, 2t+9][g]
//     C, D (16 x 8, fp32):     c[0], c[1] = C[g][2t, 2t+1]      c[2], c[3] = C[g+8][2t, 2t+1]
// ldmatrix.m8n8.x4 loads four 8 x 8 bf16 matrices, lanes 8j..8j+7 giving the row addresses of
// matrix j (16 contiguous bytes each); lane l receives row l/4, columns 2(l%4), 2(l%4)+1 of each
// matrix in register j (.trans: column l/4, rows 2(l%4), 2(l%4)+1). So one ldmatrix.x4 with lane l
// pointing at row (l % 16), 16-byte chunk (l / 16) of a 16 x 16 tile yields exactly a[0..3]
// above, and the same addressing on a row-major [k][n] tile of B with .trans yields b[0], b[1] of
// two neighbouring n8 tiles.
//
// Shared tiles: ROWS x COLS bf16, row-major, in 16-byte chunks (8 bf16). ldmatrix reads one chunk
// column of 8 consecutive rows per matrix; in a plain layout whose rows are 64, 128, 256... bytes
// long those 8 chunks share banks (2- to 8-way conflicts). Layout<COLS, true> XORs the chunk
// index with bits of the row so any 8 consecutive rows (first row a multiple of 8) put a given
// logical chunk in 8 different 16-byte bank groups: conflict-free ldmatrix, and the 16-byte stores
// that fill the tile stay conflict-free too (a 128-byte line's chunks are only permuted).
//
// The host emulator of the GEMM days (.notes/day41_43_emu.h) defines CUDA100_EMULATED_PTX and
// supplies the four PTX wrappers itself; everything else here is plain C++.
#pragma once

#include <stdint.h>

#include "cp_async.cuh"

namespace cuda100 {
namespace mma {

#ifndef CUDA100_EMULATED_PTX
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
// d += a * b for one m16n8k16 tile (fp32 accumulators in place)
__device__ __forceinline__ void mma_bf16_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ void st_shared_v4(uint32_t addr, uint4 v) {
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(v.x), "r"(v.y),
                 "r"(v.z), "r"(v.w));
}
#endif

// --- shared tile layout ------------------------------------------------------------------------
// Byte offset of 16-byte chunk `chunk` (columns 8*chunk .. 8*chunk+7) of row `row`.
//   SWIZZLE = false: plain row-major.
//   SWIZZLE = true:  chunk ^ ((row / L) & X), L = rows per 128-byte line (1 for rows of >= 128
//                    bytes, 2 for 64-byte rows, 4 for 32-byte rows), X = min(chunks, 8) - 1.
template <int COLS, bool SWIZZLE>
struct Layout {
    static constexpr int CHUNKS = COLS / 8;
    static constexpr int ROW_BYTES = COLS * 2;
    static constexpr int L = CHUNKS >= 8 ? 1 : 8 / CHUNKS;
    static constexpr int X = (CHUNKS >= 8 ? 8 : CHUNKS) - 1;
    static_assert(COLS % 8 == 0 && (CHUNKS & (CHUNKS - 1)) == 0, "rows of a power-of-two number of 16-byte chunks");
    __device__ __forceinline__ static int offset(int row, int chunk) {
        return row * ROW_BYTES + 16 * (SWIZZLE ? (chunk ^ ((row / L) & X)) : chunk);
    }
};

// --- global -> registers -> shared, 16 bytes a thread at a time (days 41 and 42) ---------------
// A ROWS x COLS tile at (row0, col0) of a row-major bf16 matrix g with leading dimension ld
// (elements; ld % 8 == 0 so every chunk is 16-byte aligned). A chunk is loaded when its row is
// < rows and its first column < cols, else it is zero: the caller guarantees that the columns
// between cols and the next multiple of 8 are readable and harmless (zero padding in K, or
// output columns >= N that are never stored). Chunk f = tid + i * THREADS: consecutive threads
// take consecutive chunks of a row, so a warp reads whole 64- to 512-byte row segments.
template <int ROWS, int COLS, int THREADS>
struct StagedTile {
    static constexpr int CHUNKS_PER_ROW = COLS / 8;
    static constexpr int PER_THREAD = ROWS * COLS / 8 / THREADS;
    static_assert(PER_THREAD >= 1 && PER_THREAD * THREADS * 8 == ROWS * COLS, "whole chunks per thread");
    uint4 r[PER_THREAD];

    __device__ __forceinline__ void load(const uint16_t* __restrict__ g, int ld, int row0, int col0,
                                         int rows, int cols, int tid) {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i) {
            const int f = tid + i * THREADS;
            const int row = row0 + f / CHUNKS_PER_ROW, col = col0 + (f % CHUNKS_PER_ROW) * 8;
            r[i] = make_uint4(0u, 0u, 0u, 0u);
            if (row < rows && col < cols)
                r[i] = __ldg(reinterpret_cast<const uint4*>(g + (size_t)row * ld + col));
        }
    }
    template <class L>
    __device__ __forceinline__ void store(uint32_t smem, int tid) const {
#pragma unroll
        for (int i = 0; i < PER_THREAD; ++i) {
            const int f = tid + i * THREADS;
            st_shared_v4(smem + L::offset(f / CHUNKS_PER_ROW, f % CHUNKS_PER_ROW), r[i]);
        }
    }
};

// The same tile copied with cp.async (day 43): no registers in between, zero fill past the edges.
template <int ROWS, int COLS, int THREADS, class L>
__device__ __forceinline__ void copy_tile_async(uint32_t smem, const uint16_t* __restrict__ g, int ld,
                                                int row0, int col0, int rows, int cols, int tid) {
    constexpr int CPR = COLS / 8, PER_THREAD = ROWS * COLS / 8 / THREADS;
    static_assert(PER_THREAD >= 1 && PER_THREAD * THREADS * 8 == ROWS * COLS, "whole chunks per thread");
#pragma unroll
    for (int i = 0; i < PER_THREAD; ++i) {
        const int f = tid + i * THREADS;
        const int r = f / CPR, c = f % CPR;
        const int row = row0 + r, col = col0 + c * 8;
        const bool ok = row < rows && col < cols;
        cp_async16_u32(smem + L::offset(r, c), ok ? g + (size_t)row * ld + col : g, ok);
    }
}

// --- a warp's tile: WM x WN outputs as (WM/16) x (WN/8) m16n8 accumulators ----------------------
template <int WM, int WN>
struct WarpTile {
    static constexpr int MI = WM / 16, NI = WN / 8;
    static_assert(WM % 16 == 0 && WN % 16 == 0, "warp tile: multiples of 16 x 16");

    struct Frags {             // one k16 slice of the warp's A rows and B columns
        uint32_t a[MI][4];
        uint32_t b[NI][2];
    };
    float acc[MI][NI][4];

    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j)
#pragma unroll
                for (int q = 0; q < 4; ++q) acc[i][j][q] = 0.f;
    }

    // Fragments of k16 slice ks from shared tiles sA (BM x BK, layout LA) and sB (BK x BN, layout
    // LB); the warp's rows start at wm0 of the block tile, its columns at wn0.
    template <class LA, class LB>
    __device__ __forceinline__ static void load(Frags& f, uint32_t sA, uint32_t sB, int wm0, int wn0,
                                                int ks, int lane) {
        const int r = lane & 15, h = lane >> 4;
#pragma unroll
        for (int i = 0; i < MI; ++i)
            ldmatrix_x4(f.a[i], sA + LA::offset(wm0 + 16 * i + r, 2 * ks + h));
#pragma unroll
        for (int j = 0; j < NI; j += 2) {
            uint32_t t[4];
            ldmatrix_x4_trans(t, sB + LB::offset(16 * ks + r, (wn0 + 8 * j) / 8 + h));
            f.b[j][0] = t[0];
            f.b[j][1] = t[1];
            f.b[j + 1][0] = t[2];
            f.b[j + 1][1] = t[3];
        }
    }

    __device__ __forceinline__ void mma(const Frags& f) {
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int j = 0; j < NI; ++j) mma_bf16_16816(acc[i][j], f.a[i], f.b[j][0], f.b[j][1]);
    }

    // C[row0 + .., col0 + ..] = acc (fp32, row-major, leading dimension ldc), rows < M and
    // columns < N only; 8-byte stores when ldc is even (then every pair starts 8-byte aligned).
    __device__ __forceinline__ void store(float* __restrict__ C, int ldc, int M, int N, int row0,
                                          int col0, int lane) const {
        const int g = lane >> 2, t = lane & 3;
        const bool pairs = (ldc & 1) == 0;
#pragma unroll
        for (int i = 0; i < MI; ++i)
#pragma unroll
            for (int half = 0; half < 2; ++half) {
                const int row = row0 + 16 * i + 8 * half + g;
                if (row >= M) continue;
                float* crow = C + (size_t)row * ldc;
#pragma unroll
                for (int j = 0; j < NI; ++j) {
                    const int col = col0 + 8 * j + 2 * t;
                    const float v0 = acc[i][j][2 * half], v1 = acc[i][j][2 * half + 1];
                    if (pairs && col + 1 < N) {
                        *reinterpret_cast<float2*>(crow + col) = make_float2(v0, v1);
                    } else {
                        if (col < N) crow[col] = v0;
                        if (col + 1 < N) crow[col + 1] = v1;
                    }
                }
            }
    }
};

// --- zero-padded copy (for shapes whose rows are not 16-byte aligned) ---------------------------
// dst [rows_p, cols_p] (cols_p % 8 == 0) = src [rows, cols] (leading dimension cols) padded with
// zeros; one thread writes one 16-byte chunk (8 bf16), reading its 8 source elements one by one
// (src rows need not be aligned at all). Grid-stride over the chunks.
__device__ __forceinline__ void pad_copy_bf16(const uint16_t* __restrict__ src, int rows, int cols,
                                              uint16_t* __restrict__ dst, int rows_p, int cols_p) {
    const int cpr = cols_p / 8;
    const long long chunks = (long long)rows_p * cpr;
    for (long long f = blockIdx.x * (long long)blockDim.x + threadIdx.x; f < chunks;
         f += (long long)gridDim.x * blockDim.x) {
        const int r = (int)(f / cpr), c0 = (int)(f % cpr) * 8;
        uint32_t w[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int c = c0 + 2 * q;
            const uint32_t lo = (r < rows && c < cols) ? src[(size_t)r * cols + c] : 0u;
            const uint32_t hi = (r < rows && c + 1 < cols) ? src[(size_t)r * cols + c + 1] : 0u;
            w[q] = lo | (hi << 16);
        }
        *reinterpret_cast<uint4*>(dst + (size_t)r * cols_p + c0) = make_uint4(w[0], w[1], w[2], w[3]);
    }
}

}  // namespace mma
}  // namespace cuda100
