// Day 50: batch-1 GEMV for decoding. y[N] = W[N, K] x[K]: W is a Linear layer's bf16 weight,
// row-major [out, in]; x is the bf16 activation of ONE token; the products are summed in fp32
// and y is rounded to bf16 (round to nearest even), as torch's bf16 F.linear returns it.
//
// Build alone: nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day50_gemv_decode/kernel.cu
//
// Every weight is used for exactly one multiply-add, so the op is a read of W and nothing else:
// 2 bytes of W per 2 FLOPs. The whole game is streaming the N*K*2 bytes of W through the SMs
// as fast as a plain read of the same bytes, with every SM holding enough bytes in flight.
//
//   v1  one thread per output row, a scalar loop over the row: the 32 lanes of a warp read 32
//       addresses K*2 bytes apart (uncoalesced), and N/128 blocks leave most SMs idle
//   v2  one warp per row: lane l reads 16-byte chunks l, l+32, ... (8 bf16 each; a warp reads
//       512 contiguous bytes per instruction), a shuffle sum at the end; ONE load per lane in
//       flight at a time (the loop is kept rolled on purpose)
//   v3  ROWS rows per warp and UNROLL chunks per row issued before any is used: ROWS*UNROLL
//       16-byte loads per lane in flight; W is read with ld.global.nc.L1::no_allocate (used
//       once: it would only push x out of L1), the x chunk is loaded once and used for ROWS rows
//   v4  one BLOCK per ROWS rows: the row's K is split over all T threads of the block (each
//       issues its UNROLL chunks at once), partial sums meet in shared memory. A 4096-wide row
//       is 512 chunks: 2 per thread of a 256-thread block, so a block is one round trip to
//       memory, the same shape of work as the stream kernel that defines the read ceiling
//
// Any K: a row starts 16-byte aligned only when K % 8 == 0. Otherwise every row has a scalar
// head (elements up to its first 16-byte boundary, 0..7 of them), an aligned body of 16-byte
// chunks, and a scalar tail (0..7); the x elements that pair with a body chunk then start at an
// offset that is only 8-, 4- or 2-byte aligned (K % 4 == 0, K % 2 == 0, K odd), and the kernels
// instantiated with XA = 4, 2, 1 load x in pieces of that size. XA = 8 (K % 8 == 0) is the fast
// path; the driver picks XA from K. W and x must start 16-byte aligned (device allocations are).
//
// Entry points: gemv_v1; gemv_v2_xXA; gemv_v3_rROWS_uUNROLL_xXA (blocks of any multiple of 32
// threads: one warp per ROWS rows); gemv_v4_tT_rROWS_uUNROLL_xXA. -DDAY50_SWEEP adds the sweep's
// candidates (XA = 8 only).
#include <stdint.h>

#include <cuda_bf16.h>

#include "warp.cuh"   // cuda100::warp_sum

