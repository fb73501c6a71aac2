"""Day 44 driver: copies and a transpose through Hopper's Tensor Memory Accelerator.

    from days.day44_tma_bulk_copy.driver import copy, transpose
    y = copy(x)           # numpy in, numpy out (float32), through TMA boxes; version=BEST
    t = transpose(x)      # x.T, C-contiguous

A size is ROWSxCOLSxOP: OP 1 copies the matrix, OP 2 transposes it. One ladder, two ops: the
bar's clauses pick the sizes of each op.
"""
import numpy as np

from common import args as A
from common import gpu
from common import harness as H
from common import tma
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "SIMT: threads move the data (float4 copy; 32x32 padded shared tile transpose)",
    "v2": "TMA, one box per block: load, mbarrier wait, (shared transpose), store",
    "v3": "TMA, persistent rings: several boxes in flight per block (copy) or warp (transpose)",
}
BEST = "v2"   # the sweep (H200, 2026-11-26): v2 fastest or tied on both ops
COPY, TRANSPOSE = 1, 2
SIZE_HELP = "ROWSxCOLSxOP, OP 1 = copy, 2 = transpose, e.g. 8192x8192x2"
SIZES = {"small": (100, 76, TRANSPOSE), "default": (8192, 8192, TRANSPOSE),
         "large": (16384, 16384, COPY)}
# copies: 1 float, a tail only (n < 256), n % 256 != 0 with a body, a partial last box of 32
# rows, an odd length; transposes: 1x1 and odd shapes (rows or cols % 4 != 0: v2, v3 run v1),
# 4x4 (one partial 32x32 tile), tiles partial on either axis, tall and wide
CHECK_SIZES = [(1, 1, COPY), (3, 50, COPY), (1, 1000003, COPY), (257, 260, COPY), (31, 33, COPY),
               (1, 1, TRANSPOSE), (31, 33, TRANSPOSE), (4, 4, TRANSPOSE), (36, 100, TRANSPOSE),
               (64, 64, TRANSPOSE), (1000, 1004, TRANSPOSE), (4, 2052, TRANSPOSE),
               (2052, 8, TRANSPOSE), (33, 64, TRANSPOSE), (256, 260, TRANSPOSE)]
# the copy at 1 GiB an array (where the copy ceiling itself is measured) and an awkward 100 MB
# one (judged against a same-bytes copy: too small for the full rate); the transpose at
# 8192^2 (256 MB), at an awkward shape a tensor map still takes (rows 16400 bytes: boxes cut
# 128-byte lines) and at one it cannot (odd: v1 for every version)
BENCH_SIZES = [(16384, 16384, COPY), (8191, 3073, COPY), (8192, 8192, TRANSPOSE),
               (8004, 4100, TRANSPOSE), (8191, 3073, TRANSPOSE)]
BAR = [
    {"sizes": [(16384, 16384, COPY)], "pct": 95},
    {"sizes": [(8191, 3073, COPY)], "size_pct": 95},
    {"sizes": [(8192, 8192, TRANSPOSE)], "pct": 90},
    {"sizes": [(8004, 4100, TRANSPOSE)], "size_pct": 90},
]

COPY_W, COPY_R = 256, 32          # the copy's flat view [n / 256, 256] and its box rows
T = 32                            # transpose sub-tile (a 128-byte swizzled box is 32 floats wide)
# v3's configuration and the sweep's candidates (kernel.cu, built with -DDAY44_SWEEP):
# copy (box rows, stages); transpose (tile rows, tile cols, input stages, warps)
# copy (box rows, stages, blocks an SM); transpose (tile rows, tile cols, input stages, warps,
# tiles walked down the columns?)
V3_COPY = (32, 6, 1)
V3_TRANSPOSE = (32, 64, 4, 4, 1)
COPY_CANDIDATES = [(32, 6, 1), (16, 8, 1), (32, 3, 2), (16, 4, 3), (32, 2, 3), (64, 3, 1)]
TRANSPOSE_CANDIDATES = [(32, 32, 4, 8, 0), (32, 32, 4, 8, 1), (64, 32, 4, 4, 0), (64, 32, 4, 4, 1),
                        (32, 64, 4, 4, 1), (64, 64, 2, 3, 1), (32, 32, 2, 4, 1), (64, 32, 2, 4, 1)]


