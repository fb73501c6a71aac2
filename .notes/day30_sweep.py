"""Day 30 sweep (run on the GPU machine from the repo root: python .notes/day30_sweep.py).

Candidates: fc2's split over K fixed at 1 (= unsplit, fused bias + residual epilogue), 2, 3, 4
or chosen by the driver (auto), for v3 (layernorm kernel + day 8's tile), v4 (stats kernel +
fc1 normalizing on load, this day's own copy of day 8's loop) and v5 (v3 on sgemm::Fast, day
25's tile); v2 and torch eager for reference. Each candidate is checked once against
the float64 reference at small shapes, then timed (median of common.timing.time_fn, L2 flushed)
at the bench sizes. Under a minute.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day30_gpt2_style_ops import driver as D  # noqa: E402

SPLITS = [1, 2, 3, 4, None]
CANDIDATES = [("v2", None)] + [(v, s) for v in ("v3", "v4", "v5") for s in SPLITS]
CHECK = [(1000, 768), (257, 1024), (33, 50)]
SIZES = [(8192, 768), (5000, 768), (8191, 768), (4096, 1024), (8192, 1024)]


def name(v, s):
    return v if s is None and v == "v2" else f"{v} split={'auto' if s is None else s}"


def main():
    slots = D.resident_blocks()
    print(f"resident fc2 blocks: {slots}; auto split: "
          + ", ".join(f"{H.size_str(s)} -> {D.choose_ksplit(*s, slots)}" for s in SIZES))
    bad = []
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for v, s in CANDIDATES:
            r = H.check(lambda vv, dd: D.launch(vv, dd, split=s), v, case, d)
            if not r.ok:
                bad.append(f"{name(v, s)} at {H.size_str(size)}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))
    rows = []
    for size in SIZES:
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        row = [H.size_str(size)]
        for v, s in CANDIDATES:
            t = time_fn(lambda: D.launch(v, d, split=s))
            row.append(t.median_ms)
        base = D.baselines(d)
        row.append(time_fn(base["torch eager fp32"]).median_ms if base else float("nan"))
        rows.append(row)
    heads = ["size"] + [name(v, s) for v, s in CANDIDATES] + ["torch eager"]
    print("\nmedian ms (TFLOP/s of the two GEMMs in brackets)")
    for r in rows:
        bt, c = map(int, r[0].split("x"))
        fl = 2 * bt * c * 4 * c * 2
        print(r[0])
        for h, ms in zip(heads[1:], r[1:]):
            print(f"   {h:18s} {ms:8.3f} ms  ({fl / (ms * 1e-3) / 1e12:5.1f} TFLOP/s)")


if __name__ == "__main__":
    main()
