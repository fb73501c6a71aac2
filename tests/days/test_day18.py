import numpy as np
import pytest

from days.day18_fused_backward_prep import reference


def test_reference_by_hand():
    # B=1, T=2, NH=2, HS=1: qkv[0, t, s, h, 0] = 10*t + 3*s + h ... written out
    qkv = np.zeros((1, 2, 3, 2, 1))
    for t in range(2):
        for s in range(3):
            for h in range(2):
                qkv[0, t, s, h, 0] = 100 * s + 10 * h + t
    q, k, v = reference.permute(qkv, 0.5)
    # out[0, h, t, 0]: heads on axis 1, tokens on axis 2
    np.testing.assert_array_equal(q[0, :, :, 0], 0.5 * np.array([[0, 1], [10, 11]]))
    np.testing.assert_array_equal(k[0, :, :, 0], [[100, 101], [110, 111]])
    np.testing.assert_array_equal(v[0, :, :, 0], [[200, 201], [210, 211]])


@pytest.mark.parametrize("shape", [(1, 1, 3, 1, 1), (2, 5, 3, 3, 4), (3, 2, 3, 4, 5)])
def test_reference_equals_the_kernel_index_formula(shape):
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    x0 = x.copy()
    for a, b in zip(reference.permute(x, 0.25), reference.permute_loops(x, 0.25)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(x, x0)  # the input is not touched


def test_backward_is_the_adjoint_of_forward():
    # <forward(x), y> == <x, backward(y)> for every x, y: backward is forward's transpose
    rng = np.random.default_rng(18)
    b, t, nh, hs = 2, 7, 3, 5
    x = rng.standard_normal((b, t, 3, nh, hs))
    ys = [rng.standard_normal((b, nh, t, hs)) for _ in range(3)]
    s = 0.37
    lhs = sum(float((f * y).sum()) for f, y in zip(reference.permute(x, s), ys))
    rhs = float((x * reference.unpermute(*ys, s)).sum())
    assert abs(lhs - rhs) <= 1e-12 * abs(lhs) + 1e-12


def test_round_trips():
    x = np.random.default_rng(3).standard_normal((2, 4, 3, 3, 6))
    np.testing.assert_array_equal(reference.unpermute(*reference.permute(x, 1.0), 1.0), x)
    back = reference.unpermute(*reference.permute(x, 0.5), 2.0)  # the true inverse: 1/scale
    np.testing.assert_allclose(back, x, rtol=1e-15)
    twice = reference.unpermute(*reference.permute(x, 0.5), 0.5)  # the gradient: scale twice
    np.testing.assert_allclose(twice[:, :, 0], 0.25 * x[:, :, 0], rtol=1e-15)
    np.testing.assert_array_equal(twice[:, :, 1:], x[:, :, 1:])


def test_scale_vector_width_and_case():
    from days.day18_fused_backward_prep import driver

    assert reference.default_scale(64) == np.float32(0.125)
    assert reference.default_scale(36) == np.float32(1 / 6)
    assert [driver.vec_width(h) for h in (64, 36, 6, 2, 5, 1)] == [4, 4, 2, 2, 1, 1]
    case = driver.make_case((2, 3, 4, 5), np.random.default_rng(0))
    assert case.inputs["qkv"].shape == (2, 3, 3, 4, 5)
    assert case.outputs["q"][0] == (2, 4, 3, 5)
    assert case.bytes == 2 * 4 * (2 * 3 * 3 * 4 * 5)
    assert case.params["scale"] == reference.default_scale(5)
    b, t, nh, hs = driver.SIZES["default"]
    assert case.bytes > 0 and 2 * 4 * 3 * b * t * nh * hs >= 100e6  # the default moves >= 100 MB


def test_sizes_are_validated():
    from common import harness as H
    from days.day18_fused_backward_prep import driver

    assert H.parse_size(driver, "8x1024x12x64") == (8, 1024, 12, 64)
    with pytest.raises(H.SizeError, match="2\\^31"):
        H.parse_size(driver, "64x65536x16x64")
    with pytest.raises(H.SizeError, match="dimension"):
        H.parse_size(driver, "8x1024x768")


@pytest.mark.parametrize("size", [(1, 1, 1, 1), (2, 33, 3, 5), (3, 17, 4, 6), (2, 31, 12, 64),
                                  (5, 7, 1, 1000)])
def test_inverse_on_gpu(gpu, size):
    from common.check import compare
    from days.day18_fused_backward_prep import driver

    b, t, nh, hs = size
    rng = np.random.default_rng(b * t * nh * hs)
    g = [rng.standard_normal((b, nh, t, hs)).astype(np.float32) for _ in range(3)]
    want = reference.unpermute(*g, reference.default_scale(hs))
    for kind in ("scalar", "vector"):
        r = compare(driver.unpermute(*g, kind=kind), want)
        assert r.ok, f"{kind} at {size}: {r.message}"
    # forward then backward with the true inverse scale gives qkv back
    qkv = rng.standard_normal((b, t, 3, nh, hs)).astype(np.float32)
    q, k, v = driver.permute(qkv, scale=2.0)
    np.testing.assert_array_equal(driver.unpermute(q, k, v, scale=0.5), qkv)  # x*2*0.5 is exact


def test_every_version_with_a_custom_scale_on_gpu(gpu):
    from days.day18_fused_backward_prep import driver

    qkv = np.random.default_rng(5).standard_normal((2, 9, 3, 4, 12)).astype(np.float32)
    want = reference.permute(qkv, np.float32(0.3))
    for v in driver.VERSIONS:
        for got, w in zip(driver.permute(qkv, scale=0.3, version=v), want):
            np.testing.assert_allclose(got, w, rtol=1e-6, err_msg=v)
