"""Day 48 driver: split-K and stream-K for GEMMs whose tiles leave SMs idle (sm_90a).

    from days.day48_split_k_stream_k.driver import matmul
    c = matmul(a, b)          # C = A @ B.T; a [M, K], b [N, K] floats, rounded to bf16;
                              # returns float32 values of the bf16 C; version=BEST

The shapes of the day are K-heavy and skinny: M = N = 1024 with K = 65536 is 32 tiles of
128 x 256 for 132 SMs. cuBLAS bf16 (through torch, and cublasGemmEx directly) is timed on the
same device arrays; it has split-K and stream-K kernels of its own (extras lists which one it
picks at each size).
"""
import numpy as np

from common import args as A
from common import harness as H
from common import gpu
from common import hopper_gemm as G
from common import tma
from common.baselines import torch_or_none
# day 45's cases: A and B ~ N(0, 1) rounded to bf16, C = A . B^T exact (reference.py re-exports
# day 45's specification)
from days.day45_wgmma_gemm.driver import baselines, make_case  # noqa: F401  (cuBLAS bf16)

SM90A = True
K = H.Kernels(__file__, sm90a=True)

VERSIONS = {
    "v1": "plain tiling: persistent 128x256 tiles (day 45's structure), one SM a tile",
    "v2": "split-K: S slices of K a tile, fp32 partials [S, M, N], a reduce kernel",
    "v3": "split-K reduced in the GEMM: the last slice adds all S in order (per-tile counter)",
    "v4": "stream-K: equal shares of (tile, k-block) iterations a block, flag fix-up (hybrid)",
    "v5": "ping-pong: a 128x128 tile per consumer warpgroup, epilogues overlap the other's "
          "wgmma; v3's split-K where tiles are few",
}
BEST = "v2"   # fastest at the default size 1024x65536x1024 (H200, 2026-11-26: split-K with a reduce kernel)
SIZE_HELP = "MxKxN for C[M,N] = A[M,K] . B[N,K]^T in bf16, e.g. 1024x65536x1024"
SIZES = {"small": (128, 4096, 256), "default": (1024, 65536, 1024), "large": (2048, 32768, 2048)}
# On 132 SMs: 1x1x1 and K = 8 (one partial k-block); K % 8 != 0 (the pad path: 1, 31, 777);
# one tile with K = 20000 (313 k-blocks: split-K 16 slices, stream-K 78 blocks of 4 iterations
# on one tile: an owner adds 77 partials); few tiles with long K (129x4096x257, 256x8192x512);
# partial last k-blocks (1000 = 15 x 64 + 40, 2056 = 32 x 64 + 8); odd tile rows (1100: 9,
# the cluster candidates' empty half); more tiles than SMs (2304x128x3840: 270 tiles, the
# hybrid's data-parallel wave + stream-K; 1536x512x1536: 72 tiles); odd N (scalar stores)
CHECK_SIZES = [(1, 1, 1), (1, 8, 1), (17, 31, 33), (131, 777, 77), (100, 20000, 90),
               (129, 4096, 257), (256, 8192, 512), (300, 1000, 260), (385, 2056, 770),
               (1100, 520, 600), (2304, 128, 3840), (1536, 512, 1536), (640, 4096, 257)]
AWKWARD = (1000, 50000, 1000)        # ragged M and N, K = 781 x 64 + 16: 32 tiles
BENCH_SIZES = [(1024, 65536, 1024), (512, 16384, 4096), (2048, 32768, 2048), AWKWARD,
               (8192, 3072, 768)]
# split-K / stream-K beat plain tiling where tiles < SMs leave SMs idle (32, 64 and 32 tiles)
# and on the skinny 8192x3072x768 (192 tiles: 1.45 waves); within 10% of cuBLAS on all of
# them (2048x32768x2048 has 128 tiles for 132 SMs: plain tiling already fills the GPU)
FEW_TILES = [(1024, 65536, 1024), (512, 16384, 4096), AWKWARD]
BAR = [{"sizes": FEW_TILES, "over": ("v1", 1.5)},
       {"sizes": [(8192, 3072, 768)], "over": ("v1", 1.1)},
       {"sizes": FEW_TILES + [(2048, 32768, 2048), (8192, 3072, 768)], "vs_baseline": 0.9}]

