import re
from pathlib import Path

import numpy as np
import pytest

from days.day26_flash_attention_forward import reference

ROOT = Path(__file__).resolve().parents[2]


# --- the reference against independent values ----------------------------------------------------

def test_one_key_returns_v_and_the_score():
    q = np.array([[[1.0, 2.0, 0.0, -1.0]]])
    k = np.array([[[0.5, 0.5, 3.0, 1.0]]])
    v = np.array([[[7.0, -2.0, 0.25, 4.0]]])
    o, lse = reference.attention(q, k, v)
    np.testing.assert_allclose(o, v, rtol=0, atol=1e-15)
    # scale = 1/sqrt(4) = 0.5; q.k = 0.5 + 1 + 0 - 1 = 0.5
    np.testing.assert_allclose(lse, [[0.25]], rtol=1e-15)


def test_two_keys_by_hand():
    # D = 1, scale 1: scores q*k = [0, log 3] -> weights [1/4, 3/4]; lse = log(1 + 3) = log 4
    q = np.array([[[1.0], [1.0]]])
    k = np.array([[[0.0], [np.log(3.0)]]])
    v = np.array([[[8.0], [4.0]]])
    o, lse = reference.attention(q, k, v, scale=1.0)
    np.testing.assert_allclose(o[0, :, 0], [0.25 * 8 + 0.75 * 4] * 2, rtol=1e-14)
    np.testing.assert_allclose(lse[0], [np.log(4.0)] * 2, rtol=1e-14)
    # causal: row 0 sees key 0 only (o = v0, lse = 0); row 1 sees both
    o, lse = reference.attention(q, k, v, causal=True, scale=1.0)
    np.testing.assert_allclose(o[0, :, 0], [8.0, 5.0], rtol=1e-14)
    np.testing.assert_allclose(lse[0], [0.0, np.log(4.0)], atol=1e-15)


def _loop_attention(q, k, v, causal):
    """A second formulation: one query at a time, weights normalized with a plain sum."""
    bh, n, d = q.shape
    o, lse = np.zeros(q.shape), np.zeros((bh, n))
    for h in range(bh):
        for r in range(n):
            keys = r + 1 if causal else n
            s = k[h, :keys] @ q[h, r] / np.sqrt(d)
            w = np.exp(s)  # small scores: no overflow without the max
            o[h, r] = w @ v[h, :keys] / w.sum()
            lse[h, r] = np.log(w.sum())
    return o, lse


@pytest.mark.parametrize("causal", [False, True])
def test_attention_matches_a_loop_over_queries(causal):
    rng = np.random.default_rng(5)
    q, k, v = (rng.standard_normal((2, 9, 8)) for _ in range(3))
    o, lse = reference.attention(q, k, v, causal)
    o2, lse2 = _loop_attention(q, k, v, causal)
    np.testing.assert_allclose(o, o2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, lse2, rtol=1e-12)


def test_large_scores_do_not_overflow():
    q = np.full((1, 3, 4), 30.0)
    k = np.full((1, 3, 4), 30.0)  # scores 1800: exp overflows without the max
    v = np.arange(12.0).reshape(1, 3, 4)
    o, lse = reference.attention(q, k, v)
    np.testing.assert_allclose(o[0], np.tile(v[0].mean(axis=0), (3, 1)), rtol=1e-12)
    np.testing.assert_allclose(lse, 1800 + np.log(3.0), rtol=1e-15)


@pytest.mark.parametrize("n,bm,bn,causal", [(1, 64, 64, False), (17, 4, 8, True), (65, 64, 32, True),
                                             (100, 32, 64, True), (100, 16, 16, False), (33, 64, 64, True)])
def test_flash_tiling_equals_attention(n, bm, bn, causal):
    rng = np.random.default_rng(n)
    q, k, v = (rng.standard_normal((2, n, 8)) for _ in range(3))
    o, lse = reference.flash_tiled(q, k, v, causal, block_m=bm, block_n=bn)
    o2, lse2 = reference.attention(q, k, v, causal)
    np.testing.assert_allclose(o, o2, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lse, lse2, rtol=1e-12)


def test_flops_and_workspace():
    assert reference.flops(1, 2, 64, 0) == 4 * 64 * 4
    assert reference.flops(1, 2, 64, 1) == 4 * 64 * 3      # 3 scores on and below the diagonal
    assert reference.flops(32, 4096, 64, 1) == 4 * 32 * 64 * 4096 * 4097 // 2
    assert reference.workspace_bytes_naive(8, 2048) * 16 == reference.workspace_bytes_naive(8, 8192)


# --- the driver on the CPU ---------------------------------------------------------------------

