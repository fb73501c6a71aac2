"""Day 17 driver: prefix sums of int32, five versions, inclusive or exclusive.

    from days.day17_prefix_sum.driver import prefix_sum
    y = prefix_sum(x, exclusive=False)     # numpy in, int32 out; version=BEST by default

The harness checks the inclusive scan (the op's table); the tests check both.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, torch_or_none
from common.gpu import blocks_per_sm, device_info, driver

from . import reference

K = H.Kernels(__file__)
BLOCK_THREADS = 512                        # v1 and v2 (kernel.cu: V1_THREADS, V2_THREADS)
PER_BLOCK = {"v1": 512, "v2": 1024}        # elements a block scans in v1 / v2
T_THREADS, TILE = 256, 8192                # v3 and v4 tiles (kernel.cu: T_THREADS, TILE)
# v5's shape (kernel.cu: V5_WARPS, V5_CHUNKS): a tile is warps x chunks x 128 ints
V5 = {"warps": 4, "chunks": 6}
# nanoseconds a look-back sleeps before its first read and after each read that found a
# predecessor with nothing published yet (0: no sleep); kernel arguments, so a sweep can vary them.
# Measured (.notes/day17_scan_sweep.py, NVIDIA H200, 2026-11-23, 2^28 + 3 ints): v5 with
# 1200/600 ran 0.690 ms (0.988x CUB's InclusiveSum), with no sleeps (0/0) 0.794 ms
LB_FIRST_NS, LB_RETRY_NS = 1200, 600
EPOCHS = 1 << 30                           # v5 status words hold the launch number in 30 bits

VERSIONS = {
    "v1": "Hillis-Steele blocks, scan-then-propagate",
    "v2": "Blelloch blocks (padded), scan-then-propagate",
    "v3": "reduce-then-scan, 3 kernels, warp shuffles",
    "v4": "single pass, decoupled look-back",
    "v5": "look-back in light blocks, block-wide look-back, no memset",
}
# The fastest correct version at the default size in results/day17.json (v5 is not in the
# committed results yet: the next GPU run decides between v4 and v5).
BEST = "v4"
SIZE_HELP = "N int32 values, e.g. 2^28+3"
SIZES = {"small": (1000,), "default": (2 ** 28 + 3,), "large": (2 ** 30 + 3,)}
# 1; around a warp; around v1's 512 and v2's 1024 blocks, v5's 3072 tile, 4096 (a sweep shape
# of v5) and v3/v4's 8192 tile; three levels of v1 (512^2 + 1) and v2 (1024^2 + 1); 1000003 =
# 123 tiles of 8192 (look-backs cross many windows); 2^22 + 5 = 1366 tiles of 3072 (v5's
# block-wide look-back crosses rounds of 128); 2^24 + 5 = 5462 tiles of 3072 (a long v5 grid)
CHECK_SIZES = [(1,), (31,), (33,), (511,), (513,), (1023,), (1025,), (3071,), (3073,), (4095,),
               (4097,), (8191,), (8193,), (262145,), (1000003,), (1048577,), (2 ** 22 + 5,),
               (2 ** 24 + 5,)]
# 2^28 + 3: a length that is no multiple of 4 nor of any tile, beside the aligned 2^28
BENCH_SIZES = [(2 ** 20,), (2 ** 28,), (2 ** 28 + 3,)]
CUB_ROW = "CUB InclusiveSum (in place)"
# CURRICULUM.md: the best version at >= 80% of the memory ceiling and faster than CUB's scan,
# at the full-size lengths
BAR = [{"sizes": [(2 ** 28,), (2 ** 28 + 3,)], "pct": 80, "vs_baseline": 1.0, "baseline": CUB_ROW}]
MAX_N = (2 ** 31 - 1) * PER_BLOCK["v1"]    # v1 launches one block per 512 ints


def validate_size(size):
    (n,) = size
    if n > MAX_N:
        raise ValueError(f"n = {n} is too long: v1 launches one block per 512 ints, at most "
                         f"2^31 - 1 blocks, so n <= {MAX_N}")


def make_case(size, rng):
    (n,) = size
    # small values: the sums of 2^28 of them (< 7 * 2^28) stay below 2^31, so a library that
    # widens to int64 agrees too; the kernels wrap modulo 2^32 either way (see the tests)
    x = rng.integers(0, 8, n, dtype=np.int32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((n,), np.int32)},
                  reference=lambda: {"y": reference.inclusive_scan(x)},
                  params={"exclusive": 0},
                  bytes=2 * x.nbytes)  # read x once, write y once


def levels(n: int, per_block: int) -> list[int]:
    """Scan-then-propagate (v1, v2): the number of block sums at each level, down to 1."""
    sizes = []
    while True:
        n = H.cdiv(n, per_block)
        sizes.append(n)
        if n == 1:
            return sizes


def segments(n: int, max_segments: int) -> tuple[int, int]:
    """v3: (segments G, tiles per segment) for n elements: G <= max_segments, none empty."""
    tiles = H.cdiv(n, TILE)
    per = H.cdiv(tiles, min(max_segments, tiles, 1024))
    return H.cdiv(tiles, per), per


def tile_of(warps: int, chunks: int) -> int:
    """Ints in a v3-v5 tile: each of `warps` warps owns `chunks` chunks of 128."""
    return warps * chunks * 128


def next_epoch(epoch: int) -> tuple[int, bool]:
    """The launch number after `epoch` (1 .. EPOCHS - 1), and whether the status words
    must be cleared first (the numbers start over, so an old word could carry the new one)."""
    e = epoch + 1
    return (1, True) if e >= EPOCHS else (e, False)


def lookback_state(d, tiles: int) -> tuple[int, int, int]:
    """(status words, counters, epoch) for one look-back launch on DeviceCase d (v5 here; day 56's
    single-pass kernels use the same status words). One buffer: two
    uint32 tile counters in its first 8 bytes, then one 64-bit status word per tile. It is
    zeroed when allocated and again only when the launch numbers start over."""
    if tiles >= 2 ** 31:
        raise ValueError(f"{tiles} tiles: the tile counter is 32 bits")
    buf = int(d.scratch("lookback", (tiles + 1,), np.uint64, zero=True))
    state = d.__dict__.setdefault("_lookback_epoch", {"epoch": 0})
    state["epoch"], clear = next_epoch(state["epoch"])
    if clear:
        nbytes = d.__dict__["_scratch"]["lookback"].nbytes
        driver().memset_d32(buf, 0, nbytes // 4)
    return buf + 8, buf, state["epoch"]


def launch_lookback(d, fn, warps: int, chunks: int, *,
                    first_ns: int = LB_FIRST_NS, retry_ns: int = LB_RETRY_NS):
    """Launch a v5-shaped kernel `fn` (one block per tile) on DeviceCase d. kernel.cu's scan_v5
    uses it, and so does .notes/day17_scan_sweep.py for other instantiations of its body."""
    (n,) = d.size
    exclusive = int(d.params.get("exclusive", 0))
    if int(d.x) % 16 or int(d.y) % 16:
        raise ValueError("x and y must be 16-byte aligned (the tiles move 16 bytes per access)")
    tile = tile_of(warps, chunks)
    tiles = H.cdiv(n, tile)
    status, counters, epoch = lookback_state(d, tiles)
    fn.prepared_call((tiles, 1, 1), (32 * warps, 1, 1), d.x, d.y, status, counters, n, exclusive,
                     epoch, first_ns, retry_ns)


def _scan_then_propagate(d, version, src, dst, n, exclusive):
    per_block = PER_BLOCK[version]
    sizes = levels(n, per_block)
    buf = int(d.scratch("sums", sum(sizes), np.int32))
    starts = np.cumsum([0] + sizes[:-1]) * 4
    block = K(f"scan_{version}_block", "PPPqi")
    add = K(f"scan_{version}_add", "PPqi")

    def level(k, src, dst, count, excl):
        nb = sizes[k]
        sums = buf + int(starts[k])
        block.prepared_call((nb, 1, 1), (BLOCK_THREADS, 1, 1), src, dst, sums, count, excl)
        if nb > 1:
            level(k + 1, sums, sums, nb, 0)  # inclusive scan of the block totals, in place
            add.prepared_call((nb - 1, 1, 1), (BLOCK_THREADS, 1, 1), dst, sums, count, per_block)

    level(0, src, dst, n, exclusive)


def launch(version, d):
    A.version(version, VERSIONS)  # an unknown name never runs another version's kernel
    (n,) = d.size
    exclusive = int(d.params.get("exclusive", 0))
    if version in ("v1", "v2"):
        _scan_then_propagate(d, version, d.x, d.y, n, exclusive)
    elif version == "v3":
        down = K("scan_v3_downsweep", "PPPqii")
        g, per = segments(n, device_info()["sms"] * blocks_per_sm(down, T_THREADS))
        seg = d.scratch("segments", g, np.int32)
        K("scan_v3_reduce", "PPqi").prepared_call((g, 1, 1), (T_THREADS, 1, 1), d.x, seg, n, per)
        K("scan_v3_partials", "Pi").prepared_call((1, 1, 1), (1024, 1, 1), seg, g)
        down.prepared_call((g, 1, 1), (T_THREADS, 1, 1), d.x, d.y, seg, n, per, exclusive)
    elif version == "v4":
        tiles = H.cdiv(n, TILE)
        status = d.scratch("status", tiles + 1, np.uint64)  # one word per tile, then the tile counter
        driver().memset_d32(status, 0, 2 * (tiles + 1))
        K("scan_v4", "PPPPqi").prepared_call((tiles, 1, 1), (T_THREADS, 1, 1), d.x, d.y, status,
                                             int(status) + 8 * tiles, n, exclusive)
    else:  # v5
        launch_lookback(d, K("scan_v5", "PPPPqiIII"), V5["warps"], V5["chunks"])


# --- libraries --------------------------------------------------------------------------------

def cub_inclusive_sum(cupy):
    """CUB's DeviceScan::InclusiveSum through CuPy (cupy.cuda.cub.cub_scan scans in place),
    as fn(array) -> array. cub_scan returns None instead of scanning when CuPy's CUB cannot
    take the array; then this raises, so a CUB row is never timed without CUB."""
    from cupy.cuda import cub

    op = getattr(cub, "CUPY_CUB_CUMSUM", 5)  # cupy_cub_op.CUPY_CUB_CUMSUM

    def scan(a):
        out = cub.cub_scan(a, op)
        if out is None:
            raise RuntimeError("CuPy's CUB declined this scan (cub.cub_scan returned None)")
        return out

    return scan


def routine_accelerators(cupy):
    """(get, set) of CuPy's routine accelerators: the list CUPY_ACCELERATORS fills at import."""
    core = cupy._core
    get = getattr(core, "get_routine_accelerators", None) or core._accelerator.get_routine_accelerators
    put = getattr(core, "set_routine_accelerators", None) or core._accelerator.set_routine_accelerators
    return get, put


