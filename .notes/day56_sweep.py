"""Day 56 sweep (second round): v4's shape, options and look-back sleeps, for select at the
bench sizes.

    python .notes/day56_sweep.py            (on the GPU machine, from the repo root; < 60 s)

Each candidate kernel (kernel.cu: CANDIDATE(...) / CANDIDATE3(...), compact_v4_<tag>_select,
plus the shipped compact_v4_select = w8i16v with no options) is checked once against the
reference at every size, then timed with common.timing.time_fn (L2 flushed, median). Then the
shipped v4 and the all-options candidate are timed with other (first, retry) sleeps. CUB's
DeviceSelect::If is timed on the same input for scale. Prints one table with each row's
percent of the harness's ceiling for the size's read:write mix (the bar: >= 75% and faster
than CUB). The best row becomes V4_* in kernel.cu and V4 in driver.py (a CPU test checks they
agree); the best sleeps LB_FIRST_NS / LB_RETRY_NS. Tags: w<warps>i<items>v, then the
options (vst = 16-byte stores of the staged runs, cs = streaming loads, full = whole tiles
without bound checks, lbw = a dedicated look-back warp, all = the four) and m<N> =
__launch_bounds__ asking N blocks an SM.
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

VST, CS, FULL, LBW = 1, 2, 4, 8  # kernel.cu's OPT_* (driver.OPT_* too)
# (tag, warps, items, opts, all three ops compiled); the shipped v4 is timed as "v4"
CANDIDATES = [
    ("w8i32v", 8, 32, 0, False),
    ("w16i16v", 16, 16, 0, False),
    ("w12i16v", 12, 16, 0, False),
    ("w8i24v", 8, 24, 0, False),
    ("w8i32v_m5", 8, 32, 0, False),
    ("w8i16v_m8", 8, 16, 0, False),
    ("w8i16v_vst", 8, 16, VST, True),
    ("w8i16v_cs", 8, 16, CS, True),
    ("w8i16v_full", 8, 16, FULL, True),
    ("w8i16v_lbw", 8, 16, LBW, True),
    ("w8i16v_vst_cs_full_m5", 8, 16, VST | CS | FULL, True),
    ("w8i16v_all", 8, 16, VST | CS | FULL | LBW, True),
    ("w8i32v_all", 8, 32, VST | CS | FULL | LBW, True),
    ("w8i32v_m4", 8, 32, 0, False),
    ("w4i32v_m10", 4, 32, 0, False),
    ("w8i32v_full_m5", 8, 32, FULL, False),
    ("w8i32v_vst_m5", 8, 32, VST, False),
]
# (row, first, retry): the shipped v4 and the all-options candidate with other sleeps (each
# also runs at the driver's 1000/500 in its own row above)
SLEEPS = [("v4", 500, 250), ("v4", 2000, 500), ("v4", 1000, 200)]
SIZES = [(2 ** 28, 50), (2 ** 28, 10), (2 ** 28 - 5, 90)]


def kernel_name(tag, op="select"):
    return f"compact_v4_{tag}_{op}"


def main():
    from tabulate import tabulate

    from common import harness as H
    from common.gpu import driver as cuda
    from common.runner import case_ceilings
    from common.timing import time_fn
    from days.day56_stream_compaction import driver as D

    t0 = time.perf_counter()
    shapes = [("v4", "compact_v4_select", D.V4["warps"], D.V4["items"], D.V4["opts"])]
    shapes += [(tag, kernel_name(tag), w, i, o) for tag, w, i, o, _ in CANDIDATES]
    by_tag = {s[0]: s for s in shapes}
    rows = {}
    for size in SIZES:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        ceil = case_ceilings(case).get("gbps")
        want = case.expected()
        want_y, want_k = want["y"].astype(np.float32), int(want["count"][0])

        def timed(label, run):
            d.poison_outputs()
            run()
            cuda().Context.synchronize()
            out = d.outputs()  # exact: values are moved, never computed
            ok = int(out["count"][0]) == want_k and np.array_equal(out["y"], want_y)
            t = time_fn(run, repeats=20)
            gbps = case.bytes / (t.median_ms * 1e-3) / 1e9
            pct = f" {100 * gbps / ceil:.0f}%" if ceil else ""
            rows.setdefault(label, {})[size] = f"{t.median_ms:.4f} ms {gbps:.0f} GB/s{pct}" + \
                ("" if ok else " WRONG")

        for label, name, w, i, o in shapes:
            fn = D.K(name, D.SINGLE_PASS_SIG)
            timed(label, lambda fn=fn, w=w, i=i, o=o: D.launch_single_pass(d, fn, w, i, opts=o))
        for label, first, retry in SLEEPS:
            _, name, w, i, o = by_tag[label]
            fn = D.K(name, D.SINGLE_PASS_SIG)
            timed(f"{label} sleeps {first}/{retry}",
                  lambda fn=fn, w=w, i=i, o=o, first=first, retry=retry: D.launch_single_pass(
                      d, fn, w, i, opts=o, first_ns=first, retry_ns=retry))
        try:
            call = D.CubCompaction("select", d.x, d.y, d.count, size[0],
                                   D.kernel_threshold(case.params["threshold"]))
            timed("CUB DeviceSelect::If", call)
        except Exception as e:
            print(f"CUB not timed: {type(e).__name__}: {e}")
        if ceil:
            rows.setdefault("(ceiling)", {})[size] = f"{ceil:.0f} GB/s, 75% = {0.75 * ceil:.0f}"
        del d
    table = [[label] + [cells.get(s, "-") for s in SIZES] for label, cells in rows.items()]
    print(tabulate(table, ["kernel"] + ["x".join(map(str, s)) for s in SIZES]))
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
