"""bfloat16 on the host, where numpy has no such dtype: values live as their 16-bit patterns in
uint16 arrays (what the GPU reads as __nv_bfloat16), and these helpers convert (day 25 first
rounds to bf16 for cuBLAS; day 41, wmma_hgemm, explains it; every bf16 day imports them).

A bfloat16 is the top half of a float32: 1 sign bit, the same 8 exponent bits, 7 mantissa bits.
So widening is exact (put the 16 bits on top, zeros below) and narrowing is rounding away the
low 16 bits, here to nearest with ties to even, as __float2bfloat16_rn and cuBLAS do:

    bits = (u + 0x7FFF + ((u >> 16) & 1)) >> 16        u = the float32's bits

(adding 0x7FFF rounds up exactly the low halves above 0x8000; the extra 1 from the kept half's
lowest bit sends the tie 0x8000 up only when that bit is odd, i.e. to the even neighbour). A
carry out of the mantissa moves to the exponent, which is right: the largest finite values round
to infinity. NaN is the one input the formula mishandles (a NaN with only low mantissa bits set
would round to infinity), so NaN becomes the quiet NaN 0x7FC0 with its sign.

    from common import bf16
    bits = bf16.to_bits(x)          # float array -> uint16 patterns (round to nearest even)
    y = bf16.from_bits(bits)        # uint16 patterns -> float32 (exact)
    y = bf16.round(x)               # x rounded to bf16, as float32 (= from_bits(to_bits(x)))
"""
from __future__ import annotations

import numpy as np

ONE = 0x3F80          # 1.0
MAX_FINITE = 0x7F7F   # 3.3895e38
INF = 0x7F80
QUIET_NAN = 0x7FC0
EPS = 2.0 ** -7       # spacing of bf16 values in [1, 2): 8 significant bits


def to_bits(x) -> np.ndarray:
    """float32 (or anything numpy converts to float32 first) -> uint16 bf16 bit patterns,
    rounded to nearest, ties to even. float64 input is first rounded to float32 (as a cast on
    the GPU would do), which can differ from rounding float64 to bf16 directly only for values
    within 2^-24 relative of a bf16 halfway point."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    out = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = (QUIET_NAN | ((u[nan] >> 16) & 0x8000)).astype(np.uint16)
    return out


def from_bits(bits) -> np.ndarray:
    """uint16 bf16 bit patterns -> float32 (exact: the patterns become the top 16 bits)."""
    b = np.ascontiguousarray(bits)
    if b.dtype != np.uint16:
        raise TypeError(f"bf16 bit patterns must be uint16, got {b.dtype}")
    return (b.astype(np.uint32) << 16).view(np.float32)


def round(x) -> np.ndarray:  # noqa: A001  (bf16.round reads as what it does)
    """x rounded to the nearest bf16 (ties to even), returned as float32."""
    return from_bits(to_bits(x))


def random_bits(rng, shape, scale: float = 1.0) -> np.ndarray:
    """Standard normal values times `scale`, rounded to bf16: the inputs of the bf16 days."""
    return to_bits(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))
