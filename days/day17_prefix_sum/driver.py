"""Day 17 driver: prefix sums of int32, four versions, inclusive or exclusive.

    from days.day17_prefix_sum.driver import prefix_sum
    y = prefix_sum(x, exclusive=False, version="v4")    # numpy in, int32 out

The harness checks the inclusive scan (the op's table); the tests check both.
"""
import numpy as np

from common import harness as H
from common.baselines import as_torch, cupy_or_none, torch_or_none
from common.gpu import blocks_per_sm, device_info, driver

from . import reference

K = H.Kernels(__file__)
BLOCK_THREADS = 512                        # v1 and v2 (kernel.cu: V1_THREADS, V2_THREADS)
PER_BLOCK = {"v1": 512, "v2": 1024}        # elements a block scans in v1 / v2
T_THREADS, TILE = 256, 8192                # v3 and v4 tiles (kernel.cu: T_THREADS, TILE)

VERSIONS = {
    "v1": "Hillis-Steele blocks, scan-then-propagate",
    "v2": "Blelloch blocks (padded), scan-then-propagate",
    "v3": "reduce-then-scan, 3 kernels, warp shuffles",
    "v4": "single pass, decoupled look-back",
}
SIZE_HELP = "N int32 values, e.g. 2^28+3"
SIZES = {"small": (1000,), "default": (2 ** 28 + 3,), "large": (2 ** 30 + 3,)}
# 1; around a warp; around v1's 512 and v2's 1024 blocks and the 8192 tile; three levels of
# v1 (512^2 + 1) and v2 (1024^2 + 1); 1000003 = 245 tiles, so look-backs cross many windows
CHECK_SIZES = [(1,), (31,), (33,), (511,), (513,), (1023,), (1025,), (4095,), (4097,), (8191,), (8193,),
               (262145,), (1000003,), (1048577,), (2 ** 22 + 5,)]
BENCH_SIZES = [(2 ** 20,), (2 ** 28 + 3,)]


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
    else:
        raise ValueError(f"unknown version {version!r}")


def baselines(d):
    out = {}
    try:
        torch = torch_or_none()
        if torch is not None:
            x = as_torch(d.array("x"))
            out["torch.cumsum"] = lambda: torch.cumsum(x, 0, dtype=torch.int32)
    except Exception:  # a baseline that cannot be built is left out, not fatal
        pass
    try:
        cupy = cupy_or_none()
        if cupy is not None:
            xc = cupy.asarray(d.array("x"))
            out["cupy.cumsum (CUB)"] = lambda: cupy.cumsum(xc, dtype=cupy.int32)
    except Exception:
        pass
    return out


def prefix_sum(x, exclusive: bool = False, version="v4") -> np.ndarray:
    """Inclusive (or exclusive) prefix sum of a 1-D int32 array on the GPU, int32, wrapping
    modulo 2^32 like the reference."""
    x = np.asarray(x).ravel()
    if x.dtype == np.uint32:
        x = x.view(np.int32)
    elif x.size and (not np.issubdtype(x.dtype, np.integer)
                     or x.min() < np.iinfo(np.int32).min or x.max() > np.iinfo(np.int32).max):
        raise ValueError("prefix_sum takes int32 values")
    x = np.ascontiguousarray(x, dtype=np.int32)
    if x.size == 0:
        return x.copy()
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": (x.shape, np.int32)},
                  params={"exclusive": int(bool(exclusive))})
    return H.run(launch, version, case)["y"]


def inclusive_scan(x, version="v4") -> np.ndarray:
    return prefix_sum(x, False, version)


def exclusive_scan(x, version="v4") -> np.ndarray:
    return prefix_sum(x, True, version)


# --- extras: what each version must move -----------------------------------------------------

def traffic_rows(n: int, copy_gbps: float | None = None) -> list[list]:
    """Launches and DRAM bytes each version moves for n ints (the op itself needs 8n), and the
    time that traffic takes at the copy bandwidth: a floor for each version."""
    rows = []
    for v in VERSIONS:
        if v in ("v1", "v2"):
            sizes = levels(n, PER_BLOCK[v])
            launches = len(sizes) + (len(sizes) - 1)
            # level 0: read x, write y; add pass: read + write y except the first block;
            # deeper levels are tiny (they stay in L2)
            nbytes = 8 * n + 8 * max(0, n - PER_BLOCK[v]) + 16 * sum(sizes)
        elif v == "v3":
            launches, nbytes = 3, 12 * n
        else:
            launches, nbytes = 1, 8 * n   # plus a memset of the status words
        row = [v, VERSIONS[v], str(launches), f"{nbytes / 1e9:.2f} GB", f"{nbytes / (8 * n):.2f}x"]
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
