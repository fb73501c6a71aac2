"""Day 54 sweep: every instantiated cluster kernel (v4: cluster size x threads x float4 a
thread; v5: cluster size x threads x stages) against v1-v5 as the driver picks them and day 5's
best, at the bench sizes.

    python .notes/day54_sweep.py            (GPU; about 30-60 s, most of it numpy references)

Each candidate is checked once against the float64 reference, then timed with
common.timing.time_fn (L2 flushed before each repeat). Prints microseconds and % of the copy
ceiling; '(re-read)' marks a kernel whose blocks cannot hold their share of the row in
registers (the rest of the slice is read twice). What to decide from it: V4_KERNELS in
driver.py (which cluster size v4 takes for a width), and whether 512-thread blocks beat
256-thread ones at the same bytes a block; for v5 (rows 'v5 c8 256 s2'): V5_KERNELS /
V5_STAGE_TARGET (which cluster, threads and stages v5 takes for a width; the notes give the
stage size, the blocks an SM and clusters at once with that shared memory, and rows a cluster).
"""
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import harness as H  # noqa: E402
from common.check import compare  # noqa: E402
from common.gpu import device_info, driver as cuda  # noqa: E402
from common.timing import stream_ceiling, time_fn  # noqa: E402
from days.day54_cooperative_groups import driver as D  # noqa: E402

SIZES = [(256, 65536), (64, 262144), (1024, 131072), (96, 100003), (1024, 65536)]
V4_SIZES = SIZES[:4]  # v4's candidates were measured at (1024, 65536) nowhere: v5's only there


def main():
    t0 = time.perf_counter()
    info = device_info()
    copy = stream_ceiling((1, 1))
    print(f"{info['name']}, {info['sms']} SMs; copy ceiling {copy.gbps:.0f} GB/s ({copy.source})")
    kernels = sorted(set(D.V4_ALL))
    for size in SIZES:
        rows, cols = size
        case = D.make_case(size, np.random.default_rng(54))
        ref = case.expected()["y"]
        d = H.DeviceCase(case)
        cands = [(f"{v} ({D.kernel_for(v, cols)[0] if v != 'v2' else 'grid'})",
                  lambda v=v: D.launch(v, d), "") for v in D.VERSIONS]
        cands.append((D.DAY5_ROW, lambda: D.DAY5.launch(D.DAY5.BEST, d), ""))
        for c, t, i in kernels if size in V4_SIZES else []:
            if c == 1 and i < 8:
                continue
            name = D.kernel_name("v4", c, t, i)
            fits = H.cdiv(cols // 4, c) <= t * i
            fn = D.module().function(name, "PPiiP")
            extra = (f"{fn.num_regs} regs, {fn.max_blocks_per_sm(t)} blocks/SM, "
                     f"{fn.max_active_clusters((rows * c,), (t,), (c, 1, 1))} clusters at once"
                     + ("" if fits else " (re-read)"))
            cands.append((f"c{c:<2} {t}x{i}",
                          lambda name=name, c=c, t=t: D.launch_kernel(name, c, t, d), extra))
        for c, t, st in sorted(set(D.V5_ALL)):
            smem = D.v5_smem(c, st, cols)
            if smem > D.SMEM_MAX:
                continue
            name = D.v5_name(c, t, st)
            fn = D.module().function(name, "PPiiP")
            fn.opt_in_smem(smem)
            at_once = D.v5_max_clusters(name, c, t, smem)
            g = min(rows, at_once)
            extra = (f"{fn.num_regs} regs, {st} x {smem // st / 1024:.0f} KB, "
                     f"{fn.max_blocks_per_sm(t, smem)} blocks/SM, {at_once} clusters at once, "
                     f"{H.cdiv(rows, g) if g else 0} rows a cluster")
            cands.append((f"v5 c{c:<2} {t} s{st}",
                          lambda name=name, c=c, t=t, smem=smem: D.launch_v5(name, c, t, smem, d),
                          extra))
        print(f"\n{H.size_str(size)}: {2 * rows * cols * 4 / 2 ** 20:.0f} MiB moved")
        print(f"  {'candidate':<34} {'us':>9} {'% copy':>7}  notes")
        for label, run, extra in cands:
            d.poison_outputs()
            run()
            cuda().Context.synchronize()
            r = compare(d.outputs()["y"], ref)
            if not r.ok:
                print(f"  {label:<34} WRONG: {r.message}")
                continue
            t = time_fn(run)
            gbps = case.bytes / (t.median_ms * 1e-3) / 1e9
            print(f"  {label:<34} {1e3 * t.median_ms:9.1f} {100 * gbps / copy.gbps:7.1f}  {extra}")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
