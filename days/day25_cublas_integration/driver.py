"""Day 25 driver: cuBLAS from Python against the SGEMM ladder continued from day 8.

    from days.day25_cublas_integration.driver import matmul
    c = matmul(a, b)                      # numpy in, numpy out (float32); version=BEST

The problem and its checks are day 7's (make_case imported). The library to beat is cuBLAS
sgemm in true fp32 (common.baselines.sgemm, ctypes on the same device memory); cublasGemmEx in
TF32 and bf16 is timed beside it in extras ("what tensor cores give": other precisions).
"""
import numpy as np

from common import args as A
from common import harness as H
from common.bars import fastest_correct
from days.day07_naive_matmul import driver as day07
from days.day07_naive_matmul.driver import make_case  # noqa: F401  (day 7's problem)

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "day 8's v7 (common/cuda/sgemm.cuh): 128x128, BK 8, register prefetch",
    "v2": "warptiling: 32x64 warp tiles, 8x8 a lane, conflict-free float4 shared loads",
    "v3": "v2 with BK = 16, k loop unrolled",
    "v4": "cp.async global->shared (16 B, zero-fill), 2 stages, A k-contiguous",
    "v5": "v4 + grouped block order (8 tile-rows) for L2 reuse",
    "v6": "autotuned: a configuration per shape from a measured table",
}
BEST = "v1"   # fastest at 4096^3 and at every bench size (H200, 2026-11-23): day 8's v7; v2-v6 measured slower
SIZE_HELP = day07.SIZE_HELP
SIZES = {"small": (64, 48, 80), "default": (4096, 4096, 4096), "large": (8192, 1024, 8192)}
# ragged: 1, 31, 33, 17, non-multiples of every tile (64, 128) and of BK (8, 16); K % 4 or
# N % 4 != 0 take the scalar path, the others the float4/cp.async path with partial tiles;
# 1100 rows = 9 tiles of 128 (18 of 64): the grouped order's last group is short
CHECK_SIZES = [(1, 1, 1), (1, 1000, 1), (33, 31, 17), (17, 1, 33), (64, 64, 64),
               (127, 129, 255), (1000, 777, 513), (3, 2049, 1031), (64, 4, 132),
               (260, 36, 8), (129, 8, 257), (300, 52, 260), (1100, 64, 516), (1100, 63, 515)]
AWKWARD = (4095, 4097, 1023)   # MxKxN: no dimension a multiple of anything, K and N odd
# MxKxN: square; the GPT-2 MLP at 8192 tokens (fc: 768 -> 3072, proj: 3072 -> 768); a wide,
# short-K product; the awkward one
BENCH_SIZES = [(4096, 4096, 4096), (2048, 2048, 2048), (8192, 1024, 8192), (8192, 768, 3072),
               (8192, 3072, 768), AWKWARD]
CUBLAS = "cuBLAS sgemm"

MAX_GRID_Y = 65535    # gridDim.y holds the tile-rows: at most 65535 tiles of 64 (or 128) rows
MAX_DIM = 2 ** 31 - 256
GROUP = 8             # grouped order of v5 and v6 (kernel.cu)

# kernel base name -> (BM, BN, threads)
V_CONFIG = {"v1": ("sgemm_v1", 128, 128, 256), "v2": ("sgemm_v2", 128, 128, 256),
            "v3": ("sgemm_v3", 128, 128, 256), "v4": ("sgemm_v4", 128, 128, 256),
            "v5": ("sgemm_v5", 128, 128, 256)}
# v6's candidates: BMxBN, BK, stages, TY (lanes down a warp tile), A read width (kernel.cu)
CANDIDATES = {
    "128x128_k16_s2_t4_a4": (128, 128, 256),   # = v5's kernel
    "128x128_k16_s2_t8_a4": (128, 128, 256),
    "128x128_k16_s2_t4_a2": (128, 128, 256),
    "128x64_k16_s3_t4_a4": (128, 64, 128),
    "64x128_k16_s3_t4_a4": (64, 128, 128),
    "64x64_k16_s3_t4_a4": (64, 64, 64),
}
SAME_AS_V5 = "128x128_k16_s2_t4_a4"
# (M, K, N) -> candidate, measured by .notes/day25_sweep.py on the GPU (empty until then: the
# rule in tuned_config decides)
TUNED = {}
SLOTS = 2 * 132       # 256-thread blocks resident at once on an H100/H200 (2 an SM, 132 SMs)


