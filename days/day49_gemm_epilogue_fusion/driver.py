"""Day 49 driver: GPT-2's MLP layers in bf16 with bias, GELU and the residual fused into the
GEMM epilogue (sm_90a), against torch eager (cuBLAS + element-wise kernels).

    from days.day49_gemm_epilogue_fusion.driver import mlp
    h, y = mlp(x, w1, b1, w2, b2, r)   # h = gelu(x W1^T + b1), y = h W2^T + b2 + r
                                       # numpy in (rounded to bf16), float32 values of the bf16
                                       # outputs back; version=BEST

x, r [T, C]; w1 [4C, C] and w2 [C, 4C] as torch stores Linear weights ([out, in]); b1 [4C],
b2 [C]. C must be a multiple of 8 (rows of 16-byte multiples for the copy engine); T is free.
"""
import numpy as np

from common import args as A
from common import harness as H
from common import gpu
from common import tma
from common.baselines import as_torch, torch_or_none

from . import reference

SM90A = True
K = H.Kernels(__file__, sm90a=True)

VERSIONS = {
    "v1": "unfused: GEMM, bias+GELU kernel, GEMM, bias+residual kernel (4 kernels)",
    "v2": "epilogue fused into the register -> global bf16 stores (2 kernels)",
    "v3": "fused epilogue through swizzled shared memory and TMA stores",
    "v4": "v3 with stmatrix; fc2 on 128x128 tiles when they fill the waves better",
    "v5": "v4's epilogue on the ping-pong GEMM: a 128x128 tile per consumer warpgroup, one "
          "warpgroup's epilogue overlaps the other's wgmma",
}
BEST = "v5"   # fastest at the default size 8192x768 (H200, 2026-11-26: the ping-pong GEMM)
SIZE_HELP = "TxC (tokens x model width; the hidden width is 4C), e.g. 8192x768"
SIZES = {"small": (128, 64), "default": (8192, 768), "large": (8192, 1280)}
# T = 1, 5, 17, 33, 130, 257: partial 128-row tiles (and a warpgroup with no rows); C = 8: fc1's
# K is one partial k-block and fc2's N = 8 a sliver of one box; C = 72, 136, 200: 4C and C
# partial 256/128/64-column tiles and boxes; GPT-2 widths 768, 1024, 1280 with ragged T
CHECK_SIZES = [(1, 8), (1, 64), (17, 64), (33, 768), (130, 200), (257, 256), (129, 1024),
               (5, 1280), (300, 136), (1000, 8), (200, 72)]
AWKWARD = (5000, 768)      # ragged tokens: 40 row tiles (39 full + 8 rows)
BENCH_SIZES = [(8192, 768), (8192, 1024), (8192, 1280), AWKWARD]
BAR = [{"sizes": BENCH_SIZES, "vs_baseline": 1.0, "baseline": "torch eager bf16"},
       {"sizes": BENCH_SIZES, "over": ("v1", 1.05)}]

BM, BK, BOX = 128, 64, 64
THREADS = 384
STAGE = {256: (BM + 256) * BK * 2, 128: (BM + 128) * BK * 2}


def smem(bn: int, stages: int, nbuf: int = 0) -> int:
    """wsgemm::smem_bytes<bn, stages>(staging): the ring, two warpgroups' staging boxes, 1024."""
    return stages * STAGE[bn] + 2 * nbuf * BOX * BOX * 2 + 1024


# kernel -> (BN, dynamic shared memory)
KERNELS = {
    "gemm_v1": (256, smem(256, 4)), "fc1_v2": (256, smem(256, 4)), "fc2_v2": (256, smem(256, 4)),
    "fc1_v3": (256, smem(256, 4, 2)), "fc2_v3": (256, smem(256, 4, 2)),
    "fc1_v4": (256, smem(256, 4, 2)), "fc2_v4_bn256": (256, smem(256, 4, 2)),
    "fc2_v4_bn128": (128, smem(128, 6, 2)),
    "fc1_s3b4": (256, smem(256, 3, 4)), "fc1_bn128": (128, smem(128, 6, 2)),
    "fc2_sk": (256, smem(256, 4, 2)),
}


