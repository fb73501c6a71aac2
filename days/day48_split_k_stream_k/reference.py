"""Day 48 reference: C = A . B^T with bf16 inputs, exact products summed in float64 (day 45's
specification: splitting K changes where the partial sums meet, not what they add up to).

A [M, K] and B [N, K] arrive as bf16 bit patterns (uint16); C comes back as bf16 bits. Cutting
the K range into pieces and adding the pieces' sums is the same sum in a different order:

    C = sum_k A[:, k] B[:, k]  =  sum_s ( sum_{k in slice s} A[:, k] B[:, k] )

so the float64 product is the answer for every version; the only error a correct kernel adds is
fp32 accumulation (~sqrt(K) 2^-24 relative, 1.5e-5 at K = 65536) and the final rounding of C
to bf16 (at most 2^-8 relative).
"""
import numpy as np

from days.day45_wgmma_gemm.reference import TOL, bf16_bits, bf16_to_float, flops, gemm  # noqa: F401

BK = 64   # k-block: the unit the schedules count in


def slice_bounds(nk: int, slices: int) -> list[int]:
    """k-block boundaries of split-K: slice s covers k-blocks [b[s], b[s+1]) with
    b[s] = floor(s nk / S) (the kernel's SplitK::kb_begin)."""
    return [s * nk // slices for s in range(slices + 1)]


def gemm_split_k(a_bits, b_bits, slices: int) -> np.ndarray:
    """C as split-K computes it: per slice of K (whole 64-deep k-blocks), the partial product
    in float64; the slices added in order 0, 1, ..., S-1. Equal to gemm() up to float64
    rounding: the CPU tests use it to show that the pieces add up to the whole."""
    a = bf16_to_float(a_bits).astype(np.float64)
    b = bf16_to_float(b_bits).astype(np.float64)
    k = a.shape[1]
    nk = -(-k // BK)
    bounds = slice_bounds(nk, slices)
    out = np.zeros((a.shape[0], b.shape[0]))
    for s in range(slices):
        k0, k1 = bounds[s] * BK, min(bounds[s + 1] * BK, k)
        out += a[:, k0:k1] @ b[:, k0:k1].T
    return out
