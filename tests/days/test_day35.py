import numpy as np
import pytest

from days.day35_fused_layernorm_backward import reference


# --- the reference against independent values -------------------------------------------------

def test_backward_by_hand():
    # row 0: x = [0, 1, 2] with mean 1, rstd 1 (as given; the backward does not recompute them):
    #   xhat = [-1, 0, 1], g = dy * gamma = [1, 2, 3], mean(g) = 2, mean(g * xhat) = 2/3,
    #   dx = [1 - 2 + 2/3, 2 - 2 - 0, 3 - 2 - 2/3] = [-1/3, 0, 1/3]
    # row 1: x = [2, 2, 2], mean 2, rstd 0.5: xhat = 0, g = [1, -2, 6], mean(g) = 5/3,
    #   dx = 0.5 * (g - 5/3) = [-1/3, -11/6, 13/6]
    x = [[0.0, 1.0, 2.0], [2.0, 2.0, 2.0]]
    dy = [[1.0, 1.0, 1.0], [1.0, -1.0, 2.0]]
    dx, dg, db = reference.layernorm_backward(x, dy, [1.0, 2.0, 3.0], [1.0, 2.0], [1.0, 0.5])
    np.testing.assert_allclose(dx, [[-1 / 3, 0.0, 1 / 3], [-1 / 3, -11 / 6, 13 / 6]], atol=1e-15)
    np.testing.assert_allclose(dg, [-1.0, 0.0, 1.0], atol=1e-15)   # sum_r dy * xhat
    np.testing.assert_allclose(db, [2.0, 0.0, 3.0], atol=1e-15)    # sum_r dy


def test_two_columns_have_zero_gradient():
    # C = 2, eps = 0: the normalized row is (-1, 1) or (1, -1) whatever x is, so dx = 0
    x = np.array([[1.0, 3.0], [5.0, -2.0]])
    mean = x.mean(axis=1)
    rstd = 1 / np.sqrt(((x - mean[:, None]) ** 2).mean(axis=1))
    dx, _, _ = reference.layernorm_backward(x, [[0.3, -1.7], [2.0, 0.5]], [1.5, 0.7], mean, rstd)
    np.testing.assert_allclose(dx, 0.0, atol=1e-14)


def _exact_stats(x, eps=reference.EPS):
    mean = x.mean(axis=1)
    return mean, 1 / np.sqrt(((x - mean[:, None]) ** 2).mean(axis=1) + eps)


def test_backward_is_the_gradient_of_the_forward():
    # a second formulation: central differences of L = sum(dy * layernorm(x)) in float64
    rng = np.random.default_rng(35)
    n, c, h = 3, 7, 1e-6
    x = rng.standard_normal((n, c)) * 2 + 1
    dy = rng.standard_normal((n, c))
    gamma, beta = 1 + 0.3 * rng.standard_normal(c), rng.standard_normal(c)
    loss = lambda xx, gg, bb: float((dy * reference.layernorm_forward(xx, gg, bb)).sum())
    dx, dg, db = reference.layernorm_backward(x, dy, gamma, *_exact_stats(x))
    fd = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[idx] = h
        fd[idx] = (loss(x + e, gamma, beta) - loss(x - e, gamma, beta)) / (2 * h)
    np.testing.assert_allclose(dx, fd, rtol=1e-6, atol=1e-8)
    for j in range(c):
        e = np.zeros(c)
        e[j] = h
        assert abs((loss(x, gamma + e, beta) - loss(x, gamma - e, beta)) / (2 * h) - dg[j]) < 1e-7
        assert abs((loss(x, gamma, beta + e) - loss(x, gamma, beta - e)) / (2 * h) - db[j]) < 1e-7


def test_rows_of_dx_sum_to_zero():
    # with the exact mean, sum_c xhat = 0, so sum_c dx = rstd * (sum g - C mean(g) - 0) = 0
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 33)) + 100
    dx, _, _ = reference.layernorm_backward(x, rng.standard_normal(x.shape), rng.standard_normal(33),
                                            *_exact_stats(x))
    np.testing.assert_allclose(dx.sum(axis=1), 0.0, atol=1e-12)


