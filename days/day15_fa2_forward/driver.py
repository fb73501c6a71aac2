"""Day 15 driver: forward of the affine layer + log-softmax + cross-entropy, three versions.

    from days.day15_fa2_forward.driver import forward
    loss, logp = forward(X, W, b, y, version="v3")     # numpy in, numpy out (float32)
"""
import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
BM = BN = 128          # the SGEMM's block tile (kernel.cu)
GEMM_THREADS = 256
ROW_THREADS = 256      # v1 log-softmax and v3 finish: one block per row
V2_THREADS = 1024      # v2 keeps a whole row in shared memory: one big block per row
LOSS_THREADS = 1024    # the single-block loss reductions

VERSIONS = {
    "v1": "matmul+bias, 3-pass log-softmax, loss kernel",
    "v2": "matmul; 1 row kernel: bias+log-softmax+NLL, Z read once",
    "v3": "bias+tile stats in GEMM epilogue, in-place float4 finish",
}
SIZE_HELP = "MxDxC (batch x features x classes), e.g. 4096x256x50257"
SIZES = {"small": (64, 32, 10), "default": (4096, 256, 50257), "large": (8192, 768, 50257)}
# m = 1 and 7, c = 1 (a single class: loss 0), c = 10 and 50257, d = 1; sizes off every tile
# (128 x 128 x 8); 70001 classes do not fit v2's shared-memory row (its re-reading path)
CHECK_SIZES = [(1, 5, 10), (7, 33, 10), (1, 1, 1), (5, 1, 3), (33, 17, 1000), (130, 64, 257),
               (129, 9, 131), (7, 40, 50257), (2, 300, 4099), (3, 8, 70001)]
BENCH_SIZES = [(4096, 256, 50257)]


def validate_size(size):
    m, d, c = size
    if H.cdiv(c, BN) > 65535:
        raise ValueError(f"at most {65535 * BN} classes (the grid's y dimension holds c / {BN} tiles)")


def make_case(size, rng, scale=2.0):
    """X ~ N(0, 1), W ~ N(0, scale^2 / d) so the logits have standard deviation ~scale."""
    m, d, c = size
    X = rng.standard_normal((m, d), dtype=np.float32)
    W = (rng.standard_normal((d, c), dtype=np.float32) * np.float32(scale / np.sqrt(d)))
    b = (rng.standard_normal(c, dtype=np.float32) * np.float32(0.5))
    y = rng.integers(0, c, m).astype(np.int32)

    def ref():
        loss, logp = reference.forward(X, W, b, y)
        return {"loss": np.array([loss]), "logp": logp}

    return H.Case(size, inputs={"X": X, "W": W, "b": b, "y": y},
                  outputs={"loss": ((1,), np.float32), "logp": ((m, c), np.float32)},
                  reference=ref,
                  # 2 FLOPs per multiply-add, plus ~5 per logit (bias, max, subtract, exp, sum)
                  flops=2 * m * d * c + 5 * m * c, unit="fp32",
                  bytes=X.nbytes + W.nbytes + b.nbytes + y.nbytes + 4 + 4 * m * c,
                  # the loss must match float64 to 1e-5 relative (the day's bar; fp32's default)
                  tol={"loss": 1e-5, "logp": 1e-5})


def v2_row_fits(c: int) -> bool:
    """Does a row of c floats fit in one block's shared memory (227 KB on Hopper)?"""
    from common.gpu import device_info

    limit = (device_info().get("smem_per_block_optin") or 48 * 1024) - 1024  # static smem + slack
    return 4 * c <= limit


