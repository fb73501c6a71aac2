import re
from pathlib import Path

import numpy as np
import pytest

from common import bf16
from common import harness as H
from days.day31_conv2d_tiled import reference as ref31
from days.day60_implicit_gemm_conv import driver, reference

KERNEL = Path(driver.__file__).with_name("kernel.cu").read_text()


# --- the reference against independent values -------------------------------------------------

def test_all_ones_filter_sums_the_window():
    # a 2x2 image [[1, 2], [3, 4]]: every 3x3 window (padding 1) covers all four pixels
    x = np.array([1, 2, 3, 4], np.float64).reshape(1, 2, 2, 1)
    w = np.ones((1, 3, 3, 1))
    np.testing.assert_array_equal(reference.conv3x3_float(x, w)[0, :, :, 0], [[10, 10], [10, 10]])


def test_corner_tap_reads_the_up_left_neighbour():
    # only w[0, 0, 0, 0] = 1: y[p, q] = x[p - 1, q - 1], zero on the first row and column
    x = np.arange(1, 10, dtype=np.float64).reshape(1, 3, 3, 1)
    w = np.zeros((1, 3, 3, 1))
    w[0, 0, 0, 0] = 1
    np.testing.assert_array_equal(reference.conv3x3_float(x, w)[0, :, :, 0],
                                  [[0, 0, 0], [0, 1, 2], [0, 4, 5]])


def test_channels_and_filters_by_hand():
    # one pixel, two channels (3, 5); filter 0 has centre (1, 1), filter 1 has centre (2, -1):
    # only the centre tap sees the pixel: y = [3 + 5, 6 - 5]
    x = np.array([3.0, 5.0]).reshape(1, 1, 1, 2)
    w = np.zeros((2, 3, 3, 2))
    w[0, 1, 1] = [1, 1]
    w[1, 1, 1] = [2, -1]
    w[:, 0, 0] = 7          # off-centre taps fall on the padding: no effect
    np.testing.assert_array_equal(reference.conv3x3_float(x, w).ravel(), [8, 1])


def test_reference_against_loops():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 5, 3))
    w = rng.standard_normal((4, 3, 3, 3))
    np.testing.assert_allclose(reference.conv3x3_float(x, w), reference.conv3x3_loops(x, w),
                               rtol=1e-12, atol=1e-12)


def test_reference_against_day31_nchw():
    # day 31's reference is NCHW with its own padding and slicing: transpose in and out
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 7, 5))
    w = rng.standard_normal((3, 3, 3, 5))
    want = ref31.conv2d(x.transpose(0, 3, 1, 2), w.transpose(0, 3, 1, 2), None, 1, 1)
    np.testing.assert_allclose(reference.conv3x3_float(x, w), want.transpose(0, 2, 3, 1),
                               rtol=1e-12, atol=1e-12)


def test_reference_reads_bf16_bits():
    rng = np.random.default_rng(2)
    x = bf16.to_bits(rng.standard_normal((1, 3, 4, 8)))
    w = bf16.to_bits(rng.standard_normal((2, 3, 3, 8)))
    want = reference.conv3x3_float(bf16.from_bits(x), bf16.from_bits(w))
    np.testing.assert_array_equal(reference.conv3x3(x, w), want)


def test_tolerance_catches_a_dropped_tap():
    # a kernel that skips one tap of nine (a wrong shift, a lost k-block) is far outside TOL;
    # rounding the true answer to bf16 is inside
    rng = np.random.default_rng(3)
    x = bf16.random_bits(rng, (2, 8, 8, 16))
    w = bf16.random_bits(rng, (8, 3, 3, 16), scale=1 / 12)
    ref = reference.conv3x3(x, w)
    w2 = bf16.from_bits(w).copy()
    w2[:, 2, 1, :] = 0
    wrong = reference.conv3x3_float(bf16.from_bits(x), w2)
    rel = lambda a: np.linalg.norm(a - ref) / np.linalg.norm(ref)
    assert rel(wrong) > 10 * reference.TOL
    assert rel(bf16.round(ref)) < reference.TOL


def test_flops():
    # 2 x 9 C multiply-adds an output: 2 * (1*2*3 pixels * 4 filters) * 9 * 5
    assert reference.flops(1, 2, 3, 5, 4) == 2 * 6 * 4 * 9 * 5
    assert reference.flops(*driver.L56) == 2 * 32 * 56 * 56 * 64 * 9 * 64


