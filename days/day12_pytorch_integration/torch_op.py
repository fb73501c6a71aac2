"""Day 12, the PyTorch side: kernel.cu built as a torch extension, wrapped for autograd and for
torch.compile. Importing this module needs torch; building the extension (on first use) needs
a CUDA GPU, nvcc and ninja.

    from days.day12_pytorch_integration.torch_op import BiasGELU, bias_gelu_op
    y = BiasGELU.apply(x, b)        # autograd.Function: forward and backward are our kernels
    y = bias_gelu_op(x, b)          # the same as a torch.library custom op: torch.compile-friendly

The three source files, in the order the build sees them:
    kernel.cu           the kernels (the same file pycuda loads)
    torch_launcher.cu   checks, dtype dispatch, launches on torch's current stream
    binding.cpp         PYBIND11_MODULE: the Python names `forward` and `backward`
"""
import hashlib
import tempfile
import time
from pathlib import Path

import torch
from torch.autograd.function import once_differentiable

from .driver import check_tensors

HERE = Path(__file__).resolve().parent
DEVICE_TYPE = "cuda"  # where the tensors must live (the CPU test of the wiring sets "cpu")
SOURCES = ("kernel.cu", "torch_launcher.cu", "binding.cpp")


class ExtensionUnavailable(RuntimeError):
    """The extension could not be built here; the message says why in one line."""


_module = None
_failure = None
build_seconds = None  # how long the (first) load took in this process


def _why_not():
    """What is missing before even trying to build, or None."""
    from torch.utils import cpp_extension

    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    if cpp_extension.CUDA_HOME is None:
        return "no CUDA toolkit found for the build (set CUDA_HOME, or put nvcc on PATH)"
    if not cpp_extension.is_ninja_available():
        return "ninja is not installed (pip install ninja): torch's JIT builds need it"
    return None


def build_dir(texts) -> Path:
    """A build folder under the system temp dir, named after the sources and the torch build,
    so a changed kernel gets a fresh build and an unchanged one is reused across processes."""
    digest = hashlib.sha1("\0".join(list(texts) + [torch.__version__, str(torch.version.cuda)])
                          .encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"100days_cuda_day12_{digest}"


def extension(verbose: bool = False):
    """The compiled module (forward, backward): built once per process; the build folder
    makes a second process's load take seconds, not a minute. Raises ExtensionUnavailable."""
    global _module, _failure, build_seconds
    if _module is not None:
        return _module
    if _failure is not None:
        raise ExtensionUnavailable(_failure)
    why = _why_not()
    if why:
        _failure = why
        raise ExtensionUnavailable(why)
    from torch.utils.cpp_extension import load_inline

    kernel, launcher, binding = ((HERE / f).read_text() for f in SOURCES)
    folder = build_dir([kernel, launcher, binding])
    folder.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    try:
        _module = load_inline(
            name=f"day12_bias_gelu_{folder.name.rsplit('_', 1)[1]}",
            cpp_sources=[binding],            # + #include <torch/extension.h> in front
            cuda_sources=[kernel, launcher],  # + #include <torch/types.h>, cuda.h, cuda_runtime.h
            extra_cuda_cflags=["-O3"],
            build_directory=str(folder),
            verbose=verbose,
        )
    except Exception as e:  # a compiler or linker error: keep the first line that names it
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()] or [""]
        keys = ("error", "cannot find", "undefined reference")
        err = next((ln for ln in lines[1:] if any(k in ln.lower() for k in keys)), "")
        _failure = (f"the build failed ({type(e).__name__}: {lines[0][:120]}"
                    + (f" ... {err[:200]}" if err else "") + f"); see the build folder {folder}")
        raise ExtensionUnavailable(_failure) from e
    build_seconds = time.perf_counter() - t0
    return _module


# --- autograd.Function: the classic way ---------------------------------------------------------

class BiasGELU(torch.autograd.Function):
    """y = gelu(x + b) (tanh form), forward and backward by our kernels.

    forward saves x and b (the backward needs z = x + b, recomputed on the fly: cheaper than
    keeping a third tensor alive). backward is once_differentiable: our backward kernel has
    no backward itself, so asking for a second derivative raises instead of being wrong.
    """

    @staticmethod
    def forward(ctx, x, b):
        check_tensors(x, b, device_type=DEVICE_TYPE, where="BiasGELU")  # a clear Python error first
        x, b = x.contiguous(), b.contiguous()
        ctx.save_for_backward(x, b)
        return extension().forward(x, b)

    @staticmethod
    @once_differentiable
    def backward(ctx, grad_y):
        x, b = ctx.saved_tensors
        # incoming gradients are often not contiguous (y.sum() sends an expanded tensor)
        gx, gb = extension().backward(grad_y.contiguous(), x, b)
        return (gx if ctx.needs_input_grad[0] else None,
                gb if ctx.needs_input_grad[1] else None)


def bias_gelu(x, b):
    """y = gelu(x + b) with autograd, through BiasGELU: x [..., C] and b [C], CUDA tensors of
    one dtype, float32 or float64 (anything else: TypeError or ValueError, before any kernel)."""
    return BiasGELU.apply(x, b)


# --- torch.library custom op: the torch.compile-friendly way --------------------------------------
# Dynamo cannot look inside a pybind11 function, so an autograd.Function that calls one breaks
# the compiled graph there. A custom op is a node the compiler knows: register_fake says what it
# returns (shape, dtype, device) without running it, register_autograd says how to differentiate.

@torch.library.custom_op("day12::bias_gelu", mutates_args=())
def bias_gelu_op(x: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    check_tensors(x, b, device_type=DEVICE_TYPE, where="day12::bias_gelu")
    return extension().forward(x.contiguous(), b.contiguous())


@bias_gelu_op.register_fake
def _(x, b):
    torch._check(x.shape[-1] == b.shape[0], lambda: "b must have x.shape[-1] elements")
    return x.new_empty(x.shape)  # the real output is contiguous: so is the fake one


@torch.library.custom_op("day12::bias_gelu_backward", mutates_args=())
def bias_gelu_backward_op(grad_y: torch.Tensor, x: torch.Tensor,
                          b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    check_tensors(x, b, grad_y, device_type=DEVICE_TYPE, where="day12::bias_gelu_backward")
    gx, gb = extension().backward(grad_y.contiguous(), x.contiguous(), b.contiguous())
    return gx, gb


@bias_gelu_backward_op.register_fake
def _(grad_y, x, b):
    return x.new_empty(x.shape), b.new_empty(b.shape)


def _setup_context(ctx, inputs, output):
    x, b = inputs
    ctx.save_for_backward(x, b)


def _backward(ctx, grad_y):
    x, b = ctx.saved_tensors
    gx, gb = bias_gelu_backward_op(grad_y, x, b)
    return gx, gb


bias_gelu_op.register_autograd(_backward, setup_context=_setup_context)
