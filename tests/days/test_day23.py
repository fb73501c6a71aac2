import numpy as np
import pytest

from days.day23_warp_shuffle import reference


def test_softmax_reference_by_hand():
    np.testing.assert_allclose(reference.softmax([[0.0, 0.0, 0.0, 0.0]]), [[0.25] * 4])
    y = reference.softmax([[np.log(1.0), np.log(3.0)]])
    np.testing.assert_allclose(y, [[0.25, 0.75]], rtol=1e-15)


def test_array_sum_closed_form():
    n = 1000003
    assert reference.array_sum(np.arange(n))[0] == n * (n - 1) // 2


def test_segmented_scan_by_hand_and_by_loop():
    np.testing.assert_array_equal(reference.segmented_scan(np.ones(70), 32),
                                  np.r_[np.arange(1, 33), np.arange(1, 33), np.arange(1, 7)])
    x = np.random.default_rng(0).random(2500)
    want = np.empty_like(x)
    for i in range(x.size):  # a second formulation: a running total reset at segment starts
        want[i] = x[i] + (want[i - 1] if i % 1024 else 0.0)
    np.testing.assert_allclose(reference.segmented_scan(x, 1024), want, rtol=1e-12)


def test_compact_and_histogram_by_hand():
    np.testing.assert_array_equal(reference.compact(np.array([0.9, 0.1, 0.7, 0.5]), 0.5), [0.7, 0.9])
    assert reference.compact(np.array([0.1]), 0.5).size == 0
    np.testing.assert_array_equal(reference.histogram([3, 0, 3, 3, 1], 5), [1, 1, 0, 3, 0])


def test_kernel_choice():
    from days.day23_warp_shuffle.driver import items_for, kernel_for

    assert [items_for(c) for c in (1, 32, 33, 100, 257, 1023, 1024)] == [1, 1, 2, 4, 16, 32, 32]
    assert kernel_for("v1", 100) == "softmax_v1_smem_items4"
    assert kernel_for("v2", 1023) == "softmax_v2_shfl_items32"
    with pytest.raises(ValueError, match="unknown version"):
        kernel_for("v3", 10)


def test_every_kernel_named_in_the_driver_exists():
    from pathlib import Path

    from days.day23_warp_shuffle import driver

    src = (Path(driver.__file__).parent / "kernel.cu").read_text()
    assert "softmax_v1_smem_items##N" in src and "softmax_v2_shfl_items##N" in src
    for n in (1, 2, 4, 8, 16, 32):  # every register array items_for can pick is instantiated
        assert f"SOFTMAX_ENTRIES({n})" in src, n
    for name in ("reduce_smem", "reduce_shfl", "scan32_smem", "scan32_shfl", "scan1024_smem",
                 "scan1024_shfl", "compact_atomic", "compact_ballot", "hist_atomic", "hist_match"):
        assert f" {name}(" in src, name


@pytest.mark.parametrize("x,exc,word", [
    (np.ones((2, 3), complex), TypeError, "complex"),
    (np.ones(5), ValueError, "2-D"),
    (np.ones((2, 1025)), ValueError, "1024"),
    (None, TypeError, "None"),
])
def test_softmax_refuses_bad_input(x, exc, word):
    from days.day23_warp_shuffle.driver import softmax

    with pytest.raises(exc, match=word):
        softmax(x)


def test_softmax_unknown_version_and_empty():
    from days.day23_warp_shuffle.driver import softmax

    with pytest.raises(ValueError, match="unknown version 'v9'.*v1, v2"):
        softmax(np.ones((2, 2)), version="v9")
    for shape in ((0, 5), (4, 0)):
        assert softmax(np.ones(shape)).shape == shape


def test_validate_size():
    from days.day23_warp_shuffle.driver import validate_size

    validate_size((8192, 1024))
    with pytest.raises(ValueError, match="1024"):
        validate_size((8, 1025))


