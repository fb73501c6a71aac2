"""Day 59 driver: fused dropout, forward and backward, the mask made again from (seed, offset)
instead of stored.

    from days.day59_dropout.driver import dropout, dropout_backward, dropout_mask
    y = dropout(x, p=0.1, seed=7, offset=0)           # numpy in, numpy out (float32)
    dx = dropout_backward(dy, p=0.1, seed=7, offset=0)  # the same mask, regenerated
    keep = dropout_mask(x.shape, 0.1, 7, 0)            # bool: which elements survive

For GPU memory (the training days 61-70): dropout_gpu(x, p, seed, offset, out=None) and
dropout_backward_gpu(dy, p, seed, offset, out=None) take and return pycuda GPUArrays; give each
dropout layer and step its own offset (common.rng.PhiloxStream hands them out) and pass the same
(seed, offset) to the backward.

A case (n, offset) is a training step's two passes on n floats: forward x -> y, backward
dy -> dx, with p = 0.1 and one (seed, offset). extras() times each pass alone against torch's,
runs the reproducibility checks and the keep-fraction test, and times the fused
bias + dropout + residual op against torch's three kernels.
"""
import numpy as np

from common import args as A
from common.bars import all_pass
from common import harness as H
from common import rng

from . import reference

K = H.Kernels(__file__)
THREADS = 256
SIGNATURE = "PPiIIQQf"        # in, out, n, key low, key high, offset, threshold, scale

VERSIONS = {
    "v1": "one element per thread (a Philox block per element), scalar",
    "v2": "one Philox block per 4 elements, float4 load/store",
    "v3": "4 chunks per thread, loads issued first, streaming hints",
}
BEST = "v2"   # fastest at the default size in the bench (v3's streaming hints cost ~7%: .notes/day59_sweep_results.md)
P_CASE = 0.1
SIZE_HELP = "NxOFFSET (n floats, stream offset of element 0), e.g. 2^27x0"
SIZES = {"small": (1000, 0), "default": (1 << 24, 0), "large": (1 << 27, 0)}
# 1-5 elements (partial chunks), odd offsets (no float4 at all), 31/33, a length that is not a
# multiple of v3's 4096-element block span, chunks past 65536 (the stream's block 1)
CHECK_SIZES = [(1, 0), (1, 3), (2, 1), (3, 0), (4, 0), (5, 2), (31, 1), (33, 0), (1000, 4),
               (4097, 3), (4096 * 3 + 4, 0), (100003, 0), (262147, 5), (300000, 1000004)]
# 2^27 floats (512 MiB an array, 4 arrays: ~10 L2s each; the numpy reference ~5 s) and an
# awkward length from an odd offset (every access scalar)
BENCH_SIZES = [(1 << 27, 0), (10000019, 7)]
MAX_OFFSET = rng.MAX_OFFSET


def validate_size(size):
    n, offset = size
    A.fits_int32("n", n)
    if offset >= MAX_OFFSET:
        raise ValueError(f"offset {offset} is past 2^63")


def _params(seed, offset, p):
    return {"seed": seed, "offset": offset, "p": p, "thr": reference.keep_threshold(p),
            "scale": float(reference.scale(p))}


def make_case(size, rng_np, ops=("forward", "backward"), p=P_CASE):
    n, offset = size
    seed = int(rng_np.integers(0, 2 ** 63)) | (1 << 40)
    inputs, outputs = {}, {}
    def values():                   # uniform in [-1, 1): cheaper than normals at 2^27
        v = rng_np.random(n, dtype=np.float32)
        v *= 2
        v -= 1
        return v
    if "forward" in ops:
        inputs["x"] = values()
        outputs["y"] = ((n,), np.float32)
    if "backward" in ops:
        inputs["dy"] = values()
        outputs["dx"] = ((n,), np.float32)

    def ref():
        # one mask for both passes; x * s in float32 is the kernel's single rounding, so the
        # float32 product is the exact answer (reference.dropout is the float64 formulation)
        keep = reference.keep_mask(n, p, seed, offset)
        s = reference.scale(p)
        out = {}
        if "x" in inputs:
            out["y"] = np.where(keep, inputs["x"] * s, np.float32(0))
        if "dy" in inputs:
            out["dx"] = np.where(keep, inputs["dy"] * s, np.float32(0))
        return out

    k = len(ops)
    return H.Case(size, inputs=inputs, outputs=outputs, reference=ref, bytes=8 * n * k,
                  read_bytes=4 * n * k, params=_params(seed, offset, p))


