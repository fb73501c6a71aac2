// Day 35: LayerNorm backward, dx, dgamma and dbeta, in one kernel.
//
// The forward (day 9) saved mean[r] and rstd[r] of every row of x [N, C]. Given dy [N, C]:
//
//   xhat[r,c] = (x[r,c] - mean[r]) * rstd[r]                 (recomputed, never stored)
//   g[r,c]    = dy[r,c] * gamma[c]
//   dx[r,c]   = rstd[r] * (g[r,c] - mean_c(g[r,:]) - xhat[r,c] * mean_c(g[r,:] * xhat[r,:]))
//   dgamma[c] = sum_r dy[r,c] * xhat[r,c]                    (a sum DOWN the columns)
//   dbeta[c]  = sum_r dy[r,c]
//
// dx is a row reduction (two sums per row, like the forward); dgamma and dbeta are column
// reductions over all N rows. The op must read x and dy and write dx: 12 bytes per element.
// Everything else (gamma, mean, rstd, dgamma, dbeta) is O(N + C).
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 35
//
// DETERMINISM. Every version sums dgamma and dbeta in an order fixed by (N, C, the grid): no
// float atomics. Two runs give the same bits.
//
// Versions:
//   v1  two kernels, as a first port has them: lnbwd_v1_dx (a warp per row, scalar loads, two
//       loops: the sums, then dx) and lnbwd_v1_dgamma (a block per 32 columns, 32 threads down
//       each column, combined in shared memory). x and dy are read twice from DRAM, and the
//       column kernel has only cdiv(C, 32) blocks: 24 at C = 768.
//   v2  one pass over the data for all three outputs: lnbwd_v2_rows takes 8 rows a block, its
//       8 warps get the rows' sums, then the block walks the columns, writes dx and sums the 8
//       rows' dy * xhat and dy into a PARTIAL row per block (written to scratch);
//       lnbwd_v2_reduce sums the cdiv(N, 8) partial rows in a fixed order. The partials are
//       N / 8 rows of 2 C floats: a quarter more traffic on top of x, dy, dx.
//   v3  persistent row groups, column sums kept across rows: a grid of one wave; a GROUP of W
//       warps takes rows g, g + T, g + 2T, ... (T groups in all), holds each row in registers
//       with 16-byte loads (ITEMS float4 a thread), and adds dy * xhat and dy of ITS columns to
//       running sums that live across all its rows (in a shared-memory slab of its own, "_s",
//       or in registers, "_r"). Only at the end does the block combine its groups (in group
//       order) and write ONE partial row: the partials shrink from N / 8 rows to one per block.
//       lnbwd_v2_reduce sums them.
//       Any C: each row is cut into a scalar head (up to its first 16-byte boundary), a float4
//       body and a scalar tail. T is a multiple of 4, so every row of a group has the same
//       r % 4, hence the same head (the row starts at r * C), and a thread owns the same columns
//       in every row: that is what lets the sums stay put for odd C too. gamma is kept in
//       shared memory, one copy per head among the block's groups, each shifted by its head so
//       the body's gamma float4 are 16-byte aligned.
//   v4  v3 in ONE launch: after writing its partial row a block takes a ticket (atomicAdd on a
//       counter). The last `reducers` blocks to arrive wait for the counter to reach the grid
//       size and then sum the partials, each a share of the column tiles, in the same fixed
//       order as lnbwd_v2_reduce (the result does not depend on who arrives last). The last
//       reducer to finish resets the counters for the next launch. The second launch, its gap
//       and its ramp-up are gone.
//
// Entry points of v3 / v4: lnbwd_v{3,4}_w{W}_i{ITEMS}_b{BLOCK}_{s|r}: W warps a row, ITEMS
// float4 of x and of dy a thread, BLOCK threads a block (BLOCK / (32 W) groups), sums in shared
// memory or registers. The body of a row must fit: C / 4 <= 32 * W * ITEMS (driver.py picks
// the config; wider rows run v2).
#include <cstdint>

#include "vec.cuh"
#include "warp.cuh"

using namespace cuda100;

// ---------------------------------------------------------------------------------------
// v1: two kernels
// ---------------------------------------------------------------------------------------

