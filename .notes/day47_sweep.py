"""Day 47 sweep (run on the GPU machine from the repo root: python .notes/day47_sweep.py).

Candidates (driver.CANDIDATES, all built in kernel.cu): v2 (persistent, 2 k-blocks in flight,
group 8) against 1 k-block in flight; v3 (v2 + cluster of 2 multicasting B) against 1 in
flight and groups of 16. Each is checked bit for bit against the int64 reference at three
ragged shapes, then timed (common.timing.time_fn, L2 flushed) at 4096^3 (the bar), 8192^3 and
day 39's awkward 4095x4099x4097, beside cuBLAS int8 and torch._int_mm, and day 39's best at
4096^3 (B transposed for it). Prints T ops/s, the ratio to day 39 (bar: >= 2) and to the faster
library. Under a minute.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day39_quantization_ops import driver as D39  # noqa: E402
from days.day47_int8_tensor_core_gemm import driver as D  # noqa: E402
from days.day47_int8_tensor_core_gemm import reference as R  # noqa: E402

CHECK = [(3, 2049, 1031), (385, 144, 770), (257, 300, 128)]
SIZES = [(4096, 4096, 4096), (8192, 8192, 8192), (4095, 4099, 4097)]


def day39_ms(size):
    m, k, n = size
    rng = np.random.default_rng(3)
    case = H.Case(size, inputs={"a": rng.integers(-128, 128, (m, k), dtype=np.int8),
                                "b": rng.integers(-128, 128, (k, n), dtype=np.int8)},
                  outputs={"c": ((m, n), np.int32)})
    d = H.DeviceCase(case)
    return time_fn(lambda: D39.launch(D39.BEST, d)).median_ms


def main():
    bad = []
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for name in D.CANDIDATES:
            r = H.check(lambda v, dd: D.launch_kernel(v, dd), name, case, d)
            if not r.ok:
                bad.append(f"{name} at {H.size_str(size)}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))
    for size in SIZES:
        m, k, n = size
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        times = {}
        for name in D.CANDIDATES:
            times[name] = time_fn(lambda: D.launch_kernel(name, d)).median_ms
        libs = {}
        for lib, fn in D.baselines(d).items():
            try:
                libs[lib] = time_fn(fn).median_ms
            except Exception as e:     # a library refusing a shape must not stop the sweep
                print(f"   {lib}: not timed ({type(e).__name__}: {e})")
        d39 = day39_ms(size) if size == D.BAR_SIZE else None
        lib = min(libs.values()) if libs else None
        print(f"\n{H.size_str(size)}")
        for label, ms in list(times.items()) + list(libs.items()) + \
                ([(f"day 39 {D39.BEST} (dp4a)", d39)] if d39 else []):
            tops = R.ops(m, k, n) / (ms * 1e-3) / 1e12
            over39 = f"  {d39 / ms:5.2f}x day 39" if d39 else ""
            vs = f"  {lib / ms:5.2f}x library" if lib else ""
            what = D.CANDIDATES.get(label, (None, ""))[1]
            print(f"   {label:28s} {ms:8.3f} ms {tops:7.1f} T ops/s{over39}{vs}   {what}")


if __name__ == "__main__":
    main()
