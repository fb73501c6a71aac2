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


def test_cases_stress_small_sizes_only():
    from days.day09_layer_norm import driver

    case = driver.make_case((12, 40), np.random.default_rng(0))
    x = case.inputs["x"]
    assert abs(x[0].mean() - 1e4) < 1 and np.all(x[4] == np.float32(2500.25))
    assert case.bytes == 2 * 12 * 40 * 4 + 2 * 40 * 4 + 2 * 12 * 4
    big = driver.make_case((2048, 4096), np.random.default_rng(0))
    assert abs(big.inputs["x"].mean()) < 0.01  # plain N(0,1) activations


# --- GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("c", [1, 33, 768, 2048, 8192, 8193, 16388])
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
