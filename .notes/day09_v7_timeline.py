"""Day 9 timeline (GPU), 8192x768: per-warp %globaltimer stamps (start, first row in registers,
end) for v7r (bulk loads, W=16 P=1), v6 and a float4 copy kernel, to see whether the missing
microsecond is at the start, in the middle or in the tail."""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H
from common.build import load_module
from common.gpu import device_info, driver
from common.timing import time_fn
from days.day09_layer_norm import driver as D

STAMP = r'''
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long t; asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t)); return t; }
'''
EXTRA = r'''
extern "C" __global__ void copy_stamped(const float4* __restrict__ x, float4* __restrict__ y, int n4, unsigned long long* st) {
    const unsigned long long t0 = gtime();
    bool first = true; unsigned long long t1 = 0;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += gridDim.x * blockDim.x) {
        float4 v = x[i];
        if (first) { t1 = gtime(); first = false; asm volatile("" :: "f"(v.x)); }
        y[i] = v;
    }
    if ((threadIdx.x & 31) == 0) { const int w = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
        st[3 * w] = t0; st[3 * w + 1] = t1; st[3 * w + 2] = gtime(); }
}
'''
src = Path("days/day09_layer_norm/kernel.cu").read_text()
STCS = "__stcs(reinterpret_cast<float4*>(outr) + j, o);"
v7r = Path(".notes/day09_v7_sweep3.py").read_text().split("EXTRA = r'''")[1].split("'''")[0]
# stamp v7r: a pointer argument appended, stamps at entry, after the first wait, at exit
v7r = v7r.replace("float eps, int P) {\n    extern __shared__", "float eps, int P, unsigned long long* st) {\n    const unsigned long long t0 = gtime(); unsigned long long t1 = 0;\n    extern __shared__")
v7r = v7r.replace("        __syncwarp();\n        if (lane == 0 && t + P < nrows)", "        if (t == 0) t1 = gtime();\n        __syncwarp();\n        if (lane == 0 && t + P < nrows)")
v7r = v7r.replace("lane, eps);\n    }\n}", "lane, eps);\n    }\n    if (lane == 0) { const int gw = blockIdx.x * nwarps + warp; st[3*gw] = t0; st[3*gw+1] = t1; st[3*gw+2] = gtime(); }\n}")
v7r = v7r.replace("float eps, int P) {\n    v7r_body<6>(x, w, b, out, mean, rstd, N, C, eps, P); }", "float eps, int P, unsigned long long* st) {\n    v7r_body<6>(x, w, b, out, mean, rstd, N, C, eps, P, st); }")
assert v7r.count("gtime()") == 3, v7r.count("gtime()")
text = src.replace(STCS, "reinterpret_cast<float4*>(outr)[j] = o;") + STAMP + EXTRA + v7r
p = Path(tempfile.mkdtemp()) / "kernel.cu"
p.write_text(text)
mod = load_module(p, options=["-diag-suppress", "1556"])

cuda = driver()
info = device_info()
sms, optin = info["sms"], info["smem_per_block_optin"]
n, c = 8192, 768
case = D.make_case((n, c), np.random.default_rng(0))
d = H.DeviceCase(case)
st = d.scratch("stamps", 3 * 132 * 64, np.uint64)
stamps = np.zeros(3 * 132 * 64, np.uint64)


def summarize(name, go, nwarps, per_block=None):
    t = time_fn(go, repeats=50)
    rows, blk = [], []
    for _ in range(5):
        from common.timing import _flusher
        _flusher()()
        go()
        cuda.Context.synchronize()
        cuda.memcpy_dtoh(stamps, st)
        s = stamps[: 3 * nwarps].reshape(nwarps, 3).astype(np.int64)
        base = s[:, 0].min()
        s = (s - base) / 1e3
        if per_block:
            e = s[:, 2].reshape(-1, per_block)
            be = e.max(axis=1)
            blk.append([np.percentile(be, 10), np.percentile(be, 50), np.percentile(be, 90), be.max(),
                        np.median(e.max(axis=1) - e.min(axis=1)), np.median(e.max(axis=1) - np.median(e, axis=1))])
        rows.append([np.percentile(s[:, 0], 50), s[:, 0].max(), np.percentile(s[:, 1], 50),
                     s[:, 1].max(), np.percentile(s[:, 2], 10), np.percentile(s[:, 2], 50),
                     np.percentile(s[:, 2], 90), s[:, 2].max()])
    r = np.median(np.array(rows), axis=0)
    print(f"{name:28s} event {t.median_ms*1e3:6.2f} us | start p50 {r[0]:.2f} max {r[1]:.2f} | "
          f"first data p50 {r[2]:.2f} max {r[3]:.2f} | end p10 {r[4]:.2f} p50 {r[5]:.2f} "
          f"p90 {r[6]:.2f} max {r[7]:.2f}", flush=True)
    if blk:
        b = np.median(np.array(blk), axis=0)
        print(f"{'':28s} block end p10 {b[0]:.2f} p50 {b[1]:.2f} p90 {b[2]:.2f} max {b[3]:.2f} | "
              f"within a block: last - first warp {b[4]:.2f}, last - median warp {b[5]:.2f}", flush=True)


fc = mod.get_function("copy_stamped"); fc.prepare("PPiP")
for blocks in (4, 8):
    summarize(f"copy 256 thr x {blocks}/SM", lambda: fc.prepared_call((sms * blocks, 1, 1), (256, 1, 1), d.x, d.out, n * c // 4, st), sms * blocks * 8, 8)
f7 = mod.get_function("layernorm_v7r_items6"); f7.prepare(D.SIG + "iP")
f7.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
for W, P, ps in ((16, 1, 1), (8, 2, 1)):
    smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4
    summarize(f"v7r W={W} P={P} blocks/SM={ps}", lambda: f7.prepared_call((sms * ps, 1, 1), (32 * W, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS), P, st, shared_size=smem), sms * ps * W, W)
