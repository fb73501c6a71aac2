"""Day 28 driver: multi-head self-attention forward (fp32), five versions of the same layer.

    from days.day28_multi_head_attention.driver import mha, mha_from_torch
    y = mha(x, w_qkv, b_qkv, w_o, b_o, heads=12)          # x [B, T, C]; weights [in, out]
    y = mha(x, ..., heads=12, causal=True)                 # query i sees keys 0..i
    y = mha_from_torch(x, module)                          # a torch.nn.MultiheadAttention's weights

Sizes are BxTxCxH (batch, sequence, model width, heads; C / H = 64 or 128). The causal variant
is checked and timed in extras() (a size has no place for it).
"""
import functools

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference

K = H.Kernels(__file__)
TILE = 128                 # sgemm.cuh's BM = BN
GEMM_THREADS = 256         # sgemm.cuh's THREADS
PERMUTE_THREADS = 256
HEAD_DIMS = (64, 128)      # the head sizes kernel.cu instantiates attention for
MAX_SPLITS = 4             # v4, v5: at most this many K slices in the output GEMM

VERSIONS = {
    "v1": "3 projection GEMMs, permutes to [B,H,T,d] and back",
    "v2": "fused QKV GEMM, attention through strides, no permutes",
    "v3": "v2 + 1/sqrt(d) folded into the Q projection",
    "v4": "v3 + b_o written by the QKV epilogue, split-K output GEMM",
    "v5": "v4 with day 25's GEMM tile (warp tiles, BK 16, cp.async)",
}
BEST = "v3"   # fastest at 8x1024x768x12 (H200, 2026-11-23, .notes/day28_sweep.py: v3 1.566 ms, v4 S=2 1.590, v5 1.721)
SIZE_HELP = "BxTxCxH (batch x sequence x width x heads, C/H = 64 or 128), e.g. 8x1024x768x12"
HEADLINE = (8, 1024, 768, 12)
SIZES = {"small": (2, 17, 128, 2), "default": HEADLINE, "large": (8, 2048, 1024, 16)}
# T = 1 (one key: softmax is 1), 17, 65 and 129 (past one attention tile, not a multiple of 64 or
# 128), B = 1, 2, 3; head dims 64 (C = 64, 192, 320, 384) and 128 (C = 128, 256, 768);
# C = 64, 192, 320 end mid-GEMM-tile (3C = 192, 576, 960 are not multiples of 128); M = B*T =
# 258 and 390 leave partial row tiles; (1, 1, 64, 1) is the smallest layer
CHECK_SIZES = [(1, 1, 64, 1), (2, 1, 128, 1), (1, 17, 64, 1), (2, 17, 128, 1), (1, 65, 192, 3),
               (2, 65, 256, 2), (2, 129, 320, 5), (3, 130, 768, 6), (1, 33, 384, 6)]
# the bar's shape and an awkward one: T = 1000 (not a multiple of any tile), C = 384, 6 heads;
# its output GEMM has 24 x 3 = 72 tiles of 128x128, a quarter of one wave on 132 SMs x 2
AWKWARD = (3, 1000, 384, 6)
BENCH_SIZES = [HEADLINE, AWKWARD]

MHA_EVAL = "torch nn.MultiheadAttention"            # eval(), no_grad: torch's fast path
MHA_TRAIN = "torch nn.MultiheadAttention (train)"   # the module's default mode, same math
SDPA = "torch linear+SDPA"
# CURRICULUM.md: faster than torch.nn.MultiheadAttention fp32 forward at B=8, T=1024, C=768, 12 heads
BAR = [{"sizes": [HEADLINE], "vs_baseline": 1.0, "baseline": MHA_EVAL},
       {"sizes": [HEADLINE], "vs_baseline": 1.0, "baseline": MHA_TRAIN}]


def validate_size(size):
    b, n, c, h = size
    if c % h:
        raise ValueError(f"C = {c} is not a multiple of H = {h} heads")
    if c // h not in HEAD_DIMS:
        raise ValueError(f"head dim C / H = {c // h}: the attention kernels take "
                         f"{' or '.join(map(str, HEAD_DIMS))}")
    if b > 65535 or h > 65535:
        raise ValueError("at most 65535 batches and 65535 heads (attention's grid z and y)")
    m = b * n
    if H.cdiv(m, TILE) > 65535:
        raise ValueError(f"B*T = {m} rows: at most {65535 * TILE} (the GEMMs' grid y holds "
                         f"B*T / {TILE} tiles)")
    A.fits_int32("the QKV buffer [B*T, 3C]", m * 3 * c)


