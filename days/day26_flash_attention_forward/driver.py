"""Day 26 driver: FlashAttention-2 forward in fp32, four versions.

    from days.day26_flash_attention_forward.driver import attention
    o, lse = attention(q, k, v, causal=True)   # q, k, v [BH, N, D] float32, D = 64 or 128
    # o [BH, N, D]; lse [BH, N] = log sum_k exp(scale q.k) (natural log), for day 27

A size is (BH, N, D, M): BH = batch x heads, N positions, head dim D, mask M = 1 (full) or 2
(causal); the same sizes as day 27's backward.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: S = QK^T into an N x N buffer, row softmax, P V (3 kernels)",
    "v2": "flash, one thread per query row, K/V tiles in shared memory",
    "v3": "flash block: register tiles (TM x TN scores a thread), causal tiles skipped",
    "v4": "v3 + cp.async double-buffered K/V + exp2 (= flash_attention.cuh)",
}
BEST = "v4"   # fastest at every bench size (H200, 2026-11-23, .notes/day26_sweep.py)
HEAD_DIMS = (64, 128)
FULL, CAUSAL = 1, 2  # the mask, the size's last number (a size's numbers must be positive)
SIZE_HELP = ("BHxNxDxM (batch*heads x positions x head dim 64|128 x mask 1 full|2 causal), "
             "e.g. 32x4096x64x2")
SIZES = {"small": (2, 100, 64, CAUSAL), "default": (32, 4096, 64, CAUSAL),
         "large": (32, 8192, 64, CAUSAL)}
# N = 1 (one key: o = v), 17, 63 and 65 (around the 64-row tiles and the 32-key tiles), 1000 (not
# a multiple of any tile); both head dims, both masks; BH = 3 (odd)
CHECK_SIZES = [(bh, n, d, c) for n, bh in ((1, 3), (17, 3), (63, 2), (65, 2), (1000, 1))
               for d in HEAD_DIMS for c in (FULL, CAUSAL)] + [(1, 129, 128, CAUSAL), (5, 33, 64, FULL)]
AWKWARD = (32, 4097, 64, CAUSAL)  # one row past a whole number of 64-row tiles
BAR_SIZES = [(32, 4096, 64, FULL), (32, 4096, 64, CAUSAL)]
BENCH_SIZES = BAR_SIZES + [(32, 4096, 128, FULL), (32, 4096, 128, CAUSAL), AWKWARD]

U = 2.0 ** -24  # the unit roundoff of float32


GRANULE = 2 ** 21  # cuMemGetInfo moves in 2 MB steps: 'nothing' reads as at most one step


def _memory_bar(rec):
    """extras' memory table: v1's workspace grows as N^2 (16x from N = 2048 to 8192) and the
    flash versions need nothing beyond Q, K, V, O and the lse vector."""
    mem = (rec.get("extra") or {}).get("memory")
    if not mem:
        return False, "memory table not measured"
    flash = [v for v in VERSIONS if v != "v1"]
    grows = mem["v1"]["growth"]
    flat = max(b for v in flash for b in mem[v]["extra_bytes"])
    ok = grows is not None and grows >= 15 and flat <= GRANULE
    return ok, (f"v1 needs {grows or 0:.1f}x more memory at 4x N; the flash versions at most "
                f"{flat} bytes beyond Q, K, V, O and lse")


# CURRICULUM.md: memory O(N) (measured); correct at N not a multiple of the tile (CHECK_SIZES and
# the awkward bench size); faster than torch SDPA fp32 at B*H = 32, N = 4096, d = 64, causal and
# not; and faster than the naive three-kernel version
BAR = [{"sizes": BAR_SIZES, "vs_baseline": 1.0, "baseline": "torch SDPA"},
       {"sizes": BAR_SIZES, "version": BEST, "over": ("v1", 1.0)},
       {"text": "memory O(N): flash needs no workspace, naive grows as N^2", "check": _memory_bar}]


def validate_size(size):
    if len(size) != 4:
        raise ValueError(f"a size is {SIZE_HELP}")
    bh, n, d, mask = size
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim {d} not built: the kernels take D = 64 or 128")
    if mask not in (FULL, CAUSAL):
        raise ValueError(f"the mask must be 1 (full) or 2 (causal), got {mask}")
    if not 1 <= bh <= 65535:
        raise ValueError(f"BH = {bh}: between 1 and 65535 (heads are the grid's y dimension)")
    if n < 1:
        raise ValueError("N must be at least 1")
    A.fits_int32("N", n, "positions")
    A.fits_int32("BH * N", bh * n, "rows")  # v1's softmax grid and the flash grids index rows in int


def _tolerances(q, k, v, causal):
    """Relative-L2 tolerance of o and lse: twice the error of the same attention computed in
    float32 numpy (CONVENTIONS: attention-like ops), measured on the first two heads, but never
    below 4 sqrt(n) u, the typical error of an n-term float32 sum accumulated in order (u = 2^-24):
    each o element sums N terms (n = N), each score D products (lse: n = D). At N = 1 numpy's
    error is 0, and at N = 4096 the kernel's ordered sum over 4096 keys is a few times numpy's
    blocked one; 4 sqrt(N) u is still 1000x below what a misplaced tile or a missed rescale does
    (errors of 1e-2 and more)."""
    bh, n, d = q.shape
    sl = slice(0, min(bh, 2))
    o64, l64 = reference.attention(q[sl], k[sl], v[sl], causal)
    o32, l32 = reference.attention(q[sl], k[sl], v[sl], causal, dtype=np.float32)

    def rel(a, b):
        nb = np.linalg.norm(b)
        return float(np.linalg.norm(a - b) / nb) if nb else float(np.linalg.norm(a - b))

    return {"o": max(2 * rel(o32, o64), 4 * np.sqrt(n) * U),
            "lse": max(2 * rel(l32, l64), 4 * np.sqrt(d) * U)}


def make_case(size, rng):
    """q, k, v ~ N(0, 1) [BH, N, D]; scale 1/sqrt(D), so the scores have unit variance."""
    validate_size(size)
    bh, n, d, mask = size
    causal = mask == CAUSAL
    q, k, v = (rng.standard_normal((bh, n, d), dtype=np.float32) for _ in range(3))

    def ref():
        o, lse = reference.attention(q, k, v, causal)
        return {"o": o, "lse": lse}

    return H.Case(size, inputs={"q": q, "k": k, "v": v},
                  outputs={"o": ((bh, n, d), np.float32), "lse": ((bh, n), np.float32)},
                  reference=ref, flops=reference.flops(bh, n, d, causal), unit="fp32",
                  bytes=4 * bh * n * (4 * d + 1), tol=_tolerances(q, k, v, causal),
                  params={"scale": float(1.0 / np.sqrt(d))})


# --- launching --------------------------------------------------------------------------------

# (BLOCK_M, BLOCK_N, TM, TN) of the register-tiled versions; v4's must equal Tile<D> of
# common/cuda/flash_attention.cuh (the kernel exports its block rows and threads and launch
# checks them)
TILES = {"v3": {64: (64, 64, 4, 8), 128: (64, 32, 4, 4)},
         "v4": {64: (64, 64, 4, 8), 128: (64, 32, 4, 4)}}
V2_ROWS = 128
_GLOBALS: dict = {}


def _global_int(kern, name):
    """An `extern "C" __device__ int` of kernel.cu (shared-memory bytes of a kernel)."""
    key = (id(kern), name)
    if key not in _GLOBALS:
        from common.gpu import driver

        ptr, _ = kern.module.get_global(name)
        out = np.zeros(1, np.int32)
        driver().memcpy_dtoh(out, ptr)
        _GLOBALS[key] = int(out[0])
    return _GLOBALS[key]


def launch_flash(name, tile, q, k, v, o, lse, B, H_, N, strides, scale, kern=None):
    """One register-tiled flash kernel (v3, v4 or a sweep candidate) on raw device pointers:
    strides = (q_b, q_h, q_n, k_b, ..., o_n) in elements, multiples of 4; lse [B, H, N] or 0."""
    kern = kern or K
    bm, bn, tm, tn = tile
    threads = (bm // tm) * (bn // tn)
    smem = _global_int(kern, name + "_smem")
    fn = kern(name, "PPPPPiii" + "q" * 12 + "f", dynamic_smem=smem)
    fn.prepared_call((H.cdiv(N, bm), H_, B), (threads, 1, 1), q, k, v, o, lse, B, H_, N,
                     *[int(s) for s in strides], np.float32(scale), shared_size=smem)


def contiguous_strides(bh, n, d):
    """Strides of contiguous [B = 1, H = BH, N, D] Q, K, V and O."""
    return (bh * n * d, n * d, d) * 4


def launch(version, d):
    version = A.version(version, VERSIONS)  # never run some other kernel for an unknown name
    bh, n, dd, mask = d.size
    scale = np.float32(d.params["scale"])
    tag = f"d{dd}_c{int(mask == CAUSAL)}"
    if version == "v1":
        S = d.scratch("S", (bh, n, n))  # the N x N buffer (per head) the flash versions avoid
        K(f"attn_v1_scores_{tag}", "PPPif").prepared_call(
            (H.cdiv(n, 16), H.cdiv(n, 16), bh), (16, 16, 1), d.q, d.k, S, n, scale)
        K("attn_v1_softmax", "PPi").prepared_call((n, bh, 1), (256, 1, 1), S, d.lse, n)
        K(f"attn_v1_pv_{tag}", "PPPi").prepared_call(
            (H.cdiv(dd, 32), H.cdiv(n, 8), bh), (32, 8, 1), S, d.v, d.o, n)
    elif version == "v2":
        name = f"attn_v2_{tag}"
        smem = _global_int(K, name + "_smem")
        K(name, "PPPPPif", dynamic_smem=smem).prepared_call(
            (H.cdiv(n, V2_ROWS), bh, 1), (V2_ROWS, 1, 1), d.q, d.k, d.v, d.o, d.lse, n, scale,
            shared_size=smem)
    else:
        launch_flash(f"attn_{version}_{tag}", TILES[version][dd], d.q, d.k, d.v, d.o, d.lse,
                     1, bh, n, contiguous_strides(bh, n, dd), scale)


def _sdpa(torch, q, k, v, causal):
    """torch SDPA in fp32 on [1, BH, N, D] views of the same device memory."""
    F = torch.nn.functional
    return lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def baselines(d):
    torch = torch_fp32()
    if torch is None:
        return {}
    q, k, v = (as_torch(d.array(x))[None] for x in ("q", "k", "v"))
    causal = d.size[3] == CAUSAL
    from torch.nn.attention import SDPBackend, sdpa_kernel

    math = _sdpa(torch, q, k, v, causal)

    def math_backend():
        with sdpa_kernel(SDPBackend.MATH):
            return math()

    # the default: torch picks the backend (extras names the kernels it runs); the math
    # backend is torch's own three-step version (matmul, softmax, matmul) for comparison
    return {"torch SDPA": _sdpa(torch, q, k, v, causal), "torch SDPA math": math_backend}


# --- the public function ----------------------------------------------------------------------

def attention(q, k, v, causal=False, scale=None, version=BEST):
    """(o, lse) on the GPU. q, k, v [BH, N, D] float32 (D = 64 or 128); o [BH, N, D] =
    softmax(scale q k^T [causal mask]) v; lse [BH, N] = log sum_k exp(scale q.k) (natural log,
    over the unmasked keys). scale defaults to 1/sqrt(D). N = 0 or BH = 0 returns empty arrays
    without a launch."""
    version = A.version(version, VERSIONS)
    q = A.floats(q, "q", ndim=3, what="[BH, N, D]")
    k = A.floats(k, "k", ndim=3, what="[BH, N, D]")
    v = A.floats(v, "v", ndim=3, what="[BH, N, D]")
    A.same_shape(q=q, k=k, v=v)
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {type(causal).__name__} {causal!r}")
    bh, n, d = q.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim D = {d} is not built: the kernels take D = 64 or 128")
    scale = float(1.0 / np.sqrt(d)) if scale is None else A.real(scale, "scale")
    if bh == 0 or n == 0:
        return np.zeros((bh, n, d), np.float32), np.zeros((bh, n), np.float32)
    size = (bh, n, d, CAUSAL if causal else FULL)
    validate_size(size)
    case = H.Case(size, inputs={"q": q, "k": k, "v": v},
                  outputs={"o": ((bh, n, d), np.float32), "lse": ((bh, n), np.float32)},
                  params={"scale": scale})
    out = H.run(launch, version, case)
    return out["o"], out["lse"]


# --- extras: the memory each version needs, and which kernels torch runs ----------------------

MEMORY_BH, MEMORY_D = 8, 64
MEMORY_NS = (2048, 8192)


def memory_table(ns=MEMORY_NS, bh=MEMORY_BH, dd=MEMORY_D):
    """Device memory each version needs beyond its inputs and outputs, at each N: free memory
    (cuMemGetInfo) after Q, K, V, O, lse are allocated, minus free memory after the version has
    run (its workspace is allocated on first use). Also the bytes the version asked for
    (DeviceCase.scratch). torch SDPA: its peak allocation beyond its output (its caching
    allocator does not show in cuMemGetInfo once it has grown, so torch's own counter)."""
    from common.gpu import driver

    cuda = driver()
    out = {v: {"extra_bytes": [], "asked_bytes": []} for v in VERSIONS}
    torch = torch_or_none()
    if torch is not None:
        out["torch SDPA"] = {"extra_bytes": [], "asked_bytes": []}
    # warm-up: load the module and make every version's first launch (module code, local
    # memory reservations) before anything is measured
    tiny = H.Case((1, 8, dd, FULL), inputs={x: np.zeros((1, 8, dd), np.float32) for x in "qkv"},
                  outputs={"o": ((1, 8, dd), np.float32), "lse": ((1, 8), np.float32)},
                  params={"scale": 1.0})
    for ver in VERSIONS:
        H.run(launch, ver, tiny)
    for n in ns:
        size = (bh, n, dd, FULL)
        rng = np.random.default_rng(26)
        q, k, v = (rng.standard_normal((bh, n, dd), dtype=np.float32) for _ in range(3))
        case = H.Case(size, inputs={"q": q, "k": k, "v": v},
                      outputs={"o": ((bh, n, dd), np.float32), "lse": ((bh, n), np.float32)},
                      params={"scale": float(1 / np.sqrt(dd))})
        for ver in VERSIONS:
            dc = H.DeviceCase(case)
            cuda.Context.synchronize()
            free0 = cuda.mem_get_info()[0]
            launch(ver, dc)
            cuda.Context.synchronize()
            free1 = cuda.mem_get_info()[0]
            asked = sum(a.nbytes for a in dc.__dict__.get("_scratch", {}).values())
            out[ver]["extra_bytes"].append(int(free0 - free1))
            out[ver]["asked_bytes"].append(int(asked))
            del dc
        if torch is not None:
            dc = H.DeviceCase(case)
            tq, tk, tv = (as_torch(dc.array(x))[None] for x in ("q", "k", "v"))
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            base = torch.cuda.memory_allocated()
            o = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv)
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated() - base - o.numel() * 4
            out["torch SDPA"]["extra_bytes"].append(int(peak))
            out["torch SDPA"]["asked_bytes"].append(int(peak))
            del o, dc
    for r in out.values():
        a, b = r["extra_bytes"]
        r["growth"] = (b / a) if a > 0 else None
    return out


