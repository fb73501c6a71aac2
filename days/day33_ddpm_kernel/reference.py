"""Day 33 reference: Philox-4x32-10, the noise it gives, and one DDPM noising / denoising step.

The specification the kernels are checked against:

- `philox4x32(ctr, key, rounds=10)`: the Philox block function of Salmon et al. (SC'11), in
  vectorized numpy (uint64 products, 32-bit masks). The GPU must equal it bit for bit.
- `stream_words(n, seed, subsequence)`: the n 32-bit words a DDPM kernel draws: word i is word
  i % 4 of Philox(counter = (i // 4 as 64 bits, subsequence as 64 bits), key = seed's two
  halves). This is the layout of cuRAND's curand_init(seed, subsequence, 0) for Philox4_32_10.
- `uniform(words)`: u = ((w >> 8) | 1) * 2^-24, the odd multiples of 2^-24 in (0, 1); exact in
  float32, so GPU and numpy hold the same u.
- `normals(n, seed, subsequence)`: Box-Muller on consecutive word pairs (2m, 2m+1):
  r = sqrt(-2 ln u_2m), z_2m = r sin(2 pi u_2m+1), z_2m+1 = r cos(2 pi u_2m+1), in float64.
- `ddpm_noise` / `ddpm_step`: Ho et al. 2020, eq. (4) and Algorithm 2, per image timestep.
- `moments`, `ks_normal`: the statistics the noise is tested with (no scipy).
"""
import math

import numpy as np

# Random123's Philox-4x32 constants (Salmon et al. 2011): the two multipliers and the Weyl
# increments of the key (the golden ratio and sqrt(3) - 1, as 32-bit fractions)
M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF

T_STEPS = 1000                         # Ho et al.: T = 1000, betas linear from 1e-4 to 0.02
BETA_1, BETA_T = 1e-4, 0.02


# --- Philox ---------------------------------------------------------------------------------

def philox4x32(ctr, key, rounds: int = 10) -> np.ndarray:
    """Philox-4x32-R of counters ctr [..., 4] and keys key [..., 2] (broadcast), uint32 words.

    One round, with (hi, lo) the two 32-bit halves of a 64-bit product:
        (hi0, lo0) = M0 * c0,  (hi1, lo1) = M1 * c2
        c = (hi1 ^ c1 ^ k0,  lo1,  hi0 ^ c3 ^ k1,  lo0)
    and the key is bumped by (W0, W1) (mod 2^32) between rounds."""
    ctr = np.asarray(ctr, dtype=np.uint64)
    key = np.asarray(key, dtype=np.uint64)
    if ctr.shape[-1:] != (4,) or key.shape[-1:] != (2,):
        raise ValueError(f"counters must be [..., 4] and keys [..., 2], got {ctr.shape} and {key.shape}")
    m32 = np.uint64(MASK32)
    c0, c1, c2, c3 = (ctr[..., i] & m32 for i in range(4))
    k0, k1 = key[..., 0] & m32, key[..., 1] & m32
    sh = np.uint64(32)
    for r in range(rounds):
        p0 = np.uint64(M0) * c0              # < 2^64: exact in uint64
        p1 = np.uint64(M1) * c2
        c0, c1, c2, c3 = (p1 >> sh) ^ c1 ^ k0, p1 & m32, (p0 >> sh) ^ c3 ^ k1, p0 & m32
        if r + 1 < rounds:
            k0 = (k0 + np.uint64(W0)) & m32
            k1 = (k1 + np.uint64(W1)) & m32
    return np.stack(np.broadcast_arrays(c0, c1, c2, c3), axis=-1).astype(np.uint32)


def key_of(seed: int) -> tuple[int, int]:
    """The key of a 64-bit seed: (low word, high word), as cuRAND's curand_init sets it."""
    seed = int(seed)
    return seed & MASK32, (seed >> 32) & MASK32


