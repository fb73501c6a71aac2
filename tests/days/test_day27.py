import re
from pathlib import Path

import numpy as np
import pytest

from common import harness as H
from common.check import compare_all
from days.day27_flash_attention_backward import driver, reference

KERNEL = Path(driver.__file__).with_name("kernel.cu").read_text()


def _qkv(bh, n, d, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((bh, n, d)) for _ in range(4)]


# --- the reference against independent values --------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("n", [1, 5, 17])
def test_backward_matches_the_softmax_jacobian_formulation(n, causal):
    q, k, v, do = _qkv(2, n, 8, seed=n)
    o, lse = reference.forward(q, k, v, causal)
    got = reference.backward(q, k, v, o, do, lse, causal)
    want = reference.backward_via_jacobian(q, k, v, do, causal)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("causal", [False, True])
def test_backward_matches_finite_differences(causal):
    q, k, v, do = _qkv(1, 6, 4, seed=3)
    o, lse = reference.forward(q, k, v, causal)
    grads = reference.backward(q, k, v, o, do, lse, causal)
    f = lambda: reference.loss(q, k, v, do, causal)
    for x, g in zip((q, k, v), grads):
        idx = [tuple(i) for i in np.ndindex(x.shape)]
        fd = reference.numerical_grad(f, x, idx)
        np.testing.assert_allclose(g.reshape(-1), fd, rtol=1e-6, atol=1e-8)


def test_one_key_by_hand():
    # softmax over one key is the constant 1: dV = dO, dQ = dK = 0 exactly, O = V, LSE = s
    q, k, v, do = _qkv(3, 1, 4, seed=1)
    o, lse = reference.forward(q, k, v)
    np.testing.assert_array_equal(o, v)
    np.testing.assert_allclose(lse[:, 0], (q * k).sum(-1)[:, 0] / 2.0)
    dq, dk, dv = reference.backward(q, k, v, o, do, lse)
    np.testing.assert_allclose(dv, do, rtol=1e-15)
    assert not dq.any() and not dk.any()


def test_uniform_attention_closed_form():
    # q = 0: every score is 0, P = 1/N (full) -> LSE = log N, O = mean of v,
    # dV_j = mean_i dO_i, dK = scale dS^T q = 0, dQ = scale/N dO (V - mean V)^T K
    n, d = 7, 4
    _, k, v, do = _qkv(1, n, d, seed=2)
    q = np.zeros((1, n, d))
    o, lse = reference.forward(q, k, v)
    np.testing.assert_allclose(lse, np.log(n))
    np.testing.assert_allclose(o[0], np.broadcast_to(v[0].mean(0), (n, d)))
    dq, dk, dv = reference.backward(q, k, v, o, do, lse)
    np.testing.assert_allclose(dv[0], np.broadcast_to(do[0].mean(0), (n, d)))
    np.testing.assert_allclose(dk, 0, atol=1e-15)
    want = 0.5 / n * do[0] @ (v[0] - v[0].mean(0)).T @ k[0]
    np.testing.assert_allclose(dq[0], want, rtol=1e-12, atol=1e-14)


def test_causal_uniform_forward():
    # q = 0, causal: row i averages v_0..v_i and LSE_i = log(i + 1)
    n, d = 6, 4
    _, k, v, _ = _qkv(1, n, d, seed=4)
    o, lse = reference.forward(np.zeros((1, n, d)), k, v, causal=True)
    np.testing.assert_allclose(lse[0], np.log(np.arange(1, n + 1)))
    np.testing.assert_allclose(o[0], np.cumsum(v[0], 0) / np.arange(1, n + 1)[:, None])


def test_float32_backward_is_close_but_not_exact():
    case = driver.make_case((2, 65, 64, driver.CAUSAL), np.random.default_rng(0))
    errs = case.params["fp32_numpy_rel_err"]
    assert all(1e-9 < e < 1e-5 for e in errs.values()), errs


