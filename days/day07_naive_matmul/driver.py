"""Day 7 driver: naive matmul (one thread per output), two thread mappings, and cuBLAS.

    from days.day07_naive_matmul.driver import matmul
    c = matmul(a, b, version="v2")        # numpy in, numpy out (float32)

Sizes are MxKxN: C[M, N] = A[M, K] @ B[K, N]. Day 8 imports make_case and baselines from
here, and times this day's BEST (the same problem, the same checks, the same library to beat).
"""
import numpy as np

from common import args as A
from common import harness as H
from common.bars import fastest_correct

from . import reference

K = H.Kernels(__file__)
BLOCK = (32, 8, 1)    # 256 threads; x is the warp (fast) dimension
MAX_GRID_Y = 65535    # gridDim.y is limited to 65535 blocks

VERSIONS = {
    "v1": "threadIdx.x along rows of C (uncoalesced)",
    "v2": "threadIdx.x along columns of C (coalesced)",
}
BEST = "v2"  # fastest correct version at 2048^3 (results/day07.json)
SIZE_HELP = "MxKxN for C[M,N] = A[M,K] @ B[K,N], e.g. 2048x2048x2048"
SIZES = {"small": (64, 48, 80), "default": (2048, 2048, 2048), "large": (4096, 4096, 4096)}
# 1x1x1; K = 1; prime and odd sizes that are multiples of no tile or warp; 1000x777x513
# (the non-multiple case every version must get right); a long K with thin M and N
CHECK_SIZES = [(1, 1, 1), (1, 1000, 1), (33, 31, 17), (17, 1, 33), (64, 64, 64),
               (127, 129, 255), (1000, 777, 513), (3, 2049, 1031)]
# 2047x2049x2051: the same work as 2048^3 with every dimension odd (no multiple of the 32x8
# block, of a warp, of a 16-byte vector)
BENCH_SIZES = [(2048, 2048, 2048), (2047, 2049, 2051)]
CUBLAS = "cuBLAS sgemm"


def _gap_to_cublas(rec):
    """The bar "shows the gap to cuBLAS": at every timed size, the best naive kernel and cuBLAS
    were both timed (and right), and the figure is their ratio."""
    parts, ok = [], True
    cases = [c for c in rec.get("cases", []) if any("median_ms" in r for r in c.get("rows", []))]
    for c in cases:
        size = "x".join(map(str, c["size"]))
        row = fastest_correct(c)
        lib = next((b for b in c.get("baseline", []) if b.get("name") == CUBLAS
                    and "median_ms" in b and b.get("ok") is not False), None)
        if row is None or lib is None:
            ok = False
            parts.append(f"{'cuBLAS' if lib is None else 'no correct version'} not timed at {size}")
            continue
        ratio = lib["median_ms"] / row["median_ms"]
        parts.append(f"{row['version']} at {ratio:.2f}x cuBLAS ({row.get('tflops', 0):.1f} vs "
                     f"{lib.get('tflops', 0):.1f} TFLOP/s) at {size}")
    if not cases:
        return False, "nothing timed"
    return ok, "; ".join(parts)


BAR = [{"text": "shows the gap to cuBLAS", "check": _gap_to_cublas}]


def validate_size(size, max_rows_cols=MAX_GRID_Y * BLOCK[1]):
    """v1 puts N on grid.y and v2 puts M there, in blocks of 8 rows/columns."""
    m, k, n = size
    if m > max_rows_cols or n > max_rows_cols:
        raise ValueError(f"M and N must be at most {max_rows_cols} "
                         f"(gridDim.y <= {MAX_GRID_Y} blocks of {BLOCK[1]})")
    if k > 2 ** 31 - 1:
        raise ValueError("K must fit in a 32-bit int")


def make_case(size, rng):
    m, k, n = size
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)},
                  reference=lambda: {"c": reference.matmul(a, b)},
                  bytes=a.nbytes + b.nbytes + 4 * m * n,  # A and B read once, C written once
                  flops=reference.flops(m, k, n), unit="fp32")


def launch(version, d):
    A.version(version, VERSIONS)  # the else below must never run v2 for a name it does not know
    m, k, n = d.size
    bx, by, _ = BLOCK
    if version == "v1":
        grid = (H.cdiv(m, bx), H.cdiv(n, by), 1)    # x over rows of C
    else:
        grid = (H.cdiv(n, bx), H.cdiv(m, by), 1)    # x over columns of C
    K(f"matmul_naive_{version}", "PPPiii").prepared_call(grid, BLOCK, d.a, d.b, d.c, m, n, k)


def baselines(d):
    """cuBLAS SGEMM in true fp32 (default math mode: no TF32 tensor cores), into the same C.
    It returns the output GPUArray, so the runner checks cuBLAS's answer too."""
    from common.baselines import sgemm

    m, k, n = d.size
    out = d.array("c")

    def cublas():
        sgemm(d.a, d.b, d.c, m, n, k)
        return out

    return {"cuBLAS sgemm": cublas}


def run_matmul(launch_fn, a, b, version):
    """Numpy in, numpy out for a launch() of this problem: checks the arrays and their shapes,
    uploads, runs `version`. The caller checks the version name."""
    a = A.floats(a, "a", ndim=2, what="[M, K]")
    b = A.floats(b, "b", ndim=2, what="[K, N]")
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A[M,K] and B[K,N], got {a.shape} and {b.shape}")
    (m, k), n = a.shape, b.shape[1]
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)  # an empty C, or (K = 0) sums of nothing: zeros
    validate_size((m, k, n))
    case = H.Case((m, k, n), inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.float32)})
    return H.run(launch_fn, version, case)["c"]


def matmul(a, b, version=BEST):
    """C = A @ B on the GPU with one of this day's kernels: A is [M, K], B is [K, N] (real
    numbers, converted to float32), C is [M, N] float32.

    M or N = 0 gives an empty [M, N] array and K = 0 an [M, N] array of zeros (each entry a sum
    of nothing), both without a launch. Refused: complex, boolean or string arrays, other
    than 2-D arrays, inner sizes that differ, M or N above 524280 (the 2-D grid's limit)."""
    version = A.version(version, VERSIONS)
    return run_matmul(launch, a, b, version)
