"""Day 39 reference: int8 quantization and the int8 GEMM (the specification the kernels are
checked against).

Quantization maps a real x to an int8 q with a scale s > 0 and an integer zero point z:

    q = clip(rint(x / s) + z, -128, 127)      rint: round half to even (np.rint)
    x ~ (q - z) * s                            dequantization

The division and the rounding are done in float32, exactly as the kernels do them (an IEEE
division, then round half to even), so the GPU's int8 output equals this one bit for bit.
Symmetric quantization has z = 0 and s = max|x| / 127; asymmetric spreads [min, max] over all
256 codes. A scale is per tensor (one), per row or per column (one per channel).

The GEMM C = A @ B on int8 inputs accumulates in int32 and is exact. Its reference runs in
float64 through BLAS: every product is an integer of magnitude <= 128 * 128 = 2^14 and every
partial sum of K of them is below 2^14 K < 2^53, so float64 represents each one exactly and the
result does not depend on the order of the sums (a plain int64 numpy matmul gives the same
numbers, without BLAS, hundreds of times slower).
"""
import numpy as np

QMIN, QMAX = -128, 127
MAX_K = (2 ** 31 - 1) // (128 * 128)   # 131071: beyond it an int32 accumulator could overflow

AXES = {None: 0, 0: 1, 1: 2}           # axis -> the kernels' mode: tensor, per row, per column


def _per(v, axis, shape):
    """A scale / zero point broadcast against a [rows, cols] array: axis None one value,
    axis 0 one per row, axis 1 one per column."""
    v = np.asarray(v, np.float32)
    if axis is None:
        return v.reshape(())
    return v.reshape(-1, 1) if axis == 0 else v.reshape(1, -1)


def quantize(x, scale, zero_point=0, axis=None):
    """int8 q = clip(rint(x / scale) + zero_point, -128, 127), computed in float32."""
    x = np.asarray(x, np.float32)
    s = _per(scale, axis, x.shape)
    z = _per(zero_point, axis, x.shape)
    with np.errstate(over="ignore"):
        v = np.rint(x / s) + z                     # float32 throughout
    return np.clip(v, QMIN, QMAX).astype(np.int8)


def dequantize(q, scale, zero_point=0, axis=None):
    """(q - zero_point) * scale in float64."""
    q = np.asarray(q, np.float64)
    s = _per(scale, axis, q.shape).astype(np.float64)
    z = _per(zero_point, axis, q.shape).astype(np.float64)
    return (q - z) * s


def _reduce(x, axis, fn):
    x = np.asarray(x)                             # max / min / abs are exact in any precision
    if axis is None:
        return np.asarray(fn(x))
    return fn(x, axis=1 - axis)                   # per row: reduce over columns, and back


def symmetric_scale(x, axis=None):
    """s = max|x| / 127 per tensor / row / column (float32); a channel of zeros gets s = 1."""
    m = (_reduce(np.abs(x), axis, np.max).astype(np.float64) if np.size(x)
         else np.asarray(0.0))
    s = (m / QMAX).astype(np.float32)
    return np.where(s > 0, s, np.float32(1.0)).astype(np.float32)


def asymmetric_params(x, axis=None):
    """(scale, zero point) spreading [min(x, 0), max(x, 0)] over the 256 codes: s = (hi - lo) /
    255, z = rint(-128 - lo / s) (so lo maps to -128, 0 maps exactly to the code z)."""
    lo = np.minimum(_reduce(x, axis, np.min), 0.0).astype(np.float64)
    hi = np.maximum(_reduce(x, axis, np.max), 0.0).astype(np.float64)
    s = ((hi - lo) / 255.0).astype(np.float32)
    s = np.where(s > 0, s, np.float32(1.0)).astype(np.float32)
    z = np.clip(np.rint(QMIN - lo / s.astype(np.float64)), QMIN, QMAX).astype(np.float32)
    return s, z + np.float32(0)                   # (-0 -> 0)


def int8_matmul(a, b):
    """C = A @ B for int8 A [M, K], B [K, N], exact, as int64 (float64 BLAS: see above)."""
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape[1] > MAX_K:
        raise ValueError(f"K = {a.shape[1]} > {MAX_K}: int32 sums could overflow")
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(np.int64)


def padded_k(k: int) -> int:
    """K rounded up to 16: the packed rows hold whole 16-byte chunks."""
    return -(-k // 16) * 16


def pack_b(b) -> np.ndarray:
    """B [K, N] int8 -> Bp [Kp/4, Np] int32 words, Bp[kq, n] = B[4kq .. 4kq+3, n] with k = 4kq + j
    in byte j (little-endian), zeros past K and N; Kp = K rounded up to 16, Np = N up to 4."""
    b = np.asarray(b, np.int8)
    k, n = b.shape
    kp, np_ = padded_k(k), -(-n // 4) * 4
    full = np.zeros((kp, np_), np.int8)
    full[:k, :n] = b
    # [kq, 4, n] -> [kq, n, 4] bytes -> one little-endian int32 per (kq, n)
    return np.ascontiguousarray(full.reshape(kp // 4, 4, np_).transpose(0, 2, 1)).view("<i4")[..., 0]


def dot_words(a_words, b_words):
    """sum over words of dp4a: the packed int32 words split back into signed bytes (for tests)."""
    a = np.ascontiguousarray(a_words, "<i4").view(np.int8).astype(np.int64)
    b = np.ascontiguousarray(b_words, "<i4").view(np.int8).astype(np.int64)
    return int((a * b).sum())


def quantized_linear(x, w, bias=None, per_channel=True):
    """The int8 path of y = x @ w + bias, in float64, as the GPU does it: x [M, K] quantized
    symmetric per row (per_channel) or per tensor, w [K, N] per column or per tensor, the int8
    GEMM, then y = C * scale_x[m] * scale_w[n] + bias[n]. Returns (y, scale_x, scale_w)."""
    ax_x, ax_w = (0, 1) if per_channel else (None, None)
    sx = symmetric_scale(x, ax_x)
    sw = symmetric_scale(w, ax_w)
    qx = quantize(x, sx, 0, ax_x)
    qw = quantize(w, sw, 0, ax_w)
    c = int8_matmul(qx, qw).astype(np.float64)
    m, n = c.shape
    sxv = np.broadcast_to(sx.astype(np.float64).reshape(-1, 1), (m, 1))
    swv = np.broadcast_to(sw.astype(np.float64).reshape(1, -1), (1, n))
    y = c * sxv * swv
    if bias is not None:
        y = y + np.asarray(bias, np.float64).reshape(1, -1)
    return y, sx, sw


def rel_l2(out, ref) -> float:
    out = np.asarray(out, np.float64)
    ref = np.asarray(ref, np.float64)
    nr = np.linalg.norm(ref)
    return float(np.linalg.norm(out - ref) / nr) if nr else float(np.linalg.norm(out - ref))


def dp4a_peak_ops_per_clock(sms: int) -> int:
    """dp4a arithmetic per clock of the whole GPU: IDP4A issues on the FMA-heavy pipe only, 16
    lanes per SM sub-partition (64 per SM per clock, half the FP32 rate), each doing 4
    multiplies and 4 adds: 512 operations per SM per clock, twice the FP32 FMA's 256."""
    return sms * 64 * 8
