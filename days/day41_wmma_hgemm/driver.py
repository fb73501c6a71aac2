"""Day 41 driver: bf16 GEMM on tensor cores through WMMA, fp32 accumulation and fp32 output.

    from days.day41_wmma_hgemm.driver import matmul, matmul_bits
    c = matmul(a, b)                 # real arrays, rounded to bf16 (nearest even) first; C float32
    c = matmul_bits(a16, b16)        # uint16 arrays holding bf16 bit patterns (common.bf16)

A size is MxKxN: C[M, N] = A[M, K] @ B[K, N]. The problem (make_case), the shape handling
(operands: zero-padded copies when rows are not 16-byte aligned), the checks and the cuBLAS
baselines are shared with days 42 and 43, which import them from here.
"""
import numpy as np

from common import args as A
from common import bf16
from common import harness as H
from common.baselines import gemm_ex

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: a warp per 16x16 tile of C, fragments from global memory",
    "v2": "64x64 block tile through shared memory, one fragment a warp",
    "v3": "128x128 block, 4 warps of 64x64 (4x4 fragments each)",
    "v4": "v3 + padded shared rows (conflict-free fragment loads)",
    "v5": "v4 + double buffering: next k-tile's loads in flight during the MMAs",
}
BEST = "v4"   # fastest at every bench size (H200, 2026-11-26); v5 (register prefetch, 255 registers) is slower
SIZE_HELP = "MxKxN for C[M,N] = A[M,K] @ B[K,N] (bf16 in, fp32 out), e.g. 8192x8192x8192"
SIZES = {"small": (96, 80, 72), "default": (8192, 8192, 8192), "large": (16384, 4096, 16384)}
# 1x1x1; K not a multiple of 8 (padded copies of A and B), N odd (padded B, scalar C stores),
# M, N, K multiples of nothing; exact tile multiples; K % 8 == 0 but not a multiple of BK = 32
# (a partial last k-tile without padding); long thin K; several tiles with partial edges;
# 1100 rows = 9 tile-rows of 128 (5 of 256): day 43's grouped order with a short last group
CHECK_SIZES = [(1, 1, 1), (17, 33, 9), (33, 31, 17), (16, 16, 16), (64, 64, 64), (130, 70, 257),
               (128, 32, 128), (129, 8, 257), (257, 1000, 129), (300, 136, 520), (1000, 777, 513),
               (3, 2049, 1031), (256, 40, 384), (31, 48, 40), (1100, 72, 520)]
AWKWARD = (4095, 4097, 4099)   # M, K, N all odd: A and B padded, C stored a float at a time
BAR_SIZE = (8192, 8192, 8192)
BENCH_SIZES = [BAR_SIZE, (4096, 4096, 4096), AWKWARD]
BAR_PCT_OF_CUBLAS = 40

CUBLAS_F32 = "cuBLAS bf16 (fp32 C)"
CUBLAS_BF16 = "cuBLAS bf16 (bf16 C)"

MAX_DIM = 2 ** 31 - 256        # int arguments; a padded dimension must still fit
ALIGN = 8                      # elements: 16-byte rows for every version but v1
V1_ALIGN = 16                  # v1 reads whole 16 x 16 fragments from global memory
# kernel -> (BM, BN, threads, index in kernel.cu's hgemm_wmma_smem table)
KERNELS = {
    "hgemm_wmma_v1": (32, 32, 128, 1),
    "hgemm_wmma_v2": (64, 64, 512, 2),
    "hgemm_wmma_v3": (128, 128, 128, 3),
    "hgemm_wmma_v4": (128, 128, 128, 4),
    "hgemm_wmma_v5": (128, 128, 128, 5),
    "hgemm_wmma_cand_128x128_w64x64_p8": (128, 128, 128, 6),
    "hgemm_wmma_cand_128x256_w64x64_p8": (128, 256, 256, 7),
    "hgemm_wmma_cand_256x128_w64x64_p8": (256, 128, 256, 8),
    "hgemm_wmma_cand_128x128_w64x32_p8": (128, 128, 256, 9),
    "hgemm_wmma_cand_128x128_w64x64_p16": (128, 128, 128, 10),
}
CANDIDATES = [k for k in KERNELS if "_cand_" in k]
SMEM_SYMBOL = "hgemm_wmma_smem"   # kernel.cu's table of dynamic shared memory, bytes
SMEM_INDEX = {k: v[3] for k, v in KERNELS.items()}


def validate_size(size):
    """Every dimension must fit the kernels' int arguments after padding to a multiple of 16,
    and the tiles of C the 1-D grid (at most 2^31 - 1 blocks)."""
    m, k, n = size
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v > MAX_DIM:
            raise ValueError(f"{name} = {v}: the kernels take int dimensions (at most {MAX_DIM})")
    if H.cdiv(m, 32) * H.cdiv(n, 32) > 2 ** 31 - 1:
        raise ValueError(f"{m}x{n} outputs need more than 2^31 - 1 blocks of 32x32 (v1's grid)")


