"""Day 53 reference: one SGD step of a two-layer GELU MLP with a mean-squared-error loss, in
float64 (what the GPU step must compute, whatever allocator its temporaries come from).

    z = x @ W1,  h = gelu(z),  o = h @ W2,  L = sum((o - t)^2) / (2B)
    dW2 = h^T (o - t) / B,  dW1 = x^T ((o - t) / B @ W2^T * gelu'(z)),  W' = W - lr dW
"""
import numpy as np

K_GELU = np.sqrt(2.0 / np.pi)
C_GELU = 0.044715


def gelu(u):
    """GPT-2's tanh GELU: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3)))."""
    u = np.asarray(u, np.float64)
    return 0.5 * u * (1.0 + np.tanh(K_GELU * (u + C_GELU * u ** 3)))


def gelu_grad(u):
    """d gelu / du = 0.5 (1 + T) + 0.5 u (1 - T^2) sqrt(2/pi) (1 + 3 * 0.044715 u^2)."""
    u = np.asarray(u, np.float64)
    th = np.tanh(K_GELU * (u + C_GELU * u ** 3))
    return 0.5 * (1.0 + th) + 0.5 * u * (1.0 - th * th) * K_GELU * (1.0 + 3.0 * C_GELU * u * u)


def loss(x, t, w1, w2) -> float:
    """The mean-squared-error loss the step descends: sum((o - t)^2) / (2B)."""
    x, t, w1, w2 = (np.asarray(a, np.float64) for a in (x, t, w1, w2))
    o = gelu(x @ w1) @ w2
    return float(((o - t) ** 2).sum() / (2 * x.shape[0]))


def mlp_step(x, t, w1, w2, lr: float) -> dict:
    """The gradients of `loss` and the weights after one SGD step, in float64."""
    x, t, w1, w2 = (np.asarray(a, np.float64) for a in (x, t, w1, w2))
    z = x @ w1
    h = gelu(z)
    d_o = (h @ w2 - t) / x.shape[0]
    dw2 = h.T @ d_o
    dz = (d_o @ w2.T) * gelu_grad(z)
    dw1 = x.T @ dz
    return {"dw1": dw1, "dw2": dw2, "w1_new": w1 - lr * dw1, "w2_new": w2 - lr * dw2}
