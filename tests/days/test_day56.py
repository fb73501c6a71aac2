import math
import re
from pathlib import Path

import numpy as np
import pytest

from days.day17_prefix_sum import driver as day17
from days.day56_stream_compaction import reference

FOLDER = Path(reference.__file__).parent


def _driver():
    from days.day56_stream_compaction import driver

    return driver


# --- the reference against hand-computed values and a second formulation -------------------

def test_select_and_partition_by_hand():
    x = np.array([0.5, 0.1, 0.9, 0.2, 0.7, 0.3], np.float32)
    assert reference.select(x, 0.4).tolist() == np.float32([0.5, 0.9, 0.7]).tolist()
    y, k = reference.partition(x, 0.4)
    # selected in order, then the rejected 0.1, 0.2, 0.3 in REVERSE order
    assert k == 3 and y.tolist() == np.float32([0.5, 0.9, 0.7, 0.3, 0.2, 0.1]).tolist()
    assert reference.select(x, 1.0).size == 0
    assert reference.partition(x, 1.0)[0].tolist() == x[::-1].tolist()  # nothing selected
    assert reference.partition(x, -1.0)[0].tolist() == x.tolist()       # everything selected


def test_unique_by_hand():
    x = np.array([1, 1, 2, 2, 2, 1, 3, 3], np.float32)
    assert reference.unique(x).tolist() == [1, 2, 1, 3]  # consecutive runs, not a set
    s = np.sort(np.random.default_rng(1).integers(0, 20, 500)).astype(np.float32)
    assert np.array_equal(reference.unique(s), np.unique(s))  # sorted input: np.unique
    assert reference.unique([7.0]).tolist() == [7.0]
    assert reference.unique(np.array([0.0, -0.0, 0.0], np.float32)).tolist() == [0.0]  # equal


def test_nan_is_never_selected_and_always_unique():
    x = np.array([np.nan, np.nan, 2.0, 2.0], np.float32)
    assert reference.select(x, 0.0).tolist() == [2.0, 2.0]
    y, k = reference.partition(x, 0.0)
    assert k == 2 and y[:2].tolist() == [2.0, 2.0] and np.isnan(y[2:]).all()
    u = reference.unique(x)
    assert u.size == 3 and np.isnan(u[:2]).all() and u[2] == 2.0


def test_positions_is_the_exclusive_scan():
    assert reference.positions([1, 0, 1, 1]).tolist() == [0, 1, 1, 2]
    assert reference.positions([0, 0]).tolist() == [0, 0]


@pytest.mark.parametrize("op", ["select", "partition", "unique"])
def test_compact_matches_a_python_loop(op):
    rng = np.random.default_rng(5)
    x = (reference.runs_input(300, 40, rng) if op == "unique"
         else rng.random(300, dtype=np.float32))
    t = 0.6
    sel, rej, prev = [], [], None
    for i, v in enumerate(x.tolist()):
        kept = (i == 0 or v != prev) if op == "unique" else v > t
        (sel if kept else rej).append(v)
        prev = v
    want = sel + (rej[::-1] if op == "partition" else [])
    y, k = reference.compact(op, x, t)
    assert k == len(sel) and y.tolist() == want


def test_compact_by_positions():
    """Scatter with the scanned flags, the way the kernels do: y[pos[i]] = x[i] where kept."""
    x = np.random.default_rng(2).random(1000, dtype=np.float32)
    f = reference.select_flags(x, 0.3)
    y = np.empty(int(f.sum()), np.float32)
    y[reference.positions(f)[f]] = x[f]
    assert np.array_equal(y, reference.select(x, 0.3))


def test_threshold_for_keeps_the_percentage():
    x = np.random.default_rng(3).random(200_000, dtype=np.float32)
    assert not (x > reference.threshold_for(0)).any()
    assert (x > reference.threshold_for(100)).all()
    for pct in (10, 50, 90):
        assert abs((x > reference.threshold_for(pct)).mean() - pct / 100) < 0.005


def test_runs_input():
    rng = np.random.default_rng(4)
    x = reference.runs_input(10_000, 30, rng)
    starts = np.random.default_rng(4).random(10_000) < 0.3  # the same draws
    starts[0] = True
    assert np.array_equal(reference.unique_flags(x), starts)
    assert reference.unique(reference.runs_input(50, 0, rng)).size == 1
    assert reference.unique(reference.runs_input(50, 100, rng)).size == 50
    # run numbers wrap at 2^20 but consecutive runs still differ
    r = np.arange(2 ** 20 - 2, 2 ** 20 + 2)
    v = ((r % (1 << 20)) * 0.5 - 1000.0).astype(np.float32)
    assert (v[1:] != v[:-1]).all()


