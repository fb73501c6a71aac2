// Day 31: 2D convolution of a batch of multi-channel images (NCHW), fp32, with padding, stride
// and bias, as a CNN layer computes it (torch.nn.functional.conv2d):
//
//   y[n,k,oy,ox] = b[k] + sum_{c,r,s} w[k,c,r,s] * x[n, c, oy*S - P + r, ox*S - P + s]
//
//   x [N, C, H, W], w [K, C, R, R], b [K], y [N, K, Ho, Wo],  Ho = (H + 2P - R) / S + 1 (Wo alike);
//   x is 0 outside the image (zero padding P). Like cuDNN, a cross-correlation (w not flipped).
//
// Build on its own:  nvcc -arch=sm_90 -O3 -std=c++17 -I ../../common/cuda -cubin kernel.cu
// Run:               python run_day.py 31
//
// Every output is C*R*R multiply-adds over a window of the input; neighbouring outputs share
// most of their window, and all outputs of one channel k share the filter w[k]. The versions
// are about where those shared operands come from:
//
//   v1  naive: one thread an output, x and w read from global memory (L1/L2 catch the reuse).
//   v2  the filter (and bias) in __constant__ memory. A block works on one output channel, so
//       all 32 threads of a warp read the same w[k,c,r,s] at the same time: the constant cache
//       serves one address to the whole warp in one access. It holds 64 KB: c_w below is
//       15360 floats (60 KB), and a layer's filter (ResNet 64->64, 3x3: 147 KB) may not fit,
//       so the driver cuts it into slices of kc output channels x cc input channels, copies
//       each into c_w (a device-to-device copy on the stream, ordered with the launches) and
//       launches once a slice; slices after the first input-channel slice add into y.
//   v3  v2 + a shared-memory input tile with a halo: a 32 x 8 block of outputs loads the
//       (7S + R) x (31S + R) input pixels they read, one input channel at a time, once, with
//       coalesced loads and zeros outside the image; the R*R taps then read shared memory.
//   v4  v3 + register blocking over output channels: each thread computes 8 output channels
//       of its pixel from the same shared tile, so the tile is loaded once for 8 channels (v3
//       loads it once a channel). The 8 filter values of a tap still come from c_w.
//   v5  the filter moves to shared memory too, one chunk of CB input channels with the input
//       tile, and each thread computes TM neighbouring outputs of a row x TN output channels
//       (a TM x TN block of accumulators in registers). For one filter row r the TM outputs
//       read (TM-1)S + R consecutive inputs: loaded once (16-byte loads) and reused for all R
//       taps s, and each tap's TN filter values come in TN/4 16-byte loads. At TM = TN = 8,
//       R = 3: 9 shared loads feed 192 FMAs. R, S and the tile are template parameters (the
//       window is a register array: its size must be known at compile time); one launch,
//       no filter-size limit. Instantiated for R in {1,3,5,7} x S in {1,2}; other filters
//       run v4 (the driver says "= v4").
//   v6  v5 with the global -> shared copies done by cp.async into two buffers: the copy of
//       chunk t+1 runs while chunk t is computed (no registers in between, zeros written by
//       the copy itself for the padding).
//
// Tiles of v5/v6 (name: TM x TN outputs a thread, BX x BY x BZ threads, CB channels a chunk):
//   gen  4x8, 8x8x4, CB 4: a 32 x 8 pixel x 32 channel tile, any (R, S) instantiated
//   m1*  the MNIST CNN's first layer (1 -> 8 channels, 28x28): 28-wide rows, CB = 1
//   m2*  its second layer (8 -> 16 channels, 14x14): 14-wide rows, all 8 channels in one chunk
//   r*   the ResNet 3x3 layer (64 -> 64 channels, 56x56): 56-wide rows, 32 or 64 channels a block
// The driver picks one by shape (driver.tile_for); .notes/day31_sweep.py times the candidates.
// Each entry point caps its registers (__maxnreg__) so that two blocks fit an SM.
#include <cstdint>

#include "sgemm.cuh"   // cp.async helpers (day 25): sgemm::detail::cp_async4, commit, wait
#include "vec.cuh"

using namespace cuda100;