# --- v4's tiles and the kernels the driver names ------------------------------------------------

def test_tile_shapes_of_the_resnet_layers():
    assert driver.tile_shape(32, 56, 56, 128) == (56, 2, 1)     # 112 of 128 rows
    assert driver.tile_shape(32, 28, 28, 128) == (28, 4, 1)     # 7 boxes of 4 rows
    assert driver.tile_shape(32, 14, 14, 128) == (14, 7, 1)     # 2 boxes of 7 rows, not 9 + 5
    assert driver.tile_shape(32, 7, 7, 128) == (7, 7, 2)        # two images a box
    assert driver.tile_shape(32, 7, 7, 64) == (7, 7, 1)
    assert driver.tile_shape(1, 2, 130, 64) == (44, 1, 1)       # columns split 44 + 44 + 42
    assert driver.tile_shape(5, 7, 7, 128) == (7, 7, 2)         # 3 boxes, the last half empty


def test_tile_shapes_always_fit_the_consumers():
    rng = np.random.default_rng(4)
    for _ in range(2000):
        n, h, w = (int(v) for v in rng.integers(1, 300, 3))
        rows = int(rng.choice([64, 128]))
        bq, bp, bni = driver.tile_shape(n, h, w, rows)
        assert 1 <= bq * bp * bni <= rows                      # the box's rows fit the A tile
        assert max(bq, bp, bni) <= 256                         # a tensor-map box side
        assert bq <= w and bp <= h and bni <= n                 # no box wider than the tensor
        # the boxes cover the tensor
        assert H.cdiv(w, bq) * bq >= w and H.cdiv(h, bp) * bp >= h


def test_plan_uses_the_swept_picks():
    for version, variants in (("v4", driver.V4_VARIANTS), ("v5", driver.V5_VARIANTS)):
        assert set(driver.PICK[version]) == {s[1:] for s in driver.BENCH_SIZES}
        for size in driver.BENCH_SIZES:
            variant, tile = driver.plan(size, sms=132, version=version)
            assert variant == driver.PICK[version][size[1:]] and variant in variants
            assert tile == driver.tile_of(variant, *size[:3])
            assert driver.eligible(variant, size)
    for layer in driver.RESNET:
        variant, tile = driver.plan(layer, sms=132, version="v4")
        assert tile == driver.tile_shape(*layer[:3], 64 * driver.V4_VARIANTS[variant][1])
    # the H200 sweeps' winners (.notes/day60_sweep_results.md, rounds 1 and 2)
    sweep = driver.RESNET + [driver.AWKWARD]
    assert [driver.PICK["v4"][s[1:]] for s in sweep] == ["r64", "n128", "n128", "n64", "n128"]
    assert [driver.PICK["v5"][s[1:]] for s in sweep] == ["t3n64", "t3n128", "t3n128", "t3c1n128",
                                                         "t3n64"]
    # plan() defaults to v5; v4's plan never names a v5 kernel
    assert driver.plan(driver.L56, sms=132) == driver.plan(driver.L56, sms=132, version="v5")
    for size in [(2, 9, 11, 64, 48), (1, 1, 1, 8, 1), (4, 30, 30, 96, 200), (1, 7, 7, 512, 512)]:
        assert driver.plan(size, sms=132, version="v4")[0] in driver.V4_VARIANTS
        assert driver.plan(size, sms=132, version="v5")[0] not in driver.UNSWEPT
    with pytest.raises(ValueError, match="v4 and v5"):
        driver.plan(driver.L56, sms=132, version="v3")


def test_same_as_names_v4_where_v5_falls_back():
    # v5 runs v4's kernel exactly where plan() gives a v4 variant, and same_as says so
    fallback = 0
    for size in driver.CHECK_SIZES + driver.BENCH_SIZES + [(256, 2, 2, 64, 64), (8, 1, 1, 8, 8)]:
        for v in ("v1", "v2", "v3", "v4"):
            assert driver.same_as(v, size, sms=132) is None
        variant = driver.plan(size, sms=132, version="v5")[0]
        want = "v4" if variant in driver.V4_VARIANTS else None
        assert driver.same_as("v5", size, sms=132) == want, size
        if want:
            fallback += 1
            assert variant == driver.plan(size, sms=132, version="v4")[0]     # v4's own choice
    assert fallback >= 2                 # the "= v4" row is exercised by the check sizes
    # many tiny images: v4 packs 32 of them into one box, a v5 tile holds one
    assert driver.same_as("v5", (256, 2, 2, 64, 64), sms=132) == "v4"
    # the swept shapes run v5's own kernels
    for size in driver.BENCH_SIZES:
        assert driver.same_as("v5", size, sms=132) is None


