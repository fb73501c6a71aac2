// Day 13: RGB to grayscale (luma), uint8 in, uint8 out.
//
//   Y = floor(((0.299f*R + 0.587f*G) + 0.114f*B) + 0.5f),  clamped to 255
//
// every operation in float32, rounded to nearest, in exactly this order (no fused
// multiply-add: __fmul_rn / __fadd_rn forbid the contraction), so that the result matches
// reference.py bit for bit. The weights are ITU-R BT.601 luma.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 13         (8192x8192, every version; writes gray.png)
//
// Layouts: interleaved RGB is H x W x 3 bytes (R G B R G B ...); planar is three separate
// H x W planes. The gray output is H x W bytes. The image is one flat array of H*W pixels
// (rows are not padded), so the flat versions ignore rows entirely.
//
//   v1  interleaved, 2-D grid (x along columns), one pixel per thread: a uchar3 load
//       (three 1-byte loads) and a 1-byte store
//   v2  planar, 2-D grid, one pixel per thread: three 1-byte loads from three planes (each
//       one contiguous 32-byte piece per warp) and a 1-byte store
//   v3  interleaved, flat 1-D grid, 4 pixels per thread: 12 bytes in as three 4-byte words,
//       4 gray bytes out as one 4-byte word
//   v4  interleaved, flat, 16 pixels per thread: 48 bytes in as three 16-byte loads, 16
//       bytes out as one 16-byte store
//   v5  planar, flat, 16 pixels per thread: one 16-byte load from each plane, one 16-byte
//       store
// v3-v5 handle the last H*W mod 4 (or 16) pixels one per thread, after the full groups.

#include <cstdint>

// The exact float value of a byte without a conversion instruction (I2F has a fraction of the
// FP32 throughput): 0x4B000000 is 2^23 as a float, and OR-ing the byte into its low mantissa
// bits gives 2^23 + v exactly; subtracting 2^23 is exact too.
__device__ __forceinline__ float byte_to_float(uint32_t v) {
    return __uint_as_float(0x4B000000u | v) - 8388608.0f;
}

// Byte k (0..3) of word w as a float: one PRMT builds {w.byte_k, 0, 0, 0x4B} = 2^23 + byte.
__device__ __forceinline__ float byte_of(uint32_t w, int k) {
    return __uint_as_float(__byte_perm(w, 0x4B000000u, 0x7440u | k)) - 8388608.0f;
}

// The luma of one pixel, exactly as reference.py computes it.
__device__ __forceinline__ uint32_t luma(float r, float g, float b) {
    const float y = __fadd_rn(__fadd_rn(__fmul_rn(0.299f, r), __fmul_rn(0.587f, g)),
                              __fmul_rn(0.114f, b));
    // round half up: y >= 0, so truncating y + 0.5 is floor(y + 0.5)
    const uint32_t q = __float2uint_rz(__fadd_rn(y, 0.5f));
    return q < 255u ? q : 255u;
}

// ---------------------------------------------------------------------------------------
// v1: interleaved, one pixel per thread. uchar3 has size 3 and alignment 1, so the compiler
// can only load it byte by byte: a warp issues three 1-byte loads over the same 96 bytes.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void gray_v1(const uchar3* __restrict__ rgb, uint8_t* __restrict__ gray,
                                   int H, int W) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    const size_t i = (size_t)y * W + x;
    const uchar3 p = rgb[i];
    gray[i] = (uint8_t)luma(byte_to_float(p.x), byte_to_float(p.y), byte_to_float(p.z));
}

// ---------------------------------------------------------------------------------------
// v2: planar, one pixel per thread: each plane read is 32 consecutive bytes per warp.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void gray_v2(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                                   const uint8_t* __restrict__ b, uint8_t* __restrict__ gray,
                                   int H, int W) {
    const int x = blockIdx.x * blockDim.x + threadIdx.x;
    const int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= W || y >= H) return;
    const size_t i = (size_t)y * W + x;
    gray[i] = (uint8_t)luma(byte_to_float(r[i]), byte_to_float(g[i]), byte_to_float(b[i]));
}

// One leftover pixel (the tail of v3-v5), from either layout.
__device__ __forceinline__ void one_pixel_interleaved(const uint8_t* __restrict__ rgb,
                                                      uint8_t* __restrict__ gray, int64_t i) {
    gray[i] = (uint8_t)luma(byte_to_float(rgb[3 * i]), byte_to_float(rgb[3 * i + 1]),
                            byte_to_float(rgb[3 * i + 2]));
}

