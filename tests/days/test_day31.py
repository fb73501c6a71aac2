import re
from pathlib import Path

import numpy as np
import pytest

from days.day31_conv2d_tiled import reference

DAY = Path(__file__).resolve().parents[2] / "days" / "day31_conv2d_tiled"


# --- the reference against independent values -------------------------------------------------

@pytest.mark.parametrize("size", [(2, 3, 7, 9, 4, 3, 1, 1), (1, 2, 9, 8, 3, 4, 2, 1),
                                  (2, 3, 5, 6, 2, 5, 2, 2), (1, 1, 1, 1, 1, 3, 1, 1),
                                  (1, 2, 5, 6, 3, 3, 1, 2), (2, 2, 4, 7, 3, 2, 3, 0),
                                  (1, 3, 6, 5, 2, 1, 2, 0), (1, 1, 3, 3, 1, 5, 1, 2)])
def test_reference_matches_the_loops(size):
    # a second formulation: every output summed tap by tap, skipping out-of-image taps
    n, c, h, w, k, r, s, p = size
    rng = np.random.default_rng(sum(size))
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((k, c, r, r))
    b = rng.standard_normal(k)
    got = reference.conv2d(x, wt, b, s, p)
    assert got.shape == (n, k, reference.out_size(h, r, s, p), reference.out_size(w, r, s, p))
    np.testing.assert_allclose(got, reference.conv2d_loops(x, wt, b, s, p), rtol=1e-12, atol=1e-12)


def test_ones_count_the_taps_inside_the_image():
    # all-ones 3x3 image and filter, pad 1: each output counts the taps that land in the image:
    # 4 at a corner, 6 on an edge, 9 in the middle (by hand)
    y = reference.conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), None, 1, 1)
    np.testing.assert_array_equal(y[0, 0], [[4, 6, 4], [6, 9, 6], [4, 6, 4]])
    # pad 2 on a 3x3 filter: 5x5 outputs; a corner's window holds one image pixel, the
    # centre's all nine (+ the bias 0.5)
    y = reference.conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), [0.5], 1, 2)
    assert y.shape == (1, 1, 5, 5) and y[0, 0, 0, 0] == 1.5 and y[0, 0, 2, 2] == 9.5
    # pad 3 >= R: the corner window lies wholly in the padding, only the bias is left
    y = reference.conv2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), [0.5], 1, 3)
    assert y.shape == (1, 1, 7, 7) and y[0, 0, 0, 0] == 0.5 and y[0, 0, 3, 3] == 9.5


def test_closed_forms():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 7, 6))
    # a centred delta filter (pad R//2, stride 1) copies each channel: y = x + b
    for r in (1, 3, 5):
        w = np.zeros((3, 3, r, r))
        for c in range(3):
            w[c, c, r // 2, r // 2] = 1.0
        b = np.array([1.0, -2.0, 0.5])
        np.testing.assert_allclose(reference.conv2d(x, w, b, 1, r // 2), x + b[None, :, None, None],
                                   atol=1e-15)
    # a 1x1 convolution mixes channels only: an einsum
    w = rng.standard_normal((4, 3, 1, 1))
    np.testing.assert_allclose(reference.conv2d(x, w), np.einsum("kc,nchw->nkhw", w[:, :, 0, 0], x),
                               atol=1e-12)
    # stride 2 keeps every other output of stride 1 (same padding)
    w = rng.standard_normal((2, 3, 3, 3))
    np.testing.assert_allclose(reference.conv2d(x, w, None, 2, 1),
                               reference.conv2d(x, w, None, 1, 1)[:, :, ::2, ::2], atol=1e-12)
    # the filter is not flipped (a cross-correlation): a filter with one 1 at (0, 0) reads
    # the input up and to the left of the output, x[oy - 1, ox - 1] at pad 1
    w = np.zeros((1, 1, 3, 3))
    w[0, 0, 0, 0] = 1.0
    y = reference.conv2d(x[:1, :1], w, None, 1, 1)
    np.testing.assert_allclose(y[0, 0, 1:, 1:], x[0, 0, :-1, :-1])
    assert np.all(y[0, 0, 0, :] == 0) and np.all(y[0, 0, :, 0] == 0)


def test_reference_refuses_a_filter_larger_than_the_padded_image():
    with pytest.raises(ValueError, match="does not fit"):
        reference.conv2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 5, 5)), None, 1, 1)