def test_cost_model_agrees_with_the_sweep(monkeypatch):
    # the cheapest variant of each version by cost() is a measured winner (round 2; ties within
    # 2% count: 56x56 r64 / n64 and t3n64 / t3r64, 7x7 n64 / c1n128, 14x14 t3n128 / t3n64, the
    # awkward shape n64x2 / n128 / n64)
    winners = {
        "v4": {driver.L56: {"r64", "n64"}, driver.L28: {"n128"}, driver.L14: {"n128"},
               driver.L7: {"n64", "c1n128"}, driver.AWKWARD: {"n128", "n64", "n64x2"}},
        "v5": {driver.L56: {"t3n64", "t3r64"}, driver.L28: {"t3n128"},
               driver.L14: {"t3n128", "t3n64"}, driver.L7: {"t3c1n128"},
               driver.AWKWARD: {"t3n64"}},
    }
    pools = {"v4": driver.V4_VARIANTS, "v5": driver.V5_VARIANTS}
    for version, sizes in winners.items():
        for size, best in sizes.items():
            swept = [v for v in pools[version] if v not in driver.UNSWEPT and driver.eligible(v, size)]
            assert min(swept, key=lambda v: driver.cost(size, v, 132)) in best, (version, size)
    # without PICK, plan() alone lands on a winner too (v5 falls back to v4 at none of them)
    monkeypatch.setattr(driver, "PICK", {"v4": {}, "v5": {}})
    for version, sizes in winners.items():
        for size, best in sizes.items():
            assert driver.plan(size, sms=132, version=version)[0] in best, (version, size)
    # v5's cheapest beats v4's cheapest where the sweep says so by more than 10%
    for size in (driver.L56, driver.L7, driver.AWKWARD):
        c4 = min(driver.cost(size, v, 132) for v in driver.V4_VARIANTS if driver.eligible(v, size))
        c5 = min(driver.cost(size, v, 132) for v in driver.V5_VARIANTS if driver.eligible(v, size))
        assert c5 < c4, size
    # measured losers stay dearer: BN 256, two blocks an SM, one consumer at 56x56
    for size in driver.RESNET:
        c = {v: driver.cost(size, v, 132) for v in ("n64", "n128", "n256", "n64x2", "c1n128")}
        assert c["n256"] > min(c["n64"], c["n128"])
    assert driver.cost(driver.L56, "c1n128", 132) > driver.cost(driver.L56, "n64", 132)


def test_cost_prefers_filling_the_gpu():
    # 7x7, 512 -> 512 at batch 32: 128-channel tiles of two-image boxes give 64 tiles for 132
    # SMs; 64-channel tiles (or one-consumer 64-row boxes) give 128
    assert driver.cost(driver.L7, "n64", 132) < driver.cost(driver.L7, "n128", 132)
    assert driver.cost(driver.L7, "c1n128", 132) < driver.cost(driver.L7, "n128", 132)
    # K = 64: a 128-wide B tile doubles the work for nothing
    assert driver.cost(driver.L56, "n64", 132) < driver.cost(driver.L56, "n128", 132)


