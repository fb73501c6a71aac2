// Day 34: batched image augmentation for training: random resized crop (bilinear), horizontal
// flip, color jitter (brightness, contrast, saturation) and per-channel normalization.
//
//   in   images [B, H, W, 3] uint8 (RGB, channels last)          params [B, 8] float32:
//        x0, y0, cw, ch (the crop box), flip, brightness, contrast, saturation
//   out  [B, 3, OH, OW] float32, normalized: what the network's first layer reads
//
// Output pixel (ox, oy) of image b samples its crop box at
//   u = fl((2 ox' + 1) cw / (2 OW)) - 1/2   (ox' = OW - 1 - ox when flipped), v likewise,
// clamped to the box; bilinear weights from the taps floor(u), floor(u) + 1 (clamped). u is
// computed with __fdiv_rn / __fsub_rn (no contraction), so it is bit for bit reference.py's.
// Then, in [0, 1] with a clamp after each step: x <- b x; x <- c x + (1 - c) m, m = the mean gray
// of the whole brightness-adjusted output image; x <- s x + (1 - s) gray(x); (x - mean) / std.
// m is why the op has two passes: every pixel's output depends on every pixel of its image.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -I common/cuda -cubin -Xptxas -v kernel.cu
// Run:               python run_day.py 34        (writes augmented.png, the photo augmented)
//
// Versions:
//   v1  two kernels: aug_mean_v1 (one thread per output pixel, one atomicAdd(double) each into
//       the image's sum, zeroed by a memset first), then aug_main_v1, one thread per output
//       ELEMENT (b, c, oy, ox): each samples all three channels (saturation needs the pixel's
//       gray) and writes one, so every pixel is sampled three times.
//   v2  two kernels, one thread per output pixel: aug_mean_v2 reduces per block (warp shuffles,
//       block_sum) into a partial sum per block, no atomics and a fixed order (the output is
//       deterministic); aug_main_v2 sums its image's partials and writes the pixel's 3 channels.
//   v3  v2 with 4 output pixels of a row per thread: the row's tap computed once, and one
//       16-byte store per channel plane when OW % 4 == 0 (scalar stores otherwise).
//   v4  one kernel: a thread-block CLUSTER of K blocks per image (Hopper). Each block takes a
//       band of the image's rows. Pass 1 samples the band once, keeps every pixel's
//       brightness-adjusted RGB in shared memory (48 bytes per group of 4) and sums its gray;
//       the K partial sums are exchanged through distributed shared memory
//       (cluster.map_shared_rank) between two cluster barriers; pass 2 reads the pixels back
//       from shared memory, finishes the jitter and writes. The source crop crosses DRAM once
//       (v2, v3: the mean kernel has read the whole batch before the main kernel starts, and
//       the batch does not fit in L2) and is sampled once. x taps come from a per-block table.
//       A band too large for shared memory is sampled again in pass 2 instead (from L1/L2).
//   v5  v4's cluster, with pass 1 reading the source from shared memory: the source rows of a
//       chunk of the band's output rows are copied in by the bulk-copy engine (cp.async.bulk,
//       a row an instruction, completion counted on an mbarrier; a ring of two halves, the
//       next chunk in flight while one is sampled); one pixel a lane; a tap
//       pair is 3 aligned shared words and 2 funnel shifts; bytes become floats through the
//       mantissa of 2^23 (PRMT + FADD, no conversion instruction); x and y taps from per-block
//       tables; pass 2 reads float4 groups and folds the jitter's constants. (v4 gathers 12
//       single bytes from global memory a pixel, each warp load spanning several cache lines.)
//   v6  v5, except that for a crop of fewer than 1.5 OH rows a thread takes one column and walks
//       down a run of rows, reusing the horizontal blends of the source rows the previous
//       output row already blended (upscaling: both; downscaling by r < 2: often one).
//   Sweep candidates (-DDAY34_SWEEP): aug_v4_k<K>_t<T>, K blocks a cluster, T threads a block;
//   v5's ring size is a launch argument (.notes/day34_sweep.py).

#include <cstdint>
#include <cstring>
#ifndef __CUDA_ARCH__
#include <thread>
#endif

#include <cooperative_groups.h>

#include "warp.cuh"

namespace cg = cooperative_groups;

// --- per-image parameters and the sampling ------------------------------------------------------

struct Aug {
    int x0, y0, cw, ch;
    bool flip;
    float kb, c, s;   // kb = brightness / 255: bytes straight to brightness-adjusted [0, 1]
};

__device__ __forceinline__ Aug load_aug(const float* __restrict__ prm, int b) {
    const float4 p = __ldg(reinterpret_cast<const float4*>(prm) + 2 * b);
    const float4 q = __ldg(reinterpret_cast<const float4*>(prm) + 2 * b + 1);
    return {__float2int_rn(p.x), __float2int_rn(p.y), __float2int_rn(p.z), __float2int_rn(p.w),
            q.x != 0.f, q.y * (1.0f / 255.0f), q.z, q.w};
}

// The two taps and the weight of the second along one axis, box-relative (see the header).
struct Tap {
    int lo, hi;
    float f;
};

__device__ __forceinline__ Tap tap(int o, int n_out, int box) {
    const float u0 = __fsub_rn(__fdiv_rn((float)((2 * o + 1) * box), (float)(2 * n_out)), 0.5f);
    const float u = fminf(fmaxf(u0, 0.f), (float)(box - 1));
    const int lo = (int)u;                       // u >= 0: truncation is floor
    return {lo, min(lo + 1, box - 1), u - (float)lo};
}

// The two source rows an output row samples: pointers to the crop box's first pixel in each.
struct Rows {
    const uint8_t* r0;
    const uint8_t* r1;
    float f;
};
__device__ __forceinline__ Rows rows(const uint8_t* __restrict__ img, int W, const Aug& a,
                                     const Tap& ty) {
    return {img + ((size_t)(a.y0 + ty.lo) * W + a.x0) * 3,
            img + ((size_t)(a.y0 + ty.hi) * W + a.x0) * 3, ty.f};
}

