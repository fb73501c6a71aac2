import numpy as np
import pytest

from days.day15_fa2_forward import reference


def test_reference_by_hand():
    # one row, logits [0, log 3]: softmax [1/4, 3/4]; label 1 -> loss -log(3/4)
    loss, logp = reference.forward([[1.0]], [[0.0, np.log(3.0)]], [0.0, 0.0], [1])
    np.testing.assert_allclose(logp, [[np.log(0.25), np.log(0.75)]], rtol=1e-15)
    assert loss == pytest.approx(-np.log(0.75), rel=1e-15)


def test_loss_is_the_mean_over_rows_by_hand():
    # rows: logits [0, 0] (label 0: -log 1/2) and [0, log 4] (label 0: -log 1/5)
    X = [[1.0, 0.0], [0.0, 1.0]]
    W = [[0.0, 0.0], [0.0, np.log(4.0)]]
    loss, _ = reference.forward(X, W, [0.0, 0.0], [0, 0])
    assert loss == pytest.approx((np.log(2.0) + np.log(5.0)) / 2, rel=1e-15)


def test_bias_is_added_per_class():
    # X = 0: the logits are the bias; b = [log 1, log 2, log 7] gives softmax [.1, .2, .7]
    loss, logp = reference.forward(np.zeros((1, 3)), np.ones((3, 3)), np.log([1.0, 2.0, 7.0]), [2])
    np.testing.assert_allclose(np.exp(logp), [[0.1, 0.2, 0.7]], rtol=1e-14)
    assert loss == pytest.approx(-np.log(0.7), rel=1e-14)


def test_huge_logits_stay_finite():
    # logits [1e4, 0]: the naive exp overflows; the loss of label 1 is 1e4 + log(1 + e^-1e4)
    loss1, logp = reference.forward([[1.0]], [[1e4, 0.0]], [0.0, 0.0], [1])
    loss0, _ = reference.forward([[1.0]], [[1e4, 0.0]], [0.0, 0.0], [0])
    assert np.isfinite(logp).all()
    assert loss1 == 1e4 and loss0 == 0.0


def test_matches_the_naive_formula_when_it_is_safe():
    rng = np.random.default_rng(0)
    X, W, b = rng.standard_normal((6, 5)), rng.standard_normal((5, 9)), rng.standard_normal(9)
    y = rng.integers(0, 9, 6)
    Z = X @ W + b
    A = np.exp(Z) / np.exp(Z).sum(axis=1, keepdims=True)  # no max subtracted: fine at |z| < 10
    loss, logp = reference.forward(X, W, b, y)
    np.testing.assert_allclose(logp, np.log(A), rtol=1e-12)
    assert loss == pytest.approx(-np.mean(np.log(A[np.arange(6), y])), rel=1e-12)


def test_shift_of_every_logit_changes_nothing():
    rng = np.random.default_rng(1)
    X, W, b = rng.standard_normal((4, 3)), rng.standard_normal((3, 7)), rng.standard_normal(7)
    y = rng.integers(0, 7, 4)
    l1, p1 = reference.forward(X, W, b, y)
    l2, p2 = reference.forward(X, W, b + 1000.0, y)
    np.testing.assert_allclose(p1, p2, atol=1e-10)
    assert l1 == pytest.approx(l2, rel=1e-12)


