import numpy as np
import pytest

from common.check import compare
from days.day09_layer_norm import reference


def test_reference_by_hand():
    # mean 2.5, var = (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25, rstd = 1/sqrt(1.25)
    out, mean, rstd = reference.layer_norm([[1.0, 2.0, 3.0, 4.0]], [2.0] * 4, [1.0] * 4, eps=0.0)
    np.testing.assert_allclose(mean, [2.5], rtol=1e-15)
    np.testing.assert_allclose(rstd, [0.8944271909999159], rtol=1e-15)
    np.testing.assert_allclose(out, [[1 - 2.6832815729997477, 1 - 0.8944271909999159,
                                      1 + 0.8944271909999159, 1 + 2.6832815729997477]], rtol=1e-14)


def test_eps_and_biased_variance():
    # var of [0, 2] is 1 (divide by C, not C - 1); eps adds under the root
    _, _, rstd = reference.layer_norm([[0.0, 2.0]], [1, 1], [0, 0], eps=3.0)
    np.testing.assert_allclose(rstd, [0.5], rtol=1e-15)


def test_reference_closed_forms():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((7, 50)) * 3 + 5
    out, mean, rstd = reference.layer_norm(x, np.ones(50), np.zeros(50), eps=1e-5)
    var = x.var(axis=1)  # a second formulation: numpy's own variance
    np.testing.assert_allclose(mean, x.mean(axis=1), rtol=1e-14)
    np.testing.assert_allclose(rstd, 1 / np.sqrt(var + 1e-5), rtol=1e-13)
    # with weight 1, bias 0 every output row has mean 0 and variance var / (var + eps)
    np.testing.assert_allclose(out.mean(axis=1), 0, atol=1e-13)
    np.testing.assert_allclose(out.var(axis=1), var / (var + 1e-5), rtol=1e-12)


def test_constant_row_gives_bias():
    b = np.array([0.5, -1.0, 2.0])
    out, mean, rstd = reference.layer_norm([[7.0, 7.0, 7.0]], [3.0, 3.0, 3.0], b)
    np.testing.assert_allclose(out, [b], atol=1e-12)
    np.testing.assert_allclose(rstd, [1 / np.sqrt(1e-5)], rtol=1e-12)


def _rows(offset, n=64, c=768, seed=1):
    rng = np.random.default_rng(seed)
    x = (offset + rng.standard_normal((n, c))).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
    b = (0.1 * rng.standard_normal(c)).astype(np.float32)
    return x, w, b


def _errors(got, ref):
    return {k: compare(g, r) for k, g, r in zip(("out", "mean", "rstd"), got, ref)}


@pytest.mark.parametrize("method", reference.METHODS)
def test_every_float32_method_is_fine_near_zero(method):
    x, w, b = _rows(0.0)
    errs = _errors(reference.layer_norm_float32(x, w, b, method=method), reference.layer_norm(x, w, b))
    assert all(e.ok for e in errs.values()), {k: e.message for k, e in errs.items()}


def test_float32_methods_at_offset_1e4():
    x, w, b = _rows(1e4)
    ref = reference.layer_norm(x, w, b)
    naive = _errors(reference.layer_norm_float32(x, w, b, method="naive"), ref)
    # E[x^2] - E[x]^2 cancels: the variance is garbage (or negative: NaN)
    assert not naive["rstd"].ok and not naive["out"].ok
    for method in ("two_pass", "welford"):
        e = _errors(reference.layer_norm_float32(x, w, b, method=method), ref)
        assert e["mean"].ok, method  # the mean itself is as good as a float32 can be...
        assert not e["out"].ok, method  # ...but x - (a float32 mean) loses at least ulp(1e4)/2
        assert e["out"].rel_l2 > 1e-4, method
        # the variance is close (no cancellation), though not always within 1e-5: the plain
        # two-pass's is off by (mean error)^2, which the corrected two-pass subtracts (md^2)
        assert e["rstd"].rel_l2 < 1e-3, method
    good = _errors(reference.layer_norm_float32(x, w, b, method="corrected"), ref)
    assert all(e.ok for e in good.values()), {k: e.message for k, e in good.items()}


def test_corrected_two_pass_on_the_stress_rows():
    from days.day09_layer_norm.driver import stress_rows

    rng = np.random.default_rng(2)
    for c in (1, 33, 1001):
        x = stress_rows(rng, 12, c)
        w = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
        b = (0.1 * rng.standard_normal(c)).astype(np.float32)
        errs = _errors(reference.layer_norm_float32(x, w, b), reference.layer_norm(x, w, b))
        assert all(e.ok for e in errs.values()), (c, {k: e.message for k, e in errs.items()})


