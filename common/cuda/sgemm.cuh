// The fp32 SGEMM block tile (taught on day 8, tiled_matmul, v7; carried further on day 25,
// cublas_integration): one block computes a BM x BN tile of C = A @ B, with A [M, K] and B [K, N]
// row-major (leading dimensions lda, ldb). What happens to the finished tile is the caller's
// Epilogue, so a later day fuses a bias, an activation, a residual or a scattered store into the
// GEMM without touching its main loop:
//
//     struct MyEpilogue {
//         // row < M; v holds C[row, col .. col+n-1] (n = 1..4 columns inside the matrix)
//         __device__ void operator()(int row, int col, float4 v, int n) const;
//     };
//     cuda100::sgemm::gemm_tile<VEC>(A, lda, B, ldb, M, N, K, bm, bn, epi);
//
// What gemm_tile<VEC> (the default) needs:
//   - blockDim.x = THREADS (256), one block per (bm, bn) tile of BM x BN = 128 x 128; declare the
//     kernel __launch_bounds__(THREADS, 2): the tile then fits in 128 registers a thread.
//   - static shared memory: 16,640 bytes (no opt-in; a caller's own __shared__ arrays must keep
//     the total under 48 KB).
//   - VEC = true loads 16 bytes at a time and needs lda % 4 == 0, ldb % 4 == 0, K % 4 == 0,
//     N % 4 == 0 and 16-byte aligned A and B; VEC = false takes any shape and alignment.
//   - (bm, bn) is the tile's top-left corner in C; M, N, K >= 1 (gemm_tile_cfg also takes
//     K = 0 and writes zeros; day 8's scalar path clamps addresses to row K - 1).
// The default is still day 8's v7 (day8::gemm_tile): day 25's faster configurations
// (gemm_tile_cfg<Config<...>, VEC>, below: warptiling, cp.async stages) sit at 128 registers
// before any epilogue, and a heavy epilogue (day 30's split-K atomics) makes them spill; a day
// that wants one calls gemm_tile_cfg<Fast, VEC> (same Epilogue, launch with Fast::THREADS
// threads, Fast::SMEM_BYTES = 36,864 bytes of static shared memory) and checks --regs.
#pragma once

#include "cp_async.cuh"

namespace cuda100 {
namespace sgemm {

// ------------------------------------------------------------------------------------------
// Day 8's v7: 16 x 16 threads, 8 x 8 outputs each, BK = 8, double-buffered through registers.
// ------------------------------------------------------------------------------------------
namespace day8 {

constexpr int BM = 128, BN = 128, BK = 8, THREADS = 256;
constexpr int AS_LD = BM + 4;  // As[k][m], padded: see day 8 v6

struct Regs {
    float4 a, b;
};

template <bool VEC>
__device__ __forceinline__ Regs load(const float* __restrict__ A, int lda,
                                     const float* __restrict__ B, int ldb, int M, int N, int K,
                                     int bm, int bn, int k0, int tid) {
    const int ar = bm + tid / 2, ak = k0 + (tid % 2) * 4;    // A: row ar, k = ak .. ak+3
    const int bk = k0 + tid / 32, bc = bn + (tid % 32) * 4;  // B: row bk, n = bc .. bc+3
    Regs r;
    if (VEC) {
        const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
        r.a = (ar < M && ak < K) ? *reinterpret_cast<const float4*>(A + (size_t)ar * lda + ak) : zero;
        r.b = (bk < K && bc < N) ? *reinterpret_cast<const float4*>(B + (size_t)bk * ldb + bc) : zero;
    } else {
        // clamped addresses, zeroed values: the loads need no predicates
        const float* pa = A + (size_t)min(ar, M - 1) * lda;
        const float* pb = B + (size_t)min(bk, K - 1) * ldb;
        float va[4], vb[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            va[q] = pa[min(ak + q, K - 1)];
            vb[q] = pb[min(bc + q, N - 1)];
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            va[q] = (ar < M && ak + q < K) ? va[q] : 0.f;
            vb[q] = (bk < K && bc + q < N) ? vb[q] : 0.f;
        }
        r.a = make_float4(va[0], va[1], va[2], va[3]);
        r.b = make_float4(vb[0], vb[1], vb[2], vb[3]);
    }
    return r;
}

__device__ __forceinline__ void stash(const Regs& r, float* As, float* Bs, int tid) {
    const int m = tid / 2, k = (tid % 2) * 4;
    As[(k + 0) * AS_LD + m] = r.a.x;  // transposed: A[m, k..k+3] -> As[k..k+3][m]
    As[(k + 1) * AS_LD + m] = r.a.y;
    As[(k + 2) * AS_LD + m] = r.a.z;
    As[(k + 3) * AS_LD + m] = r.a.w;
    *reinterpret_cast<float4*>(Bs + (tid / 32) * BN + (tid % 32) * 4) = r.b;
}

__device__ __forceinline__ void multiply(const float* As, const float* Bs, int ty, int tx,
                                         float (&acc)[8][8]) {
#pragma unroll
    for (int k = 0; k < BK; ++k) {
        const float4 a0 = *reinterpret_cast<const float4*>(As + k * AS_LD + ty * 4);
        const float4 a1 = *reinterpret_cast<const float4*>(As + k * AS_LD + 64 + ty * 4);
        const float4 b0 = *reinterpret_cast<const float4*>(Bs + k * BN + tx * 4);
        const float4 b1 = *reinterpret_cast<const float4*>(Bs + k * BN + 64 + tx * 4);
        const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
        const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
        for (int i = 0; i < 8; ++i)
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
    }
}

template <bool VEC, class Epilogue>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, int lda,
                                          const float* __restrict__ B, int ldb, int M, int N,
                                          int K, int bm, int bn, const Epilogue& epi) {
    __shared__ __align__(16) float As[2][BK * AS_LD];
    __shared__ __align__(16) float Bs[2][BK * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int tiles = (K + BK - 1) / BK;

    float acc[8][8] = {};
    stash(load<VEC>(A, lda, B, ldb, M, N, K, bm, bn, 0, tid), As[0], Bs[0], tid);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        // next tile's loads in flight during this tile's FMAs (past the end they read zeros)
        const Regs next = load<VEC>(A, lda, B, ldb, M, N, K, bm, bn, (t + 1) * BK, tid);
        multiply(As[cur], Bs[cur], ty, tx, acc);
        stash(next, As[cur ^ 1], Bs[cur ^ 1], tid);
        __syncthreads();
    }
    // thread (ty, tx) holds rows {ty*4 + i, 64 + ty*4 + i} x columns {tx*4 + j, 64 + tx*4 + j}
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = bn + h * 64 + tx * 4;
            if (col < N)
                epi(row, col, make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2],
                                          acc[i][h * 4 + 3]),
                    min(4, N - col));
        }
    }
}

}  // namespace day8

