import numpy as np
import pytest

from days.day14_reduce_sum import driver, reference


def test_reference_by_hand():
    assert reference.reduce_sum(np.arange(1, 101, dtype=np.float32)) == 5050.0
    assert reference.reduce_sum([0.5]) == 0.5
    # float64 accumulation of float32 inputs: 0.1f is 0.100000001490116..., ten of them
    np.testing.assert_allclose(reference.reduce_sum(np.full(10, 0.1, np.float32)),
                               10 * float(np.float32(0.1)), rtol=1e-15)


def test_sequential_float32_stalls_at_2_to_the_24():
    ones = np.ones(2 ** 24 + 10, np.float32)
    # 2^24 + 1 is not a float32: the running sum rounds back to 2^24 and stays there
    assert reference.sequential_sum_float32(ones) == 2.0 ** 24
    assert reference.tree_sum_float32(ones) == 2.0 ** 24 + 10      # partial sums stay small
    assert reference.kahan_sum_float32(ones) == 2.0 ** 24 + 10
    assert reference.reduce_sum(ones) == 2 ** 24 + 10


def test_kahan_keeps_what_a_running_sum_rounds_away():
    x = np.array([1.0] + [1e-8] * 10000, np.float32)  # each 1e-8 < ulp(1) / 2
    assert reference.sequential_sum_float32(x) == np.float32(1.0)
    assert abs(float(reference.kahan_sum_float32(x, lanes=1)) - 1.0001) < 2e-7


def test_tree_order_error_is_tiny_on_uniform_inputs():
    x = np.random.default_rng(0).random(2 ** 22, dtype=np.float32)
    exact = reference.reduce_sum(x)
    assert reference.relative_error(reference.tree_sum_float32(x), exact) < 2e-7
    assert reference.relative_error(reference.kahan_sum_float32(x), exact) < 2e-7
    assert reference.relative_error(reference.sequential_sum_float32(x), exact) > 1e-6


def test_tree_sum_matches_a_second_formulation():
    # the folding order of tree_sum_float32 written out by hand for 5 elements (padded to 8)
    x = np.array([1e8, 1.0, -1e8, 3.0, 0.25], np.float32)
    f = np.float32
    want = ((x[0] + x[4]) + (x[2] + f(0))) + ((x[1] + f(0)) + (x[3] + f(0)))
    assert reference.tree_sum_float32(x) == want


def test_tree_pass_grids():
    from days.day14_reduce_sum.driver import passes

    assert passes("v1", 2 ** 28) == [2 ** 20, 2 ** 12, 16, 1]
    assert passes("v4", 2 ** 28) == [2 ** 19, 2 ** 10, 2, 1]
    assert passes("v6", 513) == [2, 1]
    assert passes("v3", 1) == [1]
    assert passes("v3", 65537) == [257, 2, 1]


# --- the public function: arguments are checked before anything reaches the GPU -------------

@pytest.mark.parametrize("bad, exc, word", [
    (np.array([1 + 2j, 3], np.complex64), TypeError, "complex"),
    (np.array(["1.0", "2.0"]), TypeError, "dtype"),
    ("1.0 2.0", TypeError, "string"),
    (np.array([True, False]), TypeError, "booleans"),
    (None, TypeError, "None"),
    ([[1.0, 2.0], [3.0]], ValueError, "ragged"),
])
def test_reduce_sum_refuses_what_is_not_a_real_array(bad, exc, word):
    with pytest.raises(exc, match=word):
        driver.reduce_sum(bad)


def test_reduce_sum_of_nothing_is_zero_without_a_launch():
    # no GPU needed: an empty x returns before anything touches pycuda
    for empty in (np.zeros(0, np.float32), np.zeros((3, 0)), [], np.zeros((0, 4), np.int64)):
        s = driver.reduce_sum(empty)
        assert isinstance(s, np.float32) and s == 0.0
    assert driver.reduce_sum([], version="v3") == 0.0


@pytest.mark.parametrize("version, exc", [("v11", ValueError), ("V9", ValueError), ("", ValueError),
                                          (9, TypeError), (None, TypeError)])
