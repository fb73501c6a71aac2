"""Day 3 driver: matrix add with 2-D and flattened 1-D launches."""
import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none
from common.gpu import device_info

from . import reference

K = H.Kernels(__file__)
BLOCK_2D = (32, 8, 1)  # 256 threads; x is the fast (warp) dimension
THREADS = 256
MAX_GRID_Y = 65535     # gridDim.y and gridDim.z are limited to 65535 blocks

VERSIONS = {
    "v1": "2-D grid, x along rows (uncoalesced)",
    "v2": "2-D grid, x along columns",
    "v3": "flattened 1-D",
    "v4": "flattened 1-D, float4 grid-stride",
}
SIZE_HELP = "ROWSxCOLS, e.g. 16384x16384"
SIZES = {"small": (100, 300), "default": (16384, 16384), "large": (32768, 32768)}
CHECK_SIZES = [(1, 1), (1, 1000), (1000, 1), (33, 31), (257, 1023), (1001, 999), (3, 100003)]
BENCH_SIZES = [(1024, 1024), (4096, 4096), (16384, 16384), (2048, 131072)]


def validate_size(size):
    rows, cols = size
    # v1 puts columns on grid.y and v2 puts rows there: both must fit 65535 blocks of 8
    limit = MAX_GRID_Y * BLOCK_2D[1]
    if rows > limit or cols > limit:
        raise ValueError(f"the 2-D versions take at most {limit} rows and columns "
                         f"(gridDim.y <= {MAX_GRID_Y} blocks of {BLOCK_2D[1]})")


def make_case(size, rng):
    a = rng.standard_normal(size).astype(np.float32)
    b = rng.standard_normal(size).astype(np.float32)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": (size, np.float32)},
                  reference=lambda: {"c": reference.matrix_add(a, b)}, bytes=3 * a.nbytes)


def launch(version, d):
    rows, cols = d.size
    bx, by, _ = BLOCK_2D
    if version == "v1":
        grid = (H.cdiv(rows, bx), H.cdiv(cols, by), 1)
        K("madd_v1", "PPPii").prepared_call(grid, BLOCK_2D, d.a, d.b, d.c, rows, cols)
    elif version == "v2":
        grid = (H.cdiv(cols, bx), H.cdiv(rows, by), 1)
        K("madd_v2", "PPPii").prepared_call(grid, BLOCK_2D, d.a, d.b, d.c, rows, cols)
    elif version == "v3":
        n = rows * cols
        K("madd_v3", "PPPq").prepared_call((H.cdiv(n, THREADS), 1, 1), (THREADS, 1, 1),
                                           d.a, d.b, d.c, n)
    else:
        n = rows * cols
        grid = max(1, min(device_info()["sms"] * 8, H.cdiv(n, 4 * THREADS)))
        K("madd_v4", "PPPq").prepared_call((grid, 1, 1), (THREADS, 1, 1), d.a, d.b, d.c, n)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    a, b, c = (as_torch(d.array(k)) for k in "abc")
    return {"torch.add": lambda: torch.add(a, b, out=c)}


def matrix_add(a, b, version="v4"):
    a = np.ascontiguousarray(a, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"need two 2-D arrays of one shape, got {a.shape} and {b.shape}")
    validate_size(a.shape)
    return H.run(launch, version, H.Case(a.shape, {"a": a, "b": b}, {"c": (a.shape, np.float32)}))["c"]
