"""Day 33 driver: a DDPM noising step and a denoising step with Philox noise drawn on the GPU.

    from days.day33_ddpm_kernel.driver import ddpm_noise, ddpm_step, normals, philox4x32_10
    x_t, eps = ddpm_noise(x0, t, seed)                 # x0 [B, ...] float32, t [B] (or one int)
    x_prev = ddpm_step(x_t, eps_theta, t, seed, subsequence=1)
    z = normals(1 << 20, seed=7)                       # the stream's normals, float32
    w = philox4x32_10(counters, keys)                  # [n, 4] uint32 from [n, 4] and [n, 2]

A case of the harness is both ops on a batch [B, N] (B images of N floats, one timestep each):
the noising op reads x0 and writes x_t and eps, the step reads x_t and eps_theta and writes
x_prev; a version's launch runs one then the other. extras() times each op alone against the
ceiling of its own mix, checks the generator against the CPU bit for bit, and tests the
statistics of 2^24 GPU normals.
"""
import numpy as np

from common import args as A
from common import harness as H

from . import reference

K = H.Kernels(__file__)
THREADS = 256           # every kernel (DAY33_THREADS in kernel.cu is the v3/v4 launch bound)
V3_U = 1                # groups of 4 elements per thread of v3 / v4 (DAY33_V3_U / _V4_U)
V4_U = 1

VERSIONS = {
    "v1": "noise into a buffer (thread/element), then an elementwise kernel",
    "v2": "fused, thread/element: one Philox block per element, 3/4 unused",
    "v3": "fused, thread/4 elements: all 4 words of a block, float4 (accurate math)",
    "v4": "v3 with __sincosf (MUFU) instead of sincospif",
}
FAST = {"v1": False, "v2": False, "v3": False, "v4": True}
BEST = "v4"             # the fewest instructions per element; the lead corrects it from the GPU run
SIZE_HELP = "BxN (B images of N floats each), e.g. 64x196608 (64 images of 3x256x256)"
SIZES = {"small": (4, 3000), "default": (64, 196608), "large": (1, 1 << 25)}
# N = 1: every element its own image (the walk crosses an image at each element); N = 2, 3:
# several images inside one group of 4; n % 4 = 1, 2, 3: the scalar tail; N = 33, 31: images
# that start mid-group; 64x196608 = 64 images of 3x256x256 (every image whole float4 groups)
CHECK_SIZES = [(1, 1), (1, 2), (1, 3), (1, 4), (5, 1), (7, 2), (5, 3), (3, 33), (33, 31),
               (2, 1001), (1, 100003), (17, 3000), (64, 3 * 32 * 32)]
AWKWARD = (3, 5000001)  # odd N: every image but the first starts inside a group of 4
# 2^25 floats (the reference's noise for 2^26 draws takes ~6 s of numpy), the odd length, and
# last the headline: a DDPM training batch, 64 images of 3x256x256
BENCH_SIZES = [(1, 1 << 25), AWKWARD, (64, 196608)]
T_STEPS = reference.T_STEPS


def validate_size(size):
    b, n = size
    A.fits_int32("B x N", b * n)


# --- the case: both ops on one batch --------------------------------------------------------------

def coef_tables(betas, t) -> tuple[np.ndarray, np.ndarray]:
    """The per-image coefficients the kernels read, float32: noising [B, 2] = (sqrt(abar_t),
    sqrt(1 - abar_t)); step [B, 4] = (1/sqrt(alpha_t), beta_t / (sqrt(1 - abar_t)
    sqrt(alpha_t)), sigma_t (0 at t = 0), 0). Computed in float64, rounded once."""
    cn = reference.noise_coefficients(betas, t).astype(np.float32)
    cs3 = reference.step_coefficients(betas, t)
    cs = np.zeros((len(cs3), 4), np.float32)
    cs[:, :3] = cs3
    return np.ascontiguousarray(cn), cs


def words(v: int) -> tuple[int, int]:
    """A 64-bit value as (low, high) 32-bit words, the kernels' arguments."""
    return int(v) & 0xFFFFFFFF, (int(v) >> 32) & 0xFFFFFFFF


