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


def torch_fp32():
    """torch_or_none() with TF32 off for matmuls and cuDNN: the project's fp32 baselines run in
    true fp32 (CUDA cores, or tensor cores only where torch emulates fp32 exactly)."""
    torch = torch_or_none()
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    return torch


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


def short_kernel_name(name: str) -> str:
    """A library kernel's name as CUPTI reports it, shortened for a table:
    'void cub::...::DeviceSelectSweepKernel<...>(...)' -> 'DeviceSelectSweepKernel'."""
    name = name.removeprefix("void ").replace("(anonymous namespace)::", "")
    for stop in "<(":
        name = name.split(stop, 1)[0]
    return name.rsplit("::", 1)[-1].strip()


# --- cuBLAS ---------------------------------------------------------------------------------

def toolkit_library_candidates(name: str):
    """Where a CUDA toolkit library (name = "cublas", "curand", ...) may be, in the order tried:
    CUDA_ROOT / CUDA_PATH / CUDA_HOME, /usr/local/cuda, the loader path, NVIDIA's pip wheel."""
    so = f"lib{name}.so"
    for env in ("CUDA_ROOT", "CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(env)
        if root:
            yield from sorted(glob.glob(os.path.join(root, "lib64", so + "*")))
            yield from sorted(glob.glob(os.path.join(root, "lib", so + "*")))
    yield from sorted(glob.glob(f"/usr/local/cuda/lib64/{so}*"))
    yield so  # the loader path
    for p in sys.path:  # the nvidia-<name> wheel
        yield from sorted(glob.glob(os.path.join(p, "nvidia", name, "lib", so + "*")))
        yield from sorted(glob.glob(os.path.join(p, "nvidia", "cu1*", "lib", so + "*")))


def load_toolkit_library(name: str):
    """(the loaded library, "") or (None, why not), trying toolkit_library_candidates(name)."""
    errors = []
    for cand in toolkit_library_candidates(name):
        try:
            return ctypes.CDLL(cand), ""
        except OSError as e:
            errors.append(str(e))
    return None, (f"lib{name} not found (set CUDA_ROOT to the CUDA toolkit, or install the "
                  f"nvidia-{name} wheel): " + "; ".join(errors[-2:]))


@functools.lru_cache(maxsize=None)
def cublas():
    """The loaded cuBLAS library and a handle on the current (primary) context."""
    from .gpu import context

    context()
    lib, why = load_toolkit_library("cublas")
    if lib is None:
        raise OSError(why)
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


def sgemm_strided_batched(a_ptr, b_ptr, c_ptr, batch: int, m: int, n: int, k: int,
                          stride_a: int | None = None, stride_b: int | None = None,
                          stride_c: int | None = None, alpha: float = 1.0, beta: float = 0.0):
    """Row-major C[i] = alpha * A[i] @ B[i] + beta * C[i] for i < batch, fp32 (no TF32), with
    A[i] = a + i * stride_a (default m*k elements), B[i] and C[i] alike. Day 29's baseline."""
    lib, h = cublas()
    _ok(lib.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")
    sa = m * k if stride_a is None else stride_a
    sb = k * n if stride_b is None else stride_b
    sc = m * n if stride_c is None else stride_c
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    ll = ctypes.c_longlong
    _ok(lib.cublasSgemmStridedBatched(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, ctypes.byref(al),
                                      _ptr(b_ptr), n, ll(sb), _ptr(a_ptr), k, ll(sa),
                                      ctypes.byref(be), _ptr(c_ptr), n, ll(sc), batch),
        "cublasSgemmStridedBatched")


# cudaDataType and cublasComputeType_t values (library_types.h, cublas_api.h)
CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF = 0, 2, 14
CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F_FAST_16BF, CUBLAS_COMPUTE_32F_FAST_TF32 = 68, 75, 77
CUBLAS_GEMM_DEFAULT = -1
GEMM_EX_MODES = {  # mode -> (A/B type, C type, compute type)
    "fp32": (CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F),
    "tf32": (CUDA_R_32F, CUDA_R_32F, CUBLAS_COMPUTE_32F_FAST_TF32),
    "bf16": (CUDA_R_16BF, CUDA_R_16BF, CUBLAS_COMPUTE_32F),      # bf16 in and out, fp32 sums
    "fp16": (CUDA_R_16F, CUDA_R_16F, CUBLAS_COMPUTE_32F),
    "bf16_f32": (CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F),   # bf16 in, fp32 out and sums
}
CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I = 3, 10, 72   # library_types.h, cublas_api.h


def gemm_ex(a_ptr, b_ptr, c_ptr, m: int, n: int, k: int, mode: str = "tf32",
            alpha: float = 1.0, beta: float = 0.0, b_transposed: bool = False):
    """Row-major C[m,n] = alpha * A[m,k] @ B[k,n] + beta * C through cublasGemmEx: mode "fp32"
    (CUDA cores), "tf32" (tensor cores, fp32 in/out), "bf16" or "fp16" (16-bit in and out, fp32
    accumulation; pointers to 2-byte elements), "bf16_f32" (bf16 in, fp32 C). Same column-major
    trick as sgemm().
    b_transposed: B is stored [n, k] (a Linear layer's weight) and C = A @ B^T."""
    if mode not in GEMM_EX_MODES:
        raise ValueError(f"mode {mode!r}: one of {', '.join(GEMM_EX_MODES)}")
    ab, ct, compute = GEMM_EX_MODES[mode]
    lib, h = cublas()
    _ok(lib.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")
    al, be = ctypes.c_float(alpha), ctypes.c_float(beta)
    # column-major C^T[n,m] = B'[n,k] A^T[k,m]: B' is B^T read as stored (ld n), or, when B is
    # stored [n, k], that storage read as a k x n column-major matrix and transposed (ld k)
    op_b, ldb = (CUBLAS_OP_T, k) if b_transposed else (CUBLAS_OP_N, n)
    _ok(lib.cublasGemmEx(h, op_b, CUBLAS_OP_N, n, m, k, ctypes.byref(al),
                         _ptr(b_ptr), ab, ldb, _ptr(a_ptr), ab, k, ctypes.byref(be),
                         _ptr(c_ptr), ct, n, compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx")


class FirstColumns:
    """The first n columns of a device array [rows, ld >= n] (a library's C written with a padded
    leading dimension), read back only when checked (.get())."""

    def __init__(self, arr, n):
        self.arr, self.n = arr, n

    def get(self):
        return self.arr.get()[:, :self.n]


def gemm_int8_tn(w_ptr, a_ptr, c_ptr, m: int, n: int, kp: int, ldc: int):
    """Row-major C[m, n] (row pitch ldc) = A[m, kp] @ W[n, kp]^T, int8 in, int32 out, through
    cublasGemmEx with CUBLAS_COMPUTE_32I (days 39 and 47). Column-major, that is C^T = W A^T with
    W's buffer read as a [kp, n] matrix and transposed ("TN", the int8 layout cuBLAS's IMMA
    kernels take)."""
    lib, h = cublas()
    _ok(lib.cublasSetMathMode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode")
    al, be = ctypes.c_int32(1), ctypes.c_int32(0)
    _ok(lib.cublasGemmEx(h, CUBLAS_OP_T, CUBLAS_OP_N, n, m, kp, ctypes.byref(al),
                         _ptr(w_ptr), CUDA_R_8I, kp, _ptr(a_ptr), CUDA_R_8I, kp, ctypes.byref(be),
                         _ptr(c_ptr), CUDA_R_32I, ldc, CUBLAS_COMPUTE_32I, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx (int8)")
