"""Day 60 reference: a 3x3 convolution, stride 1, zero padding 1, channels last, in float64 from
bf16 inputs.

    y[n, p, q, k] = sum_{r < 3} sum_{s < 3} sum_{c < C} x[n, p + r - 1, q + s - 1, c] * w[k, r, s, c]

x [N, H, W, C] (NHWC), w [K, 3, 3, C] (KRSC), y [N, H, W, K]; x is 0 outside the image, so the
output has the input's height and width. Like torch.nn.functional.conv2d, a cross-correlation.
x and w arrive as bf16 bit patterns (uint16: numpy has no bfloat16); the GPU writes y as bf16
bits. The float64 sum of the exact products is the true answer; a correct kernel adds fp32
accumulation error (~sqrt(9 C) 2^-24 relative) and the final rounding of y to bf16 (at most
2^-8 relative), as day 45's GEMM.
"""
import numpy as np

from common import bf16

R = S = 3            # the filter
PAD = 1              # zero padding on every side: output size = input size

# rounding y to bf16 moves an element by at most half an ulp = 2^-8 of its size (relative L2
# error below 2^-8); fp32 accumulation of 9 C <= 4608 products adds ~1e-5
TOL = 2.0 ** -8 + 1e-4

bf16_bits = bf16.to_bits
bf16_to_float = bf16.from_bits


def conv3x3(x_bits, w_bits) -> np.ndarray:
    """y [N, H, W, K] in float64 from x [N, H, W, C] and w [K, 3, 3, C] bf16 bit patterns.

    One product a tap: for tap (r, s) every output pixel reads the input pixel shifted by
    (r - 1, s - 1), so the shifted view of the zero-padded input, [N*H*W, C], times w[:, r, s, :]^T
    ([C, K]) is that tap's share of every output: nine [N H W, C] x [C, K] products."""
    x = bf16_to_float(x_bits).astype(np.float64)
    w = bf16_to_float(w_bits).astype(np.float64)
    return conv3x3_float(x, w)


def conv3x3_float(x, w) -> np.ndarray:
    """The same on float arrays (no rounding): x [N, H, W, C], w [K, 3, 3, C] -> [N, H, W, K]."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, h, wd, c = x.shape
    k = w.shape[0]
    if w.shape != (k, R, S, c):
        raise ValueError(f"w must be [K, 3, 3, C={c}], got {w.shape}")
    xp = np.zeros((n, h + 2 * PAD, wd + 2 * PAD, c))
    xp[:, PAD:PAD + h, PAD:PAD + wd, :] = x
    out = np.zeros((n * h * wd, k))
    for r in range(R):
        for s in range(S):
            out += xp[:, r:r + h, s:s + wd, :].reshape(-1, c) @ w[:, r, s, :].T
    return out.reshape(n, h, wd, k)


def conv3x3_loops(x, w) -> np.ndarray:
    """The same sum written out output by output, out-of-image taps skipped instead of read
    from a padded copy (a second formulation, for the tests: tiny shapes only)."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, h, wd, c = x.shape
    k = w.shape[0]
    y = np.zeros((n, h, wd, k))
    for a in range(n):
        for p in range(h):
            for q in range(wd):
                for kk in range(k):
                    acc = 0.0
                    for r in range(R):
                        for s in range(S):
                            ih, iw = p + r - 1, q + s - 1
                            if 0 <= ih < h and 0 <= iw < wd:
                                acc += float(np.dot(x[a, ih, iw, :], w[kk, r, s, :]))
                    y[a, p, q, kk] = acc
    return y


def flops(n, h, w, c, k) -> int:
    """2 x the multiply-adds: 9 C of them for each of the N H W K outputs (taps that fall on
    the padding included, as every library counts them)."""
    return 2 * n * h * w * k * R * S * c
