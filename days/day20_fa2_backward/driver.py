"""Day 20 driver: the backward pass of day 15's layer in four versions; linear + cross-entropy
forward + backward (unfused, fused, chunked) against torch, with its memory; gradient descent.

    from days.day20_fa2_backward.driver import backward, linear_cross_entropy
    dW, db, dX = backward(X, W, logp, y)                  # logp: day 15's forward(...)[1]
    loss, dH, dW, db = linear_cross_entropy(H, W, b, y, chunk=1024)
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
BM = BN = 128       # the block tile of every tiled GEMM (kernel.cu)
BK = 8              # v2/v3's K step (v4's split ranges are rounded to 16, a multiple of FA2_BK)
GEMM_THREADS = 256
GEMM_SIG = "PPPPPfiiiiii"          # v2/v3: A, B, C, colsum, labels, inv_m, M, N, K, lda, ldb, k_chunk
TILE_SIG = "PPPPPPPPPfiiiiii"      # v4: A, B, C, bias, stats, zlab, colsum, labels, shift, scale,
                                   #     M, N, K, lda, ldb, k_chunk
V4_BLOCKS_PER_SM = 2   # __launch_bounds__(256, 2) in kernel.cu: two v4 blocks fit on an SM
# v4's grid: "persistent" = as many blocks as fit at once (2 per SM), walking the work units;
# "tiles" = one block per unit. V4_SPLIT_WAVES: dX's split over K makes about this many waves
# of units. .notes/day15_20_gemm_sweep.py times the alternatives.
V4_GRID = "tiles"
V4_SPLIT_WAVES = 1

VERSIONS = {
    "v1": "dZ kernel, explicit transposes, naive matmuls, colsum",
    "v2": "tiled GEMMs reading X^T / W^T by index math, split-K",
    "v3": "dZ computed in the GEMM loaders, db fused in dW's GEMM",
    "v4": "day 15 v4's tile; dZ computed after the math, 1/m in the epilogue; db fused",
}
BEST = "v4"   # the fastest at the default size in results/day20.json (H200, 2026-11-23)
SIZE_HELP = "MxDxC (batch x features x classes), e.g. 4096x256x50257"
SIZES = {"small": (64, 32, 10), "default": (4096, 256, 50257), "large": (8192, 768, 50257)}
# m = 1 and 7, c = 1 (every gradient is 0), d = 1, c = 10 and 50257 (dX's long K: split-K),
# sizes off every tile (128 x 128 x 8) and off the split-K chunks; 127/128/129 of m, d and c;
# (300, 20, 20001) and (1100, 40, 9001) split dX's K into 38 and 17 ranges; (33, 300, 12001)
# gives dW 282 work units and (4200, 1100, 131) gives dX 297, more than v4's persistent grid of
# 264 blocks has (on 132 SMs), so its blocks walk several units
CHECK_SIZES = [(1, 5, 10), (7, 33, 10), (1, 1, 1), (5, 1, 3), (33, 17, 1000), (130, 64, 257),
               (129, 9, 131), (300, 130, 7), (2, 300, 4099), (7, 40, 50257), (128, 128, 128),
               (127, 129, 127), (300, 20, 20001), (1100, 40, 9001), (33, 300, 12001),
               (4200, 1100, 131)]
AWKWARD = (4099, 259, 50257)   # no dimension a multiple of a tile
BENCH_SIZES = [(4096, 256, 50257), AWKWARD]
FWD_BWD = (4096, 256, 50257, 1024)    # N, d, V, chunk: forward + backward against torch
LCE_CHECK = (300, 40, 1003, 128)      # N, d, V, chunk: every path against float64
LCE_BENCH = (8192, 768, 50257, 1024)  # the LM-head size of the memory table
FD_SIZE = (6, 5, 4)                   # m, d, c: the finite-difference check on the GPU
OURS = ("fused", "chunked")           # the paths held to "faster than torch"


# --- the bar ----------------------------------------------------------------------------------

def _extra(rec, key):
    return ((rec or {}).get("extra") or {}).get(key)


def _fd_bar(rec):
    fd = _extra(rec, "finite_differences")
    if not fd:
        return False, "not measured"
    worst = max(v["rel_err"] for v in fd.values())
    ok = all(v["ok"] for v in fd.values())
    return ok, f"worst {worst:.1e} over {', '.join(fd)} (tolerance 1e-4)"


def _memory_bar(rec):
    ce = _extra(rec, "chunked_ce")
    if not ce or ce.get("peak_ratio") is None:
        return False, "not measured"
    return ce["peak_ratio"] < 0.25, f"{100 * ce['peak_ratio']:.1f}% of unfused"


def _kind(row):
    """unfused / fused / chunked / torch (records before 2026-11-23 name the path only)."""
    return row.get("kind") or row.get("path", "").split()[0].rstrip(":")


def _faster_bar(key, paths):
    def check(rec):
        t = _extra(rec, key)
        if not t:
            return False, "not measured"
        rows = {_kind(r): r for r in t["paths"] if r.get("median_ms")}
        ours = [rows[k] for k in paths if k in rows]
        if "torch" not in rows or not ours:
            return False, "torch or our path not timed"
        best = min(ours, key=lambda r: r["median_ms"])
        ratio = rows["torch"]["median_ms"] / best["median_ms"]
        return ratio >= 1.0, f"{_kind(best)} {best['median_ms']:.2f} ms, {ratio:.2f}x torch"
    return check


# CURRICULUM.md: gradients match float64 finite differences; chunked CE peak memory < 25% of
# unfused and faster than torch's linear + cross-entropy forward+backward. Issue 8: forward +
# backward faster than torch at the benchmark case.
BAR = [
    {"text": "gradients match float64 finite differences", "check": _fd_bar},
    {"text": "chunked CE peak memory < 25% of unfused (8192x768x50257)", "check": _memory_bar},
    {"text": "forward+backward faster than torch (4096x256x50257)",
     "check": _faster_bar("fwd_bwd", OURS)},
    {"text": "chunked CE faster than torch (8192x768x50257)",
     "check": _faster_bar("chunked_ce", ("chunked",))},
]


def validate_size(size):
    m, d, c = size
    if max(H.cdiv(c, BN), H.cdiv(d, BN)) > 65535:
        raise ValueError(f"at most {65535 * BN} classes and features (v2/v3's grid y holds them / {BN})")
    for name, n, what in (("m", m, "rows"), ("d", d, "features"), ("c", c, "classes")):
        A.fits_int32(name, n, what)  # the kernels take them as ints (offsets are 64-bit)
    if H.cdiv(m, BM) * H.cdiv(c, BN) * max(1, H.cdiv(d, BN)) >= 2 ** 31:
        raise ValueError("too many 128 x 128 tiles for v4's 32-bit work-unit index")


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
    """v2/v3: (splits, k_chunk) for a GEMM whose output has few tiles for its K: enough blocks
    for about two waves of two blocks per SM, each split keeping at least 512 of K."""
    sms = sms or device_sms()
    tiles = H.cdiv(M, BM) * H.cdiv(N, BN)
    splits = max(1, min(H.cdiv(4 * sms, tiles), Kdim // 512))
    k_chunk = H.cdiv(H.cdiv(Kdim, splits), BK) * BK
    return H.cdiv(Kdim, k_chunk), k_chunk


def v4_split(M, N, Kdim, sms=None, waves=None):
    """v4: (splits, k_chunk) filling about `waves` waves of the persistent grid (2 blocks per
    SM) with work units of one output tile and one K range, each keeping at least 512 of K."""
    slots = V4_BLOCKS_PER_SM * (sms or device_sms())
    tiles = H.cdiv(M, BM) * H.cdiv(N, BN)
    splits = max(1, min((waves or V4_SPLIT_WAVES) * slots // tiles, Kdim // 512))
    k_chunk = H.cdiv(H.cdiv(Kdim, splits), 16) * 16
    return H.cdiv(Kdim, k_chunk), k_chunk


def gemm(name, A_, B, C, M, N, Kdim, lda, ldb, *, splits=1, k_chunk=None, colsum=0, labels=0,
         inv_m=1.0):
    """Launch one of v2/v3's GEMM entry points (they share one argument list)."""
    grid = (H.cdiv(M, BM), H.cdiv(N, BN), splits)
    K(name, GEMM_SIG).prepared_call(grid, (GEMM_THREADS, 1, 1), A_, B, C, colsum, labels,
                                    np.float32(inv_m), M, N, Kdim, lda, ldb,
                                    Kdim if k_chunk is None else k_chunk)


