// Day 49: bias, GELU and the residual fused into the GEMM epilogue (GPT-2's MLP in bf16).
//
//   fc1:  h = gelu(x W1^T + b1)       x [T, C], W1 [4C, C], b1 [4C]  ->  h [T, 4C]
//   fc2:  y = h W2^T + b2 + r         h [T, 4C], W2 [C, 4C], b2 [C], r [T, C]  ->  y [T, C]
//
// bf16 in and out, fp32 accumulation; GELU is GPT-2's tanh form, evaluated in fp32 on the
// accumulators as u sigmoid(2z) = u / (1 + exp(-2z)), z = sqrt(2/pi) (u + 0.044715 u^3) (the same
// function: 0.5 (1 + tanh z) = sigmoid(2z)). Both GEMMs are day 45's warp-specialised kernel
// (common/cuda/wgmma_gemm.cuh: a TMA producer warpgroup, a 4-stage mbarrier ring, two wgmma
// consumer warpgroups, persistent blocks); what changes today is only the EPILOGUE, the code that
// runs on a tile's accumulators after its last k-block.
//
// Build alone (sm_90a):
//   nvcc -gencode=arch=compute_90a,code=sm_90a -I ../../common/cuda -cubin -Xptxas -v kernel.cu
//
// Versions (each runs fc1 then fc2):
//   v1  unfused: the plain GEMM stores x W1^T (bf16); bias_gelu_v1 reads it back, adds b1, applies
//       GELU, writes h; the GEMM stores h W2^T; bias_residual_v1 adds b2 and r. Four kernels, and
//       the [T, 4C] pre-activation makes a round trip through memory.
//   v2  fused into the register -> global store: each consumer thread adds the bias (and the
//       residual, loaded beside its own outputs), applies GELU in fp32, rounds once and stores
//       bf16 pairs straight from the accumulator layout (day 45's store). Two kernels.
//   v3  fused, stored through shared memory and TMA: each consumer warpgroup writes its 64 x 256
//       tile as four 64 x 64 boxes into 128-byte-swizzled staging buffers (conflict-free) and
//       one thread hands each box to the copy engine (cp.async.bulk.tensor, shared -> global):
//       full 128-byte rows, edges clipped by the tensor map, and the consumer goes on to its next
//       tile while the copy engine drains the stores.
//   v4  v3 with stmatrix (one instruction stores four 8x8 blocks of the accumulator layout) and
//       a tile per layer: fc2 (N = C: few column tiles) runs 128 x 128 tiles when they fill the
//       last wave better than 128 x 256 (the host decides from the tile counts).
//   v5  v4's epilogue on the ping-pong GEMM (wsgemm::run_pingpong): each consumer warpgroup owns
//       a whole 128 x 128 tile and the two take turns on the tensor cores, so one warpgroup's
//       bias / GELU / staging / stores run under the other's wgmma.
// Sweep candidates (.notes/day49_sweep.py): fc1_s3b4 (3 stages, four staging boxes per
// warpgroup), fc1_bn128, fc2_bn256, fc2_sk (fc2 by day 48's stream-K, fused epilogue); v5's
// fc1_v5_b4 (5 stages, four boxes a warpgroup), fc1_v5_64 / fc2_v5_64 (64 x 256 tiles),
// fc1_v5_c2 / fc2_v5_c2 (clusters of two, B multicast), fc1_v5_direct (v2's register stores),
// gemm_v5 (the ping-pong GEMM with no op: the GEMM alone).
#include <cuda_bf16.h>
#include <cstdint>

#include "tma.cuh"
#include "wgmma_gemm.cuh"

using namespace cuda100;
namespace W = cuda100::wsgemm;
typedef __nv_bfloat16 bf16;

constexpr int GROUP = 8;      // grouped tile order (day 45)
constexpr int INFLIGHT = 2;   // two k-blocks of wgmma in flight
constexpr int BOX = 64;       // a TMA store box: 64 rows x 64 columns of bf16 (128-byte rows)
constexpr int BOX_BYTES = BOX * BOX * 2;

#define MAPS const CUtensorMap *__restrict__ amap, const CUtensorMap *__restrict__ bmap

// ---------------------------------------------------------------------------------------------
// The element-wise parts, in fp32

