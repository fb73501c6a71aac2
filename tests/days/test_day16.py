import collections

import numpy as np
import pytest

from days.day16_atomic_add_ops import reference


def test_histogram_by_hand():
    assert reference.histogram(np.array([0, 1, 1, 3, 3, 3], np.uint8), 4).tolist() == [1, 2, 0, 3]
    # keys >= bins are not counted (the kernels skip them too)
    assert reference.histogram(np.array([0, 5, 2, 255], np.uint8), 3).tolist() == [1, 0, 1]
    assert reference.histogram(np.array([], np.uint8), 2).tolist() == [0, 0]


def test_histogram_in_chunks_matches_a_counter(monkeypatch):
    monkeypatch.setattr(reference, "CHUNK", 1000)  # many chunks, a ragged last one
    keys = np.random.default_rng(0).integers(0, 300, 12_345, dtype=np.uint16)
    want = collections.Counter(keys.tolist())
    got = reference.histogram(keys, 300)
    assert got.tolist() == [want.get(b, 0) for b in range(300)]
    assert got.sum() == keys.size


def test_make_keys_distributions():
    rng = np.random.default_rng(1)
    n = 1_000_000
    k = reference.make_keys(n, 256, 90, rng)
    assert k.dtype == np.uint8
    hot = reference.HOT_KEY % 256
    # 90% set to the hot key, and 1/256 of the other 10% land on it by chance
    assert abs(np.mean(k == hot) - (0.9 + 0.1 / 256)) < 0.003
    k = reference.make_keys(n, 4096, 0, rng)
    assert k.dtype == np.uint16 and k.max() < 4096
    counts = np.bincount(k, minlength=4096)
    assert counts.max() < 1.3 * n / 4096  # uniform: no bin far above the mean (244)
    k = reference.make_keys(1000, 7, 100, rng)
    assert (k == reference.HOT_KEY % 7).all()


def test_replicas_fit_the_budget():
    from days.day16_atomic_add_ops.driver import REPLICA_BYTES, replicas_log2

    assert replicas_log2(256) == 5    # 32 copies x 256 bins x 4 B = 32 KB
    assert replicas_log2(4096) == 1   # 2 copies of 16 KB
    assert replicas_log2(1000) == 3
    assert replicas_log2(257) == 4
    assert replicas_log2(1) == 5
    for bins in (1, 7, 256, 257, 1000, 4096):
        assert bins * 4 << replicas_log2(bins) <= REPLICA_BYTES


def test_sizes_are_validated():
    from days.day16_atomic_add_ops import driver

    with pytest.raises(ValueError, match="BINS"):
        driver.validate_size((10, 5000, 100))
    with pytest.raises(ValueError, match="percent"):
        driver.validate_size((10, 256, 101))
    with pytest.raises(ValueError, match=r"keys\[1\] = 300 lies outside \[0, 256\)"):
        driver.histogram(np.array([0, 300]), 256)  # 300 does not fit a uint8 key
    with pytest.raises(ValueError, match=r"keys\[1\] = 7 lies outside \[0, 7\)"):
        driver.histogram(np.array([0, 7], np.uint8), 7)  # 7 is not a bin of 7
    with pytest.raises(ValueError, match=r"keys\[0\] = -1 lies outside \[0, 7\)"):
        driver.histogram(np.array([-1, 2]), 7)


def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("keys,bins,exc,word", [
    (np.array([1.5, 2.0]), 4, ValueError, "whole numbers"),     # fractional keys are not cut
    (np.array([np.nan]), 4, ValueError, "whole numbers"),
    (np.array([1, 2], np.complex64), 4, TypeError, "integers"),
    (np.array([True, False]), 4, TypeError, "booleans"),
    ("0123", 4, TypeError, "string"),
    (np.array([[0, 1], [2, 4]]), 4, ValueError, "keys[1, 1] = 4"),  # any shape; the index is named
    (np.array([0, 1]), 0, ValueError, "bins"),
    (np.array([0, 1]), 4097, ValueError, "bins"),
    (np.array([0, 1]), 2.5, TypeError, "bins"),
    (np.array([0, 1]), "256", TypeError, "bins"),
])
def test_histogram_refuses_bad_input(keys, bins, exc, word):
    from days.day16_atomic_add_ops import driver

    _raises(exc, word, lambda: driver.histogram(keys, bins))


