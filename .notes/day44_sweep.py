"""Day 44 sweep: v3's copy and transpose candidates (kernel.cu -DDAY44_SWEEP), each checked
once, then median times at the bench sizes. Prints a table; set V3_COPY / V3_TRANSPOSE in
driver.py from it.   python .notes/day44_sweep.py"""
import numpy as np

from common import harness as H
from common.report import table
from common.timing import time_fn
from days.day44_tma_bulk_copy import driver as drv

drv.K = H.Kernels(drv.__file__, options=["-DDAY44_SWEEP"])
rows = []
for size in drv.BENCH_SIZES:
    r, c, op = size
    if op == drv.TRANSPOSE and not drv.tma_transposable(r, c):
        continue
    cands = drv.COPY_CANDIDATES if op == drv.COPY else drv.TRANSPOSE_CANDIDATES
    case = drv.make_case(size, np.random.default_rng(0))
    d = H.DeviceCase(case)
    for cfg in cands:
        ok = H.check(lambda v, dd: drv.launch("v3", dd, cfg), "v3", case, d).ok
        t = time_fn(lambda: drv.launch("v3", d, cfg))
        rows.append([H.size_str(size), str(cfg), "ok" if ok else "FAIL", f"{t.median_ms:.4f}",
                     f"{case.bytes / t.median_ms / 1e6:.0f}"])
        print(rows[-1], flush=True)
    extra = [("v1", None), ("v2", None)] + ([("v2", "rows")] if op == drv.TRANSPOSE else [])
    for v, cfg in extra:
        ok = H.check(lambda vv, dd: drv.launch(v, dd, cfg), v, case, d).ok
        t = time_fn(lambda: drv.launch(v, d, cfg))
        rows.append([H.size_str(size), v + (f" {cfg}" if cfg else ""), "ok" if ok else "FAIL",
                     f"{t.median_ms:.4f}", f"{case.bytes / t.median_ms / 1e6:.0f}"])
print(table(rows, ["size", "candidate", "check", "median ms", "GB/s"]))
