"""Day 8 driver: shared-memory tiled matmul, tile sizes 8/16/32, then register blocking.

    from days.day08_tiled_matmul.driver import matmul
    c = matmul(a, b, version="v7")        # numpy in, numpy out (float32)

The problem, its checks and the cuBLAS baseline are day 7's (imported, not copied).
"""
from common import harness as H
from days.day07_naive_matmul import driver as day07
from days.day07_naive_matmul.driver import baselines, make_case, validate_size  # noqa: F401

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
SIZE_HELP = day07.SIZE_HELP
SIZES = {"small": (64, 48, 80), "default": (2048, 2048, 2048), "large": (4096, 4096, 4096)}
# every tile size divides none of 33, 31, 17, 777, 513, 1031; 1000x777x513 is the headline
# ragged case; K % 4 != 0 or N % 4 != 0 send v6/v7 down the scalar path, (64, 4, 132) and
# (260, 36, 8) down the float4 path with partial tiles
CHECK_SIZES = [(1, 1, 1), (1, 1000, 1), (33, 31, 17), (17, 1, 33), (64, 64, 64),
               (127, 129, 255), (1000, 777, 513), (3, 2049, 1031), (64, 4, 132),
               (260, 36, 8), (129, 8, 257)]
BENCH_SIZES = [(2048, 2048, 2048), (4096, 4096, 4096)]

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
    m, k, n = d.size
    if version in SQUARE_TILE:
        t = SQUARE_TILE[version]
        grid, block = (H.cdiv(n, t), H.cdiv(m, t), 1), (t, t, 1)
    else:
        bm, bn, threads = BLOCK_TILE[version]
        grid, block = (H.cdiv(n, bn), H.cdiv(m, bm), 1), (threads, 1, 1)
    K(kernel_name(version, d.size), "PPPiii").prepared_call(grid, block, d.a, d.b, d.c, m, n, k)


def matmul(a, b, version="v7"):
    """C = A @ B on the GPU with one of this day's kernels (float32)."""
    return day07.run_matmul(launch, a, b, version)


BEST = "v7"


def versus_day07(size=(2048, 2048, 2048)):
    """Time day 7's best naive kernel (v2) and this day's best on the same device case:
    the curriculum's bar is best tile >= 3x day 7's best at 2048^3."""
    import numpy as np

    from common.timing import time_fn

    case = make_case(size, np.random.default_rng(8))
    d = H.DeviceCase(case)
    out = {}
    for name, fn in (("day07 v2", lambda: day07.launch("v2", d)),
                     (f"day08 {BEST}", lambda: launch(BEST, d))):
        r = H.check(lambda v, dd: fn(), name, case, d)
        t = time_fn(fn)
        out[name] = {"median_ms": t.median_ms, "tflops": case.flops / (t.median_ms * 1e-3) / 1e12,
                     "ok": r.ok}
    out["speedup"] = out["day07 v2"]["median_ms"] / out[f"day08 {BEST}"]["median_ms"]
    return out


def extras(report, mode):
    if mode == "check":
        return
    size = (2048, 2048, 2048)
    r = versus_day07(size)
    rows = [[k, f"{v['median_ms']:.3f} ms", f"{v['tflops']:.1f}", "ok" if v["ok"] else "FAIL"]
            for k, v in r.items() if k != "speedup"]
    report.section(f"day 8's best vs day 7's best at {H.size_str(size)} (bar: >= 3x): "
                   f"{r['speedup']:.1f}x", rows, ["kernel", "median", "TFLOP/s", "ok"])
    report.record("versus_day07", r)
    for k, v in r.items():
        if k != "speedup" and not v["ok"]:
            report.failures.append(f"{k} wrong at {H.size_str(size)} in the day 7 comparison")
