"""Day 21 driver: matrix transpose, naive to a 64 x 64 tile with 16-byte accesses.

    from days.day21_transpose_matrix.driver import transpose
    y = transpose(x)                      # numpy in, numpy out: y = x.T (float32, contiguous)
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: 1 thread/element, strided writes",
    "v2": "32x32 shared tile (32-way conflicts on the column read)",
    "v3": "32x32 tile padded to 33 columns",
    "v4": "32x32 tile, XOR swizzle, no padding",
    "v5": "padded tile, 32x8 threads, 4 elements each",
    "v6": "64x64 tile, 512 threads (8 elements each), column order, 16-byte loads/stores where aligned",
}
BEST = "v6"
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192 (the input's shape; the output is COLSxROWS)"
SIZES = {"small": (100, 75), "default": (8192, 8192), "large": (16384, 16384)}
# 1 row / 1 column; 31, 33 and 65 (a partial tile of every tile size); cols % 4 and rows % 4
# in every combination (v6's four paths: 16-byte loads and/or stores, or scalars); a tile
# only partly inside on both axes; tall and wide
CHECK_SIZES = [(1, 1), (1, 1000), (1000, 1), (31, 33), (33, 31), (64, 64), (65, 63), (4, 4),
               (8, 12), (128, 36), (100, 3), (3, 100), (257, 1023), (1023, 129), (2, 2049),
               (4097, 31), (200, 300)]
# the curriculum's square, its odd shape, one more awkward shape
BENCH_SIZES = [(8192, 8192), (4097, 3001), (8191, 3073)]
ODD_SIZES = [(4097, 3001), (8191, 3073)]

MAX_ELEMENTS = 2 ** 31 - 256  # 32-bit indices; a tile may reach 127 past an edge

# v6's tile: <TR>x<TC>_n<THREADS>[_col] (kernel.cu instantiates these; .notes/day21_sweep.py)
V6_CANDIDATES = {
    "64x64_n256": (64, 64, 256),
    "64x64_n128": (64, 64, 128),
    "64x64_n512": (64, 64, 512),
    "32x32_n128": (32, 32, 128),
    "128x64_n256": (128, 64, 256),
    "64x128_n256": (64, 128, 256),
    "64x64_n256_col": (64, 64, 256),
    "64x64_n512_col": (64, 64, 512),
    "128x64_n256_col": (128, 64, 256),
}
V6_TILE = "64x64_n512_col"   # fastest at most bench shapes (H200, 2026-11-23, .notes/day21_sweep.py)


def validate_size(size):
    rows, cols = size
    if rows * cols > MAX_ELEMENTS:
        raise ValueError(f"{rows} x {cols} = {rows * cols} elements: the kernels index with "
                         f"32-bit integers (at most {MAX_ELEMENTS})")


def make_case(size, rng):
    rows, cols = size
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((cols, rows), np.float32)},
                  reference=lambda: {"y": reference.transpose(x)},
                  bytes=2 * x.nbytes,  # read x once, write y once
                  tol=0.0)             # a transpose moves bits: exact or wrong


def v6_kernel(candidate: str, rows: int, cols: int) -> tuple[str, int, int]:
    """(kernel name, tiles, threads) of a v6 candidate at a shape: 16-byte loads when input
    rows start 16-byte aligned (cols % 4 == 0), 16-byte stores when output rows do
    (rows % 4 == 0)."""
    if candidate not in V6_CANDIDATES:
        raise ValueError(f"unknown v6 candidate {candidate!r}: {', '.join(V6_CANDIDATES)}")
    tr, tc, nt = V6_CANDIDATES[candidate]
    path = ("l4" if cols % 4 == 0 else "l1") + ("s4" if rows % 4 == 0 else "s1")
    return f"transpose_v6_{candidate}_{path}", H.cdiv(rows, tr) * H.cdiv(cols, tc), nt


def launch_v6(candidate, d):
    rows, cols = d.size
    name, tiles, threads = v6_kernel(candidate, rows, cols)
    K(name, "PPii").prepared_call((tiles, 1, 1), (threads, 1, 1), d.x, d.y, rows, cols)


def launch(version, d):
    version = A.version(version, VERSIONS)
    rows, cols = d.size
    if version == "v6":
        launch_v6(V6_TILE, d)
        return
    if version == "v1":
        grid, block = H.cdiv(rows, 8) * H.cdiv(cols, 32), (32, 8, 1)
    elif version == "v5":
        grid, block = H.cdiv(rows, 32) * H.cdiv(cols, 32), (32, 8, 1)
    else:  # v2-v4: 32 x 32 threads, one element each
        grid, block = H.cdiv(rows, 32) * H.cdiv(cols, 32), (32, 32, 1)
    K(f"transpose_{version}", "PPii").prepared_call((grid, 1, 1), block, d.x, d.y, rows, cols)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x = as_torch(d.array("x"))
    return {"torch .t().contiguous()": lambda: x.t().contiguous()}


def transpose(x, version=BEST):
    """x.T of a 2-D array [rows, cols] on the GPU, as a C-contiguous float32 array [cols, rows]
    (integer and float64 input converts to float32). An empty array gives an empty result."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    rows, cols = x.shape
    if x.size == 0:
        return np.empty((cols, rows), np.float32)
    validate_size(x.shape)
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": ((cols, rows), np.float32)})
    return H.run(launch, version, case)["y"]


# --- the bar ----------------------------------------------------------------------------
BAR = [
    {"sizes": [(8192, 8192)], "pct": 90, "vs_baseline": 1.0},
    # 4097x3001 moves 98 MB, too few for a copy of the same bytes to reach the full rate (94% of
    # it on the H200): by CONVENTIONS.md its bar is stated against that same-bytes copy
    {"sizes": [(4097, 3001)], "size_pct": 80, "vs_baseline": 1.0},
    {"sizes": [s for s in ODD_SIZES if s != (4097, 3001)], "pct": 80, "vs_baseline": 1.0},
]
