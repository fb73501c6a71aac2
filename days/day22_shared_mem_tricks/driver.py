"""Day 22 driver: one kernel, ten shared-memory access patterns, timed and counted.

    from days.day22_shared_mem_tricks.driver import pattern
    out = pattern("v4", blocks=132, iters=1024)   # what every thread of the stride-32 kernel sums

Each version's kernel fills a shared buffer, reads it `iters` times in its pattern, and writes
one float a thread; the numpy reference reproduces that output exactly. The figure of merit is
not GB/s (the kernels write 4 bytes a thread to DRAM, on purpose) but shared-memory passes
(wavefronts) per clock, and the counters Nsight Compute reads, against reference.counters().
"""
import numpy as np

from common import args as A
from common import harness as H

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "stride 1 (conflict-free, the ideal)",
    "v2": "stride 2 (2-way)",
    "v3": "stride 3 (odd: conflict-free)",
    "v4": "stride 32 = unpadded 32x32 tile column (32-way)",
    "v5": "column of a 32x33 padded tile",
    "v6": "column of an XOR-swizzled 32x32 tile",
    "v7": "broadcast: all lanes one word",
    "v8": "float2 loads (2 wavefronts)",
    "v9": "float4 loads (4 wavefronts)",
    "v10": "stride 1 in a 96 KB extern __shared__ buffer",
}
BEST = "v1"   # the ideal the others are measured against (the public function's default)
THREADS = reference.THREADS
SIZE_HELP = "BLOCKSxITERS: blocks of 256 threads, shared-memory reads per thread (e.g. 1056x4096)"
# default: 2 blocks an SM on 132 SMs (every version fits 2 an SM, v10's 96 KB included, so
# all run at the same occupancy, 16 warps an SM, in one wave), 16384 reads a thread;
# NCU_SIZE: one block an SM, 1024 reads (a run of a few seconds under ncu)
SIZES = {"small": (3, 96), "default": (264, 16384), "large": (1056, 16384)}
NCU_SIZE = (132, 1024)
# iters: 32 (one round of windows), 64, 1024; blocks: 1, 3, 133 (more than one an SM), 1000
CHECK_SIZES = [(1, 32), (3, 64), (133, 96), (1000, 32), (7, 1024)]
BENCH_SIZES = [SIZES["default"]]  # one size: the DRAM GB/s of these kernels means nothing
MAX_ITERS = 65536      # every partial sum stays an integer below 2^24 (exact in float32)
MAX_BLOCKS = 2 ** 22   # out has blocks * 256 floats, indexed with 32-bit ints
MAX_MOD = 64
DYNAMIC_BYTES = reference.NW_DYNAMIC * 4


def validate_size(size):
    blocks, iters = size
    if blocks > MAX_BLOCKS:
        raise ValueError(f"blocks = {blocks}: at most {MAX_BLOCKS} (32-bit output index)")
    if iters % 32:
        raise ValueError(f"iters = {iters} must be a multiple of 32 (the kernels read in rounds "
                         "of 32 windows)")
    if iters > MAX_ITERS:
        raise ValueError(f"iters = {iters}: at most {MAX_ITERS} (beyond that the float sums "
                         "are no longer exact integers)")


def kernel_name(version):
    return f"smem_{version}_{reference.PATTERNS[version][0]}"


def make_case(size, rng=None):
    """Every version writes the same output with mod = 32 (each word's value is its bank):
    496 per round of 32 reads, per thread (reference.bank_sum_output)."""
    blocks, iters = size
    return H.Case(size, inputs={}, outputs={"out": ((blocks * THREADS,), np.float32)},
                  reference=lambda: {"out": reference.bank_sum_output(size)},
                  bytes=blocks * THREADS * 4,  # DRAM: one float a thread, nothing read
                  params={"iters": iters, "mod": 32}, tol=0.0)


def launch(version, d):
    version = A.version(version, VERSIONS)
    blocks, iters = d.size
    dyn = DYNAMIC_BYTES if version == "v10" else 0
    K(kernel_name(version), "Pii", dynamic_smem=dyn).prepared_call(
        (blocks, 1, 1), (THREADS, 1, 1), d.out, iters, d.params.get("mod", 32), shared_size=dyn)


def pattern(version=BEST, blocks=1, iters=32, mod=61):
    """Run one pattern's kernel: `blocks` blocks of 256 threads, each reading shared memory
    `iters` times (a multiple of 32) in the version's pattern, the buffer holding i % mod.
    Returns out [blocks * 256] float32, equal to reference.output(version, (blocks, iters), mod).
    blocks = 0 or iters = 0 returns zeros without a launch."""
    version = A.version(version, VERSIONS)
    blocks = A.count(blocks, "blocks", low=0, high=MAX_BLOCKS)
    iters = A.count(iters, "iters", low=0, high=MAX_ITERS)
    mod = A.count(mod, "mod", low=1, high=MAX_MOD)
    if iters % 32:
        raise ValueError(f"iters must be a multiple of 32, got {iters}")
    if blocks == 0 or iters == 0:
        return np.zeros(blocks * THREADS, np.float32)
    case = H.Case((blocks, iters), inputs={}, outputs={"out": ((blocks * THREADS,), np.float32)},
                  params={"iters": iters, "mod": mod})
    return H.run(launch, version, case)["out"]


