"""Day 9 sweep 6 (GPU), 8192x768: bulk row loads consumed IN COMPLETION ORDER (v7o).
With P slots per warp consumed in order (v7r), a warp waits for slot t % P even when later
slots have landed; with many rows in flight that head-of-line wait delays all writes. v7o: lane
0 polls its P slots with mbarrier.test_wait and the warp takes whichever row landed first."""
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
__device__ __forceinline__ bool mbar_test(uint64_t* bar, uint32_t parity) {
    uint32_t done;
    asm volatile("{\n\t.reg .pred p;\n\t"
                 "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done) : "r"(smem_addr(bar)), "r"(parity) : "memory");
    return done != 0;
}

template <int P, int ITEMS>
__device__ __forceinline__ void v7o_body(const float* __restrict__ x, const float* __restrict__ w,
    const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,
    float* __restrict__ rstd, int N, int C, float eps) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * P;
    int* srow = reinterpret_cast<int*>(smem + nwarps * P * 8) + warp * P;
    float* slots = reinterpret_cast<float*>(smem + ((nwarps * P * 12 + 127) & ~127)) +
                   (size_t)warp * P * C;
    const int row0 = (int)((int64_t)N * blockIdx.x / gridDim.x);
    const int row1 = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    const int nrows = (row1 - row0 - warp + nwarps - 1) / nwarps;
    const uint32_t row_bytes = (uint32_t)C * 4u;
    int next = 0;  // the warp's next local row to request
    if (lane == 0) {
        for (int s = 0; s < P; ++s) mbar_init(&bars[s], 1);
        mbar_init_fence();
        for (int s = 0; s < P; ++s) {
            srow[s] = s < nrows ? row0 + warp + s * nwarps : -1;
            if (s < nrows) bulk_load(slots + (size_t)s * C, x + (int64_t)srow[s] * C, row_bytes, &bars[s]);
        }
    }
    next = min(P, nrows);
    __syncwarp();
    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) { wv[i] = __ldg(reinterpret_cast<const float4*>(w) + j);
                        bv[i] = __ldg(reinterpret_cast<const float4*>(b) + j); }
    }
    uint32_t phase = 0;  // bit s: parity of slot s's next phase
    for (int done = 0; done < nrows; ++done) {
        int s = 0;
        if (lane == 0) {
            for (bool found = false; !found;) {
#pragma unroll
                for (int k = 0; k < P; ++k) {
                    if (!found && srow[k] >= 0 && mbar_test(&bars[k], (phase >> k) & 1u)) { s = k; found = true; }
                }
            }
        }
        s = __shfl_sync(0xffffffffu, s, 0);
        mbar_wait(&bars[s], (phase >> s) & 1u);  // already complete: orders the reads after it
        phase ^= 1u << s;
        const int row = srow[s];
        const float4* xs = reinterpret_cast<const float4*>(slots + (size_t)s * C);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) { const int j = lane + 32 * i; if (j < nvec) v[i] = xs[j]; }
        __syncwarp();
        if (lane == 0) {
            if (next < nrows) {
                srow[s] = row0 + warp + next * nwarps;
                bulk_load(slots + (size_t)s * C, x + (int64_t)srow[s] * C, row_bytes, &bars[s]);
            } else {
                srow[s] = -1;
            }
        }
        next += next < nrows;
        __syncwarp();
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec,
                              lane, eps);
    }
}
#define V7O(P) extern "C" __global__ void __launch_bounds__(512) layernorm_v7o_p##P(const float* __restrict__ x, \
    const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ out, \
    float* __restrict__ mean, float* __restrict__ rstd, int N, int C, float eps) { \
    v7o_body<P, 6>(x, w, b, out, mean, rstd, N, C, eps); }
V7O(2)
V7O(3)
V7O(4)
V7O(6)
V7O(8)
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
report("wb v7r W=16 P=1 (reference point)", lambda: f7.prepared_call((sms, 1, 1), (512, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS), 1, shared_size=16 * 8 + 128 + 16 * c * 4))
for mod in ("wb", "stcs"):
    for P in (2, 3, 4, 6, 8):
        fn = mods[mod].get_function(f"layernorm_v7o_p{P}"); fn.prepare(D.SIG)
        fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
        for W in (4, 8, 16):
            for per_sm in (1, 2, 3, 4):
                if W * per_sm > 16:
                    continue
                smem = ((W * P * 12 + 127) // 128) * 128 + W * P * c * 4
                if smem * per_sm > info["smem_per_sm"] - 1024 * per_sm or smem > optin:
                    continue
                def go(dd=d, W=W, ps=per_sm, smem=smem):
                    nn, cc = dd.size
                    fn.prepared_call((sms * ps, 1, 1), (32 * W, 1, 1), dd.x, dd.w, dd.b, dd.out, dd.mean,
                                     dd.rstd, nn, cc, np.float32(D.EPS), shared_size=smem)
                ok = check(d, case, go) and check(ds, small, lambda: go(ds))
                report(f"{mod} v7o P={P} W={W} blocks/SM={per_sm}", go, f"ok={ok}")
