"""Day 9 v7 sweep (GPU): warps per block W, slots per warp P, blocks per SM; v6 and a same-size
copy in the same process. Run from the repo root: python .notes/day09_v7_sweep.py"""
import sys
import numpy as np

sys.path.insert(0, ".")
from common import harness as H
from common.check import compare_all
from common.gpu import device_info, driver
from common.timing import copy_bandwidth_gbps, time_fn
from days.day09_layer_norm import driver as D

cuda = driver()
rng = np.random.default_rng(0)
info = device_info()
sms, optin = info["sms"], info["smem_per_block_optin"]
print(info["name"], "sms", sms, "smem optin", optin, "copy GB/s %.0f" % copy_bandwidth_gbps())


def v7(d, W, P, per_sm, fn=None):
    n, c = d.size
    smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4
    fn = fn or D.K("layernorm_v7_bulk", D.SIG + "i", dynamic_smem=smem)
    grid = min(sms * per_sm, n)
    fn.prepared_call((grid, 1, 1), (32 * W, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c,
                     np.float32(D.EPS), P, shared_size=smem)


def check(d, case, launch):
    d.poison_outputs()
    launch()
    cuda.Context.synchronize()
    return compare_all(d.outputs(), case.expected(), case.tolerance()).ok


for size in [(8192, 768), (8192, 2048)]:
    n, c = size
    case = D.make_case(size, rng)
    small = D.make_case((1025, 764), rng, stress=True)
    d, ds = H.DeviceCase(case), H.DeviceCase(small)
    gb = case.bytes / 1e9
    copy = copy_bandwidth_gbps()
    src, dst = cuda.mem_alloc(n * c * 4), cuda.mem_alloc(n * c * 4)
    t = time_fn(lambda: cuda.memcpy_dtod(dst, src, n * c * 4), repeats=100)
    print(f"\n{n}x{c}: memcpy same bytes {t.median_ms*1e3:.2f} us "
          f"({100 * 2 * n * c * 4 / (t.median_ms * 1e-3) / 1e9 / copy:.1f}%)")
    for ver in ("v5", "v6"):
        ok = check(d, case, lambda: D.launch(ver, d))
        t = time_fn(lambda: D.launch(ver, d), repeats=100)
        print(f"{ver}: {t.median_ms*1e3:.2f} us  {100*gb/(t.median_ms*1e-3)/copy:.1f}%  ok={ok}")
    for per_sm in (1, 2, 3):
        for W in (4, 8, 16, 32):
            P = 1
            while True:
                smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4
                if smem * per_sm > info["smem_per_sm"] - 1024 * per_sm or smem > optin:
                    break
                if W * P * per_sm * sms <= 2 * n:
                    launch = lambda: v7(d, W, P, per_sm)
                    ok = check(d, case, launch) and check(ds, small, lambda: v7(ds, W, P, per_sm))
                    ts = [time_fn(launch, repeats=60).median_ms * 1e3 for _ in range(2)]
                    tm = min(ts)
                    print(f"v7 blocks/SM={per_sm} W={W:2d} P={P:2d} smem={smem//1024:3d}K: "
                          f"{tm:.2f} us ({ts[0]:.2f}/{ts[1]:.2f})  "
                          f"{100*gb/(tm*1e-6)/copy:.1f}%  ok={ok}", flush=True)
                P *= 2
