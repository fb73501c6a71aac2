// Day 44: Hopper's Tensor Memory Accelerator (TMA): bulk tensor copies and a TMA transpose.
//
//   op 0 (copy):       out[i] = in[i] for a rows x cols float32 matrix (i over all of it)
//   op 1 (transpose):  out[c][r] = in[r][c]
//
// The TMA moves a whole box (here up to 32 KB) between global and shared memory on the
// command of ONE thread, described by a tensor map (made in Python, common/tma.py, uploaded to
// device memory). Loads complete on an mbarrier (bytes counted down), stores are tracked in
// per-thread "bulk groups". Out-of-range parts of a box read as zero and are not stored, so
// ragged edges need no code. Plain sm_90:
//   nvcc -arch=sm_90 -I ../../common/cuda -cubin kernel.cu
//
// Versions:
//   v1  SIMT: threads move the bytes (copy: float4 grid-stride + scalar tail; transpose:
//       32x32 tile through padded shared memory): the pre-Hopper way, for comparison
//   v2  TMA, one box per block: load, wait on the mbarrier, (transpose in shared memory),
//       store, wait. The API with nothing overlapped
//   v3  TMA, persistent: a ring of boxes per warp keeps several loads and stores in flight
//
// The copy views the matrix as one flat array of n floats: [n / 256 rows of 256] for the TMA
// boxes (32 rows x 256 = 32 KB) and a tail of n % 256 floats copied by threads. The transpose
// needs 16-byte row strides in and out (cols % 4 == 0 and rows % 4 == 0): other shapes run v1.
#include <cstdint>

#include "tma.cuh"

using namespace cuda100;

constexpr int COPY_W = 256;                      // floats in a row of the flat view
constexpr int COPY_R = 32;                       // rows in a copy box
constexpr int COPY_BOX = COPY_W * COPY_R;        // 8192 floats = 32 KB
constexpr int T = 32;                            // transpose tile: 32 x 32 floats = 4 KB

extern __shared__ uint8_t smem_raw[];            // dynamic shared memory of the v3 kernels

// --- v1: SIMT -------------------------------------------------------------------------------
extern "C" __global__ void copy_v1(const float *__restrict__ in, float *__restrict__ out, long long n) {
    const long long n4 = n / 4;
    const float4 *in4 = reinterpret_cast<const float4 *>(in);
    float4 *out4 = reinterpret_cast<float4 *>(out);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4; i += stride)
        out4[i] = in4[i];
    if (blockIdx.x == 0 && threadIdx.x < n - 4 * n4) out[4 * n4 + threadIdx.x] = in[4 * n4 + threadIdx.x];  // < 4
}

// blockDim (32, 8): each thread moves 4 elements of the 32x32 tile in, 4 out; the padded row
// (33 floats) puts a column's 32 elements in 32 different banks.
extern "C" __global__ void transpose_v1(const float *__restrict__ in, float *__restrict__ out,
                                        int rows, int cols) {
    __shared__ float tile[T][T + 1];
    const int c0 = blockIdx.x * T, r0 = blockIdx.y * T;
#pragma unroll
    for (int j = 0; j < T; j += 8) {
        const int r = r0 + threadIdx.y + j, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x] = in[(size_t)r * cols + c];
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < T; j += 8) {
        const int c = c0 + threadIdx.y + j, r = r0 + threadIdx.x;   // out row c, column r
        if (r < rows && c < cols) out[(size_t)c * rows + r] = tile[threadIdx.x][threadIdx.y + j];
    }
}

// --- shared: a 32x32 transpose between two tiles the TMA wrote / will read with the 128-byte
// swizzle (16-byte chunk q of row r lives at chunk q ^ (r % 8)). Lane 8a + b handles row
// r = lane, column c = 4k + ((a + s) % 4): over s = 0..3, k = 0..7 every element once, and
// per instruction the 32 lanes touch 32 different banks on the read side and at most 2-way on
// the write side (enumerated in .notes/day44_design.md).
__device__ __forceinline__ int swz(int row, int col) {
    return row * T + ((((col >> 2) ^ (row & 7)) << 2) | (col & 3));
}

