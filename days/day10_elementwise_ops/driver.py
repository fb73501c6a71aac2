"""Day 10 driver: y = act(x * scale + bias[col]), unfused chain vs fused kernels.

The harness case is bias + scale + GELU (tanh form), the MLP activation of GPT-2; ReLU runs
through the same kernels:

    from days.day10_elementwise_ops.driver import bias_act
    y = bias_act(x, bias, scale=0.5, act="relu")                  # numpy in, numpy out
    y = bias_act(x, bias, scale=0.5, act="gelu", version="v3")
"""
import functools
import math

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256
SCALE = 0.7  # the harness case's scale (any float32 works)

VERSIONS = {
    "v1": "unfused chain: scale, +bias, gelu (3 kernels)",
    "v2": "one fused kernel, scalar",
    "v3": "fused, float4 (= v2 for C % 4 != 0)",
    "v4": "fused, float4, 4 rows in flight, streaming (C % 4 != 0: scalar)",
    "v5": "any width: the matrix as one float4 array, column per element",
}
BEST = "v5"   # the default of the public functions: float4 speed at every width
SIZE_HELP = "ROWSxCOLS, e.g. 8192x3072 (rows = tokens, cols = features)"
SIZES = {"small": (64, 1000), "default": (8192, 3072), "large": (8192, 8192)}
# 1 and 1x1; rows shorter than a float4 (1, 2, 3); widths not a multiple of 4 with at least 4
# rows, so that every head length 0..3 occurs (3, 5, 7, 33, 1001, 4099, 100003; 6 and 30 have
# C % 4 == 2: heads 0 and 2); narrow rows (2D blocks with several rows each); one very long
# row (grid.x = 977); more rows than the 65535 grid.y limit (the row loop), aligned and odd;
# rows not a multiple of the 4-row unroll.
CHECK_SIZES = [(1, 1), (9, 1), (6, 2), (9, 3), (1, 33), (3, 7), (9, 7), (7, 6), (9, 30),
               (33, 1000), (7, 1001), (1000, 5), (1, 1000003), (5, 100003), (6, 4099),
               (65, 3072), (100, 3073), (70001, 4), (70001, 3), (5, 8192), (1031, 12)]
# 8192 tokens x 4 * 768 (GPT-2 small's MLP) and x 8192; 8191 x 3073: no row 16-byte aligned
# but one in four, and no multiple of any tile
BENCH_SIZES = [(8192, 3072), (8192, 8192), (8191, 3073)]
# CURRICULUM.md: fused >= 85% of the copy bandwidth; issue 8: faster than torch at the odd size
BAR = [{"pct": 85}, {"sizes": [(8191, 3073)], "vs_baseline": 1.0}]


def validate_size(size):
    n, c = size
    if n > 2 ** 31 - 1 or c > 2 ** 31 - 1:
        raise ValueError("rows and columns must each be below 2^31 (the kernels take them as int32)")


def make_case(size, rng, act="gelu", scale=SCALE):
    n, c = size
    x = (2.0 * rng.standard_normal((n, c))).astype(np.float32)
    bias = (0.5 * rng.standard_normal(c)).astype(np.float32)
    return H.Case(size, inputs={"x": x, "bias": bias}, outputs={"y": ((n, c), np.float32)},
                  reference=lambda: {"y": reference.bias_act(x, bias, scale, act)},
                  params={"scale": scale, "act": act},
                  # the OP's bytes, for every version: read x and bias once, write y once.
                  # v1 moves about 3x this (see extras / README); its GB/s shows the cost.
                  bytes=2 * x.nbytes + bias.nbytes)


def bytes_moved(version, n, c):
    """DRAM bytes a version moves if nothing stays in L2 between kernels (v1's intermediates
    t1 and t2 are each written once and read once)."""
    A.version(version, VERSIONS)
    n, c = A.count(n, "n"), A.count(c, "c")
    elem = 4 * n * c
    if version == "v1":
        return 6 * elem + 4 * c  # x->t1, t1->t2, t2->y: three reads, three writes
    return 2 * elem + 4 * c


# --- launch geometry ------------------------------------------------------------------------

def block_shape(ncols):
    """(threads in x, threads in y): x covers the columns (a multiple of 32, at most 256),
    y stacks rows so that narrow matrices still use 256-thread blocks."""
    tx = min(THREADS, 32 * H.cdiv(ncols, 32))
    return tx, THREADS // tx