def kernel_name(version):
    return f"dropout_{version}"


def per_thread(version) -> int:
    """Elements (v1) or chunks of 4 (v2, v3, v3_u<U>_cs<C>) a thread takes."""
    if version in ("v1", "v2"):
        return 1
    if version == "v3":
        return 4
    if version.startswith("v3_u"):
        return int(version[4:].split("_")[0])
    raise ValueError(f"unknown dropout version {version!r}")


def grid_for(version, n, offset):
    work = n if version == "v1" else H.cdiv(offset % 4 + n, 4)
    return (max(1, H.cdiv(work, THREADS * per_thread(version))), 1, 1), (THREADS, 1, 1)


def launch_pass(version, x_ptr, y_ptr, n, seed, offset, p):
    """One dropout pass (forward or backward: the same kernel) on device pointers."""
    grid, block = grid_for(version, n, offset)
    K(kernel_name(version), SIGNATURE).prepared_call(
        grid, block, x_ptr, y_ptr, np.int32(n), *rng.philox_args(seed, offset),
        np.uint64(reference.keep_threshold(p)), np.float32(reference.scale(p)))


def launch(version, d):
    version = A.version(version, VERSIONS)
    n, offset = d.size
    s, p = d.params["seed"], d.params["p"]
    if "x" in d.arrays:
        launch_pass(version, d.x, d.y, n, s, offset, p)
    if "dy" in d.arrays:
        launch_pass(version, d.dy, d.dx, n, s, offset, p)


def _torch_steps(d, p):
    """torch's dropout on the same memory: native_dropout (writes y and a bool mask) and
    native_dropout_backward (reads dy and the mask). Other random numbers: timed, not compared."""
    from common.baselines import as_torch, torch_or_none

    torch = torch_or_none()
    if torch is None:
        return None
    steps = []
    n = d.size[0]
    sc = 1.0 / (1.0 - p)
    if "x" in d.arrays:
        x = as_torch(d.array("x"))
        steps.append(lambda: torch.native_dropout(x, p, True))       # writes out and a bool mask
    if "dy" in d.arrays:
        dy = as_torch(d.array("dy"))
        mask = torch.rand(n, device="cuda") >= p                     # the forward's mask (made once)
        steps.append(lambda: torch.ops.aten.native_dropout_backward(dy, mask, sc))

    def run():
        for f in steps:
            f()
        return None
    return run


def baselines(d):
    fn = _torch_steps(d, d.params["p"])
    return {"torch native_dropout (+ backward)": fn} if fn else {}


# --- public functions -------------------------------------------------------------------------

def _common(p, seed, offset, version):
    version = A.version(version, VERSIONS)
    p = A.real(p, "p", low=0.0, high=1.0)
    return p, rng.checked_seed(seed), rng.checked_offset(offset), version


def dropout(x, p, seed, offset=0, version=BEST):
    """Dropout of any-shaped float32 x (other real dtypes converted): x / (1 - p) where element
    i's word offset + i of the stream (seed) is below round((1 - p) 2^32), else 0. p in [0, 1]
    (p = 1 drops everything). The same (seed, offset) always gives the same mask. Returns
    float32 of x's shape; an empty x gives an empty result without a launch."""
    p, seed, offset, version = _common(p, seed, offset, version)
    x = A.floats(x, "x")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    A.fits_int32("x", x.size)
    case = H.Case((x.size, offset), inputs={"x": x.reshape(-1)},
                  outputs={"y": ((x.size,), np.float32)}, params=_params(seed, offset, p))
    return H.run(launch, version, case)["y"].reshape(x.shape)


def dropout_backward(dy, p, seed, offset=0, version=BEST):
    """The gradient of dropout(x, p, seed, offset): dy / (1 - p) where the forward kept, else 0.
    The mask is made again from (seed, offset), never stored."""
    p, seed, offset, version = _common(p, seed, offset, version)
    dy = A.floats(dy, "dy")
    if dy.size == 0:
        return np.empty(dy.shape, np.float32)
    A.fits_int32("dy", dy.size)
    case = H.Case((dy.size, offset), inputs={"dy": dy.reshape(-1)},
                  outputs={"dx": ((dy.size,), np.float32)}, params=_params(seed, offset, p))
    return H.run(launch, version, case)["dx"].reshape(dy.shape)