@pytest.mark.parametrize("c", [1, 127, 128, 129, 1000])
def test_tile_statistics_merge_to_the_logsumexp(c):
    # what v3 does: per-128-column (max, sum), merged per row == logsumexp of the row
    z = np.random.default_rng(c).standard_normal((5, c)) * 300
    mx, s = reference.tile_stats(z, 128)
    assert mx.shape == (5, -(-c // 128))
    np.testing.assert_allclose(reference.merge_stats(mx, s), reference.logsumexp(z), rtol=1e-14)
    direct = z.max(axis=1) + np.log(np.exp(z - z.max(axis=1, keepdims=True)).sum(axis=1))
    np.testing.assert_allclose(reference.logsumexp(z), direct, rtol=1e-15)


def test_forward_all_returns_the_row_logsumexp():
    rng = np.random.default_rng(7)
    X, W, b = rng.standard_normal((5, 4)), rng.standard_normal((4, 9)) * 30, rng.standard_normal(9)
    y = rng.integers(0, 9, 5)
    loss, lse, logp = reference.forward_all(X, W, b, y)
    Z = X @ W + b
    np.testing.assert_allclose(lse, reference.logsumexp(Z), rtol=1e-14)
    np.testing.assert_allclose(logp, Z - lse[:, None], rtol=1e-13, atol=1e-12)
    # the loss needs only lse and the label's logit: what v4 keeps of the logits
    assert loss == pytest.approx(np.mean(lse - Z[np.arange(5), y]), rel=1e-13)
    assert reference.cross_entropy(X, W, b, y)[0] == loss
    assert reference.forward(X, W, b, y)[0] == loss


def test_case_shapes_and_counts():
    from days.day15_fa2_forward import driver

    case = driver.make_case((7, 33, 10), np.random.default_rng(2))
    assert case.inputs["X"].shape == (7, 33) and case.inputs["W"].shape == (33, 10)
    assert case.inputs["y"].dtype == np.int32 and case.inputs["y"].max() < 10
    assert list(case.outputs) == ["loss", "lse"]  # the loss first: the baseline is compared on it
    assert case.flops == 2 * 7 * 33 * 10 + 5 * 7 * 10
    assert case.tolerance()["loss"] == 1e-5
    exp = case.expected()
    loss, lse = reference.cross_entropy(case.inputs["X"], case.inputs["W"], case.inputs["b"],
                                        case.inputs["y"])
    assert exp["loss"][0] == loss
    np.testing.assert_array_equal(exp["lse"], lse)
    with_logp = driver.make_case((7, 33, 10), np.random.default_rng(2), with_logp=True)
    assert list(with_logp.outputs) == ["loss", "lse", "logp"]
    assert with_logp.expected()["logp"].shape == (7, 10)


def test_size_limits():
    from common import harness as H
    from days.day15_fa2_forward import driver

    assert H.parse_size(driver, "4096x256x50257") == (4096, 256, 50257)
    with pytest.raises(H.SizeError, match="classes"):
        H.parse_size(driver, f"2x2x{65536 * 128}")
    with pytest.raises(H.SizeError):
        H.parse_size(driver, "4096x50257")


def test_declarations():
    from days.day15_fa2_forward import driver

    assert driver.BEST in driver.VERSIONS
    assert driver.AWKWARD in driver.BENCH_SIZES and all(v % 128 and v % 8 for v in driver.AWKWARD)
    bar_sizes = [s for clause in driver.BAR for s in clause.get("sizes", [])]
    assert (4096, 256, 50257) in bar_sizes
    ok, fig = driver._loss_bar({"checks": [{"ok": True}], "extra": {"stability_worst_loss_rel_err": 3e-8}})
    assert ok and "3.0e-08" in fig
    assert not driver._loss_bar({"checks": [{"ok": False}],
                                 "extra": {"stability_worst_loss_rel_err": 3e-8}})[0]
    assert not driver._loss_bar({"checks": [{"ok": True}], "extra": {}})[0]


# --- bad input to the public functions (no GPU needed: refused before any launch) -------------

def _good(m=3, d=4, c=5):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((m, d)).astype(np.float32), rng.standard_normal((d, c)).astype(np.float32),
            np.zeros(c, np.float32), np.arange(m) % c)


FUNCTIONS = ["cross_entropy", "forward"]


@pytest.mark.parametrize("fn", FUNCTIONS)
@pytest.mark.parametrize("which,bad,exc,word", [
    (0, np.ones((3, 4), np.complex64), TypeError, "complex"),
    (1, "weights", TypeError, "string"),
    (2, [True] * 5, TypeError, "booleans"),
    (0, np.ones(12, np.float32), ValueError, "2-D"),
    (1, np.ones((4, 5, 1), np.float32), ValueError, "2-D"),
    (1, np.ones((3, 5), np.float32), ValueError, "features"),   # W rows != X columns
    (2, np.zeros(4, np.float32), ValueError, "shape"),           # one bias short
    (2, np.zeros((1, 5), np.float32), ValueError, "shape"),
    (3, [0, 1], ValueError, "shape"),                            # a label missing
    (3, [0.0, 1.5, 2.0], ValueError, "whole"),                   # fractional label
    (3, [0, 5, 1], ValueError, "outside"),                       # label = c
    (3, [0, -1, 1], ValueError, "outside"),
    (3, np.array([0, 1, 2], np.complex64), TypeError, "integers"),
])
def test_bad_input_is_refused(fn, which, bad, exc, word):
    from days.day15_fa2_forward import driver

    args = list(_good())
    args[which] = bad
    with pytest.raises(exc, match=word):
        getattr(driver, fn)(*args)


@pytest.mark.parametrize("fn", FUNCTIONS)
def test_unknown_version_is_refused(fn):
    from days.day15_fa2_forward import driver

    with pytest.raises(ValueError, match="v1, v2, v3, v4"):
        getattr(driver, fn)(*_good(), version="v9")
    with pytest.raises(TypeError, match="version"):
        getattr(driver, fn)(*_good(), version=4)


def test_launch_refuses_an_unknown_version():
    from days.day15_fa2_forward import driver

    with pytest.raises(ValueError, match="unknown version"):
        driver.launch("v5", None)


def test_empty_batch_without_a_launch():
    from days.day15_fa2_forward import driver

    X, W, b, _ = _good()
    loss, lse = driver.cross_entropy(X[:0], W, b, np.zeros(0, np.int64))
    assert loss == 0.0 and lse.shape == (0,) and lse.dtype == np.float32
    loss, logp = driver.forward(X[:0], W, b, [])
    assert loss == 0.0 and logp.shape == (0, 5) and logp.dtype == np.float32
    # no classes at all: fine for an empty batch, and no label can be valid otherwise
    assert driver.cross_entropy(X[:0], W[:, :0], b[:0], [])[1].shape == (0,)
    with pytest.raises(ValueError, match="no columns"):
        driver.cross_entropy(X, W[:, :0], b[:0], [0, 0, 0])


# --- GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(7, 33, 10), (33, 64, 1000), (3, 16, 50257)])
def test_logits_of_magnitude_1e3_on_gpu(gpu, size):
    from common import harness as H
    from common.check import compare_all
    from days.day15_fa2_forward import driver

    case = driver.make_case(size, np.random.default_rng(3), scale=1e3, with_logp=True)
    exp = case.expected()
    assert np.abs(case.inputs["X"] @ case.inputs["W"]).max() > 1e3  # the logits really are that big
    for v in driver.VERSIONS:
        r = compare_all(H.run(driver.launch, v, case), exp, case.tolerance())
        assert r.ok, f"{v} at {size} with |logits| ~ 1e3: {r.message}"


@pytest.mark.parametrize("size", [(1, 1, 1), (129, 9, 131), (130, 64, 257), (300, 20, 20001),
                                  (257, 5, 33001), (3, 8, 70001)])
def test_logp_of_every_version_on_gpu(gpu, size):
    # the harness checks loss and lse at every CHECK_SIZE; the log-probabilities (v4: its
    # logits-storing GEMM + in-place subtraction) are checked here
    from common import harness as H
    from common.check import compare_all
    from days.day15_fa2_forward import driver

    case = driver.make_case(size, np.random.default_rng(11), with_logp=True)
    exp = case.expected()
    for v in driver.VERSIONS:
        r = compare_all(H.run(driver.launch, v, case), exp, case.tolerance())
        assert r.ok, f"{v} at {size}: {r.message}"


def test_public_functions_on_gpu(gpu):
    from days.day15_fa2_forward import driver

    rng = np.random.default_rng(4)
    X = rng.standard_normal((1, 20)).astype(np.float32)
    W = rng.standard_normal((20, 50257)).astype(np.float32) * 0.3
    b = np.zeros(50257, np.float32)
    y = np.array([123], np.int32)
    ref_loss, ref_lse, ref_logp = reference.forward_all(X, W, b, y)
    for v in driver.VERSIONS:
        loss, logp = driver.forward(X, W, b, y, version=v)
        assert loss == pytest.approx(ref_loss, rel=1e-5), v
        np.testing.assert_allclose(logp, ref_logp, rtol=0, atol=1e-4)
        assert np.exp(logp.astype(np.float64)).sum() == pytest.approx(1.0, rel=1e-4)
        loss2, lse = driver.cross_entropy(X, W, b, y.astype(np.int64), version=v)
        assert loss2 == pytest.approx(ref_loss, rel=1e-5), v
        np.testing.assert_allclose(lse, ref_lse, rtol=1e-6)
    assert driver.cross_entropy(X, W, b, y)[0] == pytest.approx(ref_loss, rel=1e-5)  # BEST


def test_no_features_gives_the_softmax_of_the_bias_on_gpu(gpu):
    from days.day15_fa2_forward import driver

    b = np.log(np.array([1.0, 2.0, 7.0], np.float32))  # softmax [.1, .2, .7]
    loss, logp = driver.forward(np.zeros((2, 0), np.float32), np.zeros((0, 3), np.float32), b, [2, 0])
    np.testing.assert_allclose(np.exp(logp), [[0.1, 0.2, 0.7]] * 2, rtol=1e-6)
    assert loss == pytest.approx((-np.log(0.7) - np.log(0.1)) / 2, rel=1e-6)


@pytest.mark.parametrize("version", ["v3", "v4"])
def test_loss_is_deterministic_on_gpu(gpu, version):
    from common import harness as H
    from days.day15_fa2_forward import driver

    case = driver.make_case((3000, 64, 1000), np.random.default_rng(5))
    losses = {H.run(driver.launch, version, case)["loss"].tobytes() for _ in range(3)}
    assert len(losses) == 1, "the fixed-order reduction gives the same bits every run"