// steps [first, first + count) of the 32 (s, k) steps of one tile, by one warp
__device__ __forceinline__ void transpose_tile(const float *src, float *dst, int first, int count) {
    const int lane = threadIdx.x % 32, a = lane >> 3;
    for (int step = first; step < first + count; ++step) {
        const int s = step >> 3, k = step & 7;
        const int r = lane, c = 4 * k + ((a + s) & 3);
        dst[swz(c, r)] = src[swz(r, c)];
    }
}

// --- v2: one box per block ------------------------------------------------------------------
// 32 threads; thread 0 does the copy engine's paperwork.
extern "C" __global__ void copy_v2(const CUtensorMap *__restrict__ in_map,
                                   const CUtensorMap *__restrict__ out_map,
                                   const float *__restrict__ in, float *__restrict__ out,
                                   long long n, int boxes) {
    __shared__ alignas(128) float buf[COPY_BOX];
    __shared__ uint64_t full;
    const long long body = n / COPY_W * COPY_W;
    if (blockIdx.x < boxes && threadIdx.x == 0) {
        tma::mbar_init(&full, 1);
        tma::fence_barrier_init();
        tma::mbar_arrive_expect_tx(&full, COPY_BOX * 4);
        tma::load_2d(buf, in_map, &full, 0, blockIdx.x * COPY_R);
        tma::mbar_wait(&full, 0);
        tma::store_2d(out_map, buf, 0, blockIdx.x * COPY_R);
        tma::store_commit();
        tma::store_wait_all();
    }
    if (blockIdx.x == 0)                  // the tail: fewer than 256 floats
        for (long long i = body + threadIdx.x; i < n; i += blockDim.x) out[i] = in[i];
}

// 256 threads (8 warps) transpose one tile: warp w takes steps 4w..4w+3. The grid is
// (column tiles, row tiles), or (row tiles, column tiles) when COLS: consecutive blocks then
// walk down a column of tiles.
template <bool COLS>
__device__ __forceinline__ void transpose_one(const CUtensorMap *in_map, const CUtensorMap *out_map) {
    __shared__ alignas(1024) float src[T * T];
    __shared__ alignas(1024) float dst[T * T];
    __shared__ uint64_t full;
    const int tc = COLS ? blockIdx.y : blockIdx.x, tr = COLS ? blockIdx.x : blockIdx.y;
    if (threadIdx.x == 0) {
        tma::mbar_init(&full, 1);
        tma::fence_barrier_init();
        tma::mbar_arrive_expect_tx(&full, T * T * 4);
        tma::load_2d(src, in_map, &full, tc * T, tr * T);
    }
    __syncthreads();                      // the barrier is initialised before anyone waits
    tma::mbar_wait(&full, 0);
    transpose_tile(src, dst, 4 * (threadIdx.x / 32), 4);
    tma::fence_async_shared();            // ordinary stores, then the copy engine reads them
    __syncthreads();
    if (threadIdx.x == 0) {
        tma::store_2d(out_map, dst, tr * T, tc * T);
        tma::store_commit();
        tma::store_wait_all();
    }
}

// Down the columns: measured faster than row order (H200, .notes/day44_sweep_results.md:
// 3880 against 3519 GB/s at 8192^2)
extern "C" __global__ void transpose_v2(const CUtensorMap *__restrict__ in_map,
                                        const CUtensorMap *__restrict__ out_map) {
    transpose_one<true>(in_map, out_map);
}
#ifdef DAY44_SWEEP
extern "C" __global__ void transpose_v2_rows(const CUtensorMap *__restrict__ in_map,
                                             const CUtensorMap *__restrict__ out_map) {
    transpose_one<false>(in_map, out_map);
}
#endif

