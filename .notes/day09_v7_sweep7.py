"""Day 9 sweep 7 (GPU), 8192x768: bulk row loads with DYNAMIC row assignment.
The timeline run showed every static split ends with a long tail (warps' end times p10 8.2 us,
max 12.3 us): some warps' rows are served later than others'. Here a warp takes its next row
from a global atomic counter, grabbed one row AHEAD (the atomic's round trip hides behind the
row being normalized). The last warp to finish resets the counter for the next launch."""
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
template <int P, int ITEMS>
__device__ __forceinline__ void v7dyn_body(const float* __restrict__ x, const float* __restrict__ w,
    const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,
    float* __restrict__ rstd, int N, int C, float eps, int* __restrict__ ctr, int chunk) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * P;
    int* srow = reinterpret_cast<int*>(smem + nwarps * P * 8) + warp * P;
    float* slots = reinterpret_cast<float*>(smem + ((nwarps * P * 12 + 127) & ~127)) +
                   (size_t)warp * P * C;
    const uint32_t row_bytes = (uint32_t)C * 4u;
    int pending = 0;
    if (lane == 0) {
        for (int s = 0; s < P; ++s) mbar_init(&bars[s], 1);
        mbar_init_fence();
        for (int s = 0; s < P; ++s) {
            srow[s] = atomicAdd(ctr, 1);
            if (srow[s] < N) bulk_load(slots + (size_t)s * C, x + (int64_t)srow[s] * C, row_bytes, &bars[s]);
        }
        pending = atomicAdd(ctr, 1);
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
    for (int t = 0;; ++t) {
        const int s = t % P;
        const int row = srow[s];
        if (row >= N) break;   // slots hold rows in grab order: all later ones are past N too
        mbar_wait(&bars[s], (uint32_t)(t / P) & 1u);
        const float4* xs = reinterpret_cast<const float4*>(slots + (size_t)s * C);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) { const int j = lane + 32 * i; if (j < nvec) v[i] = xs[j]; }
        __syncwarp();
        if (lane == 0) {
            srow[s] = pending;
            if (pending < N) {
                bulk_load(slots + (size_t)s * C, x + (int64_t)pending * C, row_bytes, &bars[s]);
                pending = atomicAdd(ctr, 1);
            }
        }
        __syncwarp();
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec,
                              lane, eps);
    }
    if (lane == 0) {
        asm volatile("" :: "r"(pending));   // the last grab has returned (so it is performed)
        __threadfence();
        const int total = gridDim.x * nwarps;
        if (atomicAdd(ctr + 1, 1) == total - 1) { atomicExch(ctr, 0); atomicExch(ctr + 1, 0); }
    }
}
#define V7DYN(P) extern "C" __global__ void __launch_bounds__(512) layernorm_v7dyn_p##P(const float* __restrict__ x, \
    const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ out, \
    float* __restrict__ mean, float* __restrict__ rstd, int N, int C, float eps, int* ctr) { \
    v7dyn_body<P, 6>(x, w, b, out, mean, rstd, N, C, eps, ctr, 1); }
V7DYN(1)
V7DYN(2)
V7DYN(3)
V7DYN(4)
'''

src = Path("days/day09_layer_norm/kernel.cu").read_text()
STCS = "__stcs(reinterpret_cast<float4*>(outr) + j, o);"
assert STCS in src
BULK_V7R = Path(".notes/day09_v7_sweep3.py").read_text().split("EXTRA = r'''")[1].split("'''")[0]
variants = {"wb": src.replace(STCS, "reinterpret_cast<float4*>(outr)[j] = o;") + EXTRA + BULK_V7R,
            "stcs": src + EXTRA}
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
ctr = {id(d): d.scratch("ctr", 2, np.int32, zero=True), id(ds): ds.scratch("ctr", 2, np.int32, zero=True)}


def report(name, go, ok=""):
    tm = min(time_fn(go, repeats=100).median_ms * 1e3 for _ in range(2))
    print(f"{name:44s} {tm:6.2f} us  {100*gb/(tm*1e-6)/copy:5.1f}%  {ok}", flush=True)


def check(dd, case_, go):
    dd.poison_outputs()
    go()
    cuda.Context.synchronize()
    return compare_all(dd.outputs(), case_.expected(), case_.tolerance()).ok


t = time_fn(lambda: cuda.memcpy_dtod(d.out, d.x, n * c * 4), repeats=100)
print(f"memcpy same bytes {t.median_ms*1e3:.2f} us")
f7 = mods["wb"].get_function("layernorm_v7r_items6"); f7.prepare(D.SIG + "i")
f7.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
report("wb v7r W=16 P=1 (static, reference point)", lambda: f7.prepared_call((sms, 1, 1), (512, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS), 1, shared_size=16 * 8 + 128 + 16 * c * 4))
for mod in ("wb", "stcs"):
    for P in (1, 2, 3, 4):
        fn = mods[mod].get_function(f"layernorm_v7dyn_p{P}"); fn.prepare(D.SIG + "P")
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
        for W, per_sm in ((4, 2), (4, 4), (8, 1), (8, 2), (16, 1)):
            smem = ((W * P * 12 + 127) // 128) * 128 + W * P * c * 4
            if smem * per_sm > info["smem_per_sm"] - 1024 * per_sm or smem > optin:
                continue
            def go(dd=d, W=W, ps=per_sm, smem=smem):
                nn, cc = dd.size
                fn.prepared_call((sms * ps, 1, 1), (32 * W, 1, 1), dd.x, dd.w, dd.b, dd.out, dd.mean,
                                 dd.rstd, nn, cc, np.float32(D.EPS), ctr[id(dd)], shared_size=smem)
            ok = all([check(d, case, go), check(ds, small, lambda: go(ds)), check(d, case, go)])
            report(f"{mod} v7dyn P={P} W={W} blocks/SM={per_sm}", go, f"ok={ok}")
        ok = check(d, case, go)
        print(f"   after timing: ok={ok}")
