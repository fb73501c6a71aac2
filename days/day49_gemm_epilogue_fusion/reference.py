"""Day 49 reference: GPT-2's MLP layers with their epilogues, float64 on the bf16 inputs.

    fc1:  h = gelu(x W1^T + b1)        x [T, C], W1 [4C, C] (a Linear weight: [out, in]), b1 [4C]
    fc2:  y = h W2^T + b2 + r          W2 [C, 4C], b2 [C], r [T, C] (the residual stream)

Every array is bf16 (uint16 bit patterns here). GELU is GPT-2's tanh approximation (day 30's).
The GPU materialises h in bf16 and fc2 reads that, as torch does; so the reference for y uses h
rounded to bf16 (to nearest even) as fc2's input. A correct kernel then errs by the final bf16
rounding of h and of y (at most 2^-8 relative each), fp32 accumulation (~sqrt(K) 2^-24) and its
fp32 GELU (exp and a fast division: ~1e-6 relative).
"""
import numpy as np

from common import bf16
from days.day30_gpt2_style_ops.reference import gelu  # noqa: F401  (day 30's specification)

# bf16 rounding of the outputs (2^-8), plus a little for fp32 accumulation and the fp32 GELU
TOL = 2.0 ** -8 + 2e-4

bf16_bits = bf16.to_bits
bf16_to_float = bf16.from_bits


def _f64(bits) -> np.ndarray:
    return bf16_to_float(bits).astype(np.float64)


def fc1(x_bits, w1_bits, b1_bits) -> np.ndarray:
    """h = gelu(x W1^T + b1) in float64 (before h is rounded to bf16)."""
    u = _f64(x_bits) @ _f64(w1_bits).T
    u += _f64(b1_bits)
    return gelu(u)


def fc2(h_bits, w2_bits, b2_bits, r_bits) -> np.ndarray:
    """y = h W2^T + b2 + r in float64, h given as bf16 bits."""
    y = _f64(h_bits) @ _f64(w2_bits).T
    y += _f64(b2_bits)
    y += _f64(r_bits)
    return y


def mlp(x_bits, w1_bits, b1_bits, w2_bits, b2_bits, r_bits) -> dict:
    """Both layers: {"h": fc1's output (float64), "y": fc2 on h rounded to bf16 (float64)}."""
    h = fc1(x_bits, w1_bits, b1_bits)
    return {"h": h, "y": fc2(bf16_bits(h), w2_bits, b2_bits, r_bits)}


def flops(t: int, c: int) -> int:
    """The two GEMMs, 2 FLOPs a multiply-add: T x C x 4C each. Bias, GELU and residual
    (~12 T C operations) are left out, as cuBLAS and torch count."""
    return 2 * (2 * t * c * 4 * c)


def unfused_extra_bytes(t: int, c: int) -> int:
    """What fusion saves in memory traffic at bf16: the unfused form writes the [T, 4C]
    pre-activation and reads it back (bias + GELU kernel), and writes the [T, C] fc2 product and
    reads it back (bias + residual kernel): 2 x 2 bytes x (4 T C + T C)."""
    return 2 * 2 * (4 * t * c + t * c)