# --- the driver's arithmetic -----------------------------------------------------------------

def test_kernel_threshold_is_exact_for_float64_thresholds():
    D = _driver()
    rng = np.random.default_rng(6)
    ts = [0.1, 0.5, 1 / 3, -2.5, 1e-40, -1e-40, 1e39, -1e39, 0.0, 3.0000001,
          float(np.float32(0.7)), *rng.standard_normal(200).tolist()]
    for t in ts:
        with np.errstate(over="ignore"):
            f = np.float32(t)
        near = [np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf))]
        x = np.array(near + rng.standard_normal(50).astype(np.float32).tolist(), np.float32)
        kt = D.kernel_threshold(t)
        assert kt.dtype == np.float32
        assert np.array_equal(x > kt, x.astype(np.float64) > t), t
    # a threshold that is a float32 stays as it is; one just above 0.1f rounds down to 0.1f
    assert D.kernel_threshold(float(np.float32(0.1))) == np.float32(0.1)
    assert D.kernel_threshold(np.nextafter(float(np.float32(0.1)), 1.0)) == np.float32(0.1)


def test_cases():
    D = _driver()
    rng = np.random.default_rng(7)
    c = D.make_case((1000, 50), rng)
    k = c.outputs["y"][0][0]
    assert c.outputs["count"] == ((1,), np.int32)
    assert c.expected()["count"].tolist() == [k] and c.expected()["y"].shape == (k,)
    assert c.bytes == 4 * 1000 + 4 * k + 4 and c.read_bytes == 4000
    p = D.make_op_case("partition", (1000, 50), rng)
    assert p.outputs["y"][0] == (1000,) and p.bytes == 8004
    u = D.make_op_case("unique", (1000, 0), rng)
    assert u.outputs["y"][0] == (1,) and u.expected()["count"].tolist() == [1]
    assert D.make_case((33, 0), rng).outputs["y"][0] == (0,)
    assert D.make_case((33, 100), rng).outputs["y"][0] == (33,)


def test_validate_size():
    D = _driver()
    D.validate_size((2 ** 31 - 1, 100))
    D.validate_size((5, 0))
    with pytest.raises(ValueError, match="32-bit"):
        D.validate_size((2 ** 31, 50))
    with pytest.raises(ValueError, match="0 to 100"):
        D.validate_size((100, 101))


def test_launch_plans_and_traffic():
    D = _driver()
    assert D.levels(2 ** 28) == [262144, 256, 1]
    assert D.levels(1) == [1] and D.levels(1025) == [2, 1]
    assert D.tile_of(**D.V2) == 2048 and D.tile_of(D.V4["warps"], D.V4["items"]) == 8192   # 8 warps x 32 float4-layout items
    rows = D.traffic_rows(2 ** 28, 2 ** 27)
    assert [r[2] for r in rows] == ["7", "3", "1", "1"]
    # v1: 32n - 8 * 1024 + 4k bytes over the op's 4n + 4k = 6n
    want = (32 * 2 ** 28 - 8 * 1024 + 4 * 2 ** 27) / (6 * 2 ** 28)
    assert rows[0][4] == f"{want:.2f}x" and [r[4] for r in rows[1:]] == ["1.67x", "1.00x", "1.00x"]


def _defines():
    src = (FOLDER / "kernel.cu").read_text()
    return {k: int(v) for k, v in re.findall(r"^#define (\w+) (\d+)\s*$", src, re.M)}


def test_driver_shapes_match_kernel():
    D = _driver()
    d = _defines()
    assert (d["V1_THREADS"], d["V1_SCAN_THREADS"]) == (D.V1_THREADS, D.V1_SCAN_THREADS)
    assert D.V2 == {"warps": d["V2_WARPS"], "items": d["V2_ITEMS"]}
    assert D.V3 == {"warps": d["V3_WARPS"], "items": d["V3_ITEMS"]}
    assert D.V4 == {"warps": d["V4_WARPS"], "items": d["V4_ITEMS"], "vec": bool(d["V4_VEC"]),
                    "opts": d["V4_OPTS"]}
    assert (D.OPT_VST, D.OPT_CS, D.OPT_FULL, D.OPT_LBW) == \
        (d["OPT_VST"], d["OPT_CS"], d["OPT_FULL"], d["OPT_LBW"])
    assert D.V4["vec"]  # the driver launches v4 with any x 16-byte aligned: float4 loads
    assert D.threads_of(8) == 256 and D.threads_of(8, D.OPT_LBW | D.OPT_VST) == 288
    assert (d["OP_SELECT"], d["OP_PARTITION"], d["OP_UNIQUE"]) == (0, 1, 2)


