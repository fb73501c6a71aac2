"""Day 11 reference: 1D convolution with zero padding, "same" length, in float64.

    y[i] = sum_{j=0}^{K-1} w[j] * x[i + j - r],   K = 2r + 1 (odd),  x[k] = 0 outside [0, n)

This is a cross-correlation (the filter is not flipped), as in deep learning libraries
(torch.nn.functional.conv1d) and image processing.
"""
import numpy as np


def conv1d(x, w):
    """The spec, in float64: y has the length of x; the filter is centred on each output."""
    x = np.asarray(x, dtype=np.float64).ravel()
    w = np.asarray(w, dtype=np.float64).ravel()
    n, k = x.size, w.size
    if k % 2 == 0:
        raise ValueError(f"the filter width must be odd, got {k}")
    r = k // 2
    if n == 0:
        return np.zeros(0)  # np.correlate refuses an empty signal; "same" length is 0
    # 'full' correlation has n + K - 1 outputs; output i of 'same' is entry i + r of 'full'
    # (np.correlate's own 'same' mode returns max(n, K) values, wrong when n < K)
    return np.correlate(x, w, mode="full")[r:r + n]


def conv1d_shifted_sums(x, w):
    """The same, written as K shifted copies of the zero-padded signal (a second formulation,
    for the tests): y = sum_j w[j] * xpad[j : j + n]."""
    x = np.asarray(x, dtype=np.float64).ravel()
    w = np.asarray(w, dtype=np.float64).ravel()
    n, r = x.size, w.size // 2
    xpad = np.concatenate([np.zeros(r), x, np.zeros(r)])
    y = np.zeros(n)
    for j, wj in enumerate(w):
        y += wj * xpad[j:j + n]
    return y
