"""Day 46 driver: an fp8 (e4m3) GEMM with per-tensor scales on Hopper's tensor cores (sm_90a).

    from days.day46_fp8_gemm.driver import matmul, scaled_mm
    c = matmul(a, b)            # C ~ A @ B.T: a [M, K], b [N, K] floats, quantized to e4m3 with
                                # one scale each (amax / 448); returns the bf16 C as float32
    c = scaled_mm(qa, qb, sa, sb)   # the same from e4m3 codes (uint8) and their scales

The library to match is cuBLASLt's fp8 GEMM through torch._scaled_mm, timed in the same run on
the same device arrays, in both of its accumulation modes; the datasheet dense fp8 rate is the
ceiling.
"""
import numpy as np

from common import args as A
from common import fp8
from common import harness as H
from common import hopper_gemm as G
from common.baselines import as_torch, torch_or_none

from . import reference

SM90A = True
K = H.Kernels(__file__, sm90a=True)

VERSIONS = {
    "v1": "128x256 tile, two warpgroups of m64n256k32 e4m3, one TMA buffer",
    "v2": "producer warpgroup + 4-stage mbarrier ring, persistent grouped tiles",
    "v3": "v2 in clusters of 2 along M: B tiles multicast to both blocks",
    "v4": "v3 + two-level accumulation: each 128-deep k-block promoted to fp32",
}
BEST = "v3"   # fastest at 8192^3 (H200, 2026-11-26); v4 is the accurate one (see the README)
SIZE_HELP = "MxKxN for C[M,N] = A[M,K] . B[N,K]^T in fp8 e4m3, e.g. 8192x8192x8192"
SIZES = {"small": (64, 128, 256), "default": (8192, 8192, 8192), "large": (8192, 16384, 8192)}
# 1x1x1; K = 16 (one partial k-block, no padding); K % 16 != 0 (the pad path: 1, 31, 129,
# 777, 2049, 136 + 8); M, N no multiple of 128/256 (partial tiles; odd N: scalar stores);
# several k-blocks with a partial last one (520 = 4 x 128 + 8); tiles_m odd (v3/v4's last
# cluster half empty); K = 4096 (32 k-blocks: the fast accumulation's error grows with K)
CHECK_SIZES = [(1, 1, 1), (1, 16, 1), (17, 31, 33), (64, 128, 256), (127, 129, 255),
               (1000, 777, 513), (3, 2049, 1031), (129, 64, 257), (256, 1024, 512),
               (300, 144, 260), (1100, 520, 600), (385, 136, 770), (640, 4096, 257)]
HEADLINE = (8192, 8192, 8192)
# M odd, K = 62.5 k-blocks, N = 31.25 column tiles; K and N multiples of 16 so that
# torch._scaled_mm (which needs them) runs beside
AWKWARD = (8191, 8000, 8000)
BENCH_SIZES = [HEADLINE, (4096, 4096, 4096), AWKWARD]

TORCH_PROMOTED = "torch._scaled_mm"                      # its default: fp32 promotion
TORCH_FAST = "torch._scaled_mm use_fast_accum"
# CURRICULUM.md: >= 80% of torch._scaled_mm at 8192^3, each accumulation mode against cuBLAS's
# same mode (v4 against the default call, v3 against use_fast_accum=True)
BAR = [{"sizes": [HEADLINE], "version": "v4", "baseline": TORCH_PROMOTED, "vs_baseline": 0.8},
       {"sizes": [HEADLINE], "version": "v3", "baseline": TORCH_FAST, "vs_baseline": 0.8}]

BM, BN, BK = G.OP_BM, G.OP_BN, G.OP_BK    # wgmma_gemm_op.cuh's tile; BK: a 128-byte row
STAGE_BYTES = (BM + BN) * BK               # 48 KB: one k-block of A and B
STAGES = 4
# cluster versions: 36 bytes of spills, all outside the k loop (the producer's 24 registers
# around its barrier waits, one reload per tile in the consumers); the same as day 45's v6
ALLOWED_SPILLS = ("fp8_gemm_v3", "fp8_gemm_v4", "fp8_gemm_v3_f1_g8", "fp8_gemm_v3_f2_g16",
                  "fp8_gemm_v4_g16")