def test_variants_match_kernel_cu():
    # each conv_v4_NAME entry instantiates conv_ws<BN, CONS, STAGES, ...> and each conv_v5_NAME
    # conv_t3<...> with the driver's numbers, under __launch_bounds__(128 (1 + CONS), blocks an SM)
    assert set(driver.T3_ROWS) == set(driver.V5_VARIANTS)
    assert not set(driver.V4_VARIANTS) & set(driver.V5_VARIANTS)
    for name, (bn, cons, stages, bps) in driver.VARIANTS.items():
        body = "conv_t3" if name in driver.V5_VARIANTS else "conv_ws"
        version = driver.version_of(name)
        assert version == ("v5" if name in driver.V5_VARIANTS else "v4")
        m = re.search(r"__launch_bounds__\((\d+), (\d+)\) conv_" + version + "_" + name
                      + r"\(WS_ARGS\) \{\s*" + body + r"<(\d+), (\d+), (\d+), ", KERNEL)
        assert m, name
        threads, blocks, kbn, kcons, kstages = (int(v) for v in m.groups())
        assert (threads, blocks, kbn, kcons, kstages) == (128 * (1 + cons), bps, bn, cons, stages)
    m = re.search(r"conv_v3\(WS_ARGS\) \{\s*conv_ws<128, 2, 4, ", KERNEL)
    assert m
    # v5's variants' A rows a stage and resident filter
    for name, rows in driver.T3_ROWS.items():
        bn, cons, stages, _ = driver.V5_VARIANTS[name]
        m = re.search(r"conv_v5_" + name + r"\(WS_ARGS\) \{\s*conv_t3<(\d+), (\d+), (\d+), (\d+), "
                      r"(true|false), (true|false)>", KERNEL)
        assert m, name
        assert (int(m[1]), int(m[2]), int(m[3]), int(m[4])) == (bn, cons, stages, rows), name
        assert (m[6] == "true") == (name in driver.RESIDENT_B), name
        assert rows % 8 == 0                       # whole 1024-byte swizzle atoms


def test_t3_tiles():
    # 56x56: the v4 tile (2 rows of 56) with a 4 x 56 box; 28x28: 4 rows of 32 columns (28 and
    # 4 zero columns: BQ % 8 == 0); 7x7: one image, 8 columns
    assert driver.tile_of("t3r64", 32, 56, 56) == (56, 2, 1)
    assert driver.tile_of("t3n128", 32, 28, 28) == (32, 4, 1)
    assert driver.tile_of("t3c1n128", 32, 7, 7) == (8, 7, 1)
    assert driver.tile_of("t3n64", 1, 5, 131) == (48, 2, 1)     # columns 48 + 48 + 35
    rng = np.random.default_rng(9)
    for _ in range(3000):
        n, h, w = (int(v) for v in rng.integers(1, 300, 3))
        name = str(rng.choice(sorted(driver.T3_ROWS)))
        rows, cons = driver.T3_ROWS[name], driver.V5_VARIANTS[name][1]
        bq, bp, bni = driver.tile_of(name, n, h, w)
        assert bni == 1 and bq % 8 == 0 and 1 <= bp <= h
        assert bq * bp <= 64 * cons                    # the tile's pixels fit the consumers' rows
        assert (bp + 2) * bq <= rows                   # the box with its halo fits a stage
        assert 2 * bq + 64 * cons <= rows              # the last tap's A rows stay in the stage
        assert bq <= 256 and bp + 2 <= 256             # box sides
        assert H.cdiv(w, bq) * bq >= w and bq - 8 < w  # covers the row, no all-empty column block
        assert driver.t3_tile_problem(name, (bq, bp, bni)) is None
        assert driver.eligible(name, (n, h, w, 64, 64))  # every image size: v5 never lacks a tile


def test_t3_launch_refuses_a_bad_tile():
    fake = type("D", (), {"size": driver.L56})()
    for tile in [(56, 2, 2), (52, 2, 1), (56, 3, 1), (64, 2, 1)]:
        with pytest.raises(ValueError, match="tile"):
            driver.launch_variant(fake, "t3r64", tile)
    with pytest.raises(ValueError, match="unknown variant"):
        driver.launch_variant(fake, "t3n32")


def test_shared_memory_fits():
    # 227 KB a block at most on Hopper; two blocks an SM must fit 228 KB together
    assert driver.smem_of("t3r64") == 5 * 240 * 128 + 9 * 8192 + 1024
    assert driver.smem_of("t3n128") == 3 * (192 * 128 + 3 * 128 * 128) + 1024
    for name, (bn, cons, stages, bps) in driver.VARIANTS.items():
        smem = driver.smem_of(name)
        assert smem <= 227 * 1024
        assert bps * (smem + 1024) <= 228 * 1024, name
    assert driver.V2_SMEM <= 227 * 1024


