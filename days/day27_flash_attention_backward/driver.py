"""Day 27 driver: FlashAttention-2 backward in fp32 (dQ, dK, dV from Q, K, V, O, dO, LSE).

    from days.day27_flash_attention_backward.driver import attention_backward
    dq, dk, dv = attention_backward(q, k, v, o, do, lse, causal=True)   # [BH, N, d] or [B, H, N, d]

O and LSE come from a forward pass (day 26's kernel, or reference.forward here); the cases of
this day compute them with the float64 reference forward, so the day stands on its own.
A size is BHxNxDxM: batch*heads, sequence length, head dim (64 or 128), mask (1 full, 2 causal).
"""
import itertools

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference

K = H.Kernels(__file__)
FULL, CAUSAL = 1, 2
HEAD_DIMS = (64, 128)
THREADS = 256
SIG = "PPPPPPPPPifi"   # Q, K, V, dO, LSE, D, dQ, dK, dV, N, scale, causal

VERSIONS = {
    "v1": "naive: P and dS as N x N matrices in memory, one thread per output",
    "v2": "flash: K/V-outer blocks, dK/dV in registers, dQ by atomicAdd",
    "v3": "deterministic: dK/dV kernel + Q-outer dQ kernel, no atomics",
    "v4": "v3 + padded tiles, float4 shared loads, exp2, mask on edge tiles only",
    "v5": "v4's tiles with v2's atomic dQ: one kernel, 5 products instead of 7",
    "v6": "v5 with 4x8-thread warps (1 wavefront a shared read), cp.async Q/dO, 16-byte dQ adds",
}
BEST = "v6"   # fastest at 32x4096x64, full and causal (H200, 2026-11-23, .notes/day27_sweep_v6.py)
SIZE_HELP = "BHxNxDxM (batch*heads, sequence, head dim 64|128, mask 1 full|2 causal), e.g. 32x4096x64x2"
SIZES = {"small": (2, 65, 64, CAUSAL), "default": (32, 4096, 64, CAUSAL),
         "large": (32, 4096, 128, CAUSAL)}
# N = 1 (one key: P = 1, dQ = dK = 0), 17 (< every tile), 63/65 (one off a 64 tile), 200 (four
# tiles, the last ragged); both head dims, both masks; BH = 1..3 so the head offsets are used
CHECK_SIZES = [(1 + i % 3, n, d, m) for i, (n, d, m) in
               enumerate(itertools.product((1, 17, 63, 65, 200), HEAD_DIMS, (FULL, CAUSAL)))]
BAR_FULL, BAR_CAUSAL = (32, 4096, 64, FULL), (32, 4096, 64, CAUSAL)   # day 26's sizes
AWKWARD = (32, 1000, 128, CAUSAL)   # N off every tile, d = 128, causal
BENCH_SIZES = [BAR_FULL, BAR_CAUSAL, (32, 2048, 128, FULL), AWKWARD]

# v4's tiles per head dim (BM query rows x BN keys, min blocks/SM): kernel.cu's candidates;
# .notes/day27_sweep.py times all of them
# fastest pair per head dim at the bench sizes (H200, 2026-11-23, .notes/day27_sweep.py)
V4_TILES = {64: {"dkdv": "bm64_bn128_b1", "dq": "bm128_bn64_b1"},
            128: {"dkdv": "bm64_bn64_b1", "dq": "bm64_bn64_b1"}}
V4_CANDIDATES = {64: {"dkdv": ["bm64_bn64_b1", "bm64_bn128_b1", "bm32_bn64_b2", "bm32_bn128_b1"],
                      "dq": ["bm64_bn64_b1", "bm64_bn64_b2", "bm128_bn64_b1", "bm64_bn32_b2"]},
                 128: {"dkdv": ["bm64_bn64_b1", "bm32_bn64_b1"],
                       "dq": ["bm64_bn64_b1", "bm32_bn64_b1"]}}
