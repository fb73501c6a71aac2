"""Day 30 driver: the GPT-2 MLP sub-block forward in fp32, unfused vs fused, against torch eager.

    from days.day30_gpt2_style_ops.driver import mlp
    y = mlp(x, ln_w, ln_b, w1, b1, w2, b2)     # numpy in, numpy out (float32); version=BEST

x [BT, C]; ln_w, ln_b, b2 [C]; w1 [C, 4C] and w2 [4C, C] stored [in, out] (torch's
Linear.weight transposed, once); b1 [4C]. y = x + gelu(layernorm(x) @ w1 + b1) @ w2 + b2.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "unfused: layernorm, GEMM, bias, GELU, GEMM, bias, residual (7 kernels)",
    "v2": "fused epilogues: layernorm, GEMM+bias+GELU, GEMM+bias+residual (3 kernels)",
    "v3": "v2 + fc2 split over K (atomicAdd into y = x + b2 from the layernorm kernel)",
    "v4": "v3 + layernorm folded into fc1's A-tile load (stats kernel only)",
    "v5": "v3 on day 25's faster GEMM tile (sgemm::Fast: cp.async, BK=16, warptiling)",
}
BEST = "v2"   # fastest at 8192x768 (H200, 2026-11-23, .notes/day30_sweep.py: v2 1.766 ms, v3 1.813, v5 2.076)
              # saves ~50 MB of traffic on the slower day-8 loop. The lead corrects it.
SIZE_HELP = "BTxC (tokens x channels), e.g. 8192x768"
EPS = reference.EPS
SIZES = {"small": (64, 64), "default": (8192, 768), "large": (8192, 1024)}
# BT = 1, 17, 130, 257: partial 128-row tiles; C = 64, 96, 200: 4C and C partial 128-column
# tiles, float4 paths; C = 1, 3, 50, 130: C % 4 != 0 (scalar GEMMs, the layernorm's loop path,
# v4 runs v3); C = 772 (> 768: the 8-float4 layernorm), 2052 (> 2048: the loop path with float4
# GEMMs); (33, 768) the headline width with a ragged BT
CHECK_SIZES = [(1, 64), (17, 96), (130, 200), (1, 1), (31, 3), (33, 50), (130, 130),
               (257, 768), (33, 768), (65, 772), (3, 2052), (129, 256)]
AWKWARD = (5000, 768)      # 40 x 6 = 240 fc2 tiles (one partial wave), 5000 % 128 = 8
BENCH_SIZES = [(8192, 768), AWKWARD, (4096, 1024)]   # numpy reference < 10 s each on 2 cores
MAX_ROW_TILES = 65535      # gridDim.y of the GEMMs holds BT / 128

TILE = 128                 # sgemm.cuh's BM = BN (the GEMM grids)
TILE_K = 8                 # a split-K slice is a multiple of 8 floats (16-byte aligned A rows)
GEMM_THREADS = 256
LN_ROWS = 8                # rows (warps) per 256-thread layernorm block
LN_ITEMS = (2, 4, 6, 8, 16)  # float4 per lane the register layernorm kernels hold


def validate_size(size):
    bt, c = size
    if H.cdiv(bt, TILE) > MAX_ROW_TILES:
        raise ValueError(f"BT = {bt}: at most {MAX_ROW_TILES * TILE} rows (the GEMM grids put "
                         f"128-row tiles on gridDim.y, at most {MAX_ROW_TILES})")
    A.fits_int32("h = [BT, 4C]", bt * 4 * c)
    A.fits_int32("w1 = [C, 4C]", c * 4 * c)


def make_case(size, rng):
    """GPT-2-like data: x ~ N(0, 1); ln_w ~ 1 + N(0, 0.1), ln_b ~ N(0, 0.1); weights scaled by
    1/sqrt(fan-in) so both GEMMs' outputs are O(1) and fc2's share of y is visible."""
    bt, c = size
    f = np.float32
    x = rng.standard_normal((bt, c)).astype(f)
    ln_w = (1 + 0.1 * rng.standard_normal(c)).astype(f)
    ln_b = (0.1 * rng.standard_normal(c)).astype(f)
    w1 = (rng.standard_normal((c, 4 * c)) / np.sqrt(c)).astype(f)
    b1 = (0.1 * rng.standard_normal(4 * c)).astype(f)
    w2 = (rng.standard_normal((4 * c, c)) / np.sqrt(4 * c)).astype(f)
    b2 = (0.1 * rng.standard_normal(c)).astype(f)
    inputs = dict(x=x, ln_w=ln_w, ln_b=ln_b, w1=w1, b1=b1, w2=w2, b2=b2)
    return H.Case(size, inputs=inputs, outputs={"y": ((bt, c), f)},
                  reference=lambda: {"y": reference.mlp(x, ln_w, ln_b, w1, b1, w2, b2, EPS)},
                  flops=reference.flops(bt, c), unit="fp32", params={"eps": EPS})


# --- kernel choice ---------------------------------------------------------------------------

def vec(c) -> bool:
    """16-byte loads need every row of x, y, ln and w2 to start 16-byte aligned: C % 4 == 0."""
    return c % 4 == 0


def ln_kernel(prefix, c) -> str:
    """The register-held layernorm for C % 4 == 0 and C <= 128 * 16, else the loop kernel."""
    if vec(c):
        for items in LN_ITEMS:
            if c <= 128 * items:
                return f"{prefix}_i{items}"
    return f"{prefix}_loop"


def same_as(version, size):
    """v4 folds the layernorm into 16-byte A loads; with C % 4 != 0 it runs v3's kernels."""
    if version == "v4" and not vec(size[1]):
        return "v3"
    return None


