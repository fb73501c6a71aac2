"""Day 19 driver: softmax backward in three versions, and the fused softmax + cross-entropy
gradient (an op beside the versions: its own function, checked and timed in extras()).

    from days.day19_softmax_backward.driver import softmax_backward, softmax_ce_grad
    dZ = softmax_backward(A, dA)                 # A = softmax(Z), dA = dL/dA, both [rows, cols]
    dZ = softmax_ce_grad(Z, y)                   # d mean(-log softmax(Z)[r, y_r]) / dZ
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

_args = A  # the same module, for softmax_backward, whose first argument is named A as in the math

K = H.Kernels(__file__)
THREADS = 256          # v1 and v2: one block per row

VERSIONS = {
    "v1": "row-dot kernel, then elementwise kernel",
    "v2": "fused, block per row, two passes",
    "v3": "fused, row in registers, float4, 1 read 1 write",
}
BEST = "v3"            # the fastest correct version at 8192x8192 (results/day19.json)
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192"
SIZES = {"small": (64, 1000), "default": (8192, 8192), "large": (16384, 16384)}
# widths 1, 5, 33 (head/tail only), 4099 and 8193 (odd: head + float4 body + tail), 4096,
# 16388 and 50257 (too wide for registers: v3's two-pass path)
CHECK_SIZES = [(1, 1), (7, 33), (1000, 5), (5, 1000), (9, 4099), (4, 4096), (3, 8193),
               (33, 16388), (2, 50257)]
# square rows, short rows, and an LM head: GPT-2's vocabulary of 50257 classes (odd, no tile
# divides it; 2.5 GB moved; v3 takes its two-pass kernel there)
BENCH_SIZES = [(8192, 8192), (65536, 1024), (4096, 50257)]
# the fused CE gradient: every path on ragged widths; timed with the row in registers (8192)
# and staged in shared memory (50257): 268 and 412 MB of logits
CE_CHECK_SIZES = [(1, 1), (7, 10), (1000, 5), (33, 1000), (5, 8193), (4, 16388), (3, 50257),
                  (2, 70001)]
CE_BENCH_SIZES = [(8192, 8192), (2048, 50257)]
# The kernels index within a row and count rows in 32-bit ints, and step their loops by up to
# 65535 rows (v1's grid.y) or 1024 columns: no index wraps while both stay below 2^31 - 2^16.
MAX_DIM = 2 ** 31 - 2 ** 16
F32_MAX = float(np.finfo(np.float32).max)


def _ce_bar(rec):
    """The fused CE gradient at >= 80% of its ceiling at every CE bench size."""
    timed = ((rec.get("extra") or {}).get("ce_grad") or {}).get("timed") or []
    got = {tuple(e["size"]): e.get("pct_of_ceiling", e.get("pct_of_copy"))  # (2026-11-22 name)
           for e in timed if e.get("ok")}
    missing = [H.size_str(s) for s in CE_BENCH_SIZES if got.get(tuple(s)) is None]
    if missing:
        return False, f"fused CE gradient not measured at {', '.join(missing)}"
    size, pct = min(((s, got[tuple(s)]) for s in CE_BENCH_SIZES), key=lambda kv: kv[1])
    return pct >= 80, f"{pct:.1f}% (bar 80.0%) worst at {H.size_str(size)}"


# CURRICULUM.md: >= 80% of copy bandwidth, for the softmax backward at every bench size and
# for the fused softmax + cross-entropy gradient at its bench sizes
BAR = [{"sizes": BENCH_SIZES, "pct": 80},
       {"text": "fused CE gradient >= 80% of the ceiling at every CE bench size", "check": _ce_bar}]


def validate_size(size):
    rows, cols = size
    for what, v in (("rows", rows), ("columns", cols)):
        if v > MAX_DIM:
            raise ValueError(f"{v} {what}: the kernels index rows and columns in 32 bits "
                             f"(at most 2^31 - 2^16 = {MAX_DIM})")


def make_case(size, rng):
    rows, cols = size
    z = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(2.0)
    z -= z.max(axis=1, keepdims=True)
    a = np.exp(z)
    a /= a.sum(axis=1, keepdims=True)           # a softmax output (float32 is fine: it is an input)
    da = rng.standard_normal((rows, cols), dtype=np.float32)
    return H.Case(size, inputs={"A": a, "dA": da}, outputs={"dZ": ((rows, cols), np.float32)},
                  reference=lambda: {"dZ": reference.softmax_backward(a, da)},
                  bytes=3 * a.nbytes,        # read A and dA, write dZ
                  read_bytes=2 * a.nbytes)   # two arrays read for one written


def v3_config(cols: int):
    """(kernel, threads) for v3: the smallest register array that holds the row's float4."""
    n4 = cols // 4  # at least the aligned float4 count of any row (head/tail are scalars)
    if n4 <= 4 * 256:
        threads = 256
    elif n4 <= 8 * 512:
        threads = 512
    else:
        return "smbwd_v3_long", 1024
    items = next(i for i in (1, 2, 4, 8) if n4 <= i * threads)
    return f"smbwd_v3_items{items}", threads