def test_resident_filter_variant():
    # r64: 8 stages of a 128 x 64 A tile (16 KB) + 9 taps x 64 filters x 128 bytes (72 KB)
    assert driver.smem_of("r64", 64) == 8 * 16384 + 9 * 8192 + 1024
    assert driver.eligible("r64", driver.L56)
    assert not driver.eligible("r64", driver.L28)            # K = 128 > BN
    assert not driver.eligible("r64", (1, 8, 8, 128, 64))    # two channel blocks: 144 KB more
    assert all(driver.eligible(v, driver.L28) for v in driver.VARIANTS
               if v not in driver.RESIDENT_B)
    assert driver.eligible("t3r64", driver.L56) and not driver.eligible("t3r64", driver.L28)
    with pytest.raises(ValueError, match="resident"):
        driver.launch_variant(type("D", (), {"size": driver.L28})(), "r64")


def test_units():
    # 56x56 in boxes of 2 rows: 28 boxes an image, 32 images, one 64-channel tile
    assert driver.units_of(driver.L56, (56, 2, 1), 64) == 28 * 32
    assert driver.units_of(driver.L7, (7, 7, 2), 128) == 16 * 4


# --- sizes and the public function ------------------------------------------------------------

@pytest.mark.parametrize("size,msg", [
    ((1, 4, 4, 12, 8), "multiple of 8"),
    ((1, 4, 4, 8, 65535 * 128 + 1), "output channels"),
    ((2 ** 16, 256, 256, 8, 8), "32-bit"),
])
def test_sizes_refused_in_words(size, msg):
    with pytest.raises(ValueError, match=msg):
        driver.validate_size(size)


def test_every_listed_size_is_valid():
    for s in driver.CHECK_SIZES + driver.BENCH_SIZES + list(driver.SIZES.values()):
        driver.validate_size(s)


@pytest.mark.parametrize("x,w,exc,msg", [
    (np.zeros((4, 4, 8)), np.zeros((2, 3, 3, 8)), ValueError, "4-D"),
    (np.zeros((1, 4, 4, 8)), np.zeros((2, 5, 5, 8)), ValueError, "3x3"),
    (np.zeros((1, 4, 4, 8)), np.zeros((2, 3, 3, 16)), ValueError, "input channels"),
    (np.zeros((1, 4, 4, 8), complex), np.zeros((2, 3, 3, 8)), TypeError, "real"),
    (np.zeros((1, 4, 4, 8)), None, TypeError, "None"),
    ("x", np.zeros((2, 3, 3, 8)), TypeError, "string"),
])
def test_conv2d_bad_input(x, w, exc, msg):
    with pytest.raises(exc, match=msg):
        driver.conv2d(x, w)


def test_conv2d_unknown_version():
    with pytest.raises(ValueError, match="v1, v2"):
        driver.conv2d(np.zeros((1, 2, 2, 8)), np.zeros((1, 3, 3, 8)), version="v9")


def test_conv2d_empty_needs_no_gpu():
    assert driver.conv2d(np.zeros((0, 4, 4, 8)), np.zeros((3, 3, 3, 8))).shape == (0, 4, 4, 3)
    assert driver.conv2d(np.zeros((1, 4, 4, 8)), np.zeros((0, 3, 3, 8))).shape == (1, 4, 4, 0)
    out = driver.conv2d(np.ones((2, 3, 4, 0)), np.ones((5, 3, 3, 0)))    # C = 0: sums of nothing
    assert out.shape == (2, 3, 4, 5) and not out.any()


def test_conv2d_pads_channels_to_a_multiple_of_8(monkeypatch):
    # C = 3: the public function appends 5 zero channels to x and w, which changes nothing;
    # the GPU run is replaced by the reference on the case it would launch
    seen = {}

    def fake_run(launch, version, case):
        seen["size"] = case.size
        return {"y": reference.conv3x3(case.inputs["x"], case.inputs["w"]).astype(np.float32)}

    monkeypatch.setattr(driver.H, "run", fake_run)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 5, 4, 3))
    w = rng.standard_normal((6, 3, 3, 3))
    got = driver.conv2d(x, w)
    assert seen["size"] == (2, 5, 4, 8, 6)
    want = reference.conv3x3_float(bf16.round(x), bf16.round(w))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_bar_is_the_four_resnet_layers():
    assert driver.BAR == [{"sizes": driver.RESNET, "vs_baseline": 0.8}]
    assert [s[3] for s in driver.RESNET] == [64, 128, 256, 512]
    assert all(s[0] == 32 and s[1] == s[2] and s[3] == s[4] for s in driver.RESNET)


