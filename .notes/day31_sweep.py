"""Day 31 sweep (run on the GPU machine from the repo root: python .notes/day31_sweep.py).

The choice that matters is the v5/v6 tile for each of the day's three 3x3 stride-1 layers
(kernel.cu's BOTH lines, driver.TILES): outputs a thread (TM x TN), threads (BX x BY x BZ),
input channels a chunk (CB). Every candidate of a layer's kind (m1* for MNIST conv1, m2* for
MNIST conv2, r* for the ResNet layer) and the general tile "gen", as v5 and v6, is checked
once against the float64 reference at a ragged size and at the layer itself, then timed
(median of common.timing.time_fn, L2 flushed before each call) at the layer, beside cuDNN
(torch fp32, TF32 off; default algorithm and cudnn.benchmark) and v4. Prints registers and
resident blocks an SM of each kernel. About a minute (the ResNet reference is ~2 s).

Then: the fastest correct candidate per kind becomes driver.PICK[kind] (and BEST the version).
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day31_conv2d_tiled import driver as D  # noqa: E402

LAYERS = [("m1", D.MNIST1, (2, 1, 27, 30, 5, 3, 1, 1)),
          ("m2", D.MNIST2, (3, 7, 13, 15, 11, 3, 1, 1)),
          ("r", D.RESNET, (1, 19, 58, 57, 70, 3, 1, 1))]


def candidates(kind):
    return [t for t in D.TILES if t.startswith(kind)] + ["gen"]


def fn_info(version, tile, size):
    from common.gpu import blocks_per_sm

    g = D.geometry(tile, size[5], size[6])
    stages = 2 if version == "v6" and size[1] > g["cb"] else 1
    smem = 4 * g["stage_floats"] * stages
    fn = D.KER(f"conv2d_{version}_r{size[5]}s{size[6]}_{tile}", "PPPPiiiiiii", dynamic_smem=smem)
    return fn.num_regs, blocks_per_sm(fn, g["threads"], smem), smem


def main():
    bad = []
    for kind, size, ragged in LAYERS:
        for s in (ragged, size):
            case = D.make_case(s, np.random.default_rng(31))
            d = H.DeviceCase(case)
            for tile in candidates(kind):
                for v in ("v5", "v6"):
                    r = H.check(lambda vv, dd: D.launch_direct(vv, dd, tile), v, case, d)
                    if not r.ok:
                        bad.append(f"{v} {tile} at {H.size_str(s)}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad), flush=True)

    for kind, size, _ in LAYERS:
        case = D.make_case(size, np.random.default_rng(32))
        d = H.DeviceCase(case)
        flops = 2 * np.prod(case.outputs["y"][0], dtype=np.int64) * size[1] * size[5] ** 2
        print(f"\n{H.size_str(size)} (picked now: {D.PICK[kind]})", flush=True)
        print(f"   {'kernel':24s} {'us':>8s} {'TFLOP/s':>8s} {'regs':>5s} {'blk/SM':>6s} "
              f"{'smem KB':>7s} {'blocks':>7s}")
        rows = []
        for tile in candidates(kind):
            g = D.geometry(tile, size[5], size[6])
            n, c, h, w, k, r, s, p = size
            ho, wo = D.out_hw(size)
            blocks = H.cdiv(ho, g["th"]) * H.cdiv(wo, g["tw"]) * H.cdiv(k, g["tk"]) * n
            for v in ("v5", "v6"):
                t = time_fn(lambda: D.launch_direct(v, d, tile))
                regs, bps, smem = fn_info(v, tile, size)
                rows.append((t.median_ms, f"{v} {tile}"))
                print(f"   {v + ' ' + tile:24s} {t.median_ms * 1e3:8.1f} "
                      f"{flops / (t.median_ms * 1e-3) / 1e12:8.1f} {regs:5d} {bps:6d} "
                      f"{smem / 1024:7.1f} {blocks:7d}", flush=True)
        t = time_fn(lambda: D.launch("v4", d))
        print(f"   {'v4':24s} {t.median_ms * 1e3:8.1f} {flops / (t.median_ms * 1e-3) / 1e12:8.1f}")
        for name, fn in D.baselines(d).items():
            t = time_fn(fn)
            print(f"   {name:24s} {t.median_ms * 1e3:8.1f} "
                  f"{flops / (t.median_ms * 1e-3) / 1e12:8.1f}")
        best = min(rows)
        print(f"   fastest: {best[1]} ({best[0] * 1e3:.1f} us)")


if __name__ == "__main__":
    main()
