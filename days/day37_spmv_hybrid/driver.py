"""Day 37 driver: the hybrid ELL + COO format (HYB), its ELL width chosen from the row-length
histogram, against pure COO and pure ELL (day 36's kernels) and cuSPARSE's CSR.

    from days.day37_spmv_hybrid.driver import spmv_hybrid
    y = spmv_hybrid(indptr, indices, data, x)     # A in CSR, numpy in, numpy out; version=BEST

The patterns, the sizes (PATTERNxROWSxK), the real matrix and the conversions are day 36's
(days/day36_spmv_ell_coo/formats.py); the bench sizes are day 36's too, drawn with the same
seeds, so day 36's CSR timings of the very same matrices sit beside these (README).
"""
import numpy as np

from common import args as A
from common import harness as H
from days.day36_spmv_ell_coo import driver as day36
from days.day36_spmv_ell_coo import formats as F
from days.day37_spmv_hybrid import reference

K = H.Kernels(__file__)
THREADS = 256

VERSIONS = {
    "v1": "pure COO (day 36 v1): atomicAdd per nonzero",
    "v2": "pure ELL (day 36 v5): width = longest row",
    "v3": "HYB, two launches: ELL part stores, COO part adds",
    "v4": "HYB, one kernel (after clearing y), atomics per entry",
    "v5": "HYB, one kernel, overflow reduced per warp (segmented scan)",
}
HYBRID = ("v3", "v4", "v5")
BEST = "v5"   # fewest atomics and no launch gap by design; the lead corrects it from the GPU run
SIZE_HELP = day36.SIZE_HELP
SIZES = {"small": (3, 1000, 200), "default": day36.POWERLAW_ELL, "large": day36.POWERLAW}
CHECK_SIZES = list(day36.CHECK_SIZES) + [(3, 1000, 200), (3, 30000, 3000)]
# the power law ELL can store (the bar: HYB beats both pure formats there), the one with rows
# of 100000 (pure ELL cannot exist), uniform rows of 16..32 (ELL's home ground) and cage11
BENCH_SIZES = [day36.POWERLAW_ELL, day36.POWERLAW, day36.UNIFORM, day36.REAL]
COO_COST = 3.0       # a COO entry costs about 3 ELL slots (formats.choose_k)
CUSPARSE = day36.CUSPARSE


def validate_size(size):
    F.validate(size)


def supports(version, size):
    return day36.supports("v5", size) if version == "v2" else None


