import numpy as np
import pytest

from days.day24_persistent_threads import reference


def test_segment_softmax_by_hand():
    x = [0.0, 0.0, np.log(1.0), np.log(3.0), 5.0]
    y = reference.segment_softmax(x, [2, 0, 2, 1])  # an empty task in the middle
    np.testing.assert_allclose(y, [0.5, 0.5, 0.25, 0.75, 1.0], rtol=1e-15)


def test_segment_softmax_equals_a_loop_over_tasks():
    rng = np.random.default_rng(4)
    lengths = np.array([3, 0, 1, 17, 0, 0, 40, 2])
    x = rng.standard_normal(lengths.sum()) * 5
    want = []
    for seg in np.split(x, np.cumsum(lengths)[:-1]):  # a second formulation, one task at a time
        e = np.exp(seg - seg.max()) if seg.size else seg
        want.append(e / e.sum() if seg.size else seg)
    np.testing.assert_allclose(reference.segment_softmax(x, lengths), np.concatenate(want), rtol=1e-13)


def test_offsets_and_largest_first():
    np.testing.assert_array_equal(reference.offsets([2, 0, 3]), [0, 2, 2, 5])
    np.testing.assert_array_equal(reference.largest_first([2, 7, 2, 9]), [3, 1, 0, 2])


def test_task_lengths_distributions():
    rng = np.random.default_rng(0)
    u = reference.task_lengths(100000, 32, 1, rng)
    assert u.min() >= 1 and u.max() <= 63 and abs(u.mean() - 32) < 0.5
    s = reference.task_lengths(100000, 1024, 2, rng)
    assert s.min() >= 1 and s.max() == 16 * 1024        # the cap is reached
    assert np.median(s) < 0.3 * 1024 < s.mean()           # skewed: most tasks short
    with pytest.raises(ValueError, match="kind"):
        reference.task_lengths(3, 3, 3, rng)


def test_validate_size():
    from days.day24_persistent_threads.driver import validate_size

    validate_size((20000, 1024, 2))
    with pytest.raises(ValueError, match="KIND"):
        validate_size((10, 10, 3))
    with pytest.raises(ValueError, match="32-bit"):
        validate_size((2 ** 20, 2 ** 12, 1))


def test_case_inputs_are_consistent():
    from days.day24_persistent_threads.driver import make_case

    c = make_case((257, 100, 2), np.random.default_rng(1))
    off, order = c.inputs["off"], c.inputs["order"]
    assert off.dtype == np.int32 and off[0] == 0 and off[-1] == c.inputs["x"].size
    lengths = np.diff(off)
    assert sorted(order.tolist()) == list(range(257))
    assert np.all(np.diff(lengths[order]) <= 0)  # largest first


@pytest.mark.parametrize("args,exc,word", [
    ((np.ones(3, complex), [3]), TypeError, "complex"),
    ((np.ones((2, 2)), [4]), ValueError, "1-D"),
    ((np.ones(3), [1, 1]), ValueError, "add up"),
    ((np.ones(3), [4, -1]), ValueError, "lengths"),
    ((np.ones(3), [1.5, 1.5]), ValueError, "whole"),
    ((np.ones(3), None), TypeError, "None"),
])
def test_segment_softmax_refuses_bad_input(args, exc, word):
    from days.day24_persistent_threads.driver import segment_softmax

    with pytest.raises(exc, match=word):
        segment_softmax(*args)


def test_segment_softmax_unknown_version_and_empty():
    from days.day24_persistent_threads.driver import segment_softmax

    with pytest.raises(ValueError, match="unknown version 'v6'.*v1, v2, v3, v4, v5"):
        segment_softmax(np.ones(2), [2], version="v6")
    assert segment_softmax(np.ones(0), []).shape == (0,)
    assert segment_softmax(np.ones(0), [0, 0]).shape == (0,)


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
def test_empty_tasks_and_repeated_launches_on_gpu(gpu, version):
    from common import harness as H
    from common.check import compare
    from days.day24_persistent_threads import driver

    lengths = np.array([0, 5, 0, 0, 3000, 1, 0, 33] * 50)
    x = np.random.default_rng(2).standard_normal(lengths.sum()).astype(np.float32)
    r = compare(driver.segment_softmax(x, lengths, version), reference.segment_softmax(x, lengths))
    assert r.ok, r.message
    # three launches in a row on one DeviceCase: the queue counter must restart every time
    case = driver.make_case((3000, 50, 2), np.random.default_rng(3))
    d = H.DeviceCase(case)
    for _ in range(3):
        d.poison_outputs()
        driver.launch(version, d)
    res = compare(d.outputs()["y"], case.expected()["y"])
    assert res.ok, res.message
