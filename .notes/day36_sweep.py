"""Day 36 sweep (run on the GPU: python .notes/day36_sweep.py, ~60 s).

v6's block size: ITEMS = 4, 8, 16 nonzeros a thread (1024, 2048, 4096 a block of 256), each
checked once against the reference, then timed (median, L2 flushed) at every bench size; and
v3's group size forced to 2..32 on the two power laws (the mean row length picks it by default).
Prints one table; the fastest ITEMS becomes formats.ROWBLOCK_ITEMS / driver.ITEMS.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
from pycuda import gpuarray  # noqa: E402

from common import harness as H  # noqa: E402
from common.runner import _seed_for  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day36_spmv_ell_coo import driver as D  # noqa: E402
from days.day36_spmv_ell_coo import formats as F  # noqa: E402

rows = []
for size in D.BENCH_SIZES:
    case = D.make_case(size, np.random.default_rng(_seed_for(size)))
    d = H.DeviceCase(case)
    for items in (4, 8, 16):
        name = f"blocks{items}"
        d.arrays[name] = gpuarray.to_gpu(F.row_blocks(case.inputs["ptr"], D.THREADS * items, D.THREADS))
        fn = lambda: D.launch_rowblocks(d, items, name)
        r = H.check(lambda v, dd: fn(), "v6", case, d)
        t = time_fn(fn)
        rows.append([H.size_str(size), f"v6 ITEMS={items}", f"{t.median_ms:.4f}",
                     f"{case.bytes / t.median_ms / 1e6:.0f}", "ok" if r.ok else "FAIL " + r.message])
    if size[0] == 3:
        for g in (2, 4, 8, 16, 32):
            d.params["group"] = g
            fn = lambda: D.launch("v3", d)
            r = H.check(lambda v, dd: fn(), "v3", case, d)
            t = time_fn(fn)
            rows.append([H.size_str(size), f"v3 G={g}", f"{t.median_ms:.4f}",
                         f"{case.bytes / t.median_ms / 1e6:.0f}", "ok" if r.ok else "FAIL " + r.message])
    for name, fn in D.baselines(d).items():
        t = time_fn(fn)
        rows.append([H.size_str(size), name, f"{t.median_ms:.4f}", f"{case.bytes / t.median_ms / 1e6:.0f}", "-"])
    del d

from tabulate import tabulate  # noqa: E402

print(tabulate(rows, ["size", "candidate", "median ms", "GB/s (CSR bytes)", "check"], tablefmt="github"))
