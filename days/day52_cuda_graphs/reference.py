"""Day 52 reference: a chain of K affine steps, y = f_{K-1}(...f_0(x)), f_k(v) = a[k] * v + b[k].

The whole chain is itself one affine map y = P * x + C (P the product of the a's, C what the
b's add up to after the later steps scale them), so numpy computes it in one vector operation
after a scalar loop over the K coefficients, in float64.
"""
import numpy as np


def compose(a, b) -> tuple[float, float]:
    """(P, C) with f_{K-1} o ... o f_0 (v) = P * v + C, in float64.

    Step k maps P*v + C to a[k]*(P*v + C) + b[k]: P <- a[k]*P, C <- a[k]*C + b[k]."""
    p, c = 1.0, 0.0
    for ak, bk in zip(np.asarray(a, np.float64).tolist(), np.asarray(b, np.float64).tolist()):
        p, c = ak * p, ak * c + bk
    return p, c


def chain(x, a, b) -> np.ndarray:
    """y = f_{K-1}(...f_0(x)) element by element, f_k(v) = a[k] * v + b[k]; K = len(a)."""
    p, c = compose(a, b)
    return p * np.asarray(x, np.float64) + c


def chain_step_by_step(x, a, b) -> np.ndarray:
    """The same chain applied one step at a time (what the K kernels do), in float64: a second
    formulation for the tests."""
    y = np.asarray(x, np.float64).copy()
    for ak, bk in zip(np.asarray(a, np.float64), np.asarray(b, np.float64)):
        y = ak * y + bk
    return y


def exact_inputs(kernels: int, n: int, rng):
    """Inputs for which float32 is exact at every step: x whole numbers in [-1000, 1000],
    a[k] = +-1, b[k] whole numbers in [-4, 4]. Every intermediate value is a whole number of
    magnitude at most 1000 + 4 * K (< 2^24 for K < 4 million), so a*v + b is exact in float32
    with or without fused multiply-add, and the GPU's output must equal the reference exactly."""
    x = rng.integers(-1000, 1001, n).astype(np.float32)
    a = rng.choice(np.array([-1.0, 1.0], np.float32), kernels)
    b = rng.integers(-4, 5, kernels).astype(np.float32)
    return x, a, b