#define CONST_W_FLOATS 15360   // 60 KB of filter slice ...
#define CONST_B_FLOATS 1024    // ... + 4 KB of bias: the 64 KB of user constant memory
__constant__ float c_w[CONST_W_FLOATS];   // w[k0 : k0+kc, c0 : c0+cc, :, :], contiguous
__constant__ float c_b[CONST_B_FLOATS];   // b[k0 : k0+kc]

// ---------------------------------------------------------------------------------------
// v1: naive. grid (cdiv(Ho*Wo, 256), K, N): a block covers 256 outputs of one channel plane.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(256)
conv2d_v1(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
          float* __restrict__ y, int C, int H, int W, int K, int R, int S, int P, int Ho, int Wo) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= Ho * Wo) return;
    const int k = blockIdx.y, n = blockIdx.z;
    const int oy = p / Wo, ox = p - oy * Wo;
    float acc = b[k];
    for (int c = 0; c < C; ++c) {
        const float* xc = x + (n * C + c) * H * W;
        const float* wc = w + (k * C + c) * R * R;
        for (int r = 0; r < R; ++r) {
            const int iy = oy * S - P + r;
            if (iy < 0 || iy >= H) continue;
            for (int s = 0; s < R; ++s) {
                const int ix = ox * S - P + s;
                if (ix < 0 || ix >= W) continue;
                acc += xc[iy * W + ix] * wc[r * R + s];
            }
        }
    }
    y[(n * K + k) * Ho * Wo + p] = acc;
}

// ---------------------------------------------------------------------------------------
// v2: v1 with w and b from constant memory. One launch a slice: output channels
// k0 .. k0 + gridDim.y, input channels c0 .. c0 + cc (c_w holds that slice, [kc][cc][R][R]).
// The first input-channel slice (c0 == 0) starts from the bias, later ones add into y.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void __launch_bounds__(256)
conv2d_v2(const float* __restrict__ x, float* __restrict__ y, int C, int H, int W, int K, int R,
          int S, int P, int Ho, int Wo, int k0, int c0, int cc) {
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= Ho * Wo) return;
    const int kl = blockIdx.y, n = blockIdx.z;      // kl: channel within the slice
    const int oy = p / Wo, ox = p - oy * Wo;
    float acc = c0 == 0 ? c_b[kl] : 0.f;
    for (int c = 0; c < cc; ++c) {
        const float* xc = x + (n * C + c0 + c) * H * W;
        const float* wc = c_w + (kl * cc + c) * R * R;   // the same address in every thread
        for (int r = 0; r < R; ++r) {
            const int iy = oy * S - P + r;
            if (iy < 0 || iy >= H) continue;
            for (int s = 0; s < R; ++s) {
                const int ix = ox * S - P + s;
                if (ix < 0 || ix >= W) continue;
                acc += xc[iy * W + ix] * wc[r * R + s];
            }
        }
    }
    float* out = y + (n * K + k0 + kl) * Ho * Wo + p;
    *out = c0 == 0 ? acc : *out + acc;
}

// ---------------------------------------------------------------------------------------
// v3: a 32 x 8 tile of outputs per block (block 32 x 8 threads), its input window staged in
// shared memory one input channel at a time: (7S + R) rows x (31S + R) columns, zeros outside
// the image. grid (tiles of the plane, kc, N); dynamic shared memory IH * IW floats.
// ---------------------------------------------------------------------------------------
#define TILE_X 32
#define TILE_Y 8

__device__ __forceinline__ void load_plane_tile(float* tile, const float* __restrict__ xc,
                                                int H, int W, int iy0, int ix0, int IH, int IW) {
    const int tid = threadIdx.y * TILE_X + threadIdx.x;
    for (int i = tid; i < IH * IW; i += TILE_X * TILE_Y) {
        const int iy = i / IW, ix = i - iy * IW;
        const int gy = iy0 + iy, gx = ix0 + ix;
        tile[i] = ((unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)W) ? xc[gy * W + gx] : 0.f;
    }
}

