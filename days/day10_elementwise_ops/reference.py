"""Day 10 reference: the fused elementwise op, in float64 (the specification).

    y[r, c] = act(x[r, c] * scale + bias[c])            act = GELU (tanh form) or ReLU

GELU here is the tanh approximation used by GPT-2 (and llm.c):

    gelu(u) = 0.5 * u * (1 + tanh( sqrt(2/pi) * (u + 0.044715 u^3) ))
"""
import numpy as np

GELU_K = np.sqrt(2.0 / np.pi)  # 0.7978845608028654
GELU_C = 0.044715


def gelu_tanh(u):
    """GELU, tanh approximation, in float64."""
    u = np.asarray(u, dtype=np.float64)
    return 0.5 * u * (1.0 + np.tanh(GELU_K * (u + GELU_C * u * u * u)))


def gelu_sigmoid_form(u):
    """The same function written as u * sigmoid(2z) = u / (1 + exp(-2z)), z = sqrt(2/pi)(u + c u^3):
    0.5 (1 + tanh z) = 1 / (1 + exp(-2z)) exactly. The kernels use this form (one exp, one
    division, no tanh); a test checks that the two forms agree."""
    u = np.asarray(u, dtype=np.float64)
    z2 = 2.0 * GELU_K * u * (1.0 + GELU_C * u * u)
    with np.errstate(over="ignore"):  # exp(-z2) -> inf for u << 0 gives u / inf = -0, right
        return u / (1.0 + np.exp(-z2))


def relu(u):
    return np.maximum(np.asarray(u, dtype=np.float64), 0.0)


ACTIVATIONS = {"gelu": gelu_tanh, "relu": relu}


def bias_act(x, bias, scale, act="gelu"):
    """y = act(x * scale + bias[col]) over a 2-D array, in float64. `scale` is taken as the
    float32 the kernels receive."""
    if act not in ACTIVATIONS:
        raise ValueError(f"unknown activation {act!r}; one of {sorted(ACTIVATIONS)}")
    x = np.asarray(x)
    b = np.asarray(bias, dtype=np.float64)
    s = float(np.float32(scale))
    f = ACTIVATIONS[act]
    if x.ndim < 2:
        return f(x.astype(np.float64) * s + b)
    out = np.empty(x.shape, np.float64)
    step = max(1, (1 << 18) // max(1, x.shape[-1]))  # ~256K elements a chunk: stays in cache
    for r in range(0, x.shape[0], step):
        out[r:r + step] = f(x[r:r + step].astype(np.float64) * s + b)  # bias: one per column
    return out