// ------------------------------------------------------------------------------------------
// Day 25: the configurable tile.
//   Warptiling: warp w owns a WM x WN sub-tile of the block tile; its 32 lanes form a TY x TX
//   grid (TY * TX = 32) and lane (ty, tx) owns 8 x 8 outputs: 2 x 2 pieces of 4 x 4, the
//   pieces WM/2 rows and WN/2 columns apart, so WM = 8 * TY and WN = 8 * TX.
//   ASYNC = false: A is staged through registers and stored transposed, As[k][m] (day 8's way);
//                  STAGES must be 2 (register prefetch + two shared buffers).
//   ASYNC = true:  A and B go global -> shared with cp.async, no registers in between; A keeps
//                  its global layout As[m][k] (row pitch BK + 4), STAGES >= 2 tiles in flight.
// ------------------------------------------------------------------------------------------
template <int BM_, int BN_, int BK_, int TY_, int STAGES_, bool ASYNC_, int AK_ = 4>
struct Config {
    static constexpr int BM = BM_, BN = BN_, BK = BK_, TY = TY_, TX = 32 / TY_;
    static constexpr int AK = AK_;   // ASYNC: k values per shared load of A (float4 or float2)
    static constexpr int WM = 8 * TY, WN = 8 * TX;
    static constexpr int WARPS_M = BM / WM, WARPS_N = BN / WN;
    static constexpr int THREADS = 32 * WARPS_M * WARPS_N;
    static constexpr int STAGES = STAGES_;
    static constexpr bool ASYNC = ASYNC_;
    static constexpr int A_LD = ASYNC ? BK + 4 : BM + 4;   // padded: conflict-free, see day 25
    static constexpr int A_SIZE = ASYNC ? BM * A_LD : BK * A_LD;
    static constexpr int B_SIZE = BK * BN;
    static constexpr int SMEM_BYTES = STAGES * (A_SIZE + B_SIZE) * 4;
    static constexpr int LA = BM * BK / 4 / THREADS;   // float4 chunks of A a thread moves a tile
    static constexpr int LB = BK * BN / 4 / THREADS;   // ... of B
    static_assert(TY * TX == 32 && BM % WM == 0 && BN % WN == 0, "warp tile must divide the block tile");
    static_assert(BK % 4 == 0 && LA >= 1 && LB >= 1, "every thread moves whole float4 chunks");
    static_assert(LA * 4 * THREADS == BM * BK && LB * 4 * THREADS == BK * BN, "chunks must divide");
    static_assert(ASYNC ? STAGES >= 2 : STAGES == 2, "stages");
    static_assert(AK == 2 || AK == 4, "A is read from shared memory as float2 or float4");
    static_assert(SMEM_BYTES <= 48 * 1024, "static shared memory is limited to 48 KB");
};

