"""Day 8 driver: shared-memory tiled matmul, tile sizes 8/16/32, then register blocking.

    from days.day08_tiled_matmul.driver import matmul
    c = matmul(a, b)                      # numpy in, numpy out (float32); version=BEST ("v7")

The problem, its checks and the cuBLAS baseline are day 7's (imported, not copied).
"""
import numpy as np

from common import args as A
from common import harness as H
from days.day07_naive_matmul import driver as day07
from days.day07_naive_matmul.driver import baselines, make_case  # noqa: F401

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "8x8 shared tiles, 1 output/thread",
    "v2": "16x16 shared tiles, 1 output/thread",
    "v3": "32x32 shared tiles, 1 output/thread",
    "v4": "64x64 tile, 1-D register blocking (8 outputs/thread)",
    "v5": "128x128 tile, 2-D register blocking (8x8/thread)",
    "v6": "v5 + float4 loads/stores, transposed A tile",
    "v7": "v6 + double-buffered shared tiles, prefetch",
}
BEST = "v7"   # the fastest at the default size (results/day08.json), exact on every shape
SIZE_HELP = day07.SIZE_HELP
SIZES = {"small": (64, 48, 80), "default": (2048, 2048, 2048), "large": (4096, 4096, 4096)}
# every tile size divides none of 33, 31, 17, 777, 513, 1031; 1000x777x513 is the headline
# ragged case; K % 4 != 0 or N % 4 != 0 send v6/v7 down the scalar path, (64, 4, 132) and
# (260, 36, 8) down the float4 path with partial tiles
CHECK_SIZES = [(1, 1, 1), (1, 1000, 1), (33, 31, 17), (17, 1, 33), (64, 64, 64),
               (127, 129, 255), (1000, 777, 513), (3, 2049, 1031), (64, 4, 132),
               (260, 36, 8), (129, 8, 257)]
# the awkward one: no dimension a multiple of any tile, K and N odd (v6/v7 take the scalar
# path), 32 x 8 = 256 blocks of 128x128: one full wave on 132 SMs x 2
AWKWARD = (4095, 4097, 1023)
BENCH_SIZES = [(2048, 2048, 2048), (4096, 4096, 4096), AWKWARD]
VERSUS_DAY07_SIZES = [(2048, 2048, 2048), AWKWARD]
BAR_FACTOR = 3.0           # CURRICULUM.md: the best tiled kernel >= 3x day 7's best

MAX_GRID_Y = 65535         # gridDim.y: v1 puts 8-row tiles of C there
MAX_ROWS = MAX_GRID_Y * 8
MAX_DIM = 2 ** 31 - 256    # the kernels index with int; a tile may reach 128 past the edge


def validate_size(size):
    """The shapes every version can take: v1's grid and 32-bit index arithmetic."""
    m, k, n = size
    if m > MAX_ROWS:
        raise ValueError(f"M = {m} rows: at most {MAX_ROWS} (v1 puts blocks of 8 rows on "
                         f"gridDim.y, at most {MAX_GRID_Y} of them)")
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v > MAX_DIM:
            raise ValueError(f"{name} = {v}: the kernels index with 32-bit ints (at most {MAX_DIM})")


SQUARE_TILE = {"v1": 8, "v2": 16, "v3": 32}
BLOCK_TILE = {"v4": (64, 64, 512), "v5": (128, 128, 256), "v6": (128, 128, 256),
              "v7": (128, 128, 256)}   # (BM, BN, threads)


def kernel_name(version, size):
    """v6/v7 take 16-byte loads only when every row of A and B starts 16-byte aligned."""
    m, k, n = size
    if version in ("v6", "v7"):
        return f"matmul_tiled_{version}_" + ("vec4" if k % 4 == 0 and n % 4 == 0 else "scalar")
    return f"matmul_tiled_{version}"


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    m, k, n = d.size
    if version in SQUARE_TILE:
        t = SQUARE_TILE[version]
        grid, block = (H.cdiv(n, t), H.cdiv(m, t), 1), (t, t, 1)
    else:
        bm, bn, threads = BLOCK_TILE[version]
        grid, block = (H.cdiv(n, bn), H.cdiv(m, bm), 1), (threads, 1, 1)
    K(kernel_name(version, d.size), "PPPiii").prepared_call(grid, block, d.a, d.b, d.c, m, n, k)