def dropout_mask(shape, p, seed, offset=0):
    """Which elements dropout(x of this shape, p, seed, offset) keeps: bool, made on the GPU as
    day 58's bernoulli(1 - p) (the same words, the same threshold)."""
    p = A.real(p, "p", low=0.0, high=1.0)
    shape = rng.checked_shape(shape)
    seed, offset = rng.checked_seed(seed), rng.checked_offset(offset)
    if int(np.prod(shape)) == 0:
        return np.zeros(shape, bool)
    return rng.bernoulli(shape, 1.0 - p, seed, offset).get() > 0


def dropout_gpu(x, p, seed, offset=0, out=None, version=BEST):
    """dropout() on a float32 GPUArray, into `out` (a new GPUArray if None); returns out."""
    return _gpu_pass(x, p, seed, offset, out, version, "x")


def dropout_backward_gpu(dy, p, seed, offset=0, out=None, version=BEST):
    """dropout_backward() on a float32 GPUArray (same seed and offset as the forward)."""
    return _gpu_pass(dy, p, seed, offset, out, version, "dy")


def _gpu_pass(x, p, seed, offset, out, version, name):
    from pycuda import gpuarray

    p, seed, offset, version = _common(p, seed, offset, version)
    if not isinstance(x, gpuarray.GPUArray) or x.dtype != np.float32 or not x.flags.c_contiguous:
        raise TypeError(f"{name} must be a contiguous float32 GPUArray")
    A.fits_int32(name, x.size)
    out = rng.out_array(out, x.shape, np.float32)
    if x.size:
        launch_pass(version, x.gpudata, out.gpudata, x.size, seed, offset, p)
    return out


def dropout_add(x, bias, residual, p, seed, offset=0):
    """residual + dropout(x + bias) for x, residual [rows, C] and bias [C], float32, in one pass
    (dropout_add_v3). The mask is dropout()'s for the same (seed, offset) and n = rows * C."""
    p = A.real(p, "p", low=0.0, high=1.0)
    seed, offset = rng.checked_seed(seed), rng.checked_offset(offset)
    x = A.floats(x, "x", ndim=2, what="[rows, C]")
    b = A.floats(bias, "bias", shape=(x.shape[1],), what="[C]")
    r = A.floats(residual, "residual", shape=x.shape, what="like x")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    A.fits_int32("x", x.size)
    case = H.Case(x.shape, inputs={"x": x, "bias": b, "res": r}, outputs={"out": (x.shape, np.float32)},
                  params=_params(seed, offset, p))
    return H.run(lambda _, d: launch_add(d), "fused", case)["out"]


def launch_add(d):
    rows, C = d.size
    n = rows * C
    pr = d.params
    grid = (max(1, H.cdiv(H.cdiv(pr["offset"] % 4 + n, 4), 2 * THREADS)), 1, 1)
    K("dropout_add_v3", "PPPPiiIIQQf").prepared_call(
        grid, (THREADS, 1, 1), d.x, d.bias, d.res, d.out, np.int32(n), np.int32(C),
        np.uint32(pr["seed"] & 0xFFFFFFFF), np.uint32(pr["seed"] >> 32), np.uint64(pr["offset"]),
        np.uint64(pr["thr"]), np.float32(pr["scale"]))


# --- extras --------------------------------------------------------------------------------------

OP_SIZE = (1 << 26, 0)          # each pass alone (256 MiB an array)
FUSED_SIZE = (8192, 4096)
REPRO_N = 1 << 22
KEEP_N = 1 << 26


