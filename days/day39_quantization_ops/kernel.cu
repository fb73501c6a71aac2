// Day 39: int8 quantization and an int8 GEMM on the dp4a instruction.
//
//   quantize    q = saturate_int8(rint(x / scale) + zero_point)   fp32 -> int8
//   dequantize  y = (q - zero_point) * scale                        int8 -> fp32
//   GEMM        C[M, N] = A[M, K] @ B[K, N]    int8 in, int32 out, exact
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 39            (4096x4096x4096, every version, cuBLAS)
//
// __dp4a(a, b, c) = c + a.byte0*b.byte0 + a.byte1*b.byte1 + a.byte2*b.byte2 + a.byte3*b.byte3
// (signed bytes, int32 sum): one instruction (SASS IDP.4A.S8.S8) does 4 multiplies and 4 adds.
// It wants both operands as 32-bit words holding 4 consecutive k. A row-major A[M, K] already
// has that (4 bytes of a row); a row-major B[K, N] does not (its 4 k of a column are N bytes
// apart), so every version starts from the same packed operands, built by two small kernels
// that are part of every version's time:
//   Bp [Kq, Np] int32 words, Bp[kq][n] = B[4kq .. 4kq+3, n] (byte j = k 4kq+j), zero past K and N;
//      Kq = Kp / 4 with Kp = K rounded up to 16, Np = N rounded up to 4   (pack_b_s8)
//   Ap = A when K % 16 == 0; else A copied into rows of Kp bytes, zero past K   (pad_a_s8)
// Zeros add nothing to a dot product, so any K works; Kq % 4 == 0 lets every 16-byte chunk of a
// row be all inside or all outside the matrix.
//
//   v1  naive: one output per thread, dp4a on words read from global memory
//   v2  32x32 shared-memory tiles (32 words of k), one output per thread
//   v3  128x128 block tile, 256 threads, 8x8 outputs per thread (register blocking, day 8's v5/v6
//       layout): per word of k a thread reads 8 A words and 8 B words (four 16-byte shared loads)
//       and issues 64 dp4a; 16-byte global loads; the A tile stored transposed (As[kq][m])
//   v4  v3 double-buffered (day 8's v7): the next tile's global loads fly during this tile's dp4a,
//       one barrier per tile; BKW words of k per tile (template: 8 or 16)
//   v5  cp.async pipeline of STAGES tiles straight from global to shared memory (no registers in
//       between), A kept k-contiguous (As[m][kq], read as 16-byte loads of 4 k), dynamic shared
//       memory; template BKW and STAGES
//
// Beside the versions: quantize / dequantize (per tensor, per row, per column; float4 in,
// char4 out), the dequantizing GEMM (v4/v5's tile with an fp32 epilogue
// y = C * scale_a[m] * scale_b[n] + bias[n]), and two micro-kernels that measure the dp4a and
// FFMA issue rates of the GPU (the arithmetic ceilings the README quotes).

#include <cstdint>

// ---------------------------------------------------------------------------------------------
// Quantize / dequantize. mode: 0 one scale for the tensor, 1 one per row, 2 one per column.
// Division (IEEE, round to nearest) and rint (round half to even) are exactly numpy's
// np.rint(x / scale) in float32, so the int8 result matches the reference bit for bit.
// ---------------------------------------------------------------------------------------------
__device__ __forceinline__ int channel_of(int mode, int row, int col) {
    return mode == 0 ? 0 : (mode == 1 ? row : col);
}

__device__ __forceinline__ int quantize1(float x, float scale, float zp) {
    float v = rintf(__fdiv_rn(x, scale)) + zp;  // float: a huge x/scale saturates, no int overflow
    v = fminf(fmaxf(v, -128.f), 127.f);
    return static_cast<int>(v);
}

