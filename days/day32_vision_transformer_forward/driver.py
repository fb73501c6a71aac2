"""Day 32 driver: a Vision Transformer forward in fp32, image to logits, three versions.

    from days.day32_vision_transformer_forward import reference as R
    from days.day32_vision_transformer_forward.driver import vit_forward
    cfg = R.VIT_TINY                                   # or R.Config(image=32, patch=4, ...)
    weights = R.init_weights(cfg, seed=0)              # or your own, same names and shapes
    logits = vit_forward(images, weights, cfg)         # images [B, 3, S, S] float32 -> [B, classes]

A size is BxSxPxCxHxLxMxK: batch, image side S, patch side P, width C, heads H (C / H = 32, 64
or 128), depth L, MLP width M, classes K. The default is ViT-Tiny/16 (DeiT-Ti) at batch 64.
Outputs checked: the logits and the tokens (the residual stream after the last block, which
every token of every block feeds; the logits read the class token only).
"""
import functools

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference
from .reference import Config

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "unfused: every op its own kernel (174 launches at depth 12)",
    "v2": "fused epilogues: patchify + class rows, bias/pos/GELU/residual in the GEMMs (88)",
    "v3": "v2 + the sweep's tiles: 64x64 GEMM tiles where N is a multiple of 64 only, 128x64 where of 128, 64x32 attention",
}
BEST = "v3"   # fastest at both bench sizes (H200, 2026-11-26)
HEAD_DIMS = (32, 64, 128)
SIZE_HELP = ("BxSxPxCxHxLxMxK (batch x image side x patch side x width x heads x depth x MLP "
             "width x classes; C/H = 32, 64 or 128), e.g. 64x224x16x192x3x12x768x1000")
VIT_TINY = (64, 224, 16, 192, 3, 12, 768, 1000)      # DeiT-Ti / ViT-Ti/16 at batch 64
SIZES = {"small": (2, 32, 4, 64, 2, 2, 256, 10), "default": VIT_TINY,
         "large": (64, 224, 16, 384, 6, 12, 1536, 1000)}   # ViT-S/16
# Every entry is ragged somewhere (T = NP + 1 is a multiple of no tile):
#   batch 1 and T = 65 (one row past a 64-row attention tile), head dim 32;
#   a 7 x 7 grid (T = 50), MLP 100, 7 classes (K % 4 != 0: the scalar head GEMM);
#   P = 3 (patch length 27: scalar patchify and embedding), MLP 130 (scalar fc1 and fc2), T = 82;
#   one patch (T = 2), one head of 64, one class, depth 1;
#   head dim 128, T = 37, 33 classes;
#   ViT-Tiny widths at T = 257 (four 64-row tiles and one row);
#   B*T = 130 (a 128-row GEMM tile and two rows), 5 x 5 grid;
#   P = 6 (patch length 108: 16-byte GEMM, scalar patchify), 10 x 10 grid, T = 101;
#   the headline geometry (224/16, T = 197, 1000 classes) at depth 1;
#   B*T = 1105 rows, the 64-wide tiles of v3 on several row tiles, 128 classes (a head whose
#   N v3's rule would give another tile: the head stays on day 8's).
CHECK_SIZES = [(1, 32, 4, 64, 2, 2, 256, 10), (2, 28, 4, 64, 2, 1, 100, 7),
               (3, 27, 3, 96, 3, 2, 130, 5), (1, 16, 16, 64, 1, 1, 64, 1),
               (2, 48, 8, 128, 1, 2, 200, 33), (2, 64, 4, 192, 3, 2, 768, 1000),
               (5, 40, 8, 96, 3, 1, 384, 10), (1, 60, 6, 64, 2, 1, 96, 3),
               (2, 224, 16, 192, 3, 1, 768, 1000), (17, 64, 8, 64, 2, 1, 256, 128)]
# the headline and an awkward shape: a 13 x 13 grid (T = 170), batch 33 (B*T = 5610 rows,
# 43.8 tiles of 128)
AWKWARD = (33, 208, 16, 192, 3, 12, 768, 1000)
BENCH_SIZES = [VIT_TINY, AWKWARD]
TORCH = "torch eager fp32"

# GEMM tiles: (rows, columns, threads) a block; kernel.cu's T128 (day 8), T128x64, T64
TILES = {"t128": (128, 128, 256), "t128x64": (128, 64, 128), "t64": (64, 64, 64)}
# v3's tiles (16-byte GEMMs): NARROW_TILE where N is a multiple of 64 but not of 128 (C = 192,
# 3C = 576), WIDE_TILE where N is a multiple of 128 (fc1's 768); .notes/day32_sweep.py times
# every tile on every GEMM of the model and says which to pick
# H200, 2026-11-26, .notes/day32_sweep.py at 64x224x16x192x3x12x768x1000: the whole forward
# 6.015 ms with these against 6.119 with t128x64 / t128 / the header's 64x64 attention tile
NARROW_TILE = "t64"
WIDE_TILE = "t128x64"
# v3's attention kernel per head dim where it is not the header's tile (the sweep's candidates):
# 64-query x 32-key tiles, 87 us against the header's 100 at T = 197
V3_ATTN: dict = {64: "vit_attn_cand_d64_bm64_bn32"}
LN_ROWS = 8                              # kernel.cu: rows (warps) per 256-thread block
LN_ITEMS = (1, 2, 3, 4, 6, 8, 12, 16)    # float4 per lane of the register layernorms
ELEM_THREADS = 256
U = 2.0 ** -24                           # float32 unit roundoff
TOL_FLOOR = 16 * U


