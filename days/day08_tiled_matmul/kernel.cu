// Day 8: shared-memory tiled matrix multiply, then register blocking.
//
//   C[M, N] = A[M, K] @ B[K, N]        row-major fp32
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 8            (2048x2048x2048, every version and cuBLAS)
//
// Every version walks K in tiles: a block copies a BMxBK tile of A and a BKxBN tile of B into
// shared memory once, then every thread of the block reads them from there many times. A tile
// that runs past the edge of A or B is filled with zeros, which add nothing to the sums, so
// every version is correct for any M, K, N (1000x777x513 included); stores past the edge of C
// are skipped. Blocks map x to columns of C and y to rows.
//
//   v1  8x8 tiles, one output per thread (64 threads a block)
//   v2  16x16 tiles, one output per thread (256 threads)
//   v3  32x32 tiles, one output per thread (1024 threads): each value loaded from global
//       memory is used 32 times, but each FMA still needs its own shared load of B
//   v4  1-D register blocking: a 64x64 block tile, BK = 8, 512 threads, each thread computes
//       8 outputs of one column; the B value is loaded once into a register and used 8 times
//   v5  2-D register blocking: a 128x128 block tile, BK = 8, 256 threads, each thread computes
//       an 8x8 patch of C as an outer product of 8 A values and 8 B values held in registers:
//       16 values loaded from shared memory feed 64 FMAs
//   v6  v5 vectorized: 16-byte global loads, the A tile stored transposed (k-major) so the
//       8 A values of a thread are two float4 shared loads, the thread's 8x8 patch split
//       into four 4x4 quadrants 64 rows/columns apart (no shared-memory bank conflicts),
//       16-byte stores of C
//   v7  v6 double-buffered: two shared tiles; the next tile is fetched from global memory
//       into registers while the current one is multiplied, then stored into the other
//       buffer: one barrier per tile instead of two, global latency hidden behind the FMAs
//
// v6 and v7 come in two instantiations: `_vec4` (16-byte loads and stores; needs K % 4 == 0
// and N % 4 == 0 so every row starts 16-byte aligned) and `_scalar` (any K and N). The driver
// picks one by the shape.

#include <cstddef>

