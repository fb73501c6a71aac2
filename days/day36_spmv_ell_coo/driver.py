"""Day 36 driver: y = A x for a sparse A in COO, CSR (scalar, vector, row blocks) and ELL, on
banded, uniform random and power-law patterns and a real matrix, against cuSPARSE (CuPy).

    from days.day36_spmv_ell_coo.driver import spmv
    y = spmv(indptr, indices, data, x)      # A in CSR, numpy in, numpy out (float32); version=BEST

Every format is built from the CSR matrix on the host in make_case (formats.py), once, before
anything is timed: the timings are the product alone, as for cuSPARSE, whose CSR matrix is
built before its timing too.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import cupy_or_none

from . import formats as F
from . import reference

K = H.Kernels(__file__)
THREADS = 256

VERSIONS = {
    "v1": "COO, thread per nonzero, atomicAdd",
    "v2": "CSR scalar, thread per row",
    "v3": "CSR vector, G lanes per row (G from the mean length)",
    "v4": "ELL column-major, thread per row",
    "v5": "ELL, 4 rows a thread, 16-byte loads, early stop",
    "v6": "CSR row blocks: staged products, block segmented scan",
}
BEST = "v6"   # within 3% of the fastest at the default size and near it on every pattern (H200,
              # 2026-11-26); v4 (ELL) wins on uniform rows but cannot hold the power law's hubs
SIZE_HELP = ("PATTERNxROWSxK with K the longest row; patterns: 1 banded (K diagonals), 2 uniform "
             "random, 3 power-law, 4 the shipped matrix cage11 (only 4x39082x31), 5 edge cases, "
             "6 all empty; e.g. 3x2000000x100000")

BANDED = (1, 2_000_000, 27)          # 54M nonzeros: 27 diagonals around the main one
UNIFORM = (2, 2_000_000, 32)         # 48M nonzeros: 16..32 a row, columns anywhere in 2M
POWERLAW = (3, 2_000_000, 100_000)   # ~24M nonzeros: half the rows 1 long, hubs up to 100000
POWERLAW_ELL = (3, 1_000_000, 500)   # a power law ELL can still store (500 x 1M slots, 4 GB)
REAL = (4, F.REAL_ROWS, F.REAL_LONGEST)   # cage11: 39082 rows, 559722 nonzeros
SIZES = {"small": (2, 1000, 32), "default": UNIFORM, "large": POWERLAW}
# 1x1; rows 31 / 33 / 1000 / 100003 (no multiple of 4, 32, 256); rows longer than a warp (64),
# than a block of 1024 threads, and than v6's 2048 nonzeros a block (2500, 4500: 2 and 3 chunks;
# the edge pattern 5x1023x5 has a row of 2049 = 2048 + 1); the edge pattern: a third of the rows
# empty, one row holding all 2 rows + 3 columns (A rectangular: x longer than y), a single row;
# an all-empty matrix; cage11.
CHECK_SIZES = [(1, 1, 1), (1, 33, 5), (1, 1000, 27), (2, 31, 8), (2, 1000, 64), (2, 100003, 16),
               (3, 3000, 1500), (3, 2500, 2500), (3, 4500, 4500), (3, 20000, 1000), (5, 1, 1),
               (5, 300, 40), (5, 700, 3), (5, 1023, 5), (6, 37, 1), (6, 1, 1), REAL]
BENCH_SIZES = [BANDED, UNIFORM, POWERLAW, POWERLAW_ELL, REAL]
ELL_VERSIONS = ("v4", "v5")
ITEMS = F.ROWBLOCK_ITEMS             # v6: nonzeros a thread (2048 a block of 256)
CUSPARSE = "cuSPARSE (CuPy csr_matrix @ x)"
WITHIN = 1.1                         # the bar: the best format within 10% of cuSPARSE


def validate_size(size):
    F.validate(size)


def supports(version, size):
    """ELL pads every row to the longest: the power law with rows of 100000 would need more
    slots than 32-bit indices reach (and terabytes). The only size a version cannot take."""
    rows, w = size[1], F.longest(size)
    if version in ELL_VERSIONS and not F.ell_fits(rows, w):
        slots = max(1, w) * F.pitch_of(rows)
        return (f"ELL pads all {rows:,} rows to the longest ({w:,}): {slots:,} slots "
                f"({8 * slots / 1e12:.1f} TB), past 32-bit indexing")
    return None


def group_size(rows: int, nnz: int) -> int:
    """v3's lanes a row: the power of two >= the mean row length, 2 .. 32."""
    mean = nnz / max(rows, 1)
    g = 2
    while g < mean and g < 32:
        g *= 2
    return g


