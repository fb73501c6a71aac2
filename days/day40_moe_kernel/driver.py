"""Day 40 driver: a mixture-of-experts layer in fp32 (top-2 of E experts), three versions.

    from days.day40_moe_kernel.driver import moe, route
    y = moe(x, w_gate, w1, b1, w2, b2)          # numpy in, numpy out (float32); version=BEST
    experts, weights, counts = route(x, w_gate)  # the router alone: top-2, weights, load per expert

x [T, C]; w_gate [C, E]; w1 [E, C, 4C], b1 [E, 4C], w2 [E, 4C, C], b2 [E, C] (each expert's
weights stored [in, out]). A size is TxCxExR: R = 1 a random router, R = 2 a skewed one (the
loads fall off from expert 0 and the last expert receives no token).
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "naive: gather copy, counts to the host, 1 GEMM launch/expert/layer, bias+GELU, combine",
    "v2": "grouped GEMMs (1 launch/layer), x rows gathered in the tile load, no host sync",
    "v3": "v2 + fused epilogues: bias+GELU in fc1; bias, gate weight, scatter-add into y in fc2",
}
BEST = "v3"   # fastest at every bench size (H200, 2026-11-26)
BALANCED, SKEWED = 1, 2   # a size's last number: the router
MAX_E = 16                # kernel.cu's MAX_E (the gate keeps E logits in registers)
SIZE_HELP = ("TxCxExR (tokens x channels x experts 2..16 x router 1 random | 2 skewed), "
             "e.g. 8192x768x8x1")
SIZES = {"small": (64, 64, 8, 1), "default": (8192, 768, 8, 1), "large": (16384, 768, 8, 1)}
# 1 token (6 of 8 experts get nothing), a skewed router (its last expert gets nothing), C % 4 != 0
# (50, 3, 1, 33, 5: the scalar GEMM and elementwise paths), E = 2 (every token to both), 3, 4,
# 16; T past a 128-row tile (130, 129, 200, 257, 300) with the headline C = 768
CHECK_SIZES = [(1, 64, 8, 1), (33, 64, 8, 2), (200, 96, 8, 1), (130, 50, 8, 1), (31, 3, 4, 1),
               (300, 128, 16, 2), (257, 768, 8, 1), (5, 1, 2, 1), (129, 33, 3, 1), (1, 5, 3, 2)]
BAR_SIZE = (8192, 768, 8, BALANCED)
AWKWARD = (5000, 768, 8, BALANCED)          # 10000 assignments: partial tiles in every expert
BENCH_SIZES = [BAR_SIZE, AWKWARD, (8192, 768, 8, SKEWED)]
TORCH = "torch loop over experts"

TILE = 128                # sgemm.cuh's block tile (kernel.cu static_asserts it)
THREADS = 256
GATE_TOKENS = 32          # tokens per gate block (kernel.cu)
GAP = 1e-3                # minimum margin between a token's 2nd and 3rd logits, x rms(logits)


def validate_size(size):
    if len(size) != 4:
        raise ValueError(f"a size is {SIZE_HELP}")
    t, c, e, r = size
    if not 2 <= e <= MAX_E:
        raise ValueError(f"E = {e} experts: between 2 and {MAX_E} (top-2 needs two; the gate "
                         f"holds at most {MAX_E} logits)")
    if r not in (BALANCED, SKEWED):
        raise ValueError(f"the router must be 1 (random) or 2 (skewed), got {r}")
    if r == SKEWED and e < 3:
        raise ValueError("a skewed router needs E >= 3 (its last expert gets no token, and top-2 "
                         "of 2 experts takes both)")
    if H.cdiv(2 * t, TILE) + e > 65535:
        raise ValueError(f"T = {t}: at most {(65535 - e) * TILE // 2} tokens (the grouped GEMMs "
                         "put 128-row tiles on gridDim.y)")
    A.fits_int32("h = [2T, 4C]", 2 * t * 4 * c)
    A.fits_int32("w1 = [E, C, 4C]", e * c * 4 * c)


def router_inputs(size, rng):
    """x [T, C] and w_gate [C, E], float32, with no near-tie between any token's 2nd and 3rd
    logits (a margin of GAP x rms(logits); tokens that miss it are drawn again): float32 sums
    (error ~1e-6 here) then pick the same two experts as the float64 reference, and the check
    cannot flake. Skewed router: x shifted by 5 along a unit vector u and w_gate[:, e] given a
    component beta_e along u (beta = 0.2, 0.1, 0, -0.1, ... and -10 for the last expert): the logits
    gain 5 beta_e, the loads fall off with e, and tokens that would still pick the last expert
    are drawn again, so it receives none."""
    t, c, e, r = size
    wg = rng.standard_normal((c, e)) / np.sqrt(c)
    shift = np.zeros(c)
    if r == SKEWED:
        u = rng.standard_normal(c)
        u /= np.linalg.norm(u)
        beta = 0.2 - 0.1 * np.arange(e)
        beta[-1] = -10.0
        wg = wg + np.outer(u, beta)
        shift = 5.0 * u
    wg = wg.astype(np.float32)
    x = (rng.standard_normal((t, c)) + shift).astype(np.float32)
    for _ in range(200):
        logits = x.astype(np.float64) @ wg.astype(np.float64)
        rms = np.sqrt(np.mean(logits ** 2)) or 1.0
        bad = reference.second_gap(logits) < GAP * rms
        if r == SKEWED:
            bad |= (np.argsort(-logits, axis=1, kind="stable")[:, :2] == e - 1).any(axis=1)
        if not bad.any():
            return x, wg
        x[bad] = (rng.standard_normal((int(bad.sum()), c)) + shift).astype(np.float32)
    raise RuntimeError("could not draw tokens clear of routing near-ties")


def make_case(size, rng):
    """The router's inputs (router_inputs); each expert's weights scaled by 1/sqrt(fan-in) so
    both GEMMs' outputs are O(1), biases ~ N(0, 0.1^2)."""
    validate_size(size)
    t, c, e, _ = size
    h = 4 * c
    x, wg = router_inputs(size, rng)
    f = np.float32
    w1 = (rng.standard_normal((e, c, h), dtype=f) * f(1 / np.sqrt(c)))
    b1 = (0.1 * rng.standard_normal((e, h))).astype(f)
    w2 = (rng.standard_normal((e, h, c), dtype=f) * f(1 / np.sqrt(h)))
    b2 = (0.1 * rng.standard_normal((e, c))).astype(f)
    inputs = dict(x=x, wg=wg, w1=w1, b1=b1, w2=w2, b2=b2)

    def ref():
        y, counts = reference.moe(x, wg, w1, b1, w2, b2)
        return {"y": y, "counts": counts}

    return H.Case(size, inputs=inputs, outputs={"y": ((t, c), f), "counts": ((e,), np.int32)},
                  reference=ref, flops=reference.flops(t, c, e), unit="fp32")


