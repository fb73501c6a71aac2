"""Day 39 driver: int8 quantize / dequantize, and an int8 GEMM on dp4a, five versions.

    from days.day39_quantization_ops.driver import int8_matmul, quantize, dequantize, quantized_linear
    c = int8_matmul(a, b)                   # int8 [M, K] @ int8 [K, N] -> int32 [M, N], exact
    q = quantize(x, scale, zero_point, axis=1)      # fp32 -> int8, one scale per column
    x2 = dequantize(q, scale, zero_point, axis=1)   # int8 -> fp32
    y = quantized_linear(x, w, bias)        # ~ x @ w + bias through int8 (per-row x, per-column w)

A size is MxKxN (day 8's order). Every version's time includes packing B into 32-bit words of
4 k (and padding A's rows when K % 16 != 0): kernel.cu's header says why.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import FirstColumns, gemm_int8_tn

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: 1 output/thread, dp4a on words from global memory",
    "v2": "32x32 shared tiles (32 words of k), 1 output/thread",
    "v3": "128x128 tile, 8x8 outputs/thread, 16-byte loads, A tile transposed",
    "v4": "v3 double-buffered (next tile's loads in flight), 1 barrier/tile",
    "v5": "cp.async pipeline (64 k a tile), A tile k-contiguous, no staging registers",
}
BEST = "v4"   # fastest at every sweep size (H200, 2026-11-26, .notes/day39_sweep.py: 4096^3 v4 1.127 ms, v5 1.178-1.180, v3 1.213)
V4_BKW = 8                              # words of k per v4 tile (16 spills at 128 registers)
V5_CONFIG = (16, 3)                     # (words of k a tile, stages) that v5 runs
V5_CANDIDATES = [(16, 2), (16, 3), (16, 4)]   # what kernel.cu instantiates; .notes/day39_sweep.py
SIZE_HELP = "MxKxN (A is [M, K] int8, B is [K, N] int8), e.g. 4096x4096x4096"
SIZES = {"small": (64, 80, 48), "default": (4096, 4096, 4096), "large": (8192, 8192, 8192)}
# K = 1, 5, 31, 36, 100, 300, 1000, 2049 (K % 16 != 0: A's rows padded) and 16, 64 (not);
# M and N multiples of no tile (1, 17, 31, 33, 127, 129, 130, 131, 257), N % 4 != 0 (scalar C
# stores, padded Bp columns) and N = 4, 128, 256; K = 2049 spans 33 v5 tiles, the last partial
CHECK_SIZES = [(1, 1, 1), (31, 5, 33), (33, 31, 17), (1, 1000, 1), (17, 64, 1), (130, 64, 131),
               (129, 36, 260), (127, 1, 129), (64, 16, 4), (3, 2049, 1031), (257, 300, 128),
               (200, 100, 256)]
AWKWARD = (4095, 4099, 4097)            # K % 4 == 3 (padded to 4112), N odd, M one short of 32 tiles
BAR_SIZE = (4096, 4096, 4096)
BENCH_SIZES = [BAR_SIZE, AWKWARD]
BAR_FACTOR = 2.0                        # CURRICULUM.md: >= 2x the best fp32 SGEMM at 4096^3

TILE = 128                              # v3-v5 block tile (BM = BN)
MAX_M = 65535 * 8                       # v1 puts blocks of 8 rows on gridDim.y
THREADS = 256


def v5_smem(bkw: int, stages: int) -> int:
    """Dynamic shared memory of a v5 kernel: stages x (A tile [128][bkw + 4] + B tile [bkw][128])."""
    return stages * (TILE * (bkw + 4) + bkw * TILE) * 4


def validate_size(size):
    m, k, n = size
    if m > MAX_M:
        raise ValueError(f"M = {m}: at most {MAX_M} rows (v1 puts blocks of 8 rows on gridDim.y)")
    if k > reference.MAX_K:
        raise ValueError(f"K = {k}: at most {reference.MAX_K}, or the int32 sums could overflow "
                         "(|a*b| <= 2^14 per product)")
    kp = reference.padded_k(k)
    A.fits_int32("A (padded to [M, Kp])", m * kp)
    A.fits_int32("B (packed to [Kp, Np])", kp * (H.cdiv(n, 4) * 4))
    A.fits_int32("C = [M, N]", m * n)


def make_case(size, rng):
    """a, b uniform over all 256 int8 values (the extreme products -128 * -128 included)."""
    m, k, n = size
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.int32)},
                  reference=lambda: {"c": reference.int8_matmul(a, b)},
                  flops=2 * m * n * k, unit="dp4a")


# --- launches --------------------------------------------------------------------------------

def operands(d, a_ptr=None, b_ptr=None):
    """Enqueue the packing of B (and the padding of A when K % 16 != 0); returns
    (A words pointer, lda in words, Bp pointer, ldb = Np, Kq = Kp / 4)."""
    m, k, n = d.size
    a_ptr = d.a if a_ptr is None else a_ptr
    b_ptr = d.b if b_ptr is None else b_ptr
    kp = reference.padded_k(k)
    kq, np_ = kp // 4, H.cdiv(n, 4) * 4
    bp = d.scratch("bp", (kq, np_), np.int32)
    t = kq * np_ // 4
    K("pack_b_s8", "PPiiii").prepared_call((H.cdiv(t, THREADS), 1, 1), (THREADS, 1, 1), b_ptr, bp,
                                           k, n, kq, np_)
    if k % 16 == 0:
        return a_ptr, k // 4, bp, np_, kq
    ap = d.scratch("ap", (m, kq), np.int32)
    K("pad_a_s8", "PPiii").prepared_call((H.cdiv(m * kq, THREADS), 1, 1), (THREADS, 1, 1), a_ptr,
                                         ap, m, k, kp)
    return ap, kq, bp, np_, kq


def plan(version, m, n, prefix="gemm"):
    """(kernel name, grid, block, dynamic shared bytes) of a version's GEMM."""
    if version == "v1":
        return f"{prefix}_s8_v1", (H.cdiv(n, 32), H.cdiv(m, 8), 1), (256, 1, 1), 0
    if version == "v2":
        return f"{prefix}_s8_v2", (H.cdiv(n, 32), H.cdiv(m, 32), 1), (32, 32, 1), 0
    grid = (H.cdiv(n, TILE), H.cdiv(m, TILE), 1)
    if version == "v3":
        return f"{prefix}_s8_v3", grid, (THREADS, 1, 1), 0
    if version == "v4":
        return f"{prefix}_s8_v4_bk{V4_BKW}", grid, (THREADS, 1, 1), 0
    if version == "v5":
        return v5_plan(*V5_CONFIG, m, n, prefix)
    raise ValueError(f"plan: unknown version {version!r}")