_SLOTS = {}


def resident_blocks(kernel="mlp_fc2_v3_vec") -> int:
    """GEMM blocks resident at once on this GPU (SMs x blocks an SM holds of `kernel`)."""
    if kernel not in _SLOTS:
        from common.gpu import blocks_per_sm, device_info

        _SLOTS[kernel] = device_info()["sms"] * blocks_per_sm(K(kernel), GEMM_THREADS)
    return _SLOTS[kernel]


def choose_ksplit(bt, c, slots, max_split=4) -> int:
    """fc2's split over K: the number of slices whose blocks fill the last wave best
    (tiles x S over whole waves of `slots`), the smallest such S within 2% of the best."""
    tiles = H.cdiv(bt, TILE) * H.cdiv(c, TILE)
    kmax = H.cdiv(4 * c, TILE_K)
    eff = {}
    for s in range(1, min(max_split, kmax) + 1):
        blocks = tiles * s
        eff[s] = blocks / (H.cdiv(blocks, slots) * slots)
    best = max(eff.values())
    return min(s for s, e in eff.items() if e >= best - 0.02)


def kslice_of(c, split) -> tuple[int, int]:
    """(kslice, slices): K = 4C cut into `split` slices, each a multiple of BK; no empty one."""
    k = 4 * c
    ks = H.cdiv(H.cdiv(k, split), TILE_K) * TILE_K
    return ks, H.cdiv(k, ks)


# --- launches --------------------------------------------------------------------------------

def _elementwise_grid(n, per_thread):
    return (H.cdiv(n, 256 * per_thread), 1, 1), (256, 1, 1)