// cols % 4 == 0: each thread one float4 (4 columns of one row) -> one char4
extern "C" __global__ void __launch_bounds__(256) quantize_vec4(
    const float* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ zp,
    char4* __restrict__ q, int rows, int cols, int mode) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // float4 index
    const size_t n4 = (size_t)rows * cols / 4;
    if (i >= n4) return;
    const int row = (int)(i * 4 / cols), col = (int)(i * 4 % cols);
    const float4 v = reinterpret_cast<const float4*>(x)[i];
    float s[4], z[4];
    if (mode == 2) {  // four consecutive columns: four channels
        const float4 s4 = *reinterpret_cast<const float4*>(scale + col);
        const float4 z4 = *reinterpret_cast<const float4*>(zp + col);
        s[0] = s4.x; s[1] = s4.y; s[2] = s4.z; s[3] = s4.w;
        z[0] = z4.x; z[1] = z4.y; z[2] = z4.z; z[3] = z4.w;
    } else {
        const int c = channel_of(mode, row, col);
#pragma unroll
        for (int j = 0; j < 4; ++j) { s[j] = scale[c]; z[j] = zp[c]; }
    }
    q[i] = make_char4(quantize1(v.x, s[0], z[0]), quantize1(v.y, s[1], z[1]),
                      quantize1(v.z, s[2], z[2]), quantize1(v.w, s[3], z[3]));
}

// any shape: one element per thread
extern "C" __global__ void __launch_bounds__(256) quantize_scalar(
    const float* __restrict__ x, const float* __restrict__ scale, const float* __restrict__ zp,
    int8_t* __restrict__ q, int rows, int cols, int mode) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    const int c = channel_of(mode, (int)(i / cols), (int)(i % cols));
    q[i] = (int8_t)quantize1(x[i], scale[c], zp[c]);
}

extern "C" __global__ void __launch_bounds__(256) dequantize_vec4(
    const char4* __restrict__ q, const float* __restrict__ scale, const float* __restrict__ zp,
    float4* __restrict__ y, int rows, int cols, int mode) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t n4 = (size_t)rows * cols / 4;
    if (i >= n4) return;
    const int row = (int)(i * 4 / cols), col = (int)(i * 4 % cols);
    const char4 v = q[i];
    float4 s, z;
    if (mode == 2) {
        s = *reinterpret_cast<const float4*>(scale + col);
        z = *reinterpret_cast<const float4*>(zp + col);
    } else {
        const int c = channel_of(mode, row, col);
        s = make_float4(scale[c], scale[c], scale[c], scale[c]);
        z = make_float4(zp[c], zp[c], zp[c], zp[c]);
    }
    y[i] = make_float4(((float)v.x - z.x) * s.x, ((float)v.y - z.y) * s.y,
                       ((float)v.z - z.z) * s.z, ((float)v.w - z.w) * s.w);
}

extern "C" __global__ void __launch_bounds__(256) dequantize_scalar(
    const int8_t* __restrict__ q, const float* __restrict__ scale, const float* __restrict__ zp,
    float* __restrict__ y, int rows, int cols, int mode) {
    const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    const int c = channel_of(mode, (int)(i / cols), (int)(i % cols));
    y[i] = ((float)q[i] - zp[c]) * scale[c];
}

// ---------------------------------------------------------------------------------------------
// Packing the operands (part of every version's time).
// ---------------------------------------------------------------------------------------------
// Bp[kq][n..n+3] for one thread: 16 bytes of B (4 rows x 4 columns) -> 4 words -> one int4 store
extern "C" __global__ void __launch_bounds__(256) pack_b_s8(
    const int8_t* __restrict__ B, int* __restrict__ Bp, int K, int N, int Kq, int Np) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;  // one per 4 output words
    const int nq = Np / 4;
    if (t >= (size_t)Kq * nq) return;
    const int kq = (int)(t / nq), n0 = (int)(t % nq) * 4;
    int w[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int n = n0 + j;
        unsigned word = 0;
#pragma unroll
        for (int r = 0; r < 4; ++r) {
            const int k = 4 * kq + r;
            const unsigned byte = (k < K && n < N) ? (unsigned)(uint8_t)B[(size_t)k * N + n] : 0u;
            word |= byte << (8 * r);
        }
        w[j] = (int)word;
    }
    *reinterpret_cast<int4*>(Bp + (size_t)kq * Np + n0) = make_int4(w[0], w[1], w[2], w[3]);
}

// Ap[m][0 .. Kp) = A[m][0 .. K) then zeros; one output word per thread
extern "C" __global__ void __launch_bounds__(256) pad_a_s8(
    const int8_t* __restrict__ A, int* __restrict__ Ap, int M, int K, int Kp) {
    const size_t t = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int kw = Kp / 4;
    if (t >= (size_t)M * kw) return;
    const int m = (int)(t / kw), k0 = (int)(t % kw) * 4;
    unsigned word = 0;
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int k = k0 + r;
        const unsigned byte = k < K ? (unsigned)(uint8_t)A[(size_t)m * K + k] : 0u;
        word |= byte << (8 * r);
    }
    Ap[t] = (int)word;
}