// Bilinear sample of the crop box (RGB, 0..255) between two rows.
__device__ __forceinline__ float3 sample(const Rows& rw, const Tap& tx) {
    const int l = 3 * tx.lo, h = 3 * tx.hi;
    float v[3];
#pragma unroll
    for (int c = 0; c < 3; ++c) {
        const float p00 = __ldg(rw.r0 + l + c), p01 = __ldg(rw.r0 + h + c);
        const float p10 = __ldg(rw.r1 + l + c), p11 = __ldg(rw.r1 + h + c);
        const float top = fmaf(tx.f, p01 - p00, p00), bot = fmaf(tx.f, p11 - p10, p10);
        v[c] = fmaf(rw.f, bot - top, top);
    }
    return make_float3(v[0], v[1], v[2]);
}

// ... of one output pixel, from the image's first byte
__device__ __forceinline__ float3 sample(const uint8_t* __restrict__ img, int W, const Aug& a,
                                         const Tap& tx, const Tap& ty) {
    return sample(rows(img, W, a, ty), tx);
}

__device__ __forceinline__ float gray(float r, float g, float b) {
    return fmaf(0.299f, r, fmaf(0.587f, g, 0.114f * b));
}

// brightness (with the 1/255 folded in), clamped
__device__ __forceinline__ float3 bright(float3 v, const Aug& a) {
    return make_float3(__saturatef(v.x * a.kb), __saturatef(v.y * a.kb), __saturatef(v.z * a.kb));
}

// what pass 1 adds up: the gray of the brightness-adjusted pixel
__device__ __forceinline__ float pass1(float3 v, const Aug& a) {
    const float3 y = bright(v, a);
    return gray(y.x, y.y, y.z);
}

// pass 2: contrast toward the image's mean gray m, saturation toward the pixel's gray, on the
// brightness-adjusted pixel y
__device__ __forceinline__ float3 jitter2(float3 y, const Aug& a, float m) {
    const float cm = (1.f - a.c) * m;
    y = make_float3(__saturatef(fmaf(a.c, y.x, cm)), __saturatef(fmaf(a.c, y.y, cm)),
                    __saturatef(fmaf(a.c, y.z, cm)));
    const float sg = (1.f - a.s) * gray(y.x, y.y, y.z);
    return make_float3(__saturatef(fmaf(a.s, y.x, sg)), __saturatef(fmaf(a.s, y.y, sg)),
                       __saturatef(fmaf(a.s, y.z, sg)));
}
__device__ __forceinline__ float3 pass2(float3 v, const Aug& a, float m) {
    return jitter2(bright(v, a), a, m);
}

// (x - mean) / std with norm = {mean0, mean1, mean2, 1/std0, 1/std1, 1/std2}
struct Norm {
    float m0, m1, m2, i0, i1, i2;
};
__device__ __forceinline__ Norm load_norm(const float* __restrict__ n) {
    return {__ldg(n), __ldg(n + 1), __ldg(n + 2), __ldg(n + 3), __ldg(n + 4), __ldg(n + 5)};
}
__device__ __forceinline__ float3 normalize(float3 y, const Norm& n) {
    return make_float3((y.x - n.m0) * n.i0, (y.y - n.m1) * n.i1, (y.z - n.m2) * n.i2);
}

// the mean of image b from the P partial sums of its blocks: each warp adds them in the same
// fixed order (lane-strided, then a shuffle tree), so every warp gets the same bits
__device__ __forceinline__ float image_mean(const float* __restrict__ partial, int P, int npix) {
    float s = 0.f;
    for (int i = threadIdx.x & 31; i < P; i += 32) s += __ldg(partial + i);
    return cuda100::warp_sum(s) / (float)npix;
}

// ---------------------------------------------------------------------------------------------
// v1: atomics for the mean, one thread per output element
// ---------------------------------------------------------------------------------------------
extern "C" __global__ void aug_zero_v1(double* __restrict__ sums, int B) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < B) sums[i] = 0.0;
}

extern "C" __global__ void aug_mean_v1(const uint8_t* __restrict__ images,
                                       const float* __restrict__ prm, double* __restrict__ sums,
                                       int B, int H, int W, int OH, int OW) {
    const int npix = OH * OW;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= B * npix) return;
    const int b = i / npix, p = i - b * npix, oy = p / OW, ox = p - oy * OW;
    const Aug a = load_aug(prm, b);
    const float3 v = sample(images + (size_t)b * H * W * 3, W, a,
                            tap(a.flip ? OW - 1 - ox : ox, OW, a.cw), tap(oy, OH, a.ch));
    atomicAdd(sums + b, (double)pass1(v, a));
}

extern "C" __global__ void aug_main_v1(const uint8_t* __restrict__ images,
                                       const float* __restrict__ prm,
                                       const double* __restrict__ sums,
                                       const float* __restrict__ norm, float* __restrict__ out,
                                       int B, int H, int W, int OH, int OW) {
    const int npix = OH * OW;
    const int i = blockIdx.x * blockDim.x + threadIdx.x;     // (b, c, oy, ox), CHW order
    if (i >= B * 3 * npix) return;
    const int b = i / (3 * npix), r = i - b * 3 * npix, c = r / npix, p = r - c * npix;
    const int oy = p / OW, ox = p - oy * OW;
    const Aug a = load_aug(prm, b);
    const float m = (float)(sums[b] / npix);
    const float3 v = sample(images + (size_t)b * H * W * 3, W, a,
                            tap(a.flip ? OW - 1 - ox : ox, OW, a.cw), tap(oy, OH, a.ch));
    const float3 y = normalize(pass2(v, a, m), load_norm(norm));
    out[i] = c == 0 ? y.x : c == 1 ? y.y : y.z;
}

// ---------------------------------------------------------------------------------------------
// v2: per-block partial sums, one thread per output pixel
// ---------------------------------------------------------------------------------------------
// grid (P, B): block x of image y covers pixels [x * blockDim, (x + 1) * blockDim)
extern "C" __global__ void aug_mean_v2(const uint8_t* __restrict__ images,
                                       const float* __restrict__ prm, float* __restrict__ partial,
                                       int H, int W, int OH, int OW) {
    __shared__ float scratch[32];
    const int b = blockIdx.y, npix = OH * OW;
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const Aug a = load_aug(prm, b);
    float g = 0.f;
    if (p < npix) {
        const int oy = p / OW, ox = p - oy * OW;
        g = pass1(sample(images + (size_t)b * H * W * 3, W, a,
                         tap(a.flip ? OW - 1 - ox : ox, OW, a.cw), tap(oy, OH, a.ch)), a);
    }
    g = cuda100::block_sum(g, scratch);
    if (threadIdx.x == 0) partial[b * gridDim.x + blockIdx.x] = g;
}