// GPT-2's GELU: 0.5 u (1 + tanh z) = u / (1 + e^(-2z)); for very negative u, e^(-2z) overflows
// to inf and __fdividef gives -0 (the limit); for large u it gives u.
__device__ __forceinline__ float gelu(float u) {
    const float z = 0.7978845608028654f * fmaf(0.044715f * u, u * u, u);
    return __fdividef(u, 1.f + __expf(-2.f * z));
}

__device__ __forceinline__ float2 bias_pair(const bf16 *bias, int col, bool both) {
    if (both) return __bfloat1622float2(__ldg(reinterpret_cast<const __nv_bfloat162 *>(bias + col)));
    return make_float2(__bfloat162float(bias[col]), 0.f);
}

// fc1's epilogue op on a pair of columns (col, col + 1; `both` = col + 1 < N).
struct BiasGelu {
    const bf16 *bias;
    __device__ __forceinline__ void operator()(float &v0, float &v1, int, int col, bool both) const {
        const float2 b = bias_pair(bias, col, both);
        v0 = gelu(v0 + b.x);
        v1 = gelu(v1 + b.y);
    }
};

// fc2's: + b2 + r[row, col]. Residual pairs are one 4-byte load when N is even.
struct BiasResidual {
    const bf16 *bias;
    const bf16 *res;
    int N;
    __device__ __forceinline__ void operator()(float &v0, float &v1, int row, int col, bool both) const {
        const float2 b = bias_pair(bias, col, both);
        const bf16 *r = res + (size_t)row * N + col;
        float2 rv;
        if (both && N % 2 == 0) rv = __bfloat1622float2(__ldg(reinterpret_cast<const __nv_bfloat162 *>(r)));
        else rv = make_float2(__bfloat162float(r[0]), both ? __bfloat162float(r[1]) : 0.f);
        v0 += b.x + rv.x;
        v1 += b.y + rv.y;
    }
};

// ---------------------------------------------------------------------------------------------
// v1: unfused. The GEMM is the plain one (whole tiles, bf16 store); then element-wise kernels,
// eight bf16 (16 bytes) a thread and step: N % 8 == 0 (the host requires C % 8 == 0), so every
// group of eight lies in one row and starts 16-byte aligned, in the data and in the bias.
extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
gemm_v1(MAPS, bf16 *C, int M, int N, int K) {
    const W::Geometry g = W::Geometry::make(M, N, K, 256, 1);
    W::DataParallel<GROUP> sched(g, blockIdx.x, gridDim.x, 0);
    W::StoreBF16<256> epi{C, M, N};
    W::run<256, 4, 1, INFLIGHT>(amap, bmap, sched, epi);
}

union Pack8 {
    uint4 u;
    __nv_bfloat162 h[4];
};

// h = gelu(u + bias[col]) over [M, N]
extern "C" __global__ void bias_gelu_v1(const bf16 *__restrict__ u, const bf16 *__restrict__ bias,
                                        bf16 *__restrict__ h, int M, int N) {
    const long long groups = (long long)M * N / 8;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < groups;
         i += (long long)gridDim.x * blockDim.x) {
        const int col = (int)((8 * i) % N);
        Pack8 v, b, o;
        v.u = __ldcs(reinterpret_cast<const uint4 *>(u) + i);
        b.u = __ldg(reinterpret_cast<const uint4 *>(bias + col));
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float2 x = __bfloat1622float2(v.h[q]), c = __bfloat1622float2(b.h[q]);
            o.h[q] = __floats2bfloat162_rn(gelu(x.x + c.x), gelu(x.y + c.y));
        }
        reinterpret_cast<uint4 *>(h)[i] = o.u;
    }
}

// y = u + bias[col] + r over [M, N]
extern "C" __global__ void bias_residual_v1(const bf16 *__restrict__ u, const bf16 *__restrict__ bias,
                                            const bf16 *__restrict__ r, bf16 *__restrict__ y,
                                            int M, int N) {
    const long long groups = (long long)M * N / 8;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < groups;
         i += (long long)gridDim.x * blockDim.x) {
        const int col = (int)((8 * i) % N);
        Pack8 v, b, rr, o;
        v.u = __ldcs(reinterpret_cast<const uint4 *>(u) + i);
        b.u = __ldg(reinterpret_cast<const uint4 *>(bias + col));
        rr.u = __ldcs(reinterpret_cast<const uint4 *>(r) + i);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const float2 x = __bfloat1622float2(v.h[q]), c = __bfloat1622float2(b.h[q]),
                         z = __bfloat1622float2(rr.h[q]);
            o.h[q] = __floats2bfloat162_rn(x.x + c.x + z.x, x.y + c.y + z.y);
        }
        reinterpret_cast<uint4 *>(y)[i] = o.u;
    }
}

