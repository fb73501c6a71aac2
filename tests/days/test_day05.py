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


def test_v4_kernel_choice():
    from days.day05_shared_softmax.driver import v4_kernel_name

    assert v4_kernel_name(8192) == "softmax_v4_vec4_items8"   # 2048 float4 over 256 threads
    assert v4_kernel_name(8193) == "softmax_v4_vec1_items64"  # odd width: scalar, 33 per thread
    assert v4_kernel_name(8192 + 4) == "softmax_v4_vec4_items16"
    assert v4_kernel_name(4) == "softmax_v4_warp_vec4_items1"     # short rows: a warp each
    assert v4_kernel_name(1024) == "softmax_v4_warp_vec4_items8"
    assert v4_kernel_name(1023) == "softmax_v4_warp_vec1_items32"
    assert v4_kernel_name(1028) == "softmax_v4_vec4_items2"
    assert v4_kernel_name(65536) == "softmax_v4_long_vec4"
    assert v4_kernel_name(100003) == "softmax_v3"


@pytest.mark.parametrize("cols", [1, 33, 1000, 8193, 16384])
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
