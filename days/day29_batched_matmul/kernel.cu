// Day 29: batched GEMM in fp32. C[b] = A[b] @ B[b] for b < batch, with A [batch, M, K],
// B [batch, K, N] and C [batch, M, N] row-major and packed: matrix b of A starts b*M*K floats
// in (cuBLAS calls this "strided batched" with strides M*K, K*N, M*N).
//
// Build alone:  nvcc -arch=sm_90 -I common/cuda -cubin -Xptxas -v days/day29_batched_matmul/kernel.cu
//
// One launch does the whole batch (65535 matrices at most for the tiles of v3/v4: the driver
// launches again past that); what changes between versions is how the work of one matrix
// is cut into blocks, which depends on how big the matrices are:
//
//   v1  naive: one thread per element of C, 16x16 blocks, the batch on blockIdx.z (a grid-
//       stride loop over batches past gridDim.z's limit of 65535).
//   v2  tiny matrices: a block stages G whole matrices of A and B in shared memory with one
//       flat, coalesced copy (16-byte loads when the counts allow), each thread computes up to
//       4 adjacent outputs, and C is written as one contiguous run of G*M*N floats. Matrices
//       too big for that (A[b] and B[b] over 48 KB) run v1's kernel (the driver says "= v1").
//   v3  large matrices: day 8/25's 128x128 register-blocked tile (common/cuda/sgemm.cuh),
//       one tile of one matrix per block, matrix = blockIdx.z (A, B, C offset by it). Past
//       65535 matrices the driver launches again with the pointers moved on.
//   v4  the tile chosen by shape: v2's kernel for tiny matrices, v3's for large ones with
//       enough 128x128 tiles to fill the GPU, and for the rest a smaller register-blocked tile
//       (64x64 by default, 64 threads, 8x8 outputs a thread) so that a medium batch makes
//       enough blocks for 132 SMs and wastes less on edge tiles.
//
// Sweep candidates (.notes/day29_sweep.py): the tiny kernel's matrices per block (a driver
// parameter), and v4's tile: bmm_tile_v4_<BM>x<BN>_k<BK>_{vec,scalar} for 64x64 (BK 8 and 4),
// 32x64, 64x128, 128x64. _vec: 16-byte loads, needs K % 4 == 0 and N % 4 == 0.
#include "sgemm.cuh"

// ------------------------------------------------------------------------------------------
// v1: naive. Thread (tx, ty) of block (bx, by, bz) computes C[b][by*16+ty][bx*16+tx] for
// b = bz, bz + gridDim.z, ...  A row of A is read by the 16 threads of a row (broadcast), and a
// row of B by the 16 threads of a column group (coalesced, 64 bytes).
// ------------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(256)
bmm_naive_v1(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
             int batch, int M, int N, int K) {
    const int col = blockIdx.x * 16 + threadIdx.x;
    const int row = blockIdx.y * 16 + threadIdx.y;
    if (row >= M || col >= N) return;  // no barrier below: an early return is safe
    for (int b = blockIdx.z; b < batch; b += gridDim.z) {
        const float* a = A + (size_t)b * M * K + (size_t)row * K;
        const float* bp = B + (size_t)b * K * N + col;
        float acc = 0.f;
        for (int k = 0; k < K; ++k) acc += a[k] * bp[(size_t)k * N];
        C[(size_t)b * M * N + (size_t)row * N + col] = acc;
    }
}

// ------------------------------------------------------------------------------------------
// v2: tiny matrices, G per block. The G matrices of A a block needs are G*M*K consecutive
// floats, those of B G*K*N, those of C G*M*N: the block copies the first two runs into shared
// memory as flat arrays (float4 when the run's length is a multiple of 4, so that every block's
// run starts 16-byte aligned), then work unit u = (matrix g, row r, column group q) computes
// C[g][r][q*TN .. q*TN+TN-1]. Unit u writes floats u*TN.. of the block's C run: consecutive
// threads write consecutive 16-byte pieces (TN = 4), a fully coalesced store.
// TN = 4 needs N % 4 == 0 (16-byte aligned rows of B in shared memory and of C); KV reads A
// four k at a time (needs K % 4 == 0).
// ------------------------------------------------------------------------------------------
constexpr int TINY_THREADS = 256;