def sdpa_kernels(size=(32, 4096, 64, FULL)):
    """The GPU kernels torch SDPA launches at a bench size (names the backend it picked)."""
    from common.baselines import kernels_launched

    torch = torch_fp32()
    if torch is None:
        return None
    bh, n, dd, _ = size
    q, k, v = (torch.randn(1, bh, n, dd, device="cuda") for _ in range(3))
    rows = []
    for causal in (0, 1):
        fn = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
        fn()
        names = sorted({name for name, _ in kernels_launched(fn)})
        rows.append(["causal" if causal else "full", "; ".join(names)])
    return rows


def extras(report, mode):
    if mode == "check":
        return
    mem = memory_table()
    mb = lambda b: f"{b / 2 ** 20:.1f}"
    rows = [[ver] + [mb(b) for b in r["extra_bytes"]] + [mb(b) for b in r["asked_bytes"]]
            + ["-" if r["growth"] is None else f"{r['growth']:.1f}x"] for ver, r in mem.items()]
    n1, n2 = MEMORY_NS
    report.section(f"device memory beyond Q, K, V, O, lse, in MB (BH = {MEMORY_BH}, D = {MEMORY_D})",
                   rows, ["version", f"N={n1} measured", f"N={n2} measured", f"N={n1} asked",
                          f"N={n2} asked", "growth"])
    report.record("memory", mem)
    for ver in VERSIONS:
        if ver != "v1" and mem[ver]["extra_bytes"][-1] != 0:
            report.say(f"  note: {ver} took {mem[ver]['extra_bytes'][-1]} bytes beyond its outputs")
    ker = sdpa_kernels()
    if ker is not None:
        report.section("torch SDPA kernels (32x4096x64, fp32, allow_tf32 False)", ker,
                       ["mask", "kernels launched"])
        report.record("sdpa_kernels", ker)