BM, BN, BK = 128, 256, 64
THREADS = 384
STAGES = 4
SMEM = STAGES * (BM + BN) * BK * 2 + 1024          # wsgemm::smem_bytes<256, 4>()
MAX_SLICES = 16
# the split count's cost model, in units of one k-block's time on one SM: every split unit pays
# FIX for its partial's round trip through L2, and the tile's finisher READ per slice it adds
FIX_KBLOCKS, READ_KBLOCKS = 4, 1
MIN_SK_ITERS = 4                  # stream-K: at least this many iterations a block
MODES = ("hybrid", "pure", "sk1")  # stream-K: data-parallel waves before the stream-K tiles
MAX_ITERS = 2 ** 31 - 1            # the stream-K iteration counts are 32-bit
# v5 (ping-pong) kernels: (tile rows PM, tile columns PN, ring stages, cluster)
PINGPONG = {"gemm_v5": (128, 128, 6, 1), "gemm_v5_64": (64, 256, 5, 1),
            "gemm_v5_c2": (128, 128, 6, 2)}


def pingpong_smem(pm: int, pn: int, stages: int) -> int:
    """wsgemm::pingpong_smem_bytes<pm, pn, stages>(): the ring and 1024 to align it."""
    return stages * (pm + pn) * BK * 2 + 1024


# --- the schedules (host side: the kernel's wsgemm::SplitK / StreamK do the same) ------------

def k_padded(k: int) -> int:
    return H.cdiv(k, 8) * 8


def tile_grid(m: int, k: int, n: int, bm: int = BM, bn: int = BN) -> tuple:
    """(tiles_m, tiles_n, nk): bm-row tiles, bn-column tiles (128 x 256 unless given),
    64-deep k-blocks."""
    return H.cdiv(m, bm), H.cdiv(n, bn), H.cdiv(k_padded(k), BK)


def split_cost(tiles: int, nk: int, sms: int, s: int) -> int:
    """Time of split-K with s slices in k-block units: waves of units x the longest unit, plus
    what a tile's finisher adds (FIX for every split unit, READ per slice)."""
    waves = H.cdiv(tiles * s, sms)
    if s == 1:
        return waves * (nk + 1)
    return waves * (H.cdiv(nk, s) + 1 + FIX_KBLOCKS) + READ_KBLOCKS * s


def split_slices(tiles: int, nk: int, sms: int) -> int:
    """S from tiles vs SMs: the cheapest slice count of split_cost, 1..min(16, nk)."""
    best = 1
    for s in range(2, min(MAX_SLICES, nk) + 1):
        if split_cost(tiles, nk, sms, s) < split_cost(tiles, nk, sms, best):
            best = s
    return best