namespace {

// --- bf16 <-> fp32 ----------------------------------------------------------------------------
// A bf16 is the top half of a float32, so widening is a shift: the low element of a 32-bit word
// moves up 16 bits, the high element is the word with its low half cleared.
__device__ __forceinline__ float lo_bf16(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float hi_bf16(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }
__device__ __forceinline__ float bf16_f(uint16_t b) { return __uint_as_float((uint32_t)b << 16); }
__device__ __forceinline__ uint16_t f_bf16(float v) {   // round to nearest even
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
}

// acc + the 8 products of a 16-byte chunk of W with the matching 8 elements of x
__device__ __forceinline__ float dot8(uint4 w, uint4 x, float acc) {
    acc = fmaf(lo_bf16(w.x), lo_bf16(x.x), acc);
    acc = fmaf(hi_bf16(w.x), hi_bf16(x.x), acc);
    acc = fmaf(lo_bf16(w.y), lo_bf16(x.y), acc);
    acc = fmaf(hi_bf16(w.y), hi_bf16(x.y), acc);
    acc = fmaf(lo_bf16(w.z), lo_bf16(x.z), acc);
    acc = fmaf(hi_bf16(w.z), hi_bf16(x.z), acc);
    acc = fmaf(lo_bf16(w.w), lo_bf16(x.w), acc);
    acc = fmaf(hi_bf16(w.w), hi_bf16(x.w), acc);
    return acc;
}

// --- loads ------------------------------------------------------------------------------------
// A chunk of W: read-only (.nc) and not kept in L1 (every byte of W is used once; keeping it
// would only evict x, which every row reads again). The load is PREDICATED inside one asm
// statement (zeros where `in` is false): written as `in ? load : 0` it becomes a branch per
// chunk in the PTX, and ptxas then no longer issues the UNROLL loads back to back (it put
// arithmetic between them: two chunks in flight instead of eight). Not volatile: the compiler
// may move them, and does, ahead of the arithmetic.
__device__ __forceinline__ uint4 ld_w(const uint4* p, bool in) {
    uint4 r;
    asm("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\t"
        "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
        "@p ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"
        : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"((int)in));
    return r;
}

// 8 elements of x starting at p, packed like a chunk of W (element 2i in the low half of word
// i), zeros where `in` is false. x is read through L1 (ld.global.nc): every row reads it again.
// XA = 8: p is 16-byte aligned, one predicated 16-byte load. XA = 4, 2, 1: p is aligned to XA
// elements only; pieces of XA elements, loaded from x itself when `in` is false (always a valid
// address, so no branch) and replaced by zeros.
template <int XA>
__device__ __forceinline__ uint4 ld_x8(const uint16_t* p, const uint16_t* x, bool in) {
    if constexpr (XA == 8) {
        uint4 r;
        asm("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %5, 0;\n\t"
            "mov.b32 %0, 0;\n\tmov.b32 %1, 0;\n\tmov.b32 %2, 0;\n\tmov.b32 %3, 0;\n\t"
            "@p ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n\t}"
            : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "r"((int)in));
        return r;
    } else {
        const uint16_t* q = in ? p : x;
        uint32_t v[4];
        if constexpr (XA == 4) {
            const uint2 a = __ldg(reinterpret_cast<const uint2*>(q));
            const uint2 b = __ldg(reinterpret_cast<const uint2*>(q) + 1);
            v[0] = a.x, v[1] = a.y, v[2] = b.x, v[3] = b.y;
        } else if constexpr (XA == 2) {
#pragma unroll
            for (int i = 0; i < 4; ++i) v[i] = __ldg(reinterpret_cast<const unsigned int*>(q) + i);
        } else {
#pragma unroll
            for (int i = 0; i < 4; ++i)
                v[i] = (uint32_t)__ldg(q + 2 * i) | ((uint32_t)__ldg(q + 2 * i + 1) << 16);
        }
#pragma unroll
        for (int i = 0; i < 4; ++i) v[i] = in ? v[i] : 0u;
        return make_uint4(v[0], v[1], v[2], v[3]);
    }
}

// --- the shared inner loop of v2, v3 and v4 ---------------------------------------------------
// Thread t of a group of G threads (a warp in v2/v3, the block in v4) adds its share of the dot
// products of rows r0 .. r0+ROWS-1 to acc[]: the body chunks t, t+G, t+2G, ..., UNROLL of them
// loaded before any is used, and (XA < 8) the scalar head and tail elements t < 8. Rows past N
// read row N-1 again (the caller does not store them). XA < 8 takes one row at a time (rows of
// one warp would start at different alignments).
template <int ROWS, int UNROLL, int XA>
__device__ __forceinline__ void partial_dots(const uint16_t* __restrict__ W,
                                             const uint16_t* __restrict__ x, int N, int K, int r0,
                                             int t, int G, float (&acc)[ROWS]) {
    static_assert(XA == 8 || ROWS == 1, "ragged rows are taken one at a time");
    const uint4* body[ROWS];
    int head = 0;                     // elements before the row's first 16-byte boundary
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const size_t e0 = (size_t)min(r0 + r, N - 1) * (size_t)K;   // the row's first element
        const uint16_t* row = W + e0;
        acc[r] = 0.f;
        if constexpr (XA != 8) {
            head = min((int)((8u - (unsigned)(e0 & 7)) & 7u), K);
            const int tail0 = head + 8 * ((K - head) >> 3);        // K - tail0 < 8 elements left
            if (t < head) acc[r] = bf16_f(__ldg(row + t)) * bf16_f(__ldg(x + t));
            if (t < K - tail0)
                acc[r] = fmaf(bf16_f(__ldg(row + tail0 + t)), bf16_f(__ldg(x + tail0 + t)), acc[r]);
        }
        body[r] = reinterpret_cast<const uint4*>(row + head);
    }
    const int chunks = (K - head) >> 3;   // 16-byte chunks in the body (all ROWS rows alike)
    const uint16_t* xb = x + head;
#pragma unroll 1
    for (int c0 = t; c0 < chunks; c0 += G * UNROLL) {
        uint4 wv[ROWS][UNROLL], xv[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {           // every load first ...
            const int c = c0 + G * u;
            const bool in = c < chunks;
            xv[u] = ld_x8<XA>(xb + 8 * c, x, in);
#pragma unroll
            for (int r = 0; r < ROWS; ++r) wv[r][u] = ld_w(body[r] + c, in);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u)             // ... then the arithmetic
#pragma unroll
            for (int r = 0; r < ROWS; ++r) acc[r] = dot8(wv[r][u], xv[u], acc[r]);
    }
}

// ROWS rows for a group, whatever the alignment: XA = 8 together, else one after the other.
template <int ROWS, int UNROLL, int XA>
__device__ __forceinline__ void rows_dots(const uint16_t* __restrict__ W,
                                          const uint16_t* __restrict__ x, int N, int K, int r0,
                                          int t, int G, float (&acc)[ROWS]) {
    if constexpr (XA == 8) {
        partial_dots<ROWS, UNROLL, 8>(W, x, N, K, r0, t, G, acc);
    } else {
#pragma unroll
        for (int r = 0; r < ROWS; ++r) {
            float a[1];
            partial_dots<1, UNROLL, XA>(W, x, N, K, r0 + r, t, G, a);
            acc[r] = a[0];
        }
    }
}

// --- v2 / v3: one warp per ROWS rows ----------------------------------------------------------
template <int ROWS, int UNROLL, int XA>
__device__ __forceinline__ void gemv_warp(const uint16_t* __restrict__ W,
                                          const uint16_t* __restrict__ x, uint16_t* __restrict__ y,
                                          int N, int K) {
    const int lane = threadIdx.x & 31;
    const int r0 = (blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * ROWS;
    if (r0 >= N) return;              // whole warps leave; no block barrier follows
    float acc[ROWS];
    rows_dots<ROWS, UNROLL, XA>(W, x, N, K, r0, lane, 32, acc);
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const float s = cuda100::warp_sum(acc[r]);
        if (lane == r && r0 + r < N) y[r0 + r] = f_bf16(s);
    }
}

// --- v4: one block of T threads per ROWS rows -------------------------------------------------
template <int T, int ROWS, int UNROLL, int XA>
__device__ __forceinline__ void gemv_block(const uint16_t* __restrict__ W,
                                           const uint16_t* __restrict__ x, uint16_t* __restrict__ y,
                                           int N, int K) {
    constexpr int WARPS = T / 32;
    __shared__ float part[ROWS][WARPS];
    const int r0 = blockIdx.x * ROWS;   // grid = ceil(N / ROWS): r0 < N
    float acc[ROWS];
    rows_dots<ROWS, UNROLL, XA>(W, x, N, K, r0, threadIdx.x, T, acc);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int r = 0; r < ROWS; ++r) {
        const float s = cuda100::warp_sum(acc[r]);
        if (lane == 0) part[r][warp] = s;
    }
    __syncthreads();
    if (threadIdx.x < ROWS && r0 + threadIdx.x < N) {
        float s = 0.f;
#pragma unroll
        for (int w = 0; w < WARPS; ++w) s += part[threadIdx.x][w];
        y[r0 + threadIdx.x] = f_bf16(s);
    }
}

}  // namespace

// --- v1: one thread per row -------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(128) gemv_v1(const uint16_t* __restrict__ W,
                                                          const uint16_t* __restrict__ x,
                                                          uint16_t* __restrict__ y, int N, int K) {
    const int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N) return;
    const uint16_t* row = W + (size_t)r * K;
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc = fmaf(bf16_f(row[k]), bf16_f(x[k]), acc);
    y[r] = f_bf16(acc);
}

