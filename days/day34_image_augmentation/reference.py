"""Day 34 reference: a training pipeline's image augmentation, batched, in numpy.

For each image b of a batch [B, H, W, 3] uint8 (RGB, channels last, as decoders deliver them),
with parameters drawn on the host (`draw_params`, one row per image):

1. random resized crop: a box (x0, y0, cw, ch) of the source, resized to OH x OW with bilinear
   sampling (pixel centers: output column ox samples the box at u = (ox + 1/2) cw / OW - 1/2,
   clamped to [0, cw - 1]; taps floor(u) and floor(u) + 1, the last one clamped to the box);
2. horizontal flip (output column ox takes the sample of column OW - 1 - ox);
3. color jitter, torchvision's operations in a fixed order, each followed by a clamp to [0, 1]:
   brightness x <- b x; contrast x <- c x + (1 - c) m with m the mean gray of the whole
   brightness-adjusted output image; saturation x <- s x + (1 - s) gray(x) per pixel
   (gray = 0.299 R + 0.587 G + 0.114 B);
4. normalize per channel, (x - mean) / std (ImageNet's), float32 [B, 3, OH, OW] (NCHW).

The sampling coordinate u is defined in float32 arithmetic, exactly as the kernels compute it:
u = fl32(fl32((2 ox + 1) cw) / fl32(2 OW)) - 1/2 (each step rounded to nearest), so GPU and
numpy take the same taps with the same weights; everything after the taps is float64 here.
"""
import numpy as np

MEAN = np.array([0.485, 0.456, 0.406])     # ImageNet normalization (torchvision's models)
STD = np.array([0.229, 0.224, 0.225])
GRAY = np.array([0.299, 0.587, 0.114])     # ITU-R 601 luma, torchvision's rgb_to_grayscale
JITTER = 0.4                               # ColorJitter(0.4, 0.4, 0.4): factors in [0.6, 1.4]
SCALE = (0.08, 1.0)                        # RandomResizedCrop's defaults
RATIO = (3 / 4, 4 / 3)
FLIP_P = 0.5
# columns of a parameter row (float32, every integer exact)
X0, Y0, CW, CH, FLIP, BRIGHT, CONTRAST, SAT = range(8)


def crop_box(rng, h: int, w: int, scale=SCALE, ratio=RATIO, tries: int = 10):
    """torchvision's RandomResizedCrop.get_params: an area fraction uniform in `scale` and a
    log-uniform aspect ratio, up to 10 tries for a box that fits, else the central crop of the
    nearest allowed ratio. Returns (x0, y0, cw, ch) integers."""
    area = h * w
    lo, hi = np.log(ratio[0]), np.log(ratio[1])
    for _ in range(tries):
        a = area * rng.uniform(*scale)
        r = np.exp(rng.uniform(lo, hi))
        cw = int(round(np.sqrt(a * r)))
        ch = int(round(np.sqrt(a / r)))
        if 0 < cw <= w and 0 < ch <= h:
            return int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1)), cw, ch
    r_in = w / h
    if r_in < ratio[0]:
        cw, ch = w, int(round(w / ratio[0]))
    elif r_in > ratio[1]:
        ch, cw = h, int(round(h * ratio[1]))
    else:
        cw, ch = w, h
    cw, ch = max(1, min(cw, w)), max(1, min(ch, h))
    return (w - cw) // 2, (h - ch) // 2, cw, ch


def draw_params(rng, batch: int, h: int, w: int) -> np.ndarray:
    """One row per image, float32 [B, 8]: x0, y0, cw, ch, flip (0/1), brightness, contrast,
    saturation (factors uniform in [1 - 0.4, 1 + 0.4])."""
    p = np.zeros((batch, 8), np.float32)
    for b in range(batch):
        p[b, :4] = crop_box(rng, h, w)
    p[:, FLIP] = rng.random(batch) < FLIP_P
    p[:, BRIGHT:] = rng.uniform(1 - JITTER, 1 + JITTER, (batch, 3))
    return p