def test_check_and_bench_sizes_cover_the_ragged_cases():
    from days.day26_flash_attention_forward import driver

    sizes = driver.CHECK_SIZES
    for n in (1, 17, 63, 65, 1000):
        for d in (64, 128):
            for c in (driver.FULL, driver.CAUSAL):
                assert any(s[1] == n and s[2] == d and s[3] == c for s in sizes), (n, d, c)
    bench = driver.BENCH_SIZES
    assert (32, 4096, 64, 1) in bench and (32, 4096, 64, 2) in bench   # full and causal
    assert any(s[2] == 128 for s in bench) and any(s[1] % 64 for s in bench)


def test_v4_tiles_match_the_header():
    # driver.TILES["v4"] launches forward<D, C> of the header: same BLOCK_M, BLOCK_N, TM, TN
    from days.day26_flash_attention_forward import driver

    text = (ROOT / "common/cuda/flash_attention.cuh").read_text()
    generic = re.search(r"struct Tile \{\s*static constexpr int BLOCK_M = (\d+), BLOCK_N = (\d+), "
                        r"TM = (\d+), TN = (\d+);", text)
    d128 = re.search(r"struct Tile<128> \{\s*static constexpr int BLOCK_M = (\d+), BLOCK_N = (\d+), "
                     r"TM = (\d+), TN = (\d+);", text)
    assert generic and d128
    assert driver.TILES["v4"][64] == tuple(int(x) for x in generic.groups())
    assert driver.TILES["v4"][128] == tuple(int(x) for x in d128.groups())


def test_tolerance_is_tight_but_not_below_rounding():
    from days.day26_flash_attention_forward import driver

    case = driver.make_case((2, 1, 64, driver.FULL), np.random.default_rng(0))
    # N = 1: numpy's float32 error is 0; the floor 4 sqrt(n) u applies
    assert case.tol["o"] == pytest.approx(4 * 2 ** -24)
    assert case.tol["lse"] == pytest.approx(4 * 8 * 2 ** -24, rel=1.0)  # floor or 2x numpy's
    case = driver.make_case((2, 1000, 128, driver.CAUSAL), np.random.default_rng(0))
    assert 1e-7 < case.tol["o"] < 1e-5 and case.tol["lse"] < 1e-5


def test_validate_size_refuses_what_the_kernels_cannot_take():
    from days.day26_flash_attention_forward import driver

    for size, word in [((2, 10, 32, 1), "head dim"), ((2, 10, 64, 3), "mask"),
                       ((2, 10, 64, 0), "mask"), ((0, 10, 64, 1), "BH"),
                       ((70000, 10, 64, 1), "65535"), ((2, 0, 64, 1), "at least 1"),
                       ((2, 10, 64), "BHxNxD"), ((65535, 2 ** 16, 64, 1), "32-bit")]:
        with pytest.raises(ValueError) as e:
            driver.validate_size(size)
        assert word in str(e.value), (size, str(e.value))


def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("q,k,v,kw,exc,word", [
    (np.ones((2, 4, 64)), np.ones((2, 4, 64)), np.ones((2, 5, 64)), {}, ValueError, "one shape"),
    (np.ones((4, 64)), np.ones((4, 64)), np.ones((4, 64)), {}, ValueError, "[BH, N, D]"),
    (np.ones((2, 4, 32)), np.ones((2, 4, 32)), np.ones((2, 4, 32)), {}, ValueError, "head dim"),
    (np.ones((2, 4, 64), np.complex64), np.ones((2, 4, 64)), np.ones((2, 4, 64)), {}, TypeError,
     "complex"),
    (np.ones((2, 4, 64)), np.ones((2, 4, 64), bool), np.ones((2, 4, 64)), {}, TypeError, "booleans"),
    (np.ones((2, 4, 64)), np.ones((2, 4, 64)), np.ones((2, 4, 64)), {"causal": 1}, TypeError,
     "causal"),
    (np.ones((2, 4, 64)), np.ones((2, 4, 64)), np.ones((2, 4, 64)), {"scale": float("nan")},
     ValueError, "finite"),
    (np.ones((2, 4, 64)), np.ones((2, 4, 64)), np.ones((2, 4, 64)), {"scale": "0.1"}, TypeError,
     "real"),
    (np.ones((2, 4, 64)), np.ones((2, 4, 64)), np.ones((2, 4, 64)), {"version": "v9"}, ValueError,
     "unknown version"),
])
def test_attention_refuses_bad_input(q, k, v, kw, exc, word):
    from days.day26_flash_attention_forward import driver

    _raises(exc, word, lambda: driver.attention(q, k, v, **kw))


def test_launch_refuses_unknown_versions():
    from days.day26_flash_attention_forward import driver

    _raises(ValueError, "unknown version", lambda: driver.launch("v0", None))


