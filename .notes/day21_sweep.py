#!/usr/bin/env python3
"""Day 21 sweep (run on the GPU): every v6 candidate (tile shape, threads, tile order) checked
once against the reference and timed at the bench shapes, beside v5 and torch.

    python .notes/day21_sweep.py

The fastest candidate at 8192x8192 that is no slower than 98% of the best at the odd shapes
should become driver.V6_TILE.
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.baselines import as_torch, torch_or_none  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day21_transpose_matrix import driver as D  # noqa: E402


def main():
    sizes = D.BENCH_SIZES + [(4096, 4096), (16384, 4096)]
    rows = []
    for size in sizes:
        case = D.make_case(size, np.random.default_rng(21))
        d = H.DeviceCase(case)
        nbytes = case.bytes
        ops = {"v5": lambda dd: D.launch("v5", dd)}
        ops.update({f"v6 {c}": (lambda dd, c=c: D.launch_v6(c, dd)) for c in D.V6_CANDIDATES})
        res = {}
        for name, fn in ops.items():
            ok = H.check(lambda v, dd: fn(dd), name, case, d).ok
            t = time_fn(lambda: fn(d), repeats=20, max_seconds=1.0)
            res[name] = (t.median_ms, ok)
        torch = torch_or_none()
        if torch is not None:
            x = as_torch(d.array("x"))
            t = time_fn(lambda: x.t().contiguous(), repeats=20, max_seconds=1.0)
            res["torch"] = (t.median_ms, True)
        best = min(ms for ms, ok in res.values() if ok)
        for name, (ms, ok) in res.items():
            rows.append([H.size_str(size), name, f"{ms * 1e3:.1f}", f"{nbytes / ms / 1e6:.0f}",
                         f"{best / ms:.3f}", "ok" if ok else "FAIL"])
    print(table(rows, ["size", "kernel", "us", "GB/s", "vs best", "ok"]))


if __name__ == "__main__":
    main()
