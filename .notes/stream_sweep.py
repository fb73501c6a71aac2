"""Which way of streaming memory is fastest on this GPU, for each mix of reads and writes?

Run on the GPU machine from the repo root:  python .notes/stream_sweep.py
Times (CUDA events, L2 flushed by reading 2x L2 before each run, median) stream kernels that read R
arrays and write W arrays of n floats (R:W = 1:1 copy, 2:1 add, 3:1, 1:0 read-only), over
unroll (float4 per thread per step), block size, grid (one wave of resident blocks with a
grid-stride loop, or one block per tile: "oneshot"), and cache hints; beside cuMemcpyDtoD,
torch.add / torch.sum / tensor.copy_ and CuPy's sum (CUB). Prints one table per size.
"""
import itertools
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())
from common.gpu import context, device_info, driver  # noqa: E402
from common.timing import time_fn  # noqa: E402

SRC = r"""
#include <cstdint>
__device__ __forceinline__ float4 ld_cs(const float4* p) { return __ldcs(p); }
__device__ __forceinline__ float4 ld_plain(const float4* p) { return *p; }
__device__ __forceinline__ float4 ld_nc256(const float4* p) {
    float4 v;
    asm("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0,%1,%2,%3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
}
__device__ __forceinline__ void st_cs(float4* p, float4 v) { __stcs(p, v); }
__device__ __forceinline__ void st_plain(float4* p, float4 v) { *p = v; }
__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

template <int R, int W, int U, float4 (*LD)(const float4*), void (*ST)(float4*, float4)>
__device__ __forceinline__ void stream(const float4* __restrict__ a, const float4* __restrict__ b,
                                       const float4* __restrict__ c, float4* __restrict__ y,
                                       float4* __restrict__ z, long long n4, float* sink) {
    const long long step = (long long)gridDim.x * blockDim.x * U;
    float acc = 0.f;
    for (long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x; base < n4;
         base += step) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x;
            if (i < n4) {
                v[u] = LD(a + i);
                if (R > 1) v[u] = add4(v[u], LD(b + i));
                if (R > 2) v[u] = add4(v[u], LD(c + i));
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const long long i = base + (long long)u * blockDim.x;
            if (i < n4) {
                if (W == 0) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
                if (W > 0) ST(y + i, v[u]);
                if (W > 1) ST(z + i, v[u]);
            }
        }
    }
    if (W == 0 && acc == 1.2345f) *sink = acc;
}

#define K(R, W, U, LDN, STN)                                                                  \
extern "C" __global__ void s_r##R##w##W##_u##U##_##LDN##_##STN(                               \
    const float4* a, const float4* b, const float4* c, float4* y, float4* z, long long n4,     \
    float* sink) { stream<R, W, U, ld_##LDN, st_##STN>(a, b, c, y, z, n4, sink); }
#define KU(R, W, LDN, STN) K(R, W, 1, LDN, STN) K(R, W, 2, LDN, STN) K(R, W, 4, LDN, STN) K(R, W, 8, LDN, STN)
#define KL(R, W) KU(R, W, cs, cs) KU(R, W, plain, plain) KU(R, W, nc256, cs) KU(R, W, plain, cs)
KL(1, 1)
KL(2, 1)
KL(3, 1)
KL(1, 0)
KL(1, 2)
"""

MIXES = [(1, 1), (2, 1), (1, 0), (3, 1), (1, 2)]
UNROLLS = [1, 2, 4, 8]
HINTS = [("cs", "cs"), ("plain", "plain"), ("nc256", "cs"), ("plain", "cs")]
THREADS = [128, 256, 512]


