"""Day 9 driver: LayerNorm forward, the llm.c ladder (eight versions), checked against float64.

    from days.day09_layer_norm.driver import layer_norm
    out, mean, rstd = layer_norm(x, weight, bias)          # numpy in, numpy out (float32)
    out, mean, rstd = layer_norm(x, weight, bias, version="v5")
"""
import functools

import numpy as np

from common import args as A
from common import harness as H
from common.gpu import blocks_per_sm, device_info, driver
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
EPS = reference.EPS

VERSIONS = {
    "v1": "one thread per row, 3 loops over the row",
    "v2": "3 kernels: mean, rstd, normalize",
    "v3": "one warp per row, shuffles, 3 loops",
    "v4": "block per row, float4, row in registers (C%4!=0: scalar)",
    "v5": "warp per row, row in registers (C%4!=0: scalar; = v4 for C>2048 or odd C>1024)",
    "v6": "v5 persistent, next row prefetched (= v5 for C>1024 or C%4!=0)",
    "v7": "rows by bulk copy into smem slots (= v6 for C>2048, C%4!=0, pre-sm_90)",
    "v8": "any width: scalar head/tail + float4 body (C % 4 == 0: = v7)",
}
BEST = "v8"   # the default of the public functions: full float4 speed at every width
SIZE_HELP = "ROWSxC (rows = B*T tokens, C channels), e.g. 8192x768"
SIZES = {"small": (64, 768), "default": (8192, 768), "large": (8192, 8192)}
# Widths: 1, 2, 3 (rows shorter than a float4), 5, 6, 7, 33, 767, 1001, 1023, 1025, 2045 (odd:
# every head length 0..3 appears in any 4 consecutive rows), 2050 (C % 4 == 2: heads 0 and 2),
# 768, 2048, 764, 2044 (aligned); 2049, 4097, 8191, 16387 (v8's block kernel; 16387 is its widest),
# 8192; 8193, 16388, 16389 (wider than registers: three loops). 1000 x 3, 5000 x 767,
# 4000 x 1023, 3300 x 2045 and 5300 x 2044 give the warps of v7 / v8 several rows each (every
# slot refilled, both barrier phases waited on).
CHECK_SIZES = [(1, 1), (9, 1), (6, 2), (8, 3), (9, 5), (7, 6), (9, 7), (7, 33), (33, 767),
               (5, 1001), (17, 768), (9, 2048), (5, 2049), (6, 2050), (5, 2052), (6, 1023),
               (5, 1025), (5, 4097), (4, 8191), (4, 8192), (3, 8193), (4, 16387), (2, 16388),
               (5, 16389), (1000, 3), (1025, 64), (1, 4), (5000, 764), (5000, 767),
               (4000, 1023), (3300, 2045), (5300, 2044)]
# 8192 rows (B*T of a GPT-2 batch) at C = 768 (GPT-2 small), 1023 and 4097 (odd: rows not
# 16-byte aligned), 2048 and 8192
BENCH_SIZES = [(8192, 768), (8192, 1023), (8192, 2048), (8192, 4097), (8192, 8192)]
# CURRICULUM.md: >= 80% of the memory ceiling at 8192 rows for C = 1023 .. 8192; at C = 768
# (50 MB: too small to reach the full rate) >= 90% of a copy of the same bytes; faster than
# torch's layer_norm everywhere.
BAR = [{"sizes": [(8192, 1023), (8192, 2048), (8192, 4097), (8192, 8192)], "pct": 80,
        "vs_baseline": 1.0},
       {"sizes": [(8192, 768)], "size_pct": 90, "vs_baseline": 1.0}]

# Cases up to this many elements (every CHECK_SIZES entry of at most 4M elements and "small")
# carry stress rows (offset by 1e4, constant, nearly constant...); larger ones are plain N(0, 1)
# activations, so the benchmark compares with torch on the data LayerNorm usually sees.
STRESS_MAX_ELEMENTS = 1 << 22

V1_THREADS = 64     # v1: 8192 rows -> 128 blocks, one per SM
BLOCK = 256         # v2 kernels; v3 and v5 as 8 warps (8 rows) per block
V4_MAX_THREADS = 512
V4_ITEMS = {4: (1, 2, 4, 8), 1: (1, 2, 4, 8, 16)}  # per VEC: rows up to 16384 / 8192 floats
V5_ITEMS = {4: (1, 2, 4, 6, 8, 12, 16), 1: (1, 2, 4, 8, 16, 32)}