def device_inputs(a: F.CSR, x: np.ndarray, *, with_ell: bool = True, k: int | None = None,
                  coo_cost: float = COO_COST):
    """CSR (for cuSPARSE), COO rows, pure ELL, and the hybrid: ELL part of width k (by default
    chosen from the row lengths), the overflow in COO padded to a multiple of 4, the bit mask of
    the rows with overflow."""
    lens = a.lengths()
    k = F.choose_k(lens, coo_cost) if k is None else k
    hyb = F.hybrid(a, k)
    inputs = {"ptr": a.indptr.astype(np.int32), "col": day36._at_least4(a.indices, 0),
              "val": day36._at_least4(a.data, 0.0), "row": day36._at_least4(a.row_ids(), -1),
              "x": x, "hcol": hyb["ecol"], "hval": hyb["eval"], "mask": hyb["mask"],
              "orow": hyb["orow"], "ocol": hyb["ocol"], "oval": hyb["oval"]}
    params = {"rows": a.rows, "cols": a.cols, "nnz": a.nnz, "pitch": F.pitch_of(a.rows),
              "width": 0, "k": k, "overflow": hyb["overflow"], "n4": hyb["orow"].size // 4}
    if with_ell:
        inputs["ecol"], inputs["eval"], _ = F.ell(a)
        params["width"] = inputs["ecol"].shape[0]
    return inputs, params


def make_case(size, rng):
    a, x = F.make(size, rng)
    inputs, params = device_inputs(a, x, with_ell=supports("v2", size) is None)
    total, read = day36.csr_bytes(a.rows, a.cols, a.nnz)
    return H.Case(size, inputs=inputs, outputs={"y": ((a.rows,), np.float32)},
                  reference=lambda: {"y": reference.spmv(a.indptr, a.indices, a.data, x)},
                  bytes=total, read_bytes=read, params=params)


def launch(version, d):
    version = A.version(version, VERSIONS)
    p = d.params
    rows, nnz, pitch = p["rows"], p["nnz"], p["pitch"]
    block = (THREADS, 1, 1)
    ell_blocks = H.cdiv(pitch // 4, THREADS)
    if version == "v1":
        K("spmv_zero_v1", "Pi").prepared_call((H.cdiv(rows, THREADS), 1, 1), block, d.y, rows)
        if nnz:
            K("spmv_coo_v1", "PPPPPi").prepared_call((H.cdiv(nnz, THREADS), 1, 1), block,
                                                     d.row, d.col, d.val, d.x, d.y, nnz)
    elif version == "v2":
        K("spmv_ell4_v2", "PPiiPPi").prepared_call((ell_blocks, 1, 1), block, d.ecol, d.eval,
                                                   pitch, p["width"], d.x, d.y, rows)
    elif version == "v3":
        K("hyb_ell_v3", "PPiiPPi").prepared_call((ell_blocks, 1, 1), block, d.hcol, d.hval,
                                                 pitch, p["k"], d.x, d.y, rows)
        if p["overflow"]:
            K("hyb_coo_v3", "PPPPPi").prepared_call((H.cdiv(p["overflow"], THREADS), 1, 1), block,
                                                    d.orow, d.ocol, d.oval, d.x, d.y, p["overflow"])
    else:
        if p["overflow"] == 0:
            coo_blocks = 0
        elif version == "v4":
            coo_blocks = H.cdiv(p["overflow"], THREADS)     # an entry a thread
        else:
            coo_blocks = H.cdiv(p["n4"], THREADS)           # 4 entries a thread, 128 a warp
        K("spmv_zero_v1", "Pi").prepared_call((H.cdiv(rows, THREADS), 1, 1), block, d.y, rows)
        K(f"hyb_fused_{version}", "PPiiPPPPiiPPii").prepared_call(
            (ell_blocks + coo_blocks, 1, 1), block, d.hcol, d.hval, pitch, p["k"], d.mask,
            d.orow, d.ocol, d.oval, p["overflow"], p["n4"], d.x, d.y, rows, ell_blocks)


def baselines(d):
    return day36.baselines(d)


# --- the bar: HYB faster than both pure formats on power-law rows -------------------------------

def _beats_pure_formats(rec):
    """At every timed power-law size: the fastest correct hybrid (v3-v5) against pure COO (v1)
    and, where it can exist, pure ELL (v2). The figure is the smallest margin."""
    worst, notes = None, []
    for c in rec.get("cases", []):
        if c["size"][0] != 3:
            continue
        rows = {r["version"]: r for r in c["rows"] if r.get("ok") and "median_ms" in r}
        hyb = [rows[v] for v in HYBRID if v in rows]
        if not hyb:
            return False, f"no correct hybrid timing at {H.size_str(c['size'])}"
        best = min(hyb, key=lambda r: r["median_ms"])
        for pure in ("v1", "v2"):
            if pure not in rows:
                if pure == "v2" and any(r["version"] == "v2" and "skipped" in r for r in c["rows"]):
                    continue   # pure ELL cannot store this matrix
                return False, f"{pure} not timed at {H.size_str(c['size'])}"
            m = rows[pure]["median_ms"] / best["median_ms"]
            notes.append((m, f"{best['version']} {m:.2f}x {pure} at {H.size_str(c['size'])}"))
    if not notes:
        return False, "no power-law size timed"
    worst = min(notes)
    return worst[0] > 1.0, worst[1] + (" (the smallest margin)" if len(notes) > 1 else "")


BAR = [{"text": "HYB faster than pure COO and pure ELL on power-law rows", "check": _beats_pure_formats}]


# --- extras: the row-length histogram and the split ---------------------------------------------

def histogram_rows(lens: np.ndarray, k: int) -> list[list]:
    """Rows per length bin (0, 1, 2, 3-4, 5-8, ... powers of two), their nonzeros, and where the
    chosen width K cuts: entries beyond K go to COO."""
    lens = np.asarray(lens, np.int64)
    top = int(lens.max(initial=0))
    bins, hi = [(0, 0), (1, 1), (2, 2)], 2
    while hi < top:
        bins.append((hi + 1, 2 * hi))
        hi *= 2
    out = []
    for lo, hi in bins:
        if lo > top:
            break
        sel = (lens >= lo) & (lens <= hi)
        over = int(np.maximum(lens[sel] - k, 0).sum())
        out.append([str(lo) if lo == hi else f"{lo}-{hi}", f"{int(sel.sum()):,}",
                    f"{100 * sel.mean():.2f}%", f"{int(lens[sel].sum()):,}", f"{over:,}"])
    return out


def split_row(size, lens: np.ndarray, coo_cost: float = COO_COST) -> list:
    """One line of the split table: K, rows longer than K, the overflow, and the bytes of the
    hybrid's parts against the pure formats."""
    k = F.choose_k(lens, coo_cost)
    rows, nnz = lens.size, int(lens.sum())
    over = int(np.maximum(lens - k, 0).sum())
    pitch = F.pitch_of(rows)
    st = F.storage_bytes(lens)
    mb = lambda v: "-" if v is None else f"{v / 1e6:.1f}"
    return [H.size_str(size), F.describe(size), str(k), f"{int((lens > k).sum()):,}",
            f"{over:,} ({100 * over / max(nnz, 1):.0f}%)", mb(8 * k * pitch), mb(12 * over + 4 * pitch / 32),
            mb(st["ELL"]), mb(st["COO"])]


def extras(report, mode):
    if mode == "check":
        return
    from common.runner import _seed_for

    split = []
    for size in BENCH_SIZES:
        lens = F.lengths(size, np.random.default_rng(_seed_for(size)))
        split.append(split_row(size, lens))
        if size[0] in (3, 4):
            k = F.choose_k(lens, COO_COST)
            report.section(f"row lengths of {H.size_str(size)} ({F.describe(size)}; K = {k})",
                           histogram_rows(lens, k),
                           ["length", "rows", "share of rows", "nonzeros", "beyond K (COO)"])
    report.section("the hybrid split at the bench sizes (K = smallest width with #rows longer "
                   f"than K <= rows / {COO_COST:g}; MB)", split,
                   ["size", "pattern", "K", "rows longer than K", "overflow (COO)", "ELL part",
                    "COO part + mask", "pure ELL", "pure COO"])
    report.record("split", split)


# --- the public function ---------------------------------------------------------------------

def spmv_hybrid(indptr, indices, data, x, version=BEST, k=None) -> np.ndarray:
    """y = A x on the GPU for A given in CSR (see day 36's spmv for the arguments), through the
    hybrid format: the first k entries of each row in ELL, the rest in COO. k = None picks it
    from the row lengths (formats.choose_k); else an integer >= 1. v1 and v2 are the pure
    formats (k unused). Returns y [rows] float32; no nonzeros: zeros without a launch."""
    version = A.version(version, VERSIONS)
    if k is not None:
        k = A.count(k, "k", low=1)
    a, x = day36.checked_csr(indptr, indices, data, x)
    if a is None or a.nnz == 0:      # no rows, or a sum of nothing: nothing is launched
        return np.zeros(0 if a is None else a.rows, np.float32)
    rows = a.rows
    w = int(a.lengths().max())
    if k is not None and not F.ell_fits(rows, k):
        raise ValueError(f"k = {k}: an ELL part of {rows} rows x {k} passes 32-bit indexing")
    if version == "v2" and not F.ell_fits(rows, w):
        raise ValueError(f"v2 is pure ELL: {rows} rows padded to the longest row ({w}) pass "
                         "32-bit indexing; use the hybrid (v3-v5)")
    inputs, params = device_inputs(a, x, with_ell=version == "v2", k=min(k, w) if k else None)
    case = H.Case((0, rows, w), inputs=inputs, outputs={"y": ((rows,), np.float32)}, params=params)
    return H.run(launch, version, case)["y"]