CLUSTERED = ("v3", "v4")
# the sweep's candidates (.notes/day46_sweep.py): name -> (clustered, what)
CANDIDATES = {
    "v3": (True, "= v3: 2 k-blocks in flight, group 8"),
    "v3_f1_g8": (True, "v3 with 1 k-block in flight"),
    "v3_f2_g16": (True, "v3 with groups of 16 row tiles"),
    "v4": (True, "= v4: promoted, cluster 2, group 8"),
    "v4_g16": (True, "v4 with groups of 16 row tiles"),
    "v4_c1": (False, "v4 without the cluster"),
}
MAX_GRID_Y = 65535


def smem_of(version: str) -> int:
    return (STAGE_BYTES if version == "v1" else STAGES * STAGE_BYTES) + 1024


def validate_size(size):
    m, k, n = size
    if H.cdiv(m, BM) > MAX_GRID_Y:
        raise ValueError(f"M = {m}: at most {MAX_GRID_Y * BM} rows (v1's grid holds M / {BM} "
                         f"tiles on gridDim.y)")
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v >= 2 ** 31 - 256:
            raise ValueError(f"{name} = {v}: coordinates are 32-bit")
    A.fits_int32("A = [M, K]", m * (k + 16))
    A.fits_int32("B = [N, K]", n * (k + 16))


def make_case(size, rng):
    """A and B ~ N(0, 1), each quantized to e4m3 with its per-tensor scale (amax / 448);
    C's entries are then ~ sqrt(K)."""
    m, k, n = size
    qa, sa = fp8.quantize(rng.standard_normal((m, k), dtype=np.float32))
    qb, sb = fp8.quantize(rng.standard_normal((n, k), dtype=np.float32))
    scales = np.array([sa, sb], np.float32)
    return H.Case(size, inputs={"a": qa, "b": qb, "scales": scales},
                  outputs={"c": ((m, n), np.uint16)},
                  reference=lambda: {"c": reference.scaled_mm(qa, qb, sa, sb)},
                  decode={"c": reference.bf16_to_float}, tol={"c": reference.tol(k)},
                  flops=reference.flops(m, k, n), unit="fp8")


# --- launching --------------------------------------------------------------------------------

def _clustered(name) -> bool:
    return CANDIDATES.get(name, (name in CLUSTERED,))[0]


def grid_of(version, m, n) -> tuple:
    return G.op_grid(m, n, version == "v1", _clustered(version))


def launch_kernel(name, d):
    """Pad if needed, then fp8_gemm_<name> (a version or a sweep candidate)."""
    m, k, n = d.size
    a_ptr, b_ptr, kk = G.k_major_operands(d, K("pad_k_u8", "PPiii"), np.uint8, align=16)
    amap, bmap = G.op_maps(d, a_ptr, b_ptr, kk, "uint8", _clustered(name))
    smem = smem_of(name)
    fn = K(f"fp8_gemm_{name}", "PPPPiii", dynamic_smem=smem)
    fn.prepared_call(grid_of(name, m, n), (256 if name == "v1" else 384, 1, 1), amap, bmap, d.c,
                     d.scales, m, n, kk, shared_size=smem)


def launch(version, d):
    A.version(version, VERSIONS)
    launch_kernel(version, d)


def _scaled_mm_fns(torch, a, b, sa, sb):
    """torch._scaled_mm on [M, K] and [N, K] fp8 tensors: B goes in as b.t(), a column-major
    [K, N] view (what cuBLASLt's fp8 kernels take), the scales as 0-dim float32 tensors of
    their own: cuBLASLt refuses (CUBLAS_STATUS_NOT_SUPPORTED, measured on an H200) a scale
    pointer that is not 16-byte aligned, as a view of the second element of a [2] array is."""
    sa, sb = sa.clone(), sb.clone()

    def promoted():
        return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)

    def fast():
        return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                                use_fast_accum=True)
    return promoted, fast


def baselines(d):
    """cuBLASLt fp8 through torch._scaled_mm on the same codes and scales: the default call
    (cuBLAS promotes partial sums to fp32) and use_fast_accum=True (the tensor cores'
    accumulator throughout, as v1-v3). torch needs K and N multiples of 16."""
    torch = torch_or_none()
    m, k, n = d.size
    if torch is None or k % 16 or n % 16:
        return {}
    a = as_torch(d.array("a")).view(torch.float8_e4m3fn)
    b = as_torch(d.array("b")).view(torch.float8_e4m3fn)
    sc = as_torch(d.array("scales"))
    promoted, fast = _scaled_mm_fns(torch, a, b, sc[0], sc[1])
    return {TORCH_PROMOTED: promoted, TORCH_FAST: fast}


