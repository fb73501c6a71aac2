"""Day 45 reference: C = A . B^T with bf16 inputs, exact products summed in float64.

A [M, K] and B [N, K] arrive as bf16 bit patterns (uint16: numpy has no bfloat16); the GPU
writes C as bf16 bits too. The float64 sum of exact products is the true answer; the only
error a correct kernel adds is fp32 accumulation (~sqrt(K) 2^-24 relative) and the final
rounding of C to bf16 (at most 2^-8 relative: 8 significant bits, round to nearest).
"""
import numpy as np

from common import bf16

# rounding C to bf16 moves an element by at most half an ulp = 2^-8 of its size, so the
# relative L2 error of a correct C is below 2^-8; fp32 accumulation adds ~1e-5 at K = 8192
TOL = 2.0 ** -8 + 1e-4


bf16_bits = bf16.to_bits         # float -> uint16 patterns, round to nearest even
bf16_to_float = bf16.from_bits   # uint16 patterns -> float32 (exact)


def gemm(a_bits, b_bits) -> np.ndarray:
    """C[M, N] = A[M, K] . B[N, K]^T in float64 from bf16 bit patterns."""
    a = bf16_to_float(a_bits).astype(np.float64)
    b = bf16_to_float(b_bits).astype(np.float64)
    return a @ b.T


def flops(m: int, k: int, n: int) -> int:
    return 2 * m * n * k
