import numpy as np
import pytest

from days.day05_shared_softmax import reference


def test_reference_by_hand():
    np.testing.assert_allclose(reference.softmax([[1.0, 1.0, 1.0, 1.0]]), [[0.25] * 4])
    y = reference.softmax([[np.log(1.0), np.log(2.0), np.log(5.0)]])
    np.testing.assert_allclose(y, [[0.125, 0.25, 0.625]], rtol=1e-15)


def test_online_recurrence_equals_two_pass():
    row = np.random.default_rng(3).standard_normal(1000) * 50
    m, s = reference.online_max_sum(row)
    assert m == row.max()
    np.testing.assert_allclose(s, np.exp(row - row.max()).sum(), rtol=1e-13)


def test_kernel_choice():
    from days.day05_shared_softmax.driver import kernel_for, same_as

    assert kernel_for("v4", 8192) == ("softmax_v4_vec4_items8", 256, 1)   # 2048 float4 / 256 threads
    assert kernel_for("v4", 8193) == ("softmax_v4_vec1_items64", 256, 1)  # odd: scalars, 33 each
    assert kernel_for("v4", 8196)[0] == "softmax_v4_vec4_items16"
    assert kernel_for("v4", 65536)[0] == "softmax_v4_vec4_items16"       # the rest is read twice
    assert kernel_for("v5", 4) == ("softmax_v5_warp_vec4_items1", 256, 8)  # short rows: a warp each
    assert kernel_for("v5", 1024)[0] == "softmax_v5_warp_vec4_items8"
    assert kernel_for("v5", 1023)[0] == "softmax_v5_warp_vec1_items32"
    assert kernel_for("v5", 1028)[0] == "softmax_v4_vec4_items2" and same_as("v5", (3, 1028)) == "v4"
    assert same_as("v5", (3, 1024)) is None and same_as("v6", (3, 5000)) is None
    # v6: float4 at any width; a warp up to 1027 columns, a block of 256 up to 16387, then 1024
    assert kernel_for("v6", 1027) == ("softmax_v6_warp_items8", 256, 8)
    assert kernel_for("v6", 1028) == ("softmax_v6_block_items2", 256, 1)
    assert kernel_for("v6", 8193)[0] == "softmax_v6_block_items8"
    assert kernel_for("v6", 16387)[0] == "softmax_v6_block_items16"
    assert kernel_for("v6", 16388) == ("softmax_v6_long", 1024, 1)
    with pytest.raises(ValueError, match="v1"):
        kernel_for("v1", 10)


@pytest.mark.parametrize("x,exc,word", [
    (np.ones((2, 3), complex), TypeError, "complex"),
    (np.ones(5), ValueError, "2-D"),
    (np.ones((2, 2, 2)), ValueError, "2-D"),
    ([[1, 2], [3]], ValueError, "ragged"),
    (None, TypeError, "None"),
    (np.array([["a"]]), TypeError, "dtype"),
])
def test_softmax_refuses_bad_input(x, exc, word):
    from days.day05_shared_softmax.driver import softmax

    with pytest.raises(exc, match=word):
        softmax(x)


def test_softmax_unknown_version_and_empty():
    from days.day05_shared_softmax.driver import BEST, softmax

    with pytest.raises(ValueError, match="unknown version 'v9'.*v1, v2, v3, v4, v5, v6"):
        softmax(np.ones((2, 2)), version="v9")
    for shape in ((0, 5), (4, 0), (0, 0)):
        y = softmax(np.ones(shape))  # nothing is launched (this runs without a GPU)
        assert y.shape == shape and y.dtype == np.float32
    assert BEST == "v6"


@pytest.mark.parametrize("cols", [1, 33, 1000, 8193, 16384, 50257])
def test_values_up_to_1e4_on_gpu(gpu, cols):
    from common.check import compare
    from days.day05_shared_softmax import driver

    rng = np.random.default_rng(cols)
    x = rng.uniform(-1e4, 1e4, (9, cols)).astype(np.float32)
    x[0] = 1e4  # a row of equal, huge values: uniform output
    ref = reference.softmax(x)
    for v in driver.VERSIONS:
        r = compare(driver.softmax(x, v), ref)
        assert r.ok, f"{v} at width {cols}: {r.message}"