def tuned_config(size):
    """v6's choice for a shape: the measured table, else the largest tile that still gives
    every SM slot work (>= 2 blocks of 256 threads an SM), else the smallest tile."""
    m, k, n = size
    if tuple(size) in TUNED:
        return TUNED[tuple(size)]
    for name in ("128x128_k16_s2_t4_a4", "128x64_k16_s3_t4_a4"):
        bm, bn, threads = CANDIDATES[name]
        if H.cdiv(m, bm) * H.cdiv(n, bn) * threads >= SLOTS * 256:
            return name
    return "64x64_k16_s3_t4_a4"


def config(version, size):
    """(kernel base name, BM, BN, threads) that `version` runs at `size`."""
    version = A.version(version, VERSIONS)
    if version == "v6":
        name = tuned_config(size)
        return ("sgemm_v6_" + name, *CANDIDATES[name])
    return V_CONFIG[version]


def kernel_name(version, size):
    """16-byte loads and stores only when every row of A, B and C starts 16-byte aligned."""
    m, k, n = size
    return config(version, size)[0] + ("_vec4" if k % 4 == 0 and n % 4 == 0 else "_scalar")


def same_as(version, size):
    if version == "v6" and tuned_config(size) == SAME_AS_V5:
        return "v5"
    return None


def validate_size(size):
    """The shapes every version can take: the grid's y limit and 32-bit index arithmetic."""
    m, k, n = size
    if m > MAX_GRID_Y * 64:
        raise ValueError(f"M = {m} rows: at most {MAX_GRID_Y * 64} (gridDim.y holds at most "
                         f"{MAX_GRID_Y} tiles of 64 rows)")
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v > MAX_DIM:
            raise ValueError(f"{name} = {v}: the kernels index with 32-bit ints (at most {MAX_DIM})")


def launch_kernel(base, bm, bn, threads, d):
    m, k, n = d.size
    name = base + ("_vec4" if k % 4 == 0 and n % 4 == 0 else "_scalar")
    grid = (H.cdiv(n, bn), H.cdiv(m, bm), 1)
    K(name, "PPPiii").prepared_call(grid, (threads, 1, 1), d.a, d.b, d.c, m, n, k)


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    launch_kernel(*config(version, d.size), d)


def baselines(d):
    """cuBLAS SGEMM in true fp32 (default math mode: no TF32), into the same C; it returns
    the output GPUArray, so the runner checks cuBLAS's answer too."""
    from common.baselines import sgemm

    m, k, n = d.size
    out = d.array("c")

    def cublas():
        sgemm(d.a, d.b, d.c, m, n, k)
        return out

    return {CUBLAS: cublas}


def matmul(a, b, version=BEST):
    """C = A @ B on the GPU with one of this day's kernels: A is [M, K], B is [K, N] (real
    numbers, converted to float32), C is [M, N] float32.

    M or N = 0 gives an empty [M, N] array and K = 0 an [M, N] array of zeros (sums of nothing),
    both without a launch. Refused: complex, boolean or string arrays, other than 2-D arrays,
    inner sizes that differ, M above 4194240 rows, any dimension above 2^31 - 256."""
    version = A.version(version, VERSIONS)
    a = A.floats(a, "a", ndim=2, what="[M, K]")
    b = A.floats(b, "b", ndim=2, what="[K, N]")
    (m, k), (kb, n) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"a is [M, K] = {a.shape} and b must be [K, N] with K = {k} rows, "
                         f"but b has {kb}")
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)
    validate_size((m, k, n))
    case = H.Case((m, k, n), inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)})
    return H.run(launch, version, case)["c"]


# --- the bar ----------------------------------------------------------------------------------

BAR_SIZE = (4096, 4096, 4096)
COMMON = [s for s in BENCH_SIZES if s != AWKWARD]


