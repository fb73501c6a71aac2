import hashlib
import struct
import zlib

import numpy as np
import pytest

from common.harness import ROOT
from common import image_io
from days.day13_color_to_gray import reference

PHOTO = ROOT / "data" / "day13_astronaut.ppm"
PHOTO_SHA256 = "07b5a5bf3b50328f1fa86ed445d32031588049d28add8eacaa382f683c933b07"


def px(r, g, b):
    return np.array([[[r, g, b]]], np.uint8)


@pytest.mark.parametrize("rgb,want", [((0, 0, 0), 0), ((255, 255, 255), 255),
                                      ((255, 0, 0), 76),    # 76.245
                                      ((0, 255, 0), 150),   # 149.685
                                      ((0, 0, 255), 29),    # 29.07
                                      ((10, 20, 30), 18),   # 2.99 + 11.74 + 3.42 = 18.15
                                      ((4, 40, 16), 26)])   # 26.5 exactly, 26.499998 in float32
def test_luma_by_hand(rgb, want):
    assert reference.to_gray(px(*rgb))[0, 0] == want
    assert reference.to_gray_formula(px(*rgb))[0, 0] == want


def test_the_float32_rule_differs_from_exact_decimal_only_at_ties():
    v = np.arange(256, dtype=np.uint8)
    allc = np.stack(np.meshgrid(v, v, v, indexing="ij"), -1).reshape(4096, 4096, 3)
    f = reference.to_gray(allc).astype(np.int16)
    num = reference.decimal_numerator(allc)
    ties = num % 1000 == 500
    diff = f - ((num + 500) // 1000).astype(np.int16)
    assert set(np.unique(diff)) <= {-1, 0}
    assert not diff[~ties].any()          # away from ties the two agree everywhere
    assert int((diff != 0).sum()) == 824  # the count the README quotes
    assert f.min() == 0 and f.max() == 255
    np.testing.assert_array_equal(reference.to_gray_exact_decimal(allc[:1, :999]),
                                  ((num[:1, :999] + 500) // 1000).astype(np.uint8))


def test_fast_reference_equals_the_formula():
    rng = np.random.default_rng(13)
    img = rng.integers(0, 256, (37, 53, 3), dtype=np.uint8)
    np.testing.assert_array_equal(reference.to_gray(img, chunk=100), reference.to_gray_formula(img))
    r, g, b = (img[..., i] for i in range(3))
    np.testing.assert_array_equal(reference.to_gray_planar(r, g, b), reference.to_gray_formula(img))


def test_reference_rejects_wrong_inputs():
    with pytest.raises(ValueError):
        reference.to_gray(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError):
        reference.to_gray(np.zeros((4, 4, 4), np.uint8))


@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 6, 3), (2, 1, 3)])
def test_png_round_trip_and_structure(shape):
    img = np.random.default_rng(sum(shape)).integers(0, 256, shape, dtype=np.uint8)
    data = image_io.png_bytes(img)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    n, kind = struct.unpack(">I4s", data[8:16])
    w, h, depth, color = struct.unpack(">IIBB", data[16:26])
    assert (n, kind, w, h, depth) == (13, b"IHDR", shape[1], shape[0], 8)
    assert color == (2 if len(shape) == 3 else 0)
    (crc,) = struct.unpack(">I", data[29:33])
    assert crc == zlib.crc32(data[12:29])
    assert data.endswith(b"IEND\xaeB`\x82")  # IEND's CRC is a fixed, well-known value
    np.testing.assert_array_equal(image_io.read_png(data), img)


def test_png_reader_notices_corruption():
    data = bytearray(image_io.png_bytes(np.zeros((2, 2), np.uint8)))
    data[20] ^= 1  # a bit of IHDR's height
    with pytest.raises(ValueError, match="CRC"):
        image_io.read_png(bytes(data))


def test_pnm_round_trip_with_comments(tmp_path):
    img = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    p = tmp_path / "x.ppm"
    p.write_bytes(b"P6\n# a comment\n3 2\n# another\n255\n" + img.tobytes())
    np.testing.assert_array_equal(image_io.read_pnm(p), img)
    image_io.write_pnm(tmp_path / "y.pgm", img[..., 0])
    assert (tmp_path / "y.pgm").read_bytes()[:11] == b"P5\n3 2\n255\n"
    np.testing.assert_array_equal(image_io.read_pnm(tmp_path / "y.pgm"), img[..., 0])


def test_the_shipped_photo():
    assert hashlib.sha256(PHOTO.read_bytes()).hexdigest() == PHOTO_SHA256
    img = image_io.read_pnm(PHOTO)
    assert img.shape == (512, 512, 3)
    before = ROOT / "days" / "day13_color_to_gray" / "astronaut.png"
    np.testing.assert_array_equal(image_io.read_png(before), img)
    assert 60 < reference.to_gray(img).mean() < 200  # a photo, not a blank


def test_case_counts_four_bytes_a_pixel_and_holds_both_layouts():
    from days.day13_color_to_gray import driver

    case = driver.make_case((3, 5), np.random.default_rng(0))
    assert case.bytes == 4 * 15
    assert case.read_bytes == 3 * 15        # 3 bytes read : 1 written, the ceiling's mix
    np.testing.assert_array_equal(case.inputs["g"], case.inputs["rgb"][..., 1])
    assert case.inputs["r"].flags["C_CONTIGUOUS"]