def counter_of(block, subsequence: int = 0) -> np.ndarray:
    """Counters [..., 4] of Philox block numbers (64-bit) in a subsequence (64-bit):
    (block low, block high, subsequence low, subsequence high)."""
    b = np.asarray(block, dtype=np.uint64)
    s = int(subsequence)
    out = np.empty(b.shape + (4,), np.uint64)
    out[..., 0] = b & np.uint64(MASK32)
    out[..., 1] = b >> np.uint64(32)
    out[..., 2] = s & MASK32
    out[..., 3] = (s >> 32) & MASK32
    return out


def stream_words(n: int, seed: int, subsequence: int = 0, start: int = 0) -> np.ndarray:
    """Words start .. start+n-1 of the stream (seed, subsequence): word i is word i % 4 of
    Philox(counter_of(i // 4, subsequence), key_of(seed)). uint32 [n]."""
    if n == 0:
        return np.empty(0, np.uint32)
    first, last = start // 4, (start + n - 1) // 4
    k0, k1 = key_of(seed)
    blocks = philox_blocks(first, last - first + 1, k0, k1, subsequence)
    return blocks.reshape(-1)[start - 4 * first: start - 4 * first + n]


def philox_blocks(first: int, count: int, k0: int, k1: int, subsequence: int = 0) -> np.ndarray:
    """Philox of blocks first .. first+count-1 of a subsequence under one key: [count, 4] uint32.
    The key is the same for every block, so its bumps are scalars (the fast path of philox4x32
    for a whole tensor's noise)."""
    m32 = np.uint64(MASK32)
    sh = np.uint64(32)
    b = np.arange(first, first + count, dtype=np.uint64)
    c0 = b & m32
    c1 = b >> sh
    c2 = np.full(count, subsequence & MASK32, np.uint64)
    c3 = np.full(count, (subsequence >> 32) & MASK32, np.uint64)
    for r in range(10):
        p0 = np.uint64(M0) * c0
        p1 = np.uint64(M1) * c2
        c0, c1, c2, c3 = (p1 >> sh) ^ c1 ^ np.uint64(k0), p1 & m32, (p0 >> sh) ^ c3 ^ np.uint64(k1), p0 & m32
        k0, k1 = (k0 + W0) & MASK32, (k1 + W1) & MASK32
    out = np.empty((count, 4), np.uint32)
    for i, c in enumerate((c0, c1, c2, c3)):
        out[:, i] = c
    return out


# --- uniforms and normals ---------------------------------------------------------------------

def uniform(words) -> np.ndarray:
    """u = ((w >> 8) | 1) * 2^-24: the top 23 bits of w as an odd multiple of 2^-24, in
    [2^-24, 1 - 2^-24] (never 0, never 1). Every such u is exact in float32 (an odd integer
    below 2^24 times a power of two), so the GPU's float32 u is this value exactly."""
    w = np.asarray(words, dtype=np.uint32)
    return ((w >> np.uint32(8)) | np.uint32(1)).astype(np.float64) * 2.0 ** -24


def box_muller(w_even, w_odd) -> tuple[np.ndarray, np.ndarray]:
    """Two standard normals from two words (float64): r = sqrt(-2 ln u1), theta = 2 pi u2;
    (r sin theta, r cos theta), the order cuRAND's _curand_box_muller uses."""
    u1 = uniform(w_even)
    u2 = uniform(w_odd)
    r = np.sqrt(-2.0 * np.log(u1))
    th = 2.0 * np.pi * u2
    return r * np.sin(th), r * np.cos(th)


def normals_of_words(words) -> np.ndarray:
    """Normal i from the pair of words (2*(i//2), 2*(i//2)+1): even i the sine, odd i the cosine.
    """
    w = np.asarray(words, dtype=np.uint32)
    n = w.size
    if n % 2:
        raise ValueError("normals_of_words needs an even number of words (pairs)")
    s, c = box_muller(w[0::2], w[1::2])
    out = np.empty(n, np.float64)
    out[0::2], out[1::2] = s, c
    return out


