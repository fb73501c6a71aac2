// Day 54: cooperative groups. A row softmax whose long rows are split over several blocks:
// first through a grid-wide barrier, then through a thread-block CLUSTER whose blocks read each
// other's shared memory (distributed shared memory, Hopper).
//
//   y[r, j] = exp(x[r, j] - M_r) / S_r,   M_r = max_j x[r, j],   S_r = sum_j exp(x[r, j] - M_r)
//
// Split a row into P slices. Slice p alone gives its own (m_p, s_p) = (max, sum of exp(x - m_p));
// the row's (M, S) is the merge of the P pairs: M = max m_p, S = sum s_p exp(m_p - M). So each
// block reads its slice ONCE into registers, computes (m_p, s_p), the blocks of a row swap
// those 8 bytes, and each block writes its slice scaled by exp(m_t - M) / S: one read and one
// write of every element, the minimum, with a whole row's worth of on-chip storage spread over
// several SMs instead of one.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I common/cuda -cubin kernel.cu
// Run:               python run_day.py 54
// Launches: v1 is an ordinary launch; v2 needs a COOPERATIVE launch (grid.sync()), v3/v4 a
// launch with a cluster dimension: pycuda can make neither, common/launch.py makes both
// (cuLaunchCooperativeKernel / cuLaunchKernelEx through ctypes, on the same cubin).
//
// Versions (entry points carry the version, the cluster size C, threads T and float4 items I):
//   v1  one block of 1024 per row (day 5's layout): 8 float4 a thread in registers (32768
//       floats); the rest of a longer row is reduced online and read a second time: half of
//       a 65536-float row is read twice, and 64 rows keep only 64 of the SMs busy.
//   v2  grid-wide: a PERSISTENT grid (every block resident at once: cooperative launch) takes
//       whole rows per round, each row split over P blocks; a block writes its slice's (m, s)
//       to global memory, grid.sync(), then merges the P pairs of its row and writes. One read,
//       one write, but every round stops the whole GPU at a barrier: loads of round k+1 never
//       overlap the stores of round k.
//   v3  a cluster of 8 blocks per row (cooperative groups API): (m, s) in shared memory,
//       cluster.sync(), each warp reads the 8 pairs with cluster.map_shared_rank() (DSMEM),
//       merges them, writes; a second cluster.sync() keeps every block alive until the others
//       have read its shared memory. Only 8 blocks wait for each other; other clusters stream.
//   v4  tuned: the cluster size follows the row (1-16 blocks; 16 is a non-portable size, the
//       launch opts in), the DSMEM read is mapa + ld.shared::cluster in PTX, and the second
//       barrier is split: arrive right after the read, wait just before exit, so the slice's
//       stores overlap it.
//   v5  persistent clusters: a grid of at most as many clusters as fit at once loops over
//       rows; each block's slice of the rows ahead is already on its way into shared memory
//       (1-D bulk copies, cp.async.bulk, completing on mbarriers, STAGES rows deep) while the
//       current row is reduced, exchanged through DSMEM and written. Loads never wait for a
//       barrier. Template: cluster size C, threads T, STAGES (dynamic shared memory: STAGES x
//       the slice). Rows whose slices do not fit 227 KB of shared memory take v4's kernel.
// Since v5 the exponent's reference is 0 for a thread whose values are all -inf (masked
// stretches of a row give 0, not NaN) in every version.
#include <cfloat>
#include <cstdint>
#include <cooperative_groups.h>

#include "tma.cuh"
#include "warp.cuh"

namespace cg = cooperative_groups;
using cuda100::MaxSum;
using cuda100::maxsum_empty;
using cuda100::maxsum_merge;
using cuda100::warp_maxsum;

