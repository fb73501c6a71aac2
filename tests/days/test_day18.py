import numpy as np
import pytest

from days.day18_fused_backward_prep import driver, reference


def test_reference_by_hand():
    # B=1, T=2, NH=2, HS=1: qkv[0, t, s, h, 0] = 10*t + 3*s + h ... written out
    qkv = np.zeros((1, 2, 3, 2, 1))
    for t in range(2):
        for s in range(3):
            for h in range(2):
                qkv[0, t, s, h, 0] = 100 * s + 10 * h + t
    q, k, v = reference.permute(qkv, 0.5)
    # out[0, h, t, 0]: heads on axis 1, tokens on axis 2
    np.testing.assert_array_equal(q[0, :, :, 0], 0.5 * np.array([[0, 1], [10, 11]]))
    np.testing.assert_array_equal(k[0, :, :, 0], [[100, 101], [110, 111]])
    np.testing.assert_array_equal(v[0, :, :, 0], [[200, 201], [210, 211]])


@pytest.mark.parametrize("shape", [(1, 1, 3, 1, 1), (2, 5, 3, 3, 4), (3, 2, 3, 4, 5)])
def test_reference_equals_the_kernel_index_formula(shape):
    x = np.random.default_rng(sum(shape)).standard_normal(shape)
    x0 = x.copy()
    for a, b in zip(reference.permute(x, 0.25), reference.permute_loops(x, 0.25)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(x, x0)  # the input is not touched


def test_backward_is_the_adjoint_of_forward():
    # <forward(x), y> == <x, backward(y)> for every x, y: backward is forward's transpose
    rng = np.random.default_rng(18)
    b, t, nh, hs = 2, 7, 3, 5
    x = rng.standard_normal((b, t, 3, nh, hs))
    ys = [rng.standard_normal((b, nh, t, hs)) for _ in range(3)]
    s = 0.37
    lhs = sum(float((f * y).sum()) for f, y in zip(reference.permute(x, s), ys))
    rhs = float((x * reference.unpermute(*ys, s)).sum())
    assert abs(lhs - rhs) <= 1e-12 * abs(lhs) + 1e-12


def test_round_trips():
    x = np.random.default_rng(3).standard_normal((2, 4, 3, 3, 6))
    np.testing.assert_array_equal(reference.unpermute(*reference.permute(x, 1.0), 1.0), x)
    back = reference.unpermute(*reference.permute(x, 0.5), 2.0)  # the true inverse: 1/scale
    np.testing.assert_allclose(back, x, rtol=1e-15)
    twice = reference.unpermute(*reference.permute(x, 0.5), 0.5)  # the gradient: scale twice
    np.testing.assert_allclose(twice[:, :, 0], 0.25 * x[:, :, 0], rtol=1e-15)
    np.testing.assert_array_equal(twice[:, :, 1:], x[:, :, 1:])


def test_scale_vector_width_and_case():
    from days.day18_fused_backward_prep import driver

    assert reference.default_scale(64) == np.float32(0.125)
    assert reference.default_scale(36) == np.float32(1 / 6)
    assert [driver.vec_width(h) for h in (64, 36, 6, 2, 5, 1)] == [4, 4, 2, 2, 1, 1]
    case = driver.make_case((2, 3, 4, 5), np.random.default_rng(0))
    assert case.inputs["qkv"].shape == (2, 3, 3, 4, 5)
    assert case.outputs["q"][0] == (2, 4, 3, 5)
    assert case.bytes == 2 * 4 * (2 * 3 * 3 * 4 * 5)
    assert case.params["scale"] == reference.default_scale(5)
    b, t, nh, hs = driver.SIZES["default"]
    assert case.bytes > 0 and 2 * 4 * 3 * b * t * nh * hs >= 100e6  # the default moves >= 100 MB


def test_sizes_are_validated():
    from common import harness as H
    from days.day18_fused_backward_prep import driver

    assert H.parse_size(driver, "8x1024x12x64") == (8, 1024, 12, 64)
    with pytest.raises(H.SizeError, match="2\\^31"):
        H.parse_size(driver, "64x65536x16x64")
    with pytest.raises(H.SizeError, match="dimension"):
        H.parse_size(driver, "8x1024x768")


# --- the public functions: arguments are checked before anything reaches the GPU -----------

QKV = np.zeros((2, 3, 3, 2, 4), np.float32)
G = np.zeros((2, 2, 3, 4), np.float32)


@pytest.mark.parametrize("qkv, exc, word", [
    (QKV.astype(np.complex64), TypeError, "complex"),
    (QKV.astype(str), TypeError, "dtype"),
    (QKV.astype(bool), TypeError, "booleans"),
    (None, TypeError, "None"),
    (np.zeros((2, 3, 2, 4), np.float32), ValueError, "B, T, 3, NH, HS"),   # 4-D
    (np.zeros((2, 3, 4, 2, 4), np.float32), ValueError, "3"),               # 4 on the qkv axis
    (np.zeros((2, 3, 1, 3, 2, 4), np.float32), ValueError, "shape"),        # 6-D
])
def test_permute_refuses_bad_qkv(qkv, exc, word):
    with pytest.raises(exc, match=word):
        driver.permute(qkv)


@pytest.mark.parametrize("scale, exc, word", [
    (float("nan"), ValueError, "finite"), (float("inf"), ValueError, "finite"),
    (1e39, ValueError, "<="), (1 + 1j, TypeError, "real"), ("0.5", TypeError, "real"),
    (np.array([0.5, 0.5]), TypeError, "real"),
])
def test_a_scale_must_be_a_finite_float32(scale, exc, word):
    with pytest.raises(exc, match=word):
        driver.permute(QKV, scale=scale)
    with pytest.raises(exc, match=word):
        driver.unpermute(G, G, G, scale=scale)
    with pytest.raises(exc, match=word):  # checked even when there is nothing to compute
        driver.permute(np.zeros((0, 3, 3, 2, 4)), scale=scale)


def test_unpermute_refuses_gradients_that_do_not_fit():
    with pytest.raises(ValueError, match="one shape"):
        driver.unpermute(G, G, G[:, :, :2])
    with pytest.raises(ValueError, match="dk must be 4-D"):
        driver.unpermute(G, G[0], G)
    with pytest.raises(TypeError, match="dv must be real"):
        driver.unpermute(G, G, G.astype(np.complex64))
    with pytest.raises(ValueError, match="kind must be one of 'scalar', 'vector'"):
        driver.unpermute(G, G, G, kind="vec4")


@pytest.mark.parametrize("version, exc", [("v4", ValueError), ("v0", ValueError), (3, TypeError)])
def test_unknown_versions_are_refused(version, exc):
    with pytest.raises(exc, match="version"):
        driver.permute(QKV, version=version)
    with pytest.raises(exc, match="version"):  # launch() never runs another version for it
        driver.launch(version, None)
    with pytest.raises(ValueError, match="kind"):
        driver.launch_unpermute("fast", 0, 0, 0, 0, (1, 1, 1, 4), 1.0)


@pytest.mark.parametrize("b, t, nh, hs", [(0, 3, 2, 4), (2, 0, 2, 4), (2, 3, 0, 4), (2, 3, 2, 0)])
def test_empty_inputs_give_empty_outputs_without_a_launch(b, t, nh, hs):
    q, k, v = driver.permute(np.zeros((b, t, 3, nh, hs), np.float32))
    for a in (q, k, v):
        assert a.shape == (b, nh, t, hs) and a.dtype == np.float32
    dqkv = driver.unpermute(*[np.zeros((b, nh, t, hs))] * 3, scale=0.5)
    assert dqkv.shape == (b, t, 3, nh, hs) and dqkv.dtype == np.float32


def test_size_limit_of_32_bit_indices():
    driver.validate_size((1, 1, 1, 715_827_882))           # 3 x that = 2^31 - 2: fits
    with pytest.raises(ValueError, match="2\\^31 - 1"):
        driver.validate_size((1, 1, 1, 715_827_883))       # 3 x that = 2^31 + 1
    with pytest.raises(ValueError, match="32 bits"):
        driver.validate_size((3, 1001, 32, 2 ** 16))


def test_v3_on_odd_head_sizes_is_v2():
    assert driver.same_as("v3", (2, 33, 3, 5)) == "v2"     # permute_v3_vec1 is v2's code
    assert driver.same_as("v3", (3, 17, 4, 6)) is None     # float2
    assert driver.same_as("v3", (3, 1001, 32, 80)) is None  # float4
    assert driver.same_as("v2", (2, 33, 3, 5)) is None


def test_bench_sizes_bar_and_default_version():
    import inspect

    assert inspect.signature(driver.permute).parameters["version"].default == driver.BEST == "v3"
    assert inspect.signature(driver.unpermute).parameters["kind"].default == driver.INVERSE_BEST
    awkward = [s for s in driver.BENCH_SIZES if s[0] % 2 and s[1] % 2 and s[3] & (s[3] - 1)]
    assert awkward, "an awkward bench shape: odd B and T, a head size that is not a power of 2"
    case = driver.make_case((2, 3, 4, 5), np.random.default_rng(0))
    assert case.read_bytes == case.bytes // 2   # qkv read once, q, k, v written once
    inv = driver.make_inverse_case((2, 3, 4, 5), np.random.default_rng(0))
    assert inv.read_bytes == inv.bytes // 2 == 3 * 4 * 120
    pct, inverse = driver.BAR
    assert pct == {"sizes": driver.BENCH_SIZES, "pct": 80} and "check" in inverse


def _inverse_rec(pcts):
    rows = [{"name": "unpermute vector", "size": list(s), "ok": True, "pct_of_ceiling": p}
            for s, p in pcts.items()]
    return {"extra": {"inverse": rows}}


def test_the_inverse_bar_is_judged_at_every_bench_size():
    check = driver.BAR[1]["check"]
    sizes = driver.BENCH_SIZES
    ok, fig = check(_inverse_rec({s: 95.0 for s in sizes}))
    assert ok and "95.0%" in fig
    ok, fig = check(_inverse_rec({**{s: 95.0 for s in sizes}, sizes[-1]: 79.0}))
    assert not ok and "79.0%" in fig and driver.H.size_str(sizes[-1]) in fig
    ok, fig = check(_inverse_rec({sizes[0]: 97.0}))           # the other sizes never ran
    assert not ok and "not measured" in fig
    bad = _inverse_rec({s: 99.0 for s in sizes})
    bad["extra"]["inverse"][0]["ok"] = False                 # a wrong answer does not count
    assert check(bad)[0] is False
    # the 2026-11-22 results: one size, rows keyed by kind
    old = {"extra": {"inverse": {"size": [8, 1024, 12, 64], "rows": {
        "scalar": {"pct_of_ceiling": 93.0, "ok": True}, "vector": {"pct_of_ceiling": 97.2, "ok": True}}}}}
    ok, fig = check(old)
    assert not ok and "16x1024x16x64" in fig


@pytest.mark.parametrize("size", [(1, 1, 1, 1), (2, 33, 3, 5), (3, 17, 4, 6), (2, 31, 12, 64),
                                  (5, 7, 1, 1000)])
def test_inverse_on_gpu(gpu, size):
    from common.check import compare
    from days.day18_fused_backward_prep import driver

    b, t, nh, hs = size
    rng = np.random.default_rng(b * t * nh * hs)
    g = [rng.standard_normal((b, nh, t, hs)).astype(np.float32) for _ in range(3)]
    want = reference.unpermute(*g, reference.default_scale(hs))
    for kind in ("scalar", "vector"):
        r = compare(driver.unpermute(*g, kind=kind), want)
        assert r.ok, f"{kind} at {size}: {r.message}"
    # forward then backward with the true inverse scale gives qkv back
    qkv = rng.standard_normal((b, t, 3, nh, hs)).astype(np.float32)
    q, k, v = driver.permute(qkv, scale=2.0)
    np.testing.assert_array_equal(driver.unpermute(q, k, v, scale=0.5), qkv)  # x*2*0.5 is exact


def test_every_version_with_a_custom_scale_on_gpu(gpu):
    from days.day18_fused_backward_prep import driver

    qkv = np.random.default_rng(5).standard_normal((2, 9, 3, 4, 12)).astype(np.float32)
    want = reference.permute(qkv, np.float32(0.3))
    for v in driver.VERSIONS:
        for got, w in zip(driver.permute(qkv, scale=0.3, version=v), want):
            np.testing.assert_allclose(got, w, rtol=1e-6, err_msg=v)


@pytest.mark.parametrize("shape", [(1, 1, 3, 1, 1), (3, 101, 3, 4, 80), (1, 5, 3, 2, 66)])
def test_smallest_and_awkward_shapes_every_version_on_gpu(gpu, shape):
    rng = np.random.default_rng(shape[1])
    qkv = rng.standard_normal(shape).astype(np.float32)
    want = reference.permute(qkv, np.float32(-1.5))
    for v in driver.VERSIONS:
        for got, w in zip(driver.permute(qkv, scale=-1.5, version=v), want):
            np.testing.assert_allclose(got, w, rtol=1e-6, err_msg=v)
    q, k, v = driver.permute(qkv.astype(np.float64))  # the defaults: BEST, 1/sqrt(HS)
    np.testing.assert_allclose(q, reference.permute(qkv, reference.default_scale(shape[4]))[0],
                               rtol=1e-6)
    for kind in driver.INVERSE_KINDS:
        np.testing.assert_array_equal(driver.unpermute(q, k, v, scale=1.0, kind=kind)[:, :, 1:],
                                      qkv[:, :, 1:])