V5_TILES = {64: "bm32_bn64_b2", 128: "bm64_bn64_b1"}
V5_CANDIDATES = {64: ["bm64_bn64_b1", "bm32_bn64_b2"], 128: ["bm64_bn64_b1", "bm32_bn64_b1"]}
# v6's tiles: BM x BN, S Q/dO stages (2: cp.async double buffer), min blocks/SM. Not yet
# measured: the lead sets V6_TILES (and BEST) from .notes/day27_sweep_v6.py
V6_TILES = {64: "bm64_bn128_s2_b1", 128: "bm64_bn64_s1_b1"}   # fastest per head dim (H200, 2026-11-23, .notes/day27_sweep_v6.py)
V6_CANDIDATES = {64: ["bm64_bn64_s2_b1", "bm32_bn64_s2_b2", "bm64_bn128_s2_b1", "bm32_bn128_s2_b1"],
                 128: ["bm32_bn64_s2_b1", "bm64_bn64_s1_b1"]}
TILE_V23 = (64, 64)      # v2/v3: BM x BN
REF_SCORES = 1 << 25     # the float64 reference computes at most this many scores (2 heads
                         # of 4096^2); larger cases repeat their heads
TOL_FLOOR = 1e-6         # both float32 computations are at rounding level below this
ZERO_RMS = 1e-5          # an output whose exact value is 0 (N = 1): rounding noise of at most
                         # this RMS per element (dS is a difference of two 64-term fp32 dots)
FD_SIZE = (1, 9, 64)     # BH, N, d of the finite-difference check (both masks)
TORCH_INFO_SIZE = (4, 1000, 64, CAUSAL)


def validate_size(size):
    bh, n, d, m = size
    if d not in HEAD_DIMS:
        raise ValueError(f"head dim d = {d}: the kernels are built for d = 64 and d = 128")
    if m not in (FULL, CAUSAL):
        raise ValueError(f"mask = {m}: 1 means full attention, 2 causal")
    if bh > 65535:
        raise ValueError(f"BH = {bh}: at most 65535 batch*heads (they are the grid's y/z)")
    if n > 65535 * 8:
        raise ValueError(f"N = {n}: at most {65535 * 8} (v1 puts 8 rows a block on gridDim.y)")
    A.fits_int32("BH*N", bh * n, "rows")


# --- the case ---------------------------------------------------------------------------------

def smem_bytes(kind, d, bm, bn, fast):
    """kernel.cu's dkdv_smem_floats / dq_smem_floats, in bytes."""
    dp = d + 4 if fast else d
    bp = bn + 16 if fast else bn
    floats = 2 * bn * dp + 2 * bm * dp + (2 if kind == "dkdv" else 1) * bm * bp + 2 * bm
    return 4 * floats


def v6_smem_bytes(d, bm, bn, stages):
    """kernel.cu's V6::SMEM_FLOATS, in bytes: K, V; per stage Q, dO, LSE, D; P, dS (rows BN + 8)."""
    dp = d + 4
    return 4 * (2 * bn * dp + stages * (2 * bm * dp + 2 * bm) + 2 * bm * (bn + 8))