def test_welford_merge_equals_whole():
    row = np.random.default_rng(3).standard_normal(1001) * 4 + 9

    def state(v):
        return len(v), v.mean(), ((v - v.mean()) ** 2).sum()

    n, m, m2 = reference.welford_merge(state(row[:300]), state(row[300:]))
    assert n == 1001
    np.testing.assert_allclose(m, row.mean(), rtol=1e-14)
    np.testing.assert_allclose(m2 / n, row.var(), rtol=1e-12)
    assert reference.welford_merge((0, 0.0, 0.0), (0, 0.0, 0.0)) == (0, 0.0, 0.0)


def test_kernel_choice():
    from days.day09_layer_norm.driver import v4_config, v5_config

    assert v4_config(768) == ("layernorm_v4_vec4_items1", 192)     # 192 float4, 1 per thread
    assert v4_config(8192) == ("layernorm_v4_vec4_items4", 512)    # 2048 float4 over 512
    assert v4_config(8191) == ("layernorm_v4_vec1_items16", 512)   # odd width: scalar
    assert v4_config(16384) == ("layernorm_v4_vec4_items8", 512)
    assert v4_config(16388) == ("layernorm_v4_long_vec4", 512)     # wider than registers
    assert v4_config(8193) == ("layernorm_v4_long_vec1", 512)
    assert v5_config(768) == ("layernorm_v5_vec4_items6", 256)     # 6 float4 per lane
    assert v5_config(2048) == ("layernorm_v5_vec4_items16", 256)
    assert v5_config(1023) == ("layernorm_v5_vec1_items32", 256)
    assert v5_config(2052) == v4_config(2052)                      # too wide for a warp
    assert v5_config(1) == ("layernorm_v5_vec1_items1", 256)


def test_v8_kernel_choice():
    from days.day09_layer_norm.driver import v8_config

    # rows kernel (C <= 2048 on sm_90): float4 per lane for the longest body C // 4, slots
    assert v8_config(768) == ("rows", "layernorm_v8_rows_items6_p1", 256, 128 + 8 * 192 * 16)
    assert v8_config(1023)[:2] == ("rows", "layernorm_v8_rows_items8_p1")   # 255 float4
    assert v8_config(1025)[:2] == ("rows", "layernorm_v8_rows_items8_p1")   # 256: still 8
    assert v8_config(2048) == ("rows", "layernorm_v8_rows_items16_p2", 256, 128 + 16 * 512 * 16)
    assert v8_config(3) == ("rows", "layernorm_v8_rows_items1_p1", 256, 128)  # no body: no slot
    # block kernel: the fewest float4 per thread with at most 256 threads, then 512
    assert v8_config(2049) == ("block", "layernorm_v8_block_items2", 256, 0)
    assert v8_config(4097) == ("block", "layernorm_v8_block_items4", 256, 0)  # 1024 float4
    assert v8_config(8191) == ("block", "layernorm_v8_block_items8", 256, 0)
    assert v8_config(8197) == ("block", "layernorm_v8_block_items8", 288, 0)  # 2049 float4
    assert v8_config(16387) == ("block", "layernorm_v8_block_items8", 512, 0)  # 4096 float4
    assert v8_config(16388)[:2] == ("long", "layernorm_v8_long")
    # before Hopper (no bulk copies) every width takes the block kernel
    assert v8_config(768, hopper=False) == ("block", "layernorm_v8_block_items1", 192, 0)
    assert v8_config(1, hopper=False) == ("block", "layernorm_v8_block_items1", 32, 0)


def test_fallbacks_are_named(monkeypatch):
    from days.day09_layer_norm import driver as D

    monkeypatch.setattr(D, "device_info", lambda: {"compute_capability": "9.0",
                                                   "smem_per_block_optin": 227 * 1024})
    # v5 runs v4's kernel where a warp cannot hold the row; v6 and v7 fall back down the ladder
    assert D.same_as("v5", (8192, 8192)) == "v4" and D.same_as("v5", (8192, 4097)) == "v4"
    assert D.same_as("v5", (8192, 1023)) is None and D.same_as("v5", (8192, 2048)) is None
    assert D.same_as("v6", (8192, 768)) is None and D.same_as("v6", (8192, 2048)) == "v5"
    assert D.same_as("v6", (8192, 1023)) == "v5" and D.same_as("v6", (8192, 4097)) == "v4"
    assert D.same_as("v7", (8192, 768)) is None and D.same_as("v7", (8192, 2048)) is None
    assert D.same_as("v7", (8192, 1023)) == "v5" and D.same_as("v7", (8192, 8192)) == "v4"
    assert all(D.same_as(v, (8192, 1023)) is None for v in ("v1", "v2", "v3", "v4", "v8"))
    # v8's own kernels serve widths that are not a multiple of 4; aligned rows take v7's path
    assert D.same_as("v8", (8192, 768)) == "v7" and D.same_as("v8", (8192, 2048)) == "v7"
    assert D.same_as("v8", (8192, 8192)) == "v4" and D.same_as("v8", (8192, 4097)) is None
    # the version texts say so
    assert "= v4" in D.VERSIONS["v5"] and "= v5" in D.VERSIONS["v6"] and "= v6" in D.VERSIONS["v7"]
    assert "= v7" in D.VERSIONS["v8"]
    monkeypatch.setattr(D, "device_info", lambda: {"compute_capability": "8.0",
                                                   "smem_per_block_optin": 163 * 1024})
    assert D.same_as("v7", (8192, 768)) == "v6"  # no bulk copies before Hopper