def cupy_cumsum(cupy, accelerators=("cub",)):
    """cupy.cumsum(x, dtype=int32) with CuPy's routine accelerators set as given for the call
    (CuPy reads CUPY_ACCELERATORS once, at import; ("cub",) is what CUPY_ACCELERATORS=cub
    sets). With CUB, cupy.cumsum copies x into a new array and scans that in place."""
    get, put = routine_accelerators(cupy)

    def scan(a):
        before = list(get())
        put(list(accelerators))
        try:
            return cupy.cumsum(a, dtype=cupy.int32)
        finally:
            put(before)

    return scan


def baselines(d):
    """torch.cumsum, cupy.cumsum with CUB, and CUB's kernel alone, on d's x (no copies of x
    except the one CUB scans in place). A library that cannot be set up is left out with a
    line that says why."""
    out = {}

    def add(name, build):
        try:
            out[name] = build()
        except Exception as e:  # a missing or broken library must not stop the day
            print(f"  baseline {name} left out: {type(e).__name__}: {e}")

    torch, cupy = torch_or_none(), cupy_or_none()
    if torch is not None:
        def torch_cumsum():
            x = as_torch(d.array("x"))
            return lambda: torch.cumsum(x, 0, dtype=torch.int32)

        add("torch.cumsum", torch_cumsum)
    if cupy is not None:
        def with_cub():
            xc = cupy.asarray(d.array("x"))  # a view of pycuda's memory (__cuda_array_interface__)
            cumsum = cupy_cumsum(cupy)
            return lambda: cumsum(xc)

        def cub_alone():
            # CUB scans in place, so it gets a copy of x: its first call (the one the harness
            # checks) scans x, later calls rescan their own output, the same work (integer
            # adds do not care what they add)
            buf, scan = cupy.asarray(d.array("x")).copy(), cub_inclusive_sum(cupy)
            return lambda: scan(buf)

        add("cupy.cumsum (CUB)", with_cub)
        add(CUB_ROW, cub_alone)
    return out


