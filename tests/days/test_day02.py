import numpy as np
import pytest

from days.day02_vector_add import driver as D
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


# --- the public functions refuse bad input before anything reaches the GPU ----------------------


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones(4, np.complex64), np.ones(4), TypeError, "complex"),
    (np.ones(4), np.array(["a", "b", "c", "d"]), TypeError, "numbers"),
    ("abcd", np.ones(4), TypeError, "string"),
    (np.ones(4, bool), np.ones(4), TypeError, "booleans"),
    (None, np.ones(4), TypeError, "None"),
    (np.ones((2, 3)), np.ones((2, 3)), ValueError, "1-D"),
    (np.float32(1.0), np.float32(2.0), ValueError, "1-D"),
    (np.ones(4), np.ones(5), ValueError, "differ"),
])
def test_vector_add_refuses(a, b, exc, word):
    with pytest.raises(exc, match=word):
        D.vector_add(a, b)


def test_vector_add_refuses_unknown_versions():
    with pytest.raises(ValueError, match="v1, v2, v3"):
        D.vector_add(np.ones(4), np.ones(4), version="v0")
    with pytest.raises(ValueError, match="unknown version"):
        D.launch("float4", None)  # launch() refuses too, before touching the device case


def test_empty_vectors_add_to_an_empty_vector_without_a_launch():
    c = D.vector_add([], np.zeros(0, np.float64))
    assert c.shape == (0,) and c.dtype == np.float32


@pytest.mark.parametrize("kwargs,exc,word", [
    ({"n": 0}, ValueError, "at least 1"),
    ({"n": 1.5}, TypeError, "integer"),
    ({"n": 10, "repeats": 0}, ValueError, "repeats"),
])
def test_transfer_times_refuses(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        D.transfer_times(**kwargs)


def test_declared_best_bar_and_byte_mix():
    assert D.BEST in D.VERSIONS
    assert (2 ** 28 + 3,) in D.BENCH_SIZES and (2 ** 28 + 3) % 4 == 3  # a float4 tail of 3
    case = D.make_case((1001,), np.random.default_rng(0))
    assert case.bytes == 3 * 4 * 1001 and case.read_bytes == 2 * 4 * 1001
    sizes = {tuple(s) for clause in D.BAR for s in clause.get("sizes", [])}
    assert {(2 ** 28,), (2 ** 28 + 3,)} <= sizes


def test_bar_is_judged_on_both_sizes():
    from common.bars import judge

    row = {"version": "v3", "ok": True, "median_ms": 1.0, "pct_of_ceiling": 95.0}
    rec = {"cases": [{"size": [2 ** 28], "rows": [row], "baseline": [{"name": "torch.add",
                                                                    "median_ms": 1.1}]}]}
    ok, fig = judge(D.BAR, rec)
    assert not ok and "not measured" in fig  # 2^28 + 3 is part of the bar
    rec["cases"].append({"size": [2 ** 28 + 3], "rows": [dict(row, median_ms=1.2)],
                         "baseline": [{"name": "torch.add", "median_ms": 1.1}]})
    ok, fig = judge(D.BAR, rec)
    assert not ok and "0.92x library" in fig  # slower than torch.add at 2^28 + 3


# --- GPU: edges that need a launch ---------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 5])  # tail only; one float4 and a tail of 1
def test_smallest_vectors_on_gpu(gpu, n):
    a = np.arange(n, dtype=np.float32)
    for v in D.VERSIONS:
        assert D.vector_add(a, [0.5] * n, version=v).tolist() == (a + 0.5).tolist(), v
