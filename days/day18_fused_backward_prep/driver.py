"""Day 18 driver: the QKV permute (+ Q scale) for attention, three versions, and its inverse.

    from days.day18_fused_backward_prep.driver import permute, unpermute
    q, k, v = permute(qkv)                 # [B,T,3,NH,HS] -> 3 x [B,NH,T,HS], q * 1/sqrt(HS)
    dqkv = unpermute(dq, dk, dv)           # the backward: 3 x [B,NH,T,HS] -> [B,T,3,NH,HS]

The harness checks and times the forward (every version produces q, k, v). The inverse is an
op beside the versions: extras() checks it (scalar and vectorized kernel) at every check size
and times it at the bench sizes with common.runner.check_and_time, one section per size.
"""
import numpy as np

from common import args as A
from common import harness as H

from . import reference

K = H.Kernels(__file__)
THREADS = 256

VERSIONS = {
    "v1": "3 permute kernels + a scale kernel",
    "v2": "one fused kernel, scalar",
    "v3": "fused, float4/float2 along HS",
}
BEST = "v3"                    # the fastest correct forward at 8x1024x12x64 (results/day18.json)
INVERSE_KINDS = ("scalar", "vector")
INVERSE_BEST = "vector"        # unpermute_vec4 beat unpermute_vec1 at the default size
SIZE_HELP = "BxTxNHxHS (batch, tokens, heads, head size), e.g. 8x1024x12x64"
SIZES = {"small": (2, 16, 3, 8), "default": (8, 1024, 12, 64), "large": (16, 1024, 16, 64)}
# HS odd (scalar path), HS % 4 == 2 (float2), HS % 4 == 0 (float4); 1x1x1x1; T, B, NH not
# multiples of anything; one element of q per thread past the grid's last full block
CHECK_SIZES = [(1, 1, 1, 1), (2, 33, 3, 5), (3, 17, 4, 6), (2, 31, 12, 64), (1, 1000, 2, 36),
               (4, 3, 25, 1), (5, 7, 1, 1000), (1, 1, 7, 2)]
# GPT-2 small at B = 8 (151 MB moved), a GPT-2-medium-like shape (403 MB), and an awkward one:
# odd B and T, 32 heads of 80 floats (Phi-2's heads; rows of 320 bytes, float4) (185 MB)
BENCH_SIZES = [(8, 1024, 12, 64), (16, 1024, 16, 64), (3, 1001, 32, 80)]
F32_MAX = float(np.finfo(np.float32).max)


def _inverse_bar(rec):
    """The inverse at >= 80% of its ceiling at every bench size (its fastest correct kernel)."""
    inv = (rec.get("extra") or {}).get("inverse") or []
    if isinstance(inv, dict):  # results of 2026-11-22: one size, rows keyed by kind
        inv = [dict(r, size=inv["size"]) for r in inv.get("rows", {}).values()]
    best = {}
    for r in inv:
        if r.get("ok") and r.get("pct_of_ceiling") is not None:
            k = tuple(r["size"])
            best[k] = max(best.get(k, 0.0), r["pct_of_ceiling"])
    missing = [H.size_str(s) for s in BENCH_SIZES if tuple(s) not in best]
    if missing:
        return False, f"inverse not measured at {', '.join(missing)}"
    size, pct = min(best.items(), key=lambda kv: kv[1])
    return pct >= 80, f"{pct:.1f}% (bar 80.0%) worst at {H.size_str(size)}"


# CURRICULUM.md: >= 80% of copy bandwidth; the forward at every bench size, and the inverse too
BAR = [{"sizes": BENCH_SIZES, "pct": 80},
       {"text": "inverse >= 80% of the ceiling at every bench size", "check": _inverse_bar}]


def validate_size(size):
    """Every index the kernels compute (qkv's, and a thread's global index, at most the output
    size + 255) stays below 2^31 when qkv has at most 2^31 - 1 elements."""
    b, t, nh, hs = size
    if 3 * b * t * nh * hs > 2 ** 31 - 1:
        raise ValueError(f"qkv would hold {3 * b * t * nh * hs} elements; the kernels index in "
                         "32 bits: at most 2^31 - 1")


def vec_width(hs: int) -> int:
    """The widest vector that divides a row of HS floats (rows start aligned to it)."""
    return 4 if hs % 4 == 0 else 2 if hs % 2 == 0 else 1


def same_as(version, size):
    """v3 with an odd HS moves one float at a time: permute_v3_vec1, the code of v2."""
    return "v2" if version == "v3" and vec_width(size[3]) == 1 else None


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
                  read_bytes=qkv.nbytes, params={"scale": scale})


def _grid(n):
    return (max(1, H.cdiv(n, THREADS)), 1, 1)


def launch(version, d):
    A.version(version, VERSIONS)  # an unknown name is refused, never run as another version
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
    kind = A.choice(kind, "kind", INVERSE_KINDS)
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

def _scale(scale, hs: int) -> np.float32:
    """The factor of the Q part: 1/sqrt(HS) by default, else any finite float32."""
    if scale is None:
        return reference.default_scale(hs) if hs else np.float32(1)
    return np.float32(A.real(scale, "scale", low=-F32_MAX, high=F32_MAX))


