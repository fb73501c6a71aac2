"""Day 57 driver: row argmax / argmin and row top-k (k = 1..256) of a float32 matrix.

    from days.day57_topk_argmax.driver import argmax, argmin, topk
    i = argmax(x)                 # [rows] int64, numpy's answer (first of ties, first NaN)
    i = argmin(x)
    values, indices = topk(x, 50) # [rows, 50] float32 and int64, largest first, ties to the
                                  # lower index, NaN above everything

A size is ROWSxCOLSxK: the top-k of each row of a [ROWS, COLS] matrix. K = 1 is the argmax
(the top-1 of a row is its maximum at its first index): every version runs its argmax kernel
there, so the argmax and the top-k share one ladder.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "argmax: a thread per row; top-k: k rounds of block argmax",
    "v2": "argmax: a block per row; top-k: 8-bit radix select over the row",
    "v3": "float4; argmax: warps per row by width; top-k: 12-bit pass 1, candidates in smem",
    "v4": "v3 with a row split over a cluster of blocks when rows are few",
}
BEST = "v4"   # = v3 from V4_ROWS_BELOW rows on; faster below (results/day57.json, except 32x50257x8)
SIZE_HELP = ("ROWSxCOLSxK: top-k of each row of a [ROWS, COLS] float32 matrix, K = 1..256 "
             "(K = 1 is the argmax), e.g. 32x50257x50")
VOCAB = 50257                                            # GPT-2's vocabulary
SIZES = {"small": (8, 1000, 10), "default": (256, VOCAB, 50), "large": (4096, VOCAB, 1)}

# widths: 1 (k = cols = 1), tiny rows with every alignment, k = cols, rows of 257 (one float4
# group past a warp's), 4097 (v3 argmax: 4 warps a row), the vocabulary (8 warps a row; pass 1 of
# v3/v4 over 12 float4 loads a thread; slices of a cluster start at odd offsets); rows: 1, 31,
# 33, 70 (v4 clusters of 4), 140 (v3), 1000 rows of 37 (v3 argmax: 8 rows a block, the last
# block part empty). make_case mixes tie-heavy rows into every check size (see there): rows of
# three values at 50257 columns overflow v3's candidate buffer (the fallback over the row), rows
# of one value need every pass down to the last bit of the index.
CHECK_SIZES = [(1, 1, 1), (3, 1, 1), (1, 2, 2), (3, 7, 1), (5, 33, 4), (4, 5, 5), (7, 9, 8),
               (31, 100, 31), (1000, 37, 1), (33, 257, 256), (3, 256, 256), (33, 4097, 1),
               (9, 4097, 256), (6, VOCAB, 1), (8, VOCAB, 2), (8, VOCAB, 50), (5, VOCAB, 256),
               (70, 3001, 8), (140, 513, 9), (2, 12289, 7), (1, VOCAB, 256), (1, VOCAB, 1)]
ARGMAX_SIZES = [(4096, VOCAB, 1), (16384, 4096, 1)]      # the argmax bar: read-ceiling rate
TOPK_SIZES = [(b, VOCAB, k) for b in (32, 256) for k in (1, 8, 50, 256)]
AWKWARD = [(33, VOCAB, 50), (33, VOCAB, 256)]            # 33 rows: one past a power of two
FEW_MANY = [(1, VOCAB, 50), (1024, VOCAB, 50)]           # batch 1 (decoding), batch 1024
BENCH_SIZES = ARGMAX_SIZES + TOPK_SIZES + AWKWARD + FEW_MANY
VOCAB_SIZES = TOPK_SIZES + AWKWARD + FEW_MANY
# CURRICULUM.md / issue 13: argmax >= 85% of the read ceiling (at 4096 x 50257: 823 MB read);
# top-k faster than torch.topk on 50257-wide rows (at every k and batch benched there; at k = 1
# the libraries are torch.topk(k=1), torch.argmax and cupy.argmax, the fastest of them counts)
BAR = [{"sizes": [ARGMAX_SIZES[0]], "pct": 85},
       {"sizes": VOCAB_SIZES, "vs_baseline": 1.0}]

MAX_K = 256
V1_THREADS = 64            # v1's argmax: rows (threads) a block, so 4096 rows take 64 SMs
ARGMAX_THREADS = 256       # v2, v3 (8 warps), v4: threads a block
V3_TOPK = (512, 4)         # threads a block, float4 loads in flight a thread (kernel.cu has
V3_TOPK_CHOICES = ((256, 4), (512, 2), (512, 4), (1024, 2))   # these)
V3_ARGMAX_U = {1: 4, 4: 4, 8: 8}   # float4 loads in flight a thread, by warps a row: the whole
                           # block on a long row takes 8 (the last partial wave of blocks then
                           # still has ~32 KB in flight an SM); kernel.cu has u2/u4 (and u8 at 4, 8)
CAP = 4096                 # v3/v4 candidates kept in shared memory (8 bytes each)
NB1 = 4096                 # v3/v4 pass-1 bins (kernel.cu)
V4_ROWS_BELOW = 132        # v4 splits rows over clusters only below this many rows (else = v3)
V4_TOPK_THREADS = 512
V4_CLUSTERS = (2, 4, 8)


def validate_size(size):
    rows, cols, k = size
    A.fits_int32("rows", rows, "rows")
    A.fits_int32("cols", cols, "columns")
    if not 1 <= k <= min(MAX_K, cols):
        raise ValueError(f"K = {k}: the top-k takes 1 <= K <= min({MAX_K}, COLS) = "
                         f"{min(MAX_K, cols)}")


def topk_smem_bytes(cap: int = CAP) -> int:
    """Dynamic shared memory of a v3/v4 top-k block (kernel.cu topk_smem_bytes): the pass-1
    histogram, the k winners, the candidates."""
    return NB1 * 4 + MAX_K * 8 + cap * 8


def _rows_of_ties(x, rng):
    """Rows 1, 2, 3 of every 4 made tie-heavy (check sizes only): values rounded to halves
    (ties, and -0.0 beside +0.0 from rounding small negatives), three values 0, 1, 2 (every bin
    crowded), one value (every element tied: the index decides alone)."""
    rows, cols = x.shape
    x[1::4] = np.round(x[1::4] * 2) / 2
    x[2::4] = rng.integers(0, 3, size=x[2::4].shape).astype(np.float32)
    x[3::4] = np.float32(-1.5)


def make_case(size, rng, ties=None):
    """Logits-like rows (standard normal x 2, float32). Sizes outside BENCH_SIZES (the check
    sizes) get tie-heavy rows mixed in unless ties=False."""
    rows, cols, k = size
    x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(2.0)
    if ties if ties is not None else tuple(size) not in BENCH_SIZES:
        _rows_of_ties(x, rng)
    nbytes, read = reference.bytes_moved(rows, cols, k)

    def ref():
        if k == 1:
            i = reference.argmax(x)[:, None]
            return {"values": np.take_along_axis(x, i, 1).astype(np.float64), "indices": i}
        v, i = reference.topk(x, k)
        return {"values": v.astype(np.float64), "indices": i}

    return H.Case(size, inputs={"x": x},
                  outputs={"values": ((rows, k), np.float32), "indices": ((rows, k), np.int32)},
                  reference=ref, bytes=nbytes, read_bytes=read, tol={"values": 0.0})


# --- launching --------------------------------------------------------------------------------

def argmax_wpr(cols: int) -> int:
    """Warps a row for v3's argmax: one up to 2048 columns (8 rows a block), four up to 8192,
    else the whole block of 8."""
    return 1 if cols <= 2048 else 4 if cols <= 8192 else 8


def v4_cluster(rows: int) -> int | None:
    """Blocks a row for v4: enough that rows x C blocks fill the GPU's 132 SMs about once
    (8 below 33 rows, 4 below 66, 2 below 132); None from V4_ROWS_BELOW rows on (v3's kernel)."""
    if rows >= V4_ROWS_BELOW:
        return None
    return 8 if rows * 4 < V4_ROWS_BELOW else 4 if rows * 2 < V4_ROWS_BELOW else 2


def same_as(version, size):
    """v4 runs v3's kernels from V4_ROWS_BELOW rows on."""
    return "v3" if version == "v4" and v4_cluster(size[0]) is None else None


def kernel_for(version, rows, cols, k, *, minimum=False, config=None):
    """(kernel name, grid, block, dynamic shared bytes, takes k and cap) of a version at a size.
    `config` is a sweep candidate: v3 argmax (wpr, U), v3 top-k (threads, U), v4 (C, threads)."""
    mm = "min" if minimum else "max"
    if version == "v4" and v4_cluster(rows) is None and config is None:
        version = "v3"
    if k == 1:
        if version == "v1":
            return f"argmax_v1_{mm}", (H.cdiv(rows, V1_THREADS),), V1_THREADS, 0, False
        if version == "v2":
            return f"argmax_v2_{mm}", (rows,), ARGMAX_THREADS, 0, False
        if version == "v3":
            wpr, u = config or (argmax_wpr(cols), V3_ARGMAX_U[argmax_wpr(cols)])
            return f"argmax_v3_w{wpr}_u{u}_{mm}", (H.cdiv(rows, 8 // wpr),), 256, 0, False
        c = (config or (v4_cluster(rows),))[0]
        return f"argmax_v4_c{c}_{mm}", (rows * c,), 256, 0, False
    if minimum:
        raise ValueError("the top-k kernels take the largest k only (k > 1 with minimum)")
    if version == "v1":
        return "topk_v1_rounds", (rows,), 256, 0, True
    if version == "v2":
        return "topk_v2_radix", (rows,), 256, 0, True
    if version == "v3":
        t, u = config or V3_TOPK
        return f"topk_v3_t{t}_u{u}", (rows,), t, topk_smem_bytes(), True
    c, t = config or (v4_cluster(rows), V4_TOPK_THREADS)
    return f"topk_v4_c{c}_t{t}", (rows * c,), t, topk_smem_bytes(), True


def launch(version, d, config=None):
    """Enqueue one version on DeviceCase d: one kernel. d.params["minimum"] asks for argmin
    (K = 1 only)."""
    A.version(version, VERSIONS)
    rows, cols, k = d.size
    name, grid, threads, smem, with_k = kernel_for(version, rows, cols, k,
                                                   minimum=d.params.get("minimum", False),
                                                   config=config)
    grid = (grid[0], 1, 1)
    if not with_k:
        K(name, "PPPii").prepared_call(grid, (threads, 1, 1), d.x, d.values, d.indices, rows, cols)
    elif smem == 0:
        K(name, "PPPiii").prepared_call(grid, (threads, 1, 1), d.x, d.values, d.indices, rows,
                                        cols, k)
    else:
        K(name, "PPPiiii", dynamic_smem=smem).prepared_call(
            grid, (threads, 1, 1), d.x, d.values, d.indices, rows, cols, k, CAP,
            shared_size=smem)


# --- baselines --------------------------------------------------------------------------------

def _output(fn, name):
    fn.output = name
    return fn


def baselines(d):
    """torch.topk (sorted, on the same memory); at K = 1 also torch.argmax and cupy.argmax
    (checked against the indices)."""
    rows, cols, k = d.size
    out = {}
    torch = torch_or_none()
    if torch is not None:
        x = as_torch(d.array("x"))
        out["torch.topk"] = _output(lambda: torch.topk(x, k, dim=-1, sorted=True).values, "values")
        if k == 1:
            out["torch.argmax"] = _output(lambda: torch.argmax(x, dim=-1), "indices")
    cp = cupy_or_none()
    if cp is not None and k == 1:
        xc = cp.asarray(d.array("x"))
        out["cupy.argmax"] = _output(lambda: cp.argmax(xc, axis=1), "indices")
    return out


# --- extras: argmin at the argmax size; what torch.topk launches -------------------------------

ARGMIN_SIZE = (16384, 4096, 1)
TORCH_KERNEL_SIZES = [(1, VOCAB, 50), (32, VOCAB, 50), (256, VOCAB, 256)]


def extras(report, mode):
    if mode != "bench":
        return
    _argmin(report)
    torch = torch_or_none()
    if torch is not None:
        _torch_kernels(report, torch)


def _torch_kernels(report, torch):
    """The kernels one torch.topk call launches (CUPTI through torch.profiler; L2 not flushed)."""
    from common.baselines import kernels_launched

    rows = []
    for rows_, cols, k in TORCH_KERNEL_SIZES:
        x = torch.randn(rows_, cols, device="cuda") * 2
        fn = lambda: torch.topk(x, k, dim=-1, sorted=True)
        fn()
        for n, (name, us) in enumerate(kernels_launched(fn)):
            rows.append([f"{rows_}x{cols}x{k} #{n + 1}", name[:100], f"{us:.1f}"])
        del x
    report.section("Kernels torch.topk runs (one call, L2 not flushed)", rows,
                   ["size, kernel #", "kernel", "us"])


def _argmin(report):
    """argmin (the same kernels with the key flipped) checked and timed at ARGMIN_SIZE beside
    torch.argmin: it should cost what argmax costs."""
    from common.runner import check_and_time
    from common.timing import time_fn

    rows, cols, _ = ARGMIN_SIZE
    case = make_case(ARGMIN_SIZE, np.random.default_rng(57))
    x = case.inputs["x"]
    i = reference.argmin(x)[:, None]
    case.reference = lambda: {"values": np.take_along_axis(x, i, 1).astype(np.float64),
                              "indices": i}
    case.params = {"minimum": True}
    d = H.DeviceCase(case)
    rows_out = []
    for v in VERSIONS:
        r = check_and_time(report, f"argmin {v}", lambda dd, v=v: launch(v, dd), case, d)
        rows_out.append([f"argmin {v}", f"{r['median_ms'] * 1e3:.1f}", f"{r['gbps']:.0f}",
                         f"{r['pct_of_ceiling']:.1f}", "ok" if r["ok"] else "FAIL"])
    torch = torch_or_none()
    if torch is not None:
        xt = as_torch(d.array("x"))
        t = time_fn(lambda: torch.argmin(xt, dim=-1))
        gbps = case.bytes / (t.median_ms * 1e-3) / 1e9
        rows_out.append(["torch.argmin", f"{t.median_ms * 1e3:.1f}", f"{gbps:.0f}", "", "-"])
    report.section(f"Argmin at {H.size_str(ARGMIN_SIZE[:2])}", rows_out,
                   ["version", "us", "GB/s", "% of ceiling", "ok"])


# --- public functions -------------------------------------------------------------------------

def _matrix(x):
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    A.fits_int32("x", x.shape[0], "rows")
    A.fits_int32("x", x.shape[1], "columns")
    return x


def _run(x, k, version, minimum=False):
    rows, cols = x.shape
    case = H.Case((rows, cols, k), inputs={"x": x},
                  outputs={"values": ((rows, k), np.float32), "indices": ((rows, k), np.int32)},
                  params={"minimum": minimum})
    out = H.run(launch, version, case)
    return out["values"], out["indices"].astype(np.int64)


def _arg(x, version, minimum):
    version = A.version(version, VERSIONS)
    x = _matrix(x)
    rows, cols = x.shape
    if cols == 0 and rows > 0:
        raise ValueError(f"x has rows of length 0 (shape {x.shape}): an empty row has no "
                         f"{'minimum' if minimum else 'maximum'}")
    if rows == 0:
        return np.empty(0, np.int64)
    return _run(x, 1, version, minimum)[1][:, 0]


def argmax(x, version=BEST):
    """Column of the largest value of each row of a 2-D array [rows, cols] (float32; other real
    dtypes are converted), as numpy's argmax(x, axis=1): the first of equal values, the first
    NaN if a row has one; -0.0 equals +0.0. Returns int64 [rows]. No rows: an empty result.
    Refused: rows of length 0, non-real or non-2-D input."""
    return _arg(x, version, False)


def argmin(x, version=BEST):
    """Column of the smallest value of each row, as numpy's argmin(x, axis=1) (first of ties,
    first NaN). Returns int64 [rows]."""
    return _arg(x, version, True)


def topk(x, k, version=BEST):
    """The k largest values of each row of a 2-D array [rows, cols] and their columns:
    (values float32 [rows, k], indices int64 [rows, k]), largest first; equal values in column
    order; NaN counts as larger than +inf; -0.0 equals +0.0 (each value is returned as stored).
    1 <= k <= min(256, cols). No rows: empty results."""
    version = A.version(version, VERSIONS)
    x = _matrix(x)
    rows, cols = x.shape
    if cols == 0:
        raise ValueError(f"x has rows of length 0 (shape {x.shape}): there is no top-k of an "
                         "empty row")
    k = A.count(k, "k", low=1, high=min(MAX_K, cols))
    if rows == 0:
        return np.empty((0, k), np.float32), np.empty((0, k), np.int64)
    return _run(x, k, version)
