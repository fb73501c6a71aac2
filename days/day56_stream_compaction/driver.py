"""Day 56 driver: stream compaction (select, partition, unique) in four versions, from three
passes down to one pass with a decoupled look-back.

    from days.day56_stream_compaction.driver import select, partition, unique
    y = select(x, 0.5)              # x[x > 0.5], float32, in order
    y, k = partition(x, 0.5)        # y[:k] = x[x > 0.5] in order, y[k:] the rest REVERSED
    y = unique(x)                   # consecutive duplicates dropped

The ladder (--bench) times select; partition and unique are checked on ragged sizes and timed
at 2^28 in extras(), beside CUB's own DevicePartition::If and DeviceSelect::Unique.
"""
import ctypes
import functools
from pathlib import Path

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, short_kernel_name, torch_or_none

# the status words and launch numbers of day 17's v5 (kernel.cu's look-back reads the same format)
from days.day17_prefix_sum.driver import lookback_state

from . import reference

K = H.Kernels(__file__)
OPS = ("select", "partition", "unique")
V1_THREADS, V1_SCAN_THREADS = 512, 1024    # kernel.cu: V1_THREADS, V1_SCAN_THREADS
V2 = {"warps": 8, "items": 8}              # kernel.cu: V2_WARPS, V2_ITEMS (scalar layout)
V3 = {"warps": 8, "items": 8}              # kernel.cu: V3_WARPS, V3_ITEMS (scalar layout)
# kernel.cu: V4_WARPS, V4_ITEMS, V4_VEC, V4_OPTS (8 warps x 32 items, float4 loads, full tiles
# without bound checks, __launch_bounds__ min 5 blocks an SM = 48 registers; partition 4, which
# avoids a spill): the third sweep's fastest, .notes/day56_sweep_results.md)
# kernel.cu's OPT_* bits (v4's options); OPT_LBW adds a look-back warp to the block
OPT_VST, OPT_CS, OPT_FULL, OPT_LBW = 1, 2, 4, 8
V4 = {"warps": 8, "items": 32, "vec": True, "opts": OPT_FULL}
# Nanoseconds a look-back sleeps before its first read, and after each read that found a
# predecessor with nothing published (0: no sleep). Kernel arguments, so the sweep varies
# them; 1000/500 was the best of four pairs in the first sweep (v4 then in the scalar
# layout: .notes/day56_sweep_results.md)
LB_FIRST_NS, LB_RETRY_NS = 1000, 500

VERSIONS = {
    "v1": "3 passes: flags, multi-kernel scan, scatter",
    "v2": "2 passes: tile counts + scan, recompute + scatter",
    "v3": "1 pass, decoupled look-back, scatter from registers",
    "v4": "1 pass, float4 loads, tile compacted in smem, coalesced writes",
}
BEST = "v4"  # measured fastest at every bench size (H200, 2026-11-26)
SIZE_HELP = "NxPCT: N float32 values, PCT = percent selected (0-100), e.g. 2^28x50"
SIZES = {"small": (1000, 50), "default": (2 ** 28, 50), "large": (2 ** 29, 50)}
# 1; around a warp; around the tiles (2048 for v2/v3, 4096 for some of the sweep's shapes,
# 8192 for v4: 8193 is 2 tiles of v4, 3 of 4096, 5 of 2048); 1000003 (489 tiles of 2048: look-backs cross many
# windows of 32); 2^24 + 5 (8193 tiles: long grids); selection none (0%) and all (100%)
CHECK_SIZES = [(1, 50), (1, 0), (1, 100), (31, 50), (33, 50), (33, 0), (33, 100), (1000, 10),
               (2047, 50), (2049, 50), (4095, 90), (4097, 50), (8193, 50), (12289, 10),
               (262145, 50), (1000003, 50), (1000003, 0), (1000003, 100), (1000003, 3),
               (2 ** 22 + 5, 50), (2 ** 24 + 5, 10)]