def v5_plan(bkw, stages, m, n, prefix="gemm"):
    return (f"{prefix}_s8_v5_bk{bkw}_s{stages}", (H.cdiv(n, TILE), H.cdiv(m, TILE), 1),
            (THREADS, 1, 1), v5_smem(bkw, stages))


def launch(version, d, config=None):
    """Pack, then the version's GEMM (config=(bkw, stages) picks a v5 candidate: the sweep)."""
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    m, k, n = d.size
    aw, lda, bp, ldb, kq = operands(d)
    name, grid, block, smem = (v5_plan(*config, m, n) if config and version == "v5"
                               else plan(version, m, n))
    K(name, "PiPiPiii", dynamic_smem=smem).prepared_call(grid, block, aw, lda, bp, ldb, d.c, m, n,
                                                         kq, shared_size=smem)


# --- quantize / dequantize / the quantized linear layer on the GPU --------------------------

def quantize_launch(d, x_ptr, scale_ptr, zp_ptr, q_ptr, rows, cols, axis):
    mode = reference.AXES[axis]
    if cols % 4 == 0:
        n = rows * cols // 4
        K("quantize_vec4", "PPPPiii").prepared_call((H.cdiv(n, THREADS), 1, 1), (THREADS, 1, 1),
                                                    x_ptr, scale_ptr, zp_ptr, q_ptr, rows, cols, mode)
    else:
        n = rows * cols
        K("quantize_scalar", "PPPPiii").prepared_call((H.cdiv(n, THREADS), 1, 1), (THREADS, 1, 1),
                                                      x_ptr, scale_ptr, zp_ptr, q_ptr, rows, cols, mode)


