"""Day 33 sweep (run on the GPU machine from the repo root: python .notes/day33_sweep.py).

Candidates: the v3/v4 code with U = 1, 2 or 4 groups of 4 elements per thread, accurate
(f0: sincospif) or fast (f1: __sincosf) sine and cosine, at 128 or 256 threads a block
(kernel.cu built with -DDAY33_SWEEP: ddpm_{noise,step}_cand_u<U>_f<F>). Each op alone (the
noising op, 1 read : 2 written; the step, 2 read : 1 written) at the bench sizes; each candidate
checked against the float64 reference at the first size, then timed (common.timing.time_fn,
L2 flushed). Prints median us and % of the op's own-mix ceiling. Under a minute.

What to do with the numbers: the best (U, F, threads) of the accurate candidates (f0) sets
V3_U / THREADS for v3 in driver.py (and DAY33_V3_U in kernel.cu), the best fast one (f1) V4_U.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.runner import case_ceilings  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day33_ddpm_kernel import driver as D  # noqa: E402

KS = H.Kernels(D.__file__, options=["-DDAY33_SWEEP"])
CANDS = [(u, f, t) for f in (0, 1) for u in (1, 2, 4) for t in (128, 256)]
SIZES = [(64, 196608), (1, 1 << 25), (3, 5000001)]


def launcher(op, u, f, threads):
    def go(_, d):
        b, n = d.size
        tot = b * n
        k0, k1 = d.params["key"]
        s0, s1 = d.params["sub_noise" if op == "noise" else "sub_step"]
        grid = (max(1, H.cdiv(H.cdiv(tot, 4), threads * u)), 1, 1)
        fn = KS(f"ddpm_{op}_cand_u{u}_f{f}", "PPPPiiIIII")
        if op == "noise":
            fn.prepared_call(grid, (threads, 1, 1), d.x0, d.coef_noise, d.xt, d.eps, tot, n,
                             k0, k1, s0, s1)
        else:
            fn.prepared_call(grid, (threads, 1, 1), d.xt_in, d.eps_theta, d.coef_step, d.x_prev,
                             tot, n, k0, k1, s0, s1)
    return go


def main():
    bad = []
    for op in ("noise", "step"):
        print(f"\n{op} alone: median us (% of the {op}'s own-mix ceiling)")
        print(f"{'size':>12} " + " ".join(f"{f'u{u} f{f} t{t}':>16}" for u, f, t in CANDS)
              + f" {'v2':>16} {'v3':>16} {'v4':>16}")
        for i, size in enumerate(SIZES):
            case = D.make_case(size, np.random.default_rng(3), ops=(op,))
            d = H.DeviceCase(case)
            pct = 100 * case.bytes / 1e6 / case_ceilings(case)["gbps"]   # / ms -> % of the ceiling
            cells = []
            for u, f, t in CANDS:
                go = launcher(op, u, f, t)
                if i == 0:
                    r = H.check(go, "cand", case, d)
                    if not r.ok:
                        bad.append(f"{op} u{u} f{f} t{t}: {r.message}")
                ms = time_fn(lambda: go(None, d)).median_ms
                cells.append(f"{ms * 1e3:8.1f} ({pct / ms:4.1f})")
            for v in ("v2", "v3", "v4"):
                lf = D.launch_noise if op == "noise" else D.launch_step
                ms = time_fn(lambda: lf(v, d)).median_ms
                cells.append(f"{ms * 1e3:8.1f} ({pct / ms:4.1f})")
            print(f"{H.size_str(size):>12} " + " ".join(f"{c:>16}" for c in cells))
    print("\nchecks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))


if __name__ == "__main__":
    main()