def _draw(size, rng):
    b, n = size
    t = rng.integers(0, T_STEPS, b)
    t[0] = 0                                   # the last reverse step: no noise added
    if b > 1:
        t[-1] = T_STEPS - 1
    seed = int(rng.integers(0, 2 ** 63)) | (1 << 40)          # both key words in use
    subs = [int(rng.integers(0, 2 ** 63)) | (1 << 33) for _ in range(2)]
    return t, seed, subs


def _params(seed, sub_noise, sub_step) -> dict:
    k0, k1 = words(seed)
    return {"key": (k0, k1), "sub_noise": words(sub_noise), "sub_step": words(sub_step)}


def make_case(size, rng, ops=("noise", "step")):
    """B images of N floats: x0, x_t (the step's input) and eps_theta ~ N(0, 1); timesteps
    uniform in [0, T) with t = 0 and T - 1 present; a 64-bit seed and subsequences with both
    words nonzero. `ops` picks the noising op, the step, or both (the versions' case)."""
    b, n = size
    f = np.float32
    t, seed, (sub_n, sub_s) = _draw(size, rng)
    betas = reference.linear_betas()
    cn, cs = coef_tables(betas, t)
    inputs, outputs, nbytes, rbytes = {}, {}, 0, 0
    if "noise" in ops:
        inputs.update(x0=rng.standard_normal((b, n), dtype=f), coef_noise=cn)
        outputs.update(xt=((b, n), f), eps=((b, n), f))
        nbytes, rbytes = nbytes + 12 * b * n + cn.nbytes, rbytes + 4 * b * n + cn.nbytes
    if "step" in ops:
        inputs.update(xt_in=rng.standard_normal((b, n), dtype=f),
                      eps_theta=rng.standard_normal((b, n), dtype=f), coef_step=cs)
        outputs.update(x_prev=((b, n), f))
        nbytes, rbytes = nbytes + 12 * b * n + cs.nbytes, rbytes + 8 * b * n + cs.nbytes

    def ref():
        out = {}
        if "noise" in ops:
            out["xt"], out["eps"] = reference.ddpm_noise(inputs["x0"], t, seed, sub_n, betas)
        if "step" in ops:
            out["x_prev"] = reference.ddpm_step(inputs["xt_in"], inputs["eps_theta"], t, seed,
                                                sub_s, betas)
        return out

    # bytes: the noising op reads x0 and writes x_t and eps (12 per element), the step reads
    # x_t and eps_theta and writes x_prev (12); both read their [B] coefficient table
    return H.Case(size, inputs=inputs, outputs=outputs, reference=ref, bytes=nbytes,
                  read_bytes=rbytes, params=_params(seed, sub_n, sub_s))


# --- launches -----------------------------------------------------------------------------------

def _grid(n, per_thread):
    return (max(1, H.cdiv(n, THREADS * per_thread)), 1, 1), (THREADS, 1, 1)


def launch_noise(version, d, x0="x0", xt="xt", eps="eps"):
    """The noising op of `version` on DeviceCase d (x0, coef_noise -> xt, eps)."""
    b, n = d.size
    total = b * n
    k0, k1 = d.params["key"]
    s0, s1 = d.params["sub_noise"]
    x0, xt, eps = getattr(d, x0), getattr(d, xt), getattr(d, eps)
    if version == "v1":
        K("ddpm_gen_v1", "PiIIII").prepared_call(*_grid(total, 1), eps, total, k0, k1, s0, s1)
        K("ddpm_noise_apply_v1", "PPPPii").prepared_call(*_grid(total, 1), x0, eps, d.coef_noise,
                                                         xt, total, n)
    elif version == "v2":
        K("ddpm_noise_v2", "PPPPiiIIII").prepared_call(*_grid(total, 1), x0, d.coef_noise, xt,
                                                       eps, total, n, k0, k1, s0, s1)
    else:
        u = V3_U if version == "v3" else V4_U
        K(f"ddpm_noise_{version}", "PPPPiiIIII").prepared_call(
            *_grid(H.cdiv(total, 4), u), x0, d.coef_noise, xt, eps, total, n, k0, k1, s0, s1)