def splitk_reduce(ws, out, n, splits, kern=None):
    from common.gpu import device_info

    grid = min(H.cdiv(n, 256), 8 * (device_info().get("sms") or 132))
    (kern or K)("fa2b_v2_splitk_reduce", "PPqi").prepared_call((max(grid, 1), 1, 1), (256, 1, 1),
                                                               ws, out, n, splits)


def gemm_nt_split(name, A_, B, C, M, N, Kdim, lda, ldb, ws_fn, plan=None, **kw):
    """v2/v3: C = op(A) op(B) split over K when the output has too few tiles; the partial
    products go to a workspace (ws_fn(nbytes) -> pointer) and are summed in a fixed order."""
    splits, k_chunk = plan or split_k(M, N, Kdim)
    if splits == 1:
        gemm(name, A_, B, C, M, N, Kdim, lda, ldb, **kw)
        return
    ws = ws_fn(splits * M * N * 4)
    gemm(name, A_, B, ws, M, N, Kdim, lda, ldb, splits=splits, k_chunk=k_chunk, **kw)
    splitk_reduce(ws, C, M * N, splits)


def tile_gemm(name, A_, B, C, M, N, Kdim, lda, ldb, *, kern=None, grid=None, k_chunk=None,
              bias=0, stats=0, zlab=0, colsum=0, labels=0, shift=0, scale=1.0):
    """Launch one of v4's entry points: units = tiles x K ranges; blocks: V4_GRID."""
    fn = (kern or K)(name, TILE_SIG)
    k_chunk = Kdim if k_chunk is None else k_chunk
    units = H.cdiv(M, BM) * H.cdiv(N, BN) * H.cdiv(Kdim, k_chunk)
    blocks = units if (grid or V4_GRID) == "tiles" else min(units, V4_BLOCKS_PER_SM * device_sms())
    fn.prepared_call((blocks, 1, 1), (GEMM_THREADS, 1, 1), A_, B, C, bias, stats, zlab, colsum,
                     labels, shift, np.float32(scale), M, N, Kdim, lda, ldb, k_chunk)