def make_case(size, rng):
    """bf16 inputs (standard normal values rounded to bf16, stored as uint16 bit patterns), an
    fp32 C, the float64 product of the bf16 values as the reference, and a tolerance from K."""
    m, k, n = size
    a = bf16.random_bits(rng, (m, k))
    b = bf16.random_bits(rng, (k, n))
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)},
                  reference=lambda: {"c": reference.matmul(a, b)},
                  bytes=a.nbytes + b.nbytes + 4 * m * n,   # A and B read once, C written once
                  flops=reference.flops(m, k, n), unit="bf16", tol=reference.tolerance(k))


# --- operands: zero-padded copies where rows are not aligned ------------------------------------

def _pad(d, name, src, rows, cols, rows_p, cols_p):
    """A [rows_p, cols_p] zero-padded copy of src [rows, cols] in a scratch buffer of d (made by
    the pad_bf16 kernel of the calling day's kernel.cu: every day builds its own)."""
    dst = d.scratch(name, (rows_p, cols_p), np.uint16)
    chunks = rows_p * cols_p // 8
    grid = (max(1, min(H.cdiv(chunks, 256), 132 * 16)), 1, 1)
    K("pad_bf16", "PiiPii").prepared_call(grid, (256, 1, 1), src, rows, cols, dst, rows_p, cols_p)
    return dst


def operands(d, align=ALIGN, pad_rows=False):
    """(A pointer, lda, B pointer, ldb, K) for a kernel that reads 16-byte chunks: where K or N is
    not a multiple of `align`, zero-padded copies (A [M, K'], B [K', N']); K' is the K the kernel
    loops over (the padded columns of A and rows of B are zeros, so the sums do not change).
    pad_rows (v1): M too is padded to `align` rows. The copies are made on every call (they are
    part of the time of a version on such a shape)."""
    m, k, n = d.size
    kp, np_ = reference.round_up(k, align), reference.round_up(n, align)
    mp = reference.round_up(m, align) if pad_rows else m
    a, lda, b, ldb = d.a, k, d.b, n
    if kp != k or mp != m:
        a, lda = _pad(d, f"a_pad{align}", d.a, m, k, mp, kp), kp
    if kp != k or np_ != n:
        b, ldb = _pad(d, f"b_pad{align}", d.b, k, n, kp, np_), np_
    return a, lda, b, ldb, kp


_SMEM = {}


def smem_bytes(kernel) -> int:
    """Dynamic shared memory of a kernel: kernel.cu's hgemm_wmma_smem array."""
    if not _SMEM:
        from common.gpu import driver

        ptr, _ = K.module.get_global(SMEM_SYMBOL)
        buf = np.empty(max(SMEM_INDEX.values()) + 1, np.int32)
        driver().memcpy_dtoh(buf, ptr)
        _SMEM.update({k: int(buf[i]) for k, i in SMEM_INDEX.items()})
    return _SMEM[kernel]


def launch_kernel(kernel, d):
    """Run one kernel of kernel.cu (a version's or a sweep candidate) on DeviceCase d."""
    m, _, n = d.size
    if kernel == "hgemm_wmma_v1":
        a, lda, b, ldb, kp = operands(d, V1_ALIGN, pad_rows=True)
    else:
        a, lda, b, ldb, kp = operands(d, ALIGN)
    bm, bn, threads, _ = KERNELS[kernel]
    launch_tiles(K, kernel, d, (a, lda, b, ldb, kp), bm, bn, threads, smem_bytes(kernel))


def launch_tiles(kernels, kernel, d, operands, bm, bn, threads, smem):
    """One block per BM x BN tile of C (a 1-D grid) for the hgemm kernels of days 41-43, which
    all take (A, B, C, M, N, K padded, lda, ldb); `kernels` is the day's H.Kernels."""
    m, _, n = d.size
    a, lda, b, ldb, kp = operands
    fn = kernels(kernel, "PPPiiiii", dynamic_smem=smem)
    fn.prepared_call((H.cdiv(m, bm) * H.cdiv(n, bn), 1, 1), (threads, 1, 1), a, b, d.c, m, n, kp,
                     lda, ldb, shared_size=smem)


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    launch_kernel(f"hgemm_wmma_{version}", d)


def baselines(d):
    """cuBLAS on the same device buffers: bf16 in with fp32 C (the same output as the kernels,
    checked against the reference) and with bf16 C (what common.baselines.gemm_ex("bf16") and
    torch's bf16 matmul write: half the output bytes; not checked, its rounding to bf16 is
    beyond the fp32 tolerance)."""
    m, k, n = d.size
    out = d.array("c")
    c16 = d.scratch("c_bf16", (m, n), np.uint16)

    def f32():
        gemm_ex(d.a, d.b, d.c, m, n, k, mode="bf16_f32")
        return out

    def b16():
        gemm_ex(d.a, d.b, c16, m, n, k, mode="bf16")

    return {CUBLAS_F32: f32, CUBLAS_BF16: b16}


# --- public functions -----------------------------------------------------------------------------

