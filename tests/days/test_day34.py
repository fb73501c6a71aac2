import numpy as np
import pytest

from days.day34_image_augmentation import reference as R


# --- the sampling against hand-computed values ------------------------------------------------

def test_sample_coords_by_hand():
    # same size: u = o exactly, no interpolation
    lo, hi, f = R.sample_coords(5, 5)
    assert lo.tolist() == [0, 1, 2, 3, 4] and f.tolist() == [0] * 5 and hi.tolist() == [1, 2, 3, 4, 4]
    # 2 -> 4 (upscale): u = (2o + 1) / 4 - 1/2 = -0.25, 0.25, 0.75, 1.25, clamped to [0, 1]
    lo, hi, f = R.sample_coords(4, 2)
    assert lo.tolist() == [0, 0, 0, 1] and hi.tolist() == [1, 1, 1, 1]
    assert f.tolist() == [0.0, 0.25, 0.75, 0.0]
    # 4 -> 2 (downscale by 2): u = 2o + 0.5, halfway between two source pixels
    lo, hi, f = R.sample_coords(2, 4)
    assert lo.tolist() == [0, 2] and hi.tolist() == [1, 3] and f.tolist() == [0.5, 0.5]
    # flipped: the same samples in reverse order
    lo2, _, f2 = R.sample_coords(2, 4, flip=True)
    assert lo2.tolist() == [2, 0] and f2.tolist() == [0.5, 0.5]


def test_sampling_coordinate_is_float32_arithmetic():
    # 3 -> 7: (2o + 1) 3 / 14 - 1/2 rounded in float32 twice; the weights are exact float32
    lo, _, f = R.sample_coords(7, 3)
    num = np.float32((2 * np.arange(7) + 1) * 3)
    u = np.clip(num / np.float32(14) - np.float32(0.5), 0, 2)
    np.testing.assert_array_equal(f, (u - np.floor(u)).astype(np.float64))
    assert np.all(f.astype(np.float32) == f)


