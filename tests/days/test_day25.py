import numpy as np
import pytest

from days.day25_cublas_integration import reference

DRV = "days.day25_cublas_integration.driver"


def _driver():
    import importlib

    return importlib.import_module(DRV)


# --- the reference and the arithmetic the tutorial uses ------------------------------------------

def test_reference_by_hand():
    np.testing.assert_array_equal(reference.matmul([[1.0, 2.0], [3.0, 4.0]], [[5.0], [6.0]]),
                                  [[17.0], [39.0]])


@pytest.mark.parametrize("m,k,n", [(1, 1, 1), (2, 3, 4), (33, 17, 31), (5, 1, 7)])
def test_column_major_trick_is_the_row_major_product(m, k, n):
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
    np.testing.assert_allclose(reference.column_major_trick(a, b), a @ b, rtol=1e-12, atol=1e-12)


def test_column_major_trick_is_not_a_plain_transpose():
    # reading the buffers column-major without swapping A and B would give B^T A^T, which is
    # not even the right shape for a non-square product: the trick must swap the operands
    a, b = np.arange(6.0).reshape(2, 3), np.arange(12.0).reshape(3, 4)
    c = reference.column_major_trick(a, b)
    assert c.shape == (2, 4)
    assert c[1, 3] == 3 * 3 + 4 * 7 + 5 * 11   # row 1 of A . column 3 of B = 84


def test_grouped_order_by_hand():
    # 3 tile-rows, 2 tile-columns, groups of 2 rows: down rows 0-1 of column 0, then column 1,
    # then the short last group (row 2) column by column
    assert reference.grouped_order(3, 2, 2) == [(0, 0), (1, 0), (0, 1), (1, 1), (2, 0), (2, 1)]
    assert reference.grouped_order(2, 3, 1) == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]


@pytest.mark.parametrize("tm,tn,g", [(9, 5, 8), (32, 8, 8), (1, 1, 8), (17, 3, 4), (64, 24, 8)])
def test_grouped_order_visits_every_tile_once(tm, tn, g):
    order = reference.grouped_order(tm, tn, g)
    assert sorted(order) == [(i, j) for i in range(tm) for j in range(tn)]


def test_wave_efficiency():
    # 2048^3 in 128x128 tiles: 256 tiles on 264 slots = one wave, 256/264 busy
    assert reference.wave_efficiency(2048, 2048, 128, 128, 264) == pytest.approx(256 / 264)
    # 4096^2: 1024 tiles = 4 waves of 264 (1056 slots)
    assert reference.wave_efficiency(4096, 4096, 128, 128, 264) == pytest.approx(1024 / 1056)
    assert reference.wave_efficiency(128, 128, 128, 128, 1) == 1.0


def test_bf16_round_and_bits():
    x = np.array([1.0, 1.0 + 2 ** -8, 1.0 + 3 * 2 ** -8, -2.5, 3.0e38], np.float32)
    r = reference.bf16_round(x)
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even -> 1; 1 + 3*2^-8 -> 1 + 2^-6
    np.testing.assert_array_equal(r[:4], [1.0, 1.0, 1.0 + 2 ** -6, -2.5])
    bits = (r.view(np.uint32) >> 16).astype(np.uint16)
    np.testing.assert_array_equal(reference.bf16_bits_to_float(bits), r)
    assert reference.bf16_bits_to_float(np.array([0x3F80], np.uint16))[0] == 1.0


# --- the driver's choices (no GPU needed) ---------------------------------------------------------

def test_kernel_names_follow_alignment_and_every_name_is_in_kernel_cu():
    from pathlib import Path

    drv = _driver()
    src = (Path(drv.__file__).parent / "kernel.cu").read_text()
    assert drv.kernel_name("v4", (4096, 4096, 4096)) == "sgemm_v4_vec4"
    assert drv.kernel_name("v1", (4095, 4097, 1023)) == "sgemm_v1_scalar"   # K, N odd
    assert drv.kernel_name("v2", (8, 6, 8)) == "sgemm_v2_scalar"            # K % 4 == 2
    for v in drv.VERSIONS:
        for size in drv.CHECK_SIZES + drv.BENCH_SIZES:
            base = drv.config(v, size)[0]
            assert (f"SGEMM_ENTRY({base}," in src
                    or (base + "_vec4(" in src and base + "_scalar(" in src)), (v, size)
    for name in drv.CANDIDATES:
        assert f"SGEMM_ENTRY(sgemm_v6_{name}," in src, name