def _sweep():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "day56_sweep", FOLDER.parent.parent / ".notes" / "day56_sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)
    return sweep


def _declared_candidates():
    """kernel.cu's CANDIDATE / CANDIDATE3 lines: tag -> (warps, items, vec, opts, minb, 3 ops)."""
    D = _driver()
    bits = {"OPT_VST": D.OPT_VST, "OPT_CS": D.OPT_CS, "OPT_FULL": D.OPT_FULL, "OPT_LBW": D.OPT_LBW}
    src = (FOLDER / "kernel.cu").read_text()
    out = {}
    for three, w, i, vec, opts, minb, tag in re.findall(
            r"^CANDIDATE(3?)\((\d+), (\d+), (true|false), ([A-Z_0-9 |]+), (\d+), (\w+)\)$", src, re.M):
        o = sum(bits[b.strip()] for b in opts.split("|")) if opts.strip() != "0" else 0
        assert tag not in out, tag
        out[tag] = (int(w), int(i), vec == "true", o, int(minb), three == "3")
    return out


def test_sweep_candidates_exist_in_the_kernel():
    sweep, D = _sweep(), _driver()
    declared = _declared_candidates()
    assert (sweep.VST, sweep.CS, sweep.FULL, sweep.LBW) == (D.OPT_VST, D.OPT_CS, D.OPT_FULL, D.OPT_LBW)
    for tag, w, i, opts, three in sweep.CANDIDATES:
        assert tag in declared, tag
        dw, di, vec, dopts, minb, dthree = declared[tag]
        assert (dw, di, dopts, dthree) == (w, i, opts, three), tag
        # the tag spells the shape, the options and the launch bound
        words = {D.OPT_VST: "vst", D.OPT_CS: "cs", D.OPT_FULL: "full", D.OPT_LBW: "lbw"}
        want = f"w{w}i{i}{'v' if vec else 's'}"
        if opts == sum(words):
            want += "_all"
        else:
            want += "".join(f"_{words[b]}" for b in sorted(words) if opts & b)
        assert tag == want + (f"_m{minb}" if minb else ""), tag
        assert sweep.kernel_name(tag) == f"compact_v4_{tag}_select"
    assert len(declared) == len(sweep.CANDIDATES)
    tags = {c[0] for c in sweep.CANDIDATES} | {"v4"}
    assert all(label in tags for label, _, _ in sweep.SLEEPS)


def test_bar_sizes_are_benchmarked():
    D = _driver()
    for clause in D.BAR:
        for s in clause.get("sizes", []):
            assert tuple(s) in [tuple(b) for b in D.BENCH_SIZES]
    assert D.SIZES["default"] in D.BENCH_SIZES


# --- the public functions refuse bad input before anything reaches the GPU -------------------

def _calls():
    D = _driver()
    return [lambda x, **kw: D.select(x, 0.5, **kw), lambda x, **kw: D.partition(x, 0.5, **kw),
            lambda x, **kw: D.unique(x, **kw)]


@pytest.mark.parametrize("fi", range(3))
@pytest.mark.parametrize("x, exc, word", [
    (None, TypeError, "None"),
    ("123", TypeError, "string"),
    (np.array([1 + 2j, 3]), TypeError, "complex"),
    (np.array([True, False]), TypeError, "booleans"),
    (np.array(["a", "b"]), TypeError, "numbers"),
    (np.ones((2, 3), np.float32), ValueError, "1-D"),
    (np.float32(7), ValueError, "1-D"),
    ([[1.0, 2.0], [3.0]], ValueError, "ragged"),
])
def test_public_functions_refuse_bad_x(fi, x, exc, word):
    with pytest.raises(exc, match=word):
        _calls()[fi](x)


@pytest.mark.parametrize("fn", ["select", "partition"])
@pytest.mark.parametrize("t, exc, word", [
    (None, TypeError, "None"), ("0.5", TypeError, "real"), (True, TypeError, "real"),
    (1 + 1j, TypeError, "real"), (math.nan, ValueError, "finite"), (math.inf, ValueError, "finite"),
])
def test_threshold_must_be_a_finite_number(fn, t, exc, word):
    with pytest.raises(exc, match=word):
        getattr(_driver(), fn)([0.1, 0.9], t)