// ---------------------------------------------------------------------------------------
// The (m, s) of a block: every warp merges its 32 lanes, lane 0 parks the warp's pair, every
// warp then merges the parked pairs itself (no second barrier: each thread gets the result).
// `park` holds 32 pairs. Called once per slice; in v2's persistent loop grid.sync() sits
// between two calls, so a fast warp never overwrites a pair a slow warp still reads.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ MaxSum block_maxsum(MaxSum st, MaxSum* park) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    st = warp_maxsum(st);
    if (lane == 0) park[warp] = st;
    __syncthreads();
    return warp_maxsum(lane < warps ? park[lane] : maxsum_empty());
}

__device__ __forceinline__ float max4(float4 v, float m) {
    return fmaxf(fmaxf(m, fmaxf(v.x, v.y)), fmaxf(v.z, v.w));
}

// ---------------------------------------------------------------------------------------
// One slice of one row, the body of every version. The row is a scalar head (up to its first
// 16-byte boundary, at most 3 floats), `nvec` aligned float4 and a scalar tail (at most 3):
// ragged widths get 16-byte loads too (x and y rows share their alignment: both buffers start
// 256-byte aligned and the rows have one length). The float4 are cut into `parts` equal runs;
// this block (part `part`) owns [begin, end). Thread t keeps vectors begin + t + i*T,
// i < ITEMS, in registers; a slice longer than T*ITEMS float4 streams its rest through an
// online (m, s) and reads it again for the write. Part 0 also owns the head, the last part
// the tail (one element a thread at most).
//
// `exchange(block's (m, s)) -> row's (M, S)` is where the versions differ: nothing (v1),
// global memory + grid.sync() (v2), distributed shared memory + cluster barriers (v3, v4).
// ---------------------------------------------------------------------------------------
template <int T, int ITEMS, class Exchange>
__device__ __forceinline__ void softmax_slice(const float* __restrict__ xr, float* __restrict__ yr,
                                              int cols, int part, int parts, MaxSum* park,
                                              Exchange exchange) {
    const int t = threadIdx.x;
    const int head = min((4 - (int)((reinterpret_cast<uintptr_t>(xr) >> 2) & 3)) & 3, cols);
    const int nvec = (cols - head) >> 2;
    const int tail = cols - head - 4 * nvec;
    const int per = (nvec + parts - 1) / parts;
    const int begin = min(part * per, nvec);
    const int end = min(begin + per, nvec);
    const int on_chip = min(begin + ITEMS * T, end);  // vectors [begin, on_chip) in registers
    const float4* xv = reinterpret_cast<const float4*>(xr + head);
    float4* yv = reinterpret_cast<float4*>(yr + head);

    // 1. read: registers first (ITEMS independent 16-byte loads in flight a thread)
    float4 v[ITEMS];
    float m = -INFINITY;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = begin + t + i * T;
        if (j < on_chip) {
            v[i] = xv[j];
            m = max4(v[i], m);
        }
    }
    const bool has_head = part == 0 && t < head;
    const bool has_tail = part == parts - 1 && t < tail;
    float h = 0.f, tl = 0.f;
    if (has_head) m = fmaxf(m, h = xr[t]);
    if (has_tail) m = fmaxf(m, tl = xr[head + 4 * nvec + t]);
    MaxSum rest = maxsum_empty();  // what did not fit in registers: online, read again later
    for (int j = on_chip + t; j < end; j += T) {
        const float4 w = xv[j];
        cuda100::maxsum_add(rest, w.x);
        cuda100::maxsum_add(rest, w.y);
        cuda100::maxsum_add(rest, w.z);
        cuda100::maxsum_add(rest, w.w);
    }

    // 2. exponentials against this thread's own maximum, in place, and their sum (a thread
    //    whose values are all -inf, a masked stretch, uses 0: its exponentials are 0, not NaN)
    const float mm = m == -INFINITY ? 0.f : m;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (begin + t + i * T < on_chip) {
            v[i].x = expf(v[i].x - mm);
            v[i].y = expf(v[i].y - mm);
            v[i].z = expf(v[i].z - mm);
            v[i].w = expf(v[i].w - mm);
            s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
        }
    }
    if (has_head) s += (h = expf(h - mm));
    if (has_tail) s += (tl = expf(tl - mm));
    MaxSum mine = maxsum_merge(m == -INFINITY ? maxsum_empty() : MaxSum{m, s}, rest);

    // 3. the block's pair, then the row's pair (the version's exchange)
    const MaxSum row = exchange(block_maxsum(mine, park));
    const float inv = 1.f / row.s;
    const float f = m == -INFINITY ? 0.f : expf(m - row.m) * inv;  // registers: one multiply

    // 4. write: one store per element
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = begin + t + i * T;
        if (j < on_chip) yv[j] = make_float4(v[i].x * f, v[i].y * f, v[i].z * f, v[i].w * f);
    }
    if (has_head) yr[t] = h * f;
    if (has_tail) yr[head + 4 * nvec + t] = tl * f;
    for (int j = on_chip + t; j < end; j += T) {  // the rest: read again (from L2 with luck)
        const float4 w = xv[j];
        yv[j] = make_float4(expf(w.x - row.m) * inv, expf(w.y - row.m) * inv,
                            expf(w.z - row.m) * inv, expf(w.w - row.m) * inv);
    }
}