@functools.lru_cache(maxsize=None)
def grid_for(name, n, ncols, rows_per_iter, row_step=1):
    """One full wave of resident blocks (a grid-stride loop does the rest): more blocks would
    leave a partial last wave, fewer would leave SMs idle. row_step: the rows the grid covers
    at once (gridDim.y * blockDim.y, the kernel's row step) are a multiple of it (v5: 4)."""
    from common.gpu import blocks_per_sm, device_info

    tx, ty = block_shape(ncols)
    gx = H.cdiv(ncols, tx)
    wave = device_info()["sms"] * blocks_per_sm(K(name), tx * ty)
    gy = max(1, min(65535, H.cdiv(n, ty * rows_per_iter), wave // gx))
    return (gx, round_rows(gy, ty, row_step), 1), (tx, ty, 1)


def round_rows(gy, ty, row_step):
    """gy rounded down (but to at least one step) so that gy * ty is a multiple of row_step."""
    m = row_step // math.gcd(ty, row_step)
    return max(m, gy // m * m)


def same_as(version, size):
    """v3 runs v2's kernel where rows are not 16-byte aligned (C % 4 != 0)."""
    return "v2" if version == "v3" and size[1] % 4 else None


def launch(version, d):
    if version not in VERSIONS:  # an unknown name never runs another version
        A.version(version, VERSIONS)
    n, c = d.size
    act = d.params.get("act", "gelu")
    scale = np.float32(d.params.get("scale", SCALE))
    if version == "v1":
        t1, t2 = d.scratch("t1", d.size), d.scratch("t2", d.size)
        grid, block = grid_for("scale_v1", n, c, 1)  # the four v1 kernels share one shape
        K("scale_v1", "PPiif").prepared_call(grid, block, d.x, t1, n, c, scale)
        K("add_bias_v1", "PPPii").prepared_call(grid, block, t1, d.bias, t2, n, c)
        K(f"{act}_v1", "PPii").prepared_call(grid, block, t2, d.y, n, c)
        return
    if version == "v5":  # 1-D: one wave of blocks walks the N*C/4 float4 (and the tail)
        from common.gpu import blocks_per_sm, device_info

        name = f"bias_act_v5_{act}"
        wave = device_info()["sms"] * blocks_per_sm(K(name), THREADS)
        grid, block = (min(wave, H.cdiv(n * c // 4 + 1, THREADS)), 1, 1), (THREADS, 1, 1)
    else:
        if version == "v2" or (version == "v3" and c % 4):  # float4 needs 16-byte aligned rows
            name, vec, rows = f"bias_act_v2_{act}", 1, 1
        elif version == "v3":
            name, vec, rows = f"bias_act_v3_{act}", 4, 1
        elif version == "v4":
            vec = 4 if c % 4 == 0 else 1
            name, rows = f"bias_act_v4_vec{vec}_{act}", 4
        else:
            raise AssertionError(f"launch has no branch for {version}")
        grid, block = grid_for(name, n, c // vec, rows)
    K(name, "PPPiif").prepared_call(grid, block, d.x, d.bias, d.y, n, c, scale)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x, b = as_torch(d.array("x")), as_torch(d.array("bias"))
    s = float(np.float32(d.params.get("scale", SCALE)))
    F = torch.nn.functional
    if d.params.get("act", "gelu") == "gelu":
        return {"torch eager: gelu(x*s + b)": lambda: F.gelu(x * s + b, approximate="tanh"),
                "torch: gelu(add(b, x, alpha=s))":
                    lambda: F.gelu(torch.add(b, x, alpha=s), approximate="tanh")}
    return {"torch eager: relu(x*s + b)": lambda: torch.relu(x * s + b),
            "torch: relu(add(b, x, alpha=s))": lambda: torch.relu(torch.add(b, x, alpha=s))}


F32_MAX = float(np.finfo(np.float32).max)


def bias_act(x, bias, scale=1.0, act="gelu", version=BEST):
    """y = act(x * scale + bias[col]) on the GPU, in float32, for a 2-D x [rows, cols] and a
    bias of cols floats; act is "gelu" (tanh form) or "relu".

    x and bias are converted to float32 (integers and other float widths are; complex, bool
    and strings are refused with a TypeError); scale must be a finite float32. An empty x
    (no rows or no columns) returns an empty float32 array of its shape without launching
    anything. An unknown version or activation raises ValueError naming the choices."""
    version = A.version(version, VERSIONS)
    act = A.choice(act, "act", reference.ACTIVATIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    n, c = x.shape
    bias = A.floats(bias, "bias", shape=(c,), what="(one per column of x)")
    scale = A.real(scale, "scale", low=-F32_MAX, high=F32_MAX)
    A.fits_int32("x", n, "rows")
    A.fits_int32("x", c, "columns")
    if x.size == 0:
        return np.empty((n, c), np.float32)
    case = H.Case(x.shape, inputs={"x": x, "bias": bias}, outputs={"y": (x.shape, np.float32)},
                  params={"scale": scale, "act": act})
    return H.run(launch, version, case)["y"]


def relu_bias(x, bias, scale=1.0, version=BEST):
    """relu(x * scale + bias): bias_act with act="relu" (same checks, same kernels)."""
    return bias_act(x, bias, scale, "relu", version)


def extras(report, mode):
    if mode == "check":
        return
    rows = []
    for n, c in BENCH_SIZES:
        op = bytes_moved("v2", n, c)
        for v in VERSIONS:
            launches = 3 if v == "v1" else 1
            b = bytes_moved(v, n, c)
            rows.append([f"{n}x{c}", v, launches, f"{b / 1e6:.0f} MB", f"{b / op:.1f}x"])
    report.section("bytes each version moves through DRAM (all tables count the op's bytes: "
                   "read x + bias, write y)", rows,
                   ["size", "version", "launches", "bytes moved", "vs the op"])
    report.record("bytes_moved", rows)
