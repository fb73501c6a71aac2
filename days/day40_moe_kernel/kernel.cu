// Day 40: a mixture-of-experts layer (fp32): top-2 gating, dispatch by atomic scatter, expert
// GEMMs, weighted combine.
//
//   logits = x @ Wg                         x [T, C], Wg [C, E]
//   e0, e1 = the two largest logits of a token (ties: the lower expert index first)
//   w0, w1 = softmax(l_e0, l_e1)            (top-2, then a softmax over the two: Mixtral's way)
//   y[t]   = w0 * expert_e0(x[t]) + w1 * expert_e1(x[t])
//   expert_e(v) = gelu(v @ W1[e] + b1[e]) @ W2[e] + b2[e]     W1[e] [C, H], W2[e] [H, C], H = 4C
//   gelu(u) = 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))   (GPT-2's tanh form)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 40          (8192 tokens, C = 768, 8 experts)
//
// Dispatch (every version): moe_gate (a warp per token: logits, top-2, the two weights, and
// a per-block histogram added into counts[E]), moe_scan (offsets of each expert's segment in
// the slot list, and of its 128-row tiles), moe_scatter (each (token, k) claims a slot of its
// expert with an atomic, warp-aggregated). The order of tokens inside a segment depends on
// which atomic won; nothing downstream depends on it (see the README: y is bit-for-bit
// deterministic).
//
//   v1  gather x's rows into expert order (a copy), counts read back to the host, one GEMM
//       launch per expert per layer (day 8's tile from sgemm.cuh), bias + GELU kernel,
//       combine kernel (per token, k = 0 then 1, + b2)
//   v2  grouped GEMMs: one launch per layer for all experts (a block finds its expert from
//       the tile offsets), fc1 reads x's rows through the slot list inside the tile load (no
//       copy, no host round trip); same bias + GELU and combine kernels
//   v3  v2 with fused epilogues: fc1 adds b1 and applies GELU as it stores h; fc2 adds b2,
//       scales by the gate weight and adds into y[token] with a float4 atomic (two adds onto
//       a zeroed y: order-independent, see the README); no bias, GELU or combine kernels

#include <cstdint>

#include "elementwise.cuh"
#include "sgemm.cuh"
#include "warp.cuh"

using namespace cuda100;

constexpr int MAX_E = 16;           // experts a router may have (registers of the gate)
constexpr int GATE_WARPS = 8;       // warps (tokens at a time) per 256-thread gate block
constexpr int GATE_TOKENS = 32;     // tokens per gate block
constexpr int TILE = sgemm::BM;     // 128 rows (and columns) per GEMM block tile
static_assert(sgemm::BM == 128 && sgemm::BN == 128 && sgemm::THREADS == 256,
              "sgemm.cuh's tile changed: update TILE and the grids in driver.py");

// gelu, store_n: elementwise.cuh (day 30); warp_sum: warp.cuh (day 5)

// ---------------------------------------------------------------------------------------------
// Dispatch
// ---------------------------------------------------------------------------------------------

