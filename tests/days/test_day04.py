import copy

import numpy as np
import pytest

from days.day04_simple_softmax import driver as D
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


# --- the public functions refuse bad input before anything reaches the GPU ----------------------

@pytest.mark.parametrize("x,exc,word", [
    (np.ones((2, 3), np.complex64), TypeError, "complex"),
    (np.array([["a", "b"]]), TypeError, "numbers"),
    ("x", TypeError, "string"),
    (np.ones((2, 3), bool), TypeError, "booleans"),
    (np.ones(3), ValueError, "2-D"),
    (np.ones((2, 3, 4)), ValueError, "2-D"),
    ([[1.0, 2.0], [3.0]], ValueError, "ragged"),
])
def test_softmax_refuses(x, exc, word):
    with pytest.raises(exc, match=word):
        D.softmax(x)


def test_unknown_version_is_refused_by_softmax_and_launch():
    with pytest.raises(ValueError, match="v1, v2"):
        D.softmax(np.ones((2, 3)), version="v3")
    with pytest.raises(ValueError, match="unknown version"):
        D.launch("naive", None)


@pytest.mark.parametrize("shape", [(0, 5), (4, 0), (0, 0)])
def test_empty_rows_give_an_empty_result_without_a_launch(shape):
    y = D.softmax(np.zeros(shape))
    assert y.shape == shape and y.dtype == np.float32


def test_sizes_past_32_bit_indexing_are_refused():
    D.validate_size((D.MAX_ROWS, 1))
    with pytest.raises(ValueError, match="32-bit"):
        D.validate_size((2 ** 31 - 1, 1))  # the last block's threads would pass 2^31
    with pytest.raises(ValueError, match="32-bit"):
        D.validate_size((1, 2 ** 31))


def test_overflow_demo_wants_a_generator():
    with pytest.raises(TypeError, match="Generator"):
        D.overflow_demo(rng=4)


def test_best_is_the_safe_version_and_v1_is_marked_wrong():
    assert D.BEST == "v2" and "v1" in D.WRONG_ON
    from common.progress import best
    from common.results import load_all

    rec = load_all().get(4)
    if rec is None:
        pytest.skip("no results/day04.json")
    # v1 is faster on the benchmark inputs (they stay below the overflow), yet not the best
    assert best(rec)[0] == "v2"


def test_bar_reads_the_overflow_table():
    from common.bars import judge
    from common.results import load_all

    rec = load_all().get(4)
    if rec is None:
        pytest.skip("no results/day04.json")
    ok, fig = judge(D.BAR, rec)
    assert ok and "up to 10000" in fig and "v1 fails from 100" in fig, fig
    bad = copy.deepcopy(rec)
    sec = next(x for x in bad["sections"] if x["title"].startswith(D.OVERFLOW_TITLE))
    sec["rows"][-1][sec["headers"].index("v2")] = "3 NaN/inf of 16000"
    ok, fig = judge(D.BAR, bad)
    assert not ok and "10000" in fig
    short = copy.deepcopy(rec)
    sec = next(x for x in short["sections"] if x["title"].startswith(D.OVERFLOW_TITLE))
    sec["rows"] = sec["rows"][:2]  # only up to |x| = 100: the bar is not shown
    assert not judge(D.BAR, short)[0]


def test_a_bench_size_is_odd_in_both_dimensions():
    assert any(r % 2 and c % 2 for r, c in D.BENCH_SIZES)


# --- GPU --------------------------------------------------------------------------------------------

def test_one_element_rows_and_a_single_row_on_gpu(gpu):
    for v in D.VERSIONS:
        assert D.softmax([[5.0], [-3.0]], v).tolist() == [[1.0], [1.0]], v
    x = np.log(np.array([[1.0, 2.0, 5.0]], np.float32))
    for v in D.VERSIONS:
        np.testing.assert_allclose(D.softmax(x, v), [[0.125, 0.25, 0.625]], rtol=1e-6)
