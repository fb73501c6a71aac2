"""Day 60 sweep: every v4 variant (BN 64/128/256, one or two consumer warpgroups, two blocks an
SM, the filter resident) and every v5 variant (one box with a two-row halo serving a filter
column's three taps: t3r64, t3n64, t3n128, t3c1n128), each with the tile tile_of() gives it,
v4 n64 on v3's 8x16 box, v2 and v3, against cuDNN at the four ResNet-50 layers and the awkward
shape. Each candidate is checked once at three ragged sizes first.
    python .notes/day60_sweep.py   (the lead sets driver.PICK["v4"] / ["v5"] from the table;
    the same 15 candidates and 3 check sizes as round 2's run)"""
import numpy as np

from common import harness as H
from common.report import table
from common.timing import time_fn
from days.day60_implicit_gemm_conv import driver as drv


def cand(name):
    if name in ("v2", "v3"):
        return lambda d: drv.launch(name, d)
    if name == "n64 box 8x16":
        return lambda d: drv.launch_variant(d, "n64", drv.V3_TILE)
    return lambda d: drv.launch_variant(d, name)


CANDS = ["v2", "v3"] + list(drv.V4_VARIANTS) + list(drv.V5_VARIANTS) + ["n64 box 8x16"]

for size in [(3, 7, 7, 72, 130), (2, 13, 58, 64, 64), (2, 11, 62, 72, 40)]:
    case = drv.make_case(size, np.random.default_rng(0))
    d = H.DeviceCase(case)
    for name in CANDS:
        if name in drv.VARIANTS and not drv.eligible(name, size):
            continue
        r = H.check(lambda v, dd: cand(name)(dd), name, case, d)
        print(f"{H.size_str(size)} {name}: {'ok' if r.ok else 'FAIL ' + r.message}", flush=True)

for size in drv.BENCH_SIZES:
    case = drv.make_case(size, np.random.default_rng(1))
    d = H.DeviceCase(case)
    lib = drv.baselines(d).get(drv.CUDNN)
    base = None
    rows = []
    if lib is not None:
        lib()                                        # cudnn.benchmark autotunes here
        base = time_fn(lib).median_ms
        rows.append([drv.CUDNN, f"{base:.4f}", f"{case.flops / base / 1e9:.0f}", "1.00x", "-"])
    for name in CANDS:
        if name in drv.VARIANTS and not drv.eligible(name, size):
            continue
        fn = cand(name)
        t = time_fn(lambda: fn(d)).median_ms
        tile = drv.V3_TILE if name in ("v3", "n64 box 8x16") else (
            "-" if name == "v2" else drv.tile_of(name, *size[:3]))
        rows.append([name, f"{t:.4f}", f"{case.flops / t / 1e9:.0f}",
                     f"{base / t:.2f}x" if base else "-", str(tile)])
    p4, p5 = drv.plan(size, version="v4")[0], drv.plan(size, version="v5")[0]
    print(f"\n{H.size_str(size)} (plan: v4 {p4}, v5 {p5})")
    print(table(rows, ["candidate", "ms", "TFLOP/s", "vs cuDNN", "tile (BQ, BP, BNI)"]), flush=True)
