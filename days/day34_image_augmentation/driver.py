"""Day 34 driver: batched crop + resize, flip, color jitter and normalization on the GPU.

    from days.day34_image_augmentation.driver import augment, draw_params
    out, params = augment(images, out_size=(224, 224), seed=0)   # [B, H, W, 3] uint8 in,
                                                                 # [B, 3, 224, 224] float32 out
    out, _ = augment(images, params=params)                      # the same augmentation again

The per-image random parameters (crop box, flip, jitter factors) are drawn on the host from a
seeded numpy generator (`draw_params`) and uploaded as a [B, 8] table; the reference takes the
same table. A default or --bench run also augments data/day13_astronaut.ppm eight times and
writes days/day34_image_augmentation/augmented.png (extras()).
"""
from pathlib import Path

import numpy as np

from common import args as A
from common import harness as H
from common import image_io

from . import reference

K = H.Kernels(__file__)
THREADS = 256               # v1-v3
V4_K, V4_T = 8, 512         # v4: blocks per image (cluster size), threads per block (kernel.cu)
V4_CANDIDATES = [(2, 512), (4, 256), (4, 512), (4, 1024), (8, 256), (8, 512)]   # -DDAY34_SWEEP
V5_K, V5_T = 8, 512         # v5: blocks per image (cluster size), threads per block (kernel.cu)
V5_HALF_MAX = None          # bytes: caps a v5 ring half (tests force many chunks with it)
V5_TWO_A_SM = True          # size v5/v6 blocks for two an SM (False: up to the opt-in limit)
MAX_GRID_Y = 65535          # v2 / v3 put images on gridDim.y

HERE = Path(__file__).resolve().parent
PHOTO = H.ROOT / "data" / "day13_astronaut.ppm"
PICTURE = HERE / "augmented.png"
PICTURE_COPIES, PICTURE_SEED, PICTURE_SIZE = 8, 34, (224, 224)

VERSIONS = {
    "v1": "mean by atomics, then a thread per output element (3 samplings a pixel)",
    "v2": "per-block partial sums, then a thread per pixel",
    "v3": "v2 with 4 pixels a thread, 16-byte stores per plane",
    "v4": "one kernel, a cluster per image: DSMEM mean, band re-read from L1/L2",
    "v5": "v4 with the source rows staged in shared memory (bulk copies), tap tables, PRMT unpack",
    "v6": "v5, and crops of fewer than 1.5 OH rows walk down columns, reusing row blends",
}
BEST = "v5"                 # fastest at both bench sizes (H200, 2026-11-26); v6's column walk
                            # saves instructions (.notes/day34_model.py) but not time
SIZE_HELP = "BxHxWxOHxOW (B images of HxW pixels to OHxOW), e.g. 256x512x512x224x224"
SIZES = {"small": (2, 64, 48, 24, 20), "default": (256, 512, 512, 224, 224),
         "large": (512, 512, 512, 224, 224)}
# 1-pixel images and outputs; upscaling (output larger than the crop); OW = 1, 5, 7, 9, 33,
# 227 (rows that are not whole groups of 4: the scalar stores), OW % 4 == 0 (the 16-byte
# stores); an image per block row of v2/v3 and several blocks per image; 9 images of 1x4;
# 401x403 outputs: v4's band does not fit in shared memory (pass 2 samples again), v5/v6 run
# v4; 9x601 outputs of 12-row crops: v6 walks columns, more columns than threads
CHECK_SIZES = [(1, 1, 1, 1, 1), (1, 1, 1, 3, 5), (2, 5, 7, 3, 1), (3, 17, 33, 8, 9),
               (2, 64, 48, 31, 33), (4, 100, 75, 24, 24), (3, 40, 41, 64, 64),
               (2, 300, 301, 223, 227), (1, 512, 512, 224, 224), (9, 20, 20, 1, 4),
               (5, 33, 129, 65, 7), (1, 50, 60, 401, 403), (2, 12, 700, 9, 601)]