def pingpong_smem(pm: int, pn: int, stages: int, nbuf: int = 0) -> int:
    """wsgemm::pingpong_smem_bytes<pm, pn, stages>(staging): the ring of (pm + pn) x 64 bf16
    stages, two warpgroups' staging boxes, 1024 to align."""
    return stages * (pm + pn) * BK * 2 + 2 * nbuf * BOX * BOX * 2 + 1024


# v5 (ping-pong) kernels -> (tile rows PM, tile columns PN, ring stages, staging boxes a
# warpgroup, cluster, epilogue: "tma" through shared memory, "direct" register stores)
PINGPONG = {
    "fc1_v5": (128, 128, 6, 2, 1, "tma"), "fc2_v5": (128, 128, 6, 2, 1, "tma"),
    "fc1_v5_b4": (128, 128, 5, 4, 1, "tma"), "fc1_v5_64": (64, 256, 4, 4, 1, "tma"),
    "fc2_v5_64": (64, 256, 4, 4, 1, "tma"), "fc1_v5_c2": (128, 128, 6, 2, 2, "tma"),
    "fc2_v5_c2": (128, 128, 6, 2, 2, "tma"), "fc1_v5_direct": (128, 128, 7, 0, 1, "direct"),
    "gemm_v5": (128, 128, 6, 2, 1, "tma"),     # no bias, GELU or residual: the GEMM alone
}


def wave_efficiency(tiles: int, sms: int) -> float:
    """Work over time: tiles / (waves x SMs); 1.0 when the last wave is full."""
    return tiles / (H.cdiv(tiles, sms) * sms)


def fc2_tile(t: int, c: int, sms: int) -> int:
    """v4's fc2 tile width: 128 when 128 x 128 tiles fill the waves better than 128 x 256 by more
    than 5% (e.g. C = 768 at 8192 tokens: 192 tiles = 0.73 of two waves, 384 = 0.97 of three)."""
    rows = H.cdiv(t, BM)
    wide = wave_efficiency(rows * H.cdiv(c, 256), sms)
    narrow = wave_efficiency(rows * H.cdiv(c, 128), sms)
    return 128 if narrow > wide + 0.05 else 256


def kernels_of(version: str, size, sms: int) -> tuple:
    """(fc1 kernel, fc2 kernel) a version runs at this size (v1: the plain GEMM for both)."""
    t, c = size
    if version == "v1":
        return "gemm_v1", "gemm_v1"
    if version == "v4":
        return "fc1_v4", f"fc2_v4_bn{fc2_tile(t, c, sms)}"
    if version == "v5":
        return "fc1_v5", "fc2_v5"
    if version in ("v2", "v3"):
        return f"fc1_{version}", f"fc2_{version}"
    raise ValueError(f"unknown version {version!r}")


def validate_size(size):
    t, c = size
    if c % 8:
        raise ValueError(f"C = {c}: the width must be a multiple of 8 (rows of x, h and the "
                         "weights are copied in 16-byte units by the copy engine)")
    A.fits_int32("h = [T, 4C]", t * 4 * c)
    A.fits_int32("w1 = [4C, C]", 4 * c * c)