def copy_smem(br, stages, per_sm=1) -> int:
    return stages * br * COPY_W * 4 + 128


def transpose_smem(tr, tc, stages, warps, cols=0) -> int:
    return warps * (stages + 2) * tr * tc * 4 + 1024


MAX_ELEMENTS = 2 ** 31 - 256
MAX_GRID_Y = 65535


def validate_size(size):
    rows, cols, op = size
    if op not in (COPY, TRANSPOSE):
        raise ValueError(f"OP = {op}: 1 (copy) or 2 (transpose)")
    if op == TRANSPOSE and max(rows, cols) > MAX_GRID_Y * T:
        raise ValueError(f"{rows} x {cols}: a transpose takes at most {MAX_GRID_Y * T} rows and "
                         f"columns (one grid dimension holds a side's {T}-wide tiles, at most "
                         f"{MAX_GRID_Y})")
    if rows * cols > MAX_ELEMENTS:
        raise ValueError(f"{rows} x {cols} = {rows * cols} elements: at most {MAX_ELEMENTS} "
                         "(32-bit box coordinates and indices)")


def tma_transposable(rows, cols) -> bool:
    """A tensor map's row stride is a multiple of 16 bytes: 4 floats, in and out."""
    return rows % 4 == 0 and cols % 4 == 0


def same_as(version, size):
    rows, cols, op = size
    if op == TRANSPOSE and version != "v1" and not tma_transposable(rows, cols):
        return "v1"
    return None


def make_case(size, rng):
    rows, cols, op = size
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    out_shape = (rows, cols) if op == COPY else (cols, rows)
    n = rows * cols
    return H.Case(size, inputs={"x": x}, outputs={"y": (out_shape, np.float32)},
                  reference=lambda: {"y": reference.copy(x) if op == COPY else reference.transpose(x)},
                  tol={"y": 0.0}, bytes=2 * n * 4, read_bytes=n * 4)


# --- launching --------------------------------------------------------------------------------