// dx only: one warp per row, 8 rows a block of 256. Loop 1 sums g and g * xhat; loop 2 reads
// the row again (from L1/L2) and writes dx.
extern "C" __global__ void __launch_bounds__(256) lnbwd_v1_dx(
    const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ gamma,
    const float* __restrict__ mean, const float* __restrict__ rstd, float* __restrict__ dx,
    int N, int C) {
    const int lane = threadIdx.x & 31;
    const int r = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (r >= N) return;  // a whole warp leaves together: the shuffles below stay full-mask
    const size_t base = (size_t)r * C;
    const float m = mean[r], rs = rstd[r];
    float s1 = 0.f, s2 = 0.f;
    for (int c = lane; c < C; c += 32) {
        const float xh = (x[base + c] - m) * rs, g = dy[base + c] * gamma[c];
        s1 += g;
        s2 += g * xh;
    }
    s1 = warp_sum(s1);
    s2 = warp_sum(s2);
    const float mg = s1 / C, mgx = s2 / C;
    for (int c = lane; c < C; c += 32) {
        const float xh = (x[base + c] - m) * rs, g = dy[base + c] * gamma[c];
        dx[base + c] = rs * ((g - mg) - xh * mgx);
    }
}

// dgamma and dbeta: block (32 columns) x (32 threads down the rows). Thread (tx, ty) sums rows
// ty, ty + 32, ...; the 32 partial sums of a column are then added in order ty = 0..31.
extern "C" __global__ void __launch_bounds__(1024) lnbwd_v1_dgamma(
    const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ mean,
    const float* __restrict__ rstd, float* __restrict__ dgamma, float* __restrict__ dbeta,
    int N, int C) {
    __shared__ float sg[32][33], sb[32][33];  // +1: column reads below hit 32 banks
    const int tx = threadIdx.x & 31, ty = threadIdx.x >> 5;
    const int c = blockIdx.x * 32 + tx;
    float a = 0.f, b = 0.f;
    if (c < C) {
        for (int r = ty; r < N; r += 32) {
            const float d = dy[(size_t)r * C + c];
            a += d * ((x[(size_t)r * C + c] - mean[r]) * rstd[r]);
            b += d;
        }
    }
    sg[ty][tx] = a;
    sb[ty][tx] = b;
    __syncthreads();
    if (ty == 0 && c < C) {
        for (int k = 1; k < 32; ++k) {
            a += sg[k][tx];
            b += sb[k][tx];
        }
        dgamma[c] = a;
        dbeta[c] = b;
    }
}

// ---------------------------------------------------------------------------------------
// The partial-row reduction (v2, v3 as its own kernel; v4 inside the main kernel)
// ---------------------------------------------------------------------------------------

// Sum P partial rows (row stride ld) of columns [tile * tw, tile * tw + tw) into dgamma and
// dbeta. The block is tw columns x (nthreads / tw) slices; slice s adds rows s, s + slices, ...
// in that order, then slice 0 adds the slices' sums in order 0, 1, ...: a fixed order for a
// given (P, tw, nthreads), whoever runs it. `red` holds 2 * nthreads floats of shared memory.
// Every thread of the block must call it (it has barriers).
__device__ __forceinline__ void reduce_tile(const float* __restrict__ part_dg,
                                            const float* __restrict__ part_db, int P, int ld,
                                            int C, int tile, int tw, float* red,
                                            float* __restrict__ dgamma,
                                            float* __restrict__ dbeta) {
    const int nthreads = blockDim.x, slices = nthreads / tw;
    const int col = threadIdx.x % tw, slice = threadIdx.x / tw;
    const int c = tile * tw + col;
    float a = 0.f, b = 0.f;
    if (c < C) {
#pragma unroll 4
        for (int p = slice; p < P; p += slices) {
            a += __ldcg(part_dg + (size_t)p * ld + c);  // .cg: written by other blocks; via L2
            b += __ldcg(part_db + (size_t)p * ld + c);
        }
    }
    red[threadIdx.x] = a;
    red[nthreads + threadIdx.x] = b;
    __syncthreads();
    if (slice == 0 && c < C) {
        for (int s = 1; s < slices; ++s) {
            a += red[s * tw + col];
            b += red[nthreads + s * tw + col];
        }
        dgamma[c] = a;
        dbeta[c] = b;
    }
    __syncthreads();  // red is free again for the next tile
}