def test_pair_functions_refuse_bad_input_and_take_empty():
    from days.day23_warp_shuffle import driver as D

    with pytest.raises(ValueError, match="method"):
        D.array_sum(np.ones(3), method="tree")
    with pytest.raises(TypeError, match="complex"):
        D.array_sum(np.ones(3, complex))
    assert D.array_sum(np.ones(0)) == 0.0
    with pytest.raises(ValueError, match="segment"):
        D.segmented_scan(np.ones(3), segment=64)
    with pytest.raises(ValueError, match="1-D"):
        D.segmented_scan(np.ones((2, 3)))
    assert D.segmented_scan(np.ones(0), 1024).shape == (0,)
    with pytest.raises(ValueError, match="threshold"):
        D.compact(np.ones(3), float("nan"))
    with pytest.raises(ValueError, match="method"):
        D.compact(np.ones(3), 0.5, method="shared")
    assert D.compact(np.ones(0), 0.5).shape == (0,)
    with pytest.raises(ValueError, match="keys"):
        D.histogram([0, 5], bins=5)      # 5 is outside [0, 5)
    with pytest.raises(ValueError, match="keys"):
        D.histogram([-1], bins=5)
    with pytest.raises(ValueError, match="bins"):
        D.histogram([0], bins=0)
    np.testing.assert_array_equal(D.histogram(np.zeros(0, int), bins=3), [0, 0, 0])


def test_pairs_bar_reads_the_recorded_pairs():
    from days.day23_warp_shuffle.driver import _pairs_bar

    rec = {"extra": {"warp_pairs": {"timed": [
        {"op": "block reduce", "size": [64], "shared_ms": 2.0, "shuffle_ms": 1.0, "ok": True},
        {"op": "warp scan", "size": [64], "shared_ms": 1.0, "shuffle_ms": 1.1, "ok": True}]}}}
    ok, fig = _pairs_bar(rec)
    assert not ok and "warp scan" in fig
    rec["extra"]["warp_pairs"]["timed"][1]["shuffle_ms"] = 0.5
    assert _pairs_bar(rec)[0]
    assert not _pairs_bar({})[0]


@pytest.mark.parametrize("cols", [1, 31, 33, 100, 1023, 1024])
def test_softmax_huge_values_on_gpu(gpu, cols):
    from common.check import compare
    from days.day23_warp_shuffle import driver

    x = np.random.default_rng(cols).uniform(-1e4, 1e4, (9, cols)).astype(np.float32)
    x[0] = 1e4
    for v in driver.VERSIONS:
        r = compare(driver.softmax(x, v), reference.softmax(x))
        assert r.ok, f"{v} at width {cols}: {r.message}"
    # the butterfly pairs lanes as the tree does: the same sums, to the last bit
    np.testing.assert_array_equal(driver.softmax(x, "v1"), driver.softmax(x, "v2"))


def test_pairs_on_gpu(gpu):
    from days.day23_warp_shuffle import driver as D

    rng = np.random.default_rng(5)
    x = rng.random(100003).astype(np.float32)
    for m in D.METHODS:
        assert abs(D.array_sum(x, m) - x.astype(np.float64).sum()) < 1e-5 * x.sum()
        for seg in (32, 1024):
            np.testing.assert_allclose(D.segmented_scan(x, seg, m), reference.segmented_scan(x, seg),
                                       rtol=1e-5, atol=1e-4)
    # segments of 32: Hillis-Steele in shared memory and with shuffles add the same pairs in the
    # same order, so the results are equal bit for bit (segments of 1024 are not: the shuffle
    # block scan adds warp totals, the shared one runs Hillis-Steele over all 1024)
    np.testing.assert_array_equal(D.segmented_scan(x, 32, "shared"), D.segmented_scan(x, 32, "shuffle"))
    keys = np.r_[np.zeros(64, int), rng.integers(0, 7, 1001)]  # whole warps of one key, then mixed
    for m in ("atomic", "match"):
        np.testing.assert_array_equal(D.histogram(keys, 7, m), np.bincount(keys, minlength=7))
    for m in ("atomic", "ballot"):
        np.testing.assert_array_equal(np.sort(D.compact(x, 0.25, m)), reference.compact(x, np.float32(0.25)))