def make_case(size, rng):
    """GPT-2-like data: x, r ~ N(0, 1); weights N(0, 1) / sqrt(fan-in), biases 0.1 N(0, 1), so
    both layers' outputs are O(1); all rounded to bf16."""
    t, c = size
    bits = reference.bf16_bits

    def normal(shape, scale=1.0):
        return bits(rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))
    inputs = {"x": normal((t, c)), "w1": normal((4 * c, c), 1 / np.sqrt(c)),
              "b1": normal((4 * c,), 0.1), "w2": normal((c, 4 * c), 1 / np.sqrt(4 * c)),
              "b2": normal((c,), 0.1), "r": normal((t, c))}
    return H.Case(size, inputs=inputs,
                  outputs={"h": ((t, 4 * c), np.uint16), "y": ((t, c), np.uint16)},
                  reference=lambda: reference.mlp(*(inputs[k] for k in ("x", "w1", "b1", "w2",
                                                                          "b2", "r"))),
                  decode={"h": reference.bf16_to_float, "y": reference.bf16_to_float},
                  tol={"h": reference.TOL, "y": reference.TOL},
                  flops=reference.flops(t, c), unit="bf16")


# --- launching --------------------------------------------------------------------------------

def _map(d, ptr, cols, rows, box_cols, box_rows):
    """A bf16 tensor map over a row-major [rows, cols] array (cached on the DeviceCase)."""
    return tma.cached_map(d, ptr, "bfloat16", dims=(cols, rows), box=(box_cols, box_rows))


def _gemm_grid(m, n, bn, sms):
    return (min(H.cdiv(m, BM) * H.cdiv(n, bn), sms), 1, 1)