def make_case(size, rng, causal=False):
    """x ~ N(0, 1); weights ~ N(0, 1/C) (so q, k, v and y have unit scale); biases ~ N(0, 1/4)
    (large enough that a bias added twice or never is caught)."""
    b, n, c, h = size
    x = rng.standard_normal((b, n, c), dtype=np.float32)
    w_qkv = rng.standard_normal((c, 3 * c), dtype=np.float32) * np.float32(1 / np.sqrt(c))
    b_qkv = rng.standard_normal(3 * c, dtype=np.float32) * np.float32(0.5)
    w_o = rng.standard_normal((c, c), dtype=np.float32) * np.float32(1 / np.sqrt(c))
    b_o = rng.standard_normal(c, dtype=np.float32) * np.float32(0.5)
    inputs = {"x": x, "w_qkv": w_qkv, "b_qkv": b_qkv, "w_o": w_o, "b_o": b_o}
    return H.Case(size, inputs=inputs, outputs={"y": ((b, n, c), np.float32)},
                  reference=lambda: {"y": reference.mha(x, w_qkv, b_qkv, w_o, b_o, h, causal)},
                  flops=reference.flops(b, n, c, causal), unit="fp32",
                  params={"causal": bool(causal)})


# --- launching ------------------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def attn_config() -> dict:
    """{head dim: (BLOCK_M, THREADS, dynamic smem bytes)} of day 26's attention tile, read from
    kernel.cu's mha_attn_config (the header's constants, whatever its owner tuned them to)."""
    from common.gpu import driver

    ptr, _ = K.module.get_global("mha_attn_config")
    buf = np.empty(6, np.int32)
    driver().memcpy_dtoh(buf, ptr)
    return {64: tuple(int(v) for v in buf[0:3]), 128: tuple(int(v) for v in buf[3:6])}


ATTN_SIG = "PPPPiii" + "q" * 12 + "f"


def attention(d, q, k, v, o, strides, scale, causal, kern=None):
    """One launch of day 26's forward over every (batch, head): q, k, v, o device pointers,
    strides = 12 element strides (q_b, q_h, q_n, k_..., v_..., o_...)."""
    kern = kern or K
    b, n, c, h = d.size
    dim = c // h
    block_m, threads, smem = attn_config()[dim]
    name = f"mha_attn_d{dim}_{'causal' if causal else 'full'}_v1_v2_v3_v4_v5"
    kern(name, ATTN_SIG, dynamic_smem=smem).prepared_call(
        (H.cdiv(n, block_m), h, b), (threads, 1, 1), q, k, v, o, b, h, n, *strides,
        np.float32(scale), shared_size=smem)


def out_splits(m: int, c: int, slots: int) -> int:
    """v4's number of K slices for the output GEMM: the S <= MAX_SPLITS whose waves of
    ceil(M/128) * ceil(C/128) * S blocks, each 1/S of the work, take the least time on `slots`
    concurrent blocks (SMs x blocks per SM); ties go to the smaller S (fewer atomics)."""
    tiles = H.cdiv(m, TILE) * H.cdiv(c, TILE)
    best, best_cost = 1, None
    for s in range(1, MAX_SPLITS + 1):
        if H.cdiv(c, s) < 8:        # a slice shorter than one k-step of 8
            break
        cost = H.cdiv(tiles * s, slots) / s
        if best_cost is None or cost < best_cost - 1e-12:
            best, best_cost = s, cost
    return best


def kchunk(c: int, splits: int) -> int:
    """Each slice's K length: a multiple of 8 (one k-step of the tile); slices cover 0..C."""
    return H.cdiv(H.cdiv(c, splits), 8) * 8


@functools.lru_cache(maxsize=None)
def gemm_slots(version: str = "v4") -> int:
    """Blocks of the version's output GEMM the GPU runs at once: SMs x blocks per SM (2 by the
    kernels' launch bounds, unless shared memory or registers say fewer)."""
    from common.gpu import blocks_per_sm, device_info

    fn = K(f"mha_{version}_out", "PPPiii")
    return (device_info().get("sms") or 132) * max(1, blocks_per_sm(fn, GEMM_THREADS))


