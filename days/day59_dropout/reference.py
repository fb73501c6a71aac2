"""Day 59 reference: dropout whose mask is a pure function of (seed, offset, element index).

- keep_mask(n, p, seed, offset): keep element i where word offset + i of day 58's stream
  (cuRAND's Philox4_32_10 host-API stream) is below round((1 - p) 2^32), so P(keep) =
  round((1 - p) 2^32) / 2^32 exactly. It is day 58's bernoulli(1 - p) at the same (seed, offset).
- scale(p): 1 / (1 - p) rounded once to float32 (the kernels multiply by that float); 0 at p = 1.
- dropout(x, p, seed, offset): y = x * scale where kept, exactly 0 where dropped (a select: a
  dropped inf or NaN gives 0), in float64 of the float32 inputs.
- dropout_backward(dy, p, seed, offset): the same function of dy with the same mask.
- dropout_add(x, bias, residual, p, seed, offset): residual + dropout(x + bias) for x and
  residual [rows, C], bias [C] (the sum x + bias rounded to float32 first, as the kernel does).
"""
import math

import numpy as np

from days.day58_curand_init.reference import bernoulli_threshold, u32


def keep_threshold(p: float) -> int:
    """round((1 - p) 2^32) in [0, 2^32]: a word below it keeps its element."""
    return bernoulli_threshold(1.0 - float(p))


def scale(p: float) -> np.float32:
    return np.float32(0.0) if p >= 1.0 else np.float32(1.0 / (1.0 - float(p)))


def keep_mask(n: int, p: float, seed: int, offset: int = 0) -> np.ndarray:
    """bool [n]: element i kept."""
    t = keep_threshold(p)
    if t >= 2 ** 32:
        return np.ones(n, bool)
    return u32(n, seed, offset) < np.uint32(t)


def dropout(x, p: float, seed: int, offset: int = 0) -> np.ndarray:
    """Forward: float64 of x's shape."""
    x = np.asarray(x, np.float32)
    keep = keep_mask(x.size, p, seed, offset).reshape(x.shape)
    with np.errstate(invalid="ignore", over="ignore"):
        prod = (x * scale(p)).astype(np.float64)       # one float32 product, as the kernel
    return np.where(keep, prod, 0.0)


def dropout_backward(dy, p: float, seed: int, offset: int = 0) -> np.ndarray:
    """Backward: dx = dy * scale where kept, 0 where dropped (the forward's mask, made again)."""
    return dropout(dy, p, seed, offset)


def dropout_add(x, bias, residual, p: float, seed: int, offset: int = 0) -> np.ndarray:
    """residual + dropout(x + bias[col]) over [rows, C]: float64."""
    x = np.asarray(x, np.float32)
    xb = (x + np.asarray(bias, np.float32)[None, :]).astype(np.float32)
    d = dropout(xb, p, seed, offset).astype(np.float32)
    return (np.asarray(residual, np.float32) + d).astype(np.float64)


def keep_z(kept: int, n: int, p: float) -> float:
    """How many standard errors the kept count lies from its expectation n q, q = P(keep)."""
    q = keep_threshold(p) / 2.0 ** 32
    return (kept - n * q) / math.sqrt(max(n * q * (1 - q), 1e-300))
