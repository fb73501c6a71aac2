"""Day 15 reference: the forward pass of the affine layer + softmax + cross-entropy, float64.

    Z = X W + b,  logp = log_softmax(Z),  loss = (1/m) sum_i -logp[i, y_i]
"""
import numpy as np


def logsumexp(z: np.ndarray) -> np.ndarray:
    """log sum_j exp(z[..., j]) over the last axis, stably: max + log sum exp(z - max)."""
    z = np.asarray(z, dtype=np.float64)
    mx = z.max(axis=-1)
    return mx + np.log(np.exp(z - mx[..., None]).sum(axis=-1))


def forward_all(X, W, b, y):
    """(loss, lse, logp) of the layer in float64: lse [m] the row log-sum-exps, logp [m, c].
    An empty batch (m = 0) has loss 0.0."""
    X = np.asarray(X, dtype=np.float64)
    W = np.asarray(W, dtype=np.float64)
    y = np.asarray(y)
    logp = X @ W                       # m x c; the m x c arrays are reused in place below
    logp += np.asarray(b, dtype=np.float64)
    mx = logp.max(axis=1, keepdims=True) if logp.size else np.zeros((logp.shape[0], 1))
    logp -= mx
    s = np.exp(logp).sum(axis=1, keepdims=True)
    logp -= np.log(s)
    lse = (mx + np.log(s))[:, 0]
    loss = -logp[np.arange(len(y)), y].mean() if len(y) else 0.0
    return float(loss), lse, logp


def forward(X, W, b, y):
    """(loss, logp) of the layer in float64. X [m, d], W [d, c], b [c], y [m] ints in [0, c)."""
    loss, _, logp = forward_all(X, W, b, y)
    return loss, logp


def cross_entropy(X, W, b, y):
    """(loss, lse) of the layer in float64: what the fused versions return."""
    loss, lse, _ = forward_all(X, W, b, y)
    return loss, lse


def tile_stats(z: np.ndarray, tile: int = 128):
    """What v3's GEMM epilogue writes: per row and per column tile, (max, sum exp(z - max))."""
    z = np.asarray(z, dtype=np.float64)
    m, c = z.shape
    nt = -(-c // tile)
    mx = np.empty((m, nt))
    s = np.empty((m, nt))
    for t in range(nt):
        blk = z[:, t * tile:(t + 1) * tile]
        mx[:, t] = blk.max(axis=1)
        s[:, t] = np.exp(blk - mx[:, t:t + 1]).sum(axis=1)
    return mx, s


def merge_stats(mx: np.ndarray, s: np.ndarray) -> np.ndarray:
    """lse of each row from its tiles' (max, sum): what v3's finishing kernel computes.
    Each tile's sum is rescaled to the row max: sum_t s_t exp(max_t - M)."""
    M = mx.max(axis=1)
    return M + np.log((s * np.exp(mx - M[:, None])).sum(axis=1))
