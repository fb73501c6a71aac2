"""Day 55 reference: stable sorting of 32-bit keys (uint32, int32, float32), ascending or
descending, alone or with a 32-bit value each; and the onesweep LSD radix sort in numpy.

The specification is a stable sort: equal keys leave in the order they came. Ascending, the
order is numpy's (`np.argsort(x, kind="stable")`): for float32 NaNs last and -0.0 equal to
+0.0. Descending is the reverse order of the keys with equal keys STILL in input order (what
`torch.sort(x, descending=True, stable=True)` gives), which is not the reverse of the ascending
result.

Every type goes through `key_bits`, an order-preserving map onto uint32; the GPU applies the
same map (kernel.cu: key_bits) only to take digits, and moves the original bits.

`argsort` gets the stable order without numpy's slow stable argsort (timsort/radix over 2^28
keys takes minutes on a slow core): each key's bits go above its index in a uint64, so all wide
keys differ and any sort of them is the stable order.

`onesweep_positions` / `lsd_radix_argsort` are the algorithm of v3-v4 written with arrays: per
pass, per tile, per digit counts; the global start of each digit; the counts of all earlier
tiles (what the look-back finds); the stable rank inside the tile. The tests check that it
gives the same permutation as `argsort`.
"""
import numpy as np

KEY_DTYPES = (np.dtype(np.uint32), np.dtype(np.int32), np.dtype(np.float32))


def key_bits(x, descending: bool = False) -> np.ndarray:
    """uint32 keys whose unsigned order (with ties kept in input order) is the wanted order of x
    (uint32, int32 or float32)."""
    x = np.asarray(x)
    if x.dtype == np.uint32:
        b = x.copy()
    elif x.dtype == np.int32:
        b = x.view(np.uint32) ^ np.uint32(0x80000000)
    elif x.dtype == np.float32:
        raw = x.view(np.uint32)
        nan = (raw & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
        raw = np.where(nan, np.uint32(0x7FC00000), raw)              # one NaN, sorted last
        raw = np.where(raw == np.uint32(0x80000000), np.uint32(0), raw)  # -0.0 ties with +0.0
        neg = (raw >> np.uint32(31)).astype(bool)
        b = np.where(neg, ~raw, raw | np.uint32(0x80000000)).astype(np.uint32)
    else:
        raise TypeError(f"key_bits takes uint32, int32 or float32 keys, got {x.dtype}")
    return ~b if descending else b


def argsort(x, descending: bool = False) -> np.ndarray:
    """The stable sorting permutation of x (int64): sort (key_bits << 32 | index) as uint64."""
    b = key_bits(x, descending)
    wide = b.astype(np.uint64) << np.uint64(32)
    wide |= np.arange(b.size, dtype=np.uint64)
    wide.sort()
    return (wide & np.uint64(0xFFFFFFFF)).astype(np.int64)


def sort(x, descending: bool = False) -> np.ndarray:
    """x in order (its own dtype and bits: -0.0 stays -0.0, NaN payloads survive)."""
    x = np.asarray(x)
    return x[argsort(x, descending)]


def sort_pairs(keys, values, descending: bool = False):
    """(keys in order, values moved with their keys; equal keys in input order)."""
    keys = np.asarray(keys)
    order = argsort(keys, descending)
    return keys[order], np.asarray(values)[order]


# --- the onesweep LSD radix sort, written with arrays --------------------------------------------

def digits(bits, shift: int, digit_bits: int = 8) -> np.ndarray:
    return ((np.asarray(bits, np.uint32) >> np.uint32(shift)) & np.uint32((1 << digit_bits) - 1)).astype(np.int64)


def histograms(bits, digit_bits: int = 8) -> np.ndarray:
    """[passes, 2^digit_bits]: how many keys have each value of each digit (v3's first kernel:
    all of them in one read)."""
    passes, radix = 32 // digit_bits, 1 << digit_bits
    return np.stack([np.bincount(digits(bits, p * digit_bits, digit_bits), minlength=radix)
                     for p in range(passes)])


def exclusive_scan(c, axis=-1) -> np.ndarray:
    c = np.asarray(c, np.int64)
    return np.cumsum(c, axis=axis) - c


def onesweep_positions(bits, shift: int, tile: int, digit_bits: int = 8) -> np.ndarray:
    """Where one stable counting-sort pass by the digit at `shift` sends each key, computed the
    way a onesweep pass does it, tile by tile:
        position = start[digit] (all keys of smaller digits, from the histogram)
                 + before[tile, digit] (this digit in earlier tiles: the look-back's answer)
                 + rank of the key among this digit's keys in its own tile (the local ranking)."""
    bits = np.asarray(bits, np.uint32)
    n, radix = bits.size, 1 << digit_bits
    d = digits(bits, shift, digit_bits)
    t = np.arange(n) // tile
    tiles = -(-n // tile)
    counts = np.bincount(t * radix + d, minlength=tiles * radix).reshape(tiles, radix)
    start = exclusive_scan(counts.sum(axis=0))
    before = exclusive_scan(counts, axis=0)
    group = t * radix + d                        # (tile, digit) of each key
    order = np.argsort(group, kind="stable")
    sorted_group = group[order]
    first = np.searchsorted(sorted_group, sorted_group, side="left")
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n) - first           # keys of the same (tile, digit) before it
    return start[d] + before[t, d] + rank


def lsd_radix_argsort(bits, tile: int = 7680, digit_bits: int = 8) -> np.ndarray:
    """The permutation an LSD radix sort of uint32 `bits` applies, pass by pass (int64)."""
    bits = np.asarray(bits, np.uint32)
    perm = np.arange(bits.size, dtype=np.int64)
    cur = bits.copy()
    for p in range(32 // digit_bits):
        pos = onesweep_positions(cur, p * digit_bits, tile, digit_bits)
        nxt, nperm = np.empty_like(cur), np.empty_like(perm)
        nxt[pos], nperm[pos] = cur, perm
        cur, perm = nxt, nperm
    return perm