// day 25's v4/v5 configuration (cp.async, two stages, BK = 16, 8 warps of 32 x 64): the
// 128 x 128, 256-thread candidate expected fastest; .notes/day25_sweep.py measures it against
// the others (days 28 and 30 static_assert that Fast stays 128 x 128 with 256 threads)
using Fast = Config<128, 128, 16, 4, 2, true, 4>;
// the default gemm_tile's block tile and threads (day 8's v7)
constexpr int BM = day8::BM, BN = day8::BN, BK = day8::BK, THREADS = day8::THREADS;

namespace detail {

// cp.async wrappers: common/cuda/cp_async.cuh (src-size 0 writes zeros and reads nothing; src
// must still be a valid address)
using cuda100::cp_async16;
using cuda100::cp_async4;
using cuda100::cp_async_commit;
using cuda100::cp_async_wait;
__device__ __forceinline__ float pick(const float4& v, int q) {  // q is a constant once unrolled
    return q == 0 ? v.x : q == 1 ? v.y : q == 2 ? v.z : v.w;
}

// ASYNC: issue the copies of the K-tile starting at k0 into one stage (As [BM][A_LD], Bs [BK][BN]).
template <class C, bool VEC>
__device__ __forceinline__ void copy_tile(const float* __restrict__ A, int lda,
                                          const float* __restrict__ B, int ldb, int M, int N,
                                          int K, int bm, int bn, int k0, float* As, float* Bs,
                                          int tid) {
    if (VEC) {   // rolled loops: a handful of instructions a tile, and no address registers
#pragma unroll 1
        for (int l = 0; l < C::LA; ++l) {
            const int f = tid + l * C::THREADS, r = f / (C::BK / 4), q = (f % (C::BK / 4)) * 4;
            const bool ok = bm + r < M && k0 + q < K;   // K % 4 == 0: a chunk is all in or all out
            cp_async16(As + r * C::A_LD + q, ok ? A + (size_t)(bm + r) * lda + k0 + q : A, ok);
        }
#pragma unroll 1
        for (int l = 0; l < C::LB; ++l) {
            const int f = tid + l * C::THREADS, r = f / (C::BN / 4), q = (f % (C::BN / 4)) * 4;
            const bool ok = k0 + r < K && bn + q < N;   // N % 4 == 0 likewise
            cp_async16(Bs + r * C::BN + q, ok ? B + (size_t)(k0 + r) * ldb + bn + q : B, ok);
        }
    } else {   // one float at a time; rolled loops keep the addresses out of the registers
#pragma unroll 1
        for (int l = 0; l < 4 * C::LA; ++l) {
            const int e = tid + l * C::THREADS, r = e / C::BK, q = e % C::BK;
            const bool ok = bm + r < M && k0 + q < K;
            cp_async4(As + r * C::A_LD + q, ok ? A + (size_t)(bm + r) * lda + k0 + q : A, ok);
        }
#pragma unroll 1
        for (int l = 0; l < 4 * C::LB; ++l) {
            const int e = tid + l * C::THREADS, r = e / C::BN, q = e % C::BN;
            const bool ok = k0 + r < K && bn + q < N;
            cp_async4(Bs + r * C::BN + q, ok ? B + (size_t)(k0 + r) * ldb + bn + q : B, ok);
        }
    }
}

// not ASYNC: the K-tile at k0 into registers (zeros outside the matrices) ...
template <class C>
struct Staged {
    float4 a[C::LA], b[C::LB];
};

__device__ __forceinline__ float4 load4(const float* __restrict__ P, int ld, int rows, int cols,
                                        int r, int c, bool vec) {
    if (vec) {
        return (r < rows && c < cols) ? *reinterpret_cast<const float4*>(P + (size_t)r * ld + c)
                                      : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    float v[4];   // predicated loads: nothing is read outside the matrix
    const float* p = P + (size_t)r * ld + c;
#pragma unroll
    for (int q = 0; q < 4; ++q) v[q] = (r < rows && c + q < cols) ? p[q] : 0.f;
    return make_float4(v[0], v[1], v[2], v[3]);
}

template <class C, bool VEC>
__device__ __forceinline__ Staged<C> load_tile(const float* __restrict__ A, int lda,
                                               const float* __restrict__ B, int ldb, int M,
                                               int N, int K, int bm, int bn, int k0, int tid) {
    Staged<C> s;
#pragma unroll
    for (int l = 0; l < C::LA; ++l) {
        const int f = tid + l * C::THREADS, r = f / (C::BK / 4), q = (f % (C::BK / 4)) * 4;
        s.a[l] = load4(A, lda, M, K, bm + r, k0 + q, VEC);
    }
#pragma unroll
    for (int l = 0; l < C::LB; ++l) {
        const int f = tid + l * C::THREADS, r = f / (C::BN / 4), q = (f % (C::BN / 4)) * 4;
        s.b[l] = load4(B, ldb, K, N, k0 + r, bn + q, VEC);
    }
    return s;
}

// ... and from registers to shared memory, A transposed (As[k][m]).
template <class C>
__device__ __forceinline__ void stash_tile(const Staged<C>& s, float* As, float* Bs, int tid) {
#pragma unroll
    for (int l = 0; l < C::LA; ++l) {
        const int f = tid + l * C::THREADS, r = f / (C::BK / 4), q = (f % (C::BK / 4)) * 4;
        As[(q + 0) * C::A_LD + r] = s.a[l].x;
        As[(q + 1) * C::A_LD + r] = s.a[l].y;
        As[(q + 2) * C::A_LD + r] = s.a[l].z;
        As[(q + 3) * C::A_LD + r] = s.a[l].w;
    }
#pragma unroll
    for (int l = 0; l < C::LB; ++l) {
        const int f = tid + l * C::THREADS, r = f / (C::BN / 4), q = (f % (C::BN / 4)) * 4;
        *reinterpret_cast<float4*>(Bs + r * C::BN + q) = s.b[l];
    }
}

// Row (inside the block tile) of a lane's output row i*4 + r: ASYNC lanes take rows TY apart
// (the TY lanes of one column read TY consecutive rows of As[m][k]: conflict-free), the staged
// path takes 4 consecutive rows (one float4 of As[k][m]).
template <class C>
__device__ __forceinline__ int row_of(int wm, int ty, int i, int r) {
    return wm * C::WM + i * (C::WM / 2) + (C::ASYNC ? r * C::TY + ty : ty * 4 + r);
}
template <class C>
__device__ __forceinline__ int col_of(int wn, int tx, int j) {
    return wn * C::WN + j * (C::WN / 2) + tx * 4;
}

template <class C>
__device__ __forceinline__ void multiply(const float* As, const float* Bs, int wm, int wn, int ty,
                                         int tx, float (&acc)[8][8]) {
    const int c0 = col_of<C>(wn, tx, 0), c1 = col_of<C>(wn, tx, 1);
    if (C::ASYNC) {
#pragma unroll
        for (int kk = 0; kk < C::BK; kk += C::AK) {
            float4 a4[8];   // rows of this lane, k = kk .. kk+AK-1
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int r = 0; r < 4; ++r) {
                    const float* p = As + row_of<C>(wm, ty, i, r) * C::A_LD + kk;
                    if (C::AK == 4) {
                        a4[i * 4 + r] = *reinterpret_cast<const float4*>(p);
                    } else {
                        const float2 v = *reinterpret_cast<const float2*>(p);
                        a4[i * 4 + r] = make_float4(v.x, v.y, 0.f, 0.f);
                    }
                }
#pragma unroll
            for (int q = 0; q < C::AK; ++q) {
                const float4 b0 = *reinterpret_cast<const float4*>(Bs + (kk + q) * C::BN + c0);
                const float4 b1 = *reinterpret_cast<const float4*>(Bs + (kk + q) * C::BN + c1);
                const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    const float a = pick(a4[i], q);
#pragma unroll
                    for (int j = 0; j < 8; ++j) acc[i][j] += a * b[j];
                }
            }
        }
    } else {
        const int r0 = row_of<C>(wm, ty, 0, 0), r1 = row_of<C>(wm, ty, 1, 0);
#pragma unroll
        for (int k = 0; k < C::BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(As + k * C::A_LD + r0);
            const float4 a1 = *reinterpret_cast<const float4*>(As + k * C::A_LD + r1);
            const float4 b0 = *reinterpret_cast<const float4*>(Bs + k * C::BN + c0);
            const float4 b1 = *reinterpret_cast<const float4*>(Bs + k * C::BN + c1);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
    }
}

}  // namespace detail