// Launch bounds: without a minimum of blocks per SM, ptxas aims for few registers (about 32)
// and gets there by issuing each load just before its first use, so a thread has two chunks in
// flight whatever UNROLL says (checked in the SASS). A minimum of B blocks of T threads gives it
// 65536 / (B * T) registers, and it then issues all UNROLL * ROWS loads back to back. B is the
// most blocks whose registers fit, the registers estimated as 24, plus 4 a row (pointer and
// sum), plus 4 per 16-byte chunk held (W and x); the estimate errs high, which only raises the
// cap (ptxas then uses what it needs: 22 to 112 in the kernels the driver launches).
constexpr int min_blocks(int threads, int rows, int unroll) {
    const int regs = 24 + 4 * rows + 4 * unroll * (rows + 1);
    const int by_regs = 65536 / (threads * regs);
    const int by_threads = 2048 / threads;
    return by_regs < 1 ? 1 : (by_regs < by_threads ? by_regs : by_threads);
}

#define SIG const uint16_t *__restrict__ W, const uint16_t *__restrict__ x, \
            uint16_t *__restrict__ y, int N, int K

// v2: one warp per row, one chunk per lane in flight (ROWS = 1, UNROLL = 1)
#define GEMV_V2(XA) \
    extern "C" __global__ void __launch_bounds__(256, min_blocks(256, 1, 1)) gemv_v2_x##XA(SIG) { \
        gemv_warp<1, 1, XA>(W, x, y, N, K); }
