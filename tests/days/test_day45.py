import numpy as np
import pytest

from common import bf16, tma
from days.day45_wgmma_gemm import driver, reference


# --- the reference against independent values -------------------------------------------------

def test_gemm_by_hand():
    # A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]] (rows of B are columns of the product):
    # A . B^T = [[1*5 + 2*6, 1*7 + 2*8], [3*5 + 4*6, 3*7 + 4*8]] = [[17, 23], [39, 53]]
    a = bf16.to_bits(np.array([[1, 2], [3, 4]], np.float32))
    b = bf16.to_bits(np.array([[5, 6], [7, 8]], np.float32))
    np.testing.assert_array_equal(reference.gemm(a, b), [[17, 23], [39, 53]])


def test_gemm_against_a_loop():
    rng = np.random.default_rng(0)
    a = bf16.to_bits(rng.standard_normal((5, 7)))
    b = bf16.to_bits(rng.standard_normal((4, 7)))
    fa, fb = bf16.from_bits(a).astype(float), bf16.from_bits(b).astype(float)
    want = [[sum(fa[i, k] * fb[j, k] for k in range(7)) for j in range(4)] for i in range(5)]
    np.testing.assert_allclose(reference.gemm(a, b), want, rtol=1e-14)


def test_tolerance_is_the_bf16_rounding_bound():
    # rounding to bf16 moves a value by at most 2^-8 of itself (8 significant bits), and a
    # value halfway between two bf16 numbers gets exactly that error
    x = np.random.default_rng(1).standard_normal(100000) * 100
    err = np.abs(bf16.round(x) - x.astype(np.float32)) / np.abs(x.astype(np.float32))
    assert err.max() <= 2.0 ** -8
    half = np.float32(1 + 2.0 ** -8)        # between 1 and 1 + 2^-7: a tie, rounds to even (1)
    assert bf16.round(half) == 1.0
    assert 2.0 ** -8 < reference.TOL < 5e-3


def test_tolerance_catches_a_dropped_k_step():
    # a kernel that skips one 16-deep k step of 64 misses a quarter of the terms: far outside TOL
    rng = np.random.default_rng(2)
    a = bf16.to_bits(rng.standard_normal((64, 64)))
    b = bf16.to_bits(rng.standard_normal((32, 64)))
    ref = reference.gemm(a, b)
    a2 = a.copy()
    a2[:, 16:32] = 0
    wrong = bf16.round(reference.gemm(a2, b))
    assert np.linalg.norm(wrong - ref) / np.linalg.norm(ref) > 10 * reference.TOL
    right = bf16.round(ref)
    assert np.linalg.norm(right - ref) / np.linalg.norm(ref) < reference.TOL


def test_flops():
    assert reference.flops(2, 3, 4) == 48


# --- the generated header and the tensor-map rules ---------------------------------------------

def test_wgmma_header_is_what_the_generator_writes():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_wgmma", root / "scripts" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (root / "common" / "cuda" / "wgmma.cuh").read_text() == gen.expected_text(), \
        "common/cuda/wgmma.cuh differs from scripts/gen_wgmma.py: run the script"


