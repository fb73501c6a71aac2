"""Day 16 reference: histograms (exact integer counts), the skewed inputs they are tested
on, and float segment sums for the atomics extra."""
import numpy as np

HOT_KEY = 42          # the key that a skewed input repeats (taken modulo the number of bins)
MAX_BINS = 4096       # the kernels keep a block's histogram in shared memory
CHUNK = 1 << 24       # the reference counts in chunks (bincount makes an int64 copy)


def key_dtype(bins: int):
    """uint8 keys for a byte histogram (bins <= 256), uint16 above."""
    return np.uint8 if bins <= 256 else np.uint16


def histogram(keys, bins: int) -> np.ndarray:
    """counts[b] = number of keys equal to b, for 0 <= b < bins (int64). Keys >= bins are
    not counted here; the kernels require every key to be < bins (driver.histogram checks)."""
    keys = np.asarray(keys).ravel()
    counts = np.zeros(bins, np.int64)
    for s in range(0, keys.size, CHUNK):
        c = np.bincount(keys[s:s + CHUNK], minlength=bins)
        counts += c[:bins]
    return counts


def make_keys(n: int, bins: int, skew_percent: int, rng) -> np.ndarray:
    """n keys uniform in [0, bins); then each key is replaced by HOT_KEY % bins with
    probability skew_percent / 100 (0: uniform; 90: the skewed case; 100: all one key)."""
    keys = rng.integers(0, bins, n, dtype=key_dtype(bins))
    if skew_percent >= 100:
        keys.fill(HOT_KEY % bins)
    elif skew_percent > 0:
        # a 16-bit uniform draw below skew% of 65536 (a power-of-two range draws fast)
        u = rng.integers(0, 1 << 16, n, dtype=np.uint16)
        np.putmask(keys, u < (skew_percent * 65536 + 50) // 100, HOT_KEY % bins)
    return keys


def segment_sums(values, segment, segs: int) -> np.ndarray:
    """sums[s] = sum of values[i] with segment[i] == s, in float64 (the atomics extra)."""
    return np.bincount(np.asarray(segment).ravel(), weights=np.asarray(values, np.float64).ravel(),
                       minlength=segs)[:segs]
