#!/usr/bin/env python3
"""Day 29 sweep: every candidate of the tiny kernel (matrices per block, through the shared
memory a block takes) and of the register tile (kernel.cu's TILE list, and v3's 128x128 from
sgemm.cuh: its default and day 25's Fast configuration), checked once against float64 and timed
at the bench sizes beside cuBLAS strided-batched. Run on the GPU machine from the repo root:

    python .notes/day29_sweep.py            # all sizes (about a minute)
    python .notes/day29_sweep.py --quick    # tiny and medium sizes only

A wrong candidate is reported (FAIL) and not timed; the script exits 1 if any was wrong.
Printed: one table (rows: candidates, columns: sizes, median microseconds, the fastest of each
column marked *), then what v4 runs now at each size and which candidate was fastest, i.e. what
to change in driver.py (TINY_SMEM, V3_FAST, MID_TILE, BIG_MIN_FILL / BIG_MIN_WAVES,
v4_plan).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.baselines import sgemm_strided_batched  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day29_batched_matmul import driver as D  # noqa: E402

TINY_SIZES = [(100000, 16, 16, 16), (100000, 8, 8, 8), (20000, 32, 32, 32), (1000, 33, 17, 65),
              (4096, 64, 64, 64), (100000, 16, 16, 17)]
MID_SIZES = [(4096, 64, 64, 64), (512, 128, 128, 128), (2048, 96, 96, 96), (1, 1024, 1024, 1024)]
LARGE_SIZES = [(64, 512, 512, 512), (16, 1024, 1024, 1024), (24, 1000, 777, 513),
               (256, 256, 256, 256)]
SMEM = [8 << 10, 16 << 10, 32 << 10, 64 << 10]


def candidates(size):
    """(label, launch(d)) of everything worth timing at this size."""
    out = []
    if D.tiny_fits(size):
        for s in SMEM:
            g = D.tiny_plan(size, s)[1]
            out.append((f"tiny {s >> 10}KB", lambda d, s=s: D.launch_tiny(d, s), f"G={g}"))
    _, m, _, n = size
    if m * n >= 32 * 32:
        for t in D.TILES:
            out.append((f"tile {t[0]}x{t[1]} k{t[2]}", lambda d, t=t: D.launch_tile(d, t), ""))
        out.append(("v3 128x128", lambda d: D.launch_sgemm(d, False), ""))
        out.append(("v3 fast 128x128", lambda d: D.launch_sgemm(d, True), ""))
    out.append(("v1 naive", lambda d: D.launch("v1", d), ""))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()
    sizes = list(dict.fromkeys(TINY_SIZES + MID_SIZES + ([] if args.quick else LARGE_SIZES)))
    results, failed = {}, []
    t_start = time.time()
    for size in sizes:
        case = D.make_case(size, np.random.default_rng(29))
        t0 = time.time()
        case.expected()
        d = H.DeviceCase(case)
        batch, m, k, n = size
        col = {}
        for label, fn, note in candidates(size):
            r = H.check(lambda v, dd, fn=fn: fn(dd), label, case, d)
            if not r.ok:
                failed.append(f"{label} at {H.size_str(size)}: {r.message}")
                col[label] = ("FAIL", note)
                continue
            col[label] = (time_fn(lambda: fn(d), repeats=args.repeats).median_ms * 1e3, note)
        r = H.check(lambda v, dd: sgemm_strided_batched(dd.a, dd.b, dd.c, batch, m, n, k),
                    "cublas", case, d)
        col["cuBLAS strided batched"] = (
            time_fn(lambda: sgemm_strided_batched(d.a, d.b, d.c, batch, m, n, k),
                    repeats=args.repeats).median_ms * 1e3 if r.ok else "FAIL", "")
        results[size] = col
        print(f"{H.size_str(size)}: {len(col)} timed ({time.time() - t0:.1f} s, reference incl.)",
              flush=True)

    labels = list(dict.fromkeys(lbl for col in results.values() for lbl in col))
    heads = [H.size_str(s) for s in sizes]
    print("\nmedian microseconds (L2 flushed; * = fastest hand kernel at that size; "
          "GB/s and TFLOP/s below)")
    print(f"{'candidate':<24}" + "".join(f"{h:>22}" for h in heads))
    best = {}
    for s in sizes:
        own = {lbl: v[0] for lbl, v in results[s].items()
               if isinstance(v[0], float) and not lbl.startswith("cuBLAS")}
        best[s] = min(own, key=own.get) if own else None
    for lbl in labels:
        cells = []
        for s in sizes:
            v = results[s].get(lbl)
            if v is None:
                cells.append("-")
            elif v[0] == "FAIL":
                cells.append("FAIL")
            else:
                cells.append(f"{v[0]:.1f}{'*' if best[s] == lbl else ''}{' ' + v[1] if v[1] else ''}")
        print(f"{lbl:<24}" + "".join(f"{c:>22}" for c in cells))

    print("\nper size: fastest candidate, its rate, cuBLAS, and what v4 runs now")
    for s in sizes:
        b = best[s]
        if b is None:
            continue
        us = results[s][b][0]
        cub = results[s]["cuBLAS strided batched"][0]
        batch, m, k, n = s
        rate = (f"{D.reference.bytes_moved(*s) / us / 1e3:.0f} GB/s, "
                f"{D.reference.flops(*s) / us / 1e6:.2f} TFLOP/s")
        vs = f"{cub / us:.2f}x cuBLAS ({cub:.1f} us)" if isinstance(cub, float) else "cuBLAS FAIL"
        print(f"  {H.size_str(s):>22}: {b} {us:.1f} us ({rate}), {vs}; v4 plan now: {D.v4_plan(s)}")
    print(f"\nsweep took {time.time() - t_start:.0f} s")
    if failed:
        print("\nFAILURES:")
        for f in failed:
            print("  " + f)
        sys.exit(1)


if __name__ == "__main__":
    main()
