"""Day 25 reference: C = A @ B in float64 (day 7's specification), plus the arithmetic the
tutorial uses: how cuBLAS's column-major call computes a row-major product, the order in which
grouped blocks visit the tiles, and how much of C a wave of blocks covers."""
import numpy as np

from common import bf16

from days.day07_naive_matmul.reference import flops, matmul  # noqa: F401  (same problem as day 7)


def column_major_trick(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """What cublasSgemm(N, N, n, m, k, B, ldb=n, A, lda=k, C, ldc=n) computes, in numpy: a
    row-major [R, C] buffer read column-major is its transpose, so cuBLAS sees B^T and A^T and
    writes (B^T A^T) column-major = ((A B)^T)^T = A B row-major. No data moves."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    m, k = a.shape
    n = b.shape[1]
    bt = b.reshape(-1).reshape((n, k), order="F")     # B's buffer read column-major: [n, k] = B^T
    at = a.reshape(-1).reshape((k, m), order="F")     # A's buffer: [k, m] = A^T
    ct = bt @ at                                      # [n, m] column-major
    return ct.reshape(-1, order="F").reshape(m, n)    # the same buffer read row-major


def grouped_order(tiles_m: int, tiles_n: int, group: int) -> list[tuple[int, int]]:
    """(tile-row, tile-column) of block id = 0, 1, ... in the grouped order of kernel.cu's
    tile_of: down `group` tile-rows, then one column right; the last group may be shorter."""
    out = []
    per_group = group * tiles_n
    for i in range(tiles_m * tiles_n):
        first = (i // per_group) * group
        rows = min(tiles_m - first, group)
        inside = i % per_group
        out.append((first + inside % rows, inside // rows))
    return out


def wave_efficiency(m: int, n: int, bm: int, bn: int, slots: int) -> float:
    """Share of the last wave's SM slots that hold work: tiles / (waves * slots), with
    tiles = ceil(M/BM) * ceil(N/BN) and `slots` blocks resident at once on the whole GPU."""
    tiles = -(-m // bm) * -(-n // bn)
    waves = -(-tiles // slots)
    return tiles / (waves * slots)


# the bf16 of the cuBLAS gemm_ex rows, on the host: common/bf16.py (round to nearest even)
bf16_round = bf16.round               # float -> the nearest bfloat16, as float32
bf16_bits_to_float = bf16.from_bits   # uint16 bit patterns -> float32