@pytest.mark.parametrize("fi", range(3))
def test_unknown_version_lists_the_versions(fi):
    with pytest.raises(ValueError, match="v1, v2, v3, v4$"):
        _calls()[fi]([1.0, 2.0], version="v5")
    with pytest.raises(TypeError, match="version"):
        _calls()[fi]([1.0, 2.0], version=4)


def test_launch_refuses_an_unknown_version():
    with pytest.raises(ValueError, match="unknown version 'v9'"):
        _driver().launch("v9", None)


def test_empty_input_gives_empty_results_without_a_launch():
    D = _driver()
    for x in ([], np.empty(0, np.float32), np.empty(0, np.float64), np.empty(0, np.int32)):
        assert D.select(x, 0.5).shape == (0,) and D.select(x, 0.5).dtype == np.float32
        y, k = D.partition(x, 0.5)
        assert y.shape == (0,) and y.dtype == np.float32 and k == 0
        assert D.unique(x).shape == (0,) and D.unique(x).dtype == np.float32


# --- GPU ---------------------------------------------------------------------------------

GPU_SIZES = [1, 2, 31, 33, 1000, 2047, 2049, 4097, 8193, 65537, 1_000_003]


@pytest.mark.parametrize("op", ["select", "partition", "unique"])
def test_every_version_every_op_on_gpu(gpu, op):
    D = _driver()
    rng = np.random.default_rng(11)
    for n in GPU_SIZES:
        for pct in (0, 3, 50, 100):
            if op == "unique":
                x = reference.runs_input(n, pct, rng)
            else:
                x = rng.random(n, dtype=np.float32)
            t = float(reference.threshold_for(pct))
            want, k = reference.compact(op, x, t)
            for v in D.VERSIONS:
                if op == "select":
                    got = D.select(x, t, version=v)
                elif op == "partition":
                    got, kk = D.partition(x, t, version=v)
                    assert kk == k, (v, n, pct)
                else:
                    got = D.unique(x, version=v)
                assert np.array_equal(got, want), (op, v, n, pct)


def test_nan_and_float64_thresholds_on_gpu(gpu):
    D = _driver()
    x = np.array([np.nan, 0.1, np.nan, np.nan, 0.7, 0.7, np.float32(0.1)], np.float32)
    for v in D.VERSIONS:
        assert D.select(x, 0.1, version=v).tolist() == [np.float32(0.1), np.float32(0.7),
                                                        np.float32(0.7), np.float32(0.1)]
        y, k = D.partition(x, 0.5, version=v)
        assert k == 2 and y[:2].tolist() == [np.float32(0.7)] * 2
        u = D.unique(x, version=v)
        assert u.size == 6 and np.isnan(u[[0, 2, 3]]).all()
    # a float64 threshold between two float32 values: exact, as numpy compares
    t = float(np.float32(0.1)) - 1e-12
    assert np.array_equal(D.select(x, t), x[x.astype(np.float64) > t])


def _one_case(op, n, pct, seed):
    from common import harness as H

    D = _driver()
    case = D.make_op_case(op, (n, pct), np.random.default_rng(seed))
    return case, H.DeviceCase(case)


def _run(d, version):
    from common.gpu import driver as cuda

    d.poison_outputs()
    _driver().launch(version, d)
    cuda().Context.synchronize()
    return d.outputs()


def test_lookback_words_are_reused_between_launches_on_gpu(gpu):
    """One DeviceCase, many launches of v3 and v4 (different tile counts) back to back: the
    words and counters are never cleared; the launch number must keep them apart."""
    for op in ("select", "partition", "unique"):
        case, d = _one_case(op, 300_007, 50, 12)
        want = case.expected()
        for i in range(8):
            out = _run(d, "v3" if i % 3 else "v4")
            assert np.array_equal(out["y"], want["y"]) and out["count"][0] == want["count"][0], (op, i)
        assert d._lookback_epoch["epoch"] == 8


def test_lookback_launch_numbers_wrap_on_gpu(gpu):
    """Past 2^30 - 1 launches the numbers start over at 1 and the driver clears the words:
    here they are filled with launch-1 P words holding garbage just before the wrap."""
    case, d = _one_case("select", 100_003, 50, 13)
    want = case.expected()
    assert np.array_equal(_run(d, "v4")["y"], want["y"])  # allocates the buffer
    d._lookback_epoch["epoch"] = day17.EPOCHS - 1  # the status words are day 17's
    buf = d._scratch["lookback"]
    junk = np.full(buf.shape, ((1 << 2 | 2) << 32) | 12345, np.uint64)  # epoch 1, P, 12345
    junk[0] = (7 << 32) | 7  # both tile counters at 7
    buf.set(junk)
    out = _run(d, "v4")
    assert np.array_equal(out["y"], want["y"]) and d._lookback_epoch["epoch"] == 1


