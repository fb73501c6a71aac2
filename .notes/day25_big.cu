// Lead's SGEMM candidates (sweep only): day 8's v7 structure (global -> registers -> transposed
// shared A, double-buffered shared tiles, one barrier a K tile) generalized to
//   BM = 64*TMQ, BN = 64*TNQ (thread tile 4*TMQ x 4*TNQ as TMQ x TNQ quadrants of 4x4, 16x16
//   threads), BK in {8, 16}, GROUP-ed block order (1 = row-major), MINB blocks/SM.
// vec4 path only (K % 4 == 0, N % 4 == 0); zero-filled edges.
#include "sgemm.cuh"

template <int TMQ, int TNQ, int BK, int GROUP>
__device__ __forceinline__ void big_gemm(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K) {
    constexpr int BM = 64 * TMQ, BN = 64 * TNQ, T = 256, AS_LD = BM + 4;
    constexpr int A4 = BM * BK / 4 / T, B4 = BK * BN / 4 / T;   // float4 loads a thread
    static_assert(A4 >= 1 && B4 >= 1, "tile too small for 256 threads");
    __shared__ __align__(16) float As[2][BK * AS_LD];
    __shared__ __align__(16) float Bs[2][BK * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    int bm, bn;
    {
        const int tiles_n = (N + BN - 1) / BN, tiles_m = (M + BM - 1) / BM;
        const int id = blockIdx.x;
        if (GROUP <= 1) { bm = (id / tiles_n) * BM; bn = (id % tiles_n) * BN; }
        else {
            const int per = GROUP * tiles_n, first = (id / per) * GROUP;
            const int rows = min(tiles_m - first, GROUP), in = id % per;
            bm = (first + in % rows) * BM; bn = (in / rows) * BN;
        }
    }
    float4 ra[A4], rb[B4];
    auto load = [&](int k0) {
#pragma unroll
        for (int i = 0; i < A4; ++i) {
            const int f = tid + i * T, row = f / (BK / 4), kq = (f % (BK / 4)) * 4;
            const int r = bm + row, k = k0 + kq;
            ra[i] = (r < M && k < K) ? *reinterpret_cast<const float4*>(A + (size_t)r * K + k)
                                     : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int i = 0; i < B4; ++i) {
            const int f = tid + i * T, kr = f / (BN / 4), c = (f % (BN / 4)) * 4;
            const int k = k0 + kr, n = bn + c;
            rb[i] = (k < K && n < N) ? *reinterpret_cast<const float4*>(B + (size_t)k * N + n)
                                     : make_float4(0.f, 0.f, 0.f, 0.f);
        }
    };
    auto stash = [&](float* as, float* bs) {
#pragma unroll
        for (int i = 0; i < A4; ++i) {
            const int f = tid + i * T, row = f / (BK / 4), kq = (f % (BK / 4)) * 4;
            as[(kq + 0) * AS_LD + row] = ra[i].x;
            as[(kq + 1) * AS_LD + row] = ra[i].y;
            as[(kq + 2) * AS_LD + row] = ra[i].z;
            as[(kq + 3) * AS_LD + row] = ra[i].w;
        }
#pragma unroll
        for (int i = 0; i < B4; ++i) {
            const int f = tid + i * T, kr = f / (BN / 4), c = (f % (BN / 4)) * 4;
            *reinterpret_cast<float4*>(bs + kr * BN + c) = rb[i];
        }
    };
    float acc[4 * TMQ][4 * TNQ] = {};
    const int tiles = (K + BK - 1) / BK;
    load(0);
    stash(As[0], Bs[0]);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        load((t + 1) * BK);
        const float* as = As[cur];
        const float* bs = Bs[cur];
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            float a[4 * TMQ], b[4 * TNQ];
#pragma unroll
            for (int q = 0; q < TMQ; ++q) {
                const float4 v = *reinterpret_cast<const float4*>(as + k * AS_LD + q * 64 + ty * 4);
                a[q * 4] = v.x; a[q * 4 + 1] = v.y; a[q * 4 + 2] = v.z; a[q * 4 + 3] = v.w;
            }
#pragma unroll
            for (int q = 0; q < TNQ; ++q) {
                const float4 v = *reinterpret_cast<const float4*>(bs + k * BN + q * 64 + tx * 4);
                b[q * 4] = v.x; b[q * 4 + 1] = v.y; b[q * 4 + 2] = v.z; b[q * 4 + 3] = v.w;
            }
#pragma unroll
            for (int i = 0; i < 4 * TMQ; ++i)
#pragma unroll
                for (int j = 0; j < 4 * TNQ; ++j) acc[i][j] += a[i] * b[j];
        }
        stash(As[cur ^ 1], Bs[cur ^ 1]);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4 * TMQ; ++i) {
        const int row = bm + (i / 4) * 64 + ty * 4 + (i % 4);
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < TNQ; ++h) {
            const int col = bn + h * 64 + tx * 4;
            if (col < N)
                *reinterpret_cast<float4*>(C + (size_t)row * N + col) =
                    make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
        }
    }
}

#define BIG(NAME, TMQ, TNQ, BK, GROUP, MINB)                                                     \
    extern "C" __global__ void __launch_bounds__(256, MINB)                                      \
        NAME(const float* A, const float* B, float* C, int M, int N, int K) {                    \
        big_gemm<TMQ, TNQ, BK, GROUP>(A, B, C, M, N, K);                                         \
    }

BIG(big_128x128_k8_g1, 2, 2, 8, 1, 2)     // = day 8 v7 with a 1-D grid
BIG(big_128x128_k8_g8, 2, 2, 8, 8, 2)
BIG(big_128x128_k16_g1, 2, 2, 16, 1, 2)
BIG(big_128x128_k16_g8, 2, 2, 16, 8, 2)
BIG(big_128x256_k8_g1, 2, 4, 8, 1, 1)
BIG(big_128x256_k8_g8, 2, 4, 8, 8, 1)
BIG(big_256x128_k8_g8, 4, 2, 8, 8, 1)