def _beats_cublas_somewhere(rec):
    """Faster than cuBLAS sgemm (fp32) at one common shape at least (the awkward one excluded)."""
    wins, seen = [], 0
    for c in rec.get("cases", []):
        if tuple(c["size"]) not in COMMON:
            continue
        row = fastest_correct(c)
        lib = next((b for b in c.get("baseline", []) if b.get("name") == CUBLAS
                    and "median_ms" in b and b.get("ok") is not False), None)
        if row is None or lib is None:
            continue
        seen += 1
        ratio = lib["median_ms"] / row["median_ms"]
        wins.append((ratio, H.size_str(c["size"]), row["version"]))
    if not wins:
        return False, "no common shape timed against cuBLAS"
    ratio, size, v = max(wins)
    return ratio > 1.0, f"best {v} at {ratio:.2f}x cuBLAS at {size} (of {seen} shapes)"


BAR = [{"sizes": [BAR_SIZE], "vs_baseline": 0.95, "baseline": CUBLAS},
       {"text": "faster than cuBLAS sgemm at one common shape", "check": _beats_cublas_somewhere}]


# --- extras: what tensor cores give (other precisions) ------------------------------------------

TENSOR_SIZES = [(4096, 4096, 4096), (8192, 768, 3072)]
TENSOR_TITLE = "other precisions: cuBLAS on tensor cores"


def tensor_core_baselines(size, rng=None):
    """cuBLAS sgemm (fp32), cublasGemmEx TF32 (fp32 in/out, inputs rounded to TF32 inside) and
    bf16 (A, B converted to bf16 on the device first, bf16 out, fp32 sums) on one case; only
    the GEMM is timed. Error: relative L2 against cuBLAS fp32's C (not the fp64 reference)."""
    from pycuda import gpuarray

    from common.baselines import gemm_ex, sgemm
    from common.timing import time_fn

    m, k, n = size
    rng = rng or np.random.default_rng(25)
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    d = H.DeviceCase(H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)}))
    c32 = gpuarray.empty((m, n), np.float32)
    a16, b16 = gpuarray.empty((m, k), np.uint16), gpuarray.empty((k, n), np.uint16)
    c16 = gpuarray.empty((m, n), np.uint16)
    conv = K("f32_to_bf16", "PPq")
    for src, dst, count in ((d.a, a16, m * k), (d.b, b16, k * n)):
        conv.prepared_call((4 * 132, 1, 1), (256, 1, 1), src, dst.gpudata, count)
    runs = {
        "cuBLAS sgemm fp32": (lambda: sgemm(d.a, d.b, c32.gpudata, m, n, k), lambda: c32.get()),
        "cuBLAS gemm_ex tf32": (lambda: gemm_ex(d.a, d.b, d.c, m, n, k, mode="tf32"),
                                lambda: d.array("c").get()),
        "cuBLAS gemm_ex bf16": (lambda: gemm_ex(a16.gpudata, b16.gpudata, c16.gpudata, m, n, k,
                                                mode="bf16"),
                                lambda: reference.bf16_bits_to_float(c16.get())),
    }
    out, ref = {}, None
    for name, (fn, result) in runs.items():
        fn()
        got = result().astype(np.float64)
        if ref is None:
            ref = got
        err = float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
        t = time_fn(fn)
        out[name] = {"median_ms": t.median_ms, "tflops": 2 * m * n * k / (t.median_ms * 1e-3) / 1e12,
                     "rel_err_vs_fp32": err, "finite": bool(np.isfinite(got).all())}
    return out


def extras(report, mode):
    if mode == "check":
        return
    rows, rec = [], {}
    for size in TENSOR_SIZES:
        r = tensor_core_baselines(size)
        rec[H.size_str(size)] = r
        base = r["cuBLAS sgemm fp32"]["median_ms"]
        for name, v in r.items():
            rows.append([f"{H.size_str(size)} {name.split()[-1]}", name, f"{v['median_ms']:.3f}",
                         f"{v['tflops']:.1f}", f"{base / v['median_ms']:.2f}x",
                         f"{v['rel_err_vs_fp32']:.1e}"])
            if not v["finite"]:
                report.failures.append(f"{name} gave NaN/Inf at {H.size_str(size)}")
    report.section(TENSOR_TITLE + " (not fp32: compare with care)", rows,
                   ["size precision", "library call", "ms", "TFLOP/s", "vs fp32 sgemm",
                    "rel L2 err vs fp32"])
    report.record("tensor_cores", rec)
