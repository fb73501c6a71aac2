"""Day 5 reference: row softmax in float64 (the specification the kernels are checked against)."""
import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    """softmax over the last axis, computed stably in float64: exp(x - max) / sum exp(x - max)."""
    x = np.asarray(x, dtype=np.float64)
    z = x - x.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


def online_max_sum(row: np.ndarray) -> tuple[float, float]:
    """The online recurrence of v3, one element at a time (for the tutorial and the tests):
    returns (max, sum of exp(x - max)) without a separate max pass."""
    m, s = -np.inf, 0.0
    for v in np.asarray(row, dtype=np.float64):
        if v > m:
            s = s * np.exp(m - v) + 1.0
            m = v
        else:
            s += np.exp(v - m)
    return m, s
