import math

import numpy as np
import pytest

from days.day32_vision_transformer_forward import reference as R

TINY = R.Config(image=8, patch=4, dim=6, heads=2, depth=2, mlp=5, classes=3)


# --- the reference against independent values -------------------------------------------------

def test_patchify_by_hand():
    # patch (py, px) is row py * G + px; its row lists pixel (c, i, j) at (c * P + i) * P + j
    img = np.arange(2 * 3 * 6 * 6, dtype=np.float64).reshape(2, 3, 6, 6)
    p = R.patchify(img, 3)
    assert p.shape == (2, 4, 27)
    for b in range(2):
        for py in range(2):
            for px in range(2):
                for c in range(3):
                    for i in range(3):
                        for j in range(3):
                            assert p[b, py * 2 + px, (c * 3 + i) * 3 + j] == \
                                img[b, c, py * 3 + i, px * 3 + j]


def test_patch_embedding_is_a_strided_convolution():
    # a second formulation: Conv2d(3, C, P, stride=P) summed term by term, its kernel [C, 3, P, P]
    # flattened and transposed into patch_w [3PP, C]
    rng = np.random.default_rng(0)
    P, C, S = 2, 5, 4
    img = rng.standard_normal((1, 3, S, S))
    kern = rng.standard_normal((C, 3, P, P))
    w = kern.reshape(C, -1).T
    emb = R.patchify(img, P) @ w
    for py in range(S // P):
        for px in range(S // P):
            for co in range(C):
                s = sum(img[0, c, py * P + i, px * P + j] * kern[co, c, i, j]
                        for c in range(3) for i in range(P) for j in range(P))
                assert abs(emb[0, py * (S // P) + px, co] - s) < 1e-12


def test_layer_norm_and_gelu_by_hand():
    y = R.layer_norm(np.array([1.0, 2.0, 3.0, 4.0]), 1.0, 0.0, 0.0)
    np.testing.assert_allclose(y, (np.array([1, 2, 3, 4]) - 2.5) / math.sqrt(1.25), rtol=1e-14)
    y = R.layer_norm(np.array([[5.0, 5.0]]), np.array([2.0, 3.0]), np.array([0.5, -1.0]), 1e-6)
    np.testing.assert_allclose(y, [[0.5, -1.0]])          # a constant row gives the shift
    # gelu(1) = 0.5 (1 + tanh(sqrt(2/pi) * 1.044715)) = 0.841192 (the tanh form)
    np.testing.assert_allclose(R.gelu(np.array([0.0, 1.0, -1.0])),
                               [0.0, 0.8411919906, -0.1588080094], atol=1e-9)
    u = np.linspace(-5, 5, 101)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in u])
    assert 1e-5 < np.abs(R.gelu(u) - exact).max() < 2e-3   # close to the erf form, not it


def test_attention_special_cases():
    rng = np.random.default_rng(1)
    b, t, c, heads = 2, 5, 8, 2
    qkv = rng.standard_normal((b, t, 3 * c))
    # one token: softmax over one key is 1, o = v
    np.testing.assert_allclose(R.attention(qkv[:, :1], heads), qkv[:, :1, 2 * c:], rtol=1e-14)
    # q = 0: every score is 0, o = the mean of v over the keys, for every query
    z = qkv.copy()
    z[..., :c] = 0
    np.testing.assert_allclose(R.attention(z, heads),
                               np.broadcast_to(qkv[..., 2 * c:].mean(1, keepdims=True),
                                               (b, t, c)), rtol=1e-13)


def _loop_forward(images, w, cfg):
    """A second formulation of the whole forward: one image, one token, one head at a time,
    math.exp / math.tanh, explicit sums."""
    c, d, heads = cfg.dim, cfg.head_dim, cfg.heads

    def ln(v, g, s):
        mu = sum(v) / len(v)
        var = sum((e - mu) ** 2 for e in v) / len(v)
        return [(e - mu) / math.sqrt(var + cfg.eps) * g[k] + s[k] for k, e in enumerate(v)]

    def lin(v, wt, bias):
        return [sum(v[i] * wt[i][o] for i in range(len(v))) + bias[o] for o in range(len(bias))]

    def gelu(u):
        return 0.5 * u * (1 + math.tanh(math.sqrt(2 / math.pi) * (u + 0.044715 * u ** 3)))

    out_logits, out_tokens = [], []
    g = cfg.image // cfg.patch
    for img in images:
        toks = [[w["cls"][k] + w["pos"][0][k] for k in range(c)]]
        for py in range(g):
            for px in range(g):
                row = [img[ch][py * cfg.patch + i][px * cfg.patch + j] for ch in range(3)
                       for i in range(cfg.patch) for j in range(cfg.patch)]
                e = lin(row, w["patch_w"], w["patch_b"])
                toks.append([e[k] + w["pos"][len(toks)][k] for k in range(c)])
        for layer in range(cfg.depth):
            p = {k: w[k][layer] for k in R.LAYER_KEYS}
            qkv = [lin(ln(x, p["ln1_w"], p["ln1_b"]), p["qkv_w"], p["qkv_b"]) for x in toks]
            att = []
            for x in qkv:
                o = []
                for h in range(heads):
                    q = x[h * d:(h + 1) * d]
                    s = [sum(q[i] * y[c + h * d + i] for i in range(d)) / math.sqrt(d) for y in qkv]
                    m = max(s)
                    e = [math.exp(v - m) for v in s]
                    tot = sum(e)
                    o += [sum(e[k] * qkv[k][2 * c + h * d + i] for k in range(len(qkv))) / tot
                          for i in range(d)]
                att.append(o)
            toks = [[x[k] + y[k] for k in range(c)]
                    for x, y in zip(toks, (lin(a, p["proj_w"], p["proj_b"]) for a in att))]
            hid = [[gelu(v) for v in lin(ln(x, p["ln2_w"], p["ln2_b"]), p["fc1_w"], p["fc1_b"])]
                   for x in toks]
            toks = [[x[k] + y[k] for k in range(c)]
                    for x, y in zip(toks, (lin(hh, p["fc2_w"], p["fc2_b"]) for hh in hid))]
        out_logits.append(lin(ln(toks[0], w["ln_w"], w["ln_b"]), w["head_w"], w["head_b"]))
        out_tokens.append(toks)
    return np.array(out_logits), np.array(out_tokens)


def test_forward_against_a_token_by_token_loop():
    w = {k: v.astype(np.float64) for k, v in R.init_weights(TINY, seed=3).items()}
    images = np.random.default_rng(4).standard_normal((2, 3, 8, 8))
    logits, tokens = R.vit_forward(images, w, TINY)
    want_l, want_t = _loop_forward(images, w, TINY)
    np.testing.assert_allclose(logits, want_l, rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(tokens, want_t, rtol=1e-11, atol=1e-12)


def test_without_positions_patch_order_does_not_matter():
    # attention is permutation-equivariant: with pos = 0, swapping two patches of the image
    # swaps their tokens and leaves the logits (read from the class token) unchanged
    cfg = R.Config(image=8, patch=4, dim=8, heads=2, depth=2, mlp=7, classes=4)
    w = R.init_weights(cfg, seed=5)
    w["pos"][:] = 0
    img = np.random.default_rng(6).standard_normal((1, 3, 8, 8))
    sw = img.copy()
    sw[..., 0:4, 0:4], sw[..., 4:8, 4:8] = img[..., 4:8, 4:8], img[..., 0:4, 0:4]  # patches 0, 3
    l0, t0 = R.vit_forward(img, w, cfg)
    l1, t1 = R.vit_forward(sw, w, cfg)
    np.testing.assert_allclose(l1, l0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(t1[:, [0, 4, 2, 3, 1]], t0, rtol=1e-12, atol=1e-12)
    # and with the positions back, the order matters
    w2 = R.init_weights(cfg, seed=5)
    assert np.abs(R.vit_forward(sw, w2, cfg)[0] - R.vit_forward(img, w2, cfg)[0]).max() > 1e-3


def test_depth_zero_closed_form():
    cfg = R.Config(image=4, patch=2, dim=4, heads=1, depth=0, mlp=3, classes=2)
    w = {k: v.astype(np.float64) for k, v in R.init_weights(cfg, seed=7).items()}
    w["patch_w"][:] = 0       # every patch embeds to patch_b
    img = np.random.default_rng(8).standard_normal((3, 3, 4, 4))
    logits, tokens = R.vit_forward(img, w, cfg)
    np.testing.assert_allclose(tokens[:, 0], np.broadcast_to(w["cls"] + w["pos"][0], (3, 4)))
    np.testing.assert_allclose(tokens[:, 1:], np.broadcast_to(w["patch_b"] + w["pos"][1:],
                                                              (3, 4, 4)))
    want = R.layer_norm(w["cls"] + w["pos"][0], w["ln_w"], w["ln_b"], cfg.eps) @ w["head_w"]
    np.testing.assert_allclose(logits, np.broadcast_to(want + w["head_b"], (3, 2)), rtol=1e-13)


def test_vit_tiny_counts():
    # DeiT-Ti / ViT-Ti/16: 5,717,416 parameters (timm's deit_tiny_patch16_224); per image
    # 57,802,752 (patch embedding) + 12 x 204,098,304 (blocks) + 384,000 (head) FLOPs
    assert R.param_count(R.VIT_TINY) == 5_717_416
    assert R.VIT_TINY.tokens == 197 and R.VIT_TINY.head_dim == 64 and R.VIT_TINY.patch_dim == 768
    assert R.flops(1, R.VIT_TINY) == 2_507_366_400
    assert R.flops(64, R.VIT_TINY) == 64 * 2_507_366_400


def test_init_weights_seeded_and_scaled():
    a, b, c = (R.init_weights(R.VIT_TINY, seed=s) for s in (1, 1, 2))
    assert set(a) == set(R.weight_shapes(R.VIT_TINY))
    for k, shape in R.weight_shapes(R.VIT_TINY).items():
        assert a[k].shape == shape and a[k].dtype == np.float32 and a[k].flags.c_contiguous
        assert np.array_equal(a[k], b[k]) and not np.array_equal(a[k], c[k])
    assert abs(a["qkv_w"].std() * math.sqrt(192) - 1) < 0.01
    assert abs(a["fc2_w"].std() * math.sqrt(768) - 1) < 0.01
    assert abs(a["ln1_w"].mean() - 1) < 0.02 and abs(a["qkv_b"].std() - 0.1) < 0.01


def test_float32_forward_is_close_but_not_equal():
    w = R.init_weights(TINY, seed=9)
    img = np.random.default_rng(10).standard_normal((2, 3, 8, 8)).astype(np.float32)
    l64, _ = R.vit_forward(img, w, TINY)
    l32, x32 = R.vit_forward(img, w, TINY, dtype=np.float32)
    assert l32.dtype == np.float32 and x32.dtype == np.float32
    rel = np.linalg.norm(l32 - l64) / np.linalg.norm(l64)
    assert 0 < rel < 1e-5


# --- the driver's choices (CPU) ---------------------------------------------------------------

def test_sizes_and_validation():
    from common import harness as H
    from days.day32_vision_transformer_forward import driver as D

    assert H.parse_size(D, "default") == (64, 224, 16, 192, 3, 12, 768, 1000)
    assert H.parse_size(D, "3x27x3x96x3x2x130x5") == (3, 27, 3, 96, 3, 2, 130, 5)
    for text, word in [("2x30x4x64x2x1x64x10", "multiple of the patch"),
                       ("2x32x4x190x3x1x64x10", "not a multiple of the 3 heads"),
                       ("2x32x4x192x4x1x64x10", "head dim"),
                       ("2x32x4x64x2x1x64", "dimension"),
                       ("70000x32x4x64x2x1x64x10", "65535")]:
        with pytest.raises(H.SizeError, match=word):
            H.parse_size(D, text)


def test_make_case_and_its_tolerance():
    from days.day32_vision_transformer_forward import driver as D

    case = D.make_case((2, 28, 4, 64, 2, 1, 100, 7), np.random.default_rng(0))
    assert case.outputs["logits"][0] == (2, 7) and case.outputs["tokens"][0] == (2, 50, 64)
    tol = case.tolerance()
    for k in ("logits", "tokens"):
        assert D.TOL_FLOOR <= tol[k] < 1e-5
    exp = case.expected()
    assert exp["logits"].shape == (2, 7) and np.all(np.isfinite(exp["tokens"]))
    # the headline's tolerance is 2x numpy's float32 error (~6e-7), above the floor
    big = D.make_case((1,) + D.VIT_TINY[1:], np.random.default_rng(0))
    assert 4 * D.TOL_FLOOR > big.tolerance()["logits"] > D.TOL_FLOOR


def test_kernel_choice():
    from days.day32_vision_transformer_forward import driver as D

    assert D.tile_for("v3", 192, 768) == D.NARROW_TILE      # fc2 at C = 192
    assert D.tile_for("v3", 576, 192) == D.NARROW_TILE      # QKV
    assert D.tile_for("v3", 768, 192) == D.WIDE_TILE        # fc1: N a multiple of 128
    assert D.tile_for("v3", 192, 27) == "t128"              # the scalar path stays day 8's
    assert D.tile_for("v2", 192, 768) == "t128"
    # C = 128: every GEMM is 128-wide, which v3 now runs on WIDE_TILE (the sweep's t128x64)
    assert (D.same_as("v3", (2, 48, 8, 128, 1, 2, 200, 33)) == "v2") == (D.WIDE_TILE == "t128")
    assert D.same_as("v3", D.VIT_TINY) is None and D.same_as("v2", D.VIT_TINY) is None
    assert D.ln_kernel(192) == "vit_layernorm_i2_v1_v2_v3"
    assert D.ln_kernel(64) == "vit_layernorm_i1_v1_v2_v3"
    assert D.ln_kernel(2048) == "vit_layernorm_i16_v1_v2_v3"
    assert D.ln_kernel(2080) == "vit_layernorm_loop_v1_v2_v3"
    assert D.attn_kernel("v1", 64) == "vit_attn_d64_v1_v2_v3"
    shapes = D.gemm_shapes(D.VIT_TINY)
    assert shapes["fc2"] == (64 * 197, 192, 768) and shapes["embed"] == (64 * 196, 192, 768)


def test_check_sizes_cover_the_paths():
    from days.day32_vision_transformer_forward import driver as D

    cs = D.CHECK_SIZES
    assert any(s[0] == 1 for s in cs)
    assert {s[3] // s[4] for s in cs} == set(D.HEAD_DIMS)
    assert any((3 * s[2] ** 2) % 4 for s in cs)             # scalar patch embedding
    assert any(s[2] % 4 and (3 * s[2] ** 2) % 4 == 0 for s in cs)  # scalar patchify, vec GEMM
    assert any(s[6] % 4 for s in cs) and any(s[7] % 4 for s in cs)
    assert any((s[1] // s[2]) % 2 for s in cs)               # odd patch grids
    assert any(D.same_as("v3", s) is None for s in cs)       # v3's own tiles are checked


# --- the public function: bad input refused before anything reaches the GPU -------------------

def _args(cfg=TINY, b=2):
    return (np.random.default_rng(0).standard_normal((b, 3, cfg.image, cfg.image)),
            R.init_weights(cfg, seed=0), cfg)


def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


GOOD = R.Config(image=8, patch=4, dim=64, heads=2, depth=1, mlp=16, classes=3)


def test_vit_forward_refuses_bad_images_and_weights():
    from days.day32_vision_transformer_forward import driver as D

    img, w, cfg = _args(GOOD)
    _raises(ValueError, "4-D", lambda: D.vit_forward(img[0], w, cfg))
    _raises(ValueError, "[B, 3, 8, 8]", lambda: D.vit_forward(img[:, :, :4], w, cfg))
    _raises(TypeError, "complex", lambda: D.vit_forward(img.astype(np.complex64), w, cfg))
    _raises(TypeError, "None", lambda: D.vit_forward(None, w, cfg))
    _raises(TypeError, "dict", lambda: D.vit_forward(img, list(w.values()), cfg))
    _raises(ValueError, "lacks", lambda: D.vit_forward(img, {k: v for k, v in w.items()
                                                              if k != "pos"}, cfg))
    _raises(ValueError, "unknown", lambda: D.vit_forward(img, {**w, "typo_w": w["ln_w"]}, cfg))
    bad = dict(w, qkv_w=w["qkv_w"].transpose(0, 2, 1))     # torch's [out, in], untransposed
    _raises(ValueError, "qkv_w", lambda: D.vit_forward(img, bad, cfg))
    _raises(TypeError, "booleans", lambda: D.vit_forward(img, dict(w, cls=w["cls"] > 0), cfg))


def test_vit_forward_refuses_bad_configs_and_versions():
    from days.day32_vision_transformer_forward import driver as D

    img, w, cfg = _args(GOOD)
    _raises(TypeError, "Config", lambda: D.vit_forward(img, w, (8, 4, 64, 2, 1, 16, 3)))
    fields = dict(image=8, patch=4, dim=64, heads=2, depth=1, mlp=16, classes=3)
    _raises(ValueError, "lacks", lambda: D.vit_forward(img, w, {"image": 8}))
    _raises(ValueError, "unknown", lambda: D.vit_forward(img, w, dict(fields, width=3)))
    _raises(ValueError, "multiple of the patch", lambda: D.vit_forward(img, w, dict(fields,
                                                                                    patch=3)))
    _raises(ValueError, "head dim", lambda: D.vit_forward(img, w, dict(fields, heads=4)))
    _raises(ValueError, "heads", lambda: D.vit_forward(img, w, dict(fields, heads=3)))
    _raises(ValueError, "at least 1", lambda: D.vit_forward(img, w, dict(fields, depth=0)))
    _raises(TypeError, "integer", lambda: D.vit_forward(img, w, dict(fields, mlp=2.5)))
    _raises(ValueError, "eps", lambda: D.vit_forward(img, w, dict(fields, eps=0.0)))
    _raises(ValueError, "unknown version", lambda: D.vit_forward(img, w, cfg, version="v9"))
    _raises(TypeError, "version", lambda: D.vit_forward(img, w, cfg, version=3))
    _raises(ValueError, "unknown version", lambda: D.launch("v0", None))
    _raises(ValueError, "v3", lambda: D.stages("v2", None, tile="t64"))


def test_vit_forward_of_no_images_launches_nothing():
    from days.day32_vision_transformer_forward import driver as D

    img, w, cfg = _args(GOOD, b=0)
    logits = D.vit_forward(img, w, cfg)
    assert logits.shape == (0, 3) and logits.dtype == np.float32
    logits, tokens = D.vit_forward(img, w, dict(image=8, patch=4, dim=64, heads=2, depth=1,
                                                mlp=16, classes=3), return_tokens=True)
    assert tokens.shape == (0, 5, 64)


def test_bar_clauses_read_the_record():
    from days.day32_vision_transformer_forward import driver as D

    size = list(D.VIT_TINY)
    rec = {"cases": [{"size": size, "rows": [{"version": "v2", "ok": True, "median_ms": 5.0},
                                             {"version": "v3", "ok": True, "median_ms": 4.0}],
                      "baseline": [{"name": D.TORCH, "median_ms": 6.0, "ok": True}]}],
           "checks": []}
    ok, fig = D._timed_vs_torch(rec)
    assert ok and "v3" in fig and "1.50x" in fig
    ok, fig = D._matches_numpy(rec)
    assert not ok and "not run" in fig
    rec["checks"] = [{"size": list(s), "version": v, "ok": True} for s in D.CHECK_SIZES
                     for v in D.VERSIONS]
    assert D._matches_numpy(rec)[0]
    rec["checks"][3]["ok"] = False
    assert not D._matches_numpy(rec)[0]
    assert not D._timed_vs_torch({"cases": []})[0]


# --- GPU ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_vit_forward_matches_the_reference_on_gpu(gpu, version):
    from common.check import compare
    from days.day32_vision_transformer_forward import driver as D

    cfg = R.Config(image=32, patch=4, dim=192, heads=3, depth=2, mlp=768, classes=10, eps=1e-3)
    img, w, _ = _args(cfg, b=3)
    logits, tokens = D.vit_forward(img, w, cfg, version=version, return_tokens=True)
    l64, t64 = R.vit_forward(img.astype(np.float32), w, cfg)      # eps 1e-3 honored
    tol = D.tolerances(img.astype(np.float32), w, cfg)
    assert compare(logits, l64, tol["logits"]).ok
    assert compare(tokens, t64, tol["tokens"]).ok


@pytest.mark.parametrize("tile,attn", [("t128", None), ("t128x64", None), ("t64", None),
                                       (None, "vit_attn_cand_d64_bm64_bn32"),
                                       (None, "vit_attn_cand_d64_bm32_bn64"),
                                       (None, "vit_attn_cand_d64_bm32_bn32")])
def test_sweep_candidates_on_gpu(gpu, tile, attn):
    # every GEMM tile on every 16-byte GEMM, and every attention candidate, at ragged T
    from common import harness as H
    from days.day32_vision_transformer_forward import driver as D

    for size in [(2, 64, 4, 192, 3, 2, 768, 1000), (3, 40, 8, 128, 2, 1, 320, 10),
                 (1, 224, 16, 192, 3, 1, 768, 1000)]:
        if attn and size[3] // size[4] != 64:
            continue
        case = D.make_case(size, np.random.default_rng(32))
        r = H.check(lambda v, d: [fn() for _, fn in D.stages(v, d, tile=tile, attn=attn)],
                    "v3", case)
        assert r.ok, (size, r.message)


def test_torch_eager_matches_numpy_on_gpu(gpu):
    # the baseline computes the same model: its logits and tokens are as close to the float64
    # reference as float32 arithmetic allows (2x the case's tolerance: 4x numpy's float32 error)
    from common import harness as H
    from common.baselines import torch_or_none
    from common.check import compare
    from days.day32_vision_transformer_forward import driver as D

    if torch_or_none() is None:
        pytest.skip("torch with CUDA is not installed")
    case = D.make_case((2, 224, 16, 192, 3, 2, 768, 1000), np.random.default_rng(1))
    exp, tol = case.expected(), case.tolerance()
    logits, tokens = D.torch_forward(H.DeviceCase(case), with_tokens=True)()
    assert compare(logits.cpu().numpy(), exp["logits"], 2 * tol["logits"]).ok
    assert compare(tokens.cpu().numpy(), exp["tokens"], 2 * tol["tokens"]).ok