// One block per tile (grid = cdiv(C, tw)); 256 threads; tw in {8, 16, 32}.
extern "C" __global__ void __launch_bounds__(256) lnbwd_v2_reduce(
    const float* __restrict__ part_dg, const float* __restrict__ part_db, int P, int ld, int C,
    int tw, float* __restrict__ dgamma, float* __restrict__ dbeta) {
    __shared__ float red[2 * 256];
    reduce_tile(part_dg, part_db, P, ld, C, blockIdx.x, tw, red, dgamma, dbeta);
}

// ---------------------------------------------------------------------------------------
// v2: dx and a partial row per 8 rows, in one pass
// ---------------------------------------------------------------------------------------
constexpr int V2_ROWS = 8;

extern "C" __global__ void __launch_bounds__(256) lnbwd_v2_rows(
    const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ gamma,
    const float* __restrict__ mean, const float* __restrict__ rstd, float* __restrict__ dx,
    float* __restrict__ part_dg, float* __restrict__ part_db, int N, int C) {
    __shared__ float2 sums[V2_ROWS];  // per row: (mean_c g, mean_c g * xhat)
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int r0 = blockIdx.x * V2_ROWS;
    const int rows = min(V2_ROWS, N - r0);
    if (warp < rows) {  // warp w: the sums of row r0 + w
        const int r = r0 + warp;
        const size_t base = (size_t)r * C;
        const float m = mean[r], rs = rstd[r];
        float s1 = 0.f, s2 = 0.f;
        for (int c = lane; c < C; c += 32) {
            const float xh = (x[base + c] - m) * rs, g = dy[base + c] * gamma[c];
            s1 += g;
            s2 += g * xh;
        }
        s1 = warp_sum(s1);
        s2 = warp_sum(s2);
        if (lane == 0) sums[warp] = make_float2(s1 / C, s2 / C);
    }
    __syncthreads();
    // the block walks the columns; for each, the block's rows in order (the second read of
    // x and dy comes from L1/L2: the 8 rows were just read)
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        const float gm = gamma[c];
        float a = 0.f, b = 0.f;
        for (int w = 0; w < rows; ++w) {
            const int r = r0 + w;
            const size_t i = (size_t)r * C + c;
            const float xh = (x[i] - mean[r]) * rstd[r], d = dy[i];
            a += d * xh;
            b += d;
            dx[i] = rstd[r] * ((d * gm - sums[w].x) - xh * sums[w].y);
        }
        part_dg[(size_t)blockIdx.x * C + c] = a;
        part_db[(size_t)blockIdx.x * C + c] = b;
    }
}

// ---------------------------------------------------------------------------------------
// v3 / v4: persistent row groups, column sums kept across rows, any C at float4 speed
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ float4 sub_mul(float4 v, float m, float s) {
    return make_float4((v.x - m) * s, (v.y - m) * s, (v.z - m) * s, (v.w - m) * s);
}
__device__ __forceinline__ float4 mul4(float4 a, float4 b) {
    return make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w);
}
__device__ __forceinline__ void add4(float4& a, float4 b) {
    a.x += b.x; a.y += b.y; a.z += b.z; a.w += b.w;
}
__device__ __forceinline__ void fma4(float4& a, float4 b, float4 c) {  // a += b * c
    a.x = fmaf(b.x, c.x, a.x); a.y = fmaf(b.y, c.y, a.y);
    a.z = fmaf(b.z, c.z, a.z); a.w = fmaf(b.w, c.w, a.w);
}
// rs * ((g - mg) - xh * mgx), element by element
__device__ __forceinline__ float4 dx4(float4 g, float4 xh, float mg, float mgx, float rs) {
    return make_float4(rs * fmaf(-xh.x, mgx, g.x - mg), rs * fmaf(-xh.y, mgx, g.y - mg),
                       rs * fmaf(-xh.z, mgx, g.z - mg), rs * fmaf(-xh.w, mgx, g.w - mg));
}

