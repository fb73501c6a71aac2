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
#
# The memory ceiling of an op is the fastest way this GPU offers to move the same bytes: the
# same bytes read and the same bytes written, timed exactly as the versions are (events, L2
# flushed by a read before each run). A mix matters: on an H200 (2026-11-23) a tuned kernel
# that reads two arrays and writes one streams 4445 GB/s, a copy 4283, a read-only pass 4651
# (.notes/stream_sweep.py). So each op is held to a stream kernel of its own mix (R arrays
# read, W written, R:W from Case.read_bytes), or to cuMemcpyDtoD for a copy if that is faster.
# The sweep also chose the kernel: float4, one block per tile of the data (a grid-stride loop
# over a resident wave was 4-5% slower when writing), plain loads and stores when writing
# (evict-first hints cost 2-5%), streaming loads when only reading.

_STREAM_SRC = r"""
__device__ __forceinline__ float4 add4(float4 a, float4 b) {
    return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
// R arrays read (summed), W arrays written; U float4 per thread; one block per U*blockDim float4
template <int R, int W, int U>
__device__ __forceinline__ void stream(const float4* __restrict__ a, const float4* __restrict__ b,
                                       const float4* __restrict__ c, float4* __restrict__ y,
                                       float4* __restrict__ z, long long n4, float* sink) {
    const long long base = (long long)blockIdx.x * blockDim.x * U + threadIdx.x;
    float4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const long long i = base + (long long)u * blockDim.x;
        if (i < n4) {
            v[u] = W == 0 ? __ldcs(a + i) : a[i];
            if (R > 1) v[u] = add4(v[u], b[i]);
            if (R > 2) v[u] = add4(v[u], c[i]);
        }
    }
    float acc = 0.f;
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const long long i = base + (long long)u * blockDim.x;
        if (i < n4) {
            if (W == 0) acc += (v[u].x + v[u].y) + (v[u].z + v[u].w);
            if (W > 0) y[i] = v[u];
            if (W > 1) z[i] = v[u];
        }
    }
    if (W == 0 && acc == 1.2345f) *sink = acc;  // never true (the buffers hold ones): keeps the loads
}
#define STREAM(R, W, U) extern "C" __global__ void stream_r##R##w##W##_u##U(                  \
    const float4* a, const float4* b, const float4* c, float4* y, float4* z, long long n4,     \
    float* sink) { stream<R, W, U>(a, b, c, y, z, n4, sink); }
#define STREAMS(R, W) STREAM(R, W, 1) STREAM(R, W, 2)
STREAMS(1, 0) STREAMS(1, 1) STREAMS(2, 1) STREAMS(3, 1) STREAMS(1, 2)
"""
MIXES = ((1, 0), (1, 1), (2, 1), (3, 1), (1, 2))
_STREAM_VARIANTS = ((1, 128), (2, 128), (1, 256))  # (float4 per thread, threads): the sweep's best


def mix_of(nbytes: int, read_bytes: int | None) -> tuple[int, int]:
    """The (arrays read, arrays written) mix nearest to an op's reads and writes."""
    if read_bytes is None:
        return (1, 1)
    writes = nbytes - read_bytes
    if writes <= 0.02 * nbytes:
        return (1, 0)
    ratio = read_bytes / writes
    import math

    return min(((r, w) for r, w in MIXES if w), key=lambda m: abs(math.log(m[0] / m[1] / ratio)))


@functools.lru_cache(maxsize=None)
def _stream_module():
    from pycuda.compiler import SourceModule

    arch = device_info()["arch"].removeprefix("sm_")
    return SourceModule(_STREAM_SRC, no_extern_c=True, arch=f"compute_{arch}", code=f"sm_{arch}",
                        options=["-O3", "-std=c++17"])


@dataclass
class Ceiling:
    gbps: float          # bytes moved (read + written) per second, the best way found
    ms: float            # its time for these bytes
    mix: tuple           # (arrays read, arrays written)
    source: str          # which way it was


