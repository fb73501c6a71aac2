"""Day 58 driver: cuRAND's Philox4_32_10 stream by hand (u32, uniform, normal, Bernoulli), checked
against libcurand bit for bit and against the distributions they claim; He/Xavier initializers.

    from days.day58_curand_init.driver import normal, uniform, u32, bernoulli
    z = normal(1 << 20, seed=1)                 # numpy float32 == curandGenerateNormal(seed 1)
    u = uniform(1000, seed=1, offset=4)         # == curandGenerateUniform after SetGeneratorOffset(4)

For GPU memory (the training days), use common/rng.py: rng.normal, rng.he_normal, rng.xavier_uniform,
rng.bernoulli, rng.PhiloxStream, rng.CurandGenerator. It launches this day's kernels.

The day's case is (n, offset): n standard normals from generator offset `offset`, written once
(a write-only op: 4n bytes). extras() compares every distribution and version with libcurand
live, runs the distribution tests on 2^24 GPU numbers, and times every distribution against
cuRAND, torch and a write-only stream.
"""
import math

import numpy as np

from common import args as A
from common.bars import all_pass
from common import harness as H
from common import rng

from . import reference

VERSIONS = {
    "v1": "one output per thread (a whole Philox block and Box-Muller pair for one number)",
    "v2": "one Philox block per thread -> 4 outputs, float4 store",
    "v3": "2 blocks per thread, a warp's stores contiguous (v2 with ILP)",
}
BEST = "v3"
SIZE_HELP = "NxOFFSET (n normals from generator offset OFFSET), e.g. 2^25x0"
SIZES = {"small": (1000, 0), "default": (1 << 24, 0), "large": (1 << 25, 0)}
# n: 1, 2, 3, 4, 5, 31, 33 (partial chunks), odd offsets (the first chunk starts before output 0:
# no float4 store), 4101 from offset 1000003 (block 3 of the subsequences: the host layout's
# wrap), 300001 from 3 (chunks past 65536: blocks 0 and 1), an offset past 2^32 words
CHECK_SIZES = [(1, 0), (1, 3), (2, 1), (3, 2), (4, 0), (5, 5), (31, 1), (33, 2), (1000, 4),
               (4101, 1000003), (300001, 3), (65537, (1 << 34) + 6), (262144, 0)]
# 2^25 normals (128 MiB, 2.5 L2s; the float64 reference takes ~3 s), an awkward n from an odd
# offset (no float4 stores at all: each chunk straddles two 16-byte slots), even for cuRAND
BENCH_SIZES = [(1 << 25, 0), (5000006, 7)]


def validate_size(size):
    n, offset = size
    A.fits_int32("n", n)
    if offset >= rng.MAX_OFFSET:
        raise ValueError(f"offset {offset} is past 2^63")


def make_case(size, rng_np):
    n, offset = size
    seed = int(rng_np.integers(0, 2 ** 63)) | (1 << 40)     # both key words in use
    # write-only: 4n bytes; read_bytes=None holds it to the copy ceiling (the harness has no
    # write-only mix; extras time a write-only stream and give that percentage too)
    return H.Case(size, inputs={}, outputs={"z": ((n,), np.float32)},
                  reference=lambda: {"z": reference.normal(n, seed, offset)}, bytes=4 * n,
                  params={"seed": seed, "offset": offset})


def launch(version, d):
    version = A.version(version, VERSIONS)
    n, offset = d.size
    rng.launch("normal", version, d.z, n, d.params["seed"], offset)


def baselines(d):
    """cuRAND's own generator (the same numbers: checked) and torch.randn (other numbers:
    timed only), on the same device memory."""
    from common.baselines import as_torch, torch_or_none

    n, offset = d.size
    out = {}
    ok, _ = rng.curand_status()
    if ok and n % 2 == 0:
        g = rng.CurandGenerator(d.params["seed"])
        z = d.array("z")

        def cur():
            g.set_offset(offset)
            return g.normal(n, out=z)
        out["curandGenerateNormal"] = cur
    torch = torch_or_none()
    if torch is not None:
        t = as_torch(d.array("z"))
        out["torch.randn"] = lambda: (torch.randn(t.shape, device="cuda", out=t), None)[1]
    return out


# --- public functions (numpy out) ---------------------------------------------------------------

