"""Day 20 reference: the backward pass of day 15's layer, checked by finite differences; the
chunked linear + cross-entropy written out in numpy; plain gradient descent. All float64.

    Z = X W + b,  A = softmax(Z),  L = (1/m) sum_i -log A[i, y_i]
    dZ = (A - onehot(y)) / m,  dW = X^T dZ,  db = 1^T dZ,  dX = dZ W^T
"""
import numpy as np


def _f64(*arrays):
    return [np.asarray(a, dtype=np.float64) for a in arrays]


def log_softmax(Z):
    Z = np.asarray(Z, dtype=np.float64)
    mx = Z.max(axis=1, keepdims=True)
    return Z - mx - np.log(np.exp(Z - mx).sum(axis=1, keepdims=True))


def loss(X, W, b, y) -> float:
    """The layer's loss (what day 15 computes)."""
    X, W, b = _f64(X, W, b)
    logp = log_softmax(X @ W + b)
    return float(-logp[np.arange(len(y)), np.asarray(y)].mean())


def backward_from_logp(X, W, logp, y):
    """(dW, db, dX) from the forward's saved log-probabilities: the GPU versions' specification."""
    X, W, logp = _f64(X, W, logp)
    m = X.shape[0]
    dZ = np.exp(logp)
    dZ[np.arange(m), np.asarray(y)] -= 1.0
    dZ /= m
    return X.T @ dZ, dZ.sum(axis=0), dZ @ W.T


def grads(X, W, b, y):
    """(dW, db, dX) of loss(X, W, b, y), by the chain rule."""
    X, W, b = _f64(X, W, b)
    return backward_from_logp(X, W, log_softmax(X @ W + b), y)


def numerical_grad(f, x, eps=1e-6):
    """Central differences (f(x + eps e_i) - f(x - eps e_i)) / 2 eps for every entry of x
    (x is changed in place and restored). Error O(eps^2) plus rounding O(1e-16 / eps)."""
    g = np.zeros_like(x, dtype=np.float64)
    it = np.nditer(x, flags=["multi_index"])
    for _ in it:
        i = it.multi_index
        old = x[i]
        x[i] = old + eps
        fp = f()
        x[i] = old - eps
        fm = f()
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


# --- the fused linear + cross-entropy, whole and chunked ------------------------------------

def linear_cross_entropy(H, W, b, y):
    """(loss, dH, dW, db) for loss = CE(H W + b, y), materializing the N x V logits."""
    dW, db, dH = grads(H, W, b, y)
    return loss(H, W, b, y), dH, dW, db


def chunked_linear_cross_entropy(H, W, b, y, chunk):
    """The same four results, `chunk` rows of logits at a time: what the GPU's chunked path
    does. Only a chunk x V block of logits (and its gradient, in place) ever exists."""
    H, W, b = _f64(H, W, b)
    y = np.asarray(y)
    N, d = H.shape
    V = W.shape[1]
    dH = np.empty((N, d))
    dW = np.zeros((d, V))
    db = np.zeros(V)
    total = 0.0
    for r0 in range(0, N, chunk):
        Hc, yc = H[r0:r0 + chunk], y[r0:r0 + chunk]
        rows = np.arange(len(yc))
        Z = Hc @ W + b                        # the chunk's logits
        mx = Z.max(axis=1, keepdims=True)
        lse = mx[:, 0] + np.log(np.exp(Z - mx).sum(axis=1))
        total += (lse - Z[rows, yc]).sum()    # the chunk's share of the loss
        Z -= lse[:, None]                     # Z becomes the chunk's gradient, in place:
        np.exp(Z, out=Z)                      #   softmax
        Z[rows, yc] -= 1.0                    #   - onehot
        Z /= N                                #   / N (the mean is over all rows)
        dH[r0:r0 + chunk] = Z @ W.T
        dW += Hc.T @ Z
        db += Z.sum(axis=0)
    return total / N, dH, dW, db


# --- gradient descent ------------------------------------------------------------------------

def classification_problem(m=512, d=20, c=5, seed=20):
    """A synthetic problem a linear classifier can learn: labels from a random teacher layer."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((m, d)).astype(np.float32)
    teacher = rng.standard_normal((d, c))
    y = np.argmax(X @ teacher + 0.5 * rng.standard_normal((m, c)), axis=1).astype(np.int32)
    return X, y


def sgd(X, y, c, steps, lr):
    """Full-batch gradient descent from W = 0, b = 0; returns the loss before each step and
    after the last one (steps + 1 values)."""
    X = np.asarray(X, dtype=np.float64)
    W = np.zeros((X.shape[1], c))
    b = np.zeros(c)
    losses = []
    for _ in range(steps):
        losses.append(loss(X, W, b, y))
        dW, db, _ = grads(X, W, b, y)
        W -= lr * dW
        b -= lr * db
    losses.append(loss(X, W, b, y))
    return losses
