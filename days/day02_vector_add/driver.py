"""Day 2 driver: vector add in three versions, and the PCIe transfers that dwarf it.

    from days.day02_vector_add.driver import vector_add, transfer_times
    c = vector_add(a, b)              # numpy in, numpy out: float32 vectors of one length
    transfer_times(2 ** 28)           # ms to move 2^28 floats each way, pageable and pinned
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none
from common.gpu import device_info, driver

from . import reference

K = H.Kernels(__file__)
THREADS = 256
BLOCKS_PER_SM = 8  # 8 x 256 = 2048 threads: a full Hopper SM

VERSIONS = {
    "v1": "one element per thread",
    "v2": "grid-stride loop",
    "v3": "grid-stride, float4 x2 unrolled",
    "v4": "one float4 per thread, no loop",
}
BEST = "v4"  # fastest correct version at 2^28 (results/day02.json)
SIZE_HELP = "N floats, e.g. 2^28"
SIZES = {"small": (1000,), "default": (2 ** 28,), "large": (2 ** 30,)}
CHECK_SIZES = [(1,), (3,), (31,), (33,), (1023,), (1000003,), (2 ** 22 + 5,)]
# 2^28 + 3: a length that is not a multiple of 4 (the float4 versions' scalar tail), at full size
BENCH_SIZES = [(2 ** 20,), (2 ** 24,), (2 ** 28,), (2 ** 28 + 3,)]
# CURRICULUM.md: >= 90% of the memory ceiling at 2^28 and 2^28 + 3 elements, and at least as
# fast as torch.add there
BAR = [{"sizes": [(2 ** 28,), (2 ** 28 + 3,)], "pct": 90, "vs_baseline": 1.0}]


def make_case(size, rng):
    (n,) = size
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((n,), np.float32)},
                  reference=lambda: {"c": reference.vector_add(a, b)},
                  bytes=3 * a.nbytes,        # read a and b, write c
                  read_bytes=2 * a.nbytes)   # two bytes read per byte written


def launch(version, d):
    A.version(version, VERSIONS)
    (n,) = d.size
    if version == "v1":
        grid = H.cdiv(n, THREADS)
    elif version == "v4":  # one float4 (or one leftover float) per thread
        grid = H.cdiv(n // 4 + n % 4, THREADS)
    else:  # a fixed grid that fills the GPU, no larger than the work
        per_thread = 4 if version == "v3" else 1
        grid = min(device_info()["sms"] * BLOCKS_PER_SM, H.cdiv(n, THREADS * per_thread))
    K(f"vadd_{version}", "PPPq").prepared_call((max(grid, 1), 1, 1), (THREADS, 1, 1),
                                               d.a, d.b, d.c, n)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    a, b, c = (as_torch(d.array(k)) for k in "abc")
    return {"torch.add": lambda: torch.add(a, b, out=c)}


def vector_add(a, b, version=BEST):
    """c = a + b on the GPU: a and b are 1-D arrays of real numbers of one length (converted to
    float32); c is float32. Empty vectors give an empty c without a launch."""
    version = A.version(version, VERSIONS)
    a = A.floats(a, "a", ndim=1, what="(a vector)")
    b = A.floats(b, "b", ndim=1, what="(a vector)")
    if a.shape != b.shape:
        raise ValueError(f"a and b differ in length: {a.shape[0]} vs {b.shape[0]}")
    if a.size == 0:
        return np.empty(0, np.float32)
    return H.run(launch, version, H.Case(a.shape, {"a": a, "b": b}, {"c": (a.shape, np.float32)}))["c"]


def transfer_times(n: int, repeats: int = 3) -> dict:
    """Median ms to move n floats host->device and back, from pageable and from pinned memory
    (n >= 1: there is nothing to time in an empty copy; repeats >= 1)."""
    n = A.count(n, "n", low=1)
    repeats = A.count(repeats, "repeats", low=1)
    from common.timing import time_fn

    cuda = driver()
    host = np.ones(n, np.float32)
    pinned = cuda.pagelocked_empty(n, np.float32)
    pinned[:] = 1
    dev = cuda.mem_alloc(host.nbytes)

    def timed(fn):  # a copy over the host link does not care what is in L2
        return time_fn(fn, warmup=1, repeats=repeats, flush_l2=False).median_ms

    out = {"bytes": host.nbytes,
           "h2d_pageable_ms": timed(lambda: cuda.memcpy_htod(dev, host)),
           "h2d_pinned_ms": timed(lambda: cuda.memcpy_htod(dev, pinned)),
           "d2h_pageable_ms": timed(lambda: cuda.memcpy_dtoh(host, dev)),
           "d2h_pinned_ms": timed(lambda: cuda.memcpy_dtoh(pinned, dev))}
    dev.free()
    return out


def extras(report, mode):
    if mode == "check":
        return
    n = SIZES["default"][0]
    t = transfer_times(n)
    gb = t["bytes"] / 1e9
    rows = [[k.replace("_ms", "").replace("_", " "), f"{v:.2f} ms", f"{gb / (v * 1e-3):.1f} GB/s"]
            for k, v in t.items() if k.endswith("_ms")]
    report.section(f"host <-> device transfers of one {n}-float array ({gb:.2f} GB), "
                   "not part of the kernel timings below", rows, ["transfer", "median", "rate"])
    report.record("transfers", t)
