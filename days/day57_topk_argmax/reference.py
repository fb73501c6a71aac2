"""Day 57 reference: row argmax / argmin and row top-k of a float32 matrix [rows, cols].

The order (what the kernels implement, and what torch.topk and numpy agree on):
  - larger values first; -0.0 and +0.0 are equal;
  - NaN is larger than every number, +inf included (numpy's argmax/argmin return the first NaN;
    torch.topk puts NaN first);
  - ties go to the lower column index.
argmax/argmin are numpy's own. topk(x, k) returns the k largest of each row in that order:
values [rows, k] (float32, each one x[row, index], so -0.0 stays -0.0) and indices [rows, k].

It is computed through the same total order the kernels use: a 64-bit composite per element,
key(value) << 32 | (2^32 - 1 - index), unique within a row, largest first (order_keys below).
topk_lexsort() is a second formulation (numpy's lexsort on value, NaN flag and index) for tests.
"""
import numpy as np


def order_keys(x) -> np.ndarray:
    """uint32 keys that sort as the float32 values do under the order above: -0.0 -> +0.0, any
    NaN -> 0xFFFFFFFF (above +inf, whose key is 0xFF800000); a non-negative float gets its sign
    bit set, a negative one all its bits flipped."""
    x = np.asarray(x, np.float32)
    u = np.where(x == 0, np.float32(0), x).view(np.uint32)
    k = np.where(u & np.uint32(0x80000000), ~u, u | np.uint32(0x80000000))
    return np.where(np.isnan(x), np.uint32(0xFFFFFFFF), k).astype(np.uint32)


def composites(x) -> np.ndarray:
    """key << 32 | ~index (uint64), [rows, cols]: larger = earlier in the top-k order."""
    x = np.asarray(x, np.float32)
    idx = np.arange(x.shape[-1], dtype=np.uint64)
    return (order_keys(x).astype(np.uint64) << np.uint64(32)) | (np.uint64(0xFFFFFFFF) - idx)


def argmax(x) -> np.ndarray:
    """Index of the largest value of each row (the first one on ties; the first NaN if any)."""
    return np.argmax(np.asarray(x, np.float32), axis=1)


def argmin(x) -> np.ndarray:
    return np.argmin(np.asarray(x, np.float32), axis=1)


ROWS_PER_PIECE = 256   # composites are built this many rows at a time (8 bytes an element)


def topk(x, k: int):
    """(values [rows, k] float32, indices [rows, k] int64): the k largest of each row, largest
    first, ties to the lower index, NaN above everything."""
    x = np.asarray(x, np.float32)
    rows, cols = x.shape
    idx = np.empty((rows, k), np.int64)
    for r0 in range(0, rows, ROWS_PER_PIECE):
        c = composites(x[r0:r0 + ROWS_PER_PIECE])
        part = np.argpartition(c, cols - k, axis=1)[:, cols - k:]      # the k largest, any order
        top = np.take_along_axis(c, part, axis=1)
        order = np.argsort(top, axis=1)[:, ::-1]                      # unique: no tie rule needed
        idx[r0:r0 + ROWS_PER_PIECE] = np.take_along_axis(part, order, axis=1)
    return np.take_along_axis(x, idx, axis=1), idx


def topk_lexsort(x, k: int):
    """The same top-k by another road: per row, lexsort on (index, -value, not-NaN): NaN rows
    first, then descending value (-0.0 == +0.0 compare equal, so the index decides), then the
    index. Slow (a full sort of every row); for tests."""
    x = np.asarray(x, np.float32)
    rows, cols = x.shape
    idx = np.empty((rows, k), np.int64)
    ar = np.arange(cols)
    for r in range(rows):
        v = x[r].astype(np.float64)
        nan = np.isnan(v)
        neg = np.where(nan, 0.0, -v)
        idx[r] = np.lexsort((ar, neg, ~nan))[:k]
    return np.take_along_axis(x, idx, axis=1), idx


def bytes_moved(rows: int, cols: int, k: int) -> tuple[int, int]:
    """(bytes the op must move, of those read): x read once; k values and k int32 indices
    written a row (for k = 1 that is the argmax and its value)."""
    read = 4 * rows * cols
    return read + 8 * rows * k, read
