"""Day 49 sweep: every layer kernel on its own at the bench sizes, each checked once against the
reference (its own output), then timed (median, L2 flushed), beside torch eager and cuBLAS's
GEMM alone for the same layer:
  fc1: v1 (GEMM + bias_gelu), v2, v3, v4 (stmatrix), s3b4 (3 stages, 4 staging boxes a
       warpgroup), bn128 (128 x 128 tiles);
  fc2: v1 (GEMM + bias_residual), v2, v3, v4 on 128 x 256 and on 128 x 128 tiles, and day 48's
       stream-K (hybrid, pure, sk1) with v4's epilogue.
Decide from it: which epilogue path wins (v2/v3/v4), v4's fc2 tile rule (driver.fc2_tile), and
whether fc2 should go stream-K.      python .notes/day49_sweep.py      (about a minute)"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import harness as H  # noqa: E402
from common.baselines import as_torch, torch_or_none  # noqa: E402
from common.check import compare  # noqa: E402
from common.gpu import driver as cuda  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day49_gemm_epilogue_fusion import driver as drv, reference  # noqa: E402

FC1 = ["gemm_v1", "fc1_v2", "fc1_v3", "fc1_v4", "fc1_s3b4", "fc1_bn128"]
FC2 = [("gemm_v1", {}), ("fc2_v2", {}), ("fc2_v3", {}), ("fc2_v4_bn256", {}),
       ("fc2_v4_bn128", {}), ("fc2_sk", {"mode": "hybrid"}), ("fc2_sk", {"mode": "pure"}),
       ("fc2_sk", {"mode": "sk1"})]
sms = drv._sms()
torch = torch_or_none()
rows = []
for size in drv.BENCH_SIZES:
    t, c = size
    case = drv.make_case(size, np.random.default_rng(0))
    ref = case.expected()
    d = H.DeviceCase(case)
    flops1 = case.flops // 2
    for layer, cands in ((1, [(k, {}) for k in FC1]), (2, FC2)):
        out = "h" if layer == 1 else "y"
        for kernel, kw in cands:
            d.poison_outputs()
            drv.run_layer(d, 1, "fc1_v3", sms)            # fc2 reads a correct h
            drv.run_layer(d, layer, kernel, sms, **kw)
            cuda().Context.synchronize()
            ok = compare(d.outputs()[out], ref[out], reference.TOL, out).ok
            ms = time_fn(lambda: drv.run_layer(d, layer, kernel, sms, **kw)).median_ms
            label = kernel + "".join(f" {v}" for v in kw.values())
            rows.append([H.size_str(size), f"fc{layer}", label, "ok" if ok else "FAIL",
                         f"{ms:.4f}", f"{flops1 / ms / 1e9:.0f}"])
            print(rows[-1], flush=True)
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
