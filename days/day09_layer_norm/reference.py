"""Day 9 reference: LayerNorm forward in float64 (the specification), and float32 emulations of
the ways a kernel can compute a row's mean and variance (for the stability lesson and tests).

    out[r, :] = (x[r, :] - mean[r]) * rstd[r] * weight + bias
    mean[r]   = sum_j x[r, j] / C
    rstd[r]   = 1 / sqrt(var[r] + eps),   var[r] = sum_j (x[r, j] - mean[r])^2 / C   (biased, as torch)
"""
import numpy as np

EPS = 1e-5


def layer_norm(x, weight, bias, eps=EPS):
    """LayerNorm over the last axis of a 2-D array, in float64. Returns (out, mean, rstd)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    b = np.asarray(bias, dtype=np.float64)
    mean = x.mean(axis=-1)
    d = x - mean[:, None]
    var = np.einsum("ij,ij->i", d, d) / x.shape[-1]  # = mean of d^2, without a temporary
    rstd = 1.0 / np.sqrt(var + eps)
    d *= rstd[:, None]  # in place: the benchmark sizes are 512 MB in float64
    d *= w
    d += b
    return d, mean, rstd


# --- float32 emulations -----------------------------------------------------------------------
# Each walks the columns in order, as one GPU thread per row would (v1), with every operation
# rounded to float32. They return (out, mean, rstd) in float32 so they can be checked against
# layer_norm() with the same tolerance as the kernels.

METHODS = ("naive", "two_pass", "welford", "corrected")
_F = np.float32


def layer_norm_float32(x, weight, bias, eps=EPS, method="corrected"):
    """LayerNorm computed in float32 by one of METHODS:

    naive      one pass: var = E[x^2] - E[x]^2. Catastrophic cancellation when |mean| >> std.
    two_pass   mean first, then var = E[(x - mean)^2]: the variance is right, but mean is a
               float32 and x - mean inherits its rounding error (ulp(mean) / 2).
    welford    one pass, running mean and M2 (Welford 1962): the variance is right, the mean
               has the same float32 rounding problem as two_pass.
    corrected  the corrected two-pass algorithm (what every kernel here does): m0 = E[x], then
               a = sum(x - m0), q = sum((x - m0)^2) in one more pass; the mean is carried as
               m0 + a/C (two floats), var = q/C - (a/C)^2, and out uses (x - m0) - a/C.
    """
    x = np.asarray(x, dtype=_F)
    w = np.asarray(weight, dtype=_F)
    b = np.asarray(bias, dtype=_F)
    n, c = x.shape
    cf = _F(c)
    corr = np.zeros(n, _F)  # the second float of the mean (only 'corrected' uses it)
    if method == "naive":
        s, q = np.zeros(n, _F), np.zeros(n, _F)
        for j in range(c):
            s += x[:, j]
            q += x[:, j] * x[:, j]
        m = s / cf
        var = q / cf - m * m
    elif method == "two_pass":
        s = np.zeros(n, _F)
        for j in range(c):
            s += x[:, j]
        m = s / cf
        q = np.zeros(n, _F)
        for j in range(c):
            d = x[:, j] - m
            q += d * d
        var = q / cf
    elif method == "welford":
        m, m2 = np.zeros(n, _F), np.zeros(n, _F)
        for j in range(c):
            d = x[:, j] - m
            m = m + d / _F(j + 1)
            m2 = m2 + d * (x[:, j] - m)
        var = m2 / cf
    elif method == "corrected":
        s = np.zeros(n, _F)
        for j in range(c):
            s += x[:, j]
        m = s / cf
        a, q = np.zeros(n, _F), np.zeros(n, _F)
        for j in range(c):
            d = x[:, j] - m
            a += d
            q += d * d
        corr = a / cf
        var = np.maximum(q / cf - corr * corr, _F(0))
    else:
        raise ValueError(f"unknown method {method!r}; one of {METHODS}")
    with np.errstate(invalid="ignore"):  # naive: var + eps can be negative -> NaN, the lesson
        rstd = _F(1) / np.sqrt(var + _F(eps))
    out = ((x - m[:, None]) - corr[:, None]) * rstd[:, None] * w + b
    return out.astype(_F), (m + corr).astype(_F), rstd.astype(_F)


def welford_merge(a, b):
    """Chan et al.'s merge of two Welford states (count, mean, M2): what the shuffles in the
    demo kernel do. float64, for the tests."""
    na, ma, m2a = a
    nb, mb, m2b = b
    n = na + nb
    if n == 0:
        return 0, 0.0, 0.0
    delta = mb - ma
    return n, ma + delta * nb / n, m2a + m2b + delta * delta * na * nb / n