GEMV_V2(8) GEMV_V2(4) GEMV_V2(2) GEMV_V2(1)

// v3: one warp per R rows, U chunks per row in flight; blocks of up to 256 threads
#define GEMV_V3(R, U, XA) \
    extern "C" __global__ void __launch_bounds__(256, min_blocks(256, R, U))                   \
        gemv_v3_r##R##_u##U##_x##XA(SIG) {                                                    \
        gemv_warp<R, U, XA>(W, x, y, N, K); }
#define GEMV_V3_ALL(R, U) GEMV_V3(R, U, 8) GEMV_V3(R, U, 4) GEMV_V3(R, U, 2) GEMV_V3(R, U, 1)
GEMV_V3_ALL(2, 4)

// v4: one block of T threads per R rows, U chunks per thread per row in flight
#define GEMV_V4(T, R, U, XA) \
    extern "C" __global__ void __launch_bounds__(T, min_blocks(T, R, U))                       \
        gemv_v4_t##T##_r##R##_u##U##_x##XA(SIG) {                                             \
        gemv_block<T, R, U, XA>(W, x, y, N, K); }
#define GEMV_V4_ALL(T, R, U) \
    GEMV_V4(T, R, U, 8) GEMV_V4(T, R, U, 4) GEMV_V4(T, R, U, 2) GEMV_V4(T, R, U, 1)
// the driver picks U from K: the fewest chunks a thread that cover a row in one pass, at most 8
GEMV_V4_ALL(256, 1, 2) GEMV_V4_ALL(256, 1, 4) GEMV_V4_ALL(256, 1, 8)

#ifdef DAY50_SWEEP
// the sweep's candidates (.notes/day50_sweep.py), K % 8 == 0 only
GEMV_V3(1, 2, 8) GEMV_V3(1, 4, 8) GEMV_V3(1, 8, 8) GEMV_V3(2, 2, 8) GEMV_V3(2, 8, 8)
GEMV_V3(4, 2, 8) GEMV_V3(4, 4, 8)
GEMV_V4(128, 1, 4, 8) GEMV_V4(128, 1, 8, 8) GEMV_V4(512, 1, 1, 8) GEMV_V4(512, 1, 2, 8)
GEMV_V4(512, 1, 4, 8) GEMV_V4(256, 2, 2, 8) GEMV_V4(256, 2, 4, 8) GEMV_V4(128, 2, 4, 8)
GEMV_V4(256, 4, 2, 8) GEMV_V4(128, 4, 4, 8)
#endif
