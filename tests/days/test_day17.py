import numpy as np
import pytest

from days.day17_prefix_sum import reference


def test_scans_by_hand():
    x = np.array([3, 1, 4, 1, 5], np.int32)
    assert reference.inclusive_scan(x).tolist() == [3, 4, 8, 9, 14]
    assert reference.exclusive_scan(x).tolist() == [0, 3, 4, 8, 9]
    assert reference.prefix_sum([7], exclusive=True).tolist() == [0]
    assert reference.inclusive_scan(x).dtype == np.int32


def test_scans_wrap_like_int32():
    x = np.full(4, 2 ** 30, np.int32)
    assert reference.inclusive_scan(x).tolist() == [2 ** 30, -2 ** 31, -2 ** 30, 0]
    assert reference.exclusive_scan(x).tolist() == [0, 2 ** 30, -2 ** 31, -2 ** 30]
    # uint32 input is read as the same bits
    u = np.array([0xFFFFFFFF, 2], np.uint32)
    assert reference.inclusive_scan(u).tolist() == [-1, 1]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 1000, 1025])
def test_block_algorithms_match_cumsum(n):
    x = np.random.default_rng(n).integers(-1000, 1000, n).astype(np.int32)
    c = np.cumsum(x.astype(np.int64))
    assert reference.hillis_steele(x).tolist() == c.tolist()
    assert reference.blelloch(x).tolist() == np.concatenate([[0], c[:-1]]).tolist()


def test_launch_plans():
    from days.day17_prefix_sum import driver

    assert driver.levels(2 ** 28 + 3, 512) == [524289, 1025, 3, 1]
    assert driver.levels(2 ** 28 + 3, 1024) == [262145, 257, 1]
    assert driver.levels(1, 1024) == [1]
    g, per = driver.segments(2 ** 28 + 3, 660)  # 32769 tiles of 8192
    assert (g, per) == (656, 50) and (g - 1) * per < 32769 <= g * per
    assert driver.segments(1, 660) == (1, 1)
    rows = driver.traffic_rows(2 ** 28 + 3)
    assert [r[4] for r in rows] == ["2.00x", "2.00x", "1.50x", "1.00x"]


def test_prefix_sum_rejects_what_is_not_int32():
    from days.day17_prefix_sum import driver

    with pytest.raises(ValueError, match="int32"):
        driver.prefix_sum(np.array([1.5, 2.0]))
    with pytest.raises(ValueError, match="int32"):
        driver.prefix_sum(np.array([2 ** 40]))


# --- GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 33, 1025, 4097, 1_000_003])
def test_exclusive_and_inclusive_on_gpu(gpu, n):
    from days.day17_prefix_sum import driver

    x = np.random.default_rng(n).integers(0, 8, n, dtype=np.int32)
    for v in driver.VERSIONS:
        for excl in (False, True):
            got = driver.prefix_sum(x, exclusive=excl, version=v)
            assert np.array_equal(got, reference.prefix_sum(x, excl)), (v, excl)


def test_wrap_around_is_exact_on_gpu(gpu):
    from days.day17_prefix_sum import driver

    # full-range values: the running sums wrap modulo 2^32 many times
    rng = np.random.default_rng(3)
    x = rng.integers(-2 ** 31, 2 ** 31, 300_007, dtype=np.int64).astype(np.int32)
    for v in driver.VERSIONS:
        assert np.array_equal(driver.inclusive_scan(x, v), reference.inclusive_scan(x)), v
        assert np.array_equal(driver.exclusive_scan(x, v), reference.exclusive_scan(x)), v


def test_v4_state_is_reset_between_launches_on_gpu(gpu):
    from days.day17_prefix_sum import driver

    rng = np.random.default_rng(4)
    for n in (1_000_003, 5, 8192 * 40, 8193):  # tile counts 123, 1, 40, 2 back to back
        x = rng.integers(-5, 5, n, dtype=np.int32)
        assert np.array_equal(driver.prefix_sum(x, version="v4"), reference.inclusive_scan(x)), n
