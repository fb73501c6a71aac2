"""Day 2 reference: c = a + b in float64."""
import numpy as np


def vector_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.asarray(a, np.float64) + np.asarray(b, np.float64)