def validate_size(size):
    if len(size) != 8:
        raise ValueError(f"a size is {SIZE_HELP}")
    b, image, patch, dim, heads, depth, mlp, classes = size
    if image % patch:
        raise ValueError(f"the image side {image} is not a multiple of the patch side {patch}: "
                         "the patches must tile the image")
    if dim % heads:
        raise ValueError(f"the width C = {dim} is not a multiple of the {heads} heads")
    if dim // heads not in HEAD_DIMS:
        raise ValueError(f"head dim C / H = {dim // heads}: the attention kernels take "
                         f"{', '.join(map(str, HEAD_DIMS))}")
    if b > 65535 or heads > 65535:
        raise ValueError("at most 65535 images and 65535 heads (attention's grid z and y)")
    t = (image // patch) ** 2 + 1
    if H.cdiv(b * t, 64) > 65535:
        raise ValueError(f"B*T = {b * t} token rows: at most {65535 * 64} (the GEMM grids put "
                         "64-row tiles on gridDim.y)")
    A.fits_int32("the token buffers [B*T, max(3C, M)]", b * t * max(3 * dim, mlp))
    A.fits_int32("the images [B, 3, S, S]", b * 3 * image * image)
    A.fits_int32("the stacked weights [L, C, max(3C, M)]", depth * dim * max(3 * dim, mlp))
    A.fits_int32("the head [C, K]", dim * classes)


def _rel(a, b) -> float:
    nb = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / nb) if nb else float(np.linalg.norm(a - b))


def tolerances(images, weights, cfg: Config) -> dict:
    """Relative-L2 tolerance of each output: twice the error of the same forward computed in
    float32 numpy (CONVENTIONS: attention-like ops), measured on the first two images (each
    image's forward is independent of the others), never below TOL_FLOOR = 16 u: at the small
    check shapes numpy's own float32 error can be a handful of roundings by luck. At the
    headline size numpy's error is ~6e-7, so 2x numpy (~1.2e-6) is the bound there; a wrong
    index or a missed bias costs 1e-2 and more."""
    n = min(images.shape[0], 2)
    l64, x64 = reference.vit_forward(images[:n], weights, cfg)
    l32, x32 = reference.vit_forward(images[:n], weights, cfg, dtype=np.float32)
    return {"logits": max(2 * _rel(l32, l64), TOL_FLOOR),
            "tokens": max(2 * _rel(x32, x64), TOL_FLOOR)}


def make_case(size, rng):
    """images ~ N(0, 1) (normalized pixels); weights from reference.init_weights (seeded from
    rng, scaled like a trained model)."""
    validate_size(size)
    b, cfg = Config.from_size(size)
    images = rng.standard_normal((b, 3, cfg.image, cfg.image), dtype=np.float32)
    weights = reference.init_weights(cfg, seed=int(rng.integers(2 ** 31)))

    def ref():
        logits, tokens = reference.vit_forward(images, weights, cfg)
        return {"logits": logits, "tokens": tokens}

    return H.Case(size, inputs={"images": images, **weights},
                  outputs={"logits": ((b, cfg.classes), np.float32),
                           "tokens": ((b, cfg.tokens, cfg.dim), np.float32)},
                  reference=ref, flops=reference.flops(b, cfg), unit="fp32",
                  tol=tolerances(images, weights, cfg), params={"eps": cfg.eps})


# --- kernel choice ---------------------------------------------------------------------------

def vec(k, n) -> bool:
    """The 16-byte GEMM path: K and N multiples of 4 (A's and B's rows, and every layer's
    weight offset, then start 16-byte aligned)."""
    return k % 4 == 0 and n % 4 == 0


def ln_kernel(c) -> str:
    for items in LN_ITEMS:
        if c <= 128 * items:
            return f"vit_layernorm_i{items}_v1_v2_v3"
    return "vit_layernorm_loop_v1_v2_v3"


def tile_for(version, n, k) -> str:
    """The GEMM tile: day 8's 128 x 128 everywhere in v1 and v2; in v3, on the 16-byte path,
    NARROW_TILE where N is a multiple of 64 but not of 128 (a 64-wide tile pads no column) and
    WIDE_TILE where N is a multiple of 128."""
    if version == "v3" and vec(k, n):
        if n % 128 == 0:
            return WIDE_TILE
        if n % 64 == 0:
            return NARROW_TILE
    return "t128"


def cfg_dh(size) -> int:
    return size[3] // size[4]


def attn_kernel(version, dh) -> str:
    if version == "v3" and dh in V3_ATTN:
        return V3_ATTN[dh]
    return f"vit_attn_d{dh}_v1_v2_v3"