# the curriculum's 2^28 at 50% and 10% selected, and an awkward length (no multiple of 4 or
# of any tile) at 90%
BENCH_SIZES = [(2 ** 28, 50), (2 ** 28, 10), (2 ** 28 - 5, 90)]
CUB_ROW = "CUB DeviceSelect::If"
CUPY_ROW = "cupy boolean index"  # xc[xc > t] (a name without ">": README markers cannot hold one)
TORCH_ROW = "torch.masked_select"
# CURRICULUM.md / issue 13: >= 75% of the memory ceiling and faster than the libraries' select
# (CUB's DeviceSelect::If, CuPy's boolean indexing, torch.masked_select) at 2^28
BAR = [{"sizes": [(2 ** 28, 50), (2 ** 28, 10)], "pct": 75, "vs_baseline": 1.0}]

# partition and unique beside select (extras): ragged checks, then one timed size
EXTRA_CHECK_SIZES = [(1, 50), (33, 0), (33, 100), (1000, 50), (4097, 10), (1000003, 50),
                     (1000003, 100), (2 ** 22 + 5, 90)]
EXTRA_SIZE = (2 ** 28, 50)


def validate_size(size):
    n, pct = size
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    A.fits_int32("x", n)
    if not 0 <= pct <= 100:
        raise ValueError(f"PCT is a percentage of the elements selected, 0 to 100; got {pct}")


def make_op_case(op: str, size, rng) -> H.Case:
    """A case of `op` at size (n, pct): uniform [0, 1) values and the threshold that keeps
    about pct% (select, partition), or runs where about pct% of the positions start a new run
    (unique). The count is known here (the output's length depends on it); the reference
    output is computed when asked for."""
    n, pct = size
    if op == "unique":
        x, t = reference.runs_input(n, pct, rng), np.float32(0.0)
        k = int(reference.unique_flags(x).sum())
    else:
        x = rng.random(n, dtype=np.float32)
        t = reference.threshold_for(pct)
        k = int(np.count_nonzero(x > t))
    out_len = n if op == "partition" else k

    def ref():
        y, count = reference.compact(op, x, t)
        return {"y": y.astype(np.float64), "count": np.array([count], np.int32)}

    return H.Case(size, inputs={"x": x},
                  outputs={"y": ((out_len,), np.float32), "count": ((1,), np.int32)},
                  reference=ref, params={"op": op, "threshold": float(t)},
                  bytes=4 * n + 4 * out_len + 4,  # read x once, write y (and the count) once
                  read_bytes=4 * n)


def make_case(size, rng):
    return make_op_case("select", size, rng)


def kernel_threshold(t: float) -> np.float32:
    """The float32 the kernels compare with, so that float32 x > it exactly when x > t in
    float64 (numpy's x > t with a Python float): t rounded DOWN to float32. Between two
    float32 values f <= t < f', x > t means x >= f', which for a float32 x means x > f."""
    with np.errstate(over="ignore"):  # beyond float32's range: +-inf, then the rule below
        f = np.float32(t)
    if float(f) > t:
        f = np.nextafter(f, np.float32(-np.inf))
    return f


# --- launches ---------------------------------------------------------------------------------

def levels(n: int, per_block: int = V1_SCAN_THREADS) -> list[int]:
    """v1's scan-then-propagate: the number of block sums at each level, down to 1."""
    sizes = []
    while True:
        n = H.cdiv(n, per_block)
        sizes.append(n)
        if n == 1:
            return sizes


def tile_of(warps: int, items: int) -> int:
    """Elements in a v2-v4 tile: `warps` warps of 32 lanes, `items` elements a lane."""
    return warps * 32 * items


def _ptr(p) -> int:
    """A device pointer for a kernel argument (an empty output has none: 0, never written)."""
    return 0 if p is None else int(p)


def threads_of(warps: int, opts: int = 0) -> int:
    """Threads of a v3/v4 block: the data warps, and one look-back warp with OPT_LBW."""
    return 32 * (warps + (1 if opts & OPT_LBW else 0))


