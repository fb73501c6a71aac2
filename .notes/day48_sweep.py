"""Day 48 sweep, round 2: v5 (the ping-pong GEMM, wgmma_gemm.cuh run_pingpong) against the
versions it must beat and cuBLAS, at every bench size plus day 49's fc1 GEMM shape
(8192 x 768 x 3072: M x K x N, K = 768, 12 k-blocks a tile). Each candidate is checked against
the float64 reference once, then timed (median, L2 flushed):
  - v1 (plain 128 x 256 tiles), v2 / v3 (split-K, the model's S), v4 (stream-K, hybrid);
  - v5 with the model's S ("auto"), and S = 1, 2, 4 where they differ;
  - v5 on 64 x 256 tiles (tile=64) and in clusters of two with B multicast (cluster=2);
  - cuBLAS (torch.matmul) on the same data.
Decide from it: BEST; whether v5's S model (driver.split_slices on 128 x 128 tiles) picks the
fastest S; whether v5 should be 64 x 256 or clustered.
    python .notes/day48_sweep.py            (under a minute and a half on an H200)
A v5 deadlock cannot hang this: the kernel's watchdog faults after ~9 s (then every later call
fails with "an illegal memory access"); run tests/days/test_day48.py first."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import harness as H  # noqa: E402
from common import gpu  # noqa: E402
from common.baselines import as_torch, torch_or_none  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day48_split_k_stream_k import driver as drv  # noqa: E402

CANDIDATES = [("v1", {}), ("v2", {}), ("v3", {}), ("v4", {}),
              ("v5", {}), ("v5", {"slices": 1}), ("v5", {"slices": 2}), ("v5", {"slices": 4}),
              ("v5", {"tile": 64}), ("v5", {"cluster": 2})]
SIZES = drv.BENCH_SIZES + [(8192, 768, 3072)]
sms = gpu.sm_count()
torch = torch_or_none()
rows = []
for size in SIZES:
    case = drv.make_case(size, np.random.default_rng(0))
    d = H.DeviceCase(case)
    seen = set()
    for v, kw in CANDIDATES:
        plan = drv.plan_for(v, size, sms, **kw)
        key = tuple(sorted((k, str(x)) for k, x in plan.items() if k != "version"))
        label = v + "".join(f" {k}={x}" for k, x in kw.items())
        if key in seen:                      # the same launch as an earlier candidate
            continue
        seen.add(key)
        r = H.check(lambda vv, dd: drv.run_plan(dd, plan), v, case, d)
        t = time_fn(lambda: drv.run_plan(d, plan))
        detail = ", ".join(f"{k}={x}" for k, x in plan.items() if k not in ("version", "kernel"))
        rows.append([H.size_str(size), label, f"{plan['kernel']} ({detail})",
                     "ok" if r.ok else "FAIL", f"{t.median_ms:.4f}",
                     f"{case.flops / t.median_ms / 1e9:.0f}"])
        print(rows[-1], flush=True)
    if torch is not None:
        m, k, n = size
        at = as_torch(d.array("a")).view(torch.bfloat16)
        bt = as_torch(d.array("b")).view(torch.bfloat16)
        c = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
        t = time_fn(lambda: torch.matmul(at, bt.t(), out=c))
        rows.append([H.size_str(size), "cuBLAS (torch.matmul)", "", "", f"{t.median_ms:.4f}",
                     f"{case.flops / t.median_ms / 1e9:.0f}"])
        print(rows[-1], flush=True)
    del d
print(table(rows, ["size", "candidate", "kernel (plan)", "check", "median ms", "TFLOP/s"]))