template <class C, bool VEC, class Epilogue>
__device__ __forceinline__ void gemm_tile_cfg(const float* __restrict__ A, int lda,
                                              const float* __restrict__ B, int ldb, int M, int N,
                                              int K, int bm, int bn, const Epilogue& epi) {
    __shared__ __align__(16) float smem[C::STAGES * (C::A_SIZE + C::B_SIZE)];
    float* const As0 = smem;                            // stage s: As0 + s * A_SIZE
    float* const Bs0 = smem + C::STAGES * C::A_SIZE;    // stage s: Bs0 + s * B_SIZE
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N, ty = lane / C::TX, tx = lane % C::TX;
    const int tiles = (K + C::BK - 1) / C::BK;

    float acc[8][8] = {};
    if (C::ASYNC) {
        // prologue: STAGES - 1 tiles in flight (an empty group past the end keeps the count)
#pragma unroll
        for (int s = 0; s < C::STAGES - 1; ++s) {
            if (s < tiles)
                detail::copy_tile<C, VEC>(A, lda, B, ldb, M, N, K, bm, bn, s * C::BK,
                                          As0 + s * C::A_SIZE, Bs0 + s * C::B_SIZE, tid);
            detail::cp_async_commit();
        }
        for (int t = 0; t < tiles; ++t) {
            detail::cp_async_wait<C::STAGES - 2>();   // tile t has landed (this thread's copies)
            __syncthreads();                          // ... everyone's; stage (t-1) % STAGES is free
            const int nt = t + C::STAGES - 1, ns = nt % C::STAGES, cs = t % C::STAGES;
            if (nt < tiles)
                detail::copy_tile<C, VEC>(A, lda, B, ldb, M, N, K, bm, bn, nt * C::BK,
                                          As0 + ns * C::A_SIZE, Bs0 + ns * C::B_SIZE, tid);
            detail::cp_async_commit();
            detail::multiply<C>(As0 + cs * C::A_SIZE, Bs0 + cs * C::B_SIZE, wm, wn, ty, tx, acc);
        }
        detail::cp_async_wait<0>();   // nothing left in flight when the block exits
    } else {
        if (tiles > 0)   // (K = 0: no clamped address exists to read)
            detail::stash_tile<C>(
                detail::load_tile<C, VEC>(A, lda, B, ldb, M, N, K, bm, bn, 0, tid), As0, Bs0, tid);
        __syncthreads();
        for (int t = 0; t < tiles; ++t) {
            const int cur = t & 1;
            // the next tile's loads fly during this tile's FMAs (past the end they read zeros)
            const detail::Staged<C> next =
                detail::load_tile<C, VEC>(A, lda, B, ldb, M, N, K, bm, bn, (t + 1) * C::BK, tid);
            detail::multiply<C>(As0 + cur * C::A_SIZE, Bs0 + cur * C::B_SIZE, wm, wn, ty, tx, acc);
            detail::stash_tile<C>(next, As0 + (cur ^ 1) * C::A_SIZE, Bs0 + (cur ^ 1) * C::B_SIZE, tid);
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int row = bm + detail::row_of<C>(wm, ty, i, r);
            if (row >= M) continue;
#pragma unroll
            for (int j = 0; j < 2; ++j) {
                const int col = bn + detail::col_of<C>(wn, tx, j);
                const float* a = acc[i * 4 + r] + j * 4;
                if (col < N) epi(row, col, make_float4(a[0], a[1], a[2], a[3]), min(4, N - col));
            }
        }
}

// The default tile: day 8's v7 (see the top of this file).
template <bool VEC, class Epilogue>
__device__ __forceinline__ void gemm_tile(const float* __restrict__ A, int lda,
                                          const float* __restrict__ B, int ldb, int M, int N,
                                          int K, int bm, int bn, const Epilogue& epi) {
    day8::gemm_tile<VEC>(A, lda, B, ldb, M, N, K, bm, bn, epi);
}

// The plain epilogue: C[row, col..] = v (16-byte store when VEC: ldc % 4 == 0, C aligned).
template <bool VEC>
struct Store {
    float* C;
    int ldc;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        float* c = C + (size_t)row * ldc + col;
        if (VEC && n == 4) {
            *reinterpret_cast<float4*>(c) = v;
        } else {
            c[0] = v.x;
            if (n > 1) c[1] = v.y;
            if (n > 2) c[2] = v.z;
            if (n > 3) c[3] = v.w;
        }
    }
};

}  // namespace sgemm
}  // namespace cuda100
