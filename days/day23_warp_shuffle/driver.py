"""Day 23 driver: warp-level primitives against their shared-memory twins.

The versions: row softmax of short rows (<= 1024 columns), one warp per row, reductions by a
shared-memory tree (v1) or by shuffles (v2). Beside them (extras), each checked and timed in
pairs: a block reduction, a warp scan (segments of 32), a block scan (segments of 1024), stream
compaction with __ballot_sync, a histogram with __match_any_sync.

    from days.day23_warp_shuffle.driver import softmax, array_sum, segmented_scan, compact, histogram
    y = softmax(x)                       # [rows, cols <= 1024], float32
    s = array_sum(x)                     # float
    y = segmented_scan(x, segment=32)    # inclusive, restarting every 32 (or 1024) elements
    kept = compact(x, 0.5)               # the elements > 0.5, in no particular order
    h = histogram(keys, bins=16)         # int64 counts
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256          # softmax: 8 warps a block, one row each
ROWS_PER_BLOCK = THREADS // 32
MAX_COLS = 1024        # a warp keeps at most 32 floats a lane in registers
RED_TILE = 2048        # reduce_*: elements a block sums (256 threads x 8)
SCAN_THREADS = 256
SEG_BLOCK = 1024
F32_MAX = float(np.finfo(np.float32).max)

VERSIONS = {
    "v1": "warp per row, max/sum by a shared-memory tree",
    "v2": "warp per row, max/sum by __shfl_xor_sync",
}
BEST = "v2"
SIZE_HELP = "ROWSxCOLS with COLS <= 1024, e.g. 32768x100"
SIZES = {"small": (64, 100), "default": (8192, 1023), "large": (65536, 1024)}
# widths 1 (a lone lane), 31 / 33 (one register, a second partly used), 100, 1023 / 1024 (every
# register array size), and 5 rows (not a multiple of the 8 rows a block)
CHECK_SIZES = [(1, 1), (5, 31), (3, 32), (9, 33), (1000, 5), (17, 100), (7, 257), (13, 1023),
               (11, 1024), (1, 1024)]
# odd widths (every row a different alignment), a full warp's 1024, and tiny rows
BENCH_SIZES = [(8192, 1023), (32768, 100), (65536, 1024), (262144, 33)]

# extras: (name, check sizes, bench sizes)
REDUCE_CHECK = [(1,), (31,), (2049,), (1000003,)]
REDUCE_BENCH = [(2 ** 26,), (10 ** 7 + 3,)]
SCAN_CHECK = [(1,), (33,), (1025,), (1000003,)]
SCAN_BENCH = [(2 ** 26,), (10 ** 7 + 3,)]
COMPACT_CHECK = [(1, 0.5), (33, 0.5), (100003, 0.5), (100003, 0.99)]
COMPACT_BENCH = [(2 ** 24, 0.5), (2 ** 24, 0.99)]   # (n, threshold on U(0,1)): keep half, 1%
HIST_CHECK = [(1, 16), (33, 16), (100003, 16), (100003, 1000), (64, 1)]
HIST_BENCH = [(2 ** 24, 16), (2 ** 24, 4096)]       # (n, bins): heavy and light contention


def _pairs_bar(rec):
    """Every shuffle kernel at least as fast as its shared-memory twin, at every size timed."""
    timed = ((rec.get("extra") or {}).get("warp_pairs") or {}).get("timed") or []
    if not timed:
        return False, "shuffle/shared pairs not measured"
    bad = [e for e in timed if not e.get("ok")]
    if bad:
        return False, f"{bad[0]['op']} at {H.size_str(bad[0]['size'])} failed its check"
    worst = min(timed, key=lambda e: e["shared_ms"] / e["shuffle_ms"])
    ratio = worst["shared_ms"] / worst["shuffle_ms"]
    return ratio >= 1.0, f"{ratio:.2f}x its shared twin (bar 1.00x) worst: {worst['op']} {H.size_str(worst['size'])}"


# CURRICULUM.md: shuffle version >= shared version. For the versions (softmax) at every bench
# size; for the reduction and the two scans, the pairs recorded in extras.
BAR = [{"version": "v2", "over": ("v1", 1.0)},
       {"text": "block reduce, warp scan and block scan: shuffles >= shared memory at every size",
        "check": _pairs_bar}]


def validate_size(size):
    rows, cols = size
    if cols > MAX_COLS:
        raise ValueError(f"{cols} columns: one warp holds a row of at most {MAX_COLS} columns "
                         "in registers (day 5 softmaxes longer rows)")
    A.fits_int32("rows", rows, "rows")
    A.fits_int32("rows x cols", rows * cols)


def make_case(size, rng, scale=3.0):
    rows, cols = size
    x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(scale)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((rows, cols), np.float32)},
                  reference=lambda: {"y": reference.softmax(x)},
                  bytes=2 * x.nbytes)  # read x once, write y once


def items_for(cols: int) -> int:
    """Registers a lane needs for a row: the smallest of 1, 2, 4, 8, 16, 32 with 32 x N >= cols."""
    return next(i for i in (1, 2, 4, 8, 16, 32) if cols <= 32 * i)


def kernel_for(version: str, cols: int) -> str:
    kind = {"v1": "smem", "v2": "shfl"}[A.version(version, VERSIONS)]
    return f"softmax_{version}_{kind}_items{items_for(cols)}"


def launch(version, d):
    A.version(version, VERSIONS)  # an unknown name is refused, never run as another version
    rows, cols = d.size
    K(kernel_for(version, cols), "PPii").prepared_call(
        (H.cdiv(rows, ROWS_PER_BLOCK), 1, 1), (THREADS, 1, 1), d.x, d.y, rows, cols)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x = as_torch(d.array("x"))
    return {"torch.softmax": lambda: torch.softmax(x, dim=-1)}


def softmax(x, version=BEST):
    """Row softmax of a 2-D float array [rows, cols] with cols <= 1024, one warp per row, in
    float32. An empty array gives an empty result (nothing is launched)."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    if x.shape[1] > MAX_COLS:
        raise ValueError(f"x has {x.shape[1]} columns: one warp holds a row of at most "
                         f"{MAX_COLS} columns in registers (day 5 softmaxes longer rows)")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    validate_size(x.shape)
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": (x.shape, np.float32)})
    return H.run(launch, version, case)["y"]


