import math

import numpy as np
import pytest

from common import fp8, tma
from days.day46_fp8_gemm import driver, reference


# --- common/fp8.py against hand-computed patterns ----------------------------------------------

@pytest.mark.parametrize("value,code", [
    (1.0, 0x38),            # 0.0111.000: exponent 7 - bias 7 = 0
    (1.125, 0x39),          # one mantissa step (1/8)
    (-2.0, 0xC0),           # 1.1000.000
    (448.0, 0x7E),          # 0.1111.110 = 1.75 x 2^8, the largest finite value
    (2.0 ** -6, 0x08),      # smallest normal: exponent field 1
    (2.0 ** -9, 0x01),      # smallest subnormal: 1 x 2^-9
    (7 * 2.0 ** -9, 0x07),  # largest subnormal
    (0.0, 0x00),
    (-0.0, 0x80),
    (0.1, 0x1D),            # 0.1 = 1.6 x 2^-4: exponent field 3, mantissa 1.625 (5/8) nearest
])
def test_e4m3_patterns(value, code):
    assert fp8.to_bits(np.float32(value)) == code
    if value == value:
        assert fp8.from_bits(np.uint8(code)) == np.float32(value if code != 0x1D else 0.1015625)


@pytest.mark.parametrize("value,code", [
    (1.0625, 0x38),             # halfway between 1 (0x38) and 1.125 (0x39): the even pattern
    (1.1875, 0x3A),             # halfway between 1.125 (0x39) and 1.25 (0x3A): the even pattern
    (1.0625 + 2 ** -20, 0x39),  # just above halfway: up
    (1.5 * 2.0 ** -9, 0x02),    # subnormal tie between 0x01 and 0x02: even
    (0.5 * 2.0 ** -9, 0x00),    # tie between 0 and the smallest subnormal: even (zero)
    (0.6 * 2.0 ** -9, 0x01),
    (464.0, 0x7E),              # tie between 448 and 480 (not a value: NaN's pattern): 448
    (470.0, 0x7E),              # saturates
    (1e6, 0x7E),
    (-1e30, 0xFE),
    (np.inf, 0x7E),             # no infinities in e4m3: saturate
    (-np.inf, 0xFE),
])
def test_e4m3_rounding_and_saturation(value, code):
    assert fp8.to_bits(np.float32(value)) == code


def test_e4m3_nan():
    assert fp8.to_bits(np.float32(np.nan)) == 0x7F
    assert fp8.to_bits(-np.float32(np.nan)) == 0xFF
    assert np.isnan(fp8.from_bits(np.array([0x7F, 0xFF], np.uint8))).all()


def _e4m3_by_definition(code):
    """The value of a pattern from the format's definition, one code at a time."""
    s = -1.0 if code & 0x80 else 1.0
    e, m = (code >> 3) & 0xF, code & 7
    if e == 15 and m == 7:
        return math.nan
    if e == 0:
        return s * m / 8 * 2.0 ** -6
    return s * (1 + m / 8) * 2.0 ** (e - 7)


def test_decode_every_pattern():
    got = fp8.from_bits(np.arange(256, dtype=np.uint8))
    want = np.array([_e4m3_by_definition(c) for c in range(256)])
    np.testing.assert_array_equal(got, want.astype(np.float32))


@pytest.mark.parametrize("fmt", ["e4m3", "e5m2"])
def test_encode_is_the_nearest_value(fmt):
    # a second formulation: the nearest finite value by brute force over the decode table,
    # ties to the even pattern, after clamping to the largest finite value
    table = fp8.from_bits(np.arange(256, dtype=np.uint8), fmt).astype(np.float64)
    finite = np.isfinite(table)
    vals, codes = table[finite], np.arange(256)[finite]
    top = fp8.FORMATS[fmt].max_finite
    rng = np.random.default_rng(0)
    grid = np.unique(vals)
    x = np.concatenate([rng.standard_normal(400) * np.exp(rng.uniform(-20, 12, 400)),
                        grid, (grid[:-1] + grid[1:]) / 2]).astype(np.float32)
    got = fp8.to_bits(x, fmt)
    for v, c in zip(x.astype(np.float64), got):
        d = np.abs(vals - np.clip(v, -top, top))
        cand = codes[d == d.min()]
        if len(cand) > 1:
            cand = [k for k in cand if k % 2 == 0]
        assert table[c] == table[cand[0]], (fmt, v, hex(c), hex(cand[0]))


