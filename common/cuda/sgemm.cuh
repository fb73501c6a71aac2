// The fp32 SGEMM block tile (taught on day 8, tiled_matmul, v7; carried further on day 25):
// one block of THREADS threads computes a BM x BN tile of C = A @ B, with A [M, K] and B [K, N]
// row-major (leading dimensions lda, ldb), 8x8 outputs a thread, double-buffered shared tiles.
// What happens to the finished tile is the caller's Epilogue, so a later day fuses a bias, an
// activation, a residual or a scattered store into the GEMM without touching its main loop:
//
//     struct MyEpilogue {
//         // row < M; v holds C[row, col .. col+n-1] (n = 1..4 columns inside the matrix)
//         __device__ void operator()(int row, int col, float4 v, int n) const;
//     };
//     cuda100::sgemm::gemm_tile<VEC>(A, lda, B, ldb, M, N, K, bm, bn, epi);
//
// VEC = true loads 16 bytes at a time and needs lda % 4 == 0, ldb % 4 == 0 and 16-byte aligned
// A and B; VEC = false takes any shape. Launch with blockDim.x = THREADS and
// __launch_bounds__(THREADS, 2); (bm, bn) is the tile's top-left corner in C.
#pragma once

namespace cuda100 {
namespace sgemm {

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
