import numpy as np
import pytest

from days.day40_moe_kernel import reference as R


def _weights(rng, e, c, scale=1.0):
    h = 4 * c
    return (rng.standard_normal((e, c, h)) * scale / np.sqrt(c), 0.1 * rng.standard_normal((e, h)),
            rng.standard_normal((e, h, c)) * scale / np.sqrt(h), 0.1 * rng.standard_normal((e, c)))


# --- the reference against independent values -------------------------------------------------

def test_gelu_by_hand():
    np.testing.assert_allclose(R.gelu([0.0, 1.0, -1.0]), [0.0, 0.8411919906, -0.1588080094], atol=1e-9)


def test_route_by_hand():
    # logits (with w_gate = I): token 0: [1, 3, 2] -> experts 1, 2; weights softmax(3, 2)
    x = np.array([[1.0, 3.0, 2.0], [5.0, 5.0, 1.0], [0.0, 2.0, 2.0], [2.0, 2.0, 2.0]])
    experts, weights, counts, _ = R.route(x, np.eye(3))
    np.testing.assert_array_equal(experts, [[1, 2], [0, 1], [1, 2], [0, 1]])   # ties: lower first
    np.testing.assert_allclose(weights[0], [np.e / (np.e + 1), 1 / (np.e + 1)])
    np.testing.assert_allclose(weights[1:], 0.5)                              # equal logits
    np.testing.assert_array_equal(counts, [2, 4, 2])
    assert counts.sum() == 2 * len(x)