__device__ __forceinline__ void stage(float* __restrict__ dst, const float* __restrict__ src,
                                      int n, bool vec) {
    if (vec) {  // n % 4 == 0 and src 16-byte aligned
        const float4* s4 = reinterpret_cast<const float4*>(src);
        float4* d4 = reinterpret_cast<float4*>(dst);
#pragma unroll 4
        for (int i = threadIdx.x; i < n / 4; i += TINY_THREADS) d4[i] = __ldcs(s4 + i);
    } else {
#pragma unroll 4
        for (int i = threadIdx.x; i < n; i += TINY_THREADS) dst[i] = __ldcs(src + i);
    }
}

template <int TN, bool KV>
__device__ __forceinline__ void bmm_tiny(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int batch, int M, int N, int K,
                                         int G) {
    extern __shared__ float4 smem4[];
    const int mk = M * K, kn = K * N, mn = M * N;  // each < 12288 (the driver's limit)
    float* As = reinterpret_cast<float*>(smem4);
    float* Bs = As + ((G * mk + 3) & ~3);          // 16-byte aligned
    const int b0 = blockIdx.x * G;                  // batch < 2^31, blocks * G <= batch + G
    const int g_here = min(G, batch - b0);          // the last block may hold fewer matrices
    stage(As, A + (size_t)b0 * mk, g_here * mk, (mk & 3) == 0);
    stage(Bs, B + (size_t)b0 * kn, g_here * kn, (kn & 3) == 0);
    __syncthreads();

    const int groups = N / TN;                      // TN divides N (the driver's choice)
    const int per_matrix = M * groups;
    const int units = g_here * per_matrix;
    float* Cb = C + (size_t)b0 * mn;
    for (int u = threadIdx.x; u < units; u += TINY_THREADS) {
        const int g = u / per_matrix;
        const int rem = u - g * per_matrix;
        const int r = rem / groups;
        const int c = (rem - r * groups) * TN;
        const float* a = As + g * mk + r * K;
        const float* b = Bs + g * kn + c;
        float acc[TN];
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[j] = 0.f;
        if (KV) {  // K % 4 == 0 (so mk % 4 == 0 too): A's row in 16-byte pieces
#pragma unroll 2
            for (int k = 0; k < K; k += 4) {
                const float4 a4 = *reinterpret_cast<const float4*>(a + k);
                const float av[4] = {a4.x, a4.y, a4.z, a4.w};
#pragma unroll
                for (int q = 0; q < 4; ++q) {
                    if (TN == 4) {
                        const float4 b4 = *reinterpret_cast<const float4*>(b + (k + q) * N);
                        acc[0] += av[q] * b4.x;
                        acc[1 % TN] += av[q] * b4.y;
                        acc[2 % TN] += av[q] * b4.z;
                        acc[3 % TN] += av[q] * b4.w;
                    } else {
                        acc[0] += av[q] * b[(k + q) * N];
                    }
                }
            }
        } else {
#pragma unroll 4
            for (int k = 0; k < K; ++k) {
                const float av = a[k];
                if (TN == 4) {
                    const float4 b4 = *reinterpret_cast<const float4*>(b + k * N);
                    acc[0] += av * b4.x;
                    acc[1 % TN] += av * b4.y;
                    acc[2 % TN] += av * b4.z;
                    acc[3 % TN] += av * b4.w;
                } else {
                    acc[0] += av * b[k * N];
                }
            }
        }
        // unit u covers floats u*TN .. u*TN+TN-1 of the block's run of C (row-major, TN | N)
        if (TN == 4)
            *reinterpret_cast<float4*>(Cb + (size_t)u * 4) =
                make_float4(acc[0], acc[1 % TN], acc[2 % TN], acc[3 % TN]);
        else
            Cb[u] = acc[0];
    }
}