def normals(n: int, seed: int, subsequence: int = 0) -> np.ndarray:
    """The n normals of stream (seed, subsequence), float64: element i is normal i of the
    stream (Box-Muller on words 2*(i//2), 2*(i//2)+1)."""
    if n == 0:
        return np.empty(0, np.float64)
    m = 4 * ((n + 3) // 4)                # whole Philox blocks
    return normals_of_words(stream_words(m, seed, subsequence))[:n]


# --- the DDPM schedule and the two steps ---------------------------------------------------------

def linear_betas(steps: int = T_STEPS, beta_1: float = BETA_1, beta_T: float = BETA_T) -> np.ndarray:
    """Ho et al.'s schedule: beta_t linear from beta_1 to beta_T over `steps` steps (t = 0..T-1)."""
    return np.linspace(beta_1, beta_T, steps, dtype=np.float64)


def schedule(betas) -> dict:
    """alpha_t = 1 - beta_t, abar_t = prod_{s <= t} alpha_s, sigma_t = sqrt(beta_t) (Ho et al.'s
    sigma_t^2 = beta_t), float64 arrays indexed by t = 0..T-1."""
    b = np.asarray(betas, dtype=np.float64)
    a = 1.0 - b
    return {"beta": b, "alpha": a, "abar": np.cumprod(a), "sigma": np.sqrt(b)}


def noise_coefficients(betas, t) -> np.ndarray:
    """Per image (a, s) = (sqrt(abar_t), sqrt(1 - abar_t)) as [B, 2] float64."""
    s = schedule(betas)
    ab = s["abar"][np.asarray(t)]
    return np.stack([np.sqrt(ab), np.sqrt(1.0 - ab)], axis=-1)


def step_coefficients(betas, t) -> np.ndarray:
    """Per image (c0, c1, sigma) of x_{t-1} = c0 x_t - c1 eps_theta + sigma z as [B, 3] float64:
    c0 = 1/sqrt(alpha_t), c1 = beta_t / (sqrt(1 - abar_t) sqrt(alpha_t)), sigma = sqrt(beta_t),
    and sigma = 0 at t = 0 (the last step adds no noise)."""
    s = schedule(betas)
    t = np.asarray(t)
    al, b, ab = s["alpha"][t], s["beta"][t], s["abar"][t]
    sig = np.where(t > 0, s["sigma"][t], 0.0)
    return np.stack([1.0 / np.sqrt(al), b / (np.sqrt(1.0 - ab) * np.sqrt(al)), sig], axis=-1)


def ddpm_noise(x0, t, seed: int, subsequence: int = 0, betas=None) -> tuple[np.ndarray, np.ndarray]:
    """Forward (noising) step of a batch x0 [B, ...] at per-image timesteps t [B]:
    x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps, eps = normals of (seed, subsequence) over the
    flattened batch. Returns (x_t, eps) in float64."""
    x0 = np.asarray(x0, dtype=np.float64)
    betas = linear_betas() if betas is None else betas
    eps = normals(x0.size, seed, subsequence).reshape(x0.shape)
    ab = schedule(betas)["abar"][np.asarray(t)].reshape((-1,) + (1,) * (x0.ndim - 1))
    return np.sqrt(ab) * x0 + np.sqrt(1.0 - ab) * eps, eps


def ddpm_step(x_t, eps_theta, t, seed: int, subsequence: int = 0, betas=None) -> np.ndarray:
    """One reverse (denoising) step, Ho et al. Algorithm 2, per image timestep t [B]:
    x_{t-1} = (x_t - beta_t / sqrt(1 - abar_t) eps_theta) / sqrt(alpha_t) + sigma_t z,
    z = normals of (seed, subsequence) over the flattened batch, sigma_t = sqrt(beta_t), and
    no noise at t = 0. float64."""
    x_t = np.asarray(x_t, dtype=np.float64)
    e = np.asarray(eps_theta, dtype=np.float64)
    betas = linear_betas() if betas is None else betas
    s = schedule(betas)
    t = np.asarray(t)
    shp = (-1,) + (1,) * (x_t.ndim - 1)
    b, al, ab = (s[k][t].reshape(shp) for k in ("beta", "alpha", "abar"))
    sig = np.where(t > 0, s["sigma"][t], 0.0).reshape(shp)
    z = normals(x_t.size, seed, subsequence).reshape(x_t.shape)
    return (x_t - b / np.sqrt(1.0 - ab) * e) / np.sqrt(al) + sig * z


# --- statistics ---------------------------------------------------------------------------------

def moments(z) -> dict:
    """Sample mean, variance, skewness and excess kurtosis of z, each with its standard error
    under the hypothesis z ~ N(0, 1) iid (1/n, 2/n, 6/n, 24/n variances: the delta method)."""
    z = np.asarray(z, dtype=np.float64).ravel()
    n = z.size
    m = z.mean()
    d = z - m
    var = np.mean(d * d)
    skew = np.mean(d ** 3) / var ** 1.5
    kurt = np.mean(d ** 4) / var ** 2 - 3.0
    return {"n": n, "mean": (m, 0.0, 1 / math.sqrt(n)), "variance": (var, 1.0, math.sqrt(2 / n)),
            "skewness": (skew, 0.0, math.sqrt(6 / n)), "excess kurtosis": (kurt, 0.0, math.sqrt(24 / n))}


# erf with |error| < 1.2e-7 everywhere: Numerical Recipes' Chebyshev fit of erfc
# (Press et al., "erfcc"), here written from its published coefficients
_ERFC_C = (-1.26551223, 1.00002368, 0.37409196, 0.09678418, -0.18628806, 0.27886807,
           -1.13520398, 1.48851587, -0.82215223, 0.17087277)


def erfc(x) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    z = np.abs(x)
    t = 1.0 / (1.0 + 0.5 * z)
    poly = np.zeros_like(t)
    for c in reversed(_ERFC_C):
        poly = poly * t + c
    ans = t * np.exp(-z * z + poly)
    return np.where(x >= 0, ans, 2.0 - ans)


def normal_cdf(x) -> np.ndarray:
    """Phi(x) = erfc(-x / sqrt 2) / 2, to about 1e-7."""
    return 0.5 * erfc(-np.asarray(x, dtype=np.float64) / math.sqrt(2.0))


def kolmogorov_q(lam) -> float:
    """P(K > lam) for the Kolmogorov distribution: 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 lam^2)
    (1 for lam near 0, where the series converges too slowly: the asymptotic value there is 1
    to 7 digits)."""
    lam = float(lam)
    if lam < 0.2:
        return 1.0
    k = np.arange(1, 101, dtype=np.float64)
    terms = 2.0 * (-1.0) ** (k - 1) * np.exp(-2.0 * k * k * lam * lam)
    return float(min(max(terms.sum(), 0.0), 1.0))


def ks_normal(z) -> tuple[float, float]:
    """One-sample Kolmogorov-Smirnov test of z against N(0, 1): the statistic
    D = max_i max(i/n - Phi(z_(i)), Phi(z_(i)) - (i-1)/n) over the sorted sample, and its
    asymptotic p-value Q_KS((sqrt n + 0.12 + 0.11/sqrt n) D) (Stephens' small-n correction, as
    in Numerical Recipes' ksone)."""
    z = np.sort(np.asarray(z, dtype=np.float64).ravel())
    n = z.size
    f = normal_cdf(z)
    i = np.arange(1, n + 1, dtype=np.float64)
    d = max(float(np.max(i / n - f)), float(np.max(f - (i - 1) / n)))
    rn = math.sqrt(n)
    return d, kolmogorov_q((rn + 0.12 + 0.11 / rn) * d)
