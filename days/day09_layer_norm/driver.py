"""Day 9 driver: LayerNorm forward, the llm.c ladder (five versions), checked against float64.

    from days.day09_layer_norm.driver import layer_norm
    out, mean, rstd = layer_norm(x, weight, bias, version="v5")   # numpy in, numpy out (float32)
"""
import numpy as np

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
    "v4": "block per row, float4, row in registers",
    "v5": "warp per row, float4, row in registers (C>2048: v4)",
    "v6": "v5 persistent, next row prefetched (C>1024: v5)",
    "v7": "rows by bulk copy into smem slots (sm_90; C>2048: v6)",
}
SIZE_HELP = "ROWSxC (rows = B*T tokens, C channels), e.g. 8192x768"
SIZES = {"small": (64, 768), "default": (8192, 768), "large": (8192, 8192)}
# widths: 1 (var = 0), 33, 767, 1001 (scalar paths), 768 / 2048 (v5 float4 in registers),
# 2052 (just past v5: v4), 1023 / 1025 (v5's scalar limit), 8191 / 8192 (v4's widest register
# rows, scalar / float4), 8193 / 16388 (wider than registers: the three-loop fallback, scalar /
# float4); rows 1, 3, 5, 7, 17, 33, 1000, 1025.
CHECK_SIZES = [(1, 1), (7, 33), (33, 767), (5, 1001), (17, 768), (9, 2048), (5, 2052),
               (6, 1023), (5, 1025), (3, 8191), (4, 8192), (3, 8193), (2, 16388), (1000, 3),
               (1025, 64), (1, 4), (5000, 764), (5300, 2044)]
BENCH_SIZES = [(8192, 768), (8192, 2048), (8192, 8192)]

# Cases up to this many elements (every CHECK_SIZES entry and "small") carry stress rows
# (offset by 1e4, constant, nearly constant...); larger ones are plain N(0, 1) activations, so
# the benchmark compares with torch on the data LayerNorm usually sees.
STRESS_MAX_ELEMENTS = 1 << 22

V1_THREADS = 64     # v1: 8192 rows -> 128 blocks, one per SM
BLOCK = 256         # v2 kernels; v3 and v5 as 8 warps (8 rows) per block
V4_MAX_THREADS = 512
V4_ITEMS = {4: (1, 2, 4, 8), 1: (1, 2, 4, 8, 16)}  # per VEC: rows up to 16384 / 8192 floats
V5_ITEMS = {4: (1, 2, 4, 6, 8, 12, 16), 1: (1, 2, 4, 8, 16, 32)}


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


def launch(version, d):
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
    elif version == "v7" and (v7 := v7_config(c)) is not None:
        name, slots, smem = v7
        fn = K(name, SIG + "i", dynamic_smem=smem)
        threads = 32 * V7_WARPS
        # one wave of blocks, each with a contiguous share of the rows
        grid = min(device_info()["sms"] * blocks_per_sm(fn, threads, smem), n)
        fn.prepared_call((grid, 1, 1), (threads, 1, 1), *args, slots, shared_size=smem)
    elif version in ("v4", "v5", "v6", "v7"):  # v7 where it does not apply runs v6
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
    else:
        raise KeyError(version)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    n, c = d.size
    x, w, b = (as_torch(d.array(k)) for k in ("x", "w", "b"))
    F = torch.nn.functional
    return {"torch layer_norm": lambda: F.layer_norm(x, (c,), w, b, EPS)}


def layer_norm(x, weight, bias, eps=EPS, version="v5"):
    """LayerNorm over the last axis of a 2-D float32 array on the GPU: (out, mean, rstd)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2:
        raise ValueError(f"layer_norm expects a 2-D array [rows, C], got shape {x.shape}")
    n, c = x.shape
    w = np.ascontiguousarray(weight, dtype=np.float32).ravel()
    b = np.ascontiguousarray(bias, dtype=np.float32).ravel()
    if w.shape != (c,) or b.shape != (c,):
        raise ValueError(f"weight and bias must have {c} elements, got {w.shape} and {b.shape}")
    case = H.Case(x.shape, inputs={"x": x, "w": w, "b": b},
                  outputs={"out": ((n, c), np.float32), "mean": ((n,), np.float32),
                           "rstd": ((n,), np.float32)}, params={"eps": eps})
    r = H.run(launch, version, case)
    return r["out"], r["mean"], r["rstd"]


# --- the stability table ------------------------------------------------------------------

DEMO_METHODS = {0: "one pass E[x^2]-E[x]^2", 1: "Welford + Chan merge", 2: "two-pass",
                3: "corrected two-pass"}


def demo_stats(x, weight, bias, method, eps=EPS):
    """The demo kernel (not a version): row statistics computed by DEMO_METHODS[method]."""
    from common.gpu import driver

    x = np.ascontiguousarray(x, dtype=np.float32)
    n, c = x.shape
    case = H.Case(x.shape, inputs={"x": x, "w": np.asarray(weight, np.float32),
                                   "b": np.asarray(bias, np.float32)},
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
    """For rows offset by each value (unit spread): which methods meet the float32 tolerance."""
    from common.check import compare_all

    rng = np.random.default_rng(9)
    w = (1.0 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
    b = (0.1 * rng.standard_normal(cols)).astype(np.float32)
    z = rng.standard_normal((rows, cols))
    methods = [(name, lambda x, m=m: demo_stats(x, w, b, m)) for m, name in DEMO_METHODS.items()]
    methods.append(("v5 (this day's best)", lambda x: layer_norm(x, w, b, version="v5")))
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
    if mode != "check":
        rows = same_size_copy_rows()
        report.section("what a plain copy of the same bytes reaches at each benchmark size "
                       "(cuMemcpyDtoD of x into out: the most any one-read one-write kernel "
                       "can hope for at that size)", rows,
                       ["size", "copy time", "GB/s", "% of the 1 GiB copy ceiling"])
        report.record("same_size_copy", rows)


def same_size_copy_rows():
    """Small problems cannot reach the 1 GiB copy rate: launch and ramp-up are a fixed cost.
    Time the copy of exactly the bytes of each benchmark case to show the real bar there."""
    from common.timing import copy_bandwidth_gbps, time_fn

    cuda = driver()
    rows = []
    for n, c in BENCH_SIZES:
        nbytes = 4 * n * c
        src, dst = cuda.mem_alloc(nbytes), cuda.mem_alloc(nbytes)
        cuda.memset_d32(src, 0, n * c)
        t = time_fn(lambda: cuda.memcpy_dtod(dst, src, nbytes))
        gbps = 2 * nbytes / (t.median_ms * 1e-3) / 1e9
        rows.append([f"{n}x{c}", f"{t.median_ms * 1e3:.1f} us", f"{gbps:.0f}",
                     f"{100 * gbps / copy_bandwidth_gbps():.1f}"])
        src.free()
        dst.free()
    return rows
