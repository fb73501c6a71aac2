"""The GPU: finding it, holding its primary context, describing it.

pycuda is imported lazily so that everything in common/ and every driver imports on a
machine with no GPU, no driver and no pycuda (CI, a laptop).
"""
from __future__ import annotations

import atexit
import ctypes
import functools
import os


class NoGPU(RuntimeError):
    """Raised when a CUDA GPU is needed and there is none (the message says why)."""


@functools.lru_cache(maxsize=None)
def gpu_status() -> tuple[bool, str]:
    """(available, reason). Never raises; reason says plainly what is missing."""
    try:
        import pycuda.driver as cuda  # noqa: F401
    except ImportError:
        try:
            ctypes.CDLL("libcuda.so.1")
            return False, "pycuda is not installed (run `make setup`)"
        except OSError:
            return False, "no CUDA driver on this machine (and no pycuda)"
    except Exception as e:  # a broken pycuda build, missing libcuda
        return False, f"pycuda does not load ({e})"
    try:
        cuda.init()
        n = cuda.Device.count()
    except Exception as e:
        return False, f"the CUDA driver does not initialise ({e})"
    if n == 0:
        return False, "no CUDA GPU visible (CUDA_VISIBLE_DEVICES?)"
    return True, f"{n} CUDA device(s)"


def has_gpu() -> bool:
    return gpu_status()[0]


_ctx = None


def context():
    """Retain and push device 0's primary context once (shared with torch, CuPy, cuBLAS)."""
    global _ctx
    ok, why = gpu_status()
    if not ok:
        raise NoGPU(why)
    if _ctx is None:
        import pycuda.driver as cuda

        dev = cuda.Device(int(os.environ.get("DAY_DEVICE", "0")))
        _ctx = dev.retain_primary_context()
        _ctx.push()

        def _release():
            global _ctx
            try:
                cuda.Context.synchronize()
                _ctx.pop()
            except Exception:
                pass
            _ctx = None

        atexit.register(_release)
    return _ctx


def driver():
    """pycuda.driver, with the context current."""
    context()
    import pycuda.driver as cuda

    return cuda


@functools.lru_cache(maxsize=None)
def device_info() -> dict:
    """Static facts about the device, read from the driver."""
    cuda = driver()
    dev = cuda.Context.get_device()
    A = cuda.device_attribute

    def attr(name, default=None):
        try:
            return dev.get_attribute(getattr(A, name))
        except Exception:
            return default

    cc = dev.compute_capability()
    mem_clock_khz = attr("MEMORY_CLOCK_RATE", 0) or 0
    bus_bits = attr("GLOBAL_MEMORY_BUS_WIDTH", 0) or 0
    info = {
        "name": dev.name(),
        "compute_capability": f"{cc[0]}.{cc[1]}",
        "arch": f"sm_{cc[0]}{cc[1]}",
        "sms": attr("MULTIPROCESSOR_COUNT"),
        "memory_bytes": dev.total_memory(),
        "l2_bytes": attr("L2_CACHE_SIZE"),
        "smem_per_block": attr("MAX_SHARED_MEMORY_PER_BLOCK"),
        "smem_per_block_optin": attr("MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
        "smem_per_sm": attr("MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
        "regs_per_block": attr("MAX_REGISTERS_PER_BLOCK"),
        "regs_per_sm": attr("MAX_REGISTERS_PER_MULTIPROCESSOR"),
        "max_blocks_per_sm": attr("MAX_BLOCKS_PER_MULTIPROCESSOR"),
        "max_threads_per_block": attr("MAX_THREADS_PER_BLOCK"),
        "max_threads_per_sm": attr("MAX_THREADS_PER_MULTIPROCESSOR"),
        "warp_size": attr("WARP_SIZE"),
        "sm_clock_mhz": (attr("CLOCK_RATE", 0) or 0) / 1000 or None,
        "mem_clock_mhz": mem_clock_khz / 1000 or None,
        "mem_bus_bits": bus_bits or None,
        # DDR: two transfers a clock; bytes/s = 2 * clock * bus width / 8
        "theoretical_bw_gbps": (2 * mem_clock_khz * 1e3 * bus_bits / 8 / 1e9) or None,
        "driver_version": _fmt_version(cuda.get_driver_version()),
        "cuda_version": _fmt_version(cuda.get_version()[0] * 1000 + cuda.get_version()[1] * 10),
    }
    return info


def sm_count() -> int:
    """Streaming multiprocessors of this GPU (the size of a persistent grid)."""
    return device_info()["sms"]


def blocks_per_sm(fn, threads: int, dynamic_smem: int = 0) -> int:
    """How many blocks of kernel `fn` (a pycuda Function) fit on one SM at once, limited by
    registers, threads, shared memory and the block slots, so a grid-stride kernel can be
    launched as exactly one full wave: grid = SMs x blocks_per_sm(...)."""
    info = device_info()
    warps = -(-threads // 32)
    regs_per_warp = -(-fn.num_regs * 32 // 256) * 256  # registers are allocated per warp, 256 at a time
    by_regs = ((info["regs_per_sm"] or 65536) // max(regs_per_warp, 1)) // warps
    by_threads = (info["max_threads_per_sm"] or 2048) // threads
    smem = fn.shared_size_bytes + dynamic_smem
    by_smem = (info["smem_per_sm"] or 228 * 1024) // (smem + 1024)  # 1 KB reserved per block
    return max(1, min(by_regs, by_threads, by_smem, info["max_blocks_per_sm"] or 32))


_SMEM_OPTIN: dict = {}


def opt_in_smem(fn, dynamic: int):
    """Let kernel `fn` (a pycuda Function) launch with `dynamic` bytes of dynamic shared
    memory. Without the opt-in a block may use 48 KB in all, static and dynamic together;
    above that the kernel must ask for the bytes first (up to 227 KB a block on Hopper)."""
    if fn.shared_size_bytes + dynamic > 48 * 1024 and _SMEM_OPTIN.get(id(fn), 0) < dynamic:
        fn.set_attribute(driver().function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic)
        _SMEM_OPTIN[id(fn)] = dynamic


def _fmt_version(v: int) -> str:
    return f"{v // 1000}.{(v % 1000) // 10}"


@functools.lru_cache(maxsize=None)
def driver_release() -> str:
    """The NVIDIA driver's release (e.g. 580.159.04) from nvidia-smi or /proc; '' if unknown."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            for tok in f.read().split():
                if tok.count(".") == 2 and tok.replace(".", "").isdigit():
                    return tok
    except OSError:
        pass
    return ""


def flush_printf():
    """Flush C stdout so device printf output (written at synchronisation) appears in order."""
    try:
        ctypes.CDLL(None).fflush(None)
    except Exception:
        pass
