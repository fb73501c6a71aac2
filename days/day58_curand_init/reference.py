"""Day 58 reference: cuRAND's Philox4_32_10 host-API stream, in numpy, and what is built on it.

The specification (found by matching the outputs of cuRAND 10.4 / CUDA 13.0's host API,
curandCreateGenerator(CURAND_RNG_PSEUDO_PHILOX4_32_10), bit for bit; the fixture
curand_fixture.npz holds those outputs and curand_fixture.md says how they were made):

- key = (seed low word, seed high word), as in curand_init.
- Word g of the stream (g = generator offset + element index) is word g % 4 of the Philox block
  of CHUNK j = g // 4, and chunk j has the counter
      (block = j // LANES as 64 bits, subsequence = j % LANES as 64 bits),   LANES = 65536:
  the host API runs 65536 device-API states side by side (state t = curand_init(seed, t, 0)),
  and consecutive chunks of the output come from consecutive states, so chunk j is block
  j // 65536 of subsequence j % 65536. The generator offset counts output elements; it moves
  the start, not the layout (offset 5 gives words 5, 6, ... of the offset-0 stream).
  (CURAND_ORDERING_PSEUDO_DYNAMIC uses another, device-dependent number of lanes: 54784 on the
  H200 where the fixture was made; `lanes=` reproduces it. The default, BEST and DEFAULT
  orderings all use 65536.)
- uniform (curandGenerateUniform): u = float(w) * 2^-32 + 2^-33 in float32, in (0, 1] (words
  within 128 of 2^32 round to 1.0f). float(w) rounds to nearest; the product is exact, so only
  the sum rounds: numpy's float32 arithmetic gives the same bits.
- normal (curandGenerateNormal): element g is one output of Box-Muller on the word pair
  (g & ~1, g | 1): u = float(w_even) 2^-32 + 2^-33, v = float(w_odd) * c + c / 2 with
  c = float32(2 pi) * 2^-32 (one fused multiply-add), r = sqrt(-2 ln u),
  even g -> r sin v, odd g -> r cos v. cuRAND takes sin and cos from __sincosf (the
  special-function unit), whose answers are not specified to the bit; numpy's float64 sin and
  cos differ from them by up to ~2^-21 * r, so this reference is the exact Box-Muller of the
  same float32 (u, v) and agrees with cuRAND to about 3e-6, not bit for bit. (The GPU kernels
  make the same instruction sequence as cuRAND and are compared with it bit for bit, live.)
- uniform_double / normal_double (curandGenerate{Uniform,Normal}Double): output element g
  belongs to QUAD q = g // 4, made from two consecutive blocks of subsequence q % LANES,
  blocks b and b + 1 with b = q // LANES (verified for quads within the first round of a call,
  q % LANES covering fewer than LANES quads past the offset's round; past that see
  `double_blocks`). Element g % 4 = 0, 1 from the first block's word pairs (x, y), (z, w);
  2, 3 from the second's. uniform double = (lo ^ (hi << 21)) * 2^-53 + 2^-54 with (lo, hi) the
  pair; normal double = Box-Muller in double on the whole block: u from (x, y), v from (z, w)
  as (z ^ (w << 21)) * 2^-52 + 2^-53, (r sin pi v, r cos pi v) for elements 0, 1 of the pair.
- bernoulli(p): 1 where w < round(p 2^32), else 0 (an integer compare: P(1) = round(p 2^32) /
  2^32 exactly, no float rounding of u near 1).
- He (Kaiming) and Xavier (Glorot) initialization: the scales of He et al. 2015 and Glorot &
  Bengio 2010 applied to these uniforms and normals.
- `moments`, `ks_normal`, `ks_uniform`: the distribution tests (day 33's statistics).
"""
import math

import numpy as np

from days.day33_ddpm_kernel.reference import kolmogorov_q, moments, normal_cdf  # noqa: F401

M0, M1 = 0xD2511F53, 0xCD9E8D57        # Philox-4x32 multipliers and Weyl key increments
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF
LANES = 65536                          # the host API's states side by side (default ordering)
LANES_DYNAMIC_H200 = 54784             # CURAND_ORDERING_PSEUDO_DYNAMIC on the H200 (measured)
TWO_PI_F32 = float(np.float32(2 * np.pi))            # 6.2831855f
C_NORMAL_V = TWO_PI_F32 * 2.0 ** -32                 # CURAND_2POW32_INV_2PI (exact in float32)


# --- Philox on arbitrary chunks -----------------------------------------------------------------