def test_stats_by_hand():
    mean, rstd = reference.stats([[1.0, 2.0, 3.0, 4.0], [5.0, 5.0, 5.0, 5.0]])
    assert mean.dtype == np.float32 and rstd.dtype == np.float32
    np.testing.assert_allclose(mean, [2.5, 5.0])
    np.testing.assert_allclose(rstd, [1 / np.sqrt(1.25 + 1e-5), 1 / np.sqrt(1e-5)], rtol=1e-7)


# --- driver: bytes, configurations, grids (no GPU) ---------------------------------------------

def test_op_bytes_and_mix():
    from common.timing import mix_of
    from days.day35_fused_layernorm_backward.driver import make_case, op_bytes

    total, read = op_bytes(8192, 768)
    assert read == 4 * (2 * 8192 * 768 + 768 + 2 * 8192)        # x, dy, gamma, mean, rstd
    assert total - read == 4 * (8192 * 768 + 2 * 768)             # dx, dgamma, dbeta
    assert mix_of(total, read) == (2, 1)
    case = make_case((9, 5), np.random.default_rng(0))
    assert (case.bytes, case.read_bytes) == op_bytes(9, 5)
    assert list(case.outputs) == ["dx", "dgamma", "dbeta"]


def test_config_choice():
    from days.day35_fused_layernorm_backward.driver import config_for, same_as

    assert config_for(1) == (1, 2, 256, "s")
    assert config_for(768) == (2, 3, 256, "sp")       # 192 float4 = 2 warps x 32 lanes x 3
    assert config_for(771) == (2, 3, 256, "sp")       # a body of at most 192 float4 still
    assert config_for(772) == (4, 2, 256, "sp")
    assert config_for(3073) == (4, 6, 256, "s")
    assert config_for(4096) == config_for(4099) == (16, 2, 512, "sp")
    assert config_for(8195) == (8, 8, 256, "s")
    assert config_for(8196) is None
    assert same_as("v3", (2, 8196)) == same_as("v4", (2, 10001)) == "v2"
    assert same_as("v4", (2, 8195)) is None and same_as("v2", (2, 10001)) is None


def test_every_configuration_is_instantiated():
    import re
    from pathlib import Path

    from days.day35_fused_layernorm_backward.driver import CONFIGS, EXTRA_CONFIGS

    src = (Path(__file__).resolve().parents[2] / "days/day35_fused_layernorm_backward/kernel.cu").read_text()
    lines = re.findall(r"^LNBWD_MAIN\((\d+), (\d+), (\d+), (\w+), (\w+), (\w+)\)", src, re.M)
    built = {(int(w), int(i), int(b), a) for w, i, b, a, _, _ in lines}
    assert built == set(CONFIGS) | set(EXTRA_CONFIGS) and len(lines) == len(built)
    # "s" keeps the sums in shared memory (SACC), "r" in registers; "p" prefetches (PF)
    for *_, name, sacc, pf in lines:
        assert (sacc, pf) == ({"s": "true", "r": "false"}[name[0]], "true" if "p" in name else "false")


def test_grid_tiles_and_shared_memory():
    from days.day35_fused_layernorm_backward.driver import grid_blocks, smem_floats, tile_width

    assert grid_blocks(8192, 8, 264) == 264
    assert grid_blocks(8192, 1, 263) == 260     # one group a block: blocks a multiple of 4
    assert grid_blocks(8192, 2, 263) == 262
    assert grid_blocks(5, 1, 264) == 4 and grid_blocks(1, 1, 264) == 4   # idle groups are fine
    assert grid_blocks(1, 8, 264) == 1
    assert tile_width(768, 132) == 8 and tile_width(4096, 132) == 16 and tile_width(8192, 132) == 32
    assert tile_width(3, 4) == 8
    # (1, 6, 256, s) at 768: gamma (aligned: one copy) + 8 groups x 2 rows of 772 floats
    assert smem_floats((1, 6, 256, "s"), 768) == 768 + 8 * 2 * 772
    # odd C: four shifted gamma copies; "r": the slabs overlay them
    assert smem_floats((1, 6, 256, "s"), 767) == 4 * 768 + 8 * 2 * 772
    # one group a block: one head a block, one copy; two groups: two
    assert smem_floats((8, 8, 256, "s"), 8195) == 8196 + 2 * 8200
    assert smem_floats((4, 8, 256, "s"), 4097) == 2 * 4100 + 2 * 2 * 4104
    assert smem_floats((2, 3, 256, "r"), 768) == 4 * 2 * 772
    assert smem_floats((1, 2, 256, "s"), 1) == 512           # at least the tile reduction's


