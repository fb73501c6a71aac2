// Day 48: split-K and stream-K, for GEMMs whose tiles do not fill the GPU.
//
//   C[M, N] = A[M, K] . B[N, K]^T      bf16 in (both K-major), fp32 accumulate, bf16 out
//
// Day 45's kernel gives one 128 x 256 output tile to one SM. At M = N = 1024 that is 32 tiles
// for 132 SMs: 100 SMs idle while 32 walk a K of 65536. The cure is to cut the work along K as
// well: several SMs share a tile, each accumulates part of its K range, and the partial sums
// are added at the end. The versions differ in how the work is cut and where the partial sums
// meet.
//
// Everything here is built on common/cuda/wgmma_gemm.cuh: day 45's warp-specialised block
// (a TMA producer warpgroup, a 4-stage mbarrier ring, two wgmma consumer warpgroups,
// persistent blocks) with the work list (a Schedule: which tile and which k-blocks [kb0, kb1)
// of it) and the end of a work unit (an Epilogue) as template arguments. The split-K and
// stream-K schedules and fix-ups live in that header too (day 49 reuses them); read it beside
// this file.
//
// Build alone (sm_90a: wgmma, setmaxnreg):
//   nvcc -gencode=arch=compute_90a,code=sm_90a -I ../../common/cuda -cubin -Xptxas -v kernel.cu
//
// Versions:
//   v1  plain tiling: persistent blocks, whole tiles in day 45's grouped order (day 45's v5
//       structure); at most `tiles` SMs work
//   v2  split-K: S slices of K per tile (S from tiles vs SMs, chosen by the host), every unit
//       (tile, slice) writes fp32 partials to a row-major [S, M, N] workspace, and a second
//       kernel adds the S slices and rounds to bf16
//   v3  split-K reduced inside the GEMM: each slice writes its partial tile; a per-tile counter
//       tells the last slice to finish, which adds all S partials in slice order (the same
//       bits whichever slice is last) and stores bf16
//   v4  stream-K: every block takes an equal share of all (tile, k-block) iterations (after
//       whole-tile waves when there are more than two waves of tiles: the hybrid); a tile
//       shared by consecutive blocks is finished by the block that did its k-block 0, which
//       waits for the others' flags and adds their partials in block order
//   v5  ping-pong consumers (wsgemm::run_pingpong): each consumer warpgroup owns a whole
//       128 x 128 tile and the two take turns on the tensor cores, so one warpgroup's epilogue
//       (bf16 store, or v3's split-K fix-up) runs while the other's wgmma do; 128 x 128 tiles
//       also cut the wave quantization (8192 x 3072 x 768: 384 tiles, 2.91 a block); v3's
//       split-K (the host's S) where tiles are few
// Sweep candidates (.notes/day48_sweep.py): gemm_v1_c2 and gemm_v3_c2, v1 and v3 in clusters
// of two blocks along M with B multicast (day 45's v6); gemm_v5_64 (v5 on 64 x 256 tiles) and
// gemm_v5_c2 (v5 in clusters of two); the split count and the stream-K hybrid are launch
// parameters.
#include <cuda_bf16.h>
#include <cstdint>

#include "wgmma_gemm.cuh"

using namespace cuda100;
namespace W = cuda100::wsgemm;
typedef __nv_bfloat16 bf16;

constexpr int BN = 256;      // 128 x 256 tiles: two consumer warpgroups of m64n256k16
constexpr int STAGES = 4;    // 4 x 48 KB ring
constexpr int GROUP = 8;     // grouped tile order (day 45)
constexpr int INFLIGHT = 2;  // two k-blocks of wgmma in flight (day 45's v5)

#define MAPS const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap

// ---------------------------------------------------------------------------------------------
// v1: plain tiling. Persistent blocks walk whole tiles: block b does tiles b, b + grid, ...
template <int CLUSTER>
__device__ __forceinline__ void plain(MAPS, bf16 *C, int M, int N, int K) {
    const W::Geometry g = W::Geometry::make(M, N, K, BN, CLUSTER);
    W::DataParallel<GROUP> sched(g, blockIdx.x / CLUSTER, gridDim.x / CLUSTER,
                                 W::cluster_rank<CLUSTER>());
    W::StoreBF16<BN> epi{C, M, N};
    W::run<BN, STAGES, CLUSTER, INFLIGHT>(amap, bmap, sched, epi);
}

extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
gemm_v1(MAPS, bf16 *C, int M, int N, int K) {
    plain<1>(amap, bmap, C, M, N, K);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(W::THREADS, 1)
gemm_v1_c2(MAPS, bf16 *C, int M, int N, int K) {
    plain<2>(amap, bmap, C, M, N, K);
}

// ---------------------------------------------------------------------------------------------
// v2: split-K with a separate reduction. Unit (tile, slice s) stores its fp32 accumulators at
// ws[s, row, col] (row-major [S, M, N], bounds checked: only the real M x N elements); float2
// stores when N is even (each pair 8-byte aligned), one float at a time otherwise.
struct StoreSlice {
    float *ws;
    int M, N;
    __device__ void begin(const W::Unit &, int, uint8_t *) {}
    __device__ void operator()(const W::Unit &u, float (&d)[BN / 2], int c, uint8_t *) {
        int r0, c0;
        W::frag_origin(r0, c0);
        const int row0 = u.tm * W::BM + 64 * c + r0, col0 = u.tn * BN + c0;
        float *out = ws + (size_t)u.slice * M * N;
        const bool pairs = (N % 2) == 0;
#pragma unroll
        for (int j = 0; j < BN / 8; ++j) {
            const int col = col0 + 8 * j;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + 8 * h;
                if (row >= M || col >= N) continue;
                float *p = out + (size_t)row * N + col;
                if (pairs) {
                    __stcg(reinterpret_cast<float2 *>(p), make_float2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]));
                } else {
                    __stcg(p, d[4 * j + 2 * h]);
                    if (col + 1 < N) __stcg(p + 1, d[4 * j + 2 * h + 1]);
                }
            }
        }
    }
    __device__ void end(int, uint8_t *) {}
};

extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
gemm_v2(MAPS, float *ws, int M, int N, int K, int slices) {
    const W::Geometry g = W::Geometry::make(M, N, K, BN, 1);
    W::SplitK<GROUP> sched(g, slices, blockIdx.x, gridDim.x, 0);
    StoreSlice epi{ws, M, N};
    W::run<BN, STAGES, 1, INFLIGHT>(amap, bmap, sched, epi);
}

