"""Day 50 sweep: v3's and v4's candidate shapes (kernel.cu built with -DDAY50_SWEEP), each checked
once against the reference, then median times (L2 flushed, as the harness times) at the three
curriculum sizes, beside v2, the three cuBLAS baselines and the same-bytes read-only stream.
Prints one table; set V3 / V4_THREADS / V4_ROWS / v4_unroll in driver.py from it.

    python .notes/day50_sweep.py            (about 30 s on an H100/H200)

v3 candidates: (rows a warp, chunks a row in flight, warps a block)
v4 candidates: (threads a block, rows a block, chunks a thread in flight)
"""
import sys
from pathlib import Path

import numpy as np

V3_CANDIDATES = [(1, 2, 8), (1, 4, 8), (1, 8, 8), (2, 2, 8), (2, 4, 8), (2, 8, 8), (4, 2, 8),
                 (4, 4, 8), (2, 4, 4), (1, 8, 4)]
V4_CANDIDATES = [(256, 1, 2), (256, 1, 4), (256, 1, 8), (128, 1, 4), (128, 1, 8), (512, 1, 1),
                 (512, 1, 2), (512, 1, 4), (256, 2, 2), (256, 2, 4), (128, 2, 4), (256, 4, 2),
                 (128, 4, 4)]


def main():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from common import harness as H
    from common.report import table
    from common.runner import case_ceilings
    from common.timing import time_fn
    from days.day50_gemv_decode import driver as drv

    drv.K = H.Kernels(drv.__file__, options=["-DDAY50_SWEEP"])
    rows = []
    for size in drv.CURRICULUM:
        case = drv.make_case(size, np.random.default_rng(0))
        d = H.DeviceCase(case)
        ceil = case_ceilings(case)
        rows.append([H.size_str(size), "same-bytes read stream", "", f"{ceil['size_ms']:.4f}",
                     f"{ceil['size_gbps']:.0f}", "100.0"])
        jobs = [("v2", None), ("v3", None), ("v4", None)]
        jobs += [("v3", c) for c in V3_CANDIDATES] + [("v4", c) for c in V4_CANDIDATES]
        for v, cfg in jobs:
            ok = H.check(lambda vv, dd: drv.launch(v, dd, cfg), v, case, d).ok
            t = time_fn(lambda: drv.launch(v, d, cfg))
            gbps = case.bytes / t.median_ms / 1e6
            rows.append([H.size_str(size), f"{v} {cfg}" if cfg else f"{v} (driver)",
                         "ok" if ok else "FAIL", f"{t.median_ms:.4f}", f"{gbps:.0f}",
                         f"{100 * gbps / ceil['size_gbps']:.1f}"])
            print(rows[-1], flush=True)
        for name, fn in drv.baselines(d).items():
            t = time_fn(fn)
            gbps = case.bytes / t.median_ms / 1e6
            rows.append([H.size_str(size), name, "", f"{t.median_ms:.4f}", f"{gbps:.0f}",
                         f"{100 * gbps / ceil['size_gbps']:.1f}"])
            print(rows[-1], flush=True)
    print(table(rows, ["size", "candidate", "check", "median ms", "GB/s", "% same-bytes read"]))


if __name__ == "__main__":
    main()
