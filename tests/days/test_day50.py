import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from common import bf16
from days.day50_gemv_decode import reference

DRV = "days.day50_gemv_decode.driver"
KERNEL = Path(reference.__file__).parent / "kernel.cu"


def _driver():
    import importlib

    return importlib.import_module(DRV)


def _rel(a, b):
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


# --- the reference against hand-computed values and a second formulation ----------------------

def test_reference_by_hand():
    w = bf16.to_bits(np.array([[1.0, 2.0], [3.0, 4.0], [-0.5, 0.25]]))
    x = bf16.to_bits(np.array([5.0, 6.0]))
    np.testing.assert_array_equal(reference.gemv(w, x), [17.0, 39.0, -1.0])
    # the product of the ROUNDED inputs: 1 + 2^-8 rounds (ties to even) to 1
    w = bf16.to_bits(np.array([[1.0 + 2 ** -8]]))
    assert reference.gemv(w, bf16.to_bits(np.array([3.0])))[0] == 3.0


def _decode_by_formula(bits):
    """bf16 bits -> float64 by sign, exponent and mantissa (normal numbers and zero only)."""
    b = bits.astype(np.int64)
    s = np.where(b >> 15, -1.0, 1.0)
    e = (b >> 7) & 0xFF
    m = b & 0x7F
    assert np.all((e > 0) & (e < 255) | (b & 0x7FFF == 0))
    return np.where(b & 0x7FFF == 0, 0.0, s * np.ldexp(1.0 + m / 128.0, e - 127))


def test_reference_matches_an_exact_sum_of_decoded_values():
    rng = np.random.default_rng(5)
    w = bf16.random_bits(rng, (7, 300))
    x = bf16.random_bits(rng, (300,))
    wd, xd = _decode_by_formula(w), _decode_by_formula(x)
    exact = [math.fsum(wd[i] * xd) for i in range(7)]      # each product is exact in float64
    np.testing.assert_allclose(reference.gemv(w, x), exact, rtol=1e-13, atol=1e-13)


def test_reference_rows_in_pieces_equal_one_product():
    rng = np.random.default_rng(6)
    n = reference.ROWS_PER_PIECE + 37                         # two pieces, the second partial
    w, x = bf16.random_bits(rng, (n, 24)), bf16.random_bits(rng, (24,))
    full = bf16.from_bits(w).astype(np.float64) @ bf16.from_bits(x).astype(np.float64)
    np.testing.assert_array_equal(reference.gemv(w, x), full)


def test_rounded_reference_ties_to_even():
    # 256 ones: exactly 256; 257 ones: 257 lies halfway between the bf16 values 256 and 258 and
    # rounds to the even significand (256); 259 -> 260 (halfway between 258 and 260: even is 260)
    for k, want in ((256, 256.0), (257, 256.0), (259, 260.0)):
        w = bf16.to_bits(np.ones((2, k)))
        x = bf16.to_bits(np.ones(k))
        assert list(reference.gemv_rounded(w, x)) == [want, want]


# --- tolerance and bound: pass the right answer with room, fail a wrong one ---------------------

@pytest.mark.parametrize("k", [8, 1000, 11008])
def test_tolerance_passes_bf16_rounding_and_fp32_sums(k):
    rng = np.random.default_rng(k)
    w = bf16.random_bits(rng, (300, k))
    x = bf16.random_bits(rng, (k,), scale=1 / np.sqrt(k))
    y = reference.gemv(w, x)
    # fp32 sums in row order (np.add.accumulate is sequential), then bf16 rounding
    prods = (bf16.from_bits(w) * bf16.from_bits(x)).astype(np.float32)
    seq = np.add.accumulate(prods, axis=1, dtype=np.float32)[:, -1]
    got = bf16.round(seq)
    err = _rel(got, y)
    assert 0 < err < 0.75 * reference.tolerance(k)
    assert np.all(np.abs(got - y) <= reference.error_bound(w, x))


@pytest.mark.parametrize("k", [64, 4096, 11008])
def test_tolerance_fails_a_dropped_chunk(k):
    rng = np.random.default_rng(k + 1)
    w = bf16.random_bits(rng, (64, k))
    x = bf16.random_bits(rng, (k,), scale=1 / np.sqrt(k))
    y = reference.gemv(w, x)
    dropped = w.copy()
    dropped[:, 8:16] = 0                       # one 16-byte chunk of every row missing
    assert _rel(reference.gemv(dropped, x), y) > 3 * reference.tolerance(k)


