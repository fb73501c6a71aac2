"""Day 60 driver: a 3x3 convolution (stride 1, padding 1) as an implicit GEMM on tensor cores,
bf16 channels-last, against cuDNN (torch, bf16, channels_last, cudnn.benchmark) on the same
device memory.

    from days.day60_implicit_gemm_conv.driver import conv2d
    y = conv2d(x, w)          # x [N, H, W, C], w [K, 3, 3, C] floats, rounded to bf16;
                              # returns the bf16 y [N, H, W, K] as float32; version=BEST

A size is (N, H, W, C, K): batch, height, width, input channels, output channels.
"""
import numpy as np

from common import args as A
from common import bf16
from common import harness as H
from common import tma
from common.baselines import as_torch, torch_or_none

from . import reference

SM90A = True
K = H.Kernels(__file__, sm90a=True)

VERSIONS = {
    "v1": "direct: an output a thread, 16-byte loads of x and w, fp32 on CUDA cores",
    "v2": "implicit GEMM: mma.sync m16n8k16 + 3-stage cp.async gathers (zero-fill = padding)",
    "v3": "TMA 4-D box per tap (OOB zeros = padding) + wgmma, warp specialised, 8x16 px x 128",
    "v4": "v3 persistent, 2 wgmma groups in flight, tile/BN/resident filter swept per layer",
    "v5": "v4 with one TMA box (the tile + 2 halo rows) serving the 3 taps of a filter column",
}
BEST = "v5"   # H200, 2026-11-26: 1.19x v4 on the 56x56 and 7x7 layers, tied on 28x28 and 14x14
SIZE_HELP = ("NxHxWxCxK: batch x height x width x in-channels (a multiple of 8) x out-channels, "
             "3x3 filter, stride 1, padding 1, e.g. 32x56x56x64x64")

# ResNet-50's stride-1 3x3 layers (conv2_x .. conv5_x) at batch 32
L56 = (32, 56, 56, 64, 64)
L28 = (32, 28, 28, 128, 128)
L14 = (32, 14, 14, 256, 256)
L7 = (32, 7, 7, 512, 512)
RESNET = [L56, L28, L14, L7]
AWKWARD = (3, 57, 31, 72, 96)   # odd sides, C = 64 + 8 (a partial channel block), K = 96
SIZES = {"small": (2, 13, 7, 64, 64), "default": L56, "large": L28}
# 1x1 images (8 of 9 taps on the padding) with C = 8 and K = 1 (odd K: scalar stores); W = 1 and
# H = 1; C < 64 (16, 24, 32: the box's channel block mostly zeros), C = 72 (a second, partial
# channel block), C = 512 (8 blocks); K odd (33), K just past a tile (130, 300), K < 64;
# sides past a tile (13, 17, 31, 33, 58, 130: W > 128 splits the v4 box's columns); 7x7 with an
# odd batch (v4 boxes hold 2 images: the last box half empty); a whole 56x56 layer at batch 1
CHECK_SIZES = [
    (1, 1, 1, 8, 1), (1, 3, 3, 64, 64), (2, 7, 7, 64, 128), (1, 13, 13, 128, 64),
    (2, 3, 13, 72, 40), (1, 1, 7, 16, 3), (2, 13, 1, 8, 130), (1, 9, 17, 24, 33),
    (3, 16, 16, 64, 256), (1, 31, 33, 32, 64), (2, 7, 7, 512, 64), (1, 58, 3, 8, 8),
    (1, 2, 130, 8, 16), (5, 7, 7, 128, 96), (1, 5, 5, 64, 300), (1, 56, 56, 64, 64),
]
BENCH_SIZES = RESNET + [AWKWARD]

V2_BM, V2_BN, V2_STAGES = 128, 128, 3
V2_SMEM = V2_STAGES * 2 * 128 * 128 + 128
V3_TILE = (16, 8, 1)                                 # BQ, BP, BNI: 8 rows x 16 columns
V3_SMEM = 4 * (128 * 128 + 128 * 128) + 1024         # 4 stages of A 128 x 64 + B 128 x 64
MAX_GRID_Y = 65535