# --- extras -----------------------------------------------------------------------------------

ERROR_MN = 1024
ERROR_KS = (1024, 8192)
MODEL_BLOCK = 256          # the numpy accumulator model runs on the top-left 256 x 256 block
ERROR_TITLE = "Error of the fp8 paths"
ERROR_COLUMNS = [f"K = {k}: vs exact fp8 product" for k in ERROR_KS] + \
                [f"K = {ERROR_KS[-1]}: vs fp32 inputs"]


def extras(report, mode):
    if mode != "bench":
        return
    error_table(report)
    cublas_kernels(report)


def _error_inputs(k, rng):
    m = n = ERROR_MN
    x = rng.standard_normal((m, k), dtype=np.float32)
    w = rng.standard_normal((n, k), dtype=np.float32)
    return x, w


def error_table(report):
    """rel-L2 error of each path at M = N = 1024, K = 1024 and 8192: against the exact product
    of the fp8 values (what the accumulation and the bf16 output add) and against the float64
    product of the unquantized fp32 inputs (what fp8 costs a user: mostly quantization).
    Beside them: the numpy model of a 13-bit accumulator (reference.emulate_fast_accumulation,
    on the top-left 256 x 256 outputs) and cuBLAS bf16 on the bf16-rounded inputs, the
    precision fp8 replaces."""
    from common import bf16
    from common.gpu import driver
    from common.runner import to_host

    torch = torch_or_none()
    rng = np.random.default_rng(46)
    rows = {}
    rec = {}
    order = ["v3 (fast accumulation)", "v4 (promoted to fp32 every 128)",
             TORCH_FAST, TORCH_PROMOTED, "numpy model: 13-bit accumulator",
             "bf16 inputs, cuBLAS bf16 (torch.matmul)"]
    for k in ERROR_KS:
        x, w = _error_inputs(k, rng)
        qa, sa = fp8.quantize(x)
        qb, sb = fp8.quantize(w)
        exact = reference.scaled_mm(qa, qb, sa, sb)
        full = x.astype(np.float64) @ w.astype(np.float64).T
        outs = {}
        case = H.Case((ERROR_MN, k, ERROR_MN), inputs={"a": qa, "b": qb,
                                                       "scales": np.array([sa, sb], np.float32)},
                      outputs={"c": ((ERROR_MN, ERROR_MN), np.uint16)},
                      decode={"c": reference.bf16_to_float})
        d = H.DeviceCase(case)
        for v, label in (("v3", order[0]), ("v4", order[1])):
            d.poison_outputs()
            launch(v, d)
            driver().Context.synchronize()
            outs[label] = d.outputs()["c"]
        if torch is not None:
            a = as_torch(d.array("a")).view(torch.float8_e4m3fn)
            b = as_torch(d.array("b")).view(torch.float8_e4m3fn)
            sc = as_torch(d.array("scales"))
            promoted, fast = _scaled_mm_fns(torch, a, b, sc[0], sc[1])
            outs[TORCH_FAST] = to_host(fast())
            outs[TORCH_PROMOTED] = to_host(promoted())
            xb = torch.from_numpy(bf16.to_bits(x).view(np.int16)).cuda().view(torch.bfloat16)
            wb = torch.from_numpy(bf16.to_bits(w).view(np.int16)).cuda().view(torch.bfloat16)
            outs[order[5]] = to_host(torch.matmul(xb, wb.t()))
        # the model loops over K / 32 steps in numpy: on the top-left block only
        blk = MODEL_BLOCK
        model = bf16.round(reference.emulate_fast_accumulation(qa[:blk], qb[:blk], sa, sb))
        for label, y in list(outs.items()) + [(order[4], model)]:
            y = np.asarray(y, np.float64)
            ex, fu = exact[:y.shape[0], :y.shape[1]], full[:y.shape[0], :y.shape[1]]
            r = rows.setdefault(label, {})
            if label != order[5]:
                r[f"K = {k}: vs exact fp8 product"] = np.linalg.norm(y - ex) / np.linalg.norm(ex)
            if k == ERROR_KS[-1]:
                r[f"K = {k}: vs fp32 inputs"] = np.linalg.norm(y - fu) / np.linalg.norm(fu)
    table = []
    for label in order:
        if label not in rows:
            continue
        table.append([label] + [f"{rows[label][c]:.2e}" if c in rows[label] else "-"
                                for c in ERROR_COLUMNS])
        rec[label] = rows[label]
    report.section(f"{ERROR_TITLE} (rel-L2, M = N = {ERROR_MN}, inputs N(0, 1), per-tensor "
                   "scales)", table, ["path"] + ERROR_COLUMNS)
    report.record("error", rec)


