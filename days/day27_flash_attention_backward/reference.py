"""Day 27 reference: attention forward and backward in float64 (the specification).

Shapes: q, k, v, o, do [BH, N, d] (one [N, d] matrix per batch*head), lse [BH, N].
scale = 1/sqrt(d); causal masks key j > query i.

    S = scale * q k^T,  P = exp(S - LSE),  O = P v,  LSE_i = log sum_j exp(S_ij)
    dV = P^T dO,  dP = dO v^T,  D_i = sum_e dO_ie O_ie,  dS = P * (dP - D),
    dQ = scale * dS k,  dK = scale * dS^T q
"""
import numpy as np


def _mask(n: int) -> np.ndarray:
    """True where key j > query i (what causal attention hides)."""
    return np.triu(np.ones((n, n), bool), k=1)


def forward(q, k, v, causal=False, dtype=np.float64):
    """(O [BH, N, d], LSE [BH, N]) of softmax(scale q k^T) v, head by head, in `dtype`."""
    q, k, v = (np.asarray(x, dtype) for x in (q, k, v))
    bh, n, d = q.shape
    scale = dtype(1.0 / np.sqrt(d))
    o = np.empty((bh, n, d), dtype)
    lse = np.empty((bh, n), dtype)
    hide = _mask(n) if causal else None
    for h in range(bh):
        s = (q[h] @ k[h].T) * scale
        if causal:
            s[hide] = -np.inf
        m = s.max(axis=1, keepdims=True)
        e = np.exp(s - m)
        tot = e.sum(axis=1, keepdims=True)
        o[h] = (e / tot) @ v[h]
        lse[h] = (m + np.log(tot))[:, 0]
    return o, lse


def backward(q, k, v, o, do, lse, causal=False, dtype=np.float64, heads=None):
    """(dQ, dK, dV) given the forward's O and LSE (as the kernels get them), computed in
    `dtype` (float64: the reference; float32: the same computation in float32, which sets the
    tolerance). `heads`: only these heads (the others are returned as zeros)."""
    q, k, v, o, do, lse = (np.asarray(x, dtype) for x in (q, k, v, o, do, lse))
    bh, n, d = q.shape
    scale = dtype(1.0 / np.sqrt(d))
    dq, dk, dv = (np.zeros((bh, n, d), dtype) for _ in range(3))
    hide = _mask(n) if causal else None
    # a row that attends to one key has O_i = v_0 exactly, so D_i = dP_i0 and dS_i = 0 exactly;
    # set it to 0 rather than to float64 rounding noise (N = 1 then has dQ = dK = 0 exactly)
    single = slice(0, 1) if (causal or n == 1) else slice(0, 0)
    for h in range(bh) if heads is None else heads:
        p = np.exp((q[h] @ k[h].T) * scale - lse[h][:, None])
        if causal:
            p[hide] = 0.0
        dv[h] = p.T @ do[h]
        dp = do[h] @ v[h].T
        dd = (do[h] * o[h]).sum(axis=1)              # the D trick: rowsum(dO * O)
        ds = p * (dp - dd[:, None])
        ds[single] = 0.0
        dq[h] = (ds @ k[h]) * scale
        dk[h] = (ds.T @ q[h]) * scale
    return dq, dk, dv


def backward_via_jacobian(q, k, v, do, causal=False):
    """A second formulation for the tests: dS from the softmax Jacobian row by row,
    dS_i = (diag(P_i) - P_i P_i^T) dP_i, with P from the float64 forward (no D trick, no LSE)."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    bh, n, d = q.shape
    scale = 1.0 / np.sqrt(d)
    dq, dk, dv = (np.zeros((bh, n, d)) for _ in range(3))
    for h in range(bh):
        s = (q[h] @ k[h].T) * scale
        if causal:
            s[_mask(n)] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        dp = do[h] @ v[h].T
        ds = np.stack([(np.diag(p[i]) - np.outer(p[i], p[i])) @ dp[i] for i in range(n)])
        dv[h] = p.T @ do[h]
        dq[h] = ds @ k[h] * scale
        dk[h] = ds.T @ q[h] * scale
    return dq, dk, dv


def loss(q, k, v, do, causal=False):
    """sum(O * dO): its gradient with respect to q, k, v is (dQ, dK, dV) for upstream dO."""
    o, _ = forward(q, k, v, causal)
    return float((o * np.asarray(do, np.float64)).sum())


def numerical_grad(f, x, idx, h=1e-6):
    """Central differences of the scalar f() with respect to x[idx] for each index in idx
    (x is modified in place and restored)."""
    out = []
    for i in idx:
        old = x[i]
        x[i] = old + h
        fp = f()
        x[i] = old - h
        fm = f()
        x[i] = old
        out.append((fp - fm) / (2 * h))
    return np.array(out)


def rel_l2(a, b) -> float:
    b = np.asarray(b, np.float64)
    nb = np.linalg.norm(b)
    err = np.linalg.norm(np.asarray(a, np.float64) - b)
    return float(err / nb) if nb > 0 else float(err)


def pairs(n: int, causal: bool) -> int:
    """(query, key) pairs that attend: N^2, or N(N+1)/2 under the causal mask."""
    return n * (n + 1) // 2 if causal else n * n