# v4's kernels (conv_v4_NAME): name -> (BN, consumer warpgroups, stages, blocks an SM)
V4_VARIANTS = {
    "n64": (64, 2, 6, 1), "n64x2": (64, 2, 4, 2), "n128": (128, 2, 4, 1),
    "n256": (256, 2, 4, 1), "c1n128": (128, 1, 6, 1), "c1n256": (256, 1, 4, 1),
    "r64": (64, 2, 8, 1),
}
# v5's kernels (conv_v5_NAME), the same fields: one box (the tile's rows + the halo's two)
# serves the three taps of a filter column
V5_VARIANTS = {
    "t3r64": (64, 2, 5, 1), "t3n64": (64, 2, 4, 1), "t3n128": (128, 2, 3, 1),
    "t3c1n128": (128, 1, 3, 1),
}
VARIANTS = {**V4_VARIANTS, **V5_VARIANTS}
# v5's variants' A rows a stage (kernel.cu's A_ROWS): the box, (BP + 2) x BQ pixels, and the
# last tap's rows, 2 BQ + 64 consumers, must fit
T3_ROWS = {"t3r64": 240, "t3n64": 240, "t3n128": 192, "t3c1n128": 80}
# variants whose stages carry A alone, the whole filter resident in shared memory (K <= BN)
RESIDENT_B = {"r64", "t3r64"}
MAX_SMEM = 227 * 1024
# variants not yet timed on a GPU: plan() leaves them out until a sweep says they win
UNSWEPT = set()
# each version's variant at each swept shape (the size without the batch); other shapes: the
# cost model of plan(). .notes/day60_sweep.py times every variant at these shapes.
# H200 sweeps of 2026-11-26 (.notes/day60_sweep_results.md, rounds 1 and 2)
PICK = {
    "v4": {L56[1:]: "r64", L28[1:]: "n128", L14[1:]: "n128", L7[1:]: "n64", AWKWARD[1:]: "n128"},
    "v5": {L56[1:]: "t3n64", L28[1:]: "t3n128", L14[1:]: "t3n128", L7[1:]: "t3c1n128",
           AWKWARD[1:]: "t3n64"},
}
# cost()'s constants, fitted to the round-2 sweep (every variant of v4 and v5 at five shapes):
# a one-consumer block's wgmma run at 0.9 of the rate of two (one warpgroup cannot cover its
# own waits), and a tile costs FIXED_BYTES more (the epilogue, the drained wgmma pipeline)
ONE_CONSUMER_EFF = 0.9
FIXED_BYTES = 50_000


def validate_size(size):
    n, h, w, c, k = (int(v) for v in size)
    if min(n, h, w, c, k) < 1:
        raise ValueError("N, H, W, C and K must be at least 1")
    if c % 8:
        raise ValueError(f"C = {c}: the channels must be a multiple of 8 (a pixel's channels fill "
                         "whole 16-byte chunks, as cp.async and the tensor maps need); conv2d() "
                         "pads other C with zero channels")
    if H.cdiv(k, V2_BN) > MAX_GRID_Y:
        raise ValueError(f"K = {k}: at most {MAX_GRID_Y * V2_BN} output channels (v2's grid "
                         "holds K / 128 tiles on gridDim.y)")
    A.fits_int32("x = [N, H, W, C]", n * h * w * c)
    A.fits_int32("y = [N, H, W, K]", n * h * w * k)
    A.fits_int32("w = [K, 3, 3, C]", k * 9 * c)


def make_case(size, rng):
    """x ~ N(0, 1) and w ~ N(0, 1/(9 C)) (outputs O(1), as a trained layer's), both rounded to
    bf16."""
    validate_size(size)
    n, h, w, c, k = size
    x = bf16.random_bits(rng, (n, h, w, c))
    wt = bf16.random_bits(rng, (k, 3, 3, c), scale=1.0 / np.sqrt(9 * c))
    return H.Case(size, inputs={"x": x, "w": wt}, outputs={"y": ((n, h, w, k), np.uint16)},
                  reference=lambda: {"y": reference.conv3x3(x, wt)},
                  decode={"y": bf16.from_bits}, tol={"y": reference.TOL},
                  flops=reference.flops(n, h, w, c, k), unit="bf16")


