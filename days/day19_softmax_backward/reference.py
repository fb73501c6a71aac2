"""Day 19 reference: the softmax backward pass and the softmax + cross-entropy gradient, float64.

    dZ = A * (dA - rowsum(dA * A))             (A = softmax(Z), dA = dL/dA)
    dZ = (softmax(Z) - onehot(y)) * scale      (L = scale * sum_r -log softmax(Z)[r, y_r])
"""
import numpy as np


def softmax(z):
    z = np.asarray(z, dtype=np.float64)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def softmax_backward(A, dA):
    """The Jacobian-vector product of row softmax: dZ_j = A_j (dA_j - sum_k dA_k A_k)."""
    A = np.asarray(A, dtype=np.float64)
    dA = np.asarray(dA, dtype=np.float64)
    dot = (A * dA).sum(axis=-1, keepdims=True)
    return A * (dA - dot)


def softmax_backward_via_jacobian(A, dA):
    """The same product through the full Jacobian J = diag(a) - a a^T of every row (O(c^2)
    memory a row: a second formulation for the tests, never for real sizes)."""
    A = np.asarray(A, dtype=np.float64)
    dA = np.asarray(dA, dtype=np.float64)
    out = np.empty_like(A)
    for r in range(A.shape[0]):
        a = A[r]
        J = np.diag(a) - np.outer(a, a)  # J[i, j] = dA_i / dZ_j, symmetric
        out[r] = J.T @ dA[r]
    return out


def cross_entropy(Z, y, scale=None):
    """scale * sum_r -log softmax(Z)[r, y_r]; scale defaults to 1/rows (the mean)."""
    Z = np.asarray(Z, dtype=np.float64)
    rows = Z.shape[0]
    scale = 1.0 / rows if scale is None else scale
    mx = Z.max(axis=1)
    lse = mx + np.log(np.exp(Z - mx[:, None]).sum(axis=1))
    return float(scale * (lse - Z[np.arange(rows), np.asarray(y)]).sum())


def softmax_ce_grad(Z, y, scale=None):
    """dL/dZ of cross_entropy(Z, y, scale): (softmax(Z) - onehot(y)) * scale."""
    P = softmax(Z)
    rows = P.shape[0]
    scale = 1.0 / rows if scale is None else scale
    P[np.arange(rows), np.asarray(y)] -= 1.0
    P *= scale
    return P
