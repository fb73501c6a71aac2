"""Day 4 driver: one thread per row softmax, naive and max-subtracted.

    from days.day04_simple_softmax.driver import softmax, overflow_demo
    y = softmax(x)                 # numpy in, numpy out: row softmax of a 2-D float32 array
    overflow_demo()                # rows with |x| up to 10 .. 1e4: what each version gets wrong
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 128

VERSIONS = {
    "v1": "one thread per row, naive exp (overflows)",
    "v2": "one thread per row, max subtracted",
}
BEST = "v2"
# v1 is kept to show the overflow: it is right on the benchmark inputs (|x| stays small there)
# and faster, but it is never the best.
WRONG_ON = {"v1": "returns NaN/inf once a row holds values above 88.7 (float32 exp overflows)"}
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192"
SIZES = {"small": (64, 1000), "default": (8192, 8192), "large": (65536, 8192)}
CHECK_SIZES = [(1, 1), (1, 33), (33, 1000), (257, 31), (5, 8193), (1000, 7)]
# 8191x3073: odd rows (the last block of 128 threads is partly idle) and an odd width
BENCH_SIZES = [(8192, 8192), (65536, 1024), (8191, 3073)]
OVERFLOW_TOPS = (10.0, 100.0, 1e3, 1e4)   # the overflow table's rows: values up to |x| = top
OVERFLOW_TITLE = "values up to |x|"


def _correct_up_to_1e4(rec):
    """The bar "correct on rows with values up to 1e4", read from the overflow table of the
    results: the best version must be "ok" on every row of it, up to |x| = 1e4."""
    sec = next((x for x in rec.get("sections", []) if x["title"].startswith(OVERFLOW_TITLE)), None)
    headers = sec["headers"] if sec else ["max |x|"] + list(VERSIONS)
    rows = sec["rows"] if sec else (rec.get("extra") or {}).get("overflow")
    if not rows or BEST not in headers:
        return False, "no overflow table in the results"
    j = headers.index(BEST)
    tops = [float(r[0]) for r in rows]
    wrong = [f"{float(r[0]):g}" for r in rows if r[j] != "ok"]
    if wrong:
        return False, f"{BEST} wrong on rows with values up to {', '.join(wrong)}"
    if max(tops) < 1e4:
        return False, f"{BEST} checked only on values up to {max(tops):g}"
    fig = f"{BEST} ok on rows with values up to {max(tops):g}"
    for v in WRONG_ON:
        if v in headers:
            k = headers.index(v)
            first = next((float(r[0]) for r in rows if r[k] != "ok"), None)
            if first is not None:
                fig += f" ({v} fails from {first:g})"
    return True, fig


BAR = [{"text": "correct on rows with values up to 1e4", "check": _correct_up_to_1e4}]
# The kernels index rows and columns with int; the grid's last block reaches THREADS - 1 rows
# past the end, so rows stay below 2^31 - THREADS.
MAX_ROWS = 2 ** 31 - 1 - THREADS
MAX_COLS = 2 ** 31 - 1


def validate_size(size):
    rows, cols = size
    if rows > MAX_ROWS or cols > MAX_COLS:
        raise ValueError(f"at most {MAX_ROWS} rows and {MAX_COLS} columns: the kernels index "
                         "rows and columns with 32-bit ints")


def make_case(size, rng):
    rows, cols = size
    # |x| stays far below 88 here, so even v1 is right; extras() shows what happens above it
    x = (rng.standard_normal(size) * 3).astype(np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": (size, np.float32)},
                  reference=lambda: {"y": reference.softmax(x)}, bytes=2 * x.nbytes)


def launch(version, d):
    A.version(version, VERSIONS)
    rows, cols = d.size
    K(f"softmax_{version}", "PPii").prepared_call((H.cdiv(rows, THREADS), 1, 1), (THREADS, 1, 1),
                                                  d.x, d.y, rows, cols)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x = as_torch(d.array("x"))
    return {"torch.softmax": lambda: torch.softmax(x, dim=-1)}


def softmax(x, version=BEST):
    """Softmax of each row of a 2-D array of real numbers (converted to float32); float32 out.

    An array with no rows or no columns gives an empty result of its shape without a launch
    (the softmax of an empty row is an empty row). v1 returns NaN once a row holds values
    above 88.7: it is kept to show that, and is not the default."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    validate_size(x.shape)
    return H.run(launch, version, H.Case(x.shape, {"x": x}, {"y": (x.shape, np.float32)}))["y"]


def overflow_demo(rng=None):
    """Rows whose values reach 10, 100, 1e3, 1e4: how many outputs each version gets wrong.
    rng: a numpy Generator (default: seeded with 4)."""
    from common.check import compare

    if rng is None:
        rng = np.random.default_rng(4)
    elif not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator (np.random.default_rng(seed)), "
                        f"got {type(rng).__name__}")
    rows = []
    for top in OVERFLOW_TOPS:
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
    report.section(f"{OVERFLOW_TITLE} (float32 exp overflows above {reference.FLOAT32_EXP_LIMIT:.2f})",
                   rows, ["max |x|"] + list(VERSIONS))
    report.record("overflow", rows)