# --- v4's tile ----------------------------------------------------------------------------------

def tile_shape(n, h, w, rows) -> tuple:
    """(BQ, BP, BNI): a box of BNI images x BP rows x BQ columns with at most `rows` pixels,
    whole image rows when they fit (no box column past the image), the tiles of each dimension
    as even as possible (28 rows in 7 boxes of 4, not 3 of 9 + 1)."""
    if w >= rows:
        return H.cdiv(w, H.cdiv(w, rows)), 1, 1
    bp = min(h, rows // w)
    bp = H.cdiv(h, H.cdiv(h, bp))
    bni = 1
    if bp == h:
        bni = min(n, rows // (w * h))
        bni = H.cdiv(n, H.cdiv(n, bni))
    return w, bp, bni


def tile_t3(n, h, w, rows, a_rows) -> tuple:
    """(BQ, BP, 1): the tile of a t3 variant. BQ a multiple of 8 (each tap's A tile starts on
    the swizzle's 1024-byte grid: r BQ rows), at most (a_rows - rows) / 2 (the last tap's rows
    inside the stage) and rows; BP rows with (BP + 2) BQ <= a_rows (the box with its halo fits);
    one image a box (a tap's row shift must not reach the next image)."""
    cap = min(rows, (a_rows - rows) // 2) // 8 * 8
    bq = min(H.cdiv(w, 8) * 8, cap)
    bq = H.cdiv(H.cdiv(w, H.cdiv(w, bq)), 8) * 8          # columns split evenly, rounded to 8
    bp = min(h, rows // bq, a_rows // bq - 2)
    bp = H.cdiv(h, H.cdiv(h, bp))
    return bq, bp, 1


def version_of(variant) -> str:
    return "v5" if variant in V5_VARIANTS else "v4"


def tile_of(variant, n, h, w) -> tuple:
    """The tile (BQ, BP, BNI) a v4 or v5 variant runs at this image size."""
    rows = 64 * VARIANTS[variant][1]
    if variant in T3_ROWS:
        return tile_t3(n, h, w, rows, T3_ROWS[variant])
    return tile_shape(n, h, w, rows)


def units_of(size, tile, bn) -> int:
    n, h, w, c, k = size
    bq, bp, bni = tile
    return H.cdiv(w, bq) * H.cdiv(h, bp) * H.cdiv(n, bni) * H.cdiv(k, bn)


def smem_of(variant, c=64) -> int:
    """Dynamic shared memory of a v4 / v5 variant (+1 KB to align the tiles to 1024 bytes); a
    resident filter takes 9 CB tiles of BN x 128 bytes after the ring."""
    bn, cons, stages, _ = VARIANTS[variant]
    a, b = 64 * cons * 128, bn * 128
    taps = 1
    if variant in T3_ROWS:
        a, taps = T3_ROWS[variant] * 128, 3               # a stage: one box, three taps' B
    if variant in RESIDENT_B:
        return stages * a + 9 * H.cdiv(c, 64) * b + 1024
    return stages * (a + taps * b) + 1024


def t3_tile_problem(variant, tile):
    """Why a v5 variant cannot run this tile (None: it can): one image a box, BQ a multiple of
    8, the box with its halo and the last tap's rows inside the stage, the tile's pixels inside
    the consumers' rows."""
    bq, bp, bni = tile
    rows, cons = T3_ROWS[variant], VARIANTS[variant][1]
    if (bni != 1 or bq % 8 or bp < 1 or (bp + 2) * bq > rows or 2 * bq + 64 * cons > rows
            or bp * bq > 64 * cons or bq > 256 or bp + 2 > 256):
        return (f"one image, BQ a multiple of 8, (BP + 2) BQ and 2 BQ + {64 * cons} at most "
                f"{rows}, BP BQ at most {64 * cons}")
    return None


def eligible(variant, size) -> bool:
    """A resident-filter variant needs K <= BN (one channel tile) and the filter to fit; a v5
    variant needs a tile it can run (tile_t3 finds one for every image size: the test says so)."""
    n, h, w, c, k = size
    if variant in V5_VARIANTS and t3_tile_problem(variant, tile_of(variant, n, h, w)):
        return False
    if variant in RESIDENT_B:
        return k <= VARIANTS[variant][0] and smem_of(variant, c) <= MAX_SMEM
    return True


def cost(size, variant, sms) -> float:
    """A rough time of a v4 or v5 variant, in bytes an SM moves: rounds of the persistent grid
    x (blocks an SM) x a tile's bytes copied from L2 into shared memory (its A boxes: 9 of BP
    rows a channel block for v4, 3 of BP + 2 rows for v5; and its B tiles unless the filter is
    resident) + its MMA work (64 consumers x BN, slower with one consumer) + a fixed cost a
    tile. Fitted to the H200 sweeps to pick their winners; a fit, not a measurement of where the
    time goes (the resident-filter variants, which copy no B, ran no faster than their twins)."""
    bn, cons, _, bps = VARIANTS[variant]
    bq, bp, bni = tile = tile_of(variant, *size[:3])
    rounds = H.cdiv(units_of(size, tile, bn), sms * bps)
    cb = H.cdiv(size[3], 64)
    b = 0 if variant in RESIDENT_B else bn * 128
    if variant in T3_ROWS:
        copies = 3 * cb * (bq * (bp + 2) * bni * 128 + 3 * b)
    else:
        copies = 9 * cb * (bq * bp * bni * 128 + b)
    mma = 9 * cb * 64 * cons * bn / (1.0 if cons == 2 else ONE_CONSUMER_EFF)
    return rounds * bps * (copies + mma + FIXED_BYTES)


def plan(size, sms=None, version="v5") -> tuple:
    """(variant, tile) of v4 or v5 for a size: the swept choice at the swept shapes (PICK),
    else the cheapest by cost(): for v4 among v4's variants; for v5 among v5's variants and
    v4's choice, so that where v4's kernel is the cheaper (many small images: a v5 tile holds
    one image) v5 runs v4's kernel (same_as says so)."""
    if version not in PICK:
        raise ValueError(f"plan() is for v4 and v5, not {version!r}")
    n, h, w, c, k = size
    pick = PICK[version].get(tuple(size[1:]))
    if pick:
        return pick, tile_of(pick, n, h, w)
    if sms is None:
        from common import gpu

        sms = gpu.sm_count()
    pool = [v for v in V4_VARIANTS if eligible(v, size) and v not in UNSWEPT]
    if version == "v5":
        pool += [v for v in V5_VARIANTS if eligible(v, size) and v not in UNSWEPT]
    variant = min(pool, key=lambda v: cost(size, v, sms))
    return variant, tile_of(variant, n, h, w)


def same_as(version, size, sms=None):
    """v5 at a shape where plan() gives v4's kernel: "v4" (the table shows "= v4")."""
    if version == "v5" and version_of(plan(size, sms, "v5")[0]) == "v4":
        return "v4"
    return None


# --- launching ----------------------------------------------------------------------------------

def _maps(d, tile, bn):
    """Tensor maps: x as a 4-D tensor (C, W, H, N innermost first) with the box (64 channels,
    BQ, BP, BNI), w as 3-D (C, 9 taps, K) with the box (64, 1, BN); 128-byte swizzle."""
    n, h, w, c, k = d.size
    bq, bp, bni = tile
    return (tma.cached_map(d, d.x, "bfloat16", dims=(c, w, h, n), box=(64, bq, bp, bni)),
            tma.cached_map(d, d.w, "bfloat16", dims=(c, 9, k), box=(64, 1, bn)))


def launch_ws(d, kernel, bn, cons, smem, tile, grid_blocks=None, halo=0):
    """One launch of a warp-specialised kernel (v3: a block a tile; v4, v5: grid_blocks
    blocks); halo 2: the x box holds the tile's rows and two more (v5)."""
    n, h, w, c, k = d.size
    units = units_of(d.size, tile, bn)
    grid = units if grid_blocks is None else min(units, grid_blocks)
    bq, bp, bni = tile
    xmap, wmap = _maps(d, (bq, bp + halo, bni), bn)
    fn = K(kernel, "PPP" + "i" * 8, dynamic_smem=smem)
    fn.prepared_call((grid, 1, 1), (128 * (1 + cons), 1, 1), xmap, wmap, d.y, n, h, w, c, k,
                     *tile, shared_size=smem)


def launch_variant(d, variant, tile=None):
    """One launch of the v4 or v5 variant `variant` (kernel conv_v4_NAME / conv_v5_NAME), with
    its tile_of() tile unless `tile` is given (the sweep tries v3's box)."""
    from common import gpu

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")
    if variant in RESIDENT_B and not (d.size[4] <= VARIANTS[variant][0]
                                      and smem_of(variant, d.size[3]) <= MAX_SMEM):
        raise ValueError(f"variant {variant} cannot take {H.size_str(d.size)} (its filter "
                         "must be resident: K <= 64 and C <= 64)")
    bn, cons, stages, bps = VARIANTS[variant]
    tile = tile or tile_of(variant, *d.size[:3])
    if variant in V5_VARIANTS:
        why = t3_tile_problem(variant, tile)
        if why:
            raise ValueError(f"v5 variant {variant} cannot take the tile {tile} ({why})")
    launch_ws(d, f"conv_{version_of(variant)}_{variant}", bn, cons, smem_of(variant, d.size[3]),
              tile, gpu.sm_count() * bps, halo=2 if variant in V5_VARIANTS else 0)


def launch_planned(d, version):
    """v4 or v5: the variant and tile plan() gives this size (v5 may run a v4 kernel)."""
    variant, tile = plan(d.size, version=version)
    launch_variant(d, variant, tile)


def launch(version, d):
    version = A.version(version, VERSIONS)
    n, h, w, c, k = d.size
    if version == "v1":
        K("conv_v1", "PPPiiiii").prepared_call((H.cdiv(n * h * w * k, 256), 1, 1), (256, 1, 1),
                                                d.x, d.w, d.y, n, h, w, c, k)
    elif version == "v2":
        fn = K("conv_v2", "PPPiiiii", dynamic_smem=V2_SMEM)
        fn.prepared_call((H.cdiv(n * h * w, V2_BM), H.cdiv(k, V2_BN), 1), (256, 1, 1),
                         d.x, d.w, d.y, n, h, w, c, k, shared_size=V2_SMEM)
    elif version == "v3":
        launch_ws(d, "conv_v3", 128, 2, V3_SMEM, V3_TILE)
    else:
        launch_planned(d, version)


# --- the library --------------------------------------------------------------------------------

CUDNN = "cuDNN (torch bf16, channels_last)"


def torch_views(d):
    """x and w as torch bf16 tensors in NCHW order over the same NHWC / KRSC memory: the
    permuted views are exactly torch's channels_last layout, so no copy is made."""
    import torch

    x = as_torch(d.array("x")).view(torch.bfloat16).permute(0, 3, 1, 2)
    w = as_torch(d.array("w")).view(torch.bfloat16).permute(0, 3, 1, 2)
    return x, w


def baselines(d):
    """torch.nn.functional.conv2d in bf16 on channels_last views of the case's own x and w, with
    cudnn.benchmark on (cuDNN times its algorithms on the first call of a shape and keeps the
    fastest; the runner's first, untimed call is that one). Returns y as [N, H, W, K]."""
    torch = torch_or_none()
    if torch is None:
        return {}
    import torch.nn.functional as F

    x, w = torch_views(d)
    cudnn = torch.backends.cudnn

    def conv():
        prev = cudnn.benchmark
        cudnn.benchmark = True
        try:
            return F.conv2d(x, w, padding=1).permute(0, 2, 3, 1)
        finally:
            cudnn.benchmark = prev
    return {CUDNN: conv}


# --- extras: what cuDNN runs; batch 1 and 8 -------------------------------------------------------

def layer_name(size) -> str:
    n, h, w, c, k = size
    return f"{h}x{w} C={c} K={k}"


def extras(report, mode):
    if mode != "bench":
        return
    torch = torch_or_none()
    if torch is None:
        return
    from common.baselines import kernels_launched
    from common.runner import check_and_time
    from common.timing import time_fn

    rng = np.random.default_rng(60)
    kern_rows, batch_rows = [], []
    for layer in RESNET:
        for b in (1, 8, 32):
            size = (b,) + layer[1:]
            case = make_case(size, rng)
            d = H.DeviceCase(case)
            fn = baselines(d)[CUDNN]
            fn()                                   # cudnn.benchmark picks its kernel here
            if b == 32:
                names = kernels_launched(fn)
                kern_rows.append([layer_name(layer), "; ".join(f"{nm[:100]} ({us:.1f} us)"
                                                              for nm, us in names)])
                continue
            row = check_and_time(report, f"{BEST} at {H.size_str(size)}",
                                 lambda dd: launch(BEST, dd), case, d)
            t = time_fn(fn)
            ours = row.get("median_ms")
            batch_rows.append([f"{layer_name(layer)} N={b}", f"{ours:.4f}" if ours else "-",
                               f"{t.median_ms:.4f}",
                               f"{t.median_ms / ours:.2f}x" if ours else "-",
                               "ok" if row["ok"] else "WRONG"])
            del d
    report.section("cuDNN kernels (torch bf16, channels_last, benchmark) at batch 32", kern_rows,
                   ["layer", "kernels (time of one call)"])
    report.section(f"Batch 1 and 8: {BEST} against cuDNN", batch_rows,
                   ["layer", f"{BEST} ms", "cuDNN ms", "speed vs cuDNN", "check"])


# --- public function ------------------------------------------------------------------------------

def conv2d(x, w, version: str = BEST) -> np.ndarray:
    """y = conv3x3(x, w), stride 1, zero padding 1, on the tensor cores: x [N, H, W, C] (channels
    last), w [K, 3, 3, C] (float arrays, rounded to bf16 to nearest-even), fp32 accumulation;
    returns the bf16 y [N, H, W, K] as float32. C need not be a multiple of 8 (zero channels are
    appended on the host: they add nothing). An empty dimension gives zeros without a launch."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=4, what="[N, H, W, C] (channels last)")
    w = A.floats(w, "w", ndim=4, what="[K, 3, 3, C]")
    n, h, wd, c = x.shape
    k = w.shape[0]
    if w.shape[1:3] != (3, 3):
        raise ValueError(f"w must hold 3x3 filters, [K, 3, 3, C]; got shape {w.shape}")
    if w.shape[3] != c:
        raise ValueError(f"w has {w.shape[3]} input channels (its last axis) and x has {c}: they "
                         "must agree")
    if min(n, h, wd, c, k) == 0:
        return np.zeros((n, h, wd, k), np.float32)
    c8 = H.cdiv(c, 8) * 8
    if c8 != c:
        x = np.concatenate([x, np.zeros((n, h, wd, c8 - c), np.float32)], axis=3)
        w = np.concatenate([w, np.zeros((k, 3, 3, c8 - c), np.float32)], axis=3)
    size = (n, h, wd, c8, k)
    validate_size(size)
    case = H.Case(size, inputs={"x": bf16.to_bits(x), "w": bf16.to_bits(w)},
                  outputs={"y": ((n, h, wd, k), np.uint16)}, decode={"y": bf16.from_bits})
    return H.run(launch, version, case)["y"]


# CURRICULUM.md / issue 13: >= 80% of cuDNN (torch, bf16, channels-last) on ResNet-50's 3x3 layers
BAR = [{"sizes": RESNET, "vs_baseline": 0.8}]
