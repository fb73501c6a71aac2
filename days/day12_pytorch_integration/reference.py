"""Day 12 reference: fused bias + GELU (tanh form) and its backward, in float64 numpy."""
import numpy as np

K = np.sqrt(2.0 / np.pi)  # 0.7978845608...
C = 0.044715              # GPT-2's cubic coefficient


def gelu(z):
    """GELU, tanh form: 0.5 z (1 + tanh(sqrt(2/pi) (z + 0.044715 z^3)))."""
    z = np.asarray(z, dtype=np.float64)
    # the formula above, evaluated in place (one temporary instead of six: arrays here reach
    # 50M elements): u = K z (1 + C z^2), then y = 0.5 z (1 + tanh u)
    u = np.multiply(z, z, out=np.empty(z.shape))
    u *= C
    u += 1.0
    u *= z
    u *= K
    np.tanh(u, out=u)
    u += 1.0
    u *= z
    u *= 0.5
    return u if u.ndim else u[()]


def gelu_grad(z):
    """d gelu / dz = 0.5 (1 + t) + 0.5 z (1 - t^2) sqrt(2/pi) (1 + 3 * 0.044715 z^2)."""
    z = np.asarray(z, dtype=np.float64)
    t = np.tanh(K * (z + C * z * z * z))
    return 0.5 * (1.0 + t) + 0.5 * z * (1.0 - t * t) * K * (1.0 + 3.0 * C * z * z)


def bias_gelu(x, b):
    """y = gelu(x + b), b broadcast along the last axis of x."""
    return gelu(np.asarray(x, dtype=np.float64) + np.asarray(b, dtype=np.float64))


def bias_gelu_backward(grad_y, x, b):
    """(grad_x, grad_b): grad_x = grad_y * gelu'(x + b); grad_b sums grad_x over all rows."""
    x = np.asarray(x, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    gx = np.asarray(grad_y, dtype=np.float64) * gelu_grad(x + b)
    return gx, gx.reshape(-1, b.shape[0]).sum(axis=0)
