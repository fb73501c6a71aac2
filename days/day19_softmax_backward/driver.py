"""Day 19 driver: softmax backward in three versions, and the fused softmax + cross-entropy
gradient (its own function, timed in extras()).

    from days.day19_softmax_backward.driver import softmax_backward, softmax_ce_grad
    dZ = softmax_backward(A, dA, version="v3")   # A = softmax(Z), dA = dL/dA
    dZ = softmax_ce_grad(Z, y)                   # d mean(-log softmax(Z)[r, y_r]) / dZ
"""
import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256          # v1 and v2: one block per row

VERSIONS = {
    "v1": "row-dot kernel, then elementwise kernel",
    "v2": "fused, block per row, two passes",
    "v3": "fused, row in registers, float4, 1 read 1 write",
}
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192"
SIZES = {"small": (64, 1000), "default": (8192, 8192), "large": (16384, 16384)}
# widths 1, 5, 33 (head/tail only), 4099 and 8193 (odd: head + float4 body + tail), 4096,
# 16388 and 50257 (too wide for registers: v3's two-pass path)
CHECK_SIZES = [(1, 1), (7, 33), (1000, 5), (5, 1000), (9, 4099), (4, 4096), (3, 8193),
               (33, 16388), (2, 50257)]
BENCH_SIZES = [(8192, 8192), (65536, 1024)]


def make_case(size, rng):
    rows, cols = size
    z = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(2.0)
    z -= z.max(axis=1, keepdims=True)
    A = np.exp(z)
    A /= A.sum(axis=1, keepdims=True)           # a softmax output (float32 is fine: it is an input)
    dA = rng.standard_normal((rows, cols), dtype=np.float32)
    return H.Case(size, inputs={"A": A, "dA": dA}, outputs={"dZ": ((rows, cols), np.float32)},
                  reference=lambda: {"dZ": reference.softmax_backward(A, dA)},
                  bytes=3 * A.nbytes)  # read A and dA, write dZ


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
    elif version == "v3":
        name, threads = v3_config(cols)
        K(name, "PPPii").prepared_call((rows, 1, 1), (threads, 1, 1), d.A, d.dA, d.dZ, rows, cols)
    else:
        raise ValueError(f"unknown version {version!r}")


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    A, dA = as_torch(d.array("A")), as_torch(d.array("dA"))
    op = torch.ops.aten._softmax_backward_data.default
    return {"torch _softmax_backward_data": lambda: op(dA, A, -1, torch.float32)}


def softmax_backward(A, dA, version="v3"):
    """dZ = A * (dA - rowsum(dA * A)) on the GPU, for 2-D float32 A (a softmax output) and dA."""
    A = np.ascontiguousarray(A, dtype=np.float32)
    dA = np.ascontiguousarray(dA, dtype=np.float32)
    if A.ndim != 2 or A.shape != dA.shape:
        raise ValueError(f"A and dA must be 2-D and the same shape, got {A.shape} and {dA.shape}")
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
                  bytes=2 * Z.nbytes + y.nbytes, params={"scale": scale})


def softmax_ce_grad(Z, y, scale=None):
    """Gradient of scale * sum_r -log softmax(Z)[r, y_r] w.r.t. Z (scale defaults to 1/rows)."""
    Z = np.ascontiguousarray(Z, dtype=np.float32)
    y = np.ascontiguousarray(y, dtype=np.int32).ravel()
    if Z.ndim != 2 or y.shape != (Z.shape[0],):
        raise ValueError(f"Z must be 2-D [rows, cols] and y [rows]; got {Z.shape} and {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= Z.shape[1]):
        raise ValueError(f"labels must lie in [0, {Z.shape[1]})")
    scale = 1.0 / max(Z.shape[0], 1) if scale is None else float(scale)
    case = H.Case(Z.shape, inputs={"Z": Z, "y": y}, outputs={"dZ": (Z.shape, np.float32)},
                  params={"scale": scale})
    return H.run(lambda v, d: launch_ce(d), "ce", case)["dZ"]


CE_CHECK_SIZES = [(1, 1), (7, 10), (1000, 5), (33, 1000), (5, 8193), (4, 16388), (3, 50257),
                  (2, 70001)]
CE_BENCH_SIZES = [(8192, 8192), (2048, 50257)]  # 268 MB and 412 MB of logits


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