def test_candidate_shapes_match_their_names():
    drv = _driver()
    for name, (bm, bn, threads) in drv.CANDIDATES.items():
        assert name.startswith(f"{bm}x{bn}_")
        ty = int(name.split("_t")[1].split("_")[0])
        wm, wn = 8 * ty, 8 * (32 // ty)           # sgemm.cuh: WM = 8 TY, WN = 8 TX
        assert threads == 32 * (bm // wm) * (bn // wn), name


def test_v6_choice_and_same_as():
    drv = _driver()
    assert drv.tuned_config((4096, 4096, 4096)) == drv.SAME_AS_V5       # plenty of tiles
    assert drv.same_as("v6", (4096, 4096, 4096)) == "v5"
    small = (256, 4096, 256)                                            # 4 tiles of 128x128
    assert drv.tuned_config(small) == "64x64_k16_s3_t4_a4"
    assert drv.same_as("v6", small) is None and drv.same_as("v5", small) is None
    for size in drv.BENCH_SIZES + drv.CHECK_SIZES:
        assert drv.tuned_config(size) in drv.CANDIDATES


def test_check_sizes_cover_both_paths_partial_tiles_and_short_groups():
    drv = _driver()
    sizes = drv.CHECK_SIZES
    assert (1, 1, 1) in sizes and (1000, 777, 513) in sizes
    vec = [s for s in sizes if s[1] % 4 == 0 and s[2] % 4 == 0]
    assert any(k % 16 and m % 128 and n % 128 for m, k, n in vec)      # partial BK and tiles
    assert any(k % 4 or n % 4 for m, k, n in sizes)                    # scalar path
    # a grouped order whose last group is short, on both paths
    assert any(-(-m // 128) % drv.GROUP and -(-n // 128) > 1 for m, k, n in vec)
    assert any(-(-m // 128) % drv.GROUP and -(-n // 128) > 1 and (k % 4 or n % 4)
               for m, k, n in sizes)
    assert drv.AWKWARD in drv.BENCH_SIZES and (4096, 4096, 4096) in drv.BENCH_SIZES


def test_bar_check_reads_the_records():
    drv = _driver()

    def case(size, mine, cublas):
        return {"size": list(size), "rows": [{"version": "v6", "median_ms": mine, "ok": True}],
                "baseline": [{"name": drv.CUBLAS, "median_ms": cublas, "ok": True}]}

    rec = {"cases": [case((4096, 4096, 4096), 1.0, 0.98), case(drv.AWKWARD, 1.0, 2.0)]}
    ok, fig = drv._beats_cublas_somewhere(rec)
    assert not ok and "0.98x" in fig                  # the awkward shape does not count
    rec["cases"].append(case((8192, 768, 3072), 1.0, 1.05))
    ok, fig = drv._beats_cublas_somewhere(rec)
    assert ok and "8192x768x3072" in fig
    assert drv._beats_cublas_somewhere({"cases": []})[0] is False


# --- the public function: bad input is refused before anything reaches the GPU -------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3), np.complex64), np.ones((3, 2)), TypeError, "complex"),
    (np.ones((2, 3)), np.ones((3, 2), bool), TypeError, "booleans"),
    ("abc", np.ones((3, 2)), TypeError, "string"),
    (np.ones(3), np.ones((3, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((4, 2)), ValueError, "K = 3"),
    ([[1.0, 2.0], [3.0]], np.ones((2, 2)), ValueError, "ragged"),
])
def test_matmul_refuses_bad_arrays(a, b, exc, word):
    _raises(exc, word, lambda: _driver().matmul(a, b))


def test_matmul_refuses_unknown_versions_and_launch_too():
    drv = _driver()
    _raises(ValueError, "v6", lambda: drv.matmul(np.ones((2, 2)), np.ones((2, 2)), "v9"))
    _raises(TypeError, "version", lambda: drv.matmul(np.ones((2, 2)), np.ones((2, 2)), 6))
    _raises(ValueError, "unknown version", lambda: drv.launch("v0", None))


def test_validate_size_refuses_what_the_grid_cannot_hold():
    drv = _driver()
    _raises(ValueError, "gridDim.y", lambda: drv.validate_size((65535 * 64 + 1, 4, 4)))
    _raises(ValueError, "32-bit", lambda: drv.validate_size((4, 2 ** 31, 4)))
    drv.validate_size((65535 * 64, 4, 4))


def test_matmul_of_empty_matrices_launches_nothing():
    drv = _driver()
    c = drv.matmul(np.ones((3, 0)), np.ones((0, 4)))
    assert c.dtype == np.float32 and c.shape == (3, 4) and not c.any()
    assert drv.matmul(np.ones((0, 5)), np.ones((5, 4))).shape == (0, 4)
    assert drv.matmul(np.ones((3, 5)), np.ones((5, 0))).shape == (3, 0)


# --- GPU -------------------------------------------------------------------------------------------

def _exact_case(m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, (m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (k, n)).astype(np.float32)
    return a, b, a.astype(np.int64) @ b.astype(np.int64)


@pytest.mark.parametrize("shape", [(131, 67, 257), (1100, 68, 516), (1, 9, 5), (200, 16, 64)])
def test_small_integers_are_exact_on_gpu(gpu, shape):
    # integer sums are exact in fp32: a misplaced tile or a missed zero-fill shows as != 0
    drv = _driver()
    a, b, want = _exact_case(*shape, seed=sum(shape))
    for v in drv.VERSIONS:
        np.testing.assert_array_equal(drv.matmul(a, b, v), want, err_msg=v)


@pytest.mark.parametrize("name", list(__import__(DRV, fromlist=["CANDIDATES"]).CANDIDATES))
@pytest.mark.parametrize("shape", [(1100, 68, 516), (300, 51, 261)])
def test_every_candidate_is_exact_on_gpu(gpu, name, shape):
    from common import harness as H

    drv = _driver()
    a, b, want = _exact_case(*shape, seed=len(name))
    case = H.Case(shape, inputs={"a": a, "b": b}, outputs={"c": ((shape[0], shape[2]), np.float32)})
    got = H.run(lambda v, d: drv.launch_kernel("sgemm_v6_" + name, *drv.CANDIDATES[name], d),
                name, case)["c"]
    np.testing.assert_array_equal(got, want)


def test_tensor_core_baselines_run_on_gpu(gpu):
    drv = _driver()
    r = drv.tensor_core_baselines((256, 512, 384))
    assert r["cuBLAS sgemm fp32"]["rel_err_vs_fp32"] == 0.0
    # TF32 keeps 10 mantissa bits, bf16 7: errors of about 1e-4..1e-3 and 1e-3..1e-2
    assert 1e-6 < r["cuBLAS gemm_ex tf32"]["rel_err_vs_fp32"] < 5e-3
    assert 1e-4 < r["cuBLAS gemm_ex bf16"]["rel_err_vs_fp32"] < 3e-2
    assert all(v["finite"] for v in r.values())