def run_pingpong(d, layer: int, kernel: str, sms: int):
    """Enqueue one layer on a v5 (ping-pong) kernel. 'gemm_v5' is the plain GEMM (no bias,
    GELU or residual) into the layer's output: a timing of the GEMM alone, not the MLP."""
    t, c = d.size
    pm, pn, stages, nbuf, cluster, store = PINGPONG[kernel]
    if layer == 1:
        a, w, m, n, k, out = d.x, d.w1, t, 4 * c, c, d.h
    else:
        a, w, m, n, k, out = d.h, d.w2, t, c, 4 * c, d.y
    amap = _map(d, a, k, m, BK, pm)
    bmap = _map(d, w, k, n, BK, pn // cluster)
    units = H.cdiv(H.cdiv(m, pm), cluster) * H.cdiv(n, pn)
    grid, block = (cluster * min(units, sms // cluster), 1, 1), (THREADS, 1, 1)
    shared = pingpong_smem(pm, pn, stages, nbuf)
    bias = d.b1 if layer == 1 else d.b2
    extra = () if layer == 1 else (d.r,)
    if store == "direct":
        K(kernel, "PPPP" + "P" * len(extra) + "iii", dynamic_smem=shared).prepared_call(
            grid, block, amap, bmap, out, bias, *extra, m, n, k, shared_size=shared)
        return
    cmap = _map(d, out, n, m, BOX, BOX)
    if kernel == "gemm_v5":
        K(kernel, "PPPiii", dynamic_smem=shared).prepared_call(
            grid, block, amap, bmap, cmap, m, n, k, shared_size=shared)
        return
    K(kernel, "PPPP" + "P" * len(extra) + "iii", dynamic_smem=shared).prepared_call(
        grid, block, amap, bmap, cmap, bias, *extra, m, n, k, shared_size=shared)


def run_layer(d, layer: int, kernel: str, sms: int, mode: str = "hybrid"):
    """Enqueue one layer (1: fc1, 2: fc2) with one kernel (v1's 'gemm_v1' also runs its
    element-wise kernel) on DeviceCase d."""
    if kernel in PINGPONG:
        run_pingpong(d, layer, kernel, sms)
        return
    t, c = d.size
    bn, shared = KERNELS[kernel]
    if layer == 1:
        a, w, m, n, k, out = d.x, d.w1, t, 4 * c, c, d.h
    else:
        a, w, m, n, k, out = d.h, d.w2, t, c, 4 * c, d.y
    amap = _map(d, a, k, m, BK, BM)
    bmap = _map(d, w, k, n, BK, bn)
    grid, block = _gemm_grid(m, n, bn, sms), (THREADS, 1, 1)
    if kernel == "gemm_v1":
        u = d.scratch(f"u{layer}", (m, n), np.uint16)
        K(kernel, "PPPiii", dynamic_smem=shared).prepared_call(
            grid, block, amap, bmap, u, m, n, k, shared_size=shared)
        ew_grid = (max(1, min(H.cdiv(m * n // 8, 256), sms * 16)), 1, 1)
        if layer == 1:
            K("bias_gelu_v1", "PPPii").prepared_call(ew_grid, (256, 1, 1), u, d.b1, out, m, n)
        else:
            K("bias_residual_v1", "PPPPii").prepared_call(ew_grid, (256, 1, 1), u, d.b2, d.r,
                                                           out, m, n)
        return
    bias = d.b1 if layer == 1 else d.b2
    extra = () if layer == 1 else (d.r,)
    sig = "PPPP" + "P" * len(extra) + "iii"
    if kernel.endswith("_v2"):
        K(kernel, sig, dynamic_smem=shared).prepared_call(
            grid, block, amap, bmap, out, bias, *extra, m, n, k, shared_size=shared)
        return
    cmap = _map(d, out, n, m, BOX, BOX)
    if kernel == "fc2_sk":
        from days.day48_split_k_stream_k.driver import stream_k_plan

        tiles, nk = H.cdiv(m, BM) * H.cdiv(n, bn), H.cdiv(k, BK)
        p = stream_k_plan(tiles, nk, sms, mode)
        slots = max(p["sk_blocks"], 1)
        ws = d.scratch("sk_ws", (slots * BM * bn,), np.float32)
        flags = d.scratch("sk_flags", (slots,), np.int32, zero=True)
        K(kernel, sig + "PPii", dynamic_smem=shared).prepared_call(
            (p["grid"], 1, 1), block, amap, bmap, cmap, bias, *extra, m, n, k, ws, flags,
            p["dp_tiles"], p["sk_blocks"], shared_size=shared)
        return
    K(kernel, sig, dynamic_smem=shared).prepared_call(
        grid, block, amap, bmap, cmap, bias, *extra, m, n, k, shared_size=shared)


def launch(version, d):
    A.version(version, VERSIONS)
    sms = gpu.sm_count()
    k1, k2 = kernels_of(version, d.size, sms)
    run_layer(d, 1, k1, sms)
    run_layer(d, 2, k2, sms)


def _torch_views(d):
    torch = torch_or_none()
    bf = torch.bfloat16
    return {k: as_torch(d.array(k)).view(bf) for k in ("x", "w1", "b1", "w2", "b2", "r")}


def baselines(d):
    """torch eager in bf16 (what a user runs: F.linear with the bias, F.gelu(tanh), F.linear,
    + r), and the two cuBLAS GEMMs alone (no bias, GELU or residual: the floor that fusing the
    epilogue approaches; its output is not the MLP's and is not checked)."""
    torch = torch_or_none()
    if torch is None:
        return {}
    import torch.nn.functional as F

    v = _torch_views(d)
    t, c = d.size
    h0 = torch.empty((t, 4 * c), dtype=torch.bfloat16, device="cuda")
    y0 = torch.empty((t, c), dtype=torch.bfloat16, device="cuda")

    def eager():
        h = F.gelu(F.linear(v["x"], v["w1"], v["b1"]), approximate="tanh")
        return F.linear(h, v["w2"], v["b2"]) + v["r"]
    eager.output = "y"

    def gemms():
        torch.matmul(v["x"], v["w1"].t(), out=h0)
        torch.matmul(h0, v["w2"].t(), out=y0)
    return {"torch eager bf16": eager, "cuBLAS GEMMs alone (no epilogue)": gemms}


LAYER_HEADERS = ["layer", "v1 unfused ms", "fused (BEST) ms", "torch eager ms", "cuBLAS GEMM ms",
                 "unfused extra MB", "v4 ms", "v5 ms", "v5 GEMM alone ms"]


def extras(report, mode):
    """Each layer timed on its own at every benchmark size: v1's GEMM + element-wise kernel, the
    BEST version's fused kernel, torch eager, and cuBLAS's GEMM alone; the traffic fusion
    removes (the pre-activation's round trip); v4's and v5's fused kernels, and v5's ping-pong
    GEMM with no epilogue op (gemm_v5: what the bias, GELU and residual cost on top of it)."""
    if mode != "bench":
        return
    torch = torch_or_none()
    if torch is None:
        return
    import torch.nn.functional as F

    from common.timing import time_fn

    sms = gpu.sm_count()
    rows = []
    for size in BENCH_SIZES:
        t, c = size
        case = make_case(size, np.random.default_rng(0))
        d = H.DeviceCase(case)
        v = _torch_views(d)
        hv = as_torch(d.array("h")).view(torch.bfloat16)
        fused = kernels_of(BEST, size, sms)
        v4, v5 = kernels_of("v4", size, sms), kernels_of("v5", size, sms)
        ops = {
            1: (lambda: F.gelu(F.linear(v["x"], v["w1"], v["b1"]), approximate="tanh"),
                lambda: torch.matmul(v["x"], v["w1"].t()), 2 * 2 * 4 * t * c),
            2: (lambda: F.linear(hv, v["w2"], v["b2"]) + v["r"],
                lambda: torch.matmul(hv, v["w2"].t()), 2 * 2 * t * c),
        }
        for layer in (1, 2):
            eager, gemm, extra_bytes = ops[layer]
            times = [time_fn(lambda: run_layer(d, layer, "gemm_v1", sms)).median_ms,
                     time_fn(lambda: run_layer(d, layer, fused[layer - 1], sms)).median_ms,
                     time_fn(eager).median_ms, time_fn(gemm).median_ms]
            more = [time_fn(lambda: run_layer(d, layer, k, sms)).median_ms
                    for k in (v4[layer - 1], v5[layer - 1], "gemm_v5")]
            rows.append([f"{H.size_str(size)} fc{layer}"] + [f"{x:.4f}" for x in times]
                        + [f"{extra_bytes / 1e6:.1f}"] + [f"{x:.4f}" for x in more])
        del d
    report.section("Layers on their own (median ms)", rows, LAYER_HEADERS)


# --- public function --------------------------------------------------------------------------

def mlp(x, w1, b1, w2, b2, r, version: str = BEST):
    """h = gelu(x W1^T + b1), y = h W2^T + b2 + r on the tensor cores, bf16 in and out (inputs
    rounded to bf16 to nearest-even), fp32 accumulation and epilogue. Returns (h, y) as float32
    arrays of the bf16 values."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2)
    t, c = x.shape
    w1 = A.floats(w1, "w1", shape=(4 * c, c), what="[4C, C] with C = x's width")
    b1 = A.floats(b1, "b1", shape=(4 * c,), what="[4C]")
    w2 = A.floats(w2, "w2", shape=(c, 4 * c), what="[C, 4C]")
    b2 = A.floats(b2, "b2", shape=(c,), what="[C]")
    r = A.floats(r, "r", shape=(t, c), what="x's shape [T, C]")
    validate_size((t, c))
    if t == 0 or c == 0:
        return np.zeros((t, 4 * c), np.float32), np.zeros((t, c), np.float32)
    bits = reference.bf16_bits
    case = H.Case((t, c), inputs={"x": bits(x), "w1": bits(w1), "b1": bits(b1), "w2": bits(w2),
                                  "b2": bits(b2), "r": bits(r)},
                  outputs={"h": ((t, 4 * c), np.uint16), "y": ((t, c), np.uint16)},
                  decode={"h": reference.bf16_to_float, "y": reference.bf16_to_float})
    out = H.run(launch, version, case)
    return out["h"], out["y"]
