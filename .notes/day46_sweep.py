"""Day 46 sweep (run on the GPU machine from the repo root: python .notes/day46_sweep.py).

Candidates (driver.CANDIDATES, all built in kernel.cu): v3 (fast accumulation, cluster 2,
2 k-blocks in flight, group 8) against 1 k-block in flight and groups of 16; v4 (promoted)
against groups of 16 and no cluster. Each is checked once against the float64 reference at
three ragged shapes (and v4-type ones at K = 8192 against the strict fp32-accumulation bound),
then timed (common.timing.time_fn, L2 flushed) at 8192^3, 4096^3 and the awkward 8191x8000x8000
beside torch._scaled_mm in both modes. Prints TFLOP/s and the ratio to the same-mode cuBLAS.
Under a minute (most of it quantizing the 8192^2 inputs on the host).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day46_fp8_gemm import driver as D  # noqa: E402
from days.day46_fp8_gemm import reference as R  # noqa: E402

CHECK = [(1100, 520, 600), (385, 136, 770), (3, 2049, 1031)]
STRICT = (256, 8192, 256)        # promoted candidates: within 2^-8 + 1e-4 here
SIZES = [(8192, 8192, 8192), (4096, 4096, 4096), (8191, 8000, 8000)]


def main():
    bad = []
    for size in CHECK + [STRICT]:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for name in D.CANDIDATES:
            r = H.check(lambda v, dd: D.launch_kernel(v, dd), name, case, d)
            if not r.ok:
                bad.append(f"{name} at {H.size_str(size)}: {r.message}")
            elif size == STRICT and name.startswith("v4") and r.rel_l2 > 2.0 ** -8 + 1e-4:
                bad.append(f"{name} at {H.size_str(size)}: rel-L2 {r.rel_l2:.2e} is not fp32-grade")
            elif size == STRICT:
                print(f"   {name:10s} rel-L2 at K = 8192: {r.rel_l2:.2e}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))
    for size in SIZES:
        m, k, n = size
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        times = {}
        for name in D.CANDIDATES:
            times[name] = time_fn(lambda: D.launch_kernel(name, d)).median_ms
        for lib, fn in D.baselines(d).items():
            times[lib] = time_fn(fn).median_ms
        fast = times.get(D.TORCH_FAST)
        promoted = times.get(D.TORCH_PROMOTED)
        print(f"\n{H.size_str(size)}   (vs cuBLAS = same-mode torch._scaled_mm time / this time)")
        for label, ms in times.items():
            ref = promoted if label.startswith("v4") or label == D.TORCH_PROMOTED else fast
            ratio = f"{ref / ms:5.2f}" if ref else "  -  "
            what = D.CANDIDATES.get(label, (None, ""))[1]
            print(f"   {label:32s} {ms:8.3f} ms  {R.flops(m, k, n) / (ms * 1e-3) / 1e12:7.1f} "
                  f"TFLOP/s  vs cuBLAS {ratio}   {what}")


if __name__ == "__main__":
    main()
