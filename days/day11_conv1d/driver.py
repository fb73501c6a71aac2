"""Day 11 driver: 1D convolution ("same" length, zero padding) in four versions.

    from days.day11_conv1d.driver import conv1d
    y = conv1d(x, w)          # numpy in, numpy out (float32); x 1-D, w 1-D of odd length <= 1023
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256
MAX_K = 1023          # the __constant__ buffer in kernel.cu holds this many taps
V4_MAX_R = 15         # v4 is instantiated for radii 0..15 (K <= 31)
V4_TILE = 2048        # outputs per v4 block (256 threads x 8)
FLOPS_FROM_K = 64     # from this width on the op is compute-bound: report TFLOP/s, not GB/s
NUMPY_MAX_WORK = 2 ** 28  # time numpy only where a call takes well under a second (n*K taps)

VERSIONS = {
    "v1": "naive: x and w from global memory",
    "v2": "filter in __constant__ memory",
    "v3": "shared-memory tile with halo cells",
    "v4": "8 outputs per thread from registers (K<=31; wider: v3)",
}
BEST = "v4"           # the fastest at every bench size (results/day11.json)
SIZE_HELP = "NxK: signal length x odd filter width (1..1023), e.g. 2^25x7"
SIZES = {"small": (1000, 7), "default": (2 ** 25, 7), "large": (2 ** 26, 31)}
# n = 1, n < K (every output touches both padded ends), n = K - 1, ragged n around v3's 256-
# and v4's 2048-output tiles (255, 257, 2047, 2049, 6145), n = 1000003; K = 1, 3, 7, 31 (v4's
# widest), 33 (past v4: v3), 255 and 1023 (the constant buffer's limit).
CHECK_SIZES = [(1, 1), (1, 3), (1, 31), (5, 31), (30, 31), (31, 7), (33, 3), (255, 7),
               (257, 31), (2047, 7), (2049, 31), (4096, 3), (6145, 33), (1000, 1),
               (1000003, 7), (3000, 1023), (777, 255), (513, 15)]
# the awkward one: an odd length that no tile divides (2^25 + 3) and a 9-tap filter
AWKWARD = (2 ** 25 + 3, 9)
BENCH_SIZES = [(2 ** 25, 3), (2 ** 25, 7), (2 ** 25, 31), AWKWARD]
# CURRICULUM.md: >= 70% of the copy bandwidth for small filters; every bench filter is small
# (K <= 31, the op stays memory-bound below K ~ 64)
BAR = [{"pct": 70}]
MAX_N = 2 ** 31 - 4096    # v3's tile end (base + 256 + 2r) must stay an int


def validate_size(size):
    n, k = size
    if k % 2 == 0:
        raise ValueError(f"the filter width K must be odd (a centred filter), got {k}")
    if k > MAX_K:
        raise ValueError(f"K = {k} does not fit the constant buffer (at most {MAX_K} taps)")
    if n > MAX_N:
        raise ValueError(f"n = {n}: the kernels index with 32-bit ints (n <= 2^31 - 4096)")


def make_case(size, rng):
    n, k = size
    validate_size(size)
    x = rng.standard_normal(n).astype(np.float32)
    w = (rng.standard_normal(k) / np.sqrt(k)).astype(np.float32)
    return H.Case(size, inputs={"x": x, "w": w}, outputs={"y": ((n,), np.float32)},
                  reference=lambda: {"y": reference.conv1d(x, w)},
                  bytes=2 * x.nbytes + w.nbytes,  # read x once, write y once (+ the filter)
                  read_bytes=x.nbytes + w.nbytes,
                  flops=2 * k * n if k >= FLOPS_FROM_K else 0)


# --- the constant-memory filter -------------------------------------------------------------
# cudaMemcpyToSymbol in pycuda: the symbol's device address from module.get_global, then a
# copy. A DeviceCase's filter never changes, so it is copied only when the case whose filter
# is in the buffer is not this one (each DeviceCase gets a token object the first time).
_in_constant = {"token": None}


def load_filter(d):
    from common.gpu import driver

    tok = getattr(d, "_filter_token", None)
    if tok is None:
        tok = object()
        d._filter_token = tok
    if _in_constant["token"] is not tok:
        ptr, nbytes = K.module.get_global("c_w")
        w = np.ascontiguousarray(d.case.inputs["w"], dtype=np.float32)
        assert w.nbytes <= nbytes, "validate_size keeps K within the constant buffer"
        driver().memcpy_htod(ptr, w)
        _in_constant["token"] = tok


def v4_kernel(k):
    r = k // 2
    return f"conv1d_v4_r{r}" if r <= V4_MAX_R else None


def launch(version, d):
    version = A.version(version, VERSIONS)  # never run some other kernel for an unknown name
    n, k = d.size
    blocks = H.cdiv(n, THREADS)
    if version == "v1":
        K("conv1d_v1", "PPPii").prepared_call((blocks, 1, 1), (THREADS, 1, 1), d.x, d.w, d.y, n, k)
        return
    load_filter(d)
    name = v4_kernel(k) if version == "v4" else None
    if name:
        K(name, "PPi").prepared_call((H.cdiv(n, V4_TILE), 1, 1), (THREADS, 1, 1), d.x, d.y, n)
    elif version == "v2":
        K("conv1d_v2", "PPii").prepared_call((blocks, 1, 1), (THREADS, 1, 1), d.x, d.y, n, k)
    else:  # v3, and v4 for filters wider than 31
        K("conv1d_v3", "PPii").prepared_call((blocks, 1, 1), (THREADS, 1, 1), d.x, d.y, n, k,
                                             shared_size=4 * (THREADS + k - 1))


def baselines(d):
    n, k = d.size
    r = k // 2
    xh = d.case.inputs["x"]
    wh = d.case.inputs["w"]
    out = {}
    if n * k <= NUMPY_MAX_WORK:  # one CPU core: each timed call is n*K multiply-adds
        out["numpy.correlate (CPU)"] = lambda: np.correlate(xh, wh, mode="full")[r:r + n]
    torch = torch_or_none()
    if torch is not None:
        x = as_torch(d.array("x")).view(1, 1, n)
        w = as_torch(d.array("w")).view(1, 1, k)
        cudnn = torch.backends.cudnn

        def torch_conv1d():
            # fp32 as the kernels: without this cuDNN may use TF32 tensor cores (10-bit
            # mantissa), which would neither be a like-for-like race nor pass the fp32 check
            prev = cudnn.allow_tf32
            cudnn.allow_tf32 = False
            try:
                return torch.nn.functional.conv1d(x, w, padding=r)
            finally:
                cudnn.allow_tf32 = prev

        out["torch conv1d (cuDNN, fp32)"] = torch_conv1d
    return out


def conv1d(x, w, version=BEST):
    """y[i] = sum_j w[j] x[i + j - r] on the GPU, zero padding, len(y) = len(x) (float32).

    x is a 1-D signal, w a 1-D filter of odd length K = 2r + 1 <= 1023 (centred on each
    output; the constant-memory buffer holds 1023 taps). An empty signal returns an empty
    array without a launch."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=1, what="(one signal; call once per row for several)")
    w = A.floats(w, "w", ndim=1, what="(one filter)")
    k = w.size
    if k == 0:
        raise ValueError("w is empty: the filter needs at least one tap")
    if k % 2 == 0:
        raise ValueError(f"w has {k} taps: the filter must have an odd length 2r + 1 to be centred "
                         f"on each output (pad it with a zero to {k + 1} taps)")
    if k > MAX_K:
        raise ValueError(f"w has {k} taps: at most {MAX_K} fit the constant-memory buffer c_w "
                         "the kernels read the filter from")
    if x.size == 0:
        return np.empty(0, np.float32)
    validate_size((x.size, k))
    case = H.Case((x.size, k), inputs={"x": x, "w": w}, outputs={"y": ((x.size,), np.float32)})
    return H.run(launch, version, case)["y"]


def loads_per_output(version, k):
    """(global, shared) floats loaded per output, counting every load instruction's floats
    (most of v1/v2's global loads hit L1; only ~1 per output comes from DRAM in any version)."""
    version = A.version(version, VERSIONS)
    r = k // 2
    if version == "v1":
        return 2 * k, 0           # x[i + j - r] and w[j]
    if version == "v2":
        return k, 0               # w comes from the constant cache
    if version == "v3" or v4_kernel(k) is None:
        return (THREADS + 2 * r) / THREADS, k
    window = 4 * H.cdiv((4 - r % 4) % 4 + 8 + 2 * r, 4)  # v4: 8 outputs from one window
    return (V4_TILE + 2 * r) / V4_TILE, window / 8


def extras(report, mode):
    if mode == "check":
        return
    rows = []
    for k in (3, 7, 31):
        row = [k]
        for v in VERSIONS:
            g, sh = loads_per_output(v, k)
            row.append(f"{g:.3g} + {sh:.3g}")
        rows.append(row)
    report.section("floats loaded per output (global + shared) by each version", rows,
                   ["K"] + list(VERSIONS))
    report.record("loads_per_output", rows)
