"""Day 47 reference: C = A . B^T for int8 A [M, K] and B [N, K], exact, in int64.

The tensor cores accumulate int8 products in int32 and the result is exact: a product is at
most 128 * 128 = 2^14 in size, so a sum of K of them stays below 2^31 for K <= 131071 (MAX_K).
The reference runs through float64 BLAS, which is exact here for the same kind of reason: every
partial sum is an integer below 2^14 K < 2^53, which float64 represents exactly, so the order of
the additions cannot matter (a plain int64 numpy matmul gives the same numbers, hundreds of
times slower). Day 39's reference says the same for its [K, N] layout.
"""
import numpy as np

MAX_K = (2 ** 31 - 1) // (128 * 128)   # 131071: beyond it an int32 sum could overflow


def int8_gemm(a, b) -> np.ndarray:
    """C[M, N] = A[M, K] . B[N, K]^T as int64, from int8 arrays."""
    a = np.asarray(a)
    b = np.asarray(b)
    return (a.astype(np.float64) @ b.astype(np.float64).T).astype(np.int64)


def ops(m: int, k: int, n: int) -> int:
    """Integer operations: one multiply and one add per term, as FLOPs are counted."""
    return 2 * m * n * k