// ---------------------------------------------------------------------------------------
// v1-v3: square TILE x TILE tiles, block (TILE, TILE), one output per thread
// ---------------------------------------------------------------------------------------
template <int TILE>
__device__ __forceinline__ void tiled_square(const float* __restrict__ A,
                                             const float* __restrict__ B,
                                             float* __restrict__ C, int M, int N, int K) {
    __shared__ float As[TILE][TILE];
    __shared__ float Bs[TILE][TILE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE + ty;  // this thread's output C[row, col]
    const int col = blockIdx.x * TILE + tx;

    float acc = 0.f;
    for (int k0 = 0; k0 < K; k0 += TILE) {
        // every thread loads one element of each tile (zero past the edges); threads
        // outside C still load and reach the barriers: they return only at the very end
        const int ka = k0 + tx, kb = k0 + ty;
        As[ty][tx] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.f;
        Bs[ty][tx] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.f;
        __syncthreads();  // the tiles are complete
#pragma unroll
        for (int k = 0; k < TILE; ++k) acc += As[ty][k] * Bs[k][tx];
        __syncthreads();  // everyone is done reading before the next tile overwrites them
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

extern "C" __global__ void __launch_bounds__(64) matmul_tiled_v1(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K) {
    tiled_square<8>(A, B, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(256) matmul_tiled_v2(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K) {
    tiled_square<16>(A, B, C, M, N, K);
}

extern "C" __global__ void __launch_bounds__(1024) matmul_tiled_v3(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K) {
    tiled_square<32>(A, B, C, M, N, K);
}

// ---------------------------------------------------------------------------------------
// v4: 1-D register blocking. Block tile 64x64, BK = 8, 512 threads, 8 outputs per thread
// (rows trow*8 .. trow*8+7 of one column tcol). Per k the thread loads one B value and
// reuses it for 8 FMAs; the 8 A values are the same for the whole warp (a broadcast).
// ---------------------------------------------------------------------------------------
namespace v4 {
constexpr int BM = 64, BN = 64, BK = 8, TM = 8;
constexpr int THREADS = BM * BN / TM;  // 512
static_assert(THREADS == BM * BK && THREADS == BK * BN, "one A and one B element per thread");
}  // namespace v4

extern "C" __global__ void __launch_bounds__(v4::THREADS) matmul_tiled_v4(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K) {
    using namespace v4;
    __shared__ float As[BM * BK];  // As[m][k] (row-major, as in A)
    __shared__ float Bs[BK * BN];  // Bs[k][n]
    const int tid = threadIdx.x;
    const int tcol = tid % BN, trow = tid / BN;          // output column, 8-row group
    const int a_r = tid / BK, a_c = tid % BK;            // this thread's A-tile element
    const int b_r = tid / BN, b_c = tid % BN;            // this thread's B-tile element
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

    float acc[TM] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        const int ar = bm + a_r, ak = k0 + a_c;
        As[a_r * BK + a_c] = (ar < M && ak < K) ? A[(size_t)ar * K + ak] : 0.f;
        const int bk = k0 + b_r, bc = bn + b_c;
        Bs[b_r * BN + b_c] = (bk < K && bc < N) ? B[(size_t)bk * N + bc] : 0.f;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
            const float b = Bs[k * BN + tcol];  // one load, 8 uses
#pragma unroll
            for (int i = 0; i < TM; ++i) acc[i] += As[(trow * TM + i) * BK + k] * b;
        }
        __syncthreads();
    }
    const int col = bn + tcol;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + trow * TM + i;
        if (row < M && col < N) C[(size_t)row * N + col] = acc[i];
    }
}

// ---------------------------------------------------------------------------------------
// v5: 2-D register blocking. Block tile 128x128, BK = 8, 256 threads; thread (trow, tcol)
// owns the 8x8 patch C[trow*8 + i, tcol*8 + j]. Per k: 8 A values and 8 B values go into
// registers, then 64 FMAs (an outer product). Scalar loads everywhere.
// ---------------------------------------------------------------------------------------
namespace v5 {
constexpr int BM = 128, BN = 128, BK = 8, TM = 8, TN = 8;
constexpr int THREADS = (BM / TM) * (BN / TN);  // 256
constexpr int A_STRIDE = THREADS / BK;          // A-tile rows loaded per pass (32)
constexpr int B_STRIDE = THREADS / BN;          // B-tile rows loaded per pass (2)
}  // namespace v5

extern "C" __global__ void __launch_bounds__(v5::THREADS, 2) matmul_tiled_v5(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
    int M, int N, int K) {
    using namespace v5;
    __shared__ float As[BM * BK];  // As[m][k]
    __shared__ float Bs[BK * BN];  // Bs[k][n]
    const int tid = threadIdx.x;
    const int trow = tid / (BN / TN), tcol = tid % (BN / TN);
    const int a_r = tid / BK, a_c = tid % BK;
    const int b_r = tid / BN, b_c = tid % BN;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

    float acc[TM][TN] = {};
    float regM[TM], regN[TN];
    for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
        for (int r = 0; r < BM; r += A_STRIDE) {
            const int ar = bm + a_r + r, ak = k0 + a_c;
            As[(a_r + r) * BK + a_c] = (ar < M && ak < K) ? A[(size_t)ar * K + ak] : 0.f;
        }
#pragma unroll
        for (int r = 0; r < BK; r += B_STRIDE) {
            const int bk = k0 + b_r + r, bc = bn + b_c;
            Bs[(b_r + r) * BN + b_c] = (bk < K && bc < N) ? B[(size_t)bk * N + bc] : 0.f;
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < BK; ++k) {
#pragma unroll
            for (int i = 0; i < TM; ++i) regM[i] = As[(trow * TM + i) * BK + k];
#pragma unroll
            for (int j = 0; j < TN; ++j) regN[j] = Bs[k * BN + tcol * TN + j];
#pragma unroll
            for (int i = 0; i < TM; ++i)
#pragma unroll
                for (int j = 0; j < TN; ++j) acc[i][j] += regM[i] * regN[j];
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < TM; ++i) {
        const int row = bm + trow * TM + i;
#pragma unroll
        for (int j = 0; j < TN; ++j) {
            const int col = bn + tcol * TN + j;
            if (row < M && col < N) C[(size_t)row * N + col] = acc[i][j];
        }
    }
}

// ---------------------------------------------------------------------------------------
// v6 / v7: 2-D register blocking with 16-byte loads.
//
// Block tile 128x128, BK = 8, 256 threads as a 16x16 grid (ty, tx). Thread (ty, tx) owns
// rows  {ty*4 .. ty*4+3} and {64 + ty*4 .. 64 + ty*4+3}  of the block tile, and
// columns {tx*4 .. tx*4+3} and {64 + tx*4 .. 64 + tx*4+3}: four 4x4 quadrants. Why not a
// contiguous 8x8 patch: the 16 threads of a half-warp then read B at float offsets tx*8,
// and offsets 0, 32, 64, 96 floats fall in the same shared-memory banks (4-way conflicts).
// With the split, the half-warp's 16 float4 reads cover 64 consecutive floats: every bank
// once per 128 bytes, the minimum number of shared-memory wavefronts.
//
// Loading: the A tile (128 rows x 8 k) is 256 float4 = one per thread: thread t reads
// A[bm + t/2, k0 + (t%2)*4 .. +3] and writes it TRANSPOSED into As[k][m], so that a
// thread's 4 consecutive rows are one float4 in shared memory. The B tile (8 x 128) is
// 256 float4 too: thread t reads B[k0 + t/32, bn + (t%32)*4 .. +3] into Bs[k][n].
// As rows are padded by 4 floats: the two threads that write the same m at k and k+4 would
// otherwise hit the same bank (4*128 floats apart); with 132 they are 16 banks apart.
//
// VEC = true uses float4 global loads and stores (needs K % 4 == 0 and N % 4 == 0: then
// every float4 is 16-byte aligned and lies entirely inside or entirely outside the
// matrix); VEC = false loads and stores element by element, with the same tiles.
// ---------------------------------------------------------------------------------------
namespace v6 {
constexpr int BM = 128, BN = 128, BK = 8;
constexpr int THREADS = 256;
constexpr int AS_LD = BM + 4;  // padded leading dimension of As[k][m]
}  // namespace v6

struct TileRegs {  // one thread's share of a tile pair, in flight from global memory
    float4 a, b;
};

template <bool VEC>
__device__ __forceinline__ TileRegs load_tiles(const float* __restrict__ A,
                                               const float* __restrict__ B, int M, int N,
                                               int K, int bm, int bn, int k0, int tid) {
    const int ar = bm + tid / 2, ak = k0 + (tid % 2) * 4;   // A: row ar, k = ak .. ak+3
    const int bk = k0 + tid / 32, bc = bn + (tid % 32) * 4; // B: row bk, n = bc .. bc+3
    TileRegs r;
    if (VEC) {
        const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
        r.a = (ar < M && ak < K) ? *reinterpret_cast<const float4*>(A + (size_t)ar * K + ak) : zero;
        r.b = (bk < K && bc < N) ? *reinterpret_cast<const float4*>(B + (size_t)bk * N + bc) : zero;
    } else {
        // clamp the addresses into the matrix and zero the values outside it: the loads
        // need no predicates, which keeps this path inside the register budget
        const float* pa = A + (size_t)min(ar, M - 1) * K;
        const float* pb = B + (size_t)min(bk, K - 1) * N;
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

__device__ __forceinline__ void store_tiles(const TileRegs& r, float* As, float* Bs, int tid) {
    using namespace v6;
    const int m = tid / 2, k = (tid % 2) * 4;
    As[(k + 0) * AS_LD + m] = r.a.x;  // transpose: A[m, k..k+3] -> As[k..k+3][m]
    As[(k + 1) * AS_LD + m] = r.a.y;
    As[(k + 2) * AS_LD + m] = r.a.z;
    As[(k + 3) * AS_LD + m] = r.a.w;
    *reinterpret_cast<float4*>(Bs + (tid / 32) * BN + (tid % 32) * 4) = r.b;
}

// acc[i][j] += A-tile rows x B-tile columns of this thread, over the BK k's of one tile
__device__ __forceinline__ void multiply_tile(const float* As, const float* Bs, int ty, int tx,
                                              float (&acc)[8][8]) {
    using namespace v6;
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

// row i (0..7) of a thread's patch is block-tile row (i < 4 ? ty*4 + i : 64 + ty*4 + i-4);
// column j likewise with tx.
template <bool VEC>
__device__ __forceinline__ void store_c(float* __restrict__ C, const float (&acc)[8][8], int M,
                                        int N, int bm, int bn, int ty, int tx) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
        float* c = C + (size_t)row * N;
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the two column quadrants
            const int col = bn + h * 64 + tx * 4;
            if (VEC) {
                if (col < N)
                    *reinterpret_cast<float4*>(c + col) =
                        make_float4(acc[i][h * 4 + 0], acc[i][h * 4 + 1], acc[i][h * 4 + 2],
                                    acc[i][h * 4 + 3]);
            } else {
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    if (col + q < N) c[col + q] = acc[i][h * 4 + q];
            }
        }
    }
}

template <bool VEC>
__device__ __forceinline__ void sgemm_v6(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K) {
    using namespace v6;
    __shared__ __align__(16) float As[BK * AS_LD];
    __shared__ __align__(16) float Bs[BK * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;

    float acc[8][8] = {};
    for (int k0 = 0; k0 < K; k0 += BK) {
        store_tiles(load_tiles<VEC>(A, B, M, N, K, bm, bn, k0, tid), As, Bs, tid);
        __syncthreads();
        multiply_tile(As, Bs, ty, tx, acc);
        __syncthreads();
    }
    store_c<VEC>(C, acc, M, N, bm, bn, ty, tx);
}

template <bool VEC>
__device__ __forceinline__ void sgemm_v7(const float* __restrict__ A, const float* __restrict__ B,
                                         float* __restrict__ C, int M, int N, int K) {
    using namespace v6;
    __shared__ __align__(16) float As[2][BK * AS_LD];
    __shared__ __align__(16) float Bs[2][BK * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tiles = (K + BK - 1) / BK;

    float acc[8][8] = {};
    store_tiles(load_tiles<VEC>(A, B, M, N, K, bm, bn, 0, tid), As[0], Bs[0], tid);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        // issue the global loads of tile t+1 first: they are in flight while tile t is
        // multiplied. No `if (t + 1 < tiles)` around them: a branch would let the compiler
        // sink the loads below the FMAs. Past the last tile, every element is outside A and
        // B, so the loads come back as zeros (and go into a buffer nobody reads again).
        const TileRegs next = load_tiles<VEC>(A, B, M, N, K, bm, bn, (t + 1) * BK, tid);
        multiply_tile(As[cur], Bs[cur], ty, tx, acc);
        // buffer cur^1 was last read in iteration t-1, and every thread has passed the
        // barrier that ended it, so it is free to overwrite
        store_tiles(next, As[cur ^ 1], Bs[cur ^ 1], tid);
        __syncthreads();
    }
    store_c<VEC>(C, acc, M, N, bm, bn, ty, tx);
}

#define SGEMM_ENTRY(NAME, FN, VEC)                                                         \
    extern "C" __global__ void __launch_bounds__(v6::THREADS, 2) NAME(                    \
        const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,  \
        int M, int N, int K) {                                                             \
        FN<VEC>(A, B, C, M, N, K);                                                         \
    }

SGEMM_ENTRY(matmul_tiled_v6_vec4, sgemm_v6, true)
SGEMM_ENTRY(matmul_tiled_v6_scalar, sgemm_v6, false)
SGEMM_ENTRY(matmul_tiled_v7_vec4, sgemm_v7, true)
SGEMM_ENTRY(matmul_tiled_v7_scalar, sgemm_v7, false)
