"""Honest GPU timing: CUDA events around each launch, warm-up first, L2 flushed before every
repeat, the median reported with min and max. And the ceilings the figures are measured
against: the device-to-device copy bandwidth measured here, and datasheet compute rates.
"""
from __future__ import annotations

import functools
import os
import statistics
from dataclasses import dataclass, field

from .gpu import device_info, driver


@dataclass
class Timing:
    median_ms: float
    min_ms: float
    max_ms: float
    repeats: int
    samples: list = field(default_factory=list, repr=False)


# Reading (not writing) a buffer of twice the L2 size evicts whatever the last run left in L2
# and leaves only CLEAN lines behind. A memset flush would leave L2 full of dirty lines whose
# write-back the next (timed) kernel would pay for: on a 50 MB problem that is a visible share.
_FLUSH_SRC = r"""
extern "C" __global__ void l2_flush_read(const float4* __restrict__ p, long long n, float* sink) {
    float acc = 0.f;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        acc += __ldcg(p + i).x;          // .cg: through L2, not kept in L1
    if (acc == 1.2345f) *sink = acc;     // never true (the buffer is zeros): keeps the loads
}
"""


class L2Flusher:
    """Reads a buffer of twice the L2 size, evicting whatever the last run left there."""

    def __init__(self):
        from pycuda.compiler import SourceModule

        cuda = driver()
        self.nbytes = 2 * (device_info()["l2_bytes"] or 64 << 20)
        self.buf = cuda.mem_alloc(self.nbytes)
        self.sink = cuda.mem_alloc(4)
        cuda.memset_d32(self.buf, 0, self.nbytes // 4)
        info = device_info()
        arch = info["arch"].removeprefix("sm_")
        self.fn = SourceModule(_FLUSH_SRC, no_extern_c=True, arch=f"compute_{arch}",
                               code=f"sm_{arch}").get_function("l2_flush_read")
        self.fn.prepare("PqP")
        self.grid = (info["sms"] * 4, 1, 1)
        cuda.Context.synchronize()

    def __call__(self):
        if os.environ.get("L2_FLUSH") == "memset":  # the write flush, kept to compare with
            driver().memset_d32(self.buf, 0, self.nbytes // 4)
        else:
            self.fn.prepared_call(self.grid, (512, 1, 1), self.buf, self.nbytes // 16, self.sink)


@functools.lru_cache(maxsize=None)
def _flusher() -> L2Flusher:
    return L2Flusher()


def time_fn(fn, *, warmup: int = 3, repeats: int = 30, flush_l2: bool = True,
            max_seconds: float = 3.0) -> Timing:
    """Time `fn()` (which enqueues GPU work on the default stream) with CUDA events.

    Warm-up runs first; then each repeat flushes L2 (outside the events: a read of 2x the L2
    size, so no dirty lines are left for the timed call to write back) and times one call.
    Stops early once `max_seconds` of GPU time is spent (but keeps at least 5 repeats).
    """
    cuda = driver()
    flush = _flusher() if flush_l2 else None
    for _ in range(warmup):
        fn()
    cuda.Context.synchronize()
    start, end = cuda.Event(), cuda.Event()
    samples: list[float] = []
    spent = 0.0
    for i in range(repeats):
        if flush:
            flush()
        start.record()
        fn()
        end.record()
        end.synchronize()
        ms = end.time_since(start)
        samples.append(ms)
        spent += ms / 1e3
        if spent > max_seconds and i >= 4:
            break
    return Timing(statistics.median(samples), min(samples), max(samples), len(samples), samples)


# --- ceilings -------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def copy_bandwidth_gbps(nbytes: int = 1 << 30) -> float:
    """Device-to-device cuMemcpy bandwidth on this GPU in GB/s, counting bytes read + written.

    This is the memory ceiling every memory-bound figure is shown against.
    """
    cuda = driver()
    free, _ = cuda.mem_get_info()
    nbytes = min(nbytes, free // 4)
    src = cuda.mem_alloc(nbytes)
    dst = cuda.mem_alloc(nbytes)
    cuda.memset_d32(src, 0x3F800000, nbytes // 4)
    t = time_fn(lambda: cuda.memcpy_dtod(dst, src, nbytes), warmup=3, repeats=20, flush_l2=False)
    src.free()
    dst.free()
    return 2 * nbytes / (t.median_ms * 1e-3) / 1e9


# Datasheet dense rates in TFLOP/s (SXM parts; H200 shares the H100's arithmetic). These are
# vendor figures, not measurements: the reports say so.
DATASHEET_TFLOPS = {
    "H100 PCIe": {"fp32": 51.2, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513, "int8": 1513},
    "H100": {"fp32": 66.9, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979, "int8": 1979},
    "H200": {"fp32": 66.9, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979, "int8": 1979},
    "A100": {"fp32": 19.5, "tf32": 156, "bf16": 312, "fp16": 312, "int8": 624},
    "L4": {"fp32": 30.3, "tf32": 60, "bf16": 121, "fp16": 121, "fp8": 242, "int8": 242},
}

# FP32 lanes per SM by compute capability, to estimate a CUDA-core ceiling for unlisted GPUs.
_FP32_LANES = {"7.0": 64, "7.5": 64, "8.0": 64, "8.6": 128, "8.7": 128, "8.9": 128, "9.0": 128,
               "10.0": 128, "12.0": 128}


def compute_ceiling_tflops(unit: str = "fp32") -> tuple[float | None, str]:
    """(TFLOP/s, where the figure comes from) for a unit: fp32 (CUDA cores), tf32, bf16, ..."""
    info = device_info()
    name = info["name"]
    for key in sorted(DATASHEET_TFLOPS, key=len, reverse=True):
        if key in name and unit in DATASHEET_TFLOPS[key]:
            return DATASHEET_TFLOPS[key][unit], f"datasheet {key} {unit}"
    if unit == "fp32" and info.get("sm_clock_mhz"):
        lanes = _FP32_LANES.get(info["compute_capability"], 64)
        tf = info["sms"] * lanes * 2 * info["sm_clock_mhz"] * 1e6 / 1e12
        return tf, "SMs x FP32 lanes x 2 x max clock"
    return None, "unknown for this GPU"
