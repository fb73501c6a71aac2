"""Day 9 sweep 4 (GPU), 8192x768: where do the last microseconds go?
copy kernels (no reduction), a read-only LayerNorm (stores removed), and dynamic row scheduling
(warps grab rows from an atomic counter) for v6 and for the bulk-load version. Plain stores."""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H
from common.build import load_module
from common.check import compare_all
from common.gpu import device_info, driver
from common.timing import copy_bandwidth_gbps, time_fn
from days.day09_layer_norm import driver as D

EXTRA = r'''
extern "C" __global__ void copy_f4_stride(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) y[i] = x[i];
}
extern "C" __global__ void copy_f4_unroll4(const float4* __restrict__ x, float4* __restrict__ y, int n4) {
    const int stride = gridDim.x * blockDim.x;
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    for (; i + 3 * stride < n4; i += 4 * stride) {
        float4 a = x[i], b = x[i + stride], c = x[i + 2 * stride], d = x[i + 3 * stride];
        y[i] = a; y[i + stride] = b; y[i + 2 * stride] = c; y[i + 3 * stride] = d;
    }
    for (; i < n4; i += stride) y[i] = x[i];
}

__device__ __forceinline__ int grab(int* ctr, int lane) {
    int r = 0;
    if (lane == 0) r = atomicAdd(ctr, 1);
    return __shfl_sync(0xffffffffu, r, 0);
}
__device__ __forceinline__ void finish(int* ctr, int lane) {
    // the last warp of the grid to finish resets the counters for the next launch
    if (lane == 0) {
        const int total = gridDim.x * (blockDim.x >> 5);
        if (atomicAdd(ctr + 1, 1) == total - 1) { atomicExch(ctr, 0); atomicExch(ctr + 1, 0); }
    }
}

extern "C" __global__ void __launch_bounds__(512) layernorm_v6d_items6(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C,
    float eps, int* ctr) {
    constexpr int ITEMS = 6;
    const int lane = threadIdx.x & 31;
    const int nvec = C / 4;
    float4 wv[ITEMS], bv[ITEMS], a[ITEMS], bb[ITEMS];
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) { wv[i] = __ldg(reinterpret_cast<const float4*>(w) + j);
                        bv[i] = __ldg(reinterpret_cast<const float4*>(b) + j); }
    }
    int row = grab(ctr, lane);
    if (row < N) load_row4<ITEMS>(x + (int64_t)row * C, nvec, lane, a);
    while (row < N) {
        const int r1 = grab(ctr, lane);
        if (r1 < N) load_row4<ITEMS>(x + (int64_t)r1 * C, nvec, lane, bb);
        normalize_row4<ITEMS>(a, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, lane, eps);
        if (r1 >= N) break;
        const int r2 = grab(ctr, lane);
        if (r2 < N) load_row4<ITEMS>(x + (int64_t)r2 * C, nvec, lane, a);
        normalize_row4<ITEMS>(bb, wv, bv, out + (int64_t)r1 * C, mean + r1, rstd + r1, C, nvec, lane, eps);
        row = r2;
    }
    finish(ctr, lane);
}

extern "C" __global__ void __launch_bounds__(512) layernorm_v7d_items6(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C,
    float eps, int* ctr) {
    constexpr int ITEMS = 6;
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * 2;
    float* slots = reinterpret_cast<float*>(smem + ((nwarps * 2 * 8 + 127) & ~127)) + (size_t)warp * 2 * C;
    const uint32_t row_bytes = (uint32_t)C * 4u;
    int r[2];
    if (lane == 0) {
        mbar_init(&bars[0], 1); mbar_init(&bars[1], 1);
        mbar_init_fence();
    }
    r[0] = grab(ctr, lane);
    r[1] = grab(ctr, lane);
    if (lane == 0) {
        for (int s = 0; s < 2; ++s)
            if (r[s] < N) bulk_load(slots + s * C, x + (int64_t)r[s] * C, row_bytes, &bars[s]);
    }
    __syncwarp();
    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) { wv[i] = __ldg(reinterpret_cast<const float4*>(w) + j);
                        bv[i] = __ldg(reinterpret_cast<const float4*>(b) + j); }
    }
    for (uint32_t k = 0;; ++k) {
#pragma unroll
        for (int s = 0; s < 2; ++s) {
            const int row = r[s];
            if (row >= N) goto done;
            mbar_wait(&bars[s], k & 1u);
            const float4* xs = reinterpret_cast<const float4*>(slots + s * C);
#pragma unroll
            for (int i = 0; i < ITEMS; ++i) { const int j = lane + 32 * i; if (j < nvec) v[i] = xs[j]; }
            __syncwarp();
            r[s] = grab(ctr, lane);
            if (lane == 0 && r[s] < N)
                bulk_load(slots + s * C, x + (int64_t)r[s] * C, row_bytes, &bars[s]);
            normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, lane, eps);
        }
    }
done:
    finish(ctr, lane);
}
'''