def test_error_bound_fails_a_small_real_error():
    rng = np.random.default_rng(9)
    w, x = bf16.random_bits(rng, (50, 512)), bf16.random_bits(rng, (512,))
    y = reference.gemv(w, x)
    b = reference.error_bound(w, x)
    assert np.all(np.abs(bf16.round(y) - y) <= b)
    assert np.any(np.abs(y * 1.02 - y) > b)     # 2% off: more than bf16 can explain


def test_tolerance_values():
    assert reference.tolerance(1) == 2 ** -8 + 16 * 2 ** -24
    assert reference.tolerance(4096) == 2 ** -8 + 2048 * 2 ** -24


# --- the row layout and the arithmetic the README quotes -----------------------------------------

@pytest.mark.parametrize("k,row,want", [
    (4096, 0, (0, 512, 0)), (4096, 17, (0, 512, 0)),
    (13, 0, (0, 1, 5)),       # starts aligned: one chunk, 5 left
    (13, 1, (3, 1, 2)),       # element 13: 3 to the boundary at 16, one chunk, 2 left
    (3, 1, (3, 0, 0)),        # shorter than its head: all scalar
    (7, 2, (2, 0, 5)),        # elements 14..20: 14, 15, then 5 (no whole chunk)
    (4100, 1, (4, 512, 0)),   # K % 8 == 4: odd rows start half way into a chunk
])
def test_row_pieces_by_hand(k, row, want):
    assert reference.row_pieces(k, row) == want


def test_row_pieces_cover_every_row_aligned():
    for k in list(range(1, 41)) + [4097, 4098, 4100, 11008]:
        xa = reference.x_alignment(k)
        for row in range(20):
            head, chunks, tail = reference.row_pieces(k, row)
            assert head + 8 * chunks + tail == k and 0 <= head <= 7 and 0 <= tail <= 7
            if chunks:
                assert (row * k + head) % 8 == 0        # 16-byte aligned body
                assert head % xa == 0                   # x pieces of XA elements are aligned


def test_x_alignment_and_bytes():
    assert [reference.x_alignment(k) for k in (4096, 4100, 4098, 4097, 1)] == [8, 4, 2, 1, 1]
    assert reference.bytes_moved(4096, 4096) == (2 * 4096 * 4096 + 2 * 4096 * 2,
                                                 2 * 4096 * 4096 + 2 * 4096)


def test_in_flight_arithmetic():
    # v4 at K = 4096: 32 registers -> 8 blocks of 256 (2048 threads), 2 chunks each: 64 KB
    assert reference.blocks_per_sm(256, 32) == 8
    assert reference.bytes_in_flight(8 * 256, 2) == 64 * 1024
    # v3: 72 registers -> 3 blocks of 256, 2 rows x 4 chunks each: 96 KB
    assert reference.blocks_per_sm(256, 72) == 3
    assert reference.bytes_in_flight(3 * 256, 8) == 96 * 1024
    # v2: 22 registers (24 allocated) -> 8 blocks, one chunk each: 32 KB; v1 reads 2 bytes
    assert reference.blocks_per_sm(256, 22) == 8 and reference.bytes_in_flight(2048, 1) == 32768


# --- the driver (no GPU) ------------------------------------------------------------------------

def _instantiated():
    """Entry points kernel.cu builds without -DDAY50_SWEEP (from its macro calls)."""
    src = KERNEL.read_text().split("#ifdef DAY50_SWEEP")[0]
    names = {"gemv_v1"}
    for xa in re.findall(r"GEMV_V2\((\d)\)", src.split("#define GEMV_V2")[1].split("#define")[0]):
        names.add(f"gemv_v2_x{xa}")
    xas = (8, 4, 2, 1)
    for r, u in re.findall(r"^GEMV_V3_ALL\((\d+), (\d+)\)", src, re.M):
        names |= {f"gemv_v3_r{r}_u{u}_x{xa}" for xa in xas}
    for t, r, u in re.findall(r"GEMV_V4_ALL\((\d+), (\d+), (\d+)\)", src.split("GEMV_V4(T, R, U, 1)")[1]):
        names |= {f"gemv_v4_t{t}_r{r}_u{u}_x{xa}" for xa in xas}
    return names