// ---------------------------------------------------------------------------------------------
// The GEMM. Every version reads Aw = Ap as 32-bit words (row pitch lda words, lda % 4 == 0),
// Bp [Kq, ldb] words (ldb = Np, a multiple of 4) and writes C [M, N] int32.
// ---------------------------------------------------------------------------------------------

// v1: thread (m, n) walks k one word (4 values) at a time; a warp = 32 consecutive n of one row:
// the A word is one broadcast, the B words one coalesced 128-byte line
extern "C" __global__ void __launch_bounds__(256) gemm_s8_v1(
    const int* __restrict__ Aw, int lda, const int* __restrict__ Bp, int ldb,
    int* __restrict__ C, int M, int N, int Kq) {
    const int n = blockIdx.x * 32 + threadIdx.x % 32;
    const int m = blockIdx.y * 8 + threadIdx.x / 32;
    if (m >= M || n >= N) return;
    const int* a = Aw + (size_t)m * lda;
    int acc = 0;
    for (int kq = 0; kq < Kq; ++kq) acc = __dp4a(a[kq], Bp[(size_t)kq * ldb + n], acc);
    C[(size_t)m * N + n] = acc;
}

// v2: a 32x32 tile of C per block of 32x32 threads; tiles of 32 words (128 k) of A and B in
// shared memory, zero past the edges (threads outside C still load and reach every barrier)
extern "C" __global__ void __launch_bounds__(1024) gemm_s8_v2(
    const int* __restrict__ Aw, int lda, const int* __restrict__ Bp, int ldb,
    int* __restrict__ C, int M, int N, int Kq) {
    constexpr int T = 32;
    __shared__ int As[T][T];   // [m][kq]: As[ty][k] is one address for a whole warp (broadcast)
    __shared__ int Bs[T][T];   // [kq][n]: consecutive n, conflict-free
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * T + ty, col = blockIdx.x * T + tx;
    int acc = 0;
    for (int k0 = 0; k0 < Kq; k0 += T) {
        As[ty][tx] = (row < M && k0 + tx < Kq) ? Aw[(size_t)row * lda + k0 + tx] : 0;
        Bs[ty][tx] = (k0 + ty < Kq && col < ldb) ? Bp[(size_t)(k0 + ty) * ldb + col] : 0;
        __syncthreads();
#pragma unroll
        for (int k = 0; k < T; ++k) acc = __dp4a(As[ty][k], Bs[k][tx], acc);
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// ---- v3 / v4: 128 x 128 block tile, 16 x 16 threads, 8 x 8 outputs each -------------------
namespace s8 {

constexpr int BM = 128, BN = 128, THREADS = 256;
constexpr int AS_LD = BM + 4;  // As[kq][m] row pitch in words: the transposing stores hit
                               // 32 different banks (see the README)

template <int BKW>  // words of k per tile (4 BKW values of k)
struct Staged {
    static constexpr int LA = BM * BKW / 4 / THREADS;  // int4 chunks of A a thread moves per tile
    static constexpr int LB = BKW * BN / 4 / THREADS;  // ... of B
    static_assert(LA >= 1 && LB >= 1 && LA * 4 * THREADS == BM * BKW, "whole chunks");
    int4 a[LA], b[LB];
};

// chunk f of the A tile: row f / (BKW/4), words (f % (BKW/4)) * 4 .. +3
template <int BKW>
__device__ __forceinline__ Staged<BKW> load_tile(const int* __restrict__ Aw, int lda,
                                                 const int* __restrict__ Bp, int ldb, int M,
                                                 int Kq, int bm, int bn, int k0, int tid) {
    Staged<BKW> s;
    const int4 zero = make_int4(0, 0, 0, 0);
#pragma unroll
    for (int l = 0; l < Staged<BKW>::LA; ++l) {
        const int f = tid + l * THREADS, r = f / (BKW / 4), q = (f % (BKW / 4)) * 4;
        s.a[l] = (bm + r < M && k0 + q < Kq)
                     ? *reinterpret_cast<const int4*>(Aw + (size_t)(bm + r) * lda + k0 + q) : zero;
    }
#pragma unroll
    for (int l = 0; l < Staged<BKW>::LB; ++l) {
        const int f = tid + l * THREADS, r = f / (BN / 4), q = (f % (BN / 4)) * 4;
        s.b[l] = (k0 + r < Kq && bn + q < ldb)
                     ? *reinterpret_cast<const int4*>(Bp + (size_t)(k0 + r) * ldb + bn + q) : zero;
    }
    return s;
}

template <int BKW>
__device__ __forceinline__ void stash_tile(const Staged<BKW>& s, int* As, int* Bs, int tid) {
#pragma unroll
    for (int l = 0; l < Staged<BKW>::LA; ++l) {
        const int f = tid + l * THREADS, r = f / (BKW / 4), q = (f % (BKW / 4)) * 4;
        As[(q + 0) * AS_LD + r] = s.a[l].x;   // transposed: A[m, kq..kq+3] -> As[kq..kq+3][m]
        As[(q + 1) * AS_LD + r] = s.a[l].y;
        As[(q + 2) * AS_LD + r] = s.a[l].z;
        As[(q + 3) * AS_LD + r] = s.a[l].w;
    }
#pragma unroll
    for (int l = 0; l < Staged<BKW>::LB; ++l) {
        const int f = tid + l * THREADS, r = f / (BN / 4), q = (f % (BN / 4)) * 4;
        *reinterpret_cast<int4*>(Bs + r * BN + q) = s.b[l];
    }
}

__device__ __forceinline__ int pick(const int4& v, int j) {  // j is a constant once unrolled
    return j == 0 ? v.x : j == 1 ? v.y : j == 2 ? v.z : v.w;
}

// thread (ty, tx) owns rows {ty*4 + i, 64 + ty*4 + i} and columns {tx*4 + j, 64 + tx*4 + j}
template <int BKW>
__device__ __forceinline__ void multiply(const int* As, const int* Bs, int ty, int tx,
                                         int (&acc)[8][8]) {
#pragma unroll
    for (int k = 0; k < BKW; ++k) {
        const int4 a0 = *reinterpret_cast<const int4*>(As + k * AS_LD + ty * 4);
        const int4 a1 = *reinterpret_cast<const int4*>(As + k * AS_LD + 64 + ty * 4);
        const int4 b0 = *reinterpret_cast<const int4*>(Bs + k * BN + tx * 4);
        const int4 b1 = *reinterpret_cast<const int4*>(Bs + k * BN + 64 + tx * 4);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int a = pick(i < 4 ? a0 : a1, i % 4);
#pragma unroll
            for (int j = 0; j < 8; ++j) acc[i][j] = __dp4a(a, pick(j < 4 ? b0 : b1, j % 4), acc[i][j]);
        }
    }
}

// The finished 8 x 8 patch, handed 4 columns at a time to the epilogue.
template <class Epi>
__device__ __forceinline__ void finish(const int (&acc)[8][8], int bm, int bn, int ty, int tx,
                                       int M, int N, const Epi& epi) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        const int row = bm + (i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4));
        if (row >= M) continue;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int col = bn + h * 64 + tx * 4;
            if (col < N)
                epi(row, col, make_int4(acc[i][h * 4], acc[i][h * 4 + 1], acc[i][h * 4 + 2],
                                        acc[i][h * 4 + 3]), min(4, N - col));
        }
    }
}