// A warp per token: lane j sums channels j, j+32, ... into E partial logits, the warp adds them
// up, lane 0 picks the top two (strict > keeps the lower index ahead on a tie), their softmax,
// and counts them in a block histogram; the block adds its histogram into counts (E atomics a
// block instead of 2 per token).
extern "C" __global__ void __launch_bounds__(256) moe_gate(
    const float* __restrict__ x, const float* __restrict__ wg, int* __restrict__ topi,
    float* __restrict__ topw, int* __restrict__ counts, int T, int C, int E) {
    __shared__ int hist[MAX_E];
    if (threadIdx.x < MAX_E) hist[threadIdx.x] = 0;
    __syncthreads();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int end = min(T, (blockIdx.x + 1) * GATE_TOKENS);
    for (int t = blockIdx.x * GATE_TOKENS + warp; t < end; t += GATE_WARPS) {
        float acc[MAX_E];
#pragma unroll
        for (int e = 0; e < MAX_E; ++e) acc[e] = 0.f;
        const float* xr = x + (size_t)t * C;
        for (int c = lane; c < C; c += 32) {
            const float xv = xr[c];
            const float* w = wg + (size_t)c * E;
#pragma unroll
            for (int e = 0; e < MAX_E; ++e)
                if (e < E) acc[e] = fmaf(xv, w[e], acc[e]);
        }
#pragma unroll
        for (int e = 0; e < MAX_E; ++e)
            if (e < E) acc[e] = warp_sum(acc[e]);
        if (lane == 0) {
            int i0 = 0, i1 = -1;
            float l0 = acc[0], l1 = -INFINITY;
#pragma unroll
            for (int e = 1; e < MAX_E; ++e) {
                if (e >= E) break;
                const float l = acc[e];
                if (l > l0) {
                    i1 = i0; l1 = l0; i0 = e; l0 = l;
                } else if (l > l1 || i1 < 0) {
                    i1 = e; l1 = l;
                }
            }
            const float r = expf(l1 - l0);          // <= 1: no overflow
            topi[2 * t] = i0;
            topi[2 * t + 1] = i1;
            topw[2 * t] = 1.f / (1.f + r);
            topw[2 * t + 1] = r / (1.f + r);
            atomicAdd(&hist[i0], 1);
            atomicAdd(&hist[i1], 1);
        }
    }
    __syncthreads();
    if (threadIdx.x < E && hist[threadIdx.x]) atomicAdd(&counts[threadIdx.x], hist[threadIdx.x]);
}

// One thread: offsets[e] = sum of counts before e (offsets[E] = 2T), tile_start[e] = sum of the
// 128-row tiles before e (tile_start[E] = the grouped GEMMs' real row-tile count).
extern "C" __global__ void moe_scan(const int* __restrict__ counts, int* __restrict__ offsets,
                                    int* __restrict__ tile_start, int E) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    int off = 0, tiles = 0;
    for (int e = 0; e < E; ++e) {
        offsets[e] = off;
        tile_start[e] = tiles;
        off += counts[e];
        tiles += (counts[e] + TILE - 1) / TILE;
    }
    offsets[E] = off;
    tile_start[E] = tiles;
}

// A thread per (token, k): claim a slot of expert e = topi[t, k]. The lanes of a warp that
// want the same expert elect a leader (__match_any_sync), which claims all their slots with one
// atomicAdd; each lane takes base + its rank among them.
extern "C" __global__ void __launch_bounds__(256) moe_scatter(
    const int* __restrict__ topi, const float* __restrict__ topw, const int* __restrict__ offsets,
    int* __restrict__ fill, int* __restrict__ slot_token, float* __restrict__ slot_w,
    int* __restrict__ slot_expert, int* __restrict__ slot_of, int T) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;   // (token, k) = (p / 2, p % 2)
    const int lane = threadIdx.x % 32;
    const int e = p < 2 * T ? topi[p] : -1;                // every lane takes part in the match
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int leader = __ffs(peers) - 1;
    const int rank = __popc(peers & ((1u << lane) - 1u));
    int base = 0;
    if (lane == leader && e >= 0) base = atomicAdd(&fill[e], __popc(peers));
    base = __shfl_sync(0xffffffffu, base, leader);
    if (e < 0) return;
    const int s = offsets[e] + base + rank;
    slot_token[s] = p / 2;
    slot_w[s] = topw[p];
    slot_expert[s] = e;
    slot_of[p] = s;
}

// ---------------------------------------------------------------------------------------------
// v1 / v2 elementwise kernels
// ---------------------------------------------------------------------------------------------

