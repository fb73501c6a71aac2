"""Day 18 driver: the QKV permute (+ Q scale) for attention, three versions, and its inverse.

    from days.day18_fused_backward_prep.driver import permute, unpermute
    q, k, v = permute(qkv)                 # [B,T,3,NH,HS] -> 3 x [B,NH,T,HS], q * 1/sqrt(HS)
    dqkv = unpermute(dq, dk, dv)           # the backward: 3 x [B,NH,T,HS] -> [B,T,3,NH,HS]

The harness times the forward (every version produces q, k, v). extras() checks and times the
inverse (naive scalar vs vectorized) against the copy bandwidth, in its own section.
"""
import numpy as np

from common import harness as H

from . import reference

K = H.Kernels(__file__)
THREADS = 256

VERSIONS = {
    "v1": "3 permute kernels + a scale kernel",
    "v2": "one fused kernel, scalar",
    "v3": "fused, float4/float2 along HS",
}
SIZE_HELP = "BxTxNHxHS (batch, tokens, heads, head size), e.g. 8x1024x12x64"
SIZES = {"small": (2, 16, 3, 8), "default": (8, 1024, 12, 64), "large": (16, 1024, 16, 64)}
# HS odd (scalar path), HS % 4 == 2 (float2), HS % 4 == 0 (float4); 1x1x1x1; T, B, NH not
# multiples of anything; one element of q per thread past the grid's last full block
CHECK_SIZES = [(1, 1, 1, 1), (2, 33, 3, 5), (3, 17, 4, 6), (2, 31, 12, 64), (1, 1000, 2, 36),
               (4, 3, 25, 1), (5, 7, 1, 1000), (1, 1, 7, 2)]
# GPT-2 small at B = 8 (151 MB moved) and a GPT-2-medium-like shape (403 MB moved)
BENCH_SIZES = [(8, 1024, 12, 64), (16, 1024, 16, 64)]


def validate_size(size):
    b, t, nh, hs = size
    if 3 * b * t * nh * hs > 2 ** 31 - 1:
        raise ValueError("at most 2^31 - 1 elements in qkv (the kernels index in 32 bits)")


def vec_width(hs: int) -> int:
    """The widest vector that divides a row of HS floats (rows start aligned to it)."""
    return 4 if hs % 4 == 0 else 2 if hs % 2 == 0 else 1


def make_case(size, rng):
    b, t, nh, hs = size
    qkv = rng.standard_normal((b, t, 3, nh, hs), dtype=np.float32)
    scale = reference.default_scale(hs)
    shape = (b, nh, t, hs)

    def ref():
        q, k, v = reference.permute(qkv, scale)
        return {"q": q, "k": k, "v": v}

    return H.Case(size, inputs={"qkv": qkv},
                  outputs={"q": (shape, np.float32), "k": (shape, np.float32), "v": (shape, np.float32)},
                  reference=ref, bytes=2 * qkv.nbytes,  # qkv read once, q, k, v written once
                  params={"scale": scale})


def _grid(n):
    return (max(1, H.cdiv(n, THREADS)), 1, 1)


