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
    with pytest.raises(ValueError, match="keys must lie"):
        driver.histogram(np.array([0, 300]), 256)  # 300 does not fit a uint8 key
    with pytest.raises(ValueError, match="keys must lie"):
        driver.histogram(np.array([0, 7], np.uint8), 7)  # 7 is not a bin of 7
    with pytest.raises(ValueError, match="keys must lie"):
        driver.histogram(np.array([-1, 2]), 7)


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


def test_float_segment_sums_on_gpu(gpu):
    from days.day16_atomic_add_ops import driver

    rows = driver.segment_sum_rows(n=1_000_003, segs=64, runs=2)
    for name, _time, err, _distinct in rows:
        assert float(err) < 1e-4, name  # float32 atomics: rounding only