def launch(version, d):
    A.version(version, VERSIONS)  # an unknown name is refused, never run as another version
    rows, cols = d.size
    if version == "v1":
        dot = d.scratch("dot", (rows,))
        K("smbwd_v1_rowdot", "PPPii").prepared_call((rows, 1, 1), (THREADS, 1, 1), d.A, d.dA, dot,
                                                    rows, cols)
        grid = (H.cdiv(cols, THREADS), min(rows, 65535), 1)
        K("smbwd_v1_apply", "PPPPii").prepared_call(grid, (THREADS, 1, 1), d.A, d.dA, dot, d.dZ,
                                                    rows, cols)
    elif version == "v2":
        K("smbwd_v2", "PPPii").prepared_call((rows, 1, 1), (THREADS, 1, 1), d.A, d.dA, d.dZ, rows, cols)
    else:  # v3
        name, threads = v3_config(cols)
        K(name, "PPPii").prepared_call((rows, 1, 1), (threads, 1, 1), d.A, d.dA, d.dZ, rows, cols)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    a, da = as_torch(d.array("A")), as_torch(d.array("dA"))
    op = torch.ops.aten._softmax_backward_data.default
    return {"torch _softmax_backward_data": lambda: op(da, a, -1, torch.float32)}


def softmax_backward(A, dA, version=BEST):
    """dZ = A * (dA - rowsum(dA * A)) on the GPU, in float32: the gradient through a row
    softmax. A (the softmax output) and dA = dL/dA are 2-D [rows, cols] of one shape (any real
    dtype, converted to float32). An empty A (no rows or no columns) gives an empty dZ, and
    nothing is launched."""
    version = _args.version(version, VERSIONS)
    A = _args.floats(A, "A", ndim=2, what="[rows, cols]")
    dA = _args.floats(dA, "dA", ndim=2, what="[rows, cols]")
    _args.same_shape(A=A, dA=dA)
    if A.size == 0:
        return np.zeros(A.shape, np.float32)
    validate_size(A.shape)
    case = H.Case(A.shape, inputs={"A": A, "dA": dA}, outputs={"dZ": (A.shape, np.float32)})
    return H.run(launch, version, case)["dZ"]


# --- the fused softmax + cross-entropy gradient ---------------------------------------------

def ce_config(cols: int):
    """(kernel, threads, dynamic shared bytes) for the fused CE gradient of a row width."""
    from common.gpu import device_info

    n4 = cols // 4
    if n4 <= 4 * 256:
        threads = 256
    elif n4 <= 8 * 512:
        threads = 512
    else:
        limit = (device_info().get("smem_per_block_optin") or 48 * 1024) - 1024  # static + slack
        smem = 4 * (cols + 3)  # + 3: the row is shifted to share global memory's 16-byte phase
        if smem <= limit:
            return "softmax_ce_grad_smem", 1024, smem
        return "softmax_ce_grad_long", 1024, 0
    items = next(i for i in (1, 2, 4, 8) if n4 <= i * threads)
    return f"softmax_ce_grad_items{items}", threads, 0


def launch_ce(d):
    """dZ = (softmax(Z) - onehot(y)) * scale on a DeviceCase with inputs Z, y and output dZ."""
    rows, cols = d.size
    name, threads, smem = ce_config(cols)
    fn = K(name, "PPPiif", dynamic_smem=smem)  # more than 48 KB needs the opt-in
    fn.prepared_call((rows, 1, 1), (threads, 1, 1), d.Z, d.y, d.dZ, rows, cols,
                     np.float32(d.params["scale"]), shared_size=smem)


