"""Why the kernel saw zero parameters: offsets the driver expects, and launches with padding."""
import ctypes
import numpy as np
from common import harness as H
from common.gpu import driver, flush_printf
from common.graphs import libcuda
from days.day45_wgmma_gemm import driver as drv

drv.K = H.Kernels(drv.__file__, sm90a=True, options=["-DDAY45_DEBUG"])
fn = drv.K("gemm_v1")
lib = libcuda()
f = lib.cuFuncGetParamInfo
f.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)]
handle = fn.handle if hasattr(fn, "handle") else None
print("function handle attr:", [a for a in dir(fn) if "handle" in a.lower()])
try:
    h = int(fn.handle)
    for i in range(7):
        off, sz = ctypes.c_size_t(), ctypes.c_size_t()
        r = f(ctypes.c_void_p(h), i, ctypes.byref(off), ctypes.byref(sz))
        print("param", i, "result", r, "offset", off.value, "size", sz.value)
except Exception as e:
    print("param info failed:", e)

size = (64, 64, 128)
case = drv.make_case(size, np.random.default_rng(0))
d = H.DeviceCase(case)
a_ptr, b_ptr, kk = drv._operands(d)
amap, bmap = drv._maps(d, "v1", a_ptr, b_ptr, kk)
for fmt in ("PPPiii",):
    g = drv.K("gemm_v1", fmt)
    extra = [] if fmt.endswith("iii") else []
    d.poison_outputs()
    print("format", fmt)
    g.prepared_call((1, 1, 1), (128, 1, 1), amap, bmap, d.c, 64, 128, 64)
    driver().Context.synchronize()
    flush_printf()
    out = d.outputs()["c"]
    print("  nan", int(np.isnan(out).sum()), "err", float(np.nanmax(np.abs(out - case.expected()["c"])) if np.isfinite(out).any() else -1))