// The two row sums over a group of W warps, the same bits in every thread of the group.
// W > 1: lane 0 of each warp parks its warp's sums in slot[warp of the group], the group
// meets at its own barrier (named barrier 1 + group: groups of a block do not wait for each
// other; barrier 0 is __syncthreads), and every warp adds the W sums with the same butterfly.
// `slot` alternates between two buffers row by row, so a fast warp writing row k + 1's sums
// never overwrites row k's before a slow warp has read them (it would have to pass row k + 1's
// barrier first, which waits for the slow warp).
template <int W, int R>
__device__ __forceinline__ float2 group_sum2(float a, float b, float2* slot, int group) {
    a = warp_sum(a);
    b = warp_sum(b);
    if (W == 1) return make_float2(a, b);
    const int lane = threadIdx.x & 31, wig = (threadIdx.x >> 5) % W;
    if (lane == 0) slot[wig] = make_float2(a, b);
    if (R == 1) {
        __syncthreads();
    } else {
        asm volatile("bar.sync %0, %1;" ::"r"(1 + group), "r"(32 * W) : "memory");
    }
    const float2 v = lane < W ? slot[lane] : make_float2(0.f, 0.f);
    return make_float2(warp_sum(v.x), warp_sum(v.y));
}

// The head of the rows of group g (every row r of the group has r % 4 == g % 4, the grid
// holding a multiple of 4 groups): (r * C) % 4 floats past a 16-byte boundary, so h floats
// reach the next one.
__device__ __forceinline__ int head_of(int g, int C) { return min((-((g & 3) * (C & 3))) & 3, C); }

