"""The sweep loop of days 41-43 (.notes/day41_sweep.py, day42_sweep.py, day43_sweep.py call it).

Every candidate kernel of the day (driver.CANDIDATES, plus the day's versions) is checked once
against the float64 reference at two ragged sizes, then timed (common.timing.time_fn: CUDA events,
L2 flushed, median) at the day's bench sizes on one device case per size, beside cuBLAS bf16 (fp32
C and bf16 C) timed the same way. Prints one table: median ms, TFLOP/s and % of the faster cuBLAS.
"""
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHECK = [(1000, 777, 513), (300, 136, 520)]


def run(day: int, extra_kernels=()):
    from common import harness as H
    from common.gpu import device_info
    from common.timing import time_fn

    drv = H.load_driver(day)
    kernels = list(dict.fromkeys(list(extra_kernels) + list(drv.CANDIDATES)))
    print(f"day {day} sweep on {device_info()['name']}: {len(kernels)} kernels")
    t0 = time.time()
    ok = {}
    for size in CHECK:
        case = drv.make_case(size, np.random.default_rng(7))
        d = H.DeviceCase(case)
        for k in kernels:
            r = H.check(lambda v, dd, k=k: drv.launch_kernel(k, dd), k, case, d)
            ok[k] = ok.get(k, True) and r.ok
            if not r.ok:
                print(f"  WRONG {k} at {H.size_str(size)}: {r.message}")
    print(f"  checked in {time.time() - t0:.1f} s")
    rows = {k: [] for k in kernels}
    libs_rows = {"cuBLAS bf16 (fp32 C)": [], "cuBLAS bf16 (bf16 C)": []}
    for size in drv.BENCH_SIZES:
        m, k_, n = size
        flops = 2 * m * n * k_
        rng = np.random.default_rng(1)
        from common import bf16
        case = H.Case(size, inputs={"a": bf16.random_bits(rng, (m, k_)),
                                    "b": bf16.random_bits(rng, (k_, n))},
                      outputs={"c": ((m, n), np.float32)})
        d = H.DeviceCase(case)
        libs = drv.baselines(d)
        for name, fn in libs.items():
            t = time_fn(fn)
            libs_rows[name].append((t.median_ms, flops / t.median_ms / 1e9))
        for k in kernels:
            if not ok[k]:
                rows[k].append(None)
                continue
            t = time_fn(lambda k=k: drv.launch_kernel(k, d))
            rows[k].append((t.median_ms, flops / t.median_ms / 1e9))
    best_lib = [min(libs_rows[n][i][0] for n in libs_rows) for i in range(len(drv.BENCH_SIZES))]
    head = "kernel".ljust(44) + "".join(f"{H.size_str(s):>30}" for s in drv.BENCH_SIZES)
    print(head)
    print(" " * 44 + "".join(f"{'ms  TFLOP/s  %cuBLAS':>30}" for _ in drv.BENCH_SIZES))
    for name, vals in list(libs_rows.items()) + list(rows.items()):
        cells = []
        for i, v in enumerate(vals):
            cells.append(f"{'WRONG':>30}" if v is None else
                         f"{v[0]:10.3f} {v[1]:8.1f} {100 * best_lib[i] / v[0]:9.1f}%")
        print(name.ljust(44) + "".join(cells))
    print(f"total {time.time() - t0:.1f} s")
