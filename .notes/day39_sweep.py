"""Day 39 sweep (run on the GPU machine from the repo root: python .notes/day39_sweep.py).

Candidates: v3, v4 (bk8) and v5 at every (words of k a tile, stages) kernel.cu builds
(driver.V5_CANDIDATES), each checked once against the exact int32 reference at three ragged
shapes, then timed (median of common.timing.time_fn, L2 flushed) at 4096^3, the awkward
4095x4099x4097 and 8192x4096x4096, beside cuBLAS SGEMM / day 8's best (fp32) and cuBLAS int8.
Prints T ops/s and the ratio to the faster fp32 SGEMM (the bar: >= 2). Under a minute.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day39_quantization_ops import driver as D  # noqa: E402

CANDIDATES = [("v3", None), ("v4", None)] + [("v5", c) for c in D.V5_CANDIDATES]
CHECK = [(257, 2049, 131), (130, 4099, 260), (1, 16, 1)]
SIZES = [(4096, 4096, 4096), (4095, 4099, 4097), (8192, 4096, 4096)]


def name(v, c):
    return v if c is None else f"v5 bk{c[0]} s{c[1]}"


def main():
    bad = []
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for v, c in CANDIDATES:
            r = H.check(lambda vv, dd: D.launch(vv, dd, config=c), v, case, d)
            if not r.ok:
                bad.append(f"{name(v, c)} at {H.size_str(size)}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))
    for size in SIZES:
        m, k, n = size
        ops = 2 * m * n * k
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        times = {}
        for v, c in CANDIDATES:
            times[name(v, c)] = time_fn(lambda: D.launch(v, d, config=c)).median_ms
        for lib, fn in D.baselines(d).items():
            times[lib] = time_fn(fn).median_ms
        fp32 = min(ms for lib, ms in times.items() if "fp32" in lib)
        print(f"\n{H.size_str(size)}   (ratio = faster fp32 SGEMM time / this time)")
        for label, ms in times.items():
            print(f"   {label:24s} {ms:8.3f} ms  {ops / (ms * 1e-3) / 1e12:6.1f} T ops/s  "
                  f"ratio {fp32 / ms:5.2f}")


if __name__ == "__main__":
    main()