// Shared memory (dynamic, floats; cp = C rounded up to a multiple of 4, sl = cp + 4):
//   gamma copies [copies][cp]   copy k = gamma[h_k:] for the head h_k of group k of the block,
//                               so the group's body finds its gamma float4 16-byte aligned
//                               (copies = min(R, 4) for C % 4 != 0, else 1; group j reads copy
//                               j % copies, whose head is its own: R is 1, 2 or a multiple of 4)
//   slabs [R][2][sl]            each group's column sums (dgamma row, dbeta row) in SLAB layout:
//                               column c at c + s, s = (4 - h) % 4, so body float4 j sits at the
//                               aligned float4 j + (h > 0); SACC keeps them there for the whole
//                               loop (the registers then hold only the rows), otherwise the
//                               sums live in registers and land in the slab at the end (the
//                               slabs then overlay the gamma copies)
//   the tile reduction's 2 * BLOCK floats overlay everything at the very end
// driver.py: smem_floats() computes the same sizes.
template <int W, int ITEMS, int BLOCK, bool SACC, bool PF, bool FINISH>
__device__ __forceinline__ void lnbwd_main(
    const float* __restrict__ x, const float* __restrict__ dy, const float* __restrict__ gamma,
    const float* __restrict__ mean, const float* __restrict__ rstd, float* __restrict__ dx,
    float* __restrict__ part_dg, float* __restrict__ part_db, float* __restrict__ dgamma,
    float* __restrict__ dbeta, unsigned* __restrict__ counters, int N, int C, int tw,
    int reducers) {
    constexpr int GT = 32 * W;       // threads a group
    constexpr int R = BLOCK / GT;    // groups a block
    static_assert(BLOCK % GT == 0, "a block holds whole groups");
    static_assert(R == 1 || W == 1 || R <= 15, "named barriers 1..15");
    static_assert(R == 1 || R == 2 || R % 4 == 0, "group j's head is that of gamma copy j % copies");
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    __shared__ float2 slots[2][BLOCK / 32];

    const int tid = threadIdx.x;
    const int group = tid / GT, t = tid % GT;
    const int g = blockIdx.x * R + group;    // this group's first row
    const int T = gridDim.x * R;             // groups in the grid: a multiple of 4 (driver)
    const int cp = (C + 3) & ~3, sl = cp + 4;
    const int copies = (C & 3) ? min(R, 4) : 1;
    const int h = head_of(g, C);
    const int nb = (C - h) >> 2;             // float4 in the body
    const int tail = (C - h) & 3;            // floats after it
    const int tc = h + 4 * nb + t;           // the tail column of thread t (t < tail)
    const int s = (4 - h) & 3;               // slab shift
    float* slab = smem + (SACC ? copies * cp : 0) + group * 2 * sl;  // [2][sl]: dgamma, dbeta
    float4* slab_g4 = reinterpret_cast<float4*>(slab) + (h > 0);     // body float4 j at [j]
    float4* slab_b4 = reinterpret_cast<float4*>(slab + sl) + (h > 0);

    for (int k = 0; k < copies; ++k) {
        const int hk = head_of(blockIdx.x * R + k, C);
        for (int m = tid; m < C - hk; m += BLOCK) smem[k * cp + m] = gamma[m + hk];
    }
    if (SACC)
        for (int m = tid; m < R * 2 * sl; m += BLOCK) smem[copies * cp + m] = 0.f;
    __syncthreads();
    const float4* gam4 = reinterpret_cast<const float4*>(smem + (group % copies) * cp);

    float4 adg[SACC ? 1 : ITEMS], adb[SACC ? 1 : ITEMS];  // register sums (not SACC)
#pragma unroll
    for (int i = 0; i < (SACC ? 1 : ITEMS); ++i) adg[i] = adb[i] = make_float4(0.f, 0.f, 0.f, 0.f);
    float hdg = 0.f, hdb = 0.f, tdg = 0.f, tdb = 0.f;  // the head / tail column's sums
    const float gh = t < h ? gamma[t] : 0.f, gt = t < tail ? gamma[tc] : 0.f;
    const float invC = 1.f / C;

    // one row's share of this thread: body float4, head and tail floats, the row's statistics
    struct Row {
        float4 x[ITEMS], d[ITEMS];
        float m, rs, xs, ds, xt, dt;
    };
    auto load = [&](Row& w, int r) {
        const size_t base = (size_t)r * C;
        const float4* xr = reinterpret_cast<const float4*>(x + base + h);
        const float4* dr = reinterpret_cast<const float4*>(dy + base + h);
        w.m = mean[r];
        w.rs = rstd[r];
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = t + GT * i;
            if (j < nb) {
                w.x[i] = xr[j];
                w.d[i] = dr[j];
            }
        }
        w.xs = w.ds = w.xt = w.dt = 0.f;
        if (t < h) {
            w.xs = x[base + t];
            w.ds = dy[base + t];
        }
        if (t < tail) {
            w.xt = x[base + tc];
            w.dt = dy[base + tc];
        }
    };
    // PF: the next row's loads are issued before this row is reduced and written (two rows in
    // flight a group, twice the registers for them)
    Row cur, nxt;
    if (PF && g < N) load(cur, g);

    int parity = 0;