extern "C" __global__ void aug_main_v2(const uint8_t* __restrict__ images,
                                       const float* __restrict__ prm,
                                       const float* __restrict__ partial,
                                       const float* __restrict__ norm, float* __restrict__ out,
                                       int H, int W, int OH, int OW) {
    const int b = blockIdx.y, npix = OH * OW;
    const float m = image_mean(partial + b * gridDim.x, gridDim.x, npix);   // all lanes call
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= npix) return;
    const Aug a = load_aug(prm, b);
    const int oy = p / OW, ox = p - oy * OW;
    const float3 y = normalize(pass2(sample(images + (size_t)b * H * W * 3, W, a,
                                            tap(a.flip ? OW - 1 - ox : ox, OW, a.cw),
                                            tap(oy, OH, a.ch)), a, m), load_norm(norm));
    float* o = out + (size_t)b * 3 * npix + p;
    o[0] = y.x;
    o[npix] = y.y;
    o[2 * npix] = y.z;
}

// ---------------------------------------------------------------------------------------------
// v3 / v4: four output pixels of a row per thread
// ---------------------------------------------------------------------------------------------
// group q of image b: row oy = q / G, columns 4 (q % G) .. + 3 (fewer at a row's end), G =
// ceil(OW / 4)

// a 16-byte store, written as one instruction (left to itself the compiler split one of the
// three planes' float4 stores into four scalar ones: its register allocation)
__device__ __forceinline__ void store4(float* p, float4 v) {
#ifdef __CUDA_ARCH__
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y), "f"(v.z),
                 "f"(v.w) : "memory");
#else
    *reinterpret_cast<float4*>(p) = v;
#endif
}

__device__ __forceinline__ void set4(float4& v, int k, float x) {
    if (k == 0) v.x = x; else if (k == 1) v.y = x; else if (k == 2) v.z = x; else v.w = x;
}
__device__ __forceinline__ float get4(const float4& v, int k) {
    return k == 0 ? v.x : k == 1 ? v.y : k == 2 ? v.z : v.w;
}

// pass 1 over one group: the sum of its pixels' gray
__device__ __forceinline__ float group_gray(const uint8_t* __restrict__ img, int W, const Aug& a,
                                            int q, int G, int OH, int OW) {
    const int oy = q / G, ox0 = (q - oy * G) * 4;
    const Rows rw = rows(img, W, a, tap(oy, OH, a.ch));
    float g = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int ox = ox0 + k;
        if (ox < OW) g += pass1(sample(rw, tap(a.flip ? OW - 1 - ox : ox, OW, a.cw)), a);
    }
    return g;
}

// pass 2 over one group: three planes of [OH, OW] at out (image b's first float)
__device__ __forceinline__ void group_out(const uint8_t* __restrict__ img, int W, const Aug& a,
                                          float m, const Norm& nm, float* __restrict__ out,
                                          int q, int G, int OH, int OW) {
    const int oy = q / G, ox0 = (q - oy * G) * 4;
    const int npix = OH * OW;
    const Rows rw = rows(img, W, a, tap(oy, OH, a.ch));
    float4 r0, r1, r2;                              // the group's 4 values of each plane
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int ox = min(ox0 + k, OW - 1);        // past the row's end: a duplicate, not stored
        const float3 y = normalize(pass2(sample(rw, tap(a.flip ? OW - 1 - ox : ox, OW, a.cw)), a, m), nm);
        set4(r0, k, y.x);
        set4(r1, k, y.y);
        set4(r2, k, y.z);
    }
    float* o = out + (size_t)oy * OW + ox0;
    if ((OW & 3) == 0) {                            // whole groups, every row 16-byte aligned
        store4(o, r0);
        store4(o + npix, r1);
        store4(o + 2 * (size_t)npix, r2);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (ox0 + k < OW) {
                o[k] = get4(r0, k);
                o[npix + k] = get4(r1, k);
                o[2 * (size_t)npix + k] = get4(r2, k);
            }
    }
}

extern "C" __global__ void aug_mean_v3(const uint8_t* __restrict__ images,
                                       const float* __restrict__ prm, float* __restrict__ partial,
                                       int H, int W, int OH, int OW) {
    __shared__ float scratch[32];
    const int b = blockIdx.y, G = (OW + 3) / 4;
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    const Aug a = load_aug(prm, b);
    float g = 0.f;
    if (q < OH * G) g = group_gray(images + (size_t)b * H * W * 3, W, a, q, G, OH, OW);
    g = cuda100::block_sum(g, scratch);
    if (threadIdx.x == 0) partial[b * gridDim.x + blockIdx.x] = g;
}

extern "C" __global__ void aug_main_v3(const uint8_t* __restrict__ images,
                                       const float* __restrict__ prm,
                                       const float* __restrict__ partial,
                                       const float* __restrict__ norm, float* __restrict__ out,
                                       int H, int W, int OH, int OW) {
    const int b = blockIdx.y, G = (OW + 3) / 4, npix = OH * OW;
    const float m = image_mean(partial + b * gridDim.x, gridDim.x, npix);
    const int q = blockIdx.x * blockDim.x + threadIdx.x;
    if (q >= OH * G) return;
    group_out(images + (size_t)b * H * W * 3, W, load_aug(prm, b), m, load_norm(norm),
              out + (size_t)b * 3 * npix, q, G, OH, OW);
}