// v1: xe[s] = x[slot_token[s]], S = 2T rows of C floats (VEC: float4, C % 4 == 0)
template <bool VEC>
__device__ __forceinline__ void gather_rows(const float* __restrict__ x,
                                            const int* __restrict__ slot_token,
                                            float* __restrict__ xe, int S, int C) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int w = VEC ? 4 : 1;
    const int per_row = C / w;
    if (i >= (size_t)S * per_row) return;
    const int s = (int)(i / per_row), c = (int)(i % per_row) * w;
    const float* src = x + (size_t)slot_token[s] * C + c;
    float* dst = xe + (size_t)s * C + c;
    if (VEC) *reinterpret_cast<float4*>(dst) = *reinterpret_cast<const float4*>(src);
    else *dst = *src;
}
extern "C" __global__ void __launch_bounds__(256) moe_gather_v1_vec(
    const float* x, const int* slot_token, float* xe, int S, int C) {
    gather_rows<true>(x, slot_token, xe, S, C);
}
extern "C" __global__ void __launch_bounds__(256) moe_gather_v1_scalar(
    const float* x, const int* slot_token, float* xe, int S, int C) {
    gather_rows<false>(x, slot_token, xe, S, C);
}

// h[s, j] = gelu(h[s, j] + b1[e(s), j]) over S rows of H floats (H = 4C: float4 always)
extern "C" __global__ void __launch_bounds__(256) moe_bias_gelu_v1(
    float* __restrict__ h, const float* __restrict__ b1, const int* __restrict__ slot_expert,
    int S, int H) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;   // float4 index
    const int per_row = H / 4;
    if (i >= (size_t)S * per_row) return;
    const int s = (int)(i / per_row), j = (int)(i % per_row) * 4;
    float4* p = reinterpret_cast<float4*>(h) + i;
    const float4 b = *reinterpret_cast<const float4*>(b1 + (size_t)slot_expert[s] * H + j);
    float4 v = *p;
    v = make_float4(gelu(v.x + b.x), gelu(v.y + b.y), gelu(v.z + b.z), gelu(v.w + b.w));
    *p = v;
}

// y[t, c] = w0 (out[s0, c] + b2[e0, c]) + w1 (out[s1, c] + b2[e1, c]), k = 0 then 1: the order
// is fixed whatever slots the tokens got
template <bool VEC>
__device__ __forceinline__ void combine(const float* __restrict__ out, const float* __restrict__ b2,
                                        const float* __restrict__ topw,
                                        const int* __restrict__ slot_of,
                                        const int* __restrict__ slot_expert, float* __restrict__ y,
                                        int T, int C) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int w = VEC ? 4 : 1;
    const int per_row = C / w;
    if (i >= (size_t)T * per_row) return;
    const int t = (int)(i / per_row), c = (int)(i % per_row) * w;
    const int s0 = slot_of[2 * t], s1 = slot_of[2 * t + 1];
    const float g0 = topw[2 * t], g1 = topw[2 * t + 1];
    const float* o0 = out + (size_t)s0 * C + c;
    const float* o1 = out + (size_t)s1 * C + c;
    const float* c0 = b2 + (size_t)slot_expert[s0] * C + c;
    const float* c1 = b2 + (size_t)slot_expert[s1] * C + c;
    if (VEC) {
        const float4 a = *reinterpret_cast<const float4*>(o0), b = *reinterpret_cast<const float4*>(o1);
        const float4 ba = *reinterpret_cast<const float4*>(c0), bb = *reinterpret_cast<const float4*>(c1);
        *reinterpret_cast<float4*>(y + (size_t)t * C + c) =
            make_float4(g0 * (a.x + ba.x) + g1 * (b.x + bb.x), g0 * (a.y + ba.y) + g1 * (b.y + bb.y),
                        g0 * (a.z + ba.z) + g1 * (b.z + bb.z), g0 * (a.w + ba.w) + g1 * (b.w + bb.w));
    } else {
        y[(size_t)t * C + c] = g0 * (*o0 + *c0) + g1 * (*o1 + *c1);
    }
}
extern "C" __global__ void __launch_bounds__(256) moe_combine_v1_vec(
    const float* out, const float* b2, const float* topw, const int* slot_of,
    const int* slot_expert, float* y, int T, int C) {
    combine<true>(out, b2, topw, slot_of, slot_expert, y, T, C);
}
extern "C" __global__ void __launch_bounds__(256) moe_combine_v1_scalar(
    const float* out, const float* b2, const float* topw, const int* slot_of,
    const int* slot_expert, float* y, int T, int C) {
    combine<false>(out, b2, topw, slot_of, slot_expert, y, T, C);
}

