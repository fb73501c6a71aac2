import numpy as np
import pytest

from days.day39_quantization_ops import reference as R


# --- the reference against independent values -------------------------------------------------

def test_quantize_rounds_half_to_even_and_saturates():
    x = np.array([[0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 1000.0, -1000.0, 127.5, -128.5]],
                 np.float32)
    np.testing.assert_array_equal(R.quantize(x, 1.0),
                                  [[0, 2, 2, 0, -2, -2, 0, 127, -128, 127, -128]])
    # a zero point shifts after the rounding, then saturates
    np.testing.assert_array_equal(R.quantize(x, 1.0, 3), [[3, 5, 5, 3, 1, 1, 3, 127, -128, 127, -125]])
    assert R.quantize(x, 1.0).dtype == np.int8


def test_quantize_divides_in_float32():
    # float32(0.35) / float32(0.1) rounds to exactly 3.5 in float32 (-> 4, half to even), but is
    # 3.4999998882 in float64 (-> 3): the spec is the float32 division the kernels do
    x = np.array([[0.35]], np.float32)
    assert np.rint(np.float64(x[0, 0]) / np.float64(np.float32(0.1))) == 3
    np.testing.assert_array_equal(R.quantize(x, 0.1), [[4]])
    # a hand-made tie in float32: 0.75 / 0.5 = 1.5 exactly -> 2, 0.25 / 0.5 = 0.5 -> 0
    np.testing.assert_array_equal(R.quantize([[0.75, 0.25, 1.25]], 0.5), [[2, 0, 2]])


def test_per_row_and_per_column_scales():
    x = np.array([[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]], np.float32)
    np.testing.assert_array_equal(R.quantize(x, [1.0, 10.0], 0, axis=0), [[1, 2, 3], [1, 2, 3]])
    np.testing.assert_array_equal(R.quantize(x, [1.0, 2.0, 3.0], [0, 1, -1], axis=1),
                                  [[1, 2, 0], [10, 11, 9]])
    np.testing.assert_allclose(R.dequantize([[1, 2, 0], [10, 11, 9]], [1.0, 2.0, 3.0], [0, 1, -1], 1),
                               [[1.0, 2.0, 3.0], [10.0, 20.0, 30.0]])


def test_symmetric_and_asymmetric_parameters_by_hand():
    x = np.array([[-2.54, 1.0], [0.5, 0.0]], np.float32)
    np.testing.assert_allclose(R.symmetric_scale(x), 2.54 / 127, rtol=1e-6)
    np.testing.assert_allclose(R.symmetric_scale(x, axis=0), [2.54 / 127, 0.5 / 127], rtol=1e-6)
    np.testing.assert_allclose(R.symmetric_scale(x, axis=1), [2.54 / 127, 1.0 / 127], rtol=1e-6)
    np.testing.assert_array_equal(R.symmetric_scale(np.zeros((2, 2))), 1.0)   # no zero scale
    # [0, 3] over 256 codes: s = 3/255, z = -128 (0 -> -128, 3 -> 127)
    s, z = R.asymmetric_params(np.array([[0.0], [3.0]]), axis=1)
    np.testing.assert_allclose(s, [3 / 255], rtol=1e-6)
    np.testing.assert_array_equal(z, [-128])
    q = R.quantize(np.array([[0.0], [3.0]]), s, z, axis=1)
    np.testing.assert_array_equal(q, [[-128], [127]])
    # [-1, 0]: z = 127; every range includes 0, which is represented exactly by the code z
    s, z = R.asymmetric_params(np.array([[-1.0, -0.5]]), axis=0)
    assert z[0] == 127 and R.quantize([[0.0]], s, z, axis=0)[0, 0] == 127


