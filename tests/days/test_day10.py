import math

import numpy as np
import pytest

from common.check import compare
from days.day10_elementwise_ops import reference


def _gelu_scalar(u):
    # the formula written out with Python's math module, one value at a time
    return 0.5 * u * (1.0 + math.tanh(math.sqrt(2.0 / math.pi) * (u + 0.044715 * u ** 3)))


def test_gelu_by_hand():
    assert reference.gelu_tanh(0.0) == 0.0
    np.testing.assert_allclose(reference.gelu_tanh(1.0), 0.8411919906082768, rtol=1e-15)
    np.testing.assert_allclose(reference.gelu_tanh(-1.0), -0.15880800939172324, rtol=1e-14)
    for u in (-7.5, -2.0, -0.3, 0.01, 0.5, 2.5, 6.0):
        np.testing.assert_allclose(reference.gelu_tanh(u), _gelu_scalar(u), rtol=1e-14)
    np.testing.assert_allclose(reference.gelu_tanh(30.0), 30.0, rtol=1e-15)  # ~ u for u >> 0


def test_gelu_odd_part_is_u():
    # 0.5u(1 + tanh z(u)) - 0.5(-u)(1 + tanh z(-u)) = u, since z is odd
    u = np.linspace(-6, 6, 1001)
    np.testing.assert_allclose(reference.gelu_tanh(u) - reference.gelu_tanh(-u), u, atol=1e-14)


def test_sigmoid_form_equals_tanh_form():
    u = np.linspace(-12, 12, 20001)
    # the tanh form itself cancels in the negative tail (1 + tanh z -> 0 in float64 too), so the
    # two agree to rounding of the tanh form: ~1e-16 absolute
    np.testing.assert_allclose(reference.gelu_sigmoid_form(u), reference.gelu_tanh(u),
                               rtol=1e-12, atol=1e-14)
    mid = np.abs(u) < 3
    np.testing.assert_allclose(reference.gelu_sigmoid_form(u[mid]), reference.gelu_tanh(u[mid]),
                               rtol=1e-13)
    assert reference.gelu_sigmoid_form(-400.0) == 0.0  # exp overflow: u / inf = -0, no NaN


def test_float32_sigmoid_form_meets_the_tolerance():
    # the kernels' formula in float32 (exp, divide) vs the float64 tanh form
    u = np.random.default_rng(0).uniform(-12, 12, 200001).astype(np.float32)
    f = np.float32
    with np.errstate(over="ignore"):
        y = u / (f(1) + np.exp(-(f(1.5957691216057308) * u * (f(1) + f(0.044715) * u * u))))
    assert compare(y, reference.gelu_tanh(u)).ok


def test_relu_and_bias_broadcast_by_hand():
    x = np.array([[1.0, -2.0, 3.0], [-1.0, 0.5, -4.0]])
    b = np.array([0.5, 1.0, -1.0])
    # x * 2 + b = [[2.5, -3, 5], [-1.5, 2, -9]]
    np.testing.assert_array_equal(reference.bias_act(x, b, 2.0, "relu"),
                                  [[2.5, 0.0, 5.0], [0.0, 2.0, 0.0]])
    np.testing.assert_allclose(reference.bias_act(x, b, 2.0, "gelu"),
                               [[_gelu_scalar(v) for v in row] for row in [[2.5, -3, 5], [-1.5, 2, -9]]],
                               rtol=1e-14)
    with pytest.raises(ValueError):
        reference.bias_act(x, b, 1.0, "swish")


def test_bias_act_chunks_match_one_shot():
    # bias_act works in row chunks of ~256K elements; 600 x 1000 is three chunks
    rng = np.random.default_rng(1)
    x = rng.standard_normal((600, 1000)).astype(np.float32)
    b = rng.standard_normal(1000).astype(np.float32)
    one_shot = reference.gelu_tanh(x.astype(np.float64) * float(np.float32(0.3)) + b)
    np.testing.assert_array_equal(reference.bias_act(x, b, 0.3), one_shot)


def test_scale_is_the_float32_the_kernel_gets():
    x = np.ones((1, 1))
    assert reference.bias_act(x, [0.0], 0.1, "relu")[0, 0] == float(np.float32(0.1))


def test_bytes_and_geometry():
    from days.day10_elementwise_ops import driver

    assert driver.bytes_moved("v1", 8192, 3072) == 3 * driver.bytes_moved("v4", 8192, 3072) - 2 * 4 * 3072
    case = driver.make_case((5, 7), np.random.default_rng(0))
    assert case.bytes == 2 * 5 * 7 * 4 + 7 * 4
    assert driver.block_shape(768) == (256, 1)   # 3072 floats as float4: 3 blocks across
    assert driver.block_shape(1) == (32, 8)      # one column: 8 rows per block
    assert driver.block_shape(33) == (64, 4)


def test_round_rows():
    from days.day10_elementwise_ops import driver as D

    assert D.round_rows(352, 1, 4) == 352 and D.round_rows(353, 1, 4) == 352
    assert D.round_rows(3, 1, 4) == 4 and D.round_rows(5, 2, 4) == 4
    assert D.round_rows(5, 8, 4) == 5 and D.round_rows(7, 1, 1) == 7


