"""Day 55 sweep (run on the GPU machine from the repo root: python .notes/day55_sweep.py).

One GPU call, about a minute of GPU time (plus ~30 s of numpy references on the CPU). Times
v4's instantiated shapes (driver.V4_CANDIDATES: threads, keys a thread, ranking m = match /
b = ballots) beside v3 and the libraries at 2^28 keys and 2^28 pairs, and prints where the time
of v3 and of the fastest candidate goes, kernel by kernel.

  0. smoke: every look-back kernel once at a small ragged size in a CHILD process with a time
     limit (a deadlock shows as a timeout, not a hung sweep).
  1. checks: each candidate once against numpy at 2^28 (keys, then pairs).
  2. timings: median of common.timing.time_fn (L2 flushed before each repeat).
  3. per kernel: histogram, scan, the four passes (events between launches, mean of 5).
"""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.baselines import cupy_or_none  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day55_radix_sort import driver as D  # noqa: E402

RUNS = [("v3", None)] + [("v4", tuple(c)) for c in D.V4_CANDIDATES]
SIZES = [(2 ** 28, 1, 1, 1), (2 ** 28, 1, 2, 1)]

SMOKE = """
import sys, numpy as np
from common import harness as H
from days.day55_radix_sort import driver as D
for size in [(7681, 1, 2, 1), (1000003, 2, 2, 3)]:
    case = D.make_case(size, np.random.default_rng(1))
    d = H.DeviceCase(case)
    for v, c in [("v3", None)] + [("v4", tuple(c)) for c in D.V4_CANDIDATES]:
        r = H.check(lambda ver, dd: D.launch(ver, dd, c), v, case, d)
        print(size, v, c, "ok" if r.ok else "FAIL " + r.message, flush=True)
"""


def main():
    r = subprocess.run([sys.executable, "-c", SMOKE], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    print(r.stdout + r.stderr[-2000:])
    if r.returncode != 0 or "FAIL" in r.stdout:
        print("smoke failed: not timing")
        return 1
    cupy = cupy_or_none()
    best = {}
    for size in SIZES:
        words = size[2]
        case = D.make_case(size, np.random.default_rng(0))
        d = H.DeviceCase(case)
        print(f"\n{H.size_str(size)} ({'pairs' if words == 2 else 'keys'})")
        rows = []
        for v, c in RUNS:
            res = H.check(lambda ver, dd: D.launch(ver, dd, c), v, case, d)
            t = time_fn(lambda: D.launch(v, d, c))
            rows.append((f"{v} {c or D.V3}", t.median_ms, res.ok))
            print(f"  {rows[-1][0]:<24} {t.median_ms:8.3f} ms  {size[0] / t.median_ms / 1e6:6.2f} Gkeys/s  "
                  f"{'ok' if res.ok else 'FAIL ' + res.message}", flush=True)
        if cupy is not None:
            xc = cupy.asarray(d.array("x"))
            lib = (lambda: cupy.sort(xc)) if words == 1 else (lambda: cupy.argsort(xc))
            t = time_fn(lib)
            name = "cupy.sort" if words == 1 else "cupy.argsort"
            print(f"  {name:<24} {t.median_ms:8.3f} ms  {size[0] / t.median_ms / 1e6:6.2f} Gkeys/s")
            for label, ms, ok in rows:
                if ok:
                    print(f"    {label:<22} {t.median_ms / ms:5.2f}x of {name}")
        ok_rows = [r for r in rows if r[2] and r[0].startswith("v4")]
        if ok_rows:
            best[words] = min(ok_rows, key=lambda r: r[1])[0]
        del d
    print("\nper kernel (us):")
    for words in (1, 2):
        size = (2 ** 28, 1, words, 1)
        for label in ["v3"] + ([best[words]] if words in best else []):
            v, _, rest = label.partition(" ")
            cfg = tuple(json.loads(rest.replace("(", "[").replace(")", "]").replace("'", '"'))) if rest else None
            times = D.kernel_times(v, size, cfg=cfg)
            print(f"  {H.size_str(size)} {label}: " + ", ".join(f"{k} {us:.0f}" for k, us in times))
    return 0


if __name__ == "__main__":
    sys.exit(main())
