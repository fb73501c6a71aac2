#!/usr/bin/env python3
"""Day 25: every SGEMM configuration in kernel.cu (the ladder v1..v5 and v6's six candidates)
checked once, then timed beside cuBLAS sgemm (fp32) in the same run. From the repo root on the
GPU machine:

    python .notes/day25_sweep.py          # 4096^3, 8192x3072x768, 4095x4097x1023, 2048^3
    python .notes/day25_sweep.py --all    # + 8192x768x3072 and 8192x1024x8192

Sizes are MxKxN (C[M,N] = A[M,K] @ B[K,N]), as in the driver. Checks: every kernel against a
float64 numpy product at two ragged shapes (one per load path: 1100x516x1300 takes _vec4,
1100x515x1301 _scalar), then at every timed size against cuBLAS's own C (relative L2 < 1e-5).
A wrong kernel is reported FAIL and not timed; the script exits 1 if any failed.

Printed at the end: the table (ms, TFLOP/s, x cuBLAS per size), v6's best candidate per size as
the TUNED dict to paste into driver.py, and the fastest 128x128/256-thread candidate at 4096^3
(the one sgemm.cuh's `Fast` should name; days 28 and 30 static_assert its 128x128x256 shape).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.baselines import sgemm  # noqa: E402
from common.check import compare  # noqa: E402
from common.gpu import context, device_info  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day25_cublas_integration import driver as D  # noqa: E402

SIZES = [(4096, 4096, 4096), (8192, 3072, 768), (4095, 4097, 1023), (2048, 2048, 2048)]
MORE = [(8192, 768, 3072), (8192, 1024, 8192)]
CHECKS = [(1100, 516, 1300), (1100, 515, 1301)]


def kernels():
    out = {v: D.V_CONFIG[v] for v in ("v1", "v2", "v3", "v4", "v5")}
    for name, shape in D.CANDIDATES.items():
        out["v6:" + name] = ("sgemm_v6_" + name, *shape)
    return out


def case(size, seed):
    m, k, n = size
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)},
                  reference=lambda: {"c": a.astype(np.float64) @ b.astype(np.float64)})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--all", action="store_true", help="also the GPT-2 fc and 8192x1024x8192")
    args = ap.parse_args()
    sizes = SIZES + (MORE if args.all else [])
    ks = kernels()
    context()
    info = device_info()
    print(f"day 25 sweep on {info.get('name', '?') if isinstance(info, dict) else info}")
    bad = set()

    for size in CHECKS:
        c = case(size, 25)
        d = H.DeviceCase(c)
        for label, cfg in ks.items():
            r = H.check(lambda v, dd, cfg=cfg: D.launch_kernel(*cfg, dd), label, c, d)
            if not r.ok:
                bad.add(label)
                print(f"FAIL {label} at {H.size_str(size)}: {r.message}")
    print(f"checked {len(ks)} kernels at {', '.join(map(H.size_str, CHECKS))}: "
          f"{len(ks) - len(bad)} ok")

    table = {}   # label -> size -> (ms, tflops, x cublas)
    for size in sizes:
        m, k, n = size
        c = H.Case(size, inputs={"a": np.random.default_rng(1).standard_normal((m, k), dtype=np.float32),
                                 "b": np.random.default_rng(2).standard_normal((k, n), dtype=np.float32)},
                   outputs={"c": ((m, n), np.float32)})
        d = H.DeviceCase(c)
        sgemm(d.a, d.b, d.c, m, n, k)
        want = d.array("c").get().astype(np.float64)
        t_lib = time_fn(lambda: sgemm(d.a, d.b, d.c, m, n, k)).median_ms
        flops = 2.0 * m * n * k
        table.setdefault("cuBLAS sgemm", {})[size] = (t_lib, flops / t_lib / 1e9, 1.0)
        for label, cfg in ks.items():
            if label in bad:
                continue
            d.poison_outputs()
            D.launch_kernel(*cfg, d)
            got = d.array("c").get()
            r = compare(got, want, 1e-5, label)
            if not r.ok:
                bad.add(label)
                print(f"FAIL {label} at {H.size_str(size)} (vs cuBLAS): {r.message}")
                continue
            t = time_fn(lambda cfg=cfg: D.launch_kernel(*cfg, d)).median_ms
            table.setdefault(label, {})[size] = (t, flops / t / 1e9, t_lib / t)
        print(f"timed {H.size_str(size)} (cuBLAS {t_lib:.3f} ms)", flush=True)

    head = ["kernel"] + [H.size_str(s) for s in sizes]
    rows = []
    for label, per in table.items():
        rows.append([label] + [f"{per[s][0]:.3f} ms {per[s][1]:5.1f} TF {per[s][2]:.2f}x"
                               if s in per else "-" for s in sizes])
    try:
        from tabulate import tabulate
        print(tabulate(rows, head, tablefmt="github"))
    except ImportError:
        for r in [head] + rows:
            print(" | ".join(r))

    tuned = {}
    for s in sizes:
        cands = [(per[s][0], lab[3:]) for lab, per in table.items()
                 if lab.startswith("v6:") and s in per]
        if cands:
            tuned[s] = min(cands)[1]
    print("\nTUNED = {  # driver.py: fastest v6 candidate per shape (MxKxN)")
    for s, name in tuned.items():
        print(f"    {s}: {name!r},")
    print("}")
    fast = [(per[sizes[0]][0], lab[3:]) for lab, per in table.items() if lab.startswith("v6:")
            and sizes[0] in per and D.CANDIDATES[lab[3:]] == (128, 128, 256)]
    if fast:
        print(f"sgemm.cuh Fast: {min(fast)[1]} (fastest 128x128/256-thread candidate at "
              f"{H.size_str(sizes[0])})")
    best_at = {s: min((per[s][0], lab) for lab, per in table.items()
                      if s in per and lab != "cuBLAS sgemm") for s in sizes
               if any(s in per for lab, per in table.items() if lab != "cuBLAS sgemm")}
    for s, (t, lab) in best_at.items():
        print(f"best at {H.size_str(s)}: {lab} {table['cuBLAS sgemm'][s][0] / t:.2f}x cuBLAS")
    if bad:
        print("FAILED: " + ", ".join(sorted(bad)))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