// C[row, col .. col+n-1] = v (int32): 16-byte store when every row of C is 16-byte aligned
struct StoreI32 {
    int* C;
    int N;
    __device__ __forceinline__ void operator()(int row, int col, int4 v, int n) const {
        int* c = C + (size_t)row * N + col;
        if (n == 4 && (N & 3) == 0) {
            *reinterpret_cast<int4*>(c) = v;
        } else {
            c[0] = v.x;
            if (n > 1) c[1] = v.y;
            if (n > 2) c[2] = v.z;
            if (n > 3) c[3] = v.w;
        }
    }
};

// y[row, col] = C * scale_a[row] * scale_b[col] + bias[col]  (fp32 out: a quantized linear layer)
struct Dequant {
    float* Y;
    const float* scale_a;
    const float* scale_b;
    const float* bias;   // may be null
    int N;
    __device__ __forceinline__ void operator()(int row, int col, int4 v, int n) const {
        const float sa = scale_a[row];
        const int c[4] = {v.x, v.y, v.z, v.w};
        float y[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int cj = min(col + j, N - 1);   // in-bounds address; unused when j >= n
            y[j] = (float)c[j] * sa * scale_b[cj] + (bias ? bias[cj] : 0.f);
        }
        float* out = Y + (size_t)row * N + col;
        if (n == 4 && (N & 3) == 0) {
            *reinterpret_cast<float4*>(out) = make_float4(y[0], y[1], y[2], y[3]);
        } else {
            out[0] = y[0];
            if (n > 1) out[1] = y[1];
            if (n > 2) out[2] = y[2];
            if (n > 3) out[3] = y[3];
        }
    }
};