# --- GPU ----------------------------------------------------------------------------------------

def _rel(got, want):
    return np.linalg.norm(got - want) / np.linalg.norm(want)


@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_conv2d_on_the_gpu(gpu, version):
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 9, 11, 20))          # C = 20: padded to 24 by conv2d
    w = rng.standard_normal((37, 3, 3, 20)) / 13
    got = driver.conv2d(x, w, version=version)
    want = reference.conv3x3_float(bf16.round(x), bf16.round(w))
    assert _rel(got, want) < reference.TOL


# only the real combinations: a resident-filter variant (r64, t3r64) takes K <= 64 and C <= 64
# alone (test_resident_filter_variant checks the refusal); nothing here may skip on a GPU
def _combos(variants, sizes):
    return [pytest.param(v, s, id=f"{v}-{H.size_str(s)}") for v in variants for s in sizes
            if driver.eligible(v, s)]


V4_SIZES = [(1, 1, 1, 8, 1), (3, 7, 7, 72, 130), (1, 13, 58, 64, 64), (2, 5, 131, 16, 33),
            (1, 56, 56, 64, 64)]


@pytest.mark.parametrize("variant,size", _combos(driver.V4_VARIANTS, V4_SIZES))
def test_every_v4_variant_on_the_gpu(gpu, variant, size):
    case = driver.make_case(size, np.random.default_rng(7))
    r = H.check(lambda v, d: driver.launch_variant(d, variant), "v4", case)
    assert r.ok, r.message


# v5's variants: W = 1 (7 zero columns in every box), W = 7 / 24 / 62 (BQ 8, 24, 32: a last
# column block past the image), H < BP + 2 (the halo rows off both edges), a ragged last row
# block, 8 channel blocks, K past a tile, several images (a row shift must not leak between
# them); and v4's sizes
V5_SIZES = [(1, 3, 1, 8, 8), (2, 7, 7, 512, 130), (3, 9, 24, 64, 64), (2, 11, 62, 72, 40),
            (4, 1, 16, 16, 3), (1, 5, 131, 64, 64)] + V4_SIZES


@pytest.mark.parametrize("variant,size", _combos(driver.V5_VARIANTS, V5_SIZES))
def test_every_v5_variant_on_the_gpu(gpu, variant, size):
    case = driver.make_case(size, np.random.default_rng(10))
    r = H.check(lambda v, d: driver.launch_variant(d, variant), "v5", case)
    assert r.ok, r.message


# v5 as planned at ragged sizes: each of its four kernels and both fall-backs to v4's
V5_PLANNED = [((1, 3, 3, 64, 64), "r64"), ((2, 13, 1, 8, 130), "n64"),
              ((2, 29, 23, 64, 64), "t3r64"), ((3, 13, 27, 136, 130), "t3n64"),
              ((1, 28, 28, 128, 128), "t3n128"), ((1, 7, 7, 512, 512), "t3c1n128")]


def test_v5_plans_cover_its_kernels_and_the_fallback():
    for size, variant in V5_PLANNED:
        assert driver.plan(size, sms=132, version="v5")[0] == variant, size
        want = "v4" if variant in driver.V4_VARIANTS else None
        assert driver.same_as("v5", size, sms=132) == want, size
    assert {v for _, v in V5_PLANNED} >= set(driver.V5_VARIANTS)


@pytest.mark.parametrize("size,variant", V5_PLANNED, ids=[H.size_str(s) for s, _ in V5_PLANNED])
def test_v5_on_ragged_sizes_on_the_gpu(gpu, size, variant):
    # (the variant is the one named at 132 SMs, as on the H100 / H200; the plan is in the message)
    case = driver.make_case(size, np.random.default_rng(11))
    r = H.check(driver.launch, "v5", case)
    assert r.ok, f"v5 ({driver.plan(size, version='v5')}): {r.message}"


def test_cudnn_baseline_agrees(gpu):
    from common.runner import to_host

    case = driver.make_case((2, 9, 10, 64, 72), np.random.default_rng(8))
    d = H.DeviceCase(case)
    for name, fn in driver.baselines(d).items():
        got = to_host(fn()).astype(np.float64)
        assert _rel(got, case.expected()["y"]) < reference.TOL, name
