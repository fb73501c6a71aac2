import numpy as np
import pytest

from days.day47_int8_tensor_core_gemm import driver, reference


# --- the reference against independent values -------------------------------------------------

def test_gemm_by_hand():
    # A = [[1, -2], [3, 4]], B = [[5, 6], [-7, 8]] (rows of B are columns of the product):
    # A . B^T = [[1*5 - 2*6, -1*7 - 2*8], [3*5 + 4*6, -3*7 + 4*8]] = [[-7, -23], [39, 11]]
    a = np.array([[1, -2], [3, 4]], np.int8)
    b = np.array([[5, 6], [-7, 8]], np.int8)
    got = reference.int8_gemm(a, b)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, [[-7, -23], [39, 11]])


def test_gemm_against_int64_numpy():
    # a second formulation: plain int64 matmul (no floating point at all)
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (33, 300), dtype=np.int8)
    b = rng.integers(-128, 128, (17, 300), dtype=np.int8)
    np.testing.assert_array_equal(reference.int8_gemm(a, b),
                                  a.astype(np.int64) @ b.astype(np.int64).T)


def test_extreme_sums_are_exact():
    # every product -128 * -128 = 2^14: the largest sums an int32 must hold, at K = MAX_K
    k = reference.MAX_K
    a = np.full((1, k), -128, np.int8)
    got = reference.int8_gemm(a, a)
    assert got[0, 0] == 2 ** 14 * k and got[0, 0] < 2 ** 31
    assert 2 ** 14 * (k + 1) >= 2 ** 31            # one more and int32 could overflow


def test_ops():
    assert reference.ops(2, 3, 4) == 48


# --- launch geometry, the generated header ------------------------------------------------------

def test_grids(monkeypatch):
    from common import gpu

    monkeypatch.setattr(gpu, "sm_count", lambda: 132)
    assert driver.grid_of("v1", 4096, 4096) == (16, 32, 1)
    assert driver.grid_of("v2", 4096, 4096) == (132, 1, 1)          # 512 tiles, 132 blocks
    assert driver.grid_of("v2", 100, 100) == (1, 1, 1)
    assert driver.grid_of("v3", 4096, 4096) == (132, 1, 1)          # 66 clusters of 2
    assert driver.grid_of("v3", 129, 257) == (4, 1, 1)              # 2 column tiles x 1 pair
    assert driver.grid_of("v2_f1_g8", 129, 257) == (4, 1, 1)        # 2 x 2 tiles
    assert driver.grid_of("v3_f1_g8", 100, 100) == (2, 1, 1)        # one (half-empty) pair


def test_shared_memory_fits():
    assert max(driver.smem_of(v) for v in driver.VERSIONS) <= 227 * 1024


def test_every_candidate_is_a_kernel():
    src = driver.K.path.read_text()
    for name in list(driver.VERSIONS) + list(driver.CANDIDATES):
        assert f"s8_gemm_{name}" in src, name


def test_wgmma_header_has_the_int8_shape():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "common" / "cuda" / "wgmma.cuh").read_text()
    assert "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8" in text
    assert "m64n256k32_s8(int (&d)[128]" in text


# --- the bar ------------------------------------------------------------------------------------

def _rec(ours_ms, day39_ms, ok=True):
    return {"cases": [{"size": list(driver.BAR_SIZE),
                       "rows": [{"version": "v3", "median_ms": ours_ms, "ok": True},
                                {"version": "v1", "median_ms": 2 * ours_ms, "ok": True}]}],
            "extra": {"day39": {"version": "v4", "median_ms": day39_ms, "ok": ok}}}


def test_bar_reads_day39_from_the_extras():
    ok, fig = driver._twice_day39(_rec(0.1, 1.127))
    assert ok and "11.27x" in fig and "v3" in fig
    ok, fig = driver._twice_day39(_rec(0.6, 1.127))            # 1.88x: missed
    assert not ok and "1.88x" in fig
    assert not driver._twice_day39(_rec(0.1, 1.127, ok=False))[0]
    assert not driver._twice_day39({"cases": []})[0]


# --- the public function ------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,exc,msg", [
    (np.zeros((3, 4), np.int8), np.zeros((5, 3), np.int8), ValueError, "same K"),
    (np.zeros(4, np.int8), np.zeros((5, 4), np.int8), ValueError, "2-D"),
    (np.full((3, 4), 128), np.zeros((5, 4), np.int8), ValueError, "outside"),
    (np.full((3, 4), 1.5), np.zeros((5, 4), np.int8), ValueError, "whole"),
    (np.zeros((3, 4), bool), np.zeros((5, 4), np.int8), TypeError, "booleans"),
    ("x", np.zeros((5, 4), np.int8), TypeError, "string"),
    (np.zeros((3, 4), np.int8), None, TypeError, "None"),
])
def test_matmul_bad_input(a, b, exc, msg):
    with pytest.raises(exc, match=msg):
        driver.matmul(a, b)


def test_unknown_version():
    with pytest.raises(ValueError, match="v1, v2"):
        driver.matmul(np.zeros((2, 16), np.int8), np.zeros((2, 16), np.int8), version="v9")
    with pytest.raises(ValueError, match="v1, v2"):
        driver.launch("v3_f1_g8", None)          # a sweep candidate is no version


def test_empty_needs_no_gpu():
    assert driver.matmul(np.zeros((0, 16), np.int8), np.zeros((3, 16), np.int8)).shape == (0, 3)
    out = driver.matmul(np.ones((2, 0), np.int8), np.ones((3, 0), np.int8))
    assert out.shape == (2, 3) and out.dtype == np.int32 and not out.any()


def test_sizes_refused_in_words():
    with pytest.raises(ValueError, match="rows"):
        driver.validate_size((65535 * 128 + 1, 16, 16))
    with pytest.raises(ValueError, match="overflow"):
        driver.validate_size((1, reference.MAX_K + 1, 1))


# --- GPU ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_matmul_on_the_gpu(gpu, version):
    rng = np.random.default_rng(1)
    for m, k, n in ((131, 208, 77), (5, 13, 9)):     # 16-byte rows; the pad path
        a = rng.integers(-128, 128, (m, k), dtype=np.int8)
        b = rng.integers(-128, 128, (n, k), dtype=np.int8)
        np.testing.assert_array_equal(driver.matmul(a, b, version=version),
                                      reference.int8_gemm(a, b))


@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_extreme_sums_on_the_gpu(gpu, version):
    # -128 * -128 everywhere at K = 4100 (padded to 4112): sums of 2^14 x 4100, exact
    a = np.full((130, 4100), -128, np.int8)
    b = np.full((260, 4100), -128, np.int8)
    got = driver.matmul(a, b, version=version)
    assert (got == 2 ** 14 * 4100).all()


def test_baselines_agree(gpu):
    from common import harness as H
    from common.runner import to_host

    for size in ((300, 144, 256), (129, 36, 131)):       # direct; padded copies (K, N ragged)
        case = driver.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        for name, fn in driver.baselines(d).items():
            np.testing.assert_array_equal(to_host(fn()), case.expected()["c"], err_msg=name)