# --- the pairs beside the versions -------------------------------------------------------------

METHODS = ("shared", "shuffle")


def _sms() -> int:
    from common.gpu import device_info

    return device_info()["sms"] or 132


def launch_reduce(method, d):
    """Sum of d.x into d.s[0]: reduce_* on 2048-element tiles, again on the partial sums until
    one value is left (2^26 elements: 32768 partials, then 16, then 1)."""
    name = {"shared": "reduce_smem", "shuffle": "reduce_shfl"}[method]
    fn = K(name, "PPi")
    src, m, k = d.x, d.size[0], 0
    while True:
        g = H.cdiv(m, RED_TILE)
        dst = d.s if g == 1 else d.scratch(f"partial{k}", (g,))
        fn.prepared_call((g, 1, 1), (256, 1, 1), src, dst, m)
        if g == 1:
            return
        src, m, k = dst, g, k ^ 1


def make_reduce_case(size, rng):
    (n,) = size
    x = rng.random(n, dtype=np.float32)  # positive: the sum is far from 0, a relative error means something
    return H.Case(size, inputs={"x": x}, outputs={"s": ((1,), np.float32)},
                  reference=lambda: {"s": reference.array_sum(x)}, bytes=x.nbytes, read_bytes=x.nbytes,
                  tol=1e-5)


def launch_scan(segment, method, d):
    (n,) = d.size
    kind = {"shared": "smem", "shuffle": "shfl"}[method]
    threads = SCAN_THREADS if segment == 32 else SEG_BLOCK
    K(f"scan{segment}_{kind}", "PPi").prepared_call((H.cdiv(n, threads), 1, 1), (threads, 1, 1),
                                                    d.x, d.y, n)


def make_scan_case(size, rng, segment):
    (n,) = size
    x = rng.random(n, dtype=np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((n,), np.float32)},
                  reference=lambda: {"y": reference.segmented_scan(x, segment)}, bytes=2 * x.nbytes)


def _grid_stride_blocks(n, threads):
    return max(1, min(H.cdiv(n, threads), _sms() * 8))


def launch_hist(method, d):
    """hist = 0 (a memset enqueued first, so every repeat of a timing loop starts clean), then
    hist_atomic or hist_match."""
    from common.gpu import driver

    n, bins = d.size
    driver().memset_d32_async(d.hist, 0, bins)
    name = {"atomic": "hist_atomic", "match": "hist_match"}[method]
    K(name, "PPi").prepared_call((_grid_stride_blocks(n, 256), 1, 1), (256, 1, 1), d.keys, d.hist, n)


def make_hist_case(size, rng):
    n, bins = size
    keys = rng.integers(0, bins, n).astype(np.int32)
    return H.Case(size, inputs={"keys": keys}, outputs={"hist": ((bins,), np.int32)},
                  reference=lambda: {"hist": reference.histogram(keys, bins)},
                  bytes=keys.nbytes + 4 * bins, read_bytes=keys.nbytes)