// v3: load, stash, barrier, multiply, barrier
template <int BKW, class Epi>
__device__ __forceinline__ void gemm_v3(const int* __restrict__ Aw, int lda,
                                        const int* __restrict__ Bp, int ldb, int M, int N, int Kq,
                                        const Epi& epi) {
    __shared__ __align__(16) int As[BKW * AS_LD];
    __shared__ __align__(16) int Bs[BKW * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    int acc[8][8] = {};
    for (int k0 = 0; k0 < Kq; k0 += BKW) {
        stash_tile<BKW>(load_tile<BKW>(Aw, lda, Bp, ldb, M, Kq, bm, bn, k0, tid), As, Bs, tid);
        __syncthreads();
        multiply<BKW>(As, Bs, ty, tx, acc);
        __syncthreads();
    }
    finish(acc, bm, bn, ty, tx, M, N, epi);
}

// v4: two shared buffers; tile t+1's global loads are issued before tile t's dp4a and stored
// into the other buffer after them: one barrier per tile (the buffer written at step t was last
// read at step t-1, and every thread has passed the barrier that ended step t-1). The loads are
// issued unconditionally: past the last tile they are all out of range and read nothing.
template <int BKW, class Epi>
__device__ __forceinline__ void gemm_v4(const int* __restrict__ Aw, int lda,
                                        const int* __restrict__ Bp, int ldb, int M, int N, int Kq,
                                        const Epi& epi) {
    __shared__ __align__(16) int As[2][BKW * AS_LD];
    __shared__ __align__(16) int Bs[2][BKW * BN];
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tiles = (Kq + BKW - 1) / BKW;
    int acc[8][8] = {};
    stash_tile<BKW>(load_tile<BKW>(Aw, lda, Bp, ldb, M, Kq, bm, bn, 0, tid), As[0], Bs[0], tid);
    __syncthreads();
    for (int t = 0; t < tiles; ++t) {
        const int cur = t & 1;
        const Staged<BKW> next = load_tile<BKW>(Aw, lda, Bp, ldb, M, Kq, bm, bn, (t + 1) * BKW, tid);
        multiply<BKW>(As[cur], Bs[cur], ty, tx, acc);
        stash_tile<BKW>(next, As[cur ^ 1], Bs[cur ^ 1], tid);
        __syncthreads();
    }
    finish(acc, bm, bn, ty, tx, M, N, epi);
}

// ---- v5: cp.async stages, A k-contiguous in shared memory ----------------------------------
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool pred) {
    const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
    // src-size 0: 16 zero bytes are written and nothing is read (src must still be valid)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
                 "r"(pred ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

template <int BKW, int STAGES>
struct Pipe {
    static constexpr int A_LD = BKW + 4;            // As[m][kq] row pitch (words): rows 4 apart
                                                    // land 16 banks apart (4 * A_LD % 32 == 16)
    static constexpr int A_SIZE = BM * A_LD, B_SIZE = BKW * BN;
    static constexpr int SMEM_BYTES = STAGES * (A_SIZE + B_SIZE) * 4;
    static constexpr int LA = BM * BKW / 4 / THREADS, LB = BKW * BN / 4 / THREADS;
    static_assert((4 * A_LD) % 32 == 16, "rows ty*4 and (ty+1)*4 in different banks");
    static_assert(LA >= 1 && LB >= 1 && STAGES >= 2, "pipe shape");
};

template <int BKW, int STAGES>
__device__ __forceinline__ void copy_tile(const int* __restrict__ Aw, int lda,
                                          const int* __restrict__ Bp, int ldb, int M, int Kq,
                                          int bm, int bn, int k0, int* As, int* Bs, int tid) {
    using P = Pipe<BKW, STAGES>;
#pragma unroll
    for (int l = 0; l < P::LA; ++l) {
        const int f = tid + l * THREADS, r = f / (BKW / 4), q = (f % (BKW / 4)) * 4;
        const bool ok = bm + r < M && k0 + q < Kq;
        cp_async16(As + r * P::A_LD + q, ok ? Aw + (size_t)(bm + r) * lda + k0 + q : Aw, ok);
    }
#pragma unroll
    for (int l = 0; l < P::LB; ++l) {
        const int f = tid + l * THREADS, r = f / (BN / 4), q = (f % (BN / 4)) * 4;
        const bool ok = k0 + r < Kq && bn + q < ldb;
        cp_async16(Bs + r * BN + q, ok ? Bp + (size_t)(k0 + r) * ldb + bn + q : Bp, ok);
    }
}

// As[m][kq]: a thread reads 2 words of k of each of its 8 rows (8 x 8 bytes), then for each of
// those 2 k two 16-byte B loads and 64 dp4a (4 k at a time would hold 32 registers of A and
// spill at the 128-register budget of two blocks an SM)
__device__ __forceinline__ int pick2(const int2& v, int j) { return j == 0 ? v.x : v.y; }

template <int BKW, int STAGES>
__device__ __forceinline__ void multiply_k(const int* As, const int* Bs, int ty, int tx,
                                           int (&acc)[8][8]) {
    using P = Pipe<BKW, STAGES>;
#pragma unroll
    for (int kk = 0; kk < BKW; kk += 2) {
        int2 a2[8];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const int r = i < 4 ? ty * 4 + i : 64 + ty * 4 + (i - 4);
            a2[i] = *reinterpret_cast<const int2*>(As + r * P::A_LD + kk);
        }
#pragma unroll
        for (int q = 0; q < 2; ++q) {
            const int4 b0 = *reinterpret_cast<const int4*>(Bs + (kk + q) * BN + tx * 4);
            const int4 b1 = *reinterpret_cast<const int4*>(Bs + (kk + q) * BN + 64 + tx * 4);
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const int a = pick2(a2[i], q);
#pragma unroll
                for (int j = 0; j < 8; ++j)
                    acc[i][j] = __dp4a(a, pick(j < 4 ? b0 : b1, j % 4), acc[i][j]);
            }
        }
    }
}

