import numpy as np
import pytest

from days.day02_vector_add import reference


def test_reference_by_hand():
    assert reference.vector_add([1, 2.5], [3, -2.5]).tolist() == [4.0, 0.0]


def test_float32_inputs_are_added_in_float64():
    a = np.float32(1e8)
    b = np.float32(1.0)
    assert reference.vector_add([a], [b])[0] == 100000001.0  # float32 would round to 1e8


def test_numpy_api_on_gpu(gpu):
    from days.day02_vector_add import driver

    a = np.arange(10, dtype=np.float32)
    for v in driver.VERSIONS:
        assert driver.vector_add(a, 2 * a, version=v).tolist() == (3 * a).tolist()
    with pytest.raises(ValueError, match="differ"):
        driver.vector_add(a, a[:5])