def launch_compact(method, d):
    """count = 0, then compact_atomic or compact_ballot (out: the kept values in any order)."""
    from common.gpu import driver

    n = d.size[0]
    driver().memset_d32_async(d.count, 0, 1)
    name = {"atomic": "compact_atomic", "ballot": "compact_ballot"}[method]
    K(name, "PPPif").prepared_call((_grid_stride_blocks(n, 256), 1, 1), (256, 1, 1), d.x, d.out,
                                   d.count, n, np.float32(d.params["t"]))


def make_compact_case(size, rng):
    n, t = size[0], float(np.float32(size[1]))  # the kernel compares with a float32 threshold
    x = rng.random(n, dtype=np.float32)
    kept = reference.compact(x, t)
    return H.Case((n,), inputs={"x": x}, outputs={"out": ((n,), np.float32), "count": ((1,), np.int32)},
                  reference=lambda: {"out": kept, "count": np.array([kept.size])},
                  bytes=x.nbytes + 4 * kept.size, read_bytes=x.nbytes, params={"t": t})


def _run_compact(method, d):
    """(count, the kept values sorted) after one launch: the order across warps is not fixed,
    so the check sorts the kept prefix; the rest of `out` stays poisoned."""
    from common.gpu import driver

    d.poison_outputs()
    launch_compact(method, d)
    driver().Context.synchronize()
    count = int(d.array("count").get()[0])
    if not 0 <= count <= d.size[0]:
        return count, None
    return count, np.sort(d.array("out").get()[:count])


# --- public functions of the pairs ---------------------------------------------------------------

def array_sum(x, method="shuffle"):
    """The sum of every element of a float array (any shape), in float32 on the GPU. An empty
    array sums to 0.0 (nothing is launched)."""
    method = A.choice(method, "method", METHODS)
    x = A.floats(x, "x").ravel()
    if x.size == 0:
        return 0.0
    A.fits_int32("x", x.size)
    case = H.Case((x.size,), inputs={"x": x}, outputs={"s": ((1,), np.float32)})
    return float(H.run(lambda v, d: launch_reduce(method, d), method, case)["s"][0])


def segmented_scan(x, segment=32, method="shuffle"):
    """Inclusive prefix sum of a 1-D float array restarting every `segment` (32: a warp's scan,
    1024: a block's) elements, in float32. An empty array gives an empty result."""
    method = A.choice(method, "method", METHODS)
    if segment not in (32, 1024) or isinstance(segment, bool):
        raise ValueError(f"segment must be 32 (a warp) or 1024 (a block), got {segment!r}")
    x = A.floats(x, "x", ndim=1, what="[n]")
    if x.size == 0:
        return np.empty(0, np.float32)
    A.fits_int32("x", x.size)
    case = H.Case((x.size,), inputs={"x": x}, outputs={"y": ((x.size,), np.float32)})
    return H.run(lambda v, d: launch_scan(segment, method, d), method, case)["y"]


def compact(x, threshold, method="ballot"):
    """The elements of a 1-D float array greater than `threshold`, in float32, in no particular
    order (the kernels reserve slots warp by warp with an atomic counter). Empty in, empty out."""
    method = A.choice(method, "method", ("atomic", "ballot"))
    x = A.floats(x, "x", ndim=1, what="[n]")
    t = A.real(threshold, "threshold", low=-F32_MAX, high=F32_MAX)
    t = float(np.float32(t))  # the kernel compares in float32; so does the result
    if x.size == 0:
        return np.empty(0, np.float32)
    A.fits_int32("x", x.size)
    case = H.Case((x.size, t), inputs={"x": x},
                  outputs={"out": ((x.size,), np.float32), "count": ((1,), np.int32)}, params={"t": t})
    out = H.run(lambda v, d: launch_compact(method, d), method, case)
    return out["out"][:int(out["count"][0])]


def histogram(keys, bins, method="match"):
    """Counts of each integer key in [0, bins) (int64 array of length bins). Keys outside that
    range are refused (the kernels index the histogram with them). No keys give zeros."""
    method = A.choice(method, "method", ("atomic", "match"))
    bins = A.count(bins, "bins", low=1, high=2 ** 24)
    keys = A.integers(keys, "keys", low=0, high=bins, ndim=1, what="[n]")
    if keys.size == 0:
        return np.zeros(bins, np.int64)
    A.fits_int32("keys", keys.size)
    case = H.Case((keys.size, bins), inputs={"keys": keys}, outputs={"hist": ((bins,), np.int32)})
    return H.run(lambda v, d: launch_hist(method, d), method, case)["hist"].astype(np.int64)


# --- extras: every pair checked on ragged sizes, then timed side by side ------------------------