// ---------------------------------------------------------------------------------------------
// v2: the op applied in the register -> global store (wsgemm::store_bf16 with an op).
template <int BN, class Op>
struct StoreDirect {
    bf16 *C;
    Op op;
    int M, N;
    __device__ void begin(const W::Unit &, int, uint8_t *) {}
    __device__ void operator()(const W::Unit &u, float (&d)[BN / 2], int c, uint8_t *) {
        W::store_bf16<BN>(d, C, M, N, u.tm * W::BM + 64 * c, u.tn * BN, op);
    }
    __device__ void end(int, uint8_t *) {}
};

extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
fc1_v2(MAPS, bf16 *h, const bf16 *b1, int M, int N, int K) {
    const W::Geometry g = W::Geometry::make(M, N, K, 256, 1);
    W::DataParallel<GROUP> sched(g, blockIdx.x, gridDim.x, 0);
    StoreDirect<256, BiasGelu> epi{h, {b1}, M, N};
    W::run<256, 4, 1, INFLIGHT>(amap, bmap, sched, epi);
}

extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
fc2_v2(MAPS, bf16 *y, const bf16 *b2, const bf16 *r, int M, int N, int K) {
    const W::Geometry g = W::Geometry::make(M, N, K, 256, 1);
    W::DataParallel<GROUP> sched(g, blockIdx.x, gridDim.x, 0);
    StoreDirect<256, BiasResidual> epi{y, {b2, r, N}, M, N};
    W::run<256, 4, 1, INFLIGHT>(amap, bmap, sched, epi);
}

// ---------------------------------------------------------------------------------------------
// v3 / v4: the op, then shared memory, then TMA stores.
//
// Consumer warpgroup c owns NBUF staging buffers of one 64 x 64 box each (8 KB: 64 rows of 128
// bytes, 128-byte swizzle: the 16-byte chunk k of row r sits at chunk k ^ (r % 8), the layout the
// output's tensor map is made with). Box jb of its 64 x BN tile holds columns 64 jb .. 64 jb + 63,
// i.e. the accumulator blocks j = 8 jb .. 8 jb + 7: column 8 j' + 2 (lane % 4) of the box is
// chunk j', 4 (lane % 4) bytes in. The warpgroup's boxes, counted across its tiles, take the
// buffers in turn (box n: buffer n % NBUF), so the store that last used a buffer is the one
// committed NBUF boxes earlier. Per box:
//   1. the warpgroup's leader waits until at most NBUF - 1 of its earlier box stores still read
//      shared memory (so the one NBUF boxes back is done with this buffer), then bar.sync: the
//      buffer is free;
//   2. every thread writes its values (bf16 pairs) into the box; fence.proxy.async makes the
//      writes visible to the copy engine; bar.sync;
//   3. the leader issues the box's TMA store and commits it as one bulk group.
// The stores are never waited for in the tile: the warpgroup goes on to its next tile; only the
// block's end waits for all of them. Rows and columns past M and N are clipped by the tensor map
// (the op is not applied to them: it would read past the bias and the residual), and boxes that
// lie entirely outside are skipped.
__device__ __forceinline__ void warpgroup_sync(int c) {
    asm volatile("bar.sync %0, 128;" ::"r"(2 + c) : "memory");   // ids 2, 3 (1: both consumers)
}

__device__ __forceinline__ uint32_t pack_bf16(float a, float b) {
    __nv_bfloat162 v = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<uint32_t *>(&v);
}

__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t a, uint32_t b, uint32_t c,
                                            uint32_t d) {
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
                 ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}

