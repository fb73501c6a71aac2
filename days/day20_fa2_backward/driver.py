"""Day 20 driver: the backward pass of day 15's layer in three versions; the chunked fused
linear + cross-entropy and its memory; a few steps of gradient descent.

    from days.day20_fa2_backward.driver import backward, linear_cross_entropy
    dW, db, dX = backward(X, W, logp, y, version="v3")       # logp: day 15's output
    loss, dH, dW, db = linear_cross_entropy(H, W, b, y, chunk=1024)
"""
import numpy as np

from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
BM = BN = 128       # the SGEMM's block tile (kernel.cu)
BK = 8
GEMM_THREADS = 256
GEMM_SIG = "PPPPPPPfiiiiii"  # A, B, C, bias, stats, colsum, labels, inv_m, M, N, K, lda, ldb, k_chunk

VERSIONS = {
    "v1": "dZ kernel, explicit transposes, naive matmuls, colsum",
    "v2": "tiled GEMMs reading X^T / W^T by index math, split-K",
    "v3": "dZ computed in the GEMM loaders, db fused in dW's GEMM",
}
SIZE_HELP = "MxDxC (batch x features x classes), e.g. 4096x256x50257"
SIZES = {"small": (64, 32, 10), "default": (4096, 256, 50257), "large": (8192, 768, 50257)}
# m = 1 and 7, c = 1 (every gradient is 0), d = 1, c = 10 and 50257 (dX's long K: split-K),
# sizes off every tile (128 x 128 x 8) and off the split-K chunks
CHECK_SIZES = [(1, 5, 10), (7, 33, 10), (1, 1, 1), (5, 1, 3), (33, 17, 1000), (130, 64, 257),
               (129, 9, 131), (300, 130, 7), (2, 300, 4099), (7, 40, 50257)]
BENCH_SIZES = [(4096, 256, 50257)]


def validate_size(size):
    m, d, c = size
    if max(H.cdiv(c, BN), H.cdiv(d, BN)) > 65535:
        raise ValueError(f"at most {65535 * BN} classes and features (grid y holds them / {BN})")


def forward_logp(X, W, b):
    """The forward's saved log-probabilities, in float32 (an input here: the backward is
    checked against float64 math on exactly these values)."""
    Z = X @ W
    Z += b
    Z -= Z.max(axis=1, keepdims=True)
    Z -= np.log(np.exp(Z).sum(axis=1, keepdims=True))
    return Z


def make_case(size, rng, scale=2.0):
    m, d, c = size
    X = rng.standard_normal((m, d), dtype=np.float32)
    W = rng.standard_normal((d, c), dtype=np.float32) * np.float32(scale / np.sqrt(d))
    b = rng.standard_normal(c, dtype=np.float32) * np.float32(0.5)
    y = rng.integers(0, c, m).astype(np.int32)
    logp = forward_logp(X, W, b)

    def ref():
        dW, db, dX = reference.backward_from_logp(X, W, logp, y)
        return {"dW": dW, "db": db, "dX": dX}

    return H.Case(size, inputs={"X": X, "W": W, "logp": logp, "y": y},
                  outputs={"dW": ((d, c), np.float32), "db": ((c,), np.float32),
                           "dX": ((m, d), np.float32)},
                  reference=ref,
                  # two GEMMs of 2mdc FLOPs; dZ and db add ~4 per logit
                  flops=4 * m * d * c + 4 * m * c, unit="fp32",
                  bytes=X.nbytes + W.nbytes + logp.nbytes + y.nbytes + 4 * (d * c + c + m * d))


# --- launching ------------------------------------------------------------------------------

def device_sms() -> int:
    from common.gpu import device_info

    return device_info().get("sms") or 132