def philox(c0, c1, c2, c3, seed: int) -> np.ndarray:
    """Philox-4x32-10 of counters given as four arrays of 32-bit words (uint64 dtype or
    broadcastable), one 64-bit seed as the key: [m, 4] uint32. One round, with (hi, lo) the
    halves of a 64-bit product:
        (hi0, lo0) = M0 c0, (hi1, lo1) = M1 c2,  c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
    and the key bumped by (W0, W1) between rounds. Worked in pieces of 2^16 counters with
    in-place uint64 operations (the products < 2^64 are exact), so a piece stays in cache."""
    cs = np.broadcast_arrays(*(np.asarray(c, np.uint64) for c in (c0, c1, c2, c3)))
    m = cs[0].size
    flat = [c.reshape(-1) for c in cs]
    out = np.empty((m, 4), np.uint32)
    m32, sh = np.uint64(MASK32), np.uint64(32)
    keys = [(np.uint64((int(seed) + r * W0) & MASK32), np.uint64(((int(seed) >> 32) + r * W1) & MASK32))
            for r in range(10)]
    step = 1 << 16
    for s in range(0, m, step):
        a0, a1, a2, a3 = (f[s:s + step].copy() for f in flat)
        p0, p1 = np.empty_like(a0), np.empty_like(a0)
        for k0, k1 in keys:
            np.multiply(a0, np.uint64(M0), out=p0)
            np.multiply(a2, np.uint64(M1), out=p1)
            np.right_shift(p1, sh, out=a0)
            a0 ^= a1
            a0 ^= k0
            np.bitwise_and(p1, m32, out=a1)
            np.right_shift(p0, sh, out=a2)
            a2 ^= a3
            a2 ^= k1
            np.bitwise_and(p0, m32, out=a3)
        for i, a in enumerate((a0, a1, a2, a3)):
            out[s:s + step, i] = a
    return out.reshape(cs[0].shape + (4,))


def chunk_blocks(chunks, seed: int, lanes: int = LANES, block_add=0) -> np.ndarray:
    """The Philox blocks of output chunks j (uint64 array): counter (j // lanes + block_add,
    j % lanes), [m, 4] uint32."""
    j = np.asarray(chunks, np.uint64)
    m32, sh = np.uint64(MASK32), np.uint64(32)
    blk = j // np.uint64(lanes) + np.asarray(block_add, np.uint64)
    sub = j % np.uint64(lanes)
    return philox(blk & m32, blk >> sh, sub & m32, sub >> sh, seed)


def u32(n: int, seed: int, offset: int = 0, lanes: int = LANES) -> np.ndarray:
    """curandGenerate: words offset .. offset + n - 1 of the stream, uint32 [n]."""
    if n == 0:
        return np.empty(0, np.uint32)
    first, last = offset // 4, (offset + n - 1) // 4
    blocks = chunk_blocks(np.arange(first, last + 1, dtype=np.uint64), seed, lanes)
    s = offset - 4 * first
    return blocks.reshape(-1)[s:s + n]


def uniform_of_words(w) -> np.ndarray:
    """cuRAND's uniform float of a word: float(w) * 2^-32 + 2^-33, float32 (exact emulation)."""
    x = np.asarray(w, np.uint32).astype(np.float32)     # rounds to nearest, as I2F.RN
    return x * np.float32(2.0 ** -32) + np.float32(2.0 ** -33)


def uniform(n: int, seed: int, offset: int = 0, low: float = 0.0, high: float = 1.0) -> np.ndarray:
    """curandGenerateUniform (low = 0, high = 1: bit for bit), float32 [n]; other ranges
    low + (high - low) u in float64."""
    u = uniform_of_words(u32(n, seed, offset))
    if low == 0.0 and high == 1.0:
        return u
    return low + (high - low) * u.astype(np.float64)


def box_muller_uv(w_even, w_odd) -> tuple[np.ndarray, np.ndarray]:
    """The float32 (u, v) cuRAND's Box-Muller computes from a word pair: u = float(a) 2^-32 +
    2^-33 (exact product, rounded sum), v = fma(float(b), c, c / 2) rounded once to float32
    (the float64 product of two 24-bit significands is exact; the float64 sum rounds once more
    than a true fma, which can differ in the last bit of v about once in 2^29)."""
    u = uniform_of_words(w_even)
    b = np.asarray(w_odd, np.uint32).astype(np.float32).astype(np.float64)
    v = (b * C_NORMAL_V + C_NORMAL_V / 2).astype(np.float32)
    return u, v


def normal(n: int, seed: int, offset: int = 0, mean: float = 0.0, std: float = 1.0) -> np.ndarray:
    """curandGenerateNormal(mean, std) to ~3e-6 (the sin and cos are float64's, not the
    special-function unit's): float64 [n]."""
    if n == 0:
        return np.empty(0, np.float64)
    g0 = offset - offset % 2
    m = offset + n - g0
    m += m % 2
    w = u32(m, seed, g0)
    u, v = box_muller_uv(w[0::2], w[1::2])
    r = np.sqrt(-2.0 * np.log(u.astype(np.float64)))
    v = v.astype(np.float64)
    z = np.empty(m, np.float64)
    z[0::2], z[1::2] = r * np.sin(v), r * np.cos(v)
    return mean + std * z[offset - g0: offset - g0 + n]


def bernoulli_threshold(p: float) -> int:
    """The integer threshold of Bernoulli(p): round(p 2^32), in [0, 2^32]."""
    return int(round(float(p) * 2.0 ** 32))


def bernoulli(n: int, p: float, seed: int, offset: int = 0) -> np.ndarray:
    """1.0 where word < round(p 2^32), else 0.0: float32 [n] of zeros and ones."""
    return (u32(n, seed, offset).astype(np.uint64) < np.uint64(bernoulli_threshold(p))).astype(np.float32)