def test_histogram_refuses_unknown_versions_and_launch_too():
    from days.day16_atomic_add_ops import driver

    _raises(ValueError, "v1, v2", lambda: driver.histogram([0, 1], 4, "v7"))
    _raises(TypeError, "version", lambda: driver.histogram([0, 1], 4, 6))
    _raises(ValueError, "unknown version", lambda: driver.launch("v0", None))   # no symbol lookup
    _raises(ValueError, "unknown version", lambda: driver.skew_sweep(versions=("v2", "v9")))


def test_histogram_of_no_keys_is_all_zeros_without_a_launch():
    from days.day16_atomic_add_ops import driver

    for keys in ([], np.zeros(0, np.uint16), np.zeros((3, 0), np.int64)):
        got = driver.histogram(keys, 5)
        assert got.dtype == np.int32 and got.tolist() == [0, 0, 0, 0, 0]


def test_key_count_limit():
    from days.day16_atomic_add_ops import driver

    driver.validate_size((driver.MAX_KEYS, 256, 100))
    _raises(ValueError, "int32", lambda: driver.validate_size((driver.MAX_KEYS + 1, 256, 100)))


def test_best_bar_read_only_mix_and_an_awkward_size():
    from common.bars import judge
    from days.day16_atomic_add_ops import driver

    assert driver.BEST == "v4"
    c = driver.make_case((1000, 7, 50), np.random.default_rng(0))
    assert c.read_bytes == c.bytes                    # a histogram only reads (counts are tiny)
    assert any(n % 16 and bins & (bins - 1) for n, bins, _ in driver.BENCH_SIZES)
    # the bar: v2 >= 5x v1 on every skewed bench size
    rows = lambda t1, t2: [{"version": "v1", "ok": True, "median_ms": t1},
                           {"version": "v2", "ok": True, "median_ms": t2}]
    rec = {"cases": [{"size": list(s), "rows": rows(100.0, 1.0), "baseline": []}
                     for s in driver.BENCH_SIZES]}
    assert judge(driver.BAR, rec)[0] is True
    skewed = [i for i, s in enumerate(driver.BENCH_SIZES) if s[2] == driver.SKEWED]
    rec["cases"][skewed[-1]]["rows"] = rows(4.0, 1.0)
    ok, fig = judge(driver.BAR, rec)
    assert ok is False and "4.00x v1" in fig


def test_segment_sums_by_hand():
    s = reference.segment_sums(np.array([1.0, 2.0, 4.0, 8.0]), np.array([0, 2, 0, 2]), 3)
    assert s.tolist() == [5.0, 0.0, 10.0]


# --- GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("bins", [200, 256, 3000, 4096])
def test_top_key_and_public_function_on_gpu(gpu, bins):
    from days.day16_atomic_add_ops import driver

    dt = reference.key_dtype(bins)
    rng = np.random.default_rng(bins)
    # the largest key (bins - 1) in a long run, int64 input (converted), a ragged length
    keys = np.concatenate([np.full(1001, bins - 1), rng.integers(0, bins, 50_003)])
    want = reference.histogram(keys.astype(dt), bins)
    for v in driver.VERSIONS:
        got = driver.histogram(keys, bins, v)
        assert got.dtype == np.int32 and np.array_equal(got, want), v


def test_every_key_counted_once_under_heavy_skew_on_gpu(gpu):
    from days.day16_atomic_add_ops import driver

    for bins in (256, 4096):
        keys = reference.make_keys(2 ** 22 + 3, bins, 99, np.random.default_rng(bins))
        want = reference.histogram(keys, bins)
        for v in driver.VERSIONS:
            got = driver.histogram(keys, bins, v)
            assert got.sum() == keys.size and np.array_equal(got, want), (bins, v)


def test_whole_number_floats_and_2d_keys_on_gpu(gpu):
    # keys stored as floats (3.0) and an image-shaped array are counted like the integers
    from days.day16_atomic_add_ops import driver

    keys = np.random.default_rng(16).integers(0, 10, (33, 17))
    want = np.bincount(keys.ravel(), minlength=10)
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.histogram(keys.astype(np.float64), 10, v), want, err_msg=v)
        np.testing.assert_array_equal(driver.histogram([9], 10, v), np.eye(10, dtype=int)[9], err_msg=v)


def test_float_segment_sums_on_gpu(gpu):
    from days.day16_atomic_add_ops import driver

    rows = driver.segment_sum_rows(n=1_000_003, segs=64, runs=2)
    for name, _time, err, _distinct in rows:
        assert float(err) < 1e-4, name  # float32 atomics: rounding only