@pytest.mark.parametrize("kwargs,msg", [
    (dict(dims=(100, 64), box=(64, 64), swizzle=128), "multiples of 16"),    # 200-byte rows
    (dict(dims=(64, 64), box=(64, 300), swizzle=128), "1 to 256"),
    (dict(dims=(128, 64), box=(128, 64), swizzle=128), "at most 128"),       # 256-byte box rows
    (dict(dims=(64, 64), box=(4, 64), swizzle=0), "multiple of 16 bytes"),  # 8-byte box rows
    (dict(dims=(64, 64), box=(64, 64), swizzle=16), "swizzle"),
])
def test_tensor_map_rules_in_words(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        tma.check_tiled("bfloat16", kwargs["dims"], [kwargs["dims"][0] * 2], kwargs["box"],
                        kwargs["swizzle"], 0x1000)


def test_tensor_map_address_alignment():
    with pytest.raises(ValueError, match="16-byte aligned"):
        tma.check_tiled("bfloat16", (64, 64), [128], (64, 64), 128, 0x1008)


def test_upload_refuses_a_short_map():
    with pytest.raises(ValueError, match="128 bytes"):
        tma.upload(b"\0" * 64)


# --- launch geometry ----------------------------------------------------------------------------

def test_grids(monkeypatch):
    from common import gpu

    monkeypatch.setattr(gpu, "sm_count", lambda: 132)
    assert driver.grid_of("v1", 8192, 8192) == (64, 128, 1)
    assert driver.grid_of("v3", 8192, 8192) == (32, 64, 1)
    assert driver.grid_of("v4", 8192, 8192) == (132, 1, 1)          # 2048 tiles, 132 blocks
    assert driver.grid_of("v4", 100, 100) == (1, 1, 1)              # one tile, one block
    assert driver.grid_of("v6", 8192, 8192) == (132, 1, 1)          # 66 clusters of 2
    assert driver.grid_of("v6", 129, 257) == (4, 1, 1)              # 2 column tiles x 1 pair


def test_shared_memory_fits():
    # 227 KB of dynamic shared memory a block at most on Hopper (+1 KB to align the tiles)
    assert max(driver.SMEM.values()) <= 227 * 1024


# --- the public function ------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,exc,msg", [
    (np.zeros((3, 4)), np.zeros((5, 3)), ValueError, "same K"),
    (np.zeros(4), np.zeros((5, 4)), ValueError, "2-D"),
    (np.zeros((3, 4), complex), np.zeros((5, 4)), TypeError, "real"),
    ("x", np.zeros((5, 4)), TypeError, "string"),
    (np.zeros((3, 4)), None, TypeError, "None"),
])
def test_matmul_bad_input(a, b, exc, msg):
    with pytest.raises(exc, match=msg):
        driver.matmul(a, b)


def test_matmul_unknown_version():
    with pytest.raises(ValueError, match="v1, v2"):
        driver.matmul(np.zeros((2, 8)), np.zeros((2, 8)), version="v9")


def test_matmul_empty_needs_no_gpu():
    assert driver.matmul(np.zeros((0, 8)), np.zeros((3, 8))).shape == (0, 3)
    out = driver.matmul(np.ones((2, 0)), np.ones((3, 0)))
    assert out.shape == (2, 3) and not out.any()


def test_sizes_refused_in_words():
    with pytest.raises(ValueError, match="rows"):
        driver.validate_size((65535 * 64 + 1, 8, 8))


# --- GPU ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_matmul_on_the_gpu(gpu, version):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((131, 200))          # K = 200: 16-byte rows, no padding
    b = rng.standard_normal((77, 200))
    got = driver.matmul(a, b, version=version)
    want = bf16.round(a).astype(float) @ bf16.round(b).astype(float).T
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < reference.TOL
    a = rng.standard_normal((5, 13))             # K = 13: the pad path
    b = rng.standard_normal((9, 13))
    got = driver.matmul(a, b, version=version)
    want = bf16.round(a).astype(float) @ bf16.round(b).astype(float).T
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < reference.TOL


@pytest.mark.parametrize("size", [(300, 136, 260), (300, 4096, 260)])
def test_cublas_baselines_agree(gpu, size):
    """common.hopper_gemm.cublas_bf16_nt: the baseline of days 45 and 48."""
    from common import harness as H
    from common.runner import to_host

    case = driver.make_case(size, np.random.default_rng(4))
    d = H.DeviceCase(case)
    for name, fn in driver.baselines(d).items():
        out = fn()
        if out is None:
            continue
        got = to_host(out).astype(np.float64)
        want = case.expected()["c"]
        assert np.linalg.norm(got - want) / np.linalg.norm(want) < reference.TOL, name