def launch_step(version, d):
    """The denoising step of `version` on DeviceCase d (xt_in, eps_theta, coef_step -> x_prev)."""
    b, n = d.size
    total = b * n
    k0, k1 = d.params["key"]
    s0, s1 = d.params["sub_step"]
    if version == "v1":
        z = d.scratch("z", (total,))
        K("ddpm_gen_v1", "PiIIII").prepared_call(*_grid(total, 1), z, total, k0, k1, s0, s1)
        K("ddpm_step_apply_v1", "PPPPPii").prepared_call(*_grid(total, 1), d.xt_in, d.eps_theta,
                                                         z, d.coef_step, d.x_prev, total, n)
    elif version == "v2":
        K("ddpm_step_v2", "PPPPiiIIII").prepared_call(*_grid(total, 1), d.xt_in, d.eps_theta,
                                                      d.coef_step, d.x_prev, total, n, k0, k1,
                                                      s0, s1)
    else:
        u = V3_U if version == "v3" else V4_U
        K(f"ddpm_step_{version}", "PPPPiiIIII").prepared_call(
            *_grid(H.cdiv(total, 4), u), d.xt_in, d.eps_theta, d.coef_step, d.x_prev, total, n,
            k0, k1, s0, s1)


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    if "x0" in d.arrays:
        launch_noise(version, d)
    if "xt_in" in d.arrays:
        launch_step(version, d)


def baselines(d):
    """torch eager, the way a PyTorch DDPM does it: torch.randn_like (torch's own Philox, other
    numbers, so its output is timed, not compared) and broadcast multiply-adds with [B, 1]
    coefficient columns, on the same device memory."""
    fn = _torch_ops(d)
    return {"torch eager": fn} if fn else {}


def _torch_ops(d):
    from common.baselines import as_torch, torch_or_none

    torch = torch_or_none()
    if torch is None:
        return None
    g = torch.Generator(device="cuda")
    g.manual_seed(d.params["key"][0])
    steps = []
    if "x0" in d.arrays:
        x0 = as_torch(d.array("x0"))
        cn = as_torch(d.array("coef_noise"))
        a, s = cn[:, 0:1], cn[:, 1:2]
        eps, xt = as_torch(d.array("eps")), as_torch(d.array("xt"))

        def noise():
            torch.randn(x0.shape, generator=g, device="cuda", out=eps)
            torch.addcmul(x0 * a, s, eps, out=xt)
        steps.append(noise)
    if "xt_in" in d.arrays:
        xin, et = as_torch(d.array("xt_in")), as_torch(d.array("eps_theta"))
        cs = as_torch(d.array("coef_step"))
        c0, c1n, sig = cs[:, 0:1], -cs[:, 1:2], cs[:, 2:3]
        xp = as_torch(d.array("x_prev"))
        z = torch.empty_like(xin)

        def step():
            torch.randn(xin.shape, generator=g, device="cuda", out=z)
            torch.addcmul(torch.addcmul(xin * c0, c1n, et), sig, z, out=xp)
        steps.append(step)

    def run():
        for f in steps:
            f()
        return None                         # other random numbers: nothing to compare
    return run


# --- public functions ---------------------------------------------------------------------------

def _seed(v, name):
    return A.count(v, name, low=0, high=2 ** 64 - 1)


def _betas(betas):
    if betas is None:
        return reference.linear_betas()
    b = A.floats(betas, "betas", ndim=1, what="[T] (one beta per timestep)", dtype=np.float64)
    if b.size == 0:
        raise ValueError("betas is empty; a schedule needs at least one timestep")
    if not np.all(np.isfinite(b)) or np.any(b <= 0) or np.any(b >= 1):
        raise ValueError("every beta must lie strictly between 0 and 1")
    return b