def launch(version, d):
    b, t, nh, hs = d.size
    scale = np.float32(d.params["scale"])
    n = b * nh * t * hs
    block = (THREADS, 1, 1)
    if version == "v1":
        copy = K("permute_v1_copy", "PPiiiii")
        for which, out in enumerate((d.q, d.k, d.v)):
            copy.prepared_call(_grid(n), block, d.qkv, out, which, b, t, nh, hs)
        K("permute_v1_scale", "Pif").prepared_call(_grid(n), block, d.q, n, scale)
        return
    vec = vec_width(hs) if version == "v3" else 1
    name = "permute_v2" if version == "v2" else f"permute_v3_vec{vec}"
    K(name, "PPPPiiiif").prepared_call(_grid(n // vec), block, d.qkv, d.q, d.k, d.v,
                                       b, t, nh, hs, scale)


def launch_unpermute(kind, dq, dk, dv, dqkv, size, scale):
    """The backward on device pointers: kind 'scalar' (one float per thread) or 'vector'."""
    b, t, nh, hs = size
    vec = vec_width(hs) if kind == "vector" else 1
    K(f"unpermute_vec{vec}", "PPPPiiiif").prepared_call(
        _grid(b * nh * t * hs // vec), (THREADS, 1, 1), dq, dk, dv, dqkv, b, t, nh, hs,
        np.float32(scale))


def baselines(d):
    """torch: the usual eager code (permute + contiguous for each of q, k, v, then q * scale)."""
    from common.baselines import as_torch, torch_or_none

    torch = torch_or_none()
    if torch is None:
        return {}
    qkv = as_torch(d.array("qkv"))
    scale = float(d.params["scale"])

    def fn():
        x = qkv.permute(2, 0, 3, 1, 4)  # [3, B, NH, T, HS], a view
        q, _k, _v = x[0].contiguous(), x[1].contiguous(), x[2].contiguous()  # k, v: the traffic
        return q.mul_(scale)  # the runner checks the first output, q

    return {"torch permute+contiguous+mul": fn}


# --- numpy in, numpy out ------------------------------------------------------------------

def permute(qkv, scale=None, version="v3"):
    """q, k, v[B, NH, T, HS] (float32) from qkv[B, T, 3, NH, HS]; q * scale (default 1/sqrt(HS))."""
    qkv = np.ascontiguousarray(qkv, dtype=np.float32)
    if qkv.ndim != 5 or qkv.shape[2] != 3:
        raise ValueError(f"qkv must be [B, T, 3, NH, HS], got shape {qkv.shape}")
    b, t, _, nh, hs = qkv.shape
    size = (b, t, nh, hs)
    validate_size(size)
    scale = reference.default_scale(hs) if scale is None else np.float32(scale)
    shape = (b, nh, t, hs)
    case = H.Case(size, inputs={"qkv": qkv}, params={"scale": scale},
                  outputs={k: (shape, np.float32) for k in "qkv"})
    out = H.run(launch, version, case)
    return out["q"], out["k"], out["v"]


def unpermute(dq, dk, dv, scale=None, kind="vector"):
    """dqkv[B, T, 3, NH, HS] (float32) from dq, dk, dv[B, NH, T, HS]; the Q part * scale."""
    g = [np.ascontiguousarray(a, dtype=np.float32) for a in (dq, dk, dv)]
    if g[0].ndim != 4 or any(a.shape != g[0].shape for a in g):
        raise ValueError("dq, dk, dv must be [B, NH, T, HS] arrays of one shape")
    b, nh, t, hs = g[0].shape
    validate_size((b, t, nh, hs))
    scale = reference.default_scale(hs) if scale is None else np.float32(scale)
    from common.gpu import driver

    cuda = driver()  # brings up the context
    from pycuda import gpuarray

    dg = [gpuarray.to_gpu(a) for a in g]
    out = gpuarray.empty((b, t, 3, nh, hs), np.float32)
    cuda.memset_d8(out.gpudata, 0xFF, out.nbytes)  # poison: an unwritten element reads as NaN
    launch_unpermute(kind, *(a.gpudata for a in dg), out.gpudata, (b, t, nh, hs), scale)
    return out.get()


# --- the inverse, checked and timed ---------------------------------------------------------

def time_unpermute(size, rng=None):
    """Check and time both inverse kernels at one size; GB/s against the copy bandwidth."""
    from common.check import compare
    from common.gpu import driver
    from common.timing import copy_bandwidth_gbps, time_fn

    driver()
    from pycuda import gpuarray

    rng = rng or np.random.default_rng(18)
    b, t, nh, hs = size
    scale = reference.default_scale(hs)
    g = [rng.standard_normal((b, nh, t, hs), dtype=np.float32) for _ in range(3)]
    want = reference.unpermute(*g, scale)
    dg = [gpuarray.to_gpu(a) for a in g]
    out = gpuarray.empty(want.shape, np.float32)
    nbytes = 2 * 3 * g[0].nbytes  # dq, dk, dv read once; dqkv written once
    ceiling = copy_bandwidth_gbps()
    rows = {}
    for kind in ("scalar", "vector"):
        def fn(kind=kind):
            launch_unpermute(kind, *(a.gpudata for a in dg), out.gpudata, size, scale)
        driver().memset_d8(out.gpudata, 0xFF, out.nbytes)
        fn()
        r = compare(out.get(), want)
        tm = time_fn(fn)
        r2 = compare(out.get(), want)  # again after the timing loop
        gbps = nbytes / (tm.median_ms * 1e-3) / 1e9
        rows[kind] = {"kernel": f"unpermute_vec{vec_width(hs) if kind == 'vector' else 1}",
                      "median_ms": tm.median_ms, "min_ms": tm.min_ms, "max_ms": tm.max_ms,
                      "gbps": gbps, "pct_of_ceiling": 100 * gbps / ceiling,
                      "ok": bool(r.ok and r2.ok), "max_err": r.max_abs,
                      "message": r.message or r2.message}
    return {"size": list(size), "bytes": nbytes, "ceiling_gbps": ceiling, "rows": rows}


def extras(report, mode):
    if mode == "check":
        # correctness of the inverse on the ragged sizes, with the forward's checks
        for size in CHECK_SIZES:
            rng = np.random.default_rng(hash(size) & 0xFFFF)
            g = [rng.standard_normal((size[0], size[2], size[1], size[3]), dtype=np.float32)
                 for _ in range(3)]
            want = reference.unpermute(*g, reference.default_scale(size[3]))
            from common.check import compare

            for kind in ("scalar", "vector"):
                r = compare(unpermute(*g, kind=kind), want)
                if not r.ok:
                    report.failures.append(f"unpermute {kind} at {H.size_str(size)}: {r.message}")
        report.say(f"  inverse (unpermute) checked at {len(CHECK_SIZES)} sizes")
        return
    size = SIZES["default"]
    res = time_unpermute(size)
    rows = [[v["kernel"], f"{v['median_ms']:.4f} ms", f"{v['gbps']:.0f}",
             f"{v['pct_of_ceiling']:.1f}", "ok" if v["ok"] else "FAIL"]
            for v in res["rows"].values()]
    report.section(f"the inverse (backward) dq, dk, dv -> dqkv at {H.size_str(size)} "
                   f"({res['bytes'] / 1e6:.0f} MB moved; ceiling {res['ceiling_gbps']:.0f} GB/s copy)",
                   rows, ["kernel", "median", "GB/s", "% of copy", "ok"])
    report.record("inverse", res)
    for kind, v in res["rows"].items():
        if not v["ok"]:
            report.failures.append(f"unpermute {kind} at {H.size_str(size)}: {v['message']}")