def test_e5m2_patterns():
    assert fp8.to_bits(np.float32(1.0), "e5m2") == 0x3C         # 0.01111.00
    assert fp8.to_bits(np.float32(57344.0), "e5m2") == 0x7B     # 0.11110.11
    assert fp8.to_bits(np.float32(2.0 ** -16), "e5m2") == 0x01  # smallest subnormal
    assert fp8.to_bits(np.float32(np.inf), "e5m2") == 0x7B      # saturating
    assert fp8.from_bits(np.uint8(0x7C), "e5m2") == np.inf       # the pattern still decodes
    assert np.isnan(fp8.from_bits(np.uint8(0x7D), "e5m2"))


def test_quantize_scale_and_error():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((64, 200)).astype(np.float32) * 3
    codes, s = fp8.quantize(x)
    assert s == pytest.approx(np.abs(x).max() / 448, rel=1e-6)
    assert fp8.from_bits(codes).max() == 448 or fp8.from_bits(codes).min() == -448
    y = fp8.from_bits(codes).astype(np.float64) * s
    normal = np.abs(x) >= 2.0 ** -6 * s
    # 4 significant bits: rounding moves a normal value by at most 2^-4 of itself
    assert np.all(np.abs(y - x)[normal] <= 2.0 ** -4 * np.abs(x)[normal] * (1 + 1e-6))
    codes0, s0 = fp8.quantize(np.zeros((3, 3)))
    assert s0 == 1.0 and not codes0.any()


def test_fp8_bad_input():
    with pytest.raises(TypeError, match="real"):
        fp8.to_bits(np.array([1 + 2j]))
    with pytest.raises(TypeError, match="uint8"):
        fp8.from_bits(np.array([1, 2], np.int32))
    with pytest.raises(ValueError, match="e4m3"):
        fp8.to_bits(1.0, "e3m4")
    with pytest.raises(ValueError, match="finite"):
        fp8.quantize(np.array([1.0, np.inf]))


# --- the reference ------------------------------------------------------------------------------

def test_scaled_mm_by_hand():
    # A = [[1, 2], [3, 4]], B = [[5, 6], [7, 8]] (all exact in e4m3); A . B^T =
    # [[17, 23], [39, 53]]; times scale_a * scale_b = 0.5 * 4 = 2
    a = fp8.to_bits(np.array([[1, 2], [3, 4]], np.float32))
    b = fp8.to_bits(np.array([[5, 6], [7, 8]], np.float32))
    np.testing.assert_array_equal(reference.scaled_mm(a, b, 0.5, 4.0), [[34, 46], [78, 106]])


def test_scaled_mm_against_a_loop():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (5, 7)).astype(np.uint8) & 0xF7    # no NaN patterns
    b = rng.integers(0, 256, (4, 7)).astype(np.uint8) & 0xF7
    fa = [[_e4m3_by_definition(int(c)) for c in row] for row in a]
    fb = [[_e4m3_by_definition(int(c)) for c in row] for row in b]
    want = [[0.25 * 3 * sum(fa[i][k] * fb[j][k] for k in range(7)) for j in range(4)]
            for i in range(5)]
    np.testing.assert_allclose(reference.scaled_mm(a, b, 0.25, 3), want, rtol=1e-14)


def test_accumulation_budget():
    # 2^-14 * (K / 32) / sqrt(3): 9.0e-3 at K = 8192
    assert reference.accumulation_budget(8192) == pytest.approx(2 ** -14 * 256 / math.sqrt(3))
    assert reference.accumulation_budget(1) == pytest.approx(2 ** -14 / math.sqrt(3))
    assert reference.tol(8192) == pytest.approx(2 ** -8 + 9.02e-3 + 1e-4, rel=1e-3)


def _rel(x, ref):
    return np.linalg.norm(x - ref) / np.linalg.norm(ref)