def _is_scalar(x) -> bool:
    """A number (or 0-d array), not None, a string or a ragged list (A.floats words those)."""
    if x is None or isinstance(x, (str, bytes)):
        return False
    try:
        return np.ndim(x) == 0
    except ValueError:
        return False


def _batch(x, name):
    if _is_scalar(x):
        raise ValueError(f"{name} must have a batch axis first, [B, ...]; got a scalar")
    return A.floats(x, name)


def _timesteps(t, batch, steps):
    scalar = _is_scalar(t)          # (A.integers returns at least 1-D)
    tt = A.integers(t, "t", low=0, high=steps, dtype=np.int64)
    if scalar:
        return np.full(batch, int(tt.ravel()[0]), np.int64)
    if tt.shape != (batch,):
        raise ValueError(f"t must be one timestep or one per image, shape ({batch},), got {tt.shape}")
    return tt


def ddpm_noise(x0, t, seed, subsequence=0, betas=None, version=BEST):
    """The forward (noising) step on the GPU: x_t = sqrt(abar_t) x0 + sqrt(1 - abar_t) eps for
    a batch x0 [B, ...] (float32; image b at timestep t[b], or every image at t if one int),
    eps the normals of the Philox stream (seed, subsequence) over the flattened batch. betas:
    the schedule (default Ho et al.'s linear 1e-4 .. 0.02 over 1000 steps). Returns (x_t, eps),
    float32, shaped like x0. An empty batch returns empty arrays without a launch."""
    version = A.version(version, VERSIONS)
    x0 = _batch(x0, "x0")
    seed, sub = _seed(seed, "seed"), _seed(subsequence, "subsequence")
    betas = _betas(betas)
    t = _timesteps(t, x0.shape[0], len(betas))
    if x0.size == 0:
        return np.empty(x0.shape, np.float32), np.empty(x0.shape, np.float32)
    b = x0.shape[0]
    n = x0.size // b
    validate_size((b, n))
    cn, _ = coef_tables(betas, t)
    case = H.Case((b, n), inputs={"x0": x0.reshape(b, n), "coef_noise": cn},
                  outputs={"xt": ((b, n), np.float32), "eps": ((b, n), np.float32)},
                  params=_params(seed, sub, 0))
    out = H.run(launch, version, case)
    return out["xt"].reshape(x0.shape), out["eps"].reshape(x0.shape)


def ddpm_step(x_t, eps_theta, t, seed, subsequence=0, betas=None, version=BEST):
    """One reverse (denoising) step on the GPU, Ho et al. Algorithm 2:
    x_{t-1} = (x_t - beta_t / sqrt(1 - abar_t) eps_theta) / sqrt(alpha_t) + sigma_t z with
    sigma_t = sqrt(beta_t), z the normals of (seed, subsequence), and no noise at t = 0.
    x_t and eps_theta [B, ...] of one shape (float32); t one int or [B]. Returns x_{t-1},
    float32. Use a new subsequence (or seed) for every step of a sampling loop: the same
    (seed, subsequence) gives the same z."""
    version = A.version(version, VERSIONS)
    x_t = _batch(x_t, "x_t")
    e = A.floats(eps_theta, "eps_theta")
    A.same_shape(x_t=x_t, eps_theta=e)
    seed, sub = _seed(seed, "seed"), _seed(subsequence, "subsequence")
    betas = _betas(betas)
    t = _timesteps(t, x_t.shape[0], len(betas))
    if x_t.size == 0:
        return np.empty(x_t.shape, np.float32)
    b = x_t.shape[0]
    n = x_t.size // b
    validate_size((b, n))
    _, cs = coef_tables(betas, t)
    case = H.Case((b, n), inputs={"xt_in": x_t.reshape(b, n), "eps_theta": e.reshape(b, n),
                                  "coef_step": cs},
                  outputs={"x_prev": ((b, n), np.float32)}, params=_params(seed, 0, sub))
    return H.run(launch, version, case)["x_prev"].reshape(x_t.shape)