// v4, with the band staged in shared memory: pass 1 keeps each pixel's brightness-adjusted
// RGB (three float4 planes of the band, ys[c * per + j] for the band's group j), and pass 2
// reads them back instead of sampling again. The x taps of the image's OW columns are computed
// once per block into a table (taps[ox] = lo, bits of the weight; flip already applied).
__device__ __forceinline__ float group_stage(const uint8_t* __restrict__ img, int W, const Aug& a,
                                             const int2* taps, float4* ys, int per, int j,
                                             int q, int G, int OH, int OW) {
    const int oy = q / G, ox0 = (q - oy * G) * 4;
    const Rows rw = rows(img, W, a, tap(oy, OH, a.ch));
    float4 r0, r1, r2;
    float g = 0.f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int2 t = taps[min(ox0 + k, OW - 1)];
        const Tap tx = {t.x, min(t.x + 1, a.cw - 1), __int_as_float(t.y)};
        const float3 y = bright(sample(rw, tx), a);
        set4(r0, k, y.x);
        set4(r1, k, y.y);
        set4(r2, k, y.z);
        if (ox0 + k < OW) g += gray(y.x, y.y, y.z);
    }
    ys[j] = r0;
    ys[per + j] = r1;
    ys[2 * per + j] = r2;
    return g;
}

__device__ __forceinline__ void group_out_staged(const float4* ys, int per, int j, const Aug& a,
                                                 float m, const Norm& nm, float* __restrict__ out,
                                                 int q, int G, int OH, int OW) {
    const int oy = q / G, ox0 = (q - oy * G) * 4;
    const int npix = OH * OW;
    const float4 y0 = ys[j], y1 = ys[per + j], y2 = ys[2 * per + j];
    float4 r0, r1, r2;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float3 y = normalize(jitter2(make_float3(get4(y0, k), get4(y1, k), get4(y2, k)), a, m), nm);
        set4(r0, k, y.x);
        set4(r1, k, y.y);
        set4(r2, k, y.z);
    }
    float* o = out + (size_t)oy * OW + ox0;
    if ((OW & 3) == 0) {
        store4(o, r0);
        store4(o + npix, r1);
        store4(o + 2 * (size_t)npix, r2);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (ox0 + k < OW) {
                o[k] = get4(r0, k);
                o[npix + k] = get4(r1, k);
                o[2 * (size_t)npix + k] = get4(r2, k);
            }
    }
}

// v4: a cluster of K blocks per image; block `rank` takes the groups of a contiguous band of
// rows, [rank * per, (rank + 1) * per), per = ceil(OH * G / K). `smem` is the dynamic shared
// memory the launch gave: when the band's three planes and the tap table fit in it (48 bytes a
// group + 8 a column), the band is staged; otherwise pass 2 samples the source again.
template <int K, int T>
__device__ __forceinline__ void augment_cluster(const uint8_t* __restrict__ images,
                                                const float* __restrict__ prm,
                                                const float* __restrict__ norm,
                                                float* __restrict__ out, int H, int W, int OH,
                                                int OW, int smem) {
    extern __shared__ float4 dyn[];
    __shared__ float scratch[32];
    __shared__ float part;
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int b = blockIdx.x / K;
    const int G = (OW + 3) / 4, Q = OH * G, npix = OH * OW;
    const int per = (Q + K - 1) / K;
    const int q0 = rank * per, q1 = min(Q, q0 + per);
    const uint8_t* img = images + (size_t)b * H * W * 3;
    const Aug a = load_aug(prm, b);
    const bool staged = 48 * per + 8 * OW <= smem;
    float4* ys = dyn;                                           // 3 planes of `per` float4
    int2* taps = reinterpret_cast<int2*>(dyn + 3 * per);        // OW entries

    float g = 0.f;                                              // pass 1: this band's gray
    if (staged) {
        for (int x = threadIdx.x; x < OW; x += T) {
            const Tap t = tap(a.flip ? OW - 1 - x : x, OW, a.cw);
            taps[x] = make_int2(t.lo, __float_as_int(t.f));
        }
        __syncthreads();
        for (int q = q0 + (int)threadIdx.x; q < q1; q += T)
            g += group_stage(img, W, a, taps, ys, per, q - q0, q, G, OH, OW);
    } else {
        for (int q = q0 + (int)threadIdx.x; q < q1; q += T) g += group_gray(img, W, a, q, G, OH, OW);
    }
    g = cuda100::block_sum(g, scratch);
    if (threadIdx.x == 0) part = g;
    cluster.sync();                                             // every block's `part` written
    float s = 0.f;
#pragma unroll
    for (int r = 0; r < K; ++r) s += *cluster.map_shared_rank(&part, r);   // same order everywhere
    const float m = s / (float)npix;
    cluster.sync();                                             // no block leaves while read

    const Norm nm = load_norm(norm);                            // pass 2
    float* o = out + (size_t)b * 3 * npix;
    if (staged) {                                               // a thread reads what it wrote
        for (int q = q0 + (int)threadIdx.x; q < q1; q += T)
            group_out_staged(ys, per, q - q0, a, m, nm, o, q, G, OH, OW);
    } else {
        for (int q = q0 + (int)threadIdx.x; q < q1; q += T) group_out(img, W, a, m, nm, o, q, G, OH, OW);
    }
}

#define AUG_V4(NAME, K, T)                                                                      \
    extern "C" __global__ void __cluster_dims__(K, 1, 1) __launch_bounds__(T) NAME(             \
        const uint8_t* __restrict__ images, const float* __restrict__ prm,                      \
        const float* __restrict__ norm, float* __restrict__ out, int H, int W, int OH, int OW,  \
        int smem) {                                                                             \
        augment_cluster<K, T>(images, prm, norm, out, H, W, OH, OW, smem);                     \
    }

#ifndef DAY34_V4_K
#define DAY34_V4_K 8        // blocks per image (the sweep's candidates: 2, 4, 8)
#endif
#ifndef DAY34_V4_T
#define DAY34_V4_T 512      // threads per block (256, 512, 1024)
#endif
AUG_V4(aug_v4, DAY34_V4_K, DAY34_V4_T)

#ifdef DAY34_SWEEP
AUG_V4(aug_v4_k2_t512, 2, 512) AUG_V4(aug_v4_k4_t256, 4, 256) AUG_V4(aug_v4_k4_t512, 4, 512)
AUG_V4(aug_v4_k4_t1024, 4, 1024) AUG_V4(aug_v4_k8_t256, 8, 256) AUG_V4(aug_v4_k8_t512, 8, 512)
#endif