def test_tolerance_rejects_a_real_error():
    # the reference with LSE off by 1e-5 (P off by 1e-5 relative) must fail the day's check
    case = driver.make_case((2, 63, 64, driver.FULL), np.random.default_rng(1))
    x = case.inputs
    good = dict(zip(("dQ", "dK", "dV"), (g.astype(np.float32) for g in reference.backward(
        x["Q"], x["K"], x["V"], x["O"], x["dO"], x["LSE"]))))
    assert compare_all(good, case.expected(), case.tolerance()).ok
    bad = dict(zip(("dQ", "dK", "dV"), (g.astype(np.float32) for g in reference.backward(
        x["Q"], x["K"], x["V"], x["O"], x["dO"], x["LSE"] + 1e-5))))
    assert not compare_all(bad, case.expected(), case.tolerance()).ok


def test_one_key_case_has_exact_zero_gradients_and_an_absolute_tolerance():
    case = driver.make_case((2, 1, 64, driver.FULL), np.random.default_rng(2))
    exp = case.expected()
    assert not exp["dQ"].any() and not exp["dK"].any()
    tol = case.tolerance()
    assert tol["dQ"] == pytest.approx(driver.ZERO_RMS * np.sqrt(2 * 64))
    noisy = {k: v + (1e-3 if k == "dQ" else 0) for k, v in exp.items()}
    assert not compare_all(noisy, exp, tol).ok


def test_large_cases_repeat_a_few_distinct_heads():
    case = driver.make_case((5, 2900, 64, driver.FULL), np.random.default_rng(3))
    assert case.params["distinct_heads"] == 3     # 2^25 // 2900^2
    q = case.inputs["Q"]
    np.testing.assert_array_equal(q[3], q[0])
    assert not np.array_equal(q[1], q[0])
    exp = case.expected()
    np.testing.assert_array_equal(exp["dK"][4], exp["dK"][1])
    assert all(driver.make_case(s, np.random.default_rng(0)).params["distinct_heads"] == s[0]
               for s in driver.CHECK_SIZES[-4:])


def test_pairs_and_flops():
    assert reference.pairs(4, False) == 16 and reference.pairs(4, True) == 10
    case = driver.make_case((1, 4, 64, driver.CAUSAL), np.random.default_rng(0))
    assert case.flops == 10 * 10 * 64


# --- the driver ---------------------------------------------------------------------------------

def test_check_sizes_cover_the_edges():
    sizes = driver.CHECK_SIZES
    assert {s[2] for s in sizes} == {64, 128} and {s[3] for s in sizes} == {1, 2}
    assert any(s[1] == 1 for s in sizes) and any(s[1] % 64 and s[1] > 64 for s in sizes)
    assert any(s[0] > 1 for s in sizes)
    assert driver.BAR_FULL in driver.BENCH_SIZES and driver.BAR_CAUSAL in driver.BENCH_SIZES


@pytest.mark.parametrize("text,msg", [("32x4096x48x1", "head dim"), ("32x4096x64x3", "mask"),
                                      ("70000x16x64x1", "BH")])
def test_sizes_refused_in_words(text, msg):
    with pytest.raises(H.SizeError, match=msg):
        H.parse_size(driver, text)


def test_every_v4_candidate_is_a_kernel_and_fits_shared_memory():
    for d, kinds in driver.V4_CANDIDATES.items():
        for kind, names in kinds.items():
            assert driver.V4_TILES[d][kind] in names
            for name in names:
                assert f"fa_bwd_v4_{kind}_d{d}_{name}," in KERNEL, name
                bm, bn = driver._tile(name)
                assert driver.smem_bytes(kind, d, bm, bn, True) <= 227 * 1024
    # the formula mirrors kernel.cu's (64x64, d = 64, padded): K V Q dO + P dS + lse D
    assert driver.smem_bytes("dkdv", 64, 64, 64, True) == 4 * (4 * 64 * 68 + 2 * 64 * 80 + 128)
    assert driver.smem_bytes("dq", 128, 64, 64, False) == 4 * (4 * 64 * 128 + 64 * 64 + 128)