def philox4x32_10(counter, key):
    """Philox-4x32-10 on the GPU: counter [..., 4] and key [..., 2] (or one key [2] for every
    counter) of integers in [0, 2^32) -> [..., 4] uint32. Empty input returns empty output."""
    c = A.integers(counter, "counter", low=0, high=2 ** 32, dtype=np.uint32)
    k = A.integers(key, "key", low=0, high=2 ** 32, dtype=np.uint32)
    if c.ndim == 0 or c.shape[-1] != 4:
        raise ValueError(f"counter must be [..., 4] (four 32-bit words), got shape {c.shape}")
    if k.ndim == 0 or k.shape[-1] != 2:
        raise ValueError(f"key must be [..., 2] (two 32-bit words), got shape {k.shape}")
    if k.shape != c.shape[:-1] + (2,):
        if k.shape != (2,):
            raise ValueError(f"key must be one key [2] or one per counter {c.shape[:-1] + (2,)}, "
                             f"got {k.shape}")
        k = np.broadcast_to(k, c.shape[:-1] + (2,))
    shape = c.shape
    m = c.size // 4
    if m == 0:
        return np.empty(shape, np.uint32)
    A.fits_int32("counter", m, "counters")
    case = H.Case((m,), inputs={"ctr": c.reshape(m, 4), "key": np.ascontiguousarray(k).reshape(m, 2)},
                  outputs={"out": ((m, 4), np.uint32)})

    def go(_, d):
        K("philox_blocks", "PPPi").prepared_call(*_grid(m, 1), d.ctr, d.key, d.out, m)
    return H.run(go, "philox", case)["out"].reshape(shape)


def philox_stream(n, seed, subsequence=0):
    """The first n 32-bit words of the stream (seed, subsequence) on the GPU, uint32 [n]: the
    words every DDPM kernel draws (word i is word i % 4 of the block with counter
    (i // 4, subsequence) and key seed)."""
    n = A.count(n, "n", low=0, high=2 ** 31 - 4)
    seed, sub = _seed(seed, "seed"), _seed(subsequence, "subsequence")
    if n == 0:
        return np.empty(0, np.uint32)
    blocks = H.cdiv(n, 4)
    k0, k1 = words(seed)
    s0, s1 = words(sub)
    case = H.Case((blocks,), inputs={}, outputs={"out": ((blocks, 4), np.uint32)})

    def go(_, d):
        K("philox_stream", "PiIIII").prepared_call(*_grid(blocks, 1), d.out, blocks, k0, k1, s0, s1)
    return H.run(go, "stream", case)["out"].reshape(-1)[:n]


def normals(n, seed, subsequence=0, version=BEST):
    """The first n standard normals of the stream (seed, subsequence) on the GPU, float32 [n],
    as `version` draws them (v4: fast sin/cos; v1-v3: the accurate ones, all identical)."""
    version = A.version(version, VERSIONS)
    n = A.count(n, "n", low=0, high=2 ** 31 - 4)
    seed, sub = _seed(seed, "seed"), _seed(subsequence, "subsequence")
    if n == 0:
        return np.empty(0, np.float32)
    k0, k1 = words(seed)
    s0, s1 = words(sub)
    name = "philox_normals_fast" if FAST[version] else "philox_normals"
    case = H.Case((n,), inputs={}, outputs={"out": ((n,), np.float32)})

    def go(_, d):
        K(name, "PiIIII").prepared_call(*_grid(H.cdiv(n, 4), 1), d.out, n, k0, k1, s0, s1)
    return H.run(go, name, case)["out"]


# --- extras: the generator checked, the noise tested, each op alone --------------------------------

KAT = [  # Random123's known answers for Philox-4x32-10 (its kat_vectors): counter, key, output
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]
STREAM_WORDS = 1 << 22          # words of one stream compared with numpy
RANDOM_BLOCKS = 1 << 20         # random (counter, key) pairs compared with numpy
STAT_N = 1 << 24                # normals tested
STAT_SEED, STAT_SUB = 20260133, 7
OP_SIZE = (64, 196608)          # where each op is timed alone