extern "C" __global__ void __launch_bounds__(TILE_X * TILE_Y)
conv2d_v3(const float* __restrict__ x, float* __restrict__ y, int C, int H, int W, int K, int R,
          int S, int P, int Ho, int Wo, int k0, int c0, int cc) {
    extern __shared__ float tile[];
    const int IH = (TILE_Y - 1) * S + R, IW = (TILE_X - 1) * S + R;
    const int tiles_x = (Wo + TILE_X - 1) / TILE_X;
    const int oy0 = blockIdx.x / tiles_x * TILE_Y, ox0 = blockIdx.x % tiles_x * TILE_X;
    const int kl = blockIdx.y, n = blockIdx.z;
    const int oy = oy0 + threadIdx.y, ox = ox0 + threadIdx.x;
    float acc = c0 == 0 ? c_b[kl] : 0.f;
    for (int c = 0; c < cc; ++c) {
        __syncthreads();                          // the previous channel's tile is used up
        load_plane_tile(tile, x + (n * C + c0 + c) * H * W, H, W, oy0 * S - P, ox0 * S - P, IH, IW);
        __syncthreads();
        const float* wc = c_w + (kl * cc + c) * R * R;
        const float* in = tile + threadIdx.y * S * IW + threadIdx.x * S;
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) acc += in[r * IW + s] * wc[r * R + s];
    }
    if (oy < Ho && ox < Wo) {                     // threads past the edge only helped load
        float* out = y + ((n * K + k0 + kl) * Ho + oy) * Wo + ox;
        *out = c0 == 0 ? acc : *out + acc;
    }
}

// ---------------------------------------------------------------------------------------
// v4: v3 with 8 output channels a thread (register blocking over K): one tile load serves 8
// channels. grid (tiles of the plane, cdiv(kc, 8), N). Channels past the slice compute with a
// clamped filter index (in bounds) and are not stored.
// ---------------------------------------------------------------------------------------
#define V4_TN 8

extern "C" __global__ void __launch_bounds__(TILE_X * TILE_Y)
conv2d_v4(const float* __restrict__ x, float* __restrict__ y, int C, int H, int W, int K, int R,
          int S, int P, int Ho, int Wo, int k0, int c0, int cc, int kc) {
    extern __shared__ float tile[];
    const int IH = (TILE_Y - 1) * S + R, IW = (TILE_X - 1) * S + R, RR = R * R;
    const int tiles_x = (Wo + TILE_X - 1) / TILE_X;
    const int oy0 = blockIdx.x / tiles_x * TILE_Y, ox0 = blockIdx.x % tiles_x * TILE_X;
    const int kl0 = blockIdx.y * V4_TN, n = blockIdx.z;
    const int oy = oy0 + threadIdx.y, ox = ox0 + threadIdx.x;
    int woff[V4_TN];                              // where each channel's filter starts in c_w
    float acc[V4_TN];
#pragma unroll
    for (int j = 0; j < V4_TN; ++j) {
        const int kl = min(kl0 + j, kc - 1);
        woff[j] = kl * cc * RR;
        acc[j] = c0 == 0 ? c_b[kl] : 0.f;
    }
    for (int c = 0; c < cc; ++c) {
        __syncthreads();
        load_plane_tile(tile, x + (n * C + c0 + c) * H * W, H, W, oy0 * S - P, ox0 * S - P, IH, IW);
        __syncthreads();
        const float* in = tile + threadIdx.y * S * IW + threadIdx.x * S;
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < R; ++s) {
                const float v = in[r * IW + s];
                const int t = c * RR + r * R + s;
#pragma unroll
                for (int j = 0; j < V4_TN; ++j) acc[j] += v * c_w[woff[j] + t];
            }
    }
    if (oy < Ho && ox < Wo) {
#pragma unroll
        for (int j = 0; j < V4_TN; ++j) {
            if (kl0 + j >= kc) break;
            float* out = y + ((n * K + k0 + kl0 + j) * Ho + oy) * Wo + ox;
            *out = c0 == 0 ? acc[j] : *out + acc[j];
        }
    }
}

