"""Day 13 driver: RGB to grayscale in five versions, and a real photo converted on the GPU.

    from days.day13_color_to_gray.driver import to_gray, to_gray_planar
    gray = to_gray(rgb)                         # HxWx3 uint8 in, HxW uint8 out (version=BEST)
    gray = to_gray_planar(r, g, b, "v5")        # three HxW uint8 planes, read as they are

A default or --bench run also converts data/day13_astronaut.ppm with the best version and
writes days/day13_color_to_gray/gray.png (extras()).
"""
from pathlib import Path

import numpy as np

from common import args as A
from common import harness as H
from common import image_io

from . import reference

K = H.Kernels(__file__)
BLOCK_2D = (32, 8, 1)   # v1, v2: x along columns (the warp reads 32 consecutive pixels)
THREADS = 256           # v3-v5
MAX_GRID_Y = 65535
PIXELS_PER_THREAD = {"v3": 4, "v4": 16, "v5": 16}
PLANAR = {"v2", "v5"}
BEST = "v4"             # the fastest (results/day13.json); interleaved is how images come
BEST_PLANAR = "v5"      # the fastest of the versions that read planes

HERE = Path(__file__).resolve().parent
PHOTO = H.ROOT / "data" / "day13_astronaut.ppm"
GRAY_PNG = HERE / "gray.png"

VERSIONS = {
    "v1": "interleaved, 1 px/thread, uchar3 byte loads",
    "v2": "planar, 1 px/thread, byte loads",
    "v3": "interleaved, 4 px/thread, 3x4-byte loads",
    "v4": "interleaved, 16 px/thread, 3x16-byte loads",
    "v5": "planar, 16 px/thread, 16-byte loads",
}
SIZE_HELP = "HEIGHTxWIDTH in pixels, e.g. 8192x8192"
SIZES = {"small": (48, 64), "default": (8192, 8192), "large": (16384, 16384)}
# 1 pixel; widths and pixel counts that are not multiples of 4 or 16 (the vector tails);
# a single row of 1000003 pixels; a 4K frame's odd cousin
CHECK_SIZES = [(1, 1), (1, 5), (3, 17), (33, 31), (1, 1000003), (1000, 1001), (7, 1920),
               (1079, 1917)]
# an 8K frame (133 MB moved), an awkward 8191x8191 (268 MB; the pixel count is odd, so v3-v5
# end with a tail of single pixels, and no row is a multiple of 16) and 1.07 GB moved. The
# default size (8192x8192) is not timed: the last bench size is the headline (progress.md, the
# ladder figure), so 16384x16384 stays last.
AWKWARD = (8191, 8191)
BENCH_SIZES = [(4320, 7680), AWKWARD, (16384, 16384)]
BAR = [{"pct": 80}]     # CURRICULUM.md: >= 80% of the copy bandwidth (of the same 3:1 mix)


def validate_size(size):
    h, w = size
    if h > MAX_GRID_Y * BLOCK_2D[1]:
        raise ValueError(f"at most {MAX_GRID_Y * BLOCK_2D[1]} rows (v1/v2 put rows on gridDim.y)")
    if h * w > 2 ** 31 - 1:
        raise ValueError("at most 2^31 - 1 pixels")


def _planes(rgb):
    return {c: np.ascontiguousarray(rgb[..., i]) for i, c in enumerate("rgb")}


def make_case(size, rng):
    h, w = size
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    # the same image in both layouts; each version reads one of them
    return H.Case(size, inputs={"rgb": rgb, **_planes(rgb)}, outputs={"gray": ((h, w), np.uint8)},
                  reference=lambda: {"gray": reference.to_gray(rgb)},
                  bytes=4 * h * w,  # 3 bytes read + 1 byte written per pixel
                  read_bytes=3 * h * w)


def launch(version, d):
    version = A.version(version, VERSIONS)  # never run some other kernel for an unknown name
    h, w = d.size
    if version in ("v1", "v2"):
        grid = (H.cdiv(w, BLOCK_2D[0]), H.cdiv(h, BLOCK_2D[1]), 1)
        if version == "v1":
            K("gray_v1", "PPii").prepared_call(grid, BLOCK_2D, d.rgb, d.gray, h, w)
        else:
            K("gray_v2", "PPPPii").prepared_call(grid, BLOCK_2D, d.r, d.g, d.b, d.gray, h, w)
        return
    n = h * w
    per = PIXELS_PER_THREAD[version]
    threads = n // per + n % per  # one per full group, then one per leftover pixel
    grid = (H.cdiv(threads, THREADS), 1, 1)
    if version in PLANAR:
        K(f"gray_{version}", "PPPPq").prepared_call(grid, (THREADS, 1, 1), d.r, d.g, d.b, d.gray, n)
    else:
        K(f"gray_{version}", "PPq").prepared_call(grid, (THREADS, 1, 1), d.rgb, d.gray, n)