def test_every_v6_candidate_is_a_kernel_and_fits_shared_memory():
    for d, names in driver.V6_CANDIDATES.items():
        assert driver.V6_TILES[d] in names
        for name in names:
            assert f"fa_bwd_v6_d{d}_{name}," in KERNEL, name
            bm, bn, stages = driver.v6_tile(name)
            smem = driver.v6_smem_bytes(d, bm, bn, stages)
            assert smem <= 227 * 1024
            if name.endswith("_b2"):   # two blocks an SM: 228 KB, 1 KB reserved per block
                assert 2 * (smem + 1024) <= 228 * 1024, name
    # K V, two stages of (Q dO lse D), P dS with rows of BN + 8 (64x64, d = 64)
    assert driver.v6_smem_bytes(64, 64, 64, 2) == 4 * (2 * 64 * 68 + 2 * (2 * 64 * 68 + 128) + 2 * 64 * 72)
    assert driver.v6_tile("bm32_bn128_s2_b1") == (32, 128, 2)


def _wavefronts(addrs):
    """Shared-memory wavefronts of one warp's 16-byte loads at float offsets `addrs`: the most
    distinct 4-byte words that fall in one of the 32 banks."""
    words = {a + i for a in addrs for i in range(4)}
    return max(sum(1 for w in words if w % 32 == b) for b in range(32))


