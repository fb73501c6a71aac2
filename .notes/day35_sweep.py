"""Day 35 sweep (run on the GPU machine from the repo root: python .notes/day35_sweep.py).

Candidates: every v3/v4 configuration kernel.cu instantiates (driver.CONFIGS + EXTRA_CONFIGS:
W warps a row, ITEMS float4 a thread, threads a block, column sums in shared memory "s" or
registers "r") whose registers hold the row, at each benchmark width; v4 for all of them, v3 for
the driver's default (the cost of the second launch), v2, and torch's aten op. Each candidate is
checked once against the float64 reference at (999, C) and (3, C), then timed (median of
common.timing.time_fn, L2 flushed) at the benchmark sizes, next to a stream kernel moving the
same bytes (2 reads : 1 write). Under a minute.

Then: make the fastest configuration of each width the default (driver.CONFIGS order: the
first whose capacity holds C // 4 float4 is taken), and note the table in .notes/day35_gpu.md.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.gpu import blocks_per_sm, device_info  # noqa: E402
from common.timing import stream_ceiling, time_fn  # noqa: E402
from days.day35_fused_layernorm_backward import driver as D  # noqa: E402

SIZES = D.BENCH_SIZES + [(8192, 1024), (16384, 768)]


def candidates(c):
    out = [("v2", None)]
    default = D.config_for(c)
    if default is not None:
        out.append(("v3", default))
    for cfg in D.CONFIGS + D.EXTRA_CONFIGS:
        smem = 4 * D.smem_floats(cfg, c)
        if 32 * cfg[0] * cfg[1] >= c // 4 and smem <= device_info()["smem_per_block_optin"]:
            out.append(("v4", cfg))
    return out


def name(v, cfg, c):
    if cfg is None:
        return v
    w, i, b, acc = cfg
    return f"{v} w{w} i{i} b{b} {acc}" + (" *" if cfg == D.config_for(c) else "")


def main():
    print(device_info()["name"], f"{device_info()['sms']} SMs")
    bad = []
    for c in sorted({s[1] for s in SIZES}):
        for n in (999, 3):
            case = D.make_case((n, c), np.random.default_rng(n + c))
            d = H.DeviceCase(case)
            for v, cfg in candidates(c):
                r = H.check(lambda vv, dd: D.launch(vv, dd, cfg=cfg), v, case, d)
                if not r.ok:
                    bad.append(f"{v} {cfg} at {n}x{c}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))
    for size in SIZES:
        n, c = size
        case = D.make_case(size, np.random.default_rng(2), stress=False)
        d = H.DeviceCase(case)
        same = stream_ceiling((2, 1), case.bytes)
        full = stream_ceiling((2, 1))
        print(f"\n{H.size_str(size)}: {case.bytes / 1e6:.1f} MB; stream 2r:1w of the same bytes "
              f"{same.ms * 1e3:.1f} us ({same.gbps:.0f} GB/s), full-size {full.gbps:.0f} GB/s "
              "(* = the driver's default config)")
        rows = []
        for v, cfg in candidates(c):
            t = time_fn(lambda: D.launch(v, d, cfg=cfg))
            extra = ""
            if cfg is not None:
                pl = D.plan(v, n, c, cfg)
                extra = (f"regs {pl['fn'].num_regs:3d}, {blocks_per_sm(pl['fn'], pl['threads'], pl['smem'])}"
                         f" blocks/SM, grid {pl['grid']}, smem {pl['smem'] // 1024} KB")
            rows.append((t.median_ms, name(v, cfg, c), extra))
        for tname, fn in D.torch_calls(d).items():
            rows.append((time_fn(fn).median_ms, tname, ""))
        for ms, nm, extra in sorted(rows):
            gbps = case.bytes / (ms * 1e-3) / 1e9
            print(f"   {nm:34s} {ms * 1e3:8.1f} us {gbps:6.0f} GB/s {100 * gbps / full.gbps:5.1f}% "
                  f"({100 * gbps / same.gbps:5.1f}% of same-size)  {extra}")


if __name__ == "__main__":
    main()