// ---------------------------------------------------------------------------------------
// v3: 4 pixels per thread. Group j covers bytes [12j, 12j + 12): three aligned words
//   w0 = R0 G0 B0 R1,  w1 = G1 B1 R2 G2,  w2 = B2 R3 G3 B3     (byte 0 first: little-endian)
// The 4 gray bytes go out as one word.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void gray_v3(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ gray,
                                   int64_t n) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t groups = n / 4;
    if (t < groups) {
        const uint32_t* src = reinterpret_cast<const uint32_t*>(rgb) + 3 * t;
        const uint32_t w0 = src[0], w1 = src[1], w2 = src[2];
        const uint32_t y0 = luma(byte_of(w0, 0), byte_of(w0, 1), byte_of(w0, 2));
        const uint32_t y1 = luma(byte_of(w0, 3), byte_of(w1, 0), byte_of(w1, 1));
        const uint32_t y2 = luma(byte_of(w1, 2), byte_of(w1, 3), byte_of(w2, 0));
        const uint32_t y3 = luma(byte_of(w2, 1), byte_of(w2, 2), byte_of(w2, 3));
        reinterpret_cast<uint32_t*>(gray)[t] = y0 | (y1 << 8) | (y2 << 16) | (y3 << 24);
    } else if (t < groups + n % 4) {
        one_pixel_interleaved(rgb, gray, 4 * groups + (t - groups));
    }
}

// ---------------------------------------------------------------------------------------
// v4: 16 pixels per thread. Group j covers bytes [48j, 48j + 48) = three 16-byte loads =
// twelve words; pixel p's channel c is byte 3p + c of them. Every index below is a
// compile-time constant after unrolling, so the words stay in registers.
// ---------------------------------------------------------------------------------------
template <int PIXELS>
__device__ __forceinline__ void luma_words(const uint32_t (&w)[PIXELS * 3 / 4], uint32_t (&out)[PIXELS / 4]) {
#pragma unroll
    for (int q = 0; q < PIXELS / 4; ++q) out[q] = 0;
#pragma unroll
    for (int p = 0; p < PIXELS; ++p) {
        const int br = 3 * p, bg = 3 * p + 1, bb = 3 * p + 2;  // byte positions of R, G, B
        const uint32_t y = luma(byte_of(w[br / 4], br % 4), byte_of(w[bg / 4], bg % 4),
                                byte_of(w[bb / 4], bb % 4));
        out[p / 4] |= y << (8 * (p % 4));
    }
}

extern "C" __global__ void gray_v4(const uint8_t* __restrict__ rgb, uint8_t* __restrict__ gray,
                                   int64_t n) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t groups = n / 16;
    if (t < groups) {
        const uint4* src = reinterpret_cast<const uint4*>(rgb) + 3 * t;
        const uint4 a = src[0], b = src[1], c = src[2];
        const uint32_t w[12] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w, c.x, c.y, c.z, c.w};
        uint32_t out[4];
        luma_words<16>(w, out);
        reinterpret_cast<uint4*>(gray)[t] = make_uint4(out[0], out[1], out[2], out[3]);
    } else if (t < groups + n % 16) {
        one_pixel_interleaved(rgb, gray, 16 * groups + (t - groups));
    }
}

// ---------------------------------------------------------------------------------------
// v5: planar, 16 pixels per thread: one 16-byte load per plane, one 16-byte store.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void gray_v5(const uint8_t* __restrict__ r, const uint8_t* __restrict__ g,
                                   const uint8_t* __restrict__ b, uint8_t* __restrict__ gray,
                                   int64_t n) {
    const int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    const int64_t groups = n / 16;
    if (t < groups) {
        const uint4 R = reinterpret_cast<const uint4*>(r)[t];
        const uint4 G = reinterpret_cast<const uint4*>(g)[t];
        const uint4 B = reinterpret_cast<const uint4*>(b)[t];
        const uint32_t rw[4] = {R.x, R.y, R.z, R.w}, gw[4] = {G.x, G.y, G.z, G.w},
                       bw[4] = {B.x, B.y, B.z, B.w};
        uint32_t out[4];
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            out[q] = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k)
                out[q] |= luma(byte_of(rw[q], k), byte_of(gw[q], k), byte_of(bw[q], k)) << (8 * k);
        }
        reinterpret_cast<uint4*>(gray)[t] = make_uint4(out[0], out[1], out[2], out[3]);
    } else if (t < groups + n % 16) {
        const int64_t i = 16 * groups + (t - groups);
        gray[i] = (uint8_t)luma(byte_to_float(r[i]), byte_to_float(g[i]), byte_to_float(b[i]));
    }
}
