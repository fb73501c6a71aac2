"""Day 45 first-light debugging: one launch of a version on a small case, every error shown."""
import sys
import numpy as np
from common import harness as H
from common.gpu import driver
from days.day45_wgmma_gemm import driver as drv

drv.K = H.Kernels(drv.__file__, sm90a=True, options=["-DDAY45_DEBUG"])
v = sys.argv[1] if len(sys.argv) > 1 else "v1"
size = tuple(int(x) for x in (sys.argv[2] if len(sys.argv) > 2 else "64x64x128").split("x"))
case = drv.make_case(size, np.random.default_rng(0))
d = H.DeviceCase(case)
d.poison_outputs()
print("params: M K N", size, "c ptr", hex(int(d.c)))
drv.launch(v, d)
driver().Context.synchronize()
from common.gpu import flush_printf
flush_printf()
out = d.outputs()["c"]
ref = case.expected()["c"]
print("out[0,:6]", out[0, :6])
print("ref[0,:6]", ref[0, :6])
print("nan count", np.isnan(out).sum(), "of", out.size)
ok = np.isfinite(out)
if ok.any():
    print("rel err on written", np.linalg.norm((out - ref)[ok]) / np.linalg.norm(ref[ok]))