// ---------------------------------------------------------------------------------------------
// v5: v4's cluster per image, with the band's SOURCE rows staged in shared memory
// ---------------------------------------------------------------------------------------------
// v4 spends its time (SASS) on 12 single-byte loads from global memory per pixel, each lane of a
// warp 4 pixels (12 r bytes) from its neighbour, so that one load instruction touches several
// cache lines; on 12 byte-to-float conversions (I2FP); on a tap division per group. v5 keeps
// v4's structure (a cluster of K blocks per image, a band of output rows per block, the
// brightness-adjusted pixels kept in shared memory for pass 2, the mean through distributed
// shared memory) and changes how pass 1 reads the source:
//  - the source rows that a chunk of the band's output rows needs are copied into shared memory
//    by the bulk-copy engine (cp.async.bulk: a whole row an instruction, no registers), the
//    bytes counted on an mbarrier; two chunks in flight (a ring of two halves: chunk c + 1
//    loads while chunk c is sampled);
//  - one output pixel a lane, consecutive lanes consecutive pixels: a tap pair (pixels lo and
//    lo + 1 of a row, 6 bytes) is 3 aligned 32-bit shared loads and 2 funnel shifts;
//  - a byte becomes a float by a byte permute into the mantissa of 2^23 and one subtraction
//    (PRMT + FADD, no conversion instruction); p01 - p00 is taken between the biased floats,
//    exactly;
//  - x taps (byte offset, fx) from a table of the OW columns, y taps and the shared addresses of
//    both source rows from a table of the band's rows: no division per pixel;
//  - pass 2 reads each group of 4 pixels' R, G, B as three float4 (the pixels are kept as
//    [group][channel][4]) and writes 16-byte stores when OW % 4 == 0 (every plane and band then
//    starts 16-byte aligned), coalesced scalar stores otherwise; the jitter's constants folded.

// --- staging with the bulk-copy engine (TMA) and an mbarrier a ring half ----------------------
// cp.async.bulk copies a contiguous run of bytes (16-byte aligned at both ends, a multiple of 16
// long) from global to shared memory; one lane issues a whole source row with one instruction.
// Completion is counted in bytes on an mbarrier: the lanes that issue copies first add their
// bytes to the barrier's expected transaction count, then one lane arrives; the phase completes
// when it has arrived and all the bytes have landed, and a thread waits on the phase's parity.
// The host branches emulate this (the copies are done at once; .notes/day34_emulate.py).

__device__ __forceinline__ unsigned smem_u32(const void* p) {
#ifdef __CUDA_ARCH__
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
#else
    return 0;
#endif
}

#ifndef __CUDA_ARCH__
// host: bits 0-31 bytes still expected, 32-39 arrivals still expected (one a phase), 40-63 the
// phase number
inline void mbar_host_update(uint64_t* bar, long long bytes, int arrivals) {
    uint64_t old = __atomic_load_n(bar, __ATOMIC_SEQ_CST), next;
    do {
        const long long tx = (long long)(old & 0xffffffffu) + bytes;
        const int arr = (int)((old >> 32) & 0xff) - arrivals;
        const uint64_t phase = old >> 40;
        next = (tx == 0 && arr == 0) ? ((phase + 1) << 40) | (1ull << 32)
                                     : (phase << 40) | ((uint64_t)arr << 32) | (uint64_t)tx;
    } while (!__atomic_compare_exchange_n(bar, &old, next, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
}
#endif

__device__ __forceinline__ void mbar_init(uint64_t* bar) {      // one arrival a phase
#ifdef __CUDA_ARCH__
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(smem_u32(bar)) : "memory");
#else
    __atomic_store_n(bar, 1ull << 32, __ATOMIC_SEQ_CST);
#endif
}
// make the initialized barriers visible to the bulk-copy engine (then a block barrier)
__device__ __forceinline__ void mbar_init_fence() {
#ifdef __CUDA_ARCH__
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void mbar_expect(uint64_t* bar, int bytes) {
#ifdef __CUDA_ARCH__
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;\n"
                 ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
#else
    mbar_host_update(bar, bytes, 0);
#endif
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
#ifdef __CUDA_ARCH__
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
#else
    mbar_host_update(bar, 0, 1);
#endif
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, int parity) {
#ifdef __CUDA_ARCH__
    unsigned done;
    do {
        asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
                     " selp.u32 %0, 1, 0, p;\n}\n"
                     : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
    } while (!done);
#else
    while (((__atomic_load_n(bar, __ATOMIC_SEQ_CST) >> 40) & 1) == (uint64_t)parity)
        std::this_thread::yield();
#endif
}
// shared memory that the block read with ordinary loads is about to be written by the
// bulk-copy engine (another proxy): order the two
__device__ __forceinline__ void fence_proxy_async() {
#ifdef __CUDA_ARCH__
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, int bytes, uint64_t* bar) {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(smem_u32(dst)), "l"(src), "r"(bytes), "r"(smem_u32(bar)) : "memory");
#else
    std::memcpy(dst, src, bytes);
    mbar_host_update(bar, -(long long)bytes, 0);
#endif
}

// The other way to stage (BULK = false, a sweep candidate and a fallback): cp.async, 16 bytes a
// lane and instruction, through no registers, completion by cp.async.wait_group and a block
// barrier. `bytes` < 16 copies that many and zero-fills the rest (the batch's last piece).
__device__ __forceinline__ void copy16_async(void* dst, const void* src, int bytes) {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src),
                 "r"(bytes) : "memory");
#else
    std::memcpy(dst, src, bytes);
    std::memset(static_cast<char*>(dst) + bytes, 0, 16 - bytes);
#endif
}
__device__ __forceinline__ void copy16_async(void* dst, const void* src) {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem_u32(dst)), "l"(src)
                 : "memory");
#else
    std::memcpy(dst, src, 16);
#endif
}
__device__ __forceinline__ void copy_commit() {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}
// wait until at most one of this thread's copy groups is still in flight
__device__ __forceinline__ void copy_wait_all_but_one() {
#ifdef __CUDA_ARCH__
    asm volatile("cp.async.wait_group 1;\n" ::: "memory");
#endif
}

// 2^23 + byte k of w, as a float: the byte in the low mantissa bits of 2^23 (0x4B000000)
__device__ __forceinline__ float biased(unsigned w, int k) {
    return __int_as_float(static_cast<int>(__byte_perm(w, 0x4B000000u, 0x7440u + k)));
}
#define DAY34_BIAS 8388608.0f

