import numpy as np
import pytest

from common import bf16
from days.day41_wmma_hgemm import reference

DRV = "days.day41_wmma_hgemm.driver"


def _driver():
    import importlib

    return importlib.import_module(DRV)


# --- common/bf16.py against hand-computed bit patterns -----------------------------------------------

@pytest.mark.parametrize("x,bits", [
    (1.0, 0x3F80), (-2.5, 0xC020), (0.0, 0x0000), (-0.0, 0x8000),
    (1.0 + 2 ** -7, 0x3F81),            # exactly representable (8 significant bits)
    (1.0 + 2 ** -8, 0x3F80),            # halfway between 0x3F80 and 0x3F81: ties to even (down)
    (1.0 + 3 * 2 ** -8, 0x3F82),        # halfway between 0x3F81 and 0x3F82: ties to even (up)
    (1.0 + 2 ** -8 + 2 ** -20, 0x3F81),  # just above halfway: up
    (3.0, 0x4040), (0.1, 0x3DCD),        # 0.1f = 0x3DCCCCCD: low half 0xCCCD > 0x8000, up
    (np.float32(3.4028235e38), 0x7F80),  # float32 max rounds to infinity
    (np.inf, 0x7F80), (-np.inf, 0xFF80),
    (1e-40, 0x0001),                     # float32 subnormal 0x000116C2 -> the smallest bf16 subnormal
])
def test_bf16_to_bits_by_hand(x, bits):
    assert int(bf16.to_bits(np.array([x], np.float32))[0]) == bits


def test_bf16_nan_stays_nan_with_its_sign():
    f = np.array([0x7FC00000, 0x7F800001, 0xFF800001], np.uint32).view(np.float32)
    # the plain rounding formula would send 0x7F800001 to 0x7F80 = infinity
    np.testing.assert_array_equal(bf16.to_bits(f), [0x7FC0, 0x7FC0, 0xFFC0])
    assert np.isnan(bf16.from_bits(bf16.to_bits(f))).all()


def test_bf16_from_bits_and_round():
    np.testing.assert_array_equal(bf16.from_bits(np.array([0x3F80, 0xC020, 0x7F7F], np.uint16)),
                                  np.array([1.0, -2.5, 3.3895314e38], np.float32))
    x = np.random.default_rng(1).standard_normal(1000).astype(np.float32)
    r = bf16.round(x)
    assert (bf16.to_bits(r) == bf16.to_bits(x)).all()               # idempotent
    assert np.all(np.abs(r - x) <= np.abs(x) * 2.0 ** -8)           # half a unit of 8 bits
    with pytest.raises(TypeError, match="uint16"):
        bf16.from_bits(np.array([1, 2], np.int32))


def test_bf16_random_bits_are_bf16_values():
    b = bf16.random_bits(np.random.default_rng(0), (4, 5))
    assert b.dtype == np.uint16 and b.shape == (4, 5)
    assert (bf16.to_bits(bf16.from_bits(b)) == b).all()


# --- the reference and the tolerance -------------------------------------------------------------------

def test_reference_by_hand():
    a = bf16.to_bits(np.array([[1.0, 2.0], [3.0, 4.0]]))
    b = bf16.to_bits(np.array([[5.0], [6.0]]))
    np.testing.assert_array_equal(reference.matmul(a, b), [[17.0], [39.0]])
    # the product of the ROUNDED inputs: 1 + 2^-8 rounds to 1
    a = bf16.to_bits(np.array([[1.0 + 2 ** -8]]))
    assert reference.matmul(a, bf16.to_bits(np.array([[3.0]])))[0, 0] == 3.0


@pytest.mark.parametrize("k", [16, 257, 2048])
def test_tolerance_passes_truncating_accumulation_with_room(k):
    rng = np.random.default_rng(k)
    a, b = bf16.random_bits(rng, (24, k)), bf16.random_bits(rng, (k, 20))
    ref = reference.matmul(a, b)
    err = reference.rel_l2(reference.accumulate_truncating(a, b), ref)
    assert 0 < err and 10 * err < reference.tolerance(k)