def is_cub_scan(names) -> bool:
    """Whether kernel names include CUB's single-pass scan (cub::...DeviceScanKernel)."""
    return any("DeviceScan" in n and "Init" not in n for n in names)


# --- public functions ---------------------------------------------------------------------

def _as_int32(x) -> np.ndarray:
    """x as a 1-D int32 array: integers in int32's range (uint32 is taken as the same 32 bits,
    and whole numbers stored as floats are accepted); anything else is refused."""
    if isinstance(x, np.ndarray) and x.dtype == np.uint32:
        x = x.view(np.int32)  # the same bits: sums wrap identically modulo 2^32
    try:
        return A.integers(x, "x", ndim=1, what="(a vector of int32)")
    except ValueError as e:
        raise ValueError(f"{e} (prefix_sum scans int32 values)") from None


def _flag(v, name: str) -> bool:
    if isinstance(v, (bool, np.bool_)) or (isinstance(v, (int, np.integer)) and v in (0, 1)):
        return bool(v)
    raise TypeError(f"{name} must be True or False, got {type(v).__name__} {v!r}")


def prefix_sum(x, exclusive: bool = False, version=BEST) -> np.ndarray:
    """Inclusive (or, with exclusive=True, exclusive) prefix sum of a 1-D int32 array on the
    GPU, int32, wrapping modulo 2^32 like the reference. uint32 input is read as the same bits;
    other integer or whole-number input must fit int32. An empty x gives an empty int32 array
    without a launch."""
    version = A.version(version, VERSIONS)
    exclusive = _flag(exclusive, "exclusive")
    x = _as_int32(x)
    if x.size == 0:
        return np.empty(0, np.int32)
    validate_size(x.shape)
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": (x.shape, np.int32)},
                  params={"exclusive": int(exclusive)})
    return H.run(launch, version, case)["y"]


