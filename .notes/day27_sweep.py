#!/usr/bin/env python3
"""Day 27 sweep (run on the GPU from the repo root: `python .notes/day27_sweep.py`, ~1 minute).

1. Checks every v4 tile candidate of kernel.cu (dK/dV kernels and dQ kernels, each paired with
   the default of the other) against the float64 reference at ragged sizes, both masks.
2. Times each v4 kernel alone and each v5 candidate whole (median of time_fn, L2 flushed) at
   the bench sizes, next to v2, v3 and torch SDPA's fp32 backward, and prints the best pair per head dim: put it in
   driver.V4_TILES / V5_TILES, and BEST = the faster of v4 and v5.
Timing inputs are random (no float64 reference at these sizes; the values do not change the
speed of fp32 FMAs and exp).
"""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.baselines import torch_or_none  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day27_flash_attention_backward import driver as D  # noqa: E402
from days.day27_flash_attention_backward import reference  # noqa: E402

CHECK = [(3, 333, 64, D.FULL), (2, 200, 64, D.CAUSAL), (2, 333, 128, D.CAUSAL), (1, 130, 128, D.FULL)]
TIME = [(32, 4096, 64, D.FULL), (32, 4096, 64, D.CAUSAL), (32, 2048, 128, D.FULL),
        (32, 2048, 128, D.CAUSAL)]


def random_device_case(size, seed=0):
    bh, n, d, m = size
    rng = np.random.default_rng(seed)
    x = {k: rng.standard_normal((bh, n, d), dtype=np.float32) for k in ("Q", "K", "V", "O", "dO")}
    x["O"] *= np.float32(0.1)
    # scores are ~N(0, 1): LSE_i ~ log(keys of row i) + 1/2
    keys = np.arange(1, n + 1) if m == D.CAUSAL else np.full(n, n)
    x["LSE"] = np.broadcast_to(np.log(keys) + 0.5, (bh, n)).astype(np.float32).copy()
    case = H.Case(size, inputs=x, outputs={k: ((bh, n, d), np.float32) for k in ("dQ", "dK", "dV")})
    return H.DeviceCase(case)


def ms(fn):
    return time_fn(fn, warmup=2, repeats=10, max_seconds=0.5).median_ms


def main():
    bad = 0
    print("checks (v4 candidates vs float64):")
    for size in CHECK:
        d = size[2]
        case = D.make_case(size, np.random.default_rng(27))
        dev = H.DeviceCase(case)
        c = D.V4_CANDIDATES[d]
        pairs = [(k, D.V4_TILES[d]["dq"]) for k in c["dkdv"]] + [(D.V4_TILES[d]["dkdv"], q) for q in c["dq"]]
        for tk, tq in dict.fromkeys(pairs):
            r = H.check(lambda v, dd, tk=tk, tq=tq: D.launch_v4(dd, tk, tq), "v4", case, dev)
            bad += not r.ok
            print(f"  {H.size_str(size):>14} dkdv {tk:>14} dq {tq:>14}: "
                  f"{'ok' if r.ok else 'FAIL ' + r.message} (rel {r.rel_l2:.1e})")
        for t5 in D.V5_CANDIDATES[d]:
            r = H.check(lambda v, dd, t5=t5: D.launch_v5(dd, t5), "v5", case, dev)
            bad += not r.ok
            print(f"  {H.size_str(size):>14} v5 {t5:>14}: "
                  f"{'ok' if r.ok else 'FAIL ' + r.message} (rel {r.rel_l2:.1e})")

    print("\ntimes (ms, median; TFLOP/s counts the kernel's own products: dK/dV 4, dQ 3, "
          "whole backward 5 x 2 x pairs x d):")
    best = {}
    for size in TIME:
        bh, n, d, m = size
        dev = random_device_case(size)
        pairs = reference.pairs(n, m == D.CAUSAL)
        tf = lambda t, products: products * 2 * bh * pairs * d / (t * 1e-3) / 1e12
        Dv = D.preprocess(dev)
        rows = [("preprocess (D)", ms(lambda: D.preprocess(dev)), None)]
        tk_best = tq_best = None
        for tk in D.V4_CANDIDATES[d]["dkdv"]:
            bm, bn = D._tile(tk)
            t = ms(lambda: D.flash(f"fa_bwd_v4_dkdv_d{d}_{tk}", "dkdv", dev, Dv, bm, bn, True))
            rows.append((f"v4 dkdv {tk}", t, tf(t, 4)))
            tk_best = min(tk_best or (t, tk), (t, tk))
        for tq in D.V4_CANDIDATES[d]["dq"]:
            bm, bn = D._tile(tq)
            t = ms(lambda: D.flash(f"fa_bwd_v4_dq_d{d}_{tq}", "dq", dev, Dv, bm, bn, True))
            rows.append((f"v4 dq {tq}", t, tf(t, 3)))
            tq_best = min(tq_best or (t, tq), (t, tq))
        t5_best = None
        for t5 in D.V5_CANDIDATES[d]:
            t = ms(lambda: D.launch_v5(dev, t5))
            rows.append((f"v5 whole (zero dQ + D, atomic kernel) {t5}", t, tf(t, 5)))
            t5_best = min(t5_best or (t, t5), (t, t5))
        for v in ("v2", "v3", "v4"):
            t = ms(lambda: D.launch(v, dev))
            rows.append((f"{v} whole (driver default)", t, tf(t, 5)))
        t = ms(lambda: D.launch_v4(dev, tk_best[1], tq_best[1]))
        rows.append((f"v4 whole, best pair {tk_best[1]} + {tq_best[1]}", t, tf(t, 5)))
        t = min(t, t5_best[0])
        if torch_or_none() is not None:
            try:
                fn = D.torch_sdpa_backward(dev)
                tt = ms(fn)
                rows.append(("torch SDPA backward", tt, tf(tt, 5)))
                rows.append((f"  -> best of v4/v5 vs torch: {tt / t:.2f}x", t, None))
            except Exception as e:
                print(f"  torch not timed: {type(e).__name__}: {e}")
        best.setdefault(d, []).append((size, tk_best[1], tq_best[1], t5_best[1]))
        print(f"\n  {H.size_str(size)}")
        for name, t, r in rows:
            print(f"    {name:<52} {t:9.3f} ms" + (f"  {r:6.2f} TFLOP/s" if r else ""))
    print("\nbest pair per size (put the winner in driver.V4_TILES):")
    for d, items in best.items():
        for size, tk, tq, t5 in items:
            print(f"  d={d} {H.size_str(size)}: v4 dkdv {tk}, dq {tq}; v5 {t5}")
    print("all candidates correct" if not bad else f"{bad} candidate check(s) FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
