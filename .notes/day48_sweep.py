"""Day 48 sweep: the choices the GPU has to settle, at every bench size, each candidate checked
against the reference once, then timed (median, L2 flushed):
  - split count S of v2 and v3 (the driver's cost model's pick "auto", and 2, 3, 4, 6, 8);
  - v3 and v1 in clusters of two with B multicast (gemm_v3_c2, gemm_v1_c2);
  - v4's plan: hybrid (default), pure stream-K, sk1 (only the last partial wave stream-K);
  - cuBLAS (torch.matmul) on the same data.
Set FIX_KBLOCKS / READ_KBLOCKS (the S model), the default stream-K mode, and which kernels the
versions use in driver.py / kernel.cu from the table.      python .notes/day48_sweep.py
Takes about a minute (the float64 references of the bench sizes are most of it)."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import harness as H  # noqa: E402
from common.baselines import as_torch, torch_or_none  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day48_split_k_stream_k import driver as drv  # noqa: E402

SLICES = (None, 2, 3, 4, 6, 8)
sms = drv._sms()
rows = []
for size in drv.BENCH_SIZES:
    case = drv.make_case(size, np.random.default_rng(0))
    d = H.DeviceCase(case)
    cands = [("v1", {}), ("v1", {"cluster": 2})]
    cands += [("v2", {"slices": s}) for s in (None, 2, 4, 8)]
    cands += [("v3", {"slices": s}) for s in SLICES] + [("v3", {"cluster": 2})]
    cands += [("v4", {"mode": m}) for m in drv.MODES]
    seen = set()
    for v, kw in cands:
        plan = drv.plan_for(v, size, sms, **kw)
        key = tuple(sorted((k, str(x)) for k, x in plan.items() if k != "version"))
        label = v + "".join(f" {k}={x}" for k, x in kw.items() if x is not None)
        if key in seen:                      # e.g. S clamped, or a plan that runs v1's kernel
            rows.append([H.size_str(size), label, plan["kernel"], "same", "", ""])
            continue
        seen.add(key)
        r = H.check(lambda vv, dd: drv.run_plan(dd, plan), v, case, d)
        t = time_fn(lambda: drv.run_plan(d, plan))
        detail = ", ".join(f"{k}={x}" for k, x in plan.items() if k not in ("version", "kernel"))
        rows.append([H.size_str(size), label, f"{plan['kernel']} ({detail})",
                     "ok" if r.ok else "FAIL", f"{t.median_ms:.4f}",
                     f"{case.flops / t.median_ms / 1e9:.0f}"])
        print(rows[-1], flush=True)
    torch = torch_or_none()
    if torch is not None:
        m, k, n = size
        at = as_torch(d.array("a")).view(torch.bfloat16)
        bt = as_torch(d.array("b")).view(torch.bfloat16)
        c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
        t = time_fn(lambda: torch.matmul(at, bt.t(), out=c))
        rows.append([H.size_str(size), "cuBLAS (torch.matmul)", "", "", f"{t.median_ms:.4f}",
                     f"{case.flops / t.median_ms / 1e9:.0f}"])
        print(rows[-1], flush=True)
print(table(rows, ["size", "candidate", "kernel (plan)", "check", "median ms", "TFLOP/s"]))
