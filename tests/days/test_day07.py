import numpy as np
import pytest

from days.day07_naive_matmul import reference


def test_reference_by_hand():
    a = [[1.0, 2.0], [3.0, 4.0]]
    b = [[5.0, 6.0], [7.0, 8.0]]
    np.testing.assert_array_equal(reference.matmul(a, b), [[19.0, 22.0], [43.0, 50.0]])
    # rectangular: (1x3) @ (3x2)
    np.testing.assert_array_equal(reference.matmul([[1.0, -1.0, 2.0]], [[1.0, 0.0], [0.0, 1.0], [3.0, 4.0]]),
                                  [[7.0, 7.0]])


def test_reference_equals_the_kernel_loop():
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    np.testing.assert_allclose(reference.matmul(a, b), reference.matmul_loops(a, b), rtol=1e-13)


def test_reference_rejects_mismatched_shapes():
    with pytest.raises(ValueError):
        reference.matmul(np.ones((2, 3)), np.ones((2, 3)))


def test_flops_and_bytes_of_a_case():
    from days.day07_naive_matmul import driver

    assert reference.flops(2, 3, 4) == 48
    case = driver.make_case((4, 5, 6), np.random.default_rng(0))
    assert case.flops == 2 * 4 * 5 * 6
    assert case.bytes == 4 * (4 * 5 + 5 * 6 + 4 * 6)
    assert case.inputs["a"].shape == (4, 5) and case.inputs["b"].shape == (5, 6)
    assert case.outputs["c"][0] == (4, 6)


def test_sizes_are_m_k_n_and_validated():
    from common import harness as H
    from days.day07_naive_matmul import driver

    assert H.parse_size(driver, "1000x777x513") == (1000, 777, 513)
    assert (1000, 777, 513) in driver.CHECK_SIZES
    with pytest.raises(H.SizeError, match="at most"):
        H.parse_size(driver, "600000x4x4")


def test_matmul_rejects_bad_shapes_before_the_gpu():
    from days.day07_naive_matmul import driver

    with pytest.raises(ValueError, match="A\\[M,K\\]"):
        driver.matmul(np.ones((3, 4), np.float32), np.ones((3, 4), np.float32))


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_small_integers_are_exact_on_gpu(gpu, version):
    # integer products and sums below 2^24 are exact in fp32: any indexing slip shows as != 0
    from days.day07_naive_matmul import driver

    rng = np.random.default_rng(70)
    a = rng.integers(-8, 9, (37, 45)).astype(np.float32)
    b = rng.integers(-8, 9, (45, 29)).astype(np.float32)
    np.testing.assert_array_equal(driver.matmul(a, b, version), a.astype(np.int64) @ b.astype(np.int64))


def test_transposed_shapes_and_cublas_on_gpu(gpu):
    # A is 1000x3 (tall), B is 3x513: every C element depends on its own row and column
    from common import harness as H
    from common.check import compare
    from days.day07_naive_matmul import driver

    rng = np.random.default_rng(71)
    a = rng.standard_normal((1000, 3)).astype(np.float32)
    b = rng.standard_normal((3, 513)).astype(np.float32)
    ref = reference.matmul(a, b)
    for v in driver.VERSIONS:
        assert compare(driver.matmul(a, b, v), ref).ok, v
    case = driver.make_case((1000, 777, 513), np.random.default_rng(72))
    d = H.DeviceCase(case)
    d.poison_outputs()
    out = driver.baselines(d)["cuBLAS sgemm"]().get()
    assert compare(out, case.expected()["c"]).ok, "cuBLAS through the row-major trick"