def _n(n):
    n = A.count(n, "n", low=0)
    A.fits_int32("n", n)
    return n


def _args(n, seed, offset, version):
    """Checked (n, seed, offset, version), all before anything touches pycuda."""
    return _n(n), rng.checked_seed(seed), rng.checked_offset(offset), A.version(version, VERSIONS)


def u32(n, seed, offset=0, version=BEST):
    """Words offset .. offset + n - 1 of cuRAND's Philox4_32_10 stream (curandGenerate), uint32.
    n = 0 gives an empty array without a launch."""
    n, seed, offset, version = _args(n, seed, offset, version)
    return rng.u32(n, seed, offset, version=version).get() if n else np.empty(0, np.uint32)


def uniform(n, seed, offset=0, version=BEST):
    """curandGenerateUniform's n floats in (0, 1], float32."""
    n, seed, offset, version = _args(n, seed, offset, version)
    return rng.uniform(n, seed, offset, version=version).get() if n else np.empty(0, np.float32)


def normal(n, seed, offset=0, mean=0.0, std=1.0, version=BEST):
    """curandGenerateNormal's n standard normals (any n, any offset; cuRAND itself wants n
    even), scaled as fma(z, std, mean), float32."""
    n, seed, offset, version = _args(n, seed, offset, version)
    mean, std = A.real(mean, "mean"), A.real(std, "std", low=0)
    return (rng.normal(n, seed, offset, mean, std, version=version).get() if n
            else np.empty(0, np.float32))


def bernoulli(n, p, seed, offset=0, version=BEST):
    """1.0 with probability p (word < round(p 2^32)), else 0.0, float32."""
    n, seed, offset, version = _args(n, seed, offset, version)
    rng.bernoulli_threshold(p)
    return rng.bernoulli(n, p, seed, offset, version=version).get() if n else np.empty(0, np.float32)


# --- extras: cuRAND live, the distributions, every distribution timed -------------------------

STREAMS = [(0, 0, 4100), (1234, 5, 9000), (0x0123456789ABCDEF, 1000003, 4100),
           ((1 << 63) | 12345, 3, 300002), (7, (1 << 40) + 4, 1 << 20), (99, 0, 1 << 22)]


def curand_match():
    """Every distribution and version against libcurand, word for word. Returns
    {row name: {"values": compared, "differ": count, "max_abs": float}}."""
    from common.gpu import driver

    out = {}
    for seed, offset, n in STREAMS:
        g = rng.CurandGenerator(seed, offset)
        want = {"u32": g.u32(n).get()}
        g.set_offset(offset)
        want["uniform"] = g.uniform(n).get()
        g.set_offset(offset)
        want["normal"] = g.normal(n).get()
        # Bernoulli has no cuRAND call: cuRAND's words compared with the threshold on the host
        thr = rng.bernoulli_threshold(0.3)
        want["bernoulli"] = (want["u32"].astype(np.uint64) < thr).astype(np.float32)
        g.close()
        for dist in rng.DISTS:
            for v in VERSIONS:
                got = {"u32": rng.u32, "uniform": rng.uniform, "normal": rng.normal}.get(dist)
                got = got(n, seed, offset, version=v) if got else rng.bernoulli(n, 0.3, seed, offset, version=v)
                driver().Context.synchronize()
                got = got.get()
                w = want[dist]
                bad = int(np.count_nonzero(got.view(np.uint32) != w.view(np.uint32)))
                diff = (0.0 if dist == "u32" else float(np.max(np.abs(got.astype(np.float64) - w))))
                key = f"{dist} {v}"
                r = out.setdefault(key, {"values": 0, "differ": 0, "max_abs": 0.0})
                r["values"] += n
                r["differ"] += bad
                r["max_abs"] = max(r["max_abs"], diff)
    return out


def numpy_double_match(n=300000, seeds=(5, (1 << 62) + 9), offsets=(0, 1000003)):
    """The numpy reference's double layout against libcurand over n doubles (quads past the
    first round of 65536: the part of the layout the fixture does not pin down)."""
    out = {}
    for s in seeds:
        for o in offsets:
            g = rng.CurandGenerator(s, o)
            ud = g.uniform_double(n).get()
            g.set_offset(o)
            nd = g.normal_double(n).get()
            g.close()
            ru = reference.uniform_double(n, s, o)
            rn = reference.normal_double(n, s, o)
            for k, (a, b) in {"uniform_double": (ud, ru), "normal_double": (nd, rn)}.items():
                r = out.setdefault(k, {"values": 0, "differ_beyond_2e-14": 0, "first_bad": None})
                bad = np.nonzero(np.abs(a - b) > 2e-14)[0]
                r["values"] += n
                r["differ_beyond_2e-14"] += int(bad.size)
                if bad.size and r["first_bad"] is None:
                    r["first_bad"] = [int(s), int(o), int(bad[0])]
    return out


