"""Day 34 sweep (run on the GPU machine from the repo root: python .notes/day34_sweep.py).

Candidates, each checked against the float64 reference at both bench sizes (v5/v6 take the
scalar-store path at the awkward size and the 16-byte one at the headline size) and timed
(common.timing.time_fn, L2 flushed) at the bench sizes:
  v3, v4            the previous best, as built (two kernels; one cluster kernel, byte gathers)
  v5                source rows staged in shared memory (bulk copies), ring halves sized for
                    two 512-thread blocks an SM (~18 KB a half at the bench sizes)
  v5 h8k            the same with ring halves of at most 8 KB (more, smaller chunks)
  v5 1/SM           one 512-thread block an SM, ring halves up to the opt-in limit (~75 KB)
  v5 1/SM t1024     one 1024-thread block an SM, the same ring (aug_v5_t1024, -DDAY34_SWEEP)
  v5 cp.async       v5 staging with per-lane 16-byte cp.async instead of bulk copies
                    (aug_v5_cpasync; also the fallback if the bulk path misbehaves)
  v6                v5 + the column walk for crops of fewer than 1.5 OH rows
  v6 1/SM t1024     v6 as one 1024-thread block an SM (aug_v6_t1024)
Prints median us and % of the ceiling of the case's mix. Under a minute (most of it the numpy
reference: ~3 s at the awkward size, ~10-15 s at the headline size).

What to do with the numbers: the fastest correct one becomes BEST in driver.py. If a variant
of v5/v6 wins: "h8k" -> V5_HALF_MAX = 8192; "1/SM" -> V5_TWO_A_SM = False; "t1024" -> also
V5_T = 1024 and AUG_STAGED(aug_v5 / aug_v6, 8, 1024, ...) in kernel.cu (the knobs apply to
both v5 and v6); "cp.async" -> DAY34_STAGE_BULK false in kernel.cu.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.runner import case_ceilings  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day34_image_augmentation import driver as D  # noqa: E402


KS = H.Kernels(D.__file__, options=["-DDAY34_SWEEP"])


def with_knobs(version, kernel=None, threads=None, **knobs):
    """launch(version) with driver knobs set; or a -DDAY34_SWEEP kernel through launch_v5."""
    def go(_, d):
        old = {k: getattr(D, k) for k in knobs}
        old_k = D.K
        for k, v in knobs.items():
            setattr(D, k, v)
        try:
            if kernel is None:
                D.launch(version, d)
            else:
                D.K = KS
                D.launch_v5(d, kernel, D.V5_K, threads)
        finally:
            D.K = old_k
            for k, v in old.items():
                setattr(D, k, v)
    return go


CANDIDATES = {
    "v3": with_knobs("v3"),
    "v4": with_knobs("v4"),
    "v5": with_knobs("v5"),
    "v5 h8k": with_knobs("v5", V5_HALF_MAX=8192),
    "v5 1/SM": with_knobs("v5", V5_TWO_A_SM=False),
    "v5 1/SM t1024": with_knobs("v5", "aug_v5_t1024", 1024, V5_TWO_A_SM=False),
    "v5 cp.async": with_knobs("v5", "aug_v5_cpasync", 512),
    "v6": with_knobs("v6"),
    "v6 1/SM t1024": with_knobs("v6", "aug_v6_t1024", 1024, V5_TWO_A_SM=False),
}


def main():
    bad = []
    print("median us (% of the ceiling)")
    print(f"{'size':>22} " + " ".join(f"{h:>14}" for h in CANDIDATES))
    for size in D.BENCH_SIZES:
        case = D.make_case(size, np.random.default_rng(5))
        d = H.DeviceCase(case)
        pct = 100 * case.bytes / 1e6 / case_ceilings(case)["gbps"]     # / ms -> % of the ceiling
        cells = []
        for name, go in CANDIDATES.items():
            r = H.check(go, name, case, d)
            if not r.ok:
                bad.append(f"{name} at {H.size_str(size)}: {r.message}")
            ms = time_fn(lambda: go(None, d)).median_ms
            cells.append(f"{ms * 1e3:6.1f} ({pct / ms:4.1f})")
        print(f"{H.size_str(size):>22} " + " ".join(f"{c:>14}" for c in cells), flush=True)
    print("\nchecks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))


if __name__ == "__main__":
    main()
