import numpy as np

from days.day04_simple_softmax import reference


def test_reference_by_hand():
    y = reference.softmax([[0.0, np.log(3.0)]])
    np.testing.assert_allclose(y, [[0.25, 0.75]], rtol=1e-15)


def test_reference_is_shift_invariant_and_sums_to_one():
    x = np.random.default_rng(0).standard_normal((5, 17))
    np.testing.assert_allclose(reference.softmax(x), reference.softmax(x + 1e4), rtol=1e-9)
    np.testing.assert_allclose(reference.softmax(x).sum(1), 1.0, rtol=1e-14)


def test_naive_float32_formula_overflows_above_88():
    assert np.isfinite(reference.naive_softmax_float32([[88.0, 0.0]])).all()
    assert np.isnan(reference.naive_softmax_float32([[89.0, 0.0]])).any()
    assert 88.7 < reference.FLOAT32_EXP_LIMIT < 88.73


def test_v1_overflows_and_v2_does_not_on_gpu(gpu):
    from common.check import compare
    from days.day04_simple_softmax import driver

    x = np.random.default_rng(1).uniform(-1e4, 1e4, (16, 1000)).astype(np.float32)
    ref = reference.softmax(x)
    assert not np.isfinite(driver.softmax(x, "v1")).all()  # the lesson: naive exp overflows
    assert compare(driver.softmax(x, "v2"), ref).ok
