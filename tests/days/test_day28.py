import numpy as np
import pytest

from days.day28_multi_head_attention import reference


def _weights(c, rng, bias=0.5):
    return (rng.standard_normal((c, 3 * c)) / np.sqrt(c), rng.standard_normal(3 * c) * bias,
            rng.standard_normal((c, c)) / np.sqrt(c), rng.standard_normal(c) * bias)


# --- the reference against independent values -------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_reference_by_hand(causal):
    # C = H = d = 1, q = k = v = x, no biases, w_o = 1: x = [0, 1]. Query 0 scores [0, 0]
    # (uniform: (0 + 1) / 2), or sees key 0 only when causal (0); query 1 scores [0, 1]:
    # weights [1, e] / (1 + e), o = e / (1 + e) either way.
    x = np.array([[[0.0], [1.0]]])
    y = reference.mha(x, [[1.0, 1.0, 1.0]], [0.0, 0.0, 0.0], [[1.0]], [0.0], 1, causal)
    e = np.e
    want = [0.0 if causal else 0.5, e / (1 + e)]
    np.testing.assert_allclose(y[0, :, 0], want, rtol=1e-15, atol=1e-15)


def test_biases_by_hand():
    # x = 0: q = b_q, k = b_k, v = b_v for every position: every score equal, o = b_v,
    # y = b_v @ w_o + b_o. C = 2, one head of d = 2: b_v = [1, 2], w_o = [[1, 0], [1, 1]]
    # -> [3, 2], + b_o = [10, 20] -> [13, 22]
    x = np.zeros((1, 3, 2))
    y = reference.mha(x, np.ones((2, 6)), [5.0, -1.0, 3.0, 4.0, 1.0, 2.0],
                      [[1.0, 0.0], [1.0, 1.0]], [10.0, 20.0], 1)
    np.testing.assert_allclose(y, np.tile([13.0, 22.0], (1, 3, 1)), rtol=1e-15)


@pytest.mark.parametrize("size,causal", [((2, 5, 8, 2), False), ((1, 7, 12, 3), True),
                                         ((3, 4, 6, 1), True), ((2, 9, 16, 4), False)])