def test_empty_inputs_return_empty_results_without_a_launch():
    from days.day26_flash_attention_forward import driver

    o, lse = driver.attention(np.ones((2, 0, 64)), np.ones((2, 0, 64)), np.ones((2, 0, 64)))
    assert o.shape == (2, 0, 64) and lse.shape == (2, 0) and o.dtype == np.float32
    o, lse = driver.attention(np.ones((0, 5, 128)), np.ones((0, 5, 128)), np.ones((0, 5, 128)), True)
    assert o.shape == (0, 5, 128) and lse.shape == (0, 5)


def test_memory_bar_reads_the_extras_table():
    from days.day26_flash_attention_forward import driver

    mem = {v: {"extra_bytes": [0, 0], "asked_bytes": [0, 0], "growth": None} for v in driver.VERSIONS}
    mem["v1"] = {"extra_bytes": [2 ** 27, 2 ** 31], "asked_bytes": [2 ** 27, 2 ** 31], "growth": 16.0}
    ok, fig = driver._memory_bar({"extra": {"memory": mem}})
    assert ok and "16.0x" in fig
    mem["v3"]["extra_bytes"] = [0, 2 ** 28]   # a flash version that grew: missed
    assert not driver._memory_bar({"extra": {"memory": mem}})[0]
    assert not driver._memory_bar({"extra": {}})[0]


# --- GPU -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4"])
def test_public_function_matches_reference_on_gpu(gpu, version):
    from common.check import compare
    from days.day26_flash_attention_forward import driver

    rng = np.random.default_rng(26)
    q, k, v = (rng.standard_normal((3, 70, 128), dtype=np.float32) for _ in range(3))
    o, lse = driver.attention(q, k, v, causal=True, scale=0.3, version=version)
    o_ref, lse_ref = reference.attention(q, k, v, True, scale=0.3)
    assert compare(o, o_ref, 1e-5).ok and compare(lse, lse_ref, 1e-5).ok


def test_header_strides_read_a_fused_qkv_buffer_on_gpu(gpu):
    # what day 28 does: Q, K, V straight out of a [B, T, 3, H, D] projection, O as [B, T, H, D],
    # lse [B, H, T]; and the same call with lse = nullptr leaves O unchanged
    from pycuda import gpuarray

    from common.check import compare
    from common.gpu import driver as cuda
    from days.day26_flash_attention_forward import driver

    B, T, Hh, D = 2, 77, 3, 64
    rng = np.random.default_rng(28)
    qkv = rng.standard_normal((B, T, 3, Hh, D), dtype=np.float32)
    g = gpuarray.to_gpu(qkv)
    o = gpuarray.empty((B, T, Hh, D), np.float32)
    lse = gpuarray.empty((B, Hh, T), np.float32)
    base = int(g.gpudata)
    s_b, s_t, s_h = T * 3 * Hh * D, 3 * Hh * D, D
    strides = (s_b, s_h, s_t) * 3 + (T * Hh * D, D, Hh * D)
    for causal in (0, 1):
        for with_lse in (True, False):
            cuda().memset_d8(o.gpudata, 0xFF, o.nbytes)
            driver.launch_flash(f"attn_v4_d{D}_c{causal}", driver.TILES["v4"][D], base,
                                base + 4 * Hh * D, base + 8 * Hh * D, o.gpudata,
                                lse.gpudata if with_lse else 0, B, Hh, T, strides, 1 / 8)
            cuda().Context.synchronize()
            q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3).reshape(B * Hh, T, D) for i in range(3))
            o_ref, lse_ref = reference.attention(q, k, v, bool(causal))
            got = o.get().transpose(0, 2, 1, 3).reshape(B * Hh, T, D)
            assert compare(got, o_ref, 1e-5).ok, (causal, with_lse)
            if with_lse:
                assert compare(lse.get().reshape(B * Hh, T), lse_ref, 1e-5).ok


def test_causal_first_row_is_v0_and_large_scores_stay_finite_on_gpu(gpu):
    from days.day26_flash_attention_forward import driver

    rng = np.random.default_rng(7)
    q, k, v = (rng.standard_normal((2, 130, 64), dtype=np.float32) * 4 for _ in range(3))
    for version in driver.VERSIONS:
        o, lse = driver.attention(q, k, v, causal=True, scale=3.0, version=version)  # |s| ~ 100
        assert np.isfinite(o).all() and np.isfinite(lse).all(), version
        np.testing.assert_allclose(o[:, 0], v[:, 0], rtol=1e-6, atol=1e-6, err_msg=version)
        o_ref, lse_ref = reference.attention(q, k, v, True, scale=3.0)
        np.testing.assert_allclose(lse, lse_ref, rtol=1e-5, err_msg=version)