def test_bench_sizes_and_bar():
    from common.bars import describe
    from days.day09_layer_norm import driver as D

    assert (8192, 1023) in D.BENCH_SIZES and (8192, 4097) in D.BENCH_SIZES  # odd widths
    barred = {tuple(s) for clause in D.BAR for s in clause["sizes"]}
    assert barred == set(D.BENCH_SIZES)
    text = describe(D.BAR)
    assert ">= 90% of a same-bytes copy and at least as fast as the library at 8192x768" in text
    assert ">= 80% of ceiling and at least as fast as the library at 8192x1023" in text
    assert D.BEST in D.VERSIONS and D.BEST == list(D.VERSIONS)[-1]


def test_check_sizes_cover_every_split():
    """Every head length 0..3 at odd widths in every v8 kernel (rows, block, long), rows of 1..3
    floats, and C % 4 == 2."""
    from days.day09_layer_norm.driver import CHECK_SIZES, v8_config

    heads = {}
    for n, c in CHECK_SIZES:
        kind = v8_config(c)[0]
        for r in range(n):
            heads.setdefault((kind, c % 4 != 0), set()).add((-r * c) % 4 if c >= 4 else None)
    for kind in ("rows", "block", "long"):
        assert heads[(kind, True)] >= {0, 1, 2, 3}, kind
    widths = {c for _, c in CHECK_SIZES}
    assert {1, 2, 3} <= widths and any(c % 4 == 2 and c > 4 for c in widths)


@pytest.mark.parametrize("args,exc,word", [
    ((np.ones((2, 3), np.complex64), np.ones(3), np.zeros(3)), TypeError, "complex"),
    (("abc", np.ones(3), np.zeros(3)), TypeError, "string"),
    ((np.ones((2, 3), bool), np.ones(3), np.zeros(3)), TypeError, "booleans"),
    ((np.ones(3), np.ones(3), np.zeros(3)), ValueError, "2-D"),
    ((np.ones((2, 3, 4)), np.ones(4), np.zeros(4)), ValueError, "2-D"),
    ((np.ones((2, 3)), np.ones(4), np.zeros(3)), ValueError, "weight"),
    ((np.ones((2, 3)), np.ones(3), np.zeros((1, 3))), ValueError, "bias"),
    ((np.ones((2, 3)), np.ones(3), ["a", "b", "c"]), TypeError, "bias"),
    ((np.ones((2, 0)), np.ones(0), np.zeros(0)), ValueError, "undefined"),
])
def test_layer_norm_refuses(args, exc, word):
    from days.day09_layer_norm.driver import layer_norm

    with pytest.raises(exc, match=word):
        layer_norm(*args)


@pytest.mark.parametrize("eps,exc,word", [
    (0.0, ValueError, "eps"), (-1e-5, ValueError, "eps"), (float("nan"), ValueError, "finite"),
    (1e-50, ValueError, "float32"), ("1e-5", TypeError, "eps"), (None, TypeError, "eps"),
])
def test_layer_norm_refuses_bad_eps(eps, exc, word):
    from days.day09_layer_norm.driver import layer_norm

    with pytest.raises(exc, match=word):
        layer_norm(np.ones((2, 3)), np.ones(3), np.zeros(3), eps=eps)


def test_unknown_versions_are_refused_before_any_launch():
    from days.day09_layer_norm import driver as D

    with pytest.raises(ValueError, match="v1, v2, v3, v4, v5, v6, v7, v8"):
        D.layer_norm(np.ones((2, 3)), np.ones(3), np.zeros(3), version="v9")
    with pytest.raises(TypeError, match="version"):
        D.layer_norm(np.ones((2, 3)), np.ones(3), np.zeros(3), version=8)
    with pytest.raises(ValueError, match="unknown version 'v9'"):
        D.launch("v9", None)  # before it looks at the device case