#define TINY(NAME, TN, KV)                                                                     \
    extern "C" __global__ void __launch_bounds__(TINY_THREADS)                                 \
    NAME(const float* A, const float* B, float* C, int batch, int M, int N, int K, int G) {    \
        bmm_tiny<TN, KV>(A, B, C, batch, M, N, K, G);                                          \
    }
TINY(bmm_tiny_v2_n4_k4, 4, true)   // N % 4 == 0, K % 4 == 0
TINY(bmm_tiny_v2_n4, 4, false)     // N % 4 == 0
TINY(bmm_tiny_v2_k4, 1, true)      // K % 4 == 0
TINY(bmm_tiny_v2_any, 1, false)    // anything

// ------------------------------------------------------------------------------------------
// v3: day 8/25's 128x128 block tile, one (tile, matrix) per block. gridDim.z <= 65535: block z
// walks matrices z, z + gridDim.z, ... VEC (16-byte loads/stores) needs K % 4 == 0 and
// N % 4 == 0, which also makes every matrix's first element 16-byte aligned (b*M*K and b*K*N,
// b*M*N are then multiples of 4).
// ------------------------------------------------------------------------------------------
template <bool VEC>
__device__ __forceinline__ void bmm_sgemm(const float* __restrict__ A, const float* __restrict__ B,
                                          float* __restrict__ C, int M, int N, int K) {
    using namespace cuda100::sgemm;
    const size_t b = blockIdx.z;  // this launch's matrix b (the host offsets the pointers)
    gemm_tile<VEC>(A + b * M * K, K, B + b * K * N, N, M, N, K, blockIdx.y * BM, blockIdx.x * BN,
                   Store<VEC>{C + b * M * N, N});
}