# --- the public functions refuse bad input before anything reaches the GPU ------------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("img,exc,word", [
    (np.zeros((4, 4, 3), np.float32), TypeError, "uint8"),        # a float image, even 0..255
    (np.zeros((4, 4, 3), np.float64) + 0.5, TypeError, "uint8"),
    (np.zeros((4, 4, 3), np.complex64), TypeError, "complex"),
    (np.zeros((4, 4, 3), bool), TypeError, "booleans"),
    ("image.png", TypeError, "string"),
    (np.zeros((4, 4, 4), np.uint8), ValueError, "RGBA"),          # 4 channels
    (np.zeros((4, 4, 1), np.uint8), ValueError, "3 channels"),
    (np.zeros((4, 4), np.uint8), ValueError, "3-D"),              # already gray
    (np.zeros((2, 4, 4, 3), np.uint8), ValueError, "3-D"),        # a batch
    (np.zeros((3, 4, 4), np.uint8), ValueError, "3 channels"),    # channels first
    (np.full((2, 2, 3), 256), ValueError, "256"),                 # out of 0..255
    (np.full((2, 2, 3), -1, np.int16), ValueError, "-1"),
])
def test_to_gray_refuses_bad_images(img, exc, word):
    from days.day13_color_to_gray import driver

    _raises(exc, word, lambda: driver.to_gray(img))


def test_to_gray_planar_refuses_bad_planes():
    from days.day13_color_to_gray import driver

    p = np.zeros((2, 3), np.uint8)
    _raises(ValueError, "one shape", lambda: driver.to_gray_planar(p, p, np.zeros((3, 2), np.uint8)))
    _raises(TypeError, "uint8", lambda: driver.to_gray_planar(p, p.astype(np.float32), p))
    _raises(ValueError, "2-D", lambda: driver.to_gray_planar(p, p, np.zeros((2, 3, 1), np.uint8)))
    _raises(ValueError, "v1, v2", lambda: driver.to_gray_planar(p, p, p, "v7"))


def test_unknown_versions_are_refused_and_launch_too():
    from days.day13_color_to_gray import driver

    _raises(ValueError, "v5", lambda: driver.to_gray(np.zeros((2, 2, 3), np.uint8), "v6"))
    _raises(TypeError, "version", lambda: driver.to_gray(np.zeros((2, 2, 3), np.uint8), 4))
    _raises(ValueError, "unknown version", lambda: driver.launch("v9", None))


def test_empty_images_launch_nothing():
    from days.day13_color_to_gray import driver

    for shape in [(0, 5, 3), (4, 0, 3)]:
        g = driver.to_gray(np.zeros(shape, np.uint8))
        assert g.shape == shape[:2] and g.dtype == np.uint8
    g = driver.to_gray_planar(*[np.zeros((0, 7), np.uint8)] * 3)
    assert g.shape == (0, 7) and g.dtype == np.uint8


def test_best_bar_and_an_awkward_bench_size():
    from common.bars import judge
    from days.day13_color_to_gray import driver

    assert driver.BEST == "v4" and driver.BEST_PLANAR in driver.PLANAR
    assert any((h * w) % 16 and w % 16 for h, w in driver.BENCH_SIZES)
    row = lambda pct: {"version": "v4", "ok": True, "median_ms": 1.0, "pct_of_ceiling": pct}
    rec = {"cases": [{"size": list(s), "rows": [row(90.0)], "baseline": []} for s in driver.BENCH_SIZES]}
    assert judge(driver.BAR, rec)[0] is True
    rec["cases"][0]["rows"] = [row(79.0)]
    assert judge(driver.BAR, rec)[0] is False


def test_integer_images_in_range_convert_on_gpu(gpu):
    # int64 pixels 0..255 are taken as they are; the smallest image (1 pixel) too
    from days.day13_color_to_gray import driver

    img = np.random.default_rng(3).integers(0, 256, (5, 37, 3))
    want = reference.to_gray(img.astype(np.uint8))
    r, g, b = (img[..., c] for c in range(3))
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.to_gray(img, v), want, err_msg=v)
        np.testing.assert_array_equal(driver.to_gray(img[:1, :1], v), want[:1, :1], err_msg=v)
        # planes in, whichever layout the version reads (interleaved ones get them stacked)
        np.testing.assert_array_equal(driver.to_gray_planar(r, g, b, v), want, err_msg=v)


def test_every_version_is_exact_on_the_photo_on_gpu(gpu, tmp_path):
    from days.day13_color_to_gray import driver

    rgb = image_io.read_pnm(PHOTO)
    want = reference.to_gray(rgb)
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.to_gray(rgb, v), want, err_msg=v)
    r, g, b = (np.ascontiguousarray(rgb[..., i]) for i in range(3))
    np.testing.assert_array_equal(driver.to_gray_planar(r, g, b, "v5"), want)
    _, gray, ok = driver.convert_photo(dst=tmp_path / "gray.png")
    assert ok and np.array_equal(image_io.read_png(tmp_path / "gray.png"), want)


def test_all_16_million_colors_on_gpu(gpu):
    from days.day13_color_to_gray import driver

    v = np.arange(256, dtype=np.uint8)
    allc = np.stack(np.meshgrid(v, v, v, indexing="ij"), -1).reshape(4096, 4096, 3)
    want = reference.to_gray(allc)
    for ver in driver.VERSIONS:
        np.testing.assert_array_equal(driver.to_gray(allc, ver), want, err_msg=ver)