# --- the extras: time per pattern beside the arithmetic ------------------------------------

LD_WAVES = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"
LD_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"
ST_WAVES = "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"
ST_CONFLICTS = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"
NCU_METRICS = [LD_WAVES, LD_CONFLICTS, ST_WAVES, ST_CONFLICTS]
IDEAL_PCT = 80   # the bar: v1 at >= 80% of one wavefront per clock per SM


def ideal_ms(version, size) -> float | None:
    """Time of `version` at `size` if every SM served one shared-memory wavefront per clock at
    the top clock (loads and the fill's stores)."""
    from common.gpu import device_info

    info = device_info()
    if not info.get("sm_clock_mhz"):
        return None
    c = reference.counters(version, size)
    waves = c[LD_WAVES] + c[ST_WAVES]
    return waves / (info["sms"] * info["sm_clock_mhz"] * 1e6) * 1e3


def extras(report, mode):
    if mode == "check":
        return
    from common.runner import check_and_time

    size = tuple(SIZES["default"])
    case = make_case(size)
    d = H.DeviceCase(case)
    rows, rec = [], {}
    for v in VERSIONS:
        r = check_and_time(report, v, lambda dd, v=v: launch(v, dd), case, d, ceil={})
        c = reference.counters(v, size)
        ideal = ideal_ms(v, size)
        per_req = reference.pattern_passes(v)
        frac = ideal / r["median_ms"] if ideal else None
        rec[v] = {"median_ms": r["median_ms"], "ok": r["ok"], "passes": per_req,
                  "ideal_ms": ideal, "of_ideal": frac, **c}
        rows.append([v, VERSIONS[v], per_req, f"{c[LD_WAVES]:,}", f"{c[LD_CONFLICTS]:,}",
                     f"{r['median_ms']:.4f}", f"{ideal:.4f}" if ideal else "-",
                     f"{100 * frac:.1f}%" if frac else "-",
                     f"{r['median_ms'] / rec['v1']['median_ms']:.2f}x", "ok" if r["ok"] else "FAIL"])
    report.section(f"shared-memory patterns at {H.size_str(size)}: time beside the arithmetic",
                   rows, ["version", "pattern", "passes a request", "load wavefronts",
                          "load conflicts", "ms", "ideal ms", "of ideal", "vs v1", "ok"])
    report.record("patterns", {"size": list(size), **rec})


# --- the bar -------------------------------------------------------------------------------

def _v1_at_ideal(rec):
    p = (rec.get("extra") or {}).get("patterns", {}).get("v1")
    if not p or not p.get("of_ideal"):
        return False, "v1 against the ideal not measured"
    if not p["ok"]:
        return False, "v1 was wrong"
    return p["of_ideal"] * 100 >= IDEAL_PCT, f"v1 at {100 * p['of_ideal']:.1f}% of the ideal"


def counter_margin(expected: float, ld_waves: float) -> float:
    """How far a measured counter may be from the arithmetic: 2% of the figure, plus 0.5% of
    the version's load wavefronts (so a conflict-free 0 may read a few stray passes)."""
    return 0.02 * expected + 0.005 * ld_waves


def compare_counters(prof: dict) -> tuple[bool, list[str]]:
    """(all agree?, one line per disagreement or gap) for a results/ncu/day22.json record."""
    import sys

    size = H.parse_size(sys.modules[__name__], str(prof.get("size", "")))
    bad = []
    for v in VERSIONS:
        got = prof.get("versions", {}).get(v)
        if not got:
            bad.append(f"{v} not profiled")
            continue
        want = reference.counters(v, size)
        width = reference.PATTERNS[v][1]
        judged = [LD_WAVES, ST_WAVES] + ([LD_CONFLICTS, ST_CONFLICTS] if width == 1 else [])
        if LD_WAVES not in got:
            bad.append(f"{v}: {LD_WAVES} not measured")
        for m in judged:
            if m in got and abs(got[m] - want[m]) > counter_margin(want[m], want[LD_WAVES]):
                bad.append(f"{v} {m.split('__')[1]}: measured {got[m]:,.0f}, arithmetic {want[m]:,}")
    return not bad, bad


def _counters_match(rec):
    from common import ncu

    prof = ncu.load(22)
    if not prof:
        return False, "Nsight Compute counters not measured (results/ncu/day22.json)"
    try:
        ok, bad = compare_counters(prof)
    except (H.SizeError, ValueError) as e:
        return False, f"cannot read the profiled size: {e}"
    return ok, ("all versions within the margin" if ok else "; ".join(bad[:3]))


BAR = [
    {"text": f"conflict-free v1 >= {IDEAL_PCT}% of 1 wavefront/clock/SM", "check": _v1_at_ideal},
    {"text": "ncu wavefront and bank-conflict counters match the arithmetic", "check": _counters_match},
]