def cublas_kernels(report):
    """Which kernels torch._scaled_mm runs at the headline size in each mode (their names tell
    the tile, the cluster and whether partial sums are promoted)."""
    torch = torch_or_none()
    if torch is None:
        return
    from common.baselines import kernels_launched
    from common.timing import compute_ceiling_tflops

    m, k, n = HEADLINE
    a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones((), device="cuda")
    promoted, fast = _scaled_mm_fns(torch, a, b, one, one)
    rows = [[name, kn, f"{us:.1f}"] for name, fn in ((TORCH_PROMOTED, promoted), (TORCH_FAST, fast))
            for kn, us in kernels_launched(fn)]
    tf, src = compute_ceiling_tflops("fp8")
    rows.append(["datasheet peak", f"{tf} TFLOP/s ({src})", ""])
    report.section(f"cuBLASLt at {H.size_str(HEADLINE)} (torch._scaled_mm, e4m3)", rows,
                   ["call", "kernel", "us"])
    del a, b


# --- public functions -------------------------------------------------------------------------

def scaled_mm(a_codes, b_codes, scale_a, scale_b, version: str = BEST) -> np.ndarray:
    """C = scale_a * scale_b * (A @ B.T) on the tensor cores: a_codes [M, K] and b_codes
    [N, K] are e4m3 patterns (uint8 values 0..255, common/fp8.py), the scales positive finite
    numbers. fp32 accumulation (v4: promoted every 128; v1-v3: the tensor cores' own, see
    the README), returns the bf16 C as float32 [M, N]."""
    version = A.version(version, VERSIONS)
    a = A.uint8(a_codes, "a_codes", ndim=2, what="[M, K] (e4m3 codes)")
    b = A.uint8(b_codes, "b_codes", ndim=2, what="[N, K] (e4m3 codes)")
    sa = A.real(scale_a, "scale_a", low=0, low_open=True)
    sb = A.real(scale_b, "scale_b", low=0, low_open=True)
    m, k, n = A.nt_shapes(a, b)
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)
    validate_size((m, k, n))
    scales = np.array([sa, sb], np.float32)
    if not np.all(np.isfinite(scales)) or not np.all(scales > 0):
        raise ValueError(f"scale_a = {sa:g} and scale_b = {sb:g} must stay finite and > 0 in "
                         "float32")
    case = H.Case((m, k, n), inputs={"a": a, "b": b, "scales": scales},
                  outputs={"c": ((m, n), np.uint16)}, decode={"c": reference.bf16_to_float})
    return H.run(launch, version, case)["c"]


def matmul(a, b, version: str = BEST) -> np.ndarray:
    """C ~ A @ B.T through fp8: a [M, K] and b [N, K] (finite floats) are quantized to e4m3
    with one scale each (amax / 448, common.fp8.quantize), multiplied on the tensor cores and
    rescaled; returns the bf16 C as float32 [M, N]."""
    version = A.version(version, VERSIONS)
    a = A.floats(a, "a", ndim=2, what="[M, K]")
    b = A.floats(b, "b", ndim=2, what="[N, K]")
    m, k, n = A.nt_shapes(a, b)
    for name, v in (("a", a), ("b", b)):
        if not np.isfinite(v).all():
            raise ValueError(f"{name} holds NaN or Inf; fp8 quantization needs finite values")
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)
    validate_size((m, k, n))
    qa, sa = fp8.quantize(a)
    qb, sb = fp8.quantize(b)
    return scaled_mm(qa, qb, sa, sb, version=version)