// ---------------------------------------------------------------------------------------
// v1: one block per row, no exchange.
// ---------------------------------------------------------------------------------------
struct NoExchange {
    __device__ __forceinline__ MaxSum operator()(MaxSum b) const { return b; }
};

template <int T, int ITEMS>
__device__ __forceinline__ void softmax_v1(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols) {
    __shared__ MaxSum park[32];
    const int64_t row = blockIdx.x;
    softmax_slice<T, ITEMS>(x + row * cols, y + row * cols, cols, 0, 1, park, NoExchange{});
}

extern "C" __global__ void __launch_bounds__(1024, 1)
softmax_v1_t1024_i8(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    softmax_v1<1024, 8>(x, y, rows, cols);
}

// ---------------------------------------------------------------------------------------
// v2: a grid-wide barrier. grid.sync() is only defined when every block of the grid is
// resident at once (a block waiting at the barrier for a block that cannot start until the
// waiting one leaves would hang forever); the cooperative launch checks exactly that and
// refuses a grid larger than (blocks an SM holds) x (SMs). So the grid is persistent: it is
// launched at that size and loops over rounds of `rows_per_round` whole rows, each row cut
// into `parts` slices, one slice a block. Whole rows per round: a row's pairs must all be
// written before the barrier its blocks wait at. Every block runs every round (idle ones
// too): all must reach each grid.sync().
// ---------------------------------------------------------------------------------------
struct GridExchange {
    float2* pairs;  // [rows, parts] (m, s), written before the barrier, read after it
    int64_t row;
    int part, parts;
    __device__ __forceinline__ MaxSum operator()(MaxSum b) const {
        if (threadIdx.x == 0) pairs[row * parts + part] = make_float2(b.m, b.s);
        cg::this_grid().sync();  // includes the fence that makes the pairs visible GPU-wide
        MaxSum r = maxsum_empty();
        for (int k = threadIdx.x & 31; k < parts; k += 32) {  // every warp merges the row's pairs
            const float2 p = __ldcg(pairs + row * parts + k);   // L2: written by other SMs
            r = maxsum_merge(r, MaxSum{p.x, p.y});
        }
        return warp_maxsum(r);
    }
};

template <int T, int ITEMS>
__device__ __forceinline__ void softmax_v2(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols, float2* pairs, int parts,
                                           int rows_per_round) {
    __shared__ MaxSum park[32];
    const int rounds = (rows + rows_per_round - 1) / rows_per_round;
    for (int r = 0; r < rounds; ++r) {
        const int64_t row = (int64_t)r * rows_per_round + blockIdx.x / parts;
        const int part = blockIdx.x % parts;
        if (blockIdx.x < rows_per_round * parts && row < rows) {
            softmax_slice<T, ITEMS>(x + row * cols, y + row * cols, cols, part, parts, park,
                                    GridExchange{pairs, row, part, parts});
        } else {
            cg::this_grid().sync();  // an idle block still meets the round's barrier
        }
    }
}