def _at_least4(a: np.ndarray, fill) -> np.ndarray:
    """pycuda cannot pass a pointer to an empty array: an all-empty matrix gets 4 unused slots."""
    return a if a.size else np.full(4, fill, a.dtype)


def device_inputs(a: F.CSR, x: np.ndarray, *, with_ell: bool = True, items: int = ITEMS):
    """The arrays every version reads (CSR, COO rows, ELL, v6's row blocks) and the scalars."""
    inputs = {"ptr": a.indptr.astype(np.int32), "col": _at_least4(a.indices, 0),
              "val": _at_least4(a.data, 0.0), "row": _at_least4(a.row_ids(), -1), "x": x}
    params = {"rows": a.rows, "cols": a.cols, "nnz": a.nnz, "group": group_size(a.rows, a.nnz),
              "items": items, "pitch": F.pitch_of(a.rows), "width": 0}
    if with_ell:
        inputs["ecol"], inputs["eval"], _ = F.ell(a)
        params["width"] = inputs["ecol"].shape[0]
    blocks = F.row_blocks(a.indptr, THREADS * items, THREADS)
    inputs["blocks"] = blocks
    params["blocks"] = len(blocks)
    return inputs, params


def csr_bytes(rows: int, cols: int, nnz: int) -> tuple[int, int]:
    """(bytes, read bytes) the product must move, counted for CSR whatever the format: values
    and column indices (8 a nonzero), row pointers, x once; y written once."""
    read = 8 * nnz + 4 * (rows + 1) + 4 * cols
    return read + 4 * rows, read


def make_case(size, rng):
    a, x = F.make(size, rng)
    inputs, params = device_inputs(a, x, with_ell=supports("v4", size) is None)
    total, read = csr_bytes(a.rows, a.cols, a.nnz)
    return H.Case(size, inputs=inputs, outputs={"y": ((a.rows,), np.float32)},
                  reference=lambda: {"y": reference.spmv(a.indptr, a.indices, a.data, x)},
                  bytes=total, read_bytes=read, params=params)


