"""Reading and writing images with the standard library only (no PIL at run time).

- PNM: binary PPM (P6, RGB) and PGM (P5, gray), 8 bits per sample: a text header
  ("P6\\n<width> <height>\\n255\\n", '#' comments allowed) and the raw bytes, row by row.
- PNG: a minimal writer (8-bit gray or RGB, no interlace, every row with filter type 0
  "None", the whole image in one zlib-compressed IDAT chunk) and a reader for exactly those
  files. A PNG is the 8-byte signature and chunks of [length][type][data][CRC-32 of type+data].
"""
from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


# --- PNM ------------------------------------------------------------------------------------

def _pnm_tokens(data: bytes, count: int) -> tuple[list[bytes], int]:
    """The first `count` whitespace-separated header tokens (skipping # comments) and the
    offset just past the single whitespace byte that ends the last one."""
    tokens, i = [], 0
    while len(tokens) < count:
        while i < len(data) and data[i:i + 1].isspace():
            i += 1
        if data[i:i + 1] == b"#":
            while i < len(data) and data[i:i + 1] not in (b"\n", b"\r"):
                i += 1
            continue
        j = i
        while j < len(data) and not data[j:j + 1].isspace():
            j += 1
        if j == i:
            raise ValueError("truncated PNM header")
        tokens.append(data[i:j])
        i = j
    return tokens, i + 1


def read_pnm(path) -> np.ndarray:
    """A binary PPM (P6) as HxWx3 uint8 or PGM (P5) as HxW uint8."""
    data = Path(path).read_bytes()
    (magic, w, h, maxval), off = _pnm_tokens(data, 4)
    if magic not in (b"P5", b"P6"):
        raise ValueError(f"{path}: not a binary PGM/PPM (magic {magic!r})")
    if int(maxval) != 255:
        raise ValueError(f"{path}: only 8-bit PNM (maxval 255) is supported, not {int(maxval)}")
    w, h = int(w), int(h)
    ch = 3 if magic == b"P6" else 1
    n = w * h * ch
    if len(data) - off < n:
        raise ValueError(f"{path}: {len(data) - off} bytes of pixels, expected {n}")
    img = np.frombuffer(data, np.uint8, n, off)
    return img.reshape((h, w, 3) if ch == 3 else (h, w)).copy()


def write_pnm(path, img) -> None:
    img = np.ascontiguousarray(img, dtype=np.uint8)
    magic = {2: b"P5", 3: b"P6"}[img.ndim]
    Path(path).write_bytes(b"%s\n%d %d\n255\n" % (magic, img.shape[1], img.shape[0]) + img.tobytes())


# --- PNG ------------------------------------------------------------------------------------

def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def png_bytes(img) -> bytes:
    """HxW (gray) or HxWx3 (RGB) uint8 as a PNG file's bytes."""
    img = np.ascontiguousarray(img, dtype=np.uint8)
    if img.ndim == 2:
        color_type = 0
    elif img.ndim == 3 and img.shape[2] == 3:
        color_type = 2
    else:
        raise ValueError(f"PNG writer takes HxW or HxWx3 uint8, got {img.shape}")
    h, w = img.shape[:2]
    # IHDR: width, height, bit depth 8, color type, compression 0, filter method 0, no interlace
    ihdr = struct.pack(">IIBBBBB", w, h, 8, color_type, 0, 0, 0)
    rows = img.reshape(h, -1)
    raw = np.concatenate([np.zeros((h, 1), np.uint8), rows], axis=1)  # filter byte 0 per row
    return (PNG_SIGNATURE + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", zlib.compress(raw.tobytes(), 9))
            + _chunk(b"IEND", b""))


def write_png(path, img) -> None:
    Path(path).write_bytes(png_bytes(img))


def read_png(src) -> np.ndarray:
    """Read a PNG written by png_bytes (8-bit gray/RGB, filter type 0 rows only)."""
    data = src if isinstance(src, (bytes, bytearray)) else Path(src).read_bytes()
    if data[:8] != PNG_SIGNATURE:
        raise ValueError("not a PNG file")
    i, idat, header = 8, b"", None
    while i < len(data):
        (n,) = struct.unpack(">I", data[i:i + 4])
        kind, body = data[i + 4:i + 8], data[i + 8:i + 8 + n]
        (crc,) = struct.unpack(">I", data[i + 8 + n:i + 12 + n])
        if zlib.crc32(kind + body) != crc:
            raise ValueError(f"bad CRC in PNG chunk {kind!r}")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
        i += 12 + n
    if header is None:
        raise ValueError("PNG without IHDR")
    w, h, depth, color_type, _, _, interlace = header
    if depth != 8 or color_type not in (0, 2) or interlace:
        raise ValueError(f"unsupported PNG (depth {depth}, color type {color_type}, interlace {interlace})")
    ch = 3 if color_type == 2 else 1
    raw = np.frombuffer(zlib.decompress(idat), np.uint8).reshape(h, 1 + w * ch)
    if raw[:, 0].any():
        raise ValueError("this reader only takes rows with filter type 0 (None)")
    pixels = raw[:, 1:].copy()
    return pixels.reshape((h, w, 3) if ch == 3 else (h, w))