@pytest.mark.parametrize("k", [32, 1024, 8192])
def test_tolerance_fails_a_dropped_k_slice(k):
    rng = np.random.default_rng(k + 1)
    a, b = bf16.random_bits(rng, (16, k)), bf16.random_bits(rng, (k, 16))
    ref = reference.matmul(a, b)
    a_drop = a.copy()
    a_drop[:, 16:32] = 0                           # one k16 slice missing
    err = reference.rel_l2(reference.matmul(a_drop, b), ref)
    assert err > 10 * reference.tolerance(k)


def test_tolerance_values():
    assert reference.tolerance(1) == 16 * 2.0 ** -24
    assert reference.tolerance(8192) == 4096 * 2.0 ** -24


def test_padded_and_round_up():
    a = np.arange(6, dtype=np.uint16).reshape(2, 3)
    p = reference.padded(a, 3, 8)
    assert p.shape == (3, 8) and (p[:2, :3] == a).all() and p[2].sum() == 0 and p[:, 3:].sum() == 0
    assert [reference.round_up(v, 8) for v in (1, 8, 9, 4099)] == [8, 8, 16, 4104]


def test_shared_memory_arithmetic():
    assert reference.smem_bytes_per_flop(64, 64) == 1 / 32
    assert reference.smem_bytes_per_flop(16, 16) == 1 / 8
    # 8 rows of a 64-byte (32 bf16) row: 2 bank groups -> 4 passes; padded to 80 bytes: 8 groups
    assert reference.bank_groups(64) == 2 and reference.bank_groups(80) == 8
    # B rows of 128 bf16 (256 bytes): every row in one group; padded to 136 bf16: 8 groups
    assert reference.bank_groups(256) == 1 and reference.bank_groups(272) == 8


# --- the driver's choices (no GPU needed) -----------------------------------------------------------

def test_check_sizes_cover_the_paths():
    drv = _driver()
    s = drv.CHECK_SIZES
    assert (1, 1, 1) in s
    assert any(k % 8 for m, k, n in s)                          # padded A and B
    assert any(n % 2 for m, k, n in s)                          # odd N: scalar stores
    assert any(k % 8 == 0 and k % 32 and n % 8 == 0 for m, k, n in s)   # partial k-tile, no pad
    assert any(m % 128 and n % 128 and m > 128 and n > 128 for m, k, n in s)
    assert any(k > 1000 for m, k, n in s)
    m, k, n = drv.AWKWARD
    assert m % 2 and k % 8 and n % 8 and drv.BAR_SIZE in drv.BENCH_SIZES


def test_make_case():
    drv = _driver()
    c = drv.make_case((5, 40, 7), np.random.default_rng(0))
    assert c.inputs["a"].dtype == np.uint16 and c.inputs["b"].shape == (40, 7)
    assert c.tol == reference.tolerance(40) and c.unit == "bf16" and c.flops == 2 * 5 * 7 * 40
    assert c.bytes == 2 * 5 * 40 + 2 * 40 * 7 + 4 * 5 * 7
    np.testing.assert_array_equal(c.expected()["c"], reference.matmul(c.inputs["a"], c.inputs["b"]))


def test_kernel_table_matches_kernel_cu():
    import re
    from pathlib import Path

    drv = _driver()
    src = (Path(drv.__file__).parent / "kernel.cu").read_text()
    bigs = {m[0]: tuple(map(int, m[1:5])) for m in re.findall(
        r"using (\w+) = Big<(\d+), (\d+), (\d+), (\d+), (\d+), (\w+)>;", src)}
    entries = re.findall(r"^WMMA_BIG\((\w+), (\w+), (\d)\)", src, flags=re.M)
    assert {e[0] for e in entries} | {"hgemm_wmma_v1", "hgemm_wmma_v2"} == set(drv.KERNELS)
    for name, big, _ in entries:
        bm, bn, wm, wn = bigs[big]
        assert drv.KERNELS[name][:3] == (bm, bn, 32 * (bm // wm) * (bn // wn)), name
        if "_cand_" in name:
            assert f"_{bm}x{bn}_w{wm}x{wn}_" in name
    # the shared-memory table lists v1..v5 then the candidates in the order of the driver
    table = re.search(r"hgemm_wmma_smem\[(\d+)\] = \{([^}]*)\}", src)
    assert int(table[1]) == len(table[2].split(",")) == max(drv.SMEM_INDEX.values()) + 1
    cands = [e[0] for e in entries if "_cand_" in e[0]]
    assert [drv.SMEM_INDEX[c] for c in cands] == list(range(6, 6 + len(cands)))
    for v in drv.VERSIONS:
        assert f"hgemm_wmma_{v}" in drv.KERNELS


def test_bar():
    drv = _driver()
    assert drv.BAR == [{"sizes": [(8192, 8192, 8192)], "vs_baseline": 0.40}]


# --- public functions: bad input is refused before anything reaches the GPU -------------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3), np.complex64), np.ones((3, 2)), TypeError, "complex"),
    (np.ones((2, 3)), np.ones((3, 2), bool), TypeError, "booleans"),
    ("abc", np.ones((3, 2)), TypeError, "string"),
    (np.ones(3), np.ones((3, 2)), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((4, 2)), ValueError, "rows"),
])
def test_matmul_refuses(a, b, exc, word):
    _raises(exc, word, lambda: _driver().matmul(a, b))