def launch(version, d):
    version = A.version(version, VERSIONS)
    p = d.params
    rows, nnz = p["rows"], p["nnz"]
    block = (THREADS, 1, 1)
    if version == "v1":
        K("spmv_zero_v1", "Pi").prepared_call((H.cdiv(rows, THREADS), 1, 1), block, d.y, rows)
        if nnz:
            K("spmv_coo_v1", "PPPPPi").prepared_call((H.cdiv(nnz, THREADS), 1, 1), block,
                                                     d.row, d.col, d.val, d.x, d.y, nnz)
    elif version == "v2":
        K("spmv_csr_scalar_v2", "PPPPPi").prepared_call((H.cdiv(rows, THREADS), 1, 1), block,
                                                        d.ptr, d.col, d.val, d.x, d.y, rows)
    elif version == "v3":
        g = p["group"]
        K(f"spmv_csr_vector_v3_g{g}", "PPPPPi").prepared_call(
            (H.cdiv(rows * g, THREADS), 1, 1), block, d.ptr, d.col, d.val, d.x, d.y, rows)
    elif version == "v4":
        K("spmv_ell_v4", "PPiiPPi").prepared_call((H.cdiv(rows, THREADS), 1, 1), block,
                                                  d.ecol, d.eval, p["pitch"], p["width"], d.x, d.y, rows)
    elif version == "v5":
        K("spmv_ell4_v5", "PPiiPPi").prepared_call((H.cdiv(p["pitch"] // 4, THREADS), 1, 1), block,
                                                   d.ecol, d.eval, p["pitch"], p["width"], d.x, d.y, rows)
    else:
        launch_rowblocks(d, p["items"])


def launch_rowblocks(d, items: int, blocks_name: str = "blocks"):
    """v6 on the row blocks in d.arrays[blocks_name] (cut for `items` nonzeros a thread)."""
    nb = d.array(blocks_name).shape[0]
    partials = d.scratch("partials", (nb,), np.float32)
    counters = d.scratch("counters", (nb,), np.int32, zero=True)   # the last chunk resets its own
    K(f"spmv_csr_rowblocks_v6_i{items}", "PPPPPPPP").prepared_call(
        (nb, 1, 1), (THREADS, 1, 1), d.array(blocks_name).gpudata, d.ptr, d.col, d.val, d.x, d.y,
        partials, counters)


def cusparse_matrix(cupy, d):
    """cupyx.scipy.sparse.csr_matrix on the case's own CSR arrays (views of pycuda memory)."""
    import cupyx.scipy.sparse as sp

    p = d.params
    nnz = p["nnz"]
    data = cupy.asarray(d.array("val"))[:nnz]
    indices = cupy.asarray(d.array("col"))[:nnz]
    indptr = cupy.asarray(d.array("ptr"))
    return sp.csr_matrix((data, indices, indptr), shape=(p["rows"], p["cols"]))


def baselines(d):
    cupy = cupy_or_none()
    if cupy is None:
        return {}
    mat = cusparse_matrix(cupy, d)
    x = cupy.asarray(d.array("x"))
    return {CUSPARSE: lambda: mat @ x}


# --- the bar: the best format within 10% of cuSPARSE everywhere, faster somewhere --------------

def _faster_somewhere(rec):
    from common.bars import fastest_correct

    best = None
    for c in rec.get("cases", []):
        libs = [b["median_ms"] for b in c.get("baseline", []) if "median_ms" in b
                and b.get("ok") is not False]
        row = fastest_correct(c)
        if libs and row is not None:
            r = min(libs) / row["median_ms"]
            if best is None or r > best[0]:
                best = (r, H.size_str(c["size"]), row["version"])
    if best is None:
        return False, "cuSPARSE not measured"
    return best[0] >= 1.0, f"{best[0]:.2f}x cuSPARSE ({best[2]}) at {best[1]}"


BAR = [{"vs_baseline": round(1 / WITHIN, 3)},   # at every pattern: >= 0.909x = within 10%
       {"text": "faster than cuSPARSE on at least one pattern", "check": _faster_somewhere}]


# --- extras: each format's storage; which kernel cuSPARSE runs ---------------------------------

def storage_rows(sizes=None) -> list[list]:
    """Bytes each format stores at the bench sizes (from the row lengths alone, drawn with the
    seed the bench uses), against CSR."""
    from common.runner import _seed_for

    out = []
    for size in sizes or BENCH_SIZES:
        lens = F.lengths(size, np.random.default_rng(_seed_for(size)))
        st = F.storage_bytes(lens)
        mb = lambda v: "-" if v is None else f"{v / 1e6:.1f}"
        out.append([H.size_str(size), F.describe(size), f"{st['nnz']:,}", mb(st["CSR"]),
                    mb(st["COO"]), mb(st["ELL"]), mb(st["CSR row blocks"]),
                    "-" if st["ELL"] is None else f"{st['ELL'] / st['CSR']:.2f}x"])
    return out


KERNEL_PROBES = [(1, 200_000, 27), (2, 200_000, 32), (3, 200_000, 100_000), REAL]


def cusparse_kernel_rows() -> list[list]:
    """The kernels cuSPARSE launches for csr_matrix @ x (CUPTI, through torch.profiler), on a
    200000-row copy of each pattern and on cage11, with their own GPU time."""
    from common.baselines import kernels_launched, torch_or_none

    cupy = cupy_or_none()
    if cupy is None or torch_or_none() is None:
        return [["-", "needs CuPy and torch", "", ""]]
    out = []
    for size in KERNEL_PROBES:
        d = H.DeviceCase(make_case(size, np.random.default_rng(36)))
        mat, x = cusparse_matrix(cupy, d), cupy.asarray(d.array("x"))
        mat @ x                                  # first call: setup outside the profile
        for name, us in kernels_launched(lambda: mat @ x):
            out.append([H.size_str(size), F.describe(size), name[:90], f"{us:.1f}"])
    return out


def extras(report, mode):
    if mode == "check":
        return
    rows = storage_rows()
    report.section("storage of each format at the bench sizes (MB; the GB/s of every version "
                   "count the CSR bytes)", rows,
                   ["size", "pattern", "nonzeros", "CSR", "COO", "ELL", "CSR row blocks", "ELL / CSR"])
    report.record("storage", rows)
    try:
        krows = cusparse_kernel_rows()
    except Exception as e:   # a profiler problem must not stop the day
        krows = [["-", f"not measured: {type(e).__name__}: {e}", "", ""]]
    report.section("cuSPARSE kernels behind csr_matrix @ x", krows,
                   ["size", "pattern", "kernel", "us"])


# --- the public function ---------------------------------------------------------------------

def checked_csr(indptr, indices, data, x):
    """The arguments of spmv (and day 37's) checked, each bad one in a sentence: (F.CSR, x as
    float32), or (None, x) for a matrix of no rows."""
    x = A.floats(x, "x", ndim=1, what="[cols]")
    indptr = A.integers(indptr, "indptr", ndim=1, low=0, what="[rows + 1]", dtype=np.int64)
    if indptr.size == 0:
        raise ValueError("indptr must hold rows + 1 offsets (at least the leading 0)")
    if indptr[0] != 0:
        raise ValueError(f"indptr[0] must be 0, got {indptr[0]}")
    if np.any(np.diff(indptr) < 0):
        i = int(np.argmax(np.diff(indptr) < 0))
        raise ValueError(f"indptr must not decrease: indptr[{i + 1}] = {indptr[i + 1]} < "
                         f"indptr[{i}] = {indptr[i]}")
    rows, cols, nnz = indptr.size - 1, x.size, int(indptr[-1])
    A.fits_int32("A", nnz, "nonzeros")
    if rows > F.MAX_ROWS:
        raise ValueError(f"A has {rows} rows: at most {F.MAX_ROWS} (the CSR vector kernel numbers "
                         "rows x 32 threads in 32-bit integers)")
    data = A.floats(data, "data", shape=(nnz,), what="(one value per nonzero: indptr[-1])")
    if nnz and cols == 0:
        raise ValueError(f"A has {nnz} nonzeros but x is empty: their columns cannot exist")
    indices = A.integers(indices, "indices", shape=(nnz,), low=0, high=max(cols, 1),
                         what="(one column per nonzero: indptr[-1])")
    if rows == 0:
        return None, x
    return F.CSR(rows, cols, indptr, indices, data), x


def spmv(indptr, indices, data, x, version=BEST) -> np.ndarray:
    """y = A x on the GPU for A given in CSR: indptr [rows + 1] (starts at 0, never decreases),
    indices [nnz] (column of each nonzero, in [0, len(x)); any order inside a row, repeats add
    up), data [nnz] (values; converted to float32), x [cols]. Returns y [rows] float32. No
    nonzeros: zeros without a launch. version picks the format (VERSIONS); ELL (v4, v5) refuses
    matrices whose padded size passes 32-bit indexing."""
    version = A.version(version, VERSIONS)
    a, x = checked_csr(indptr, indices, data, x)
    if a is None or a.nnz == 0:      # no rows, or a sum of nothing: nothing is launched
        return np.zeros(0 if a is None else a.rows, np.float32)
    rows = a.rows
    w = int(a.lengths().max())
    if version in ELL_VERSIONS and not F.ell_fits(rows, w):
        raise ValueError(f"version {version} is ELL: {rows} rows padded to the longest row ({w}) "
                         "pass 32-bit indexing; use v6 (CSR row blocks)")
    inputs, params = device_inputs(a, x, with_ell=version in ELL_VERSIONS)
    case = H.Case((0, rows, w), inputs=inputs, outputs={"y": ((rows,), np.float32)}, params=params)
    return H.run(launch, version, case)["y"]