def _shapes(a, b):
    (m, k), (kb, n) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"a is [M, K] = {a.shape} and b must be [K, N] with K = {k} rows, "
                         f"but b has {kb}")
    return m, k, n


def check_bits(a_bits, b_bits):
    """(M, K, N) of two uint16 bf16 bit-pattern matrices, or one clear TypeError/ValueError."""
    for name, x in (("a_bits", a_bits), ("b_bits", b_bits)):
        if not isinstance(x, np.ndarray) or x.dtype != np.uint16:
            got = f"dtype {x.dtype}" if isinstance(x, np.ndarray) else type(x).__name__
            raise TypeError(f"{name} must be a uint16 array of bf16 bit patterns "
                            f"(common.bf16.to_bits), got {got}")
        if x.ndim != 2:
            raise ValueError(f"{name} must be 2-D, got shape {x.shape}")
    m, k, n = _shapes(a_bits, b_bits)
    validate_size((m, k, n))
    return m, k, n


def run_bits(launch_fn, version, a_bits, b_bits):
    """Check the operands, then run one version (days 42 and 43 pass their own launch)."""
    m, k, n = check_bits(a_bits, b_bits)
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)     # a sum of nothing is 0; nothing is launched
    case = H.Case((m, k, n), inputs={"a": np.ascontiguousarray(a_bits),
                                     "b": np.ascontiguousarray(b_bits)},
                  outputs={"c": ((m, n), np.float32)})
    return H.run(launch_fn, version, case)["c"]


def matmul_bits(a_bits, b_bits, version=BEST):
    """C = A @ B on the GPU for bf16 A [M, K] and B [K, N] given as uint16 bit patterns
    (common.bf16.to_bits); C is [M, N] float32, accumulated in fp32.

    M or N = 0 gives an empty [M, N] array and K = 0 an [M, N] array of zeros, both without a
    launch. Refused: arrays that are not uint16, not 2-D, inner sizes that differ, a dimension
    above 2^31 - 256."""
    version = A.version(version, VERSIONS)
    return run_bits(launch, version, a_bits, b_bits)


def to_bits_checked(a, b):
    """Real arrays -> bf16 bit patterns (nearest even), after the argument checks."""
    a = A.floats(a, "a", ndim=2, what="[M, K]")
    b = A.floats(b, "b", ndim=2, what="[K, N]")
    _shapes(a, b)
    return bf16.to_bits(a), bf16.to_bits(b)


def matmul(a, b, version=BEST):
    """C = A @ B on the GPU with A, B real arrays ([M, K] and [K, N]) rounded to bf16 (nearest,
    ties to even) first; fp32 accumulation, C float32 [M, N]. The result is the exact product of
    the ROUNDED inputs up to fp32 summation error: compare with
    reference.matmul(bf16.to_bits(a), bf16.to_bits(b)), not with a @ b.
    Refused: complex, boolean or string arrays, other than 2-D arrays, inner sizes that differ."""
    version = A.version(version, VERSIONS)
    return matmul_bits(*to_bits_checked(a, b), version)


# --- the bar --------------------------------------------------------------------------------------

BAR = [{"sizes": [BAR_SIZE], "vs_baseline": BAR_PCT_OF_CUBLAS / 100}]


# --- extras: tensor cores against the CUDA cores (day 25's best SGEMM) ------------------------------

VERSUS_SGEMM = "tensor cores vs day 25's best fp32 SGEMM"


def versus_sgemm(report, size):
    """Day 25's BEST (fp32 on the CUDA cores) on fp32 copies of the same bf16 values, and this
    day's BEST, both checked against the same float64 reference and timed."""
    from common.runner import check_and_time
    from days.day25_cublas_integration import driver as day25

    case = make_case(size, np.random.default_rng(41))
    a32, b32 = bf16.from_bits(case.inputs["a"]), bf16.from_bits(case.inputs["b"])
    m, k, n = size
    case32 = H.Case(size, inputs={"a": a32, "b": b32}, outputs={"c": ((m, n), np.float32)},
                    reference=case.expected, flops=case.flops, unit="fp32", tol=case.tol)
    theirs = check_and_time(report, f"day 25 {day25.BEST} (fp32)",
                            lambda dd: day25.launch(day25.BEST, dd), case32)
    mine = check_and_time(report, f"day 41 {BEST} (bf16)", lambda dd: launch(BEST, dd), case)
    return theirs, mine


def extras(report, mode):
    if mode == "check":
        return
    theirs, mine = versus_sgemm(report, BAR_SIZE)
    size = H.size_str(BAR_SIZE)
    report.section(VERSUS_SGEMM + " (same values, TFLOP/s)",
                   [[size, f"{theirs['tflops']:.1f}", f"{mine['tflops']:.1f}",
                     f"{theirs['median_ms'] / mine['median_ms']:.1f}x",
                     "ok" if theirs["ok"] and mine["ok"] else "FAIL"]],
                   ["size", "day 25 fp32 SGEMM", f"day 41 {BEST}", "speed-up", "ok"])
    report.record("versus_sgemm", {size: {"day25": theirs, "day41": mine}})