def dequantize_launch(d, q_ptr, scale_ptr, zp_ptr, y_ptr, rows, cols, axis):
    mode = reference.AXES[axis]
    vec = cols % 4 == 0
    n = rows * cols // 4 if vec else rows * cols
    K("dequantize_vec4" if vec else "dequantize_scalar", "PPPPiii").prepared_call(
        (H.cdiv(n, THREADS), 1, 1), (THREADS, 1, 1), q_ptr, scale_ptr, zp_ptr, y_ptr, rows, cols, mode)


def linear_launch(d, per_channel: bool):
    """x, w on the device (d.x [M, K], d.w [K, N] fp32; d.sx [M] and d.sw [N] the scales,
    d.zx / d.zw zeros, d.bias [N]) -> d.y = dequant(int8 x @ int8 w): quantize x and w, pack,
    the best version's tile with the dequantizing epilogue."""
    m, k, n = d.size
    ax_x, ax_w = (0, 1) if per_channel else (None, None)
    qx = d.scratch("qx", (m, k), np.int8)
    qw = d.scratch("qw", (k, n), np.int8)
    quantize_launch(d, d.x, d.sx, d.zx, qx, m, k, ax_x)
    quantize_launch(d, d.w, d.sw, d.zw, qw, k, n, ax_w)
    aw, lda, bp, ldb, kq = operands(d, qx, qw)
    version = BEST if BEST in ("v4", "v5") else "v5"     # the versions built with the epilogue
    name, grid, block, smem = plan(version, m, n, prefix="linear")
    K(name, "PiPiPPPPiii", dynamic_smem=smem).prepared_call(
        grid, block, aw, lda, bp, ldb, d.y, d.sx, d.sw, d.bias, m, n, kq, shared_size=smem)


# --- baselines: cuBLAS int8 (tensor cores), cuBLAS SGEMM and day 8's best in fp32 -------------

FP32_CUBLAS = "cuBLAS sgemm fp32"


def day08_name() -> str:
    from days.day08_tiled_matmul import driver as day08

    return f"day 8 {day08.BEST} fp32"


def fp32_case(d):
    """The same A and B as float32 on the device (converted once, untimed), as day 8's problem."""
    if "_fp32" not in d.__dict__:
        a = d.case.inputs["a"].astype(np.float32)
        b = d.case.inputs["b"].astype(np.float32)
        m, k, n = d.size
        d.__dict__["_fp32"] = H.DeviceCase(H.Case((m, k, n), inputs={"a": a, "b": b},
                                                  outputs={"c": ((m, n), np.float32)}))
    return d.__dict__["_fp32"]


def baselines(d):
    """cuBLAS int8 GEMM (IMMA tensor cores; A and B^T zero-padded to Kp columns, prepared once,
    untimed), and the fp32 SGEMMs the bar is about on float32 copies of the same matrices:
    cuBLAS SGEMM (no TF32) and day 8's best kernel. The fp32 products are not exact (sums pass
    2^24), so only the int8 baseline's output is checked against the int32 reference."""
    from pycuda import gpuarray

    from common.baselines import sgemm
    from days.day08_tiled_matmul import driver as day08

    m, k, n = d.size
    kp, np_ = reference.padded_k(k), H.cdiv(n, 4) * 4
    a = np.zeros((m, kp), np.int8)
    a[:, :k] = d.case.inputs["a"]
    wt = np.zeros((n, kp), np.int8)
    wt[:, :k] = d.case.inputs["b"].T
    dev = d.__dict__.setdefault("_cublas_int8", {})
    if not dev:
        dev.update(a=gpuarray.to_gpu(a), wt=gpuarray.to_gpu(wt),
                   c=gpuarray.empty((m, np_), np.int32))

    def int8_gemm():
        gemm_int8_tn(dev["wt"].gpudata, dev["a"].gpudata, dev["c"].gpudata, m, n, kp, np_)
        return FirstColumns(dev["c"], n)

    f = fp32_case(d)
    return {"cuBLAS int8 (IMMA)": int8_gemm,
            FP32_CUBLAS: lambda: sgemm(f.a, f.b, f.c, m, n, k),
            day08_name(): lambda: day08.launch(day08.BEST, f)}


# --- the bar ---------------------------------------------------------------------------------

