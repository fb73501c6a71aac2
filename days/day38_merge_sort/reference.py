"""Day 38 reference: stable sorting of 32-bit unsigned keys, with or without values.

The specification is numpy's stable sort: `np.sort(x)` for the keys, and for key-value pairs
the order of `np.argsort(x, kind="stable")` (equal keys keep their input order). The
functions below compute exactly that, faster than numpy's own stable argsort (timsort on 32-bit
keys: about a minute for 2^26 keys on a slow core): each key is widened to 64 bits with its
index below it, so all the wide keys differ and any sort of them is the stable order.

Also here, in plain Python, the idea every kernel is built on: the co-rank of a merge.

Keys of other types sort through an order-preserving map onto uint32 (`key_bits`): int32 by
flipping the sign bit; float32 by flipping the sign bit of positive numbers and every bit of
negative ones, after making -0.0 equal +0.0 and every NaN one quiet NaN, so that the order is
numpy's (NaNs last, -0.0 tied with +0.0 and kept in input order).
"""
import numpy as np


def sort_keys(x) -> np.ndarray:
    """The keys in ascending order (uint32)."""
    return np.sort(np.asarray(x, dtype=np.uint32))


def argsort_stable(x) -> np.ndarray:
    """np.argsort(x, kind="stable") for 32-bit unsigned keys, as int64: sort (key << 32 | i)."""
    x = np.asarray(x, dtype=np.uint32)
    wide = (x.astype(np.uint64) << np.uint64(32)) | np.arange(x.size, dtype=np.uint64)
    wide.sort()
    return (wide & np.uint64(0xFFFFFFFF)).astype(np.int64)


def sort_pairs(keys, values):
    """(keys sorted, values in the same stable order)."""
    keys = np.asarray(keys, dtype=np.uint32)
    order = argsort_stable(keys)
    return keys[order], np.asarray(values)[order]


# --- the co-rank (merge path) -----------------------------------------------------------------

def co_rank(a, b, d: int) -> int:
    """Of the first d elements of the stable merge of sorted a and b (a's element first when
    keys are equal), how many come from a: the first i with a[i] > b[d-1-i], by bisection over
    i in [max(0, d - len(b)), min(d, len(a))]."""
    lo, hi = max(0, d - len(b)), min(d, len(a))
    while lo < hi:
        mid = (lo + hi) // 2
        if a[mid] <= b[d - 1 - mid]:
            lo = mid + 1
        else:
            hi = mid
    return lo


def merge(a, b) -> np.ndarray:
    """Stable merge of two sorted arrays, one output at a time from its co-rank (the textbook
    parallel merge, v1, written as a loop)."""
    out = []
    for d in range(len(a) + len(b)):
        i = co_rank(a, b, d)
        j = d - i
        take_a = i < len(a) and (j >= len(b) or a[i] <= b[j])
        out.append(a[i] if take_a else b[j])
    return np.asarray(out, dtype=np.asarray(a).dtype)


def merge_sort(x) -> np.ndarray:
    """Bottom-up merge sort by co-rank merges: runs of 1, 2, 4, ... merged in pairs."""
    runs = [np.asarray(x)[i:i + 1] for i in range(len(x))]
    while len(runs) > 1:
        runs = [merge(runs[i], runs[i + 1]) if i + 1 < len(runs) else runs[i]
                for i in range(0, len(runs), 2)]
    return runs[0] if runs else np.asarray(x)[:0]


# --- keys of other types ------------------------------------------------------------------------

def key_bits(x) -> np.ndarray:
    """uint32 keys whose unsigned order (stable) is numpy's stable order of x, for x uint32,
    int32 or float32."""
    x = np.asarray(x)
    if x.dtype == np.uint32:
        return x.copy()
    if x.dtype == np.int32:
        return x.view(np.uint32) ^ np.uint32(0x80000000)
    if x.dtype == np.float32:
        canon = np.where(np.isnan(x), np.float32(np.nan), x + np.float32(0.0))  # -0.0 + 0.0 = +0.0
        bits = canon.astype(np.float32).view(np.uint32)
        neg = (bits >> np.uint32(31)).astype(bool)
        return np.where(neg, ~bits, bits | np.uint32(0x80000000)).astype(np.uint32)
    raise TypeError(f"key_bits takes uint32, int32 or float32, got {x.dtype}")


def from_key_bits(k, dtype) -> np.ndarray:
    """The inverse of key_bits for uint32 and int32 keys."""
    k = np.asarray(k, dtype=np.uint32)
    if np.dtype(dtype) == np.uint32:
        return k.copy()
    if np.dtype(dtype) == np.int32:
        return (k ^ np.uint32(0x80000000)).view(np.int32)
    raise TypeError(f"from_key_bits inverts uint32 and int32 keys, not {np.dtype(dtype)}")
