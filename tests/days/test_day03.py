import numpy as np
import pytest

from days.day03_matrix_add import reference


def test_reference_by_hand():
    assert reference.matrix_add([[1, 2], [3, 4]], [[10, 20], [30, 40]]).tolist() == [[11, 22], [33, 44]]
    with pytest.raises(ValueError):
        reference.matrix_add(np.ones((2, 3)), np.ones((3, 2)))


def test_too_large_for_the_2d_grid():
    # v1 puts the columns on grid.y, v2 the rows: 65535 blocks of 8 cover 524280 of them
    from days.day03_matrix_add import driver

    for v in ("v1", "v2"):
        assert "65535" in driver.supports(v, (65535 * 8 + 1, 4))
        assert "65535" in driver.supports(v, (4, 65535 * 8 + 1))
        assert driver.supports(v, (65535 * 8, 65535 * 8)) is None
    for v in ("v3", "v4", "v5"):  # flattened: any shape
        assert driver.supports(v, (65535 * 8 + 1, 4)) is None
    with pytest.raises(ValueError, match="65535"):  # refused before anything reaches the GPU
        driver.matrix_add(np.ones((1, 65535 * 8 + 1)), np.ones((1, 65535 * 8 + 1)), version="v1")


def test_a_wide_row_is_not_refused_by_the_cli():
    from common import harness as H
    from days.day03_matrix_add import driver

    assert H.parse_size(driver, "1x600000") == (1, 600000)  # v3 and v4 take it; v1, v2 skip


# --- the public function refuses bad input before anything reaches the GPU -----------------------

@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 2), np.complex64), np.ones((2, 2)), TypeError, "complex"),
    (np.ones((2, 2)), np.array([["a", "b"], ["c", "d"]]), TypeError, "numbers"),
    ("ab", np.ones((2, 2)), TypeError, "string"),
    (np.ones((2, 2), bool), np.ones((2, 2)), TypeError, "booleans"),
    (np.ones(4), np.ones(4), ValueError, "2-D"),
    (np.ones((2, 2, 2)), np.ones((2, 2, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((3, 2)), ValueError, "one shape"),
    ([[1.0, 2.0], [3.0]], np.ones((2, 2)), ValueError, "ragged"),
])
def test_matrix_add_refuses(a, b, exc, word):
    from days.day03_matrix_add import driver

    with pytest.raises(exc, match=word):
        driver.matrix_add(a, b)


def test_unknown_version_is_refused_by_matrix_add_and_launch():
    from days.day03_matrix_add import driver

    with pytest.raises(ValueError, match="v1, v2, v3, v4, v5"):
        driver.matrix_add(np.ones((2, 2)), np.ones((2, 2)), version="v6")
    with pytest.raises(ValueError, match="unknown version"):
        driver.launch("V4", None)  # the old else-branch ran v4 for any unknown name


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
def test_empty_matrices_add_to_an_empty_matrix_without_a_launch(shape):
    from days.day03_matrix_add import driver

    c = driver.matrix_add(np.ones(shape), np.ones(shape, np.int64))
    assert c.shape == shape and c.dtype == np.float32


def test_declared_best_bar_and_byte_mix():
    from days.day03_matrix_add import driver

    assert driver.BEST in driver.VERSIONS
    odd = [s for s in driver.BENCH_SIZES if s[0] % 2 and s[1] % 2]
    assert odd and all(driver.supports(v, odd[0]) is None for v in driver.VERSIONS)
    assert any(c.get("vs_baseline") == 1.0 and odd[0] in c["sizes"] for c in driver.BAR)
    case = driver.make_case((3, 5), np.random.default_rng(0))
    assert case.bytes == 3 * 4 * 15 and case.read_bytes == 2 * 4 * 15


def test_non_square_on_gpu(gpu):
    from days.day03_matrix_add import driver

    a = np.arange(3 * 70, dtype=np.float32).reshape(3, 70)
    b = np.ones_like(a)
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.matrix_add(a, b, version=v), a + 1)


def test_one_by_one_and_a_tail_on_gpu(gpu):
    from days.day03_matrix_add import driver

    for v in driver.VERSIONS:
        assert driver.matrix_add([[1.5]], [[2.0]], version=v).tolist() == [[3.5]], v
        a = np.arange(7 * 3, dtype=np.float32).reshape(7, 3)  # 21 = 5 float4 + a tail of 1
        np.testing.assert_array_equal(driver.matrix_add(a, -a, version=v), np.zeros((7, 3)))


def test_the_2d_grid_at_its_limit_on_gpu(gpu):
    # 524280 = 65535 blocks of 8: v2 puts the rows there, v1 the columns; every element checked
    from days.day03_matrix_add import driver

    tall = np.arange(driver.MAX_2D, dtype=np.float32).reshape(-1, 1)
    np.testing.assert_array_equal(driver.matrix_add(tall, tall, version="v2"), 2 * tall)
    np.testing.assert_array_equal(driver.matrix_add(tall.T, tall.T, version="v1"), 2 * tall.T)