def reproducibility():
    """The checks that make 'no mask stored' safe. Returns {check: {value, ok}}."""
    from pycuda import gpuarray

    out = {}
    n, seed, off, p = REPRO_N, 0x5EED0059, 1 << 20, 0.1
    ones = gpuarray.to_gpu(np.ones(n, np.float32))
    y1 = dropout_gpu(ones, p, seed, off).get()
    y2 = dropout_gpu(ones, p, seed, off).get()
    out["same seed and offset: same output (bits differ)"] = int(np.count_nonzero(y1.view(np.uint32) != y2.view(np.uint32)))
    dx = dropout_backward_gpu(ones, p, seed, off).get()
    out["forward mask vs backward mask (elements differ)"] = int(np.count_nonzero((y1 > 0) != (dx > 0)))
    want = reference.keep_mask(n, p, seed, off)
    out["GPU mask vs numpy mask (elements differ)"] = int(np.count_nonzero((y1 > 0) != want))
    out["mask vs day 58's bernoulli(1 - p) (elements differ)"] = int(np.count_nonzero(
        (y1 > 0) != (rng.bernoulli(n, 1 - p, seed, off).get() > 0)))
    versions = {v: dropout_gpu(ones, p, seed, off, version=v).get() for v in VERSIONS}
    out["v1 / v2 / v3 outputs (bits differ from v1)"] = int(sum(
        np.count_nonzero(versions[v].view(np.uint32) != versions["v1"].view(np.uint32)) for v in VERSIONS))
    y3 = dropout_gpu(ones, p, seed, off + n).get()
    same = float(np.mean((y1 > 0) == (y3 > 0)))
    q = reference.keep_threshold(p) / 2 ** 32
    out["next offset: fraction of equal decisions (independent: q^2 + (1-q)^2)"] = same
    res = {k: {"value": v, "ok": v == 0} for k, v in out.items() if "fraction" not in k}
    k = next(k for k in out if "fraction" in k)
    indep = q * q + (1 - q) * (1 - q)
    se = np.sqrt(indep * (1 - indep) / n)
    res[k] = {"value": same, "want": indep, "ok": abs(same - indep) < 5 * se}
    big = gpuarray.to_gpu(np.ones(KEEP_N, np.float32))
    for pp in (0.1, 0.5):
        m = dropout_gpu(big, pp, 12345, 0).get() > 0
        z = reference.keep_z(int(m.sum()), KEEP_N, pp)
        res[f"kept fraction, p = {pp}, {KEEP_N} elements (z)"] = {"value": float(m.mean()),
                                                                   "z": z, "ok": abs(z) < 5}
    return res