def bit_exact_check(stream_words=STREAM_WORDS, random_blocks=RANDOM_BLOCKS, seed=33):
    """The GPU's Philox against the numpy reference: the known answers, random counters and
    keys, and a stream. Returns {name: (words compared, words that differ)}."""
    rng = np.random.default_rng(seed)
    out = {}
    ctr = np.array([c for c, _, _ in KAT], np.uint32)
    key = np.array([k for _, k, _ in KAT], np.uint32)
    want = np.array([w for _, _, w in KAT], np.uint32)
    got = philox4x32_10(ctr, key)
    out["Random123 known answers"] = (want.size, int(np.count_nonzero(got != want)))
    ctr = rng.integers(0, 2 ** 32, (random_blocks, 4), dtype=np.uint64).astype(np.uint32)
    key = rng.integers(0, 2 ** 32, (random_blocks, 2), dtype=np.uint64).astype(np.uint32)
    got = philox4x32_10(ctr, key)
    out["random counters and keys"] = (got.size, int(np.count_nonzero(got != reference.philox4x32(ctr, key))))
    sd, sub = (1 << 63) | 12345, (1 << 40) | 99
    got = philox_stream(stream_words, sd, sub)
    out["a stream (64-bit seed and subsequence)"] = (
        got.size, int(np.count_nonzero(got != reference.stream_words(stream_words, sd, sub))))
    return out


def noise_statistics(version, n=STAT_N):
    """Moments and the KS test of n GPU normals of `version`, and their largest difference from
    the float64 reference normals of the same words."""
    z = normals(n, STAT_SEED, STAT_SUB, version)
    ref = reference.normals(n, STAT_SEED, STAT_SUB)
    mom = reference.moments(z)
    d, p = reference.ks_normal(z)
    return {"moments": {k: v for k, v in mom.items() if k != "n"}, "ks_d": d, "ks_p": p,
            "max_abs_vs_reference": float(np.max(np.abs(z - ref))), "n": n}


def _fmt(v, digits=5):
    return f"{v:.{digits}g}"