def _twice_fp32(rec):
    """At 4096^3: the fastest correct version against the faster of cuBLAS SGEMM and day 8's
    best (both fp32, timed in the same run on the same matrices as floats)."""
    from common.bars import fastest_correct

    case = next((c for c in rec.get("cases", []) if tuple(c["size"]) == BAR_SIZE), None)
    if case is None:
        return False, f"{H.size_str(BAR_SIZE)} not measured"
    best = fastest_correct(case)
    fp32 = {b["name"]: b["median_ms"] for b in case.get("baseline", [])
            if "median_ms" in b and (b["name"] == FP32_CUBLAS or b["name"].startswith("day 8 "))}
    if best is None or len(fp32) < 2:
        return False, "the int8 versions or the two fp32 SGEMMs were not all measured"
    ratios = {name: ms / best["median_ms"] for name, ms in fp32.items()}
    worst = min(ratios.values())
    detail = ", ".join(f"{r:.2f}x {name}" for name, r in sorted(ratios.items()))
    return worst >= BAR_FACTOR, f"{best['version']}: {detail}"


BAR = [{"text": f"best int8 GEMM >= {BAR_FACTOR:g}x the faster fp32 SGEMM (cuBLAS, day 8's best) "
                f"at {H.size_str(BAR_SIZE)}", "check": _twice_fp32}]


# --- public functions --------------------------------------------------------------------------

def _int8s(x, name, what):
    return A.integers(x, name, low=-128, high=128, ndim=2, what=what, dtype=np.int8)


def int8_matmul(a, b, version=BEST):
    """C = A @ B on the GPU: A [M, K] and B [K, N] hold int8 values (any integer dtype with values
    in [-128, 127]), C is [M, N] int32 and exact. K = 0 gives zeros, M or N = 0 an empty C,
    all without a launch."""
    version = A.version(version, VERSIONS)
    a = _int8s(a, "a", "[M, K]")
    b = _int8s(b, "b", "[K, N]")
    (m, k), (kb, n) = a.shape, b.shape
    if k != kb:
        raise ValueError(f"a is [M, K] = {a.shape} and b must be [K, N] with K = {k} rows, "
                         f"but b has {kb}")
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.int32)
    validate_size((m, k, n))
    case = H.Case((m, k, n), inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.int32)})
    return H.run(launch, version, case)["c"]


def _axis(axis):
    if axis is not None and (isinstance(axis, bool) or not isinstance(axis, (int, np.integer))):
        raise TypeError(f"axis must be None, 0 or 1, got {type(axis).__name__} {axis!r}")
    return A.choice(None if axis is None else int(axis), "axis", [None, 0, 1])


def _params(scale, zero_point, axis, shape):
    """(scale [c], zero point [c]) as float32 arrays: c = 1 per tensor, rows per row, cols per
    column; scales finite and > 0, zero points whole numbers in [-128, 127]."""
    count = 1 if axis is None else shape[axis]
    what = "one per tensor" if axis is None else ("one per row" if axis == 0 else "one per column")
    if axis is None:
        s = np.array([A.real(scale, "scale", low=0, low_open=True)], np.float32)
    else:
        s = A.floats(scale, "scale", shape=(count,), what=f"[{count}] ({what})")
        if not np.all(np.isfinite(s)) or np.any(s <= 0):
            raise ValueError("every scale must be finite and > 0")
    if np.ndim(zero_point) == 0 and not isinstance(zero_point, (str, bytes)):
        z = A.integers(np.asarray([zero_point]), "zero_point", low=-128, high=128)
        z = np.full(count, z[0], np.float32)
    else:
        if axis is None:
            raise ValueError("zero_point must be one integer when axis is None (one scale per tensor)")
        z = A.integers(zero_point, "zero_point", low=-128, high=128, shape=(count,),
                       what=f"[{count}] ({what})").astype(np.float32)
    if not np.isfinite(s).all() or float(s.min()) <= 0:
        raise ValueError("scale must be finite and > 0")
    return s.astype(np.float32), z


def quantize(x, scale, zero_point=0, axis=None):
    """int8 q = clip(rint(x / scale) + zero_point, -128, 127) on the GPU (rint: round half to
    even, as np.rint; the division in float32). x is 2-D [rows, cols]; axis None: one scale and
    zero point, axis 0: one per row, axis 1: one per column. x must be finite."""
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    axis = _axis(axis)
    s, z = _params(scale, zero_point, axis, x.shape)
    if x.size == 0:
        return np.zeros(x.shape, np.int8)
    if not np.isfinite(x).all():
        raise ValueError("x holds NaN or Inf; quantize only finite values")
    A.fits_int32("x", x.size)
    rows, cols = x.shape
    case = H.Case(x.shape, inputs={"x": x, "scale": s, "zp": z}, outputs={"q": (x.shape, np.int8)})
    return H.run(lambda v, d: quantize_launch(d, d.x, d.scale, d.zp, d.q, rows, cols, axis),
                 "quantize", case)["q"]