// ---------------------------------------------------------------------------------------
// v5 / v6: register-blocked direct convolution, the input tile and the filter chunk in
// shared memory.
// ---------------------------------------------------------------------------------------
namespace conv {

constexpr int round4(int v) { return (v + 3) / 4 * 4; }
constexpr int imax(int a, int b) { return a > b ? a : b; }

template <int R_, int S_, int TM_, int TN_, int BX_, int BY_, int BZ_, int CB_>
struct Tile {
    static constexpr int R = R_, S = S_, RR = R_ * R_;
    static constexpr int TM = TM_, TN = TN_;           // outputs a thread: TM columns x TN channels
    static constexpr int BX = BX_, BY = BY_, BZ = BZ_; // threads across columns, rows, channels
    static constexpr int CB = CB_;                     // input channels a chunk
    static constexpr int THREADS = BX * BY * BZ;
    static constexpr int TW = BX * TM, TH = BY, TK = BZ * TN;   // the block's output tile
    static constexpr int WL = (TM - 1) * S + R;        // input columns one thread's TM outputs read
    static constexpr bool VEC = (TM * S) % 4 == 0;     // each thread's window starts 16-byte aligned
    static constexpr int WLV = VEC ? round4(WL) : WL;  // floats it loads (whole float4s)
    static constexpr int IH = (TH - 1) * S + R;        // input tile rows and columns
    static constexpr int IW = (TW - 1) * S + R;
    static constexpr int IWP = round4(imax(IW, (BX - 1) * TM * S + WLV));  // row pitch
    static constexpr int TKP = TK + 4;                 // filter row pitch: conflict-free stores
    static constexpr int IN = CB * IH * IWP;           // floats of one input chunk
    static constexpr int WF = CB * RR * TKP;           // floats of one filter chunk
    static constexpr int STAGE = IN + WF;
    static_assert(TN % 4 == 0, "TN must be a multiple of 4 (16-byte filter loads)");
};

// Filter layout in shared memory: row (cc*RR + r*R + s), pitch TKP; within a row, channel
// kk = tz*TN + j sits at slot ((j/4)*BZ + tz)*4 + j%4, so thread tz's q-th float4 is at
// (q*BZ + tz)*4 and the BZ threads of a quarter warp read BZ consecutive float4s.
template <class T>
__device__ __forceinline__ int slot_of_quad(int kq) {          // kq = kk / 4
    constexpr int QN = T::TN / 4;
    return ((kq % QN) * T::BZ + kq / QN) * 4;
}

// One chunk of CB input channels of the (IH x IW) window, zeros outside the image (and in
// the pitch padding). Coalesced: consecutive threads, consecutive columns.
template <class T, bool ASYNC>
__device__ __forceinline__ void load_input(float* s_in, const float* __restrict__ x, int n,
                                           int c0, int iy0, int ix0, int C, int H, int W) {
    for (int i = threadIdx.x; i < T::IN; i += T::THREADS) {
        const int cc = i / (T::IH * T::IWP);
        const int rem = i - cc * (T::IH * T::IWP);
        const int iy = rem / T::IWP, ix = rem - iy * T::IWP;
        const int c = c0 + cc, gy = iy0 + iy, gx = ix0 + ix;
        const bool ok = c < C && (unsigned)gy < (unsigned)H && (unsigned)gx < (unsigned)W &&
                        ix < T::IW;
        const float* src = ok ? x + ((n * C + c) * H + gy) * W + gx : x;
        if constexpr (ASYNC) sgemm::detail::cp_async4(s_in + i, src, ok);   // zero-fills if !ok
        else s_in[i] = ok ? *src : 0.f;
    }
}

// One chunk of the filter, w[k0 : k0+TK, c0 : c0+CB, :, :] -> shared rows (cc*RR + rs).
// A warp covers 8 consecutive rows x 4 consecutive channels: in global memory 4 runs of 8
// consecutive floats; in shared memory rows TKP = TK + 4 floats apart, 8 rows x 4 channels
// land in 32 different banks (TK % 8 == 0).
template <class T, bool ASYNC>
__device__ __forceinline__ void load_filter(float* s_w, const float* __restrict__ w, int k0,
                                            int c0, int C, int K) {
    constexpr int CBRR = T::CB * T::RR, ROWS8 = (CBRR + 7) / 8 * 8, KQ = T::TK / 4;
    const int rows_left = (C - c0) * T::RR;          // rows of this chunk inside the filter
    for (int i = threadIdx.x; i < ROWS8 * T::TK; i += T::THREADS) {
        const int r8 = i & 7, jj = (i >> 3) & 3, rest = i >> 5;
        const int kq = rest % KQ, row = (rest / KQ) * 8 + r8;
        if (row >= CBRR) continue;
        const int k = k0 + kq * 4 + jj;
        const bool ok = k < K && row < rows_left;
        const float* src = ok ? w + (k * C + c0) * T::RR + row : w;
        float* dst = s_w + row * T::TKP + slot_of_quad<T>(kq) + jj;
        if constexpr (ASYNC) sgemm::detail::cp_async4(dst, src, ok);
        else *dst = ok ? *src : 0.f;
    }
}

// The multiply-adds of one chunk: for each channel and filter row, the thread's input window
// (WL floats) once, then for each tap s its TN filter values and TM x TN FMAs.
template <class T>
__device__ __forceinline__ void compute_chunk(const float* s_in, const float* s_w, int tx, int ty,
                                              int tz, float (&acc)[T::TM][T::TN]) {
#pragma unroll 1
    for (int cc = 0; cc < T::CB; ++cc) {
#pragma unroll
        for (int r = 0; r < T::R; ++r) {
            const float* row = s_in + (cc * T::IH + ty * T::S + r) * T::IWP + tx * T::TM * T::S;
            float win[T::WLV];
            if constexpr (T::VEC) {
#pragma unroll
                for (int v = 0; v < T::WLV / 4; ++v) {
                    const float4 t = load4(row + 4 * v);
                    win[4 * v] = t.x, win[4 * v + 1] = t.y, win[4 * v + 2] = t.z, win[4 * v + 3] = t.w;
                }
            } else {
#pragma unroll
                for (int v = 0; v < T::WLV; ++v) win[v] = row[v];
            }
#pragma unroll
            for (int s = 0; s < T::R; ++s) {
                const float* wr = s_w + (cc * T::RR + r * T::R + s) * T::TKP + tz * 4;
                float wv[T::TN];
#pragma unroll
                for (int q = 0; q < T::TN / 4; ++q) {
                    const float4 t = load4(wr + q * T::BZ * 4);
                    wv[4 * q] = t.x, wv[4 * q + 1] = t.y, wv[4 * q + 2] = t.z, wv[4 * q + 3] = t.w;
                }
#pragma unroll
                for (int i = 0; i < T::TM; ++i)
#pragma unroll
                    for (int j = 0; j < T::TN; ++j)
                        acc[i][j] = fmaf(win[i * T::S + s], wv[j], acc[i][j]);
            }
        }
    }
}

// Where this block and thread work. Threads: tz fastest (the BZ channel groups of a pixel
// group share their input window: one address, a broadcast), then tx, then ty.
struct Place {
    int n, k0, oy0, ox0, tx, ty, tz;
};

template <class T>
__device__ __forceinline__ Place place(int Wo) {
    const int tiles_x = (Wo + T::TW - 1) / T::TW;
    Place p;
    p.oy0 = blockIdx.x / tiles_x * T::TH;
    p.ox0 = blockIdx.x % tiles_x * T::TW;
    p.k0 = blockIdx.y * T::TK;
    p.n = blockIdx.z;
    p.tz = threadIdx.x % T::BZ;
    p.tx = threadIdx.x / T::BZ % T::BX;
    p.ty = threadIdx.x / (T::BZ * T::BX);
    return p;
}

template <class T>
__device__ __forceinline__ void init_bias(const Place& p, const float* __restrict__ b, int K,
                                          float (&acc)[T::TM][T::TN]) {
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
        const int k = p.k0 + p.tz * T::TN + j;
        const float bk = k < K ? b[k] : 0.f;
#pragma unroll
        for (int i = 0; i < T::TM; ++i) acc[i][j] = bk;
    }
}