def _maps(d, op, rows_box: int = COPY_R, cols_box: int = T):
    """Device addresses of the tensor maps (in, out) of a case (tma.cached_map). Copy: the flat
    view [n / 256, 256] in boxes of rows_box x 256, both ways. Transpose: in [rows, cols] in
    boxes of 32 columns x rows_box rows, out [cols, rows] in boxes of 32 x cols_box, both with
    the 128-byte swizzle."""
    rows, cols, _ = d.size
    if op == COPY:
        dims, box = (COPY_W, rows * cols // COPY_W), (COPY_W, rows_box)
        return (tma.cached_map(d, d.x, "float32", dims, box, swizzle=0),
                tma.cached_map(d, d.y, "float32", dims, box, swizzle=0))
    return (tma.cached_map(d, d.x, "float32", (cols, rows), (T, rows_box)),
            tma.cached_map(d, d.y, "float32", (rows, cols), (T, cols_box)))


def launch(version, d, config=None):
    """Enqueue a version; `config` (the sweep's) picks a v3 candidate kernel instead."""
    A.version(version, VERSIONS)
    rows, cols, op = d.size
    n = rows * cols
    if op == COPY:
        if version == "v1":
            blocks = min(H.cdiv(n // 4, 256), gpu.sm_count() * 8) or 1
            K("copy_v1", "PPq").prepared_call((blocks, 1, 1), (256, 1, 1), d.x, d.y, n)
            return
        br, stages, per_sm = (config or V3_COPY) if version == "v3" else (COPY_R, 1, 1)
        boxes = H.cdiv(n // COPY_W, br)
        mp = _maps(d, COPY, br) if boxes else (0, 0)
        if version == "v2":
            K("copy_v2", "PPPPqi").prepared_call((max(boxes, 1), 1, 1), (32, 1, 1), *mp, d.x, d.y, n, boxes)
        else:
            name = f"copy_v3_r{br}_s{stages}" if config else "copy_v3"
            smem = copy_smem(br, stages)
            fn = K(name, "PPPPqi", dynamic_smem=smem)
            fn.prepared_call((max(min(boxes, per_sm * gpu.sm_count()), 1), 1, 1), (32, 1, 1), *mp, d.x, d.y,
                             n, boxes, shared_size=smem)
        return
    if version == "v1" or not tma_transposable(rows, cols):
        K("transpose_v1", "PPii").prepared_call((H.cdiv(cols, T), H.cdiv(rows, T), 1), (32, 8, 1),
                                                 d.x, d.y, rows, cols)
        return
    if version == "v2":
        maps = _maps(d, TRANSPOSE)
        grid = (H.cdiv(cols, T), H.cdiv(rows, T), 1)
        if config == "rows":                       # the sweep's row-order candidate
            K("transpose_v2_rows", "PP").prepared_call(grid, (256, 1, 1), *maps)
            return
        K("transpose_v2", "PP").prepared_call(grid[1::-1] + (1,), (256, 1, 1), *maps)
        return
    tr_, tc_, stages, warps, cols_order = config or V3_TRANSPOSE
    maps = _maps(d, TRANSPOSE, tr_, tc_)
    tiles_r, tiles_c = H.cdiv(rows, tr_), H.cdiv(cols, tc_)
    name = f"transpose_v3_t{tr_}x{tc_}_s{stages}_w{warps}_c{cols_order}" if config else "transpose_v3"
    smem = transpose_smem(tr_, tc_, stages, warps)
    fn = K(name, "PPii", dynamic_smem=smem)
    blocks = max(min(H.cdiv(tiles_r * tiles_c, warps), gpu.sm_count()), 1)
    fn.prepared_call((blocks, 1, 1), (warps * 32, 1, 1), *maps, tiles_r, tiles_c, shared_size=smem)


def baselines(d):
    """A copy: the driver's device-to-device memcpy and torch's clone; a transpose: torch's
    .t().contiguous(). All on the case's own device arrays."""
    from common.gpu import driver

    rows, cols, op = d.size
    out = {}
    if op == COPY:
        cuda = driver()
        nbytes = rows * cols * 4
        out["cuMemcpyDtoD"] = lambda: cuda.memcpy_dtod(d.y, d.x, nbytes)
    torch = torch_or_none()
    if torch is not None:
        x = as_torch(d.array("x"))
        if op == COPY:
            out["torch clone"] = lambda: x.clone()
        else:
            out["torch .t().contiguous()"] = lambda: x.t().contiguous()
    return out


def extras(report, mode):
    """Day 21's best SIMT transpose on the same bench shapes, timed the same way: the bar a TMA
    transpose has to clear to be worth its code."""
    if mode != "bench":
        return
    from common.runner import check_and_time
    from days.day21_transpose_matrix import driver as day21

    rows_out = []
    for size in [s for s in BENCH_SIZES if s[2] == TRANSPOSE]:
        case = make_case(size, np.random.default_rng(1))
        r = check_and_time(report, f"day 21 {day21.BEST}",
                           lambda dd: day21.launch(day21.BEST, _as_day21(dd)), case)
        rows_out.append([H.size_str(size[:2]), f"{r['median_ms']:.3f}", f"{r['gbps']:.0f}",
                         f"{r['pct_of_ceiling']:.1f}", "ok" if r["ok"] else "FAIL"])
    report.section(f"day 21's {day21.BEST} (SIMT, 64x64 tiles) on the same transposes", rows_out,
                   ["size", "ms", "GB/s", "% of ceiling", "ok"])


class _as_day21:
    """A day-44 DeviceCase seen with day 21's (rows, cols) size."""

    def __init__(self, d):
        self._d = d
        self.size = d.size[:2]

    def __getattr__(self, name):
        return getattr(self._d, name)


# --- public functions -------------------------------------------------------------------------

def _run(x, op, version):
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    rows, cols = x.shape
    out_shape = (rows, cols) if op == COPY else (cols, rows)
    if x.size == 0:
        return np.empty(out_shape, np.float32)
    validate_size((rows, cols, op))
    case = H.Case((rows, cols, op), inputs={"x": x}, outputs={"y": (out_shape, np.float32)})
    return H.run(launch, version, case)["y"]


def copy(x, version=BEST):
    """A copy of a 2-D float32 array made on the GPU (integers and float64 convert to float32)."""
    return _run(x, COPY, version)


def transpose(x, version=BEST):
    """x.T of a 2-D array [rows, cols] as a C-contiguous float32 array [cols, rows]."""
    return _run(x, TRANSPOSE, version)