def launch_single_pass(d, fn, warps: int, items: int, *, opts: int = 0,
                       first_ns: int = LB_FIRST_NS, retry_ns: int = LB_RETRY_NS):
    """Launch a v3/v4-shaped kernel `fn` (one block a tile of warps x 32 x items, `opts` the
    kernel's OPT_* bits) on DeviceCase d. The sweep uses it for the candidates too."""
    n = d.size[0]
    if n == 0:
        return
    if int(d.x) % 16:
        raise ValueError("x must be 16-byte aligned (float4 loads)")
    tiles = H.cdiv(n, tile_of(warps, items))
    status, counters, epoch = lookback_state(d, tiles)
    fn.prepared_call((tiles, 1, 1), (threads_of(warps, opts), 1, 1), d.x, _ptr(d.y), _ptr(d.count), status,
                     counters, n, np.float32(d.params.get("threshold", 0.0)), epoch, first_ns,
                     retry_ns)


SINGLE_PASS_SIG = "PPPPPqfIII"


def _v1(d, op, n, t):
    f = d.scratch("flags", (n,), np.int32)
    grid = (H.cdiv(n, V1_THREADS), 1, 1)
    K(f"compact_v1_flags_{op}", "PPqf").prepared_call(grid, (V1_THREADS, 1, 1), d.x, f, n, t)
    sizes = levels(n)
    sums = int(d.scratch("sums", (sum(sizes),), np.int32))
    starts = np.cumsum([0] + sizes[:-1]) * 4
    block = K("compact_v1_scan_block", "PPPq")
    add = K("compact_v1_scan_add", "PPq")

    def level(k, src, dst, count):  # inclusive scan of `count` ints, src -> dst
        nb, s = sizes[k], sums + int(starts[k])
        block.prepared_call((nb, 1, 1), (V1_SCAN_THREADS, 1, 1), src, dst, s, count)
        if nb > 1:
            level(k + 1, s, s, nb)
            add.prepared_call((nb - 1, 1, 1), (V1_SCAN_THREADS, 1, 1), dst, s, count)

    level(0, f, f, n)  # in place: the flags become inclusive positions
    K(f"compact_v1_scatter_{op}", "PPPPq").prepared_call(grid, (V1_THREADS, 1, 1), d.x, f,
                                                          _ptr(d.y), _ptr(d.count), n)


def _v2(d, op, n, t):
    tiles = H.cdiv(n, tile_of(**V2))
    counts = d.scratch("tile_counts", (tiles,), np.int32)
    block = (32 * V2["warps"], 1, 1)
    K(f"compact_v2_count_{op}", "PPqf").prepared_call((tiles, 1, 1), block, d.x, counts, n, t)
    K("compact_v2_scan", "PPi").prepared_call((1, 1, 1), (1024, 1, 1), counts, _ptr(d.count), tiles)
    K(f"compact_v2_scatter_{op}", "PPPqf").prepared_call((tiles, 1, 1), block, d.x, _ptr(d.y),
                                                         counts, n, t)


def launch(version, d):
    A.version(version, VERSIONS)  # an unknown name never runs another version's kernel
    n = d.size[0]
    op = A.choice(d.params.get("op", "select"), "op", OPS)
    t = np.float32(d.params.get("threshold", 0.0))
    if version == "v1":
        _v1(d, op, n, t)
    elif version == "v2":
        _v2(d, op, n, t)
    elif version == "v3":
        launch_single_pass(d, K(f"compact_v3_{op}", SINGLE_PASS_SIG), **V3)
    else:
        launch_single_pass(d, K(f"compact_v4_{op}", SINGLE_PASS_SIG), V4["warps"], V4["items"],
                           opts=V4["opts"])


# --- libraries --------------------------------------------------------------------------------

CUB_SOURCE = Path(__file__).resolve().parent / "cub_select.cu"
CUB_FUNCS = {"select": "day56_cub_select", "partition": "day56_cub_partition",
             "unique": "day56_cub_unique"}
CUB_NAMES = {"select": CUB_ROW, "partition": "CUB DevicePartition::If",
             "unique": "CUB DeviceSelect::Unique"}


