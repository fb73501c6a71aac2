"""Day 7 reference: C = A @ B in float64 (the specification the kernels are checked against)."""
import numpy as np


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C[M, N] = A[M, K] @ B[K, N], every product and sum in float64."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul needs A[M,K] and B[K,N], got {a.shape} and {b.shape}")
    return a @ b


def matmul_loops(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The kernel's own loop, one output at a time (slow; for the tutorial and the tests):
    C[r, c] = sum over k of A[r, k] * B[k, c]."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m, k = a.shape
    n = b.shape[1]
    c = np.zeros((m, n))
    for r in range(m):
        for j in range(n):
            s = 0.0
            for i in range(k):
                s += a[r, i] * b[i, j]
            c[r, j] = s
    return c


def flops(m: int, k: int, n: int) -> int:
    """FLOPs of one matmul: M*N outputs, each K multiplies and K adds."""
    return 2 * m * n * k