def test_unknown_versions_are_refused_with_the_list(version, exc):
    with pytest.raises(exc, match="version") as e:
        driver.reduce_sum(np.ones(5, np.float32), version=version)
    if exc is ValueError:
        assert "v1" in str(e.value) and "v10" in str(e.value)  # the versions it does have
    # checked first: an empty input does not hide a bad version
    with pytest.raises(exc):
        driver.reduce_sum([], version=version)


def test_launch_refuses_a_version_it_does_not_know():
    # launch() must not run some other version's kernel for a name it does not know
    with pytest.raises(ValueError, match="unknown version 'v0'"):
        driver.launch("v0", None)


def test_default_version_bar_and_bench_sizes():
    import inspect

    assert inspect.signature(driver.reduce_sum).parameters["version"].default == driver.BEST == "v10"
    odd = [s for s in driver.BENCH_SIZES if s[0] % 4]
    assert odd == [(2 ** 28 + 3,)]  # the awkward size: the float4 versions' scalar tail
    (clause,) = driver.BAR
    # CURRICULUM.md: 90% of the read ceiling and at least CUB's speed at 2^28 and 2^28 + 3
    assert sorted(clause["sizes"]) == [(2 ** 28,), (2 ** 28 + 3,)]
    assert set(clause["sizes"]) <= set(driver.BENCH_SIZES)  # a bar size that is never run fails
    assert clause["pct"] == 90 and clause["vs_baseline"] == 1.0 and clause["baseline"] == driver.CUB


def test_case_is_read_only():
    case = driver.make_case((1003,), np.random.default_rng(0))
    assert case.bytes == 4 * 1003 and case.read_bytes == case.bytes  # read-only ceiling
    from common.timing import mix_of

    assert mix_of(case.bytes, case.read_bytes) == (1, 0)


# --- GPU ---------------------------------------------------------------------------------

def test_every_version_survives_the_float32_stall_on_gpu(gpu):
    from common.check import compare
    from days.day14_reduce_sum import driver

    x = np.ones(2 ** 25 + 3, np.float32)  # a one-thread float32 sum would stop at 2^24
    ref = np.array([reference.reduce_sum(x)])
    for v in driver.VERSIONS:
        r = compare(np.array([driver.reduce_sum(x, v)]), ref)
        assert r.ok, f"{v}: {r.message}"


def test_every_version_is_deterministic_on_gpu(gpu):
    from days.day14_reduce_sum import driver

    x = np.random.default_rng(5).random(3_000_017, dtype=np.float32)
    for v in driver.VERSIONS:
        got = {driver.reduce_sum(x, v).view(np.uint32).item() for _ in range(3)}
        assert len(got) == 1, f"{v} gave {len(got)} different results on the same input"


@pytest.mark.parametrize("version", ["v9", "v10"])
def test_ticket_is_ready_for_the_next_launch_on_gpu(gpu, version):
    from days.day14_reduce_sum import driver

    rng = np.random.default_rng(9)
    for n in (1_000_003, 5, 2 ** 20, 1, 777_777):  # different grids back to back
        x = rng.random(n, dtype=np.float32)
        np.testing.assert_allclose(driver.reduce_sum(x, version), reference.reduce_sum(x), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 1000, 2 ** 22 + 5])
def test_atomic_variant_is_accurate_on_gpu(gpu, n):
    from common import harness as H
    from days.day14_reduce_sum import driver

    x = np.random.default_rng(n).random(n, dtype=np.float32)
    case = H.Case((n,), inputs={"x": x}, outputs={"y": ((1,), np.float32)})
    d = H.DeviceCase(case)
    driver.launch_atomic(d)
    np.testing.assert_allclose(d.array("y").get()[0], reference.reduce_sum(x), rtol=1e-6)


def test_public_function_takes_any_shape_and_the_smallest_input_on_gpu(gpu):
    x = np.random.default_rng(3).random((37, 29))  # float64, 2-D: converted and flattened
    want = reference.reduce_sum(x.astype(np.float32))
    for v in driver.VERSIONS:
        np.testing.assert_allclose(driver.reduce_sum(x, v), want, rtol=1e-6, err_msg=v)
        assert driver.reduce_sum(np.array([2.5], np.float32), v) == np.float32(2.5), v
    assert driver.reduce_sum(np.arange(10)) == 45.0  # integers convert; default version (BEST)
    assert driver.reduce_sum(np.float32(7.0)) == 7.0  # a 0-d array is one element