_WATCHDOG_CHILD = """
import sys
import numpy as np
from common import harness as H
from common.gpu import driver as cuda
from days.day56_stream_compaction import driver as D
for op in ("select", "partition", "unique"):
    for n in (1, 4097, 1000003, 2 ** 24 + 5):
        case = D.make_op_case(op, (n, 50), np.random.default_rng(n))
        d = H.DeviceCase(case)
        for v in ("v3", "v4"):
            for _ in range(3):
                d.poison_outputs()
                D.launch(v, d)
            cuda().Context.synchronize()
            out = d.outputs()
            ok = np.array_equal(out["y"], case.expected()["y"]) and \
                out["count"][0] == case.expected()["count"][0]
            print(op, n, v, "ok" if ok else "WRONG", flush=True)
"""


def test_single_pass_versions_finish_on_gpu(gpu):
    """v3/v4 spin on their predecessors' words: a bug there hangs instead of failing. Run them
    in a child process with a time limit (the kernels themselves trap after 2^22 empty reads),
    so a deadlock fails this test instead of hanging the run."""
    import subprocess
    import sys

    from common.harness import ROOT

    try:
        r = subprocess.run([sys.executable, "-c", _WATCHDOG_CHILD], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"v3/v4 did not finish in 300 s (a deadlock?); output so far: {e.stdout!r}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    lines = [ln for ln in r.stdout.splitlines() if ln.endswith(("ok", "WRONG"))]
    assert len(lines) == 3 * 4 * 2 and all(ln.endswith("ok") for ln in lines), r.stdout


@pytest.mark.parametrize("op", ["select", "partition", "unique"])
def test_cub_agrees_with_the_reference_on_gpu(gpu, op):
    """The CUB rows time CUB's own kernels with the day's semantics: same outputs, same order
    of the rejected (reversed), same counts."""
    D = _driver()
    case, d = _one_case(op, 1_000_003, 50, 14)
    call = D.CubCompaction(op, d.x, d.y, d.count, 1_000_003,
                           D.kernel_threshold(case.params["threshold"]))
    from common.gpu import driver as cuda

    d.poison_outputs()
    call()
    cuda().Context.synchronize()
    out, want = d.outputs(), case.expected()
    assert out["count"][0] == want["count"][0]
    assert np.array_equal(out["y"], want["y"])


def test_library_select_rows_are_right_on_gpu(gpu):
    from common import harness as H
    from common.runner import to_host

    D = _driver()
    case = D.make_case((1_000_003, 10), np.random.default_rng(15))
    d = H.DeviceCase(case)
    libs = D.baselines(d)
    assert D.CUB_ROW in libs
    for name, fn in libs.items():
        assert np.array_equal(to_host(fn()), case.expected()["y"]), name


# tiles of the candidates: 4096 (w8i16v), 6144 (w12i16v, w8i24v), 8192 (w8i32v, w16i16v)
CANDIDATE_SIZES = [1, 5, 33, 4095, 4097, 6143, 6145, 8191, 8193, 65537, 1_000_003]


def test_every_v4_candidate_every_op_on_gpu(gpu):
    """Every sweep candidate (kernel.cu's CANDIDATE / CANDIDATE3) on ragged sizes and
    selectivities, against the reference: the options change the loads, the write-out (16-byte
    stores from any output offset) and the barriers, for select, partition and unique alike."""
    from common import harness as H
    from common.gpu import driver as cuda

    D = _driver()
    for tag, (w, i, vec, opts, minb, three) in _declared_candidates().items():
        for op in (("select", "partition", "unique") if three else ("select",)):
            fn = D.K(f"compact_v4_{tag}_{op}", D.SINGLE_PASS_SIG)
            for n in CANDIDATE_SIZES + ([2 ** 22 + 5] if three else []):
                for pct in (0, 3, 50, 100):
                    case = D.make_op_case(op, (n, pct), np.random.default_rng(n + pct))
                    d = H.DeviceCase(case)
                    for _ in range(2):  # the second launch reuses the status words
                        d.poison_outputs()
                        D.launch_single_pass(d, fn, w, i, opts=opts)
                        cuda().Context.synchronize()
                        out, want = d.outputs(), case.expected()
                        assert out["count"][0] == want["count"][0], (tag, op, n, pct)
                        assert np.array_equal(out["y"], want["y"], equal_nan=True), (tag, op, n, pct)