def matmul(a, b, version=BEST):
    """C = A @ B on the GPU with one of this day's kernels: A is [M, K], B is [K, N], C is
    [M, N] float32 (integer and float64 input converts to float32). An empty product (M or N
    = 0) returns an empty [M, N] array and K = 0 returns zeros, both without a launch."""
    version = A.version(version, VERSIONS)
    a = A.floats(a, "a", ndim=2, what="[M, K]")
    b = A.floats(b, "b", ndim=2, what="[K, N]")
    (m, k), (kb, n) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"a is [M, K] = {a.shape} and b must be [K, N] with K = {k} rows, "
                         f"but b has {kb}")
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)    # a sum of nothing is 0
    validate_size((m, k, n))
    case = H.Case((m, k, n), inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)})
    return H.run(launch, version, case)["c"]


# --- the bar: the best tile against day 7's best naive kernel, on the same matrices -------------

def versus_day07(size):
    """Time day 7's best naive kernel and this day's best on one device case, both checked.
    The curriculum's bar: the tiled kernel >= 3x day 7's best, at every size compared."""
    from common.timing import time_fn

    theirs = getattr(day07, "BEST", "v2")
    case = make_case(size, np.random.default_rng(8))
    d = H.DeviceCase(case)
    out = {}
    for name, fn in ((f"day07 {theirs}", lambda: day07.launch(theirs, d)),
                     (f"day08 {BEST}", lambda: launch(BEST, d))):
        r = H.check(lambda v, dd: fn(), name, case, d)
        t = time_fn(fn)
        out[name] = {"median_ms": t.median_ms, "tflops": case.flops / (t.median_ms * 1e-3) / 1e12,
                     "ok": r.ok}
    out["speedup"] = out[f"day07 {theirs}"]["median_ms"] / out[f"day08 {BEST}"]["median_ms"]
    return out


def _over_day07(rec):
    """The bar's check on a results record: {size: comparison} under extra.versus_day07 (a
    record of the older single-size form counts as 2048x2048x2048)."""
    vs = (rec.get("extra") or {}).get("versus_day07")
    if not vs:
        return False, "day 7 comparison not measured"
    per_size = {"2048x2048x2048": vs} if "speedup" in vs else vs
    bad = [s for s, r in per_size.items()
           if not all(v["ok"] for k, v in r.items() if k != "speedup")]
    if bad:
        return False, f"a kernel was wrong in the comparison at {', '.join(bad)}"
    size, worst = min(per_size.items(), key=lambda kv: kv[1]["speedup"])
    where = f" (worst of {len(per_size)} sizes)" if len(per_size) > 1 else ""
    return worst["speedup"] >= BAR_FACTOR, f"{worst['speedup']:.1f}x at {size}{where}"


BAR = [{"text": f"best >= {BAR_FACTOR:g}x day 7's best", "check": _over_day07}]


def extras(report, mode):
    if mode == "check":
        return
    rows, rec = [], {}
    for size in VERSUS_DAY07_SIZES:
        r = versus_day07(size)
        rec[H.size_str(size)] = r
        (n7, r7), (n8, r8) = [(k, v) for k, v in r.items() if k != "speedup"]
        rows.append([H.size_str(size), f"{r7['median_ms']:.3f} ms", f"{r8['median_ms']:.3f} ms",
                     f"{r['speedup']:.1f}x", "ok" if r7["ok"] and r8["ok"] else "FAIL"])
        for k, v in r.items():
            if k != "speedup" and not v["ok"]:
                report.failures.append(f"{k} wrong at {H.size_str(size)} in the day 7 comparison")
    report.section(f"day 8's best ({n8}) vs day 7's best ({n7}), bar >= {BAR_FACTOR:g}x", rows,
                   ["size", "day 7's best", "day 8's best", "speed-up", "ok"])
    report.record("versus_day07", rec)