def test_every_launch_names_a_built_kernel():
    drv = _driver()
    built = _instantiated()
    assert "gemv_v4_t256_r1_u8_x1" in built and "gemv_v3_r2_u4_x8" in built
    for n, k in drv.CHECK_SIZES + drv.BENCH_SIZES + [(5, 100000)]:
        for v in drv.VERSIONS:
            name, grid, block = drv.kernel_for(v, n, k)
            assert name in built, (v, n, k, name)
            assert block[0] % 32 == 0 and block[0] <= 512
            rows = {"v1": block[0], "v2": block[0] // 32, "v3": drv.V3[0] * block[0] // 32,
                    "v4": drv.V4_ROWS}[v]
            assert grid[0] * rows >= n and (grid[0] - 1) * rows < n   # every row, no empty block


def test_v4_unroll_covers_a_row_in_one_pass_when_it_can():
    drv = _driver()
    assert [drv.v4_unroll(k) for k in (8, 4096, 4104, 8192, 11008, 16384, 16392)] == \
        [2, 2, 4, 4, 8, 8, 8]


def test_check_sizes_cover_the_paths():
    drv = _driver()
    ks = [k for _, k in drv.CHECK_SIZES]
    assert {reference.x_alignment(k) for k in ks} == {8, 4, 2, 1}
    assert 1 in ks and any(n == 1 for n, _ in drv.CHECK_SIZES) and any(k < 8 for k in ks)
    assert any(k // 8 > 256 * 8 and k % 8 == 0 for k in ks)      # v4: a second pass, aligned
    assert any(k // 8 > 256 * 8 and k % 8 for k in ks)           # ... and ragged
    assert any(n % 16 and n > 16 for n, _ in drv.CHECK_SIZES)     # v3: partial last block


def test_make_case_is_read_only_and_bf16():
    from common.timing import mix_of

    drv = _driver()
    c = drv.make_case((5, 40), np.random.default_rng(0))
    assert c.inputs["w"].dtype == np.uint16 and c.inputs["x"].shape == (40,)
    assert c.outputs == {"y": ((5,), np.uint16)} and c.tol == reference.tolerance(40)
    assert (c.bytes, c.read_bytes) == reference.bytes_moved(5, 40)
    np.testing.assert_array_equal(c.expected()["y"], reference.gemv(c.inputs["w"], c.inputs["x"]))
    np.testing.assert_array_equal(c.decode["y"](np.array([0x3F80], np.uint16)), [1.0])
    for n, k in drv.BENCH_SIZES:                  # held to the read-only stream ceiling
        assert mix_of(*reference.bytes_moved(n, k)) == (1, 0)


def test_bar():
    drv = _driver()
    assert drv.BAR == [{"sizes": [(4096, 4096), (4096, 11008), (11008, 4096)], "size_pct": 90,
                        "vs_baseline": 1.0}]
    assert set(drv.CURRICULUM) <= set(drv.BENCH_SIZES)


@pytest.mark.skipif(not (shutil.which("nvcc") and shutil.which("cuobjdump")), reason="no nvcc")
def test_unrolled_loads_are_issued_back_to_back(tmp_path):
    """The README's claim: v3 and v4 issue all their loads of a pass before the first FFMA
    (ptxas does so only with the launch bounds' minimum of blocks; without it, 2 at a time)."""
    from common.build import BASE_FLAGS, INCLUDE_DIRS

    cubin = tmp_path / "k.cubin"
    subprocess.run(["nvcc", "-cubin", *BASE_FLAGS, "-arch=sm_90", *[f"-I{d}" for d in INCLUDE_DIRS],
                    str(KERNEL), "-o", str(cubin)], check=True, capture_output=True)
    sass = subprocess.run(["cuobjdump", "-sass", str(cubin)], capture_output=True, text=True).stdout
    want = {"gemv_v2_x8": 2, "gemv_v3_r2_u4_x8": 12, "gemv_v4_t256_r1_u2_x8": 4,
            "gemv_v4_t256_r1_u4_x8": 8, "gemv_v4_t256_r1_u8_x8": 16}
    for blk in sass.split("Function : ")[1:]:
        name = blk.split()[0]
        if name in want:
            ops = re.findall(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?P\d\s+)?([A-Z][A-Z0-9_.]*)", blk)
            seq = [o for o in ops if o.startswith("LDG") or o == "FFMA"]
            first = seq.index("FFMA")
            assert first == want.pop(name), (name, seq[:20])
    assert not want, f"kernels not found: {want}"


# --- public functions: bad input is refused before anything reaches the GPU -----------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("w,x,exc,word", [
    (np.ones((2, 3), np.complex64), np.ones(3), TypeError, "complex"),
    (np.ones((2, 3)), np.ones(3, bool), TypeError, "booleans"),
    ("abc", np.ones(3), TypeError, "string"),
    (np.ones(3), np.ones(3), ValueError, "2-D"),
    (np.ones((2, 3)), np.ones((1, 3)), ValueError, "1-D"),
    (np.ones((2, 3)), np.ones(4), ValueError, "K = 3"),
    ([[1, 2], [3]], np.ones(2), ValueError, "ragged"),
])
def test_gemv_refuses(w, x, exc, word):
    _raises(exc, word, lambda: _driver().gemv(w, x))


