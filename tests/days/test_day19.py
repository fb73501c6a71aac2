import numpy as np
import pytest

from days.day19_softmax_backward import reference


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
    with pytest.raises(ValueError, match="same shape"):
        driver.softmax_backward(A, dA[:, :5])