def main():
    from pycuda.compiler import SourceModule

    context()
    cuda = driver()
    info = device_info()
    sms = info["sms"]
    arch = info["arch"][3:]
    mod = SourceModule(SRC, no_extern_c=True, arch=f"compute_{arch}", code=f"sm_{arch}",
                       options=["-O3", "-std=c++17"])
    print(info["name"], info["sms"], "SMs, L2", info["l2_bytes"] >> 20, "MB, theoretical",
          round(info["theoretical_bw_gbps"] or 0), "GB/s", time.strftime("%Y-%m-%d"))
    try:
        import torch
    except ImportError:
        torch = None
    try:
        import cupy
    except ImportError:
        cupy = None

    for n in (2 ** 28, 2 ** 28 + 3, 2 ** 24, 3 * 2 ** 22):  # floats per stream
        bufs = [cuda.mem_alloc(4 * n + 64) for _ in range(5)]
        for bf in bufs:
            cuda.memset_d32(bf, 0x3F800000, n)
        sink = cuda.mem_alloc(4)
        n4 = n // 4
        print(f"\n=== n = {n} floats per stream ({4 * n / 2 ** 20:.0f} MiB each)")
        best = {}
        rows = []
        for (r, w), u, (ld, st), th in itertools.product(MIXES, UNROLLS, HINTS, THREADS):
            if w == 0 and st != "cs":
                continue
            fn = mod.get_function(f"s_r{r}w{w}_u{u}_{ld}_{st}")
            fn.prepare("PPPPPqP")
            per_sm = max(1, min(2048 // th, 32))
            for gname, grid in (("wave", sms * per_sm), ("wave2", sms * per_sm * 2),
                                ("oneshot", -(-n4 // (th * u)))):
                args = (bufs[0], bufs[1], bufs[2], bufs[3], bufs[4], n4, sink)
                try:
                    t = time_fn(lambda: fn.prepared_call((grid, 1, 1), (th, 1, 1), *args),
                                warmup=2, repeats=15)
                except Exception:  # too many registers for this block size
                    continue
                gbps = 4 * n4 * 4 * (r + w) / (t.median_ms * 1e-3) / 1e9
                key = (r, w)
                rows.append((key, u, ld, st, th, gname, t.median_ms, gbps))
                if key not in best or gbps > best[key][-1]:
                    best[key] = (u, ld, st, th, gname, t.median_ms, gbps)
        for key in MIXES:
            top = sorted([x for x in rows if x[0] == key], key=lambda x: -x[-1])[:6]
            print(f"mix R{key[0]}:W{key[1]} best 6:")
            for x in top:
                print(f"   u{x[1]} {x[2]}/{x[3]} t{x[4]} {x[5]:8s} {x[6] * 1e3:9.1f} us {x[7]:7.0f} GB/s")
            # the best figure reachable with each value of each factor (the others free)
            for label, idx in (("unroll", 1), ("threads", 4), ("grid", 5)):
                vals = sorted({x[idx] for x in rows if x[0] == key}, key=str)
                print(f"   best by {label}: " + ", ".join(
                    f"{v}={max(x[7] for x in rows if x[0] == key and x[idx] == v):.0f}" for v in vals))
            hints = sorted({(x[2], x[3]) for x in rows if x[0] == key})
            print("   best by hints: " + ", ".join(
                f"{h[0]}/{h[1]}={max(x[7] for x in rows if x[0] == key and (x[2], x[3]) == h):.0f}"
                for h in hints))
        nbytes = 4 * n
        t = time_fn(lambda: cuda.memcpy_dtod(bufs[3], bufs[0], nbytes), warmup=2, repeats=15)
        print(f"cuMemcpyDtoD: {t.median_ms * 1e3:.1f} us {2 * nbytes / t.median_ms / 1e6:.0f} GB/s")
        if torch is not None:
            ta, tb, tc = (torch.empty(n, device="cuda") for _ in range(3))
            ta.normal_(), tb.normal_()
            for name, f, byt in (("torch.add", lambda: torch.add(ta, tb, out=tc), 12 * n),
                                 ("torch.sum", lambda: torch.sum(ta), 4 * n),
                                 ("tensor.copy_", lambda: tc.copy_(ta), 8 * n)):
                t = time_fn(f, warmup=2, repeats=15)
                print(f"{name}: {t.median_ms * 1e3:.1f} us {byt / t.median_ms / 1e6:.0f} GB/s")
            if cupy is not None:
                from cupy import _core

                ca = cupy.asarray(ta)
                for acc in ([], ["cub"]):
                    _core.set_reduction_accelerators(acc)
                    _core.set_routine_accelerators(acc)
                    t = time_fn(lambda: cupy.sum(ca), warmup=2, repeats=15)
                    print(f"cupy.sum accelerators={acc}: {t.median_ms * 1e3:.1f} us "
                          f"{4 * n / t.median_ms / 1e6:.0f} GB/s")
            del ta, tb, tc
            torch.cuda.empty_cache()
        for bf in bufs:
            bf.free()


if __name__ == "__main__":
    main()
