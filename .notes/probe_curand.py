"""GPU probe (lead): dump cuRAND host-API Philox4_32_10 outputs so day 58 can be matched offline,
and list what the GPU machine offers (curand headers/libs, cupy, torch, cuda-bindings)."""
import ctypes, ctypes.util, glob, os, shutil, subprocess, sys
import numpy as np
out = os.environ.get("OUT", "/tmp/out")
print(sys.version)
for mod in ("torch", "cupy", "cuda.bindings.driver", "cuda.bindings.runtime"):
    try:
        m = __import__(mod, fromlist=["x"]); print(mod, getattr(m, "__version__", "ok"))
    except Exception as e:
        print(mod, "MISSING", e)
roots = [os.environ.get("CUDA_ROOT", ""), os.environ.get("CUDA_PATH", ""), "/usr/local/cuda"] + glob.glob("/usr/local/cuda-*")
for r in roots:
    if r and os.path.isdir(r):
        print(r, glob.glob(r + "/lib64/libcurand*")[:4], glob.glob(r + "/include/curand*.h")[:20])
hdr = next((p for r in roots if r for p in glob.glob(r + "/include/curand_philox4x32_x.h")), None)
os.makedirs(out + "/curand_headers", exist_ok=True)
if hdr:
    for h in glob.glob(os.path.dirname(hdr) + "/curand*.h"):
        shutil.copy(h, out + "/curand_headers/")
lib = None
for r in roots:
    for p in glob.glob((r or "/nonexistent") + "/lib64/libcurand.so*"):
        try:
            lib = ctypes.CDLL(p); print("loaded", p); break
        except OSError:
            pass
    if lib: break
if lib is None:
    try:
        import nvidia.curand, pathlib
        p = glob.glob(str(pathlib.Path(nvidia.curand.__path__[0]) / "lib" / "libcurand.so*"))[0]
        lib = ctypes.CDLL(p); print("loaded wheel", p)
    except Exception as e:
        print("no libcurand", e)
import torch
ver = ctypes.c_int(); lib.curandGetVersion(ctypes.byref(ver)); print("curand version", ver.value)
PHILOX = 161
def gen(kind, seed, offset, n, ordering=None, host=False):
    g = ctypes.c_void_p()
    f = lib.curandCreateGeneratorHost if host else lib.curandCreateGenerator
    assert f(ctypes.byref(g), PHILOX) == 0
    assert lib.curandSetPseudoRandomGeneratorSeed(g, ctypes.c_ulonglong(seed)) == 0
    assert lib.curandSetGeneratorOffset(g, ctypes.c_ulonglong(offset)) == 0
    if ordering is not None:
        rc = lib.curandSetGeneratorOrdering(g, ordering)
        if rc != 0:
            lib.curandDestroyGenerator(g); return None
    dt = {"u32": torch.int32, "uniform": torch.float32, "normal": torch.float32,
          "uniform_double": torch.float64, "normal_double": torch.float64}[kind]
    t = torch.empty(n, dtype=dt, device="cpu" if host else "cuda")
    p = ctypes.c_void_p(t.data_ptr())
    if kind == "u32": rc = lib.curandGenerate(g, p, ctypes.c_size_t(n))
    elif kind == "uniform": rc = lib.curandGenerateUniform(g, p, ctypes.c_size_t(n))
    elif kind == "normal": rc = lib.curandGenerateNormal(g, p, ctypes.c_size_t(n), ctypes.c_float(0), ctypes.c_float(1))
    elif kind == "uniform_double": rc = lib.curandGenerateUniformDouble(g, p, ctypes.c_size_t(n))
    else: rc = lib.curandGenerateNormalDouble(g, p, ctypes.c_size_t(n), ctypes.c_double(0), ctypes.c_double(1))
    torch.cuda.synchronize()
    lib.curandDestroyGenerator(g)
    if rc != 0:
        print("generate", kind, "rc", rc); return None
    a = t.cpu().numpy()
    return a.view(np.uint32) if kind == "u32" else a
res = {}
for seed in (0, 1234, 0x123456789ABCDEF):
    for off in (0, 1, 4, 5, 1000003):
        for order in (None, 100, 101, 104):  # default, BEST, DEFAULT, DYNAMIC
            a = gen("u32", seed, off, 9000, order)
            if a is not None:
                res[f"u32_s{seed}_o{off}_ord{order}"] = a
        for kind in ("uniform", "normal", "uniform_double", "normal_double"):
            a = gen(kind, seed, off, 4100)
            if a is not None:
                res[f"{kind}_s{seed}_o{off}"] = a
        a = gen("u32", seed, off, 9000, host=True)
        if a is not None:
            res[f"u32host_s{seed}_o{off}"] = a
# odd n for normal (Box-Muller needs pairs) and large n
for n in (1, 3, 4101, 40000):
    a = gen("u32", 1234, 0, n); res[f"u32_s1234_o0_n{n}"] = a
    a = gen("normal", 1234, 0, n + (n & 1)); 
    if a is not None: res[f"normal_s1234_o0_n{n + (n & 1)}"] = a
np.savez_compressed(out + "/curand_philox.npz", **res)
print("saved", len(res), "arrays")
for k in list(res)[:6]:
    print(k, res[k][:8])
