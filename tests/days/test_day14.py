import numpy as np
import pytest

from days.day14_reduce_sum import reference


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


def test_v9_ticket_is_ready_for_the_next_launch_on_gpu(gpu):
    from days.day14_reduce_sum import driver

    rng = np.random.default_rng(9)
    for n in (1_000_003, 5, 2 ** 20, 1, 777_777):  # different grids back to back
        x = rng.random(n, dtype=np.float32)
        np.testing.assert_allclose(driver.reduce_sum(x, "v9"), reference.reduce_sum(x), rtol=1e-6)


@pytest.mark.parametrize("n", [1, 1000, 2 ** 22 + 5])
def test_atomic_variant_is_accurate_on_gpu(gpu, n):
    from common import harness as H
    from days.day14_reduce_sum import driver

    x = np.random.default_rng(n).random(n, dtype=np.float32)
    case = H.Case((n,), inputs={"x": x}, outputs={"y": ((1,), np.float32)})
    d = H.DeviceCase(case)
    driver.launch_atomic(d)
    np.testing.assert_allclose(d.array("y").get()[0], reference.reduce_sum(x), rtol=1e-6)
