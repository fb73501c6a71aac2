import numpy as np
import pytest

from days.day19_softmax_backward import driver, reference


def test_backward_by_hand():
    # A = [1/2, 1/2], dA = [1, 0]: dot = 1/2, dZ = [1/2 (1 - 1/2), 1/2 (0 - 1/2)]
    np.testing.assert_allclose(reference.softmax_backward([[0.5, 0.5]], [[1.0, 0.0]]),
                               [[0.25, -0.25]], rtol=1e-15)
    # a one-class row has A = 1: softmax is constant, its gradient is 0 whatever dA is
    assert reference.softmax_backward([[1.0]], [[7.0]])[0, 0] == 0.0


def test_backward_equals_the_full_jacobian_product():
    rng = np.random.default_rng(0)
    A = reference.softmax(rng.standard_normal((4, 9)) * 3)
    dA = rng.standard_normal((4, 9))
    np.testing.assert_allclose(reference.softmax_backward(A, dA),
                               reference.softmax_backward_via_jacobian(A, dA), rtol=1e-12, atol=1e-15)


def _central_differences(f, Z, eps=1e-6):
    g = np.zeros_like(Z)
    for i in np.ndindex(Z.shape):
        old = Z[i]
        Z[i] = old + eps
        fp = f(Z)
        Z[i] = old - eps
        fm = f(Z)
        Z[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g


def test_backward_matches_finite_differences():
    # L(Z) = sum(G * softmax(Z)) has dL/dA = G, so dL/dZ = softmax_backward(softmax(Z), G)
    rng = np.random.default_rng(1)
    Z = rng.standard_normal((3, 6)) * 2
    G = rng.standard_normal((3, 6))
    num = _central_differences(lambda z: (G * reference.softmax(z)).sum(), Z)
    np.testing.assert_allclose(reference.softmax_backward(reference.softmax(Z), G), num,
                               rtol=1e-7, atol=1e-9)


def test_ce_grad_by_hand_and_by_finite_differences():
    # logits [0, log 3]: softmax [1/4, 3/4]; label 1, one row: dZ = [1/4, 3/4 - 1]
    np.testing.assert_allclose(reference.softmax_ce_grad([[0.0, np.log(3.0)]], [1]),
                               [[0.25, -0.25]], rtol=1e-14)
    rng = np.random.default_rng(2)
    Z = rng.standard_normal((4, 5)) * 3
    y = rng.integers(0, 5, 4)
    num = _central_differences(lambda z: reference.cross_entropy(z, y), Z)
    np.testing.assert_allclose(reference.softmax_ce_grad(Z, y), num, rtol=1e-7, atol=1e-9)


def test_ce_grad_is_softmax_backward_of_the_log():
    # chain rule: dL/dA for L = -(1/m) log A[r, y_r] is -onehot / (m A); its softmax backward
    # must equal the shortcut (A - onehot) / m
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((5, 7))
    y = rng.integers(0, 7, 5)
    A = reference.softmax(Z)
    dA = np.zeros_like(A)
    dA[np.arange(5), y] = -1.0 / (5 * A[np.arange(5), y])
    np.testing.assert_allclose(reference.softmax_backward(A, dA), reference.softmax_ce_grad(Z, y),
                               rtol=1e-12, atol=1e-16)


def test_gradient_rows_sum_to_zero():
    rng = np.random.default_rng(4)
    A = reference.softmax(rng.standard_normal((6, 11)))
    assert np.abs(reference.softmax_backward(A, rng.standard_normal((6, 11))).sum(axis=1)).max() < 1e-15
    assert np.abs(reference.softmax_ce_grad(rng.standard_normal((6, 11)), np.arange(6)).sum(axis=1)).max() < 1e-15


def test_kernel_choices(monkeypatch):
    from days.day19_softmax_backward import driver

    assert driver.v3_config(8192) == ("smbwd_v3_items4", 512)   # 2048 float4 over 512 threads
    assert driver.v3_config(1024) == ("smbwd_v3_items1", 256)
    assert driver.v3_config(4099) == ("smbwd_v3_items4", 256)
    assert driver.v3_config(16384) == ("smbwd_v3_items8", 512)
    assert driver.v3_config(16388) == ("smbwd_v3_long", 1024)
    monkeypatch.setattr("common.gpu.device_info", lambda: {"smem_per_block_optin": 232448})
    assert driver.ce_config(1000) == ("softmax_ce_grad_items1", 256, 0)
    assert driver.ce_config(50257) == ("softmax_ce_grad_smem", 1024, 4 * 50260)
    assert driver.ce_config(70001) == ("softmax_ce_grad_long", 1024, 0)


# --- the public functions: arguments are checked before anything reaches the GPU -----------

M = np.full((3, 4), 0.25, np.float32)
Y = np.array([0, 3, 1])


@pytest.mark.parametrize("bad, exc, word", [
    (M.astype(np.complex64), TypeError, "complex"),
    (M.astype(str), TypeError, "dtype"),
    (M > 0, TypeError, "booleans"),
    (None, TypeError, "None"),
    (M[0], ValueError, "2-D"),                 # one row given as 1-D
    (M[None], ValueError, "2-D"),              # 3-D
])
def test_softmax_backward_refuses_bad_arrays(bad, exc, word):
    with pytest.raises(exc, match=word):
        driver.softmax_backward(bad, M)
    with pytest.raises(exc, match=word):
        driver.softmax_backward(M, bad)


def test_softmax_backward_needs_one_shape_and_a_known_version():
    with pytest.raises(ValueError, match="A and dA must have one shape"):
        driver.softmax_backward(M, M.T)
    with pytest.raises(ValueError, match="unknown version 'v4'.*v1, v2, v3"):
        driver.softmax_backward(M, M, version="v4")
    with pytest.raises(TypeError, match="version"):
        driver.softmax_backward(M, M, version=3)
    with pytest.raises(ValueError, match="unknown version"):  # launch() never runs another one
        driver.launch("v0", None)


@pytest.mark.parametrize("shape", [(0, 5), (5, 0), (0, 0)])
def test_empty_inputs_give_empty_gradients_without_a_launch(shape):
    dz = driver.softmax_backward(np.zeros(shape), np.zeros(shape))
    assert dz.shape == shape and dz.dtype == np.float32
    if shape[0] == 0:
        dz = driver.softmax_ce_grad(np.zeros(shape), np.zeros(0, np.int64))
        assert dz.shape == shape and dz.dtype == np.float32


@pytest.mark.parametrize("y, exc, word", [
    (np.array([0, 3, 4]), ValueError, "y\\[2\\] = 4 lies outside \\[0, 4\\)"),  # 4 classes
    (np.array([0, -1, 1]), ValueError, "outside"),
    (np.array([0.0, 2.5, 1.0]), ValueError, "whole numbers"),       # not cut to 2
    (np.array([0, 1]), ValueError, "shape"),                          # one label short
    (np.array([[0], [3], [1]]), ValueError, "shape"),                 # a column of labels
    (np.array([0, 1, 2], dtype=np.complex64), TypeError, "integers"),
    (np.array([True, False, True]), TypeError, "booleans"),
    ("013", TypeError, "string"),
])
def test_ce_grad_labels_must_be_integers_in_range(y, exc, word):
    with pytest.raises(exc, match=word):
        driver.softmax_ce_grad(M, y)


def test_ce_grad_refuses_bad_logits_and_scales():
    with pytest.raises(ValueError, match="Z must be 2-D"):
        driver.softmax_ce_grad(M[0], Y)
    with pytest.raises(TypeError, match="complex"):
        driver.softmax_ce_grad(M.astype(np.complex128), Y)
    with pytest.raises(ValueError, match="no classes"):
        driver.softmax_ce_grad(np.zeros((3, 0)), np.zeros(3, np.int32))
    for scale, exc in ((float("nan"), ValueError), (float("inf"), ValueError), (1e39, ValueError),
                       ("1", TypeError), (1j, TypeError)):
        with pytest.raises(exc, match="scale"):
            driver.softmax_ce_grad(M, Y, scale=scale)


def test_sizes_the_kernels_can_index():
    from common import harness as H

    driver.validate_size((driver.MAX_DIM, 1))
    for size in ((driver.MAX_DIM + 1, 1), (1, 2 ** 31)):
        with pytest.raises(ValueError, match="32 bits"):
            driver.validate_size(size)
    with pytest.raises(H.SizeError, match="32 bits"):
        H.parse_size(driver, "1x2^31")


def test_cases_count_their_reads_bench_sizes_and_bar():
    from common.timing import mix_of

    case = driver.make_case((4, 6), np.random.default_rng(0))
    assert case.bytes == 3 * 4 * 24 and case.read_bytes == 2 * 4 * 24   # A and dA in, dZ out
    assert mix_of(case.bytes, case.read_bytes) == (2, 1)
    ce = driver.make_ce_case((4, 6), np.random.default_rng(0))
    assert ce.read_bytes == 4 * 24 + 4 * 4 and ce.bytes == ce.read_bytes + 4 * 24
    assert (4096, 50257) in driver.BENCH_SIZES                         # an LM head, odd width
    assert driver.v3_config(50257)[0] == "smbwd_v3_long"                # which v3 handles
    assert driver.BAR[0] == {"sizes": driver.BENCH_SIZES, "pct": 80}  # the LM head included
    check = driver.BAR[1]["check"]

    def rec(pcts, key="pct_of_ceiling"):
        return {"extra": {"ce_grad": {"timed": [{"size": list(s), key: p, "ok": True}
                                                for s, p in pcts.items()]}}}

    ok, fig = check(rec({s: 90.0 for s in driver.CE_BENCH_SIZES}))
    assert ok and "90.0%" in fig
    ok, fig = check(rec({(8192, 8192): 94.5, (2048, 50257): 66.8}, key="pct_of_copy"))
    assert not ok and "66.8%" in fig and "2048x50257" in fig           # the 2026-11-22 run
    ok, fig = check(rec({(8192, 8192): 94.5}))
    assert not ok and "not measured" in fig


# --- GPU ------------------------------------------------------------------------------------

def test_ce_grad_every_path_on_gpu(gpu):
    from common.check import compare
    from days.day19_softmax_backward import driver

    for size in driver.CE_CHECK_SIZES:
        rng = np.random.default_rng(size[1])
        Z = (rng.standard_normal(size) * 3).astype(np.float32)
        y = rng.integers(0, size[1], size[0]).astype(np.int32)
        r = compare(driver.softmax_ce_grad(Z, y), reference.softmax_ce_grad(Z, y))
        assert r.ok, f"{size} ({driver.ce_config(size[1])[0]}): {r.message}"


@pytest.mark.parametrize("cols", [10, 8193, 50257])
def test_ce_grad_with_logits_up_to_1e4_on_gpu(gpu, cols):
    from common.check import compare
    from days.day19_softmax_backward import driver

    rng = np.random.default_rng(cols)
    Z = rng.uniform(-1e4, 1e4, (5, cols)).astype(np.float32)
    Z[0] = 1e4  # equal huge logits: uniform softmax
    y = rng.integers(0, cols, 5).astype(np.int32)
    r = compare(driver.softmax_ce_grad(Z, y, scale=1.0), reference.softmax_ce_grad(Z, y, 1.0))
    assert r.ok, r.message


def test_softmax_backward_public_api_on_gpu(gpu):
    from common.check import compare
    from days.day19_softmax_backward import driver

    rng = np.random.default_rng(6)
    A = reference.softmax(rng.standard_normal((3, 777))).astype(np.float32)
    dA = rng.standard_normal((3, 777)).astype(np.float32)
    ref = reference.softmax_backward(A, dA)
    for v in driver.VERSIONS:
        r = compare(driver.softmax_backward(A, dA, version=v), ref)
        assert r.ok, f"{v}: {r.message}"
    with pytest.raises(ValueError, match="one shape"):
        driver.softmax_backward(A, dA[:, :5])


def test_public_functions_at_the_smallest_and_awkward_sizes_on_gpu(gpu):
    from common.check import compare

    one = driver.softmax_backward([[1.0]], [[7.0]])  # a one-class row: gradient 0
    assert one.shape == (1, 1) and one[0, 0] == 0.0
    assert driver.softmax_ce_grad([[3.0]], [0])[0, 0] == 0.0  # softmax 1, label 1
    rng = np.random.default_rng(19)
    Z = rng.standard_normal((3, 50257)) * 3  # float64 in (the kernels see it as float32)
    y = rng.integers(0, 50257, 3).astype(np.float64)  # whole-number floats are labels
    f32 = lambda a: a.astype(np.float32)
    r = compare(driver.softmax_ce_grad(Z, y, scale=0.5),
                reference.softmax_ce_grad(f32(Z), y.astype(int), 0.5))
    assert r.ok, r.message
    A = reference.softmax(Z)
    dA = rng.standard_normal(A.shape)
    for v in driver.VERSIONS:
        r = compare(driver.softmax_backward(A, dA, version=v), reference.softmax_backward(f32(A), f32(dA)))
        assert r.ok, f"{v}: {r.message}"