extern "C" __global__ void __launch_bounds__(256)
softmax_v2_grid_t256_i8(const float* __restrict__ x, float* __restrict__ y, int rows, int cols,
                        float2* pairs, int parts, int rows_per_round) {
    softmax_v2<256, 8>(x, y, rows, cols, pairs, parts, rows_per_round);
}

// ---------------------------------------------------------------------------------------
// v3: a cluster of C blocks per row, launched with cluster dimension (C, 1, 1): blocks
// C*r .. C*r + C-1 form the cluster of row r and are guaranteed to run at the same time, on
// SMs of one GPC, where each can address the others' shared memory.
// `info` (may be null): rank 0 of each cluster records %cluster_nctarank, the blocks the
// hardware put in the cluster (the tests read it: proof the launch really made clusters).
// ---------------------------------------------------------------------------------------
template <int C>
struct ClusterExchangeCG {
    MaxSum* pair;  // this block's (m, s), in its own shared memory
    __device__ __forceinline__ MaxSum operator()(MaxSum b) const {
        cg::cluster_group cluster = cg::this_cluster();
        if (threadIdx.x == 0) *pair = b;
        cluster.sync();  // every block's pair written (and every block of the cluster running)
        const int lane = threadIdx.x & 31;
        MaxSum r = maxsum_empty();
        if (lane < C) r = *cluster.map_shared_rank(pair, lane);  // DSMEM: block `lane`'s smem
        return warp_maxsum(r);
    }
};

template <int C, int T, int ITEMS>
__device__ __forceinline__ void softmax_v3(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols, int* info) {
    __shared__ MaxSum park[32];
    __shared__ MaxSum pair;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = cluster.block_rank();
    const int64_t row = blockIdx.x / C;
    softmax_slice<T, ITEMS>(x + row * cols, y + row * cols, cols, rank, C, park,
                            ClusterExchangeCG<C>{&pair});
    if (info != nullptr && rank == 0 && threadIdx.x == 0) info[row] = cluster.num_blocks();
    cluster.sync();  // nobody leaves while another block may still read its `pair`
}

#define V3(C, T, I)                                                                          \
    extern "C" __global__ void __launch_bounds__(T) softmax_v3_c##C##_t##T##_i##I(           \
        const float* __restrict__ x, float* __restrict__ y, int rows, int cols, int* info) { \
        softmax_v3<C, T, I>(x, y, rows, cols, info);                                         \
    }
V3(8, 256, 2) V3(8, 256, 4) V3(8, 256, 8) V3(8, 256, 16)

// ---------------------------------------------------------------------------------------
// v4: the same exchange in PTX, with the closing barrier split in two.
//   mapa.shared::cluster turns an address in MY shared memory into the address of the same
//   variable in block `rank`'s shared memory; ld.shared::cluster reads it (8 bytes, one load).
//   barrier.cluster.arrive.release says "my writes (the pair) are done"; .wait.acquire waits
//   for every thread of every block of the cluster to have arrived and sees their writes.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_ctarank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_nctarank() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_arrive() {
    asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}

__device__ __forceinline__ void cluster_wait() {
    asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ float2 load_remote(const float2* mine, uint32_t rank) {
    const uint32_t local = static_cast<uint32_t>(__cvta_generic_to_shared(mine));
    uint32_t remote;
    float2 v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
    asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(v.x), "=f"(v.y) : "r"(remote)
                 : "memory");
    return v;
}