// Horizontal blend of a staged row: A is the byte offset from `smem0` (the dynamic shared
// memory's start) of box pixel lo (R, G, B); pixel lo + 1 follows. Three aligned words hold its
// 6 bytes; funnel shifts by 8 (A & 3) bits align them: a = R0 G0 B0 R1, b = G1 B1 . . The same
// arithmetic as sample(): fma(fx, p01 - p00, p00).
__device__ __forceinline__ float3 row_blend(const unsigned char* smem0, int A, float fx) {
    const unsigned* w = reinterpret_cast<const unsigned*>(smem0 + (A & ~3));
    const unsigned w0 = w[0], w1 = w[1], w2 = w[2];
    const unsigned a = __funnelshift_r(w0, w1, static_cast<unsigned>(A) << 3);
    const unsigned b = __funnelshift_r(w1, w2, static_cast<unsigned>(A) << 3);
    const float r0 = biased(a, 0), g0 = biased(a, 1), b0 = biased(a, 2);
    const float r1 = biased(a, 3), g1 = biased(b, 0), b1 = biased(b, 1);
    return make_float3(fmaf(fx, r1 - r0, r0 - DAY34_BIAS), fmaf(fx, g1 - g0, g0 - DAY34_BIAS),
                       fmaf(fx, b1 - b0, b0 - DAY34_BIAS));
}

__device__ __forceinline__ float3 col_blend(float3 top, float3 bot, float fy) {
    return make_float3(fmaf(fy, bot.x - top.x, top.x), fmaf(fy, bot.y - top.y, top.y),
                       fmaf(fy, bot.z - top.z, top.z));
}

// Bytes of one staged source row: the 16-byte pieces covering the box's 3 cw bytes start up to
// 15 bytes before its first pixel and end up to 15 after its last; the last tap pair's three
// words end 9 bytes after the last pixel's first byte. 3 cw + 30 rounded up to 16 holds both.
__device__ __forceinline__ int staged_pitch(int cw) { return 16 * ((3 * cw + 30 + 15) / 16); }

// Pass 2 with the constants folded: contrast c y + (1 - c) m, saturation s y + (1 - s) gray(y)
// with (1 - s) in the gray weights, normalization y / std - mean / std: one FFMA per channel each.
struct Finish {
    float c, cm, s, wr, wg, wb, i0, i1, i2, o0, o1, o2;
};
__device__ __forceinline__ Finish finish_consts(const Aug& a, float m, const Norm& n) {
    const float t = 1.f - a.s;
    return {a.c, (1.f - a.c) * m, a.s, t * 0.299f, t * 0.587f, t * 0.114f,
            n.i0, n.i1, n.i2, -n.m0 * n.i0, -n.m1 * n.i1, -n.m2 * n.i2};
}
__device__ __forceinline__ float3 finish(float3 y, const Finish& f) {
    y = make_float3(__saturatef(fmaf(f.c, y.x, f.cm)), __saturatef(fmaf(f.c, y.y, f.cm)),
                    __saturatef(fmaf(f.c, y.z, f.cm)));
    const float sg = fmaf(f.wr, y.x, fmaf(f.wg, y.y, f.wb * y.z));
    y = make_float3(__saturatef(fmaf(f.s, y.x, sg)), __saturatef(fmaf(f.s, y.y, sg)),
                    __saturatef(fmaf(f.s, y.z, sg)));
    return make_float3(fmaf(y.x, f.i0, f.o0), fmaf(y.y, f.i1, f.o1), fmaf(y.z, f.i2, f.o2));
}

// Pass 1 of v6 for one column: the band rows [i0, i1) of output column ox, walked down. The
// horizontal blends of the current low and high source rows are kept in registers; the next
// output row reuses them when its low row is the same (upscaling: both) or is the previous high
// row (one). Every lane of a warp walks the same rows (one column each), so the three cases are
// branches the warp takes together (except in the one warp that two row groups share).
__device__ __forceinline__ void walk_column(const unsigned char* smem0, const int4* ytab,
                                            unsigned char* vals, int i0, int i1, int ox, int OW,
                                            int xoff, float fx, const Aug& a, float& gr,
                                            float& gg, float& gb) {
    float3 lo = make_float3(0.f, 0.f, 0.f), hi = lo;
    int prev = -2;                                     // no source row blended yet
    for (int i = i0; i < i1; ++i) {
        const int4 yr = ytab[i];                       // shared addresses, fy, low source row
        if (yr.w == prev + 1) {
            lo = hi;
            hi = row_blend(smem0, yr.y + xoff, fx);
        } else if (yr.w != prev) {
            lo = row_blend(smem0, yr.x + xoff, fx);
            hi = row_blend(smem0, yr.y + xoff, fx);
        }
        prev = yr.w;
        const float3 y = bright(col_blend(lo, hi, __int_as_float(yr.z)), a);
        gr += y.x;
        gg += y.y;
        gb += y.z;
        const int j = i * OW + ox;                     // 48 (j >> 2) + 4 (j & 3) bytes:
        float* v = reinterpret_cast<float*>(vals + 12 * j - 8 * (j & 3));
        v[0] = y.x;
        v[4] = y.y;
        v[8] = y.z;
    }
}