def launch_stages(version, d, split=None):
    """The version's kernels as a list of (stage name, zero-argument launch), in order."""
    bt, c = d.size
    eps = np.float32(d.params["eps"])
    n4 = 4 * c
    v = vec(c)
    sfx = "vec" if v else "scalar"
    ln = d.scratch("ln", (bt, c))
    h = d.scratch("h", (bt, n4))
    stats = d.scratch("stats", (bt, 4))
    gblock = (GEMM_THREADS, 1, 1)
    g1 = (H.cdiv(n4, TILE), H.cdiv(bt, TILE), 1)
    g2 = (H.cdiv(c, TILE), H.cdiv(bt, TILE), 1)
    lgrid, lblock = (H.cdiv(bt, LN_ROWS), 1, 1), (256, 1, 1)
    null = 0                    # a null pointer for the arguments a kernel does not use

    def ln_launch(prefix, out, init):
        return lambda: K(ln_kernel(prefix, c), "PPPPPPPiif").prepared_call(
            lgrid, lblock, d.x, d.ln_w, d.ln_b, out, stats, d.b2 if init else null,
            d.y if init else null, bt, c, eps)

    if version == "v1":
        gemm = K(f"mlp_gemm_v1_{sfx}", "PPPiii")
        bias_h = K("mlp_bias_v1_vec", "PPqi")           # 4C % 4 == 0 always
        bias_y = K(f"mlp_bias_v1_{sfx}", "PPqi")
        gelu = K("mlp_gelu_v1", "Pq")
        resid = K("mlp_residual_v1", "PPq")
        nh, ny = bt * n4, bt * c
        bias_pt = 4 if v else 1
        return [
            ("layernorm", ln_launch("mlp_layernorm_v1", ln, False)),
            ("fc1 GEMM", lambda: gemm.prepared_call(g1, gblock, ln, d.w1, h, bt, n4, c)),
            ("bias1", lambda: bias_h.prepared_call(*_elementwise_grid(nh, 4), h, d.b1, nh, n4)),
            ("gelu", lambda: gelu.prepared_call(*_elementwise_grid(nh, 4), h, nh)),
            ("fc2 GEMM", lambda: gemm.prepared_call(g2, gblock, h, d.w2, d.y, bt, c, n4)),
            ("bias2", lambda: bias_y.prepared_call(*_elementwise_grid(ny, bias_pt), d.y, d.b2, ny, c)),
            ("residual", lambda: resid.prepared_call(*_elementwise_grid(ny, 4), d.y, d.x, ny)),
        ]
    if version == "v2":
        fc1 = K(f"mlp_fc1_v2_{sfx}", "PPPPiii")
        fc2 = K(f"mlp_fc2_v2_{sfx}", "PPPPPiii")
        return [
            ("layernorm", ln_launch("mlp_layernorm_v1", ln, False)),
            ("fc1+bias+gelu", lambda: fc1.prepared_call(g1, gblock, ln, d.w1, d.b1, h, bt, n4, c)),
            ("fc2+bias+residual", lambda: fc2.prepared_call(g2, gblock, h, d.w2, d.b2, d.x, d.y,
                                                            bt, c, n4)),
        ]
    # v3, v4, v5: fc2 split over K, adding into y = x + b2; a split of 1 runs fc2 unsplit with
    # v2's fused bias + residual epilogue instead (no atomics, no pre-initialized y)
    fast = version == "v5"
    if split is None:
        split = choose_ksplit(bt, c, resident_blocks(f"mlp_fc2_{'v5' if fast else 'v3'}_vec"))
    ks, slices = kslice_of(c, split)
    init = slices > 1
    if init:
        fc2 = K(f"mlp_fc2_{'v5' if fast else 'v3'}_{sfx}", "PPPiiii")
        g2s = (g2[0], g2[1], slices)
        fc2_stage = ("fc2 split-K (atomicAdd)",
                     lambda: fc2.prepared_call(g2s, gblock, h, d.w2, d.y, bt, c, n4, ks))
    else:
        fc2 = K(f"mlp_{'fc2res_v5' if fast else 'fc2_v2'}_{sfx}", "PPPPPiii")
        fc2_stage = ("fc2+bias+residual",
                     lambda: fc2.prepared_call(g2, gblock, h, d.w2, d.b2, d.x, d.y, bt, c, n4))
    if version == "v4" and v:
        fc1 = K("mlp_fc1_v4_vec", "PPPPPPPiii")
        return [
            ("stats + y=x+b2" if init else "stats",
             ln_launch("mlp_stats_v4" if init else "mlp_stats_noinit_v4", null, init)),
            ("fc1 (ln on load)+bias+gelu",
             lambda: fc1.prepared_call(g1, gblock, d.x, stats, d.ln_w, d.ln_b, d.w1, d.b1, h,
                                       bt, n4, c)),
            fc2_stage,
        ]
    fc1 = K(f"mlp_fc1_{'v5' if fast else 'v2'}_{sfx}", "PPPPiii")
    return [
        ("layernorm + y=x+b2" if init else "layernorm",
         ln_launch("mlp_layernorm_v3" if init else "mlp_layernorm_v1", ln, init)),
        ("fc1+bias+gelu", lambda: fc1.prepared_call(g1, gblock, ln, d.w1, d.b1, h, bt, n4, c)),
        fc2_stage,
    ]


def launch(version, d, split=None):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    for _, fn in launch_stages(version, d, split):
        fn()


def baselines(d):
    """torch eager in true fp32 (TF32 off) on the same device memory: F.layer_norm, F.linear
    (torch's [out, in] weights: the [in, out] ones transposed once, here, untimed), F.gelu
    with the tanh approximation, F.linear, + x."""
    torch = torch_or_none()
    if torch is None:
        return {}
    fns = torch_stages(d)
    return {"torch eager fp32": fns["all"]}