template <int C>
struct ClusterExchangePTX {
    float2* pair;
    __device__ __forceinline__ MaxSum operator()(MaxSum b) const {
        if (threadIdx.x == 0) *pair = make_float2(b.m, b.s);
        cluster_arrive();
        cluster_wait();  // phase 1: every pair of the cluster written
        const int lane = threadIdx.x & 31;
        MaxSum r = maxsum_empty();
        if (lane < C) {
            const float2 p = load_remote(pair, lane);
            r = MaxSum{p.x, p.y};
        }
        r = warp_maxsum(r);
        cluster_arrive();  // phase 2 begins: "I have read the others' pairs"; no waiting here
        return r;
    }
};

template <int C, int T, int ITEMS>
__device__ __forceinline__ void softmax_v4(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols, int* info) {
    __shared__ MaxSum park[32];
    __shared__ float2 pair;
    const int rank = C == 1 ? 0 : (int)cluster_ctarank();
    const int64_t row = blockIdx.x / C;
    softmax_slice<T, ITEMS>(x + row * cols, y + row * cols, cols, rank, C, park,
                            ClusterExchangePTX<C>{&pair});
    if (info != nullptr && rank == 0 && threadIdx.x == 0) info[row] = (int)cluster_nctarank();
    cluster_wait();  // phase 2 ends: the stores above ran while the others were still reading
}

#define V4(C, T, I)                                                                          \
    extern "C" __global__ void __launch_bounds__(T) softmax_v4_c##C##_t##T##_i##I(           \
        const float* __restrict__ x, float* __restrict__ y, int rows, int cols, int* info) { \
        softmax_v4<C, T, I>(x, y, rows, cols, info);                                         \
    }
// short rows (one block: a cluster of one) ...
V4(1, 256, 1) V4(1, 256, 2) V4(1, 256, 4) V4(1, 256, 8)
// ... and the cluster sizes the driver picks from and .notes/day54_sweep.py compares
V4(2, 256, 8) V4(2, 256, 16)
V4(4, 256, 8) V4(4, 256, 16) V4(4, 512, 8)
V4(8, 256, 8) V4(8, 256, 16) V4(8, 512, 8)
V4(16, 256, 8) V4(16, 256, 16) V4(16, 512, 8) V4(16, 512, 16)