// Dynamic shared memory of a v5 / v6 block (the driver's v5_layout mirrors it), in this order:
//   vals   [nbq][3][4] float  the band's brightness-adjusted pixels, group of 4 j: R[4] G[4] B[4]
//   xtab   [OW] int2          (3 lo, fx) of each output column, flip applied (OW rounded to even)
//   ytab   [R] int4           per band row: byte offset (from the start of dyn) of box pixel 0
//                             in its low and its high staged source row, fy, the low source
//                             row (while the table is built: the row's chunk in .z)
//   chunks [R] int4           band rows [x, y) staged together: source rows z .. z + w - 1
//   ring   [2][half] bytes    the two halves, `pitch` bytes a staged source row
// WALK = false (v5): pass 1 gives consecutive pixels of the chunk to consecutive threads, T
// apart. WALK = true (v6): the same for an image whose crop is sampled with ch >= 1.5 OH rows
// (its output rows need two new source rows about as often as one); for the others a thread
// takes one column and walks down a run of the chunk's rows (walk_column): G = T / OW runs a
// chunk, threads G OW .. T - 1 wait (64 of 512 at OW = 224). Everything else is the same code.
// BULK: stage with bulk copies and mbarriers (v5, v6); false: with per-lane cp.async (a sweep
// candidate, and the fallback if the bulk path misbehaves: -DDAY34_STAGE_BULK=false).
template <int K, int T, bool WALK, bool BULK>
__device__ __forceinline__ void augment_staged(const uint8_t* __restrict__ images,
                                               const float* __restrict__ prm,
                                               const float* __restrict__ norm,
                                               float* __restrict__ out, int H, int W, int OH,
                                               int OW, int nbq, int half, int total) {
    extern __shared__ float4 dyn[];
    __shared__ float scratch[32];
    __shared__ float part;
    __shared__ int nchunks;
    __shared__ uint64_t ring_bar[2];                   // a ring half's copies landed
    cg::cluster_group cluster = cg::this_cluster();
    const int rank = (int)cluster.block_rank();
    const int b = blockIdx.x / K;
    constexpr int nt = T;
    const int tid = (int)threadIdx.x;
    const int R = (OH + K - 1) / K, r0 = rank * R;
    const int nrows = max(0, min(OH, r0 + R) - r0);
    const int npix = OH * OW, nb = nrows * OW;
    const Aug a = load_aug(prm, b);
    const int pitch = staged_pitch(a.cw);
    const int cap = half / pitch - 1;                  // source rows a half stages (+1 spare)
    unsigned char* vals = reinterpret_cast<unsigned char*>(dyn);
    int2* xtab = reinterpret_cast<int2*>(vals + 48 * nbq);
    int4* ytab = reinterpret_cast<int4*>(xtab + 2 * ((OW + 1) / 2));
    int4* chunks = ytab + R;
    unsigned char* ring = reinterpret_cast<unsigned char*>(chunks + R);
    const unsigned char* smem0 = reinterpret_cast<const unsigned char*>(dyn);
    const int ring0 = (int)(ring - smem0);             // ytab's addresses count from dyn
    const int box0 = 3 * ((b * H + a.y0) * W + a.x0); // global byte of box pixel (0, 0)

    // tables: x taps; y taps, then the chunks, then the rows' shared addresses
    for (int x = tid; x < OW; x += nt) {
        const Tap t = tap(a.flip ? OW - 1 - x : x, OW, a.cw);
        xtab[x] = make_int2(3 * t.lo, __float_as_int(t.f));
    }
    for (int i = tid; i < nrows; i += nt) {
        const Tap t = tap(r0 + i, OH, a.ch);
        ytab[i] = make_int4(t.lo, __float_as_int(t.f), 0, 0);
    }
    __syncthreads();
    if (tid == 0) {            // greedy: as many band rows a chunk as their source rows fit
        mbar_init(&ring_bar[0]);
        mbar_init(&ring_bar[1]);
        mbar_init_fence();
        int n = 0;
        for (int i = 0; i < nrows; ++n) {
            const int ys = ytab[i].x;
            int j = i + 1;
            while (j < nrows && min(ytab[j].x + 1, a.ch - 1) - ys + 1 <= cap) ++j;
            chunks[n] = make_int4(i, j, ys, min(ytab[j - 1].x + 1, a.ch - 1) - ys + 1);
            for (; i < j; ++i) ytab[i].z = n;
        }
        nchunks = n;
    }
    __syncthreads();
    for (int i = tid; i < nrows; i += nt) {
        const int4 e = ytab[i];
        const int base = ring0 + (e.z & 1) * half + (e.x - chunks[e.z].z) * pitch;
        const unsigned s_lo = static_cast<unsigned>(box0) + 3u * W * e.x;   // only mod 16
        const unsigned s_hi = s_lo + 3u * W;                                // matters
        ytab[i] = make_int4(base + (int)(s_lo & 15), base + pitch + (int)(s_hi & 15), e.y, e.x);
    }
    const int nch = nchunks;
    __syncthreads();

    // chunk c's source rows into ring half c & 1. BULK: lane r of warp 0 copies rows r, r + 32,
    // ..., each as one bulk copy of its 16-byte pieces; bytes past the batch's last multiple of
    // 16 (only in the batch's last row) are copied by the lane itself, before the arrival.
    // Otherwise: a warp a row, 16 bytes a lane with cp.async, the lane's pieces 512 bytes apart.
    auto stage = [&](int c) {
        const int4 ck = chunks[c];
        if constexpr (BULK) {
            if (tid < 32) {
                uint64_t* bar = &ring_bar[c & 1];
                fence_proxy_async();                       // after the barrier that freed the half
                for (int r = tid; r < ck.w; r += 32) {
                    const int s = box0 + 3 * W * (ck.z + r), s16 = s & ~15;
                    const int e16 = (s + 3 * a.cw + 15) & ~15;
                    const int bulk = min(e16, total & ~15) - s16;
                    unsigned char* dst = ring + (c & 1) * half + r * pitch;
                    if (bulk > 0) {
                        mbar_expect(bar, bulk);
                        bulk_copy(dst, images + s16, bulk, bar);
                    }
#pragma unroll 1
                    for (int k = bulk; k < min(e16, total) - s16; ++k) dst[k] = images[s16 + k];
                }
                __syncwarp();
                if (tid == 0) mbar_arrive(bar);
            }
        } else {
            const int lane16 = 16 * (tid & 31);
            for (int r = tid / 32; r < ck.w; r += nt / 32) {
                const int s = box0 + 3 * W * (ck.z + r), s16 = s & ~15;
                const int n = ((s + 3 * a.cw + 15) & ~15) - s16;   // bytes to copy, % 16 == 0
                unsigned char* dst = ring + (c & 1) * half + r * pitch + lane16;
                const uint8_t* src = images + s16 + lane16;
                if (s16 + n <= total) {                    // every row but perhaps the batch's last
#pragma unroll 1
                    for (int k = lane16; k < n; k += 4 * 512, dst += 4 * 512, src += 4 * 512) {
#pragma unroll
                        for (int q = 0; q < 4; ++q)
                            if (k + 512 * q < n) copy16_async(dst + 512 * q, src + 512 * q);
                    }
                } else {                                   // its last piece ends past the batch
#pragma unroll 1
                    for (int k = lane16; k < n; k += 512, dst += 512, src += 512)
                        copy16_async(dst, src, min(16, total - (s16 + k)));
                }
            }
            copy_commit();
        }
    };

    float gr = 0.f, gg = 0.f, gb = 0.f;                // the band's sums of R, G, B
    // v5's walk: pixels j = (band row i, column ox), nt apart, stepped, not divided; the walk
    // goes on from chunk to chunk (a chunk ends at a row, the band's pixels are in row order)
    const int dq = nt / OW, dr = nt - dq * OW;
    const int ti = tid / OW, tx = tid - ti * OW;
    int j = tid, i = ti, ox = tx;
    unsigned char* v = vals + 48 * (tid >> 2) + 4 * (tid & 3);      // nt % 4 == 0: j & 3 fixed
    // v6's column walk: G runs of rows a chunk, run ti for threads ti OW .. ti OW + OW - 1
    const int G = max(1, nt / OW);
    const bool walk = WALK && 2 * a.ch < 3 * OH;
    if (nch > 0) stage(0);
    for (int c = 0; c < nch; ++c) {
        if (c + 1 < nch) stage(c + 1);
        if constexpr (BULK) {
            mbar_wait(&ring_bar[c & 1], (c >> 1) & 1); // chunk c's rows have landed
        } else {
            if (c + 1 == nch) copy_commit();           // an empty group: the count stays right
            copy_wait_all_but_one();                   // this thread's copies of chunk c landed
            __syncthreads();                           // everyone's
        }
        const int2 span = make_int2(chunks[c].x, chunks[c].y);
        if (walk) {
            const int L = (span.y - span.x + G - 1) / G;          // rows a run
            const int i0 = span.x + ti * L, i1 = min(span.y, i0 + L);
            if (ti < G)                                          // (ti, tx) = (run, column)
                for (int ox = tx; ox < OW; ox += nt) {           // more columns than threads
                    const int2 xt = xtab[ox];
                    walk_column(smem0, ytab, vals, i0, i1, ox, OW, xt.x, __int_as_float(xt.y), a,
                                gr, gg, gb);
                }
        } else {
            const int end = span.y * OW;
#pragma unroll 2
            while (j < end) {
                const int4 yr = ytab[i];
                const int2 xt = xtab[ox];
                const float fx = __int_as_float(xt.y);
                const float3 s = col_blend(row_blend(smem0, yr.x + xt.x, fx),
                                           row_blend(smem0, yr.y + xt.x, fx), __int_as_float(yr.z));
                const float3 y = bright(s, a);
                gr += y.x;
                gg += y.y;
                gb += y.z;
                *reinterpret_cast<float*>(v) = y.x;
                *reinterpret_cast<float*>(v + 16) = y.y;
                *reinterpret_cast<float*>(v + 32) = y.z;
                j += nt;
                v += 12 * nt;
                ox += dr;
                i += dq;
                if (ox >= OW) {
                    ox -= OW;
                    ++i;
                }
            }
        }
        __syncthreads();                               // half c & 1 free for chunk c + 2
    }

    // the image's mean: K partial sums through distributed shared memory (as v4)
    const float g = cuda100::block_sum(gray(gr, gg, gb), scratch);
    if (tid == 0) part = g;
    cluster.sync();
    float sum = 0.f;
#pragma unroll
    for (int r = 0; r < K; ++r) sum += *cluster.map_shared_rank(&part, r);
    const Finish f = finish_consts(a, sum / (float)npix, load_norm(norm));
    cluster.sync();

    // pass 2: the band's three planes are contiguous in out
    float* o = out + (size_t)b * 3 * npix + (size_t)r0 * OW;
    const float4* v4 = reinterpret_cast<const float4*>(vals);
    if ((OW & 3) == 0) {                               // planes and band 16-byte aligned
        for (int q = tid; q < nb / 4; q += nt) {
            const float4 y0 = v4[3 * q], y1 = v4[3 * q + 1], y2 = v4[3 * q + 2];
            float4 z0, z1, z2;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const float3 y = finish(make_float3(get4(y0, k), get4(y1, k), get4(y2, k)), f);
                set4(z0, k, y.x);
                set4(z1, k, y.y);
                set4(z2, k, y.z);
            }
            store4(o + 4 * q, z0);
            store4(o + npix + 4 * q, z1);
            store4(o + 2 * (size_t)npix + 4 * q, z2);
        }
    } else {                                           // nt % 4 == 0: j & 3 stays
        const float* p = reinterpret_cast<const float*>(vals) + 12 * (tid >> 2) + (tid & 3);
        float* o0 = o + tid;
        float* o1 = o0 + npix;
        float* o2 = o1 + npix;
        for (int j = tid; j < nb; j += nt) {
            const float3 y = finish(make_float3(p[0], p[4], p[8]), f);
            *o0 = y.x;
            *o1 = y.y;
            *o2 = y.z;
            p += 3 * nt;
            o0 += nt;
            o1 += nt;
            o2 += nt;
        }
    }
}