def torch_stages(d):
    """torch eager's MLP as callables: each stage on its own, and "all" (the whole forward)."""
    import torch.nn.functional as F

    torch_fp32()                                     # fp32 GEMMs, TF32 off
    bt, c = d.size
    eps = d.params["eps"]
    x, lnw, lnb = as_torch(d.array("x")), as_torch(d.array("ln_w")), as_torch(d.array("ln_b"))
    b1, b2 = as_torch(d.array("b1")), as_torch(d.array("b2"))
    w1t = as_torch(d.array("w1")).t().contiguous()   # [4C, C]
    w2t = as_torch(d.array("w2")).t().contiguous()   # [C, 4C]
    ln = F.layer_norm(x, (c,), lnw, lnb, eps)
    pre = F.linear(ln, w1t, b1)
    h = F.gelu(pre, approximate="tanh")
    f2 = F.linear(h, w2t, b2)

    def all_():
        a = F.layer_norm(x, (c,), lnw, lnb, eps)
        a = F.gelu(F.linear(a, w1t, b1), approximate="tanh")
        return F.linear(a, w2t, b2) + x

    return {"all": all_,
            "layernorm": lambda: F.layer_norm(x, (c,), lnw, lnb, eps),
            "fc1 (addmm)": lambda: F.linear(ln, w1t, b1),
            "gelu": lambda: F.gelu(pre, approximate="tanh"),
            "fc2 (addmm)": lambda: F.linear(h, w2t, b2),
            "residual": lambda: f2 + x}


# --- public function -------------------------------------------------------------------------

def mlp(x, ln_w, ln_b, w1, b1, w2, b2, eps=EPS, version=BEST):
    """y = x + gelu((layernorm(x) * ln_w + ln_b) @ w1 + b1) @ w2 + b2 on the GPU, float32.
    x [BT, C]; ln_w, ln_b, b2 [C]; w1 [C, 4C], w2 [4C, C] ([in, out]); b1 [4C]. BT = 0 returns
    an empty [0, C] array without a launch; C = 0 is refused (a layernorm of nothing)."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[BT, C]")
    bt, c = x.shape
    if c == 0:
        raise ValueError("x has C = 0 channels; a layernorm needs at least one")
    ln_w = A.floats(ln_w, "ln_w", shape=(c,), what="[C]")
    ln_b = A.floats(ln_b, "ln_b", shape=(c,), what="[C]")
    w1 = A.floats(w1, "w1", shape=(c, 4 * c), what="[C, 4C] ([in, out])")
    b1 = A.floats(b1, "b1", shape=(4 * c,), what="[4C]")
    w2 = A.floats(w2, "w2", shape=(4 * c, c), what="[4C, C] ([in, out])")
    b2 = A.floats(b2, "b2", shape=(c,), what="[C]")
    eps = A.real(eps, "eps", low=0, low_open=True)
    if bt == 0:
        return np.empty((0, c), np.float32)
    validate_size((bt, c))
    case = H.Case((bt, c), inputs=dict(x=x, ln_w=ln_w, ln_b=ln_b, w1=w1, b1=b1, w2=w2, b2=b2),
                  outputs={"y": ((bt, c), np.float32)}, params={"eps": eps})
    return H.run(launch, version, case)["y"]


# --- extras: where the time goes --------------------------------------------------------------

STAGE_SIZE = (8192, 768)


def extras(report, mode):
    """Each kernel of v5, v4 and v1 timed alone vs each torch op alone, at 8192x768 (each
    with L2 flushed first, so the stages sum to a little more than the whole)."""
    if mode == "check":
        return
    from common.timing import time_fn

    case = make_case(STAGE_SIZE, np.random.default_rng(30))
    d = H.DeviceCase(case)
    flops1 = 2 * STAGE_SIZE[0] * STAGE_SIZE[1] * 4 * STAGE_SIZE[1]
    rows, rec = [], {}
    for version in ("v5", "v4", "v1"):   # the README's table names these rows
        for name, fn in launch_stages(version, d):
            t = time_fn(fn)
            tf = f"{flops1 / (t.median_ms * 1e-3) / 1e12:.1f}" if ("fc" in name) else ""
            rows.append([f"{version} {name}", f"{t.median_ms * 1e3:.1f}", tf])
            rec[f"{version} {name}"] = t.median_ms
    if torch_or_none() is not None:
        for name, fn in torch_stages(d).items():
            if name == "all":
                continue
            t = time_fn(fn)
            tf = f"{flops1 / (t.median_ms * 1e-3) / 1e12:.1f}" if "addmm" in name else ""
            rows.append([f"torch {name}", f"{t.median_ms * 1e3:.1f}", tf])
            rec[f"torch {name}"] = t.median_ms
    report.section(f"Stages at {H.size_str(STAGE_SIZE)}, each timed alone", rows,
                   ["stage", "us", "TFLOP/s"])
    report.record("stages", rec)


# CURRICULUM.md: faster than torch eager fp32 on the GPT-2 small MLP (B*T = 8192, C = 768)
BAR = [{"sizes": [(8192, 768)], "vs_baseline": 1.0, "baseline": "torch eager fp32"}]