def dequantize(q, scale, zero_point=0, axis=None):
    """float32 (q - zero_point) * scale on the GPU, q int8 values [rows, cols]; axis as quantize."""
    q = _int8s(q, "q", "[rows, cols]")
    axis = _axis(axis)
    s, z = _params(scale, zero_point, axis, q.shape)
    if q.size == 0:
        return np.zeros(q.shape, np.float32)
    A.fits_int32("q", q.size)
    rows, cols = q.shape
    case = H.Case(q.shape, inputs={"q": q, "scale": s, "zp": z}, outputs={"y": (q.shape, np.float32)})
    return H.run(lambda v, d: dequantize_launch(d, d.q, d.scale, d.zp, d.y, rows, cols, axis),
                 "dequantize", case)["y"]


def linear_case(x, w, bias, per_channel):
    m, k = x.shape
    n = w.shape[1]
    ax_x, ax_w = (0, 1) if per_channel else (None, None)
    sx = np.broadcast_to(reference.symmetric_scale(x, ax_x).reshape(-1), (m,)).astype(np.float32)
    sw = np.broadcast_to(reference.symmetric_scale(w, ax_w).reshape(-1), (n,)).astype(np.float32)
    inputs = {"x": x, "w": w, "bias": bias, "sx": np.ascontiguousarray(sx),
              "sw": np.ascontiguousarray(sw), "zx": np.zeros(m, np.float32),
              "zw": np.zeros(n, np.float32)}

    def ref():
        return {"y": reference.quantized_linear(x, w, bias, per_channel)[0]}

    return H.Case((m, k, n), inputs=inputs, outputs={"y": ((m, n), np.float32)}, reference=ref,
                  flops=2 * m * n * k, unit="dp4a")


def quantized_linear(x, w, bias=None, per_channel=True):
    """y ~ x @ w + bias through int8 on the GPU: x [M, K] quantized symmetrically per row
    (per_channel=True) or per tensor, w [K, N] per column or per tensor (scales max|.|/127,
    computed here in numpy), the int8 GEMM of the best version, and the fp32 epilogue
    y = C * scale_x[m] * scale_w[n] + bias[n]. Returns float32 [M, N]."""
    x = A.floats(x, "x", ndim=2, what="[M, K]")
    w = A.floats(w, "w", ndim=2, what="[K, N]")
    (m, k), (kw, n) = x.shape, w.shape
    if k != kw:
        raise ValueError(f"x is [M, K] = {x.shape} and w must be [K, N] with K = {k} rows, "
                         f"but w has {kw}")
    b = np.zeros(n, np.float32) if bias is None else A.floats(bias, "bias", shape=(n,), what="[N]")
    if not isinstance(per_channel, (bool, np.bool_)):
        raise TypeError(f"per_channel must be True or False, got {type(per_channel).__name__}")
    for name, v in (("x", x), ("w", w), ("bias", b)):
        if not np.isfinite(v).all():
            raise ValueError(f"{name} holds NaN or Inf")
    if m == 0 or n == 0:
        return np.zeros((m, n), np.float32)
    if k == 0:
        return np.tile(b, (m, 1)).astype(np.float32)
    validate_size((m, k, n))
    case = linear_case(x, w, b, bool(per_channel))
    return H.run(lambda v, d: linear_launch(d, bool(per_channel)), "linear", case)["y"]


# --- extras ----------------------------------------------------------------------------------

QUANT_SIZE = (8192, 8192)
ERROR_SIZE = (2048, 2048, 2048)


def extras(report, mode):
    if mode == "check":
        return
    peaks(report)
    quant_ops(report)
    error_table(report)
    packing(report)


