"""Day 12 driver: the pycuda side of one kernel.cu that is also a PyTorch extension.

The harness checks and times the forward y = gelu(x + b) launched from pycuda (v1 flat, v2
tiled and vectorized) against float64 numpy and against torch's own ops. The extension, the
autograd.Function and gradcheck live in torch_op.py; extras() runs them when torch is here.

    from days.day12_pytorch_integration.driver import bias_gelu, bias_gelu_backward, on_torch
    y = bias_gelu(x, b)                      # numpy in, numpy out (float32 or float64)
    gx, gb = bias_gelu_backward(gy, x, b)    # the backward kernels, from pycuda
    y = on_torch(x_t, b_t)                   # torch CUDA tensors in and out, pycuda launching
"""
import os

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none
from common.gpu import blocks_per_sm, device_info, driver

from . import reference

K = H.Kernels(__file__)
THREADS = 256
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}

VERSIONS = {
    "v1": "one thread per element, flat index, bias column by i % cols",
    "v2": "2-D tiles: bias in registers, 16-byte loads, two rows in flight",
}
BEST = "v2"          # the fastest at every bench size (results/day12.json)
SIZE_HELP = "ROWSxCOLS, e.g. 16384x3072 (x is ROWS x COLS, b has COLS)"
SIZES = {"small": (64, 1000), "default": (16384, 3072), "large": (65536, 3072)}
# odd widths take v2's scalar path; (70000, 4) makes each thread loop over many rows
CHECK_SIZES = [(1, 1), (1, 3), (7, 33), (5, 1000), (3, 1001), (1000, 5), (70000, 4),
               (2, 100003), (33, 4096), (257, 3072)]
# the awkward one: odd rows and an odd width (v2's scalar path; no tile divides either)
AWKWARD = (16383, 3073)
BENCH_SIZES = [(16384, 3072), (8192, 8192), AWKWARD]


def validate_size(size):
    if max(size) >= 2 ** 31:
        raise ValueError("rows and cols must each be below 2^31 (the kernels take int sizes)")


def make_case(size, rng):
    rows, cols = size
    x = (rng.standard_normal((rows, cols)) * 2).astype(np.float32)
    b = (rng.standard_normal(cols) * 0.5).astype(np.float32)
    return H.Case(size, inputs={"x": x, "b": b}, outputs={"y": ((rows, cols), np.float32)},
                  reference=lambda: {"y": reference.bias_gelu(x, b)},
                  bytes=2 * x.nbytes + b.nbytes,  # read x and b once, write y once
                  read_bytes=x.nbytes + b.nbytes)


def vec_for(cols: int, itemsize: int = 4, aligned: bool = True) -> int:
    """Elements per access: 16 bytes' worth (4 floats, 2 doubles) when every row starts on a
    16-byte boundary (cols a multiple of it, pointers 16-byte aligned), else 1."""
    full = 16 // itemsize
    return full if (cols % full == 0 and aligned) else 1