template <int BKW, int STAGES, class Epi>
__device__ __forceinline__ void gemm_v5(const int* __restrict__ Aw, int lda,
                                        const int* __restrict__ Bp, int ldb, int M, int N, int Kq,
                                        const Epi& epi) {
    using P = Pipe<BKW, STAGES>;
    extern __shared__ __align__(16) int smem[];
    int* const As0 = smem;                       // stage s: As0 + s * A_SIZE
    int* const Bs0 = smem + STAGES * P::A_SIZE;  // stage s: Bs0 + s * B_SIZE
    const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;
    const int bm = blockIdx.y * BM, bn = blockIdx.x * BN;
    const int tiles = (Kq + BKW - 1) / BKW;
    int acc[8][8] = {};
    // prologue: STAGES - 1 tiles in flight (an empty group past the end keeps the count right)
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
        if (s < tiles)
            copy_tile<BKW, STAGES>(Aw, lda, Bp, ldb, M, Kq, bm, bn, s * BKW, As0 + s * P::A_SIZE,
                                   Bs0 + s * P::B_SIZE, tid);
        cp_async_commit();
    }
    for (int t = 0; t < tiles; ++t) {
        cp_async_wait<STAGES - 2>();   // tile t has landed (this thread's copies) ...
        __syncthreads();               // ... and everyone's; stage (t-1) % STAGES is free again
        const int nt = t + STAGES - 1, ns = nt % STAGES, cs = t % STAGES;
        if (nt < tiles)
            copy_tile<BKW, STAGES>(Aw, lda, Bp, ldb, M, Kq, bm, bn, nt * BKW, As0 + ns * P::A_SIZE,
                                   Bs0 + ns * P::B_SIZE, tid);
        cp_async_commit();
        multiply_k<BKW, STAGES>(As0 + cs * P::A_SIZE, Bs0 + cs * P::B_SIZE, ty, tx, acc);
    }
    cp_async_wait<0>();   // nothing in flight when the block exits
    finish(acc, bm, bn, ty, tx, M, N, epi);
}

}  // namespace s8

