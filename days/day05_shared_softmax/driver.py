"""Day 5 driver: block-per-row softmax, four versions, checked against float64 and timed.

    from days.day05_shared_softmax.driver import softmax
    y = softmax(x, version="v4")          # numpy in, numpy out (float32)
"""
import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256  # one block per row; v1's tree reduction needs a power of two

VERSIONS = {
    "v1": "shared-memory tree reductions, 3 passes",
    "v2": "warp-shuffle reductions, 3 passes",
    "v3": "online max+sum, 2 passes",
    "v4": "row in registers, float4, 1 read 1 write",  # a warp per row when cols <= 1024
}
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192"
SIZES = {"small": (64, 1000), "default": (8192, 8192), "large": (16384, 16384)}
# ragged widths: 1, 33, 1000, 8193 (odd: the scalar path), 100003 (longer than registers hold)
CHECK_SIZES = [(1, 1), (7, 33), (5, 1000), (3, 8193), (4, 4096), (2, 100003), (1000, 5), (33, 16388),
               (13, 1024), (9, 1025), (3, 999)]
BENCH_SIZES = [(8192, 8192), (65536, 1024), (1024, 65536)]


def make_case(size, rng, scale=3.0):
    rows, cols = size
    x = (rng.standard_normal((rows, cols)) * scale).astype(np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((rows, cols), np.float32)},
                  reference=lambda: {"y": reference.softmax(x)},
                  bytes=2 * x.nbytes)  # read x once, write y once


WARP_ROW_MAX = 1024  # rows up to this width get one warp each in v4


def v4_kernel_name(cols: int) -> str:
    """The v4 instantiation for a row width: the smallest register array that holds the row."""
    vec = 4 if cols % 4 == 0 else 1  # float4 needs every row 16-byte aligned
    if cols <= WARP_ROW_MAX:
        per_lane = H.cdiv(cols // vec, 32)
        for items in ((1, 2, 4, 8) if vec == 4 else (4, 8, 16, 32)):
            if per_lane <= items:
                return f"softmax_v4_warp_vec{vec}_items{items}"
    per_thread = H.cdiv(cols // vec, THREADS)
    for items in (1, 2, 4, 8, 16) + ((32, 64) if vec == 1 else ()):
        if per_thread <= items:
            return f"softmax_v4_vec{vec}_items{items}"
    return "softmax_v4_long_vec4" if vec == 4 else "softmax_v3"


def launch(version, d):
    rows, cols = d.size
    name = v4_kernel_name(cols) if version == "v4" else f"softmax_{version}"
    shared = THREADS * 4 if version == "v1" else 0
    grid = H.cdiv(rows, THREADS // 32) if "_warp_" in name else rows
    K(name, "PPii").prepared_call((grid, 1, 1), (THREADS, 1, 1), d.x, d.y, rows, cols,
                                  shared_size=shared)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x = as_torch(d.array("x"))
    return {"torch.softmax": lambda: torch.softmax(x, dim=-1)}


def softmax(x, version="v4"):
    """Row softmax of a 2-D float32 array on the GPU."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"softmax expects a 2-D array, got shape {x.shape}")
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": (x.shape, np.float32)})
    return H.run(launch, version, case)["y"]
