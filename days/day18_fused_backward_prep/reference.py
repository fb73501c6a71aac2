"""Day 18 reference: the attention QKV permute with the Q scale, and its backward, in float64.

    forward:   qkv[B, T, 3, NH, HS]  ->  q, k, v[B, NH, T, HS],  q scaled by `scale`
    backward:  dq, dk, dv[B, NH, T, HS]  ->  dqkv[B, T, 3, NH, HS],  the Q part scaled by `scale`

The backward is the transpose (adjoint) of the forward: forward is "scale Q, then permute",
a permutation matrix P times a diagonal S, and (P S)^T = S P^-1: un-permute, scale the Q part by
the same factor. With scale = 1 it is the exact inverse.
"""
import numpy as np


def default_scale(hs: int) -> np.float32:
    """1/sqrt(HS) as the float32 the kernels multiply by."""
    return np.float32(1.0 / np.sqrt(hs))


def permute(qkv, scale) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """q, k, v[B, NH, T, HS] from qkv[B, T, 3, NH, HS] (float64), q multiplied by scale."""
    x = np.asarray(qkv, dtype=np.float64)
    if x.ndim != 5 or x.shape[2] != 3:
        raise ValueError(f"qkv must be [B, T, 3, NH, HS], got shape {x.shape}")
    # np.array copies: a contiguous view (B = T = 1, say) must not alias the input
    q, k, v = (np.array(x[:, :, s].transpose(0, 2, 1, 3)) for s in range(3))
    q *= float(scale)
    return q, k, v


def unpermute(dq, dk, dv, scale) -> np.ndarray:
    """dqkv[B, T, 3, NH, HS] from dq, dk, dv[B, NH, T, HS] (float64), the Q part times scale."""
    g = [np.asarray(a, dtype=np.float64) for a in (dq, dk, dv)]
    if g[0].ndim != 4 or any(a.shape != g[0].shape for a in g):
        raise ValueError("dq, dk, dv must be [B, NH, T, HS] arrays of one shape")
    b, nh, t, hs = g[0].shape
    out = np.empty((b, t, 3, nh, hs))
    for s, a in enumerate(g):
        out[:, :, s] = a.transpose(0, 2, 1, 3)
    out[:, :, 0] *= float(scale)
    return out


def permute_loops(qkv, scale):
    """The index formula of the kernels, one element at a time on the flat arrays (slow; for
    the tests): output element i of [B, NH, T, HS] reads qkv at ((b*T + t)*3 + s)*NH*HS + h*HS + e."""
    x = np.asarray(qkv, dtype=np.float64)
    b_, t_, _, nh_, hs_ = x.shape
    flat = x.ravel()
    outs = [np.empty(b_ * nh_ * t_ * hs_) for _ in range(3)]
    for i in range(b_ * nh_ * t_ * hs_):
        e = i % hs_
        t = (i // hs_) % t_
        h = (i // (hs_ * t_)) % nh_
        b = i // (hs_ * t_ * nh_)
        for s in range(3):
            outs[s][i] = flat[(((b * t_ + t) * 3 + s) * nh_ + h) * hs_ + e]
    outs[0] *= float(scale)
    return tuple(o.reshape(b_, nh_, t_, hs_) for o in outs)