extern "C" __global__ void __launch_bounds__(cuda100::sgemm::THREADS, 2)
bmm_sgemm_v3_vec(const float* A, const float* B, float* C, int M, int N, int K) {
    bmm_sgemm<true>(A, B, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(cuda100::sgemm::THREADS, 2)
bmm_sgemm_v3_scalar(const float* A, const float* B, float* C, int M, int N, int K) {
    bmm_sgemm<false>(A, B, C, M, N, K);
}

// Sweep candidate for v3: day 25's faster configuration of the same 128x128 tile (warp tiling,
// cp.async stages; sgemm.cuh's Fast), launched with Fast::THREADS threads.
template <bool VEC>
__device__ __forceinline__ void bmm_sgemm_fast(const float* __restrict__ A,
                                               const float* __restrict__ B,
                                               float* __restrict__ C, int M, int N, int K) {
    using namespace cuda100::sgemm;
    const size_t b = blockIdx.z;
    gemm_tile_cfg<Fast, VEC>(A + b * M * K, K, B + b * K * N, N, M, N, K, blockIdx.y * Fast::BM,
                             blockIdx.x * Fast::BN, Store<VEC>{C + b * M * N, N});
}
extern "C" __global__ void __launch_bounds__(cuda100::sgemm::Fast::THREADS, 2)
bmm_sgemm_v3_fast_vec(const float* A, const float* B, float* C, int M, int N, int K) {
    bmm_sgemm_fast<true>(A, B, C, M, N, K);
}
extern "C" __global__ void __launch_bounds__(cuda100::sgemm::Fast::THREADS, 2)
bmm_sgemm_v3_fast_scalar(const float* A, const float* B, float* C, int M, int N, int K) {
    bmm_sgemm_fast<false>(A, B, C, M, N, K);
}

// ------------------------------------------------------------------------------------------
// v4's mid-size tile: the same scheme as sgemm.cuh (BK k-steps a stage, A tile stored transposed and
// padded, two shared buffers, 8x8 outputs a thread in four 4x4 quadrants BM/2 and BN/2 apart),
// with the block tile BM x BN a template parameter: (BM/8) x (BN/8) threads. A 64x64 tile has
// 64 threads and 4x the blocks of a 128x128 tile, and its edge tiles waste at most 63 rows.
// ------------------------------------------------------------------------------------------
namespace tile {

template <int BM, int BN, int BK>
struct Shape {
    static constexpr int TX = BN / 8, TY = BM / 8, T = TX * TY;
    static constexpr int AS_LD = BM + 4;  // As[k][m], padded as in sgemm.cuh
    static constexpr int KQ = BK / 4;     // float4 pieces in a row of the A tile
    static constexpr int A4 = BM * BK / 4, B4 = BK * BN / 4;  // float4 pieces of each tile
    static_assert(A4 % T == 0 && B4 % T == 0, "each thread loads whole float4 pieces");
    static constexpr int LA = A4 / T, LB = B4 / T;
};

template <int BM, int BN, int BK, bool VEC>
__device__ __forceinline__ void load(const float* __restrict__ A, int M, int K,
                                     const float* __restrict__ B, int N, int bm, int bn, int k0,
                                     int tid, float4 (&ra)[Shape<BM, BN, BK>::LA],
                                     float4 (&rb)[Shape<BM, BN, BK>::LB]) {
    using S = Shape<BM, BN, BK>;
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int l = 0; l < S::LA; ++l) {
        const int i = tid + l * S::T;
        const int r = bm + i / S::KQ, k = k0 + (i % S::KQ) * 4;  // A[r, k..k+3]
        if (VEC) {
            ra[l] = (r < M && k < K) ? *reinterpret_cast<const float4*>(A + (size_t)r * K + k) : zero;
        } else {
            const float* p = A + (size_t)min(r, M - 1) * K;
            float v[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = p[min(k + q, K - 1)];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = (r < M && k + q < K) ? v[q] : 0.f;
            ra[l] = make_float4(v[0], v[1], v[2], v[3]);
        }
    }
#pragma unroll
    for (int l = 0; l < S::LB; ++l) {
        const int i = tid + l * S::T;
        const int k = k0 + i / (BN / 4), c = bn + (i % (BN / 4)) * 4;  // B[k, c..c+3]
        if (VEC) {
            rb[l] = (k < K && c < N) ? *reinterpret_cast<const float4*>(B + (size_t)k * N + c) : zero;
        } else {
            const float* p = B + (size_t)min(k, K - 1) * N;
            float v[4];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = p[min(c + q, N - 1)];
#pragma unroll
            for (int q = 0; q < 4; ++q) v[q] = (k < K && c + q < N) ? v[q] : 0.f;
            rb[l] = make_float4(v[0], v[1], v[2], v[3]);
        }
    }
}

template <int BM, int BN, int BK>
__device__ __forceinline__ void stash(const float4 (&ra)[Shape<BM, BN, BK>::LA],
                                      const float4 (&rb)[Shape<BM, BN, BK>::LB], float* As,
                                      float* Bs, int tid) {
    using S = Shape<BM, BN, BK>;
#pragma unroll
    for (int l = 0; l < S::LA; ++l) {
        const int i = tid + l * S::T, m = i / S::KQ, k = (i % S::KQ) * 4;
        As[(k + 0) * S::AS_LD + m] = ra[l].x;  // transposed: A[m, k..k+3] -> As[k..k+3][m]
        As[(k + 1) * S::AS_LD + m] = ra[l].y;
        As[(k + 2) * S::AS_LD + m] = ra[l].z;
        As[(k + 3) * S::AS_LD + m] = ra[l].w;
    }
#pragma unroll
    for (int l = 0; l < S::LB; ++l) {
        const int i = tid + l * S::T;
        *reinterpret_cast<float4*>(Bs + (i / (BN / 4)) * BN + (i % (BN / 4)) * 4) = rb[l];
    }
}

template <int BM, int BN, int BK, bool VEC>
__device__ __forceinline__ void gemm(const float* __restrict__ A, const float* __restrict__ B,
                                     float* __restrict__ C, int M, int N, int K, int bm, int bn) {
    using S = Shape<BM, BN, BK>;
    __shared__ __align__(16) float As[2][BK * S::AS_LD];
    __shared__ __align__(16) float Bs[2][BK * BN];
    const int tid = threadIdx.x, ty = tid / S::TX, tx = tid % S::TX;
    const int tiles = (K + BK - 1) / BK;
    float4 ra[S::LA], rb[S::LB];
    float acc[8][8] = {};

    load<BM, BN, BK, VEC>(A, M, K, B, N, bm, bn, 0, tid, ra, rb);
    stash<BM, BN, BK>(ra, rb, As[0], Bs[0], tid);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        load<BM, BN, BK, VEC>(A, M, K, B, N, bm, bn, (t + 1) * BK, tid, ra, rb);  // zeros past K
        const float* as = As[cur];
        const float* bs = Bs[cur];
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float4 a0 = *reinterpret_cast<const float4*>(as + k * S::AS_LD + ty * 4);
            const float4 a1 = *reinterpret_cast<const float4*>(as + k * S::AS_LD + BM / 2 + ty * 4);
            const float4 b0 = *reinterpret_cast<const float4*>(bs + k * BN + tx * 4);
            const float4 b1 = *reinterpret_cast<const float4*>(bs + k * BN + BN / 2 + tx * 4);
            const float a[8] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
            const float b[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 8; ++i)
#pragma unroll
                for (int j = 0; j < 8; ++j) acc[i][j] += a[i] * b[j];
        }
        // the other buffer was last read in step t-1, before the barrier that ended it
        stash<BM, BN, BK>(ra, rb, As[cur ^ 1], Bs[cur ^ 1], tid);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = bn + h * (BN / 2) + tx * 4;
            float* c = C + (size_t)row * N + col;
            if (VEC && col + 3 < N) {
                *reinterpret_cast<float4*>(c) =
                    make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2], acc[i][h * 4 + 3]);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    if (col + j < N) c[j] = acc[i][h * 4 + j];
            }
        }
    }
}

