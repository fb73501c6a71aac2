import numpy as np
import pytest

from days.day08_tiled_matmul import reference


@pytest.mark.parametrize("shape,tile", [((1, 1, 1), (8, 8, 8)), ((33, 31, 17), (16, 16, 16)),
                                        ((100, 77, 51), (32, 32, 32)), ((130, 9, 131), (128, 128, 8))])
def test_zero_padded_tiles_give_the_plain_product(shape, tile):
    m, k, n = shape
    rng = np.random.default_rng(m + k + n)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    np.testing.assert_allclose(reference.tiled_matmul(a, b, *tile), a @ b, rtol=1e-12, atol=1e-12)


def test_reference_by_hand():
    np.testing.assert_array_equal(reference.matmul([[2.0, 0.0], [1.0, 1.0]], [[1.0, 2.0], [3.0, 4.0]]),
                                  [[2.0, 4.0], [4.0, 6.0]])


def test_global_loads_per_output():
    assert reference.global_loads_per_output(8, 8) == 0.25
    assert reference.global_loads_per_output(32, 32) == 1 / 16
    assert reference.global_loads_per_output(128, 128) == 1 / 64


def test_kernel_choice_by_alignment():
    from days.day08_tiled_matmul.driver import kernel_name

    assert kernel_name("v7", (2048, 2048, 2048)) == "matmul_tiled_v7_vec4"
    assert kernel_name("v6", (1000, 777, 513)) == "matmul_tiled_v6_scalar"   # K, N odd
    assert kernel_name("v6", (1000, 776, 514)) == "matmul_tiled_v6_scalar"   # N % 4 == 2
    assert kernel_name("v7", (3, 8, 4)) == "matmul_tiled_v7_vec4"
    assert kernel_name("v3", (1000, 777, 513)) == "matmul_tiled_v3"


def test_check_sizes_cover_both_paths_and_the_headline_case():
    from days.day08_tiled_matmul import driver

    sizes = driver.CHECK_SIZES
    assert (1000, 777, 513) in sizes and (1, 1, 1) in sizes
    assert any(k % 4 == 0 and n % 4 == 0 and m % 128 for m, k, n in sizes)   # vec4, partial tiles
    assert any(k % 4 or n % 4 for m, k, n in sizes)                          # scalar path
    # the problem is day 7's, not a copy of it
    from days.day07_naive_matmul import driver as day07
    assert driver.make_case is day07.make_case


def _exact_case(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    return a, b, a.astype(np.int64) @ b.astype(np.int64)


@pytest.mark.parametrize("shape", [(131, 67, 257), (130, 68, 260), (1, 9, 5)])
def test_small_integers_are_exact_on_gpu(gpu, shape):
    # integers: fp32 sums are exact, so a misplaced tile or a missed zero-fill shows as != 0
    from days.day08_tiled_matmul import driver

    a, b, want = _exact_case(*shape, seed=sum(shape))
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.matmul(a, b, v), want, err_msg=v)


def test_best_version_and_day07_agree_on_gpu(gpu):
    # no timing here (machines are noisy; extras() reports the speed-up): both must be right
    from common.check import compare
    from days.day07_naive_matmul import driver as day07
    from days.day08_tiled_matmul import driver

    rng = np.random.default_rng(8)
    a = rng.standard_normal((1000, 777)).astype(np.float32)
    b = rng.standard_normal((777, 513)).astype(np.float32)
    ref = reference.matmul(a, b)
    assert compare(driver.matmul(a, b, driver.BEST), ref).ok
    assert compare(day07.matmul(a, b, "v2"), ref).ok