def tile_gemm_nt(name, A_, B, C, M, N, Kdim, lda, ldb, ws, plan, **kw):
    """v4: C = op(A) op(B) split over K per plan = (splits, k_chunk): the partial products go to
    the workspace ws and are summed in a fixed order."""
    splits, k_chunk = plan
    if splits == 1:
        tile_gemm(name, A_, B, C, M, N, Kdim, lda, ldb, **kw)
        return
    tile_gemm(name, A_, B, ws, M, N, Kdim, lda, ldb, k_chunk=k_chunk, **kw)
    splitk_reduce(ws, C, M * N, splits, kw.get("kern"))


def launch_v4(d, kern=None, grid=None, waves=None):
    """v4 on DeviceCase d (kern: another build of kernel.cu, e.g. the sweep's)."""
    m, dd, c = d.size
    inv_m = 1.0 / m
    plan = v4_split(m, dd, c, waves=waves)
    ws = d.scratch("splitk4", (plan[0] * m * dd,)) if plan[0] > 1 else 0
    # dW = X^T dZ / m and db, dZ = exp(logp) - onehot computed as logp is stored to shared memory
    tile_gemm("fa2b_v4_gemm_tn_dz_db", d.X, d.logp, d.dW, dd, c, m, dd, c, kern=kern, grid=grid,
              colsum=d.db, labels=d.y, scale=inv_m)
    # dX = dZ W^T / m, split over K = c
    tile_gemm_nt("fa2b_v4_gemm_nt_dz", d.logp, d.W, d.dX, m, dd, c, c, c, ws, plan, kern=kern,
                 grid=grid, labels=d.y, scale=inv_m)


def launch(version, d):
    version = A.version(version, VERSIONS)  # never run some other kernel for an unknown name
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
        launch_v4(d)


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


