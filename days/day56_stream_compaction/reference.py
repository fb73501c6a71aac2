"""Day 56 reference: stream compaction in numpy (the specification).

    select(x, t)     -> x[x > t]                                   (order kept)
    partition(x, t)  -> (concat(x[x > t], x[~(x > t)][::-1]), count)  (CUB's order: the
                        rejected come after the selected, REVERSED)
    unique(x)        -> x[keep], keep[0] = True, keep[i] = x[i] != x[i-1]
                        (consecutive duplicates dropped, as cub::DeviceSelect::Unique; on
                        sorted input it is np.unique)

Values are float32 and only moved, never computed with, so the results are exact. NaN is
never selected (NaN > t is false) and never equal to anything (every NaN is kept by unique).
The kernels also return the count (how many selected / kept), as an int32.
"""
import numpy as np


def select_flags(x, t) -> np.ndarray:
    """The 0/1 flags of select and partition: x > t, compared exactly (in float64, so a
    threshold between two float32 values means what it says)."""
    return np.asarray(x, np.float32).astype(np.float64) > float(t)


def unique_flags(x) -> np.ndarray:
    """The 0/1 flags of unique: the first element, and every element unlike the one before."""
    x = np.asarray(x, np.float32)
    keep = np.ones(x.shape, bool)
    keep[1:] = x[1:] != x[:-1]
    return keep


def positions(flags) -> np.ndarray:
    """Where each kept element goes: the exclusive prefix sum of the flags (the scan the whole
    day is built on). positions([1, 0, 1, 1]) = [0, 1, 1, 2]."""
    f = np.asarray(flags, np.int64)
    return np.cumsum(f) - f


def select(x, t) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x[select_flags(x, t)]


def partition(x, t) -> tuple[np.ndarray, int]:
    """(y, count): the count selected first in order, then the rejected in reverse order."""
    x = np.asarray(x, np.float32)
    f = select_flags(x, t)
    return np.concatenate([x[f], x[~f][::-1]]), int(f.sum())


def unique(x) -> np.ndarray:
    x = np.asarray(x, np.float32)
    return x[unique_flags(x)]


def compact(op: str, x, t=0.0) -> tuple[np.ndarray, int]:
    """(y, count) of `op` ('select', 'partition', 'unique'), as the kernels return them."""
    if op == "select":
        y = select(x, t)
        return y, y.size
    if op == "partition":
        return partition(x, t)
    if op == "unique":
        y = unique(x)
        return y, y.size
    raise ValueError(f"unknown op {op!r}: select, partition or unique")


def threshold_for(pct: int) -> np.float32:
    """The threshold that keeps about pct% of uniform [0, 1) float32 values with x > t:
    exactly none at 0 (t = 1, above every value), exactly all at 100 (t = -1)."""
    if pct <= 0:
        return np.float32(1.0)
    if pct >= 100:
        return np.float32(-1.0)
    return np.float32(1.0 - pct / 100.0)


def runs_input(n: int, pct: int, rng) -> np.ndarray:
    """Input for unique: runs of equal values where about pct% of the positions start a new
    run (position 0 always does). Run r holds (r mod 2^20) / 2 - 1000: exact in float32, and
    consecutive runs always differ (r and r + 1 differ mod 2^20)."""
    starts = rng.random(n) < pct / 100.0
    if n:
        starts[0] = True
    run = np.cumsum(starts, dtype=np.int64) - 1
    return ((run % (1 << 20)) * 0.5 - 1000.0).astype(np.float32)
