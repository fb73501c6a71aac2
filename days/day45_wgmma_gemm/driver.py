"""Day 45 driver: a bf16 GEMM on Hopper's warpgroup tensor cores, fed by TMA (sm_90a).

    from days.day45_wgmma_gemm.driver import matmul
    c = matmul(a, b)          # C = A @ B.T; a [M, K], b [N, K] floats, rounded to bf16;
                              # returns float32 values of the bf16 C; version=BEST

The library to match is cuBLAS in bf16 (through torch, and cublasGemmEx directly), timed in
the same run on the same device memory; the datasheet dense bf16 rate is the ceiling.
"""
import numpy as np

from common import args as A
from common import harness as H
from common import hopper_gemm as G
from common import tma
from common.baselines import torch_or_none

from . import reference

SM90A = True
K = H.Kernels(__file__, sm90a=True)

VERSIONS = {
    "v1": "one warpgroup, 64x128 tile, TMA into one buffer, wgmma m64n128k16",
    "v2": "128x256 tile: two warpgroups of m64n256k16, one buffer",
    "v3": "producer warpgroup + 4-stage mbarrier ring, setmaxnreg (warp specialised)",
    "v4": "v3 persistent: one block per SM, grouped tile order",
    "v5": "v4 with two k-blocks of wgmma in flight (wait_group 1)",
    "v6": "v5 in clusters of 2 along M: B tiles multicast to both blocks",
}
BEST = "v5"   # the lead corrects it from the GPU run
SIZE_HELP = "MxKxN for C[M,N] = A[M,K] . B[N,K]^T in bf16, e.g. 8192x8192x8192"
SIZES = {"small": (64, 64, 128), "default": (8192, 8192, 8192), "large": (8192, 16384, 8192)}
# 1x1x1; K = 8 (one partial k-block); K % 8 != 0 (the pad path: 1, 31, 129, 2049, 777);
# M, N no multiple of 64/128/256 (partial tiles, odd N: scalar stores); several k-blocks
# with a partial last one (520 = 8 x 64 + 8); tiles_m odd (v6's last cluster half empty)
CHECK_SIZES = [(1, 1, 1), (1, 8, 1), (17, 31, 33), (64, 64, 128), (127, 129, 255),
               (1000, 777, 513), (3, 2049, 1031), (129, 64, 257), (256, 1024, 512),
               (300, 72, 260), (1100, 520, 600), (385, 136, 770), (640, 4096, 257)]
AWKWARD = (8191, 8191, 8191)           # every dimension odd: partial tiles, the pad path
BENCH_SIZES = [(8192, 8192, 8192), (4096, 4096, 4096), (8192, 2048, 8192), (4096, 8192, 12288),
               AWKWARD]
BAR = [{"sizes": [(8192, 8192, 8192)], "vs_baseline": 0.9}]

BK = 64
# v6 spills 40-72 bytes (ptxas, CUDA 13.0): tile bookkeeping of the cluster path, outside the
# k loop (the SASS shows no local access between the wgmma of a k-block); its consumers are
# held to 168 registers by the 384-thread launch like v5's, which fits without spills
ALLOWED_SPILLS = ("gemm_v6",)
TILES = {"v1": (64, 128), "v2": (128, 256)}            # BM, BN of the non-WS versions
WS = ("v3", "v4", "v5", "v6")                          # 128 x 256 tiles, 384 threads
STAGE_BYTES = (128 + 256) * BK * 2
SMEM = {"v1": 0, "v2": (128 + 256) * BK * 2 + 1024, **{v: 4 * STAGE_BYTES + 1024 for v in WS}}
MAX_GRID_Y = 65535


def validate_size(size):
    m, k, n = size
    if H.cdiv(m, 64) > MAX_GRID_Y:
        raise ValueError(f"M = {m}: at most {MAX_GRID_Y * 64} rows (v1's grid holds M / 64 "
                         f"tiles on gridDim.y)")
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v >= 2 ** 31 - 256:
            raise ValueError(f"{name} = {v}: coordinates are 32-bit")
    A.fits_int32("A = [M, K]", m * (k + 8))
    A.fits_int32("B = [N, K]", n * (k + 8))