def test_model_of_the_fast_accumulator_fits_the_budget():
    rng = np.random.default_rng(3)
    k = 8192
    qa, sa = fp8.quantize(rng.standard_normal((16, k), dtype=np.float32))
    qb, sb = fp8.quantize(rng.standard_normal((16, k), dtype=np.float32))
    exact = reference.scaled_mm(qa, qb, sa, sb)
    fast = reference.emulate_fast_accumulation(qa, qb, sa, sb)
    err = _rel(fast, exact)
    # the model loses something (it is not an fp32 sum) but stays inside the budget
    assert 1e-3 < err < reference.accumulation_budget(k)
    # ... and with its bf16 output inside the tolerance
    from common import bf16

    assert _rel(bf16.round(fast), exact) < reference.tol(k)


def test_tolerance_catches_a_dropped_k_step_and_a_wrong_scale():
    rng = np.random.default_rng(4)
    k = 8192
    qa, sa = fp8.quantize(rng.standard_normal((32, k), dtype=np.float32))
    qb, sb = fp8.quantize(rng.standard_normal((32, k), dtype=np.float32))
    exact = reference.scaled_mm(qa, qb, sa, sb)
    dropped = qa.copy()
    dropped[:, 4096:4128] = 0                       # one 32-deep step of 256 missing
    assert _rel(reference.scaled_mm(dropped, qb, sa, sb), exact) > 3 * reference.tol(k)
    assert _rel(reference.scaled_mm(qa, qb, sa, 1.0), exact) > 10 * reference.tol(k)  # scale_b lost


def test_flops():
    assert reference.flops(2, 3, 4) == 48


# --- the generated header, tensor maps, launch geometry -----------------------------------------

