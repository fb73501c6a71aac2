import copy
import re

import numpy as np
import pytest

from days.day07_naive_matmul import driver as D
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


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3), np.complex64), np.ones((3, 2)), TypeError, "complex"),
    (np.ones((2, 3)), np.ones((3, 2), bool), TypeError, "booleans"),
    ("abc", np.ones((3, 2)), TypeError, "string"),
    (np.array([["a", "b"]]), np.ones((2, 2)), TypeError, "numbers"),
    (None, np.ones((2, 2)), TypeError, "None"),
    (np.ones(3), np.ones((3, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((1, 3, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((4, 2)), ValueError, "A[M,K]"),
    ([[1.0, 2.0], [3.0]], np.ones((2, 2)), ValueError, "ragged"),
])
def test_matmul_refuses_bad_arrays(a, b, exc, word):
    with pytest.raises(exc, match=re.escape(word)):
        D.matmul(a, b)


def test_matmul_and_launch_refuse_unknown_versions():
    with pytest.raises(ValueError, match="v1, v2"):
        D.matmul(np.ones((2, 2)), np.ones((2, 2)), "v3")
    with pytest.raises(TypeError, match="version"):
        D.matmul(np.ones((2, 2)), np.ones((2, 2)), 2)
    with pytest.raises(ValueError, match="unknown version"):
        D.launch("v3", None)  # the old else-branch ran v2 for any name


def test_empty_products_launch_nothing():
    c = D.matmul(np.ones((3, 0)), np.ones((0, 4)))  # K = 0: every entry a sum of nothing
    assert c.shape == (3, 4) and c.dtype == np.float32 and not c.any()
    assert D.matmul(np.ones((0, 5)), np.ones((5, 4))).shape == (0, 4)
    assert D.matmul(np.ones((3, 5)), np.ones((5, 0))).shape == (3, 0)


def test_too_many_rows_for_the_grid_is_refused_before_the_gpu():
    a = np.ones((65535 * 8 + 1, 1), np.float32)  # 2 MB: v2 puts rows on gridDim.y
    with pytest.raises(ValueError, match="65535"):
        D.matmul(a, np.ones((1, 1)))


def test_best_and_an_odd_bench_shape():
    assert D.BEST in D.VERSIONS
    odd = [s for s in D.BENCH_SIZES if all(v % 2 for v in s)]
    assert odd, "a bench shape with every dimension odd"
    # the same work as the default, so the two rows compare directly
    m, k, n = odd[0]
    assert abs(m * k * n / 2048 ** 3 - 1) < 0.01


def test_bar_is_the_gap_to_cublas():
    from common.bars import judge
    from common.results import load_all

    rec = load_all().get(7)
    if rec is None:
        pytest.skip("no results/day07.json")
    ok, fig = judge(D.BAR, rec)
    c = next(c for c in rec["cases"] if c["size"] == [2048, 2048, 2048])
    v2 = next(r for r in c["rows"] if r["version"] == "v2")
    cub = c["baseline"][0]["median_ms"]
    assert ok and f"v2 at {cub / v2['median_ms']:.2f}x cuBLAS" in fig, fig
    nolib = copy.deepcopy(rec)
    for c in nolib["cases"]:
        c["baseline"] = []
    ok, fig = judge(D.BAR, nolib)
    assert not ok and "cuBLAS not timed" in fig


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


def test_one_by_one_and_k_of_one_on_gpu(gpu):
    for v in D.VERSIONS:
        assert D.matmul([[3.0]], [[-2.0]], v).tolist() == [[-6.0]], v
        a = np.arange(5, dtype=np.float32).reshape(5, 1)  # K = 1: an outer product
        b = np.arange(7, dtype=np.float32).reshape(1, 7)
        np.testing.assert_array_equal(D.matmul(a, b, v), a @ b, err_msg=v)


def test_rows_at_the_grid_limit_on_gpu(gpu):
    # v2 puts M on gridDim.y in blocks of 8: M = 524280 is exactly 65535 blocks
    m = 65535 * 8
    a = (np.arange(m) % 7).astype(np.float32).reshape(m, 1)
    b = np.full((1, 3), 2, np.float32)
    np.testing.assert_array_equal(D.matmul(a, b, "v2"), a @ b)