// ---------------------------------------------------------------------------------------------
// v1: one expert's GEMM, rows already contiguous: sgemm.cuh's default tile as it is
// ---------------------------------------------------------------------------------------------
template <bool VEC>
__device__ __forceinline__ void plain_gemm(const float* A, const float* B, float* Cm, int M, int N,
                                           int K) {
    sgemm::gemm_tile<VEC>(A, K, B, N, M, N, K, blockIdx.y * TILE, blockIdx.x * TILE,
                          sgemm::Store<VEC>{Cm, N});
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_gemm_v1_vec(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm, int M,
    int N, int K) {
    plain_gemm<true>(A, B, Cm, M, N, K);
}
extern "C" __global__ void __launch_bounds__(256, 2) moe_gemm_v1_scalar(
    const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm, int M,
    int N, int K) {
    plain_gemm<false>(A, B, Cm, M, N, K);
}

// ---------------------------------------------------------------------------------------------
// v2 / v3: the grouped GEMM. Block (x, y): column tile x of the layer's output, global row tile
// y; tile_start tells which expert y belongs to (blocks past the real tile count return). The
// tile is day 8's v7 (sgemm.cuh's day8::stash and day8::multiply) with one change: the loader
// takes each thread's A row pointer, computed once, so fc1 reads x[slot_token[s]] in place.
// ---------------------------------------------------------------------------------------------
namespace grouped {

using sgemm::day8::Regs;

// the thread's A row is fixed over the K loop: row bm + tid / 2 of the tile (day 8's mapping)
template <bool VEC>
__device__ __forceinline__ Regs load(const float* __restrict__ arow, bool a_ok,
                                     const float* __restrict__ B, int ldb, int N, int K, int bn,
                                     int k0, int tid) {
    const int ak = k0 + (tid % 2) * 4;
    const int bk = k0 + tid / 32, bc = bn + (tid % 32) * 4;
    Regs r;
    if (VEC) {
        const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f);
        r.a = (a_ok && ak < K) ? *reinterpret_cast<const float4*>(arow + ak) : zero;
        r.b = (bk < K && bc < N) ? *reinterpret_cast<const float4*>(B + (size_t)bk * ldb + bc) : zero;
    } else {   // day 8's scalar path: clamped addresses (always inside), zeroed values
        const float* pb = B + (size_t)min(bk, K - 1) * ldb;
        float va[4], vb[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            va[q] = arow[min(ak + q, K - 1)];
            vb[q] = pb[min(bc + q, N - 1)];
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            va[q] = (a_ok && ak + q < K) ? va[q] : 0.f;
            vb[q] = (bk < K && bc + q < N) ? vb[q] : 0.f;
        }
        r.a = make_float4(va[0], va[1], va[2], va[3]);
        r.b = make_float4(vb[0], vb[1], vb[2], vb[3]);
    }
    return r;
}

// C[bm .. bm+127, bn .. bn+127] of (rows of A) @ B, M rows in this expert's segment; rows =
// nullptr: A's row r is A + r * lda; else A + rows[r] * lda (the gathered load)
template <bool VEC, class Epi>
__device__ __forceinline__ void tile(const float* __restrict__ A, int lda,
                                     const int* __restrict__ rows, const float* __restrict__ B,
                                     int ldb, int M, int N, int K, int bm, int bn, const Epi& epi) {
    using namespace sgemm::day8;
    __shared__ __align__(16) float As[2][BK * AS_LD];
    __shared__ __align__(16) float Bs[2][BK * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int tiles = (K + BK - 1) / BK;
    const int ar = bm + tid / 2;
    const bool a_ok = ar < M;
    // rows past M read row 0 of A (a valid address; the values are zeroed)
    const float* arow = A + (a_ok ? (size_t)(rows ? rows[ar] : ar) * lda : 0);

    float acc[8][8] = {};
    stash(load<VEC>(arow, a_ok, B, ldb, N, K, bn, 0, tid), As[0], Bs[0], tid);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        const Regs next = load<VEC>(arow, a_ok, B, ldb, N, K, bn, (t + 1) * BK, tid);
        multiply(As[cur], Bs[cur], ty, tx, acc);
        stash(next, As[cur ^ 1], Bs[cur ^ 1], tid);
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = bn + h * 64 + tx * 4;
            if (col < N)
                epi(row, col, make_float4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2],
                                          acc[i][h * 4 + 3]), min(4, N - col));
        }
    }
}