// TM consecutive outputs of each of TN channel planes: float4 (or float2) stores where the
// row allows them (Wo a multiple of 4 and the TM outputs inside the row), else one by one.
template <class T>
__device__ __forceinline__ void store(const Place& p, float* __restrict__ y, int K, int Ho, int Wo,
                                      const float (&acc)[T::TM][T::TN]) {
    const int oy = p.oy0 + p.ty, ox = p.ox0 + p.tx * T::TM;
    if (oy >= Ho || ox >= Wo) return;
    const bool whole = ox + T::TM <= Wo;
    const bool v4 = T::TM % 4 == 0 && Wo % 4 == 0 && whole;
    const bool v2 = T::TM % 2 == 0 && Wo % 2 == 0 && whole;
#pragma unroll
    for (int j = 0; j < T::TN; ++j) {
        const int k = p.k0 + p.tz * T::TN + j;
        if (k >= K) break;
        float* out = y + ((p.n * K + k) * Ho + oy) * Wo + ox;
        if (v4) {
#pragma unroll
            for (int i = 0; i + 3 < T::TM; i += 4)
                store4(out + i, make_float4(acc[i][j], acc[i + 1][j], acc[i + 2][j], acc[i + 3][j]));
        } else if (v2) {
#pragma unroll
            for (int i = 0; i + 1 < T::TM; i += 2)
                *reinterpret_cast<float2*>(out + i) = make_float2(acc[i][j], acc[i + 1][j]);
        } else {
#pragma unroll
            for (int i = 0; i < T::TM; ++i)
                if (ox + i < Wo) out[i] = acc[i][j];
        }
    }
}