# --- launches --------------------------------------------------------------------------------

class Buffers:
    """The dispatch's work buffers (scratch of the DeviceCase: allocated once, reused)."""

    def __init__(self, d):
        t, c, e, _ = d.size
        s = 2 * t
        i32, f32 = np.int32, np.float32
        self.topi = d.scratch("topi", (s,), i32)
        self.topw = d.scratch("topw", (s,), f32)
        self.fill = d.scratch("fill", (e,), i32)
        self.offsets = d.scratch("offsets", (e + 1,), i32)
        self.tile_start = d.scratch("tile_start", (e + 1,), i32)
        self.slot_token = d.scratch("slot_token", (s,), i32)
        self.slot_w = d.scratch("slot_w", (s,), f32)
        self.slot_expert = d.scratch("slot_expert", (s,), i32)
        self.slot_of = d.scratch("slot_of", (s,), i32)
        self.h = d.scratch("h", (s, 4 * c), f32)
        self.d = d

    def out(self):   # v1/v2: fc2's rows in slot order
        t, c, _, _ = self.d.size
        return self.d.scratch("out", (2 * t, c), np.float32)

    def xe(self):    # v1: x's rows copied into slot order
        t, c, _, _ = self.d.size
        return self.d.scratch("xe", (2 * t, c), np.float32)


def _grid1(n):
    return (H.cdiv(n, THREADS), 1, 1), (THREADS, 1, 1)


def gate_launch(d, topi, topw, counts):
    t, c, e, _ = d.size
    from common.gpu import driver

    driver().memset_d32_async(counts, 0, e)
    K("moe_gate", "PPPPPiii").prepared_call((H.cdiv(t, GATE_TOKENS), 1, 1), (THREADS, 1, 1),
                                            d.x, d.wg, topi, topw, counts, t, c, e)