def test_matmul_bits_refuses():
    drv = _driver()
    u = np.zeros((2, 3), np.uint16)
    _raises(TypeError, "uint16", lambda: drv.matmul_bits(np.zeros((2, 3), np.float32), u.T))
    _raises(TypeError, "uint16", lambda: drv.matmul_bits([[1, 2]], u))
    _raises(ValueError, "2-D", lambda: drv.matmul_bits(np.zeros(3, np.uint16), u))
    _raises(ValueError, "rows", lambda: drv.matmul_bits(u, u))
    # a dimension the kernels' int arguments cannot hold (no memory needed: zero rows)
    _raises(ValueError, "int dimensions",
            lambda: drv.matmul_bits(np.zeros((0, 2 ** 31), np.uint16), np.zeros((2 ** 31, 0), np.uint16)))
    _raises(ValueError, "unknown version", lambda: drv.matmul_bits(u, u.T, version="v9"))
    _raises(TypeError, "version", lambda: drv.matmul(np.ones((2, 2)), np.ones((2, 2)), version=3))


def test_empty_products_need_no_gpu():
    drv = _driver()
    out = drv.matmul_bits(np.zeros((0, 5), np.uint16), np.zeros((5, 3), np.uint16))
    assert out.shape == (0, 3) and out.dtype == np.float32
    out = drv.matmul(np.ones((2, 0)), np.ones((0, 3)))
    assert out.shape == (2, 3) and (out == 0).all()


# --- on the GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
def test_matmul_on_gpu_ragged(gpu, version):
    drv = _driver()
    rng = np.random.default_rng(41)
    for m, k, n in [(1, 1, 1), (130, 70, 257), (257, 1000, 129), (1000, 777, 513)]:
        a, b = rng.standard_normal((m, k)), rng.standard_normal((k, n))
        got = drv.matmul(a, b, version=version)
        ref = reference.matmul(bf16.to_bits(a), bf16.to_bits(b))
        assert reference.rel_l2(got, ref) <= reference.tolerance(k), (version, m, k, n)


def test_cublas_baselines_on_gpu(gpu):
    from common import harness as H
    from common.runner import to_host

    drv = _driver()
    case = drv.make_case((300, 136, 520), np.random.default_rng(3))
    d = H.DeviceCase(case)
    libs = drv.baselines(d)
    got = to_host(libs[drv.CUBLAS_F32]())
    assert reference.rel_l2(got, case.expected()["c"]) <= case.tol
    libs[drv.CUBLAS_BF16]()
    c16 = bf16.from_bits(d._scratch["c_bf16"].get())
    assert reference.rel_l2(c16, case.expected()["c"]) < 2 ** -8   # bf16 output: 8 bits


def test_flop_per_byte_and_lane_banks():
    assert reference.flop_per_byte(16, 16) == 8 and reference.flop_per_byte(128, 128) == 64
    assert reference.flop_per_byte(128, 256) == pytest.approx(85.33, abs=0.01)
    # 64-byte A rows (BK = 32): rows g and g+2 share banks -> 4-way; 80-byte rows: none
    assert reference.lane_banks(64) == 4 and reference.lane_banks(80) == 1
    # 256-byte B rows (BN = 128): all 8 rows in the same 4 banks -> 8-way; 272-byte rows: none
    assert reference.lane_banks(256) == 8 and reference.lane_banks(272) == 1