def stream_k_plan(tiles: int, nk: int, sms: int, mode: str = "hybrid") -> dict:
    """dp_tiles whole tiles first (round-robin), then the rest's iterations over sk_blocks
    blocks. hybrid: all but the last one-to-two waves data-parallel (none below two waves);
    pure: everything stream-K; sk1: only the last partial wave stream-K."""
    waves, rem = divmod(tiles, sms)
    if mode == "pure":
        dp = 0
    elif mode == "sk1":
        dp = waves * sms
    elif mode == "hybrid":
        dp = tiles if rem == 0 else max(0, waves - 1) * sms
    else:
        raise ValueError(f"stream-K mode {mode!r}: one of {', '.join(MODES)}")
    iters = (tiles - dp) * nk
    if iters == 0:
        return {"dp_tiles": tiles, "sk_blocks": 0, "grid": min(tiles, sms)}
    sk_blocks = max(1, min(sms, iters // MIN_SK_ITERS))
    return {"dp_tiles": dp, "sk_blocks": sk_blocks, "grid": sms if dp else sk_blocks}


def stream_k_ranges(tiles: int, nk: int, dp_tiles: int, sk_blocks: int, grid: int):
    """The kernel's StreamKRanges: (blocks, begin) with begin(b) the first stream-K iteration of
    block b: q = iters // blocks each, the first iters % blocks one more."""
    dp = max(0, min(dp_tiles, tiles))
    iters = (tiles - dp) * nk
    blocks = max(1, min(sk_blocks, grid, iters))
    q, r = divmod(iters, blocks)

    def begin(b):
        b = min(b, blocks)
        return b * q + min(b, r)
    return blocks, begin


def stream_k_units(tiles: int, nk: int, dp_tiles: int, sk_blocks: int, grid: int) -> list:
    """Every block's work units (tile, kb0, kb1) in order, as wsgemm::StreamK walks them."""
    dp = max(0, min(dp_tiles, tiles))
    blocks, begin = stream_k_ranges(tiles, nk, dp_tiles, sk_blocks, grid)
    out = []
    for blk in range(grid):
        mine = [(t, 0, nk) for t in range(blk, dp, grid)]
        it, hi = begin(blk), begin(blk + 1)
        while it < hi:
            t, k0 = divmod(it, nk)
            k1 = min(nk, k0 + hi - it)
            mine.append((dp + t, k0, k1))
            it += k1 - k0
        out.append(mine)
    return out


def stream_k_contributors(tiles: int, nk: int, dp_tiles: int, sk_blocks: int, grid: int,
                          blk: int, tile: int) -> list:
    """The blocks whose partials the owner `blk` of `tile` waits for, in the order it adds
    them (wsgemm::StreamKFixup): blk + 1, ... while their ranges start inside the tile."""
    dp = max(0, min(dp_tiles, tiles))
    blocks, begin = stream_k_ranges(tiles, nk, dp_tiles, sk_blocks, grid)
    end = (tile - dp + 1) * nk
    out = []
    for b in range(blk + 1, blocks):
        if begin(b) >= end:
            break
        out.append(b)
    return out


def pingpong_kernel(tile: int = 128, cluster: int = 1) -> str:
    """v5's kernel: 128 x 128 tiles (tile=128; cluster 1 or 2) or 64 x 256 (tile=64)."""
    if tile == 64 and cluster == 1:
        return "gemm_v5_64"
    if tile == 128:
        return "gemm_v5_c2" if cluster == 2 else "gemm_v5"
    raise ValueError(f"no ping-pong kernel for tile={tile}, cluster={cluster}")


def plan_for(version: str, size, sms: int, slices: int | None = None, mode: str = "hybrid",
             cluster: int = 1, tile: int = 128) -> dict:
    """The kernel a version runs at this size and its launch numbers: {"version": the version
    whose kernel runs (v2/v3 with one slice and v4 without stream-K tiles run v1's), "kernel",
    "grid", and "slices" or "dp_tiles"/"sk_blocks"}. v5 always runs its own kernel (S = 1:
    whole tiles); `tile` picks its tile (128: 128 x 128, 64: 64 x 256)."""
    m, k, n = size
    if version == "v5":
        kernel = pingpong_kernel(tile, cluster)
        pm, pn, _, _ = PINGPONG[kernel]
        tiles_m, tiles_n, nk = tile_grid(m, k, n, pm, pn)
        units = H.cdiv(tiles_m, cluster) * tiles_n
        s = max(1, min(slices or split_slices(tiles_m * tiles_n, nk, sms), nk, MAX_SLICES))
        return {"version": "v5", "kernel": kernel, "slices": s,
                "grid": cluster * min(units * s, sms // cluster)}
    tiles_m, tiles_n, nk = tile_grid(m, k, n)
    tiles = tiles_m * tiles_n
    c2 = "_c2" if cluster == 2 else ""
    units = H.cdiv(tiles_m, cluster) * tiles_n          # the schedule's (cluster) tiles
    if version in ("v2", "v3"):
        s = max(1, min(slices or split_slices(tiles, nk, sms), nk, MAX_SLICES))
        if s > 1:
            kernel = "gemm_v2" if version == "v2" else f"gemm_v3{c2}"
            return {"version": version, "kernel": kernel, "slices": s,
                    "grid": cluster * min(units * s, sms // cluster)}
    elif version == "v4":
        p = stream_k_plan(tiles, nk, sms, mode)
        if p["sk_blocks"]:
            return {"version": "v4", "kernel": "gemm_v4", **p}
    elif version != "v1":
        raise ValueError(f"unknown version {version!r}")
    return {"version": "v1", "kernel": f"gemm_v1{c2}", "grid": cluster * min(units, sms // cluster)}


def validate_size(size):
    m, k, n = size
    for name, v in (("M", m), ("K", k), ("N", n)):
        if v >= 2 ** 31 - 256:
            raise ValueError(f"{name} = {v}: coordinates are 32-bit")
    A.fits_int32("A = [M, K]", m * k_padded(k))
    A.fits_int32("B = [N, K]", n * k_padded(k))
    A.fits_int32("C = [M, N]", m * n)
    tiles_m, tiles_n, nk = tile_grid(m, k, n)
    if tiles_m * tiles_n * nk > MAX_ITERS:
        raise ValueError(f"{m}x{k}x{n} has {tiles_m * tiles_n * nk} (tile, k-block) iterations: "
                         f"stream-K counts them in 32 bits (at most {MAX_ITERS})")


# --- launching --------------------------------------------------------------------------------

def _maps(d, a_ptr, b_ptr, kk, cluster, bm=BM, bn=BN):
    """Tensor maps of A (box 64 x bm) and B (box 64 x bn, or 64 x bn/2 when a cluster pair
    fetches half each)."""
    m, _, n = d.size
    return (tma.cached_map(d, a_ptr, "bfloat16", dims=(kk, m), box=(BK, bm)),
            tma.cached_map(d, b_ptr, "bfloat16", dims=(kk, n), box=(BK, bn // cluster)))


def run_plan(d, plan: dict):
    """Enqueue the kernel(s) of a plan (plan_for) on DeviceCase d."""
    m, k, n = d.size
    a_ptr, b_ptr, kk = G.k_major_operands(d, K("pad_k_v0", "PPiii"), np.uint16, align=8)
    kernel = plan["kernel"]
    grid, block = (plan["grid"], 1, 1), (THREADS, 1, 1)
    if kernel in PINGPONG:
        pm, pn, stages, cluster = PINGPONG[kernel]
        amap, bmap = _maps(d, a_ptr, b_ptr, kk, cluster, pm, pn)
        tiles_m, tiles_n, _ = tile_grid(m, k, n, pm, pn)
        s = plan["slices"]
        # one slot a tile and slice (S = 1 writes no partials: a token buffer)
        ws = d.scratch("ws_v5", (s * tiles_m * tiles_n * pm * pn if s > 1 else 1,), np.float32)
        sem = d.scratch("sem_v5", (tiles_m * tiles_n,), np.int32, zero=True)
        shared = pingpong_smem(pm, pn, stages)
        K(kernel, "PPPPPiiii", dynamic_smem=shared).prepared_call(
            grid, block, amap, bmap, d.c, ws, sem, m, n, kk, s, shared_size=shared)
        return
    cluster = 2 if kernel.endswith("_c2") else 1
    amap, bmap = _maps(d, a_ptr, b_ptr, kk, cluster)
    tiles_m, tiles_n, _ = tile_grid(m, k, n)
    if kernel.startswith("gemm_v1"):
        K(kernel, "PPPiii", dynamic_smem=SMEM).prepared_call(
            grid, block, amap, bmap, d.c, m, n, kk, shared_size=SMEM)
    elif kernel == "gemm_v2":
        s = plan["slices"]
        ws = d.scratch("ws_v2", (s * m * n,), np.float32)
        K(kernel, "PPPiiii", dynamic_smem=SMEM).prepared_call(
            grid, block, amap, bmap, ws, m, n, kk, s, shared_size=SMEM)
        n4 = (m * n) // 4 if (m * n) % 4 == 0 else m * n
        K("splitk_reduce_v2", "PPiq").prepared_call(
            (min(H.cdiv(n4, 256), gpu.sm_count() * 8), 1, 1), (256, 1, 1), ws, d.c, s, m * n)
    elif kernel.startswith("gemm_v3"):
        s = plan["slices"]
        ws = d.scratch("ws_v3", (s * tiles_m * tiles_n * BM * BN,), np.float32)
        sem = d.scratch("sem_v3", (tiles_m * tiles_n,), np.int32, zero=True)
        K(kernel, "PPPPPiiii", dynamic_smem=SMEM).prepared_call(
            grid, block, amap, bmap, d.c, ws, sem, m, n, kk, s, shared_size=SMEM)
    elif kernel == "gemm_v4":
        slots = max(plan["sk_blocks"], 1)
        ws = d.scratch("ws_v4", (slots * BM * BN,), np.float32)
        flags = d.scratch("flags_v4", (slots,), np.int32, zero=True)
        K(kernel, "PPPPPiiiii", dynamic_smem=SMEM).prepared_call(
            grid, block, amap, bmap, d.c, ws, flags, m, n, kk, plan["dp_tiles"],
            plan["sk_blocks"], shared_size=SMEM)
    else:
        raise ValueError(f"unknown kernel {kernel!r}")


def launch(version, d):
    A.version(version, VERSIONS)
    run_plan(d, plan_for(version, d.size, gpu.sm_count()))


def same_as(version, size):
    """v2/v3 with one slice and v4 with no stream-K tiles launch v1's kernel."""
    p = plan_for(version, size, gpu.sm_count())
    return p["version"] if p["version"] != version else None


def schedule_rows(sms: int) -> list:
    """One row per benchmark size: how each version cuts the work on `sms` SMs."""
    rows = []
    for size in BENCH_SIZES:
        m, k, n = size
        tiles_m, tiles_n, nk = tile_grid(m, k, n)
        tiles = tiles_m * tiles_n
        s = split_slices(tiles, nk, sms)
        p = stream_k_plan(tiles, nk, sms)
        if p["sk_blocks"]:
            units = stream_k_units(tiles, nk, p["dp_tiles"], p["sk_blocks"], p["grid"])
            shared = len({t for blk in units for (t, k0, k1) in blk if k1 - k0 < nk})
            share = (tiles - p["dp_tiles"]) * nk / p["sk_blocks"]
            sk = [p["dp_tiles"], p["sk_blocks"], f"{share:.1f}", shared]
        else:
            sk = [tiles, 0, "-", 0]
        pp = plan_for("v5", size, sms)
        pm, pn, _, _ = PINGPONG[pp["kernel"]]
        pp_tiles = H.cdiv(m, pm) * H.cdiv(n, pn)
        rows.append([H.size_str(size), tiles, nk, min(tiles, sms), f"{tiles / sms:.2f}", s,
                     tiles * s] + sk + [pp_tiles, pp["slices"],
                                        f"{pp_tiles * pp['slices'] / pp['grid']:.2f}"])
    return rows


SCHEDULE_HEADERS = ["size", "tiles", "k-blocks a tile", "v1 busy SMs", "waves", "S",
                    "split units", "dp tiles", "stream-K blocks", "iterations a block",
                    "shared tiles", "v5 tiles (128x128)", "v5 S", "v5 units a block"]


def extras(report, mode):
    """How every version cuts the benchmark shapes on this GPU, and which kernels cuBLAS runs
    for them (its kernel names tell split-K / stream-K and the tile)."""
    if mode != "bench":
        return
    sms = gpu.sm_count()
    report.section(f"Schedules on {sms} SMs (128x256 tiles)", schedule_rows(sms), SCHEDULE_HEADERS)
    torch = torch_or_none()
    if torch is None:
        return
    from common.baselines import kernels_launched

    rows = []
    for size in BENCH_SIZES:
        m, k, n = size
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        torch.matmul(a, b.t())                 # cuBLAS picks (and caches) its algorithm first
        for name, us in kernels_launched(lambda: torch.matmul(a, b.t())):
            rows.append([H.size_str(size), name, f"{us:.1f}"])
        del a, b
    report.section("cuBLAS kernels (torch.matmul, bf16)", rows, ["size", "kernel", "us"])


# --- public function --------------------------------------------------------------------------

def matmul(a, b, version: str = BEST) -> np.ndarray:
    """C = A @ B.T on the tensor cores: a [M, K], b [N, K] (float arrays, rounded to bf16 to
    nearest-even), fp32 accumulation; returns the bf16 C as float32 [M, N]."""
    return G.bf16_nt_matmul(a, b, A.version(version, VERSIONS), launch, validate_size)