def test_layer_norm_of_no_rows_is_empty_without_a_launch():
    from days.day09_layer_norm.driver import layer_norm

    out, mean, rstd = layer_norm(np.ones((0, 5)), np.ones(5), np.zeros(5))
    assert out.shape == (0, 5) and mean.shape == (0,) and rstd.shape == (0,)
    assert out.dtype == mean.dtype == rstd.dtype == np.float32
    out, mean, rstd = layer_norm(np.ones((0, 0)), [], [])
    assert out.shape == (0, 0) and mean.shape == (0,)


def test_demo_stats_refuses():
    from days.day09_layer_norm.driver import demo_stats

    x, w, b = np.ones((2, 3)), np.ones(3), np.zeros(3)
    with pytest.raises(ValueError, match="method"):
        demo_stats(x, w, b, 4)
    with pytest.raises(TypeError, match="method"):
        demo_stats(x, w, b, 1.5)
    with pytest.raises(TypeError, match="method"):
        demo_stats(x, w, b, True)
    with pytest.raises(ValueError, match="weight"):
        demo_stats(x, np.ones(2), b, 0)
    out, mean, rstd = demo_stats(np.ones((0, 3)), w, b, 3)  # no rows: nothing launched
    assert out.shape == (0, 3) and mean.shape == rstd.shape == (0,)


def test_stability_rows_refuses():
    from days.day09_layer_norm.driver import stability_rows

    with pytest.raises(ValueError, match="rows"):
        stability_rows(rows=0)
    with pytest.raises(TypeError, match="cols"):
        stability_rows(cols="768")
    with pytest.raises(TypeError, match="offset"):
        stability_rows(offsets=("big",))


def test_cases_stress_small_sizes_only():
    from days.day09_layer_norm import driver

    case = driver.make_case((12, 40), np.random.default_rng(0))
    x = case.inputs["x"]
    assert abs(x[0].mean() - 1e4) < 1 and np.all(x[4] == np.float32(2500.25))
    assert case.bytes == 2 * 12 * 40 * 4 + 2 * 40 * 4 + 2 * 12 * 4
    big = driver.make_case((2048, 4096), np.random.default_rng(0))
    assert abs(big.inputs["x"].mean()) < 0.01  # plain N(0,1) activations


# --- GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [1, 2, 3, 33, 768, 1023, 2048, 2050, 4097, 8192, 8193, 16388,
                               16389])
def test_every_version_at_offset_1e4_on_gpu(gpu, c):
    from days.day09_layer_norm import driver

    x, w, b = _rows(1e4, n=10, c=c, seed=c)
    ref = reference.layer_norm(x, w, b)
    for v in driver.VERSIONS:
        errs = _errors(driver.layer_norm(x, w, b, version=v), ref)
        assert all(e.ok for e in errs.values()), (v, {k: e.message for k, e in errs.items()})


def test_demo_methods_on_gpu(gpu):
    from days.day09_layer_norm import driver

    x, w, b = _rows(1e4)
    ref = reference.layer_norm(x, w, b)
    naive = _errors(driver.demo_stats(x, w, b, 0), ref)
    assert not naive["rstd"].ok
    for method in (1, 2):  # Welford, plain two-pass: the mean is fine, out is not
        e = _errors(driver.demo_stats(x, w, b, method), ref)
        assert e["mean"].ok and not e["out"].ok, driver.DEMO_METHODS[method]
        assert e["rstd"].rel_l2 < 1e-3, driver.DEMO_METHODS[method]
    good = _errors(driver.demo_stats(x, w, b, 3), ref)
    assert all(e.ok for e in good.values())


def test_matches_torch_on_gpu(gpu):
    from common.baselines import torch_or_none
    from days.day09_layer_norm import driver

    torch = torch_or_none()
    if torch is None:
        pytest.skip("torch not installed")
    x, w, b = _rows(0.0, n=300, c=1600)
    t = torch.nn.functional.layer_norm(torch.as_tensor(x, device="cuda"), (1600,),
                                       torch.as_tensor(w, device="cuda"),
                                       torch.as_tensor(b, device="cuda"), 1e-5).cpu().numpy()
    out, _, _ = driver.layer_norm(x, w, b)
    np.testing.assert_allclose(out, t, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("shape", [(1, 1), (1, 2), (4, 3), (9, 5), (9, 7), (2000, 1023),
                                   (3300, 2045), (9, 2049), (9, 16387)])
def test_v8_every_split_on_gpu(gpu, shape):
    """v8 (the default) on rows whose heads run through 0..3, at each of its kernels; the
    smallest input; rows shorter than a float4."""
    from days.day09_layer_norm import driver

    rng = np.random.default_rng(shape[1])
    n, c = shape
    x = driver.stress_rows(rng, n, c)
    w = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
    b = (0.1 * rng.standard_normal(c)).astype(np.float32)
    errs = _errors(driver.layer_norm(x, w, b), reference.layer_norm(x, w, b))
    assert all(e.ok for e in errs.values()), {k: e.message for k, e in errs.items()}