def extras(report, mode):
    if mode == "check":
        return
    from common.runner import _time_baseline, check_and_time, case_ceilings

    exact = bit_exact_check()
    report.section("Philox on the GPU against the numpy reference, bit for bit",
                   [[k, str(n), str(bad)] for k, (n, bad) in exact.items()],
                   ["test", "words compared", "words that differ"])
    report.record("bit_exact", {k: {"words": n, "differ": bad} for k, (n, bad) in exact.items()})
    if any(bad for _, bad in exact.values()):
        report.failures.append("the GPU's Philox differs from the numpy reference")

    stats = {v: noise_statistics(v) for v in ("v3", "v4")}
    rows = []
    names = ["mean", "variance", "skewness", "excess kurtosis"]
    for k in names:
        want, se = stats["v3"]["moments"][k][1], stats["v3"]["moments"][k][2]
        cells = [k]
        for v in ("v3", "v4"):
            val = stats[v]["moments"][k][0]
            cells.append(f"{_fmt(val)} ({(val - want) / se:+.2f} se)")
        rows.append(cells + [_fmt(want), _fmt(se, 3)])
    rows.append(["KS statistic D"] + [_fmt(stats[v]["ks_d"], 4) for v in ("v3", "v4")] +
                ["", _fmt(1 / np.sqrt(STAT_N), 3)])
    rows.append(["KS p-value"] + [_fmt(stats[v]["ks_p"], 3) for v in ("v3", "v4")] + ["> 0.001", ""])
    rows.append(["max abs vs float64 reference"] +
                [_fmt(stats[v]["max_abs_vs_reference"], 3) for v in ("v3", "v4")] + ["", ""])
    report.section(f"Noise statistics of {STAT_N} GPU normals (seed {STAT_SEED})", rows,
                   ["statistic", "v3 (accurate)", "v4 (fast sin/cos)", "N(0, 1)", "std error"])
    report.record("noise_stats", {v: {"ok": stats_ok(s), **s} for v, s in stats.items()})
    if not all(stats_ok(s) for s in stats.values()):
        report.failures.append("the GPU normals fail a moment or the KS test")

    rows, rec = [], {}
    for op in ("noise", "step"):
        case = make_case(OP_SIZE, np.random.default_rng(33), ops=(op,))
        d = H.DeviceCase(case)
        ceil = case_ceilings(case)
        rec[op] = {"ceiling_gbps": ceil.get("gbps"), "mix": ceil.get("mix")}
        for v in VERSIONS:
            fn = (lambda dd, v=v: launch_noise(v, dd)) if op == "noise" else \
                 (lambda dd, v=v: launch_step(v, dd))
            r = check_and_time(report, f"{op} {v}", fn, case, d, ceil=ceil)
            rec[op][v] = {k: r.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling", "ok")}
            rows.append([f"{op} {v}", f"{r['median_ms'] * 1e3:.1f}", f"{r['gbps']:.0f}",
                         f"{r['pct_of_ceiling']:.1f}", "ok" if r["ok"] else "FAIL"])
        fn = _torch_ops(d)
        if fn is not None:
            b = _time_baseline("torch", fn, case, case.expected(), ceil)
            rec[op]["torch"] = {k: b.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling")}
            rows.append([f"{op} torch", f"{b['median_ms'] * 1e3:.1f}", f"{b['gbps']:.0f}",
                         f"{b['pct_of_ceiling']:.1f}", "-"])
    mixes = ", ".join(f"{op} {rec[op]['mix'][0]} read : {rec[op]['mix'][1]} written "
                      f"{rec[op]['ceiling_gbps']:.0f} GB/s" for op in ("noise", "step"))
    report.section(f"Each op alone at {H.size_str(OP_SIZE)} (ceilings: {mixes})", rows,
                   ["op", "us", "GB/s", "% of its ceiling", "ok"])
    report.record("ops_alone", rec)


def stats_ok(s, z_max=5.0, p_min=1e-3) -> bool:
    """Every moment within z_max standard errors of N(0, 1), and the KS p-value above p_min."""
    return (all(abs(val - want) <= z_max * se for val, want, se in s["moments"].values())
            and s["ks_p"] > p_min)


# --- the bar ---------------------------------------------------------------------------------

BAR_PCT = 85


def _op_alone(op):
    def check(rec):
        ops = rec.get("extra", {}).get("ops_alone", {}).get(op)
        if not ops:
            return False, "not measured"
        rows = [(v, r) for v, r in ops.items() if v in VERSIONS and r.get("ok")]
        if not rows:
            return False, "no correct version"
        v, r = max(rows, key=lambda vr: vr[1]["pct_of_ceiling"])
        return r["pct_of_ceiling"] >= BAR_PCT, f"{v} {r['pct_of_ceiling']:.1f}% (bar {BAR_PCT}%)"
    return check


def _bit_exact(rec):
    ex = rec.get("extra", {}).get("bit_exact")
    if not ex:
        return False, "not measured"
    words = sum(v["words"] for v in ex.values())
    bad = sum(v["differ"] for v in ex.values())
    return bad == 0, f"{bad} of {words} words differ"


def _stats(rec):
    st = rec.get("extra", {}).get("noise_stats")
    if not st:
        return False, "not measured"
    return all(s["ok"] for s in st.values()), ", ".join(
        f"{v}: KS p = {s['ks_p']:.3g}" for v, s in st.items())


# CURRICULUM.md / issue 11: >= 85% of the memory ceiling (the pair of ops at every bench size,
# and each op alone against the ceiling of its own mix), the Philox stream equal to the CPU's
# bit for bit, the noise statistics tested
BAR = [{"pct": BAR_PCT},
       {"text": f"noising alone >= {BAR_PCT}% of its ceiling at {H.size_str(OP_SIZE)}",
        "check": _op_alone("noise")},
       {"text": f"denoising step alone >= {BAR_PCT}% of its ceiling at {H.size_str(OP_SIZE)}",
        "check": _op_alone("step")},
       {"text": "Philox on the GPU = numpy bit for bit", "check": _bit_exact},
       {"text": "noise moments and KS test pass", "check": _stats}]