def baselines(d):
    """torch, if installed: the same float32 operations in the same order, one eager op (one
    kernel, one pass over memory) at a time, so its answer matches the reference exactly."""
    from common.baselines import as_torch, torch_or_none

    torch = torch_or_none()
    if torch is None:
        return {}
    rgb = as_torch(d.array("rgb"))
    wr, wg, wb = (float(w) for w in reference.WEIGHTS)  # the float32 weights, exactly

    def fn():
        x = rgb.to(torch.float32)
        y = x[..., 0] * wr + x[..., 1] * wg
        y = y + x[..., 2] * wb
        return torch.floor(y + 0.5).clamp_(max=255).to(torch.uint8)

    return {"torch (eager ops)": fn}


def _run(case, version):
    return H.run(launch, version, case)["gray"]


def _pixels(x, name, what, ndim):
    """uint8 pixels: integer input in 0..255 converts, floats and anything else are refused."""
    if getattr(x, "dtype", None) is not None and np.dtype(x.dtype).kind == "f":
        raise TypeError(f"{name} must hold uint8 pixels (0..255), got {x.dtype}: for a float "
                        f"image in [0, 1] pass (img * 255).round().astype(np.uint8)")
    return A.uint8(x, name, ndim=ndim, what=what)


def to_gray(rgb, version=BEST):
    """Interleaved HxWx3 uint8 -> HxW uint8 luma on the GPU (a planar version gets the planes
    split on the host). Integer input in 0..255 converts; floats, other channel counts (gray,
    RGBA) and values outside 0..255 are refused. An empty image returns an empty one without
    a launch."""
    version = A.version(version, VERSIONS)
    rgb = _pixels(rgb, "rgb", "HxWx3 (an RGB image, channels last)", ndim=3)
    if rgb.shape[2] != 3:
        hint = " (RGBA? drop alpha with rgb[..., :3])" if rgb.shape[2] == 4 else ""
        raise ValueError(f"rgb must have 3 channels last, HxWx3, got shape {rgb.shape}{hint}")
    size = rgb.shape[:2]
    if 0 in size:
        return np.zeros(size, np.uint8)
    validate_size(size)
    inputs = {"rgb": rgb, **_planes(rgb)} if version in PLANAR else {"rgb": rgb}
    return _run(H.Case(size, inputs=inputs, outputs={"gray": (size, np.uint8)}), version)


def to_gray_planar(r, g, b, version=BEST):
    """Three HxW uint8 planes -> HxW uint8 luma on the GPU. v2 and v5 read the planes as they
    are (v5 is the fastest way for planar input: pass version="v5"); the interleaved versions,
    BEST included, get the planes interleaved on the host first. The same input rules as
    to_gray; an empty image returns an empty one without a launch."""
    version = A.version(version, VERSIONS)
    planes = [_pixels(p, n, "HxW (one color plane)", ndim=2) for p, n in zip((r, g, b), "rgb")]
    A.same_shape(r=planes[0], g=planes[1], b=planes[2])
    size = planes[0].shape
    if 0 in size:
        return np.zeros(size, np.uint8)
    validate_size(size)
    inputs = dict(zip("rgb", planes))
    if version not in PLANAR:
        inputs["rgb"] = np.ascontiguousarray(np.stack(planes, axis=-1))
    return _run(H.Case(size, inputs=inputs, outputs={"gray": (size, np.uint8)}), version)


def convert_photo(version=BEST, src=PHOTO, dst=GRAY_PNG):
    """Read the PPM, convert it on the GPU, check it against the reference, write the PNG."""
    rgb = image_io.read_pnm(src)
    gray = to_gray(rgb, version)
    ok = bool(np.array_equal(gray, reference.to_gray(rgb)))
    image_io.write_png(dst, gray)
    return rgb, gray, ok


def extras(report, mode):
    if mode == "check":
        return
    rgb, gray, ok = convert_photo()
    agree = {v: bool(np.array_equal(to_gray(rgb, v), gray)) for v in VERSIONS}
    rows = [[PHOTO.name, f"{rgb.shape[1]}x{rgb.shape[0]}", BEST,
             "exact" if ok else "DIFFERS", ", ".join(v for v, a in agree.items() if a),
             str(GRAY_PNG.relative_to(H.ROOT))]]
    report.section("a real photo through the GPU", rows,
                   ["input", "WxH", "version", "vs reference", "versions identical", "written"])
    report.record("photo", {"input": str(PHOTO.relative_to(H.ROOT)), "shape": list(rgb.shape),
                            "version": BEST, "exact": ok, "versions_identical": agree,
                            "output": str(GRAY_PNG.relative_to(H.ROOT)),
                            "mean_gray": float(gray.mean())})
    if not ok or not all(agree.values()):
        report.failures.append("the photo's grayscale differs from the reference or between versions")