template <int BN, int NBUF, bool STMATRIX, class Op>
struct StoreTma {
    const CUtensorMap *cmap;
    Op op;
    int M, N;
    int boxes = 0;            // boxes this warpgroup has stored so far (all threads count alike)
    __device__ void begin(const W::Unit &, int, uint8_t *) {}
    __device__ void operator()(const W::Unit &u, float (&d)[BN / 2], int c, uint8_t *smem) {
        frag(d, u.tm * W::BM + 64 * c, u.tn * BN, c, smem);
    }
    // The op on the accumulator blocks j0 .. j1 - 1 (columns col0 + 8 j0 .. col0 + 8 j1 - 1).
    __device__ __forceinline__ void apply(float (&d)[BN / 2], int row0, int col0, int j0, int j1) {
        int r0, c0;
        W::frag_origin(r0, c0);
#pragma unroll
        for (int j = j0; j < j1; ++j) {
            const int col = col0 + 8 * j + c0;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const int row = row0 + r0 + 8 * h;
                if (row < M && col < N) op(d[4 * j + 2 * h], d[4 * j + 2 * h + 1], row, col, col + 1 < N);
            }
        }
    }
    // One 64 x BN accumulator fragment whose rows start at row0 and columns at col0, by
    // consumer warpgroup c (its staging buffers; v5 calls it once per fragment of its tile).
    // OP_PER_BOX: the op runs box by box, just before each box is staged (v5: fewer values in
    // flight at once; v3 / v4 apply it to the whole fragment first).
    template <bool OP_PER_BOX = false>
    __device__ __forceinline__ void frag(float (&d)[BN / 2], int row0, int col0, int c,
                                         uint8_t *smem) {
        const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
        const bool leader = t == 0;
        int r0, c0;
        W::frag_origin(r0, c0);
        if (row0 >= M) return;                         // a partial tile's empty fragment
        if constexpr (!OP_PER_BOX) apply(d, row0, col0, 0, BN / 8);
        uint8_t *bufs = smem + c * NBUF * BOX_BYTES;
#pragma unroll
        for (int jb = 0; jb < BN / BOX; ++jb) {
            if (col0 + BOX * jb >= N) break;           // the same for the whole warpgroup
            if constexpr (OP_PER_BOX) apply(d, row0, col0, 8 * jb, 8 * jb + 8);
            uint8_t *buf = bufs + (boxes++ % NBUF) * BOX_BYTES;
            if (leader) tma::store_wait_read<NBUF - 1>();
            warpgroup_sync(c);
            if constexpr (STMATRIX) {
                // matrix q of an x4 = (block j + q / 2, row half q % 2); lane l gives the address
                // of row l % 8 of matrix l / 8
                const int q = lane / 8, rr = lane % 8;
                const int row = 16 * warp + 8 * (q % 2) + rr;
                const uint32_t base = tma::smem_addr(buf) + row * 128;
#pragma unroll
                for (int jj = 0; jj < 8; jj += 2) {
                    const int j = 8 * jb + jj;
                    const uint32_t addr = base + (((jj + q / 2) ^ (row % 8)) << 4);
                    stmatrix_x4(addr, pack_bf16(d[4 * j], d[4 * j + 1]),
                                pack_bf16(d[4 * j + 2], d[4 * j + 3]),
                                pack_bf16(d[4 * j + 4], d[4 * j + 5]),
                                pack_bf16(d[4 * j + 6], d[4 * j + 7]));
                }
            } else {
#pragma unroll
                for (int jj = 0; jj < 8; ++jj) {
                    const int j = 8 * jb + jj;
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const int row = r0 + 8 * h;    // row % 8 == lane / 4
                        uint8_t *p = buf + row * 128 + ((jj ^ (row % 8)) << 4) + 2 * c0;
                        *reinterpret_cast<uint32_t *>(p) = pack_bf16(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
                    }
                }
            }
            tma::fence_async_shared();
            warpgroup_sync(c);
            if (leader) {
                tma::store_2d(cmap, buf, col0 + BOX * jb, row0);
                tma::store_commit();
            }
        }
    }
    // the staging buffers must outlive the copy engine's reads, and the block's stores must land
    __device__ void end(int, uint8_t *) {
        if (threadIdx.x % 128 == 0) tma::store_wait_all();
    }
};

template <int BN, int NBUF>
constexpr int staging_bytes() { return 2 * NBUF * BOX_BYTES; }