def make_case(size, rng):
    """A and B ~ N(0, 1) rounded to bf16; C's entries are then ~ sqrt(K)."""
    m, k, n = size
    a = reference.bf16_bits(rng.standard_normal((m, k), dtype=np.float32))
    b = reference.bf16_bits(rng.standard_normal((n, k), dtype=np.float32))
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((m, n), np.uint16)},
                  reference=lambda: {"c": reference.gemm(a, b)},
                  decode={"c": reference.bf16_to_float}, tol={"c": reference.TOL},
                  flops=reference.flops(m, k, n), unit="bf16")


# --- launching --------------------------------------------------------------------------------

def _maps(d, version, a_ptr, b_ptr, kk):
    """Tensor maps of A and B for this version's boxes (v6: each block of the pair fetches
    half of B's box)."""
    m, _, n = d.size
    bm, bn = TILES.get(version, (128, 256))
    if version == "v6":
        bn = 128
    return (tma.cached_map(d, a_ptr, "bfloat16", dims=(kk, m), box=(BK, bm)),
            tma.cached_map(d, b_ptr, "bfloat16", dims=(kk, n), box=(BK, bn)))


def grid_of(version, m, n) -> tuple:
    if version in TILES or version == "v3":
        bm, bn = TILES.get(version, (128, 256))
        return (H.cdiv(n, bn), H.cdiv(m, bm), 1)
    if version == "v6":
        return G.persistent_grid(H.cdiv(H.cdiv(m, 128), 2) * H.cdiv(n, 256), cluster=2)
    return G.persistent_grid(H.cdiv(m, 128) * H.cdiv(n, 256))


def launch(version, d):
    A.version(version, VERSIONS)
    m, k, n = d.size
    a_ptr, b_ptr, kk = G.k_major_operands(d, K("pad_k_v0", "PPiii"), np.uint16, align=8)
    amap, bmap = _maps(d, version, a_ptr, b_ptr, kk)
    threads = {"v1": 128, "v2": 256}.get(version, 384)
    fn = K(f"gemm_{version}", "PPPiii", dynamic_smem=SMEM[version])
    fn.prepared_call(grid_of(version, m, n), (threads, 1, 1), amap, bmap, d.c, m, n, kk,
                     shared_size=SMEM[version])


def baselines(d):
    """cuBLAS bf16 on the same A and B (common.hopper_gemm.cublas_bf16_nt)."""
    return G.cublas_bf16_nt(d)


def extras(report, mode):
    """Which kernels cuBLAS runs for the headline shape (its name tells the tile and whether it
    is a wgmma kernel), and the datasheet peak beside the measured rates."""
    if mode != "bench":
        return
    torch = torch_or_none()
    if torch is None:
        return
    from common.baselines import kernels_launched
    from common.timing import compute_ceiling_tflops

    m, k, n = BENCH_SIZES[0]
    a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    names = kernels_launched(lambda: torch.matmul(a, b.t()))
    tf, src = compute_ceiling_tflops("bf16")
    report.section(f"cuBLAS at {m}x{k}x{n} (torch.matmul, bf16)",
                   [[nm, f"{us:.1f}"] for nm, us in names] + [["datasheet peak", f"{tf} TFLOP/s ({src})"]],
                   ["kernel", "us"])
    del a, b


# --- public function --------------------------------------------------------------------------

def matmul(a, b, version: str = BEST) -> np.ndarray:
    """C = A @ B.T on the tensor cores: a [M, K], b [N, K] (float arrays, rounded to bf16 to
    nearest-even), fp32 accumulation; returns the bf16 C as float32 [M, N]."""
    return G.bf16_nt_matmul(a, b, A.version(version, VERSIONS), launch, validate_size)