def test_sizes_flops_and_bytes_by_hand():
    assert reference.out_size(28, 3, 1, 1) == 28
    assert reference.out_size(223, 7, 2, 3) == 112      # (223 + 6 - 7) // 2 + 1
    assert reference.out_size(5, 3, 1, 2) == 7
    assert reference.out_size(27, 3, 2, 0) == 13
    # ResNet layer: 32 x 64 x 56 x 56 outputs, 64 * 9 multiply-adds each
    assert reference.flops(32, 64, 56, 56, 64, 3, 1, 1) == 2 * 32 * 64 * 3136 * 576 == 7_398_752_256
    moved, read = reference.nbytes(64, 1, 28, 28, 8, 3, 1, 1)
    assert read == 4 * (64 * 784 + 72 + 8) and moved == read + 4 * 64 * 8 * 784


# --- the driver's choices ---------------------------------------------------------------------

def test_cases_are_judged_by_bytes_or_flops():
    from days.day31_conv2d_tiled import driver as D

    rng = np.random.default_rng(0)
    mnist1 = D.make_case(D.MNIST1, rng)        # 4 FLOPs a byte: memory (and launch) bound
    assert mnist1.bytes > 0 and mnist1.flops == 0
    resnet = D.make_case((1, 64, 56, 56, 64, 3, 1, 1), rng)   # 144 FLOPs a byte
    assert resnet.flops > 0 and resnet.bytes == 0


@pytest.mark.parametrize("c,k,rr", [(64, 64, 9), (1, 8, 9), (8, 16, 9), (3, 64, 49),
                                    (1712, 3, 9), (1, 1100, 1), (5000, 7, 225), (130, 2000, 1),
                                    (1, 1, 1)])
def test_constant_slices_tile_the_filter(c, k, rr):
    from days.day31_conv2d_tiled import driver as D

    sl = D.constant_slices(c, k, rr)
    cover = np.zeros((k, c), int)
    seen_first = set()
    for k0, kc, c0, cc in sl:
        assert kc >= 1 and cc >= 1
        assert kc * cc * rr <= D.CONST_W_FLOATS and kc <= D.CONST_B_FLOATS
        cover[k0:k0 + kc, c0:c0 + cc] += 1
        if c0 == 0:
            seen_first.add(k0)
        else:
            assert k0 in seen_first, "a slice that adds into y runs after the one writing bias"
    assert np.all(cover == 1)


def test_constant_slices_by_hand():
    from days.day31_conv2d_tiled import driver as D

    # ResNet: 64 x 64 x 9 = 36864 floats, 26 channels fit in 15360: three even slices
    assert D.constant_slices(64, 64, 9) == [(0, 22, 0, 64), (22, 22, 0, 64), (44, 20, 0, 64)]
    assert D.constant_slices(8, 16, 9) == [(0, 16, 0, 8)]           # MNIST conv2: one launch
    assert D.constant_slices(1712, 3, 9)[:2] == [(0, 1, 0, 856), (0, 1, 856, 856)]
    assert [kc for _, kc, _, _ in D.constant_slices(1, 1100, 1)] == [550, 550]


def _kernel_tiles():
    src = (DAY / "kernel.cu").read_text()
    gen = re.search(r"#define GEN\(R, S\) BOTH\(R, S, gen, ([\d, ]+)\)", src).group(1)
    tiles = {"gen": tuple(int(v) for v in gen.split(","))}
    for m in re.finditer(r"^BOTH\((\d+), (\d+), (\w+), ([\d, ]+)\)", src, re.M):
        tiles[m.group(3)] = tuple(int(v) for v in m.group(4).split(","))
        assert (int(m.group(1)), int(m.group(2))) == (3, 1)
    gens = set(re.findall(r"GEN\((\d), (\d)\)", src))
    return tiles, {(int(r), int(s)) for r, s in gens}


def test_driver_tiles_match_kernel_cu():
    from days.day31_conv2d_tiled import driver as D

    tiles, gen_rs = _kernel_tiles()
    assert tiles == D.TILES
    assert gen_rs == set(D.GEN_RS)
    assert set(D.PICK.values()) <= set(tiles)