def peaks(report):
    """The dp4a and FFMA issue rates measured with register-only micro-kernels (16 independent
    chains a thread, 8 blocks of 256 threads per SM): the arithmetic ceilings of this GPU."""
    from common.gpu import device_info, driver
    from common.timing import time_fn

    info = device_info()
    sms, clock = info["sms"], info.get("sm_clock_mhz") or 0
    sink = driver().mem_alloc(4)
    blocks, iters, chains = sms * 8, 4096, 16
    instr = blocks * THREADS * iters * chains
    rows, rec = [], {}
    for name, kern, ops, sig, seed in (("dp4a (IDP.4A)", "peak_dp4a", 8, "Pii", 3),
                                       ("FFMA", "peak_ffma", 2, "Pif", np.float32(3.0))):
        fn = K(kern, sig)
        t = time_fn(lambda: fn.prepared_call((blocks, 1, 1), (THREADS, 1, 1), sink, iters, seed),
                    flush_l2=False)
        rate = instr * ops / (t.median_ms * 1e-3) / 1e12
        per_clk = instr * ops / (t.median_ms * 1e-3) / (sms * clock * 1e6) if clock else None
        rows.append([name, f"{rate:.1f}", str(ops),
                     f"{per_clk:.0f}" if per_clk else "-", f"{t.median_ms:.3f}"])
        rec[name] = {"tops": rate, "ops_per_sm_clock": per_clk, "ms": t.median_ms}
    sink.free()
    ratio = rec["dp4a (IDP.4A)"]["tops"] / rec["FFMA"]["tops"]
    rows.append(["dp4a / FFMA", f"{ratio:.2f}", "", "", ""])
    report.section(f"Arithmetic peaks, measured ({sms} SMs, top clock {clock:.0f} MHz)", rows,
                   ["instruction", "T ops/s", "ops per instruction", "ops per SM per top clock", "ms"])
    report.record("peaks", rec)


def _quant_cases(rng):
    rows, cols = QUANT_SIZE
    colscale = np.exp(rng.uniform(np.log(0.1), np.log(10.0), cols)).astype(np.float32)
    x = (rng.standard_normal((rows, cols), dtype=np.float32) * colscale + 0.5 * colscale)
    n = x.size
    s_t = reference.symmetric_scale(x).reshape(1)
    s_c, z_c = reference.asymmetric_params(x, axis=1)
    q_c = reference.quantize(x, s_c, z_c, axis=1)
    zeros = np.zeros(1, np.float32)

    def qcase(s, z, axis):
        return H.Case(QUANT_SIZE, inputs={"x": x, "scale": s, "zp": z},
                      outputs={"q": (QUANT_SIZE, np.int8)},
                      reference=lambda: {"q": reference.quantize(x, s, z, axis)},
                      bytes=5 * n, read_bytes=4 * n)

    deq = H.Case(QUANT_SIZE, inputs={"q": q_c, "scale": s_c, "zp": z_c},
                 outputs={"y": (QUANT_SIZE, np.float32)},
                 reference=lambda: {"y": reference.dequantize(q_c, s_c, z_c, axis=1)},
                 bytes=5 * n, read_bytes=n)
    return [("quantize, per tensor, symmetric", qcase(s_t, zeros, None),
             lambda d: quantize_launch(d, d.x, d.scale, d.zp, d.q, rows, cols, None)),
            ("quantize, per column, asymmetric", qcase(s_c, z_c, 1),
             lambda d: quantize_launch(d, d.x, d.scale, d.zp, d.q, rows, cols, 1)),
            ("dequantize, per column", deq,
             lambda d: dequantize_launch(d, d.q, d.scale, d.zp, d.y, rows, cols, 1))]


def quant_ops(report):
    """quantize / dequantize: checked (int8 bit for bit) and timed against the memory ceiling of
    their mix of reads and writes (4 bytes read : 1 written, and 1 : 4)."""
    from common.runner import check_and_time

    rows, rec = [], {}
    for label, case, fn in _quant_cases(np.random.default_rng(39)):
        r = check_and_time(report, label, fn, case)
        rows.append([label, f"{r['median_ms'] * 1e3:.1f}", f"{r['gbps']:.0f}",
                     f"{r['pct_of_ceiling']:.1f}" if r.get("pct_of_ceiling") else "-",
                     "ok" if r["ok"] else "FAIL"])
        rec[label] = r
    report.section(f"Quantize and dequantize at {H.size_str(QUANT_SIZE)} fp32 <-> int8 "
                   "(memory-bound)", rows, ["op", "us", "GB/s", "% of ceiling", "ok"])
    report.record("quant_ops", rec)