#pragma unroll 1
    for (int r = g; r < N; r += T) {
        const size_t base = (size_t)r * C;
        if (!PF) {
            load(cur, r);
        } else if (r + T < N) {
            load(nxt, r + T);
        }
        float4 (&xv)[ITEMS] = cur.x;
        float4 (&dv)[ITEMS] = cur.d;
        const float m = cur.m, rs = cur.rs;
        float xs = cur.xs, ds = cur.ds, xt = cur.xt, dt = cur.dt;
        float s1 = 0.f, s2 = 0.f;
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = t + GT * i;
            if (j < nb) {
                const float4 xh = sub_mul(xv[i], m, rs);
                if (SACC) {  // this thread alone owns slab float4 j of its group: no race
                    float4 a = slab_g4[j], b = slab_b4[j];
                    fma4(a, dv[i], xh);
                    add4(b, dv[i]);
                    slab_g4[j] = a;
                    slab_b4[j] = b;
                } else {
                    fma4(adg[SACC ? 0 : i], dv[i], xh);
                    add4(adb[SACC ? 0 : i], dv[i]);
                }
                const float4 gg = mul4(dv[i], gam4[j]);
                s1 += (gg.x + gg.y) + (gg.z + gg.w);
                s2 += (gg.x * xh.x + gg.y * xh.y) + (gg.z * xh.z + gg.w * xh.w);
                xv[i] = xh;  // keep xhat and g for dx
                dv[i] = gg;
            }
        }
        if (t < h) {
            const float xh = (xs - m) * rs, gg = ds * gh;
            hdb += ds;
            hdg = fmaf(ds, xh, hdg);
            s1 += gg;
            s2 += gg * xh;
            xs = xh;
            ds = gg;
        }
        if (t < tail) {
            const float xh = (xt - m) * rs, gg = dt * gt;
            tdb += dt;
            tdg = fmaf(dt, xh, tdg);
            s1 += gg;
            s2 += gg * xh;
            xt = xh;
            dt = gg;
        }
        const float2 sum = group_sum2<W, R>(s1, s2, slots[parity] + group * W, group);
        parity ^= 1;
        const float mg = sum.x * invC, mgx = sum.y * invC;
        float4* o = reinterpret_cast<float4*>(dx + base + h);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) {
            const int j = t + GT * i;
            if (j < nb) o[j] = dx4(dv[i], xv[i], mg, mgx, rs);
        }
        if (t < h) dx[base + t] = rs * fmaf(-xs, mgx, ds - mg);
        if (t < tail) dx[base + tc] = rs * fmaf(-xt, mgx, dt - mg);
        if (PF) cur = nxt;
    }

    // every group's sums into its slab (head and tail columns too; the body too unless SACC)
    if (!SACC) __syncthreads();  // the slabs overlay the gamma copies: everyone is done with them
#pragma unroll
    for (int i = 0; i < (SACC ? 0 : ITEMS); ++i) {
        const int j = t + GT * i;
        if (j < nb) {
            slab_g4[j] = adg[i];
            slab_b4[j] = adb[i];
        }
    }
    if (t < h) {
        slab[t + s] = hdg;
        slab[sl + t + s] = hdb;
    }
    if (t < tail) {
        slab[tc + s] = tdg;
        slab[sl + tc + s] = tdb;
    }
    __syncthreads();
    // the block's partial row: column c is the sum over groups k = 0, 1, ... (in that order) of
    // slab k at c + s_k; one float4 of columns a thread, stored to row blockIdx.x (stride cp)
    const float* slabs = smem + (SACC ? copies * cp : 0);
    float* pdg = part_dg + (size_t)blockIdx.x * cp;
    float* pdb = part_db + (size_t)blockIdx.x * cp;
    for (int j = tid; j < cp / 4; j += BLOCK) {
        float a[4] = {0.f, 0.f, 0.f, 0.f}, b[4] = {0.f, 0.f, 0.f, 0.f};
        for (int k = 0; k < R; ++k) {
            const int sk = (4 - head_of(blockIdx.x * R + k, C)) & 3;
            const float* sg = slabs + k * 2 * sl + sk;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                if (4 * j + e < C) {
                    a[e] += sg[4 * j + e];
                    b[e] += sg[sl + 4 * j + e];
                }
            }
        }
        store4(pdg + 4 * j, make_float4(a[0], a[1], a[2], a[3]));
        store4(pdb + 4 * j, make_float4(b[0], b[1], b[2], b[3]));
    }
    if (!FINISH) return;

    // v4: the last `reducers` blocks to arrive sum the partial rows
    __shared__ unsigned ticket;
    __threadfence();  // this thread's partial stores are visible GPU-wide before the ticket
    __syncthreads();
    if (tid == 0) ticket = atomicAdd(&counters[0], 1u);
    __syncthreads();
    const unsigned first = gridDim.x - reducers;
    if (ticket < first) return;
    // Only blocks that have finished their rows wait here, and at most reducers - 1 of them
    // wait while another block has yet to arrive: with fewer reducers than block slots on the
    // GPU (the driver keeps reducers <= SMs) the late blocks always find a slot, no deadlock.
    if (tid == 0) {
        while (*reinterpret_cast<volatile unsigned*>(&counters[0]) < gridDim.x) __nanosleep(32);
        __threadfence();
    }
    __syncthreads();
    const int tiles = (C + tw - 1) / tw;
    for (int tile = ticket - first; tile < tiles; tile += reducers)
        reduce_tile(part_dg, part_db, gridDim.x, cp, C, tile, tw, smem, dgamma, dbeta);
    if (tid == 0) {
        // every reducer has left the wait loop before the last one gets here: reset for the
        // next launch (kernel completion orders it before the next launch's tickets)
        if (atomicAdd(&counters[1], 1u) == (unsigned)reducers - 1) {
            atomicExch(&counters[0], 0u);
            atomicExch(&counters[1], 0u);
        }
    }
}

