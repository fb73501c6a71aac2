"""Day 31 reference: 2D convolution of a batch of multi-channel images (NCHW), in float64.

    y[n, k, oy, ox] = b[k] + sum_{c < C} sum_{r < R} sum_{s < R}
                             w[k, c, r, s] * x[n, c, oy*S - P + r, ox*S - P + s]

x [N, C, H, W], w [K, C, R, R] (a square R x R filter), b [K], y [N, K, Ho, Wo] with
Ho = (H + 2P - R) // S + 1 and Wo = (W + 2P - R) // S + 1; x is 0 outside the image (zero
padding P on every side), S is the stride. Like every deep-learning library
(torch.nn.functional.conv2d) this is a cross-correlation: the filter is not flipped.
"""
import numpy as np


def out_size(h: int, r: int, s: int, p: int) -> int:
    """Output rows (or columns) of a convolution: the filter's top-left corner steps by S over
    the padded image and must keep the whole R x R window inside it."""
    return (h + 2 * p - r) // s + 1


def conv2d(x, w, b=None, stride: int = 1, pad: int = 0):
    """The spec, in float64: one matrix product per filter row r.

    For a fixed tap (r, s), every output pixel reads one input pixel per channel: the strided
    slice xpad[:, r + S*oy, s + S*ox, :] ([N, Ho, Wo, C], channels last) times w[:, :, r, s].T
    ([C, K]) is that tap's share of every output, for all N, Ho, Wo and K at once. The R taps
    of a filter row go into one product ([N*Ho*Wo, R*C] @ [R*C, K]): fewer, larger products.
    """
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, c, h, wd = x.shape
    k, c2, r, r2 = w.shape
    if c2 != c or r2 != r:
        raise ValueError(f"w must be [K, C={c}, R, R], got {w.shape}")
    b = np.zeros(k) if b is None else np.asarray(b, dtype=np.float64).reshape(k)
    ho, wo = out_size(h, r, stride, pad), out_size(wd, r, stride, pad)
    if ho < 1 or wo < 1:
        raise ValueError(f"a {r}x{r} filter does not fit a {h}x{wd} image padded by {pad}")
    xp = np.zeros((n, h + 2 * pad, wd + 2 * pad, c))
    xp[:, pad:pad + h, pad:pad + wd, :] = x.transpose(0, 2, 3, 1)
    out = np.zeros((n * ho * wo, k))
    for i in range(r):
        rows = xp[:, i:i + stride * (ho - 1) + 1:stride]                   # [N, Ho, Wp, C]
        patch = np.stack([rows[:, :, j:j + stride * (wo - 1) + 1:stride] for j in range(r)],
                         axis=3)                                           # [N, Ho, Wo, R, C]
        out += patch.reshape(-1, r * c) @ w[:, :, i, :].transpose(2, 1, 0).reshape(r * c, k)
    out += b
    return np.ascontiguousarray(out.reshape(n, ho, wo, k).transpose(0, 3, 1, 2))


def conv2d_loops(x, w, b=None, stride: int = 1, pad: int = 0):
    """The same sum written out output by output (a second formulation, for the tests: slow,
    tiny shapes only). Out-of-image taps are skipped instead of read from a padded copy."""
    x = np.asarray(x, dtype=np.float64)
    w = np.asarray(w, dtype=np.float64)
    n, c, h, wd = x.shape
    k, _, r, _ = w.shape
    b = np.zeros(k) if b is None else np.asarray(b, dtype=np.float64)
    ho, wo = out_size(h, r, stride, pad), out_size(wd, r, stride, pad)
    y = np.zeros((n, k, ho, wo))
    for a in range(n):
        for kk in range(k):
            for oy in range(ho):
                for ox in range(wo):
                    acc = b[kk]
                    for cc in range(c):
                        for i in range(r):
                            iy = oy * stride - pad + i
                            if not 0 <= iy < h:
                                continue
                            for j in range(r):
                                ix = ox * stride - pad + j
                                if 0 <= ix < wd:
                                    acc += w[kk, cc, i, j] * x[a, cc, iy, ix]
                    y[a, kk, oy, ox] = acc
    return y


def flops(n, c, h, w, k, r, s, p) -> int:
    """Multiply-adds x 2: C*R*R of them for each of the N*K*Ho*Wo outputs (the bias add is
    not counted)."""
    return 2 * n * k * out_size(h, r, s, p) * out_size(w, r, s, p) * c * r * r


def nbytes(n, c, h, w, k, r, s, p) -> tuple[int, int]:
    """(bytes moved, of which read): x, w and b read once, y written once, float32."""
    read = 4 * (n * c * h * w + k * c * r * r + k)
    written = 4 * n * k * out_size(h, r, s, p) * out_size(w, r, s, p)
    return read + written, read