def gemm_shapes(size) -> dict:
    """role -> (M, N, K) of the forward's GEMMs (the per-block ones once)."""
    b, cfg = Config.from_size(size)
    bt, c = b * cfg.tokens, cfg.dim
    return {"embed": (b * cfg.patches, c, cfg.patch_dim), "qkv": (bt, 3 * c, c),
            "proj": (bt, c, c), "fc1": (bt, cfg.mlp, c), "fc2": (bt, c, cfg.mlp),
            "head": (b, cfg.classes, c)}


def same_as(version, size):
    """v3 runs v2's kernels where no GEMM gets another tile and attention keeps its tile."""
    if version != "v3":
        return None
    dh = size[3] // size[4]
    if dh in V3_ATTN:
        return None
    shapes = gemm_shapes(size)
    if all(tile_for("v3", n, k) == "t128" for role, (_, n, k) in shapes.items() if role != "head"):
        return "v2"
    return None


# every attention kernel, in kernel.cu's vit_attn_config order
ATTN_KERNELS = ("vit_attn_d32_v1_v2_v3", "vit_attn_d64_v1_v2_v3", "vit_attn_d128_v1_v2_v3",
                "vit_attn_cand_d64_bm64_bn32", "vit_attn_cand_d64_bm32_bn64",
                "vit_attn_cand_d64_bm32_bn32")
ATTN_SIG = "PPPPiii" + "q" * 12 + "f"
GEMM_SIG = "PPPPPiiiif"
_ATTN_CFG: dict = {}


def attn_config(kern=None) -> dict:
    """{kernel: (BLOCK_M, THREADS, dynamic smem bytes)} read from kernel.cu's vit_attn_config."""
    kern = kern or K
    if id(kern) not in _ATTN_CFG:
        from common.gpu import driver

        ptr, _ = kern.module.get_global("vit_attn_config")
        buf = np.empty(3 * len(ATTN_KERNELS), np.int32)
        driver().memcpy_dtoh(buf, ptr)
        _ATTN_CFG[id(kern)] = {name: tuple(int(v) for v in buf[3 * i:3 * i + 3])
                               for i, name in enumerate(ATTN_KERNELS)}
    return _ATTN_CFG[id(kern)]


# --- launches --------------------------------------------------------------------------------

def _ptr(p, floats=0) -> int:
    """A device pointer moved by `floats` float32 elements."""
    return int(p) + 4 * int(floats)


class Launcher:
    """Prepared launches on one DeviceCase: each method returns a zero-argument function."""

    def __init__(self, d, kern=None):
        self.d, self.k = d, kern or K

    def gemm(self, name, tile, a, b, bias, add, out, m, n, k, p0=0, f=1.0):
        bm, bn, threads = TILES[tile]
        fn = self.k(name, GEMM_SIG)
        grid = (H.cdiv(n, bn), H.cdiv(m, bm), 1)
        f = np.float32(f)
        return lambda: fn.prepared_call(grid, (threads, 1, 1), a, b, bias, add, out, m, n, k, p0, f)

    def layernorm(self, x, ldx, w, b, out, rows, c, eps):
        fn = self.k(ln_kernel(c), "PqPPPiif")
        grid = (H.cdiv(rows, LN_ROWS), 1, 1)
        eps = np.float32(eps)
        return lambda: fn.prepared_call(grid, (256, 1, 1), x, ldx, w, b, out, rows, c, eps)

    def attention(self, name, qkv, o, b, t, c, heads, scale):
        block_m, threads, smem = attn_config(self.k)[name]
        dh = c // heads
        fn = self.k(name, ATTN_SIG, dynamic_smem=smem)
        # q of (b, h, t) at b*T*3C + t*3C + h*D; k and v C and 2C further; o [B, T, H, D]
        strides = (t * 3 * c, dh, 3 * c) * 3 + (t * c, dh, c)
        q, kk, v = _ptr(qkv), _ptr(qkv, c), _ptr(qkv, 2 * c)
        grid = (H.cdiv(t, block_m), heads, b)
        scale = np.float32(scale)
        return lambda: fn.prepared_call(grid, (threads, 1, 1), q, kk, v, o, b, heads, t, *strides,
                                        scale, shared_size=smem)

    def elementwise(self, name, sig, units, *args):
        fn = self.k(name, sig)
        grid = (max(1, H.cdiv(units, ELEM_THREADS)), 1, 1)
        return lambda: fn.prepared_call(grid, (ELEM_THREADS, 1, 1), *args)

    def bias(self, y, bias, n, cols):
        if cols % 4 == 0:
            return self.elementwise("vit_bias_v1_vec", "PPqi", H.cdiv(n, 4), y, bias, n, cols)
        return self.elementwise("vit_bias_v1_scalar", "PPqi", n, y, bias, n, cols)


