"""Day 47 driver: an int8 GEMM on Hopper's warpgroup tensor cores (sm_90a), day 39 revisited.

    from days.day47_int8_tensor_core_gemm.driver import matmul
    c = matmul(a, b)            # C = A @ B.T: a [M, K], b [N, K] int8 values -> int32 [M, N], exact

B is [N, K] (K-major, a Linear layer's weight): the layout wgmma reads for 8-bit types. Day 39
stored B as [K, N]; its best dp4a kernel is timed in the same run on the same values (B
transposed for it) for the bar. The libraries: cuBLAS int8 (cublasGemmEx, through day 39's
wrapper) and torch._int_mm, on the same device arrays.
"""
import numpy as np

from common import args as A
from common import harness as H
from common import hopper_gemm as G
from common.baselines import as_torch, torch_or_none

from . import reference

SM90A = True
K = H.Kernels(__file__, sm90a=True)

VERSIONS = {
    "v1": "128x256 tile, two warpgroups of m64n256k32 s8, one TMA buffer",
    "v2": "producer warpgroup + 4-stage mbarrier ring, persistent grouped tiles",
    "v3": "v2 in clusters of 2 along M: B tiles multicast to both blocks",
}
BEST = "v2"   # fastest at 4096^3 and 8192^3 in the sweep (H200, 2026-11-26: .notes/day47_sweep_results.md); v3 at the ragged size
SIZE_HELP = "MxKxN for C[M,N] = A[M,K] . B[N,K]^T in int8 (int32 out), e.g. 4096x4096x4096"
SIZES = {"small": (64, 128, 256), "default": (4096, 4096, 4096), "large": (8192, 8192, 8192)}
# 1x1x1; K = 16 (no padding, one partial k-block); K % 16 != 0 (the pad path: 1, 5, 31, 36,
# 100, 300, 1000, 2049); M, N multiples of no tile (17, 31, 33, 127, 129, 130, 131, 257, 1031);
# N odd (scalar stores); K = 2049 (17 k-blocks, the last 1 deep: -128 * -128 sums near 2^25);
# tiles_m odd (v3's last cluster half empty)
CHECK_SIZES = [(1, 1, 1), (1, 16, 1), (31, 5, 33), (33, 31, 17), (1, 1000, 1), (130, 64, 131),
               (129, 36, 260), (64, 16, 4), (3, 2049, 1031), (257, 300, 128), (200, 100, 256),
               (385, 144, 770), (640, 4096, 257)]
BAR_SIZE = (4096, 4096, 4096)
AWKWARD = (4095, 4099, 4097)            # day 39's: K % 16 == 3 (padded to 4112), N odd
BENCH_SIZES = [BAR_SIZE, (8192, 8192, 8192), AWKWARD]
BAR_FACTOR = 2.0                        # CURRICULUM.md: >= 2x day 39

BM, BN, BK = G.OP_BM, G.OP_BN, G.OP_BK    # wgmma_gemm_op.cuh's tile; BK: a 128-byte row
STAGE_BYTES = (BM + BN) * BK            # 48 KB: one k-block of A and B
STAGES = 4
# cluster kernels: 36 bytes of spills outside the k loop (the producer's 24 registers around
# its barrier waits, one reload a tile in the consumers), as day 45's v6 and day 46's v3
ALLOWED_SPILLS = ("s8_gemm_v3", "s8_gemm_v3_f1_g8", "s8_gemm_v3_f2_g16")
CLUSTERED = ("v3",)
# the sweep's candidates (.notes/day47_sweep.py): name -> (clustered, what)
CANDIDATES = {
    "v2": (False, "= v2: 2 k-blocks in flight, group 8"),
    "v2_f1_g8": (False, "v2 with 1 k-block in flight"),
    "v3": (True, "= v3: cluster 2, 2 in flight, group 8"),
    "v3_f1_g8": (True, "v3 with 1 k-block in flight"),
    "v3_f2_g16": (True, "v3 with groups of 16 row tiles"),
}
MAX_GRID_Y = 65535

CUBLAS = "cuBLAS int8 (cublasGemmEx)"
TORCH_INT_MM = "torch._int_mm"