// which expert and which of its row tiles this block is; false past the real tiles
__device__ __forceinline__ bool find_tile(const int* __restrict__ tile_start, int E, int& e,
                                          int& bm) {
    const int g = blockIdx.y;
    if (g >= tile_start[E]) return false;
    e = 0;
    while (tile_start[e + 1] <= g) ++e;   // experts without tokens have no tiles
    bm = (g - tile_start[e]) * TILE;
    return true;
}

// ---- epilogues (row is relative to the expert's segment) ----
// The epilogues keep the kernel's own pointer arguments plus the expert e and its segment start
// seg, and form the addresses after the K loop: a pointer computed before the loop would hold
// two more registers through it, and the tile has none to spare at 128 (it spills).
template <bool VEC>
struct StoreRows {       // v2: C[seg + row, col..] = v
    float* C;
    int seg, ldc;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        store_n<VEC>(C + (size_t)(seg + row) * ldc + col, v, n);
    }
};

struct BiasGelu {        // v3 fc1: h[seg + row, col..] = gelu(v + b1[e, col..]); N = H = 4C and
    float* h;            // col % 4 == 0, so n == 4 and 16-byte accesses always
    const float* b1;
    int seg, e, H;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int) const {
        const float4 bb = *reinterpret_cast<const float4*>(b1 + (size_t)e * H + col);
        *reinterpret_cast<float4*>(h + (size_t)(seg + row) * H + col) =
            make_float4(gelu(v.x + bb.x), gelu(v.y + bb.y), gelu(v.z + bb.z), gelu(v.w + bb.w));
    }
};

