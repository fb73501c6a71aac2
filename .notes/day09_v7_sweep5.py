"""Day 9 sweep 5 (GPU), 8192x768: read-side floor and row groups of GW warps.
D: empty kernel; F: read-only float4 sum (copy-like); C: read-only v6 / bulk-load version;
A: persistent row groups of GW warps (GW*32 threads share a row, named barriers), contiguous
balanced rows per block, next row prefetched, weight/bias re-read per row (L1). Plain stores."""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H
from common.build import load_module
from common.check import compare_all
from common.gpu import blocks_per_sm, device_info, driver
from common.timing import copy_bandwidth_gbps, time_fn
from days.day09_layer_norm import driver as D

EXTRA = r'''
extern "C" __global__ void empty_kernel(int n) {}
extern "C" __global__ void sum_f4(const float4* __restrict__ x, float* __restrict__ y, int n4) {
    float s = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        const float4 v = __ldcs(x + i); s += (v.x + v.y) + (v.z + v.w); }
    if (s == 12345.f) y[0] = s;
}

template <int GW, int ITEMS>
__device__ __forceinline__ void grp_load(const float* __restrict__ xr, int nvec, int tid, float4 (&v)[ITEMS]) {
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) { const int j = tid + 32 * GW * i; if (j < nvec) v[i] = __ldcs(reinterpret_cast<const float4*>(xr) + j); }
}

template <int GW>
__device__ __forceinline__ float2 grp_sum2(float2 v, float2* buf, int gw, int lane, int bar_id) {
    v = warp_sum2(v);
    if (GW == 1) return v;
    if (lane == 0) buf[gw] = v;
    asm volatile("bar.sync %0, %1;" :: "r"(bar_id), "r"(GW * 32) : "memory");
    float2 t = make_float2(0.f, 0.f);
#pragma unroll
    for (int k = 0; k < GW; ++k) { t.x += buf[k].x; t.y += buf[k].y; }
    return t;
}

template <int GW, int ITEMS>
__device__ __forceinline__ void grp_norm(float4 (&v)[ITEMS], const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ outr, float* mean_out, float* rstd_out, int C, int nvec, int tid, int gw, int lane,
    float2* buf, int bar_id, float eps) {
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) if (tid + 32 * GW * i < nvec) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
    const float m0 = grp_sum2<GW>(make_float2(s, 0.f), buf, gw, lane, bar_id).x / C;
    float2 aq = make_float2(0.f, 0.f);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        if (tid + 32 * GW * i < nvec) {
            v[i].x -= m0; v[i].y -= m0; v[i].z -= m0; v[i].w -= m0;
            aq.x += (v[i].x + v[i].y) + (v[i].z + v[i].w);
            aq.y += (v[i].x * v[i].x + v[i].y * v[i].y) + (v[i].z * v[i].z + v[i].w * v[i].w);
        }
    }
    aq = grp_sum2<GW>(aq, buf + GW, gw, lane, bar_id);
    float md, r;
    finish_stats(aq.x, aq.y, C, eps, md, r);
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = tid + 32 * GW * i;
        if (j < nvec) {
            const float4 wv = __ldg(reinterpret_cast<const float4*>(w) + j), bv = __ldg(reinterpret_cast<const float4*>(b) + j);
            float4 o;
            o.x = (v[i].x - md) * r * wv.x + bv.x; o.y = (v[i].y - md) * r * wv.y + bv.y;
            o.z = (v[i].z - md) * r * wv.z + bv.z; o.w = (v[i].w - md) * r * wv.w + bv.w;
            reinterpret_cast<float4*>(outr)[j] = o;
        }
    }
    if (tid == 0) { *mean_out = m0 + md; *rstd_out = r; }
}

template <int GW, int ITEMS>
__device__ __forceinline__ void grp_kernel(const float* __restrict__ x, const float* __restrict__ w,
    const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,
    float* __restrict__ rstd, int N, int C, float eps) {
    __shared__ float2 red[32 * 2];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int group = warp / GW, gw = warp % GW, groups = (blockDim.x >> 5) / GW;
    const int tid = gw * 32 + lane, bar_id = 1 + group;
    float2* buf = red + group * 2 * GW;
    const int nvec = C / 4;
    const int stride = groups;
    int row = (int)((int64_t)N * blockIdx.x / gridDim.x) + group;
    N = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    float4 a[ITEMS], bb[ITEMS];
    if (row < N) grp_load<GW, ITEMS>(x + (int64_t)row * C, nvec, tid, a);
    while (row < N) {
        const int r1 = row + stride;
        if (r1 < N) grp_load<GW, ITEMS>(x + (int64_t)r1 * C, nvec, tid, bb);
        grp_norm<GW, ITEMS>(a, w, b, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, tid, gw, lane, buf, bar_id, eps);
        if (r1 >= N) break;
        const int r2 = r1 + stride;
        if (r2 < N) grp_load<GW, ITEMS>(x + (int64_t)r2 * C, nvec, tid, a);
        grp_norm<GW, ITEMS>(bb, w, b, out + (int64_t)r1 * C, mean + r1, rstd + r1, C, nvec, tid, gw, lane, buf, bar_id, eps);
        row = r2;
    }
}
#define GRP(GW, ITEMS) extern "C" __global__ void grp_gw##GW##_items##ITEMS(const float* __restrict__ x, \
    const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean, \
    float* __restrict__ rstd, int N, int C, float eps) { grp_kernel<GW, ITEMS>(x, w, b, out, mean, rstd, N, C, eps); }
GRP(1, 6)
GRP(2, 3)
GRP(3, 2)
GRP(6, 1)
'''