def validate_size(size):
    n, c = size
    if n > 2 ** 31 - 1 or c > 2 ** 31 - 1:
        raise ValueError("rows and C must each be below 2^31 (the kernels take them as int32)")


def stress_rows(rng, n, c):
    """Rows that break float32 statistics done the obvious way, by row index r % 6:
    0: 1e4 + N(0,1)   1: N(0,1)   2: 3e3 + 0.5 N(0,1)   3: 100 + 10 N(0,1)
    4: constant 2500.25 (var = 0: rstd = 1/sqrt(eps), out = bias)   5: 1e-3 N(0,1) (var < eps)"""
    z = rng.standard_normal((n, c))
    offset = np.array([1e4, 0.0, 3e3, 100.0, 2500.25, 0.0])
    spread = np.array([1.0, 1.0, 0.5, 10.0, 0.0, 1e-3])
    kind = np.arange(n) % 6
    return (offset[kind, None] + spread[kind, None] * z).astype(np.float32)


def make_case(size, rng, stress=None):
    n, c = size
    if stress is None:
        stress = n * c <= STRESS_MAX_ELEMENTS
    x = stress_rows(rng, n, c) if stress else rng.standard_normal((n, c)).astype(np.float32)
    w = (1.0 + 0.1 * rng.standard_normal(c)).astype(np.float32)
    b = (0.1 * rng.standard_normal(c)).astype(np.float32)

    def ref():
        out, mean, rstd = reference.layer_norm(x, w, b, EPS)
        return {"out": out, "mean": mean, "rstd": rstd}

    return H.Case(size, inputs={"x": x, "w": w, "b": b},
                  outputs={"out": ((n, c), np.float32), "mean": ((n,), np.float32),
                           "rstd": ((n,), np.float32)},  # "out" first: baselines compare it
                  reference=ref, params={"eps": EPS},
                  # read x, weight, bias once; write out, mean, rstd once
                  bytes=2 * x.nbytes + 2 * w.nbytes + 2 * n * 4)


def _vec(c):
    return 4 if c % 4 == 0 else 1  # float4 needs every row 16-byte aligned


def v4_config(c):
    """(kernel, threads) for v4: the fewest register items per thread that fit the row in at
    most 512 threads; rows wider than that take the three-loop kernel."""
    vec = _vec(c)
    nvec = c // vec
    for items in V4_ITEMS[vec]:
        threads = 32 * H.cdiv(H.cdiv(nvec, items), 32)
        if threads <= V4_MAX_THREADS:
            return f"layernorm_v4_vec{vec}_items{items}", threads
    return f"layernorm_v4_long_vec{vec}", V4_MAX_THREADS


