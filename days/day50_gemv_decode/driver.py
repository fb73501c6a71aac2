"""Day 50 driver: batch-1 GEMV for decoding, y = W x in bf16 with fp32 sums.

    from days.day50_gemv_decode.driver import gemv, gemv_bits
    y = gemv(w, x)                 # real arrays [N, K] and [K], rounded to bf16 first; y float32
    y16 = gemv_bits(w16, x16)      # uint16 bf16 bit patterns in (common.bf16), bf16 bits out

A size is NxK: W is [N, K] (a Linear layer's weight, [out features, in features]), x is [K], y
is [N]. x and y are bf16 like W (what a bf16 model's decode step feeds and gets back).
"""
import numpy as np

from common import args as A
from common import bf16
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "one thread per row, scalar loop (uncoalesced)",
    "v2": "one warp per row, 16-byte loads, one in flight per lane",
    "v3": "a warp per 2 rows, 4 chunks per row in flight, W not kept in L1",
    "v4": "a block per row: K split over 256 threads, all loads at once",
}
BEST = "v4"   # fastest at the default size 4096x4096 (H200, 2026-11-26)
SIZE_HELP = "NxK for y[N] = W[N, K] x[K] (W bf16 [out, in]), e.g. 4096x11008"
SIZES = {"small": (64, 96), "default": (4096, 4096), "large": (11008, 4096)}
# K = 1 (a row is one element: no chunk, head or tail only); N = 1; K < 8 (head and tail only);
# K % 8 = 1, 2, 4 (x read in pieces of 1, 2, 4 elements; every head 0..7 appears); rows of
# exactly one chunk; N not a multiple of the 16 rows of a v3 block (partial warps, partial rows
# in a warp); K = 2049 (rows longer than one pass of a v4 block at U = 2 ... 8 chunks: 256 * U);
# K = 16392 (v4 at U = 8 with a second pass); a 4096 x 4096 row length at N = 33
CHECK_SIZES = [(1, 1), (1, 8), (3, 1), (5, 7), (31, 13), (33, 8), (17, 33), (9, 40), (7, 100),
               (13, 2049), (19, 4098), (6, 4100), (33, 4096), (3, 16392), (2, 17002),
               (1000, 3), (1025, 64), (257, 250)]
CURRICULUM = [(4096, 4096), (4096, 11008), (11008, 4096)]   # the bar's matrices, both ways
AWKWARD = (4097, 4099)                                        # K odd: every row misaligned
BENCH_SIZES = CURRICULUM + [AWKWARD]
# CURRICULUM.md: >= 90% of the read-only memory ceiling for a 4096x4096 and a 4096x11008 bf16
# matrix, faster than torch/cuBLAS. W is 32 MB and 86 MB: too few bytes for a read of the same
# size to reach the full rate (the ramp up and the tail of a 7-20 us kernel are a visible share),
# so by CONVENTIONS.md the bar is stated against a read-only stream of the same bytes at that
# size (size_pct); the README quotes the % of the full ceiling beside it.
BAR = [{"sizes": CURRICULUM, "size_pct": 90, "vs_baseline": 1.0}]

MAX_N = 2 ** 31 - 1024     # rows: int row indices with a block's worth of slack
MAX_K = 2 ** 31 - 1

V1_THREADS = 128
WARP_BLOCK = 256            # v2 and v3: 8 warps a block
V3 = (2, 4)                 # rows per warp, chunks per row in flight
V4_THREADS, V4_ROWS = 256, 1
V4_UNROLLS = (2, 4, 8)      # kernel.cu instantiates these


def validate_size(size):
    n, k = size
    if n > MAX_N:
        raise ValueError(f"N = {n}: the kernels take at most {MAX_N} rows (int row indices)")
    if k > MAX_K:
        raise ValueError(f"K = {k}: the kernels take at most {MAX_K} columns (int indices)")