// Whole tiles (persistent, grouped order), epilogue through TMA stores.
template <int BN, int STAGES, int NBUF, bool STM, class Op>
__device__ __forceinline__ void gemm_tma(MAPS, const CUtensorMap *cmap, Op op, int M, int N, int K) {
    const W::Geometry g = W::Geometry::make(M, N, K, BN, 1);
    W::DataParallel<GROUP> sched(g, blockIdx.x, gridDim.x, 0);
    StoreTma<BN, NBUF, STM, Op> epi{cmap, op, M, N};
    W::run<BN, STAGES, 1, INFLIGHT>(amap, bmap, sched, epi);
}

// Day 48's stream-K (hybrid plan from the host), the fused epilogue runs on finished tiles.
template <int BN, int STAGES, int NBUF, bool STM, class Op>
__device__ __forceinline__ void gemm_tma_sk(MAPS, const CUtensorMap *cmap, Op op, float *ws,
                                            int *flags, int M, int N, int K, int dp_tiles,
                                            int sk_blocks) {
    const W::Geometry g = W::Geometry::make(M, N, K, BN, 1);
    const W::StreamKPlan plan{g.tiles(), g.nk, dp_tiles, min(sk_blocks, (int)gridDim.x)};
    W::StreamK<GROUP> sched(g, plan, blockIdx.x, gridDim.x, 0);
    W::StreamKFixup<BN, StoreTma<BN, NBUF, STM, Op>> epi{{cmap, op, M, N}, ws, flags, plan, 0, 1,
                                                         g.tiles_m};
    W::run<BN, STAGES, 1, INFLIGHT>(amap, bmap, sched, epi);
}

#define FC1_ARGS MAPS, const CUtensorMap *__restrict__ hmap, const bf16 *b1, int M, int N, int K
#define FC2_ARGS MAPS, const CUtensorMap *__restrict__ ymap, const bf16 *b2, const bf16 *r, \
                 int M, int N, int K

extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_v3(FC1_ARGS) {
    gemm_tma<256, 4, 2, false>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc2_v3(FC2_ARGS) {
    gemm_tma<256, 4, 2, false>(amap, bmap, ymap, BiasResidual{b2, r, N}, M, N, K);
}

// v4: stmatrix; fc2 on 128 x 128 tiles (6 stages of 32 KB) or 128 x 256 (host's choice)
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_v4(FC1_ARGS) {
    gemm_tma<256, 4, 2, true>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc2_v4_bn128(FC2_ARGS) {
    gemm_tma<128, 6, 2, true>(amap, bmap, ymap, BiasResidual{b2, r, N}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc2_v4_bn256(FC2_ARGS) {
    gemm_tma<256, 4, 2, true>(amap, bmap, ymap, BiasResidual{b2, r, N}, M, N, K);
}

// sweep candidates
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_s3b4(FC1_ARGS) {
    gemm_tma<256, 3, 4, true>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_bn128(FC1_ARGS) {
    gemm_tma<128, 6, 2, true>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
fc2_sk(FC2_ARGS, float *ws, int *flags, int dp_tiles, int sk_blocks) {
    gemm_tma_sk<256, 4, 2, true>(amap, bmap, ymap, BiasResidual{b2, r, N}, ws, flags, M, N, K,
                                 dp_tiles, sk_blocks);
}

// ---------------------------------------------------------------------------------------------
// v5: the same fused epilogue on the ping-pong GEMM (wsgemm::run_pingpong). Each consumer
// warpgroup owns a whole PM x PN tile (128 x 128: two m64n128 fragments, 128 accumulators a
// thread as before) and the two take turns on the tensor cores, so one warpgroup's bias, GELU,
// staging and TMA stores run while the other's wgmma do. The epilogue is v4's (stmatrix into the
// warpgroup's own swizzled boxes, one TMA store a box), called once per 64-row fragment.
template <int PM, int PN, int NBUF, class Op>
struct PingPongStoreTma {
    StoreTma<PN, NBUF, true, Op> s;
    __device__ void begin(const W::Unit &, int, uint8_t *) {}
    __device__ void operator()(const W::Unit &u, float (&d)[PM / 64][PN / 2], int c, uint8_t *smem) {
#pragma unroll
        for (int f = 0; f < PM / 64; ++f) s.template frag<false>(d[f], u.tm * PM + 64 * f, u.tn * PN, c, smem);
    }
    __device__ void end(int c, uint8_t *smem) { s.end(c, smem); }
};

// The kernel's parameters; the schedule (whole tiles, persistent, grouped order) and the
// epilogue are built inside each warpgroup's own code (run_pingpong's note on setmaxnreg).
template <int PM, int PN, int NBUF, int CLUSTER, class Op>
struct TmaSetup {
    const CUtensorMap *cmap;
    Op op;
    int M, N, K;
    __device__ W::DataParallel<GROUP> schedule() const {
        return W::DataParallel<GROUP>(W::Geometry::make(M, N, K, PN, CLUSTER, PM),
                                      blockIdx.x / CLUSTER, gridDim.x / CLUSTER,
                                      W::cluster_rank<CLUSTER>());
    }
    __device__ PingPongStoreTma<PM, PN, NBUF, Op> epilogue() const { return {{cmap, op, M, N}}; }
};

// the sweep's register-store candidate: v2's epilogue on the ping-pong GEMM
template <int PM, int PN, int CLUSTER, class Op>
struct DirectSetup {
    bf16 *out;
    Op op;
    int M, N, K;
    __device__ W::DataParallel<GROUP> schedule() const {
        return W::DataParallel<GROUP>(W::Geometry::make(M, N, K, PN, CLUSTER, PM),
                                      blockIdx.x / CLUSTER, gridDim.x / CLUSTER,
                                      W::cluster_rank<CLUSTER>());
    }
    __device__ W::PingPongStoreBF16<PM, PN, Op> epilogue() const { return {out, M, N, op}; }
};

template <int PM, int PN, int STAGES, int NBUF, int CLUSTER, class Op>
__device__ __forceinline__ void pingpong_tma(MAPS, const CUtensorMap *cmap, Op op, int M, int N,
                                             int K) {
    const TmaSetup<PM, PN, NBUF, CLUSTER, Op> setup{cmap, op, M, N, K};
    W::run_pingpong<PM, PN, STAGES, CLUSTER, INFLIGHT>(amap, bmap, setup);
}

// v5: 128 x 128 tiles, a 6-stage ring of 32 KB, two 8 KB staging boxes a warpgroup (224 KB)
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_v5(FC1_ARGS) {
    pingpong_tma<128, 128, 6, 2, 1>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc2_v5(FC2_ARGS) {
    pingpong_tma<128, 128, 6, 2, 1>(amap, bmap, ymap, BiasResidual{b2, r, N}, M, N, K);
}

// sweep candidates: b4 (5 stages, four boxes a warpgroup: a whole 128 x 128 tile staged without
// waiting for a buffer), 64 x 256 tiles (4 stages of 40 KB, four boxes), clusters of two along M
// sharing B, v2's register stores (7 stages), and the plain GEMM on the same kernel (no op:
// what the epilogue costs over the GEMM alone)
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_v5_b4(FC1_ARGS) {
    pingpong_tma<128, 128, 5, 4, 1>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc1_v5_64(FC1_ARGS) {
    pingpong_tma<64, 256, 4, 4, 1>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(W::THREADS, 1)
fc1_v5_c2(FC1_ARGS) {
    pingpong_tma<128, 128, 6, 2, 2>(amap, bmap, hmap, BiasGelu{b1}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
fc1_v5_direct(MAPS, bf16 *h, const bf16 *b1, int M, int N, int K) {
    const DirectSetup<128, 128, 1, BiasGelu> setup{h, BiasGelu{b1}, M, N, K};
    W::run_pingpong<128, 128, 7, 1, INFLIGHT>(amap, bmap, setup);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1) fc2_v5_64(FC2_ARGS) {
    pingpong_tma<64, 256, 4, 4, 1>(amap, bmap, ymap, BiasResidual{b2, r, N}, M, N, K);
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(W::THREADS, 1)
fc2_v5_c2(FC2_ARGS) {
    pingpong_tma<128, 128, 6, 2, 2>(amap, bmap, ymap, BiasResidual{b2, r, N}, M, N, K);
}
extern "C" __global__ void __launch_bounds__(W::THREADS, 1)
gemm_v5(MAPS, const CUtensorMap *__restrict__ cmap, int M, int N, int K) {
    pingpong_tma<128, 128, 6, 2, 1>(amap, bmap, cmap, W::Identity{}, M, N, K);
}