def sample_coords(n_out: int, box: int, flip: bool = False):
    """(low tap, high tap, weight of the high tap) of each output coordinate along one axis,
    relative to the box: float32 arithmetic for u (see the module docstring)."""
    o = np.arange(n_out)
    if flip:
        o = n_out - 1 - o
    num = ((2 * o + 1) * box).astype(np.float32)
    u = num / np.float32(2 * n_out) - np.float32(0.5)
    u = np.clip(u, np.float32(0), np.float32(box - 1))
    lo = np.floor(u).astype(np.int64)
    f = (u - lo.astype(np.float32)).astype(np.float64)
    hi = np.minimum(lo + 1, box - 1)
    return lo, hi, f


def resized_crop(img, prm, oh: int, ow: int) -> np.ndarray:
    """One image's crop, resized and flipped: [OH, OW, 3] float64 in 0..255."""
    x0, y0, cw, ch, flip = (int(v) for v in prm[:5])
    xl, xh, fx = sample_coords(ow, cw, bool(flip))
    yl, yh, fy = sample_coords(oh, ch, False)
    box = np.asarray(img)[y0:y0 + ch, x0:x0 + cw]            # a view: gather uint8, then widen
    rl, rh = box[yl], box[yh]                                # [OH, cw, 3]
    wx, wy = fx[None, :, None], fy[:, None, None]
    top = rl[:, xl].astype(np.float64) * (1 - wx) + rl[:, xh] * wx
    bot = rh[:, xl].astype(np.float64) * (1 - wx) + rh[:, xh] * wx
    return top * (1 - wy) + bot * wy


def jitter(x, b: float, c: float, s: float) -> np.ndarray:
    """Brightness, contrast, saturation on [OH, OW, 3] in [0, 1] (float64), clamping after each."""
    x = np.clip(x * b, 0, 1)
    m = (x @ GRAY).mean()
    x = np.clip(c * x + (1 - c) * m, 0, 1)
    g = (x @ GRAY)[..., None]
    return np.clip(s * x + (1 - s) * g, 0, 1)


def augment(images, params, oh: int, ow: int) -> np.ndarray:
    """The batch [B, H, W, 3] uint8 through crop + resize, flip, jitter and normalization:
    [B, 3, OH, OW] float64."""
    images = np.asarray(images)
    params = np.asarray(params, dtype=np.float32)
    out = np.empty((images.shape[0], 3, oh, ow))
    for b in range(images.shape[0]):
        p = params[b]
        x = resized_crop(images[b], p, oh, ow) / 255.0
        y = jitter(x, float(p[BRIGHT]), float(p[CONTRAST]), float(p[SAT]))
        out[b] = ((y - MEAN) / STD).transpose(2, 0, 1)
    return out


def input_bytes(params, oh: int, ow: int) -> int:
    """Bytes of source pixels the batch's sampling must read: per image, the source rows it
    touches times the span of columns it touches, 3 bytes a pixel."""
    total = 0
    for p in np.asarray(params, dtype=np.float32):
        cw, ch = int(p[CW]), int(p[CH])
        yl, yh, _ = sample_coords(oh, ch)
        xl, xh, _ = sample_coords(ow, cw)
        rows = np.unique(np.concatenate([yl, yh])).size
        total += rows * (int(xh.max()) - int(xl.min()) + 1) * 3
    return total


def to_uint8(out) -> np.ndarray:
    """Normalized [.., 3, OH, OW] back to viewable [.., OH, OW, 3] uint8 (x std + mean, x 255)."""
    x = np.moveaxis(np.asarray(out, dtype=np.float64), -3, -1) * STD + MEAN
    return np.clip(np.round(x * 255), 0, 255).astype(np.uint8)


def grid(tiles, cols: int, gap: int = 6, fill: int = 255) -> np.ndarray:
    """Tiles [N, h, w, 3] uint8 in a grid of `cols` columns with `gap` pixels between them."""
    tiles = np.asarray(tiles)
    n, h, w, _ = tiles.shape
    rows = -(-n // cols)
    g = np.full((rows * h + (rows - 1) * gap, cols * w + (cols - 1) * gap, 3), fill, np.uint8)
    for i in range(n):
        r, c = divmod(i, cols)
        g[r * (h + gap): r * (h + gap) + h, c * (w + gap): c * (w + gap) + w] = tiles[i]
    return g
