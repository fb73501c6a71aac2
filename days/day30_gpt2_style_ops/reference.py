"""Day 30 reference: the GPT-2 MLP sub-block forward in float64, llm.c's order of operations.

    y = x + fc2(gelu(fc1(layernorm(x))))

x [BT, C]; layernorm over each row (weight, bias, eps 1e-5); fc1: W1 [C, 4C] stored [in, out]
(torch's Linear.weight transposed) and b1 [4C]; GELU with GPT-2's tanh approximation;
fc2: W2 [4C, C], b2 [C]; the residual adds x back.
"""
import numpy as np

from days.day09_layer_norm.reference import layer_norm  # noqa: F401  (day 9's specification)

EPS = 1e-5
GELU_K0 = np.sqrt(2.0 / np.pi)
GELU_K1 = 0.044715


def gelu(u):
    """GPT-2's GELU: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))), in float64."""
    u = np.asarray(u, dtype=np.float64)
    return 0.5 * u * (1.0 + np.tanh(GELU_K0 * (u + GELU_K1 * u ** 3)))


def mlp(x, ln_w, ln_b, w1, b1, w2, b2, eps=EPS):
    """y = x + gelu(layernorm(x) @ w1 + b1) @ w2 + b2, in float64. Returns y [BT, C].
    (gelu_inplace: the same formula as gelu(), on the [BT, 4C] buffer without temporaries.)"""
    x = np.asarray(x, dtype=np.float64)
    ln, _, _ = layer_norm(x, ln_w, ln_b, eps)
    h = ln @ np.asarray(w1, dtype=np.float64)
    del ln
    h += np.asarray(b1, dtype=np.float64)
    gelu_inplace(h)
    y = h @ np.asarray(w2, dtype=np.float64)
    y += np.asarray(b2, dtype=np.float64)
    y += x
    return y


def gelu_inplace(u: np.ndarray) -> np.ndarray:
    """gelu(u) written into the float64 array u (two [BT, 4C] buffers instead of six)."""
    t = u * u
    t *= GELU_K1
    t += 1.0
    t *= u
    t *= GELU_K0                 # sqrt(2/pi) (u + 0.044715 u^3)
    np.tanh(t, out=t)
    t += 1.0
    u *= t
    u *= 0.5
    return u


def flops(bt: int, c: int) -> int:
    """The two GEMMs' multiply-adds, 2 FLOPs each: fc1 BT x C x 4C and fc2 BT x 4C x C. The
    layernorm, bias, GELU and residual (~30 BT C) are left out, as llm.c and cuBLAS count."""
    return 2 * bt * c * 4 * c * 2


def unfused_bytes(bt: int, c: int) -> dict:
    """Bytes each unfused stage moves through DRAM at fp32 (inputs read once, outputs written
    once; weights left out), and the same for the fused form: what fusion can save."""
    f = 4
    x, h = bt * c * f, bt * 4 * c * f
    v1 = {"layernorm": 2 * x, "fc1 store": h, "bias1": 2 * h, "gelu": 2 * h, "fc2 store": x,
          "bias2": 2 * x, "residual": 3 * x, "fc1 read A": x, "fc2 read A": h}
    v2 = {"layernorm": 2 * x, "fc1 read A": x, "fc1 store": h, "fc2 read A": h, "fc2 x + y": 2 * x}
    return {"v1": sum(v1.values()), "v2": sum(v2.values()), "v1_parts": v1, "v2_parts": v2}
