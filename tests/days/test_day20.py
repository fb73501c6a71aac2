import numpy as np
import pytest

from days.day20_fa2_backward import reference


def test_gradients_by_hand():
    # one row, x = [1], W = [[0, 0]], b = 0, label 0: A = [1/2, 1/2], dZ = A - onehot = [-1/2, 1/2]
    dW, db, dX = reference.grads([[1.0]], [[0.0, 0.0]], [0.0, 0.0], [0])
    np.testing.assert_allclose(dW, [[-0.5, 0.5]], rtol=1e-15)
    np.testing.assert_allclose(db, [-0.5, 0.5], rtol=1e-15)
    np.testing.assert_allclose(dX, [[0.0]], atol=1e-16)  # dZ W^T with W = 0
    # x = [2], W = [[1, 3]]: dX = dZ W^T = sum_j dZ_j W_j
    Z = np.array([2.0, 6.0])
    A = np.exp(Z) / np.exp(Z).sum()
    dW, db, dX = reference.grads([[2.0]], [[1.0, 3.0]], [0.0, 0.0], [1])
    np.testing.assert_allclose(db, A - [0, 1], rtol=1e-14)
    np.testing.assert_allclose(dW, [2 * (A - [0, 1])], rtol=1e-14)
    np.testing.assert_allclose(dX, [[A[0] * 1 + (A[1] - 1) * 3]], rtol=1e-14)


@pytest.mark.parametrize("seed", [0, 1])
def test_gradients_match_central_differences(seed):
    rng = np.random.default_rng(seed)
    m, d, c = 5, 4, 3
    X = rng.standard_normal((m, d))
    W = rng.standard_normal((d, c)) * 2
    b = rng.standard_normal(c)
    y = rng.integers(0, c, m)
    f = lambda: reference.loss(X, W, b, y)
    dW, db, dX = reference.grads(X, W, b, y)
    for analytic, x in ((dW, W), (db, b), (dX, X)):
        np.testing.assert_allclose(analytic, reference.numerical_grad(f, x), rtol=1e-6, atol=1e-9)


def test_backward_from_logp_is_the_chain_rule():
    rng = np.random.default_rng(2)
    X, W, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 8)), rng.standard_normal(8)
    y = rng.integers(0, 8, 6)
    logp = reference.log_softmax(X @ W + b)
    for a, g in zip(reference.backward_from_logp(X, W, logp, y), reference.grads(X, W, b, y)):
        np.testing.assert_allclose(a, g, rtol=1e-13, atol=1e-16)


def test_gradient_identities():
    # each row of dZ sums to 0 (softmax sums to 1, the onehot too): so db sums to 0 and
    # dW 1 = X^T (dZ 1) = 0
    rng = np.random.default_rng(3)
    X, W, b = rng.standard_normal((9, 4)), rng.standard_normal((4, 6)), rng.standard_normal(6)
    dW, db, _ = reference.grads(X, W, b, rng.integers(0, 6, 9))
    assert abs(db.sum()) < 1e-15 and np.abs(dW.sum(axis=1)).max() < 1e-14


@pytest.mark.parametrize("chunk", [1, 7, 64, 300, 1000])
def test_chunked_equals_whole(chunk):
    rng = np.random.default_rng(4)
    N, d, V = 300, 6, 50
    H, W, b = rng.standard_normal((N, d)), rng.standard_normal((d, V)), rng.standard_normal(V)
    y = rng.integers(0, V, N)
    whole = reference.linear_cross_entropy(H, W, b, y)
    chunked = reference.chunked_linear_cross_entropy(H, W, b, y, chunk)
    assert chunked[0] == pytest.approx(whole[0], rel=1e-13)
    for a, w in zip(chunked[1:], whole[1:]):
        np.testing.assert_allclose(a, w, rtol=1e-12, atol=1e-16)


def test_gradient_descent_lowers_the_loss():
    X, y = reference.classification_problem()
    losses = reference.sgd(X, y, 5, steps=20, lr=1.0)
    assert losses[0] == pytest.approx(np.log(5), rel=1e-12)  # W = 0: uniform over 5 classes
    assert all(b < a for a, b in zip(losses, losses[1:]))
    assert losses[-1] < 0.5 * losses[0]


def test_split_k_plan():
    from days.day20_fa2_backward import driver

    for M, N, K in [(4096, 256, 50257), (7, 40, 50257), (1024, 768, 50257), (7, 40, 300), (5, 1, 3)]:
        splits, k_chunk = driver.split_k(M, N, K, sms=132)
        assert k_chunk % 8 == 0 and (splits - 1) * k_chunk < K <= splits * k_chunk
    assert driver.split_k(4096, 256, 50257, sms=132) == (9, 5592)  # 64 tiles -> ~528 blocks
    assert driver.split_k(7, 40, 300, sms=132)[0] == 1              # short K: no split


