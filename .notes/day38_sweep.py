"""Day 38 sweep (run on the GPU machine from the repo root: python .notes/day38_sweep.py).

One GPU call, under a minute. It times v5-v8's candidate configurations against v4 (as shipped)
and cupy.sort / cupy.argsort (and torch.sort) at the bench sizes, and prints, launch by launch,
where the time of each version's shipped plan goes at 2^26 keys.

  1. checks: every candidate against numpy once at ragged sizes (keys and pairs, several
     passes, partial last groups, heavy duplicates).
  2. timings: median of common.timing.time_fn (L2 flushed before each repeat) at 2^26 random
     keys (the bar), 2^26 keys of 16 distinct values, and 10,000,019 key-value pairs.
  3. breakdown: the launches of v4, v5, v6, v7 and v8 (as shipped) at 2^26 random keys, each
     timed alone in plan order (mean of 10 runs of the whole plan), with GB/s for the launches
     that move the array (block sort and merges: 8 bytes a key).

Configurations: v5 (block threads, keys a thread, merge threads); v6-v8 (block threads, keys a
thread, merge threads, S[, keys a thread in the merge]); driver.py says what each number does.
The earlier sweep of v4's block sizes is .notes/day38_sweep_results.md (v4 ships its best).
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.gpu import driver  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day38_merge_sort import driver as D  # noqa: E402

KEYS = [("v4", None),
        ("v5", (512, 32, 256)), ("v5", (512, 32, 512)),
        ("v6", (512, 32, 512, 512)), ("v6", (512, 32, 512, 256)), ("v6", (512, 32, 256, 256)),
        ("v7", (512, 32, 256, 512, 32)), ("v7", (512, 32, 256, 256, 32)), ("v7", (512, 32, 512, 512)),
        ("v7", (512, 32, 512, 256)), ("v7", (512, 32, 256, 128)),
        ("v8", (512, 32, 256, 256, 32)), ("v8", (512, 32, 256, 512, 32)), ("v8", (512, 32, 512, 256)),
        ("v8", (512, 32, 256, 128))]
PAIRS = [("v4", None),
         ("v5", (512, 16, 256)), ("v5", (512, 16, 512)),
         ("v6", (512, 16, 512, 512)), ("v6", (512, 16, 256, 256)),
         ("v7", (512, 16, 512, 512)), ("v7", (512, 16, 512, 256)), ("v7", (512, 16, 256, 128)),
         ("v8", (512, 16, 512, 256)), ("v8", (512, 16, 512, 512)), ("v8", (512, 16, 256, 128))]
CHECK = [(1000003, 1, 1), (1000003, 2, 2), (3 * 16384 + 5, 4, 1), (70001, 5, 2), (2 ** 20 + 1, 3, 1)]
SIZES = [(2 ** 26, 1, 1), (2 ** 26, 2, 1), (10_000_019, 1, 2)]
BREAKDOWN = ["v4", "v5", "v6", "v7", "v8"]


def name(v, c):
    return v if c is None else f"{v} {c}"


def run(v, d, c):
    return D.launch(v, d) if c is None else D.launch(v, d, cfg=c)


class Recorder:
    """Stands in for driver.K: hands out the real kernels, and notes every launch."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, kname, signature=None, dynamic_smem=0):
        fn, rec = self.real(kname, signature, dynamic_smem=dynamic_smem), self

        class Noted:
            def prepared_call(self, grid, block, *args, shared_size=0):
                rec.calls.append((kname, grid, block, args, shared_size, fn))
                fn.prepared_call(grid, block, *args, shared_size=shared_size)
        return Noted()


def breakdown(v, size, case, reps=10):
    d = H.DeviceCase(case)
    d.poison_outputs()
    real = D.K
    D.K = rec = Recorder(real)
    try:
        D.launch(v, d)  # compiles, opts in, allocates; the recorder keeps the launches
    finally:
        D.K = real
    cuda = driver()
    cuda.Context.synchronize()
    calls = rec.calls
    ev = [cuda.Event() for _ in range(len(calls) + 1)]
    times = np.zeros(len(calls))
    for _ in range(reps):
        ev[0].record()
        for i, (_, grid, block, args, sh, fn) in enumerate(calls):
            fn.prepared_call(grid, block, *args, shared_size=sh)
            ev[i + 1].record()
        ev[-1].synchronize()
        times += [ev[i + 1].time_since(ev[i]) for i in range(len(calls))]
    times /= reps
    ok = np.array_equal(d.array("keys").get(), case.expected()["keys"])
    n = size[0]
    print(f"\n{name(v, None)} (as shipped) at {H.size_str(size)}, launch by launch "
          f"(mean of {reps}; sorted correctly: {ok})")
    merges = 0.0
    for (kname, grid, block, args, sh, _), ms in zip(calls, times):
        moves = "block" in kname or "merge" in kname
        gb = 8 * n / (ms * 1e-3) / 1e9 if moves else float("nan")
        merges += ms if "merge" in kname else 0.0
        L = ""
        if "merge" in kname:
            L = f"L={int(args[6 if len(args) > 6 else 5])}" if "v1" not in kname else ""
        elif "rank" in kname or "table" in kname or "split" in kname:
            L = f"L={int(args[2])}"
        print(f"   {kname.replace('sort_', ''):30s} {L:12s} grid {grid[0]:7d} x {block[0]:4d}"
              f" {ms * 1e3:9.1f} us   {gb:7.0f} GB/s")
    print(f"   {'total':30s} {'':12s} {'':19s} {times.sum() * 1e3:9.1f} us"
          f"   (merges {merges * 1e3:.1f} us, other {(times.sum() - merges) * 1e3:.1f} us)")


def main():
    t0 = time.time()
    bad = []
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for v, c in (KEYS if size[2] == 1 else PAIRS):
            r = H.check(lambda vv, dd, c=c: run(vv, dd, c), v, case, d)
            if not r.ok:
                bad.append(f"{name(v, c)} at {H.size_str(size)}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad), f"({time.time() - t0:.0f} s)")

    for size in SIZES:
        n, _, words = size
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        print(f"\n{H.size_str(size)}  (ms, median; Gkeys/s; x of the library)")
        rows = [(name(v, c), lambda v=v, c=c: run(v, d, c)) for v, c in (KEYS if words == 1 else PAIRS)]
        libs = list(D.baselines(d).items())
        res = {}
        for nm, fn in libs + rows:
            res[nm] = time_fn(fn, repeats=20, max_seconds=1.0).median_ms
        ref = res.get(D.CUPY_SORT if words == 1 else D.CUPY_ARGSORT)
        for nm, ms in res.items():
            x = f"{ref / ms:5.2f}x" if ref else ""
            print(f"   {nm:30s} {ms:8.3f} ms  {n / ms / 1e6:6.2f} Gkeys/s  {x}")
        if size == SIZES[0]:  # the shipped versions sort the bar's case right
            exp = case.expected()["keys"]
            for v in BREAKDOWN:
                d.poison_outputs()
                D.launch(v, d)
                print(f"   {v} as shipped sorts {H.size_str(size)} right: "
                      f"{np.array_equal(d.array('keys').get(), exp)}")
            bd_case = case
    print(f"\n({time.time() - t0:.0f} s so far)")
    for v in BREAKDOWN:
        breakdown(v, SIZES[0], bd_case)
    print(f"\nsweep took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