def backward(X, W, logp, y, version=BEST):
    """(dW, db, dX) of the mean cross-entropy of the layer on the GPU, from day 15's
    log-probabilities: X [m, d], W [d, c], logp [m, c], y [m] integer labels in [0, c) (float32
    results). An empty batch (m = 0) has zero gradients ([d, c], [c], and an empty [0, d]), and
    d = 0 gives empty dW and dX with db from logp, without a launch for m = 0."""
    version = A.version(version, VERSIONS)
    X = A.floats(X, "X", ndim=2, what="[m, d] (a row of d features per example)")
    W = A.floats(W, "W", ndim=2, what="[d, c] (d features x c classes)")
    if X.shape[1] != W.shape[0]:
        raise ValueError(f"X has {X.shape[1]} features per row but W has {W.shape[0]} rows: "
                         f"W must be [d, c] with d = X.shape[1]")
    m, dd = X.shape
    c = W.shape[1]
    logp = A.floats(logp, "logp", shape=(m, c), what="([m, c]: day 15's log-probabilities)")
    if c == 0 and m > 0:
        raise ValueError("W has no columns: with 0 classes no label can be valid")
    y = A.integers(y, "y", low=0, high=max(c, 1), shape=(m,), what="(one class label per row of X)")
    if m == 0:
        return (np.zeros((dd, c), np.float32), np.zeros(c, np.float32), np.zeros((0, dd), np.float32))
    pad = dd == 0  # no features: one zero feature gives the same db (and dW, dX of width 0)
    if pad:
        X, W = np.zeros((m, 1), np.float32), np.zeros((1, c), np.float32)
    validate_size((m, X.shape[1], c))
    case = H.Case((m, X.shape[1], c), inputs={"X": X, "W": W, "logp": logp, "y": y},
                  outputs={"dW": (W.shape, np.float32), "db": ((c,), np.float32),
                           "dX": (X.shape, np.float32)})
    out = H.run(launch, version, case)
    if pad:
        return out["dW"][:0], out["db"], out["dX"][:, :0]
    return out["dW"], out["db"], out["dX"]


# --- linear + cross-entropy: unfused, fused, chunked, with every byte counted ------------------

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


def _plan_rows(N, chunk):
    """Rows of logits held at once: all N (unfused: chunk None), else min(chunk, N)."""
    return N if chunk is None else max(1, min(int(chunk), N))


