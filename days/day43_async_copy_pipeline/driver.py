"""Day 43 driver: bf16 GEMM with multi-stage cp.async pipelines (Ampere style).

    from days.day43_async_copy_pipeline.driver import matmul, matmul_bits
    c = matmul(a, b)                 # real arrays rounded to bf16; C float32 [M, N]
    c = matmul_bits(a16, b16)        # uint16 bf16 bit patterns (common.bf16)

Day 41's problem (make_case, padded operands, checks, cuBLAS baselines), day 42's warp tiles;
extras times day 42's best on the same device case.
"""
from common import args as A
from common import harness as H
from days.day41_wmma_hgemm import driver as day41
from days.day41_wmma_hgemm.driver import (AWKWARD, BAR_SIZE, BENCH_SIZES, CHECK_SIZES,  # noqa: F401
                                          SIZE_HELP, SIZES, baselines, make_case, validate_size)
from days.day42_mma_ptx_gemm import driver as day42

from . import reference  # noqa: F401

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "cp.async, 2 stages: 128x256, BK 32, 8 warps of 64x64",
    "v2": "4 stages (three k-tiles in flight)",
    "v3": "v2 + grouped tile order (8 tile-rows) for L2 reuse",
    "v4": "BK 64, 3 stages, grouped order (the sweep's slot; the sweep never ran)",
}
BEST = "v4"   # fastest at every bench size (H200, 2026-11-26)
BAR_PCT_OF_CUBLAS = 65

# kernel -> (BM, BN, BK, stages, threads); dynamic shared memory = stages x (BM + BN) x BK x 2
KERNELS = {
    "hgemm_async_v1": (128, 256, 32, 2, 256),
    "hgemm_async_v2": (128, 256, 32, 4, 256),
    "hgemm_async_v3": (128, 256, 32, 4, 256),
    "hgemm_async_v4": (128, 256, 64, 3, 256),
    "hgemm_async_cand_128x256_k32_s3_g8": (128, 256, 32, 3, 256),
    "hgemm_async_cand_128x256_k32_s4_g8": (128, 256, 32, 4, 256),
    "hgemm_async_cand_128x256_k32_s5_g8": (128, 256, 32, 5, 256),
    "hgemm_async_cand_128x256_k64_s3_g8": (128, 256, 64, 3, 256),
    "hgemm_async_cand_128x256_k64_s4_g8": (128, 256, 64, 4, 256),
    "hgemm_async_cand_128x256_k32_s4_g16": (128, 256, 32, 4, 256),
    "hgemm_async_cand_256x128_k32_s4_g8": (256, 128, 32, 4, 256),
    "hgemm_async_cand_256x128_k64_s3_g8": (256, 128, 64, 3, 256),
    "hgemm_async_cand_128x128_k32_s4_g8": (128, 128, 32, 4, 128),
    "hgemm_async_cand_128x128_k64_s3_g8": (128, 128, 64, 3, 128),
}
CANDIDATES = [k for k in KERNELS if "_cand_" in k]
SAME_AS_V4 = "hgemm_async_cand_128x256_k64_s3_g8"


def smem_bytes(kernel: str) -> int:
    bm, bn, bk, stages, _ = KERNELS[kernel]
    return stages * (bm + bn) * bk * 2


def launch_kernel(kernel, d):
    """Run one kernel of kernel.cu (a version's or a sweep candidate) on DeviceCase d."""
    bm, bn, _, _, threads = KERNELS[kernel]
    day41.launch_tiles(K, kernel, d, day41.operands(d), bm, bn, threads, smem_bytes(kernel))


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    launch_kernel(f"hgemm_async_{version}", d)


def matmul_bits(a_bits, b_bits, version=BEST):
    """C = A @ B for bf16 A [M, K], B [K, N] as uint16 bit patterns; C float32 [M, N] (fp32
    accumulation). Empty M or N: an empty result, K = 0: zeros, both without a launch."""
    version = A.version(version, VERSIONS)
    return day41.run_bits(launch, version, a_bits, b_bits)


def matmul(a, b, version=BEST):
    """C = A @ B with A, B real arrays rounded to bf16 (nearest even) first; C float32."""
    version = A.version(version, VERSIONS)
    return matmul_bits(*day41.to_bits_checked(a, b), version)


def extras(report, mode):
    if mode == "check":
        return
    rows, rec = day42.versus_previous(report, day42, 42, f"day 43 {BEST}",
                                      lambda dd: launch(BEST, dd), [BAR_SIZE])
    report.section(f"against day 42's best (TFLOP/s, same device case)", rows,
                   ["size", f"day 42 {day42.BEST}", f"day 43 {BEST}", "speed-up", "ok"])
    report.record("versus_previous", rec)


BAR = [{"sizes": [BAR_SIZE], "vs_baseline": BAR_PCT_OF_CUBLAS / 100},
       {"text": "faster than day 42's best at 8192^3", "check": day42._beats_previous}]
