"""Day 26 reference: scaled dot-product attention and its row logsumexp, in float64.

q, k, v are [BH, N, D] (BH = batch x heads, N positions, D the head dim). For each head and
query row r:
    s_rk   = scale * q_r . k_k           (scale = 1 / sqrt(D) by default; k <= r when causal)
    lse_r  = log sum_k exp(s_rk)         (natural log; day 27's backward reads it)
    o_r    = sum_k exp(s_rk - lse_r) v_k
"""
import numpy as np


def _heads(x, name):
    x = np.asarray(x)
    if x.ndim != 3:
        raise ValueError(f"{name} must be [BH, N, D]")
    return x


def attention(q, k, v, causal=False, scale=None, dtype=np.float64):
    """(o [BH, N, D], lse [BH, N]) computed in `dtype` (float64: the specification; float32:
    the same computation in single precision, whose error sets the day's tolerance). One head
    at a time, so memory stays at one N x N matrix."""
    q, k, v = (_heads(a, n).astype(dtype) for a, n in ((q, "q"), (k, "k"), (v, "v")))
    bh, n, d = q.shape
    scale = dtype(1.0 / np.sqrt(d) if scale is None else scale)
    o = np.empty((bh, n, d), dtype)
    lse = np.empty((bh, n), dtype)
    # causal: add -inf above the diagonal (one vectorized add, no boolean indexing)
    bias = np.triu(np.full((n, n), -np.inf, dtype), 1) if causal else None
    for h in range(bh):
        s = q[h] @ k[h].T
        s *= scale
        if causal:
            s += bias
        m = s.max(axis=1, keepdims=True)
        s -= m
        np.exp(s, out=s)                      # s now holds exp(s - m)
        tot = s.sum(axis=1, keepdims=True)
        o[h] = (s @ v[h]) / tot
        lse[h] = (m + np.log(tot))[:, 0]
    return o, lse


def flash_tiled(q, k, v, causal=False, scale=None, block_m=64, block_n=64):
    """The flash algorithm in numpy (float64), for the tutorial and the tests: query blocks of
    block_m rows walk the keys block_n at a time keeping, per row, the running max m, the running
    sum l of exp(s - m) and the unnormalized output acc; a new tile rescales both by
    exp(m_old - m_new). Key tiles entirely above the diagonal are skipped when causal. The result
    equals attention() up to rounding; no N x N array is ever built."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    bh, n, d = q.shape
    scale = 1.0 / np.sqrt(d) if scale is None else scale
    o = np.empty((bh, n, d))
    lse = np.empty((bh, n))
    for h in range(bh):
        for m0 in range(0, n, block_m):
            rows = np.arange(m0, min(n, m0 + block_m))
            m = np.full(len(rows), -np.inf)
            l = np.zeros(len(rows))
            acc = np.zeros((len(rows), d))
            n_end = min(n, m0 + block_m) if causal else n
            for n0 in range(0, n_end, block_n):
                cols = np.arange(n0, min(n, n0 + block_n))
                s = (q[h, rows] @ k[h, cols].T) * scale
                if causal:
                    s[cols[None, :] > rows[:, None]] = -np.inf
                m_new = np.maximum(m, s.max(axis=1))
                alpha = np.exp(m - m_new)          # exp(-inf) = 0 the first time
                p = np.exp(s - m_new[:, None])
                l = l * alpha + p.sum(axis=1)
                acc = acc * alpha[:, None] + p @ v[h, cols]
                m = m_new
            o[h, rows] = acc / l[:, None]
            lse[h, rows] = m + np.log(l)
    return o, lse


def flops(bh, n, d, causal):
    """FLOPs of the useful work: 2 d per score for q.k and 2 d per score for p.v; causal keeps
    the n (n + 1) / 2 scores on and below the diagonal."""
    scores = n * (n + 1) // 2 if causal else n * n
    return 4 * bh * d * scores


def workspace_bytes_naive(bh, n):
    """The N x N score/probability buffer of the three-kernel version, in bytes (float32)."""
    return 4 * bh * n * n