class LinearCrossEntropy:
    """loss = CE(H W + b, y), forward and backward (loss, dH, dW, db) on the GPU.

    chunk=None: the unfused path: the N x V logits and their N x V gradient both live in device
    memory (lce_grad writes the gradient, plain GEMMs read it). chunk=R: R rows at a time into
    one R x V logits buffer, and the two gradient GEMMs compute dZ = (exp(z - lse) - onehot) / N
    from the logits as they load them: no gradient buffer at all (chunk >= N: one chunk, the
    fused path). kern: another build of kernel.cu (the sweep's); grid: V4_GRID."""

    def __init__(self, H_, W, b, y, chunk=None, kern=None, grid=None):
        H_ = np.ascontiguousarray(H_, dtype=np.float32)
        W = np.ascontiguousarray(W, dtype=np.float32)
        N, d = H_.shape
        V = W.shape[1]
        self.N, self.d, self.V = N, d, V
        self.kw = {"kern": kern, "grid": grid}
        self.unfused = chunk is None
        self.R = R = _plan_rows(N, chunk)
        self.ntiles = H.cdiv(V, BN)
        self.mem = mem = TrackedMemory()
        self.H = mem.upload(H_)
        self.W = mem.upload(W)
        self.b = mem.upload(np.ascontiguousarray(b, dtype=np.float32))
        self.y = mem.upload(np.ascontiguousarray(y, dtype=np.int32))
        self.loss = mem.alloc(4)
        self.dH = mem.alloc(N * d * 4)
        self.dW = mem.alloc(d * V * 4)
        self.db = mem.alloc(V * 4)
        self.Z = mem.alloc(R * V * 4)                           # logits (of a chunk)
        self.dZ = mem.alloc(N * V * 4) if self.unfused else None  # their gradient (unfused)
        self.stats = mem.alloc(R * self.ntiles * 8)
        self.zlab = mem.alloc(R * 4)
        self.lse = mem.alloc(R * 4)
        self.row_loss = mem.alloc(N * 4)
        self.plan = v4_split(R, d, V)  # dH's GEMM (K = V), the same for every chunk
        self.ws = mem.alloc(self.plan[0] * R * d * 4) if self.plan[0] > 1 else 0

    def run(self):
        N, d, V, R, kw = self.N, self.d, self.V, self.R, self.kw
        kern = kw["kern"] or K
        for r0 in range(0, N, R):
            rows = min(R, N - r0)
            Hc, yc = int(self.H) + 4 * r0 * d, int(self.y) + 4 * r0
            # forward: Z = H_c W + b, per-tile (max, sum exp) and the labels' logits; lse, loss
            tile_gemm("lce_gemm_logits", Hc, self.W, self.Z, rows, V, d, d, V, bias=self.b,
                      stats=self.stats, zlab=self.zlab, labels=yc, **kw)
            kern("lce_lse", "PPPPii").prepared_call((H.cdiv(rows, 8), 1, 1), (256, 1, 1), self.stats,
                                                   self.zlab, self.lse, int(self.row_loss) + 4 * r0,
                                                   rows, self.ntiles)
            dHc = int(self.dH) + 4 * r0 * d
            if self.unfused:  # dZ into its own buffer, then GEMMs that read it
                kern("lce_grad", "PPPPiif").prepared_call((N, 1, 1), (256, 1, 1), self.Z, self.dZ,
                                                          self.lse, self.y, N, V, np.float32(1.0 / N))
                tile_gemm_nt("lce_gemm_nt", self.dZ, self.W, dHc, N, d, V, V, V, self.ws, self.plan,
                             **kw)
                tile_gemm("lce_gemm_tn_db", self.H, self.dZ, self.dW, d, V, N, d, V,
                          colsum=self.db, **kw)
            else:  # dZ = (exp(z - lse) - onehot) / N, computed by the GEMMs from the logits
                tile_gemm_nt("fa2b_v4_gemm_nt_dz", self.Z, self.W, dHc, rows, d, V, V, V, self.ws,
                             self.plan, labels=yc, shift=self.lse, scale=1.0 / N, **kw)
                tile_gemm("fa2b_v4_gemm_tn_dz_db" if r0 == 0 else "lce_gemm_tn_dz_acc_db", Hc, self.Z,
                          self.dW, d, V, rows, d, V, colsum=self.db, labels=yc, shift=self.lse,
                          scale=1.0 / N, **kw)
        kern("lce_loss", "PPi").prepared_call((1, 1, 1), (1024, 1, 1), self.row_loss, self.loss, N)

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
    inputs and outputs for every path, the logits of a chunk (of all N rows unfused, plus their
    gradient), and small per-row scratch."""
    R = _plan_rows(N, chunk)
    io = 4 * (N * d + d * V + V + N) + 4 + 4 * (N * d + d * V + V)  # H W b y, loss dH dW db
    logits = 4 * R * V + (4 * N * V if chunk is None else 0)
    splits = v4_split(R, d, V, sms)[0]  # dH's GEMM workspace
    scratch = 8 * R * H.cdiv(V, BN) + 4 * R + 4 * R + 4 * N + (4 * splits * R * d if splits > 1 else 0)
    return io + logits + scratch


def _lce_inputs(H_, W, b, y, chunk):
    H_ = A.floats(H_, "H", ndim=2, what="[N, d] (hidden states, one row per token)")
    W = A.floats(W, "W", ndim=2, what="[d, V] (the output projection)")
    if H_.shape[1] != W.shape[0]:
        raise ValueError(f"H has {H_.shape[1]} features per row but W has {W.shape[0]} rows: "
                         f"W must be [d, V] with d = H.shape[1]")
    N, V = H_.shape[0], W.shape[1]
    b = A.floats(b, "b", shape=(V,), what="(one bias per class, V = W.shape[1])")
    if V == 0 and N > 0:
        raise ValueError("W has no columns: with 0 classes no label can be valid")
    y = A.integers(y, "y", low=0, high=max(V, 1), shape=(N,), what="(one class label per row of H)")
    if chunk is not None:
        chunk = A.count(chunk, "chunk", low=1)
    return H_, W, b, y, chunk


def linear_cross_entropy(H_, W, b, y, chunk=1024):
    """(loss, dH, dW, db) of loss = mean_r -log softmax(H W + b)[r, y_r] on the GPU (float32):
    H [N, d], W [d, V], b [V], y [N] integer labels in [0, V). chunk=R holds R rows of logits at a
    time and never their gradient; chunk=None materializes both (the unfused path). An empty
    batch (N = 0) returns loss 0.0 and zero gradients without a launch."""
    H_, W, b, y, chunk = _lce_inputs(H_, W, b, y, chunk)
    N, d = H_.shape
    V = W.shape[1]
    if N == 0:
        return 0.0, np.zeros((0, d), np.float32), np.zeros((d, V), np.float32), np.zeros(V, np.float32)
    pad = d == 0  # no features: the logits are b; one zero feature gives the same results
    if pad:
        H_, W = np.zeros((N, 1), np.float32), np.zeros((1, V), np.float32)
    validate_size((N, H_.shape[1], V))
    p = LinearCrossEntropy(H_, W, b, y, chunk)
    try:
        p.run()
        out = p.results()
    finally:
        p.free()
    if pad:
        return float(out["loss"][0]), out["dH"][:, :0], out["dW"][:0], out["db"]
    return float(out["loss"][0]), out["dH"], out["dW"], out["db"]


def lce_problem(N, d, V, seed=20):
    rng = np.random.default_rng(seed)
    H_ = rng.standard_normal((N, d), dtype=np.float32)
    W = rng.standard_normal((d, V), dtype=np.float32) * np.float32(2.0 / np.sqrt(d))
    b = rng.standard_normal(V, dtype=np.float32) * np.float32(0.5)
    y = rng.integers(0, V, N).astype(np.int32)
    return H_, W, b, y


def compare_lce(out, ref, tol=1e-5):
    """Check (loss, dH, dW, db) against reference values; returns the worst CheckResult."""
    from common.check import compare_all

    return compare_all({k: np.atleast_1d(v) for k, v in out.items()},
                       {k: np.atleast_1d(v) for k, v in ref.items()}, tol)


def lce_table(N, d, V, chunk, repeats=5, paths=("unfused", "fused", "chunked")):
    """Peak memory and time of our paths (unfused: logits and gradient stored; fused: the
    logits of all N rows, the gradient computed in the GEMMs; chunked: `chunk` rows of logits)
    and of torch's F.linear + F.cross_entropy + backward (when installed), forward + backward,
    on one problem. Returns (rows, outputs agree): each path's outputs against the first's."""
    from common.check import compare
    from common.timing import time_fn

    H_, W, b, y = lce_problem(N, d, V)
    rows, outs = [], {}
    for kind in paths:
        ch = {"unfused": None, "fused": N, "chunked": chunk}[kind]
        name = {"unfused": "unfused: N x V logits + gradient",
                "fused": "fused: N x V logits, gradient in the GEMMs",
                "chunked": f"chunked: {chunk} rows of logits"}[kind]
        p = LinearCrossEntropy(H_, W, b, y, ch)
        t = time_fn(p.run, warmup=1, repeats=repeats)
        outs[kind] = p.results()
        rows.append({"kind": kind, "path": name, "peak_bytes": p.mem.peak,
                     "driver_peak_bytes": p.mem.driver_peak, "median_ms": t.median_ms,
                     "min_ms": t.min_ms, "max_ms": t.max_ms})
        p.free()
    first = outs[paths[0]]
    agree = {kind: max(compare(o[k], first[k].astype(np.float64), 1e-5).rel_l2 for k in first)
             for kind, o in outs.items() if kind != paths[0]}
    torch = torch_or_none()
    if torch is not None:
        try:
            row, tout = _torch_lce(torch, H_, W, b, y, repeats)
            rows.append(row)
            agree["torch"] = max(compare(tout[k], first[k].astype(np.float64), 1e-5).rel_l2
                                 for k in first)
            torch.cuda.empty_cache()  # its tensors died with the function
        except Exception as e:  # the library must not stop the day
            rows.append({"kind": "torch-failed", "path": f"torch: not measured ({type(e).__name__}: {e})"})
    return rows, agree


def _torch_lce(torch, H_, W, b, y, repeats):
    from common.timing import time_fn

    F = torch.nn.functional
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    Ht = torch.from_numpy(H_).cuda().requires_grad_()
    Wt = torch.from_numpy(W).cuda().requires_grad_()
    bt = torch.from_numpy(np.ascontiguousarray(b)).cuda().requires_grad_()
    yt = torch.from_numpy(y.astype(np.int64)).cuda()
    loss = []

    def step():
        Ht.grad = Wt.grad = bt.grad = None
        out = F.cross_entropy(F.linear(Ht, Wt.t(), bt), yt)
        out.backward()
        loss[:] = [out]

    step()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated() - base
    t = time_fn(step, warmup=1, repeats=repeats)
    outs = {"loss": np.array([loss[0].item()], np.float32), "dH": Ht.grad.cpu().numpy(),
            "dW": Wt.grad.cpu().numpy(), "db": bt.grad.cpu().numpy()}
    return ({"kind": "torch", "path": "torch F.linear + F.cross_entropy + backward", "peak_bytes": peak,
             "driver_peak_bytes": None, "median_ms": t.median_ms, "min_ms": t.min_ms,
             "max_ms": t.max_ms}, outs)


# --- gradients against finite differences, gradient descent -----------------------------------

def finite_difference_check(size=FD_SIZE, seed=6):
    """Every version's GPU gradients (from day 15's forward) against central differences of the
    float64 loss: {version: {"rel_err": worst relative error of dW, db, dX, "ok": <= 1e-4}}."""
    from days.day15_fa2_forward.driver import forward

    rng = np.random.default_rng(seed)
    m, d, c = size
    X = rng.standard_normal((m, d)).astype(np.float32)
    W = rng.standard_normal((d, c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    y = rng.integers(0, c, m).astype(np.int32)
    X64, W64, b64 = X.astype(np.float64), W.astype(np.float64), b.astype(np.float64)
    f = lambda: reference.loss(X64, W64, b64, y)
    fd = [reference.numerical_grad(f, x) for x in (W64, b64, X64)]
    _, logp = forward(X, W, b, y)
    out = {}
    for v in VERSIONS:
        errs = [np.linalg.norm(g - w) / np.linalg.norm(w) for g, w in zip(backward(X, W, logp, y, v), fd)]
        out[v] = {"rel_err": float(max(errs)), "ok": bool(max(errs) <= 1e-4)}
    return out


def sgd_gpu(X, y, c, steps=20, lr=1.0, version=BEST):
    """Full-batch gradient descent from W = 0, b = 0 on the GPU (day 15's forward, this day's
    backward): the loss before each step and after the last (steps + 1 values)."""
    from days.day15_fa2_forward.driver import forward

    X = np.ascontiguousarray(X, dtype=np.float32)
    W = np.zeros((X.shape[1], c), np.float32)
    b = np.zeros(c, np.float32)
    losses = []
    for _ in range(steps + 1):
        loss, logp = forward(X, W, b, y)
        losses.append(loss)
        if len(losses) == steps + 1:
            break
        dW, db, _ = backward(X, W, logp, y, version=version)
        W -= np.float32(lr) * dW
        b -= np.float32(lr) * db
    return losses


SGD_STEPS, SGD_LR = 20, 1.0


def _mib(x):
    return "-" if x is None else f"{x / 2 ** 20:,.0f} MiB"


def _lce_section(report, title, table, agree, key, extra=None):
    from common.report import fmt_ms

    unfused = next((r["peak_bytes"] for r in table if r.get("kind") == "unfused"), None)
    torch_ms = next((r["median_ms"] for r in table if r.get("kind") == "torch"), None)
    report.section(title, [[r["path"], _mib(r.get("peak_bytes")), _mib(r.get("driver_peak_bytes")),
                            f"{100 * r['peak_bytes'] / unfused:.1f}%" if r.get("peak_bytes") and unfused
                            else "-", fmt_ms(r.get("median_ms")),
                            f"{torch_ms / r['median_ms']:.2f}x" if torch_ms and r.get("median_ms") else "-"]
                           for r in table],
                   ["path", "peak (tracked allocations)", "peak (cuMemGetInfo drop)", "vs unfused",
                    "time", "vs torch"])
    report.say("  outputs vs the first path, worst rel-L2 difference: "
               + ", ".join(f"{k} {v:.1e}" for k, v in agree.items()))
    report.record(key, {"paths": table, "agree_rel_l2": agree, **(extra or {})})
    # float32 paths that add in different orders agree to ~1e-6; a wrong offset shows as O(1)
    if any(v > 1e-4 for v in agree.values()):
        report.failures.append(f"{title}: the paths disagree: {agree}")


def extras(report, mode):
    # 1. the GPU's gradients against float64 finite differences
    fd = finite_difference_check()
    report.section(f"gradients vs float64 central differences at {H.size_str(FD_SIZE)} "
                   "(from day 15's forward)",
                   [[v, f"{r['rel_err']:.1e}", "ok" if r["ok"] else "FAIL"] for v, r in fd.items()],
                   ["version", "worst rel err (dW, db, dX)", "ok (<= 1e-4)"])
    report.record("finite_differences", fd)
    for v, r in fd.items():
        if not r["ok"]:
            report.failures.append(f"finite differences: {v} off by {r['rel_err']:.1e}")

    # 2. gradient descent lowers the loss
    X, y = reference.classification_problem()
    steps, lr = SGD_STEPS, SGD_LR
    gpu = sgd_gpu(X, y, 5, steps, lr)
    ref = reference.sgd(X, y, 5, steps, lr)
    ok = all(b < a for a, b in zip(gpu, gpu[1:])) and np.allclose(gpu, ref, rtol=1e-4)
    report.section(f"gradient descent, {X.shape[0]}x{X.shape[1]}x5 synthetic problem, lr {lr} "
                   f"(day 15 forward + day 20 backward {BEST})",
                   [[i, f"{g:.5f}", f"{r:.5f}"] for i, (g, r) in enumerate(zip(gpu, ref)) if i % 5 == 0
                    or i == steps], ["step", "loss (GPU)", "loss (float64 numpy)"])
    report.record("sgd", {"gpu": gpu, "reference": ref, "ok": ok})
    if not ok:
        report.failures.append("gradient descent: the GPU loss does not decrease or departs from float64")

    # 3. every linear + cross-entropy path against float64 at a small ragged size
    N, d, V, chunk = LCE_CHECK
    H_, W, b, yy = lce_problem(N, d, V, seed=3)
    loss, dH, dW, db = reference.linear_cross_entropy(H_, W, b, yy)
    ref64 = {"loss": loss, "dH": dH, "dW": dW, "db": db}
    rows = []
    for name, ch in (("unfused", None), ("fused", N), (f"chunked ({chunk} rows)", chunk)):
        out = dict(zip(("loss", "dH", "dW", "db"), linear_cross_entropy(H_, W, b, yy, ch)))
        r = compare_lce(out, ref64)
        rows.append([name, f"{r.rel_l2:.1e}", "ok" if r.ok else "FAIL"])
        if not r.ok:
            report.failures.append(f"linear cross-entropy {name} at {N}x{d}x{V}: {r.message}")
    report.section(f"linear + cross-entropy vs float64 at N={N}, d={d}, V={V}", rows,
                   ["path", "worst rel err", "ok"])
    report.record("lce_float64_checks", rows)
    if mode == "check":
        return

    # 4. forward + backward against torch at the benchmark size
    N, d, V, chunk = FWD_BWD
    table, agree = lce_table(N, d, V, chunk)
    _lce_section(report, f"linear + cross-entropy forward+backward, N={N}, d={d}, V={V}: time and "
                 "peak memory", table, agree, "fwd_bwd", {"size": [N, d, V], "chunk": chunk})

    # 5. memory and time at the LM-head size
    N, d, V, chunk = LCE_BENCH
    table, agree = lce_table(N, d, V, chunk, paths=("unfused", "chunked"))
    ratio = table[1]["peak_bytes"] / table[0]["peak_bytes"]
    _lce_section(report, f"linear + cross-entropy forward+backward, N={N}, d={d}, V={V}: peak device "
                 "memory", table, agree, "chunked_ce", {"size": [N, d, V], "chunk": chunk,
                                                        "peak_ratio": ratio})
    if ratio >= 0.25:
        report.failures.append(f"chunked CE peak memory is {100 * ratio:.1f}% of unfused (bar < 25%)")
