"""Day 21 reference: the transpose, and the shared-memory bank arithmetic of its tiles."""
import numpy as np

BANKS = 32  # shared memory: 32 banks of 4-byte words; word w lives in bank w % 32


def transpose(x) -> np.ndarray:
    """out[c, r] = in[r, c] for a 2-D array, as a new C-contiguous array (same dtype: a
    transpose moves values, it computes nothing, so the kernels must match it exactly)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise ValueError(f"transpose takes a 2-D array, got shape {x.shape}")
    return np.ascontiguousarray(x.T)


def tile_word(r: int, c: int, layout: str, width: int = 32) -> int:
    """The shared-memory word that holds element (r, c) of a 32 x 32 tile:
    "plain" tile[32][32], "padded" tile[32][33], "swizzled" tile[32][32] at column c ^ r."""
    if layout == "plain":
        return r * width + c
    if layout == "padded":
        return r * (width + 1) + c
    if layout == "swizzled":
        return r * width + (c ^ r)
    raise ValueError(f"layout must be 'plain', 'padded' or 'swizzled', got {layout!r}")


def column_read_banks(c: int, layout: str) -> list[int]:
    """The bank each of the 32 lanes hits when a warp reads tile column c (lane l reads
    element (l, c)): the store phase of v2 (plain), v3 (padded) and v4 (swizzled)."""
    return [tile_word(lane, c, layout) % BANKS for lane in range(32)]


def passes(words) -> int:
    """Shared-memory passes (wavefronts) a warp's request of 4-byte words takes: the largest
    number of DIFFERENT words asked of one bank (lanes asking for the same word share it)."""
    per_bank: dict[int, set] = {}
    for w in words:
        per_bank.setdefault(int(w) % BANKS, set()).add(int(w))
    return max((len(s) for s in per_bank.values()), default=0)