def test_asymmetric_round_trip_error_is_half_a_step():
    rng = np.random.default_rng(1)
    x = rng.uniform(-3, 5, (200, 7)).astype(np.float32) * np.arange(1, 8, dtype=np.float32)
    s, z = R.asymmetric_params(x, axis=1)
    back = R.dequantize(R.quantize(x, s, z, axis=1), s, z, axis=1)
    assert np.all(np.abs(back - x) <= s / 2 * (1 + 1e-5) + 1e-7)


def test_int8_matmul_against_int64_loops():
    rng = np.random.default_rng(2)
    a = rng.integers(-128, 128, (7, 13), dtype=np.int8)
    b = rng.integers(-128, 128, (13, 5), dtype=np.int8)
    want = np.array([[sum(int(a[i, t]) * int(b[t, j]) for t in range(13)) for j in range(5)]
                     for i in range(7)])
    np.testing.assert_array_equal(R.int8_matmul(a, b), want)
    # the extreme product at the largest K: exact in float64, and it fits int32
    k = R.MAX_K
    assert k * 128 * 128 <= 2 ** 31 - 1 < (k + 1) * 128 * 128
    big = np.full((1, 4096), -128, np.int8)
    assert R.int8_matmul(big, big.T)[0, 0] == 4096 * 16384


def test_pack_b_layout_by_hand():
    b = np.array([[1, 2], [3, 4], [5, 6], [-1, -128], [7, 8]], np.int8)   # K = 5, N = 2
    bp = R.pack_b(b)
    assert bp.shape == (4, 4) and bp.dtype == np.int32        # Kp = 16 -> 4 words; Np = 4
    # word (0, 0) holds k = 0..3 of column 0: bytes 1, 3, 5, -1 (0xff), little-endian
    assert bp[0, 0] == np.int32(np.uint32(0xFF050301).astype(np.int64) - (1 << 32))
    assert bp[0, 1] == np.int32(np.uint32(0x80060402).astype(np.int64) - (1 << 32))
    assert bp[1, 0] == 7 and bp[1, 1] == 8                    # k = 4 alone, k = 5..7 zero
    assert not bp[2:].any() and not bp[:, 2:].any()           # padding is zero


def test_packed_words_give_the_product():
    # a second formulation: the GEMM as sums of dp4a over packed words
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (4, 21), dtype=np.int8)
    b = rng.integers(-128, 128, (21, 3), dtype=np.int8)
    kp = R.padded_k(21)
    ap = np.zeros((4, kp), np.int8)
    ap[:, :21] = a
    aw, bp = ap.view("<i4"), R.pack_b(b)
    got = np.array([[R.dot_words(aw[i], bp[:, j]) for j in range(3)] for i in range(4)])
    np.testing.assert_array_equal(got, R.int8_matmul(a, b))


def test_padded_k():
    assert [R.padded_k(k) for k in (1, 15, 16, 17, 4099)] == [16, 16, 16, 32, 4112]


def test_quantized_linear_closed_forms():
    rng = np.random.default_rng(4)
    # x and w already on the int8 grid (max|.| = 127 in every row / column): exact
    qx = rng.integers(-127, 128, (5, 9)).astype(np.float64)
    qx[:, 0] = 127
    qw = rng.integers(-127, 128, (9, 4)).astype(np.float64)
    qw[0, :] = -127
    x, w = qx * 0.5, qw * 0.25
    y, sx, sw = R.quantized_linear(x, w, np.arange(4.0))
    np.testing.assert_allclose(sx, 0.5, rtol=1e-6)             # max|row| / 127 = 127 * 0.5 / 127
    np.testing.assert_allclose(sw, 0.25, rtol=1e-6)
    np.testing.assert_allclose(y, x @ w + np.arange(4.0), rtol=1e-6, atol=1e-6)
    # per tensor on rows of 100x different magnitudes is worse than per channel
    x2 = rng.standard_normal((64, 32)) * np.geomspace(0.1, 10, 64)[:, None]
    w2 = rng.standard_normal((32, 16)) * np.geomspace(0.1, 10, 16)[None, :]
    exact = x2 @ w2
    e_t = R.rel_l2(R.quantized_linear(x2, w2, per_channel=False)[0], exact)
    e_c = R.rel_l2(R.quantized_linear(x2, w2, per_channel=True)[0], exact)
    assert e_c < e_t / 2 and e_c < 2e-2