def dispatch_stages(d, b):
    """Every version's first four stages: zero the counters, gate, scan, scatter."""
    from common.gpu import driver

    t, c, e, _ = d.size
    cuda = driver()
    return [
        ("zero counters", lambda: cuda.memset_d32_async(b.fill, 0, e)),
        ("gate: logits, top-2, softmax, counts", lambda: gate_launch(d, b.topi, b.topw, d.counts)),
        ("scan: segment and tile offsets", lambda: K("moe_scan", "PPPi").prepared_call(
            (1, 1, 1), (32, 1, 1), d.counts, b.offsets, b.tile_start, e)),
        ("scatter: slots claimed by atomics", lambda: K("moe_scatter", "PPPPPPPPi").prepared_call(
            *_grid1(2 * t), b.topi, b.topw, b.offsets, b.fill, b.slot_token, b.slot_w,
            b.slot_expert, b.slot_of, t)),
    ]


def launch_stages(version, d):
    """The version's kernels as a list of (stage name, zero-argument launch), in order."""
    version = A.version(version, VERSIONS)
    t, c, e, _ = d.size
    h, s = 4 * c, 2 * t
    vec = c % 4 == 0
    sfx = "vec" if vec else "scalar"
    b = Buffers(d)
    stages = dispatch_stages(d, b)
    gblock = (THREADS, 1, 1)
    rows_bound = H.cdiv(s, TILE) + e            # >= the real number of row tiles
    if version == "v1":
        gemm = K(f"moe_gemm_v1_{sfx}", "PPPiii")
        xe, out = b.xe(), b.out()
        host = {}

        def read_offsets():
            from common.gpu import driver

            off = np.empty(e + 1, np.int32)
            driver().memcpy_dtoh(off, b.offsets)   # waits for the dispatch: a host round trip
            host["off"] = off

        def per_expert(a_base, a_ld, w_base, w_stride, c_base, n, kk):
            off = host["off"]
            for ex in range(e):
                m = int(off[ex + 1] - off[ex])
                if m:
                    gemm.prepared_call((H.cdiv(n, TILE), H.cdiv(m, TILE), 1), gblock,
                                       int(a_base) + 4 * int(off[ex]) * a_ld,
                                       int(w_base) + 4 * ex * w_stride,
                                       int(c_base) + 4 * int(off[ex]) * n, m, n, kk)

        per_row = c // 4 if vec else c
        return stages + [
            ("read offsets to the host", read_offsets),
            ("gather x rows (copy)", lambda: K(f"moe_gather_v1_{sfx}", "PPPii").prepared_call(
                *_grid1(s * per_row), d.x, b.slot_token, xe, s, c)),
            ("fc1, one launch per expert", lambda: per_expert(xe, c, d.w1, c * h, b.h, h, c)),
            ("bias + gelu", lambda: K("moe_bias_gelu_v1", "PPPii").prepared_call(
                *_grid1(s * h // 4), b.h, d.b1, b.slot_expert, s, h)),
            ("fc2, one launch per expert", lambda: per_expert(b.h, h, d.w2, h * c, out, c, h)),
            ("combine (+ b2)", lambda: K(f"moe_combine_v1_{sfx}", "PPPPPPii").prepared_call(
                *_grid1(t * per_row), out, d.b2, b.topw, b.slot_of, b.slot_expert, d.y, t, c)),
        ]
    fused = version == "v3"
    v = "v3" if fused else "v2"
    fc1 = K(f"moe_fc1_{v}_{sfx}", "PPPPPPPiii")
    fc2 = K(f"moe_fc2_{v}_{sfx}", "PPPPPPPPiii")
    g1, g2 = (H.cdiv(h, TILE), rows_bound, 1), (H.cdiv(c, TILE), rows_bound, 1)
    run_fc1 = lambda: fc1.prepared_call(g1, gblock, d.x, b.slot_token, d.w1, d.b1, b.h, b.offsets,
                                        b.tile_start, c, h, e)
    if fused:
        from common.gpu import driver

        return stages + [
            ("zero y", lambda: driver().memset_d32_async(d.y, 0, t * c)),
            ("fc1 grouped + bias + gelu", run_fc1),
            ("fc2 grouped + bias, x gate weight, scatter-add", lambda: fc2.prepared_call(
                g2, gblock, b.h, d.w2, d.b2, d.y, b.slot_token, b.slot_w, b.offsets,
                b.tile_start, c, h, e)),
        ]
    out = b.out()
    per_row = c // 4 if vec else c
    return stages + [
        ("fc1 grouped (rows gathered)", run_fc1),
        ("bias + gelu", lambda: K("moe_bias_gelu_v1", "PPPii").prepared_call(
            *_grid1(s * h // 4), b.h, d.b1, b.slot_expert, s, h)),
        ("fc2 grouped", lambda: fc2.prepared_call(g2, gblock, b.h, d.w2, d.b2, out, b.slot_token,
                                                  b.slot_w, b.offsets, b.tile_start, c, h, e)),
        ("combine (+ b2)", lambda: K(f"moe_combine_v1_{sfx}", "PPPPPPii").prepared_call(
            *_grid1(t * per_row), out, d.b2, b.topw, b.slot_of, b.slot_expert, d.y, t, c)),
    ]


def launch(version, d):
    version = A.version(version, VERSIONS)   # never run some other kernel for an unknown name
    for _, fn in launch_stages(version, d):
        fn()


# --- the torch baseline: the usual eager loop over experts ---------------------------------------

def torch_loop(d):
    """torch eager, fp32 (TF32 off), on the same device memory: x @ Wg, topk(2), softmax over
    the two, then for each expert its tokens (torch.where), two addmm with a tanh GELU between,
    and index_add_ of the weighted rows into y. Returns the callable."""
    import torch.nn.functional as F

    torch = torch_fp32()
    t, c, e, _ = d.size
    x, wg = as_torch(d.array("x")), as_torch(d.array("wg"))
    w1, b1 = as_torch(d.array("w1")), as_torch(d.array("b1"))
    w2, b2 = as_torch(d.array("w2")), as_torch(d.array("b2"))

    def loop():
        logits = x @ wg
        top, idx = torch.topk(logits, 2, dim=-1)
        gate = torch.softmax(top, dim=-1)
        y = torch.zeros_like(x)
        for ex in range(e):
            tok, k = torch.where(idx == ex)
            if tok.numel() == 0:
                continue
            hid = F.gelu(torch.addmm(b1[ex], x[tok], w1[ex]), approximate="tanh")
            out = torch.addmm(b2[ex], hid, w2[ex])
            y.index_add_(0, tok, out * gate[tok, k].unsqueeze(1))
        return y

    return loop


def baselines(d):
    if torch_or_none() is None:
        return {}
    return {TORCH: torch_loop(d)}


# CURRICULUM.md: matches numpy (every timed row is checked) and faster than a torch loop over
# experts at 8 experts, top-2, 8192 tokens, C = 768
BAR = [{"sizes": [BAR_SIZE], "vs_baseline": 1.0, "baseline": TORCH}]


# --- public functions --------------------------------------------------------------------------

def _router_args(x, w_gate):
    x = A.floats(x, "x", ndim=2, what="[T, C]")
    t, c = x.shape
    if c == 0:
        raise ValueError("x has C = 0 channels; the router needs at least one")
    wg = A.floats(w_gate, "w_gate", ndim=2, what="[C, E]")
    if wg.shape[0] != c:
        raise ValueError(f"w_gate must be [C, E] with C = {c} rows, got {wg.shape}")
    e = wg.shape[1]
    if not 2 <= e <= MAX_E:
        raise ValueError(f"w_gate has E = {e} experts: between 2 and {MAX_E}")
    for name, v in (("x", x), ("w_gate", wg)):
        if not np.isfinite(v).all():
            raise ValueError(f"{name} holds NaN or Inf; the router cannot rank experts on them")
    return x, wg, t, c, e


def route(x, w_gate):
    """The router on the GPU: (experts [T, 2] int32, the larger logit's expert first, ties to
    the lower index; weights [T, 2] float32, a softmax over the two logits; counts [E] int32,
    the tokens each expert receives)."""
    x, wg, t, c, e = _router_args(x, w_gate)
    if t == 0:
        return np.zeros((0, 2), np.int32), np.zeros((0, 2), np.float32), np.zeros(e, np.int32)
    validate_size((t, c, e, BALANCED))
    case = H.Case((t, c, e, BALANCED), inputs={"x": x, "wg": wg},
                  outputs={"experts": ((t, 2), np.int32), "weights": ((t, 2), np.float32),
                           "counts": ((e,), np.int32)})
    out = H.run(lambda v, d: gate_launch(d, d.experts, d.weights, d.counts), "route", case)
    return out["experts"], out["weights"], out["counts"]


def moe(x, w_gate, w1, b1, w2, b2, version=BEST):
    """y = sum over each token's top-2 experts of weight * expert(x) on the GPU, float32.
    x [T, C], w_gate [C, E] (2 <= E <= 16), w1 [E, C, 4C], b1 [E, 4C], w2 [E, 4C, C], b2 [E, C].
    T = 0 returns an empty [0, C] array without a launch."""
    version = A.version(version, VERSIONS)
    x, wg, t, c, e = _router_args(x, w_gate)
    h = 4 * c
    w1 = A.floats(w1, "w1", shape=(e, c, h), what="[E, C, 4C] ([in, out] per expert)")
    b1 = A.floats(b1, "b1", shape=(e, h), what="[E, 4C]")
    w2 = A.floats(w2, "w2", shape=(e, h, c), what="[E, 4C, C] ([in, out] per expert)")
    b2 = A.floats(b2, "b2", shape=(e, c), what="[E, C]")
    if t == 0:
        return np.zeros((0, c), np.float32)
    validate_size((t, c, e, BALANCED))
    case = H.Case((t, c, e, BALANCED), inputs=dict(x=x, wg=wg, w1=w1, b1=b1, w2=w2, b2=b2),
                  outputs={"y": ((t, c), np.float32), "counts": ((e,), np.int32)})
    return H.run(launch, version, case)["y"]


# --- extras: the load per expert, and where the time goes ---------------------------------------

LOAD_SIZES = [(8192, 768, 8, BALANCED), (8192, 768, 8, SKEWED)]
STAGE_SIZE = BAR_SIZE


def extras(report, mode):
    if mode == "check":
        return
    load_table(report)
    stage_table(report)


def load_table(report):
    """Tokens per expert at 8192 tokens, random and skewed router, counted on the GPU by the
    gate kernel and checked against numpy's."""
    cols, rec = [], {}
    for size in LOAD_SIZES:
        x, wg = router_inputs(size, np.random.default_rng(40))
        _, _, counts = route(x, wg)
        want = reference.route(x, wg)[2]
        if not np.array_equal(counts, want):
            report.failures.append(f"counts per expert at {H.size_str(size)}: GPU {list(counts)} "
                                   f"!= numpy {list(want)}")
        cols.append(counts)
        rec[H.size_str(size)] = [int(v) for v in counts]
    e = LOAD_SIZES[0][2]
    total = 2 * LOAD_SIZES[0][0]
    rows = [[f"expert {i}"] + [f"{int(cnt[i])} ({100 * cnt[i] / total:.1f}%)" for cnt in cols]
            for i in range(e)]
    rows.append(["max / mean"] + [f"{cnt.max() / (total / e):.2f}" for cnt in cols])
    report.section(f"Tokens per expert ({LOAD_SIZES[0][0]} tokens x top-2 = {total} "
                   "assignments)", rows, ["expert", "random router", "skewed router"])
    report.record("load", rec)


def stage_table(report):
    """What each stage of v1, v2 and v3 adds at 8192x768x8: the median time of the sequence up
    to it minus that of the sequence before it (L2 flushed before each run), and the whole torch
    loop."""
    from common.timing import time_fn

    case = make_case(STAGE_SIZE, np.random.default_rng(41))
    d = H.DeviceCase(case)
    t, c, e, _ = STAGE_SIZE
    gemm_flops = 2 * (2 * t) * c * 4 * c          # one layer of the experts
    rows, rec = [], {}
    for version in ("v1", "v2", "v3"):
        stages = launch_stages(version, d)
        # A stage alone is not always repeatable (the scatter's slot counters are cleared by the
        # first stage; run alone again and again it would claim slots past the end), so time
        # every prefix of the sequence from the start and take the differences.
        prev = 0.0
        for i, (name, _) in enumerate(stages):
            prefix = stages[:i + 1]
            ms_total = time_fn(lambda: [fn() for _, fn in prefix]).median_ms
            ms = max(ms_total - prev, 0.0)
            prev = ms_total
            tf = f"{gemm_flops / (ms * 1e-3) / 1e12:.1f}" if name.startswith("fc") and ms else ""
            rows.append([f"{version} {name}", f"{ms * 1e3:.1f}", tf])
            rec[f"{version} {name}"] = ms
    if torch_or_none() is not None:
        ms = time_fn(torch_loop(d)).median_ms
        rows.append([TORCH + " (whole layer)", f"{ms * 1e3:.1f}", ""])
        rec[TORCH] = ms
    report.section(f"Stages at {H.size_str(STAGE_SIZE)}, each timed as what it adds", rows,
                   ["stage", "us", "TFLOP/s"])
    report.record("stages", rec)