def launch(version, d):
    m, dd, c = d.size
    gemm_grid = (H.cdiv(m, BM), H.cdiv(c, BN), 1)  # x over row tiles: neighbours share W's tile
    gemm_block = (GEMM_THREADS, 1, 1)
    if version == "v1":
        Z = d.scratch("Z", (m, c))
        K("fa2_v1_matmul_bias", "PPPPiii").prepared_call(gemm_grid, gemm_block, d.X, d.W, d.b, Z,
                                                         m, dd, c)
        K("fa2_v1_logsoftmax", "PPii").prepared_call((m, 1, 1), (ROW_THREADS, 1, 1), Z, d.logp, m, c)
        K("fa2_v1_loss", "PPPii").prepared_call((1, 1, 1), (LOSS_THREADS, 1, 1), d.logp, d.y,
                                                d.loss, m, c)
    elif version == "v2":
        from common.gpu import driver

        Z = d.scratch("Z", (m, c))
        K("fa2_v2_matmul", "PPPiii").prepared_call(gemm_grid, gemm_block, d.X, d.W, Z, m, dd, c)
        driver().memset_d32_async(d.loss, 0, 1)  # the row kernel accumulates into it
        staged = v2_row_fits(c)
        smem = 4 * c if staged else 0
        fn = K("fa2_v2_row", "PPPPPiii", dynamic_smem=smem)  # > 48 KB needs the opt-in
        fn.prepared_call((m, 1, 1), (V2_THREADS, 1, 1), Z, d.b, d.y, d.logp, d.loss, m, c,
                         int(staged), shared_size=smem)
    elif version == "v3":
        ntiles = H.cdiv(c, BN)
        stats = d.scratch("stats", (m, ntiles, 2))
        row_loss = d.scratch("row_loss", (m,))
        K("fa2_v3_matmul_stats", "PPPPPiii").prepared_call(gemm_grid, gemm_block, d.X, d.W, d.b,
                                                           d.logp, stats, m, dd, c)
        K("fa2_v3_finish", "PPPPiii").prepared_call((m, 1, 1), (ROW_THREADS, 1, 1), d.logp, stats,
                                                    d.y, row_loss, m, c, ntiles)
        K("fa2_v3_loss", "PPi").prepared_call((1, 1, 1), (LOSS_THREADS, 1, 1), row_loss, d.loss, m)
    else:
        raise ValueError(f"unknown version {version!r}")


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    F = torch.nn.functional
    X, W, b = (as_torch(d.array(k)) for k in ("X", "W", "b"))
    y = as_torch(d.array("y")).long()  # cross_entropy wants int64 labels; converted once, untimed
    # F.linear(x, weight) computes x @ weight^T; W.t() is a view, cuBLAS reads it transposed
    return {"torch F.linear+F.cross_entropy": lambda: F.cross_entropy(F.linear(X, W.t(), b), y)}


def forward(X, W, b, y, version="v3"):
    """(loss, logp) of the layer on the GPU: X [m, d], W [d, c], b [c], y [m] ints in [0, c)."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    W = np.ascontiguousarray(W, dtype=np.float32)
    b = np.ascontiguousarray(b, dtype=np.float32).ravel()
    y = np.ascontiguousarray(y, dtype=np.int32).ravel()
    if X.ndim != 2 or W.ndim != 2 or X.shape[1] != W.shape[0]:
        raise ValueError(f"X [m, d] and W [d, c] expected, got {X.shape} and {W.shape}")
    m, dd = X.shape
    c = W.shape[1]
    if b.shape != (c,) or y.shape != (m,):
        raise ValueError(f"b must have {c} entries and y {m}; got {b.shape} and {y.shape}")
    if m and (y.min() < 0 or y.max() >= c):
        raise ValueError(f"labels must lie in [0, {c})")
    validate_size((m, dd, c))
    case = H.Case((m, dd, c), inputs={"X": X, "W": W, "b": b, "y": y},
                  outputs={"loss": ((1,), np.float32), "logp": ((m, c), np.float32)})
    out = H.run(launch, version, case)
    return float(out["loss"][0]), out["logp"]


STABILITY_SIZE = (64, 32, 1000)


def stability_table(size=STABILITY_SIZE, scales=(1.0, 1e2, 1e3, 1e4)):
    """Relative error of each version's loss when the logits reach |z| ~ scale."""
    from common.check import compare

    rows = []
    for scale in scales:
        case = make_case(size, np.random.default_rng(15), scale=scale)
        ref = case.expected()
        row = [f"{scale:g}", f"{ref['loss'][0]:.6g}"]
        for v in VERSIONS:
            out = H.run(launch, v, case)
            r = compare(out["loss"], ref["loss"], 1e-5)
            rl = compare(out["logp"], ref["logp"], 1e-5)
            row.append(f"{r.rel_l2:.1e} {'ok' if r.ok and rl.ok else 'FAIL'}")
        rows.append(row)
    return rows


def extras(report, mode):
    rows = stability_table()
    report.section(f"logits of growing size ({H.size_str(STABILITY_SIZE)}): relative error of the "
                   "loss vs float64",
                   rows, ["logit scale", "loss"] + list(VERSIONS))
    report.record("stability", rows)
    for r in rows:
        if any("FAIL" in x for x in r[2:]):
            report.failures.append(f"stability at logit scale {r[0]}: {r}")