// 128 registers a thread at most (BLOCK 256: two blocks an SM; 1024: 64 registers)
#define LNBWD_MINB(B) ((B) >= 512 ? 1 : 512 / (B))
#define LNBWD_ARGS                                                                             \
    const float *__restrict__ x, const float *__restrict__ dy, const float *__restrict__ gamma, \
        const float *__restrict__ mean, const float *__restrict__ rstd, float *__restrict__ dx, \
        float *__restrict__ part_dg, float *__restrict__ part_db, float *__restrict__ dgamma,   \
        float *__restrict__ dbeta, unsigned *__restrict__ counters, int N, int C, int tw,      \
        int reducers
#define LNBWD_PASS x, dy, gamma, mean, rstd, dx, part_dg, part_db, dgamma, dbeta, counters, N, C, tw, reducers
// NAME: s = column sums in shared memory (SACC), r = in registers; p = next row prefetched (PF)
#define LNBWD_MAIN(W, I, B, NAME, SA, PF)                                                      \
    extern "C" __global__ void __launch_bounds__(B, LNBWD_MINB(B))                             \
        lnbwd_v3_w##W##_i##I##_b##B##_##NAME(LNBWD_ARGS) {                                      \
        lnbwd_main<W, I, B, SA, PF, false>(LNBWD_PASS);                                        \
    }                                                                                          \
    extern "C" __global__ void __launch_bounds__(B, LNBWD_MINB(B))                             \
        lnbwd_v4_w##W##_i##I##_b##B##_##NAME(LNBWD_ARGS) {                                      \
        lnbwd_main<W, I, B, SA, PF, true>(LNBWD_PASS);                                         \
    }

// the configurations driver.py picks from (CONFIGS there: the first that holds the row)
LNBWD_MAIN(1, 2, 256, s, true, false)    // bodies up to 256 floats
LNBWD_MAIN(1, 4, 256, s, true, false)    // 512
LNBWD_MAIN(1, 6, 256, s, true, false)    // 768
LNBWD_MAIN(1, 8, 256, s, true, false)    // 1024
LNBWD_MAIN(2, 8, 256, s, true, false)    // 2048
LNBWD_MAIN(4, 6, 256, s, true, false)    // 3072
LNBWD_MAIN(4, 8, 256, s, true, false)    // 4096
LNBWD_MAIN(8, 8, 256, s, true, false)    // 8192
// the sweep's other candidates (EXTRA_CONFIGS, .notes/day35_sweep.py)
LNBWD_MAIN(2, 3, 256, s, true, false)    // 768
LNBWD_MAIN(4, 2, 256, s, true, false)    // 1024
LNBWD_MAIN(8, 4, 256, s, true, false)    // 4096
LNBWD_MAIN(16, 2, 512, s, true, false)   // 4096
LNBWD_MAIN(16, 4, 512, s, true, false)   // 8192
LNBWD_MAIN(2, 3, 256, r, false, false)   // 768, sums in registers
LNBWD_MAIN(8, 4, 256, r, false, false)   // 4096
LNBWD_MAIN(16, 2, 512, r, false, false)  // 4096
LNBWD_MAIN(32, 1, 1024, r, false, false) // 4096
LNBWD_MAIN(8, 3, 256, r, false, false)   // 3072
LNBWD_MAIN(2, 3, 256, sp, true, true)    // 768, next row prefetched
LNBWD_MAIN(4, 2, 256, sp, true, true)    // 1024
LNBWD_MAIN(8, 4, 256, sp, true, true)    // 4096
LNBWD_MAIN(16, 2, 512, sp, true, true)   // 4096
LNBWD_MAIN(8, 3, 256, sp, true, true)    // 3072
