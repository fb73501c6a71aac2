import numpy as np
import pytest

from days.day03_matrix_add import reference


def test_reference_by_hand():
    assert reference.matrix_add([[1, 2], [3, 4]], [[10, 20], [30, 40]]).tolist() == [[11, 22], [33, 44]]
    with pytest.raises(ValueError):
        reference.matrix_add(np.ones((2, 3)), np.ones((3, 2)))


def test_too_large_for_the_2d_grid():
    from days.day03_matrix_add import driver

    with pytest.raises(ValueError, match="65535"):
        driver.validate_size((65535 * 8 + 1, 4))
    driver.validate_size((65535 * 8, 4))


def test_non_square_on_gpu(gpu):
    from days.day03_matrix_add import driver

    a = np.arange(3 * 70, dtype=np.float32).reshape(3, 70)
    b = np.ones_like(a)
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.matrix_add(a, b, version=v), a + 1)
