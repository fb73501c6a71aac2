"""Day 15 driver: forward of the affine layer + log-softmax + cross-entropy, four versions.

    from days.day15_fa2_forward.driver import cross_entropy, forward
    loss, lse = cross_entropy(X, W, b, y)      # the loss and each row's log-sum-exp (float32)
    loss, logp = forward(X, W, b, y)           # the loss and the m x c log-probabilities

The benchmark times what cross_entropy computes (what torch's F.cross_entropy returns, plus
lse): v1-v3 write the m x c log-probabilities on the way, v4 never stores the logits.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
BM = BN = 128          # the block tile of every version's GEMM (kernel.cu)
GEMM_THREADS = 256
ROW_THREADS = 256      # v1 log-softmax, v3 finish, v4 subtract: one block per row
V2_THREADS = 1024      # v2 keeps a whole row in shared memory: one big block per row
LOSS_THREADS = 1024    # the single-block loss reductions
V4_ROWS_PER_BLOCK = 8  # fa2_v4_lse: one warp per row
# v4's grid: "persistent" launches as many blocks as fit on the GPU at once and they walk the
# tiles; "tiles" launches one block per tile (the kernel takes both; the sweep in
# .notes/day15_20_gemm_sweep.py times both)
V4_GRID = "tiles"

VERSIONS = {
    "v1": "matmul+bias, 3-pass log-softmax, loss kernel",
    "v2": "matmul; 1 row kernel: bias+log-softmax+NLL, Z read once",
    "v3": "bias+tile stats in GEMM epilogue, in-place float4 finish",
    "v4": "warp-tiled GEMM; epilogue: bias, tile stats, label logit; no logits stored",
}
BEST = "v4"   # the fastest at the default size in results/day15.json (H200, 2026-11-23)
SIZE_HELP = "MxDxC (batch x features x classes), e.g. 4096x256x50257"
SIZES = {"small": (64, 32, 10), "default": (4096, 256, 50257), "large": (8192, 768, 50257)}
# m = 1 and 7, c = 1 (a single class: loss 0), c = 10 and 50257, d = 1; every edge of the
# 128 x 128 x 8 (or 16) tile: 127/128/129 rows and classes, d = 8, 9, 16, 17; 70001 classes do
# not fit v2's shared-memory row (its re-reading path); (300, 20, 20001) and (257, 5, 33001) have
# more tiles than v4's persistent grid has blocks, so its blocks walk several tiles (with K of
# three steps, and of one step)
CHECK_SIZES = [(1, 5, 10), (7, 33, 10), (1, 1, 1), (5, 1, 3), (33, 17, 1000), (130, 64, 257),
               (129, 9, 131), (128, 8, 128), (127, 16, 127), (129, 17, 129), (7, 40, 50257),
               (2, 300, 4099), (3, 8, 70001), (300, 20, 20001), (257, 5, 33001)]
# the benchmark (GPT-2's vocabulary) and an awkward neighbour: no dimension a multiple of any
# tile (4099 = 32 row tiles + 3 rows, d = 259 ends in a partial K step)
AWKWARD = (4099, 259, 50257)
BENCH_SIZES = [(4096, 256, 50257), AWKWARD]


def _loss_bar(rec):
    """Every checked size passed (the loss within 1e-5 of float64, the harness's tolerance),
    and the stability table's loss errors for logits up to 1e4."""
    ok = bool(rec.get("checks")) and all(c.get("ok") for c in rec["checks"]
                                         if not c.get("skipped"))
    worst = (rec.get("extra") or {}).get("stability_worst_loss_rel_err")
    if worst is None:
        return False, "stability table not measured"
    return ok and worst <= 1e-5, (f"worst loss error {worst:.1e} for logits up to 1e4; "
                                  f"{'every' if ok else 'NOT every'} checked size within 1e-5")


# CURRICULUM.md: the loss matches float64 to 1e-5 relative; the fused forward is faster than
# torch (F.linear + F.cross_entropy) at 4096x256x50257
BAR = [{"sizes": [(4096, 256, 50257)], "vs_baseline": 1.0},
       {"text": "loss within 1e-5 relative of float64", "check": _loss_bar}]


def validate_size(size):
    m, d, c = size
    if H.cdiv(c, BN) > 65535:
        raise ValueError(f"at most {65535 * BN} classes (v1-v3's grid y dimension holds c / {BN} tiles)")
    for name, n, what in (("m", m, "rows"), ("d", d, "features"), ("c", c, "classes")):
        A.fits_int32(name, n, what)  # the kernels take them as ints (offsets are 64-bit)
    if H.cdiv(m, BM) * H.cdiv(c, BN) >= 2 ** 31:
        raise ValueError("too many 128 x 128 tiles for v4's 32-bit tile index")


def make_case(size, rng, scale=2.0, with_logp=False):
    """X ~ N(0, 1), W ~ N(0, scale^2 / d) so the logits have standard deviation ~scale.
    Outputs: loss and lse (and with_logp, the log-probabilities logp)."""
    m, d, c = size
    X = rng.standard_normal((m, d), dtype=np.float32)
    W = (rng.standard_normal((d, c), dtype=np.float32) * np.float32(scale / np.sqrt(d)))
    b = (rng.standard_normal(c, dtype=np.float32) * np.float32(0.5))
    y = rng.integers(0, c, m).astype(np.int32)

    def ref():
        loss, lse, logp = reference.forward_all(X, W, b, y)
        out = {"loss": np.array([loss]), "lse": lse}
        if with_logp:
            out["logp"] = logp
        return out

    outputs = {"loss": ((1,), np.float32), "lse": ((m,), np.float32)}
    if with_logp:
        outputs["logp"] = ((m, c), np.float32)
    return H.Case(size, inputs={"X": X, "W": W, "b": b, "y": y}, outputs=outputs, reference=ref,
                  # 2 FLOPs per multiply-add, plus ~5 per logit (bias, max, subtract, exp, sum)
                  flops=2 * m * d * c + 5 * m * c, unit="fp32",
                  bytes=X.nbytes + W.nbytes + b.nbytes + y.nbytes + 4 + 4 * m
                  + (4 * m * c if with_logp else 0),
                  # the loss must match float64 to 1e-5 relative (the day's bar; fp32's default)
                  tol={k: 1e-5 for k in outputs})


def v2_row_fits(c: int) -> bool:
    """Does a row of c floats fit in one block's shared memory (227 KB on Hopper)?"""
    from common.gpu import device_info

    limit = (device_info().get("smem_per_block_optin") or 48 * 1024) - 1024  # static smem + slack
    return 4 * c <= limit


def v4_blocks(fn, units: int, grid: str | None = None) -> int:
    """Blocks for v4's GEMM: one per tile, or (persistent) as many as fit on the GPU at once."""
    from common.gpu import blocks_per_sm, device_info

    if (grid or V4_GRID) == "tiles":
        return units
    return max(1, min(units, (device_info().get("sms") or 132) * blocks_per_sm(fn, GEMM_THREADS)))


def launch_v4(d, kern=None, grid=None):
    """v4 on DeviceCase d (kern: another build of kernel.cu, e.g. the sweep's; grid: V4_GRID)."""
    kern = kern or K
    m, dd, c = d.size
    tiles_n = H.cdiv(c, BN)
    units = H.cdiv(m, BM) * tiles_n
    stats = d.scratch("stats", (m, tiles_n, 2))
    zlab = d.scratch("zlab", (m,))
    row_loss = d.scratch("row_loss", (m,))
    logp = d.logp if "logp" in d.case.outputs else None
    if logp is None:
        fn = kern("fa2_v4_gemm_stats", "PPPPPPiii")
        fn.prepared_call((v4_blocks(fn, units, grid), 1, 1), (GEMM_THREADS, 1, 1), d.X, d.W, d.b,
                         d.y, stats, zlab, m, dd, c)
    else:
        fn = kern("fa2_v4_gemm_logits", "PPPPPPPiii")
        fn.prepared_call((v4_blocks(fn, units, grid), 1, 1), (GEMM_THREADS, 1, 1), d.X, d.W, d.b,
                         d.y, stats, zlab, logp, m, dd, c)
    kern("fa2_v4_lse", "PPPPii").prepared_call((H.cdiv(m, V4_ROWS_PER_BLOCK), 1, 1), (256, 1, 1),
                                               stats, zlab, d.lse, row_loss, m, tiles_n)
    if logp is not None:
        kern("fa2_v4_subtract", "PPii").prepared_call((m, 1, 1), (ROW_THREADS, 1, 1), logp, d.lse,
                                                      m, c)
    kern("fa2_v4_loss", "PPi").prepared_call((1, 1, 1), (LOSS_THREADS, 1, 1), row_loss, d.loss, m)


def launch(version, d):
    version = A.version(version, VERSIONS)  # never run some other kernel for an unknown name
    m, dd, c = d.size
    gemm_grid = (H.cdiv(m, BM), H.cdiv(c, BN), 1)  # x over row tiles: neighbours share W's tile
    gemm_block = (GEMM_THREADS, 1, 1)
    # v1-v3 write the log-probabilities on their way to the loss: into the output when the
    # case asks for them, else into a scratch buffer
    logp = d.logp if "logp" in d.case.outputs else None
    if version == "v1":
        Z = d.scratch("Z", (m, c))
        logp = d.scratch("logp", (m, c)) if logp is None else logp
        K("fa2_v1_matmul_bias", "PPPPiii").prepared_call(gemm_grid, gemm_block, d.X, d.W, d.b, Z,
                                                         m, dd, c)
        K("fa2_v1_logsoftmax", "PPPii").prepared_call((m, 1, 1), (ROW_THREADS, 1, 1), Z, logp,
                                                      d.lse, m, c)
        K("fa2_v1_loss", "PPPii").prepared_call((1, 1, 1), (LOSS_THREADS, 1, 1), logp, d.y,
                                                d.loss, m, c)
    elif version == "v2":
        from common.gpu import driver

        Z = d.scratch("Z", (m, c))
        logp = d.scratch("logp", (m, c)) if logp is None else logp
        K("fa2_v2_matmul", "PPPiii").prepared_call(gemm_grid, gemm_block, d.X, d.W, Z, m, dd, c)
        driver().memset_d32_async(d.loss, 0, 1)  # the row kernel accumulates into it
        staged = v2_row_fits(c)
        smem = 4 * c if staged else 0
        fn = K("fa2_v2_row", "PPPPPPiii", dynamic_smem=smem)  # > 48 KB needs the opt-in
        fn.prepared_call((m, 1, 1), (V2_THREADS, 1, 1), Z, d.b, d.y, logp, d.lse, d.loss, m, c,
                         int(staged), shared_size=smem)
    elif version == "v3":
        ntiles = H.cdiv(c, BN)
        logp = d.scratch("logp", (m, c)) if logp is None else logp
        stats = d.scratch("stats", (m, ntiles, 2))
        row_loss = d.scratch("row_loss", (m,))
        K("fa2_v3_matmul_stats", "PPPPPiii").prepared_call(gemm_grid, gemm_block, d.X, d.W, d.b,
                                                           logp, stats, m, dd, c)
        K("fa2_v3_finish", "PPPPPiii").prepared_call((m, 1, 1), (ROW_THREADS, 1, 1), logp, stats,
                                                     d.y, d.lse, row_loss, m, c, ntiles)
        K("fa2_v3_loss", "PPi").prepared_call((1, 1, 1), (LOSS_THREADS, 1, 1), row_loss, d.loss, m)
    else:
        launch_v4(d)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    F = torch.nn.functional
    X, W, b = (as_torch(d.array(k)) for k in ("X", "W", "b"))
    y = as_torch(d.array("y")).long()  # cross_entropy wants int64 labels; converted once, untimed
    # F.linear(x, weight) computes x @ weight^T; W.t() is a view, cuBLAS reads it transposed.
    # The loss is compared with the reference (the case's first output).
    return {"torch F.linear+F.cross_entropy": lambda: F.cross_entropy(F.linear(X, W.t(), b), y)}


# --- the public functions ---------------------------------------------------------------------

def _inputs(X, W, b, y):
    """Checked float32 X [m, d], W [d, c], b [c] and int32 y [m] with labels in [0, c)."""
    X = A.floats(X, "X", ndim=2, what="[m, d] (a row of d features per example)")
    W = A.floats(W, "W", ndim=2, what="[d, c] (d features x c classes)")
    if X.shape[1] != W.shape[0]:
        raise ValueError(f"X has {X.shape[1]} features per row but W has {W.shape[0]} rows: "
                         f"W must be [d, c] with d = X.shape[1]")
    m, c = X.shape[0], W.shape[1]
    b = A.floats(b, "b", shape=(c,), what="(one bias per class, c = W.shape[1])")
    if c == 0 and m > 0:
        raise ValueError("W has no columns: with 0 classes no label can be valid")
    y = A.integers(y, "y", low=0, high=max(c, 1), shape=(m,),
                   what="(one class label per row of X)")
    return X, W, b, y


def _run(X, W, b, y, version, with_logp):
    m, d = X.shape
    c = W.shape[1]
    if d == 0:  # no features: the logits are the bias; one zero feature gives the same logits
        X, W = np.zeros((m, 1), np.float32), np.zeros((1, c), np.float32)
        d = 1
    validate_size((m, d, c))
    outputs = {"loss": ((1,), np.float32), "lse": ((m,), np.float32)}
    if with_logp:
        outputs["logp"] = ((m, c), np.float32)
    case = H.Case((m, d, c), inputs={"X": X, "W": W, "b": b, "y": y}, outputs=outputs)
    return H.run(launch, version, case)


def cross_entropy(X, W, b, y, version=BEST):
    """(loss, lse) on the GPU: loss = mean_i (lse_i - z[i, y_i]) with z = X W + b, and lse [m] the
    log-sum-exp of each row of logits (float32). X [m, d], W [d, c], b [c], y [m] integer labels
    in [0, c). With v4 the m x c logits are never stored. An empty batch (m = 0)
    returns (0.0, an empty lse) without a launch; d = 0 (no features) gives logits = b."""
    version = A.version(version, VERSIONS)
    X, W, b, y = _inputs(X, W, b, y)
    if X.shape[0] == 0:
        return 0.0, np.zeros(0, np.float32)
    out = _run(X, W, b, y, version, False)
    return float(out["loss"][0]), out["lse"]


def forward(X, W, b, y, version=BEST):
    """(loss, logp) on the GPU: the loss as cross_entropy() computes it, and the log-probabilities
    logp [m, c] = z - lse (float32; the probabilities are exp(logp)). This writes an m x c array:
    v4 then stores the logits in its GEMM epilogue and subtracts lse in place. An empty batch
    returns (0.0, an empty [0, c] array) without a launch."""
    version = A.version(version, VERSIONS)
    X, W, b, y = _inputs(X, W, b, y)
    if X.shape[0] == 0:
        return 0.0, np.zeros((0, W.shape[1]), np.float32)
    out = _run(X, W, b, y, version, True)
    return float(out["loss"][0]), out["logp"]


# --- extras: the loss with large logits -------------------------------------------------------

STABILITY_SIZE = (64, 32, 1000)


def stability_table(size=STABILITY_SIZE, scales=(1.0, 1e2, 1e3, 1e4)):
    """Relative error of each version's loss when the logits reach |z| ~ scale (lse and logp
    are checked too)."""
    from common.check import compare, compare_all

    rows, worst = [], 0.0
    for scale in scales:
        case = make_case(size, np.random.default_rng(15), scale=scale, with_logp=True)
        ref = case.expected()
        row = [f"{scale:g}", f"{ref['loss'][0]:.6g}"]
        for v in VERSIONS:
            out = H.run(launch, v, case)
            r = compare(out["loss"], ref["loss"], 1e-5)
            rest = compare_all({k: out[k] for k in ("lse", "logp")},
                               {k: ref[k] for k in ("lse", "logp")}, 1e-5)
            worst = max(worst, r.rel_l2)
            row.append(f"{r.rel_l2:.1e} {'ok' if r.ok and rest.ok else 'FAIL'}")
        rows.append(row)
    return rows, worst


def extras(report, mode):
    rows, worst = stability_table()
    report.section(f"logits of growing size ({H.size_str(STABILITY_SIZE)}): relative error of the "
                   "loss vs float64", rows, ["logit scale", "loss"] + list(VERSIONS))
    report.record("stability", rows)
    report.record("stability_worst_loss_rel_err", worst)
    for r in rows:
        if any("FAIL" in x for x in r[2:]):
            report.failures.append(f"stability at logit scale {r[0]}: {r}")
