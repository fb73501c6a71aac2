"""Day 4 reference: row softmax in float64, and the naive formula for the overflow lesson."""
import numpy as np


def softmax(x: np.ndarray) -> np.ndarray:
    """Stable softmax over the last axis (the specification)."""
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def naive_softmax_float32(x: np.ndarray) -> np.ndarray:
    """exp(x) / sum exp(x) evaluated in float32 as v1 does: overflows for x > 88.72."""
    x = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        return e / e.sum(axis=-1, keepdims=True, dtype=np.float32)


FLOAT32_EXP_LIMIT = float(np.log(np.finfo(np.float32).max))  # 88.72...