def head_major_strides(b, n, c, h) -> tuple:
    """v1's 12 attention strides (batch, head, position for q, k, v, o): every tensor
    contiguous [B, H, T, d]."""
    dim = c // h
    return (h * n * dim, n * dim, dim) * 4


def fused_strides(b, n, c, h) -> tuple:
    """v2-v5: ((q, k, v offsets in the QKV buffer), 12 strides). The QKV GEMM's output row
    (b, t) is [q | k | v], each [H, d]: q of (b, h, t) starts at b*T*3C + t*3C + h*d, k and v
    C and 2C further on; O is [B, T, H, d]: (b, h, t) at b*T*C + t*C + h*d."""
    dim = c // h
    return (0, c, 2 * c), (n * 3 * c, dim, 3 * c) * 3 + (n * c, dim, c)


def _scratch(d, name, n_floats):
    return d.scratch(name, (n_floats,))


def stages(version, d, kern=None, splits=None):
    """[(stage, fn)] that together run `version` on DeviceCase d, in order (extras() times them
    one by one). kern: another build of kernel.cu (the sweep's); splits: v4's and v5's K slices
    (default out_splits)."""
    version = A.version(version, VERSIONS)
    kern = kern or K
    b, n, c, h = d.size
    dim, m = c // h, b * n
    causal = bool(d.params.get("causal", False))
    scale = 1.0 / np.sqrt(dim)
    gemm = lambda cols: ((H.cdiv(cols, TILE), H.cdiv(m, TILE), 1), (GEMM_THREADS, 1, 1))
    ptr = lambda p, floats: int(p) + 4 * floats            # a device pointer moved by `floats`
    if version == "v1":
        q, k, v, o = (_scratch(d, s, m * c) for s in ("q", "k", "v", "o"))         # [B, T, C]
        qh, kh, vh, oh = (_scratch(d, s, m * c) for s in ("qh", "kh", "vh", "oh"))  # [B, H, T, d]
        perm_grid = (min(H.cdiv(m * c // 4, PERMUTE_THREADS), 1 << 20), 1, 1)  # grid-stride
        lin = kern("mha_v1_linear", "PPiPPiii")
        split = kern("mha_v1_split_heads", "PPiiii")
        merge = kern("mha_v1_merge_heads", "PPiiii")

        def proj():
            for i, dst in enumerate((q, k, v)):
                lin.prepared_call(*gemm(c), d.x, ptr(d.w_qkv, i * c), 3 * c, ptr(d.b_qkv, i * c),
                                  dst, m, c, c)

        def permute_in():
            for src, dst in ((q, qh), (k, kh), (v, vh)):
                split.prepared_call(perm_grid, (PERMUTE_THREADS, 1, 1), src, dst, b, n, h, dim)

        contiguous = head_major_strides(b, n, c, h)

        def attn():
            attention(d, qh, kh, vh, oh, contiguous, scale, causal, kern)

        def permute_out():
            merge.prepared_call(perm_grid, (PERMUTE_THREADS, 1, 1), oh, o, b, n, h, dim)

        def out():
            lin.prepared_call(*gemm(c), o, d.w_o, c, d.b_o, d.y, m, c, c)

        return [("QKV projection", proj), ("head permutes", permute_in), ("attention", attn),
                ("head permutes (back)", permute_out), ("output projection", out)]

    qkv = _scratch(d, "qkv", m * 3 * c)      # [B, T, 3, H, d]
    o = _scratch(d, "o", m * c)              # [B, T, H, d]
    offsets, strides = fused_strides(b, n, c, h)
    attn_scale = scale if version == "v2" else 1.0   # v3-v5: q arrives scaled

    def attn():
        attention(d, *(ptr(qkv, off) for off in offsets), o, strides, attn_scale, causal, kern)

    if version == "v2":
        def proj():
            kern("mha_v2_qkv", "PPPPii").prepared_call(*gemm(3 * c), d.x, d.w_qkv, d.b_qkv, qkv,
                                                       m, c)
    elif version == "v3":
        def proj():
            kern("mha_v3_qkv", "PPPPiif").prepared_call(*gemm(3 * c), d.x, d.w_qkv, d.b_qkv, qkv,
                                                        m, c, np.float32(scale))
    else:   # v4, v5: the same epilogues, day 8's or day 25's tile
        def proj():
            kern(f"mha_{version}_qkv", "PPPPPPiif").prepared_call(
                *gemm(3 * c), d.x, d.w_qkv, d.b_qkv, qkv, d.b_o, d.y, m, c, np.float32(scale))

    if version in ("v4", "v5"):
        s = splits or out_splits(m, c, gemm_slots(version))
        chunk = kchunk(c, s)
        s = H.cdiv(c, chunk)

        def out():
            (gx, gy, _), block = gemm(c)
            kern(f"mha_{version}_out", "PPPiii").prepared_call((gx, gy, s), block, o, d.w_o,
                                                               d.y, m, c, chunk)
        label = f"output projection (split-K {s})"
    else:
        def out():
            kern("mha_v2_out", "PPPPii").prepared_call(*gemm(c), o, d.w_o, d.b_o, d.y, m, c)
        label = "output projection"
    return [("QKV projection", proj), ("attention", attn), (label, out)]


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    for _, fn in stages(version, d):
        fn()


# --- torch ----------------------------------------------------------------------------------

def torch_module(d):
    """A torch.nn.MultiheadAttention(C, H, batch_first=True) on the GPU holding the case's
    weights (torch keeps them [out, in]: the transposes of ours), TF32 off."""
    torch = torch_fp32()
    b, n, c, h = d.size
    mod = torch.nn.MultiheadAttention(c, h, batch_first=True, device="cuda", dtype=torch.float32)
    with torch.no_grad():
        mod.in_proj_weight.copy_(as_torch(d.array("w_qkv")).t())
        mod.in_proj_bias.copy_(as_torch(d.array("b_qkv")))
        mod.out_proj.weight.copy_(as_torch(d.array("w_o")).t())
        mod.out_proj.bias.copy_(as_torch(d.array("b_o")))
    return mod


def torch_stages(d):
    """torch's composition: F.linear (cuBLAS), SDPA on strided q, k, v views, the [B, H, T, d]
    -> [B, T, C] copy, F.linear. [(stage, fn)]; the last fn returns y."""
    torch = torch_fp32()
    F = torch.nn.functional
    b, n, c, h = d.size
    causal = bool(d.params.get("causal", False))
    x = as_torch(d.array("x"))
    w_qkv, b_qkv = as_torch(d.array("w_qkv")).t(), as_torch(d.array("b_qkv"))  # [3C, C] view
    w_o, b_o = as_torch(d.array("w_o")).t(), as_torch(d.array("b_o"))
    st = {}

    def proj():
        st["q"], st["k"], st["v"] = (F.linear(x, w_qkv, b_qkv).view(b, n, 3, h, c // h)
                                     .permute(2, 0, 3, 1, 4).unbind(0))      # [B, H, T, d] views

    def attn():
        st["o"] = F.scaled_dot_product_attention(st["q"], st["k"], st["v"], is_causal=causal)

    def merge():
        st["om"] = st["o"].transpose(1, 2).reshape(b, n, c)

    def out():
        return F.linear(st["om"], w_o, b_o)

    return [("QKV projection", proj), ("attention", attn), ("head permutes (back)", merge),
            ("output projection", out)]


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    causal = bool(d.params.get("causal", False))
    n = d.size[1]
    mod = torch_module(d)
    x = as_torch(d.array("x"))
    mask = torch.nn.Transformer.generate_square_subsequent_mask(n, device="cuda") if causal else None
    parts = torch_stages(d)

    def module(train):
        mod.train(train)
        with torch.no_grad():
            return mod(x, x, x, need_weights=False, attn_mask=mask, is_causal=causal)[0]

    def composed():
        out = None
        for _, fn in parts:
            out = fn()
        return out

    return {MHA_EVAL: lambda: module(False), MHA_TRAIN: lambda: module(True), SDPA: composed}


# --- the public functions -------------------------------------------------------------------

def _run(x, w_qkv, b_qkv, w_o, b_o, heads, causal, version):
    bsz, n, c = x.shape
    validate_size((bsz, n, c, heads))
    case = H.Case((bsz, n, c, heads),
                  inputs={"x": x, "w_qkv": w_qkv, "b_qkv": b_qkv, "w_o": w_o, "b_o": b_o},
                  outputs={"y": ((bsz, n, c), np.float32)}, params={"causal": causal})
    return H.run(launch, version, case)["y"]


def mha(x, w_qkv, b_qkv, w_o, b_o, heads, causal=False, version=BEST):
    """Multi-head self-attention forward on the GPU (float32), as torch.nn.MultiheadAttention
    with batch_first=True and need_weights=False computes it: x [B, T, C]; w_qkv [C, 3C] and
    b_qkv [3C] (columns q | k | v, head h in columns h*d .. h*d+d-1 of each third); w_o [C, C],
    b_o [C]; heads H with C / H = 64 or 128. Weights are [in, out] (reference.from_torch
    converts torch's). causal: query t attends to keys 0..t. Returns y [B, T, C]. B = 0 or
    T = 0 returns an empty array without a launch."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=3, what="[B, T, C]")
    bsz, n, c = x.shape
    heads = A.count(heads, "heads", low=1)
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {type(causal).__name__} {causal!r}")
    if c == 0:
        raise ValueError("x has C = 0 features: the layer needs C = H * head dim > 0")
    if c % heads:
        raise ValueError(f"x has C = {c} features, not a multiple of heads = {heads}")
    if c // heads not in HEAD_DIMS:
        raise ValueError(f"head dim C / heads = {c // heads}: the kernels take "
                         f"{' or '.join(map(str, HEAD_DIMS))}")
    w_qkv = A.floats(w_qkv, "w_qkv", shape=(c, 3 * c), what="[C, 3C] ([in, out])")
    b_qkv = A.floats(b_qkv, "b_qkv", shape=(3 * c,), what="[3C]")
    w_o = A.floats(w_o, "w_o", shape=(c, c), what="[C, C] ([in, out])")
    b_o = A.floats(b_o, "b_o", shape=(c,), what="[C]")
    if bsz == 0 or n == 0:
        return np.zeros((bsz, n, c), np.float32)
    return _run(x, w_qkv, b_qkv, w_o, b_o, heads, bool(causal), version)


def mha_from_torch(x, module, causal=False, version=BEST):
    """mha() with the weights of a torch.nn.MultiheadAttention (batch_first=True, packed
    in-projection with bias, no bias_k/bias_v, no zero attention). x: numpy [B, T, C]."""
    for attr, want in (("in_proj_weight", "a packed in-projection (kdim = vdim = embed_dim)"),
                       ("in_proj_bias", "bias=True")):
        if getattr(module, attr, None) is None:
            raise ValueError(f"the module must have {want}")
    if not getattr(module, "batch_first", False):
        raise ValueError("the module must be batch_first=True (x is [B, T, C])")
    if getattr(module, "bias_k", None) is not None or getattr(module, "add_zero_attn", False):
        raise ValueError("add_bias_kv and add_zero_attn are not part of this layer")
    host = lambda t: t.detach().float().cpu().numpy()
    w_qkv, b_qkv, w_o, b_o = reference.from_torch(host(module.in_proj_weight),
                                                  host(module.in_proj_bias),
                                                  host(module.out_proj.weight),
                                                  host(module.out_proj.bias))
    return mha(x, w_qkv, b_qkv, w_o, b_o, module.num_heads, causal, version)


# --- extras: the causal layer, and where the time goes --------------------------------------

CAUSAL_CHECK_SIZES = [(1, 1, 64, 1), (2, 17, 128, 1), (1, 65, 192, 3), (2, 129, 320, 5),
                      (1, 33, 384, 6)]


def _stage_key(name: str) -> str:
    return name.split(" (split")[0]


def stage_table(size=HEADLINE, versions=("v1", None)):
    """Each stage of v1 and of BEST timed alone (L2 flushed before each run), beside the stages
    of torch's composition and torch's whole nn.MultiheadAttention (eval, no_grad). Returns
    (rows, headers): stage | per column ms and TFLOP/s."""
    from common.timing import time_fn

    case = make_case(size, np.random.default_rng(28))
    d = H.DeviceCase(case)
    b, n, c, h = size
    m = b * n
    work = {"QKV projection": 2 * m * c * 3 * c, "attention": 4 * b * n * n * c,
            "output projection": 2 * m * c * c, "sum of stages": case.flops,
            "whole forward": case.flops}
    cols = {}
    for v in versions:
        v = v or BEST
        launch(v, d)                       # fill the intermediates the stages read
        col = {_stage_key(name): time_fn(fn).median_ms for name, fn in stages(v, d)}
        col["sum of stages"] = sum(col.values())
        col["whole forward"] = time_fn(lambda v=v: launch(v, d)).median_ms
        cols[v] = col
    if torch_or_none() is not None:
        try:
            parts = torch_stages(d)
            for _, fn in parts:                # fill the intermediates
                fn()
            col = {name: time_fn(fn).median_ms for name, fn in parts}
            col["sum of stages"] = sum(col.values())
            col["whole forward"] = time_fn(baselines(d)[MHA_EVAL]).median_ms  # the module itself
            cols["torch"] = col
        except Exception:   # the table keeps our columns; the bench table says what torch did
            pass
    order = ["QKV projection", "head permutes", "attention", "head permutes (back)",
             "output projection", "sum of stages", "whole forward"]
    rows = []
    for name in order:
        if not any(name in col for col in cols.values()):
            continue
        row = [name]
        for col in cols.values():
            ms = col.get(name)
            row += ["-" if ms is None else f"{ms:.4f}",
                    f"{work[name] / (ms * 1e-3) / 1e12:.1f}" if ms and name in work else "-"]
        rows.append(row)
    label = {"v1": "v1", (versions[-1] or BEST): "best", "torch": "torch"}
    headers = ["stage"] + [f"{label.get(v, v)} {unit}" for v in cols for unit in ("ms", "TFLOP/s")]
    return rows, headers


def torch_kernels(size=HEADLINE):
    """[kernel name (cut to 100 characters), microseconds] of one nn.MultiheadAttention forward
    (eval, no_grad), as the profiler records them: what torch really runs."""
    from common.baselines import kernels_launched

    d = H.DeviceCase(make_case(size, np.random.default_rng(28)))
    fn = baselines(d)[MHA_EVAL]
    fn()                                   # warm-up: cuBLAS handles, workspace
    return [[name[:100], f"{us:.1f}"] for name, us in kernels_launched(fn)]


def causal_rows(report, sizes, timed):
    """Every version with the causal mask: checked at `sizes`, and if timed, timed beside torch
    (the module with is_causal=True, and SDPA with is_causal=True). Rows: version | size | ms |
    vs torch MHA | max err | ok."""
    from common.check import compare
    from common.runner import check_and_time, to_host
    from common.timing import time_fn

    rows = []
    for size in sizes:
        case = make_case(size, np.random.default_rng(280), causal=True)
        case.seed = 280
        d = H.DeviceCase(case)
        got = []
        for v in VERSIONS:
            r = check_and_time(report, f"{v} causal", lambda dd, v=v: launch(v, dd), case, d,
                               timed=timed)
            got.append([v, r.get("median_ms"), r["max_err"], r["ok"]])
        if timed and torch_or_none() is not None:
            for name, fn in baselines(d).items():
                try:   # a torch call that fails must not stop the day's run
                    c = compare(to_host(fn()).reshape(case.outputs["y"][0]),
                                case.expected()["y"], case.tolerance()["y"], name)
                    got.append([name, time_fn(fn).median_ms, c.max_abs, c.ok])
                except Exception as e:
                    report.say(f"  causal {name} not timed: {type(e).__name__}: {e}")
        ref = next((ms for name, ms, _, _ in got if name == MHA_EVAL), None)
        for name, ms, err, ok in got:
            rows.append([name, H.size_str(size), "-" if ms is None else f"{ms:.4f}",
                         f"{ref / ms:.2f}x" if ref and ms else "-", f"{err:.2g}",
                         "ok" if ok else "FAIL"])
    return rows


def extras(report, mode):
    timed = mode != "check"
    rows = causal_rows(report, [HEADLINE] if timed else CAUSAL_CHECK_SIZES, timed)
    report.section("causal (query t sees keys 0..t)", rows,
                   ["version", "size", "ms", "vs torch MHA", "max err", "ok"])
    if timed and torch_or_none() is not None:
        try:
            rows = torch_kernels()
            report.section(f"what torch launches (nn.MultiheadAttention eval, "
                           f"{H.size_str(HEADLINE)}, one forward, profiler times)", rows,
                           ["kernel", "us"])
        except Exception as e:
            report.say(f"  torch's kernels not listed: {type(e).__name__}: {e}")
    if timed:
        rows, headers = stage_table()
        report.section(f"where the time goes ({H.size_str(HEADLINE)}; best = {BEST}; each stage "
                       "timed alone; torch: F.linear, SDPA, copy, F.linear, and its whole "
                       "forward is nn.MultiheadAttention)", rows, headers)
