"""Day 46 reference: C = scale_a * scale_b * (A . B^T) with fp8 e4m3 inputs, in float64.

A [M, K] and B [N, K] arrive as e4m3 codes (uint8: numpy has no fp8 dtype; common/fp8.py
converts), each with one per-tensor scale: the real matrices are from_bits(A) * scale_a and
from_bits(B) * scale_b. Every decoded value has at most 4 significant bits, so each product
is exact in float64 and the float64 sum of K of them is the true answer to ~1e-16.

The GPU writes C in bf16. What a correct kernel may add to the true answer:
- the rounding of C to bf16: at most 2^-8 of each element (8 significant bits);
- the accumulation. wgmma on fp8 inputs does not accumulate in full fp32: the tensor cores
  keep about 13 mantissa bits of the running sum D (truncating the rest each time an
  instruction adds its 32 products; measured by SageAttention 2 and DeepSeek-V3 on Hopper).
  A kernel that lets wgmma accumulate all of K ("fast accumulation", v1-v3 and cuBLAS's
  use_fast_accum=True) loses up to 2^-13 of the partial sum at each of the K/32 steps, in the
  same direction (toward zero), so its error grows with K. A kernel that adds each k-block's
  wgmma result into fp32 registers (v4, and cuBLAS by default) has the fp32 error, ~1e-6.

The tolerance is the bf16 rounding plus a budget for the fast accumulation: half an ulp of the
13-bit accumulator a step (2^-14 relative), over the K/32 steps, with the 1/sqrt(3) of a
random walk's running sums (the sum of the partial sums of a random walk of n steps has
n/sqrt(3) times the spread of its end): budget(K) = 2^-14 * (K/32) / sqrt(3). At K = 8192
that is 9.0e-3 (the model, emulated in numpy, gives 6.4e-3 for normal inputs); a kernel that
drops one of the 256 k-steps is off by 1/sqrt(256) = 6%, a wrong scale by far more.
"""
import math

import numpy as np

from common import bf16, fp8

ACC_MANTISSA_BITS = 13     # the fp8 tensor cores' accumulator (about; see above)
K_STEP = 32                # k of one fp8 wgmma

bf16_to_float = bf16.from_bits


def accumulation_budget(k: int) -> float:
    """Relative L2 error that wgmma's own accumulation may add over K (the fast mode)."""
    steps = max(1, math.ceil(k / K_STEP))
    return 2.0 ** -(ACC_MANTISSA_BITS + 1) * steps / math.sqrt(3)


def tol(k: int) -> float:
    """Relative L2 tolerance of C: bf16 rounding, the accumulation budget, fp32 slack."""
    return 2.0 ** -8 + accumulation_budget(k) + 1e-4


def decode(codes) -> np.ndarray:
    """e4m3 codes -> float64 values (exact)."""
    return fp8.from_bits(codes).astype(np.float64)


def scaled_mm(a_codes, b_codes, scale_a: float, scale_b: float) -> np.ndarray:
    """C[M, N] = scale_a * scale_b * (A[M, K] . B[N, K]^T) in float64 from e4m3 codes."""
    return (decode(a_codes) @ decode(b_codes).T) * (float(scale_a) * float(scale_b))


def quantized_matmul(a, b):
    """What the public matmul computes from real inputs: per-tensor e4m3 quantization of a
    [M, K] and b [N, K] (scale = amax / 448), then the exact scaled product (float64)."""
    qa, sa = fp8.quantize(a)
    qb, sb = fp8.quantize(b)
    return scaled_mm(qa, qb, sa, sb)


def flops(m: int, k: int, n: int) -> int:
    return 2 * m * n * k


def emulate_fast_accumulation(a_codes, b_codes, scale_a, scale_b, bits=ACC_MANTISSA_BITS):
    """The fast mode's sums as modelled above: after each 32-deep step, the running sum is
    truncated (toward zero) to `bits` mantissa bits. For the tolerance's test and the README's
    error table; small sizes only (a Python loop over K / 32 steps)."""
    a, b = decode(a_codes), decode(b_codes)
    d = np.zeros((a.shape[0], b.shape[0]))
    for k0 in range(0, a.shape[1], K_STEP):
        d = d + a[:, k0:k0 + K_STEP] @ b[:, k0:k0 + K_STEP].T
        m, e = np.frexp(d)                      # d = m 2^e, |m| in [0.5, 1)
        d = np.ldexp(np.trunc(m * 2.0 ** (bits + 1)) / 2.0 ** (bits + 1), e)
    return d * (float(scale_a) * float(scale_b))