def _pair_ops():
    """(op name, make_case(size, rng), launch(method, d), (slow, fast) methods, check, bench)."""
    return [
        ("block reduce", make_reduce_case, launch_reduce, ("shared", "shuffle"), REDUCE_CHECK,
         REDUCE_BENCH),
        ("warp scan (segments of 32)", lambda s, r: make_scan_case(s, r, 32),
         lambda m, d: launch_scan(32, m, d), ("shared", "shuffle"), SCAN_CHECK, SCAN_BENCH),
        ("block scan (segments of 1024)", lambda s, r: make_scan_case(s, r, 1024),
         lambda m, d: launch_scan(1024, m, d), ("shared", "shuffle"), SCAN_CHECK, SCAN_BENCH),
        ("histogram", make_hist_case, launch_hist, ("atomic", "match"), HIST_CHECK, HIST_BENCH),
    ]


def extras(report, mode):
    from common.report import fmt_ms
    from common.runner import check_and_time
    from common.timing import time_fn

    checks, timed, votes = [], [], []
    for op, make, launch_op, methods, check_sizes, _ in _pair_ops():
        for size in check_sizes:
            case = make(size, np.random.default_rng(23))
            d = H.DeviceCase(case)
            for m in methods:
                r = check_and_time(report, f"{op} {m}", lambda dd, m=m: launch_op(m, dd), case, d,
                                   timed=False)
                checks.append([op, m, H.size_str(size), f"{r['max_err']:.1e}", "ok" if r["ok"] else "FAIL"])
    for size in COMPACT_CHECK:
        case = make_compact_case(size, np.random.default_rng(23))
        d = H.DeviceCase(case)
        for m in ("atomic", "ballot"):
            ok, err = _check_compact(report, m, case, d)
            checks.append(["compaction", m, H.size_str(size), err, "ok" if ok else "FAIL"])
    report.section("warp primitives beside the versions: checks", checks,
                   ["op", "method", "size", "max err", "ok"])
    record = {"checks": checks}
    if mode == "check":
        report.record("warp_pairs", record)
        return

    for op, make, launch_op, (slow, fast), _, bench_sizes in _pair_ops():
        for size in bench_sizes:
            case = make(size, np.random.default_rng(7))
            d = H.DeviceCase(case)
            a = check_and_time(report, f"{op} {slow}", lambda dd: launch_op(slow, dd), case, d)
            b = check_and_time(report, f"{op} {fast}", lambda dd: launch_op(fast, dd), case, d)
            entry = {"op": op, "size": list(size), "shared_ms": a["median_ms"],
                     "shuffle_ms": b["median_ms"], "gbps": b.get("gbps"), "ok": a["ok"] and b["ok"]}
            (votes if slow == "atomic" else timed).append(entry)
            d = None
    for size in COMPACT_BENCH:
        case = make_compact_case(size, np.random.default_rng(7))
        d = H.DeviceCase(case)
        ms, ok = {}, True
        for m in ("atomic", "ballot"):
            ok &= _check_compact(report, m, case, d)[0]
            ms[m] = time_fn(lambda m=m: launch_compact(m, d)).median_ms
            ok &= _check_compact(report, m, case, d)[0]  # again, after the timing loop
        votes.append({"op": "compaction", "size": list(size), "shared_ms": ms["atomic"],
                      "shuffle_ms": ms["ballot"], "gbps": None, "ok": ok})
        d = None

    def row(e):
        return [f"{e['op']} {H.size_str(e['size'])}", fmt_ms(e["shared_ms"]), fmt_ms(e["shuffle_ms"]),
                f"{e['shared_ms'] / e['shuffle_ms']:.2f}x", f"{e['gbps']:.0f}" if e.get("gbps") else "-",
                "ok" if e["ok"] else "FAIL"]

    report.section("shuffles vs shared memory: timed (speed-up = shared / shuffle)",
                   [row(e) for e in timed],
                   ["op and size", "shared", "shuffle", "speed-up", "shuffle GB/s", "ok"])
    report.section("votes and matches vs one atomic per element: timed (speed-up = atomic / warp)",
                   [row(e) for e in votes],
                   ["op and size", "atomic", "warp-aggregated", "speed-up", "GB/s", "ok"])
    record.update(timed=timed, votes=votes)
    report.record("warp_pairs", record)


def _check_compact(report, method, case, d):
    """(ok, max err text) of one compaction: the count exactly, the kept values as a set."""
    want = case.expected()["out"]
    count, got = _run_compact(method, d)
    if got is None or count != want.size:
        msg = f"count {count} != {want.size}"
    else:
        err = float(np.abs(got.astype(np.float64) - want).max()) if count else 0.0
        if err == 0.0:
            return True, "0.0e+00"
        msg = f"kept values differ by up to {err:.2g}"
    seed = f" (seed {case.seed})" if case.seed is not None else ""
    report.failures.append(f"compaction {method} at {H.size_str(case.size)}{seed}: {msg}")
    return False, msg