def test_every_tile_fits_a_block():
    from days.day31_conv2d_tiled import driver as D

    for tile in D.TILES:
        for r, s in (D.GEN_RS if tile == "gen" else [D.TUNED_RS]):
            g = D.geometry(tile, r, s)
            assert 32 <= g["threads"] <= 1024 or tile.startswith("m1")
            assert 2 * 4 * g["stage_floats"] <= 227 * 1024, (tile, r, s)
            assert g["stage_floats"] % 4 == 0       # the filter chunk starts 16-byte aligned


def test_resnet_tile_geometry_by_hand():
    from days.day31_conv2d_tiled import driver as D

    g = D.geometry("r1", 3, 1)
    # 56 x 4 outputs x 64 channels; input 6 rows x 58 columns (pitch 60: the last thread's
    # 12-float window starts at 48), 8 channels; filter 8 x 9 rows of 64 + 4
    assert (g["tw"], g["th"], g["tk"], g["threads"]) == (56, 4, 64, 224)
    assert g["stage_floats"] == 8 * 6 * 60 + 8 * 9 * 68


def test_tile_choice_and_fallback():
    from days.day31_conv2d_tiled import driver as D

    assert D.tile_for(D.MNIST1) == D.PICK["m1"]
    assert D.tile_for(D.MNIST2) == D.PICK["m2"]
    assert D.tile_for(D.RESNET) == D.PICK["r"]
    assert D.tile_for(D.STEM) == "gen"
    assert D.tile_for((1, 64, 9, 9, 32, 3, 1, 1)) == "gen"
    # no instance for even filters or stride 3: v5/v6 run v4 (and the table says "= v4")
    for size in [(2, 3, 10, 11, 4, 2, 1, 0), (1, 2, 20, 19, 3, 3, 3, 1), (1, 1, 30, 30, 1, 9, 1, 4)]:
        assert D.tile_for(size) is None
        assert D.same_as("v6", size) == "v4" and D.same_as("v5", size) == "v4"
        assert D.same_as("v4", size) is None
    assert D.same_as("v6", D.RESNET) is None


def test_every_size_has_its_kernel_in_kernel_cu():
    from days.day31_conv2d_tiled import driver as D

    src = (DAY / "kernel.cu").read_text()
    tiles, gen_rs = _kernel_tiles()
    for size in D.CHECK_SIZES + D.BENCH_SIZES + list(D.SIZES.values()):
        t = D.tile_for(size)
        if t is None:
            continue
        r, s = size[5], size[6]
        assert (t == "gen" and (r, s) in gen_rs) or (t in tiles and (r, s) == (3, 1)), size
    assert "conv2d_v4" in src


def test_check_sizes_cover_every_path():
    from days.day31_conv2d_tiled import driver as D

    cs = D.CHECK_SIZES
    kinds = {D.tile_for(s) for s in cs}
    assert set(D.PICK.values()) | {"gen", None} <= kinds
    assert any(s[6] == 2 and s[7] == 0 for s in cs) and any(s[7] == 2 for s in cs)   # stride/pad
    assert any(s[5] == 5 for s in cs) and any(s[2] % 2 and s[3] % 2 for s in cs)    # 5x5, odd
    assert any(s[2] == 1 and s[3] == 1 for s in cs) and any(s[1] == 3 for s in cs)
    assert any(len(D.constant_slices(s[1], s[4], s[5] ** 2)) > 1 and
               any(c0 > 0 for _, _, c0, _ in D.constant_slices(s[1], s[4], s[5] ** 2)) for s in cs)
    assert any(s[4] > D.CONST_B_FLOATS for s in cs)


@pytest.mark.parametrize("text,word", [("1x1x8x8x1x16x1x1", "R = 16"), ("1x1x8x8x1x3x5x1", "stride"),
                                       ("1x1x2x2x1x7x1x1", "does not fit"),
                                       ("70000x1x8x8x1x3x1x1", "65535"),
                                       ("4x4096x4096x4096x1x1x1x1", "32-bit"),
                                       ("1x1x8x8x1x3x1", "8: NxCxHxW")])
