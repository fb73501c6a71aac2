"""Day 40 sweep (run on the GPU machine from the repo root: python .notes/day40_sweep.py).

Every version checked once against the float64 reference at three small shapes (C % 4 != 0, a
skewed router with an empty expert, 16 experts), and the determinism of y (4 runs, bit for bit);
then each version and the torch loop timed (median of common.timing.time_fn, L2 flushed) at the
bench sizes and at 16384 tokens. Prints ms and v3 / torch. Under a minute (the numpy references
of the timed sizes are not computed: they were checked at the small shapes).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day40_moe_kernel import driver as D  # noqa: E402

CHECK = [(257, 50, 8, 1), (300, 128, 16, 2), (1000, 768, 8, 2)]
SIZES = [(8192, 768, 8, 1), (5000, 768, 8, 1), (8192, 768, 8, 2), (16384, 768, 8, 1)]


def main():
    bad = []
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for v in D.VERSIONS:
            r = H.check(D.launch, v, case, d)
            if not r.ok:
                bad.append(f"{v} at {H.size_str(size)}: {r.message}")
            first = d.outputs()["y"].view(np.uint32).copy()
            for _ in range(3):
                H.check(D.launch, v, case, d)
                if not np.array_equal(d.outputs()["y"].view(np.uint32), first):
                    bad.append(f"{v} at {H.size_str(size)}: y differs between runs")
                    break
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))
    for size in SIZES:
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        times = {v: time_fn(lambda: D.launch(v, d)).median_ms for v in D.VERSIONS}
        for name, fn in D.baselines(d).items():
            times[name] = time_fn(fn).median_ms
        print(f"\n{H.size_str(size)}  ({case.flops / 1e9:.1f} GFLOP)")
        for name, ms in times.items():
            print(f"   {name:26s} {ms:8.3f} ms  {case.flops / (ms * 1e-3) / 1e12:5.1f} TFLOP/s")
        if D.TORCH in times:
            print(f"   torch / v3 = {times[D.TORCH] / times['v3']:.2f}x")


if __name__ == "__main__":
    main()