def split_k(M, N, Kdim, sms=None):
    """(splits, k_chunk) for a GEMM whose output has few tiles for its K: enough blocks for
    about two waves of two blocks per SM, each split keeping at least 512 of K."""
    sms = sms or device_sms()
    tiles = H.cdiv(M, BM) * H.cdiv(N, BN)
    splits = max(1, min(H.cdiv(4 * sms, tiles), Kdim // 512))
    k_chunk = H.cdiv(H.cdiv(Kdim, splits), BK) * BK
    return H.cdiv(Kdim, k_chunk), k_chunk


def gemm(name, A, B, C, M, N, Kdim, lda, ldb, *, splits=1, k_chunk=None, bias=0, stats=0,
         colsum=0, labels=0, inv_m=1.0):
    """Launch one of kernel.cu's GEMM entry points (they share one argument list)."""
    grid = (H.cdiv(M, BM), H.cdiv(N, BN), splits)
    K(name, GEMM_SIG).prepared_call(grid, (GEMM_THREADS, 1, 1), A, B, C, bias, stats, colsum,
                                    labels, np.float32(inv_m), M, N, Kdim, lda, ldb,
                                    Kdim if k_chunk is None else k_chunk)


def splitk_reduce(ws, out, n, splits):
    from common.gpu import device_info

    grid = min(H.cdiv(n, 256), 8 * (device_info().get("sms") or 132))
    K("fa2b_v2_splitk_reduce", "PPqi").prepared_call((max(grid, 1), 1, 1), (256, 1, 1), ws, out,
                                                      n, splits)


def gemm_nt_split(name, A, B, C, M, N, Kdim, lda, ldb, ws_fn, plan=None, **kw):
    """C = op(A) op(B) split over K when the output has too few tiles; the partial products go
    to a workspace (ws_fn(nbytes) -> pointer) and are summed in a fixed order. plan =
    (splits, k_chunk) overrides split_k's choice."""
    splits, k_chunk = plan or split_k(M, N, Kdim)
    if splits == 1:
        gemm(name, A, B, C, M, N, Kdim, lda, ldb, **kw)
        return
    ws = ws_fn(splits * M * N * 4)
    gemm(name, A, B, ws, M, N, Kdim, lda, ldb, splits=splits, k_chunk=k_chunk, **kw)
    splitk_reduce(ws, C, M * N, splits)


def launch(version, d):
    m, dd, c = d.size
    inv_m = 1.0 / m
    ws = lambda nbytes: d.scratch("splitk", (nbytes // 4,))
    if version in ("v1", "v2"):
        dZ = d.scratch("dZ", (m, c))
        K("fa2b_v1_dz", "PPPiif").prepared_call((H.cdiv(c, 256), min(m, 65535), 1), (256, 1, 1),
                                                d.logp, d.y, dZ, m, c, np.float32(inv_m))
    if version == "v1":
        XT = d.scratch("XT", (dd, m))
        WT = d.scratch("WT", (c, dd))
        blk = (32, 8, 1)
        grid2 = lambda cols, rows: (H.cdiv(cols, 32), min(H.cdiv(rows, 8), 65535), 1)
        K("fa2b_v1_transpose", "PPii").prepared_call(grid2(dd, m), blk, d.X, XT, m, dd)
        K("fa2b_v1_transpose", "PPii").prepared_call(grid2(c, dd), blk, d.W, WT, dd, c)
        mm = K("fa2b_v1_matmul", "PPPiii")
        mm.prepared_call(grid2(c, dd), blk, XT, dZ, d.dW, dd, c, m)   # dW = X^T dZ
        mm.prepared_call(grid2(dd, m), blk, dZ, WT, d.dX, m, dd, c)   # dX = dZ W^T
        K("fa2b_v1_colsum", "PPii").prepared_call((H.cdiv(c, 256), 1, 1), (256, 1, 1), dZ, d.db, m, c)
    elif version == "v2":
        gemm("fa2b_v2_gemm_tn", d.X, dZ, d.dW, dd, c, m, dd, c)       # dW = X^T dZ
        K("fa2b_v1_colsum", "PPii").prepared_call((H.cdiv(c, 256), 1, 1), (256, 1, 1), dZ, d.db, m, c)
        gemm_nt_split("fa2b_v2_gemm_nt", dZ, d.W, d.dX, m, dd, c, c, c, ws)  # dX = dZ W^T
    elif version == "v3":
        gemm("fa2b_v3_gemm_tn_dz_db", d.X, d.logp, d.dW, dd, c, m, dd, c, colsum=d.db,
             labels=d.y, inv_m=inv_m)
        gemm_nt_split("fa2b_v3_gemm_nt_dz", d.logp, d.W, d.dX, m, dd, c, c, c, ws, labels=d.y,
                      inv_m=inv_m)
    else:
        raise ValueError(f"unknown version {version!r}")


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    m, dd, c = d.size
    X, W, logp = (as_torch(d.array(k)) for k in ("X", "W", "logp"))
    y = as_torch(d.array("y")).long()[:, None]
    minus_one = -torch.ones((m, 1), device=X.device, dtype=torch.float32)

    def torch_backward():
        dZ = torch.exp(logp)
        dZ.scatter_add_(1, y, minus_one)
        dZ.mul_(1.0 / m)
        dW = X.t() @ dZ   # cuBLAS reads the transposes, as v2 does
        dZ.sum(0)
        dZ @ W.t()
        return dW

    return {"torch exp/scatter + cuBLAS": torch_backward}


def backward(X, W, logp, y, version="v3"):
    """(dW, db, dX) of the mean cross-entropy of the layer, from day 15's log-probabilities."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    W = np.ascontiguousarray(W, dtype=np.float32)
    logp = np.ascontiguousarray(logp, dtype=np.float32)
    y = np.ascontiguousarray(y, dtype=np.int32).ravel()
    if X.ndim != 2 or W.ndim != 2 or X.shape[1] != W.shape[0]:
        raise ValueError(f"X [m, d] and W [d, c] expected, got {X.shape} and {W.shape}")
    m, dd = X.shape
    c = W.shape[1]
    if logp.shape != (m, c) or y.shape != (m,):
        raise ValueError(f"logp must be [{m}, {c}] and y [{m}]; got {logp.shape} and {y.shape}")
    if m and (y.min() < 0 or y.max() >= c):
        raise ValueError(f"labels must lie in [0, {c})")
    validate_size((m, dd, c))
    case = H.Case((m, dd, c), inputs={"X": X, "W": W, "logp": logp, "y": y},
                  outputs={"dW": ((dd, c), np.float32), "db": ((c,), np.float32),
                           "dX": ((m, dd), np.float32)})
    out = H.run(launch, version, case)
    return out["dW"], out["db"], out["dX"]


# --- the fused linear + cross-entropy: unfused vs chunked, with every byte counted ----------

class TrackedMemory:
    """Every device buffer of one path is allocated here: live and peak bytes as the path
    asked for them, and the driver's view (cuMemGetInfo: free memory) sampled after each
    allocation, whose drop from the start is the path's footprint as the device sees it."""

    def __init__(self):
        from common.gpu import driver

        self.cuda = driver()
        self.cuda.Context.synchronize()
        self.free0 = self.cuda.mem_get_info()[0]
        self.min_free = self.free0
        self.live = self.peak = 0
        self.buffers = []

    def alloc(self, nbytes):
        nbytes = int(nbytes)
        buf = self.cuda.mem_alloc(max(nbytes, 1))
        self.buffers.append((buf, nbytes))
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        self.min_free = min(self.min_free, self.cuda.mem_get_info()[0])
        return buf

    def upload(self, a):
        a = np.ascontiguousarray(a)
        buf = self.alloc(a.nbytes)
        self.cuda.memcpy_htod(buf, a)
        return buf

    @property
    def driver_peak(self):
        return self.free0 - self.min_free

    def free_all(self):
        self.cuda.Context.synchronize()
        for buf, _ in self.buffers:
            buf.free()
        self.buffers = []
        self.live = 0


class LinearCrossEntropy:
    """loss = CE(H W + b, y), forward and backward (loss, dH, dW, db) on the GPU.

    chunk=None: the unfused path: the N x V logits and their N x V gradient both live in
    device memory. chunk=R: R rows at a time: logits of the chunk into one R x V buffer,
    turned into their gradient in place, consumed by the dH and dW GEMMs, reused."""

    def __init__(self, H_, W, b, y, chunk=None):
        H_ = np.ascontiguousarray(H_, dtype=np.float32)
        W = np.ascontiguousarray(W, dtype=np.float32)
        N, d = H_.shape
        V = W.shape[1]
        self.N, self.d, self.V = N, d, V
        self.chunked = chunk is not None
        self.R = max(1, min(int(chunk), N)) if self.chunked else N
        self.mem = mem = TrackedMemory()
        self.H = mem.upload(H_)
        self.W = mem.upload(W)
        self.b = mem.upload(np.ascontiguousarray(b, dtype=np.float32))
        self.y = mem.upload(np.ascontiguousarray(y, dtype=np.int32))
        self.loss = mem.alloc(4)
        self.dH = mem.alloc(N * d * 4)
        self.dW = mem.alloc(d * V * 4)
        self.db = mem.alloc(V * 4)
        self.ntiles = H.cdiv(V, BN)
        self.Z = mem.alloc(self.R * V * 4)                              # logits (of a chunk)
        self.dZ = self.Z if self.chunked else mem.alloc(N * V * 4)      # their gradient
        self.stats = mem.alloc(self.R * self.ntiles * 8)
        self.row_loss = mem.alloc(N * 4)
        self.plan = split_k(self.R, d, V)  # dH's GEMM (K = V), the same for every chunk
        self.ws = mem.alloc(self.plan[0] * self.R * d * 4) if self.plan[0] > 1 else None

    def run(self):
        N, d, V, R = self.N, self.d, self.V, self.R
        cuda = self.mem.cuda
        cuda.memset_d32_async(self.dW, 0, d * V)  # dW and db accumulate over the chunks
        cuda.memset_d32_async(self.db, 0, V)
        finish = K("lce_finish_grad", "PPPPPiiif")
        for r0 in range(0, N, R):
            rows = min(R, N - r0)
            Hc, yc = int(self.H) + 4 * r0 * d, int(self.y) + 4 * r0
            dZ = self.dZ  # the unfused path has a single "chunk": all N rows, r0 = 0
            gemm("lce_gemm_logits_stats", Hc, self.W, self.Z, rows, V, d, d, V, bias=self.b,
                 stats=self.stats)
            finish.prepared_call((rows, 1, 1), (256, 1, 1), self.Z, dZ, self.stats, yc,
                                 int(self.row_loss) + 4 * r0, rows, V, self.ntiles,
                                 np.float32(1.0 / N))
            gemm_nt_split("fa2b_v2_gemm_nt", dZ, self.W, int(self.dH) + 4 * r0 * d, rows, d, V,
                          V, V, lambda nbytes: self.ws, plan=self.plan)  # dH_c = dZ_c W^T
            gemm("lce_gemm_tn_acc_db", Hc, dZ, self.dW, d, V, rows, d, V, colsum=self.db)
        K("lce_loss", "PPi").prepared_call((1, 1, 1), (1024, 1, 1), self.row_loss, self.loss, N)

    def results(self):
        cuda = self.mem.cuda
        cuda.Context.synchronize()
        out = {"loss": np.empty(1, np.float32), "dH": np.empty((self.N, self.d), np.float32),
               "dW": np.empty((self.d, self.V), np.float32), "db": np.empty(self.V, np.float32)}
        for k, a in out.items():
            cuda.memcpy_dtoh(a, getattr(self, k))
        return out

    def free(self):
        self.mem.free_all()


def planned_bytes(N, d, V, chunk=None, sms=132):
    """The bytes LinearCrossEntropy allocates (what its tracked peak must equal): the same
    inputs and outputs for both paths, plus the logits (and, unfused, their gradient)."""
    R = N if chunk is None else max(1, min(int(chunk), N))
    io = 4 * (N * d + d * V + V + N) + 4 + 4 * (N * d + d * V + V)  # H W b y, loss dH dW db
    logits = 4 * R * V + (0 if chunk is not None else 4 * N * V)
    splits = split_k(R, d, V, sms)[0]  # dH's GEMM workspace
    scratch = 8 * R * H.cdiv(V, BN) + 4 * N + (4 * splits * R * d if splits > 1 else 0)
    return io + logits + scratch


def linear_cross_entropy(H_, W, b, y, chunk=1024):
    """(loss, dH, dW, db) of loss = mean_r -log softmax(H W + b)[r, y_r] on the GPU;
    chunk=None materializes all the logits (the unfused path)."""
    H_ = np.asarray(H_)
    W = np.asarray(W)
    y = np.ascontiguousarray(y, dtype=np.int32).ravel()
    if H_.ndim != 2 or W.ndim != 2 or H_.shape[1] != W.shape[0] or y.shape != (H_.shape[0],):
        raise ValueError(f"H [N, d], W [d, V], y [N] expected; got {H_.shape}, {W.shape}, {y.shape}")
    if y.size and (y.min() < 0 or y.max() >= W.shape[1]):
        raise ValueError(f"labels must lie in [0, {W.shape[1]})")
    p = LinearCrossEntropy(H_, W, b, y, chunk)
    try:
        p.run()
        out = p.results()
    finally:
        p.free()
    return float(out["loss"][0]), out["dH"], out["dW"], out["db"]


def lce_problem(N, d, V, seed=20):
    rng = np.random.default_rng(seed)
    H_ = rng.standard_normal((N, d), dtype=np.float32)
    W = rng.standard_normal((d, V), dtype=np.float32) * np.float32(2.0 / np.sqrt(d))
    b = rng.standard_normal(V, dtype=np.float32) * np.float32(0.5)
    y = rng.integers(0, V, N).astype(np.int32)
    return H_, W, b, y


def compare_lce(out, ref):
    """Check (loss, dH, dW, db) against float64 values; returns the worst CheckResult."""
    from common.check import compare_all

    return compare_all({k: np.atleast_1d(v) for k, v in out.items()},
                       {k: np.atleast_1d(v) for k, v in ref.items()}, 1e-5)


def memory_table(N=8192, d=768, V=50257, chunk=1024, repeats=5):
    """Peak memory and time of the unfused and the chunked path at one size (and torch's
    F.linear + F.cross_entropy + backward when installed)."""
    from common.check import compare
    from common.timing import time_fn

    H_, W, b, y = lce_problem(N, d, V)
    rows, outs = [], {}
    for name, chunk_ in (("unfused: N x V logits + gradient", None), (f"chunked: {chunk} rows", chunk)):
        p = LinearCrossEntropy(H_, W, b, y, chunk_)
        t = time_fn(p.run, warmup=1, repeats=repeats)
        outs[name] = p.results()
        rows.append({"path": name, "peak_bytes": p.mem.peak, "driver_peak_bytes": p.mem.driver_peak,
                     "median_ms": t.median_ms, "min_ms": t.min_ms, "max_ms": t.max_ms})
        p.free()
    (n0, o0), (n1, o1) = outs.items()
    agree = {k: compare(o1[k], o0[k].astype(np.float64), 1e-5).rel_l2 for k in o0}
    torch = torch_or_none()
    if torch is not None:
        try:
            rows.append(_torch_memory_row(torch, H_, W, b, y, repeats))
            torch.cuda.empty_cache()  # its tensors died with the function
        except Exception as e:  # the library must not stop the day
            rows.append({"path": f"torch: not measured ({type(e).__name__}: {e})"})
    return rows, agree


def _torch_memory_row(torch, H_, W, b, y, repeats):
    from common.timing import time_fn

    F = torch.nn.functional
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    Ht = torch.from_numpy(H_).cuda().requires_grad_()
    Wt = torch.from_numpy(W).cuda().requires_grad_()
    bt = torch.from_numpy(np.ascontiguousarray(b)).cuda().requires_grad_()
    yt = torch.from_numpy(y.astype(np.int64)).cuda()

    def step():
        Ht.grad = Wt.grad = bt.grad = None
        F.cross_entropy(F.linear(Ht, Wt.t(), bt), yt).backward()

    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    t = time_fn(step, warmup=1, repeats=repeats)
    return {"path": "torch F.linear + F.cross_entropy + backward", "peak_bytes": peak,
            "driver_peak_bytes": None, "median_ms": t.median_ms, "min_ms": t.min_ms,
            "max_ms": t.max_ms}


# --- gradient descent with day 15's forward and this day's backward ---------------------------

def sgd_gpu(X, y, c, steps=20, lr=1.0, version="v3"):
    """Full-batch gradient descent from W = 0, b = 0 on the GPU; the loss before each step
    and after the last (steps + 1 values), as reference.sgd returns them."""
    from days.day15_fa2_forward.driver import forward

    X = np.ascontiguousarray(X, dtype=np.float32)
    W = np.zeros((X.shape[1], c), np.float32)
    b = np.zeros(c, np.float32)
    losses = []
    for _ in range(steps + 1):
        loss, logp = forward(X, W, b, y, version=version)
        losses.append(loss)
        if len(losses) == steps + 1:
            break
        dW, db, _ = backward(X, W, logp, y, version=version)
        W -= np.float32(lr) * dW
        b -= np.float32(lr) * db
    return losses


SGD_STEPS, SGD_LR = 20, 1.0
LCE_CHECK = (300, 40, 1003, 128)       # N, d, V, chunk: both paths against float64
LCE_BENCH = (8192, 768, 50257, 1024)   # the LM-head size of the memory table


def extras(report, mode):
    from common.report import fmt_ms

    # 1. gradient descent lowers the loss
    X, y = reference.classification_problem()
    steps, lr = SGD_STEPS, SGD_LR
    gpu = sgd_gpu(X, y, 5, steps, lr)
    ref = reference.sgd(X, y, 5, steps, lr)
    ok = all(b < a for a, b in zip(gpu, gpu[1:])) and np.allclose(gpu, ref, rtol=1e-4)
    report.section(f"gradient descent, {X.shape[0]}x{X.shape[1]}x5 synthetic problem, lr {lr} "
                   "(day 15 forward v3 + day 20 backward v3)",
                   [[i, f"{g:.5f}", f"{r:.5f}"] for i, (g, r) in enumerate(zip(gpu, ref)) if i % 5 == 0
                    or i == steps], ["step", "loss (GPU)", "loss (float64 numpy)"])
    report.record("sgd", {"gpu": gpu, "reference": ref, "ok": ok})
    if not ok:
        report.failures.append("gradient descent: the GPU loss does not decrease or departs from float64")

    # 2. both linear + cross-entropy paths against float64 at a small ragged size
    N, d, V, chunk = LCE_CHECK
    H_, W, b, yy = lce_problem(N, d, V, seed=3)
    loss, dH, dW, db = reference.linear_cross_entropy(H_, W, b, yy)
    ref64 = {"loss": loss, "dH": dH, "dW": dW, "db": db}
    rows = []
    for name, ch in (("unfused", None), (f"chunked ({chunk} rows)", chunk)):
        out = dict(zip(("loss", "dH", "dW", "db"), linear_cross_entropy(H_, W, b, yy, ch)))
        r = compare_lce(out, ref64)
        rows.append([name, f"{r.rel_l2:.1e}", "ok" if r.ok else "FAIL"])
        if not r.ok:
            report.failures.append(f"linear cross-entropy {name} at {N}x{d}x{V}: {r.message}")
    report.section(f"fused linear + cross-entropy vs float64 at N={N}, d={d}, V={V}", rows,
                   ["path", "worst rel err", "ok"])
    if mode == "check":
        report.record("chunked_ce", {"float64_checks": rows})
        return

    # 3. memory and time at the LM-head size
    N, d, V, chunk = LCE_BENCH
    table, agree = memory_table(N, d, V, chunk)
    unfused = table[0]["peak_bytes"]
    mb = lambda x: "-" if x is None else f"{x / 2**20:,.0f} MiB"
    report.section(f"linear + cross-entropy forward+backward, N={N}, d={d}, V={V}: peak device memory",
                   [[r["path"], mb(r.get("peak_bytes")), mb(r.get("driver_peak_bytes")),
                     f"{100 * r['peak_bytes'] / unfused:.1f}%" if r.get("peak_bytes") else "-",
                     fmt_ms(r.get("median_ms"))] for r in table],
                   ["path", "peak (tracked allocations)", "peak (cuMemGetInfo drop)",
                    "vs unfused", "time"])
    ratio = table[1]["peak_bytes"] / unfused
    report.say("  chunked vs unfused outputs, rel-L2 difference: "
               + ", ".join(f"{k} {v:.1e}" for k, v in agree.items()))
    report.record("chunked_ce", {"size": [N, d, V], "chunk": chunk, "paths": table,
                                 "peak_ratio": ratio, "chunked_vs_unfused_rel_l2": agree,
                                 "float64_checks": rows})
    if ratio >= 0.25:
        report.failures.append(f"chunked CE peak memory is {100 * ratio:.1f}% of unfused (bar < 25%)")
    # Two float32 paths that accumulate in different orders (8 chunks vs 1 for dW, 11 vs 2
    # split-K ranges for dH): both are checked against float64 at the small size above; here a
    # wrong chunk offset would show as an O(1) difference, rounding as ~1e-6.
    if any(v > 1e-4 for v in agree.values()):
        report.failures.append(f"chunked and unfused CE disagree: {agree}")