AWKWARD = (128, 375, 500, 223, 227)   # odd output widths: no 16-byte stores, ragged row ends
BENCH_SIZES = [AWKWARD, (256, 512, 512, 224, 224)]   # headline last: 256 of 512^2 -> 224^2
BAR = [{"pct": 70}]   # CURRICULUM.md / issue 11: >= 70% of the memory ceiling (its own mix)


def validate_size(size):
    b, h, w, oh, ow = size
    A.fits_int32("the batch", b * h * w * 3, "bytes")
    A.fits_int32("the output", b * 3 * oh * ow)
    if b > MAX_GRID_Y:
        raise ValueError(f"at most {MAX_GRID_Y} images (v2/v3 put images on gridDim.y)")
    if 2 * ow * w >= 2 ** 24 or 2 * oh * h >= 2 ** 24:
        raise ValueError("2 x OW x W and 2 x OH x H must stay below 2^24 (the sampling "
                         "coordinates are exact float32 integers before one division)")


# --- cases ------------------------------------------------------------------------------------------

def photo_batch(rng, b, h, w) -> np.ndarray:
    """B natural images of HxW: the astronaut photo tiled to HxW, each rolled by a random offset."""
    photo = image_io.read_pnm(PHOTO)
    ph, pw, _ = photo.shape
    tile = np.tile(photo, (-(-h // ph), -(-w // pw), 1))[:h, :w]
    out = np.empty((b, h, w, 3), np.uint8)
    for i in range(b):
        out[i] = np.roll(tile, (int(rng.integers(h)), int(rng.integers(w))), (0, 1))
    return out


def norm_table() -> np.ndarray:
    """The kernels' normalization constants: mean (3), then 1 / std (3), float32."""
    return np.concatenate([reference.MEAN, 1.0 / reference.STD]).astype(np.float32)


def make_case(size, rng):
    b, h, w, oh, ow = size
    images = photo_batch(rng, b, h, w)
    params = reference.draw_params(rng, b, h, w)
    inputs = {"images": images, "prm": params, "norm": norm_table()}   # (d.prm: scalars)
    out_bytes = b * 3 * oh * ow * 4
    # bytes: every output float written once; of the input, the source rows the sampling
    # touches times the span of columns it touches (what a crop must read), and the tables
    in_bytes = reference.input_bytes(params, oh, ow) + params.nbytes + 24
    return H.Case(size, inputs=inputs, outputs={"out": ((b, 3, oh, ow), np.float32)},
                  reference=lambda: {"out": reference.augment(images, params, oh, ow)},
                  bytes=in_bytes + out_bytes, read_bytes=in_bytes)


# --- launches ----------------------------------------------------------------------------------------

def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    b, h, w, oh, ow = d.size
    npix = oh * ow
    if version == "v1":
        sums = d.scratch("sums", (max(b, 1),), np.float64)
        K("aug_zero_v1", "Pi").prepared_call((H.cdiv(b, THREADS), 1, 1), (THREADS, 1, 1), sums, b)
        K("aug_mean_v1", "PPPiiiii").prepared_call(
            (H.cdiv(b * npix, THREADS), 1, 1), (THREADS, 1, 1), d.images, d.prm, sums,
            b, h, w, oh, ow)
        K("aug_main_v1", "PPPPPiiiii").prepared_call(
            (H.cdiv(b * 3 * npix, THREADS), 1, 1), (THREADS, 1, 1), d.images, d.prm, sums,
            d.norm, d.out, b, h, w, oh, ow)
    elif version in ("v2", "v3"):
        items = npix if version == "v2" else oh * H.cdiv(ow, 4)
        p = H.cdiv(items, THREADS)
        partial = d.scratch("partial", (b * p,))
        grid = (p, b, 1)
        K(f"aug_mean_{version}", "PPPiiii").prepared_call(
            grid, (THREADS, 1, 1), d.images, d.prm, partial, h, w, oh, ow)
        K(f"aug_main_{version}", "PPPPPiiii").prepared_call(
            grid, (THREADS, 1, 1), d.images, d.prm, partial, d.norm, d.out, h, w, oh, ow)
    elif version == "v4" or v5_layout(d.size) is None:
        launch_v4(d, "aug_v4", V4_K, V4_T)
    elif version == "v5":
        launch_v5(d, "aug_v5", V5_K, V5_T)
    else:
        launch_v5(d, "aug_v6", V5_K, V5_T)


def same_as(version, size):
    """v5 and v6 run v4's kernel where their band and two staged source rows do not fit in
    shared memory."""
    return "v4" if version in ("v5", "v6") and v5_layout(size) is None else None



def v4_smem(size, k) -> int:
    """Dynamic shared memory of a v4 block: its band's three float4 planes (48 bytes a group
    of 4 pixels) and the x-tap table (8 bytes a column), if they fit in what a block may opt in
    to; else 0 (the kernel then samples the band again in pass 2)."""
    _, _, _, oh, ow = size
    per = H.cdiv(oh * H.cdiv(ow, 4), k)
    need = 48 * per + 8 * ow
    return need if need <= smem_optin() - 1024 else 0     # 1 KB for the static arrays


def smem_per_sm() -> int:
    from common.gpu import device_info

    return device_info().get("smem_per_sm") or 228 * 1024


def v5_layout(size, k=V5_K):
    """(nbq, half, dynamic bytes) of a v5 block (kernel.cu's augment_staged, same order): the
    band's pixels (48 bytes a group of 4), the x-tap table (8 bytes a column, OW rounded to
    even), the row and chunk tables (16 + 16 bytes a band row), then the ring's two halves.
    The halves take what is left of half an SM's shared memory (two blocks an SM), at least 3
    staged rows of the widest possible box each; if that does not fit, a block takes up to the
    opt-in limit; if that does not fit either, None (v5 then runs v4)."""
    _, _, w, oh, ow = size
    rows = H.cdiv(oh, k)
    nbq = H.cdiv(rows * ow, 4)
    fixed = 48 * nbq + 8 * 2 * H.cdiv(ow, 2) + 32 * rows
    pitch = 16 * H.cdiv(3 * w + 30, 16)               # kernel.cu's staged_pitch(W)
    least = fixed + 2 * 3 * pitch
    two_a_sm = smem_per_sm() // 2 - 1024 - 512       # 1 KB reserved a block, static arrays
    limit = two_a_sm if least <= two_a_sm and V5_TWO_A_SM else smem_optin() - 1024
    if least > limit:
        return None
    half = 16 * ((limit - fixed) // 32)
    if V5_HALF_MAX is not None:
        half = max(3 * pitch, min(half, 16 * (V5_HALF_MAX // 16)))
    return nbq, half, fixed + 2 * half


def smem_optin() -> int:
    from common.gpu import device_info

    return device_info().get("smem_per_block_optin") or 48 * 1024


def launch_v4(d, name, k, t):
    b, h, w, oh, ow = d.size
    smem = v4_smem(d.size, k)
    K(name, "PPPPiiiii", dynamic_smem=smem).prepared_call(
        (b * k, 1, 1), (t, 1, 1), d.images, d.prm, d.norm, d.out, h, w, oh, ow, smem,
        shared_size=smem)


def launch_v5(d, name, k, t):
    b, h, w, oh, ow = d.size
    nbq, half, smem = v5_layout(d.size, k)
    K(name, "PPPPiiiiiii", dynamic_smem=smem).prepared_call(
        (b * k, 1, 1), (t, 1, 1), d.images, d.prm, d.norm, d.out, h, w, oh, ow, nbq, half,
        b * h * w * 3, shared_size=smem)


def baselines(d):
    """torch eager (what a PyTorch user writes without DALI): the batch to float NCHW,
    F.grid_sample (bilinear, the same sampling points: a per-image grid built once on the
    host from the same float32 coordinates), then brightness, contrast (per-image mean),
    saturation and normalization as broadcast tensor ops. Its output is timed, not compared:
    grid_sample recomputes each coordinate from a normalized one (a float32 round trip of up
    to 3e-5 pixel), which at a sharp edge moves a value by more than the float32 tolerance."""
    from common.baselines import as_torch, torch_or_none

    torch = torch_or_none()
    if torch is None:
        return {}
    import torch.nn.functional as F

    b, h, w, oh, ow = d.size
    prm = d.case.inputs["prm"]
    gx = np.empty((b, ow)); gy = np.empty((b, oh))
    for i in range(b):
        x0, y0, cw, ch, flip = (int(v) for v in prm[i, :5])
        for axis, (n_out, box, o0, n_in, fl) in enumerate([(ow, cw, x0, w, flip), (oh, ch, y0, h, 0)]):
            o = np.arange(n_out)
            o = n_out - 1 - o if fl else o
            u = np.clip(((2 * o + 1) * box).astype(np.float32) / np.float32(2 * n_out)
                        - np.float32(0.5), 0, box - 1).astype(np.float64)
            g = (2 * (o0 + u) + 1) / n_in - 1               # align_corners=False
            (gx if axis == 0 else gy)[i] = g
    grid = torch.empty((b, oh, ow, 2), device="cuda")
    grid[..., 0] = torch.as_tensor(gx, device="cuda", dtype=torch.float32)[:, None, :]
    grid[..., 1] = torch.as_tensor(gy, device="cuda", dtype=torch.float32)[:, :, None]
    imgs = as_torch(d.array("images"))
    t = torch.as_tensor(prm, device="cuda")
    kb = (t[:, 5] / 255).view(b, 1, 1, 1)
    c, s = t[:, 6].view(b, 1, 1, 1), t[:, 7].view(b, 1, 1, 1)
    gw = torch.tensor(reference.GRAY, device="cuda", dtype=torch.float32).view(1, 3, 1, 1)
    mean = torch.tensor(reference.MEAN, device="cuda", dtype=torch.float32).view(1, 3, 1, 1)
    std = torch.tensor(reference.STD, device="cuda", dtype=torch.float32).view(1, 3, 1, 1)

    def run():
        x = imgs.permute(0, 3, 1, 2).float()
        y = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
        y = (y * kb).clamp_(0, 1)
        m = (y * gw).sum(1, keepdim=True).mean((2, 3), keepdim=True)
        y = (c * y + (1 - c) * m).clamp_(0, 1)
        g = (y * gw).sum(1, keepdim=True)
        y = (s * y + (1 - s) * g).clamp_(0, 1)
        (y - mean) / std
        return None
    return {"torch eager (grid_sample)": run}


# --- public functions ----------------------------------------------------------------------------------

def draw_params(batch, height, width, seed=0) -> np.ndarray:
    """Random augmentation parameters for a batch, [B, 8] float32 (x0, y0, cw, ch, flip,
    brightness, contrast, saturation), from numpy's generator seeded with `seed`."""
    batch = A.count(batch, "batch")
    height = A.count(height, "height", low=1)
    width = A.count(width, "width", low=1)
    seed = A.count(seed, "seed")
    return reference.draw_params(np.random.default_rng(seed), batch, height, width)


def _check_params(params, b, h, w) -> np.ndarray:
    p = A.floats(params, "params", shape=(b, 8), what="[B, 8] (x0, y0, cw, ch, flip, "
                 "brightness, contrast, saturation)")
    if not np.all(np.isfinite(p)):
        raise ValueError("params must be finite")
    box = p[:, :5]
    if np.any(box != np.round(box)):
        raise ValueError("params' x0, y0, cw, ch and flip must be whole numbers")
    x0, y0, cw, ch, fl = box.T
    if np.any(x0 < 0) or np.any(y0 < 0) or np.any(cw < 1) or np.any(ch < 1) \
            or np.any(x0 + cw > w) or np.any(y0 + ch > h):
        raise ValueError(f"every crop box (x0, y0, cw, ch) must lie inside the {h}x{w} image "
                         "with cw, ch >= 1")
    if np.any((fl != 0) & (fl != 1)):
        raise ValueError("params' flip column must be 0 or 1")
    if np.any(p[:, 5:] < 0):
        raise ValueError("brightness, contrast and saturation factors must be >= 0")
    return p


def augment(images, out_size=(224, 224), seed=0, params=None, version=BEST):
    """Augment a batch on the GPU: images [B, H, W, 3] uint8 (RGB, channels last) -> (out
    [B, 3, OH, OW] float32 normalized with ImageNet's mean and std, params [B, 8] used).
    params=None draws them with `seed` (draw_params); pass a table to repeat an augmentation.
    A batch of no images (or an output of no pixels) returns an empty result without a launch."""
    version = A.version(version, VERSIONS)
    if getattr(images, "dtype", None) is not None and np.dtype(images.dtype).kind == "f":
        raise TypeError(f"images must hold uint8 pixels (0..255), got {images.dtype}: for floats "
                        "in [0, 1] pass (img * 255).round().astype(np.uint8)")
    imgs = A.uint8(images, "images", ndim=4, what="[B, H, W, 3] (RGB, channels last)")
    b, h, w, ch = imgs.shape
    if ch != 3:
        raise ValueError(f"images must have 3 channels last, [B, H, W, 3], got {imgs.shape}")
    if not (isinstance(out_size, (tuple, list)) and len(out_size) == 2):
        raise TypeError(f"out_size must be (OH, OW), got {out_size!r}")
    oh, ow = A.count(out_size[0], "OH", low=0), A.count(out_size[1], "OW", low=0)
    if b and (h == 0 or w == 0):
        raise ValueError(f"images of {h}x{w} pixels have nothing to crop")
    if params is None:
        params = draw_params(b, max(h, 1), max(w, 1), seed)
    params = _check_params(params, b, h, w)
    if b == 0 or oh == 0 or ow == 0:
        return np.zeros((b, 3, oh, ow), np.float32), params
    validate_size((b, h, w, oh, ow))
    case = H.Case((b, h, w, oh, ow), inputs={"images": imgs, "prm": params, "norm": norm_table()},
                  outputs={"out": ((b, 3, oh, ow), np.float32)})
    return H.run(launch, version, case)["out"], params


# --- the picture ---------------------------------------------------------------------------------------

def photo_params():
    photo = image_io.read_pnm(PHOTO)
    params = reference.draw_params(np.random.default_rng(PICTURE_SEED), PICTURE_COPIES,
                                   *photo.shape[:2])
    return photo, params


def picture_of(out) -> np.ndarray:
    """The augmented copies [N, 3, OH, OW] as one viewable grid (2 rows) of uint8 RGB."""
    return reference.grid(reference.to_uint8(out), cols=max(1, len(out) // 2))


def write_picture(version=BEST, dst=PICTURE):
    """Augment the photo PICTURE_COPIES times on the GPU (seed PICTURE_SEED), compare with the
    reference, write the grid as a PNG. Returns (max abs error vs the reference, path)."""
    photo, params = photo_params()
    batch = np.stack([photo] * PICTURE_COPIES)
    out, _ = augment(batch, PICTURE_SIZE, params=params, version=version)
    ref = reference.augment(batch, params, *PICTURE_SIZE)
    image_io.write_png(dst, picture_of(out))
    return float(np.max(np.abs(out - ref))), dst


def write_reference_picture(dst=PICTURE):
    """The same picture from the numpy reference (no GPU needed)."""
    photo, params = photo_params()
    out = reference.augment(np.stack([photo] * PICTURE_COPIES), params, *PICTURE_SIZE)
    image_io.write_png(dst, picture_of(out))
    return dst


def extras(report, mode):
    if mode == "check":
        return
    err, path = write_picture()
    ok = err < 1e-4
    report.section("the photo through the GPU",
                   [[PHOTO.name, f"{PICTURE_COPIES} x {PICTURE_SIZE[0]}x{PICTURE_SIZE[1]}", BEST,
                     f"{err:.2g}", str(path.relative_to(H.ROOT))]],
                   ["input", "augmented copies", "version", "max abs err vs reference", "written"])
    report.record("photo", {"input": str(PHOTO.relative_to(H.ROOT)), "version": BEST,
                            "max_abs_err": err, "output": str(path.relative_to(H.ROOT))})
    if not ok:
        report.failures.append(f"the augmented photo differs from the reference by {err:.3g}")
