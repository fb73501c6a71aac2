#!/usr/bin/env python3
"""Day 27 v6 sweep (on the GPU from the repo root: `python .notes/day27_sweep_v6.py`, < 90 s).

1. Checks every v6 tile candidate of kernel.cu (driver.V6_CANDIDATES) against the float64
   reference at ragged sizes, both masks, both head dims.
2. Times each candidate whole (D + dQ = 0, then the fused kernel; median of time_fn, L2
   flushed) at 32x4096x64 full/causal and 32x2048x128 full/causal, next to v4 and v5 (driver
   defaults) and torch SDPA's fp32 backward, and prints the fastest candidate per size.
   Put the winner per head dim in driver.V6_TILES, and BEST = the fastest version.
Timing inputs are random (as in .notes/day27_sweep.py): no float64 reference at these sizes.
"""
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / ".notes"))

from common import harness as H  # noqa: E402
from common.baselines import torch_or_none  # noqa: E402
from common.timing import time_fn  # noqa: E402
from day27_sweep import TIME, random_device_case  # noqa: E402
from days.day27_flash_attention_backward import driver as D  # noqa: E402
from days.day27_flash_attention_backward import reference  # noqa: E402

CHECK = [(3, 333, 64, D.FULL), (2, 200, 64, D.CAUSAL), (1, 17, 64, D.CAUSAL), (2, 1, 64, D.FULL),
         (2, 333, 128, D.CAUSAL), (1, 130, 128, D.FULL), (2, 65, 128, D.CAUSAL)]


def ms(fn):
    return time_fn(fn, warmup=2, repeats=10, max_seconds=0.5).median_ms


def main():
    t0 = time.time()
    bad = 0
    print("checks (v6 candidates vs float64):")
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(27))
        dev = H.DeviceCase(case)
        for t6 in D.V6_CANDIDATES[size[2]]:
            r = H.check(lambda v, dd, t6=t6: D.launch_v6(dd, t6), "v6", case, dev)
            bad += not r.ok
            print(f"  {H.size_str(size):>14} v6 {t6:>18}: "
                  f"{'ok' if r.ok else 'FAIL ' + r.message} (rel {r.rel_l2:.1e})")

    print("\ntimes (ms, median, whole backward incl. the D/zero-dQ kernel; TFLOP/s = 5 x 2 x pairs x d):")
    winners = []
    for size in TIME:
        bh, n, d, m = size
        dev = random_device_case(size)
        pairs = reference.pairs(n, m == D.CAUSAL)
        tf = lambda t: 10 * bh * pairs * d / (t * 1e-3) / 1e12
        rows, best = [], None
        for t6 in D.V6_CANDIDATES[d]:
            t = ms(lambda: D.launch_v6(dev, t6))
            rows.append((f"v6 {t6}", t))
            best = min(best or (t, t6), (t, t6))
        for v in ("v4", "v5"):
            rows.append((f"{v} (driver default)", ms(lambda: D.launch(v, dev))))
        tt = None
        if torch_or_none() is not None:
            try:
                tt = ms(D.torch_sdpa_backward(dev))
                rows.append(("torch SDPA backward", tt))
            except Exception as e:
                print(f"  torch not timed: {type(e).__name__}: {e}")
        print(f"\n  {H.size_str(size)}")
        for name, t in rows:
            print(f"    {name:<34} {t:9.3f} ms  {tf(t):6.2f} TFLOP/s")
        if tt:
            print(f"    -> best v6 ({best[1]}) vs torch: {tt / best[0]:.2f}x torch's speed")
        winners.append((size, best[1], best[0], tt))
    print("\nfastest v6 candidate per size (put the winner per head dim in driver.V6_TILES):")
    for size, t6, t, tt in winners:
        print(f"  {H.size_str(size):>14}: {t6:<18} {t:8.3f} ms" + (f"  torch {tt:8.3f} ms" if tt else ""))
    print("all candidates correct" if not bad else f"{bad} candidate check(s) FAILED")
    print(f"sweep took {time.time() - t0:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