# --- the public function: bad input is refused before anything reaches the GPU -------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3), np.complex64), np.ones((3, 2)), TypeError, "complex"),
    (np.ones((2, 3)), np.ones((3, 2), bool), TypeError, "booleans"),
    ("abc", np.ones((3, 2)), TypeError, "string"),
    (np.array([["a", "b"]]), np.ones((2, 2)), TypeError, "dtype"),
    (np.ones(3), np.ones((3, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((1, 3, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((4, 2)), ValueError, "K = 3"),
    ([[1.0, 2.0], [3.0]], np.ones((2, 2)), ValueError, "ragged"),
])
def test_matmul_refuses_bad_arrays(a, b, exc, word):
    from days.day08_tiled_matmul import driver

    _raises(exc, word, lambda: driver.matmul(a, b))


def test_matmul_refuses_unknown_versions_and_launch_too():
    from days.day08_tiled_matmul import driver

    _raises(ValueError, "v7", lambda: driver.matmul(np.ones((2, 2)), np.ones((2, 2)), "v8"))
    _raises(TypeError, "version", lambda: driver.matmul(np.ones((2, 2)), np.ones((2, 2)), 7))
    # launch() itself never runs another kernel for a name it does not know
    _raises(ValueError, "unknown version", lambda: driver.launch("v0", None))


def test_matmul_of_empty_matrices_launches_nothing():
    from days.day08_tiled_matmul import driver

    c = driver.matmul(np.ones((3, 0)), np.ones((0, 4)))      # K = 0: a sum of nothing
    assert c.dtype == np.float32 and c.shape == (3, 4) and not c.any()
    assert driver.matmul(np.ones((0, 5)), np.ones((5, 4))).shape == (0, 4)
    assert driver.matmul(np.ones((3, 5)), np.ones((5, 0))).shape == (3, 0)


def test_sizes_past_the_kernels_limits_are_refused():
    from days.day08_tiled_matmul import driver

    driver.validate_size((driver.MAX_ROWS, 1, 1))
    _raises(ValueError, "gridDim.y", lambda: driver.validate_size((driver.MAX_ROWS + 1, 1, 1)))
    _raises(ValueError, "32-bit", lambda: driver.validate_size((1, 2 ** 31, 1)))
    _raises(ValueError, "32-bit", lambda: driver.validate_size((1, 1, 2 ** 31 - 1)))
    # the public function checks before uploading: 524281 rows of one column (2 MB)
    a = np.ones((driver.MAX_ROWS + 1, 1), np.float32)
    _raises(ValueError, "gridDim.y", lambda: driver.matmul(a, np.ones((1, 1))))


# --- BEST, BAR and the bench sizes -------------------------------------------------------------

def test_best_is_the_fastest_correct_version_measured():
    import json

    from common.harness import ROOT
    from days.day08_tiled_matmul import driver

    path = ROOT / "results" / "day08.json"
    if not path.exists():
        pytest.skip("no results/day08.json yet")
    rec = json.loads(path.read_text())
    case = next(c for c in rec["cases"] if tuple(c["size"]) == driver.SIZES["default"])
    rows = [r for r in case["rows"] if r.get("ok") and "median_ms" in r]
    assert min(rows, key=lambda r: r["median_ms"])["version"] == driver.BEST


def _comparison(speedup, ok=True):
    return {"day07 v2": {"median_ms": speedup, "ok": True}, "day08 v7": {"median_ms": 1.0, "ok": ok},
            "speedup": speedup}


def test_bar_is_judged_from_the_day07_comparison():
    from common.bars import judge
    from days.day08_tiled_matmul import driver

    assert judge(driver.BAR, {"extra": {}})[0] is False
    # the single-size record of the first H200 run
    ok, fig = judge(driver.BAR, {"extra": {"versus_day07": _comparison(6.2)}})
    assert ok and "6.2x" in fig
    # every size compared must clear 3x; the figure names the worst
    rec = {"extra": {"versus_day07": {"2048x2048x2048": _comparison(6.2),
                                      "4095x4097x1023": _comparison(2.9)}}}
    ok, fig = judge(driver.BAR, rec)
    assert not ok and "2.9x" in fig and "4095x4097x1023" in fig
    # a fast but wrong kernel does not meet it
    rec = {"extra": {"versus_day07": {"2048x2048x2048": _comparison(9.0, ok=False)}}}
    assert judge(driver.BAR, rec)[0] is False


def test_bench_sizes_include_an_awkward_shape_compared_with_day07():
    from days.day08_tiled_matmul import driver

    awkward = [s for s in driver.BENCH_SIZES if all(v % 4 for v in s)]
    assert awkward and awkward[0] in driver.VERSUS_DAY07_SIZES
    m, k, n = awkward[0]
    assert driver.kernel_name("v7", awkward[0]).endswith("_scalar")
    # it fills the GPU: at least one wave of 128x128 tiles on 132 SMs
    assert -(-m // 128) * -(-n // 128) >= 132


def test_rows_at_the_grid_limit_on_gpu(gpu):
    # M = 65535 blocks x 8 rows: v1's gridDim.y at its maximum; integers make the sums exact
    from days.day08_tiled_matmul import driver

    a = (np.arange(driver.MAX_ROWS) % 7).astype(np.float32).reshape(-1, 1)
    b = np.array([[1.0, -2.0, 3.0]], np.float32)
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.matmul(a, b, v), a @ b, err_msg=v)