def test_moe_against_a_token_by_token_loop():
    # a second formulation: each token on its own, its two experts by an explicit sort
    rng = np.random.default_rng(1)
    t, c, e = 6, 5, 4
    x = rng.standard_normal((t, c))
    wg = rng.standard_normal((c, e))
    w1, b1, w2, b2 = _weights(rng, e, c)
    y, counts = R.moe(x, wg, w1, b1, w2, b2)
    want = np.zeros_like(x)
    seen = np.zeros(e, int)
    for i in range(t):
        lg = [sum(x[i, j] * wg[j, k] for j in range(c)) for k in range(e)]
        order = sorted(range(e), key=lambda k: (-lg[k], k))[:2]
        z = [np.exp(lg[k] - lg[order[0]]) for k in order]
        for k, zk in zip(order, z):
            hid = R.gelu(x[i] @ w1[k] + b1[k])
            want[i] += zk / sum(z) * (hid @ w2[k] + b2[k])
            seen[k] += 1
    np.testing.assert_allclose(y, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(counts, seen)


def test_moe_equals_the_dense_formulation():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((40, 12))
    wg = rng.standard_normal((12, 6))
    w = _weights(rng, 6, 12)
    np.testing.assert_allclose(R.moe(x, wg, *w)[0], R.moe_dense(x, wg, *w), rtol=1e-12, atol=1e-12)


def test_moe_closed_forms():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((7, 4))
    wg = rng.standard_normal((4, 3))
    w1, b1, w2, b2 = _weights(rng, 3, 4)
    # every expert identical: the weights sum to 1, so y is that expert's output
    same = [np.repeat(v[:1], 3, axis=0) for v in (w1, b1, w2, b2)]
    one = R.gelu(x @ w1[0] + b1[0]) @ w2[0] + b2[0]
    np.testing.assert_allclose(R.moe(x, wg, *same)[0], one, rtol=1e-12, atol=1e-12)
    # w2 = 0: y = w0 b2[e0] + w1 b2[e1]
    experts, weights, _, _ = R.route(x, wg)
    want = (weights[:, :, None] * b2[experts]).sum(axis=1)
    np.testing.assert_allclose(R.moe(x, wg, w1, b1, np.zeros_like(w2), b2)[0], want, atol=1e-12)


def test_second_gap_and_flops():
    np.testing.assert_allclose(R.second_gap([[3.0, 1.0, 2.5, 0.0]]), [1.5])
    assert np.isinf(R.second_gap(np.zeros((2, 2)))).all()
    # 8192 tokens, C 768, 8 experts: router 2*T*C*E + 2T assignments x 2 GEMM rows of 2*C*4C
    assert R.flops(8192, 768, 8) == 2 * 8192 * 768 * 8 + 2 * 8192 * 2 * 2 * 768 * 3072


# --- the driver's cases ---------------------------------------------------------------------------

def test_router_inputs_have_no_near_ties_and_the_skew_is_real():
    from days.day40_moe_kernel import driver as D

    x, wg = D.router_inputs((2000, 64, 8, D.BALANCED), np.random.default_rng(4))
    lg = x.astype(np.float64) @ wg.astype(np.float64)
    assert R.second_gap(lg).min() >= D.GAP * np.sqrt(np.mean(lg ** 2))
    counts = R.route(x, wg)[2]
    assert counts.min() > 0.6 * counts.mean()                 # random router: roughly balanced
    x, wg = D.router_inputs((2000, 64, 8, D.SKEWED), np.random.default_rng(4))
    counts = R.route(x, wg)[2]
    assert counts[-1] == 0 and counts[0] > 2 * counts.mean() and counts.sum() == 4000


def test_sizes():
    from common import harness as H
    from days.day40_moe_kernel import driver as D

    assert D.BAR_SIZE == (8192, 768, 8, 1) and D.BAR_SIZE in D.BENCH_SIZES
    assert any(t == 1 for t, *_ in D.CHECK_SIZES) and any(c % 4 for _, c, _, _ in D.CHECK_SIZES)
    assert any(r == D.SKEWED for *_, r in D.CHECK_SIZES)
    with pytest.raises(H.SizeError, match="between 2 and 16"):
        H.parse_size(D, "8x8x17x1")
    with pytest.raises(H.SizeError, match="E >= 3"):
        H.parse_size(D, "8x8x2x2")
    with pytest.raises(H.SizeError, match="router"):
        H.parse_size(D, "8x8x8x3")
    with pytest.raises(H.SizeError, match="gridDim.y"):
        H.parse_size(D, "5000000x4x8x1")
    assert H.parse_size(D, "5000x768x8x1") == (5000, 768, 8, 1)


def test_case_outputs_and_load():
    from days.day40_moe_kernel import driver as D

    case = D.make_case((33, 64, 8, D.SKEWED), np.random.default_rng(5))
    exp = case.expected()
    assert list(case.outputs) == ["y", "counts"]              # the torch loop is checked on y
    assert exp["counts"][-1] == 0 and exp["counts"].sum() == 66
    assert case.flops == R.flops(33, 64, 8)


# --- the public functions: bad input refused before anything reaches the GPU ------------------

def _args(t=3, c=4, e=3):
    rng = np.random.default_rng(0)
    return [rng.standard_normal((t, c)), rng.standard_normal((c, e))] + list(_weights(rng, e, c))


def _raises(exc, word, fn):
    with pytest.raises(exc) as ei:
        fn()
    assert word in str(ei.value), str(ei.value)


@pytest.mark.parametrize("i,bad,exc,word", [
    (0, np.ones(4), ValueError, "2-D"),
    (0, np.ones((3, 4), np.complex64), TypeError, "complex"),
    (0, "x", TypeError, "string"),
    (1, np.ones((5, 3)), ValueError, "C = 4"),
    (1, np.ones((4, 1)), ValueError, "between 2 and 16"),
    (1, np.ones((4, 17)), ValueError, "between 2 and 16"),
    (2, np.ones((3, 16, 4)), ValueError, "w1"),            # [E, 4C, C]: w2's shape, not w1's
    (3, np.ones((3, 4)), ValueError, "b1"),
    (4, np.ones((3, 4, 16)), ValueError, "w2"),
    (5, np.ones(4), ValueError, "b2"),
    (5, None, TypeError, "None"),
    (2, np.ones((3, 4, 16), bool), TypeError, "booleans"),
])
def test_moe_refuses_bad_arrays(i, bad, exc, word):
    from days.day40_moe_kernel import driver as D

    a = _args()
    a[i] = bad
    _raises(exc, word, lambda: D.moe(*a))


def test_moe_refuses_bad_values_and_versions():
    from days.day40_moe_kernel import driver as D

    a = _args()
    a[0][1, 2] = np.nan
    _raises(ValueError, "NaN", lambda: D.moe(*a))
    a = _args()
    a[1][0, 0] = np.inf
    _raises(ValueError, "w_gate", lambda: D.route(a[0], a[1]))
    _raises(ValueError, "unknown version", lambda: D.moe(*_args(), version="v9"))
    _raises(TypeError, "version", lambda: D.moe(*_args(), version=3))
    _raises(ValueError, "unknown version", lambda: D.launch("v0", None))
    _raises(ValueError, "C = 0", lambda: D.route(np.ones((2, 0)), np.ones((0, 3))))


def test_no_tokens_launch_nothing():
    from days.day40_moe_kernel import driver as D

    a = _args(t=0)
    y = D.moe(*a)
    assert y.shape == (0, 4) and y.dtype == np.float32
    ex, w, counts = D.route(a[0], a[1])
    assert ex.shape == (0, 2) and w.shape == (0, 2) and counts.tolist() == [0, 0, 0]


# --- GPU ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_output_is_deterministic_on_gpu(gpu, version):
    # the slots inside an expert come in atomic order, which changes from run to run; y must
    # not: run the same case several times and compare bit for bit
    from common import harness as H
    from days.day40_moe_kernel import driver as D

    case = D.make_case((1000, 64, 8, D.BALANCED), np.random.default_rng(6))
    d = H.DeviceCase(case)
    outs = []
    for _ in range(4):
        d.poison_outputs()
        D.launch(version, d)
        outs.append(d.outputs()["y"])
    for o in outs[1:]:
        assert np.array_equal(o.view(np.uint32), outs[0].view(np.uint32))


def test_route_matches_numpy_on_gpu(gpu):
    from days.day40_moe_kernel import driver as D

    x, wg = D.router_inputs((3000, 96, 8, D.SKEWED), np.random.default_rng(7))
    ex, w, counts = D.route(x, wg)
    rex, rw, rcounts, _ = R.route(x, wg)
    np.testing.assert_array_equal(ex, rex)
    np.testing.assert_allclose(w, rw, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(counts, rcounts)


def test_every_version_agrees_with_the_public_function_on_gpu(gpu):
    from common.check import compare
    from days.day40_moe_kernel import driver as D

    a = _args(t=150, c=36, e=5)
    a[0], a[1] = D.router_inputs((150, 36, 5, D.BALANCED), np.random.default_rng(8))  # no near-ties
    ref = R.moe(*a)[0]
    for v in D.VERSIONS:
        assert compare(D.moe(*a, version=v), ref).ok, v
