"""Day 6 reference: the roll call, in numpy (the specification the kernels are checked against)."""
import numpy as np


def roll_call(x: np.ndarray, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """(ids, y): ids[i] = i (every element answers with its own number), y = alpha * x in float64."""
    x = np.asarray(x, dtype=np.float64).ravel()
    return np.arange(x.size, dtype=np.int64), alpha * x


def answered(called, total_threads: int) -> np.ndarray:
    """How many threads answer each called number when `total_threads` threads run: 1 for a
    number in [0, total_threads), 0 for one outside (no thread has it)."""
    called = np.asarray(called, dtype=np.int64)
    return ((called >= 0) & (called < total_threads)).astype(np.int32)
