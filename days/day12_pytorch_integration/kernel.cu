// Day 12: one CUDA source, two hosts. pycuda loads this file as it is (SourceModule); the
// PyTorch extension compiles the same text together with torch_launcher.cu and binding.cpp
// (torch.utils.cpp_extension.load_inline). The op is a fused bias + GELU with its backward:
//
//   forward:   z = x + b,  y = gelu(z)                      x: rows x cols, b: cols (broadcast)
//              gelu(z)  = 0.5 z (1 + tanh(u)),  u = k (z + c z^3),  k = sqrt(2/pi), c = 0.044715
//   backward:  gelu'(z) = 0.5 (1 + t) + 0.5 z (1 - t^2) k (1 + 3 c z^2),  t = tanh(u)
//              dx = dy * gelu'(z),   db[j] = sum over rows r of dx[r, j]
//
// (GELU in the tanh form of GPT-2; torch.nn.functional.gelu(z, approximate="tanh").)
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 12
//
// Every kernel exists for float (_f32) and double (_f64): the bodies are templates on the
// scalar type, and extern "C" entry points instantiate them with names pycuda can find
// (templates cannot be extern "C"). double is what torch.autograd.gradcheck needs.
//
// Versions of the forward (the harness checks and times both):
//   v1  one thread per element over the flat array; the bias column is i % cols, a 64-bit
//       division per element
//   v2  2-D tiles: a thread owns VEC adjacent columns (16 bytes: float4 / double2), keeps
//       their bias in registers and walks down the rows; 16-byte streaming loads and stores.
//       _vec needs cols % VEC == 0 and 16-byte aligned pointers; _scalar takes anything
// Backward (one version; the extension and the autograd.Function use it):
//   bias_gelu_bwd_{vec,scalar}  dx like v2's tiling; each thread also sums its columns'
//       dx over its rows, a block sums its threads through shared memory and writes one
//       partial row per row-block (no atomics: the result is deterministic)
//   bias_gelu_bias_grad  db[j] = sum of the partial rows (a second, tiny kernel)
#include <cstdint>

namespace day12 {

__device__ __forceinline__ float tanh_(float v) { return tanhf(v); }
__device__ __forceinline__ double tanh_(double v) { return tanh(v); }

template <typename T>
__device__ __forceinline__ T gelu(T z) {
    const T k = T(0.7978845608028654), c = T(0.044715);  // sqrt(2/pi), GPT-2's constant
    const T t = tanh_(k * (z + c * z * z * z));
    return T(0.5) * z * (T(1) + t);
}

template <typename T>
__device__ __forceinline__ T gelu_grad(T z) {
    const T k = T(0.7978845608028654), c = T(0.044715);
    const T z2 = z * z;
    const T t = tanh_(k * z * (T(1) + c * z2));
    return T(0.5) * (T(1) + t) + T(0.5) * z * (T(1) - t * t) * k * (T(1) + T(3) * c * z2);
}

// VEC elements of T as one memory access: 16 bytes when VEC * sizeof(T) == 16.
template <typename T, int VEC> struct Pack;
template <> struct Pack<float, 1> { using type = float; };
template <> struct Pack<float, 4> { using type = float4; };
template <> struct Pack<double, 1> { using type = double; };
template <> struct Pack<double, 2> { using type = double2; };

__device__ __forceinline__ float& lane(float& v, int) { return v; }
__device__ __forceinline__ double& lane(double& v, int) { return v; }
__device__ __forceinline__ float& lane(float4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}
__device__ __forceinline__ double& lane(double2& v, int k) { return k == 0 ? v.x : v.y; }

template <typename P> __device__ __forceinline__ P zero_pack() { P p; memset(&p, 0, sizeof(P)); return p; }

// ---------------------------------------------------------------------------------------
// v1: flat, one element per thread
// ---------------------------------------------------------------------------------------
template <typename T>
__device__ __forceinline__ void forward_v1(const T* __restrict__ x, const T* __restrict__ b,
                                           T* __restrict__ y, int rows, int cols) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < (int64_t)rows * cols) y[i] = gelu(x[i] + b[i % cols]);
}

// ---------------------------------------------------------------------------------------
// v2: block (tx, ty); thread column c (in packs of VEC) is fixed, rows r = by*ty + y, step
// gridDim.y * blockDim.y. The bias pack is loaded once and reused for every row, and each
// thread issues two 16-byte loads before it computes, so two are in flight at once.
// ---------------------------------------------------------------------------------------
template <typename T, int VEC>
__device__ __forceinline__ void gelu_pack(typename Pack<T, VEC>::type& v,
                                          typename Pack<T, VEC>::type bias) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) lane(v, k) = gelu(lane(v, k) + lane(bias, k));
}

template <typename T, int VEC>
__device__ __forceinline__ void forward_v2(const T* __restrict__ x, const T* __restrict__ b,
                                           T* __restrict__ y, int rows, int cols) {
    using P = typename Pack<T, VEC>::type;
    const int npack = cols / VEC;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= npack) return;  // no barrier in this kernel: leaving early is safe
    const P* xp = reinterpret_cast<const P*>(x) + c;
    P* yp = reinterpret_cast<P*>(y) + c;
    const P bias = reinterpret_cast<const P*>(b)[c];
    const int64_t step = (int64_t)gridDim.y * blockDim.y;
    int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y;
    for (; r + step < rows; r += 2 * step) {
        P v0 = __ldcs(xp + r * npack);  // read once: evict-first
        P v1 = __ldcs(xp + (r + step) * npack);
        gelu_pack<T, VEC>(v0, bias);
        gelu_pack<T, VEC>(v1, bias);
        __stcs(yp + r * npack, v0);
        __stcs(yp + (r + step) * npack, v1);
    }
    if (r < rows) {  // an odd row left over
        P v = __ldcs(xp + r * npack);
        gelu_pack<T, VEC>(v, bias);
        __stcs(yp + r * npack, v);
    }
}