#define AUG_STAGED(NAME, K, T, WALK, BULK)                                                      \
    extern "C" __global__ void __cluster_dims__(K, 1, 1) __launch_bounds__(T, 1024 / T) NAME(  \
        const uint8_t* __restrict__ images, const float* __restrict__ prm,                      \
        const float* __restrict__ norm, float* __restrict__ out, int H, int W, int OH, int OW,  \
        int nbq, int half, int total) {                                                         \
        augment_staged<K, T, WALK, BULK>(images, prm, norm, out, H, W, OH, OW, nbq, half,     \
                                         total);                                                \
    }

#ifndef DAY34_STAGE_BULK
#define DAY34_STAGE_BULK true   // false: stage with per-lane cp.async (no mbarriers, no TMA)
#endif
AUG_STAGED(aug_v5, 8, 512, false, DAY34_STAGE_BULK)
AUG_STAGED(aug_v6, 8, 512, true, DAY34_STAGE_BULK)

#ifdef DAY34_SWEEP     // one 1024-thread block an SM (the driver's V5_TWO_A_SM = False sizing);
                       // v5 staged with cp.async instead of bulk copies
AUG_STAGED(aug_v5_t1024, 8, 1024, false, true)
AUG_STAGED(aug_v6_t1024, 8, 1024, true, true)
AUG_STAGED(aug_v5_cpasync, 8, 512, false, false)
#endif