def permute(qkv, scale=None, version=BEST):
    """q, k, v[B, NH, T, HS] (float32) from qkv[B, T, 3, NH, HS]; q times scale (a finite
    real, default 1/sqrt(HS)). qkv must be 5-D with 3 on axis 2; at most 2^31 - 1 elements
    (the kernels index in 32 bits). An empty qkv (B, T, NH or HS zero) gives three empty
    arrays, and nothing is launched."""
    version = A.version(version, VERSIONS)
    qkv = A.floats(qkv, "qkv", shape=(None, None, 3, None, None), what="[B, T, 3, NH, HS]")
    b, t, _, nh, hs = qkv.shape
    scale = _scale(scale, hs)
    shape = (b, nh, t, hs)
    if qkv.size == 0:
        return tuple(np.zeros(shape, np.float32) for _ in range(3))
    validate_size((b, t, nh, hs))
    case = H.Case((b, t, nh, hs), inputs={"qkv": qkv}, params={"scale": scale},
                  outputs={k: (shape, np.float32) for k in "qkv"})
    out = H.run(launch, version, case)
    return out["q"], out["k"], out["v"]


def make_inverse_case(size, rng):
    """The backward: dq, dk, dv [B, NH, T, HS] -> dqkv [B, T, 3, NH, HS], the Q part * scale."""
    b, t, nh, hs = size
    g = [rng.standard_normal((b, nh, t, hs), dtype=np.float32) for _ in range(3)]
    scale = reference.default_scale(hs)
    return H.Case(size, inputs=dict(zip(("dq", "dk", "dv"), g)),
                  outputs={"dqkv": ((b, t, 3, nh, hs), np.float32)},
                  reference=lambda: {"dqkv": reference.unpermute(*g, scale)},
                  bytes=2 * 3 * g[0].nbytes,  # dq, dk, dv read once; dqkv written once
                  read_bytes=3 * g[0].nbytes, params={"scale": scale})


def launch_inverse(kind, d):
    launch_unpermute(kind, d.dq, d.dk, d.dv, d.dqkv, d.size, d.params["scale"])


def unpermute(dq, dk, dv, scale=None, kind=INVERSE_BEST):
    """dqkv[B, T, 3, NH, HS] (float32) from dq, dk, dv[B, NH, T, HS]: the backward of
    permute, the Q part times the same scale (a finite real, default 1/sqrt(HS)). dq, dk, dv
    must be 4-D and of one shape; kind is 'vector' (float4/float2 along HS) or 'scalar'.
    Empty gradients give an empty dqkv, and nothing is launched."""
    kind = A.choice(kind, "kind", INVERSE_KINDS)
    g = [A.floats(a, n, ndim=4, what="[B, NH, T, HS]") for a, n in zip((dq, dk, dv), ("dq", "dk", "dv"))]
    A.same_shape(dq=g[0], dk=g[1], dv=g[2])
    b, nh, t, hs = g[0].shape
    scale = _scale(scale, hs)
    if g[0].size == 0:
        return np.zeros((b, t, 3, nh, hs), np.float32)
    validate_size((b, t, nh, hs))
    case = H.Case((b, t, nh, hs), inputs=dict(zip(("dq", "dk", "dv"), g)),
                  outputs={"dqkv": ((b, t, 3, nh, hs), np.float32)}, params={"scale": scale})
    return H.run(launch_inverse, kind, case)["dqkv"]


def extras(report, mode):
    """The inverse: both kernels checked at every CHECK_SIZES entry, then (unless --check)
    checked, timed and checked again at the default size (with --bench: every bench size),
    one section per size."""
    from common.runner import check_and_time

    for size in CHECK_SIZES:
        case = make_inverse_case(size, np.random.default_rng(hash(size) & 0xFFFF))
        d = H.DeviceCase(case)
        for kind in INVERSE_KINDS:
            check_and_time(report, f"unpermute {kind}", lambda dd, k=kind: launch_inverse(k, dd),
                           case, d, timed=False)
    report.say(f"  inverse (unpermute) checked at {len(CHECK_SIZES)} sizes")
    if mode == "check":
        return
    recorded = []
    for size in (BENCH_SIZES if mode == "bench" else [SIZES["default"]]):
        case = make_inverse_case(size, np.random.default_rng(18))
        d = H.DeviceCase(case)
        rows = [check_and_time(report, f"unpermute {kind}", lambda dd, k=kind: launch_inverse(k, dd),
                               case, d) for kind in INVERSE_KINDS]
        for kind, r in zip(INVERSE_KINDS, rows):
            r["kernel"] = f"unpermute_vec{vec_width(size[3]) if kind == 'vector' else 1}"
        report.section(f"the inverse at {H.size_str(size)}: dq, dk, dv to dqkv "
                       f"({case.bytes / 1e6:.0f} MB moved)",
                       [[r["kernel"], f"{r['median_ms']:.4f} ms", f"{r['gbps']:.0f}",
                         f"{r['pct_of_ceiling']:.1f}", "ok" if r["ok"] else "FAIL"] for r in rows],
                       ["kernel", "median", "GB/s", "% of ceiling", "ok"])
        recorded += rows
        d = None  # frees this size's device arrays before the next is allocated
    report.record("inverse", recorded)