def test_size_errors(text, word):
    from common import harness as H
    from days.day31_conv2d_tiled import driver as D

    with pytest.raises(H.SizeError) as e:
        H.parse_size(D, text)
    assert word in str(e.value), str(e.value)


def test_sizes_parse():
    from common import harness as H
    from days.day31_conv2d_tiled import driver as D

    assert H.parse_size(D, "32x64x56x56x64x3x1x1") == D.RESNET
    assert H.parse_size(D, "default") == D.RESNET


def test_slices_table_by_hand():
    from days.day31_conv2d_tiled import driver as D

    rows = {r[0]: r for r in D.slices_table()}
    assert rows["ResNet 3x3"][1:] == ["144.0", "3", "20/22", "64", "6"]
    assert rows["MNIST conv1"][1:] == ["0.3", "1", "8", "1", "2"]


# --- the bar ------------------------------------------------------------------------------------

def _rec(ms, lib_ms):
    from days.day31_conv2d_tiled import driver as D

    cases = []
    for size, (m, l) in zip((D.MNIST1, D.MNIST2, D.RESNET), zip(ms, lib_ms)):
        cases.append({"size": list(size), "rows": [{"version": "v6", "ok": True, "median_ms": m}],
                      "baseline": [{"name": "cuDNN (torch fp32)", "median_ms": l, "ok": True},
                                   {"name": "cuDNN autotuned (torch fp32)", "median_ms": 2 * l,
                                    "ok": True}]})
    return {"cases": cases}


def test_bar_met_and_missed():
    from common.bars import judge
    from days.day31_conv2d_tiled import driver as D

    ok, fig = judge(D.BAR, _rec([0.004, 0.005, 0.3], [0.008, 0.006, 0.15]))
    assert ok and "0.50x the speed" in fig
    ok, fig = judge(D.BAR, _rec([0.004, 0.007, 0.1], [0.008, 0.006, 0.15]))   # slower at MNIST2
    assert not ok and "MISSED" in fig
    ok, fig = judge(D.BAR, {"cases": _rec([0.004, 0.005, 0.3], [0.008, 0.006, 0.15])["cases"][:2]})
    assert not ok and "ResNet" in fig


# --- the public function: bad input refused before anything reaches the GPU -------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


X = np.ones((1, 2, 5, 5))
W = np.ones((3, 2, 3, 3))


@pytest.mark.parametrize("kw,exc,word", [
    (dict(x=np.ones((2, 5, 5))), ValueError, "4-D"),
    (dict(x=np.ones((1, 2, 5, 5), np.complex64)), TypeError, "complex"),
    (dict(x="x"), TypeError, "string"),
    (dict(w=np.ones((3, 2, 3))), ValueError, "4-D"),
    (dict(w=np.ones((3, 4, 3, 3))), ValueError, "C = 2"),
    (dict(w=np.ones((3, 2, 3, 2))), ValueError, "square"),
    (dict(w=np.ones((3, 2, 0, 0))), ValueError, "empty"),
    (dict(w=np.ones((1, 2, 17, 17)), padding=8), ValueError, "at most 15"),
    (dict(w=np.ones((3, 2, 3, 3), bool)), TypeError, "booleans"),
    (dict(b=np.ones(4)), ValueError, "b must have shape (3,)"),
    (dict(stride=0), ValueError, "stride"),
    (dict(stride=5), ValueError, "stride"),
    (dict(stride=1.5), TypeError, "stride"),
    (dict(padding=-1), ValueError, "padding"),
    (dict(padding="same"), TypeError, "padding"),
    (dict(w=np.ones((3, 2, 7, 7)), padding=0), ValueError, "does not fit"),
    (dict(version="v9"), ValueError, "v6"),
    (dict(version=6), TypeError, "version"),
])
def test_conv2d_refuses_bad_input(kw, exc, word):
    from days.day31_conv2d_tiled import driver as D

    args = dict(x=X, w=W, b=None, stride=1, padding=1)
    args.update(kw)
    _raises(exc, word, lambda: D.conv2d(**args))


def test_launch_refuses_unknown_versions():
    from days.day31_conv2d_tiled import driver as D

    _raises(ValueError, "unknown version", lambda: D.launch("v0", None))


