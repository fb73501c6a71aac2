"""Day 32 reference: a pre-LN Vision Transformer (ViT) forward, in float64 (or float32, to
measure what float32 arithmetic alone costs).

    images [B, 3, S, S]  ->  patches [B, NP, 3 P P]        NP = (S / P)^2, (c, i, j) order
    x      = [cls ; patches @ patch_w + patch_b] + pos      x [B, T, C], T = NP + 1
    L times:
        x  = x + proj(attention(qkv(LN1(x))))               heads H, head dim D = C / H
        x  = x + fc2(gelu(fc1(LN2(x))))                     MLP width M
    logits = LN(x[:, 0]) @ head_w + head_b                  the class token only

Every linear weight is stored [in, out] (the B operand of a GEMM; torch's Linear.weight
transposed). The patch embedding's weight [3 P P, C] is a Conv2d(3, C, P, stride=P) kernel
[C, 3, P, P] flattened and transposed: a patch row lists channel c, then row i, then column j
of the patch, the order conv_weight.reshape(C, -1) uses. Per-block weights are stacked along a
leading depth axis (qkv_w [L, C, 3C], ...). LayerNorm eps = 1e-6 (the ViT's); GELU is the tanh
approximation (flax's nn.gelu default, which the original JAX ViT uses; torch's
F.gelu(approximate="tanh")).

init_weights(cfg, seed) is THE generator every path uses (numpy here, torch in the baseline,
the GPU through the driver): seeded normal weights scaled like a trained model, so each layer
keeps its outputs at unit scale.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

EPS = 1e-6
GELU_K0 = np.sqrt(2.0 / np.pi)
GELU_K1 = 0.044715
CHANNELS = 3

# the per-block weights, stacked [depth, ...] in the weights dict
LAYER_KEYS = ("ln1_w", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
              "ln2_w", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b")
# the weights outside the blocks
TOP_KEYS = ("patch_w", "patch_b", "cls", "pos", "ln_w", "ln_b", "head_w", "head_b")


@dataclass(frozen=True)
class Config:
    """A ViT's shape: square images of image x image pixels (3 channels) cut into patch x patch
    patches; width dim, heads heads, depth blocks, MLP width mlp, classes outputs."""

    image: int
    patch: int
    dim: int
    heads: int
    depth: int
    mlp: int
    classes: int
    eps: float = EPS

    @property
    def grid(self) -> int:          # patches along a side
        return self.image // self.patch

    @property
    def patches(self) -> int:       # NP
        return self.grid * self.grid

    @property
    def tokens(self) -> int:        # T = NP + 1 (the class token first)
        return self.patches + 1

    @property
    def head_dim(self) -> int:      # D
        return self.dim // self.heads

    @property
    def patch_dim(self) -> int:     # 3 P P, the patch embedding's K
        return CHANNELS * self.patch * self.patch

    @classmethod
    def from_size(cls, size) -> tuple[int, "Config"]:
        """(batch, Config) of a driver size (B, image, patch, dim, heads, depth, mlp, classes)."""
        b, image, patch, dim, heads, depth, mlp, classes = (int(v) for v in size)
        return b, cls(image, patch, dim, heads, depth, mlp, classes)


# ViT-Tiny/16 (DeiT-Ti): 5.7M parameters; and a small one for checks
VIT_TINY = Config(image=224, patch=16, dim=192, heads=3, depth=12, mlp=768, classes=1000)
VIT_SMALL = Config(image=224, patch=16, dim=384, heads=6, depth=12, mlp=1536, classes=1000)


def weight_shapes(cfg: Config) -> dict:
    """name -> shape of every weight, in the order init_weights draws them."""
    c, m, L, kp = cfg.dim, cfg.mlp, cfg.depth, cfg.patch_dim
    return {
        "patch_w": (kp, c), "patch_b": (c,), "cls": (c,), "pos": (cfg.tokens, c),
        "ln1_w": (L, c), "ln1_b": (L, c), "qkv_w": (L, c, 3 * c), "qkv_b": (L, 3 * c),
        "proj_w": (L, c, c), "proj_b": (L, c), "ln2_w": (L, c), "ln2_b": (L, c),
        "fc1_w": (L, c, m), "fc1_b": (L, m), "fc2_w": (L, m, c), "fc2_b": (L, c),
        "ln_w": (c,), "ln_b": (c,), "head_w": (c, cfg.classes), "head_b": (cfg.classes,),
    }


def init_weights(cfg: Config, seed: int = 0) -> dict:
    """Seeded float32 weights, scaled like a trained ViT's: every linear weight ~ N(0, 1/fan_in)
    (unit-scale outputs), biases ~ N(0, 0.1^2), LayerNorm gains 1 + N(0, 0.1^2) and shifts
    N(0, 0.1^2), the class token and position embeddings N(0, 0.5^2) (large enough that a
    position added to the wrong token, or never, is a visible error)."""
    rng = np.random.default_rng(seed)
    fan_in = {"patch_w": cfg.patch_dim, "qkv_w": cfg.dim, "proj_w": cfg.dim, "fc1_w": cfg.dim,
              "fc2_w": cfg.mlp, "head_w": cfg.dim}
    out = {}
    for name, shape in weight_shapes(cfg).items():
        z = rng.standard_normal(shape, dtype=np.float32)
        if name in fan_in:
            z *= np.float32(1.0 / np.sqrt(fan_in[name]))
        elif name in ("cls", "pos"):
            z *= np.float32(0.5)
        elif name.endswith("_w"):          # LayerNorm gains
            z = np.float32(1.0) + np.float32(0.1) * z
        else:                              # biases, LayerNorm shifts
            z *= np.float32(0.1)
        out[name] = np.ascontiguousarray(z, dtype=np.float32)
    return out


def patchify(images, patch: int) -> np.ndarray:
    """[B, 3, S, S] -> [B, NP, 3 P P]: patch (py, px) is row py * (S/P) + px; its row lists
    images[b, c, py*P + i, px*P + j] in (c, i, j) order (a Conv2d kernel's flattening)."""
    images = np.asarray(images)
    b, ch, hgt, wid = images.shape
    g, gw = hgt // patch, wid // patch
    t = images.reshape(b, ch, g, patch, gw, patch).transpose(0, 2, 4, 1, 3, 5)
    return t.reshape(b, g * gw, ch * patch * patch)


def layer_norm(x, w, b, eps=EPS):
    """Over the last axis: (x - mean) / sqrt(var + eps) * w + b (biased variance), in x's dtype."""
    mean = x.mean(axis=-1, keepdims=True)
    d = x - mean
    var = (d * d).mean(axis=-1, keepdims=True)
    return d / np.sqrt(var + eps) * w + b


def gelu(u):
    """0.5 u (1 + tanh(sqrt(2/pi) (u + 0.044715 u^3))), in u's dtype."""
    k0, k1 = u.dtype.type(GELU_K0), u.dtype.type(GELU_K1)
    return u.dtype.type(0.5) * u * (u.dtype.type(1) + np.tanh(k0 * (u + k1 * u * u * u)))


def attention(qkv, heads: int):
    """qkv [B, T, 3C] (row = [q | k | v], each [H, D]) -> o [B, T, C] (heads side by side):
    softmax(q k^T / sqrt(D)) v per batch and head, no mask."""
    b, t, c3 = qkv.shape
    c = c3 // 3
    d = c // heads
    q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(b, t, heads, d).transpose(0, 2, 1, 3)
               for i in range(3))                                  # [B, H, T, D]
    s = q @ k.transpose(0, 1, 3, 2)
    s *= s.dtype.type(1.0 / np.sqrt(d))
    s -= s.max(axis=-1, keepdims=True)
    np.exp(s, out=s)
    s /= s.sum(axis=-1, keepdims=True)
    return (s @ v).transpose(0, 2, 1, 3).reshape(b, t, c)