// v5: load a chunk, barrier, compute it, barrier: the copy and the FMAs take turns.
template <class T>
__device__ __forceinline__ void direct_v5(const float* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, float* __restrict__ y,
                                          int C, int H, int W, int K, int P, int Ho, int Wo) {
    extern __shared__ float4 smem4[];
    float* s_in = reinterpret_cast<float*>(smem4);
    float* s_w = s_in + T::IN;
    const Place p = place<T>(Wo);
    float acc[T::TM][T::TN];
    init_bias<T>(p, b, K, acc);
    for (int c0 = 0; c0 < C; c0 += T::CB) {
        __syncthreads();                               // the last chunk is used up
        load_input<T, false>(s_in, x, p.n, c0, p.oy0 * T::S - P, p.ox0 * T::S - P, C, H, W);
        load_filter<T, false>(s_w, w, p.k0, c0, C, K);
        __syncthreads();
        compute_chunk<T>(s_in, s_w, p.tx, p.ty, p.tz, acc);
    }
    store<T>(p, y, K, Ho, Wo, acc);
}

// v6: two buffers; cp.async fills buffer (t+1)%2 while buffer t%2 is computed. Each thread
// waits for its own copies (wait_group 1: all but the newest group landed), the barrier makes
// everyone's visible; the second barrier keeps a buffer from being refilled while read.
// With a single chunk (C <= CB) only one buffer is allocated and used.
template <class T>
__device__ __forceinline__ void direct_v6(const float* __restrict__ x, const float* __restrict__ w,
                                          const float* __restrict__ b, float* __restrict__ y,
                                          int C, int H, int W, int K, int P, int Ho, int Wo) {
    extern __shared__ float4 smem4[];
    float* smem = reinterpret_cast<float*>(smem4);
    const Place p = place<T>(Wo);
    const int iy0 = p.oy0 * T::S - P, ix0 = p.ox0 * T::S - P;
    const int chunks = (C + T::CB - 1) / T::CB;
    float acc[T::TM][T::TN];
    init_bias<T>(p, b, K, acc);
    load_input<T, true>(smem, x, p.n, 0, iy0, ix0, C, H, W);
    load_filter<T, true>(smem + T::IN, w, p.k0, 0, C, K);
    sgemm::detail::cp_async_commit();
    for (int t = 0; t < chunks; ++t) {
        if (t + 1 < chunks) {
            float* next = smem + ((t + 1) & 1) * T::STAGE;
            load_input<T, true>(next, x, p.n, (t + 1) * T::CB, iy0, ix0, C, H, W);
            load_filter<T, true>(next + T::IN, w, p.k0, (t + 1) * T::CB, C, K);
        }
        sgemm::detail::cp_async_commit();             // (an empty group on the last chunk)
        sgemm::detail::cp_async_wait<1>();            // chunk t has landed (this thread's part)
        __syncthreads();                               // ... and everyone's
        const float* cur = smem + (t & 1) * T::STAGE;
        compute_chunk<T>(cur, cur + T::IN, p.tx, p.ty, p.tz, acc);
        __syncthreads();                               // buffer t%2 is free for chunk t+2
    }
    sgemm::detail::cp_async_wait<0>();
    store<T>(p, y, K, Ho, Wo, acc);
}