def _v6_threads():
    for t in range(256):
        w, lane = divmod(t, 32)
        yield w, 4 * (w // 2) + lane // 8, 8 * (w % 2) + lane % 8


def test_v6_thread_grid_is_a_permutation_and_every_shared_read_is_one_wavefront():
    # the mapping below is kernel.cu's v6_thread
    assert "ty = 4 * (w >> 1) + (l >> 3);" in KERNEL and "tx = 8 * (w & 1) + (l & 7);" in KERNEL
    assert sorted((ty, tx) for _, ty, tx in _v6_threads()) == [(y, x) for y in range(16) for x in range(16)]
    dp = 64 + 4
    for bn in (64, 128):
        bp, rn = bn + 8, bn // 16
        for w in range(8):
            lanes = [(ty, tx) for ww, ty, tx in _v6_threads() if ww == w]
            assert _wavefronts([ty * dp for ty, _ in lanes]) == 1           # Q/dO rows ty (S, dP)
            assert _wavefronts([tx * dp for _, tx in lanes]) == 1           # K/V rows tx (S, dP)
            assert _wavefronts([ty * rn for ty, _ in lanes]) == 1           # P/dS row r (dV, dK)
            assert _wavefronts([4 * tx for _, tx in lanes]) == 1            # dO/Q/K row, 4 tx
            assert _wavefronts([ty * bp for ty, _ in lanes]) == 1           # dS rows ty (dQ)
    # v2-v5's warp (2 ty x 16 tx) reads 16 K rows: two wavefronts even padded
    assert _wavefronts([tx * dp for tx in range(16)]) == 2


def test_every_version_has_its_kernels():
    for name in ("fa_bwd_v1_scores", "fa_bwd_v2_d64", "fa_bwd_v3_dq_d128", "fa_bwd_preprocess",
                 "fa_bwd_v6_d64_bm64_bn64_s2_b1"):
        assert re.search(rf"\b{name}\b", KERNEL)


def test_launch_refuses_unknown_versions():
    with pytest.raises(ValueError, match="unknown version"):
        driver.launch("v9", None)


# --- the public function's argument checks (before anything touches the GPU) -----------------

def _args(shape=(2, 5, 64)):
    rng = np.random.default_rng(0)
    x = [rng.standard_normal(shape).astype(np.float32) for _ in range(5)]
    return x + [np.zeros(shape[:-1], np.float32)]


def test_bad_version():
    with pytest.raises(ValueError, match="unknown version"):
        driver.attention_backward(*_args(), version="v7")
    with pytest.raises(TypeError, match="version"):
        driver.attention_backward(*_args(), version=4)


def test_causal_must_be_a_bool():
    with pytest.raises(TypeError, match="causal"):
        driver.attention_backward(*_args(), causal="yes")


def test_wrong_ndim():
    a = _args()
    a[0] = a[0][0]
    with pytest.raises(ValueError, match=r"\[BH, N, d\]"):
        driver.attention_backward(*a)


def test_shapes_must_agree():
    a = _args()
    a[2] = a[2][:, :4]
    with pytest.raises(ValueError, match="one shape"):
        driver.attention_backward(*a)


def test_lse_shape():
    a = _args()
    a[5] = a[5][:, :3]
    with pytest.raises(ValueError, match="lse"):
        driver.attention_backward(*a)


def test_head_dim_refused():
    with pytest.raises(ValueError, match="head dim"):
        driver.attention_backward(*_args((2, 5, 32)))


def test_non_finite_refused():
    a = _args()
    a[1][0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        driver.attention_backward(*a)


def test_complex_refused():
    a = _args()
    a[0] = a[0].astype(np.complex64)
    with pytest.raises(TypeError, match="real"):
        driver.attention_backward(*a)


def test_empty_input_returns_empty_gradients_without_a_launch():
    for shape in ((0, 5, 64), (2, 0, 64), (1, 2, 0, 64)):
        out = driver.attention_backward(*_args(shape))
        assert len(out) == 3 and all(g.shape == shape and g.dtype == np.float32 for g in out)


# --- on the GPU ---------------------------------------------------------------------------------

def test_gpu_every_version_matches_finite_differences(gpu):
    fd = driver.finite_difference_check()
    assert set(fd) == set(driver.VERSIONS)
    for v, r in fd.items():
        assert r["ok"], f"{v}: {r['rel_err']:.1e}"


@pytest.mark.parametrize("tile", sorted({t for ts in driver.V6_CANDIDATES.values() for t in ts}))
def test_gpu_every_v6_candidate_matches_float64(gpu, tile):
    for size in ((2, 200, 64, driver.CAUSAL), (1, 130, 64, driver.FULL), (2, 65, 128, driver.CAUSAL),
                 (1, 130, 128, driver.FULL)):
        if tile not in driver.V6_CANDIDATES[size[2]]:
            continue
        case = driver.make_case(size, np.random.default_rng(7))
        r = H.check(lambda v, d: driver.launch_v6(d, tile), "v6", case)
        assert r.ok, f"{tile} at {size}: {r.message}"


@pytest.mark.parametrize("version", ["v3", "v4"])
def test_gpu_deterministic_versions_repeat_bit_for_bit(gpu, version):
    case = driver.make_case((2, 200, 64, driver.CAUSAL), np.random.default_rng(5))
    a = H.run(driver.launch, version, case)
    b = H.run(driver.launch, version, case)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])


def test_gpu_four_dimensional_input(gpu):
    rng = np.random.default_rng(6)
    q, k, v, do = (rng.standard_normal((2, 3, 70, 128)).astype(np.float32) for _ in range(4))
    o, lse = reference.forward(q.reshape(6, 70, 128), k.reshape(6, 70, 128),
                               v.reshape(6, 70, 128), causal=True)
    o32, lse32 = o.astype(np.float32).reshape(q.shape), lse.astype(np.float32).reshape(2, 3, 70)
    got = driver.attention_backward(q, k, v, o32, do, lse32, causal=True)
    want = reference.backward(q.reshape(6, 70, 128), k.reshape(6, 70, 128), v.reshape(6, 70, 128),
                              o32.reshape(6, 70, 128), do.reshape(6, 70, 128),
                              lse32.reshape(6, 70), causal=True)
    for g, w in zip(got, want):
        assert g.shape == q.shape
        assert reference.rel_l2(g.reshape(w.shape), w) < 1e-5