def tolerance(r64, q, k, v, o, do, lse, causal, total_heads, budget=1 << 22):
    """Per output: 2x the rel-L2 error of the same backward done in float32 numpy against the
    float64 one r64 (CONVENTIONS, attention-like ops), at least TOL_FLOOR; an output whose
    exact value is 0 (N = 1) gets an absolute RMS of ZERO_RMS per element instead. Measured on
    the first heads that fit `budget` scores (all heads for small cases).
    Returns (tol, fp32 errors)."""
    bh, n, _ = q.shape
    heads = list(range(min(bh, max(1, budget // max(n * n, 1)))))  # of the distinct heads
    r32 = reference.backward(*(x[heads] for x in (q, k, v, o, do, lse)), causal=causal,
                             dtype=np.float32)
    names = ("dQ", "dK", "dV")
    errs = {name: reference.rel_l2(a, b[heads]) for name, a, b in zip(names, r32, r64)}
    tol = {name: max(2 * e, TOL_FLOOR) for name, e in errs.items()}
    for name, r in zip(names, r64):
        if not r.any():  # compare() then takes the absolute L2 error
            tol[name] = ZERO_RMS * np.sqrt(total_heads * r[0].size)
    return tol, errs


def make_case(size, rng):
    """Random Q, K, V, dO; O and LSE from the float64 forward, cast to float32. Large cases
    draw REF_SCORES / N^2 distinct heads (at least 1) and repeat them over BH, so the float64
    reference stays a few seconds of numpy; the check sizes have distinct heads throughout."""
    bh, n, d, m = size
    causal = m == CAUSAL
    distinct = min(bh, max(1, REF_SCORES // (n * n)))
    q, k, v, do = (rng.standard_normal((distinct, n, d), dtype=np.float32) for _ in range(4))
    o64, lse64 = reference.forward(q, k, v, causal)
    o, lse = o64.astype(np.float32), lse64.astype(np.float32)
    r64 = reference.backward(q, k, v, o, do, lse, causal)
    tol, errs = tolerance(r64, q, k, v, o, do, lse, causal, bh)
    reps = H.cdiv(bh, distinct)
    tile = lambda x: np.ascontiguousarray(np.tile(x, (reps,) + (1,) * (x.ndim - 1))[:bh])
    names = ("dQ", "dK", "dV")

    def ref():
        return {name: tile(r) for name, r in zip(names, r64)}

    pairs = reference.pairs(n, causal)
    inputs = {"Q": q, "K": k, "V": v, "O": o, "dO": do, "LSE": lse}
    return H.Case(size, inputs={name: tile(x) for name, x in inputs.items()},
                  outputs={name: ((bh, n, d), np.float32) for name in names},
                  reference=ref, tol=tol,
                  # five products of 2 * pairs * d FLOPs a head (S, dP, dV, dQ, dK)
                  flops=10 * bh * pairs * d, unit="fp32",
                  bytes=4 * (5 * bh * n * d + bh * n) + 4 * 3 * bh * n * d,
                  read_bytes=4 * (5 * bh * n * d + bh * n),
                  params={"causal": causal, "fp32_numpy_rel_err": errs, "distinct_heads": distinct})


# --- launching --------------------------------------------------------------------------------

def _tile(name):
    """'bm64_bn128_b1' -> (64, 128)."""
    bm, bn, _ = name.split("_")
    return int(bm[2:]), int(bn[2:])


def preprocess(d, zero_dq=False):
    """D = rowsum(dO * O) into a scratch buffer (and dQ = 0 for v2's atomics)."""
    bh, n, dd, _ = d.size
    rows = bh * n
    Dv = d.scratch("D", (rows,))
    K("fa_bwd_preprocess", "PPPPii").prepared_call((H.cdiv(rows, THREADS // 32), 1, 1), (THREADS, 1, 1),
                                                   d.O, d.dO, Dv, d.dQ if zero_dq else 0, rows, dd)
    return Dv


def flash(name, kind, d, Dv, bm, bn, fast, kern=None):
    """One flash kernel (dkdv: a block per BN keys; dq: a block per BM query rows)."""
    bh, n, dd, m = d.size
    smem = smem_bytes(kind, dd, bm, bn, fast)
    fn = (kern or K)(name, SIG, dynamic_smem=smem)
    grid = (bh, H.cdiv(n, bn if kind == "dkdv" else bm), 1)   # heads in x: tile 0 of every head first
    fn.prepared_call(grid, (THREADS, 1, 1), d.Q, d.K, d.V, d.dO, d.LSE, Dv, d.dQ, d.dK, d.dV,
                     n, np.float32(1.0 / np.sqrt(dd)), int(m == CAUSAL), shared_size=smem)


def launch_v4(d, dkdv=None, dq=None, kern=None):
    """v4 with the named tile candidates (default V4_TILES; kern: another build of kernel.cu)."""
    dd = d.size[2]
    dkdv = dkdv or V4_TILES[dd]["dkdv"]
    dq = dq or V4_TILES[dd]["dq"]
    Dv = preprocess(d)
    flash(f"fa_bwd_v4_dkdv_d{dd}_{dkdv}", "dkdv", d, Dv, *_tile(dkdv), True, kern)
    flash(f"fa_bwd_v4_dq_d{dd}_{dq}", "dq", d, Dv, *_tile(dq), True, kern)


def launch_v5(d, tile=None, kern=None):
    """v5 with the named tile candidate (default V5_TILES)."""
    dd = d.size[2]
    tile = tile or V5_TILES[dd]
    Dv = preprocess(d, zero_dq=True)
    flash(f"fa_bwd_v5_d{dd}_{tile}", "dkdv", d, Dv, *_tile(tile), True, kern)


def v6_tile(name):
    """'bm64_bn128_s2_b1' -> (64, 128, 2)."""
    bm, bn, st, _ = name.split("_")
    return int(bm[2:]), int(bn[2:]), int(st[1:])


def launch_v6(d, tile=None, kern=None):
    """v6 with the named tile candidate (default V6_TILES): D (and dQ = 0), then one kernel."""
    bh, n, dd, m = d.size
    tile = tile or V6_TILES[dd]
    bm, bn, stages = v6_tile(tile)
    Dv = preprocess(d, zero_dq=True)
    smem = v6_smem_bytes(dd, bm, bn, stages)
    fn = (kern or K)(f"fa_bwd_v6_d{dd}_{tile}", SIG, dynamic_smem=smem)
    fn.prepared_call((bh, H.cdiv(n, bn), 1), (THREADS, 1, 1), d.Q, d.K, d.V, d.dO, d.LSE, Dv,
                     d.dQ, d.dK, d.dV, n, np.float32(1.0 / np.sqrt(dd)), int(m == CAUSAL),
                     shared_size=smem)


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    bh, n, dd, m = d.size
    causal = int(m == CAUSAL)
    scale = np.float32(1.0 / np.sqrt(dd))
    if version == "v4":
        launch_v4(d)
        return
    if version == "v5":
        launch_v5(d)
        return
    if version == "v6":
        launch_v6(d)
        return
    Dv = preprocess(d, zero_dq=version == "v2")
    if version == "v1":
        P = d.scratch("P", (bh, n, n))
        dS = d.scratch("dS", (bh, n, n))
        blk = (32, 8, 1)
        K("fa_bwd_v1_scores", "PPPPPPPPiifi").prepared_call(
            (H.cdiv(n, 32), H.cdiv(n, 8), bh), blk, d.Q, d.K, d.V, d.dO, d.LSE, Dv, P, dS, n, dd,
            scale, causal)
        K("fa_bwd_v1_dkdv", "PPPPPPiif").prepared_call(
            (H.cdiv(dd, 32), H.cdiv(n, 8), bh), blk, d.Q, d.dO, P, dS, d.dK, d.dV, n, dd, scale)
        K("fa_bwd_v1_dq", "PPPiif").prepared_call(
            (H.cdiv(dd, 32), H.cdiv(n, 8), bh), blk, d.K, dS, d.dQ, n, dd, scale)
    elif version == "v2":
        flash(f"fa_bwd_v2_d{dd}", "dkdv", d, Dv, *TILE_V23, False)
    else:
        flash(f"fa_bwd_v3_dkdv_d{dd}", "dkdv", d, Dv, *TILE_V23, False)
        flash(f"fa_bwd_v3_dq_d{dd}", "dq", d, Dv, *TILE_V23, False)


def torch_sdpa_backward(d):
    """torch SDPA's backward on the case's device arrays: the forward runs once here (outside
    any timing, fp32, TF32 off); the returned fn() runs only torch.autograd.grad."""
    torch = torch_fp32()
    F = torch.nn.functional
    bh, n, dd, m = d.size
    q, k, v = (as_torch(d.array(x)).view(1, bh, n, dd).detach().requires_grad_() for x in "QKV")
    do = as_torch(d.array("dO")).view(1, bh, n, dd)
    out = F.scaled_dot_product_attention(q, k, v, is_causal=m == CAUSAL)

    def fn():
        torch.autograd.grad(out, (q, k, v), do, retain_graph=True)

    def grads():
        return [g.view(bh, n, dd) for g in torch.autograd.grad(out, (q, k, v), do, retain_graph=True)]

    fn.grads = grads
    return fn


def baselines(d):
    if torch_or_none() is None:
        return {}
    return {"torch SDPA backward": torch_sdpa_backward(d)}


# --- the public function ----------------------------------------------------------------------

def attention_backward(q, k, v, o, do, lse, causal=False, version=BEST):
    """(dQ, dK, dV) of attention O = softmax(q k^T / sqrt(d) [causal-masked]) v on the GPU,
    float32: q, k, v, o (the forward's output), do (dL/dO) all [BH, N, d] or [B, H, N, d] with
    d = 64 or 128, lse [BH, N] or [B, H, N] the forward's row logsumexp (natural log of
    sum_j exp(q_i . k_j / sqrt(d))). An empty input returns empty gradients without a launch.
    v2, v5 and v6 add dQ with atomics (its last bits may differ run to run); v3 and v4 do not."""
    version = A.version(version, VERSIONS)
    if not isinstance(causal, (bool, np.bool_)):
        raise TypeError(f"causal must be True or False, got {type(causal).__name__} {causal!r}")
    what = "[BH, N, d] or [B, H, N, d]"
    q = A.floats(q, "q", ndim=(3, 4), what=what)
    k, v, o, do = (A.floats(x, name, ndim=(3, 4), what=what)
                   for x, name in ((k, "k"), (v, "v"), (o, "o"), (do, "do")))
    shape = A.same_shape(q=q, k=k, v=v, o=o, do=do)
    lse = A.floats(lse, "lse", shape=shape[:-1], what="(one logsumexp per query row: q.shape[:-1])")
    if q.size == 0:
        return tuple(np.zeros(shape, np.float32) for _ in range(3))
    n, dd = shape[-2], shape[-1]
    bh = int(np.prod(shape[:-2]))
    if dd not in HEAD_DIMS:
        raise ValueError(f"head dim d = {dd}: the kernels are built for d = 64 and d = 128")
    if not (np.isfinite(lse).all() and all(np.isfinite(x).all() for x in (q, k, v, o, do))):
        raise ValueError("the inputs hold NaN or Inf")
    size = (bh, n, dd, CAUSAL if causal else FULL)
    validate_size(size)
    inputs = {"Q": q, "K": k, "V": v, "O": o, "dO": do}
    case = H.Case(size, inputs={name: x.reshape(bh, n, dd) for name, x in inputs.items()}
                  | {"LSE": lse.reshape(bh, n)},
                  outputs={name: ((bh, n, dd), np.float32) for name in ("dQ", "dK", "dV")})
    out = H.run(launch, version, case)
    return tuple(out[name].reshape(shape) for name in ("dQ", "dK", "dV"))


# --- the bar ----------------------------------------------------------------------------------

def _extra(rec, key):
    return ((rec or {}).get("extra") or {}).get(key)


def _grads_bar(rec):
    """Every checked (version, size) within its float64 tolerance, every timed row too, and
    every version within 1e-4 of float64 finite differences."""
    checks = [c for c in (rec or {}).get("checks", []) if "ok" in c]
    rows = [r for c in (rec or {}).get("cases", []) for r in c.get("rows", []) if "ok" in r]
    fd = _extra(rec, "finite_differences")
    if not checks or not fd:
        return False, "not measured"
    bad = [f"{c['version']} at {H.size_str(c['size'])}" for c in checks if not c["ok"]]
    bad += [f"{r['version']} (timed)" for r in rows if not r["ok"]]
    bad += [f"{v} vs finite differences" for v, r in fd.items() if not r["ok"]]
    if bad:
        return False, "wrong: " + ", ".join(bad[:4])
    worst = max(r["rel_err"] for r in fd.values())
    return True, (f"{len(checks)} checks and {len(rows)} timed runs within tolerance; finite "
                  f"differences worst {worst:.1e}")


# CURRICULUM.md: gradients match float64; faster than torch SDPA backward in fp32 at the
# day-26 sizes (B*H = 32, N = 4096, d = 64, causal and not)
BAR = [
    {"text": "dQ, dK, dV match float64 (2x float32 numpy's error) and finite differences",
     "check": _grads_bar},
    {"sizes": [BAR_FULL, BAR_CAUSAL], "vs_baseline": 1.0, "baseline": "torch SDPA backward"},
]


# --- extras: finite differences, torch's backend ----------------------------------------------

def finite_difference_check(size=FD_SIZE, seed=27, coords=12):
    """Every version's gradients at `coords` random entries of each of q, k, v against central
    differences of the float64 loss sum(O * dO), both masks: {version: {"rel_err", "ok"}}."""
    bh, n, d = size
    out = {}
    for causal in (False, True):
        rng = np.random.default_rng(seed + causal)
        q, k, v, do = (rng.standard_normal((bh, n, d)).astype(np.float32) for _ in range(4))
        o, lse = reference.forward(q, k, v, causal)
        x64 = [x.astype(np.float64) for x in (q, k, v)]
        f = lambda: reference.loss(*x64, do, causal)
        idx = [[tuple(rng.integers(0, s) for s in x.shape) for _ in range(coords)] for x in x64]
        fd = [reference.numerical_grad(f, x, ix) for x, ix in zip(x64, idx)]
        for ver in VERSIONS:
            g = attention_backward(q, k, v, o.astype(np.float32), do, lse.astype(np.float32),
                                   causal=causal, version=ver)
            err = max(reference.rel_l2(np.array([gi[i] for i in ix]), w)
                      for gi, ix, w in zip(g, idx, fd))
            prev = out.get(ver, {"rel_err": 0.0})["rel_err"]
            out[ver] = {"rel_err": float(max(prev, err)), "ok": bool(max(prev, err) <= 1e-4)}
    return out


def torch_backend(size=TORCH_INFO_SIZE):
    """The kernels torch's SDPA backward launches (fp32) and its error against float64."""
    from common.baselines import kernels_launched

    case = make_case(size, np.random.default_rng(26))
    d = H.DeviceCase(case)
    fn = torch_sdpa_backward(d)
    names = sorted({name for name, _ in kernels_launched(fn)})
    exp = case.expected()
    errs = {k: reference.rel_l2(g.detach().cpu().numpy(), exp[k])
            for k, g in zip(("dQ", "dK", "dV"), fn.grads())}
    return names, errs, case.tolerance()


def extras(report, mode):
    fd = finite_difference_check()
    report.section(f"gradients vs float64 central differences (BH={FD_SIZE[0]}, N={FD_SIZE[1]}, "
                   f"d={FD_SIZE[2]}, full and causal, 12 entries each of q, k, v)",
                   [[v, f"{r['rel_err']:.1e}", "ok" if r["ok"] else "FAIL"] for v, r in fd.items()],
                   ["version", "worst rel err", "ok (<= 1e-4)"])
    report.record("finite_differences", fd)
    for v, r in fd.items():
        if not r["ok"]:
            report.failures.append(f"finite differences: {v} off by {r['rel_err']:.1e}")
    if mode == "check" or torch_or_none() is None:
        return
    try:
        names, errs, tol = torch_backend()
    except Exception as e:  # the library must not stop the day
        report.say(f"torch SDPA backend not identified: {type(e).__name__}: {e}")
        return
    report.section(f"torch SDPA backward (fp32, TF32 off) at {H.size_str(TORCH_INFO_SIZE)}: "
                   "kernels launched, error vs float64",
                   [[", ".join(names)] + [f"{errs[k]:.1e} (ours <= {tol[k]:.1e})" for k in errs]],
                   ["kernels", "dQ rel err", "dK rel err", "dV rel err"])
    report.record("torch_backend", {"kernels": names, "rel_err": errs, "size": list(TORCH_INFO_SIZE)})