src = Path("days/day09_layer_norm/kernel.cu").read_text()
STCS = "__stcs(reinterpret_cast<float4*>(outr) + j, o);"
assert STCS in src
BULK_V7R = Path(".notes/day09_v7_sweep3.py").read_text().split("EXTRA = r'''")[1].split("'''")[0]
variants = {"wb": src.replace(STCS, "reinterpret_cast<float4*>(outr)[j] = o;") + EXTRA + BULK_V7R,
            "nostore": src.replace(STCS, "(void)o;") + BULK_V7R}
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
n4 = n * c // 4
wb = mods["wb"]


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
fe = wb.get_function("empty_kernel"); fe.prepare("i")
report("empty kernel (132 blocks)", lambda: fe.prepared_call((sms, 1, 1), (256, 1, 1), 0))
fs = wb.get_function("sum_f4"); fs.prepare("PPi")
for blocks in (2, 4, 8):
    report(f"read-only float4 sum, 256 thr x {blocks}/SM", lambda: fs.prepared_call((sms * blocks, 1, 1), (256, 1, 1), d.x, d.out, n4))
for mod in ("wb", "nostore"):
    f6 = mods[mod].get_function("layernorm_v6_items6"); f6.prepare(D.SIG)
    report(f"{mod} v6", lambda: f6.prepared_call((sms * 2, 1, 1), (256, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS)))
    f7 = mods[mod].get_function("layernorm_v7r_items6"); f7.prepare(D.SIG + "i")
    f7.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
    for W, P in ((16, 1), (16, 2), (8, 8)):
        smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4
        report(f"{mod} v7r W={W} P={P}", lambda: f7.prepared_call((sms, 1, 1), (32 * W, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS), P, shared_size=smem))

for gw, items in ((1, 6), (2, 3), (3, 2), (6, 1)):
    fn = wb.get_function(f"grp_gw{gw}_items{items}"); fn.prepare(D.SIG)
    for groups in (1, 2, 4, 5):
        threads = 32 * gw * groups
        if threads > 1024 or groups > 15:
            continue
        full = blocks_per_sm(fn, threads)
        for per_sm in sorted({full, max(1, full // 2)}):
            def go(dd=d, ps=per_sm, th=threads):
                nn, cc = dd.size
                fn.prepared_call((sms * ps, 1, 1), (th, 1, 1), dd.x, dd.w, dd.b, dd.out, dd.mean, dd.rstd, nn, cc, np.float32(D.EPS))
            ok = check(d, case, go) and check(ds, small, lambda: go(ds))
            report(f"grp GW={gw} groups/block={groups} blocks/SM={per_sm} ({fn.num_regs} regs)", go, f"ok={ok}")