def test_fallbacks_are_named():
    from days.day10_elementwise_ops import driver as D

    assert D.same_as("v3", (8191, 3073)) == "v2" and "= v2" in D.VERSIONS["v3"]
    assert D.same_as("v3", (8192, 3072)) is None
    assert all(D.same_as(v, (8191, 3073)) is None for v in ("v1", "v2", "v4", "v5"))


def test_bench_sizes_and_bar():
    from common.bars import describe
    from days.day10_elementwise_ops import driver as D

    assert (8191, 3073) in D.BENCH_SIZES
    text = describe(D.BAR)
    assert ">= 85% of ceiling at every bench size" in text
    assert "at least as fast as the library at 8191x3073" in text
    assert D.BEST == "v5"


@pytest.mark.parametrize("args,kwargs,exc,word", [
    ((np.ones((2, 3), np.complex64), np.zeros(3)), {}, TypeError, "complex"),
    (("abc", np.zeros(3)), {}, TypeError, "string"),
    ((np.ones((2, 3)), np.zeros(3, bool)), {}, TypeError, "booleans"),
    ((np.ones(3), np.zeros(3)), {}, ValueError, "2-D"),
    ((np.ones((2, 3, 1)), np.zeros(1)), {}, ValueError, "2-D"),
    ((np.ones((2, 3)), np.zeros(4)), {}, ValueError, "bias"),
    ((np.ones((2, 3)), np.zeros((1, 3))), {}, ValueError, "bias"),
    ((np.ones((2, 3)), np.zeros(3)), {"scale": float("inf")}, ValueError, "finite"),
    ((np.ones((2, 3)), np.zeros(3)), {"scale": 1e39}, ValueError, "scale"),
    ((np.ones((2, 3)), np.zeros(3)), {"scale": "2"}, TypeError, "scale"),
    ((np.ones((2, 3)), np.zeros(3)), {"act": "swish"}, ValueError, "gelu"),
    ((np.ones((2, 3)), np.zeros(3)), {"act": None}, ValueError, "act"),
    ((np.ones((2, 3)), np.zeros(3)), {"version": "v9"}, ValueError, "v1, v2, v3, v4, v5"),
    ((np.ones((2, 3)), np.zeros(3)), {"version": 5}, TypeError, "version"),
])
def test_bias_act_refuses(args, kwargs, exc, word):
    from days.day10_elementwise_ops.driver import bias_act

    with pytest.raises(exc, match=word):
        bias_act(*args, **kwargs)


def test_relu_bias_refuses():
    from days.day10_elementwise_ops.driver import relu_bias

    with pytest.raises(ValueError, match="bias"):
        relu_bias(np.ones((2, 3)), np.zeros(2))
    with pytest.raises(ValueError, match="unknown version"):
        relu_bias(np.ones((2, 3)), np.zeros(3), version="v0")


def test_unknown_versions_are_refused_before_any_launch():
    from days.day10_elementwise_ops import driver as D

    with pytest.raises(ValueError, match="unknown version 'v6'"):
        D.launch("v6", None)
    with pytest.raises(ValueError, match="unknown version"):
        D.bytes_moved("v6", 8, 8)


def test_empty_input_is_empty_without_a_launch():
    from days.day10_elementwise_ops.driver import bias_act, relu_bias

    y = bias_act(np.ones((0, 5)), np.zeros(5))
    assert y.shape == (0, 5) and y.dtype == np.float32
    y = relu_bias(np.ones((3, 0)), np.zeros(0))
    assert y.shape == (3, 0) and y.dtype == np.float32


# --- GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 1), (6, 2), (9, 3), (9, 7), (300, 1000), (3, 4100),
                                   (9, 3073), (70001, 4), (70001, 3)])
def test_relu_every_version_on_gpu(gpu, shape):
    from days.day10_elementwise_ops import driver

    rng = np.random.default_rng(shape[1])
    x = rng.standard_normal(shape).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    ref = reference.bias_act(x, b, -1.5, "relu")
    for v in driver.VERSIONS:
        y = driver.relu_bias(x, b, -1.5, version=v)
        r = compare(y, ref)
        assert r.ok, f"{v}: {r.message}"
        assert np.all(y[ref == 0] == 0), v  # ReLU's zeros are exact


def test_gelu_tails_on_gpu(gpu):
    from days.day10_elementwise_ops import driver

    x = np.linspace(-40, 40, 64 * 1000, dtype=np.float32).reshape(64, 1000)
    b = np.zeros(1000, np.float32)
    ref = reference.bias_act(x, b, 1.0, "gelu")
    for v in driver.VERSIONS:
        y = driver.bias_act(x, b, 1.0, "gelu", version=v)
        assert np.isfinite(y).all(), v  # exp overflow must give -0, not NaN
        r = compare(y, ref)
        assert r.ok, f"{v}: {r.message}"


@pytest.mark.parametrize("c", [1, 2, 3, 5, 6, 7, 30, 1001, 3073])
def test_v5_every_head_length_on_gpu(gpu, c):
    """v5 (the default) on 9 rows: at odd widths the rows' heads run through 0, 3, 2, 1."""
    from days.day10_elementwise_ops import driver

    rng = np.random.default_rng(c)
    x = (2 * rng.standard_normal((9, c))).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    r = compare(driver.bias_act(x, b, 0.7), reference.bias_act(x, b, 0.7))
    assert r.ok, r.message
