"""Day 51 reference: what the pipeline computes, and the arithmetic of overlap.

The op: y = 1/sqrt(x) for positive finite float32 x. The GPU gets there by `steps` Newton
iterations from a bit-trick seed (kernel.cu); the answer does not depend on `steps` (>= 3),
only the cost does, so the reference is one line in float64.
"""
import numpy as np

MAGIC = 0x5F3759DF     # the seed's constant (kernel.cu)
TINY = 2.0 ** -64      # below this the kernel scales x by 2^64 first


def rsqrt(x) -> np.ndarray:
    """1/sqrt(x) in float64 (the specification the kernels are checked against)."""
    return 1.0 / np.sqrt(np.asarray(x, dtype=np.float64))


def newton_rsqrt(x, steps: int) -> np.ndarray:
    """The kernel's arithmetic step by step in float32, vectorized over x (for the tests and
    the tutorial; O(steps) passes, so keep x small): the bit-trick seed, then `steps` times
    r <- r * (1.5 - (x/2 * r) * r), fused where the kernel fuses (emulated in float64, which
    rounds the product and the sum once each, as an FMA does to within float32's ulp)."""
    x = np.asarray(x, dtype=np.float32)
    tiny = x < np.float32(TINY)
    xs = x.copy()
    xs[tiny] *= np.float32(2.0 ** 64)
    h = (np.float32(0.5) * xs).astype(np.float32)
    bits = xs.view(np.int32)
    r = (np.int32(MAGIC) - (bits >> 1)).astype(np.int32).view(np.float32)
    for _ in range(steps):
        t = (h * r).astype(np.float32)
        e = (1.5 - t.astype(np.float64) * r.astype(np.float64)).astype(np.float32)  # the FMA
        r = (r * e).astype(np.float32)
    return np.where(tiny, r * np.float32(2.0 ** 32), r).astype(np.float32)


def chunk_bounds(n: int, chunks: int, align: int = 1024) -> list[tuple[int, int]]:
    """Cut [0, n) into at most `chunks` consecutive pieces [a, b): each a multiple of `align`
    elements long (4 KiB of float32, so every copy starts on a page boundary) except the last.
    Fewer pieces come back when n is small (n = 1 gives one piece); no piece is empty."""
    if n <= 0:
        return []
    per = -(-n // max(chunks, 1))
    per = -(-per // align) * align
    return [(a, min(a + per, n)) for a in range(0, n, per)]


def hidden_fraction(t_copy: float, t_compute: float, t_pipeline: float) -> float:
    """The share of the copy time a pipeline hides: copies alone + kernel alone - pipeline,
    over copies alone. 1.0: the pipeline takes no longer than the kernel alone (every copy
    hidden); 0.0: it takes as long as doing them one after the other; below 0: slower still
    (v1's pageable copies are slower than the pinned copies that T_copy measures)."""
    return (t_copy + t_compute - t_pipeline) / t_copy


def ideal_pipeline(t_h2d: float, t_compute: float, t_d2h: float, chunks: int) -> float:
    """A lower bound on a chunked pipeline over three engines (copy in, SMs, copy out): the
    busiest engine's whole time, plus the other two engines' share of one chunk (the first
    chunk must be copied in before anything computes, the last copied out after)."""
    stages = sorted((t_h2d, t_compute, t_d2h))
    return stages[2] + (stages[0] + stages[1]) / max(chunks, 1)