def test_gemv_bits_refuses():
    drv = _driver()
    w, x = np.zeros((2, 3), np.uint16), np.zeros(3, np.uint16)
    _raises(TypeError, "uint16", lambda: drv.gemv_bits(w.astype(np.float32), x))
    _raises(TypeError, "uint16", lambda: drv.gemv_bits(w, [0, 0, 0]))
    _raises(ValueError, "2-D", lambda: drv.gemv_bits(x, x))
    _raises(ValueError, "1-D", lambda: drv.gemv_bits(w, w))
    _raises(ValueError, "K = 3", lambda: drv.gemv_bits(w, np.zeros(2, np.uint16)))
    # more rows than the kernels' int row indices take (no memory needed: zero columns)
    _raises(ValueError, "rows", lambda: drv.gemv_bits(np.zeros((2 ** 31, 0), np.uint16),
                                                      np.zeros(0, np.uint16)))
    _raises(ValueError, "unknown version", lambda: drv.gemv_bits(w, x, version="v9"))
    _raises(TypeError, "version", lambda: drv.gemv(np.ones((2, 2)), np.ones(2), version=4))


def test_empty_inputs_need_no_gpu():
    drv = _driver()
    y = drv.gemv_bits(np.zeros((0, 5), np.uint16), np.zeros(5, np.uint16))
    assert y.shape == (0,) and y.dtype == np.uint16
    y = drv.gemv(np.ones((3, 0)), np.ones(0))
    assert y.dtype == np.float32 and list(y) == [0.0, 0.0, 0.0]


def test_launch_refuses_an_unknown_version():
    _raises(ValueError, "unknown version", lambda: _driver().launch("v7", None))


# --- on the GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4"])
def test_every_element_within_the_bound_on_gpu(gpu, version):
    """Stricter than the harness's norm: each y element within error_bound (a missing product
    in one row of many would pass a relative-L2 test, not this one)."""
    drv = _driver()
    rng = np.random.default_rng(50)
    for n, k in [(1, 1), (31, 13), (19, 4098), (6, 4100), (33, 4096), (3, 16392), (2, 17002),
                 (257, 250), (1000, 3)]:
        w = bf16.random_bits(rng, (n, k))
        x = bf16.random_bits(rng, (k,), scale=1 / np.sqrt(k))
        y = bf16.from_bits(drv.gemv_bits(w, x, version=version)).astype(np.float64)
        bad = np.abs(y - reference.gemv(w, x)) > reference.error_bound(w, x)
        assert not bad.any(), (version, n, k, np.flatnonzero(bad)[:5])


def test_gemv_public_function_on_gpu(gpu):
    drv = _driver()
    rng = np.random.default_rng(51)
    w, x = rng.standard_normal((77, 300)), rng.standard_normal(300)
    got = drv.gemv(w, x)
    wb, xb = bf16.to_bits(w), bf16.to_bits(x)
    assert got.dtype == np.float32
    assert np.all(np.abs(got - reference.gemv(wb, xb)) <= reference.error_bound(wb, xb))


def test_baselines_on_gpu(gpu):
    from common import harness as H
    from common.runner import to_host

    drv = _driver()
    case = drv.make_case((300, 1000), np.random.default_rng(3))
    d = H.DeviceCase(case)
    libs = drv.baselines(d)
    assert "cublasGemmEx (M=1)" in libs
    for name, fn in libs.items():
        out = fn()
        if out is None:
            continue
        got = to_host(out).reshape(-1)
        assert _rel(got, case.expected()["y"]) <= case.tol, name