def test_head_arithmetic_matches_the_rows():
    # kernel.cu's head_of(g, C): min((-((g & 3) * (C & 3))) & 3, C); every row r = g + k T
    # (T % 4 == 0) starts (r * C) % 4 floats past a 16-byte boundary: head = floats to the next
    def head_of(g, c):
        return min((-((g & 3) * (c & 3))) & 3, c)

    for c in range(1, 40):
        for g in range(12):
            for k in range(4):
                r = g + 8 * k
                want = min((4 - (r * c) % 4) % 4, c)
                assert head_of(g, c) == want, (g, c, r)


# --- the public function ------------------------------------------------------------------------

def _args(n=4, c=6):
    rng = np.random.default_rng(0)
    return (rng.standard_normal((n, c)), rng.standard_normal((n, c)), np.ones(c), np.zeros(n),
            np.ones(n))


@pytest.mark.parametrize("which,value,exc,word", [
    (0, np.ones((4, 6), complex), TypeError, "complex"),
    (0, np.ones(6), ValueError, "2-D"),
    (0, None, TypeError, "None"),
    (1, np.ones((4, 5)), ValueError, "one shape"),
    (1, np.ones((4, 6), bool), TypeError, "booleans"),
    (2, np.ones(5), ValueError, "gamma"),
    (2, np.array(["a"] * 6), TypeError, "dtype"),
    (3, np.zeros(3), ValueError, "mean"),
    (3, np.zeros((4, 2)), ValueError, "mean"),
    (4, np.ones((4, 1, 1)), ValueError, "rstd"),
    (4, [[1, 2], [3]], ValueError, "ragged"),
])
def test_refuses_bad_input(which, value, exc, word):
    from days.day35_fused_layernorm_backward.driver import layernorm_backward

    args = list(_args())
    args[which] = value
    with pytest.raises(exc, match=word):
        layernorm_backward(*args)


def test_versions_empty_and_zero_columns():
    from days.day35_fused_layernorm_backward.driver import BEST, VERSIONS, layernorm_backward

    with pytest.raises(ValueError, match="unknown version 'v9'.*v1, v2, v3, v4"):
        layernorm_backward(*_args(), version="v9")
    with pytest.raises(TypeError, match="version"):
        layernorm_backward(*_args(), version=4)
    with pytest.raises(ValueError, match="no channels"):
        layernorm_backward(np.ones((3, 0)), np.ones((3, 0)), np.ones(0), np.zeros(3), np.ones(3))
    # no rows: dx empty, dgamma = dbeta = 0 (sums over nothing), nothing launched (no GPU here)
    dx, dg, db = layernorm_backward(np.ones((0, 5)), np.ones((0, 5)), np.ones(5), np.zeros((0, 1)),
                                    np.ones(0))
    assert dx.shape == (0, 5) and dx.dtype == np.float32
    assert np.array_equal(dg, np.zeros(5)) and np.array_equal(db, np.zeros(5))
    assert dg.dtype == db.dtype == np.float32
    assert BEST in VERSIONS


def test_validate_size():
    from days.day35_fused_layernorm_backward.driver import validate_size

    validate_size((8192, 4096))
    with pytest.raises(ValueError, match="32-bit"):
        validate_size((2 ** 16, 2 ** 15))
    with pytest.raises(ValueError, match="2\\^30"):
        validate_size((2 ** 30 + 1, 1))