@functools.lru_cache(maxsize=None)
def cub_library():
    """cub_select.cu built with nvcc into a shared library (once, cached: common.build) and
    loaded with ctypes."""
    from common.build import host_library
    from common.gpu import context, device_info

    context()  # the primary context first: the runtime in the library then uses it too
    so = host_library(CUB_SOURCE, device_info()["arch"], tag="day56_cub")
    for op, name in CUB_FUNCS.items():
        fn = getattr(so, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p,
                       ctypes.c_void_p, ctypes.c_void_p, ctypes.c_longlong] + \
                      ([] if op == "unique" else [ctypes.c_float])
    return so


class CubCompaction:
    """One CUB call (select, partition or unique) on fixed device pointers, with its temporary
    storage allocated once; calling it enqueues CUB's kernels on the default stream."""

    def __init__(self, op: str, x, y, count, n: int, threshold: float = 0.0):
        from pycuda import gpuarray

        self.fn = getattr(cub_library(), CUB_FUNCS[op])
        tail = [] if op == "unique" else [ctypes.c_float(float(threshold))]
        self.args = [ctypes.c_void_p(int(x)), ctypes.c_void_p(_ptr(y)),
                     ctypes.c_void_p(int(count)), ctypes.c_longlong(n)] + tail
        self.temp_bytes = ctypes.c_size_t(0)
        self._call(None)  # the size query
        self.temp = gpuarray.empty((max(1, self.temp_bytes.value),), np.uint8)
        self.ptr = ctypes.c_void_p(int(self.temp.gpudata))

    def _call(self, temp):
        rc = self.fn(temp, ctypes.byref(self.temp_bytes), *self.args)
        if rc:
            raise RuntimeError(f"CUB returned cudaError {rc}")

    def __call__(self):
        self._call(self.ptr)


def baselines(d):
    """On the select case: CUB's DeviceSelect::If (into its own buffer), CuPy's boolean
    indexing and torch.masked_select, all on d's x without copies. A library that cannot be
    set up is left out with a line that says why."""
    out = {}
    t = float(d.params.get("threshold", 0.0))
    n = d.size[0]
    k = d.case.outputs["y"][0][0]

    def add(name, build):
        try:
            out[name] = build()
        except Exception as e:  # a missing or broken library must not stop the day
            print(f"  baseline {name} left out: {type(e).__name__}: {e}")

    def cub():
        from pycuda import gpuarray

        y = gpuarray.empty((n,), np.float32)
        c = gpuarray.empty((1,), np.int32)
        call = CubCompaction("select", d.x, y.gpudata, c.gpudata, n, kernel_threshold(t))

        def run():
            call()
            return y[:k]  # the first k of CUB's output (k: the reference's count)

        run.keep = (y, c, call)
        return run

    add(CUB_ROW, cub)
    torch, cupy = torch_or_none(), cupy_or_none()
    if cupy is not None:
        def cupy_index():
            xc = cupy.asarray(d.array("x"))  # a view of pycuda's memory
            return lambda: xc[xc > t]

        add(CUPY_ROW, cupy_index)
    if torch is not None:
        def masked():
            xt = as_torch(d.array("x"))
            return lambda: torch.masked_select(xt, xt > t)

        add(TORCH_ROW, masked)
    return out


# --- public functions ---------------------------------------------------------------------

def _compact(op: str, x, threshold, version: str):
    """Check, run `op`, return (y, count) with y at its full capacity (n)."""
    x = A.floats(x, "x", ndim=1, what="(a vector of values)")
    t = 0.0 if threshold is None else A.real(threshold, "threshold")
    if x.size == 0:
        return np.empty(0, np.float32), 0
    A.fits_int32("x", x.size)
    case = H.Case((x.size, 0), inputs={"x": x},
                  outputs={"y": ((x.size,), np.float32), "count": ((1,), np.int32)},
                  params={"op": op, "threshold": float(kernel_threshold(t))})
    out = H.run(launch, version, case)
    k = int(out["count"][0])
    if not 0 <= k <= x.size:
        raise RuntimeError(f"the kernel returned count {k} for {x.size} elements")
    return out["y"], k


