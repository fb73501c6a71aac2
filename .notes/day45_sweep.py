"""Day 45 sweep: group sizes, wgmma groups in flight with clusters, and persistent grids of
128 vs 132 blocks (kernel.cu -DDAY45_SWEEP). Each candidate checked once at 1100x520x600,
then timed at the bench sizes beside cuBLAS.   python .notes/day45_sweep.py"""
import numpy as np

from common import harness as H
from common import hopper_gemm as G
from common.report import table
from common.timing import time_fn
from days.day45_wgmma_gemm import driver as drv

drv.K = H.Kernels(drv.__file__, sm90a=True, options=["-DDAY45_SWEEP"])
base_grid = drv.grid_of
CANDS = [("v5", None), ("v6", None), ("gemm_v6_g4", "v6"), ("gemm_v6_g16", "v6"),
         ("gemm_v6_i1", "v6"), ("gemm_v4_g16", "v4"), ("v5 128 blocks", 128), ("v6 128 blocks", 128)]


def run(name, d):
    if name.startswith("gemm_"):
        like = dict(CANDS)[name]
        m, k, n = d.size
        a_ptr, b_ptr, kk = G.k_major_operands(d, drv.K("pad_k_v0", "PPiii"), np.uint16, align=8)
        amap, bmap = drv._maps(d, like, a_ptr, b_ptr, kk)
        fn = drv.K(name, "PPPiii", dynamic_smem=drv.SMEM[like])
        fn.prepared_call(base_grid(like, m, n), (384, 1, 1), amap, bmap, d.c, m, n, kk,
                         shared_size=drv.SMEM[like])
    elif name.endswith("128 blocks"):
        v = name.split()[0]
        drv.grid_of = lambda ver, m, n: (min(base_grid(ver, m, n)[0], 128), 1, 1)
        try:
            drv.launch(v, d)
        finally:
            drv.grid_of = base_grid
    else:
        drv.launch(name, d)


rows = []
small = drv.make_case((1100, 520, 600), np.random.default_rng(0))
ds = H.DeviceCase(small)
for name, _ in CANDS:
    ok = H.check(lambda v, dd: run(name, dd), name, small, ds).ok
    print(name, "check", "ok" if ok else "FAIL", flush=True)
for size in [(8192, 8192, 8192), (4096, 4096, 4096), (8191, 8191, 8191)]:
    case = drv.make_case(size, np.random.default_rng(1))
    d = H.DeviceCase(case)
    for name, _ in CANDS:
        t = time_fn(lambda: run(name, d))
        rows.append([H.size_str(size), name, f"{t.median_ms:.3f}", f"{case.flops / t.median_ms / 1e9:.0f}"])
    for bname, fn in drv.baselines(d).items():
        t = time_fn(fn)
        rows.append([H.size_str(size), bname, f"{t.median_ms:.3f}", f"{case.flops / t.median_ms / 1e9:.0f}"])
    print(table(rows[-(len(CANDS) + 2):], ["size", "candidate", "ms", "TFLOP/s"]), flush=True)
