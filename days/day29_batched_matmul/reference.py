"""Day 29 reference: batched matmul C[b] = A[b] @ B[b] in float64, and the arithmetic the
tutorial uses to decide whether a shape is memory- or compute-bound and how well a tile fits."""
import numpy as np


def bmm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """C[batch, M, N] = A[batch, M, K] @ B[batch, K, N], every product and sum in float64.

    Matrices of 10x10x10 to 64x64x64 go through a loop of 2-D products (numpy's stacked matmul
    is 3x slower on 100000 16x16 matrices); smaller and larger ones through one np.matmul."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if a.ndim != 3 or b.ndim != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise ValueError(f"bmm needs A[batch,M,K] and B[batch,K,N], got {a.shape} and {b.shape}")
    batch, m, k = a.shape
    n = b.shape[2]
    if not 1000 < m * k * n <= 64 ** 3:
        return np.matmul(a, b)
    c = np.empty((batch, m, n))
    for i in range(batch):
        np.matmul(a[i], b[i], out=c[i])
    return c


def flops(batch: int, m: int, k: int, n: int) -> int:
    """FLOPs the product must do: batch*M*N outputs, each K multiplies and K adds."""
    return 2 * batch * m * n * k


def bytes_moved(batch: int, m: int, k: int, n: int, itemsize: int = 4) -> int:
    """Bytes the product must move at least: A and B read once, C written once."""
    return itemsize * batch * (m * k + k * n + m * n)


def intensity(m: int, k: int, n: int, itemsize: int = 4) -> float:
    """FLOPs per byte moved: 2MNK / (4 (MK + KN + MN)), independent of the batch. A 16x16x16
    product does 8192 FLOPs per 3072 bytes (2.7 FLOP/byte); 1024^3 does 171."""
    return 2 * m * n * k / (itemsize * (m * k + k * n + m * n))


def tile_fill(m: int, n: int, bm: int, bn: int) -> float:
    """The share of a grid of BMxBN tiles covering an MxN matrix that lies inside it: the rest
    is work on zero padding (0.25 for a 32x32 matrix in 64x64 tiles)."""
    return m * n / ((-(-m // bm) * bm) * (-(-n // bn) * bn))
