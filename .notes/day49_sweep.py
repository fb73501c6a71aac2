"""Day 49 sweep, round 2: v5 (v4's fused epilogue on the ping-pong GEMM, wgmma_gemm.cuh
run_pingpong) against v1, the current best (v4) and torch / cuBLAS, each layer on its own at
the bench sizes. Each fused kernel is checked once against the reference (its own output),
then timed (median, L2 flushed):
  fc1: v1 (GEMM + bias_gelu), v4, v5 (128 x 128 tiles, 6 stages, 2 staging boxes a
       warpgroup), v5_b4 (5 stages, 4 boxes), v5_64 (64 x 256 tiles), v5_c2 (clusters of two,
       B multicast), v5_direct (v2's register stores instead of TMA), gemm_v5 (the same
       ping-pong kernel with no bias/GELU: what the epilogue costs, not checked here; the
       tests check it);
  fc2: v1, v4 (its tile rule), v5, v5_64, v5_c2, gemm_v5;
  beside torch eager and cuBLAS's GEMM alone for the same layer.
Decide from it: BEST (v5 vs v4 per layer), v5's tile (128 x 128 vs 64 x 256), stages vs staging
boxes, clusters, and whether the TMA store still pays once the epilogue is hidden.
    python .notes/day49_sweep.py            (about a minute and a half on an H200)
A v5 deadlock cannot hang this: the kernel's watchdog faults after ~9 s (then every later call
fails with "an illegal memory access"); run tests/days/test_day49.py first."""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import harness as H  # noqa: E402
from common import gpu  # noqa: E402
from common.baselines import as_torch, torch_or_none  # noqa: E402
from common.check import compare  # noqa: E402
from common.gpu import driver as cuda  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day49_gemm_epilogue_fusion import driver as drv, reference  # noqa: E402

FC1 = ["gemm_v1", "fc1_v4", "fc1_v5", "fc1_v5_b4", "fc1_v5_64", "fc1_v5_c2", "fc1_v5_direct",
       "gemm_v5"]
FC2 = ["gemm_v1", "v4", "fc2_v5", "fc2_v5_64", "fc2_v5_c2", "gemm_v5"]
UNCHECKED = {"gemm_v5"}        # the GEMM alone: its output is not h or y
sms = gpu.sm_count()
torch = torch_or_none()
rows = []
for size in drv.BENCH_SIZES:
    t, c = size
    case = drv.make_case(size, np.random.default_rng(0))
    ref = case.expected()
    d = H.DeviceCase(case)
    flops1 = case.flops // 2
    for layer, cands in ((1, FC1), (2, FC2)):
        out = "h" if layer == 1 else "y"
        for kernel in cands:
            if kernel == "v4":
                kernel = drv.kernels_of("v4", size, sms)[1]
            d.poison_outputs()
            drv.run_layer(d, 1, "fc1_v3", sms)            # fc2 reads a correct h
            drv.run_layer(d, layer, kernel, sms)
            cuda().Context.synchronize()
            if kernel in UNCHECKED:
                check = "-"
            else:
                check = "ok" if compare(d.outputs()[out], ref[out], reference.TOL, out).ok else "FAIL"
            ms = time_fn(lambda: drv.run_layer(d, layer, kernel, sms)).median_ms
            rows.append([H.size_str(size), f"fc{layer}", kernel, check, f"{ms:.4f}",
                         f"{flops1 / ms / 1e9:.0f}"])
            print(rows[-1], flush=True)
        drv.run_layer(d, 1, "fc1_v3", sms)                # h as fc2's baselines expect it
        cuda().Context.synchronize()
        if torch is not None:
            import torch.nn.functional as F

            v = {k: as_torch(d.array(k)).view(torch.bfloat16) for k in case.inputs}
            hv = as_torch(d.array("h")).view(torch.bfloat16)
            ops = ({"torch eager": lambda: F.gelu(F.linear(v["x"], v["w1"], v["b1"]), approximate="tanh"),
                    "cuBLAS GEMM alone": lambda: torch.matmul(v["x"], v["w1"].t())} if layer == 1 else
                   {"torch eager": lambda: F.linear(hv, v["w2"], v["b2"]) + v["r"],
                    "cuBLAS GEMM alone": lambda: torch.matmul(hv, v["w2"].t())})
            for name, fn in ops.items():
                ms = time_fn(fn).median_ms
                rows.append([H.size_str(size), f"fc{layer}", name, "", f"{ms:.4f}",
                             f"{flops1 / ms / 1e9:.0f}"])
                print(rows[-1], flush=True)
    del d
print(table(rows, ["size", "layer", "kernel", "check", "median ms", "TFLOP/s"]))