def test_v4_split_plan():
    from days.day20_fa2_backward import driver

    for M, N, K in [(4096, 256, 50257), (7, 40, 50257), (1024, 768, 50257), (7, 40, 300), (5, 1, 3),
                    (1024, 256, 50257)]:
        for waves in (1, 2):
            splits, k_chunk = driver.v4_split(M, N, K, sms=132, waves=waves)
            assert k_chunk % 16 == 0 and (splits - 1) * k_chunk < K <= splits * k_chunk
            tiles = -(-M // 128) * -(-N // 128)
            assert splits == 1 or tiles * splits <= waves * 2 * 132  # within the waves asked for
    # dX at the benchmark: 64 output tiles, 4 K ranges -> 256 units, one wave of 264 blocks
    assert driver.v4_split(4096, 256, 50257, sms=132, waves=1) == (4, 12576)
    assert driver.v4_split(7, 40, 300, sms=132)[0] == 1  # short K: no split


def test_chunked_path_plans_under_a_quarter_of_the_memory():
    from days.day20_fa2_backward import driver

    N, d, V = 8192, 768, 50257
    unfused = driver.planned_bytes(N, d, V, None)
    chunked = driver.planned_bytes(N, d, V, 1024)
    fused = driver.planned_bytes(N, d, V, N)
    assert unfused > 2 * 4 * N * V  # the logits and their gradient, 1.6 GB each
    assert chunked / unfused < 0.25
    assert fused == unfused - 4 * N * V  # the same, less the gradient buffer


def test_declarations():
    from days.day20_fa2_backward import driver

    assert driver.BEST in driver.VERSIONS
    assert driver.AWKWARD in driver.BENCH_SIZES and all(v % 128 and v % 8 for v in driver.AWKWARD)
    texts = " ".join(c["text"] for c in driver.BAR)
    assert "finite differences" in texts and "25%" in texts and "faster than torch" in texts


def test_bar_checks_read_the_recorded_tables():
    from days.day20_fa2_backward import driver

    fd_bar, mem_bar, fwd_bar, lm_bar = (c["check"] for c in driver.BAR)
    rec = {"extra": {
        "finite_differences": {"v1": {"rel_err": 2e-7, "ok": True}, "v4": {"rel_err": 3e-7, "ok": True}},
        "chunked_ce": {"peak_ratio": 0.16, "paths": [
            {"kind": "unfused", "median_ms": 50.0}, {"kind": "chunked", "median_ms": 45.0},
            {"kind": "torch", "median_ms": 41.0}]},
        "fwd_bwd": {"paths": [{"kind": "unfused", "median_ms": 9.0}, {"kind": "fused", "median_ms": 7.0},
                              {"kind": "chunked", "median_ms": 7.5}, {"kind": "torch", "median_ms": 8.4}]}}}
    assert fd_bar(rec)[0] and "3.0e-07" in fd_bar(rec)[1]
    assert mem_bar(rec) == (True, "16.0% of unfused")
    ok, fig = fwd_bar(rec)
    assert ok and "fused" in fig and "1.20x" in fig  # the faster of ours against torch
    ok, fig = lm_bar(rec)
    assert not ok and "0.91x" in fig                  # chunked 45 ms vs torch 41 ms: missed
    assert not fd_bar({"extra": {}})[0] and not fwd_bar({})[0]


# --- bad input to the public functions (refused before any launch) -------------------------

def _backward_args(m=3, d=4, c=5):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((m, d)).astype(np.float32), rng.standard_normal((d, c)).astype(np.float32),
            np.log(np.full((m, c), 1.0 / c, np.float32)), np.arange(m) % c]


@pytest.mark.parametrize("which,bad,exc,word", [
    (0, np.ones((3, 4), np.complex64), TypeError, "complex"),
    (1, "W", TypeError, "string"),
    (2, np.ones((3, 5), bool), TypeError, "booleans"),
    (0, np.ones(12, np.float32), ValueError, "2-D"),
    (1, np.ones((3, 5), np.float32), ValueError, "features"),   # W rows != X columns
    (2, np.zeros((3, 4), np.float32), ValueError, "shape"),      # logp one class short
    (2, np.zeros((2, 5), np.float32), ValueError, "shape"),      # logp one row short
    (3, [0, 1], ValueError, "shape"),
    (3, [0, 2.5, 1], ValueError, "whole"),
    (3, [0, 5, 1], ValueError, "outside"),
    (3, [-1, 0, 1], ValueError, "outside"),
])
def test_backward_refuses_bad_input(which, bad, exc, word):
    from days.day20_fa2_backward import driver

    args = _backward_args()
    args[which] = bad
    with pytest.raises(exc, match=word):
        driver.backward(*args)