def extras(report, mode):
    if mode == "check":
        return
    from common.runner import _time_baseline, case_ceilings, check_and_time

    rep = reproducibility()
    report.section("Reproducibility of the mask (no mask stored)",
                   [[k, f"{r['value']:.6g}" if isinstance(r["value"], float) else str(r["value"]),
                     "ok" if r["ok"] else "FAIL"] for k, r in rep.items()],
                   ["check", "value", "ok"])
    report.record("reproducibility", rep)
    if not all(r["ok"] for r in rep.values()):
        report.failures.append("a reproducibility check fails")

    rows, rec = [], {}
    for op in ("forward", "backward"):
        case = make_case(OP_SIZE, np.random.default_rng(59), ops=(op,))
        d = H.DeviceCase(case)
        ceil = case_ceilings(case)
        rec[op] = {"ceiling_gbps": ceil.get("gbps")}
        for v in VERSIONS:
            r = check_and_time(report, f"{op} {v}", lambda dd, v=v: launch(v, dd), case, d, ceil=ceil)
            rec[op][v] = {k: r.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling", "ok")}
            rows.append([f"{op} {v}", f"{r['median_ms'] * 1e3:.1f}", f"{r['gbps']:.0f}",
                         f"{r['pct_of_ceiling']:.1f}", "ok" if r["ok"] else "FAIL"])
        fn = _torch_steps(d, P_CASE)
        if fn is not None:
            b = _time_baseline("torch", fn, case, case.expected(), ceil)
            rec[op]["torch"] = {k: b.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling")}
            rows.append([f"{op} torch", f"{b['median_ms'] * 1e3:.1f}", f"{b['gbps']:.0f}",
                         f"{b['pct_of_ceiling']:.1f}", "-"])
    report.section(f"Each pass alone at {H.size_str(OP_SIZE)} (1:1 ceiling "
                   f"{rec['forward']['ceiling_gbps']:.0f} GB/s)", rows,
                   ["pass", "us", "GB/s", "% of ceiling", "ok"])
    report.record("passes", rec)

    rec_f = fused_bench(report)
    report.record("fused", rec_f)


def fused_bench(report):
    """dropout_add_v3 (one pass: reads x, residual, bias; writes out) against torch's
    x + b -> dropout -> + residual (three kernels), checked against numpy."""
    from common.baselines import as_torch, torch_or_none
    from common.runner import _time_baseline, case_ceilings, check_and_time

    rows_, C = FUSED_SIZE
    rg = np.random.default_rng(5959)
    x = rg.standard_normal(FUSED_SIZE, dtype=np.float32)
    b = rg.standard_normal(C, dtype=np.float32)
    r = rg.standard_normal(FUSED_SIZE, dtype=np.float32)
    seed, off = 777, 4096
    n = rows_ * C
    case = H.Case(FUSED_SIZE, inputs={"x": x, "bias": b, "res": r},
                  outputs={"out": (FUSED_SIZE, np.float32)},
                  reference=lambda: {"out": reference.dropout_add(x, b, r, P_CASE, seed, off)},
                  bytes=12 * n + 4 * C, read_bytes=8 * n + 4 * C, params=_params(seed, off, P_CASE))
    d = H.DeviceCase(case)
    ceil = case_ceilings(case)
    row = check_and_time(report, "fused dropout_add_v3", launch_add, case, d, ceil=ceil)
    rec = {"fused": {k: row.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling", "ok")},
           "ceiling_gbps": ceil.get("gbps"), "mix": ceil.get("mix")}
    table = [["fused (1 kernel)", f"{row['median_ms'] * 1e3:.1f}", f"{row['gbps']:.0f}",
              f"{row['pct_of_ceiling']:.1f}", "ok" if row["ok"] else "FAIL"]]
    torch = torch_or_none()
    if torch is not None:
        tx, tb, tr = as_torch(d.array("x")), as_torch(d.array("bias")), as_torch(d.array("res"))

        def unfused():
            torch.add(tr, torch.nn.functional.dropout(tx + tb, P_CASE, True))
            return None
        bt = _time_baseline("torch", unfused, case, case.expected(), ceil)
        rec["torch"] = {k: bt.get(k) for k in ("median_ms", "gbps", "pct_of_ceiling")}
        table.append(["torch (add, dropout, add)", f"{bt['median_ms'] * 1e3:.1f}",
                      f"{bt['gbps']:.0f}", f"{bt['pct_of_ceiling']:.1f}", "-"])
    report.section(f"Fused bias + dropout + residual at {H.size_str(FUSED_SIZE)} (GB/s of the "
                   f"fused op's bytes; ceiling {ceil.get('gbps', 0):.0f} GB/s)", table,
                   ["op", "us", "GB/s", "% of ceiling", "ok"])
    return rec


# --- the bar ---------------------------------------------------------------------------------

BAR_PCT = 90


def _pass_alone(op):
    def check(rec):
        ops = rec.get("extra", {}).get("passes", {}).get(op)
        if not ops:
            return False, "not measured"
        best = min(((v, r) for v, r in ops.items() if v in VERSIONS and r.get("ok")),
                   key=lambda vr: vr[1]["median_ms"], default=None)
        if best is None:
            return False, "no correct version"
        v, r = best
        t = ops.get("torch", {}).get("median_ms")
        ok = r["pct_of_ceiling"] >= BAR_PCT and (t is None or t >= r["median_ms"])
        vs = f", {t / r['median_ms']:.2f}x torch" if t else ""
        return ok, f"{v} {r['pct_of_ceiling']:.1f}%{vs}"
    return check


# CURRICULUM.md / issue 13: >= 90% of the memory ceiling; faster than torch dropout (the pair of
# passes at the large size, and each pass alone), reproducible by seed with no mask stored
BAR = [{"sizes": [(1 << 27, 0)], "pct": BAR_PCT, "vs_baseline": 1.0},
       {"text": f"forward alone >= {BAR_PCT}% of its ceiling and faster than torch",
        "check": _pass_alone("forward")},
       {"text": f"backward alone >= {BAR_PCT}% of its ceiling and faster than torch",
        "check": _pass_alone("backward")},
       {"text": "mask reproducible (seed, offset), forward = backward, = numpy, keep fraction",
        "check": all_pass("reproducibility")}]
