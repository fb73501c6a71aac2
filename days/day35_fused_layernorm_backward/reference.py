"""Day 35 reference: LayerNorm backward in float64 (the specification the kernels are checked
against), and the forward statistics it takes.

    xhat   = (x - mean[:, None]) * rstd[:, None]
    g      = dy * gamma
    dx     = rstd[:, None] * (g - mean_c(g) - xhat * mean_c(g * xhat))
    dgamma = sum_r dy * xhat
    dbeta  = sum_r dy

mean and rstd are what the forward saved (day 9: float32 values), used as given: the backward
does not recompute them from x (nor does torch's native_layer_norm_backward).
"""
import numpy as np

EPS = 1e-5


def stats(x, eps=EPS):
    """(mean, rstd) of each row of x, computed in float64 and rounded to float32: what day 9's
    forward saves (biased variance, rstd = 1 / sqrt(var + eps))."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=1)
    var = ((x - mean[:, None]) ** 2).mean(axis=1)
    return mean.astype(np.float32), (1.0 / np.sqrt(var + eps)).astype(np.float32)


def layernorm_backward(x, dy, gamma, mean, rstd):
    """(dx [N, C], dgamma [C], dbeta [C]) in float64."""
    x = np.asarray(x, dtype=np.float64)
    dy = np.asarray(dy, dtype=np.float64)
    gamma = np.asarray(gamma, dtype=np.float64)
    mean = np.asarray(mean, dtype=np.float64).reshape(-1, 1)
    rstd = np.asarray(rstd, dtype=np.float64).reshape(-1, 1)
    xhat = (x - mean) * rstd
    g = dy * gamma
    dx = rstd * (g - g.mean(axis=1, keepdims=True) - xhat * (g * xhat).mean(axis=1, keepdims=True))
    return dx, (dy * xhat).sum(axis=0), dy.sum(axis=0)


def layernorm_forward(x, gamma, beta, eps=EPS):
    """out = (x - mean) / sqrt(var + eps) * gamma + beta in float64, with the statistics taken
    from x itself (used by the tests: finite differences of this must equal the backward)."""
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(axis=1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * np.asarray(gamma, np.float64) + np.asarray(beta, np.float64)
