"""Day 4 driver: one thread per row softmax, naive and max-subtracted."""
import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 128

VERSIONS = {
    "v1": "one thread per row, naive exp (overflows)",
    "v2": "one thread per row, max subtracted",
}
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192"
SIZES = {"small": (64, 1000), "default": (8192, 8192), "large": (65536, 8192)}
CHECK_SIZES = [(1, 1), (1, 33), (33, 1000), (257, 31), (5, 8193), (1000, 7)]
BENCH_SIZES = [(8192, 8192), (65536, 1024)]


def make_case(size, rng):
    rows, cols = size
    # |x| stays far below 88 here, so even v1 is right; extras() shows what happens above it
    x = (rng.standard_normal(size) * 3).astype(np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": (size, np.float32)},
                  reference=lambda: {"y": reference.softmax(x)}, bytes=2 * x.nbytes)


def launch(version, d):
    rows, cols = d.size
    K(f"softmax_{version}", "PPii").prepared_call((H.cdiv(rows, THREADS), 1, 1), (THREADS, 1, 1),
                                                  d.x, d.y, rows, cols)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x = as_torch(d.array("x"))
    return {"torch.softmax": lambda: torch.softmax(x, dim=-1)}


def softmax(x, version="v2"):
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"softmax expects a 2-D array, got shape {x.shape}")
    return H.run(launch, version, H.Case(x.shape, {"x": x}, {"y": (x.shape, np.float32)}))["y"]


def overflow_demo(rng=None):
    """Rows whose values reach 10, 100, 1e3, 1e4: how many outputs each version gets wrong."""
    from common.check import compare

    rng = rng or np.random.default_rng(4)
    rows = []
    for top in (10.0, 100.0, 1e3, 1e4):
        x = (rng.uniform(-1, 1, (16, 1000)) * top).astype(np.float32)
        ref = reference.softmax(x)
        row = [f"{top:g}"]
        for v in VERSIONS:
            y = softmax(x, v)
            r = compare(y, ref)
            row.append("ok" if r.ok else f"{int((~np.isfinite(y)).sum())} NaN/inf of {y.size}")
        rows.append(row)
    return rows


def extras(report, mode):
    rows = overflow_demo()
    report.section(f"values up to |x| (float32 exp overflows above {reference.FLOAT32_EXP_LIMIT:.2f})",
                   rows, ["max |x|"] + list(VERSIONS))
    report.record("overflow", rows)
