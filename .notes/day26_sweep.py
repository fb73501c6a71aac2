"""Day 26 tile sweep (run on the GPU machine from the repository root):

    .venv/bin/python .notes/day26_sweep.py

Builds kernel.cu with -DDAY26_SWEEP (the flash_cand_* entry points: v4's code, cp.async double
buffer + exp2, with other tiles), checks every candidate once against the float64 reference at a
ragged size (2x1000xDxM, both masks), then prints the median time (common.timing.time_fn,
L2 flushed) of every candidate, of v2/v3/v4 and of torch SDPA (fp32, allow_tf32 off) at the
bench sizes, B*H = 32, N = 4096. The fastest correct candidate per head dim becomes Tile<D> in
common/cuda/flash_attention.cuh (and TILES["v4"] in driver.py).
"""
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.check import compare_all  # noqa: E402
from common.gpu import driver as cuda_driver  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day26_flash_attention_forward import driver as drv  # noqa: E402

KS = H.Kernels(str(ROOT / "days/day26_flash_attention_forward/driver.py"), options=["-DDAY26_SWEEP"])
# (BLOCK_M, BLOCK_N, TM, TN) per head dim, as instantiated by CAND(...) in kernel.cu
CANDS = {64: [(64, 64, 4, 8), (64, 32, 4, 4), (32, 64, 2, 8), (128, 64, 8, 4)],
         128: [(64, 32, 4, 4), (64, 64, 4, 8), (32, 64, 2, 8), (128, 32, 4, 4)]}
BENCH = [(32, 4096, 64, 1), (32, 4096, 64, 2), (32, 4096, 128, 1), (32, 4096, 128, 2)]  # mask 1 full, 2 causal


def cand_name(d, tile, causal):
    bm, bn, tm, tn = tile
    return f"flash_cand_bm{bm}n{bn}t{tm}x{tn}_d{d}_c{causal}"


def run_cand(dc, tile, name):
    bh, n, d, _ = dc.size
    drv.launch_flash(name, tile, dc.q, dc.k, dc.v, dc.o, dc.lse, 1, bh, n,
                     drv.contiguous_strides(bh, n, d), dc.params["scale"], kern=KS)


def main():
    t0 = time.time()
    cuda = cuda_driver()
    print("building kernel.cu with -DDAY26_SWEEP ...", flush=True)
    KS.module  # noqa: B018  (compile once, outside the timings)
    print(f"  built in {time.time() - t0:.0f} s")
    ok = {}
    for d, tiles in CANDS.items():
        for causal in (0, 1):
            case = drv.make_case((2, 1000, d, causal + 1), np.random.default_rng(2600 + d + causal))
            dc = H.DeviceCase(case)
            for tile in tiles:
                name = cand_name(d, tile, causal)
                dc.poison_outputs()
                run_cand(dc, tile, name)
                cuda.Context.synchronize()
                r = compare_all(dc.outputs(), case.expected(), case.tolerance())
                ok[name] = r.ok
                print(f"check {name:40s} {'ok' if r.ok else 'FAIL ' + r.message} "
                      f"(rel {r.rel_l2:.2e})")
    torch = None
    try:
        from common.baselines import torch_or_none

        torch = torch_or_none()
    except Exception as e:  # noqa: BLE001
        print("no torch:", e)
    for size in BENCH:
        bh, n, d, mask = size
        causal = int(mask == drv.CAUSAL)
        rng = np.random.default_rng(1)
        case = H.Case(
            size, inputs={x: rng.standard_normal((bh, n, d), dtype=np.float32) for x in "qkv"},
            outputs={"o": ((bh, n, d), np.float32), "lse": ((bh, n), np.float32)},
            params={"scale": float(1 / np.sqrt(d))}, flops=drv.reference.flops(bh, n, d, causal))
        dc = H.DeviceCase(case)
        rows = []
        for tile in CANDS[d]:
            name = cand_name(d, tile, causal)
            t = time_fn(lambda: run_cand(dc, tile, name), max_seconds=1.0)
            rows.append((name + ("" if ok.get(name) else "  (WRONG)"), t.median_ms))
        for v in ("v2", "v3", "v4"):
            t = time_fn(lambda: drv.launch(v, dc), max_seconds=1.0)
            rows.append((v, t.median_ms))
        if torch is not None:
            for name, fn in drv.baselines(dc).items():
                t = time_fn(fn, max_seconds=1.0)
                rows.append((name, t.median_ms))
        print(f"\n{H.size_str(size)}  ({case.flops / 1e9:.0f} GFLOP)")
        for name, ms in sorted(rows, key=lambda r: r[1]):
            print(f"  {name:48s} {ms:8.3f} ms  {case.flops / ms / 1e9:6.1f} TFLOP/s")
    print(f"\nsweep took {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
