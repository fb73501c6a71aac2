"""Day 14: can a sum beat v9 and CUB by a margin? (GPU machine, from the repo root)

    python .notes/reduce_sweep.py

v9 reads with four float4 loads a thread spaced a whole grid apart; the candidates read
contiguous chunks (a block's U x 256 float4 at a time, like the fastest read-only stream of
.notes/stream_sweep.py) with U accumulators, and finish like v9 (the last block to take a
ticket sums the partials in block order). Each is checked against the float64 sum, then timed
with the L2 flushed, beside v9, CUB (CuPy with the cub accelerator) and torch.sum.
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
from common.gpu import context, device_info, driver  # noqa: E402
from common.timing import read_bandwidth_gbps, time_fn  # noqa: E402

SRC = r"""
#define THREADS 256
__device__ __forceinline__ float sum4(float4 v) { return (v.x + v.y) + (v.z + v.w); }
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ float block_sum(float v) {
    __shared__ float buf[32];
    v = warp_sum(v);
    if ((threadIdx.x & 31) == 0) buf[threadIdx.x >> 5] = v;
    __syncthreads();
    v = threadIdx.x < blockDim.x / 32 ? buf[threadIdx.x] : 0.f;
    v = warp_sum(v);
    __syncthreads();
    return v;
}
template <int U>
__device__ __forceinline__ float chunk_sum(const float* __restrict__ x, long long n) {
    const float4* x4 = reinterpret_cast<const float4*>(x);
    const long long n4 = n >> 2;
    const long long step = (long long)gridDim.x * blockDim.x * U;
    float acc[U];
#pragma unroll
    for (int u = 0; u < U; ++u) acc[u] = 0.f;
    long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x;
    for (; base + (U - 1) * (long long)blockDim.x < n4; base += step) {
        float4 v[U];
#pragma unroll
        for (int u = 0; u < U; ++u) v[u] = __ldcs(x4 + base + u * blockDim.x);
#pragma unroll
        for (int u = 0; u < U; ++u) acc[u] += sum4(v[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u)
        if (base + u * (long long)blockDim.x < n4) acc[u] += sum4(__ldcs(x4 + base + u * blockDim.x));
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    const long long t = (n4 << 2) + first;
    if (t < n) acc[0] += x[t];
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) s += acc[u];
    return s;
}
template <int U>
__device__ void finish(float v, float* partials, unsigned* ticket, float* y) {
    __shared__ bool is_last;
    if (threadIdx.x == 0) {
        partials[blockIdx.x] = v;
        __threadfence();
        const unsigned t = atomicInc(ticket, gridDim.x - 1);
        __threadfence();
        is_last = (t == gridDim.x - 1);
    }
    __syncthreads();
    if (!is_last) return;
    float s = 0.f;
    for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x) s += __ldcg(partials + i);
    s = block_sum(s);
    if (threadIdx.x == 0) y[0] = s;
}
#define CAND(U) extern "C" __global__ void cand_u##U(const float* x, float* partials,          \
    unsigned* ticket, float* y, long long n) { finish<U>(block_sum(chunk_sum<U>(x, n)), partials, ticket, y); }
CAND(2) CAND(4) CAND(8)
"""


def main():
    from pycuda import gpuarray
    from pycuda.compiler import SourceModule

    context()
    cuda = driver()
    info = device_info()
    arch = info["arch"][3:]
    mod = SourceModule(SRC, no_extern_c=True, arch=f"compute_{arch}", code=f"sm_{arch}",
                       options=["-O3", "-std=c++17"])
    from common.build import load_module
    day14 = load_module(os.path.join(os.getcwd(), "days/day14_reduce_sum/kernel.cu"))
    v9 = day14.get_function("reduce_v9")
    v9.prepare("PPPPq")
    import cupy
    import torch
    from cupy import _core

    _core.set_reduction_accelerators(["cub"])
    _core.set_routine_accelerators(["cub"])
    read = read_bandwidth_gbps()
    print(info["name"], f"read-only ceiling {read:.0f} GB/s")
    for n in (2 ** 28, 2 ** 28 + 3, 2 ** 24 + 1, 1000003):
        x = np.random.default_rng(n % 1000).random(n, dtype=np.float32)
        exact = float(np.sum(x, dtype=np.float64))
        xd = gpuarray.to_gpu(x)
        y = gpuarray.empty(1, np.float32)
        part = gpuarray.empty(132 * 32, np.float32)
        ticket = gpuarray.zeros(1, np.uint32)
        rows = []
        sms = info["sms"]

        def run_v9():
            g = max(1, min(sms * 8, -(-n // (256 * 16))))
            v9.prepared_call((g, 1, 1), (256, 1, 1), xd.gpudata, part.gpudata, ticket.gpudata, y.gpudata, n)
        cands = [("v9", run_v9, 0)]
        for u in (2, 4, 8):
            fn = mod.get_function(f"cand_u{u}")
            fn.prepare("PPPPq")
            for per_sm, th in ((8, 256), (16, 128), (4, 512)):
                def run(fn=fn, per_sm=per_sm, th=th, u=u):
                    g = max(1, min(sms * per_sm, -(-n // (th * 4 * u))))
                    fn.prepared_call((g, 1, 1), (th, 1, 1), xd.gpudata, part.gpudata, ticket.gpudata, y.gpudata, n)
                cands.append((f"chunk u{u} {per_sm}x{th}", run, 0))
        for name, fn, _ in cands:
            fn()
            got = float(y.get()[0])
            err = abs(got - exact) / exact
            assert err < 1e-5, f"{name} at {n}: {got} vs {exact} (rel {err:.2e})"
            t = time_fn(fn, repeats=30)
            rows.append((name, t.median_ms, 4 * n / t.median_ms / 1e6))
        xt = torch.as_tensor(xd, device="cuda")
        xc = cupy.asarray(xd)
        for name, fn in (("CUB cupy.sum", lambda: cupy.sum(xc)), ("torch.sum", lambda: torch.sum(xt))):
            got = float(fn().item())
            assert abs(got - exact) / exact < 1e-5, name
            t = time_fn(fn, repeats=30)
            rows.append((name, t.median_ms, 4 * n / t.median_ms / 1e6))
        cub = next(r[1] for r in rows if r[0].startswith("CUB"))
        print(f"\nn = {n}")
        for name, ms, gbps in sorted(rows, key=lambda r: r[1]):
            print(f"  {name:22s} {ms * 1e3:8.1f} us {gbps:6.0f} GB/s {100 * gbps / read:5.1f}% "
                  f"of read, {cub / ms:.3f}x CUB")


if __name__ == "__main__":
    main()
