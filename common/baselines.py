"""The libraries a user would pick instead of a hand kernel, on the same device memory.

- torch (cuDNN, SDPA, its own kernels) and CuPy (CUB, cuSPARSE): optional, used if installed.
  Both share pycuda's primary context, so a GPUArray is seen by them without a copy.
  kernels_launched(fn) lists the kernels a library call really launched (is it CUB?).
- cuBLAS through ctypes, on pycuda pointers (no torch needed).
"""
from __future__ import annotations

import ctypes
import functools
import glob
import os
import sys


@functools.lru_cache(maxsize=None)
def torch_or_none():
    """torch with CUDA, or None (not installed, or no CUDA build)."""
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def as_torch(gpuarray):
    """A torch view of a pycuda GPUArray (no copy, through __cuda_array_interface__)."""
    torch = torch_or_none()
    return torch.as_tensor(gpuarray, device="cuda")


@functools.lru_cache(maxsize=None)
def cupy_or_none():
    try:
        import cupy
        cupy.cuda.runtime.getDeviceCount()
        return cupy
    except Exception:
        return None


def kernels_launched(fn) -> list[tuple[str, float]]:
    """(name, microseconds) of every GPU kernel that fn() launches, as CUPTI records them
    (through torch.profiler, which sees the kernels of every library in the process, CuPy's
    and pycuda's too). Needs torch with CUDA. It shows what a baseline really runs: day 17's
    tests check that its "CUB" rows launch CUB's DeviceScanKernel and not a CuPy fallback."""
    import json
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f).get("traceEvents", [])
    finally:
        os.unlink(path)
    return [(e["name"], float(e.get("dur", 0.0))) for e in events
            if e.get("cat") == "kernel" and e.get("ph") == "X"]


# --- cuBLAS ---------------------------------------------------------------------------------

def _cublas_candidates():
    for env in ("CUDA_ROOT", "CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(env)
        if root:
            yield from sorted(glob.glob(os.path.join(root, "lib64", "libcublas.so*")))
            yield from sorted(glob.glob(os.path.join(root, "lib", "libcublas.so*")))
    yield from sorted(glob.glob("/usr/local/cuda/lib64/libcublas.so*"))
    yield "libcublas.so"  # the loader path
    for p in sys.path:  # the nvidia-cublas wheel
        yield from sorted(glob.glob(os.path.join(p, "nvidia", "cublas", "lib", "libcublas.so*")))
        yield from sorted(glob.glob(os.path.join(p, "nvidia", "cu1*", "lib", "libcublas.so*")))


@functools.lru_cache(maxsize=None)
def cublas():
    """The loaded cuBLAS library and a handle on the current (primary) context."""
    from .gpu import context

    context()
    errors = []
    for cand in _cublas_candidates():
        try:
            lib = ctypes.CDLL(cand)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise OSError("libcublas not found (set CUDA_ROOT): " + "; ".join(errors[-2:]))
    handle = ctypes.c_void_p()
    _ok(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
    return lib, handle


CUBLAS_OP_N, CUBLAS_OP_T = 0, 1
CUBLAS_DEFAULT_MATH, CUBLAS_TF32_TENSOR_OP_MATH = 0, 3


def _ok(status: int, what: str):
    if status != 0:
        raise RuntimeError(f"{what} failed with cuBLAS status {status}")


def _ptr(p) -> ctypes.c_void_p:
    return ctypes.c_void_p(int(p))


def sgemm(a_ptr, b_ptr, c_ptr, m: int, n: int, k: int, alpha: float = 1.0, beta: float = 0.0,
          tf32: bool = False):
    """Row-major C[m,n] = alpha * A[m,k] @ B[k,n] + beta * C in fp32 on device pointers.

    cuBLAS is column-major, so it computes C^T = B^T A^T: the row-major buffers read as
    column-major are exactly those transposes, and no data moves.
    """
    lib, h = cublas()
    _ok(lib.cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH if tf32 else CUBLAS_DEFAULT_MATH),
        "cublasSetMathMode")
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    _ok(lib.cublasSgemm_v2(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, ctypes.byref(al),
                           _ptr(b_ptr), n, _ptr(a_ptr), k, ctypes.byref(be), _ptr(c_ptr), n),
        "cublasSgemm")