// C = bf16(ws[0] + ws[1] + ... + ws[S-1]), element-wise over the M x N elements (in slice
// order). Four at a time when M N % 4 == 0 (every slice then starts 16-byte aligned): float4
// loads, one 8-byte store of four bf16.
extern "C" __global__ void splitk_reduce_v2(const float *__restrict__ ws, bf16 *__restrict__ C,
                                            int slices, long long mn) {
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (mn % 4 == 0) {
        const float4 *w4 = reinterpret_cast<const float4 *>(ws);
        const long long n4 = mn / 4;
        for (long long i = first; i < n4; i += stride) {
            float4 a = __ldcs(w4 + i);
            for (int s = 1; s < slices; ++s) {
                const float4 b = __ldcs(w4 + s * n4 + i);
                a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
            }
            __nv_bfloat162 lo = __floats2bfloat162_rn(a.x, a.y), hi = __floats2bfloat162_rn(a.z, a.w);
            uint2 v;
            v.x = *reinterpret_cast<uint32_t *>(&lo);
            v.y = *reinterpret_cast<uint32_t *>(&hi);
            *reinterpret_cast<uint2 *>(C + 4 * i) = v;
        }
    } else {
        for (long long i = first; i < mn; i += stride) {
            float a = __ldcs(ws + i);
            for (int s = 1; s < slices; ++s) a += __ldcs(ws + s * mn + i);
            C[i] = __float2bfloat16_rn(a);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// v3: split-K, the last slice of each tile adds the partials (wsgemm::SplitKFixup). ws holds
// S x tiles_m x tiles_n partial tiles of 128 x 256 floats; sem one counter a tile (zero before
// the first launch; the last slice resets it).
template <int CLUSTER>
__device__ __forceinline__ void splitk_fused(MAPS, bf16 *C, float *ws, int *sem, int M, int N,
                                             int K, int slices) {
    const W::Geometry g = W::Geometry::make(M, N, K, BN, CLUSTER);
    W::SplitK<GROUP> sched(g, slices, blockIdx.x / CLUSTER, gridDim.x / CLUSTER,
                           W::cluster_rank<CLUSTER>());
    W::SplitKFixup<BN, W::StoreBF16<BN>> epi{{C, M, N}, ws, sem, sched.slices, g.tiles_m, g.tiles_n};
    W::run<BN, STAGES, CLUSTER, INFLIGHT>(amap, bmap, sched, epi);
}

extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
gemm_v3(MAPS, bf16 *C, float *ws, int *sem, int M, int N, int K, int slices) {
    splitk_fused<1>(amap, bmap, C, ws, sem, M, N, K, slices);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(W::THREADS, 1)
gemm_v3_c2(MAPS, bf16 *C, float *ws, int *sem, int M, int N, int K, int slices) {
    splitk_fused<2>(amap, bmap, C, ws, sem, M, N, K, slices);
}

// ---------------------------------------------------------------------------------------------
// v4: stream-K (wsgemm::StreamK + StreamKFixup). The first dp_tiles tiles are whole tiles
// round-robin (0 for pure stream-K); the iterations of the rest are split evenly over
// sk_blocks blocks. ws: one 128 x 256 float slot per block; flags: one int per block (zero
// before the first launch; each owner clears the flags it consumed). The grid must be resident
// all at once (at most one block per SM): an owner spins on flags of later blocks.
extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
gemm_v4(MAPS, bf16 *C, float *ws, int *flags, int M, int N, int K, int dp_tiles, int sk_blocks) {
    const W::Geometry g = W::Geometry::make(M, N, K, BN, 1);
    // never more ranges than blocks: a range no block walks would be lost
    const W::StreamKPlan plan{g.tiles(), g.nk, dp_tiles, min(sk_blocks, (int)gridDim.x)};
    W::StreamK<GROUP> sched(g, plan, blockIdx.x, gridDim.x, 0);
    W::StreamKFixup<BN, W::StoreBF16<BN>> epi{{C, M, N}, ws, flags, plan, 0, 1, g.tiles_m};
    W::run<BN, STAGES, 1, INFLIGHT>(amap, bmap, sched, epi);
}

// ---------------------------------------------------------------------------------------------
// v5: ping-pong consumers (wsgemm::run_pingpong). Each consumer warpgroup owns a whole 128 x 128
// tile (two m64n128 fragments, 128 fp32 accumulators a thread as before) and the two take turns
// on the tensor cores: one runs its mainloop while the other runs its epilogue (store, or the
// split-K fix-up). The units are v3's (tile, slice) with S from the host (S = 1: whole tiles);
// the fix-up is v3's per-tile counter, per warpgroup (wsgemm::PingPongSplitKFixup). ws: S x
// tiles_m x tiles_n slots of 128 x 128 floats; sem one counter a tile (zero before the first
// launch). Nothing spins across blocks: any grid is safe.
template <int PM, int PN, int CLUSTER>
struct PingPongSetup {
    bf16 *C;
    float *ws;
    int *sem;
    int M, N, K, slices;
    __device__ W::Geometry geometry() const { return W::Geometry::make(M, N, K, PN, CLUSTER, PM); }
    __device__ W::SplitK<GROUP> schedule() const {
        return W::SplitK<GROUP>(geometry(), slices, blockIdx.x / CLUSTER, gridDim.x / CLUSTER,
                                W::cluster_rank<CLUSTER>());
    }
    __device__ W::PingPongSplitKFixup<PM, PN, W::PingPongStoreBF16<PM, PN>> epilogue() const {
        const W::Geometry g = geometry();
        return {{C, M, N}, ws, sem, W::clamp_slices(slices, g.nk), g.tiles_m, g.tiles_n};
    }
};

template <int PM, int PN, int STAGES_PP, int CLUSTER>
__device__ __forceinline__ void pingpong(MAPS, bf16 *C, float *ws, int *sem, int M, int N, int K,
                                         int slices) {
    const PingPongSetup<PM, PN, CLUSTER> setup{C, ws, sem, M, N, K, slices};
    W::run_pingpong<PM, PN, STAGES_PP, CLUSTER, INFLIGHT>(amap, bmap, setup);
}

#define V5_ARGS MAPS, bf16 *C, float *ws, int *sem, int M, int N, int K, int slices

// 128 x 128 tiles, a 6-stage ring of 32 KB (192 KB, as v1-v4's 4 x 48 KB)
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) gemm_v5(V5_ARGS) {
    pingpong<128, 128, 6, 1>(amap, bmap, C, ws, sem, M, N, K, slices);
}

// sweep candidates: 64 x 256 tiles (one m64n256 fragment; 5 stages of 40 KB), and 128 x 128
// tiles in clusters of two along M sharing B by multicast
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) gemm_v5_64(V5_ARGS) {
    pingpong<64, 256, 5, 1>(amap, bmap, C, ws, sem, M, N, K, slices);
}

extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(W::THREADS, 1)
gemm_v5_c2(V5_ARGS) {
    pingpong<128, 128, 6, 2>(amap, bmap, C, ws, sem, M, N, K, slices);
}

// ---------------------------------------------------------------------------------------------
// K not a multiple of 8: copy A and B into zero-padded [rows, K8] buffers first (timed with
// the GEMM; a tensor map's rows must be multiples of 16 bytes).
extern "C" __global__ void pad_k_v0(const bf16 *__restrict__ src, bf16 *__restrict__ dst,
                                    int rows, int K, int K8) {
    tma::pad_rows(src, dst, rows, K, K8);
}