def v5_config(c):
    """(kernel, threads) for v5: a warp per row when the row fits 32 lanes' registers."""
    vec = _vec(c)
    per_lane = H.cdiv(c // vec, 32)
    for items in V5_ITEMS[vec]:
        if per_lane <= items:
            return f"layernorm_v5_vec{vec}_items{items}", BLOCK
    return v4_config(c)


V6_ITEMS = (1, 2, 4, 6, 8)  # float4 per lane: rows up to 1024 floats


def v6_config(c):
    """(kernel, threads) for v6: persistent warps for C <= 1024 with C % 4 == 0, else v5."""
    if c % 4 == 0:
        per_lane = H.cdiv(c // 4, 32)
        for items in V6_ITEMS:
            if per_lane <= items:
                return f"layernorm_v6_items{items}", BLOCK
    return v5_config(c)


V7_ITEMS = (1, 2, 4, 6, 8, 12, 16)  # float4 per lane: rows up to 2048 floats
V7_WARPS = 8                         # 256 threads per block


def v7_config(c):
    """(kernel, slots per warp, shared bytes) for v7, or None where it does not apply: a GPU
    before Hopper (no cp.async.bulk), C % 4 != 0 (rows must be 16-byte aligned) or C > 2048.
    One slot per warp up to C = 1024, two beyond: the best of the sweeps in
    .notes/day09_experiments.md (more slots in flight were slower)."""
    info = device_info()
    if c % 4 or int(info["compute_capability"].split(".")[0]) < 9:
        return None
    per_lane = H.cdiv(c // 4, 32)
    items = next((i for i in V7_ITEMS if per_lane <= i), None)
    if items is None:
        return None
    for slots in ((1,) if c <= 1024 else (2, 1)):
        smem = H.cdiv(V7_WARPS * slots * 8, 128) * 128 + V7_WARPS * slots * c * 4
        if smem <= (info["smem_per_block_optin"] or 48 * 1024):
            return f"layernorm_v7_items{items}", slots, smem
    return None


SIG = "PPPPPPiif"  # x, w, b, out, mean, rstd, N, C, eps

V8_ROWS_ITEMS = (1, 2, 4, 6, 8, 12, 16)  # float4 per lane: bodies up to 512 float4 (C <= 2048)
V8_BLOCK_ITEMS = (1, 2, 4, 8)            # float4 per thread, <= 512 threads: up to 4096 float4
V8_WARPS = 8                             # a multiple of 4: all rows of a warp split alike


def v8_slots(items):
    """Slots per warp of v8's rows kernel: one up to 8 float4 per lane (C <= 1024: two blocks of
    8 warps per SM, 16 rows in flight); two beyond (one block per SM, registers allow no more:
    16 rows in flight again)."""
    return 1 if items <= 8 else 2


def v8_config(c, hopper=True):
    """(kind, kernel, threads, dynamic shared bytes) of v8 at width c:
    rows   C <= 2048 on sm_90: warps fed by bulk copies, ITEMS float4 per lane
    block  wider rows, or any row before sm_90: a block per row, ITEMS float4 per thread
    long   rows whose body (C // 4 float4) is more than 512 threads x 8 float4 hold"""
    nvec = c // 4  # the longest body a row of this width can have
    if hopper and c <= 2048:
        items = next(i for i in V8_ROWS_ITEMS if H.cdiv(nvec, 32) <= i)
        p = v8_slots(items)
        smem = H.cdiv(V8_WARPS * p * 8, 128) * 128 + V8_WARPS * p * nvec * 16
        return "rows", f"layernorm_v8_rows_items{items}_p{p}", 32 * V8_WARPS, smem
    # blocks of at most 256 threads while 8 float4 a thread hold the row (the sweep: at C = 4097,
    # 256 x 4 float4 took 72.7 us, 512 x 2 took 82.9 us), then up to 512
    for limit in (256, V4_MAX_THREADS):
        for items in V8_BLOCK_ITEMS:
            threads = 32 * max(1, H.cdiv(H.cdiv(nvec, items), 32))
            if threads <= limit:
                return "block", f"layernorm_v8_block_items{items}", threads, 0
    return "long", "layernorm_v8_long", V4_MAX_THREADS, 0


@functools.lru_cache(maxsize=None)
def _v8_launch(n, c):
    """(kernel, grid, block, shared bytes) for v8 on this GPU: the rows kernel as one wave of
    blocks (each with a contiguous share of the rows), the others a block per row."""
    info = device_info()
    kind, name, threads, smem = v8_config(c, int(info["compute_capability"].split(".")[0]) >= 9)
    fn = K(name, SIG, dynamic_smem=smem)
    grid = min(info["sms"] * blocks_per_sm(fn, threads, smem), n) if kind == "rows" else n
    return fn, (grid, 1, 1), (threads, 1, 1), smem


def kernel_of(version, c):
    """The kernel v4 to v8 runs at width c (they fall back to an earlier version's kernel
    where theirs does not apply; VERSIONS says where). v8's own kernels are for widths that
    are not a multiple of 4: where every row is aligned, v7's path (or v4's) is faster."""
    if version == "v8":
        if c % 4:
            return v8_config(c)[1]
        version = "v7"
    if version == "v7":
        v7 = v7_config(c)
        if v7 is not None:
            return v7[0]
        version = "v6"
    return {"v4": v4_config, "v5": v5_config, "v6": v6_config}[version](c)[0]


def same_as(version, size):
    """The earlier version whose kernel `version` runs at this size (shown as "= v4" in the
    tables, not timed again), or None."""
    if version not in ("v5", "v6", "v7", "v8"):
        return None
    mine = kernel_of(version, size[1])
    return next((v for v in ("v4", "v5", "v6", "v7") if v < version
                 and kernel_of(v, size[1]) == mine), None)


def launch(version, d):
    if version not in VERSIONS:  # an unknown name never runs another version
        A.version(version, VERSIONS)
    n, c = d.size
    eps = np.float32(d.params.get("eps", EPS))
    args = (d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, eps)
    if version == "v1":
        K("layernorm_v1", SIG).prepared_call((H.cdiv(n, V1_THREADS), 1, 1), (V1_THREADS, 1, 1),
                                             *args)
    elif version == "v2":
        shift, corr = d.scratch("shift", n), d.scratch("corr", n)
        K("layernorm_v2_mean", "PPii").prepared_call((n, 1, 1), (BLOCK, 1, 1), d.x, shift, n, c)
        K("layernorm_v2_rstd", "PPPPPiif").prepared_call((n, 1, 1), (BLOCK, 1, 1), d.x, shift,
                                                         corr, d.mean, d.rstd, n, c, eps)
        K("layernorm_v2_normalize", "PPPPPPPii").prepared_call(
            (H.cdiv(c, BLOCK), min(n, 65535), 1), (BLOCK, 1, 1),
            d.x, d.w, d.b, shift, corr, d.rstd, d.out, n, c)
    elif version == "v3":
        K("layernorm_v3", SIG).prepared_call((H.cdiv(n, BLOCK // 32), 1, 1), (BLOCK, 1, 1), *args)
    elif version == "v8" and c % 4 == 0:  # every row aligned: v7's path (kernel_of, same_as)
        launch("v7", d)
    elif version == "v8":
        fn, grid, block, smem = _v8_launch(n, c)
        fn.prepared_call(grid, block, *args, shared_size=smem)
    elif version == "v7" and (v7 := v7_config(c)) is not None:
        name, slots, smem = v7
        fn = K(name, SIG + "i", dynamic_smem=smem)
        threads = 32 * V7_WARPS
        # one wave of blocks, each with a contiguous share of the rows
        grid = min(device_info()["sms"] * blocks_per_sm(fn, threads, smem), n)
        fn.prepared_call((grid, 1, 1), (threads, 1, 1), *args, slots, shared_size=smem)
    else:  # v4, v5, v6, and v7 where it does not apply (it runs v6: VERSIONS, same_as)
        name, threads = {"v4": v4_config, "v5": v5_config, "v6": v6_config,
                         "v7": v6_config}[version](c)
        if "_v6_" in name:  # persistent: one full wave of blocks, no more than the rows need
            fn = K(name, SIG)
            grid = min(device_info()["sms"] * blocks_per_sm(fn, threads), H.cdiv(n, threads // 32))
        elif "_v5_" in name:  # warp per row: 8 rows per block
            grid = H.cdiv(n, threads // 32)
        else:               # block per row
            grid = n
        K(name, SIG).prepared_call((grid, 1, 1), (threads, 1, 1), *args)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    n, c = d.size
    x, w, b = (as_torch(d.array(k)) for k in ("x", "w", "b"))
    F = torch.nn.functional
    return {"torch layer_norm": lambda: F.layer_norm(x, (c,), w, b, EPS)}


def _inputs(x, weight, bias, eps):
    """The checked arguments of layer_norm and demo_stats: x [rows, C], weight and bias [C]
    as float32, eps a positive float32."""
    x = A.floats(x, "x", ndim=2, what="[rows, C]")
    n, c = x.shape
    w = A.floats(weight, "weight", shape=(c,), what="(one per column of x)")
    b = A.floats(bias, "bias", shape=(c,), what="(one per column of x)")
    eps = A.real(eps, "eps", low=0, low_open=True)
    if np.float32(eps) == 0:
        raise ValueError(f"eps = {eps:g} is 0 in float32, the precision of the kernels; "
                         "use at least 1e-38")
    A.fits_int32("x", n, "rows")
    A.fits_int32("x", c, "columns")
    if n and not c:
        raise ValueError(f"x has {n} rows of 0 columns; the mean of an empty row is undefined")
    return x, w, b, eps


def _empty(c):
    return (np.empty((0, c), np.float32), np.empty(0, np.float32), np.empty(0, np.float32))


def layer_norm(x, weight, bias, eps=EPS, version=BEST):
    """LayerNorm over the last axis of a 2-D array [rows, C] on the GPU, in float32:
    (out [rows, C], mean [rows], rstd [rows]), with rstd = 1 / sqrt(biased variance + eps).

    x, weight and bias are converted to float32 (integers and other float widths are; complex,
    bool and strings are refused with a TypeError). weight and bias must have C elements. An x
    with no rows returns three empty arrays without launching anything; rows of 0 columns
    raise ValueError (their mean is undefined). An unknown version raises ValueError naming
    the versions."""
    version = A.version(version, VERSIONS)
    x, w, b, eps = _inputs(x, weight, bias, eps)
    n, c = x.shape
    if n == 0:
        return _empty(c)
    case = H.Case(x.shape, inputs={"x": x, "w": w, "b": b},
                  outputs={"out": ((n, c), np.float32), "mean": ((n,), np.float32),
                           "rstd": ((n,), np.float32)}, params={"eps": eps})
    r = H.run(launch, version, case)
    return r["out"], r["mean"], r["rstd"]


# --- the stability table ------------------------------------------------------------------

DEMO_METHODS = {0: "one pass E[x^2]-E[x]^2", 1: "Welford + Chan merge", 2: "two-pass",
                3: "corrected two-pass"}


def demo_stats(x, weight, bias, method, eps=EPS):
    """The demo kernel (not a version): (out, mean, rstd) with the row statistics computed by
    DEMO_METHODS[method] (0..3). Arguments as for layer_norm; no rows: three empty arrays."""
    method = A.count(method, "method", low=min(DEMO_METHODS), high=max(DEMO_METHODS))
    x, w, b, eps = _inputs(x, weight, bias, eps)
    n, c = x.shape
    if n == 0:
        return _empty(c)
    case = H.Case(x.shape, inputs={"x": x, "w": w, "b": b},
                  outputs={"out": ((n, c), np.float32), "mean": ((n,), np.float32),
                           "rstd": ((n,), np.float32)})
    d = H.DeviceCase(case)
    d.poison_outputs()
    K("layernorm_demo_stats", SIG + "i").prepared_call(
        (H.cdiv(n, BLOCK // 32), 1, 1), (BLOCK, 1, 1),
        d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(eps), method)
    driver().Context.synchronize()
    r = d.outputs()
    return r["out"], r["mean"], r["rstd"]


def stability_rows(rows=64, cols=768, offsets=(0.0, 1e2, 1e3, 1e4)):
    """For rows offset by each value (unit spread): which methods meet the float32 tolerance.
    Returns (table rows, column headers)."""
    from common.check import compare_all

    rows = A.count(rows, "rows", low=1)
    cols = A.count(cols, "cols", low=1)
    offsets = [A.real(o, "offset") for o in offsets]
    rng = np.random.default_rng(9)
    w = (1.0 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
    b = (0.1 * rng.standard_normal(cols)).astype(np.float32)
    z = rng.standard_normal((rows, cols))
    methods = [(name, lambda x, m=m: demo_stats(x, w, b, m)) for m, name in DEMO_METHODS.items()]
    methods.append((f"{BEST} (this day's best)", lambda x: layer_norm(x, w, b, version=BEST)))
    torch = torch_or_none()
    if torch is not None:
        def torch_ln(x):
            t = torch.nn.functional.layer_norm(torch.as_tensor(x, device="cuda"), (cols,),
                                               torch.as_tensor(w, device="cuda"),
                                               torch.as_tensor(b, device="cuda"), EPS)
            return t.cpu().numpy(), None, None
        methods.append(("torch layer_norm (out only)", torch_ln))

    table = []
    for name, fn in methods:
        line = [name]
        for off in offsets:
            x = (off + z).astype(np.float32)
            out, mean, rstd = reference.layer_norm(x, w, b, EPS)
            got = fn(x)
            refs = {"out": out, "mean": mean, "rstd": rstd}
            outs = {"out": got[0], "mean": got[1], "rstd": got[2]}
            keys = [k for k in refs if outs[k] is not None]
            r = compare_all({k: outs[k] for k in keys}, {k: refs[k] for k in keys}, 1e-5)
            line.append(f"ok ({r.rel_l2:.0e})" if r.ok else "FAIL " + r.message.split(":")[0]
                        + (f" {r.rel_l2:.0e}" if np.isfinite(r.rel_l2) else " NaN"))
        table.append(line)
    return table, [f"offset {o:g}" for o in offsets]


def extras(report, mode):
    rows, heads = stability_rows()
    report.section("row statistics in float32, rows = offset + N(0,1), 64x768 "
                   "(ok = out, mean and rstd within the float32 tolerance 1e-5)",
                   rows, ["method"] + heads)
    report.record("stability", {"headers": ["method"] + heads, "rows": rows})