def smem_of(version: str) -> int:
    return (STAGE_BYTES if version == "v1" else STAGES * STAGE_BYTES) + 1024


def validate_size(size):
    m, k, n = size
    if H.cdiv(m, BM) > MAX_GRID_Y:
        raise ValueError(f"M = {m}: at most {MAX_GRID_Y * BM} rows (v1's grid holds M / {BM} "
                         f"tiles on gridDim.y)")
    if k > reference.MAX_K:
        raise ValueError(f"K = {k}: at most {reference.MAX_K}, or the int32 sums could overflow "
                         "(|a * b| <= 2^14 a product)")
    for name, v in (("M", m), ("N", n)):
        if v >= 2 ** 31 - 256:
            raise ValueError(f"{name} = {v}: coordinates are 32-bit")
    A.fits_int32("A = [M, K]", m * (k + 16))
    A.fits_int32("B = [N, K]", n * (k + 16))


def make_case(size, rng):
    """a, b uniform over all 256 int8 values (the extreme products -128 * -128 included)."""
    m, k, n = size
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.int32)},
                  reference=lambda: {"c": reference.int8_gemm(a, b)},
                  flops=reference.ops(m, k, n), unit="int8")


# --- launching --------------------------------------------------------------------------------

def _clustered(name) -> bool:
    return CANDIDATES.get(name, (name in CLUSTERED,))[0]


def grid_of(version, m, n) -> tuple:
    return G.op_grid(m, n, version == "v1", _clustered(version))


def launch_kernel(name, d):
    """Pad if needed, then s8_gemm_<name> (a version or a sweep candidate)."""
    m, k, n = d.size
    a_ptr, b_ptr, kk = G.k_major_operands(d, K("pad_k_s8", "PPiii"), np.int8, align=16)
    amap, bmap = G.op_maps(d, a_ptr, b_ptr, kk, "int8", _clustered(name))
    smem = smem_of(name)
    fn = K(f"s8_gemm_{name}", "PPPiii", dynamic_smem=smem)
    fn.prepared_call(grid_of(name, m, n), (256 if name == "v1" else 384, 1, 1), amap, bmap, d.c,
                     m, n, kk, shared_size=smem)


def launch(version, d):
    A.version(version, VERSIONS)
    launch_kernel(version, d)


# --- baselines --------------------------------------------------------------------------------

def baselines(d):
    """cuBLAS int8 (IMMA tensor cores) through cublasGemmEx with CUBLAS_COMPUTE_32I (day 39's
    wrapper: C = A . W^T, our layout exactly), on the device arrays themselves when K % 16 == 0
    and N % 4 == 0, else on zero-padded copies made once (untimed); and torch._int_mm on
    a and b.t() (a column-major view of B, the layout cuBLASLt's int8 kernels take), where
    torch allows it (M > 16, K and N multiples of 8)."""
    from pycuda import gpuarray

    from common.baselines import FirstColumns, gemm_int8_tn

    m, k, n = d.size
    dev = d.__dict__.setdefault("_cublas_int8", {})
    if k % 16 == 0 and n % 4 == 0:
        if not dev:
            dev.update(a=d.array("a"), b=d.array("b"), c=gpuarray.empty((m, n), np.int32))
        kp, ldc = k, n
    else:
        kp, ldc = H.cdiv(k, 16) * 16, H.cdiv(n, 4) * 4
        if not dev:
            a = np.zeros((m, kp), np.int8)
            a[:, :k] = d.case.inputs["a"]
            b = np.zeros((n, kp), np.int8)
            b[:, :k] = d.case.inputs["b"]
            dev.update(a=gpuarray.to_gpu(a), b=gpuarray.to_gpu(b),
                       c=gpuarray.empty((m, ldc), np.int32))

    def cublas():
        gemm_int8_tn(dev["b"].gpudata, dev["a"].gpudata, dev["c"].gpudata, m, n, kp, ldc)
        return FirstColumns(dev["c"], n)

    fns = {CUBLAS: cublas}
    torch = torch_or_none()
    if torch is not None and m > 16 and k % 8 == 0 and n % 8 == 0:
        at = as_torch(d.array("a"))
        bt = as_torch(d.array("b"))
        fns[TORCH_INT_MM] = lambda: torch._int_mm(at, bt.t())
    return fns