#define GEMM_ARGS const int* __restrict__ Aw, int lda, const int* __restrict__ Bp, int ldb, \
                  int* __restrict__ C, int M, int N, int Kq
#define LINEAR_ARGS const int* __restrict__ Aw, int lda, const int* __restrict__ Bp, int ldb, \
                    float* __restrict__ Y, const float* __restrict__ scale_a,                 \
                    const float* __restrict__ scale_b, const float* __restrict__ bias, int M, \
                    int N, int Kq

extern "C" __global__ void __launch_bounds__(256, 2) gemm_s8_v3(GEMM_ARGS) {
    s8::gemm_v3<8>(Aw, lda, Bp, ldb, M, N, Kq, s8::StoreI32{C, N});
}

// v4: BKW = 8 (16 spills: its staged next tile is 16 more registers)
#define V4(BKW)                                                                                  \
    extern "C" __global__ void __launch_bounds__(256, 2) gemm_s8_v4_bk##BKW(GEMM_ARGS) {       \
        s8::gemm_v4<BKW>(Aw, lda, Bp, ldb, M, N, Kq, s8::StoreI32{C, N});                       \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(256, 2) linear_s8_v4_bk##BKW(LINEAR_ARGS) {   \
        s8::gemm_v4<BKW>(Aw, lda, Bp, ldb, M, N, Kq, s8::Dequant{Y, scale_a, scale_b, bias, N}); \
    }
V4(8)

// v5 candidates: (BKW, STAGES); dynamic shared memory Pipe<BKW, STAGES>::SMEM_BYTES. BKW = 8
// and 32 spill (24-144 bytes at 128 registers), so the candidates are 16 words (64 k) a tile
#define V5(BKW, ST)                                                                              \
    extern "C" __global__ void __launch_bounds__(256, 2) gemm_s8_v5_bk##BKW##_s##ST(GEMM_ARGS) { \
        s8::gemm_v5<BKW, ST>(Aw, lda, Bp, ldb, M, N, Kq, s8::StoreI32{C, N});                   \
    }                                                                                            \
    extern "C" __global__ void __launch_bounds__(256, 2) linear_s8_v5_bk##BKW##_s##ST(        \
        LINEAR_ARGS) {                                                                           \
        s8::gemm_v5<BKW, ST>(Aw, lda, Bp, ldb, M, N, Kq,                                         \
                             s8::Dequant{Y, scale_a, scale_b, bias, N});                         \
    }
V5(16, 2)
V5(16, 3)
V5(16, 4)

// ---------------------------------------------------------------------------------------------
// Arithmetic ceilings, measured: CHAINS independent dependency chains per thread of dp4a (or
// FFMA), ITERS times. Each result feeds back into the next instruction of its chain, so nothing
// can be folded away; the sum is stored only if it equals a value it never takes.
// ---------------------------------------------------------------------------------------------
constexpr int PEAK_CHAINS = 16;

extern "C" __global__ void __launch_bounds__(256) peak_dp4a(int* out, int iters, int seed) {
    int acc[PEAK_CHAINS];
    const int b = seed * 0x01010101 + 0x01020304;
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; ++c) acc[c] = threadIdx.x * 31 + c + seed;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < PEAK_CHAINS; ++c) acc[c] = __dp4a(acc[c], b, acc[c]);
    }
    int s = 0;
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; ++c) s ^= acc[c];
    if (s == 0x7fffffff) out[0] = s;
}

extern "C" __global__ void __launch_bounds__(256) peak_ffma(float* out, int iters, float seed) {
    float acc[PEAK_CHAINS];
    const float b = 0.999f + 1e-7f * seed, c0 = 1e-3f * seed;
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; ++c) acc[c] = threadIdx.x * 1e-3f + c + seed;
    for (int i = 0; i < iters; ++i) {
#pragma unroll
        for (int c = 0; c < PEAK_CHAINS; ++c) acc[c] = fmaf(acc[c], b, c0);
    }
    float s = 0.f;
#pragma unroll
    for (int c = 0; c < PEAK_CHAINS; ++c) s += acc[c];
    if (s == -1.2345f) out[0] = s;
}