def test_backward_refuses_unknown_versions_and_empty_batches_give_zeros():
    from days.day20_fa2_backward import driver

    with pytest.raises(ValueError, match="v1, v2, v3, v4"):
        driver.backward(*_backward_args(), version="v0")
    with pytest.raises(ValueError, match="unknown version"):
        driver.launch("v7", None)
    X, W, logp, _ = _backward_args()
    dW, db, dX = driver.backward(X[:0], W, logp[:0], [])
    assert dW.shape == (4, 5) and not dW.any() and db.shape == (5,) and not db.any()
    assert dX.shape == (0, 4) and dW.dtype == np.float32
    with pytest.raises(ValueError, match="no columns"):
        driver.backward(X, W[:, :0], logp[:, :0], [0, 0, 0])


def _lce_args(N=6, d=3, V=7):
    from days.day20_fa2_backward import driver

    return list(driver.lce_problem(N, d, V))


@pytest.mark.parametrize("which,bad,exc,word", [
    (0, np.ones((6, 3), np.complex128), TypeError, "complex"),
    (0, np.ones((6, 3, 1), np.float32), ValueError, "2-D"),
    (1, np.ones((4, 7), np.float32), ValueError, "features"),
    (2, np.zeros(6, np.float32), ValueError, "shape"),     # the bias one element short
    (2, "bias", TypeError, "string"),
    (3, np.arange(5), ValueError, "shape"),
    (3, np.full(6, 7), ValueError, "outside"),
    (3, np.full(6, 1.5), ValueError, "whole"),
])
def test_linear_cross_entropy_refuses_bad_input(which, bad, exc, word):
    from days.day20_fa2_backward import driver

    args = _lce_args()
    args[which] = bad
    with pytest.raises(exc, match=word):
        driver.linear_cross_entropy(*args)


@pytest.mark.parametrize("chunk,exc,word", [(0, ValueError, "at least 1"), (2.5, TypeError, "integer"),
                                            ("8", TypeError, "integer")])
def test_linear_cross_entropy_refuses_a_bad_chunk(chunk, exc, word):
    from days.day20_fa2_backward import driver

    with pytest.raises(exc, match=word):
        driver.linear_cross_entropy(*_lce_args(), chunk=chunk)


def test_linear_cross_entropy_of_an_empty_batch():
    from days.day20_fa2_backward import driver

    H, W, b, y = _lce_args()
    loss, dH, dW, db = driver.linear_cross_entropy(H[:0], W, b, y[:0])
    assert loss == 0.0 and dH.shape == (0, 3) and dW.shape == (3, 7) and db.shape == (7,)
    assert not dW.any() and not db.any()


def test_case_shapes_and_counts():
    from days.day20_fa2_backward import driver

    case = driver.make_case((7, 33, 10), np.random.default_rng(5))
    assert list(case.outputs) == ["dW", "db", "dX"]
    assert case.outputs["dW"][0] == (33, 10) and case.outputs["dX"][0] == (7, 33)
    np.testing.assert_allclose(np.exp(case.inputs["logp"].astype(np.float64)).sum(axis=1), 1, rtol=1e-5)
    assert case.flops == 4 * 7 * 33 * 10 + 4 * 7 * 10


# --- GPU ------------------------------------------------------------------------------------

