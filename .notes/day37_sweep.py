"""Day 37 sweep (run on the GPU: python .notes/day37_sweep.py, ~60 s).

The hybrid's ELL width: K from formats.choose_k (COO_COST = 3), K - 2 .. K + 2, and the K the
rule gives for a COO entry costing 1.5 and 6 ELL slots; v3 (two launches) and v5 (one kernel,
segmented overflow) at each, checked once against the reference, then timed (median, L2
flushed). Prints one table: if another K wins consistently, change driver.COO_COST (or the
rule) and say so in the README.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.runner import _seed_for  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day36_spmv_ell_coo import driver as D36  # noqa: E402
from days.day36_spmv_ell_coo import formats as F  # noqa: E402
from days.day37_spmv_hybrid import driver as D  # noqa: E402

rows = []
for size in (D36.POWERLAW_ELL, D36.POWERLAW, D36.REAL):
    a, x = F.make(size, np.random.default_rng(_seed_for(size)))
    lens = a.lengths()
    k0 = F.choose_k(lens, D.COO_COST)
    ks = sorted({max(1, k0 + j) for j in (-2, -1, 0, 1, 2)} | {F.choose_k(lens, c) for c in (1.5, 6.0)})
    ref = None
    for k in ks:
        inputs, params = D.device_inputs(a, x, with_ell=False, k=k)
        case = H.Case(size, inputs=inputs, outputs={"y": ((a.rows,), np.float32)}, params=params,
                      reference=lambda: {"y": D.reference.spmv(a.indptr, a.indices, a.data, x)},
                      bytes=D36.csr_bytes(a.rows, a.cols, a.nnz)[0])
        if ref is not None:
            case._expected = ref
        ref = case.expected()
        d = H.DeviceCase(case)
        for v in ("v3", "v5"):
            r = H.check(D.launch, v, case, d)
            t = time_fn(lambda: D.launch(v, d))
            rows.append([H.size_str(size), k, "chosen" if k == k0 else "", v, params["overflow"],
                         f"{t.median_ms:.4f}", "ok" if r.ok else "FAIL " + r.message])
        del d

from tabulate import tabulate  # noqa: E402

print(tabulate(rows, ["size", "K", "", "version", "overflow entries", "median ms", "check"],
               tablefmt="github"))