src = Path("days/day09_layer_norm/kernel.cu").read_text()
STCS = "__stcs(reinterpret_cast<float4*>(outr) + j, o);"
WB = "reinterpret_cast<float4*>(outr)[j] = o;"
assert STCS in src
variants = {"wb": src.replace(STCS, WB) + EXTRA, "nostore": src.replace(STCS, "(void)o;") + EXTRA}
mods = {}
for name, text in variants.items():
    p = Path(tempfile.mkdtemp()) / "kernel.cu"
    p.write_text(text)
    mods[name] = load_module(p, options=["-diag-suppress", "1556"])

cuda = driver()
rng = np.random.default_rng(0)
info = device_info()
sms, optin = info["sms"], info["smem_per_block_optin"]
copy = copy_bandwidth_gbps()
print(info["name"], "copy GB/s %.0f" % copy)
n, c = 8192, 768
case = D.make_case((n, c), rng)
small = D.make_case((1025, 764), rng, stress=True)
d, ds = H.DeviceCase(case), H.DeviceCase(small)
gb = case.bytes / 1e9
ctr = d.scratch("ctr", 2, np.int32, zero=True)
ctr_s = ds.scratch("ctr", 2, np.int32, zero=True)


def report(name, go, ok=""):
    tm = min(time_fn(go, repeats=100).median_ms * 1e3 for _ in range(2))
    print(f"{name:44s} {tm:6.2f} us  {100*gb/(tm*1e-6)/copy:5.1f}%  {ok}", flush=True)


t = time_fn(lambda: cuda.memcpy_dtod(d.out, d.x, n * c * 4), repeats=100)
print(f"memcpy same bytes {t.median_ms*1e3:.2f} us")
n4 = n * c // 4
wb = mods["wb"]
for kname in ("copy_f4_stride", "copy_f4_unroll4"):
    fn = wb.get_function(kname); fn.prepare("PPi")
    for blocks in (1, 2, 4, 8):
        report(f"{kname} 256 thr x {blocks}/SM",
               lambda: fn.prepared_call((sms * blocks, 1, 1), (256, 1, 1), d.x, d.out, n4))
fn = wb.get_function("copy_f4_stride"); fn.prepare("PPi")
report("copy one float4 per thread", lambda: fn.prepared_call((H.cdiv(n4, 256), 1, 1), (256, 1, 1), d.x, d.out, n4))

for mod in ("wb", "nostore"):
    f6 = mods[mod].get_function("layernorm_v6_items6"); f6.prepare(D.SIG)
    report(f"{mod} v6 (2 x 8 warps/SM)", lambda: f6.prepared_call((sms * 2, 1, 1), (256, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS)))


def check(dd, case_, go):
    dd.poison_outputs()
    go()
    cuda.Context.synchronize()
    return compare_all(dd.outputs(), case_.expected(), case_.tolerance()).ok


for kname in ("layernorm_v6d_items6", "layernorm_v7d_items6"):
    fn = wb.get_function(kname); fn.prepare(D.SIG + "P")
    if "v7d" in kname:
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
    for W, ps in [(8, 1), (8, 2), (16, 1), (4, 4), (4, 3)]:
        smem = ((W * 16 + 127) // 128) * 128 + W * 2 * c * 4 if "v7d" in kname else 0
        def go(dd=d, cc=ctr):
            nn, ccc = dd.size
            fn.prepared_call((sms * ps, 1, 1), (32 * W, 1, 1), dd.x, dd.w, dd.b, dd.out, dd.mean,
                             dd.rstd, nn, ccc, np.float32(D.EPS), cc, shared_size=smem)
        ok = check(d, case, go) and check(ds, small, lambda: go(ds, ctr_s)) and check(d, case, go)
        report(f"{kname[10:]} W={W} blocks/SM={ps}", go, f"ok={ok}")