// ---------------------------------------------------------------------------------------
// backward, same tiling as v2. partial has gridDim.y rows of cols: partial[by, j] is the sum
// of dx[r, j] over the rows block-row `by` visited.
// ---------------------------------------------------------------------------------------
template <typename T, int VEC>
__device__ __forceinline__ void backward_tile(const T* __restrict__ gy, const T* __restrict__ x,
                                              const T* __restrict__ b, T* __restrict__ gx,
                                              T* __restrict__ partial, int rows, int cols) {
    using P = typename Pack<T, VEC>::type;
    extern __shared__ __align__(16) unsigned char smem_raw[];  // blockDim.x * blockDim.y packs
    P* sums = reinterpret_cast<P*>(smem_raw);

    const int npack = cols / VEC;
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    P acc = zero_pack<P>();
    if (c < npack) {  // every thread still reaches the barrier below
        const P* gyp = reinterpret_cast<const P*>(gy);
        const P* xp = reinterpret_cast<const P*>(x);
        P* gxp = reinterpret_cast<P*>(gx);
        const P bias = reinterpret_cast<const P*>(b)[c];
        const int64_t step = (int64_t)gridDim.y * blockDim.y;
#pragma unroll 2
        for (int64_t r = (int64_t)blockIdx.y * blockDim.y + threadIdx.y; r < rows; r += step) {
            P g = __ldcs(gyp + r * npack + c);
            P v = __ldcs(xp + r * npack + c);
            P bb = bias;
#pragma unroll
            for (int k = 0; k < VEC; ++k) {
                const T d = lane(g, k) * gelu_grad(lane(v, k) + lane(bb, k));
                lane(g, k) = d;
                lane(acc, k) += d;
            }
            __stcs(gxp + r * npack + c, g);
        }
    }
    sums[threadIdx.y * blockDim.x + threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && c < npack) {
        P total = sums[threadIdx.x];
        for (int j = 1; j < (int)blockDim.y; ++j) {
            P s = sums[j * blockDim.x + threadIdx.x];
#pragma unroll
            for (int k = 0; k < VEC; ++k) lane(total, k) += lane(s, k);
        }
        // cols % VEC == 0 on this path, so every partial row starts 16-byte aligned
        reinterpret_cast<P*>(partial + (int64_t)blockIdx.y * cols)[c] = total;
    }
}

template <typename T>
__device__ __forceinline__ void bias_grad(const T* __restrict__ partial, T* __restrict__ gb,
                                          int chunks, int cols) {
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols) return;
    T s = T(0);
    for (int i = 0; i < chunks; ++i) s += partial[(int64_t)i * cols + j];  // coalesced across j
    gb[j] = s;
}

}  // namespace day12

// ---------------------------------------------------------------------------------------
// Entry points: float and double instantiations with C names.
// ---------------------------------------------------------------------------------------
#define DAY12_KERNELS(T, SFX, VEC)                                                              \
    extern "C" __global__ void bias_gelu_v1_##SFX(const T* __restrict__ x,                      \
                                                  const T* __restrict__ b, T* __restrict__ y,   \
                                                  int rows, int cols) {                         \
        day12::forward_v1<T>(x, b, y, rows, cols);                                              \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        bias_gelu_v2_vec_##SFX(const T* __restrict__ x, const T* __restrict__ b,                \
                               T* __restrict__ y, int rows, int cols) {                         \
        day12::forward_v2<T, VEC>(x, b, y, rows, cols);                                         \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256)                                           \
        bias_gelu_v2_scalar_##SFX(const T* __restrict__ x, const T* __restrict__ b,             \
                                  T* __restrict__ y, int rows, int cols) {                      \
        day12::forward_v2<T, 1>(x, b, y, rows, cols);                                           \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) bias_gelu_bwd_vec_##SFX(                  \
        const T* __restrict__ gy, const T* __restrict__ x, const T* __restrict__ b,             \
        T* __restrict__ gx, T* __restrict__ partial, int rows, int cols) {                      \
        day12::backward_tile<T, VEC>(gy, x, b, gx, partial, rows, cols);                        \
    }                                                                                           \
    extern "C" __global__ void __launch_bounds__(256) bias_gelu_bwd_scalar_##SFX(               \
        const T* __restrict__ gy, const T* __restrict__ x, const T* __restrict__ b,             \
        T* __restrict__ gx, T* __restrict__ partial, int rows, int cols) {                      \
        day12::backward_tile<T, 1>(gy, x, b, gx, partial, rows, cols);                          \
    }                                                                                           \
    extern "C" __global__ void bias_gelu_bias_grad_##SFX(const T* __restrict__ partial,         \
                                                         T* __restrict__ gb, int chunks,        \
                                                         int cols) {                            \
        day12::bias_grad<T>(partial, gb, chunks, cols);                                         \
    }

DAY12_KERNELS(float, f32, 4)
DAY12_KERNELS(double, f64, 2)