def select(x, threshold, version=BEST) -> np.ndarray:
    """x[x > threshold] of a 1-D array on the GPU, in order, float32 (other real dtypes are
    converted; the comparison is exact against the threshold as given, even a float64 one).
    NaN is never selected. An empty x gives an empty array without a launch."""
    version = A.version(version, VERSIONS)
    if threshold is None:
        raise TypeError("threshold is None; pass a number (x > threshold is kept)")
    y, k = _compact("select", x, threshold, version)
    return y[:k].copy()


def partition(x, threshold, version=BEST) -> tuple[np.ndarray, int]:
    """(y, k): y[:k] = x[x > threshold] in order, y[k:] = the other elements in REVERSE order
    (as cub::DevicePartition::If), float32, len(y) = len(x)."""
    version = A.version(version, VERSIONS)
    if threshold is None:
        raise TypeError("threshold is None; pass a number (x > threshold goes first)")
    return _compact("partition", x, threshold, version)


def unique(x, version=BEST) -> np.ndarray:
    """x without consecutive duplicates (x[i] kept iff i == 0 or x[i] != x[i-1]), float32; on
    sorted input this is np.unique(x). Every NaN is kept (NaN != NaN)."""
    version = A.version(version, VERSIONS)
    y, k = _compact("unique", x, None, version)
    return y[:k].copy()


# --- extras: partition and unique, and what each version moves ---------------------------------

def traffic_rows(n: int, k: int, copy_gbps: float | None = None) -> list[list]:
    """Launches and DRAM bytes of each version for select of n floats keeping k (the op needs
    4n + 4k), and the time that traffic takes at the copy rate: a floor for each version."""
    rows = []
    for v in VERSIONS:
        if v == "v1":
            sizes = levels(n)
            launches = 2 + 2 * len(sizes) - 1
            # flags: read x, write f; scan: read + write f, the add pass again (all but the
            # first block); scatter: read x and f, write y
            nbytes = 8 * n + 8 * n + 8 * max(0, n - V1_SCAN_THREADS) + 8 * n + 4 * k
        elif v == "v2":
            launches, nbytes = 3, 8 * n + 4 * k
        else:
            launches, nbytes = 1, 4 * n + 4 * k
        row = [v, VERSIONS[v], str(launches), f"{nbytes / 1e9:.2f} GB",
               f"{nbytes / (4 * n + 4 * k):.2f}x"]
        if copy_gbps:
            row.append(f"{nbytes / (copy_gbps * 1e9) * 1e3:.3f} ms")
        rows.append(row)
    return rows


def _library_row(name, fn, case, ceil) -> list:
    """Check a library call's returned output against the case's reference, then time it."""
    from common.check import compare
    from common.runner import to_host
    from common.timing import time_fn

    want = case.expected()["y"]
    ok = compare(to_host(fn()).reshape(want.shape), want, None, name).ok
    t = time_fn(fn)
    gbps = case.bytes / (t.median_ms * 1e-3) / 1e9
    return {"name": name, "median_ms": t.median_ms, "gbps": gbps,
            "pct_of_ceiling": 100 * gbps / ceil["gbps"] if ceil.get("gbps") else None, "ok": ok}