@functools.lru_cache(maxsize=None)
def stream_ceiling(mix: tuple = (1, 1), nbytes: int | None = None) -> Ceiling:
    """The fastest of several ways to move `nbytes` (read + written, default 1 GiB per array)
    in the mix (R arrays read, W written) on this GPU, timed with the L2 flush. For a 1:1 mix
    cuMemcpyDtoD competes too."""
    cuda = driver()
    r, w = mix
    arrays = r + w
    n4 = (nbytes // (16 * arrays)) if nbytes else (1 << 26)  # float4 per array
    n4 = max(n4, 1)
    free, _ = cuda.mem_get_info()
    n4 = min(n4, free // (16 * (arrays + 1)))
    bufs = [cuda.mem_alloc(16 * n4) for _ in range(arrays)]
    for bf in bufs:
        cuda.memset_d32(bf, 0x3F800000, 4 * n4)
    sink = cuda.mem_alloc(4)
    ptrs = bufs[:r] + [bufs[0]] * (3 - r) + bufs[r:] + [bufs[-1]] * (2 - w)
    moved = 16 * n4 * arrays
    best = None
    try:
        for u, threads in _STREAM_VARIANTS:
            fn = _stream_module().get_function(f"stream_r{r}w{w}_u{u}")
            fn.prepare("PPPPPqP")
            grid = (-(-n4 // (u * threads)), 1, 1)
            t = time_fn(lambda: fn.prepared_call(grid, (threads, 1, 1), *ptrs, n4, sink),
                        warmup=2, repeats=15)
            c = Ceiling(moved / (t.median_ms * 1e-3) / 1e9, t.median_ms, mix,
                        f"float4 stream kernel {r} read : {w} written")
            best = c if best is None or c.gbps > best.gbps else best
        if mix == (1, 1):
            t = time_fn(lambda: cuda.memcpy_dtod(bufs[1], bufs[0], 16 * n4), warmup=2, repeats=15)
            c = Ceiling(moved / (t.median_ms * 1e-3) / 1e9, t.median_ms, mix, "cuMemcpyDtoD")
            best = c if c.gbps > best.gbps else best
    finally:
        for bf in bufs:
            bf.free()
        sink.free()
    return best


def copy_bandwidth_gbps() -> float:
    """The copy ceiling (read + write, 1:1) on this GPU in GB/s: the best of a tuned float4
    copy kernel and cuMemcpyDtoD at 1 GiB. Ops with another mix of reads and writes are held
    to stream_ceiling(their mix)."""
    return stream_ceiling((1, 1)).gbps


def read_bandwidth_gbps() -> float:
    """The read-only ceiling: a float4 stream that only reads (reductions, histograms)."""
    return stream_ceiling((1, 0)).gbps


def datasheet_bandwidth_gbps() -> float | None:
    """What the memory's clock and bus width promise (the vendor's figure), for comparison."""
    return device_info().get("theoretical_bw_gbps")


# Datasheet dense rates in TFLOP/s (SXM parts; H200 shares the H100's arithmetic). These are
# vendor figures, not measurements: the reports say so.
# dp4a (int8 dot products on the CUDA cores, 4 multiply-adds = 8 ops an instruction): no
# datasheet lists it; 64 instructions a clock an SM (measured on an H200, 2026-11-26:
# .notes/probe_31_43.md) x 8 ops x SMs x boost clock
DATASHEET_TFLOPS = {
    "H100 PCIe": {"fp32": 51.2, "tf32": 378, "bf16": 756, "fp16": 756, "fp8": 1513, "int8": 1513,
                  "dp4a": 102.4},
    "H100": {"fp32": 66.9, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979, "int8": 1979,
             "dp4a": 133.8},
    "H200": {"fp32": 66.9, "tf32": 495, "bf16": 989, "fp16": 989, "fp8": 1979, "int8": 1979,
             "dp4a": 133.8},
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