# --- day 39 in the same run, and the bar ------------------------------------------------------

DAY39_TITLE = "Day 39's dp4a GEMM, same run"
DAY39_ROW = "day 39 best (dp4a, B [K, N])"
OURS_ROW = "this day's best (wgmma, B [N, K])"


def extras(report, mode):
    if mode == "check":
        return
    day39(report)


def day39(report):
    """Day 39's best version and this day's BEST on the same values at the bar size (uniform
    int8; B given to day 39 as [K, N], its layout), both checked exactly and timed as their
    drivers time them (day 39's packing of B into words included, as in its own table)."""
    from common.runner import check_and_time
    from days.day39_quantization_ops import driver as d39

    m, k, n = BAR_SIZE
    rng = np.random.default_rng(47)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (n, k), dtype=np.int8)
    want = {}

    def expected():
        if not want:
            want["c"] = reference.int8_gemm(a, b)
        return want

    def case_of(bmat):
        return H.Case(BAR_SIZE, inputs={"a": a, "b": bmat}, outputs={"c": ((m, n), np.int32)},
                      reference=expected, flops=reference.ops(m, k, n), unit="int8")

    theirs = check_and_time(report, f"day 39 {d39.BEST}", lambda dd: d39.launch(d39.BEST, dd),
                            case_of(np.ascontiguousarray(b.T)))
    ours = check_and_time(report, f"day 47 {BEST}", lambda dd: launch(BEST, dd), case_of(b))
    rows = []
    for label, version, r in ((DAY39_ROW, d39.BEST, theirs), (OURS_ROW, BEST, ours)):
        rows.append([label, version, f"{r['median_ms']:.3f}", f"{r['tflops']:.1f}",
                     f"{theirs['median_ms'] / r['median_ms']:.2f}x", "ok" if r["ok"] else "FAIL"])
    report.section(f"{DAY39_TITLE} at {H.size_str(BAR_SIZE)}", rows,
                   ["path", "version", "ms", "T ops/s", "vs day 39", "exact"])
    report.record("day39", {"version": d39.BEST, "median_ms": theirs["median_ms"],
                            "tops": theirs["tflops"], "ok": theirs["ok"],
                            "ours": {"version": BEST, "median_ms": ours["median_ms"],
                                     "ok": ours["ok"]}})


def _twice_day39(rec):
    """At 4096^3: day 39's best (extras "day39", same run) time / the fastest correct version's."""
    from common.bars import fastest_correct

    case = next((c for c in rec.get("cases", []) if tuple(c["size"]) == BAR_SIZE), None)
    if case is None:
        return False, f"{H.size_str(BAR_SIZE)} not measured"
    best = fastest_correct(case)
    d39 = (rec.get("extra") or {}).get("day39") or {}
    if best is None or not d39.get("ok") or not d39.get("median_ms"):
        return False, "the versions or day 39's best were not both measured correct"
    ratio = d39["median_ms"] / best["median_ms"]
    return ratio >= BAR_FACTOR, (f"{best['version']}: {ratio:.2f}x day 39's {d39['version']} "
                                 f"({d39['median_ms']:.3f} ms)")


BAR = [{"text": f"best >= {BAR_FACTOR:g}x day 39's best dp4a GEMM at {H.size_str(BAR_SIZE)} "
                "(timed in the same run)", "check": _twice_day39}]


# --- public function --------------------------------------------------------------------------

def _int8s(x, name, what):
    return A.integers(x, name, low=-128, high=128, ndim=2, what=what, dtype=np.int8)


def matmul(a, b, version: str = BEST) -> np.ndarray:
    """C = A @ B.T on the tensor cores: a [M, K] and b [N, K] hold int8 values (any integer
    dtype with values in [-128, 127]); C is [M, N] int32 and exact. K = 0 gives zeros, M or
    N = 0 an empty C, without a launch."""
    version = A.version(version, VERSIONS)
    a = _int8s(a, "a", "[M, K]")
    b = _int8s(b, "b", "[N, K]")
    m, k, n = A.nt_shapes(a, b)
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.int32)
    validate_size((m, k, n))
    case = H.Case((m, k, n), inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.int32)})
    return H.run(launch, version, case)["c"]