def make_case(size, rng):
    """bf16 W and x (standard normal values rounded to bf16; x scaled by 1/sqrt(K) so y is of
    order 1 at any K), a bf16 y, the float64 product as the reference."""
    n, k = size
    w = bf16.random_bits(rng, (n, k))
    x = bf16.random_bits(rng, (k,), scale=1.0 / np.sqrt(k))
    nbytes, read = reference.bytes_moved(n, k)
    return H.Case(size, inputs={"w": w, "x": x}, outputs={"y": ((n,), np.uint16)},
                  reference=lambda: {"y": reference.gemv(w, x)},
                  decode={"y": bf16.from_bits}, tol=reference.tolerance(k),
                  bytes=nbytes, read_bytes=read)


# --- launching --------------------------------------------------------------------------------

def v4_unroll(k: int, threads: int = V4_THREADS) -> int:
    """Chunks a v4 thread loads per pass: the fewest of 2, 4, 8 that cover a row in one pass
    (a row has about K/8 chunks), else 8 (K > 16384: several passes)."""
    chunks = k // 8
    return next((u for u in V4_UNROLLS if threads * u >= chunks), V4_UNROLLS[-1])


def kernel_for(version, n, k, config=None):
    """(kernel name, grid, block) of a version at N x K; `config` is a sweep candidate:
    v3 (rows, unroll, warps a block), v4 (threads, rows, unroll)."""
    xa = reference.x_alignment(k)
    if version == "v1":
        return "gemv_v1", (H.cdiv(n, V1_THREADS), 1, 1), (V1_THREADS, 1, 1)
    if version == "v2":
        return f"gemv_v2_x{xa}", (H.cdiv(n, WARP_BLOCK // 32), 1, 1), (WARP_BLOCK, 1, 1)
    if version == "v3":
        rows, unroll, warps = config or (*V3, WARP_BLOCK // 32)
        return (f"gemv_v3_r{rows}_u{unroll}_x{xa}", (H.cdiv(n, warps * rows), 1, 1),
                (32 * warps, 1, 1))
    threads, rows, unroll = config or (V4_THREADS, V4_ROWS, v4_unroll(k))
    return (f"gemv_v4_t{threads}_r{rows}_u{unroll}_x{xa}", (H.cdiv(n, rows), 1, 1),
            (threads, 1, 1))


def launch(version, d, config=None):
    """Enqueue one version on DeviceCase d (one kernel, no scratch, nothing else)."""
    A.version(version, VERSIONS)
    n, k = d.size
    name, grid, block = kernel_for(version, n, k, config)
    K(name, "PPPii").prepared_call(grid, block, d.w, d.x, d.y, n, k)


def launch_async(version, stream, w, x, y, n, k):
    """The same launch on a stream with explicit pointers (the CUDA-graph extra)."""
    name, grid, block = kernel_for(version, n, k)
    K(name, "PPPii").prepared_async_call(grid, block, stream, w, x, y, n, k)


# --- baselines: cuBLAS through torch and directly ---------------------------------------------

def baselines(d):
    """torch's bf16 F.linear at batch 1 and torch.mv (both cuBLAS) and cublasGemmEx with M = 1,
    all on the case's own W and x (torch views of the uint16 buffers as bfloat16), each writing
    its own bf16 y, checked against the reference like the versions."""
    from common.baselines import gemm_ex

    n, k = d.size
    torch = torch_or_none()
    if torch is None:
        y_ex = d.scratch("y_cublas", (n,), np.uint16)
        # row-major y[1, N] = x[1, K] @ W^T with W stored [N, K] (b_transposed)
        return {"cublasGemmEx (M=1)": lambda: gemm_ex(d.x, d.w, y_ex, 1, n, k, mode="bf16",
                                                      b_transposed=True)}
    w = as_torch(d.array("w")).view(torch.bfloat16)
    x = as_torch(d.array("x")).view(torch.bfloat16)
    x2 = x.view(1, k)
    y_mv = torch.empty(n, dtype=torch.bfloat16, device="cuda")
    y_ex = torch.empty(n, dtype=torch.bfloat16, device="cuda")

    def cublas_ex():
        gemm_ex(d.x, d.w, y_ex.data_ptr(), 1, n, k, mode="bf16", b_transposed=True)
        return y_ex

    return {"torch F.linear": lambda: torch.nn.functional.linear(x2, w),
            "torch.mv": lambda: torch.mv(w, x, out=y_mv),
            "cublasGemmEx (M=1)": cublas_ex}


# --- extras: what cuBLAS runs, and launch overhead --------------------------------------------

B2B_SIZE = (4096, 4096)
B2B_WEIGHTS = 8      # distinct matrices, 8 x 32 MB: each GEMV's W was pushed out of L2 by the others
B2B_CALLS = 64       # GEMVs per timed sequence (cycling through the weights)


def extras(report, mode):
    if mode != "bench":
        return
    torch = torch_or_none()
    if torch is not None:
        _cublas_kernels(report, torch)
    _back_to_back(report, torch)


def _cublas_kernels(report, torch):
    """The kernels each torch call launches (CUPTI through torch.profiler), at every curriculum
    size: which cuBLAS kernel a batch-1 bf16 GEMV really is."""
    from common.baselines import kernels_launched

    rows = []
    for n, k in CURRICULUM:
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        x = torch.randn(k, device="cuda", dtype=torch.bfloat16)
        for label, fn in (("F.linear", lambda: torch.nn.functional.linear(x.view(1, k), w)),
                          ("torch.mv", lambda: torch.mv(w, x))):
            fn()
            for i, (name, us) in enumerate(kernels_launched(fn)):
                rows.append([f"{n}x{k} {label} {i + 1}", name[:100], f"{us:.1f}"])
        del w, x
    report.section("Kernels cuBLAS runs (torch bf16, batch 1; L2 not flushed)", rows,
                   ["size, call, kernel #", "kernel", "us"])


def _back_to_back(report, torch):
    """B2B_CALLS GEMVs in a row over B2B_WEIGHTS distinct 4096 x 4096 weights (256 MB: every W
    comes from DRAM again), no L2 flush in between: the decode loop's situation. Launched one by
    one from Python, and replayed as one CUDA graph; the same for torch's F.linear."""
    from common.gpu import driver
    from common.graphs import CudaGraph

    cuda = driver()
    n, k = B2B_SIZE
    rng = np.random.default_rng(50)
    from pycuda import gpuarray

    ws = [gpuarray.to_gpu(bf16.random_bits(rng, (n, k))) for _ in range(B2B_WEIGHTS)]
    x = gpuarray.to_gpu(bf16.random_bits(rng, (k,), scale=1.0 / np.sqrt(k)))
    ys = [gpuarray.empty((n,), np.uint16) for _ in range(B2B_WEIGHTS)]
    nbytes, _ = reference.bytes_moved(n, k)
    stream = cuda.Stream()
    start, end = cuda.Event(), cuda.Event()

    def enqueue():
        for i in range(B2B_CALLS):
            j = i % B2B_WEIGHTS
            launch_async(BEST, stream, ws[j].gpudata, x.gpudata, ys[j].gpudata, n, k)

    def timed(fn, reps=5):
        fn()
        stream.synchronize()
        best = None
        for _ in range(reps):
            start.record(stream)
            fn()
            end.record(stream)
            end.synchronize()
            ms = end.time_since(start)
            best = ms if best is None else min(best, ms)
        return best * 1e3 / B2B_CALLS   # us per GEMV

    rows = []

    def row(label, us):
        rows.append([label, f"{us:.2f}", f"{nbytes / (us * 1e-6) / 1e9:.0f}"])

    row("ours, one launch each", timed(enqueue))
    with CudaGraph(stream, enqueue) as g:
        row("ours, CUDA graph", timed(g.launch))
    if torch is not None:
        tw = [as_torch(a).view(torch.bfloat16) for a in ws]
        tx = as_torch(x).view(torch.bfloat16).view(1, k)
        F = torch.nn.functional

        def torch_eager():
            for i in range(B2B_CALLS):
                F.linear(tx, tw[i % B2B_WEIGHTS])

        def torch_timed(fn, reps=5):
            fn()
            torch.cuda.synchronize()
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            best = None
            for _ in range(reps):
                s.record()
                fn()
                e.record()
                e.synchronize()
                ms = s.elapsed_time(e)
                best = ms if best is None else min(best, ms)
            return best * 1e3 / B2B_CALLS

        row("torch F.linear, one call each", torch_timed(torch_eager))
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):       # warm-up off the default stream (cuBLAS workspace)
            torch_eager()
        torch.cuda.current_stream().wait_stream(side)
        tg = torch.cuda.CUDAGraph()
        with torch.cuda.graph(tg):
            torch_eager()
        row("torch F.linear, CUDA graph", torch_timed(tg.replay))
        del tg
    report.section(f"Back-to-back GEMVs at {n}x{k} ({B2B_CALLS} in a row over {B2B_WEIGHTS} "
                   f"weights, no flush; ours = {BEST}; best of 5)", rows,
                   ["how", "us per GEMV", "GB/s"])


# --- public functions -------------------------------------------------------------------------

def _check_bits(w_bits, x_bits):
    for name, a, nd, what in (("w_bits", w_bits, 2, "[N, K]"), ("x_bits", x_bits, 1, "[K]")):
        if not isinstance(a, np.ndarray) or a.dtype != np.uint16:
            got = f"dtype {a.dtype}" if isinstance(a, np.ndarray) else type(a).__name__
            raise TypeError(f"{name} must be a uint16 array of bf16 bit patterns "
                            f"(common.bf16.to_bits), got {got}")
        if a.ndim != nd:
            raise ValueError(f"{name} must be {nd}-D {what}, got shape {a.shape}")
    n, k = w_bits.shape
    if x_bits.shape[0] != k:
        raise ValueError(f"w is [N, K] = {w_bits.shape}, so x must have K = {k} elements, "
                         f"got {x_bits.shape[0]}")
    validate_size((n, k))
    return n, k


def gemv_bits(w_bits, x_bits, version=BEST):
    """y = W x on the GPU for bf16 W [N, K] and x [K] given as uint16 bit patterns
    (common.bf16.to_bits); fp32 sums, y rounded to bf16 (nearest even): a uint16 array [N].

    N = 0 gives an empty array and K = 0 zeros, both without a launch. Refused: arrays that are
    not uint16, W not 2-D or x not 1-D, len(x) != K, N above 2^31 - 1024."""
    version = A.version(version, VERSIONS)
    n, k = _check_bits(w_bits, x_bits)
    if n == 0 or k == 0:
        return np.zeros(n, np.uint16)            # an empty sum is +0.0 = bits 0
    case = H.Case((n, k), inputs={"w": np.ascontiguousarray(w_bits),
                                  "x": np.ascontiguousarray(x_bits)},
                  outputs={"y": ((n,), np.uint16)})
    return H.run(launch, version, case)["y"]


def gemv(w, x, version=BEST):
    """y = W x on the GPU with W [N, K] and x [K] real arrays, rounded to bf16 (nearest even)
    first; fp32 sums; returns the bf16 y as float32 [N]. Compare with
    reference.gemv_rounded(bf16.to_bits(w), bf16.to_bits(x)), not with w @ x.
    Refused: complex, boolean or string arrays, W not 2-D, x not 1-D, len(x) != K."""
    version = A.version(version, VERSIONS)
    w = A.floats(w, "w", ndim=2, what="[N, K]")
    x = A.floats(x, "x", ndim=1, what="[K]")
    if x.shape[0] != w.shape[1]:
        raise ValueError(f"w is [N, K] = {w.shape}, so x must have K = {w.shape[1]} elements, "
                         f"got {x.shape[0]}")
    return bf16.from_bits(gemv_bits(bf16.to_bits(w), bf16.to_bits(x), version))