def make_ce_case(size, rng, logit_scale=3.0):
    rows, cols = size
    Z = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(logit_scale)
    y = rng.integers(0, cols, rows).astype(np.int32)
    scale = 1.0 / rows
    return H.Case(size, inputs={"Z": Z, "y": y}, outputs={"dZ": ((rows, cols), np.float32)},
                  reference=lambda: {"dZ": reference.softmax_ce_grad(Z, y, scale)},
                  bytes=2 * Z.nbytes + y.nbytes,      # read Z and the labels, write dZ
                  read_bytes=Z.nbytes + y.nbytes, params={"scale": scale})


def softmax_ce_grad(Z, y, scale=None):
    """Gradient of scale * sum_r -log softmax(Z)[r, y_r] with respect to Z, in float32:
    (softmax(Z) - onehot(y)) * scale. Z is 2-D [rows, classes]; y holds one integer label per
    row in [0, classes) (whole-number floats are accepted; 2.5, or 10 with 10 classes, are
    not); scale is a finite real, default 1/rows (the mean loss). No rows gives an empty
    gradient, and nothing is launched."""
    Z = A.floats(Z, "Z", ndim=2, what="[rows, classes]")
    rows, cols = Z.shape
    if rows and not cols:
        raise ValueError(f"Z has {rows} rows and no classes: no label can be valid")
    y = A.integers(y, "y", low=0, high=max(cols, 1), shape=(rows,),
                   what="[rows], one label per row of Z")
    scale = 1.0 / max(rows, 1) if scale is None else A.real(scale, "scale", low=-F32_MAX, high=F32_MAX)
    if rows == 0:
        return np.zeros(Z.shape, np.float32)
    validate_size(Z.shape)
    case = H.Case(Z.shape, inputs={"Z": Z, "y": y}, outputs={"dZ": (Z.shape, np.float32)},
                  params={"scale": scale})
    return H.run(lambda v, d: launch_ce(d), "ce", case)["dZ"]


def extras(report, mode):
    """The fused CE gradient: checked on ragged widths (every path: registers, shared memory,
    two-pass), then (unless --check) timed against the copy ceiling and torch's autograd."""
    from common.report import fmt_ms
    from common.runner import check_and_time

    rows = []
    for size in CE_CHECK_SIZES:
        case = make_ce_case(size, np.random.default_rng(19))
        r = check_and_time(report, "softmax_ce_grad", launch_ce, case, timed=False)
        rows.append([H.size_str(size), ce_config(size[1])[0], f"{r['rel_l2']:.1e}",
                     "ok" if r["ok"] else "FAIL"])
    report.section("fused softmax + cross-entropy gradient: checks", rows,
                   ["size", "kernel", "rel err", "ok"])
    record = {"checks": rows}
    if mode == "check":
        report.record("ce_grad", record)
        return

    from common.timing import time_fn

    timed = []
    for size in CE_BENCH_SIZES:
        case = make_ce_case(size, np.random.default_rng(7))
        d = H.DeviceCase(case)
        entry = check_and_time(report, "softmax_ce_grad", launch_ce, case, d)
        entry["kernel"] = ce_config(size[1])[0]
        torch = torch_or_none()
        if torch is not None:
            F = torch.nn.functional
            z = as_torch(d.array("Z")).detach()
            yt = as_torch(d.array("y")).long()

            def torch_grad():
                zz = z.requires_grad_()
                (g,) = torch.autograd.grad(F.cross_entropy(zz, yt), zz)
                return g

            try:
                tt = time_fn(torch_grad)
                entry["torch_ms"] = tt.median_ms
            except Exception as e:  # the library must not stop the day
                report.say(f"  torch cross_entropy backward not timed: {type(e).__name__}: {e}")
        timed.append(entry)
        d = None  # frees this size's device arrays before the next is allocated
    report.section("fused softmax + cross-entropy gradient: timed (bytes = read Z + labels, "
                   "write dZ; % of the copy ceiling)",
                   [[H.size_str(e["size"]), e["kernel"], fmt_ms(e["median_ms"]), f"{e['gbps']:.0f}",
                     f"{e['pct_of_ceiling']:.1f}", fmt_ms(e.get("torch_ms")),
                     f"{e['torch_ms'] / e['median_ms']:.2f}x" if e.get("torch_ms") else "-",
                     "ok" if e["ok"] else "FAIL"] for e in timed],
                   ["size", "kernel", "time", "GB/s", "% of copy", "torch autograd CE", "speed-up",
                    "ok"])
    record["timed"] = timed
    report.record("ce_grad", record)