def test_dp4a_peak_arithmetic():
    assert R.dp4a_peak_ops_per_clock(132) == 132 * 512
    # at the H100/H200 top clock (1980 MHz): 133.8 T ops/s, twice the 66.9 TFLOP/s of FP32
    assert abs(R.dp4a_peak_ops_per_clock(132) * 1.98e9 / 1e12 - 2 * 66.9) < 0.2


# --- the driver's choices -----------------------------------------------------------------------

def test_sizes_and_plans():
    from common import harness as H
    from days.day39_quantization_ops import driver as D

    assert D.AWKWARD[1] % 4 and D.AWKWARD[2] % 4 and D.BAR_SIZE in D.BENCH_SIZES
    assert any(k % 16 == 0 for _, k, _ in D.CHECK_SIZES) and any(k % 16 for _, k, _ in D.CHECK_SIZES)
    assert any(n % 4 for _, _, n in D.CHECK_SIZES) and (1, 1, 1) in D.CHECK_SIZES
    assert D.plan("v1", 100, 70)[1] == (3, 13, 1)
    assert D.plan("v4", 129, 257)[:2] == ("gemm_s8_v4_bk8", (3, 2, 1))
    name, grid, block, smem = D.plan("v5", 4096, 4096)
    assert name.startswith("gemm_s8_v5_bk") and grid == (32, 32, 1) and smem == D.v5_smem(*D.V5_CONFIG)
    assert D.v5_smem(16, 3) == 3 * (128 * 20 + 16 * 128) * 4
    assert D.plan("v5", 8, 8, prefix="linear")[0].startswith("linear_s8_v5")
    with pytest.raises(H.SizeError, match="overflow"):
        H.parse_size(D, "4x131072x4")
    with pytest.raises(H.SizeError, match="gridDim"):
        H.parse_size(D, "600000x16x16")
    assert H.parse_size(D, "4095x4099x4097") == (4095, 4099, 4097)


def test_every_candidate_is_built():
    from pathlib import Path

    from days.day39_quantization_ops import driver as D

    src = (Path(D.__file__).parent / "kernel.cu").read_text()
    for bkw, st in D.V5_CANDIDATES:
        assert f"V5({bkw}, {st})" in src
    assert tuple(D.V5_CONFIG) in [tuple(c) for c in D.V5_CANDIDATES]
    assert f"V4({D.V4_BKW})" in src


def test_bar_check_reads_the_faster_fp32_sgemm():
    from days.day39_quantization_ops import driver as D

    def rec(v5_ms, cublas_ms, day8_ms):
        return {"cases": [{"size": list(D.BAR_SIZE),
                           "rows": [{"version": "v5", "median_ms": v5_ms, "ok": True},
                                    {"version": "v1", "median_ms": 50.0, "ok": True}],
                           "baseline": [{"name": "cuBLAS int8 (IMMA)", "median_ms": 0.2},
                                        {"name": D.FP32_CUBLAS, "median_ms": cublas_ms},
                                        {"name": "day 8 v7 fp32", "median_ms": day8_ms}]}]}

    ok, fig = D._twice_fp32(rec(1.2, 2.68, 2.99))
    assert ok and "2.23x cuBLAS" in fig and "2.49x day 8" in fig
    ok, fig = D._twice_fp32(rec(1.4, 2.68, 2.99))     # 1.91x the faster (cuBLAS): missed
    assert not ok and "1.91x" in fig
    ok, fig = D._twice_fp32({"cases": []})
    assert not ok and "not measured" in fig