def _op_rows(report, op: str, size) -> list[dict]:
    """Every version of `op` at `size` checked and timed, then CUB's kernel on the same
    buffers, and torch's where it has the op."""
    from common.runner import case_ceilings, check_and_time

    case = make_op_case(op, size, np.random.default_rng(56))
    d = H.DeviceCase(case)
    ceil = case_ceilings(case)
    rows = []
    for v in VERSIONS:
        r = check_and_time(report, f"{op} {v}", lambda dd, v=v: launch(v, dd), case, d, ceil=ceil)
        rows.append({"name": v, **{k: r.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling", "ok")}})
    try:
        call = CubCompaction(op, d.x, d.y, d.count, size[0], kernel_threshold(case.params["threshold"]))
        r = check_and_time(report, CUB_NAMES[op], lambda dd: call(), case, d, ceil=ceil)
        rows.append({"name": CUB_NAMES[op], **{k: r.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling", "ok")}})
    except Exception as e:
        report.say(f"  {CUB_NAMES[op]} not timed: {type(e).__name__}: {e}")
    torch = torch_or_none()
    if torch is not None and op == "unique":
        xt = as_torch(d.array("x"))
        try:
            rows.append(_library_row("torch.unique_consecutive",
                                     lambda: torch.unique_consecutive(xt), case, ceil))
        except Exception as e:
            report.say(f"  torch.unique_consecutive not timed: {type(e).__name__}: {e}")
    return rows


def _library_kernels(report):
    """Which kernels (and how many launches) one call of each select library makes, as CUPTI
    sees them (through torch.profiler; needs torch)."""
    if torch_or_none() is None:
        return
    from common.baselines import kernels_launched

    d = H.DeviceCase(make_case((1_000_003, 50), np.random.default_rng(1)))
    rows = []
    for name, fn in baselines(d).items():
        try:
            fn()  # first call: builds, caches, allocates
            names = [short_kernel_name(k) for k, _ in kernels_launched(fn)]
            rows.append([name, str(len(names)), ", ".join(dict.fromkeys(names))])
        except Exception as e:
            report.say(f"  kernels of {name} not listed: {type(e).__name__}: {e}")
    report.section("kernels one select launches, per library (n = 1000003)", rows,
                   ["library", "launches", "kernels"])


def extras(report, mode):
    """partition and unique: every version checked on ragged sizes (every mode), then timed
    at EXTRA_SIZE with CUB (not in --check); and the traffic of each version."""
    from common.runner import check_and_time

    for op in ("partition", "unique"):
        for size in EXTRA_CHECK_SIZES:
            case = make_op_case(op, size, np.random.default_rng(size[0] * 101 + size[1]))
            d = H.DeviceCase(case)
            parts = []
            for v in VERSIONS:
                r = check_and_time(report, f"{op} {v}", lambda dd, v=v: launch(v, dd), case, d,
                                   timed=False)
                parts.append(f"{v} {'ok' if r['ok'] else 'FAIL'}")
            report.say(f"  check {op} {H.size_str(size):>12}: " + ", ".join(parts))
    if mode == "check":
        return
    from common.timing import copy_bandwidth_gbps

    n, pct = SIZES["default"]
    k = int(round(n * pct / 100))
    rows = traffic_rows(n, k, copy_bandwidth_gbps())
    report.section(f"memory traffic of select at n = {n}, {pct}% kept (the op's own bytes: "
                   f"4n + 4k; floor = that traffic at the copy rate)", rows,
                   ["version", "what", "launches", "DRAM traffic", "vs 4n + 4k", "floor"])
    _library_kernels(report)
    recorded = {}
    for op in ("partition", "unique"):
        rows = _op_rows(report, op, EXTRA_SIZE)
        cub = next((r for r in rows if r["name"] == CUB_NAMES[op] and r.get("median_ms")), None)
        what = "selected" if op == "partition" else "of positions start a run"
        report.section(f"{op} at n = {EXTRA_SIZE[0]}, {EXTRA_SIZE[1]}% {what}",
                       [[r["name"], f"{r['median_ms']:.4g}" if r.get("median_ms") else "-",
                         f"{r['gbps']:.0f}" if r.get("gbps") else "-",
                         f"{r['pct_of_ceiling']:.1f}" if r.get("pct_of_ceiling") else "-",
                         f"{cub['median_ms'] / r['median_ms']:.2f}x" if cub and r.get("median_ms") else "-",
                         "ok" if r.get("ok") else "FAIL"] for r in rows],
                       ["version", "ms", "GB/s", "% of ceiling", "vs CUB", "ok"])
        recorded[op] = rows
    report.record("ops", {"size": list(EXTRA_SIZE), **recorded})
