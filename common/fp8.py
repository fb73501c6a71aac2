"""8-bit floats on the host, where numpy has no such dtype: values live as their byte patterns in
uint8 arrays (what the GPU reads as __nv_fp8_e4m3 / the wgmma .e4m3 operand), and these helpers
convert (taught on day 46, fp8_gemm; later fp8 days import them instead of writing their own).

Two formats (the OCP 8-bit float formats that Hopper's tensor cores take):

    e4m3   1 sign, 4 exponent bits (bias 7), 3 mantissa bits. No infinities: the one NaN
           pattern per sign is S.1111.111, so the largest finite value is S.1111.110 = 448.
           Subnormals (exponent field 0) are m * 2^-9, m = 1..7. The format of weights and
           activations (torch.float8_e4m3fn).
    e5m2   1 sign, 5 exponent bits (bias 15), 2 mantissa bits, IEEE-like: infinities
           (S.11111.00) and NaNs; largest finite 57344, smallest subnormal 2^-16. The format of
           gradients (more range, less precision).

Some patterns (e4m3): 1.0 = 0x38 (0.0111.000: exponent field 7 = 0 + bias), 448 = 0x7E, -2.0 = 0xC0,
2^-6 (smallest normal) = 0x08,  2^-9 (smallest subnormal) = 0x01,  NaN = 0x7F.

Encoding rounds to the nearest representable value, ties to even (the pattern whose last bit is
0), and SATURATES: a finite value (or an infinity) beyond the largest finite one becomes that
largest one with its sign, as `cvt.rn.satfinite` does on the GPU. NaN stays NaN. Scaling first
keeps values in range: quantize(x) divides by a per-tensor scale amax / 448, so the largest
|x| lands on 448 exactly.

    from common import fp8
    codes = fp8.to_bits(x)                  # float array -> uint8 e4m3 patterns
    y = fp8.from_bits(codes)                # uint8 patterns -> float32 (exact)
    codes, scale = fp8.quantize(x)          # per-tensor scale: x ~ from_bits(codes) * scale
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max_finite: float     # largest finite magnitude
    max_code: int         # its pattern (sign bit clear)
    nan_code: int         # the NaN written for a NaN input (sign bit added)
    has_inf: bool


FORMATS = {
    "e4m3": Format("e4m3", 4, 3, 7, 448.0, 0x7E, 0x7F, False),
    "e5m2": Format("e5m2", 5, 2, 15, 57344.0, 0x7B, 0x7E, True),
}

E4M3 = FORMATS["e4m3"]
ONE = 0x38            # e4m3 1.0
MAX = 448.0           # e4m3 largest finite value
MAX_FINITE = 0x7E     # its pattern
NAN = 0x7F            # e4m3 NaN (and 0xFF)
MIN_SUBNORMAL = 2.0 ** -9
CHUNK = 1 << 22       # elements converted at a time (bounds the float64 temporaries)


def _fmt(fmt) -> Format:
    if isinstance(fmt, Format):
        return fmt
    if fmt not in FORMATS:
        raise ValueError(f"fp8 format {fmt!r}: one of {', '.join(FORMATS)}")
    return FORMATS[fmt]


def _decode_table(f: Format) -> np.ndarray:
    """float32 value of each of the 256 patterns (exact: at most 4 significant bits)."""
    codes = np.arange(256)
    sign = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> f.man_bits) & ((1 << f.exp_bits) - 1)
    m = codes & ((1 << f.man_bits) - 1)
    min_exp = 1 - f.bias
    mag = np.where(e == 0, np.ldexp(m.astype(float), min_exp - f.man_bits),
                   np.ldexp(1.0 + m / 2.0 ** f.man_bits, e - f.bias))
    top = (1 << f.exp_bits) - 1
    if f.has_inf:
        mag = np.where((e == top) & (m == 0), np.inf, mag)
        mag = np.where((e == top) & (m != 0), np.nan, mag)
    else:
        mag = np.where((e == top) & (m == (1 << f.man_bits) - 1), np.nan, mag)
    return (sign * mag).astype(np.float32)


_TABLES = {name: _decode_table(f) for name, f in FORMATS.items()}


def from_bits(bits, fmt="e4m3") -> np.ndarray:
    """uint8 fp8 patterns -> float32 (exact)."""
    f = _fmt(fmt)
    b = np.asarray(bits)
    if b.dtype != np.uint8:
        raise TypeError(f"fp8 bit patterns must be uint8, got {b.dtype}")
    return _TABLES[f.name][b]


def to_bits(x, fmt="e4m3") -> np.ndarray:
    """float array -> uint8 fp8 patterns: round to nearest, ties to even, saturating to the
    largest finite value (infinities too); NaN -> NaN. Like bf16.to_bits, float64 input is
    first rounded to float32 (which can differ from rounding float64 directly only within 2^-24
    relative of a halfway point).

    Normal range: an fp8 value is a float32 with all but the top `man_bits` mantissa bits zero
    and a smaller exponent range, so rounding is integer arithmetic on the float32's bits:
        u = |x| bits;  r = (u + half - 1 + kept_lsb) >> (23 - man_bits)      (ties to even)
    gives exponent and mantissa side by side, and re-biasing the exponent (127 -> bias) is one
    subtraction. Below the smallest normal 2^(1-bias) the spacing is fixed, 2^(1-bias-man_bits):
    the pattern is rint(|x| / spacing), exactly (a power-of-two scaling), ties to even."""
    f = _fmt(fmt)
    x = np.asarray(x)
    if x.dtype.kind not in "fiu" and x.dtype != np.bool_:
        raise TypeError(f"fp8.to_bits takes real numbers, got dtype {x.dtype}")
    with np.errstate(over="ignore"):         # beyond float32: inf, which saturates anyway
        x32 = np.ascontiguousarray(x, dtype=np.float32)
    flat = x32.reshape(-1)
    out = np.empty(flat.size, np.uint8)
    for i in range(0, flat.size, CHUNK):
        out[i:i + CHUNK] = _encode_chunk(flat[i:i + CHUNK], f)
    return out.reshape(x.shape)


def _encode_chunk(x: np.ndarray, f: Format) -> np.ndarray:
    u = x.view(np.uint32)
    sign = (u >> 31).astype(np.uint8) << 7
    mag = u & np.uint32(0x7FFFFFFF)                  # |x| bits (NaN: above 0x7F800000)
    drop = 23 - f.man_bits
    r = (mag + np.uint32((1 << (drop - 1)) - 1) + ((mag >> drop) & 1)) >> drop
    # re-bias: float32 exponent e + 127 -> e + bias; r holds (exponent << man_bits) | mantissa.
    # Inputs too small for fp8's normals would go negative here: the subnormal path takes them.
    rebias = np.uint32((127 - f.bias) << f.man_bits)
    min_normal = np.float32(2.0 ** (1 - f.bias))
    a = np.abs(x)
    small = a < min_normal
    normal = np.where(small, rebias, r) - rebias      # (masked so no unsigned wrap-around)
    normal = np.minimum(normal, np.uint32(f.max_code))   # saturate: beyond max, inf
    sub = np.rint(np.where(small, a, 0) * np.float32(2.0 ** (f.man_bits + f.bias - 1)))
    code = np.where(small, sub.astype(np.uint32), normal).astype(np.uint8) | sign
    nan = mag > np.uint32(0x7F800000)
    if nan.any():
        code[nan] = np.uint8(f.nan_code) | sign[nan]
    return code


def round(x, fmt="e4m3") -> np.ndarray:  # noqa: A001  (fp8.round reads as what it does)
    """x rounded to the nearest fp8 value (ties to even, saturating), as float32."""
    return from_bits(to_bits(x, fmt), fmt)


def scale_of(x, fmt="e4m3") -> float:
    """The per-tensor scale amax / max_finite (1.0 for an all-zero tensor), as a float32 value:
    x / scale then spans [-max_finite, max_finite]."""
    f = _fmt(fmt)
    x = np.asarray(x)
    amax = float(np.abs(x).max()) if x.size else 0.0
    if not np.isfinite(amax):
        raise ValueError("fp8 quantization needs finite values (the tensor holds NaN or Inf)")
    return float(np.float32(amax / f.max_finite)) if amax > 0 else 1.0


def quantize(x, fmt="e4m3", scale: float | None = None):
    """(codes, scale): x / scale rounded to fp8, with the per-tensor scale amax / max_finite
    unless one is given. The division is done in float32, as a GPU kernel would;
    from_bits(codes) * scale ~ x."""
    x32 = np.asarray(x, dtype=np.float32)
    s = scale_of(x32, fmt) if scale is None else float(np.float32(scale))
    if not (np.isfinite(s) and s > 0):
        raise ValueError(f"an fp8 scale must be finite and > 0, got {s}")
    return to_bits(x32 / np.float32(s), fmt), s