# --- the public functions: bad input refused before anything reaches the GPU ------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


def test_int8_matmul_refuses_bad_input():
    from days.day39_quantization_ops import driver as D

    a, b = np.ones((2, 3), np.int8), np.ones((3, 4), np.int8)
    _raises(ValueError, "outside", lambda: D.int8_matmul(a.astype(np.int16) * 200, b))   # 200 is not int8
    _raises(ValueError, "outside", lambda: D.int8_matmul(a, b.astype(np.int32) - 130))
    _raises(ValueError, "whole numbers", lambda: D.int8_matmul(a * 0.5, b))
    _raises(TypeError, "booleans", lambda: D.int8_matmul(a.astype(bool), b))
    _raises(ValueError, "2-D", lambda: D.int8_matmul(np.ones(3), b))
    _raises(ValueError, "K = 3", lambda: D.int8_matmul(a, np.ones((4, 4))))
    _raises(TypeError, "None", lambda: D.int8_matmul(None, b))
    _raises(ValueError, "unknown version", lambda: D.int8_matmul(a, b, version="v9"))
    _raises(ValueError, "overflow", lambda: D.int8_matmul(np.ones((1, 131072), np.int8),
                                                         np.ones((131072, 1), np.int8)))
    _raises(ValueError, "unknown version", lambda: D.launch("v0", None))


def test_empty_products_launch_nothing():
    from days.day39_quantization_ops import driver as D

    assert D.int8_matmul(np.ones((0, 3)), np.ones((3, 2))).shape == (0, 2)
    c = D.int8_matmul(np.ones((2, 0)), np.ones((0, 3)))
    assert c.shape == (2, 3) and c.dtype == np.int32 and not c.any()
    assert D.quantize(np.ones((0, 4)), 1.0).shape == (0, 4)
    assert D.dequantize(np.ones((3, 0)), 1.0).dtype == np.float32
    y = D.quantized_linear(np.ones((2, 0)), np.ones((0, 3)), bias=[1.0, 2.0, 3.0])
    np.testing.assert_array_equal(y, [[1, 2, 3], [1, 2, 3]])


def test_quantize_refuses_bad_input():
    from days.day39_quantization_ops import driver as D

    x = np.ones((2, 3), np.float32)
    _raises(ValueError, "scale", lambda: D.quantize(x, 0.0))
    _raises(ValueError, "scale", lambda: D.quantize(x, -1.0))
    _raises(ValueError, "finite", lambda: D.quantize(x, float("inf")))
    _raises(TypeError, "scale", lambda: D.quantize(x, "one"))
    _raises(ValueError, "zero_point", lambda: D.quantize(x, 1.0, 128))
    _raises(ValueError, "whole", lambda: D.quantize(x, 1.0, 0.5))
    _raises(ValueError, "axis", lambda: D.quantize(x, 1.0, axis=2))
    _raises(TypeError, "axis", lambda: D.quantize(x, 1.0, axis=1.0))
    _raises(ValueError, "shape (3,)", lambda: D.quantize(x, np.ones(2), axis=1))
    _raises(ValueError, "shape (2,)", lambda: D.quantize(x, np.ones(3), axis=0))
    _raises(ValueError, "> 0", lambda: D.quantize(x, np.array([1.0, 0.0]), axis=0))
    _raises(ValueError, "zero_point", lambda: D.quantize(x, np.ones(3), np.array([0, 0, 300]), axis=1))
    _raises(ValueError, "one integer", lambda: D.quantize(x, 1.0, np.zeros(3)))
    _raises(ValueError, "NaN", lambda: D.quantize(np.array([[1.0, np.nan]]), 1.0))
    _raises(TypeError, "complex", lambda: D.quantize(x.astype(np.complex64), 1.0))
    _raises(ValueError, "2-D", lambda: D.quantize(np.ones(3), 1.0))


