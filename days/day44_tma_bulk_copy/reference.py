"""Day 44 reference: a copy and a transpose move values without arithmetic, so the GPU must
match exactly (the driver sets the tolerance to 0: one element off by an ulp fails)."""
import numpy as np


def copy(x) -> np.ndarray:
    return np.array(x, dtype=np.float64)


def transpose(x) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(x, dtype=np.float64).T)
