"""Day 51 sweep: how many chunks (and streams) the pipelined versions should use.

    python .notes/day51_sweep.py          (on the GPU machine, from the repository root)

Every candidate is checked once against the reference at a ragged size, then timed (median of
10, common.timing.time_fn) at the day's bench sizes. Also printed per size: each engine alone
(pinned copy in, kernel, pinned copy out), the hidden share of the copy time of each candidate,
and reference.ideal_pipeline for its chunk count (the best any schedule with that many chunks
can do). The winner of each version goes into driver.PLAN. About 30-40 s of GPU time.
"""
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day51_streams_overlap import driver as D  # noqa: E402
from days.day51_streams_overlap import reference as R  # noqa: E402

CANDIDATES = ([("v2", None, None)]
              + [("v3", c, 2) for c in (4, 8, 16, 32)]
              + [("v4", c, s) for c in (8, 16, 32, 64) for s in (3, 4, 8)]
              + [("v5", c, None) for c in (4, 8, 16, 32, 64)]
              + [("v6", None, None)])
CHECK = (1000003, 32)


def name(v, c, s):
    return v + (f" chunks={c}" if c else "") + (f" streams={s}" if s else "")


def main():
    t0 = time.time()
    case = D.make_case(CHECK, np.random.default_rng(1))
    d = H.DeviceCase(case)
    bad = []
    for v, c, s in CANDIDATES:
        case.params.update(chunks=c, streams=s)
        r = H.check(D.launch, v, case, d)
        if not r.ok:
            bad.append(name(v, c, s))
            print(f"FAIL {name(v, c, s)} at {H.size_str(CHECK)}: {r.message}")
    print(f"checked {len(CANDIDATES)} candidates at {H.size_str(CHECK)}: "
          f"{'all ok' if not bad else str(len(bad)) + ' wrong'}")
    for size in D.BENCH_SIZES:
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        alone = D.engines_alone(d, case.params["host"], repeats=5)
        t_in, t_k, t_out = alone["copy in, pinned"], alone["kernel alone"], alone["copy out, pinned"]
        t_copy = t_in + t_out
        print(f"\n{H.size_str(size)}: " + ", ".join(f"{k} {ms:.3f} ms" for k, ms in alone.items()))
        rows = []
        for v, c, s in CANDIDATES:
            if name(v, c, s) in bad:
                continue
            case.params.update(chunks=c, streams=s)
            ms = time_fn(lambda: D.launch(v, d), warmup=1, repeats=10).median_ms
            n_chunks = len(D.chunks_of(v, size[0], case.params)) if v in D.PLAN else 1
            ideal = R.ideal_pipeline(t_in, t_k, t_out, n_chunks) if v != "v6" else None
            rows.append([name(v, c, s), n_chunks, f"{ms:.3f}",
                         f"{100 * R.hidden_fraction(t_copy, t_k, ms):.1f}%",
                         f"{ideal:.3f}" if ideal else "-"])
        print(table(rows, ["candidate", "chunks run", "median ms", "hidden", "ideal ms"]))
    print(f"\n{time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
