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