// ---------------------------------------------------------------------------------------
// v5: a PERSISTENT cluster kernel. The grid is G clusters of C blocks (G <= the clusters the
// GPU holds at once, from the occupancy calculator); cluster g takes rows g, g + G, g + 2G...
// Each block owns the same slice of every row it visits (rank p: aligned float4 [begin, end)
// of part p of C, plus the head for p = 0 and the tail for p = C-1), and pulls that slice into
// shared memory with ONE 1-D bulk copy (cp.async.bulk, the copy engine), STAGES rows ahead.
// While the block reduces row k, waits at the cluster barrier and writes row k, the copies of
// rows k+1 .. k+STAGES-1 are already in flight: the memory system never idles at a barrier,
// which is exactly what v4's one-shot blocks do (load, then stop, then store).
//
// Shared memory (dynamic): STAGES buffers of `cap` float4, cap = ceil((cols / 4) / C), the
// longest slice any row can give (a row's aligned body has at most cols / 4 float4). The
// bulk copy needs 16-byte aligned addresses and a size a multiple of 16: the body of every
// row starts on a 16-byte boundary (the head takes the 0-3 floats before it) and is whole
// float4, so every row, whatever cols % 4, is copied this way; head and tail (at most 3 floats
// each) are plain loads from global memory.
//
// Synchronisation, per block (iteration k = the block's k-th row, stage s = k % STAGES):
//   full[s]   an mbarrier of count 1: thread 0 arrives with expect_tx(bytes) and issues the
//             copy; the copy engine completes the bytes; the phase completes. Iteration k
//             waits with parity (k / STAGES) & 1 (its stage's (k / STAGES)-th phase). A phase is
//             re-armed only after every thread has waited on the previous one (the refill is
//             issued after a __syncthreads that follows the stage's last use), so no thread is
//             ever two phases behind, which is what a parity wait needs.
//   refill    top of iteration k (k >= 1): __syncthreads (every thread is done with stage
//             (k-1) % STAGES, reads and its own exp writes, each thread having run
//             fence.proxy.async: generic-proxy accesses ordered before the async proxy's copy
//             that overwrites them), then thread 0 issues row k-1+STAGES into that stage.
//   pairs     pair[k & 1] in shared memory, read by the peers through DSMEM after ONE cluster
//             barrier (arrive.release + wait.acquire) per row. Double buffered: pair[k & 1] is
//             written again at iteration k+2, after this block has waited at barrier k+1, which
//             completes only when every peer arrived there, i.e. after the peer's reads of
//             iteration k (program order + release). A last barrier after the loop keeps every
//             block (and its shared memory) alive until the peers have read its last pair.
//   park      block_maxsum's 32 pairs: rewritten at iteration k+1 only after the top
//             __syncthreads of k+1, after every warp has read them at k.
// Every block of a cluster visits the same rows, so all run the same number of barriers.
// Nothing is in flight at exit: a copy is issued only for a row the block then waits for.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t dynamic_smem_size() {
    uint32_t r;
    asm volatile("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

// Where a block's slice of one row lies (the same cut as softmax_slice).
struct RowSlice {
    int head, nvec, tail, begin, end;
    __device__ __forceinline__ RowSlice(const float* xr, int cols, int part, int parts) {
        head = min((4 - (int)((reinterpret_cast<uintptr_t>(xr) >> 2) & 3)) & 3, cols);
        nvec = (cols - head) >> 2;
        tail = cols - head - 4 * nvec;
        const int per = (nvec + parts - 1) / parts;
        begin = min(part * per, nvec);
        end = min(begin + per, nvec);
    }
};

template <int C, int T, int STAGES>
__device__ __forceinline__ void softmax_v5(const float* __restrict__ x, float* __restrict__ y,
                                           int rows, int cols, int* info) {
    namespace tma = cuda100::tma;
    extern __shared__ __align__(128) float4 stage_buf[];
    __shared__ MaxSum park[32];
    __shared__ float2 pair[2];
    __shared__ __align__(8) uint64_t full[STAGES];

    const int t = threadIdx.x, lane = t & 31;
    const int rank = (int)cluster_ctarank();
    const int cid = blockIdx.x / C, clusters = gridDim.x / C;
    const int cap = ((cols >> 2) + C - 1) / C;                 // float4 a stage holds
    const int mine = cid < rows ? (rows - 1 - cid) / clusters + 1 : 0;  // rows of this cluster
    if (t == 0 && (uint64_t)STAGES * cap * 16 > dynamic_smem_size()) __trap();  // launch bug

    // copy the slice of the block's j-th row into stage j % STAGES (thread 0 only)
    auto issue = [&](int j) {
        const int64_t row = cid + (int64_t)j * clusters;
        const float* xr = x + row * cols;
        const RowSlice sl(xr, cols, rank, C);
        uint64_t* bar = &full[j % STAGES];
        const uint32_t bytes = (uint32_t)(sl.end - sl.begin) * 16u;
        if (bytes != 0) {
            tma::mbar_arrive_expect_tx(bar, bytes);
            tma::load_1d(stage_buf + (j % STAGES) * cap,
                         reinterpret_cast<const float4*>(xr + sl.head) + sl.begin, bytes, bar);
        } else {
            tma::mbar_arrive(bar);  // an empty slice: the arrival alone completes the phase
        }
    };

    if (t == 0) {
#pragma unroll
        for (int s = 0; s < STAGES; ++s) tma::mbar_init(&full[s], 1);
        tma::fence_barrier_init();
    }
    __syncthreads();
    if (t == 0)
        for (int j = 0; j < STAGES && j < mine; ++j) issue(j);

    for (int k = 0; k < mine; ++k) {
        if (k > 0) {
            __syncthreads();  // stage (k-1) % STAGES and park are free
            if (t == 0 && k - 1 + STAGES < mine) issue(k - 1 + STAGES);
        }
        const int64_t row = cid + (int64_t)k * clusters;
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        const RowSlice sl(xr, cols, rank, C);
        const bool has_head = rank == 0 && t < sl.head;
        const bool has_tail = rank == C - 1 && t < sl.tail;
        const int tail_at = sl.head + 4 * sl.nvec;
        float h = 0.f, tl = 0.f;
        if (has_head) h = xr[t];  // plain loads, issued before the wait: their latency hides
        if (has_tail) tl = xr[tail_at + t];

        const int s = k % STAGES;
        tma::mbar_wait(&full[s], (uint32_t)(k / STAGES) & 1u);
        float4* buf = stage_buf + s * cap;
        const int n = sl.end - sl.begin;

        // 1. this thread's maximum (vectors t, t + T, ... of the stage)
        float m = -INFINITY;
        if (has_head) m = fmaxf(m, h);
        if (has_tail) m = fmaxf(m, tl);
#pragma unroll 4
        for (int j = t; j < n; j += T) m = max4(buf[j], m);
        // 2. exp(x - m) written back in place (the write pass then only multiplies), and the
        //    sum; all -inf (masked): exponentials against 0, so 0 and not NaN
        const float mm = m == -INFINITY ? 0.f : m;
        float sum = 0.f;
#pragma unroll 4
        for (int j = t; j < n; j += T) {
            float4 v = buf[j];
            v.x = expf(v.x - mm);
            v.y = expf(v.y - mm);
            v.z = expf(v.z - mm);
            v.w = expf(v.w - mm);
            buf[j] = v;
            sum += (v.x + v.y) + (v.z + v.w);
        }
        if (has_head) sum += (h = expf(h - mm));
        if (has_tail) sum += (tl = expf(tl - mm));
        const MaxSum blk =
            block_maxsum(m == -INFINITY ? maxsum_empty() : MaxSum{m, sum}, park);

        // 3. the row's pair: every block's pair through DSMEM after one cluster barrier
        if (t == 0) pair[k & 1] = make_float2(blk.m, blk.s);
        cluster_arrive();
        cluster_wait();
        MaxSum r = maxsum_empty();
        if (lane < C) {
            const float2 p = load_remote(&pair[k & 1], lane);
            r = MaxSum{p.x, p.y};
        }
        r = warp_maxsum(r);
        const float f = m == -INFINITY ? 0.f : expf(m - r.m) / r.s;

        // 4. write: one multiply and one 16-byte store per float4
        float4* yv = reinterpret_cast<float4*>(yr + sl.head) + sl.begin;
#pragma unroll 4
        for (int j = t; j < n; j += T) {
            const float4 v = buf[j];
            yv[j] = make_float4(v.x * f, v.y * f, v.z * f, v.w * f);
        }
        if (has_head) yr[t] = h * f;
        if (has_tail) yr[tail_at + t] = tl * f;
        tma::fence_async_shared();  // my accesses to this stage, before the copy engine refills it
        if (info != nullptr && rank == 0 && t == 0) info[row] = (int)cluster_nctarank();
    }
    cluster_arrive();  // nobody leaves while a peer may still read its last pair
    cluster_wait();
}

#define V5(C, T, S)                                                                          \
    extern "C" __global__ void __launch_bounds__(T) softmax_v5_c##C##_t##T##_s##S(           \
        const float* __restrict__ x, float* __restrict__ y, int rows, int cols, int* info) { \
        softmax_v5<C, T, S>(x, y, rows, cols, info);                                         \
    }
// the driver's picks (by width) and the sweep's other candidates
V5(4, 256, 2) V5(8, 256, 2) V5(16, 256, 2)
V5(8, 256, 3) V5(8, 512, 2) V5(16, 256, 3) V5(16, 256, 4) V5(16, 512, 2)