def test_empty_and_padding_only_inputs_launch_nothing():
    from days.day31_conv2d_tiled import driver as D

    y = D.conv2d(np.ones((0, 2, 5, 5)), W, padding=1)
    assert y.shape == (0, 3, 5, 5) and y.dtype == np.float32
    assert D.conv2d(X, np.ones((0, 2, 3, 3)), padding=1).shape == (1, 0, 5, 5)
    # C = 0: a sum of nothing, every output is its channel's bias
    y = D.conv2d(np.ones((2, 0, 4, 4)), np.ones((3, 0, 3, 3)), [1, 2, 3], padding=1)
    assert y.shape == (2, 3, 4, 4) and np.all(y[:, 1] == 2) and y.dtype == np.float32
    # an empty image with padding 1 and a 1x1 filter: 0 + 2 - 1 + 1 = 2 rows of padding only
    y = D.conv2d(np.ones((1, 1, 0, 0)), np.ones((2, 1, 1, 1)), [5, 6], padding=1)
    assert y.shape == (1, 2, 2, 2) and np.all(y[0, 1] == 6) and np.all(y[0, 0] == 5)


# --- on the GPU ---------------------------------------------------------------------------------

EXACT_SIZES = [(2, 1, 27, 30, 5, 3, 1, 1), (3, 7, 13, 15, 11, 3, 1, 1), (2, 19, 58, 57, 50, 3, 1, 1),
               (1, 9, 11, 10, 33, 3, 1, 1), (2, 5, 33, 17, 6, 5, 2, 2), (1, 64, 9, 9, 64, 3, 1, 1),
               (1, 2, 9, 8, 3, 4, 2, 1)]


def _exact(size, seed):
    # small integers: every fp32 partial sum is an integer below 2^24, so any summation order
    # gives the exact answer; a misplaced tap or channel shows as a difference, not as noise
    n, c, h, w, k, r, s, p = size
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 4, (n, c, h, w)).astype(np.float32)
    wt = rng.integers(-2, 3, (k, c, r, r)).astype(np.float32)
    b = rng.integers(-5, 6, k).astype(np.float32)
    return x, wt, b, reference.conv2d(x, wt, b, s, p)


@pytest.mark.parametrize("size", EXACT_SIZES)
def test_every_version_is_exact_on_small_integers(gpu, size):
    from days.day31_conv2d_tiled import driver as D

    x, wt, b, want = _exact(size, sum(size))
    for v in D.VERSIONS:
        np.testing.assert_array_equal(D.conv2d(x, wt, b, size[6], size[7], v), want, err_msg=v)


@pytest.mark.parametrize("tile", ["m1a", "m1b", "m1c", "m2a", "m2b", "m2c", "r1", "r2", "r3", "r4",
                                  "r5", "gen"])
def test_every_tile_is_exact(gpu, tile):
    # each sweep candidate, not only the picked ones, at ragged sizes of every kind
    from common import harness as H
    from days.day31_conv2d_tiled import driver as D

    for size in [(2, 1, 27, 30, 5, 3, 1, 1), (3, 7, 13, 15, 11, 3, 1, 1), (1, 19, 58, 57, 70, 3, 1, 1),
                 (1, 3, 1, 1, 2, 3, 1, 1)]:
        x, wt, b, want = _exact(size, 7)
        case = H.Case(size, inputs={"x": x, "w": wt, "b": b},
                      outputs={"y": (want.shape, np.float32)})
        for v in ("v5", "v6"):
            got = H.run(lambda ver, d: D.launch_direct(ver, d, tile), v, case)["y"]
            np.testing.assert_array_equal(got, want, err_msg=f"{v} {tile} {size}")


def test_best_matches_torch(gpu):
    from common.baselines import torch_fp32
    from days.day31_conv2d_tiled import driver as D

    torch = torch_fp32()
    if torch is None:
        pytest.skip("torch with CUDA is not installed")
    rng = np.random.default_rng(31)
    x = rng.standard_normal((4, 3, 31, 29)).astype(np.float32)
    w = rng.standard_normal((10, 3, 5, 5)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    want = torch.nn.functional.conv2d(torch.tensor(x).cuda(), torch.tensor(w).cuda(),
                                      torch.tensor(b).cuda(), stride=2, padding=2).cpu().numpy()
    got = D.conv2d(x, w, b, stride=2, padding=2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