// The most registers a thread may use so that two blocks of `threads` fit on an SM (64K
// registers, given out per warp in units of 256): the kernels are written for >= 2 blocks an
// SM, so one block's barrier stalls are covered by the other's work.
constexpr int regs_for_two_blocks(int threads) {
    const int warps = (threads + 31) / 32;
    const int r = 65536 / (2 * warps * 32) / 8 * 8;
    return r > 255 ? 255 : r;
}

}  // namespace conv

#define CONV_ENTRY(NAME, FN, R, S, TM, TN, BX, BY, BZ, CB)                                      \
    extern "C" __global__ void __maxnreg__(conv::regs_for_two_blocks((BX) * (BY) * (BZ)))        \
        NAME(const float* __restrict__ x, const float* __restrict__ w,                          \
             const float* __restrict__ b, float* __restrict__ y, int C, int H, int W, int K,    \
             int P, int Ho, int Wo) {                                                           \
        conv::FN<conv::Tile<R, S, TM, TN, BX, BY, BZ, CB>>(x, w, b, y, C, H, W, K, P, Ho, Wo); \
    }

// Every tile as a v5 and a v6 entry point: conv2d_<version>_r<R>s<S>_<tile>. driver.TILES
// lists the same shapes (tests/days/test_day31.py checks that they agree).
#define BOTH(R, S, NAME, TM, TN, BX, BY, BZ, CB)                                                \
    CONV_ENTRY(conv2d_v5_r##R##s##S##_##NAME, direct_v5, R, S, TM, TN, BX, BY, BZ, CB)          \
    CONV_ENTRY(conv2d_v6_r##R##s##S##_##NAME, direct_v6, R, S, TM, TN, BX, BY, BZ, CB)

// the general tile, for every (R, S) instantiated
#define GEN(R, S) BOTH(R, S, gen, 4, 8, 8, 8, 4, 4)
GEN(1, 1) GEN(1, 2) GEN(3, 1) GEN(3, 2) GEN(5, 1) GEN(5, 2) GEN(7, 1) GEN(7, 2)

// 3x3, stride 1: the candidates for the three layers of the day (the sweep times them)
//   MNIST layer 1 (1 -> 8, 28x28): 28-wide rows, all 8 channels, one input channel a chunk
BOTH(3, 1, m1a, 4, 8, 7, 7, 1, 1)    //  49 threads: 28 x 7 x 8 tile, 256 blocks at batch 64
BOTH(3, 1, m1b, 4, 4, 7, 7, 2, 1)    //  98 threads: 28 x 7 x 8
BOTH(3, 1, m1c, 4, 8, 7, 14, 1, 1)   //  98 threads: 28 x 14 x 8, 128 blocks
//   MNIST layer 2 (8 -> 16, 14x14): 14-wide rows, all 16 channels, the 8 inputs in one chunk
BOTH(3, 1, m2a, 2, 8, 7, 7, 2, 8)    //  98 threads: 14 x 7 x 16, 128 blocks
BOTH(3, 1, m2b, 2, 4, 7, 7, 4, 8)    // 196 threads: 14 x 7 x 16
BOTH(3, 1, m2c, 2, 4, 7, 14, 4, 8)   // 392 threads: 14 x 14 x 16, 64 blocks
//   ResNet 3x3 (64 -> 64, 56x56): 56-wide rows
BOTH(3, 1, r1, 8, 8, 7, 4, 8, 8)     // 224 threads: 56 x 4 x 64, 448 blocks at batch 32
BOTH(3, 1, r2, 8, 8, 7, 8, 4, 8)     // 224 threads: 56 x 8 x 32
BOTH(3, 1, r3, 4, 8, 14, 2, 8, 8)    // 224 threads: 56 x 2 x 64, 896 blocks
BOTH(3, 1, r4, 4, 16, 14, 4, 4, 8)   // 224 threads: 56 x 4 x 64
BOTH(3, 1, r5, 8, 8, 7, 7, 4, 8)     // 196 threads: 56 x 7 x 32, 512 blocks (1.94 waves of 264)
