"""Day 10 driver: y = act(x * scale + bias[col]), unfused chain vs fused kernels.

The harness case is bias + scale + GELU (tanh form), the MLP activation of GPT-2; ReLU runs
through the same kernels:

    from days.day10_elementwise_ops.driver import bias_act
    y = bias_act(x, bias, scale=0.5, act="relu", version="v4")   # numpy in, numpy out
"""
import functools

import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256
SCALE = 0.7  # the harness case's scale (any float32 works)

VERSIONS = {
    "v1": "unfused chain: scale, +bias, gelu (3 kernels)",
    "v2": "one fused kernel, scalar",
    "v3": "fused, float4",
    "v4": "fused, float4, 4 rows in flight, streaming",
}
SIZE_HELP = "ROWSxCOLS, e.g. 8192x3072 (rows = tokens, cols = features)"
SIZES = {"small": (64, 1000), "default": (8192, 3072), "large": (8192, 8192)}
# 1 and 1x1; widths not a multiple of 4 (scalar path: 1, 5, 7, 33, 1001, 4099); narrow rows
# (2D blocks with several rows each); one very long row (grid.x = 977); more rows than the
# 65535 grid.y limit (the row loop); rows not a multiple of the 4-row unroll.
CHECK_SIZES = [(1, 1), (1, 33), (3, 7), (33, 1000), (7, 1001), (1000, 5), (1, 1000003),
               (2, 4099), (65, 3072), (70001, 4), (5, 8192), (1031, 12)]
BENCH_SIZES = [(8192, 3072), (8192, 8192)]


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
def grid_for(name, n, ncols, rows_per_iter):
    """One full wave of resident blocks (a grid-stride loop does the rest): more blocks would
    leave a partial last wave, fewer would leave SMs idle."""
    from common.gpu import blocks_per_sm, device_info

    tx, ty = block_shape(ncols)
    gx = H.cdiv(ncols, tx)
    wave = device_info()["sms"] * blocks_per_sm(K(name), tx * ty)
    gy = max(1, min(65535, H.cdiv(n, ty * rows_per_iter), wave // gx))
    return (gx, gy, 1), (tx, ty, 1)


def launch(version, d):
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
    if version == "v2":
        name, vec, rows = f"bias_act_v2_{act}", 1, 1
    else:
        vec = 4 if c % 4 == 0 else 1  # float4 needs every row 16-byte aligned
        name = f"bias_act_{version}_vec{vec}_{act}"
        rows = 4 if version == "v4" else 1
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


def bias_act(x, bias, scale=1.0, act="gelu", version="v4"):
    """act(x * scale + bias) on the GPU for a 2-D float32 x and a bias of x.shape[1] floats."""
    if act not in reference.ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; one of {sorted(reference.ACTIVATIONS)}")
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"bias_act expects a 2-D array, got shape {x.shape}")
    bias = np.ascontiguousarray(bias, dtype=np.float32).ravel()
    if bias.shape != (x.shape[1],):
        raise ValueError(f"bias must have {x.shape[1]} elements, got {bias.shape}")
    case = H.Case(x.shape, inputs={"x": x, "bias": bias}, outputs={"y": (x.shape, np.float32)},
                  params={"scale": scale, "act": act})
    return H.run(launch, version, case)["y"]


def relu_bias(x, bias, scale=1.0, version="v4"):
    """relu(x * scale + bias): the same kernels with ReLU."""
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