# --- the double variants ------------------------------------------------------------------------

def double_blocks(g, seed: int, lanes: int = LANES) -> tuple[np.ndarray, np.ndarray]:
    """(the block of output double g, g % 4) as [m, 4] uint32 and [m]: quad q = g // 4 reads
    blocks q // lanes and q // lanes + 1 of subsequence q % lanes; elements 0, 1 of the quad the
    first, 2, 3 the second."""
    g = np.asarray(g, np.uint64)
    q, r = g // np.uint64(4), (g % np.uint64(4)).astype(np.int64)
    return chunk_blocks(q, seed, lanes, block_add=(r >= 2).astype(np.uint64)), r


INV53 = 2.0 ** -53


def _hq(lo, hi) -> np.ndarray:
    """(lo ^ (hi << 21)) as uint64, < 2^53."""
    return np.asarray(lo, np.uint64) ^ (np.asarray(hi, np.uint64) << np.uint64(21))


def uniform_double(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """curandGenerateUniformDouble, float64 [n] (bit for bit): (lo ^ hi << 21) 2^-53 + 2^-54."""
    b, r = double_blocks(np.arange(offset, offset + n, dtype=np.uint64), seed)
    first = (r % 2) == 0
    lo = np.where(first, b[:, 0], b[:, 2])
    hi = np.where(first, b[:, 1], b[:, 3])
    return _hq(lo, hi).astype(np.float64) * INV53 + INV53 / 2


def normal_double(n: int, seed: int, offset: int = 0) -> np.ndarray:
    """curandGenerateNormalDouble(0, 1), float64 [n], to ~2e-15 (sin(pi v) for sincospi)."""
    b, r = double_blocks(np.arange(offset, offset + n, dtype=np.uint64), seed)
    u = _hq(b[:, 0], b[:, 1]).astype(np.float64) * INV53 + INV53 / 2
    v = _hq(b[:, 2], b[:, 3]).astype(np.float64) * (2 * INV53) + INV53
    s = np.sqrt(-2.0 * np.log(u))
    return np.where(r % 2 == 0, s * np.sin(np.pi * v), s * np.cos(np.pi * v))


# --- initializers -------------------------------------------------------------------------------

def he_std(fan_in: int, gain: float = math.sqrt(2.0)) -> float:
    """He et al. 2015 (ReLU): std = gain / sqrt(fan_in), gain sqrt(2)."""
    return gain / math.sqrt(fan_in)


def he_bound(fan_in: int, gain: float = math.sqrt(2.0)) -> float:
    """The uniform (-a, a] with the He variance: a = sqrt(3) std."""
    return math.sqrt(3.0) * he_std(fan_in, gain)


def xavier_std(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    """Glorot & Bengio 2010: std = gain sqrt(2 / (fan_in + fan_out))."""
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def xavier_bound(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    """The uniform (-a, a] with the Glorot variance: a = gain sqrt(6 / (fan_in + fan_out))."""
    return math.sqrt(3.0) * xavier_std(fan_in, fan_out, gain)


def symmetric_uniform(n: int, bound: float, seed: int, offset: int = 0) -> np.ndarray:
    """bound (2u - 1) for the stream's uniforms u in (0, 1]: values in (-bound, bound], float64
    (what the GPU computes as fma(u, 2 bound, -bound) in float32)."""
    return bound * (2.0 * uniform(n, seed, offset).astype(np.float64) - 1.0)


# --- distribution tests -------------------------------------------------------------------------

def ks_uniform(u) -> tuple[float, float]:
    """One-sample KS test of u against U(0, 1): (D, asymptotic p-value)."""
    return _ks(np.clip(np.sort(np.asarray(u, np.float64).ravel()), 0.0, 1.0))


def ks_normal(z) -> tuple[float, float]:
    """One-sample KS test of z against N(0, 1): (D, asymptotic p-value)."""
    return _ks(normal_cdf(np.sort(np.asarray(z, np.float64).ravel())))


def _ks(f_sorted) -> tuple[float, float]:
    n = f_sorted.size
    i = np.arange(1, n + 1, dtype=np.float64)
    d = max(float(np.max(i / n - f_sorted)), float(np.max(f_sorted - (i - 1) / n)))
    rn = math.sqrt(n)
    return d, kolmogorov_q((rn + 0.12 + 0.11 / rn) * d)


def uniform_moments(u) -> dict:
    """Mean and variance of u with their standard errors under U(0, 1): (value, want, se)."""
    u = np.asarray(u, np.float64).ravel()
    n = u.size
    # var of u is 1/12; var of (u - 1/2)^2 is 1/80 - 1/144 = 1/180
    return {"mean": (float(u.mean()), 0.5, math.sqrt(1 / 12 / n)),
            "variance": (float(u.var()), 1 / 12, math.sqrt(1 / 180 / n))}


def bernoulli_z(ones: int, n: int, p: float) -> float:
    """How many standard errors the count of ones lies from n p."""
    return (ones - n * p) / math.sqrt(max(n * p * (1 - p), 1e-300))