template <int BM, int BN, int BK, bool VEC>
__device__ __forceinline__ void batched(const float* __restrict__ A, const float* __restrict__ B,
                                        float* __restrict__ C, int M, int N, int K) {
    const size_t b = blockIdx.z;  // as in v3: one matrix per grid z, pointers offset per launch
    gemm<BM, BN, BK, VEC>(A + b * M * K, B + b * K * N, C + b * M * N, M, N, K, blockIdx.y * BM,
                      blockIdx.x * BN);
}

}  // namespace tile

// 8x8 outputs a thread: at most 168 registers (65536 / 384), so 12 warps an SM whatever the tile
// (a 128-register cap, 16 warps, spills a few registers in every tile of this template)
#define TILE(BM, BN, BK)                                                                       \
    extern "C" __global__ void __launch_bounds__(BM * BN / 64, 384 / (BM * BN / 64))          \
    bmm_tile_v4_##BM##x##BN##_k##BK##_vec(const float* A, const float* B, float* C, int M,     \
                                          int N, int K) {                                      \
        tile::batched<BM, BN, BK, true>(A, B, C, M, N, K);                                     \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(BM * BN / 64, 384 / (BM * BN / 64))          \
    bmm_tile_v4_##BM##x##BN##_k##BK##_scalar(const float* A, const float* B, float* C, int M,  \
                                             int N, int K) {                                   \
        tile::batched<BM, BN, BK, false>(A, B, C, M, N, K);                                    \
    }
TILE(64, 64, 8)
TILE(64, 64, 4)
TILE(32, 64, 4)
TILE(64, 128, 8)
TILE(128, 64, 8)
