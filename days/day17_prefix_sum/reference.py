"""Day 17 reference: inclusive and exclusive prefix sums of int32, wrapping modulo 2^32
like int32 arithmetic on the GPU. Plus the two classic block algorithms written out in numpy
(Hillis-Steele and Blelloch), for the tutorial and as second formulations in the tests."""
import numpy as np


def _as_int32(x) -> np.ndarray:
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x.view(np.int32)
    return x.astype(np.int32, copy=False)


def inclusive_scan(x) -> np.ndarray:
    """y[i] = x[0] + ... + x[i], int32 wrapping modulo 2^32 (accumulated exactly in int64,
    then wrapped: integer addition mod 2^32 is associative, so the order does not matter)."""
    x = _as_int32(x).ravel()
    return np.cumsum(x, dtype=np.int64).astype(np.int32)


def exclusive_scan(x) -> np.ndarray:
    """y[i] = x[0] + ... + x[i-1], y[0] = 0 (int32, wrapping)."""
    inc = inclusive_scan(x)
    out = np.zeros_like(inc)
    out[1:] = inc[:-1]
    return out


def prefix_sum(x, exclusive: bool = False) -> np.ndarray:
    return exclusive_scan(x) if exclusive else inclusive_scan(x)


def hillis_steele(x) -> np.ndarray:
    """Inclusive scan by Hillis-Steele: log2(n) steps, at step k every element adds the one
    2^k to its left (n log n adds; what v1 does inside a block)."""
    y = _as_int32(x).ravel().astype(np.int64)
    offset = 1
    while offset < y.size:
        y = np.concatenate([y[:offset], y[offset:] + y[:-offset]])  # a new array: no races
        offset *= 2
    return y.astype(np.int32)


def blelloch(x) -> np.ndarray:
    """Exclusive scan by Blelloch's up-sweep / down-sweep on a power-of-two padded array
    (2(n - 1) adds; what v2 does inside a block)."""
    v = _as_int32(x).ravel().astype(np.int64)
    n = v.size
    size = 1 << max(0, (n - 1).bit_length())
    a = np.zeros(size, np.int64)
    a[:n] = v
    step = 1
    while step < size:  # up-sweep: a[k*2s + 2s - 1] += a[k*2s + s - 1]
        a[2 * step - 1::2 * step] += a[step - 1::2 * step]
        step *= 2
    a[-1] = 0
    while step > 1:     # down-sweep: left child <- parent, right child <- parent + old left
        step //= 2
        left = a[step - 1::2 * step].copy()
        a[step - 1::2 * step] = a[2 * step - 1::2 * step]
        a[2 * step - 1::2 * step] += left
    return a[:n].astype(np.int32)
