"""Day 8 reference: C = A @ B in float64 (the same specification as day 7), and the tile
arithmetic the tutorial uses."""
import numpy as np

from days.day07_naive_matmul.reference import flops, matmul  # noqa: F401  (same problem as day 7)


def tiled_matmul(a: np.ndarray, b: np.ndarray, bm: int, bn: int, bk: int) -> np.ndarray:
    """C = A @ B computed the way the kernels do: pad A and B with zeros up to whole tiles,
    then, for every BMxBN tile of C, sum the products of BMxBK tiles of A and BKxBN tiles
    of B. Equal to `matmul` for any shape: the zero padding adds nothing."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m, k = a.shape
    n = b.shape[1]
    mp, kp, np_ = -(-m // bm) * bm, -(-k // bk) * bk, -(-n // bn) * bn
    ap = np.zeros((mp, kp))
    ap[:m, :k] = a
    bp = np.zeros((kp, np_))
    bp[:k, :n] = b
    c = np.zeros((mp, np_))
    for i in range(0, mp, bm):
        for j in range(0, np_, bn):
            for t in range(0, kp, bk):
                c[i:i + bm, j:j + bn] += ap[i:i + bm, t:t + bk] @ bp[t:t + bk, j:j + bn]
    return c[:m, :n]


def global_loads_per_output(bm: int, bn: int) -> float:
    """Floats a BMxBN block tile reads from global memory per output, per unit of K:
    (BM + BN) / (BM * BN). A naive kernel (no tile) reads 2."""
    return (bm + bn) / (bm * bn)