def test_bar_determinism_check():
    from days.day35_fused_layernorm_backward.driver import _deterministic

    good = {"8192x768": {"v1": {"identical": True, "ok": True}, "v4": {"identical": True, "ok": True},
                         "torch native_layer_norm_backward": {"identical": False, "ok": None}}}
    ok, fig = _deterministic({"extra": {"determinism": good}})
    assert ok and "bit-identical" in fig          # torch's own bits do not count against the day
    bad = {"8192x768": {"v4": {"identical": False, "ok": True}}}
    ok, fig = _deterministic({"extra": {"determinism": bad}})
    assert not ok and "v4 at 8192x768" in fig
    assert _deterministic({"extra": {}}) == (False, "determinism not measured")


# --- on the GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(5000, 768), (3000, 3073), (257, 4096), (999, 1023)])
def test_bit_identical_run_to_run(gpu, size):
    from days.day35_fused_layernorm_backward import driver

    case = driver.make_case(size, np.random.default_rng(7))
    args = [case.inputs[k] for k in ("x", "dy", "gamma", "mean", "rstd")]
    exp = case.expected()
    for v in driver.VERSIONS:
        a = driver.layernorm_backward(*args, version=v)
        b = driver.layernorm_backward(*args, version=v)
        for k, x, y in zip(("dx", "dgamma", "dbeta"), a, b):
            assert x.tobytes() == y.tobytes(), f"{v} {k} differs run to run at {size}"
        from common.check import compare
        for k, got in zip(("dx", "dgamma", "dbeta"), a):
            r = compare(got, exp[k])
            assert r.ok, f"{v} {k} at {size}: {r.message}"


def test_v4_counters_reset_across_launches(gpu):
    # v4's arrival counters must be back at zero after every launch: ten launches on one
    # DeviceCase (v3 and v4 alternating, two widths' worth of partials) all check
    from common import harness as H
    from days.day35_fused_layernorm_backward import driver

    case = driver.make_case((4099, 1023), np.random.default_rng(3))
    d = H.DeviceCase(case)
    for i in range(10):
        v = "v4" if i % 3 else "v3"
        r = H.check(driver.launch, v, case, d)
        assert r.ok, f"launch {i} ({v}): {r.message}"


def test_backward_of_day09_forward(gpu):
    # the statistics day 9's forward saves, fed straight in (torch's [N, 1] shape too)
    from common.check import compare
    from days.day09_layer_norm.driver import layer_norm
    from days.day35_fused_layernorm_backward.driver import layernorm_backward

    rng = np.random.default_rng(9)
    n, c = 1000, 1027
    x = (rng.standard_normal((n, c)) * 3 + 50).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
    _, mean, rstd = layer_norm(x, w, np.zeros(c, np.float32))
    dy = rng.standard_normal((n, c)).astype(np.float32)
    want = reference.layernorm_backward(x, dy, w, mean, rstd)
    got = layernorm_backward(x, dy, w, mean.reshape(n, 1), rstd)
    for k, g, e in zip(("dx", "dgamma", "dbeta"), got, want):
        r = compare(g, e)
        assert r.ok, f"{k}: {r.message}"


def test_matches_torch(gpu):
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    from common import harness as H
    from common.check import compare
    from days.day35_fused_layernorm_backward import driver

    case = driver.make_case((2048, 1536), np.random.default_rng(5), stress=False)
    d = H.DeviceCase(case)
    driver.launch(driver.BEST, d)
    ours = d.outputs()
    n, c = case.size
    t = driver.torch_calls(d)
    assert set(t) == {"torch native_layer_norm_backward", "torch autograd.grad"}
    from common.baselines import as_torch
    x, dy, g = (as_torch(d.array(k)) for k in ("x", "dy", "gamma"))
    _, tg, tb = torch.ops.aten.native_layer_norm_backward(
        dy, x, [c], as_torch(d.array("mean")).view(n, 1), as_torch(d.array("rstd")).view(n, 1), g,
        torch.zeros_like(g), [True, True, True])
    exp = case.expected()
    assert compare(t["torch native_layer_norm_backward"]().cpu().numpy(), exp["dx"]).ok
    assert compare(tg.cpu().numpy(), exp["dgamma"]).ok and compare(tb.cpu().numpy(), exp["dbeta"]).ok
    for k in ("dx", "dgamma", "dbeta"):
        assert compare(ours[k], exp[k]).ok, k
