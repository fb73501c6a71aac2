"""Day 29 driver: batched fp32 GEMM, C[b] = A[b] @ B[b], from one thread per output to a tile
chosen by shape, against cuBLAS strided-batched on the same device memory.

    from days.day29_batched_matmul.driver import bmm
    c = bmm(a, b)          # a [batch, M, K], b [batch, K, N] -> c [batch, M, N] float32 (BEST)

Sizes are BATCHxMxKxN.
"""
import functools

import numpy as np

from common import args as A
from common import harness as H

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: one thread per output, batch on grid z",
    "v2": "tiny: G whole matrices per block in shared memory",
    "v3": "128x128 register tile (sgemm.cuh), batch on grid z",
    "v4": "tile by shape: tiny / 64x64 / 128x128",
}
BEST = "v4"
SIZE_HELP = "BATCHxMxKxN for C[b] = A[b] @ B[b], A [batch, M, K], B [batch, K, N], e.g. 64x512x512x512"
SIZES = {"small": (3, 17, 33, 65), "default": (64, 512, 512, 512),
         "large": (16, 1024, 1024, 1024)}
# batch 1, 3, 70000 (past gridDim.z = 65535: v1's loop, v3/v4's second launch); M/K/N of 1,
# 17, 33, 65, 130 (multiples of no tile, K and N odd: the scalar paths), 4/8/20 (N % 4 == 0 and
# K % 4 == 0: the float4 paths with partial tiles), 64x64 and 128-wide (whole tiles)
CHECK_SIZES = [(1, 1, 1, 1), (3, 1, 17, 1), (3, 17, 1, 33), (1, 33, 17, 65), (5, 16, 16, 16),
               (7, 8, 8, 8), (4, 20, 12, 36), (2, 130, 65, 33), (2, 65, 130, 64), (3, 64, 64, 64),
               (1, 130, 132, 260), (2, 257, 33, 129), (70000, 2, 3, 4), (70000, 1, 1, 1),
               (3, 32, 96, 32), (2, 100, 1, 100), (5, 48, 40, 48)]
TINY = (100000, 16, 16, 16)
LARGE = [(64, 512, 512, 512), (16, 1024, 1024, 1024)]
BENCH_SIZES = [TINY, (100000, 8, 8, 8), (20000, 32, 32, 32),  # many tiny: memory-bound
               (4096, 64, 64, 64), (512, 128, 128, 128),            # medium
               *LARGE,                                              # large: compute-bound
               (1000, 33, 17, 65), (24, 1000, 777, 513)]            # awkward: odd everything
CUBLAS = "cuBLAS strided batched"
TORCH = "torch.bmm"
BAR = [{"sizes": [TINY], "vs_baseline": 1.0, "baseline": CUBLAS},
       {"sizes": LARGE, "vs_baseline": 0.9, "baseline": CUBLAS}]

MAX_GRID = 65535            # gridDim.y and gridDim.z
MAX_DIM = 2 ** 31 - 256     # a tile may index up to 128 past an edge in 32-bit ints
MAX_BATCH = 2 ** 31 - 2 ** 16  # v2: blockIdx.x * G stays below 2^31
BALANCE = 16.0              # FLOP/byte above which a size is reported in TFLOP/s (see make_case)

# v2: a block holds G matrices of A and B in shared memory, about TINY_SMEM bytes (sweep)
TINY_THREADS = 256
TINY_SMEM = 32 * 1024
TINY_MAX_FLOATS = 12 * 1024  # A[b] + B[b] at most 48 KB: one matrix a block without opt-in
# v3: sgemm.cuh's default tile, or its Fast configuration (sweep: "v3 fast")
V3_FAST = False
# v4: the mid-size tile (sweep candidates: kernel.cu's TILE lines) and when 128x128 takes over
MID_TILE = (64, 64, 8)       # (BM, BN, BK)
TILES = [(64, 64, 8), (64, 64, 4), (32, 64, 4), (64, 128, 8), (128, 64, 8)]
BIG_MIN_FILL = 0.75          # 128x128 tiles must cover at least 75% useful outputs ...
BIG_MIN_WAVES = 1.0          # ... and make at least one wave of 2 blocks an SM


def validate_size(size):
    """The shapes every version can take: grid limits and 32-bit index arithmetic."""
    batch, m, k, n = size
    if batch > MAX_BATCH:
        raise ValueError(f"batch = {batch}: at most {MAX_BATCH} (v2 numbers matrices with "
                         "32-bit ints)")
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v > MAX_DIM:
            raise ValueError(f"{name} = {v}: the kernels index with 32-bit ints (at most {MAX_DIM})")
    if m > MAX_GRID * 16:
        raise ValueError(f"M = {m} rows: at most {MAX_GRID * 16} (v1 puts blocks of 16 rows on "
                         f"gridDim.y, at most {MAX_GRID} of them)")
    for name, v in (("A[b] (M*K)", m * k), ("B[b] (K*N)", k * n), ("C[b] (M*N)", m * n)):
        A.fits_int32(name, v)


