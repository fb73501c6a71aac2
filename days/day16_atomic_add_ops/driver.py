"""Day 16 driver: histograms with atomics, six versions, on uniform and skewed keys.

    from days.day16_atomic_add_ops.driver import histogram
    counts = histogram(keys, bins=256)   # integer keys in [0, bins), any shape; int32 counts out

A size is NxBINSxUNIFORM: N keys, BINS bins (1..4096: uint8 keys up to 256 bins, uint16 keys
above), UNIFORM = the percent of keys drawn uniformly from the bins; all the others are one hot
key. 100 is the uniform case, 10 the skewed one (90% of the keys are the same). (Sizes are
positive integers on the command line, hence "100 uniform" rather than "0 skew".)
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, torch_or_none
from common.gpu import blocks_per_sm, device_info, driver

from . import reference

K = H.Kernels(__file__)
THREADS = 256
REPLICA_BYTES = 32 * 1024  # v5/v6: the replicated histogram's budget (<= 48 KB: no opt-in)

VERSIONS = {
    "v1": "global atomics, one key per thread",
    "v2": "shared-memory histogram per block",
    "v3": "v2 + warp aggregation (__match_any_sync)",
    "v4": "v2 + 16-byte loads",
    "v5": "v4 + per-lane replicated sub-histograms",
    "v6": "v5 + run aggregation in registers",
}
# The fastest at the default size (2^28 skewed bytes, results/day16.json). On uniform byte keys
# v5 is faster (86% against 53% of the ceiling); pass version="v5" for those.
BEST = "v4"
SIZE_HELP = ("NxBINSxUNIFORM: N keys, BINS in 1..4096 (uint8 keys up to 256, uint16 above), "
             "UNIFORM = percent of keys drawn uniformly, the rest one hot key "
             "(100 uniform, 10 skewed), e.g. 2^28x256x10")
UNIFORM, SKEWED = 100, 10
SIZES = {"small": (1000, 256, SKEWED), "default": (2 ** 28, 256, SKEWED),
         "large": (2 ** 30, 256, SKEWED)}
# 1 key; ragged lengths around a warp and a uint4 (16 uint8 / 8 uint16 keys); 1 bin; odd bin
# counts for both key types; every key the same (0); a few million keys, uniform and skewed
CHECK_SIZES = [(1, 256, 100), (1, 4096, 10), (31, 256, 10), (33, 4096, 100), (17, 1, 100),
               (1000, 256, 0), (1000, 7, 50), (4099, 1000, 10), (65537, 4096, 0),
               (1000003, 256, 100), (1000003, 256, 10), (1000003, 4096, 10),
               (2 ** 22 + 5, 4096, 100)]
# the awkward one: an odd number of keys (no uint4 divides it: a scalar tail) and 1000 bins
# (uint16 keys, not a power of two: v5/v6 fit 8 replicas), skewed
AWKWARD = (2 ** 28 + 3, 1000, SKEWED)
BENCH_SIZES = [(2 ** 28, 256, UNIFORM), (2 ** 28, 256, SKEWED),
               (2 ** 28, 4096, UNIFORM), (2 ** 28, 4096, SKEWED), AWKWARD]
# CURRICULUM.md: privatized >= 5x over naive on skewed data
BAR = [{"version": "v2", "over": ("v1", 5.0),
        "sizes": [s for s in BENCH_SIZES if s[2] == SKEWED]}]
MAX_KEYS = 2 ** 31 - 1   # the counts are int32: one bin may have to hold every key


def validate_size(size):
    n, bins, uniform = size
    if n > MAX_KEYS:
        raise ValueError(f"N = {n} keys: at most {MAX_KEYS} (the counts are int32 and one bin "
                         "may receive every key)")
    if not 1 <= bins <= reference.MAX_BINS:
        raise ValueError(f"BINS must be 1..{reference.MAX_BINS} (a block's histogram lives in "
                         f"shared memory), not {bins}")
    if not 0 <= uniform <= 100:
        raise ValueError(f"UNIFORM is a percent, 0..100, not {uniform}")


def make_case(size, rng):
    n, bins, uniform = size
    keys = reference.make_keys(n, bins, 100 - uniform, rng)
    return H.Case(size, inputs={"keys": keys}, outputs={"hist": ((bins,), np.int32)},
                  reference=lambda: {"hist": reference.histogram(keys, bins)},
                  bytes=keys.nbytes + 4 * bins,  # read every key once, write the counts
                  read_bytes=keys.nbytes + 4 * bins)  # held to the read-only stream


def replicas_log2(bins: int) -> int:
    """v5/v6: log2 of the number of interleaved copies: as many as fit REPLICA_BYTES, <= 32."""
    r = 32
    while r > 1 and bins * r * 4 > REPLICA_BYTES:
        r //= 2
    return r.bit_length() - 1


def launch(version, d):
    version = A.version(version, VERSIONS)  # never look up a kernel for an unknown name
    n, bins, _ = d.size
    itemsize = np.dtype(reference.key_dtype(bins)).itemsize
    suffix = "u8" if itemsize == 1 else "u16"
    driver().memset_d32(d.hist, 0, bins)  # part of the op: the kernels add into hist
    if version == "v1":
        K(f"hist_v1_{suffix}", "PPqi").prepared_call((H.cdiv(n, THREADS), 1, 1), (THREADS, 1, 1),
                                                     d.keys, d.hist, n, bins)
        return
    per_thread = 16 // itemsize if version in ("v4", "v5", "v6") else 1
    if version in ("v5", "v6"):
        log2r = replicas_log2(bins)
        fn = K(f"hist_{version}_{suffix}", "PPqii")
        args = (d.keys, d.hist, n, bins, log2r)
    else:
        log2r = 0
        fn = K(f"hist_{version}_{suffix}", "PPqi")
        args = (d.keys, d.hist, n, bins)
    smem = 4 * (bins << log2r)
    grid = min(device_info()["sms"] * blocks_per_sm(fn, THREADS, smem),
               H.cdiv(n, THREADS * per_thread))
    fn.prepared_call((max(grid, 1), 1, 1), (THREADS, 1, 1), *args, shared_size=smem)


def baselines(d):
    n, bins, _ = d.size
    out = {}
    keys = d.array("keys")
    try:
        torch = torch_or_none()
        if torch is not None:
            # torch has no uint16 bincount; keys < 4096 read the same as int16
            t = as_torch(keys.view(np.int16) if keys.dtype == np.uint16 else keys)
            out["torch.bincount"] = lambda: torch.bincount(t, minlength=bins)
    except Exception:  # a baseline that cannot be built is left out, not fatal
        pass
    try:
        cupy = cupy_or_none()
        if cupy is not None:
            kc = cupy.asarray(keys)
            out["cupy.bincount"] = lambda: cupy.bincount(kc, minlength=bins)
    except Exception:
        pass
    return out


def histogram(keys, bins: int, version=BEST) -> np.ndarray:
    """counts[b] = number of keys equal to b, 0 <= b < bins <= 4096, on the GPU (int32).

    keys: integers of any shape (flattened; whole-number floats such as 3.0 are taken as
    integers), every one in [0, bins): the kernels index shared memory with them unchecked, so
    they are checked here. No keys give all-zero counts without a launch."""
    version = A.version(version, VERSIONS)
    bins = A.count(bins, "bins", low=1, high=reference.MAX_BINS)
    dt = reference.key_dtype(bins)
    keys = A.integers(keys, "keys", low=0, high=bins, dtype=dt).ravel()
    validate_size((keys.size, bins, UNIFORM))  # at most 2^31 - 1 keys: the counts are int32
    if keys.size == 0:
        return np.zeros(bins, np.int32)
    case = H.Case((keys.size, bins, UNIFORM), inputs={"keys": keys},
                  outputs={"hist": ((bins,), np.int32)})
    return H.run(launch, version, case)["hist"]


# --- extras: skew sweep, and float atomics for segment sums ---------------------------------

def skew_sweep(n: int = 2 ** 26, bins: int = 256, hot_percents=(0, 50, 90, 99, 100),
               versions=("v1", "v2", "v3", "v5", "v6")):
    """GB/s of each version as the share of one hot key grows."""
    from common.timing import time_fn

    versions = [A.version(v, VERSIONS) for v in versions]
    rows = []
    for hot in hot_percents:
        case = make_case((n, bins, 100 - hot), np.random.default_rng(hot))
        d = H.DeviceCase(case)
        row = [f"{hot}%"]
        for v in versions:
            r = H.check(launch, v, case, d)
            t = time_fn(lambda: launch(v, d), repeats=10, max_seconds=1.0)
            row.append(f"{case.bytes / (t.median_ms * 1e-3) / 1e9:.0f}" + ("" if r.ok else " FAIL"))
        rows.append(row)
        del d
    return rows, ["hot key share"] + [f"{v} GB/s" for v in versions]


def segment_sum_rows(n: int = 2 ** 24, segs: int = 64, runs: int = 5):
    """seg_sum[segment[i]] += values[i] with float atomics: time, error vs float64, and how
    many distinct float32 results `runs` runs give."""
    from common.timing import time_fn

    rng = np.random.default_rng(16)
    values = rng.random(n, dtype=np.float32)
    segment = rng.integers(0, segs, n, dtype=np.uint8)
    exact = reference.segment_sums(values, segment, segs)
    case = H.Case((n,), inputs={"values": values, "segment": segment},
                  outputs={"sums": ((segs,), np.float32)})
    d = H.DeviceCase(case)
    sms = device_info()["sms"]
    rows = []
    for name, grid, smem in [("segsum_global", H.cdiv(n, THREADS), 0),
                             ("segsum_shared", min(sms * 8, H.cdiv(n, THREADS)), 4 * segs)]:
        fn = K(name, "PPPqi")

        def go():
            driver().memset_d32(d.sums, 0, segs)
            fn.prepared_call((grid, 1, 1), (THREADS, 1, 1), d.values, d.segment, d.sums, n, segs,
                             shared_size=smem)

        results = []
        for _ in range(runs):
            go()
            results.append(d.array("sums").get())
        t = time_fn(go, repeats=10, max_seconds=1.0)
        distinct = len({r.tobytes() for r in results})
        err = max(float(np.max(np.abs(r - exact) / np.abs(exact))) for r in results)
        rows.append([name, f"{t.median_ms:.3f} ms", f"{err:.1e}", f"{distinct} of {runs}"])
    return rows


def extras(report, mode):
    if mode == "check":
        return
    rows, headers = skew_sweep()
    report.section("skew sweep: 2^26 uint8 keys, 256 bins, a growing share of one hot key",
                   rows, headers)
    report.record("skew_sweep", {"headers": headers, "rows": rows})
    rows = segment_sum_rows()
    report.section("float atomics: 2^24 values summed into 64 segments",
                   rows, ["kernel", "median time", "max rel error", "distinct results"])
    report.record("segment_sums", rows)