// --- v3: persistent rings -------------------------------------------------------------------
// Copy: one warp per block, lane 0 keeps S boxes of BR x 256 floats in flight. Iteration j
// waits for box j, stores it, and refills the stage of box j - 1 (whose store has finished
// READING shared memory: wait_group.read 1) with box j - 1 + S.
template <int BR, int S>
__device__ __forceinline__ void copy_ring(const CUtensorMap *in_map, const CUtensorMap *out_map,
                                          const float *in, float *out, long long n, int boxes) {
    constexpr int BOX = BR * COPY_W;
    float *buf = reinterpret_cast<float *>(smem_raw + ((128 - (tma::smem_addr(smem_raw) & 127)) & 127));
    __shared__ uint64_t full[S];
    const long long body = n / COPY_W * COPY_W;
    if (blockIdx.x == 0)                  // the tail: fewer than 256 floats
        for (long long i = body + threadIdx.x; i < n; i += blockDim.x) out[i] = in[i];
    if (threadIdx.x != 0) return;
    const int mine = boxes > (int)blockIdx.x ? (boxes - 1 - (int)blockIdx.x) / (int)gridDim.x + 1 : 0;
    for (int s = 0; s < S; ++s) tma::mbar_init(&full[s], 1);
    tma::fence_barrier_init();
    for (int j = 0; j < S && j < mine; ++j) {
        tma::mbar_arrive_expect_tx(&full[j], BOX * 4);
        tma::load_2d(buf + j * BOX, in_map, &full[j], 0, (blockIdx.x + j * gridDim.x) * BR);
    }
    for (int j = 0; j < mine; ++j) {
        const int s = j % S;
        tma::mbar_wait(&full[s], (j / S) & 1);
        tma::store_2d(out_map, buf + s * BOX, 0, (blockIdx.x + j * gridDim.x) * BR);
        tma::store_commit();
        const int next = j - 1 + S;
        if (j >= 1 && next < mine) {
            tma::store_wait_read<1>();               // box j - 1's store has read its stage
            const int sp = (j - 1) % S;
            tma::mbar_arrive_expect_tx(&full[sp], BOX * 4);
            tma::load_2d(buf + sp * BOX, in_map, &full[sp], 0, (blockIdx.x + next * gridDim.x) * BR);
        }
    }
    tma::store_wait_all();
}

// v3: boxes of 32 x 256 floats (32 KB), 6 stages (192 KB)
extern "C" __global__ void copy_v3(const CUtensorMap *__restrict__ in_map,
                                   const CUtensorMap *__restrict__ out_map,
                                   const float *__restrict__ in, float *__restrict__ out,
                                   long long n, int boxes) {
    copy_ring<COPY_R, 6>(in_map, out_map, in, out, n, boxes);
}

#ifdef DAY44_SWEEP
#define COPY_CAND(BR, S)                                                                       \
    extern "C" __global__ void copy_v3_r##BR##_s##S(const CUtensorMap *__restrict__ in_map,    \
            const CUtensorMap *__restrict__ out_map, const float *__restrict__ in,             \
            float *__restrict__ out, long long n, int boxes) {                                 \
        copy_ring<BR, S>(in_map, out_map, in, out, n, boxes);                                  \
    }
COPY_CAND(32, 6)
COPY_CAND(32, 3)
COPY_CAND(16, 8)
COPY_CAND(64, 3)
COPY_CAND(16, 4)
COPY_CAND(32, 2)
#endif

// Transpose: every warp its own ring of S input tiles (TR x TC) and 2 output tiles (TC x TR);
// lane 0 issues the copies, all 32 lanes transpose. A tile is loaded as TC/32 boxes of
// 32 columns x TR rows and stored as TR/32 boxes of 32 x TC (the 128-byte swizzle allows at
// most 32 floats along a box's inner dimension); each box is a swizzled sub-tile of its own.
// Tile t of the grid is (t / tiles_c, t % tiles_c).
template <int TR, int TC>
__device__ __forceinline__ void transpose_tile_2d(const float *src, float *dst) {
#pragma unroll
    for (int rb = 0; rb < TR / T; ++rb)
#pragma unroll
        for (int cb = 0; cb < TC / T; ++cb)
            // sub-tile (rb, cb) of the input lives at src[cb][TR][32] rows rb*32..; its
            // transpose goes to dst[rb][TC][32] rows cb*32..
            transpose_tile(src + cb * TR * T + rb * T * T, dst + rb * TC * T + cb * T * T, 0, 32);
}

