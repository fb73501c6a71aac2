"""Day 9 v7 sweep 2 (GPU): is the per-row cost the proxy fence? Variants compiled from the day's
kernel.cu with text edits: v7 as shipped (fence), v7 without fence.proxy.async (nofence), and
v7r (row copied from the slot into registers, slot refilled at once, then v6's normalize)."""
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

V7R = r'''
template <int ITEMS>
__device__ __forceinline__ void v7r_body(const float* __restrict__ x, const float* __restrict__ w,
    const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,
    float* __restrict__ rstd, int N, int C, float eps, int P) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * P;
    float* slots = reinterpret_cast<float*>(smem + ((nwarps * P * 8 + 127) & ~127)) +
                   (size_t)warp * P * C;
    const int row0 = (int)((int64_t)N * blockIdx.x / gridDim.x);
    const int row1 = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    const int nrows = (row1 - row0 - warp + nwarps - 1) / nwarps;
    const uint32_t row_bytes = (uint32_t)C * 4u;
    if (lane == 0) {
        for (int s = 0; s < P; ++s) mbar_init(&bars[s], 1);
        mbar_init_fence();
        for (int t = 0; t < P && t < nrows; ++t)
            bulk_load(slots + (size_t)t * C, x + (int64_t)(row0 + warp + t * nwarps) * C,
                      row_bytes, &bars[t]);
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
    for (int t = 0; t < nrows; ++t) {
        const int s = t % P, row = row0 + warp + t * nwarps;
        mbar_wait(&bars[s], (uint32_t)(t / P) & 1u);
        const float4* xs = reinterpret_cast<const float4*>(slots + (size_t)s * C);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) { const int j = lane + 32 * i; if (j < nvec) v[i] = xs[j]; }
        __syncwarp();
        if (lane == 0 && t + P < nrows) {
            FENCE
            bulk_load(slots + (size_t)s * C, x + (int64_t)(row0 + warp + (t + P) * nwarps) * C,
                      row_bytes, &bars[s]);
        }
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec,
                              lane, eps);
    }
}
extern "C" __global__ void __launch_bounds__(512) layernorm_v7r_items6(const float* __restrict__ x,
    const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ out,
    float* __restrict__ mean, float* __restrict__ rstd, int N, int C, float eps, int P) {
    v7r_body<6>(x, w, b, out, mean, rstd, N, C, eps, P); }
extern "C" __global__ void __launch_bounds__(256) layernorm_v7r_items16(const float* __restrict__ x,
    const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ out,
    float* __restrict__ mean, float* __restrict__ rstd, int N, int C, float eps, int P) {
    v7r_body<16>(x, w, b, out, mean, rstd, N, C, eps, P); }
'''

src = Path("days/day09_layer_norm/kernel.cu").read_text()
FENCE_CALL = "fence_proxy_async_smem();\n"
assert FENCE_CALL in src
variants = {
    "fence": src + V7R.replace("FENCE", "fence_proxy_async_smem();"),
    "nofence": src.replace(FENCE_CALL, "") + V7R.replace("FENCE", ""),
}
mods = {}
for name, text in variants.items():
    p = Path(tempfile.mkdtemp()) / "kernel.cu"
    p.write_text(text)
    mods[name] = load_module(p)

cuda = driver()
rng = np.random.default_rng(0)
info = device_info()
sms, optin = info["sms"], info["smem_per_block_optin"]
copy = copy_bandwidth_gbps()
print(info["name"], "copy GB/s %.0f" % copy)
_fns = {}


def get(mod, kname, smem):
    key = (mod, kname)
    if key not in _fns:
        fn = mods[mod].get_function(kname)
        fn.prepare(D.SIG + "i")
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
        _fns[key] = fn
    return _fns[key]


def v7(d, mod, kname, W, P, per_sm):
    n, c = d.size
    smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4
    get(mod, kname, smem).prepared_call((min(sms * per_sm, n), 1, 1), (32 * W, 1, 1), d.x, d.w,
                                        d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS), P,
                                        shared_size=smem)


def check(d, case, launch):
    d.poison_outputs()
    launch()
    cuda.Context.synchronize()
    return compare_all(d.outputs(), case.expected(), case.tolerance()).ok


for size, items in [((8192, 768), 6), ((8192, 2048), 16)]:
    n, c = size
    case = D.make_case(size, rng)
    small = D.make_case((1025, 764), rng, stress=True)
    d, ds = H.DeviceCase(case), H.DeviceCase(small)
    gb = case.bytes / 1e9
    src_, dst_ = cuda.mem_alloc(n * c * 4), cuda.mem_alloc(n * c * 4)
    t = time_fn(lambda: cuda.memcpy_dtod(dst_, src_, n * c * 4), repeats=100)
    print(f"\n{n}x{c}: memcpy same bytes {t.median_ms*1e3:.2f} us")
    t = time_fn(lambda: D.launch("v6", d), repeats=100)
    print(f"v6: {t.median_ms*1e3:.2f} us  {100*gb/(t.median_ms*1e-3)/copy:.1f}%")
    for mod, kname, Ws in [("fence", "layernorm_v7_bulk", (8, 16)),
                           ("nofence", "layernorm_v7_bulk", (4, 8, 16, 32)),
                           ("fence", f"layernorm_v7r_items{items}", (4, 8, 16)),
                           ("nofence", f"layernorm_v7r_items{items}", (4, 8, 16))]:
        for per_sm in (1, 2):
            for W in Ws:
                for P in (1, 2, 4, 8):
                    smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4
                    if smem * per_sm > info["smem_per_sm"] - 1024 * per_sm or smem > optin:
                        break
                    if W * per_sm * 32 > 1024 or ("items16" in kname and W > 8) or (W * P * per_sm * sms > 2 * n and P > 1):
                        break
                    launch = lambda: v7(d, mod, kname, W, P, per_sm)
                    ok = check(d, case, launch) and (
                        items != 6 or check(ds, small, lambda: v7(ds, mod, kname, W, P, per_sm)))
                    tm = min(time_fn(launch, repeats=60).median_ms * 1e3 for _ in range(2))
                    print(f"{mod:8s} {kname[10:]:12s} blocks/SM={per_sm} W={W:2d} P={P}: "
                          f"{tm:.2f} us  {100*gb/(tm*1e-6)/copy:.1f}%  ok={ok}", flush=True)