def test_dequantize_refuses_bad_input():
    from days.day39_quantization_ops import driver as D

    q = np.ones((2, 3), np.int8)
    _raises(ValueError, "outside", lambda: D.dequantize(q.astype(np.int32) * 300, 1.0))
    _raises(ValueError, "whole", lambda: D.dequantize(q * 0.5, 1.0))
    _raises(ValueError, "scale", lambda: D.dequantize(q, 0.0))
    _raises(ValueError, "shape (3,)", lambda: D.dequantize(q, np.ones(4), axis=1))


def test_quantized_linear_refuses_bad_input():
    from days.day39_quantization_ops import driver as D

    x, w = np.ones((2, 3)), np.ones((3, 4))
    _raises(ValueError, "K = 3", lambda: D.quantized_linear(x, np.ones((4, 4))))
    _raises(ValueError, "bias", lambda: D.quantized_linear(x, w, bias=np.ones(3)))
    _raises(TypeError, "per_channel", lambda: D.quantized_linear(x, w, per_channel="yes"))
    _raises(ValueError, "NaN", lambda: D.quantized_linear(x, w * np.nan))
    _raises(ValueError, "2-D", lambda: D.quantized_linear(np.ones(3), w))


# --- GPU ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
def test_extreme_values_are_exact_on_gpu(gpu, version):
    # every product -128 * -128 = 2^14 and the largest sums: an int8 sign slip or a narrowed
    # accumulator shows at once; K = 2049 (padded), N odd
    from days.day39_quantization_ops import driver as D

    a = np.full((130, 2049), -128, np.int8)
    b = np.full((2049, 131), -128, np.int8)
    b[:, 1] = 127
    c = D.int8_matmul(a, b, version)
    assert (c[:, 0] == 2049 * 16384).all() and (c[:, 1] == -2049 * 128 * 127).all()
    np.testing.assert_array_equal(c, R.int8_matmul(a, b))


@pytest.mark.parametrize("config", [(16, 2), (16, 3), (16, 4)])
def test_every_v5_candidate_on_gpu(gpu, config):
    from common import harness as H
    from days.day39_quantization_ops import driver as D

    for size in [(257, 2049, 131), (1, 16, 1), (130, 64, 260)]:
        case = D.make_case(size, np.random.default_rng(sum(size)))
        r = H.check(lambda v, d: D.launch(v, d, config=config), "v5", case)
        assert r.ok, (size, r.message)


@pytest.mark.parametrize("shape", [(7, 33), (64, 128), (5, 3)])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_quantize_is_bit_exact_on_gpu(gpu, shape, axis):
    # ties (k + 0.5) * scale, saturation, and asymmetric zero points: int8 equal to numpy's
    from days.day39_quantization_ops import driver as D

    rng = np.random.default_rng(5)
    x = (rng.integers(-300, 300, shape) + 0.5).astype(np.float32) * np.float32(0.25)
    if axis is None:
        s, z = 0.25, 3
    else:
        s, z = R.asymmetric_params(x, axis)
        s = s * 0.5                                       # half the range: some values saturate
    np.testing.assert_array_equal(D.quantize(x, s, z, axis), R.quantize(x, s, z, axis))
    assert D.quantize(np.array([[0.35]], np.float32), 0.1)[0, 0] == 4   # float32 division: 3.5
    q = R.quantize(x, s, z, axis)
    np.testing.assert_allclose(D.dequantize(q, s, z, axis), R.dequantize(q, s, z, axis), rtol=1e-6)


def test_quantized_linear_matches_numpy_on_gpu(gpu):
    from common.check import compare
    from days.day39_quantization_ops import driver as D

    rng = np.random.default_rng(6)
    x, w, bias = D.error_case(rng, (131, 100, 67))
    for pc in (True, False):
        y = D.quantized_linear(x, w, bias, per_channel=pc)
        assert compare(y, R.quantized_linear(x, w, bias, pc)[0]).ok