template <int TR, int TC, int S, int NW, bool COLS = false>
__device__ __forceinline__ void transpose_ring(const CUtensorMap *in_map, const CUtensorMap *out_map,
                                               int tiles_r, int tiles_c) {
    constexpr int TILE = TR * TC;                          // floats
    constexpr int WARP_FLOATS = (S + 2) * TILE;
    uint8_t *base = smem_raw + ((1024 - (tma::smem_addr(smem_raw) & 1023)) & 1023);
    __shared__ uint64_t full[NW][S];
    const int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    float *in_t = reinterpret_cast<float *>(base) + w * WARP_FLOATS;
    float *out_t = in_t + S * TILE;
    const int tiles = tiles_r * tiles_c;
    const int gw = blockIdx.x * NW + w, nw = gridDim.x * NW;
    const int mine = tiles > gw ? (tiles - 1 - gw) / nw + 1 : 0;
    // tile t's corner: row-major over the tile grid, or down the columns (COLS)
    auto corner = [&](int t, int &r0, int &c0) {
        if (COLS) { r0 = (t % tiles_r) * TR; c0 = (t / tiles_r) * TC; }
        else      { r0 = (t / tiles_c) * TR; c0 = (t % tiles_c) * TC; }
    };
    auto load = [&](int j, int s) {                        // lane 0: tile j of this warp -> stage s
        int r0, c0;
        corner(gw + j * nw, r0, c0);
        tma::mbar_arrive_expect_tx(&full[w][s], TILE * 4);
#pragma unroll
        for (int cb = 0; cb < TC / T; ++cb)
            tma::load_2d(in_t + s * TILE + cb * TR * T, in_map, &full[w][s], c0 + cb * T, r0);
    };
    if (lane == 0) {
        for (int s = 0; s < S; ++s) tma::mbar_init(&full[w][s], 1);
        tma::fence_barrier_init();
        for (int j = 0; j < S && j < mine; ++j) load(j, j);
    }
    __syncwarp();
    for (int j = 0; j < mine; ++j) {
        const int s = j % S, o = j & 1, t = gw + j * nw;
        tma::mbar_wait(&full[w][s], (j / S) & 1);
        if (lane == 0 && j >= 2) tma::store_wait_read<1>();   // out tile o: tile j - 2's store done
        __syncwarp();
        transpose_tile_2d<TR, TC>(in_t + s * TILE, out_t + o * TILE);
        tma::fence_async_shared();
        __syncwarp();
        if (lane == 0) {
            int r0, c0;
            corner(t, r0, c0);
#pragma unroll
            for (int rb = 0; rb < TR / T; ++rb)
                tma::store_2d(out_map, out_t + o * TILE + rb * TC * T, r0 + rb * T, c0);
            tma::store_commit();
            if (j + S < mine) load(j + S, s);               // this stage was read by all lanes
        }
    }
    if (lane == 0) tma::store_wait_all();
}

// v3: 32 x 64 tiles walked down the columns, 4 warps of 4 input stages (48 KB a warp); the
// sweep's fastest ring (.notes/day44_sweep_results.md)
extern "C" __global__ void __launch_bounds__(128)
transpose_v3(const CUtensorMap *__restrict__ in_map, const CUtensorMap *__restrict__ out_map,
             int tiles_r, int tiles_c) {
    transpose_ring<32, 64, 4, 4, true>(in_map, out_map, tiles_r, tiles_c);
}

#ifdef DAY44_SWEEP
// candidates for .notes/day44_sweep.py: tile TRxTC, S input stages, NW warps (192 KB or less)
#define CAND(TR, TC, S, NW, COLS)                                                              \
    extern "C" __global__ void __launch_bounds__(NW * 32)                                      \
    transpose_v3_t##TR##x##TC##_s##S##_w##NW##_c##COLS(const CUtensorMap *__restrict__ in_map, \
                                             const CUtensorMap *__restrict__ out_map,           \
                                             int tiles_r, int tiles_c) {                        \
        transpose_ring<TR, TC, S, NW, COLS>(in_map, out_map, tiles_r, tiles_c);                 \
    }
CAND(32, 32, 4, 8, 0)
CAND(32, 32, 4, 8, 1)
CAND(64, 32, 4, 4, 0)
CAND(64, 32, 4, 4, 1)
CAND(32, 64, 4, 4, 1)
CAND(64, 64, 2, 3, 1)
CAND(32, 32, 2, 4, 1)
CAND(64, 32, 2, 4, 1)
#endif