def test_gpu_gradients_match_central_differences(gpu):
    # the GPU's gradients against float64 finite differences of the loss itself
    from days.day15_fa2_forward.driver import forward
    from days.day20_fa2_backward import driver

    rng = np.random.default_rng(6)
    m, d, c = 6, 5, 4
    X = rng.standard_normal((m, d)).astype(np.float32)
    W = rng.standard_normal((d, c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    y = rng.integers(0, c, m).astype(np.int32)
    X64, W64, b64 = X.astype(np.float64), W.astype(np.float64), b.astype(np.float64)
    f = lambda: reference.loss(X64, W64, b64, y)
    fd = [reference.numerical_grad(f, x) for x in (W64, b64, X64)]
    _, logp = forward(X, W, b, y)
    for v in driver.VERSIONS:
        for got, want in zip(driver.backward(X, W, logp, y, version=v), fd):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    # the extras table records the same check
    assert all(r["ok"] for r in driver.finite_difference_check().values())


@pytest.mark.parametrize("chunk", [None, 1, 100, 128, 300, 1000])
def test_linear_cross_entropy_matches_float64_on_gpu(gpu, chunk):
    from days.day20_fa2_backward import driver

    H, W, b, y = driver.lce_problem(300, 40, 1003, seed=7)
    loss, dH, dW, db = reference.linear_cross_entropy(H, W, b, y)
    out = dict(zip(("loss", "dH", "dW", "db"), driver.linear_cross_entropy(H, W, b, y, chunk)))
    r = driver.compare_lce(out, {"loss": loss, "dH": dH, "dW": dW, "db": db})
    assert r.ok, f"chunk {chunk}: {r.message}"


def test_chunked_peak_memory_below_a_quarter_on_gpu(gpu):
    from days.day20_fa2_backward import driver

    N, d, V, chunk = 2048, 64, 50257, 256
    H, W, b, y = driver.lce_problem(N, d, V)
    peaks, outs = {}, {}
    for ch in (None, chunk):
        p = driver.LinearCrossEntropy(H, W, b, y, ch)
        p.run()
        outs[ch] = p.results()
        peaks[ch] = (p.mem.peak, p.mem.driver_peak)
        p.free()
        assert peaks[ch][0] == driver.planned_bytes(N, d, V, ch, driver.device_sms())
        assert (p.dZ is None) == (ch is not None)  # only the unfused path stores the gradient
    assert peaks[chunk][0] < 0.25 * peaks[None][0]
    assert peaks[chunk][1] < 0.25 * peaks[None][1]  # as the driver sees it, too
    for k in outs[None]:
        np.testing.assert_allclose(outs[chunk][k], outs[None][k], rtol=1e-4, atol=1e-7)


def test_gradient_descent_on_gpu(gpu):
    from days.day20_fa2_backward import driver

    X, y = reference.classification_problem()
    gpu_losses = driver.sgd_gpu(X, y, 5, steps=20, lr=1.0)
    assert all(b < a for a, b in zip(gpu_losses, gpu_losses[1:]))
    assert gpu_losses[-1] < 0.5 * gpu_losses[0]
    np.testing.assert_allclose(gpu_losses, reference.sgd(X, y, 5, 20, 1.0), rtol=1e-4)


def test_backward_public_api_on_gpu(gpu):
    from days.day15_fa2_forward.driver import forward
    from days.day20_fa2_backward import driver

    rng = np.random.default_rng(9)
    X = rng.standard_normal((130, 7)).astype(np.float32)
    W = rng.standard_normal((7, 300)).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    y = rng.integers(0, 300, 130)
    _, logp = forward(X, W, b, y)
    want = reference.backward_from_logp(X, W, logp, y)
    for v in driver.VERSIONS:
        for got, w in zip(driver.backward(X, W, logp, y, version=v), want):
            np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-7)
    # no features: dW and dX are empty, db is still the column sums of dZ
    dW, db, dX = driver.backward(X[:, :0], W[:0], logp, y)
    assert dW.shape == (0, 300) and dX.shape == (130, 0)
    np.testing.assert_allclose(db, want[1], rtol=1e-4, atol=1e-7)


def test_linear_cross_entropy_without_features_on_gpu(gpu):
    from days.day20_fa2_backward import driver

    H, W, b, y = driver.lce_problem(40, 3, 50, seed=8)
    loss, dH, dW, db = driver.linear_cross_entropy(H[:, :0], W[:0], b, y)
    ref = reference.linear_cross_entropy(np.zeros((40, 0)), np.zeros((0, 50)), b, y)
    assert loss == pytest.approx(ref[0], rel=1e-6) and dH.shape == (40, 0) and dW.shape == (0, 50)
    np.testing.assert_allclose(db, ref[3], rtol=1e-5, atol=1e-8)


def test_v4_persistent_and_one_block_per_unit_agree_on_gpu(gpu):
    # the same kernels launched with a persistent grid and with one block per unit, and with
    # K split for one and for two waves: the same sums in the same order give the same bits
    from common import harness as H
    from days.day20_fa2_backward import driver

    case = driver.make_case((1100, 40, 9001), np.random.default_rng(12))
    outs = []
    for grid in ("persistent", "tiles"):
        d = H.DeviceCase(case)
        d.poison_outputs()
        driver.launch_v4(d, grid=grid)
        outs.append(d.outputs())
    for k in outs[0]:
        np.testing.assert_array_equal(outs[0][k], outs[1][k])