def tiling(rows: int, cols: int, vec: int, wave: int):
    """v2's (and the backward's) launch shape: (grid, block). The same arithmetic as tiling()
    in torch_launcher.cu. A thread owns `vec` adjacent columns; 32-256 threads go across the
    columns, the rest of 256 down the rows; the grid is at most one full wave (`wave` = SMs x
    the blocks of the kernel that fit on one SM at once) and threads loop over the rows."""
    npack = cols // vec
    tx = 32
    while tx < npack and tx < THREADS:
        tx *= 2
    ty = THREADS // tx
    gx = H.cdiv(npack, tx)
    gy = max(1, min(H.cdiv(rows, ty), wave // gx, 65535))
    return (gx, gy, 1), (tx, ty, 1)


def _aligned(*ptrs) -> bool:
    return all(int(p) % 16 == 0 for p in ptrs)


def launch_forward(version, x, b, y, rows, cols, dtype=np.float32):
    """Enqueue the forward `version` on raw pointers (legacy default stream)."""
    version = A.version(version, VERSIONS)  # never run some other kernel for an unknown name
    sfx = SUFFIX[np.dtype(dtype)]
    if rows * cols == 0:
        return
    if version == "v1":
        grid = (H.cdiv(rows * cols, THREADS), 1, 1)
        K(f"bias_gelu_v1_{sfx}", "PPPii").prepared_call(grid, (THREADS, 1, 1), int(x), int(b),
                                                        int(y), rows, cols)
        return
    vec = vec_for(cols, np.dtype(dtype).itemsize, _aligned(x, b, y))
    fn = K(f"bias_gelu_v2_{'vec' if vec > 1 else 'scalar'}_{sfx}", "PPPii")
    grid, block = tiling(rows, cols, vec, device_info()["sms"] * blocks_per_sm(fn, THREADS))
    fn.prepared_call(grid, block, int(x), int(b), int(y), rows, cols)


def launch(version, d):
    rows, cols = d.size
    launch_forward(version, d.x, d.b, d.y, rows, cols)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    import torch.nn.functional as F

    x, b = as_torch(d.array("x")), as_torch(d.array("b"))
    return {"torch F.gelu(x + b, approximate='tanh')": lambda: F.gelu(x + b, approximate="tanh")}


# --- numpy in, numpy out -----------------------------------------------------------------------

def _as_pair(x, b):
    """x [..., C] and b [C] as one float dtype: float64 if x is float64, else float32."""
    dtype = np.float64 if getattr(x, "dtype", None) == np.float64 else np.float32
    given = x
    x = A.floats(x, "x", dtype=dtype)
    if np.ndim(given) == 0:  # (np.ascontiguousarray would make a scalar 1-D)
        raise ValueError("x must have at least one dimension, [..., C], got a scalar")
    b = A.floats(b, "b", ndim=1, shape=(x.shape[-1],), what="(one bias per column of x)",
                 dtype=dtype)
    cols = x.shape[-1]
    rows = x.size // cols if cols else 0
    validate_size((rows, cols))
    return x, b, dtype


def bias_gelu(x, b, version=BEST):
    """y = gelu(x + b) on the GPU, x of shape [..., C] and b of shape [C]; float32, or float64
    if x is float64 (b follows x). An empty x returns an empty y without a launch."""
    version = A.version(version, VERSIONS)
    x, b, dtype = _as_pair(x, b)
    cols = b.size
    rows = x.size // cols if cols else 0
    if x.size == 0:
        return np.empty(x.shape, dtype)
    case = H.Case(x.shape, inputs={"x": x, "b": b}, outputs={"y": (x.shape, dtype)})
    return H.run(lambda v, d: launch_forward(v, d.x, d.b, d.y, rows, cols, dtype), version, case)["y"]


def launch_backward(gy, x, b, gx, gb, rows, cols, dtype=np.float32):
    """Enqueue the backward on raw pointers: dx by the tiled kernel, db from its partial rows.
    Returns the partial-sum buffer (keep it alive until the kernels finish)."""
    from pycuda import gpuarray

    sfx = SUFFIX[np.dtype(dtype)]
    itemsize = np.dtype(dtype).itemsize
    vec = vec_for(cols, itemsize, _aligned(gy, x, b, gx))
    fn = K(f"bias_gelu_bwd_{'vec' if vec > 1 else 'scalar'}_{sfx}", "PPPPPii")
    smem = THREADS * vec * itemsize  # one pack of column sums per thread
    grid, block = tiling(rows, cols, vec, device_info()["sms"] * blocks_per_sm(fn, THREADS, smem))
    partial = gpuarray.empty((grid[1], cols), dtype)
    fn.prepared_call(grid, block, int(gy), int(x), int(b), int(gx), int(partial.gpudata), rows,
                     cols, shared_size=smem)
    K(f"bias_gelu_bias_grad_{sfx}", "PPii").prepared_call(
        (H.cdiv(cols, THREADS), 1, 1), (THREADS, 1, 1), int(partial.gpudata), int(gb), grid[1], cols)
    return partial


def bias_gelu_backward(grad_y, x, b):
    """(grad_x, grad_b) of y = gelu(x + b), on the GPU through pycuda: grad_y and x of shape
    [..., C], b of shape [C], in x's dtype (float32, or float64). An empty x gives an empty
    grad_x and a zero grad_b (a sum over no rows) without a launch."""
    x, b, dtype = _as_pair(x, b)
    gy = A.floats(grad_y, "grad_y", shape=x.shape, what="(x's shape)", dtype=dtype)
    cols = b.size
    rows = x.size // cols if cols else 0
    if rows * cols == 0:
        return np.zeros(x.shape, dtype), np.zeros(b.shape, dtype)
    from pycuda import gpuarray

    driver()
    d_gy, d_x, d_b = gpuarray.to_gpu(gy), gpuarray.to_gpu(x), gpuarray.to_gpu(b)
    d_gx, d_gb = gpuarray.empty(x.shape, dtype), gpuarray.empty(b.shape, dtype)
    for a in (d_gx, d_gb):  # poison: an unwritten element reads NaN
        driver().memset_d8(a.gpudata, 0xFF, a.nbytes)
    partial = launch_backward(d_gy.gpudata, d_x.gpudata, d_b.gpudata, d_gx.gpudata, d_gb.gpudata,
                              rows, cols, dtype)
    driver().Context.synchronize()
    del partial
    return d_gx.get(), d_gb.get()


def check_tensors(x, b, grad_y=None, device_type="cuda", where="bias_gelu"):
    """What every torch-facing function needs of its tensors, checked in Python before any
    kernel or extension is called: torch tensors, float32 or float64 alike, x [..., C] and b
    [C] (grad_y shaped like x), all on one `device_type` device, sizes the kernels' ints hold.
    Raises TypeError or ValueError with one sentence."""
    import torch

    named = [("x", x), ("b", b)] + ([("grad_y", grad_y)] if grad_y is not None else [])
    for name, t in named:
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}: {name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in named:
        if t.dtype not in (torch.float32, torch.float64):
            raise TypeError(f"{where}: {name} must be float32 or float64, got {t.dtype}")
        if t.dtype != x.dtype:
            raise TypeError(f"{where}: x and {name} must have one dtype, got {x.dtype} and {t.dtype}")
    if x.dim() < 1:
        raise ValueError(f"{where}: x must have at least one dimension, [..., C], got a scalar")
    if b.dim() != 1 or b.shape[0] != x.shape[-1]:
        raise ValueError(f"{where}: b must be 1-D with x.shape[-1] = {x.shape[-1]} elements, "
                         f"got shape {tuple(b.shape)}")
    if grad_y is not None and grad_y.shape != x.shape:
        raise ValueError(f"{where}: grad_y must have x's shape {tuple(x.shape)}, got "
                         f"{tuple(grad_y.shape)}")
    for name, t in named:
        if t.device.type != device_type:
            raise ValueError(f"{where}: {name} must be a {device_type.upper()} tensor (the kernels "
                             f"run on the GPU), got one on {t.device}")
        if t.device != x.device:
            raise ValueError(f"{where}: x and {name} are on different devices ({x.device}, {t.device})")
    cols = x.shape[-1]
    if cols >= 2 ** 31 or (cols and x.numel() // cols >= 2 ** 31):
        raise ValueError(f"{where}: rows and columns must each be below 2^31 (the kernels take int "
                         f"sizes), got x of shape {tuple(x.shape)}")


def on_torch(x, b, version=BEST):
    """pycuda launching on torch tensors (for comparison with the extension): y is a new torch
    tensor written by the pycuda kernel through data_ptr(), no copies. x [..., C] and b [C] are
    CUDA tensors of one float dtype on the GPU pycuda uses (DAY_DEVICE, default 0); an empty x
    returns an empty y without a launch. pycuda launches on the legacy default stream, so this
    is only ordered with torch's work on its default stream."""
    version = A.version(version, VERSIONS)
    try:
        import torch
    except ImportError:
        raise RuntimeError("on_torch needs torch (pip install torch)") from None
    check_tensors(x, b, where="on_torch")
    want = int(os.environ.get("DAY_DEVICE", "0"))
    if x.device.index not in (None, want):
        raise ValueError(f"on_torch: pycuda launches on cuda:{want} (DAY_DEVICE), x is on {x.device}")
    if x.numel() == 0:
        return torch.empty_like(x, memory_format=torch.contiguous_format)
    if torch_or_none() is None:
        raise RuntimeError("torch sees no CUDA GPU")
    if torch.cuda.current_stream().cuda_stream != 0:
        raise ValueError("pycuda launches on the legacy default stream: call on_torch from "
                         "torch's default stream (or synchronize), not inside torch.cuda.stream()")
    x, b = x.contiguous(), b.contiguous()
    y = torch.empty_like(x)
    cols = b.numel()
    driver()
    launch_forward(version, x.data_ptr(), b.data_ptr(), y.data_ptr(), x.numel() // cols, cols,
                   np.float64 if x.dtype == torch.float64 else np.float32)
    return y


# --- the PyTorch half, when torch is here ------------------------------------------------------

EXTRA_SIZE = (16384, 3072)  # GPT-2 small's MLP activation at batch 16 x 1024 tokens


def _gradcheck_passes(rec):
    """The bar's check on a results record: every gradcheck extras() ran passed (float64)."""
    torch_rec = (rec.get("extra") or {}).get("torch")
    runs = torch_rec.get("gradcheck") if isinstance(torch_rec, dict) else None
    if not runs:
        return False, f"gradcheck not run ({torch_rec or 'no torch record'})"
    passed = sum(r[-1] == "pass" for r in runs)
    return passed == len(runs), f"{passed} of {len(runs)} gradchecks pass (float64, both entry points)"


# CURRICULUM.md: gradcheck passes
BAR = [{"text": "gradcheck passes", "check": _gradcheck_passes}]


def extras(report, mode):
    torch = torch_or_none()
    if torch is None:
        report.say("\nPyTorch: torch (with CUDA) is not installed: the extension, autograd and "
                   "gradcheck part of the day is skipped (pip install torch)")
        report.record("torch", "not installed")
        return
    from . import torch_op

    try:
        ext = torch_op.extension()
    except torch_op.ExtensionUnavailable as e:
        report.say(f"\nPyTorch extension not built: {e}")
        report.record("extension", f"not built: {e}")
        return
    report.say(f"\nPyTorch extension built from kernel.cu + torch_launcher.cu + binding.cpp: "
               f"loaded in {torch_op.build_seconds:.1f} s (a build under the system temp dir is reused)")
    rep = {"build_s": torch_op.build_seconds}

    # gradcheck: float64, both entry points, both paths (13 columns: scalar; 12: double2)
    results = []
    for fn_name, fn in (("BiasGELU.apply", torch_op.BiasGELU.apply), ("bias_gelu_op", torch_op.bias_gelu_op)):
        for shape in ((5, 12), (3, 13)):
            g = torch.Generator(device="cuda").manual_seed(12)
            x = torch.randn(*shape, dtype=torch.float64, device="cuda", generator=g, requires_grad=True)
            b = torch.randn(shape[1], dtype=torch.float64, device="cuda", generator=g, requires_grad=True)
            try:
                ok = torch.autograd.gradcheck(fn, (x, b))
            except Exception as e:  # gradcheck raises with the mismatching Jacobians
                ok = False
                report.failures.append(f"gradcheck {fn_name} {shape}: {str(e).splitlines()[0]}")
            results.append([fn_name, "x".join(map(str, shape)), "pass" if ok else "FAIL"])
    report.section("torch.autograd.gradcheck (float64)", results, ["function", "x shape", "result"])
    rep["gradcheck"] = results

    if mode == "check":
        report.record("torch", rep)
        return
    rep["timing"] = _time_torch(report, torch, torch_op, ext)
    report.record("torch", rep)


def _time_torch(report, torch, torch_op, ext):
    """Forward, and forward + backward, through each route on the same tensors."""
    import torch.nn.functional as F

    from common.check import compare
    from common.timing import copy_bandwidth_gbps, time_fn

    rows, cols = EXTRA_SIZE
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(rows, cols, device="cuda", generator=g) * 2
    b = torch.randn(cols, device="cuda", generator=g) * 0.5
    gy = torch.randn(rows, cols, device="cuda", generator=g)
    xg, bg = x.clone().requires_grad_(), b.clone().requires_grad_()
    n = rows * cols
    fwd_bytes, bwd_bytes = 8 * n + 4 * cols, 8 * n + 4 * cols + 12 * n  # fwd + (read gy, x; write gx)
    ref = reference.bias_gelu(x.cpu().numpy(), b.cpu().numpy())

    def grads(fn):
        return lambda: torch.autograd.grad(fn(xg, bg), (xg, bg), gy)

    routes = [
        ("pycuda v2 (kernel.cu)", "forward", fwd_bytes, lambda: on_torch(x, b, "v2")),
        ("extension forward (kernel.cu)", "forward", fwd_bytes, lambda: ext.forward(x, b)),
        ("torch F.gelu(x + b) (2 kernels)", "forward", fwd_bytes,
         lambda: F.gelu(x + b, approximate="tanh")),
        ("BiasGELU.apply (autograd.Function)", "forward + backward", bwd_bytes,
         grads(torch_op.BiasGELU.apply)),
        ("bias_gelu_op (custom op)", "forward + backward", bwd_bytes, grads(torch_op.bias_gelu_op)),
        ("torch F.gelu(x + b) autograd", "forward + backward", bwd_bytes,
         grads(lambda x_, b_: F.gelu(x_ + b_, approximate="tanh"))),
    ]
    ceiling = copy_bandwidth_gbps()
    rows_out, rec = [], []
    for name, what, nbytes, fn in routes:
        if what == "forward":
            r = compare(fn().cpu().numpy(), ref)
            if not r.ok:
                report.failures.append(f"{name}: {r.message}")
        t = time_fn(fn)
        gbps = nbytes / (t.median_ms * 1e-3) / 1e9
        rows_out.append([name, what, f"{t.median_ms:.3f} ms", f"{gbps:.0f}", f"{100 * gbps / ceiling:.0f}"])
        rec.append({"route": name, "what": what, "median_ms": t.median_ms, "gbps": gbps})
    report.section(f"the same kernel from PyTorch, {rows}x{cols} float32 (bytes each op must move: "
                   f"forward {fwd_bytes / 1e6:.0f} MB, forward+backward {bwd_bytes / 1e6:.0f} MB)",
                   rows_out, ["route", "what", "median", "GB/s", "% of copy"])
    return rec