def test_wgmma_header_has_the_8bit_shapes():
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("gen_wgmma", root / "scripts" / "gen_wgmma.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    text = gen.expected_text()
    assert (root / "common" / "cuda" / "wgmma.cuh").read_text() == text
    assert "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3" in text
    assert "m64n128k32_e4m3(float (&d)[64]" in text
    # 8-bit types: scale immediates but no transpose immediates
    line = next(ln for ln in text.splitlines() if "m64n256k32.f32.e4m3" in ln and "wgmma" in ln)
    nxt = text.splitlines()[text.splitlines().index(line) + 1]
    assert nxt.strip().endswith('p, 1, 1;\\n\\t}"')


def test_tensor_map_needs_16_byte_rows():
    with pytest.raises(ValueError, match="multiples of 16"):
        tma.check_tiled("uint8", (100, 64), [100], (128, 128), 128, 0x1000)
    tma.check_tiled("uint8", (112, 64), [112], (128, 128), 128, 0x1000)   # K % 16 == 0: fine


def test_grids(monkeypatch):
    from common import gpu

    monkeypatch.setattr(gpu, "sm_count", lambda: 132)
    assert driver.grid_of("v1", 8192, 8192) == (32, 64, 1)
    assert driver.grid_of("v2", 8192, 8192) == (132, 1, 1)          # 2048 tiles, 132 blocks
    assert driver.grid_of("v2", 100, 100) == (1, 1, 1)
    assert driver.grid_of("v3", 8192, 8192) == (132, 1, 1)          # 66 clusters of 2
    assert driver.grid_of("v4", 129, 257) == (4, 1, 1)              # 2 column tiles x 1 pair
    assert driver.grid_of("v4_c1", 129, 257) == (4, 1, 1)           # 2 x 2 tiles, no pairs
    assert driver.grid_of("v3_f2_g16", 100, 100) == (2, 1, 1)       # one (half-empty) pair


def test_shared_memory_fits():
    # 227 KB of dynamic shared memory a block at most on Hopper (+1 KB to align the tiles)
    assert max(driver.smem_of(v) for v in driver.VERSIONS) <= 227 * 1024


def test_every_candidate_is_a_kernel():
    src = (driver.K.path).read_text()
    for name in list(driver.VERSIONS) + list(driver.CANDIDATES):
        assert f"fp8_gemm_{name}" in src, name


# --- public functions ---------------------------------------------------------------------------

@pytest.mark.parametrize("a,b,sa,sb,exc,msg", [
    (np.zeros((3, 4), np.uint8), np.zeros((5, 3), np.uint8), 1.0, 1.0, ValueError, "same K"),
    (np.zeros(4, np.uint8), np.zeros((5, 4), np.uint8), 1.0, 1.0, ValueError, "2-D"),
    (np.full((2, 4), 2.5), np.zeros((5, 4), np.uint8), 1.0, 1.0, ValueError, "whole"),
    (np.full((2, 4), 300), np.zeros((5, 4), np.uint8), 1.0, 1.0, ValueError, "outside"),
    (np.zeros((2, 4), np.uint8), np.zeros((5, 4), np.uint8), 0.0, 1.0, ValueError, "scale_a"),
    (np.zeros((2, 4), np.uint8), np.zeros((5, 4), np.uint8), 1.0, np.inf, ValueError, "finite"),
    (np.zeros((2, 4), np.uint8), np.zeros((5, 4), np.uint8), "1", 1.0, TypeError, "real"),
    (np.zeros((2, 4), np.uint8), None, 1.0, 1.0, TypeError, "None"),
])
def test_scaled_mm_bad_input(a, b, sa, sb, exc, msg):
    with pytest.raises(exc, match=msg):
        driver.scaled_mm(a, b, sa, sb)


@pytest.mark.parametrize("a,b,exc,msg", [
    (np.zeros((3, 4)), np.zeros((5, 3)), ValueError, "same K"),
    (np.full((3, 4), np.nan), np.zeros((5, 4)), ValueError, "NaN"),
    (np.zeros((3, 4), complex), np.zeros((5, 4)), TypeError, "real"),
    ("x", np.zeros((5, 4)), TypeError, "string"),
])
def test_matmul_bad_input(a, b, exc, msg):
    with pytest.raises(exc, match=msg):
        driver.matmul(a, b)


def test_unknown_version():
    with pytest.raises(ValueError, match="v1, v2"):
        driver.matmul(np.zeros((2, 16)), np.zeros((2, 16)), version="v9")
    with pytest.raises(ValueError, match="v1, v2"):
        driver.launch("v3_f1_g8", None)          # a sweep candidate is no version


def test_empty_needs_no_gpu():
    assert driver.matmul(np.zeros((0, 16)), np.zeros((3, 16))).shape == (0, 3)
    out = driver.scaled_mm(np.ones((2, 0), np.uint8), np.ones((3, 0), np.uint8), 1.0, 1.0)
    assert out.shape == (2, 3) and not out.any()


def test_sizes_refused_in_words():
    with pytest.raises(ValueError, match="rows"):
        driver.validate_size((65535 * 128 + 1, 16, 16))
    with pytest.raises(ValueError, match="32-bit"):
        driver.validate_size((1, 2 ** 31, 1))


# --- GPU ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_matmul_on_the_gpu(gpu, version):
    rng = np.random.default_rng(5)
    for m, k, n in ((131, 208, 77), (5, 13, 9)):     # 16-byte rows; the pad path
        a = rng.standard_normal((m, k))
        b = rng.standard_normal((n, k))
        qa, sa = fp8.quantize(a)
        qb, sb = fp8.quantize(b)
        got = driver.matmul(a, b, version=version)
        want = reference.scaled_mm(qa, qb, sa, sb)
        assert _rel(got, want) < reference.tol(k)


def test_promoted_version_has_fp32_accuracy(gpu):
    # K = 8192: v4 within the bf16 rounding of C (plus fp32 slack), whatever the fast
    # accumulation's budget; this is what the promotion is for
    rng = np.random.default_rng(6)
    qa, sa = fp8.quantize(rng.standard_normal((256, 8192), dtype=np.float32))
    qb, sb = fp8.quantize(rng.standard_normal((256, 8192), dtype=np.float32))
    want = reference.scaled_mm(qa, qb, sa, sb)
    got = driver.scaled_mm(qa, qb, sa, sb, version="v4")
    assert _rel(got, want) < 2.0 ** -8 + 1e-4


def test_scales_are_applied(gpu):
    a = fp8.to_bits(np.ones((3, 32)))
    b = fp8.to_bits(np.full((2, 32), 2.0))
    got = driver.scaled_mm(a, b, 0.5, 0.25)          # 32 x (1 x 2) x 0.125 = 8
    np.testing.assert_array_equal(got, np.full((3, 2), 8.0, np.float32))


def test_torch_baselines_agree(gpu):
    from common import harness as H
    from common.runner import to_host

    case = driver.make_case((300, 144, 256), np.random.default_rng(7))
    d = H.DeviceCase(case)
    fns = driver.baselines(d)
    if not fns:
        pytest.skip("torch with CUDA is not installed")
    for name, fn in fns.items():
        got = to_host(fn()).astype(np.float64)
        assert _rel(got, case.expected()["c"]) < reference.tol(144), name
