"""Day 5, long rows: two passes where the second read hits L2, against v6's shared-memory rows.
GPU machine, repo root:  python .notes/day05_twopass_sweep.py

A persistent grid (BPS blocks an SM) walks the rows. Pass 1 reads the row with float4 loads
(scalar head and tail) keeping an online (max, sum); one block reduction; pass 2 reads the row
again and writes exp(x - max) / sum. DRAM sees one read and one write only if the second read
finds the row in L2: the rows in flight (SMs x BPS x row bytes: 132 x 256 KB = 33 MB at 65536
columns, one block an SM) must fit the L2. HINT 1 marks the first read evict_last and the second
read and the stores evict_first (createpolicy + .L2::cache_hint), so y does not push x out.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
from common import harness as H  # noqa: E402
from common.gpu import device_info  # noqa: E402
from common.timing import copy_bandwidth_gbps, time_fn  # noqa: E402
from days.day05_shared_softmax import driver as D  # noqa: E402

SRC = r"""
#include <cfloat>
#include <cstdint>
struct MaxSum { float m, s; };
__device__ __forceinline__ MaxSum merge(MaxSum a, MaxSum b) {
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * expf(a.m - m) + b.s * expf(b.m - m)};
}
__device__ __forceinline__ float4 ld4(const float4* p, uint64_t pol, bool hint) {
    float4 v;
    if (hint) asm volatile("ld.global.L2::cache_hint.v4.f32 {%0,%1,%2,%3}, [%4], %5;"
                           : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(pol));
    else v = *p;
    return v;
}
__device__ __forceinline__ void st4(float4* p, float4 v, uint64_t pol, bool hint) {
    if (hint) asm volatile("st.global.L2::cache_hint.v4.f32 [%0], {%1,%2,%3,%4}, %5;"
                           :: "l"(p), "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "l"(pol) : "memory");
    else *p = v;
}
template <int NT>
__device__ MaxSum block_maxsum(MaxSum st, MaxSum* buf) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    for (int o = 16; o > 0; o >>= 1)
        st = merge(st, {__shfl_xor_sync(~0u, st.m, o), __shfl_xor_sync(~0u, st.s, o)});
    if (lane == 0) buf[warp] = st;
    __syncthreads();
    MaxSum r = lane < NT / 32 ? buf[lane] : MaxSum{-FLT_MAX, 0.f};
    for (int o = 16; o > 0; o >>= 1)
        r = merge(r, {__shfl_xor_sync(~0u, r.m, o), __shfl_xor_sync(~0u, r.s, o)});
    __syncthreads();
    return r;
}
template <int NT, bool HINT>
__device__ void twopass(const float* __restrict__ x, float* __restrict__ y, int rows, int cols) {
    __shared__ MaxSum buf[32];
    uint64_t keep = 0, drop = 0;
    if (HINT) {
        asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(keep));
        asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(drop));
    }
    for (int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
        const float* xr = x + row * cols;
        float* yr = y + row * cols;
        const int head = min((4 - (int)((reinterpret_cast<uintptr_t>(xr) >> 2) & 3)) & 3, cols);
        const int nvec = (cols - head) / 4;
        const int tail = cols - head - 4 * nvec;
        const float4* xv = reinterpret_cast<const float4*>(xr + head);
        float4* yv = reinterpret_cast<float4*>(yr + head);
        MaxSum st{-FLT_MAX, 0.f};
        for (int j = threadIdx.x; j < nvec; j += NT) {
            const float4 v = ld4(xv + j, keep, HINT);
            const float m4 = fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w));
            const float m = fmaxf(st.m, m4);
            st.s = st.s * expf(st.m - m) + expf(v.x - m) + expf(v.y - m) + expf(v.z - m) + expf(v.w - m);
            st.m = m;
        }
        const int t = threadIdx.x;
        if (t < head) st = merge(st, {xr[t], 1.f});
        if (t < tail) st = merge(st, {xr[head + 4 * nvec + t], 1.f});
        st = block_maxsum<NT>(st, buf);
        const float inv = 1.f / st.s;
        for (int j = threadIdx.x; j < nvec; j += NT) {
            float4 v = ld4(xv + j, drop, HINT);
            v.x = expf(v.x - st.m) * inv; v.y = expf(v.y - st.m) * inv;
            v.z = expf(v.z - st.m) * inv; v.w = expf(v.w - st.m) * inv;
            st4(yv + j, v, drop, HINT);
        }
        if (t < head) yr[t] = expf(xr[t] - st.m) * inv;
        if (t < tail) yr[head + 4 * nvec + t] = expf(xr[head + 4 * nvec + t] - st.m) * inv;
    }
}
#define TP(NT, HINT, MINB) extern "C" __global__ void __launch_bounds__(NT, MINB) \
    tp_##NT##_##HINT(const float* x, float* y, int rows, int cols) { twopass<NT, HINT>(x, y, rows, cols); }
TP(1024, 0, 1) TP(1024, 1, 1) TP(512, 0, 2) TP(512, 1, 2) TP(256, 0, 4) TP(256, 1, 4)
"""


def main():
    from pycuda.compiler import SourceModule

    info = device_info()
    arch = info["arch"][3:]
    mod = SourceModule(SRC, no_extern_c=True, arch=f"compute_{arch}", code=f"sm_{arch}",
                       options=["-O3", "-std=c++17"])
    copy = copy_bandwidth_gbps()
    sms = info["sms"]
    print(info["name"], f"copy ceiling {copy:.0f} GB/s, L2 {info['l2_bytes'] >> 20} MB")
    variants = [("v6 shipped", lambda d: D.launch("v6", d))]
    for nt in (1024, 512, 256):
        for hint in (0, 1):
            fn = mod.get_function(f"tp_{nt}_{hint}")
            fn.prepare("PPii")
            for bps in sorted({1, 2048 // nt // 2, 2048 // nt} - {0}):
                def run(d, fn=fn, nt=nt, bps=bps):
                    rows, cols = d.size
                    fn.prepared_call((min(rows, sms * bps), 1, 1), (nt, 1, 1), d.x, d.y, rows, cols)
                variants.append((f"2pass {nt}x{bps}/SM{' hint' if hint else ''}", run))
    for size in [(8192, 50257), (1024, 65536), (8192, 32001), (2048, 20000), (4096, 100003)]:
        case = D.make_case(size, np.random.default_rng(5))
        d = H.DeviceCase(case)
        res = []
        for name, fn in variants:
            r = H.check(lambda v, dd: fn(dd), "v6", case, d)
            assert r.ok, (size, name, r.message)
            t = time_fn(lambda: fn(d))
            res.append((name, t.median_ms, 100 * case.bytes / t.median_ms / 1e6 / copy))
        print(f"\n{H.size_str(size)}  ({size[1] * 4 / 1024:.0f} KB a row)")
        for name, ms, pct in sorted(res, key=lambda r: r[1]):
            print(f"   {name:24s} {ms * 1e3:8.1f} us {pct:5.1f}%")


if __name__ == "__main__":
    main()