def error_case(rng, size=ERROR_SIZE):
    """x rows and w columns of magnitudes spread over 100x (log-uniform 0.1 .. 10): what a
    per-tensor scale handles badly (its small channels get few codes) and per-channel fixes."""
    m, k, n = size
    rs = np.exp(rng.uniform(np.log(0.1), np.log(10.0), (m, 1)))
    cs = np.exp(rng.uniform(np.log(0.1), np.log(10.0), (1, n)))
    x = (rng.standard_normal((m, k)) * rs).astype(np.float32)
    w = (rng.standard_normal((k, n)) / np.sqrt(k) * cs).astype(np.float32)
    bias = (0.1 * rng.standard_normal(n)).astype(np.float32)
    return x, w, bias


def error_table(report):
    """The int8 path (per tensor, per channel) and cuBLAS SGEMM against y = x @ w + bias in
    float64; each int8 output also checked against the numpy emulation of the same int8 path."""
    from common.baselines import sgemm
    from common.check import compare
    from common.gpu import driver
    from common.timing import time_fn

    x, w, bias = error_case(np.random.default_rng(391))
    exact = x.astype(np.float64) @ w.astype(np.float64) + bias.astype(np.float64)
    m, k, n = ERROR_SIZE
    rows, rec = [], {}
    f = H.DeviceCase(H.Case(ERROR_SIZE, inputs={"a": x, "b": w}, outputs={"c": ((m, n), np.float32)}))

    def fp32():
        sgemm(f.a, f.b, f.c, m, n, k)

    fp32()
    driver().Context.synchronize()
    y32 = f.outputs()["c"] + bias
    t = time_fn(fp32)
    rows.append([FP32_CUBLAS + " (+ bias on the host)", f"{reference.rel_l2(y32, exact):.2e}",
                 f"{np.abs(y32 - exact).max():.2e}", f"{t.median_ms:.3f}", "-"])
    rec["fp32"] = {"rel_l2": reference.rel_l2(y32, exact), "ms": t.median_ms}
    for per_channel, label in ((False, "int8 per tensor"), (True, "int8 per row of x, per column of w")):
        case = linear_case(x, w, bias, per_channel)
        d = H.DeviceCase(case)
        fn = lambda dd=d, pc=per_channel: linear_launch(dd, pc)
        fn()
        driver().Context.synchronize()
        y = d.outputs()["y"]
        same = compare(y, case.expected()["y"])
        t = time_fn(fn)
        err = reference.rel_l2(y, exact)
        rows.append([label, f"{err:.2e}", f"{np.abs(y - exact).max():.2e}", f"{t.median_ms:.3f}",
                     "ok" if same.ok else "FAIL"])
        rec[label] = {"rel_l2": err, "ms": t.median_ms, "matches_numpy_int8": same.ok}
        if not same.ok:
            report.failures.append(f"quantized_linear ({label}) at {H.size_str(ERROR_SIZE)}: "
                                   f"{same.message}")
    report.section(f"Error against fp32 at {H.size_str(ERROR_SIZE)} (rows and columns of 100x "
                   "different magnitudes)", rows,
                   ["path", "rel-L2 vs float64", "max abs err", "ms (quantize x, w + pack + GEMM)",
                    "= numpy int8 path"])
    report.record("error", rec)


def packing(report):
    """The packing every version pays (B to words, A padded when K % 16 != 0), timed alone."""
    from common.timing import time_fn

    rows, rec = [], {}
    for size in BENCH_SIZES:
        m, k, n = size
        a = np.zeros((m, k), np.int8)
        b = np.zeros((k, n), np.int8)
        d = H.DeviceCase(H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.int32)}))
        t = time_fn(lambda: operands(d))
        moved = k * n + reference.padded_k(k) * H.cdiv(n, 4) * 4
        if k % 16:
            moved += m * k + m * reference.padded_k(k)
        rows.append([H.size_str(size), "B packed" + (", A padded" if k % 16 else ""),
                     f"{t.median_ms * 1e3:.1f}", f"{moved / (t.median_ms * 1e-3) / 1e9:.0f}"])
        rec[H.size_str(size)] = t.median_ms
    report.section("Packing, timed alone (included in every version's time)", rows,
                   ["size", "what", "us", "GB/s"])
    report.record("packing", rec)
