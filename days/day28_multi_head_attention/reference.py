"""Day 28 reference: multi-head self-attention forward in float64, as torch.nn.MultiheadAttention
(batch_first=True, need_weights=False, no dropout) computes it.

    qkv = x @ w_qkv + b_qkv                  x [B, T, C], w_qkv [C, 3C], b_qkv [3C]
    q, k, v = qkv viewed as [B, T, 3, H, d]  (d = C / H), each taken to [B, H, T, d]
    o = softmax(q k^T / sqrt(d) [+ causal mask]) v      per (batch, head): [T, T] scores
    y = (o as [B, T, H*d]) @ w_o + b_o       w_o [C, C], b_o [C]

Weights are stored [in, out] (what the kernels read as the B of a GEMM): torch keeps
in_proj_weight [3C, C] and out_proj.weight [C, C] as [out, in]; from_torch() transposes them.
"""
import numpy as np


def from_torch(in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias):
    """torch's [out, in] weights -> (w_qkv [C, 3C], b_qkv [3C], w_o [C, C], b_o [C])."""
    return (np.ascontiguousarray(np.asarray(in_proj_weight).T), np.asarray(in_proj_bias),
            np.ascontiguousarray(np.asarray(out_proj_weight).T), np.asarray(out_proj_bias))


def split_heads(t: np.ndarray, heads: int) -> np.ndarray:
    """[B, T, C] -> [B, H, T, d]: what v1's permute kernel does."""
    b, n, c = t.shape
    return t.reshape(b, n, heads, c // heads).transpose(0, 2, 1, 3)


def merge_heads(t: np.ndarray) -> np.ndarray:
    """[B, H, T, d] -> [B, T, H*d]: what v1's second permute kernel does."""
    b, h, n, d = t.shape
    return t.transpose(0, 2, 1, 3).reshape(b, n, h * d)


def attention(q, k, v, causal=False):
    """softmax(q k^T / sqrt(d)) v over the last two axes, in float64 (q, k, v [..., T, d]).
    causal: query i sees keys 0..i only. One [T, T] score matrix at a time (memory)."""
    q, k, v = (np.asarray(a, dtype=np.float64) for a in (q, k, v))
    n, d = q.shape[-2], q.shape[-1]
    lead = q.shape[:-2]
    qf, kf, vf = (a.reshape(-1, n, d) for a in (q, k, v))
    out = np.empty((qf.shape[0], n, v.shape[-1]))
    masked = ~np.tril(np.ones((n, n), dtype=bool)) if causal else None
    for i in range(qf.shape[0]):
        s = qf[i] @ kf[i].T
        s *= 1.0 / np.sqrt(d)
        if causal:
            s[masked] = -np.inf
        s -= s.max(axis=-1, keepdims=True)
        np.exp(s, out=s)
        s /= s.sum(axis=-1, keepdims=True)
        out[i] = s @ vf[i]
    return out.reshape(*lead, n, v.shape[-1])


def mha(x, w_qkv, b_qkv, w_o, b_o, heads: int, causal=False):
    """y [B, T, C] in float64: the multi-head self-attention forward (module docstring)."""
    x = np.asarray(x, dtype=np.float64)
    bsz, n, c = x.shape
    qkv = (x.reshape(bsz * n, c) @ np.asarray(w_qkv, dtype=np.float64)).reshape(bsz, n, 3 * c)
    qkv += np.asarray(b_qkv, dtype=np.float64)
    q, k, v = (split_heads(qkv[..., i * c:(i + 1) * c], heads) for i in range(3))
    o = merge_heads(attention(q, k, v, causal)).reshape(bsz * n, c)
    return (o @ np.asarray(w_o, dtype=np.float64)).reshape(bsz, n, c) + np.asarray(b_o, dtype=np.float64)


def mha_per_head(x, w_qkv, b_qkv, w_o, b_o, heads: int, causal=False):
    """The same function written head by head, the way the math is usually stated:
    y = sum_h softmax(x Wq_h (x Wk_h)^T / sqrt(d)) (x Wv_h) Wo_h + b_o, with Wq_h the d columns
    of head h in the Q third of w_qkv and Wo_h the d rows of head h in w_o. A second
    formulation for the tests (no reshapes, no transposes of 4-D arrays)."""
    x = np.asarray(x, dtype=np.float64)
    w_qkv, b_qkv, w_o, b_o = (np.asarray(a, dtype=np.float64) for a in (w_qkv, b_qkv, w_o, b_o))
    bsz, n, c = x.shape
    d = c // heads
    y = np.zeros((bsz, n, c)) + b_o
    for b in range(bsz):
        for h in range(heads):
            cols = slice(h * d, (h + 1) * d)
            q = x[b] @ w_qkv[:, cols] + b_qkv[cols]
            k = x[b] @ w_qkv[:, c:][:, cols] + b_qkv[c:][cols]
            v = x[b] @ w_qkv[:, 2 * c:][:, cols] + b_qkv[2 * c:][cols]
            y[b] += attention(q, k, v, causal) @ w_o[cols, :]
    return y


def flops(bsz: int, n: int, c: int, causal: bool = False) -> int:
    """FLOPs of the forward: the QKV GEMM (2*M*C*3C, M = B*T), the output GEMM (2*M*C*C) and
    attention's two products per head (QK^T and PV: 4*T*T*d, over B*H heads = 4*B*T*T*C).
    Causal counts the T(T+1)/2 (query, key) pairs that are not masked. Softmax not counted."""
    m = bsz * n
    pairs = n * (n + 1) // 2 if causal else n * n
    return 2 * m * c * 3 * c + 2 * m * c * c + 4 * bsz * pairs * c
