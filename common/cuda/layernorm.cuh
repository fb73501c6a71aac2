// LayerNorm forward for one row, one warp (taught on day 9, layer_norm: v5 is this warp-per-row
// shape, and the CORRECTED TWO-PASS statistics come from there):
//
//   m0  = sum(x) / C                         first estimate of the mean (float32, rounded)
//   a   = sum(x - m0), q = sum((x - m0)^2)   second pass, two sums in one reduction
//   md  = a / C                              what m0 missed: mean = m0 + md
//   var = q / C - md^2,   rstd = 1 / sqrt(var + eps)
//   out = ((x - m0) - md) * rstd * w + b
//
// The statistics travel as a float4 {m0, md, rstd, 0}: a kernel that normalizes later (a GEMM
// normalizing its A tile as it loads it, day 30) needs the mean as two floats for rows whose
// mean is large against their spread (day 9's README shows why).
//
//   warp_row_stats_regs<ITEMS>(xr, C, eps, v)  row held in registers, ITEMS float4 a lane:
//                                              C % 4 == 0, C <= 128 * ITEMS, xr 16-byte aligned
//   warp_row_stats_loop(xr, C, eps)            any C: three loops over the row (the 2nd and 3rd
//                                              read it again, from L1/L2)
//   normalize(x, s, w, b)                      one element from the stats
// Every lane of the warp must call these (full-mask shuffles); every lane gets the stats.
#pragma once

#include "warp.cuh"

namespace cuda100 {
namespace ln {

__device__ __forceinline__ float4 finish(float m0, float a, float q, int C, float eps) {
    const float md = a / C;
    const float var = fmaxf(q / C - md * md, 0.f);  // >= 0 exactly; the clamp guards rounding
    return make_float4(m0, md, 1.f / sqrtf(var + eps), 0.f);
}

__device__ __forceinline__ float normalize(float x, float4 s, float w, float b) {
    return ((x - s.x) - s.y) * s.z * w + b;
}

template <int ITEMS>
__device__ __forceinline__ float4 warp_row_stats_regs(const float* __restrict__ xr, int C, float eps,
                                                     float4 (&v)[ITEMS]) {
    const int lane = threadIdx.x & 31;
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int c = (lane + 32 * i) * 4;
        v[i] = c < C ? *reinterpret_cast<const float4*>(xr + c) : make_float4(0.f, 0.f, 0.f, 0.f);
        s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    }
    const float m0 = warp_sum(s) / C;
    float a = 0.f, q = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if ((lane + 32 * i) * 4 < C) {  // padding lanes hold zeros, not x - m0: skip them
            const float d0 = v[i].x - m0, d1 = v[i].y - m0, d2 = v[i].z - m0, d3 = v[i].w - m0;
            a += (d0 + d1) + (d2 + d3);
            q += (d0 * d0 + d1 * d1) + (d2 * d2 + d3 * d3);
        }
    }
    return finish(m0, warp_sum(a), warp_sum(q), C, eps);
}

__device__ __forceinline__ float4 warp_row_stats_loop(const float* __restrict__ xr, int C, float eps) {
    const int lane = threadIdx.x & 31;
    float s = 0.f;
    for (int c = lane; c < C; c += 32) s += xr[c];
    const float m0 = warp_sum(s) / C;
    float a = 0.f, q = 0.f;
    for (int c = lane; c < C; c += 32) {
        const float d = xr[c] - m0;
        a += d;
        q += d * d;
    }
    return finish(m0, warp_sum(a), warp_sum(q), C, eps);
}

}  // namespace ln
}  // namespace cuda100
