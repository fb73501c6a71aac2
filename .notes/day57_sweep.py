"""Day 57 sweep: the tile choices of v3 and v4, each checked once against the reference, then
median times (L2 flushed, as the harness times) beside the driver's pick and torch/CuPy, at the
bench sizes that decide them. Prints one table; set V3_ARGMAX_U / argmax_wpr, V3_TOPK,
V4_TOPK_THREADS and v4_cluster (V4_ROWS_BELOW) in driver.py from it.

    python .notes/day57_sweep.py            (aim: under 60 s on an H100/H200)

argmax (K = 1) candidates: v3 (warps a row, float4 loads in flight), v4 (cluster size C)
top-k candidates:          v3 (threads a block, float4 in flight), v4 (C, threads a block)
"""
import sys
from pathlib import Path

import numpy as np

ARGMAX_SIZES = [(4096, 50257, 1), (16384, 4096, 1), (32, 50257, 1), (256, 50257, 1)]
TOPK_SIZES = [(1, 50257, 50), (32, 50257, 8), (32, 50257, 256), (33, 50257, 50),
              (256, 50257, 50), (256, 50257, 256), (1024, 50257, 50)]
ARGMAX_V3 = [(1, 2), (1, 4), (4, 2), (4, 4), (4, 8), (8, 2), (8, 4), (8, 8)]
CLUSTERS = (2, 4, 8)


def main():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from common import harness as H
    from common.report import table
    from common.timing import time_fn
    from days.day57_topk_argmax import driver as drv

    out = []

    def row(size, label, ok, ms, nbytes):
        out.append([H.size_str(size), label, ok, f"{ms * 1e3:.1f}", f"{nbytes / ms / 1e6:.0f}"])
        print(out[-1], flush=True)

    for size in ARGMAX_SIZES + TOPK_SIZES:
        rows_, cols, k = size
        case = drv.make_case(size, np.random.default_rng(0), ties=False)
        d = H.DeviceCase(case)
        jobs = [("v3", None), ("v4", None)]
        if k == 1:
            jobs += [("v3", c) for c in ARGMAX_V3]
            jobs += [("v4", (c,)) for c in CLUSTERS]     # at 4096 rows too: finer tail
        else:
            jobs += [("v3", c) for c in drv.V3_TOPK_CHOICES]
            if rows_ <= 256:
                jobs += [("v4", (c, t)) for c in CLUSTERS for t in (256, 512)
                         if (c, t) != (2, 256) and (c, t) != (4, 256)]
        for v, cfg in jobs:
            ok = H.check(lambda vv, dd: drv.launch(v, dd, cfg), v, case, d).ok
            t = time_fn(lambda: drv.launch(v, d, cfg), repeats=20)
            label = f"{v} {cfg}" if cfg else f"{v} (driver: {drv.kernel_for(v, *size)[0]})"
            row(size, label, "ok" if ok else "FAIL", t.median_ms, case.bytes)
        for name, fn in drv.baselines(d).items():
            t = time_fn(fn, repeats=20)
            row(size, name, "", t.median_ms, case.bytes)
        del d
    print(table(out, ["size", "candidate", "check", "median us", "GB/s"]))


if __name__ == "__main__":
    main()
