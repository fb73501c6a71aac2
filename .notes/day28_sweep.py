#!/usr/bin/env python3
"""Day 28: v4's and v5's split of the output GEMM over K (1, 2, 3, 4 slices; v5 = v4 with day
25's GEMM tile), checked against float64 once per bench size, then timed beside v2, v3 and
torch's nn.MultiheadAttention. Run on the GPU machine from the repo root:

    python .notes/day28_sweep.py            # both bench sizes (under a minute of GPU time)

The candidates need no rebuild: v4's slice count is a launch parameter (blockIdx.z). The table
shows, per size, the whole layer's median time for each candidate and the output GEMM stage
alone, and which S driver.out_splits picks (its wave arithmetic). If the measured best S differs
from the pick at a size, change driver.out_splits (or MAX_SPLITS); if S = 1 wins everywhere,
the atomics cost more than the wave tail and v4/v5 should not be BEST: then the candidate
"v3 + day 25 tile" (kernel.cu's mha_cand_fast_qkv / mha_cand_fast_out: v3's epilogues on
sgemm::Fast, no split) is the one to promote to a version if it beats v5.

Exit 1 if any candidate gets a wrong answer.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day28_multi_head_attention import driver as D  # noqa: E402

SPLITS = (1, 2, 3, 4)


class Renamed:
    """D.K with some kernel names swapped: v3's launch code running the candidate kernels
    (same signatures)."""

    def __init__(self, names):
        self.names = names

    def __call__(self, name, signature=None, dynamic_smem=0):
        return D.K(self.names.get(name, name), signature, dynamic_smem)


# v3's shape (no split, no atomics, no b_o pre-fill) with day 25's tile in both GEMMs
FAST_V3 = Renamed({"mha_v3_qkv": "mha_cand_fast_qkv", "mha_v2_out": "mha_cand_fast_out"})


def main() -> int:
    bad = 0
    for size in D.BENCH_SIZES:
        t0 = time.perf_counter()
        case = D.make_case(size, np.random.default_rng(2828))
        case.expected()
        d = H.DeviceCase(case)
        b, n, c, h = size
        rows = []
        for v in ("v2", "v3"):
            r = H.check(D.launch, v, case, d)
            ms = time_fn(lambda v=v: D.launch(v, d)).median_ms
            rows.append([v, "-", f"{ms:.4f}", "-", "ok" if r.ok else f"FAIL {r.message}"])
            bad += not r.ok
        st = D.stages("v3", d, kern=FAST_V3)
        r = H.check(lambda _, dd, st=st: [fn() for _, fn in st], "v3", case, d)
        whole = time_fn(lambda st=st: [fn() for _, fn in st]).median_ms
        out = time_fn(st[-1][1]).median_ms
        rows.append(["v3 + day 25 tile (cand_fast)", st[-1][0], f"{whole:.4f}", f"{out:.4f}",
                     "ok" if r.ok else f"FAIL {r.message}"])
        bad += not r.ok
        picks = {}
        for v in ("v4", "v5"):
            pick = picks[v] = D.out_splits(b * n, c, D.gemm_slots(v))
            for s in SPLITS:
                st = D.stages(v, d, splits=s)
                r = H.check(lambda _, dd, st=st: [fn() for _, fn in st], v, case, d)
                whole = time_fn(lambda st=st: [fn() for _, fn in st]).median_ms
                out = time_fn(st[-1][1]).median_ms
                rows.append([f"{v} S={s}" + (" (pick)" if s == pick else ""), st[-1][0],
                             f"{whole:.4f}", f"{out:.4f}", "ok" if r.ok else f"FAIL {r.message}"])
                bad += not r.ok
        torch_ms = "-"
        try:
            fn = D.baselines(d).get(D.MHA_EVAL)
            if fn:
                torch_ms = f"{time_fn(fn).median_ms:.4f}"
        except Exception as e:  # no torch: the sweep still ranks the candidates
            torch_ms = f"not timed ({type(e).__name__})"
        print(f"\n{H.size_str(size)}: out_splits picks {picks} (slots v4 {D.gemm_slots('v4')}, "
              f"v5 {D.gemm_slots('v5')}); "
              f"torch nn.MultiheadAttention {torch_ms} ms ({time.perf_counter() - t0:.1f} s)")
        print(table(rows, ["candidate", "output stage", "layer ms", "output GEMM ms", "ok"]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