def _image(h, w, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _prm(x0, y0, cw, ch, flip=0, b=1.0, c=1.0, s=1.0):
    return np.array([x0, y0, cw, ch, flip, b, c, s], np.float32)


def test_resized_crop_identity_flip_and_halving():
    img = _image(6, 8)
    np.testing.assert_array_equal(R.resized_crop(img, _prm(0, 0, 8, 6), 6, 8), img)
    np.testing.assert_array_equal(R.resized_crop(img, _prm(0, 0, 8, 6, flip=1), 6, 8), img[:, ::-1])
    np.testing.assert_array_equal(R.resized_crop(img, _prm(2, 1, 3, 4), 4, 3), img[1:5, 2:5])
    # 4x4 -> 2x2: every output pixel the mean of a 2x2 block
    box = img[2:6, 4:8].astype(float)
    want = box.reshape(2, 2, 2, 2, 3).mean(axis=(1, 3))
    np.testing.assert_allclose(R.resized_crop(img, _prm(4, 2, 4, 4), 2, 2), want, rtol=1e-14)


def test_resized_crop_against_a_pixel_loop():
    # a second formulation: one output pixel at a time, weights written out
    img = _image(20, 30, 1)
    p = _prm(3, 2, 17, 11, flip=1)
    oh, ow = 7, 9
    got = R.resized_crop(img, p, oh, ow)
    for oy in range(oh):
        for ox in range(ow):
            xs = ow - 1 - ox
            u = np.clip(np.float32((2 * xs + 1) * 17) / np.float32(2 * ow) - np.float32(0.5), 0, 16)
            v = np.clip(np.float32((2 * oy + 1) * 11) / np.float32(2 * oh) - np.float32(0.5), 0, 10)
            x, y = int(u), int(v)
            fx, fy = float(u) - x, float(v) - y
            x1, y1 = min(x + 1, 16), min(y + 1, 10)
            px = lambda yy, xx: img[2 + yy, 3 + xx].astype(float)
            want = (1 - fy) * ((1 - fx) * px(y, x) + fx * px(y, x1)) + fy * ((1 - fx) * px(y1, x) + fx * px(y1, x1))
            np.testing.assert_allclose(got[oy, ox], want, rtol=1e-13)


def test_jitter_closed_forms():
    x = np.random.default_rng(2).random((5, 6, 3))
    np.testing.assert_allclose(R.jitter(x, 1, 1, 1), x, atol=1e-15)
    m = (x @ R.GRAY).mean()
    np.testing.assert_allclose(R.jitter(x, 1, 0, 1), np.full_like(x, m), atol=1e-15)   # contrast 0
    y = R.jitter(x, 1, 1, 0)                                                            # saturation 0
    np.testing.assert_allclose(y, np.repeat((x @ R.GRAY)[..., None], 3, -1), atol=1e-15)
    assert R.jitter(np.full((1, 1, 3), 0.6), 2.0, 1, 1).tolist() == [[[1.0, 1.0, 1.0]]]  # clamp
    # contrast blends toward the mean gray AFTER brightness (and its clamp)
    z = np.array([[[0.9, 0.9, 0.9]], [[0.1, 0.1, 0.1]]])
    mb = (min(1.0, 0.9 * 1.5) + 0.1 * 1.5) / 2
    np.testing.assert_allclose(R.jitter(z, 1.5, 0.5, 1)[:, 0, 0], [0.5 * 1.0 + 0.5 * mb, 0.5 * 0.15 + 0.5 * mb])


def test_augment_normalizes_per_channel():
    img = np.zeros((1, 4, 4, 3), np.uint8)
    img[..., 0], img[..., 1], img[..., 2] = 255, 0, 51
    out = R.augment(img, _prm(0, 0, 4, 4)[None], 4, 4)
    assert out.shape == (1, 3, 4, 4)
    np.testing.assert_allclose(out[0, :, 0, 0], (np.array([1.0, 0.0, 0.2]) - R.MEAN) / R.STD)
    np.testing.assert_array_equal(R.to_uint8(out)[0], img[0])


def test_draw_params():
    rng = np.random.default_rng(3)
    p = R.draw_params(rng, 500, 300, 400)
    x0, y0, cw, ch, fl = p[:, :5].T
    assert np.all(x0 >= 0) and np.all(x0 + cw <= 400) and np.all(y0 >= 0) and np.all(y0 + ch <= 300)
    frac = cw * ch / (300 * 400)
    assert frac.min() > 0.07 and frac.max() <= 1.0
    assert np.all(cw / ch > 0.7) and np.all(cw / ch < 1.4)
    assert set(fl.tolist()) == {0.0, 1.0} and 0.4 < fl.mean() < 0.6
    assert p[:, 5:].min() >= 0.6 and p[:, 5:].max() <= 1.4
    np.testing.assert_array_equal(R.draw_params(np.random.default_rng(3), 500, 300, 400), p)
    # a 1 x 100 image admits no box with ratio in [3/4, 4/3]: the central crop of ratio 4/3
    assert R.crop_box(np.random.default_rng(0), 1, 100) == (49, 0, 1, 1)


def test_input_bytes_by_hand():
    assert R.input_bytes(_prm(0, 0, 8, 6)[None], 6, 8) == 6 * 8 * 3            # identity
    # 8x8 -> 2x2: u = 4o + 1.5: rows and columns 1, 2, 5, 6 -> 4 rows, columns 1..6
    assert R.input_bytes(_prm(0, 0, 8, 8)[None], 2, 2) == 4 * 6 * 3


def test_grid_layout():
    tiles = np.stack([np.full((2, 3, 3), i, np.uint8) for i in range(5)])
    g = R.grid(tiles, cols=3, gap=1)
    assert g.shape == (5, 11, 3)
    assert g[0, 0, 0] == 0 and g[0, 4, 0] == 1 and g[3, 0, 0] == 3 and g[3, 4, 0] == 4
    assert g[2, 0, 0] == 255 and g[3, 8, 0] == 255                 # the gap; the empty sixth tile


# --- the driver (no GPU) -------------------------------------------------------------------------

def test_case_bytes():
    from days.day34_image_augmentation import driver as D

    case = D.make_case((3, 40, 50, 16, 20), np.random.default_rng(0))
    prm = case.inputs["prm"]
    inb = R.input_bytes(prm, 16, 20) + prm.nbytes + 24
    assert case.read_bytes == inb and case.bytes == inb + 3 * 3 * 16 * 20 * 4
    assert case.inputs["images"].shape == (3, 40, 50, 3)


def test_check_sizes_cover_the_paths(monkeypatch):
    from days.day34_image_augmentation import driver as D

    monkeypatch.setattr(D, "smem_optin", lambda: 227 * 1024)
    cs = D.CHECK_SIZES
    assert any(s[4] % 4 == 0 for s in cs) and any(s[4] % 4 for s in cs)       # 16-byte / scalar
    assert any(s[3] > s[1] for s in cs)                                        # upscaling
    assert any(D.v4_smem(s, D.V4_K) == 0 for s in cs)                          # v4's fallback
    assert D.v4_smem((256, 512, 512, 224, 224), 8) == 48 * 1568 + 8 * 224      # staged band
    assert D.v4_smem((256, 512, 512, 224, 224), 2) == 0                         # too large


def _params_of(D, size):
    return D.make_case(size, np.random.default_rng(sum(size))).inputs["prm"]


def test_check_sizes_cover_the_v5_v6_paths(monkeypatch):
    from days.day34_image_augmentation import driver as D

    monkeypatch.setattr(D, "smem_optin", lambda: 227 * 1024)
    monkeypatch.setattr(D, "smem_per_sm", lambda: 228 * 1024)
    cs = D.CHECK_SIZES
    assert any(D.v5_layout(s) is None for s in cs)                             # v5/v6 run v4
    staged = [s for s in cs if D.v5_layout(s) is not None]
    # v6 walks columns for crops of fewer than 1.5 OH rows, v5's pixel order for the others;
    # both kinds at sizes that v6 stages, and more columns than a block has threads
    walk = [bool(2 * p[3] < 3 * s[3]) for s in staged for p in _params_of(D, s)]
    assert any(walk) and not all(walk)
    assert any(s[4] > D.V5_T for s in staged)
    # a band of more rows than the 8 blocks of a cluster have (empty bands: 1 to 7 output rows)
    assert any(s[3] < D.V5_K for s in staged) and any(s[3] > 3 * D.V5_K for s in staged)


def test_v5_layout_by_hand(monkeypatch):
    from days.day34_image_augmentation import driver as D

    monkeypatch.setattr(D, "smem_optin", lambda: 227 * 1024)
    monkeypatch.setattr(D, "smem_per_sm", lambda: 228 * 1024)
    # 224 x 224 in 8 bands of 28 rows: 6272 pixels = 1568 groups of 48 bytes, 224 x 8 bytes
    # of x taps, 28 x 32 bytes of row and chunk tables = 77952; two blocks an SM leave
    # 228 KB / 2 - 1.5 KB - 77952 = 37248 for the ring: halves of 18624 bytes, 11 staged rows
    # of a 512-wide box (pitch 16 ceil((1536 + 30) / 16) = 1568)
    assert D.v5_layout((256, 512, 512, 224, 224)) == (1568, 18624, 115200)
    nbq, half, smem = D.v5_layout((128, 375, 500, 223, 227))
    assert nbq == 28 * 227 // 4 and half % 16 == 0 and half >= 3 * 1536 and smem <= 115200
    monkeypatch.setattr(D, "V5_TWO_A_SM", False)                               # one block an SM
    assert D.v5_layout((256, 512, 512, 224, 224))[2] == 227 * 1024 - 1024
    monkeypatch.setattr(D, "V5_TWO_A_SM", True)
    monkeypatch.setattr(D, "V5_HALF_MAX", 1)                                   # 3 rows a half
    assert D.v5_layout((256, 512, 512, 224, 224))[1] == 3 * 1568
    monkeypatch.setattr(D, "V5_HALF_MAX", None)
    # 401 x 403: 51 rows a band, 246 KB of pixels: no block holds them
    assert D.v5_layout((1, 50, 60, 401, 403)) is None
    assert D.same_as("v5", (1, 50, 60, 401, 403)) == "v4" and D.same_as("v6", (1, 50, 60, 401, 403)) == "v4"
    assert D.same_as("v5", (256, 512, 512, 224, 224)) is None


def test_validate_size():
    from common import harness as H
    from days.day34_image_augmentation import driver as D

    with pytest.raises(H.SizeError, match="bytes"):
        H.parse_size(D, "4096x512x512x224x224")
    with pytest.raises(H.SizeError, match="gridDim.y"):
        H.parse_size(D, "70000x4x4x4x4")
    with pytest.raises(H.SizeError, match="2\\^24"):
        H.parse_size(D, "1x8192x8192x1100x64")
    assert H.parse_size(D, "128x375x500x223x227") == (128, 375, 500, 223, 227)


def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


def test_augment_refuses_bad_input():
    from days.day34_image_augmentation import driver as D

    imgs = np.zeros((2, 8, 8, 3), np.uint8)
    _raises(TypeError, "uint8", lambda: D.augment(imgs.astype(np.float32)))
    _raises(ValueError, "4-D", lambda: D.augment(imgs[0]))
    _raises(ValueError, "3 channels", lambda: D.augment(np.zeros((2, 8, 8, 4), np.uint8)))
    _raises(ValueError, "outside", lambda: D.augment(np.full((1, 2, 2, 3), 256)))
    _raises(TypeError, "out_size", lambda: D.augment(imgs, out_size=224))
    _raises(ValueError, "OH", lambda: D.augment(imgs, out_size=(-1, 4)))
    _raises(TypeError, "OW", lambda: D.augment(imgs, out_size=(4, 2.5)))
    _raises(ValueError, "nothing to crop", lambda: D.augment(np.zeros((1, 0, 5, 3), np.uint8)))
    good = np.array([[0, 0, 4, 4, 0, 1, 1, 1]] * 2, np.float32)
    _raises(ValueError, "params", lambda: D.augment(imgs, params=good[:1]))
    _raises(ValueError, "inside", lambda: D.augment(imgs, params=good + [6, 0, 0, 0, 0, 0, 0, 0]))
    _raises(ValueError, "inside", lambda: D.augment(imgs, params=good * [1, 1, 0, 1, 1, 1, 1, 1]))
    _raises(ValueError, "flip", lambda: D.augment(imgs, params=good + [0, 0, 0, 0, 2, 0, 0, 0]))
    _raises(ValueError, ">= 0", lambda: D.augment(imgs, params=good - [0, 0, 0, 0, 0, 2, 0, 0]))
    _raises(ValueError, "whole", lambda: D.augment(imgs, params=good + [0.5, 0, 0, 0, 0, 0, 0, 0]))
    _raises(ValueError, "finite", lambda: D.augment(imgs, params=good * [np.nan] + 0))
    _raises(ValueError, "unknown version", lambda: D.augment(imgs, version="v7"))
    _raises(ValueError, "unknown version", lambda: D.launch("v0", None))
    _raises(ValueError, "seed", lambda: D.draw_params(2, 8, 8, seed=-1))
    _raises(ValueError, "height", lambda: D.draw_params(2, 0, 8))


def test_empty_batches_launch_nothing():
    from days.day34_image_augmentation import driver as D

    out, prm = D.augment(np.zeros((0, 8, 8, 3), np.uint8), (5, 6))
    assert out.shape == (0, 3, 5, 6) and out.dtype == np.float32 and prm.shape == (0, 8)
    out, prm = D.augment(np.zeros((2, 8, 8, 3), np.uint8), (0, 6))
    assert out.shape == (2, 3, 0, 6) and prm.shape == (2, 8)


def test_reference_picture(tmp_path):
    from common import image_io
    from days.day34_image_augmentation import driver as D

    path = D.write_reference_picture(tmp_path / "aug.png")
    pic = image_io.read_png(path)
    n, (oh, ow) = D.PICTURE_COPIES, D.PICTURE_SIZE
    assert pic.shape == (2 * oh + 6, (n // 2) * ow + (n // 2 - 1) * 6, 3)
    # the committed picture is this one (written by the reference, or by the GPU run, which
    # agrees with it to within one level of rounding)
    committed = image_io.read_png(D.PICTURE)
    assert committed.shape == pic.shape
    assert np.abs(committed.astype(int) - pic).max() <= 1


# --- GPU -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5", "v6"])
def test_photo_on_gpu(gpu, version):
    from common.check import compare
    from days.day34_image_augmentation import driver as D

    photo, params = D.photo_params()
    batch = np.stack([photo] * len(params))
    out, _ = D.augment(batch, (224, 224), params=params, version=version)
    assert compare(out, R.augment(batch, params, 224, 224)).ok


@pytest.mark.parametrize("version", ["v2", "v3", "v4", "v5", "v6"])
def test_deterministic_on_gpu(gpu, version):
    # no atomics: the same input gives the same bits
    from days.day34_image_augmentation import driver as D

    imgs = D.photo_batch(np.random.default_rng(1), 5, 300, 301)
    a, prm = D.augment(imgs, (223, 227), seed=4, version=version)
    b, _ = D.augment(imgs, (223, 227), params=prm, version=version)
    np.testing.assert_array_equal(a, b)


def test_v4_fallback_and_every_candidate_on_gpu(gpu):
    from common import harness as H
    from days.day34_image_augmentation import driver as D

    for size in [(2, 64, 64, 420, 420), (3, 100, 90, 57, 61)]:
        case = D.make_case(size, np.random.default_rng(2))
        assert H.check(D.launch, "v4", case).ok, size


def test_v5_v6_small_ring_and_one_block_an_sm_on_gpu(gpu, monkeypatch):
    # the smallest ring (3 staged rows a half: a chunk every output row or two, each half
    # reused many times) and the largest (one block an SM) give the same answers
    from common import harness as H
    from days.day34_image_augmentation import driver as D

    for knob, value in [("V5_HALF_MAX", 1), ("V5_TWO_A_SM", False)]:
        monkeypatch.setattr(D, knob, value)
        for size in [(3, 300, 301, 223, 227), (2, 512, 512, 224, 224), (3, 40, 41, 64, 64)]:
            case = D.make_case(size, np.random.default_rng(6))
            for v in ("v5", "v6"):
                assert H.check(D.launch, v, case).ok, (knob, v, size)
        monkeypatch.undo()
