"""Day 31 driver: 2D convolution (NCHW, fp32, padding, stride, bias) in six versions, against
cuDNN through torch.

    from days.day31_conv2d_tiled.driver import conv2d
    y = conv2d(x, w, b, stride=1, padding=1)   # x [N, C, H, W], w [K, C, R, R], b [K] or None
                                               # -> y [N, K, Ho, Wo] float32; version=BEST

A size is (N, C, H, W, K, R, S, P): batch, input channels, image height and width, output
channels, the filter's side R (square R x R filters), stride S, zero padding P.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference

KER = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: an output a thread, x and w from global memory",
    "v2": "filter and bias in __constant__ memory (sliced to fit 64 KB)",
    "v3": "v2 + shared-memory input tile with halo (32x8 outputs a block)",
    "v4": "v3 + 8 output channels a thread (register blocking over K)",
    "v5": "filter chunk in shared memory too; TM pixels x TN channels a thread",
    "v6": "v5 + cp.async double-buffered input and filter chunks",
}
BEST = "v6"   # fastest at every sweep layer (H200, 2026-11-26, .notes/day31_sweep_results.md)
SIZE_HELP = ("NxCxHxWxKxRxSxP: batch x in-channels x height x width x out-channels x filter side "
             "R (R x R) x stride x padding, e.g. 32x64x56x56x64x3x1x1 (padding 0 only through "
             "conv2d(); the command line takes positive numbers)")

MNIST1 = (64, 1, 28, 28, 8, 3, 1, 1)       # day 70's CNN, first conv: 1 -> 8 channels, 28x28
MNIST2 = (64, 8, 14, 14, 16, 3, 1, 1)      # its second conv, after a 2x2 max-pool: 8 -> 16, 14x14
RESNET = (32, 64, 56, 56, 64, 3, 1, 1)     # a ResNet-18/34 stage-1 3x3 layer, batch 32
STEM = (16, 3, 223, 223, 64, 7, 2, 3)      # the awkward one: a ResNet stem (7x7, stride 2, pad 3)
                                           # on an odd 223x223 RGB image, C = 3 < the chunk of 4
SIZES = {"small": (2, 3, 27, 31, 5, 3, 1, 1), "default": RESNET,
         "large": (32, 128, 28, 28, 128, 3, 1, 1)}
# 1x1 images with 1x1 and 3x3 filters; odd sizes (27x31, 33x17) with C = 3, 5; stride 2 with
# pad 0 and 2; 5x5 and 7x7 filters; pad 2 on a 3x3 filter and pad 3 on a 3x3 filter (corner
# windows wholly in the padding: the bias alone); even filters (2x2, 4x4) and stride 3 (v5/v6 run v4 there); the day's three layers
# at a small batch and ragged sides (each of v5/v6's tiles: m1 for K <= 8, m2 for K <= 16, r for
# K >= 48, gen otherwise); K = 33 (past the 32-channel tile), K = 1100 (past the 1024 floats of
# c_b: two bias slices), C = 1712 (C*R*R = 15408 > 15360: v2-v4 also slice the input channels
# and add into y).
CHECK_SIZES = [
    (1, 1, 1, 1, 1, 1, 1, 0), (1, 1, 1, 1, 1, 3, 1, 1), (3, 2, 1, 1, 4, 3, 2, 1),
    (2, 3, 27, 31, 5, 3, 1, 1), (3, 3, 27, 31, 7, 3, 2, 0), (2, 4, 31, 33, 9, 5, 1, 2),
    (2, 5, 33, 17, 6, 5, 2, 2), (1, 3, 23, 21, 9, 7, 2, 3), (1, 2, 13, 11, 3, 7, 1, 3),
    (1, 2, 5, 6, 3, 3, 1, 2), (1, 2, 4, 3, 3, 3, 1, 3), (2, 3, 10, 11, 4, 2, 1, 0), (1, 2, 9, 8, 3, 4, 2, 1),
    (1, 2, 20, 19, 3, 3, 3, 1), (2, 16, 7, 9, 33, 1, 1, 0), (1, 5, 8, 9, 7, 1, 2, 0),
    (3, 1, 28, 28, 8, 3, 1, 1), (2, 1, 27, 30, 5, 3, 1, 1),
    (2, 8, 14, 14, 16, 3, 1, 1), (3, 7, 13, 15, 11, 3, 1, 1),
    (1, 64, 9, 9, 64, 3, 1, 1), (2, 19, 58, 57, 50, 3, 1, 1), (1, 9, 11, 10, 33, 3, 1, 1),
    (1, 1, 3, 3, 1100, 1, 1, 0), (1, 1712, 4, 5, 3, 3, 1, 1),
]
BENCH_SIZES = [MNIST1, MNIST2, RESNET, STEM]

MAX_R = 15            # v3/v4's shared tile (7S + R) x (31S + R) stays under 48 KB
MAX_S = 4
MAX_GRID_YZ = 65535   # K and N go on gridDim.y / gridDim.z
RIDGE = 16            # FLOPs a byte above which a layer is judged by TFLOP/s, below by GB/s: about
                      # the fp32 ridge point of an H100/H200 (~60 TFLOP/s over 3.4-4.8 TB/s)
CONST_W_FLOATS = 15360   # kernel.cu's c_w and c_b: 60 KB + 4 KB of constant memory
CONST_B_FLOATS = 1024
TILE_X, TILE_Y = 32, 8   # v3/v4's block of outputs
V4_TN = 8


def out_hw(size):
    n, c, h, w, k, r, s, p = size
    return reference.out_size(h, r, s, p), reference.out_size(w, r, s, p)


def validate_size(size):
    n, c, h, w, k, r, s, p = (int(v) for v in size)
    if min(n, c, h, w, k, r, s) < 1 or p < 0:
        raise ValueError("N, C, H, W, K, R and S must be at least 1 and the padding P at least 0")
    if r > MAX_R:
        raise ValueError(f"R = {r}: filters up to {MAX_R}x{MAX_R} (v3/v4 stage a (7S+R) x (31S+R) "
                         "input tile in 48 KB of shared memory)")
    if s > MAX_S:
        raise ValueError(f"stride {s}: at most {MAX_S}")
    if h + 2 * p < r or w + 2 * p < r:
        raise ValueError(f"the {r}x{r} filter does not fit the {h}x{w} image padded by {p}: "
                         "no output")
    if n > MAX_GRID_YZ or k > MAX_GRID_YZ:
        raise ValueError(f"N = {n}, K = {k}: at most {MAX_GRID_YZ} each (gridDim.z holds the "
                         "images, gridDim.y the output channels)")
    ho, wo = out_hw(size)
    A.fits_int32("x = [N, C, H, W]", n * c * h * w)
    A.fits_int32("x padded", n * c * (h + 2 * p) * (w + 2 * p))
    A.fits_int32("y = [N, K, Ho, Wo]", n * k * ho * wo)
    A.fits_int32("w = [K, C, R, R]", k * c * r * r)


def make_case(size, rng):
    """x ~ N(0, 1); w scaled by 1/sqrt(C R^2) so outputs are O(1) (as a trained layer's);
    b ~ N(0, 0.1^2)."""
    validate_size(size)
    n, c, h, w, k, r, s, p = size
    f = np.float32
    x = rng.standard_normal((n, c, h, w)).astype(f)
    wt = (rng.standard_normal((k, c, r, r)) / np.sqrt(c * r * r)).astype(f)
    b = (0.1 * rng.standard_normal(k)).astype(f)
    ho, wo = out_hw(size)
    flops = reference.flops(*size)
    moved, read = reference.nbytes(*size)
    compute = flops >= RIDGE * moved
    return H.Case(size, inputs={"x": x, "w": wt, "b": b}, outputs={"y": ((n, k, ho, wo), f)},
                  reference=lambda: {"y": reference.conv2d(x, wt, b, s, p)},
                  flops=flops if compute else 0, bytes=0 if compute else moved,
                  read_bytes=None if compute else read, unit="fp32")


# --- v2-v4: the filter in constant memory, a slice at a time ------------------------------------

def constant_slices(c, k, rr) -> list[tuple[int, int, int, int]]:
    """(k0, kc, c0, cc) of each launch: the filter w[k0:k0+kc, c0:c0+cc] must fit c_w
    (kc * cc * R^2 <= 15360 floats) and its bias c_b (kc <= 1024). Input channels are cut only
    when one output channel's whole filter does not fit; slices are as even as possible. For
    each k-slice the c0 = 0 launch comes first (it writes bias + its sum; later ones add)."""
    cc = min(c, CONST_W_FLOATS // rr)
    cc = H.cdiv(c, H.cdiv(c, cc))
    kc = min(k, CONST_W_FLOATS // (cc * rr), CONST_B_FLOATS)
    kc = H.cdiv(k, H.cdiv(k, kc))
    return [(k0, min(kc, k - k0), c0, min(cc, c - c0))
            for k0 in range(0, k, kc) for c0 in range(0, c, cc)]


def _copy_slice(d, k0, kc, c0, cc):
    """The slice's filter (and, for c0 = 0, bias) into c_w / c_b: device-to-device copies on
    the default stream, so they run after the previous launch and before the next."""
    from common.gpu import driver

    cuda = driver()
    _, c, _, _, _, r, _, _ = d.size
    rr = r * r
    cw, _ = KER.module.get_global("c_w")
    cb, _ = KER.module.get_global("c_b")
    wp = int(d.w)
    if cc == c:   # whole filters of kc channels: one contiguous run
        cuda.memcpy_dtod_async(cw, wp + 4 * k0 * c * rr, 4 * kc * c * rr)
    else:         # kc runs of cc*R^2 floats, c*R^2 apart
        for j in range(kc):
            cuda.memcpy_dtod_async(int(cw) + 4 * j * cc * rr, wp + 4 * ((k0 + j) * c + c0) * rr,
                                   4 * cc * rr)
    if c0 == 0:
        cuda.memcpy_dtod_async(cb, int(d.b) + 4 * k0, 4 * kc)


def _launch_constant(version, d):
    n, c, h, w, k, r, s, p = d.size
    ho, wo = out_hw(d.size)
    ih, iw = (TILE_Y - 1) * s + r, (TILE_X - 1) * s + r
    tiles = H.cdiv(ho, TILE_Y) * H.cdiv(wo, TILE_X)
    for k0, kc, c0, cc in constant_slices(c, k, r * r):
        _copy_slice(d, k0, kc, c0, cc)
        common = (d.x, d.y, c, h, w, k, r, s, p, ho, wo, k0, c0, cc)
        if version == "v2":
            KER("conv2d_v2", "PP" + "i" * 12).prepared_call(
                (H.cdiv(ho * wo, 256), kc, n), (256, 1, 1), *common)
        elif version == "v3":
            KER("conv2d_v3", "PP" + "i" * 12).prepared_call(
                (tiles, kc, n), (TILE_X, TILE_Y, 1), *common, shared_size=4 * ih * iw)
        else:
            KER("conv2d_v4", "PP" + "i" * 13).prepared_call(
                (tiles, H.cdiv(kc, V4_TN), n), (TILE_X, TILE_Y, 1), *common, kc,
                shared_size=4 * ih * iw)


# --- v5/v6: register-blocked tiles -----------------------------------------------------------

# name: (TM, TN, BX, BY, BZ, CB), as kernel.cu's GEN and BOTH lines (a test compares them)
TILES = {
    "gen": (4, 8, 8, 8, 4, 4),
    "m1a": (4, 8, 7, 7, 1, 1), "m1b": (4, 4, 7, 7, 2, 1), "m1c": (4, 8, 7, 14, 1, 1),
    "m2a": (2, 8, 7, 7, 2, 8), "m2b": (2, 4, 7, 7, 4, 8), "m2c": (2, 4, 7, 14, 4, 8),
    "r1": (8, 8, 7, 4, 8, 8), "r2": (8, 8, 7, 8, 4, 8), "r3": (4, 8, 14, 2, 8, 8),
    "r4": (4, 16, 14, 4, 4, 8), "r5": (8, 8, 7, 7, 4, 8),
}
GEN_RS = [(r, s) for r in (1, 3, 5, 7) for s in (1, 2)]     # the "gen" tile's instances
TUNED_RS = (3, 1)                                            # the m*/r* tiles' (R, S)
# the tile each kind of 3x3 stride-1 layer runs (the sweep's candidates: .notes/day31_sweep.py;
# H200, 2026-11-26, v6: m1a 5.4 us, m2b 6.6 us, gen 264 us at the ResNet layer against r1-r5's
# 285-304: .notes/day31_sweep_results.md)
PICK = {"m1": "m1a", "m2": "m2b", "r": "gen"}


def tile_for(size, pick=None) -> str | None:
    """The v5/v6 tile for a size, or None where no instance has its (R, S) (v4 runs)."""
    n, c, h, w, k, r, s, p = size
    pick = pick or PICK
    if (r, s) == TUNED_RS:
        if k <= 8 and c <= 4:
            return pick["m1"]
        if k <= 16 and c <= 16:
            return pick["m2"]
        if k >= 48:
            return pick["r"]
    return "gen" if (r, s) in GEN_RS else None


def geometry(tile, r, s) -> dict:
    """kernel.cu's conv::Tile arithmetic, for the launch (shared memory, grid)."""
    tm, tn, bx, by, bz, cb = TILES[tile]
    r4 = lambda v: (v + 3) // 4 * 4
    wl = (tm - 1) * s + r
    vec = (tm * s) % 4 == 0
    wlv = r4(wl) if vec else wl
    ih, iw = (by - 1) * s + r, (bx * tm - 1) * s + r
    iwp = r4(max(iw, (bx - 1) * tm * s + wlv))
    tk = bz * tn
    stage = cb * ih * iwp + cb * r * r * (tk + 4)
    return {"threads": bx * by * bz, "tw": bx * tm, "th": by, "tk": tk, "cb": cb,
            "stage_floats": stage}


def same_as(version, size):
    """v5/v6 are compiled for R in {1, 3, 5, 7} and S in {1, 2}; other filters run v4."""
    if version in ("v5", "v6") and tile_for(size) is None:
        return "v4"
    return None


def launch_direct(version, d, tile):
    n, c, h, w, k, r, s, p = d.size
    ho, wo = out_hw(d.size)
    g = geometry(tile, r, s)
    stages = 2 if version == "v6" and c > g["cb"] else 1
    smem = 4 * g["stage_floats"] * stages
    fn = KER(f"conv2d_{version}_r{r}s{s}_{tile}", "PPPPiiiiiii", dynamic_smem=smem)
    grid = (H.cdiv(ho, g["th"]) * H.cdiv(wo, g["tw"]), H.cdiv(k, g["tk"]), n)
    fn.prepared_call(grid, (g["threads"], 1, 1), d.x, d.w, d.b, d.y, c, h, w, k, p, ho, wo,
                     shared_size=smem)


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    n, c, h, w, k, r, s, p = d.size
    ho, wo = out_hw(d.size)
    if version == "v1":
        KER("conv2d_v1", "PPPP" + "i" * 9).prepared_call(
            (H.cdiv(ho * wo, 256), k, n), (256, 1, 1), d.x, d.w, d.b, d.y, c, h, w, k, r, s, p,
            ho, wo)
        return
    tile = tile_for(d.size) if version in ("v5", "v6") else None
    if tile is None:
        _launch_constant("v4" if version in ("v5", "v6") else version, d)
    else:
        launch_direct(version, d, tile)


def baselines(d):
    """cuDNN through torch.nn.functional.conv2d (fp32, TF32 off) on the same device memory,
    with torch's default algorithm choice and with cudnn.benchmark (cuDNN times its algorithms
    on the first call of a shape and keeps the fastest)."""
    torch = torch_fp32()
    if torch is None:
        return {}
    return torch_convs(d)


def torch_convs(d):
    import torch
    import torch.nn.functional as F

    torch_fp32()
    n, c, h, w, k, r, s, p = d.size
    x, wt, b = as_torch(d.array("x")), as_torch(d.array("w")), as_torch(d.array("b"))
    cudnn = torch.backends.cudnn

    def heuristic():
        return F.conv2d(x, wt, b, stride=s, padding=p)

    def autotuned():
        prev = cudnn.benchmark
        cudnn.benchmark = True
        try:
            return F.conv2d(x, wt, b, stride=s, padding=p)
        finally:
            cudnn.benchmark = prev

    return {"cuDNN (torch fp32)": heuristic, "cuDNN autotuned (torch fp32)": autotuned}


# --- public function -------------------------------------------------------------------------

def conv2d(x, w, b=None, stride=1, padding=0, version=BEST):
    """y = conv2d(x, w) + b on the GPU, float32, as torch.nn.functional.conv2d: x [N, C, H, W],
    w [K, C, R, R] (square filters up to 15x15), b [K] or None (no bias); stride 1..4, zero
    padding >= 0 on every side. Returns y [N, K, Ho, Wo], Ho = (H + 2 padding - R) // stride + 1.
    N = 0 or K = 0 gives an empty result and C = 0 (or an image of padding only) the bias,
    both without a launch."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=4, what="[N, C, H, W]")
    w = A.floats(w, "w", ndim=4, what="[K, C, R, R]")
    n, c, h, wd = x.shape
    k, cw, r, r2 = w.shape
    if cw != c:
        raise ValueError(f"w is [K, C, R, R] = {w.shape} and must have C = {c} input channels "
                         f"(x is {x.shape}), got {cw}")
    if r != r2:
        raise ValueError(f"w must hold square R x R filters, got {r} x {r2}")
    if r == 0:
        raise ValueError("w holds empty 0 x 0 filters")
    if r > MAX_R:
        raise ValueError(f"w holds {r}x{r} filters; at most {MAX_R}x{MAX_R}")
    b = np.zeros(k, np.float32) if b is None else A.floats(b, "b", shape=(k,), what="[K]")
    stride = A.count(stride, "stride", low=1, high=MAX_S)
    padding = A.count(padding, "padding", low=0)
    if h + 2 * padding < r or wd + 2 * padding < r:
        raise ValueError(f"the {r}x{r} filter does not fit the {h}x{wd} image padded by "
                         f"{padding}: no output")
    ho, wo = reference.out_size(h, r, stride, padding), reference.out_size(wd, r, stride, padding)
    if n == 0 or k == 0:
        return np.zeros((n, k, ho, wo), np.float32)
    if c == 0 or h == 0 or wd == 0:       # every window holds padding only: the bias
        return np.ascontiguousarray(np.broadcast_to(b[None, :, None, None], (n, k, ho, wo)))
    size = (n, c, h, wd, k, r, stride, padding)
    validate_size(size)
    case = H.Case(size, inputs={"x": x, "w": w, "b": b},
                  outputs={"y": ((n, k, ho, wo), np.float32)})
    return H.run(launch, version, case)["y"]


# --- extras: what cuDNN runs, how v2-v4 slice the filter ------------------------------------------

LAYERS = {MNIST1: "MNIST conv1", MNIST2: "MNIST conv2", RESNET: "ResNet 3x3", STEM: "stem 7x7/2"}


def slices_table():
    rows = []
    for size, name in LAYERS.items():
        n, c, h, w, k, r, s, p = size
        sl = constant_slices(c, k, r * r)
        kcs = sorted({kc for _, kc, _, _ in sl})
        ccs = sorted({cc for _, _, _, cc in sl})
        copies = sum((1 if cc == c else kc) + (c0 == 0) for _, kc, c0, cc in sl)
        rows.append([name, f"{4 * k * c * r * r / 1024:.1f}", str(len(sl)),
                     "/".join(map(str, kcs)), "/".join(map(str, ccs)), str(copies)])
    return rows


def cudnn_kernels():
    """(layer, baseline, kernels launched with their times) for each bench layer, or None."""
    torch = torch_fp32()
    if torch is None:
        return None
    from common.baselines import kernels_launched

    rows = []
    for size, name in LAYERS.items():
        d = H.DeviceCase(make_case(size, np.random.default_rng(31)))
        for label, fn in torch_convs(d).items():
            fn()                              # the autotuned call times its algorithms here
            ks = kernels_launched(fn)
            short = "; ".join(f"{kname[:110]} ({us:.1f} us)" for kname, us in ks)
            kind = "autotuned" if "autotuned" in label else "heuristic"
            rows.append([f"{name}, {kind}", str(len(ks)), short])
    return rows


def extras(report, mode):
    if mode == "check":
        return
    report.section("v2-v4: constant-memory slices of the filter (c_w holds 15360 floats)",
                   slices_table(), ["layer", "filter KB", "launches", "kc", "cc", "copies"])
    rows = cudnn_kernels()
    if rows is not None:
        report.section("cuDNN kernels (torch fp32, TF32 off)", rows,
                       ["layer", "kernels", "names (time of one call)"])
        report.record("cudnn_kernels", rows)


def _resnet_ratio(rec):
    """The curriculum asks for the ratio to cuDNN on a ResNet 3x3 layer to be reported."""
    case = next((c for c in rec.get("cases", []) if tuple(c["size"]) == RESNET), None)
    if case is None:
        return False, "the ResNet layer was not measured"
    rows = [r for r in case["rows"] if r.get("ok") and "median_ms" in r]
    libs = [b for b in case.get("baseline", []) if "median_ms" in b and b.get("ok") is not False]
    if not rows or not libs:
        return False, "no correct timing of a version and of cuDNN at the ResNet layer"
    best = min(rows, key=lambda r: r["median_ms"])
    lib = min(libs, key=lambda b: b["median_ms"])
    return True, (f"{best['version']} {lib['median_ms'] / best['median_ms']:.2f}x the speed of "
                  f"{lib['name']} at {'x'.join(map(str, RESNET))}")


# CURRICULUM.md / issue 11: faster than cuDNN (torch fp32, TF32 off) on the two conv layers of
# day 70's MNIST CNN; the ratio to cuDNN on a ResNet-style 3x3 layer reported
BAR = [{"sizes": [MNIST1, MNIST2], "vs_baseline": 1.0},
       {"text": "ratio to cuDNN reported on the ResNet 3x3 layer", "check": _resnet_ratio}]