def test_reference_matches_the_per_head_formulation(size, causal):
    b, n, c, h = size
    rng = np.random.default_rng(sum(size))
    x = rng.standard_normal((b, n, c))
    w = _weights(c, rng)
    np.testing.assert_allclose(reference.mha(x, *w, h, causal),
                               reference.mha_per_head(x, *w, h, causal), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_one_position_needs_no_q_or_k(causal):
    # T = 1: the softmax over one key is 1, so y = (x Wv + bv) Wo + bo whatever q and k are
    rng = np.random.default_rng(3)
    c = 8
    x = rng.standard_normal((4, 1, c))
    w_qkv, b_qkv, w_o, b_o = _weights(c, rng)
    y = reference.mha(x, w_qkv, b_qkv, w_o, b_o, 2, causal)
    v = x[:, 0] @ w_qkv[:, 2 * c:] + b_qkv[2 * c:]
    np.testing.assert_allclose(y[:, 0], v @ w_o + b_o, rtol=1e-12)


def test_zero_queries_average_the_values():
    # Wq = 0, bq = 0: every score is 0, softmax is uniform: o_t = mean of v over the keys it
    # sees (all of them, or 0..t with the causal mask: a running mean)
    rng = np.random.default_rng(4)
    b, n, c, h = 2, 6, 8, 2
    x = rng.standard_normal((b, n, c))
    w_qkv, b_qkv, w_o, b_o = _weights(c, rng)
    w_qkv[:, :c] = 0
    b_qkv[:c] = 0
    v = x @ w_qkv[:, 2 * c:] + b_qkv[2 * c:]
    full = np.broadcast_to(v.mean(axis=1, keepdims=True), v.shape)
    running = np.cumsum(v, axis=1) / np.arange(1, n + 1)[None, :, None]
    np.testing.assert_allclose(reference.mha(x, w_qkv, b_qkv, w_o, b_o, h), full @ w_o + b_o,
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(reference.mha(x, w_qkv, b_qkv, w_o, b_o, h, causal=True),
                               running @ w_o + b_o, rtol=1e-12, atol=1e-12)


def test_huge_scores_stay_finite():
    x = np.array([[[100.0], [-100.0], [50.0]]])
    y = reference.mha(x, [[10.0, 10.0, 1.0]], [0.0] * 3, [[1.0]], [0.0], 1)
    assert np.isfinite(y).all()
    # query 0 scores 1e4 * [100, -100, 50]: key 0 wins outright
    assert y[0, 0, 0] == pytest.approx(100.0)


def test_split_and_merge_heads_are_the_layouts():
    b, n, h, d = 2, 3, 4, 5
    t = np.arange(b * n * h * d, dtype=np.float64).reshape(b, n, h * d)
    s = reference.split_heads(t, h)
    assert s.shape == (b, h, n, d)
    assert s[1, 2, 0, 3] == t[1, 0, 2 * d + 3]        # [b, h, t, i] = [b, t, h*d + i]
    np.testing.assert_array_equal(reference.merge_heads(s), t)


def test_from_torch_transposes():
    rng = np.random.default_rng(5)
    c = 4
    ipw, ipb = rng.standard_normal((3 * c, c)), rng.standard_normal(3 * c)
    opw, opb = rng.standard_normal((c, c)), rng.standard_normal(c)
    w_qkv, b_qkv, w_o, b_o = reference.from_torch(ipw, ipb, opw, opb)
    assert w_qkv.shape == (c, 3 * c) and w_qkv.flags.c_contiguous
    x = rng.standard_normal(c)
    np.testing.assert_allclose(x @ w_qkv, ipw @ x)        # torch: F.linear(x, W) = x W^T
    np.testing.assert_allclose(x @ w_o, opw @ x)
    assert b_qkv is not None and b_o is not None


def test_flops_by_hand():
    # B=1, T=2, C=4: QKV 2*2*4*12 = 192, out 2*2*4*4 = 64, attention 4*1*4*4 = 64 (T*T = 4
    # pairs; causal 3 pairs: 48)
    assert reference.flops(1, 2, 4) == 192 + 64 + 64
    assert reference.flops(1, 2, 4, causal=True) == 192 + 64 + 48


# --- the driver's arithmetic ------------------------------------------------------------------

def _gather(buf, base, strides, b, h, n, dim):
    """Read [B, H, T, d] out of a flat buffer the way the attention kernel addresses it."""
    sb, sh, sn = strides
    out = np.empty((b, h, n, dim))
    for i in range(b):
        for j in range(h):
            for t in range(n):
                s = base + i * sb + j * sh + t * sn
                out[i, j, t] = buf[s:s + dim]
    return out


def test_fused_strides_read_q_k_v_where_the_gemm_wrote_them():
    from days.day28_multi_head_attention.driver import fused_strides, head_major_strides

    b, n, c, h = 2, 3, 12, 3
    dim = c // h
    qkv = np.random.default_rng(6).standard_normal((b, n, 3 * c))   # the QKV GEMM's output
    offsets, strides = fused_strides(b, n, c, h)
    flat = qkv.ravel()
    for i, off in enumerate(offsets):
        want = reference.split_heads(qkv[..., i * c:(i + 1) * c], h)
        np.testing.assert_array_equal(_gather(flat, off, strides[3 * i:3 * i + 3], b, h, n, dim),
                                      want)
    # O written at (b, h, t) through o's strides is [B, T, H, d] = merge_heads
    o_heads = np.random.default_rng(7).standard_normal((b, h, n, dim))
    o = np.full(b * n * c, np.nan)
    sb, sh, sn = strides[9:]
    for i in range(b):
        for j in range(h):
            for t in range(n):
                o[i * sb + j * sh + t * sn:][:dim] = o_heads[i, j, t]
    np.testing.assert_array_equal(o.reshape(b, n, c), reference.merge_heads(o_heads))
    # v1: everything contiguous [B, H, T, d]
    hm = head_major_strides(b, n, c, h)
    t = np.arange(b * h * n * dim, dtype=np.float64)
    np.testing.assert_array_equal(_gather(t, 0, hm[:3], b, h, n, dim), t.reshape(b, h, n, dim))


@pytest.mark.parametrize("m,c,slots,want", [(8192, 768, 264, 2), (3000, 384, 264, 3),
                                            (8192, 1024, 264, 1), (16384, 1024, 264, 1),
                                            (1, 64, 264, 4)])
def test_out_splits(m, c, slots, want):
    # 8192 x 768: 64 x 6 = 384 tiles on 264 slots take 2 waves; in 2 slices 768 half-tiles take
    # 3 half-waves (1.5); 3000 x 384: 72 tiles, 3 slices: 216 third-tiles in one wave
    from days.day28_multi_head_attention.driver import kchunk, out_splits

    s = out_splits(m, c, slots)
    assert s == want
    chunk = kchunk(c, s)
    assert chunk % 8 == 0 and -(-c // chunk) <= s and chunk * s >= c


def test_case_and_declarations():
    from common import harness as H
    from days.day28_multi_head_attention import driver

    case = driver.make_case((2, 17, 128, 2), np.random.default_rng(1), causal=True)
    assert case.inputs["w_qkv"].shape == (128, 384) and case.inputs["b_o"].shape == (128,)
    assert case.params["causal"] is True
    assert case.flops == reference.flops(2, 17, 128, True)
    assert case.tolerance()["y"] == 1e-5
    i = case.inputs
    np.testing.assert_array_equal(case.expected()["y"], reference.mha(
        i["x"], i["w_qkv"], i["b_qkv"], i["w_o"], i["b_o"], 2, True))
    assert driver.BEST in driver.VERSIONS
    assert driver.HEADLINE in driver.BENCH_SIZES and driver.AWKWARD in driver.BENCH_SIZES
    assert driver.AWKWARD[1] % 64 and driver.AWKWARD[1] % 128
    assert {c["baseline"] for c in driver.BAR} == {driver.MHA_EVAL, driver.MHA_TRAIN}
    for s in driver.CHECK_SIZES + driver.BENCH_SIZES + list(driver.SIZES.values()):
        driver.validate_size(s)
    assert {s[2] // s[3] for s in driver.CHECK_SIZES} == {64, 128}
    assert {1, 17, 65} <= {s[1] for s in driver.CHECK_SIZES}
    assert H.parse_size(driver, "8x1024x768x12") == (8, 1024, 768, 12)


@pytest.mark.parametrize("text,word", [("2x16x96x3", "head dim"), ("2x16x100x3", "multiple"),
                                       ("2x16x768", "dimension"), ("70000x1x64x1", "65535"),
                                       ("8x2^28x768x12", "rows")])
def test_size_limits(text, word):
    from common import harness as H
    from days.day28_multi_head_attention import driver

    with pytest.raises(H.SizeError, match=word):
        H.parse_size(driver, text)


# --- bad input to the public functions (refused before any launch) ----------------------------

def _good(b=2, n=3, c=64):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((b, n, c)).astype(np.float32)
    return [x, *(a.astype(np.float32) for a in _weights(c, rng))]


@pytest.mark.parametrize("which,bad,exc,word", [
    (0, np.ones((2, 3, 64), np.complex64), TypeError, "complex"),
    (0, "tokens", TypeError, "string"),
    (0, np.ones((3, 64), np.float32), ValueError, "3-D"),
    (1, np.ones((64, 191), np.float32), ValueError, "shape"),
    (1, np.ones((192, 64), np.float32), ValueError, "shape"),       # torch's [out, in] layout
    (2, np.ones(64, np.float32), ValueError, "shape"),
    (3, [[True] * 64] * 64, TypeError, "booleans"),
    (4, np.ones((1, 64), np.float32), ValueError, "shape"),
])
def test_mha_rejects_bad_arrays(which, bad, exc, word):
    from days.day28_multi_head_attention.driver import mha

    args = _good()
    args[which] = bad
    with pytest.raises(exc, match=word):
        mha(*args, heads=1)


@pytest.mark.parametrize("kw,exc,word", [
    ({"heads": 0}, ValueError, "heads"),
    ({"heads": 1.5}, TypeError, "integer"),
    ({"heads": 3}, ValueError, "multiple"),           # 64 / 3
    ({"heads": 2}, ValueError, "head dim"),           # 64 / 2 = 32
    ({"heads": 1, "causal": 1}, TypeError, "causal"),
    ({"heads": 1, "version": "v9"}, ValueError, "unknown version"),
    ({"heads": 1, "version": 4}, TypeError, "version"),
])
def test_mha_rejects_bad_arguments(kw, exc, word):
    from days.day28_multi_head_attention.driver import mha

    with pytest.raises(exc, match=word):
        mha(*_good(), **kw)


def test_mha_zero_width_is_refused():
    from days.day28_multi_head_attention.driver import mha

    with pytest.raises(ValueError, match="C = 0"):
        mha(np.zeros((1, 2, 0), np.float32), np.zeros((0, 0)), np.zeros(0), np.zeros((0, 0)),
            np.zeros(0), heads=1)


@pytest.mark.parametrize("b,n", [(0, 5), (3, 0)])
def test_mha_empty_batch_or_sequence_returns_empty_without_a_launch(b, n):
    from days.day28_multi_head_attention.driver import mha

    args = _good(b=b, n=n)
    y = mha(*args, heads=1)
    assert y.shape == (b, n, 64) and y.dtype == np.float32


def test_mha_from_torch_rejects_other_modules():
    from days.day28_multi_head_attention.driver import mha_from_torch

    class NotPacked:
        in_proj_weight = None
        in_proj_bias = None

    with pytest.raises(ValueError, match="packed"):
        mha_from_torch(np.zeros((1, 2, 64), np.float32), NotPacked())

    class SeqFirst:
        in_proj_weight = in_proj_bias = np.zeros(1)
        batch_first = False

    with pytest.raises(ValueError, match="batch_first"):
        mha_from_torch(np.zeros((1, 2, 64), np.float32), SeqFirst())


# --- on the GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
@pytest.mark.parametrize("size", [(1, 1, 64, 1), (2, 17, 128, 1), (1, 65, 192, 3),
                                  (2, 129, 320, 5)])
def test_causal_matches_reference_on_gpu(gpu, version, size):
    from common import harness as H
    from days.day28_multi_head_attention import driver

    case = driver.make_case(size, np.random.default_rng(11), causal=True)
    r = H.check(driver.launch, version, case)
    assert r.ok, r.message


@pytest.mark.parametrize("version", ["v4", "v5"])
@pytest.mark.parametrize("splits", [1, 2, 3, 4])
def test_split_k_every_slice_count_on_gpu(gpu, version, splits):
    # the split-K output GEMM with each slice count (out_splits picks one by the wave count)
    from common import harness as H
    from days.day28_multi_head_attention import driver

    case = driver.make_case((2, 130, 384, 6), np.random.default_rng(12))
    d = H.DeviceCase(case)
    r = H.check(lambda v, dd: [fn() for _, fn in driver.stages(v, dd, splits=splits)],
                version, case, d)
    assert r.ok, r.message


def test_public_function_on_gpu(gpu):
    from days.day28_multi_head_attention import driver

    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 33, 256)).astype(np.float32)
    w = [a.astype(np.float32) for a in _weights(256, rng)]
    for causal in (False, True):
        y = driver.mha(x, *w, heads=2, causal=causal)
        ref = reference.mha(x, *w, 2, causal)
        assert np.linalg.norm(y - ref) / np.linalg.norm(ref) < 1e-5


def test_matches_torch_module_on_gpu(gpu):
    from common.baselines import torch_or_none
    from days.day28_multi_head_attention import driver

    torch = torch_or_none()
    if torch is None:
        pytest.skip("torch with CUDA is not installed")
    torch.manual_seed(0)
    mod = torch.nn.MultiheadAttention(384, 6, batch_first=True).cuda().eval()
    with torch.no_grad():
        mod.in_proj_bias.normal_()
        mod.out_proj.bias.normal_()
    x = np.random.default_rng(14).standard_normal((2, 50, 384)).astype(np.float32)
    y = driver.mha_from_torch(x, mod)
    torch.backends.cuda.matmul.allow_tf32 = False
    with torch.no_grad():
        xt = torch.from_numpy(x).cuda()
        want = mod(xt, xt, xt, need_weights=False)[0].cpu().numpy()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-5)
