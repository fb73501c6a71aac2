"""Day 2 driver: vector add in three versions, and the PCIe transfers that dwarf it."""
import numpy as np

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
}
SIZE_HELP = "N floats, e.g. 2^28"
SIZES = {"small": (1000,), "default": (2 ** 28,), "large": (2 ** 30,)}
CHECK_SIZES = [(1,), (3,), (31,), (33,), (1023,), (1000003,), (2 ** 22 + 5,)]
BENCH_SIZES = [(2 ** 20,), (2 ** 24,), (2 ** 28,)]


def make_case(size, rng):
    (n,) = size
    a = rng.standard_normal(n).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((n,), np.float32)},
                  reference=lambda: {"c": reference.vector_add(a, b)},
                  bytes=3 * a.nbytes)  # read a and b, write c


def launch(version, d):
    (n,) = d.size
    if version == "v1":
        grid = H.cdiv(n, THREADS)
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


def vector_add(a, b, version="v3"):
    a = np.ascontiguousarray(a, dtype=np.float32).ravel()
    b = np.ascontiguousarray(b, dtype=np.float32).ravel()
    if a.shape != b.shape:
        raise ValueError(f"a and b differ in length: {a.shape} vs {b.shape}")
    return H.run(launch, version, H.Case(a.shape, {"a": a, "b": b}, {"c": (a.shape, np.float32)}))["c"]


def transfer_times(n: int, repeats: int = 3) -> dict:
    """Median ms to move n floats host->device and back, from pageable and from pinned memory."""
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
