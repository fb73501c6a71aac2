"""Day 40 reference: a mixture-of-experts layer with top-2 gating, in float64 (the
specification the kernels are checked against).

    logits = x @ w_gate                               x [T, C], w_gate [C, E]
    e0, e1 = the two largest logits of each token, ties to the lower expert index
             (np.argsort(-logits, kind="stable")[:, :2])
    w0, w1 = softmax over those two logits            (top-2 first, then the softmax: Mixtral)
    y[t]   = w0 * expert_e0(x[t]) + w1 * expert_e1(x[t])
    expert_e(v) = gelu(v @ w1[e] + b1[e]) @ w2[e] + b2[e]     w1 [E, C, H], w2 [E, H, C], H = 4C
"""
import numpy as np

GELU_K0 = np.sqrt(2.0 / np.pi)
GELU_K1 = 0.044715
TOP_K = 2


def gelu(u):
    """GPT-2's GELU: 0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))), in float64."""
    u = np.asarray(u, dtype=np.float64)
    return 0.5 * u * (1.0 + np.tanh(GELU_K0 * (u + GELU_K1 * u ** 3)))


def route(x, w_gate):
    """(experts [T, 2] int64, weights [T, 2] float64, counts [E] int64, logits [T, E])."""
    logits = np.asarray(x, np.float64) @ np.asarray(w_gate, np.float64)
    experts = np.argsort(-logits, axis=1, kind="stable")[:, :TOP_K]
    top = np.take_along_axis(logits, experts, axis=1)
    z = np.exp(top - top[:, :1])                      # top[:, 0] is the larger
    weights = z / z.sum(axis=1, keepdims=True)
    counts = np.bincount(experts.ravel(), minlength=logits.shape[1])
    return experts, weights, counts, logits


def moe(x, w_gate, w1, b1, w2, b2):
    """y [T, C] and counts [E] (tokens sent to each expert), float64 / int64."""
    x64 = np.asarray(x, np.float64)
    experts, weights, counts, _ = route(x64, w_gate)
    y = np.zeros_like(x64)
    for e in range(np.shape(w_gate)[1]):
        tok, k = np.nonzero(experts == e)
        if tok.size == 0:
            continue
        h = gelu(x64[tok] @ np.asarray(w1[e], np.float64) + np.asarray(b1[e], np.float64))
        out = h @ np.asarray(w2[e], np.float64) + np.asarray(b2[e], np.float64)
        y[tok] += weights[tok, k][:, None] * out      # tok has no repeats: a token meets e once
    return y, counts


def moe_dense(x, w_gate, w1, b1, w2, b2):
    """A second formulation (for tests): every expert on every token, then the gate as a dense
    [T, E] weight matrix that is zero outside the top 2. E times the work; small sizes only."""
    x64 = np.asarray(x, np.float64)
    experts, weights, _, logits = route(x64, w_gate)
    gate = np.zeros_like(logits)
    np.put_along_axis(gate, experts, weights, axis=1)
    outs = np.stack([gelu(x64 @ w1[e] + b1[e]) @ w2[e] + b2[e] for e in range(logits.shape[1])],
                    axis=1)                           # [T, E, C]
    return np.einsum("te,tec->tc", gate, outs)


def second_gap(logits):
    """Per token, the margin between its 2nd and 3rd largest logits (inf when E = 2): a
    token whose margin is tiny could be routed differently by float32 sums."""
    logits = np.asarray(logits, np.float64)
    if logits.shape[1] <= TOP_K:
        return np.full(logits.shape[0], np.inf)
    part = -np.sort(-logits, axis=1)
    return part[:, 1] - part[:, 2]


def flops(t: int, c: int, e: int, h: int | None = None) -> int:
    """The work of a layer: the router (2 T C E) and, for each of the 2T (token, expert)
    assignments, two GEMM rows (2 C H each)."""
    h = 4 * c if h is None else h
    return 2 * t * c * e + TOP_K * t * 2 * (2 * c * h)