def stages(version, d, kern=None, layers=None, tile=None, attn=None):
    """[(stage name, fn)] that together run `version` on DeviceCase d, in order. Stage names:
    "embed: ...", "block L: ...", "head: ...". layers: the blocks to include (default all).
    The sweep's knobs (v3 only): tile, one tile for every 16-byte GEMM but the head's; attn,
    the attention kernel's name."""
    version = A.version(version, VERSIONS)
    if version != "v3" and (tile or attn):
        raise ValueError("tile and attn choose v3's kernels")
    attn_name = attn or attn_kernel(version, cfg_dh(d.size))
    L = Launcher(d, kern)
    b, cfg = Config.from_size(d.size)
    c, t, m, npch, kp = cfg.dim, cfg.tokens, cfg.mlp, cfg.patches, cfg.patch_dim
    heads, dh, nk = cfg.heads, cfg.head_dim, cfg.classes
    if f"_d{dh}_" not in attn_name:
        raise ValueError(f"{attn_name} is not built for head dim {dh}")
    bt = b * t
    eps = d.params.get("eps", reference.EPS)   # a size carries no eps; vit_forward passes its own
    x, logits = d.tokens, d.logits           # the residual stream is the tokens output
    ln = d.scratch("ln", (bt * c,))
    qkv = d.scratch("qkv", (bt * 3 * c,))
    o = d.scratch("o", (bt * c,))
    h = d.scratch("h", (bt * m,))
    patches = d.scratch("patches", (b * npch * kp,))
    lncls = d.scratch("lncls", (b * c,))
    null = 0
    layers = range(cfg.depth) if layers is None else layers
    w = lambda name, layer, per: _ptr(getattr(d, name), layer * per)   # layer's slice of a stack
    out = []

    if version == "v1":
        emb = d.scratch("emb", (b * npch * c,))
        y = d.scratch("y", (bt * c,))

        def gemm(a, bm, dst, mm, nn, kk):
            name = f"vit_gemm_v1_{'vec' if vec(kk, nn) else 'scalar'}"
            return L.gemm(name, "t128", a, bm, null, null, dst, mm, nn, kk)

        def residual():
            return L.elementwise("vit_residual_v1", "PPq", H.cdiv(bt * c, 4), x, y, bt * c)

        out += [
            ("embed: patchify", L.elementwise("vit_patchify_v1", "PPiiq", b * npch * kp, d.images,
                                              patches, cfg.image, cfg.patch, b * npch * kp)),
            ("embed: GEMM", gemm(patches, d.patch_w, emb, b * npch, c, kp)),
            ("embed: bias + class + positions",
             L.elementwise("vit_assemble_v1", "PPPPPiiq", bt * c // 4, emb, d.patch_b, d.cls,
                           d.pos, x, t, c, bt * c // 4)),
        ]
        for i in layers:
            s = f"block {i}: "
            out += [
                (s + "layernorm 1", L.layernorm(x, c, w("ln1_w", i, c), w("ln1_b", i, c), ln, bt,
                                                c, eps)),
                (s + "QKV GEMM", gemm(ln, w("qkv_w", i, c * 3 * c), qkv, bt, 3 * c, c)),
                (s + "QKV bias", L.bias(qkv, w("qkv_b", i, 3 * c), bt * 3 * c, 3 * c)),
                (s + "attention", L.attention(attn_name, qkv, o, b, t, c, heads,
                                              1.0 / np.sqrt(dh))),
                (s + "projection GEMM", gemm(o, w("proj_w", i, c * c), y, bt, c, c)),
                (s + "projection bias", L.bias(y, w("proj_b", i, c), bt * c, c)),
                (s + "residual 1", residual()),
                (s + "layernorm 2", L.layernorm(x, c, w("ln2_w", i, c), w("ln2_b", i, c), ln, bt,
                                                c, eps)),
                (s + "fc1 GEMM", gemm(ln, w("fc1_w", i, c * m), h, bt, m, c)),
                (s + "fc1 bias", L.bias(h, w("fc1_b", i, m), bt * m, m)),
                (s + "GELU", L.elementwise("vit_gelu_v1", "Pq", H.cdiv(bt * m, 4), h, bt * m)),
                (s + "fc2 GEMM", gemm(h, w("fc2_w", i, m * c), y, bt, c, m)),
                (s + "fc2 bias", L.bias(y, w("fc2_b", i, c), bt * c, c)),
                (s + "residual 2", residual()),
            ]
        out += [
            ("head: layernorm (class tokens)", L.layernorm(x, t * c, d.ln_w, d.ln_b, lncls, b, c,
                                                           eps)),
            ("head: GEMM", gemm(lncls, d.head_w, logits, b, nk, c)),
            ("head: bias", L.bias(logits, d.head_b, b * nk, nk)),
        ]
        return out

    # v2, v3: fused epilogues; v3 also picks the tile per GEMM
    def gemm(role, a, bm, bias, add, dst, mm, nn, kk, p0=0, f=1.0):
        tl = tile_for(version, nn, kk) if role != "bias" else "t128"   # the head: day 8's tile
        if tile and role != "bias" and vec(kk, nn):
            tl = tile
        sfx = "v3_vec" if tl != "t128" else f"v2_v3_{'vec' if vec(kk, nn) else 'scalar'}"
        return L.gemm(f"vit_{role}_{tl}_{sfx}", tl, a, bm, bias, add, dst, mm, nn, kk, p0, f)

    vp = cfg.patch % 4 == 0
    units = b * npch * kp // (4 if vp else 1) + b * c // 4
    out += [
        ("embed: patchify + class rows",
         L.elementwise(f"vit_patchify_v2_v3_{'vec' if vp else 'scalar'}", "PPPPPiiii", units,
                       d.images, d.cls, d.pos, patches, x, b, cfg.image, cfg.patch, c)),
        ("embed: GEMM + bias + positions",
         gemm("embed", patches, d.patch_w, d.patch_b, d.pos, x, b * npch, c, kp, p0=npch)),
    ]
    for i in layers:
        s = f"block {i}: "
        out += [
            (s + "layernorm 1", L.layernorm(x, c, w("ln1_w", i, c), w("ln1_b", i, c), ln, bt, c,
                                            eps)),
            (s + "QKV GEMM + bias, q scaled",
             gemm("qkv", ln, w("qkv_w", i, c * 3 * c), w("qkv_b", i, 3 * c), null, qkv, bt,
                  3 * c, c, p0=c, f=1.0 / np.sqrt(dh))),
            (s + "attention", L.attention(attn_name, qkv, o, b, t, c, heads, 1.0)),
            (s + "projection GEMM + bias + residual",
             gemm("res", o, w("proj_w", i, c * c), w("proj_b", i, c), null, x, bt, c, c)),
            (s + "layernorm 2", L.layernorm(x, c, w("ln2_w", i, c), w("ln2_b", i, c), ln, bt, c,
                                            eps)),
            (s + "fc1 GEMM + bias + GELU",
             gemm("gelu", ln, w("fc1_w", i, c * m), w("fc1_b", i, m), null, h, bt, m, c)),
            (s + "fc2 GEMM + bias + residual",
             gemm("res", h, w("fc2_w", i, m * c), w("fc2_b", i, c), null, x, bt, c, m)),
        ]
    out += [
        ("head: layernorm (class tokens)", L.layernorm(x, t * c, d.ln_w, d.ln_b, lncls, b, c,
                                                       eps)),
        ("head: GEMM + bias", gemm("bias", lncls, d.head_w, d.head_b, null, logits, b, nk, c)),
    ]
    return out


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    for _, fn in stages(version, d):
        fn()


# --- torch eager -----------------------------------------------------------------------------

def torch_forward(d, with_tokens=False):
    """The same ViT in torch eager fp32 (TF32 off) on the case's device memory: F.conv2d for the
    patch embedding (what timm's PatchEmbed runs), F.layer_norm, F.linear, SDPA on strided q,
    k, v views, F.gelu(approximate="tanh"). Weights are re-laid out once here, untimed
    (torch's [out, in] Linear weights, the [C, 3, P, P] conv kernel). Returns fn() -> logits
    (or (logits, tokens))."""
    torch = torch_fp32()
    F = torch.nn.functional
    b, cfg = Config.from_size(d.size)
    c, t, p, heads, dh, eps = cfg.dim, cfg.tokens, cfg.patch, cfg.heads, cfg.head_dim, cfg.eps
    W = {k: as_torch(d.array(k)) for k in reference.weight_shapes(cfg)}
    conv_w = W["patch_w"].t().reshape(c, 3, p, p).contiguous()
    lin = {k: W[k].transpose(-1, -2).contiguous() for k in ("qkv_w", "proj_w", "fc1_w", "fc2_w",
                                                            "head_w")}
    img = as_torch(d.array("images"))
    cls = W["cls"].view(1, 1, c).expand(b, 1, c)

    def forward():
        with torch.inference_mode():
            x = F.conv2d(img, conv_w, W["patch_b"], stride=p).flatten(2).transpose(1, 2)
            x = torch.cat([cls, x], dim=1) + W["pos"]
            for i in range(cfg.depth):
                a = F.layer_norm(x, (c,), W["ln1_w"][i], W["ln1_b"][i], eps)
                q, k, v = (F.linear(a, lin["qkv_w"][i], W["qkv_b"][i])
                           .view(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4).unbind(0))
                a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
                x = x + F.linear(a, lin["proj_w"][i], W["proj_b"][i])
                a = F.layer_norm(x, (c,), W["ln2_w"][i], W["ln2_b"][i], eps)
                a = F.gelu(F.linear(a, lin["fc1_w"][i], W["fc1_b"][i]), approximate="tanh")
                x = x + F.linear(a, lin["fc2_w"][i], W["fc2_b"][i])
            logits = F.linear(F.layer_norm(x[:, 0], (c,), W["ln_w"], W["ln_b"], eps),
                              lin["head_w"], W["head_b"])
            return (logits, x) if with_tokens else logits

    return forward


def baselines(d):
    if torch_or_none() is None:
        return {}
    return {TORCH: torch_forward(d)}


# --- the public function ---------------------------------------------------------------------

CONFIG_KEYS = ("image", "patch", "dim", "heads", "depth", "mlp", "classes")


def as_config(config) -> Config:
    """A reference.Config, or a mapping with its fields (eps optional), checked."""
    if isinstance(config, Config):
        fields = {k: getattr(config, k) for k in CONFIG_KEYS + ("eps",)}
    elif isinstance(config, dict):
        unknown = sorted(set(config) - set(CONFIG_KEYS) - {"eps"})
        if unknown:
            raise ValueError(f"config has unknown fields {unknown}; it takes "
                             f"{', '.join(CONFIG_KEYS)} and eps")
        missing = [k for k in CONFIG_KEYS if k not in config]
        if missing:
            raise ValueError(f"config lacks {', '.join(missing)}")
        fields = dict(config)
    else:
        raise TypeError(f"config must be a reference.Config or a dict of its fields, got "
                        f"{type(config).__name__}")
    vals = {k: A.count(fields[k], f"config {k}", low=1) for k in CONFIG_KEYS}
    eps = A.real(fields.get("eps", reference.EPS), "config eps", low=0, low_open=True)
    cfg = Config(**vals, eps=eps)
    if cfg.image % cfg.patch:
        raise ValueError(f"config: the image side {cfg.image} is not a multiple of the patch "
                         f"side {cfg.patch}")
    if cfg.dim % cfg.heads:
        raise ValueError(f"config: the width {cfg.dim} is not a multiple of the {cfg.heads} heads")
    if cfg.head_dim not in HEAD_DIMS:
        raise ValueError(f"config: head dim dim / heads = {cfg.head_dim}; the attention kernels "
                         f"take {', '.join(map(str, HEAD_DIMS))}")
    return cfg


def vit_forward(images, weights, config, version=BEST, return_tokens=False):
    """The ViT forward on the GPU in float32: images [B, 3, S, S] (S = config.image) and the
    weights dict of reference.weight_shapes(config) (every linear weight [in, out], per-block
    weights stacked [depth, ...]; reference.init_weights makes one) -> logits [B, classes];
    with return_tokens, (logits, tokens [B, T, C]), tokens being the residual stream after the
    last block. B = 0 returns empty arrays without a launch."""
    version = A.version(version, VERSIONS)
    cfg = as_config(config)
    images = A.floats(images, "images", ndim=4, what="[B, 3, S, S]")
    want = (3, cfg.image, cfg.image)
    if images.shape[1:] != want:
        raise ValueError(f"images must be [B, 3, {cfg.image}, {cfg.image}] for this config, got "
                         f"{images.shape}")
    if not isinstance(weights, dict):
        raise TypeError(f"weights must be a dict of arrays (reference.weight_shapes names them), "
                        f"got {type(weights).__name__}")
    shapes = reference.weight_shapes(cfg)
    unknown = sorted(set(weights) - set(shapes))
    if unknown:
        raise ValueError(f"weights has unknown entries {unknown}")
    missing = [k for k in shapes if k not in weights]
    if missing:
        raise ValueError(f"weights lacks {', '.join(missing)}")
    w = {k: A.floats(weights[k], f"weights[{k!r}]", shape=s) for k, s in shapes.items()}
    b = images.shape[0]
    if b == 0:
        logits = np.zeros((0, cfg.classes), np.float32)
        return (logits, np.zeros((0, cfg.tokens, cfg.dim), np.float32)) if return_tokens else logits
    size = (b, cfg.image, cfg.patch, cfg.dim, cfg.heads, cfg.depth, cfg.mlp, cfg.classes)
    validate_size(size)
    case = H.Case(size, inputs={"images": images, **w},
                  outputs={"logits": ((b, cfg.classes), np.float32),
                           "tokens": ((b, cfg.tokens, cfg.dim), np.float32)},
                  params={"eps": cfg.eps})
    res = H.run(launch, version, case)
    return (res["logits"], res["tokens"]) if return_tokens else res["logits"]


# --- extras: errors against float64, where the time goes -------------------------------------

ERR_SIZE = (8, 224, 16, 192, 3, 12, 768, 1000)   # ViT-Tiny at batch 8
ERR_TITLE = "error against the float64 reference"
STAGE_TITLE = "where the time goes"


def error_rows(size=ERR_SIZE):
    """[name, logits rel L2, tokens rel L2] for numpy float32, torch eager fp32 and each
    version, against the float64 numpy reference, on one case."""
    from common.gpu import driver

    case = make_case(size, np.random.default_rng(32))
    exp = case.expected()
    b, cfg = Config.from_size(size)
    l32, x32 = reference.vit_forward(case.inputs["images"], {k: v for k, v in case.inputs.items()
                                                             if k != "images"}, cfg, np.float32)
    rows = [["numpy float32", _rel(l32, exp["logits"]), _rel(x32, exp["tokens"])]]
    d = H.DeviceCase(case)
    if torch_or_none() is not None:
        try:
            lg, tk = torch_forward(d, with_tokens=True)()
            rows.append([TORCH, _rel(lg.cpu().numpy(), exp["logits"]),
                         _rel(tk.cpu().numpy(), exp["tokens"])])
        except Exception as e:   # the table keeps the other rows
            rows.append([TORCH, f"failed: {type(e).__name__}", ""])
    for v in VERSIONS:
        d.poison_outputs()
        launch(v, d)
        driver().Context.synchronize()
        got = d.outputs()
        rows.append([v, _rel(got["logits"], exp["logits"]), _rel(got["tokens"], exp["tokens"])])
    tol = case.tolerance()
    rows.append(["tolerance (2x float32 numpy on 2 images)", tol["logits"], tol["tokens"]])
    return [[r[0]] + [f"{v:.2e}" if isinstance(v, float) else v for v in r[1:]] for r in rows]


KINDS = ("patch embedding", "layernorms (2)", "QKV projection", "attention",
         "output projection + residual", "MLP fc1 + GELU", "MLP fc2 + residual", "head")


def kind_of(stage: str) -> str:
    """The row of the stage table a stage of stages() adds its time to."""
    if stage.startswith("embed"):
        return "patch embedding"
    if stage.startswith("head"):
        return "head"
    for word, kind in (("layernorm", "layernorms (2)"), ("QKV", "QKV projection"),
                       ("attention", "attention"), ("projection", "output projection + residual"),
                       ("residual 1", "output projection + residual"), ("fc1", "MLP fc1 + GELU"),
                       ("GELU", "MLP fc1 + GELU"), ("fc2", "MLP fc2 + residual"),
                       ("residual 2", "MLP fc2 + residual")):
        if word in stage:
            return kind
    raise KeyError(stage)


def torch_stages(d) -> dict:
    """kind -> fn: torch eager's embedding, block 0's pieces and the head, as torch_forward
    runs them, on intermediates computed once here (each piece can be timed alone)."""
    torch = torch_fp32()
    F = torch.nn.functional
    b, cfg = Config.from_size(d.size)
    c, t, p, heads, dh, eps = cfg.dim, cfg.tokens, cfg.patch, cfg.heads, cfg.head_dim, cfg.eps
    W = {k: as_torch(d.array(k)) for k in reference.weight_shapes(cfg)}
    conv_w = W["patch_w"].t().reshape(c, 3, p, p).contiguous()
    lin = {k: W[k].transpose(-1, -2).contiguous()[0] if k != "head_w" else W[k].t().contiguous()
           for k in ("qkv_w", "proj_w", "fc1_w", "fc2_w", "head_w")}
    w0 = {k: W[k][0] for k in reference.LAYER_KEYS if k.endswith("_b") or k.startswith("ln")}
    img = as_torch(d.array("images"))
    cls = W["cls"].view(1, 1, c).expand(b, 1, c)
    st = {}
    with torch.inference_mode():
        st["x"] = x = torch.cat([cls, F.conv2d(img, conv_w, W["patch_b"], stride=p)
                                 .flatten(2).transpose(1, 2)], dim=1) + W["pos"]
        st["a"] = a = F.layer_norm(x, (c,), w0["ln1_w"], w0["ln1_b"], eps)
        st["q"], st["k"], st["v"] = (F.linear(a, lin["qkv_w"], w0["qkv_b"])
                                     .view(b, t, 3, heads, dh).permute(2, 0, 3, 1, 4).unbind(0))
        st["o"] = F.scaled_dot_product_attention(st["q"], st["k"], st["v"]).transpose(1, 2) \
            .reshape(b, t, c)
        st["h"] = F.gelu(F.linear(a, lin["fc1_w"], w0["fc1_b"]), approximate="tanh")

    def run(fn):
        def go():
            with torch.inference_mode():
                return fn()
        return go

    return {
        "patch embedding": run(lambda: torch.cat(
            [cls, F.conv2d(img, conv_w, W["patch_b"], stride=p).flatten(2).transpose(1, 2)],
            dim=1) + W["pos"]),
        "layernorms (2)": run(lambda: (F.layer_norm(st["x"], (c,), w0["ln1_w"], w0["ln1_b"], eps),
                                       F.layer_norm(st["x"], (c,), w0["ln2_w"], w0["ln2_b"], eps))),
        "QKV projection": run(lambda: F.linear(st["a"], lin["qkv_w"], w0["qkv_b"])),
        "attention": run(lambda: F.scaled_dot_product_attention(st["q"], st["k"], st["v"])
                         .transpose(1, 2).reshape(b, t, c)),
        "output projection + residual": run(lambda: st["x"] + F.linear(st["o"], lin["proj_w"],
                                                                       w0["proj_b"])),
        "MLP fc1 + GELU": run(lambda: F.gelu(F.linear(st["a"], lin["fc1_w"], w0["fc1_b"]),
                                             approximate="tanh")),
        "MLP fc2 + residual": run(lambda: st["x"] + F.linear(st["h"], lin["fc2_w"], w0["fc2_b"])),
        "head": run(lambda: F.linear(F.layer_norm(st["x"][:, 0], (c,), W["ln_w"], W["ln_b"], eps),
                                     lin["head_w"], W["head_b"])),
    }


def stage_rows(size=VIT_TINY):
    """Rows of the stage table: each kind of stage (the embedding, block 0's pieces, the head)
    timed alone, L2 flushed first, for v1, BEST and torch eager; the sum over one block; the
    whole forward. Columns: stage | v1 us | best us | torch us | best TFLOP/s | torch TFLOP/s."""
    from common.timing import time_fn

    case = make_case(size, np.random.default_rng(32))
    d = H.DeviceCase(case)
    b, cfg = Config.from_size(size)
    shapes = gemm_shapes(size)
    work = {"patch embedding": 2 * np.prod(shapes["embed"]),
            "QKV projection": 2 * np.prod(shapes["qkv"]),
            "attention": 4 * b * cfg.tokens ** 2 * cfg.dim,
            "output projection + residual": 2 * np.prod(shapes["proj"]),
            "MLP fc1 + GELU": 2 * np.prod(shapes["fc1"]),
            "MLP fc2 + residual": 2 * np.prod(shapes["fc2"])}
    work["one block (sum of its stages)"] = sum(v for k, v in work.items()
                                                if k != "patch embedding")
    work["whole forward"] = case.flops
    cols = {}
    for v in ("v1", BEST):
        launch(v, d)                                  # every intermediate filled
        col = dict.fromkeys(KINDS, 0.0)
        for name, fn in stages(v, d, layers=[0]):
            col[kind_of(name)] += time_fn(fn).median_ms * 1e3
        cols[v] = col
    if torch_or_none() is not None:
        try:
            cols[TORCH] = {k: time_fn(fn).median_ms * 1e3 for k, fn in torch_stages(d).items()}
        except Exception:   # the table keeps our columns
            pass
    for v, col in cols.items():
        col["one block (sum of its stages)"] = sum(col[k] for k in KINDS[1:-1])
        fn = torch_forward(d) if v == TORCH else (lambda v=v: launch(v, d))
        col["whole forward"] = time_fn(fn).median_ms * 1e3
    names = ["v1", BEST, TORCH]
    rows = []
    for kind in KINDS + ("one block (sum of its stages)", "whole forward"):
        row = [kind] + [f"{cols[v][kind]:.1f}" if v in cols else "-" for v in names]
        for v in (BEST, TORCH):
            us = cols.get(v, {}).get(kind)
            row.append(f"{work[kind] / (us * 1e-6) / 1e12:.1f}" if us and kind in work else "-")
        rows.append(row)
    launches = {v: len(stages(v, d)) for v in ("v1", BEST)}
    return rows, launches


def extras(report, mode):
    try:
        rows = error_rows()
        report.section(f"{ERR_TITLE} (ViT-Tiny/16 at batch 8, relative L2 error)", rows,
                       ["computed by", "logits", "tokens"])
    except Exception as e:   # must not stop the day's checks
        report.say(f"  error table not made: {type(e).__name__}: {e}")
    if mode == "check":
        return
    rows, launches = stage_rows()
    report.section(f"{STAGE_TITLE} ({H.size_str(VIT_TINY)}; best = {BEST}; the embedding, block "
                   f"0 of {VIT_TINY[5]} and the head, each stage timed alone; launches: "
                   + ", ".join(f"{v} {n}" for v, n in launches.items()) + ")", rows,
                   ["stage", "v1 us", "best us", "torch us", "best TFLOP/s", "torch TFLOP/s"])


# --- the bar ---------------------------------------------------------------------------------

def _matches_numpy(rec):
    """Every version ok at every CHECK_SIZES entry and at every bench size (logits and tokens
    within 2x float32 numpy's error of the float64 reference)."""
    checks = rec.get("checks", [])
    done = {(tuple(c["size"]), c["version"]) for c in checks if "ok" in c}
    bad = [c for c in checks if c.get("ok") is False]
    missing = [(s, v) for s in CHECK_SIZES for v in VERSIONS
               if (tuple(s), v) not in done and same_as(v, s) is None]
    rows = [r for c in rec.get("cases", []) for r in c.get("rows", []) if "ok" in r]
    if bad or any(not r["ok"] for r in rows):
        return False, f"{len(bad)} check(s) and {sum(not r['ok'] for r in rows)} bench row(s) wrong"
    if missing:
        return False, f"{len(missing)} (size, version) checks not run"
    return True, f"{len(done)} checks and {len(rows)} bench rows match the float64 reference"


def _timed_vs_torch(rec):
    """The headline case has a correct fastest version and a timed torch eager row: the ratio
    is the figure (faster is welcome; the issue asks for the timing)."""
    from common.bars import fastest_correct

    case = next((c for c in rec.get("cases", []) if tuple(c["size"]) == VIT_TINY), None)
    if case is None:
        return False, "the ViT-Tiny case was not benchmarked"
    row = fastest_correct(case)
    base = next((b for b in case.get("baseline", []) if b["name"] == TORCH
                 and "median_ms" in b), None)
    if row is None or base is None:
        return False, "no correct version or no torch eager timing"
    return True, (f"{row['version']} {row['median_ms']:.3f} ms vs torch eager "
                  f"{base['median_ms']:.3f} ms ({base['median_ms'] / row['median_ms']:.2f}x)")


# CURRICULUM.md: matches numpy end to end; issue 11: timed against torch eager
BAR = [{"text": "matches numpy end to end", "check": _matches_numpy},
       {"text": "timed against torch eager (ratio reported)", "check": _timed_vs_torch}]
