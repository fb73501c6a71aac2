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


def make_inverse_case(size, rng):
    """The backward: dq, dk, dv [B, NH, T, HS] -> dqkv [B, T, 3, NH, HS], the Q part * scale."""
    b, t, nh, hs = size
    g = [rng.standard_normal((b, nh, t, hs), dtype=np.float32) for _ in range(3)]
    scale = reference.default_scale(hs)
    return H.Case(size, inputs=dict(zip(("dq", "dk", "dv"), g)),
                  outputs={"dqkv": ((b, t, 3, nh, hs), np.float32)},
                  reference=lambda: {"dqkv": reference.unpermute(*g, scale)},
                  bytes=2 * 3 * g[0].nbytes,  # dq, dk, dv read once; dqkv written once
                  params={"scale": scale})


def launch_inverse(kind, d):
    launch_unpermute(kind, d.dq, d.dk, d.dv, d.dqkv, d.size, d.params["scale"])


def unpermute(dq, dk, dv, scale=None, kind="vector"):
    """dqkv[B, T, 3, NH, HS] (float32) from dq, dk, dv[B, NH, T, HS]; the Q part * scale."""
    g = [np.ascontiguousarray(a, dtype=np.float32) for a in (dq, dk, dv)]
    if g[0].ndim != 4 or any(a.shape != g[0].shape for a in g):
        raise ValueError("dq, dk, dv must be [B, NH, T, HS] arrays of one shape")
    b, nh, t, hs = g[0].shape
    validate_size((b, t, nh, hs))
    scale = reference.default_scale(hs) if scale is None else np.float32(scale)
    case = H.Case((b, t, nh, hs), inputs=dict(zip(("dq", "dk", "dv"), g)),
                  outputs={"dqkv": ((b, t, 3, nh, hs), np.float32)}, params={"scale": scale})
    return H.run(lambda k, d: launch_inverse(k, d), kind, case)["dqkv"]


INVERSE_KINDS = ("scalar", "vector")


def extras(report, mode):
    """The inverse: both kernels checked at every CHECK_SIZES entry, then (unless --check)
    checked, timed and checked again at the default size."""
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
    size = SIZES["default"]
    case = make_inverse_case(size, np.random.default_rng(18))
    d = H.DeviceCase(case)
    rows = [check_and_time(report, f"unpermute {kind}", lambda dd, k=kind: launch_inverse(k, dd),
                           case, d) for kind in INVERSE_KINDS]
    for kind, r in zip(INVERSE_KINDS, rows):
        r["kernel"] = f"unpermute_vec{vec_width(size[3]) if kind == 'vector' else 1}"
    report.section(f"the inverse (backward) dq, dk, dv -> dqkv at {H.size_str(size)} "
                   f"({case.bytes / 1e6:.0f} MB moved; % of the copy ceiling)",
                   [[r["kernel"], f"{r['median_ms']:.4f} ms", f"{r['gbps']:.0f}",
                     f"{r['pct_of_ceiling']:.1f}", "ok" if r["ok"] else "FAIL"] for r in rows],
                   ["kernel", "median", "GB/s", "% of copy", "ok"])
    report.record("inverse", rows)