def vit_forward(images, weights: dict, cfg: Config, dtype=np.float64):
    """(logits [B, classes], tokens [B, T, C]) of the forward, computed in `dtype`. tokens is
    the residual stream after the last block (before the final LayerNorm): every token of
    every block feeds it, while the logits read the class token only."""
    f = np.dtype(dtype).type
    w = {k: np.asarray(v, dtype=dtype) for k, v in weights.items()}
    x_img = np.asarray(images, dtype=dtype)
    b = x_img.shape[0]
    c, t = cfg.dim, cfg.tokens
    emb = patchify(x_img, cfg.patch) @ w["patch_w"] + w["patch_b"]        # [B, NP, C]
    x = np.empty((b, t, c), dtype=dtype)
    x[:, 0] = w["cls"]
    x[:, 1:] = emb
    x += w["pos"]
    eps = f(cfg.eps)
    for layer in range(cfg.depth):
        p = {k: w[k][layer] for k in LAYER_KEYS}
        h = layer_norm(x, p["ln1_w"], p["ln1_b"], eps)
        qkv = h @ p["qkv_w"] + p["qkv_b"]
        x = x + attention(qkv, cfg.heads) @ p["proj_w"] + p["proj_b"]
        h = layer_norm(x, p["ln2_w"], p["ln2_b"], eps)
        h = gelu(h @ p["fc1_w"] + p["fc1_b"])
        x = x + (h @ p["fc2_w"] + p["fc2_b"])
    cls = layer_norm(x[:, 0], w["ln_w"], w["ln_b"], eps)
    logits = cls @ w["head_w"] + w["head_b"]
    return logits, x


def flops(batch: int, cfg: Config) -> int:
    """The forward's multiply-adds, 2 FLOPs each: the patch embedding, per block the QKV, the
    two attention products (Q K^T and P V: 4 B T^2 C), the output projection, fc1 and fc2, and
    the head on the class tokens. LayerNorm, softmax, GELU, biases and residuals are left out
    (as cuBLAS and llm.c count)."""
    b, c, m, t = batch, cfg.dim, cfg.mlp, cfg.tokens
    bt = b * t
    embed = 2 * b * cfg.patches * cfg.patch_dim * c
    block = 2 * bt * c * 3 * c + 4 * b * t * t * c + 2 * bt * c * c + 2 * 2 * bt * c * m
    return embed + cfg.depth * block + 2 * b * c * cfg.classes


def param_count(cfg: Config) -> int:
    return int(sum(np.prod(s) for s in weight_shapes(cfg).values()))