STAT_N = 1 << 24
STAT_SEED = 20260158
BERNOULLI_P = (0.1, 0.5, 0.9)


def distribution_tests(n=STAT_N, seed=STAT_SEED):
    """Moments and KS tests of n GPU numbers of each distribution (v3), Bernoulli frequencies,
    and the He/Xavier initializers' standard deviations. Returns {test: {value, want, se or p,
    ok}}."""
    res = {}
    u = rng.uniform(n, seed, 0).get()
    for k, (val, want, se) in reference.uniform_moments(u).items():
        res[f"uniform {k}"] = {"value": val, "want": want, "z": (val - want) / se}
    d, p = reference.ks_uniform(u)
    res["uniform KS"] = {"value": d, "p": p}
    z = rng.normal(n, seed, n).get()
    for k, v in reference.moments(z).items():
        if k == "n":
            continue
        val, want, se = v
        res[f"normal {k}"] = {"value": val, "want": want, "z": (val - want) / se}
    d, p = reference.ks_normal(z)
    res["normal KS"] = {"value": d, "p": p}
    for i, pr in enumerate(BERNOULLI_P):
        b = rng.bernoulli(n, pr, seed, 2 * n + i * n).get()
        ones = int(b.sum())
        res[f"bernoulli p={pr} frequency"] = {"value": ones / n, "want": pr,
                                              "z": reference.bernoulli_z(ones, n, pr)}
    fan_in, fan_out = 3072, 768
    for k, (name, fn, want) in enumerate((("he_normal", rng.he_normal, reference.he_std(fan_in)),
                           ("he_uniform", rng.he_uniform, reference.he_std(fan_in)),
                           ("xavier_normal", rng.xavier_normal, reference.xavier_std(fan_in, fan_out)),
                           ("xavier_uniform", rng.xavier_uniform, reference.xavier_std(fan_in, fan_out)))):
        w = fn((n // fan_in, fan_in), seed, (6 + k) * n,
               **({"fan_out": fan_out} if "xavier" in name else {}))
        w = w.get().astype(np.float64)
        sd = float(w.std())
        # se of a sample std: std sqrt(1 / (2n)) for a normal, std sqrt(1 / (5n)) for a uniform
        # (var of u^2 for U(-a, a) is 4 a^4 / 45 = 4/5 var^2: se(var) = var sqrt(0.8/n))
        rel_se = math.sqrt(1 / (2 * w.size)) if "normal" in name else math.sqrt(0.2 / w.size)
        r = {"value": sd, "want": want, "z": (sd - want) / (want * rel_se)}
        if "uniform" in name:
            bound = math.sqrt(3) * want
            r["inside_bound"] = bool(np.all(np.abs(w) <= bound * (1 + 1e-6)))
        res[f"{name} std"] = r
    for r in res.values():
        r["ok"] = (r["p"] > 1e-3) if "p" in r else (abs(r["z"]) <= 5 and r.get("inside_bound", True))
    return res


TIME_N = 1 << 25


def time_distributions(n=TIME_N):
    """Each distribution's v3, libcurand's call and torch's call at n outputs, and a write-only
    float4 stream of the same bytes, timed as the versions are (L2 flushed)."""
    from common.baselines import torch_or_none
    from common.timing import time_fn
    from pycuda import gpuarray

    out = gpuarray.empty(n, np.float32)
    rows = {}
    fill = rng._K("fill_ceiling", "Pii")
    n4 = n // 4
    grid = (H.cdiv(n4, 2 * rng.THREADS), 1, 1)
    t = time_fn(lambda: fill.prepared_call(grid, (rng.THREADS, 1, 1), out.gpudata, n4, 0))
    rows["write-only stream (float4)"] = t.median_ms
    for dist in rng.DISTS:
        for v in VERSIONS:
            t = time_fn(lambda: rng.launch(dist, v, out.gpudata, n, 1, 0, 1.0, 0.0, 1 << 31))
            rows[f"hand {dist} {v}"] = t.median_ms
    ok, _ = rng.curand_status()
    if ok:
        g = rng.CurandGenerator(1)
        for dist, fn in (("u32", lambda: g.u32(n, out=out.view(np.uint32))),
                         ("uniform", lambda: g.uniform(n, out=out)),
                         ("normal", lambda: g.normal(n, out=out))):
            rows[f"cuRAND {dist}"] = time_fn(fn).median_ms
        g.close()
    torch = torch_or_none()
    if torch is not None:
        from common.baselines import as_torch

        tt = as_torch(out)
        rows["torch uniform (rand)"] = time_fn(lambda: torch.rand(n, device="cuda", out=tt)).median_ms
        rows["torch normal (randn)"] = time_fn(lambda: torch.randn(n, device="cuda", out=tt)).median_ms
        rows["torch bernoulli (bernoulli_)"] = time_fn(lambda: tt.bernoulli_(0.5)).median_ms
    return {k: {"median_ms": ms, "gbps": 4 * n / (ms * 1e-3) / 1e9} for k, ms in rows.items()}


def extras(report, mode):
    if mode == "check":
        return
    ok, why = rng.curand_status()
    if ok:
        m = curand_match()
        report.section(f"The hand Philox against libcurand {rng.curand_version()} (host API, "
                       f"Philox4_32_10), {len(STREAMS)} streams (seed, offset, n)",
                       [[k, str(r["values"]), str(r["differ"]), f"{r['max_abs']:.3g}"]
                        for k, r in m.items()],
                       ["distribution version", "values", "bits differ", "max abs diff"])
        report.record("curand_match", m)
        if any(r["differ"] for r in m.values()):
            report.failures.append("the hand Philox differs from libcurand")
        dm = numpy_double_match()
        report.section("The numpy reference's double layout against libcurand (300000 doubles)",
                       [[k, str(r["values"]), str(r["differ_beyond_2e-14"]), str(r["first_bad"])]
                        for k, r in dm.items()],
                       ["call", "values", "differ by > 2e-14", "first (seed, offset, index)"])
        report.record("double_layout", dm)
    else:
        report.say(f"  libcurand: {why}; the live comparison is skipped")
    st = distribution_tests()
    report.section(f"Distribution tests of {STAT_N} GPU numbers (v3, seed {STAT_SEED})",
                   [[k, f"{r['value']:.6g}", f"{r.get('want', '')}",
                     f"p = {r['p']:.3g}" if "p" in r else f"{r['z']:+.2f} se",
                     "ok" if r["ok"] else "FAIL"] for k, r in st.items()],
                   ["test", "value", "want", "z or p", "ok"])
    report.record("distribution_tests", st)
    if not all(r["ok"] for r in st.values()):
        report.failures.append("a distribution test fails")
    tm = time_distributions()
    ceil = tm["write-only stream (float4)"]["gbps"]
    for r in tm.values():
        r["pct_of_write_ceiling"] = 100 * r["gbps"] / ceil
    report.section(f"Every distribution at {TIME_N} outputs (GB/s written; write-only ceiling "
                   f"{ceil:.0f} GB/s)",
                   [[k, f"{r['median_ms'] * 1e3:.1f}", f"{r['gbps']:.0f}",
                     f"{r['pct_of_write_ceiling']:.1f}"] for k, r in tm.items()],
                   ["generator", "us", "GB/s", "% of write-only"])
    report.record("timings", tm)


def _bit_exact(rec):
    m = rec.get("extra", {}).get("curand_match")
    if not m:
        return False, "not measured"
    bad = sum(r["differ"] for r in m.values())
    return bad == 0, f"{bad} of {sum(r['values'] for r in m.values())} values differ"


# CURRICULUM.md / issue 13: the hand Philox reproduces cuRAND's Philox4_32_10 stream bit for bit
# for the same seed and offset; distribution tests
BAR = [{"text": "hand Philox = libcurand bit for bit (u32, uniform, normal, Bernoulli; v1-v3)",
        "check": _bit_exact},
       {"text": "uniform/normal KS and moments, Bernoulli frequencies, He/Xavier std",
        "check": all_pass("distribution_tests")}]