template <bool VEC>
struct ScatterAdd {      // v3 fc2: y[token, col..] += w * (v + b2[e, col..]), slot s = seg + row
    float* y;
    const int* slot_token;
    const float* slot_w;
    const float* b2;
    int seg, e, C;
    __device__ __forceinline__ void operator()(int row, int col, float4 v, int n) const {
        const int s = seg + row;
        const float g = slot_w[s];
        float* p = y + (size_t)slot_token[s] * C + col;
        const float* b = b2 + (size_t)e * C + col;
        if (VEC && n == 4) {
            const float4 bb = *reinterpret_cast<const float4*>(b);
            atomicAdd(reinterpret_cast<float4*>(p),
                      make_float4(g * (v.x + bb.x), g * (v.y + bb.y), g * (v.z + bb.z),
                                  g * (v.w + bb.w)));
        } else {
            const float r[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (j < n) atomicAdd(p + j, g * (r[j] + b[j]));
        }
    }
};

// fc1 over all experts: h[seg + r] = (x[slot_token[seg + r]] @ W1[e]) (+ b1, gelu when FUSED)
template <bool VEC, bool FUSED>
__device__ __forceinline__ void fc1(const float* x, const int* slot_token, const float* w1,
                                    const float* b1, float* h, const int* offsets,
                                    const int* tile_start, int C, int H, int E) {
    int e, bm;
    if (!find_tile(tile_start, E, e, bm)) return;
    const int seg = offsets[e], M = offsets[e + 1] - seg;
    const float* B = w1 + (size_t)e * C * H;
    if (FUSED)
        tile<VEC>(x, C, slot_token + seg, B, H, M, H, C, bm, blockIdx.x * TILE,
                  BiasGelu{h, b1, seg, e, H});
    else
        tile<VEC>(x, C, slot_token + seg, B, H, M, H, C, bm, blockIdx.x * TILE,
                  StoreRows<true>{h, seg, H});
}

// fc2 over all experts: out[seg + r] = h[seg + r] @ W2[e]   (v2), or
// y[slot_token[seg + r]] += slot_w * (h[seg + r] @ W2[e] + b2[e])   (v3, FUSED)
template <bool VEC, bool FUSED>
__device__ __forceinline__ void fc2(const float* h, const float* w2, const float* b2, float* out,
                                    const int* slot_token, const float* slot_w,
                                    const int* offsets, const int* tile_start, int C, int H,
                                    int E) {
    int e, bm;
    if (!find_tile(tile_start, E, e, bm)) return;
    const int seg = offsets[e], M = offsets[e + 1] - seg;
    const float* A = h + (size_t)seg * H;
    const float* B = w2 + (size_t)e * H * C;
    if (FUSED)
        tile<VEC>(A, H, nullptr, B, C, M, C, H, bm, blockIdx.x * TILE,
                  ScatterAdd<VEC>{out, slot_token, slot_w, b2, seg, e, C});
    else
        tile<VEC>(A, H, nullptr, B, C, M, C, H, bm, blockIdx.x * TILE,
                  StoreRows<VEC>{out, seg, C});
}

}  // namespace grouped

#define FC1_ARGS const float* __restrict__ x, const int* __restrict__ slot_token,           \
                 const float* __restrict__ w1, const float* __restrict__ b1,                 \
                 float* __restrict__ h, const int* __restrict__ offsets,                     \
                 const int* __restrict__ tile_start, int C, int H, int E
#define FC2_ARGS const float* __restrict__ h, const float* __restrict__ w2,                  \
                 const float* __restrict__ b2, float* __restrict__ out,                      \
                 const int* __restrict__ slot_token, const float* __restrict__ slot_w,       \
                 const int* __restrict__ offsets, const int* __restrict__ tile_start, int C, \
                 int H, int E
// MINB: blocks an SM the register budget is set for. The float4 kernels take 2 (128 registers,
// day 8's budget); the scalar ones (C % 4 != 0 only: clamped element loads) need more and take 1
#define FC1(NAME, VEC, FUSED, MINB)                                                           \
    extern "C" __global__ void __launch_bounds__(256, MINB) NAME(FC1_ARGS) {                  \
        grouped::fc1<VEC, FUSED>(x, slot_token, w1, b1, h, offsets, tile_start, C, H, E);     \
    }
#define FC2(NAME, VEC, FUSED, MINB)                                                           \
    extern "C" __global__ void __launch_bounds__(256, MINB) NAME(FC2_ARGS) {                  \
        grouped::fc2<VEC, FUSED>(h, w2, b2, out, slot_token, slot_w, offsets, tile_start, C, \
                                 H, E);                                                       \
    }
FC1(moe_fc1_v2_vec, true, false, 2)
FC1(moe_fc1_v2_scalar, false, false, 1)
FC2(moe_fc2_v2_vec, true, false, 2)
FC2(moe_fc2_v2_scalar, false, false, 1)
FC1(moe_fc1_v3_vec, true, true, 2)
FC1(moe_fc1_v3_scalar, false, true, 1)
FC2(moe_fc2_v3_vec, true, true, 2)
FC2(moe_fc2_v3_scalar, false, true, 1)
