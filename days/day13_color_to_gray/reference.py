"""Day 13 reference: RGB to grayscale, the exact specification the kernels match bit for bit.

    Y = floor(((wr*R + wg*G) + wb*B) + 0.5), clamped to 255

with wr, wg, wb = float32(0.299), float32(0.587), float32(0.114) (ITU-R BT.601 luma) and
EVERY operation done in float32 with round-to-nearest, in exactly this order: three
products, the sum of the first two, plus the third, plus 0.5, then floor (round half up).
The kernels do the same operations (no fused multiply-add), so the outputs are compared
exactly, as integers.

Exact decimal arithmetic, floor((299 R + 587 G + 114 B + 500) / 1000), differs from this
float32 rule by one at 824 of the 16.7 million colors: all exact ties (x.5), where the float32
sum lands just below (e.g. R, G, B = 4, 40, 16 is 26.5 exactly and 26.499998 in float32).
"""
import numpy as np

WEIGHTS = (np.float32(0.299), np.float32(0.587), np.float32(0.114))
HALF = np.float32(0.5)

# wr*v for every byte v, in float32: exactly the products the kernels compute
_LUT = [w * np.arange(256, dtype=np.float32) for w in WEIGHTS]


def _check_rgb(rgb) -> np.ndarray:
    rgb = np.asarray(rgb)
    if rgb.dtype != np.uint8 or rgb.ndim < 1 or rgb.shape[-1] != 3:
        raise ValueError(f"expected uint8 pixels with 3 channels last, got {rgb.dtype} {rgb.shape}")
    return rgb


def to_gray_formula(rgb) -> np.ndarray:
    """The specification written out directly (slow on big images: strided channels)."""
    rgb = _check_rgb(rgb)
    wr, wg, wb = WEIGHTS
    r, g, b = (rgb[..., c].astype(np.float32) for c in range(3))
    y = (wr * r + wg * g) + wb * b
    return np.minimum(np.floor(y + HALF), np.float32(255)).astype(np.uint8)


def to_gray(rgb, chunk: int = 1 << 16) -> np.ndarray:
    """HxWx3 uint8 -> HxW uint8, the same float32 operations as to_gray_formula, computed in
    cache-sized chunks with the products looked up from 256-entry tables (fast enough for the
    16384x16384 benchmark image)."""
    rgb = _check_rgb(rgb)
    flat = np.ascontiguousarray(rgb).reshape(-1, 3)
    out = np.empty(flat.shape[0], np.uint8)
    lr, lg, lb = _LUT
    for s in range(0, flat.shape[0], chunk):
        c = flat[s:s + chunk]
        y = lr[c[:, 0]]
        y += lg[c[:, 1]]
        y += lb[c[:, 2]]
        y += HALF
        np.floor(y, out=y)
        np.minimum(y, np.float32(255), out=y)
        out[s:s + chunk] = y
    return out.reshape(rgb.shape[:-1])


def to_gray_planar(r, g, b) -> np.ndarray:
    """The same from three planes."""
    return to_gray(np.stack([np.asarray(r), np.asarray(g), np.asarray(b)], axis=-1))


def to_gray_exact_decimal(rgb) -> np.ndarray:
    """Round half up of (299 R + 587 G + 114 B) / 1000 in integers: NOT the specification,
    the textbook value it approximates (they differ by one at exact ties)."""
    num = decimal_numerator(rgb)
    return ((num + 500) // 1000).astype(np.uint8)


def decimal_numerator(rgb) -> np.ndarray:
    """299 R + 587 G + 114 B, exactly (int32: at most 255000)."""
    rgb = _check_rgb(rgb)
    r, g, b = (rgb[..., c].astype(np.int32) for c in range(3))
    num = r * 299
    num += g * 587
    num += b * 114
    return num
