"""Day 54 reference: row softmax in float64, and the split-and-merge form the kernels compute
(each slice of a row gives its own (max, sum of exp), the row's pair is their merge)."""
import numpy as np

from days.day05_shared_softmax.reference import softmax  # noqa: F401  (day 5's specification)


def slice_pairs(x, parts: int) -> tuple[np.ndarray, np.ndarray]:
    """(m, s) of every slice: the row's columns cut into `parts` runs of ceil(cols / parts)
    (the last runs may be short or empty: m = -inf, s = 0). Shapes [rows, parts]."""
    x = np.asarray(x, dtype=np.float64)
    rows, cols = x.shape
    per = -(-cols // parts)
    pad = np.full((rows, per * parts), -np.inf)
    pad[:, :cols] = x
    blocks = pad.reshape(rows, parts, per)
    m = blocks.max(axis=-1)
    with np.errstate(invalid="ignore"):  # an empty slice: exp(-inf - -inf) is NaN, set to 0
        s = np.where(np.isfinite(m), np.exp(blocks - m[..., None]).sum(axis=-1), 0.0)
    return m, s


def merge_pairs(m: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The row's (M, S) from its slices' pairs: M = max m_p, S = sum s_p exp(m_p - M)."""
    M = m.max(axis=-1)
    with np.errstate(invalid="ignore"):
        w = np.where(np.isfinite(m), np.exp(m - M[..., None]), 0.0)
    return M, (s * w).sum(axis=-1)


def softmax_split(x, parts: int) -> np.ndarray:
    """softmax through `parts` slices a row, as the cluster kernels do it (a second formulation
    of softmax() for the tests): y = exp(x - M) / S with (M, S) merged from the slices."""
    x = np.asarray(x, dtype=np.float64)
    M, S = merge_pairs(*slice_pairs(x, parts))
    return np.exp(x - M[:, None]) / S[:, None]
