"""Day 24: how large should the persistent grid be? (blocks per SM for v3, v4, v5)

    python .notes/day24_sweep.py          # from the repo root, on the GPU machine

For each bench workload of days/day24_persistent_threads (10000x32x1, 10000x1024x1, 20000x1024x2)
it checks v2 and v3/v4/v5 at grids of SMs x {1, 2, 4, 8} blocks (8 = what the driver launches:
common.gpu.blocks_per_sm for 256 threads) against the float64 reference once, then prints the
median time of each (common.timing.time_fn: CUDA events, L2 flushed before each run). v1 is
left out (it is the launch loop, the grid does not apply). About 20 s of GPU time; the wall
time is mostly the numpy reference of the two large workloads.
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import harness as H  # noqa: E402
from common.check import compare  # noqa: E402
from common.gpu import device_info  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day24_persistent_threads import driver  # noqa: E402


def main() -> int:
    sms = device_info()["sms"]
    per_sm = (1, 2, 4, 8)
    print(f"{device_info()['name']}: {sms} SMs; driver grid for v4 = {driver.persistent_grid('v4')}")
    rows, bad = [], 0
    for size in driver.BENCH_SIZES:
        case = driver.make_case(size, np.random.default_rng(24))
        want = case.expected()["y"]
        d = H.DeviceCase(case)
        cands = [("v2", None)] + [(v, sms * k) for v in ("v3", "v4", "v5") for k in per_sm]
        for v, g in cands:
            d.poison_outputs()
            driver.launch(v, d, grid=g)
            r = compare(d.outputs()["y"], want)
            ms = time_fn(lambda: driver.launch(v, d, grid=g)).median_ms if r.ok else float("nan")
            bad += not r.ok
            rows.append((H.size_str(size), v, "-" if g is None else f"{g} ({g // sms}/SM)", ms,
                         "ok" if r.ok else "FAIL " + r.message))
        d = None
    print(f"{'size':>14} {'version':>7} {'grid':>12} {'median ms':>10}  ok")
    for s, v, g, ms, ok in rows:
        print(f"{s:>14} {v:>7} {g:>12} {ms:10.4f}  {ok}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
