"""Day 14 reference: the sum of a float32 array, and how the order of float32 additions
changes its error.

`reduce_sum` is the specification (float64 accumulation). The other functions compute the
same sum in float32 with different orders, for the tutorial and extras(): a sequential loop
(what one CPU thread does), a tree (what every GPU version does, level by level), numpy's own
np.sum (pairwise in blocks), and Kahan's compensated sum.
"""
import numpy as np


def reduce_sum(x) -> np.float64:
    """sum(x) accumulated in float64 (pairwise): exact to ~1e-16 relative for these inputs."""
    return np.asarray(x, dtype=np.float32).sum(dtype=np.float64)


def sequential_sum_float32(x) -> np.float32:
    """((x0 + x1) + x2) + ... in float32, one element at a time (np.cumsum is sequential).

    Once the running sum s is large, every x with |x| < ulp(s)/2 is rounded away: a sum of
    ones stalls at 2^24 = 16777216, where ulp(s) = 2."""
    x = np.asarray(x, dtype=np.float32)
    if x.size == 0:
        return np.float32(0)
    return np.cumsum(x, dtype=np.float32)[-1]


def tree_sum_float32(x) -> np.float32:
    """Pairwise tree in float32, like the GPU versions: pad to a power of two with zeros,
    then fold the upper half onto the lower half until one value is left (sequential
    addressing, v3). Each element goes through log2(n) additions."""
    v = np.asarray(x, dtype=np.float32).ravel()
    if v.size == 0:
        return np.float32(0)
    size = 1 << (v.size - 1).bit_length()
    v = np.concatenate([v, np.zeros(size - v.size, np.float32)])
    while v.size > 1:
        h = v.size // 2
        v = v[:h] + v[h:]
    return v[0]


def numpy_sum_float32(x) -> np.float32:
    """np.sum in float32: numpy itself sums pairwise (8 running sums over blocks of 128)."""
    return np.asarray(x, dtype=np.float32).sum(dtype=np.float32)


def _kahan_scalar(values) -> np.float32:
    s = np.float32(0)
    c = np.float32(0)
    for v in values:
        y = np.float32(v) - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


def kahan_sum_float32(x, lanes: int = 1024) -> np.float32:
    """Kahan's compensated summation in float32, run in `lanes` independent streams (lane j
    takes x[j], x[j + lanes], ... like a grid-stride thread), then the lane sums combined by
    one more Kahan pass. The compensation c holds the low bits that the last addition lost,
    and feeds them into the next one: the error no longer grows with n."""
    x = np.asarray(x, dtype=np.float32).ravel()
    if x.size == 0:
        return np.float32(0)
    lanes = max(1, min(lanes, x.size))
    rows = -(-x.size // lanes)
    pad = np.zeros(rows * lanes, np.float32)
    pad[: x.size] = x
    m = pad.reshape(rows, lanes)
    s = np.zeros(lanes, np.float32)
    c = np.zeros(lanes, np.float32)
    for r in m:
        y = r - c
        t = s + y
        c = (t - s) - y
        s = t
    return _kahan_scalar(s - c)


def relative_error(value, exact) -> float:
    return float(abs(np.float64(value) - np.float64(exact)) / abs(np.float64(exact)))


def accuracy_table(x) -> list[list]:
    """One row per method: name, float32 result, relative error vs the float64 sum."""
    exact = reduce_sum(x)
    rows = [["float64 (the reference)", f"{exact:.1f}", "0"]]
    for name, fn in [("sequential float32 (one running sum)", sequential_sum_float32),
                     ("numpy np.sum float32 (pairwise blocks)", numpy_sum_float32),
                     ("tree float32 (sequential addressing)", tree_sum_float32),
                     ("Kahan float32 (1024 lanes)", kahan_sum_float32)]:
        v = fn(x)
        rows.append([name, f"{float(v):.1f}", f"{relative_error(v, exact):.2e}"])
    return rows
