"""Day 55 driver: LSD radix sort of 32-bit keys and key-value pairs, up to onesweep.

    from days.day55_radix_sort.driver import sort, sort_pairs, argsort
    y = sort(x)                          # uint32, int32 or float32; numpy in, numpy out
    y = sort(x, descending=True)         # stable descending (equal keys in input order)
    k, v = sort_pairs(keys, values)      # values: any 4-byte dtype, moved with their keys
    i = argsort(x)                       # == np.argsort(x, kind="stable") (int64)

A size is (n, dist, words, kind): n keys from distribution `dist`, sorted alone (words = 1) or
with a 32-bit value each (words = 2: the values are 0..n-1, so the sorted values are the stable
permutation and any stability slip shows), as key type `kind` (KINDS: uint32, int32, float32,
ascending or descending). The device arrays hold the keys' raw 32-bit words.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, short_kernel_name, torch_or_none

from days.day38_merge_sort.driver import cupy_sort_kernels

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "4-bit digits, 8 passes x 3 kernels: tile counts, one-block scan, ballot rank + scatter",
    "v2": "8-bit digits, 4 passes x 3 kernels, reduce-then-scan; match rank, smem exchange",
    "v3": "onesweep: 1 histogram read, then 1 kernel a pass with decoupled look-back",
    "v4": "v3 with each tile's counts published before its ranking (early counts), tuned tile",
}
BEST = "v4"

# kind -> (numpy dtype of the keys, descending); kernel.cu's mode bits: 1 signed, 2 float,
# 4 descending
KINDS = {1: (np.uint32, False), 2: (np.int32, False), 3: (np.float32, False),
         4: (np.float32, True), 5: (np.uint32, True), 6: (np.int32, True)}
DISTS = {1: "uniform random 32-bit words (floats: with NaNs, infinities, -0.0 sprinkled in)",
         2: "16 distinct keys", 3: "already in order", 4: "in reverse order", 5: "all equal"}
ALL_EQUAL_KEY = 0x9E3779B9  # not 0xFFFFFFFF: poisoned outputs read as that
FLOAT_SPECIALS = np.array([0x00000000, 0x80000000, 0x7FC00000, 0xFFC00000, 0x7F800001,
                           0x7F800000, 0xFF800000, 0x00000001], np.uint32)  # +-0, NaNs, +-inf, denormal

SIZE_HELP = ("NxDISTxWORDSxKIND: N keys; DIST 1 random, 2 only 16 distinct keys, 3 in order, "
             "4 reversed, 5 all equal; WORDS 1 keys only, 2 keys + values; KIND 1 uint32, 2 int32, "
             "3 float32, 4 float32 descending, 5 uint32 descending, 6 int32 descending. "
             "E.g. 2^28x1x1x1")
SIZES = {"small": (1000, 1, 2, 1), "default": (2 ** 24, 1, 1, 1), "large": (2 ** 28, 1, 1, 1)}
# Tiles: v1 1024 keys; v2, v3, v4 7680 (512 x 15); the v4 candidates 4864, 7296, 8192, 9728.
# Every distribution, width and kind; lengths 1, 2, 31, 33, around each tile, several tiles
# with a ragged last one (the look-back over 100s of tiles), and 4000037 (v2: more tiles than
# blocks, so each downsweep block walks several tiles).
CHECK_SIZES = [(1, 1, 1, 1), (1, 1, 2, 3), (2, 4, 2, 2), (31, 1, 2, 1), (33, 2, 2, 3),
               (33, 5, 1, 4), (1000, 3, 2, 5), (1023, 1, 2, 6), (1025, 2, 2, 1),
               (4863, 1, 2, 3), (7679, 1, 2, 1), (7681, 2, 2, 3), (8193, 4, 1, 2),
               (3 * 7680 + 5, 4, 2, 2), (100003, 2, 2, 4), (1000003, 1, 2, 1),
               (1000003, 2, 1, 3), (2 ** 20 + 7, 1, 2, 6), (2 ** 20 + 7, 5, 2, 1),
               (2 ** 20 + 7, 3, 1, 2), (4000037, 1, 2, 1), (4000037, 2, 2, 4)]
# The bar's two cases (keys, and pairs) at 2^28, keys at 2^24, and float pairs at an awkward length
BENCH_SIZES = [(2 ** 28, 1, 1, 1), (2 ** 28, 1, 2, 1), (2 ** 24, 1, 1, 1), (30_000_001, 1, 2, 3)]
CUPY_SORT, CUPY_ARGSORT, TORCH_SORT = "cupy.sort", "cupy.argsort", "torch.sort(stable=True)"
# CURRICULUM.md / issue 13: >= 70% of CUB's (CuPy's) throughput at 2^28 keys, keys and pairs
BAR = [{"sizes": [(2 ** 28, 1, 1, 1)], "vs_baseline": 0.7, "baseline": CUPY_SORT},
       {"sizes": [(2 ** 28, 1, 2, 1)], "vs_baseline": 0.7, "baseline": CUPY_ARGSORT}]

N_MAX = 2 ** 30 - 1      # the look-back packs a count of up to n in 30 bits
V1_THREADS, V1_ITEMS = 256, 4                 # kernel.cu: V1_THREADS, V1_ITEMS
V2_THREADS, V2_ITEMS, V2_BLOCKS_PER_SM = 512, 15, 2
V3 = (512, 15)                                # radix_v3_pass_*
HIST_THREADS, HIST_BLOCKS = 512, 1024         # radix_v3_histogram: at most 1024 blocks
# v4: (threads, keys a thread, ranking "m" match / "b" ballots); the instantiated candidates
V4 = (512, 19, "b")   # the second sweep's fastest (.notes/day55_sweep_results.md)
V4_CANDIDATES = [(512, 15, "m"), (512, 15, "b"), (512, 19, "m"), (384, 19, "m"), (256, 19, "m"),
                 (1024, 8, "m"), (512, 19, "b"), (384, 19, "b"), (256, 19, "b"), (512, 12, "b"),
                 (256, 15, "b")]
MODES = {kind: (2 if dt == np.float32 else 1 if dt == np.int32 else 0) | (4 if desc else 0)
         for kind, (dt, desc) in KINDS.items()}
_KIND_OF = {(np.dtype(dt), desc): kind for kind, (dt, desc) in KINDS.items()}


def validate_size(size):
    n, dist, words, kind = size
    if n > N_MAX:
        raise ValueError(f"n = {n} is too long: the look-back counts in 30 bits, so at most "
                         f"2^30 - 1 = {N_MAX} keys")
    if dist not in DISTS:
        raise ValueError(f"DIST must be one of 1-5 ({'; '.join(f'{k} {v}' for k, v in DISTS.items())}), "
                         f"got {dist}")
    if words not in (1, 2):
        raise ValueError(f"WORDS must be 1 (keys only) or 2 (keys and values), got {words}")
    if kind not in KINDS:
        raise ValueError(f"KIND must be one of 1-6 (1 uint32, 2 int32, 3 float32, 4 float32 "
                         f"descending, 5 uint32 descending, 6 int32 descending), got {kind}")


def make_raw(n: int, dist: int, kind: int, rng) -> np.ndarray:
    """The keys' raw 32-bit words."""
    dt, desc = KINDS[kind]
    is_float = dt == np.float32
    if dist == 5:
        return np.full(n, ALL_EQUAL_KEY, np.uint32)
    if dist == 2:
        palette = rng.integers(0, 2 ** 32, 16, dtype=np.uint32)
        if is_float:
            palette[:8] = FLOAT_SPECIALS
        raw = palette[rng.integers(0, 16, n)]
    else:
        raw = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
        if is_float and n >= 50:
            at = rng.integers(0, n, n // 50)
            raw[at] = FLOAT_SPECIALS[rng.integers(0, FLOAT_SPECIALS.size, at.size)]
    if dist in (3, 4):
        raw = raw[reference.argsort(raw.view(dt), desc)]
        if dist == 4:
            raw = np.ascontiguousarray(raw[::-1])
    return raw


def make_case(size, rng):
    n, dist, words, kind = size
    validate_size(size)
    dt, desc = KINDS[kind]
    raw = make_raw(n, dist, kind, rng)
    if words == 1:
        return H.Case(size, inputs={"x": raw}, outputs={"keys": ((n,), np.uint32)},
                      reference=lambda: {"keys": raw[reference.argsort(raw.view(dt), desc)]},
                      bytes=2 * raw.nbytes, read_bytes=raw.nbytes)  # read the keys, write them
    v = np.arange(n, dtype=np.uint32)

    def ref():
        order = reference.argsort(raw.view(dt), desc)
        return {"keys": raw[order], "vals": order}

    return H.Case(size, inputs={"x": raw, "v": v},
                  outputs={"keys": ((n,), np.uint32), "vals": ((n,), np.uint32)},
                  reference=ref, bytes=4 * raw.nbytes, read_bytes=2 * raw.nbytes)


# --- launching ----------------------------------------------------------------------------------

_hook = None  # extras: called with each kernel's name after its launch (per-kernel times)


def _go(fn, name, grid, block, *args):
    fn.prepared_call(grid, block, *args)
    if _hook is not None:
        _hook(name)


def destinations(steps: int) -> list[str]:
    """Where each pass writes, alternating so that the last one writes the output ('out' or
    'tmp'); the input is only read."""
    return ["out" if (steps - 1 - k) % 2 == 0 else "tmp" for k in range(steps)]


def v4_kernel(cfg, suffix: str) -> str:
    threads, items, rank = cfg
    if tuple(cfg) not in [tuple(c) for c in V4_CANDIDATES]:
        raise ValueError(f"v4 shape {cfg} is not instantiated in kernel.cu (V4_CANDIDATES: "
                         f"{V4_CANDIDATES})")
    return f"radix_v4_t{threads}_i{items}_{rank}_{suffix}"


def tile_of(version: str, cfg=None) -> int:
    """Keys a tile (a block's unit of work) holds."""
    if version == "v1":
        return V1_THREADS * V1_ITEMS
    if version == "v2":
        return V2_THREADS * V2_ITEMS
    if version == "v3":
        return V3[0] * V3[1]
    c = cfg or V4
    return c[0] * c[1]


def v2_plan(n: int, sms: int) -> tuple[int, int]:
    """(tiles a block, blocks): one wave of V2_BLOCKS_PER_SM blocks an SM, none empty."""
    tiles = H.cdiv(n, tile_of("v2"))
    per = H.cdiv(tiles, sms * V2_BLOCKS_PER_SM)
    return per, H.cdiv(tiles, per)


def _aligned(*ptrs):
    """The histogram and upsweep kernels read uint4s: buffers start on 16 bytes."""
    for p in ptrs:
        if int(p) % 16:
            raise ValueError(f"device buffer at {int(p):#x} is not 16-byte aligned")


def launch(version, d, cfg=None):
    """Sort d.x (carrying d.v) into d.keys (and d.vals). `cfg` overrides V4 (the sweep)."""
    A.version(version, VERSIONS)  # an unknown name never runs another version's kernel
    from common.gpu import driver

    n, _, words, kind = d.size
    if n == 0:
        return
    mode = MODES[kind]
    pairs = words == 2
    suffix = "pairs" if pairs else "keys"
    out = {"out": (d.keys, d.vals if pairs else 0),
           "tmp": (d.scratch("tmp_keys", (n,), np.uint32),
                   d.scratch("tmp_vals", (n,), np.uint32) if pairs else 0)}
    src = (d.x, d.v if pairs else 0)
    _aligned(src[0], out["tmp"][0])
    cuda = driver()

    if version == "v1":
        tiles = H.cdiv(n, tile_of("v1"))
        counts = d.scratch("counts", (16 * tiles,), np.uint32)
        count = K("radix_v1_count", "PiiiPi")
        scan = K("radix_scan_counts_v1", "Pi")
        scatter = K(f"radix_v1_scatter_{suffix}", "PPPPiiiPi")
        for p, dst in enumerate(destinations(8)):
            _go(count, "count", (tiles, 1, 1), (V1_THREADS, 1, 1), src[0], n, 4 * p, mode, counts, tiles)
            _go(scan, "scan", (1, 1, 1), (1024, 1, 1), counts, 16 * tiles)
            _go(scatter, f"scatter {p}", (tiles, 1, 1), (V1_THREADS, 1, 1), *src, *out[dst], n, 4 * p,
                mode, counts, tiles)
            src = out[dst]
        return

    if version == "v2":
        from common.gpu import sm_count

        per, blocks = v2_plan(n, sm_count())
        counts = d.scratch("counts", (256 * blocks,), np.uint32)
        up = K("radix_v2_upsweep", "PiiiPi")
        scan = K("radix_scan_counts_v1", "Pi")
        down = K(f"radix_v2_downsweep_{suffix}", "PPPPiiiPi")
        for p, dst in enumerate(destinations(4)):
            _go(up, "upsweep", (blocks, 1, 1), (V2_THREADS, 1, 1), src[0], n, 8 * p, mode, counts, per)
            _go(scan, "scan", (1, 1, 1), (1024, 1, 1), counts, 256 * blocks)
            _go(down, f"downsweep {p}", (blocks, 1, 1), (V2_THREADS, 1, 1), *src, *out[dst], n, 8 * p,
                mode, counts, per)
            src = out[dst]
        return

    # v3, v4: onesweep
    if version == "v3":
        threads, name = V3[0], f"radix_v3_pass_{suffix}"
    else:
        threads, name = (cfg or V4)[0], v4_kernel(cfg or V4, suffix)
    tiles = H.cdiv(n, tile_of(version, cfg))
    # meta: hist[4][256] | tile counters[4] (+4 spare) | starts[4][256]
    meta = int(d.scratch("meta", (2056,), np.uint32))
    hist, counters, starts = meta, meta + 4 * 1024, meta + 4 * 1032
    status = int(d.scratch("status", (2 * tiles * 256,), np.uint32))
    status_of = (status, status + 4 * tiles * 256)
    cuda.memset_d32_async(meta, 0, 1032)             # histograms and tile counters
    cuda.memset_d32_async(status_of[0], 0, tiles * 256)  # pass 0's status words
    histogram = K("radix_v3_histogram", "PiiP")
    scan = K("radix_v3_scan", "PP")
    sweep = K(name, "PPPPiiiPPPP")
    _go(histogram, "histogram", (max(1, min(HIST_BLOCKS, H.cdiv(n, HIST_THREADS * 16))), 1, 1),
        (HIST_THREADS, 1, 1), src[0], n, mode, hist)
    _go(scan, "scan", (1, 1, 1), (1024, 1, 1), hist, starts)
    for p, dst in enumerate(destinations(4)):
        nxt = status_of[(p + 1) & 1] if p < 3 else 0
        _go(sweep, f"pass {p}", (tiles, 1, 1), (threads, 1, 1), *src, *out[dst], n, 8 * p, mode,
            starts + 4 * 256 * p, counters + 4 * p, status_of[p & 1], nxt)
        src = out[dst]


# --- libraries ----------------------------------------------------------------------------------

def _returns(fn, output):
    fn.output = output
    return fn


def baselines(d):
    """cupy.sort (a copy, then CUB's onesweep radix sort: what a CuPy user calls) for keys,
    cupy.argsort (CUB's pair sort of keys and int64 indices) for pairs, and
    torch.sort(stable=True). Their outputs are checked where they are comparable bit for bit:
    integer keys ascending (cupy), and torch's indices for integer keys; float orders of
    -0.0 and NaNs are the libraries' own, so those are timed unchecked."""
    n, _, words, kind = d.size
    dt, desc = KINDS[kind]
    checked = dt != np.float32
    out = {}
    cupy = cupy_or_none()
    if cupy is not None and not desc:
        xc = cupy.asarray(d.array("x")).view(dt)  # a view of pycuda's memory
        if words == 1:
            if checked:
                out[CUPY_SORT] = _returns(lambda: cupy.sort(xc).view(cupy.uint32), "keys")
            else:
                out[CUPY_SORT] = lambda: (cupy.sort(xc), None)[1]
        elif checked:
            out[CUPY_ARGSORT] = _returns(lambda: cupy.argsort(xc), "vals")
        else:
            out[CUPY_ARGSORT] = lambda: (cupy.argsort(xc), None)[1]
    torch = torch_or_none()
    if torch is not None:
        t = as_torch(d.array("x")).view(torch.int32)
        if dt == np.uint32:
            t = t ^ (-2 ** 31)  # torch has no uint32 sort: the same order as int32, copied once
        elif dt == np.float32:
            t = t.view(torch.float32)
        if words == 2 and checked:
            out[TORCH_SORT] = _returns(
                lambda: torch.sort(t, stable=True, descending=desc).indices, "vals")
        else:
            out[TORCH_SORT] = lambda: (torch.sort(t, stable=True, descending=desc), None)[1]
    return out


# --- public functions ---------------------------------------------------------------------------

def _keys(keys, name="keys"):
    a = A._as_array(keys, name)
    if a.dtype.kind == "b":
        raise TypeError(f"{name} must hold numbers, got booleans")
    if a.dtype not in reference.KEY_DTYPES:
        raise TypeError(f"{name} must be uint32, int32 or float32, got {a.dtype}; convert first "
                        f"(e.g. {name}.astype(np.int32) if the values fit)")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size > N_MAX:
        raise ValueError(f"{name} has {a.size} keys; the kernels take at most 2^30 - 1 = {N_MAX}")
    return np.ascontiguousarray(a)


def _descending(v) -> bool:
    if not isinstance(v, (bool, np.bool_)):
        raise TypeError(f"descending must be True or False, got {type(v).__name__} {v!r}")
    return bool(v)


def _run(raw: np.ndarray, values, kind: int, version: str):
    """The GPU sort of the raw words (and 32-bit values): (keys, values or None)."""
    n = raw.size
    inputs, outputs = {"x": raw}, {"keys": ((n,), np.uint32)}
    if values is not None:
        inputs["v"] = values
        outputs["vals"] = ((n,), np.uint32)
    case = H.Case((n, 1, 1 if values is None else 2, kind), inputs=inputs, outputs=outputs)
    res = H.run(launch, version, case)
    return res["keys"], res.get("vals")


def sort(keys, descending=False, version=BEST) -> np.ndarray:
    """The keys in order (stable), in their dtype and bits: equals np.sort(keys, kind="stable")
    ascending (floats: NaNs last, -0.0 and +0.0 tied in input order). An empty array gives an
    empty one without a launch."""
    version = A.version(version, VERSIONS)
    x = _keys(keys)
    desc = _descending(descending)
    if x.size == 0:
        return x.copy()
    out, _ = _run(x.view(np.uint32), None, _KIND_OF[(x.dtype, desc)], version)
    return out.view(x.dtype)


def sort_pairs(keys, values, descending=False, version=BEST):
    """(keys in order, values moved with their keys; equal keys keep their input order).
    values: an array of the keys' length of a 4-byte dtype, moved bit for bit."""
    version = A.version(version, VERSIONS)
    x = _keys(keys)
    desc = _descending(descending)
    vals = A._as_array(values, "values")
    if vals.dtype.kind not in "fiu" or vals.dtype.itemsize != 4:
        raise TypeError(f"values must be a 4-byte type (int32, uint32 or float32), got {vals.dtype}; "
                        "for indices use argsort")
    A.same_shape(keys=x, values=vals)
    vals = np.ascontiguousarray(vals)
    if x.size == 0:
        return x.copy(), vals.copy()
    k, v = _run(x.view(np.uint32), vals.view(np.uint32), _KIND_OF[(x.dtype, desc)], version)
    return k.view(x.dtype), v.view(vals.dtype)


def argsort(keys, descending=False, version=BEST) -> np.ndarray:
    """The stable sorting permutation (int64): np.argsort(keys, kind="stable") ascending."""
    version = A.version(version, VERSIONS)
    x = _keys(keys)
    desc = _descending(descending)
    if x.size == 0:
        return np.zeros(0, np.int64)
    _, idx = _run(x.view(np.uint32), np.arange(x.size, dtype=np.uint32),
                  _KIND_OF[(x.dtype, desc)], version)
    return idx.astype(np.int64)


# --- extras: DRAM traffic, per-kernel times, what CuPy runs -------------------------------------

def traffic_rows(n: int, words: int = 1) -> list[list[str]]:
    """Bytes each version must move through DRAM at n keys (4 bytes a word), beside the floor
    (read once, write once)."""
    w = 4 * n
    rows = {
        "v1": ("8 x (count read + scatter read + write)", 8 * (w + 2 * words * w)),
        "v2": ("4 x (upsweep read + downsweep read + write)", 4 * (w + 2 * words * w)),
        "v3": ("histogram read + 4 x (read + write)", w + 4 * 2 * words * w),
        "v4": ("histogram read + 4 x (read + write)", w + 4 * 2 * words * w),
        "floor": ("read once, write once", 2 * words * w),
    }
    return [[k, what, f"{b / 1e9:.2f} GB", f"{b / (2 * words * w):.1f}"] for k, (what, b) in rows.items()]


def kernel_times(version: str, size, reps: int = 5, cfg=None) -> list[tuple[str, float]]:
    """(kernel, microseconds) of each launch of `version` at `size`: an event after every launch,
    mean of `reps` runs (the first run warms up)."""
    global _hook
    from common.gpu import driver

    cuda = driver()
    d = H.DeviceCase(make_case(size, np.random.default_rng(5)))
    launch(version, d, cfg)
    names, events = [], []

    def note(name):
        ev = cuda.Event()
        ev.record()
        names.append(name)
        events.append(ev)

    acc = None
    for _ in range(reps):
        names.clear()
        events.clear()
        note("start")
        _hook = note
        try:
            launch(version, d, cfg)
        finally:
            _hook = None
        events[-1].synchronize()
        us = np.array([1e3 * events[i + 1].time_since(events[i]) for i in range(len(events) - 1)])
        acc = us if acc is None else acc + us
    return list(zip(names[1:], (acc / reps).tolist()))


def extras(report, mode):
    if mode == "check":
        return
    n = 2 ** 28
    report.section("DRAM traffic at 2^28 keys (keys only)", traffic_rows(n),
                   ["version", "trips", "bytes", "x floor"])
    for words, what in ((1, "keys"), (2, "pairs")):
        size = (n, 1, words, 1)
        times = kernel_times(BEST, size)
        bytes_pass = 2 * words * 4 * n
        rows = [[k, f"{us:.1f}", f"{bytes_pass / (us * 1e-6) / 1e9:.0f}" if k.startswith("pass") else "-"]
                for k, us in times]
        rows.append(["total", f"{sum(us for _, us in times):.1f}", "-"])
        report.section(f"kernels at 2^28 {what}, best version ({BEST}; events between launches, "
                       "mean of 5)",
                       rows, ["kernel", "us", "GB/s"])
        report.record(f"kernel_times_{what}", [[k, us] for k, us in times])
    ks = cupy_sort_kernels(n)
    if ks is None:
        report.say("\n(cupy.sort's kernels not listed: needs CuPy and torch's profiler)")
        return
    rows = [[short_kernel_name(name)[:60], f"{us:.1f}"] for name, us in ks]
    report.section("kernels cupy.sort launches at 2^28 keys (CUPTI, one call)", rows,
                   ["kernel", "us"])
    report.record("cupy_sort_kernels", [[name, us] for name, us in ks])
