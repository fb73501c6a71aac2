"""Day 42 driver: bf16 GEMM with mma.sync + ldmatrix in inline PTX, swizzled shared memory.

    from days.day42_mma_ptx_gemm.driver import matmul, matmul_bits
    c = matmul(a, b)                 # real arrays rounded to bf16; C float32 [M, N]
    c = matmul_bits(a16, b16)        # uint16 bf16 bit patterns (common.bf16)

Day 41's problem: make_case, the padded operands, the checks and the cuBLAS baselines are
imported from its driver; extras times day 41's best on the same device case.
"""
import numpy as np

from common import args as A
from common import harness as H
from days.day41_wmma_hgemm import driver as day41
from days.day41_wmma_hgemm.driver import (AWKWARD, BAR_SIZE, BENCH_SIZES, CHECK_SIZES,  # noqa: F401
                                          SIZE_HELP, SIZES, baselines, make_case, validate_size)

from . import reference  # noqa: F401  (day 41's reference, re-exported with the swizzle arithmetic)

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "mma.sync m16n8k16 + ldmatrix, plain shared tiles, 128x128, 8 warps of 64x32",
    "v2": "v1 + XOR-swizzled shared tiles (conflict-free ldmatrix)",
    "v3": "128x256, 8 warps of 64x64, register prefetch + fragment double buffering",
}
BEST = "v3"   # fastest at 8192^3 and 4096^3 (H200, 2026-11-26)
BAR_PCT_OF_CUBLAS = 55

BK = 32
# kernel -> (BM, BN, threads, shared buffers); dynamic shared memory = buffers x (BM + BN) x BK x 2
KERNELS = {
    "hgemm_mma_v1": (128, 128, 256, 1),
    "hgemm_mma_v2": (128, 128, 256, 1),
    "hgemm_mma_v3": (128, 256, 256, 2),
    "hgemm_mma_cand_128x256_w64x64": (128, 256, 256, 2),
    "hgemm_mma_cand_128x256_w64x64_nofb": (128, 256, 256, 2),
    "hgemm_mma_cand_256x128_w64x64": (256, 128, 256, 2),
    "hgemm_mma_cand_128x128_w64x64_nofb": (128, 128, 128, 2),
    "hgemm_mma_cand_128x128_w64x32": (128, 128, 256, 2),
}
CANDIDATES = [k for k in KERNELS if "_cand_" in k]


def smem_bytes(kernel: str) -> int:
    bm, bn, _, bufs = KERNELS[kernel]
    return bufs * (bm + bn) * BK * 2


def launch_kernel(kernel, d):
    """Run one kernel of kernel.cu (a version's or a sweep candidate) on DeviceCase d."""
    bm, bn, threads, _ = KERNELS[kernel]
    day41.launch_tiles(K, kernel, d, day41.operands(d), bm, bn, threads, smem_bytes(kernel))


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    launch_kernel(f"hgemm_mma_{version}", d)


def matmul_bits(a_bits, b_bits, version=BEST):
    """C = A @ B for bf16 A [M, K], B [K, N] as uint16 bit patterns; C float32 [M, N] (fp32
    accumulation). Empty M or N: an empty result, K = 0: zeros, both without a launch."""
    version = A.version(version, VERSIONS)
    return day41.run_bits(launch, version, a_bits, b_bits)


def matmul(a, b, version=BEST):
    """C = A @ B with A, B real arrays rounded to bf16 (nearest even) first; C float32."""
    version = A.version(version, VERSIONS)
    return matmul_bits(*day41.to_bits_checked(a, b), version)


# --- extras: the previous day's best on the same device case --------------------------------------

VERSUS = "against day 41's best"


def versus_previous(report, prev, prev_day: int, mine_label: str, launch_mine, sizes):
    """Check and time the previous day's BEST and this day's BEST on one device case per size
    (common.runner.check_and_time); the rows go to a section and to extra.versus_previous."""
    from common.runner import check_and_time

    rows, rec = [], {}
    for size in sizes:
        case = make_case(size, np.random.default_rng(42))
        d = H.DeviceCase(case)
        theirs = check_and_time(report, f"day {prev_day} {prev.BEST}",
                                lambda dd: prev.launch(prev.BEST, dd), case, d)
        mine = check_and_time(report, mine_label, launch_mine, case, d)
        speedup = theirs["median_ms"] / mine["median_ms"]
        rec[H.size_str(size)] = {"previous": theirs, "this": mine, "speedup": speedup}
        rows.append([H.size_str(size), f"{theirs['tflops']:.1f}", f"{mine['tflops']:.1f}",
                     f"{speedup:.2f}x", "ok" if theirs["ok"] and mine["ok"] else "FAIL"])
    return rows, rec


def _beats_previous(rec):
    vs = (rec.get("extra") or {}).get("versus_previous")
    if not vs:
        return False, "not measured"
    bad = [s for s, r in vs.items() if not (r["previous"]["ok"] and r["this"]["ok"])]
    if bad:
        return False, f"a kernel was wrong at {', '.join(bad)}"
    size, worst = min(vs.items(), key=lambda kv: kv[1]["speedup"])
    return worst["speedup"] > 1.0, f"{worst['speedup']:.2f}x the previous day's best at {size}"


def extras(report, mode):
    if mode == "check":
        return
    rows, rec = versus_previous(report, day41, 41, f"day 42 {BEST}", lambda dd: launch(BEST, dd),
                                [BAR_SIZE])
    report.section(f"{VERSUS} (TFLOP/s, same device case)", rows,
                   ["size", f"day 41 {day41.BEST}", f"day 42 {BEST}", "speed-up", "ok"])
    report.record("versus_previous", rec)


BAR = [{"sizes": [BAR_SIZE], "vs_baseline": BAR_PCT_OF_CUBLAS / 100},
       {"text": "faster than day 41's best at 8192^3", "check": _beats_previous}]