def make_case(size, rng):
    """Inputs in [-1, 1); the table reports GB/s where a shape is memory-bound (fewer than
    BALANCE FLOPs a byte: 2MNK / 4(MK + KN + MN)) and TFLOP/s where it is compute-bound."""
    batch, m, k, n = size
    a = rng.uniform(-1, 1, (batch, m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (batch, k, n)).astype(np.float32)
    compute = reference.intensity(m, k, n) >= BALANCE
    return H.Case(size, inputs={"a": a, "b": b}, outputs={"c": ((batch, m, n), np.float32)},
                  reference=lambda: {"c": reference.bmm(a, b)},
                  bytes=reference.bytes_moved(batch, m, k, n),
                  read_bytes=a.nbytes + b.nbytes,
                  flops=reference.flops(batch, m, k, n) if compute else 0, unit="fp32")


# --- v2: the tiny-matrix kernel -------------------------------------------------------------

def tiny_fits(size) -> bool:
    _, m, k, n = size
    return m * k + k * n <= TINY_MAX_FLOATS


def tiny_plan(size, smem_target=None):
    """(kernel, matrices per block G, dynamic shared bytes, blocks) of v2 at this size."""
    batch, m, k, n = size
    per = m * k + k * n
    g = max(1, min(batch, (smem_target or TINY_SMEM) // (4 * per)))
    smem = 4 * ((g * m * k + 3) // 4 * 4 + g * k * n)
    name = ("bmm_tiny_v2_n4" + ("_k4" if k % 4 == 0 else "") if n % 4 == 0
            else "bmm_tiny_v2_k4" if k % 4 == 0 else "bmm_tiny_v2_any")
    return name, g, smem, H.cdiv(batch, g)


def launch_tiny(d, smem_target=None):
    batch, m, k, n = d.size
    name, g, smem, blocks = tiny_plan(d.size, smem_target)
    K(name, "PPPiiiii", dynamic_smem=smem).prepared_call(
        (blocks, 1, 1), (TINY_THREADS, 1, 1), d.a, d.b, d.c, batch, m, n, k, g, shared_size=smem)


# --- v3 / v4: one (tile, matrix) per block, the batch on grid z ------------------------------

def _vec(size) -> bool:
    _, m, k, n = size
    return k % 4 == 0 and n % 4 == 0   # 16-byte rows of A, B, C (and every matrix aligned)


def launch_tiled(d, name, bm, bn, threads):
    """A tile kernel over the whole batch: grid (N tiles, M tiles, matrices), at most 65535
    matrices a launch, the next launch's pointers offset by the matrices done."""
    batch, m, k, n = d.size
    fn = K(f"{name}_{'vec' if _vec(d.size) else 'scalar'}", "PPPiii")
    for b0 in range(0, batch, MAX_GRID):
        nb = min(MAX_GRID, batch - b0)
        fn.prepared_call((H.cdiv(n, bn), H.cdiv(m, bm), nb), (threads, 1, 1),
                         int(d.a) + 4 * b0 * m * k, int(d.b) + 4 * b0 * k * n,
                         int(d.c) + 4 * b0 * m * n, m, n, k)


def launch_tile(d, tile):
    """v4's register tile (BM, BN, BK) of kernel.cu's TILE list."""
    bm, bn, bk = tile
    launch_tiled(d, f"bmm_tile_v4_{bm}x{bn}_k{bk}", bm, bn, bm * bn // 64)


def launch_sgemm(d, fast=None):
    """v3: sgemm.cuh's default tile (day 8's v7), or with fast=True day 25's Fast configuration
    of it (warp tiling, cp.async stages; both 128x128, 256 threads)."""
    fast = V3_FAST if fast is None else fast
    launch_tiled(d, "bmm_sgemm_v3_fast" if fast else "bmm_sgemm_v3", 128, 128, 256)


@functools.lru_cache(maxsize=None)
def _sms() -> int:
    try:
        from common.gpu import device_info

        return int(device_info()["sms"] or 132)
    except Exception:   # no GPU (CPU tests, the no-GPU path): an H100/H200's count
        return 132


def v4_plan(size, sms=None):
    """What v4 runs at this size: "tiny" (v2's kernel), "128x128" (v3's) or the mid tile.

    - tiny: A[b] and B[b] fit a block's shared memory, and either C[b] has at most 32x32
      outputs or a 64x64 tile would be less than half useful (33x65 fills 26% of two tiles);
    - 128x128: its tiles are at least 75% useful and there are enough of them for one wave of
      two blocks on every SM;
    - else the mid tile MID_TILE (64x64: 4x the blocks, at most 63 padded rows / columns)."""
    batch, m, k, n = size
    sms = sms or _sms()
    if tiny_fits(size) and (m * n <= 1024 or reference.tile_fill(m, n, 64, 64) < 0.5):
        return "tiny"
    blocks = batch * H.cdiv(m, 128) * H.cdiv(n, 128)
    if reference.tile_fill(m, n, 128, 128) >= BIG_MIN_FILL and blocks >= BIG_MIN_WAVES * 2 * sms:
        return "128x128"
    return "x".join(map(str, MID_TILE[:2])) + f" k{MID_TILE[2]}"


def same_as(version, size):
    if version == "v2" and not tiny_fits(size):
        return "v1"
    if version == "v4":
        return {"tiny": "v2", "128x128": "v3"}.get(v4_plan(size))
    return None


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    batch, m, k, n = d.size
    if version == "v1" or (version == "v2" and not tiny_fits(d.size)):
        K("bmm_naive_v1", "PPPiiii").prepared_call(
            (H.cdiv(n, 16), H.cdiv(m, 16), min(batch, MAX_GRID)), (16, 16, 1),
            d.a, d.b, d.c, batch, m, n, k)
    elif version == "v2":
        launch_tiny(d)
    elif version == "v3":
        launch_sgemm(d)
    else:
        plan = v4_plan(d.size)
        if plan == "tiny":
            launch_tiny(d)
        elif plan == "128x128":
            launch_sgemm(d)
        else:
            launch_tile(d, MID_TILE)


def baselines(d):
    """cuBLAS strided-batched SGEMM (true fp32) and torch.bmm with TF32 off, into the same C.
    Both return C, so the runner checks their answers too."""
    from common.baselines import as_torch, sgemm_strided_batched, torch_fp32

    batch, m, k, n = d.size
    out = d.array("c")

    def cublas():
        sgemm_strided_batched(d.a, d.b, d.c, batch, m, n, k)
        return out

    libs = {CUBLAS: cublas}
    torch = torch_fp32()                 # fp32 on CUDA cores, as cuBLAS above
    if torch is not None:
        ta, tb, tc = as_torch(d.array("a")), as_torch(d.array("b")), as_torch(out)
        libs[TORCH] = lambda: torch.bmm(ta, tb, out=tc)
    return libs


# --- the public function ---------------------------------------------------------------------

def bmm(a, b, version=BEST):
    """C[i] = A[i] @ B[i] on the GPU: A is [batch, M, K], B is [batch, K, N] (real numbers,
    converted to float32), C is [batch, M, N] float32. An empty batch, M or N gives an empty
    result and K = 0 zeros (sums of nothing), both without a launch."""
    version = A.version(version, VERSIONS)
    a = A.floats(a, "a", ndim=3, what="[batch, M, K]")
    b = A.floats(b, "b", ndim=3, what="[batch, K, N]")
    (batch, m, k), (bb, kb, n) = a.shape, b.shape
    if bb != batch:
        raise ValueError(f"a holds {batch} matrices and b {bb}; the batch sizes must agree")
    if kb != k:
        raise ValueError(f"a is [batch, M, K] with K = {k}, so b must be [batch, K, N] with "
                         f"K = {k} rows, but it has {kb}")
    if batch == 0 or m == 0 or n == 0 or k == 0:
        return np.zeros((batch, m, n), np.float32)
    validate_size((batch, m, k, n))
    case = H.Case((batch, m, k, n), inputs={"a": a, "b": b},
                  outputs={"c": ((batch, m, n), np.float32)})
    return H.run(launch, version, case)["c"]


# --- extras: what v4 chose at each bench size -------------------------------------------------

def _plan_row(size):
    batch, m, k, n = size
    plan = v4_plan(size)
    if plan == "tiny":
        name, g, smem, blocks = tiny_plan(size)
        how = f"{name}, {g} matrices a block, {smem // 1024} KB"
        fill = 1.0
    elif plan == "128x128":
        blocks = batch * H.cdiv(m, 128) * H.cdiv(n, 128)
        how = "bmm_sgemm_v3 (128x128)"
        fill = reference.tile_fill(m, n, 128, 128)
    else:
        bm, bn, _ = MID_TILE
        blocks = batch * H.cdiv(m, bm) * H.cdiv(n, bn)
        how = f"bmm_tile_v4 ({plan})"
        fill = reference.tile_fill(m, n, bm, bn)
    return [H.size_str(size), plan, how, blocks, f"{100 * fill:.0f}%",
            f"{reference.intensity(m, k, n):.1f}"]


def extras(report, mode):
    if mode == "check":
        return
    rows = [_plan_row(s) for s in BENCH_SIZES]
    report.section(f"v4's choice per bench size ({_sms()} SMs)", rows,
                   ["size", "plan", "kernel", "blocks", "useful outputs", "FLOP/byte"])