def inclusive_scan(x, version=BEST) -> np.ndarray:
    """y[i] = x[0] + ... + x[i] (see prefix_sum)."""
    return prefix_sum(x, False, version)


def exclusive_scan(x, version=BEST) -> np.ndarray:
    """y[i] = x[0] + ... + x[i-1], y[0] = 0 (see prefix_sum)."""
    return prefix_sum(x, True, version)


# --- extras: what each version must move -----------------------------------------------------

def traffic_rows(n: int, copy_gbps: float | None = None) -> list[list]:
    """Launches and DRAM bytes each version moves for n ints (the op itself needs 8n), and the
    time that traffic takes at the copy bandwidth: a floor for each version."""
    rows = []
    for v in VERSIONS:
        if v in ("v1", "v2"):
            sizes = levels(n, PER_BLOCK[v])
            launches = str(len(sizes) + (len(sizes) - 1))
            # level 0: read x, write y; add pass: read + write y except the first block;
            # deeper levels are tiny (they stay in L2)
            nbytes = 8 * n + 8 * max(0, n - PER_BLOCK[v]) + 16 * sum(sizes)
        elif v == "v3":
            launches, nbytes = "3", 12 * n
        elif v == "v4":
            launches, nbytes = "1 + memset", 8 * n  # the memset clears 8 bytes per 8192 ints
        else:
            launches, nbytes = "1", 8 * n
        row = [v, VERSIONS[v], launches, f"{nbytes / 1e9:.2f} GB", f"{nbytes / (8 * n):.2f}x"]
        if copy_gbps:
            row.append(f"{nbytes / (copy_gbps * 1e9) * 1e3:.3f} ms")
        rows.append(row)
    return rows


def extras(report, mode):
    if mode == "check":
        return
    from common.timing import copy_bandwidth_gbps

    n = SIZES["default"][0]
    bw = copy_bandwidth_gbps()
    rows = traffic_rows(n, bw)
    report.section(f"memory traffic per version at n = {n} (the op's own bytes: 8n; floor = "
                   f"traffic at the {bw:.0f} GB/s copy rate)", rows,
                   ["version", "what", "launches", "DRAM traffic", "vs 8n", "floor"])
    report.record("traffic", rows)
