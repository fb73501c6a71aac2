"""The harness itself: checks, sizes, catalogue, ptxas parsing, progress.md, day anatomy."""

import numpy as np
import pytest

from common import harness as H
from common.build import parse_ptxas
from common.catalogue import DAYS
from common.check import compare, compare_all


# --- checks ---------------------------------------------------------------------------------

def test_compare_accepts_float32_rounding():
    ref = np.random.default_rng(0).standard_normal(10000)
    assert compare(ref.astype(np.float32), ref).ok


def test_compare_rejects_nan_even_one():
    ref = np.ones(1000)
    out = ref.astype(np.float32)
    out[500] = np.nan
    r = compare(out, ref)
    assert not r.ok and "NaN" in r.message and "(500,)" in r.message


def test_compare_rejects_unwritten_poison():
    # 0xFF bytes, what the harness fills outputs with, read as float32 is NaN
    poison = np.full(4, 0xFFFFFFFF, dtype=np.uint32).view(np.float32)
    assert not compare(poison, np.zeros(4)).ok


def test_compare_rejects_small_but_real_error():
    ref = np.linspace(1, 2, 1000)
    out = (ref * (1 + 1e-4)).astype(np.float32)  # 1e-4 relative: 10x the fp32 tolerance
    assert not compare(out, ref).ok


def test_compare_catches_one_bad_element_hidden_in_the_norm():
    ref = np.ones(10_000_000)
    out = ref.astype(np.float32)
    out[3] = 1.002  # rel-L2 ~ 6e-7, but one element off by 2e-3 > 10 * 1e-5
    r = compare(out, ref)
    assert not r.ok and "element" in r.message


def test_compare_shape_and_integers():
    assert not compare(np.zeros(3), np.zeros(4)).ok
    assert compare(np.arange(5, dtype=np.int32), np.arange(5)).ok
    r = compare(np.array([0, 1, 3]), np.array([0, 1, 2]))
    assert not r.ok and "1 of 3" in r.message


def test_compare_all_reports_the_failing_output():
    refs = {"a": np.ones(3), "b": np.ones(3)}
    outs = {"a": np.ones(3, np.float32), "b": np.array([1, 1, 2], np.float32)}
    r = compare_all(outs, refs, 1e-5)
    assert not r.ok and r.message.startswith("b:")


# --- sizes ----------------------------------------------------------------------------------

class FakeDriver:
    SIZES = {"small": (4, 5), "default": (64, 64)}
    SIZE_HELP = "ROWSxCOLS"

    @staticmethod
    def validate_size(size):
        if size[1] > 1000:
            raise ValueError("at most 1000 columns")


@pytest.mark.parametrize("text,want", [("small", (4, 5)), ("8x9", (8, 9)), ("2^10x3", (1024, 3)),
                                       ("2^28+3x2^4-1", (2 ** 28 + 3, 15)),
                                       (" 7 x 7 ", (7, 7))])
def test_parse_size_good(text, want):
    assert H.parse_size(FakeDriver, text) == want


@pytest.mark.parametrize("text,msg", [("-3", "cannot read"), ("0x5", "positive"), ("ax5", "cannot read"),
                                      ("2^3-8x5", "positive"), ("2**3x5", "cannot read"),
                                      ("5", "dimension"), ("5x2000", "at most 1000")])
def test_parse_size_bad(text, msg):
    with pytest.raises(H.SizeError, match=msg):
        H.parse_size(FakeDriver, text)


# --- catalogue, ptxas, anatomy --------------------------------------------------------------

def test_catalogue_has_100_days_with_unique_slugs():
    assert sorted(DAYS) == list(range(1, 101))
    assert len({d.slug for d in DAYS.values()}) == 100
    assert DAYS[5].folder == "day05_shared_softmax" and DAYS[100].folder == "day100_final_project"


def test_day_folders_match_the_catalogue():
    for n, folder in H.day_folders().items():
        assert folder.name == DAYS[n].folder, f"{folder.name} should be named {DAYS[n].folder}"


PTXAS_SAMPLE = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k_v1' for 'sm_90'
ptxas info    : Function properties for k_v1
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem, 368 bytes cmem[0]
ptxas info    : Compiling entry function 'k_v2' for 'sm_90'
ptxas info    : Function properties for k_v2
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, 368 bytes cmem[0]
"""


def test_parse_ptxas():
    k1, k2 = parse_ptxas(PTXAS_SAMPLE)
    assert (k1.name, k1.registers, k1.smem_bytes, k1.stack_bytes, k1.spills) == ("k_v1", 255, 1024, 8, True)
    assert (k2.name, k2.registers, k2.smem_bytes, k2.spills) == ("k_v2", 32, 0, False)


DAY_FILES = ["README.md", "kernel.cu", "driver.py", "reference.py", "__init__.py"]


@pytest.mark.parametrize("n", sorted(H.day_folders()))
def test_day_anatomy(n):
    folder = H.day_folders()[n]
    for f in DAY_FILES:
        assert (folder / f).exists(), f"{folder.name} lacks {f}"
    drv = H.load_driver(n)
    for attr in ("VERSIONS", "SIZES", "CHECK_SIZES", "SIZE_HELP", "make_case", "launch"):
        assert hasattr(drv, attr), f"{folder.name}/driver.py lacks {attr}"
    assert list(drv.VERSIONS)[0] == "v1"
    assert {"small", "default", "large"} <= set(drv.SIZES)
    src = (folder / "kernel.cu").read_text()
    assert 'extern "C"' in src, "entry points must be extern \"C\" (names pycuda can find)"
    # every version's kernel(s) carry the version in their name (run_day.py --ncu filters on it)
    for v in drv.VERSIONS:
        assert f"_{v}" in src, f"no kernel named *_{v}* in {folder.name}/kernel.cu"
    readme = (folder / "README.md").read_text()
    assert readme.startswith(f"# Day {n}:"), f"README.md starts with '# Day {n}: title'"
    from common.progress import BEGIN, END

    assert BEGIN in readme and END in readme, "README.md holds the generated results block markers"


@pytest.mark.parametrize("n", sorted(H.day_folders()))
def test_day_checks_a_ragged_size(n):
    drv = H.load_driver(n)
    ragged = [s for s in drv.CHECK_SIZES if any(v % 32 for v in s)]
    assert ragged, "CHECK_SIZES must include sizes that are not multiples of 32"
    assert any(min(s) == 1 for s in drv.CHECK_SIZES) or hasattr(drv, "MIN_SIZE"), \
        "CHECK_SIZES should include a size-1 edge"


@pytest.mark.parametrize("n", sorted(H.day_folders()))
def test_day_case_builds_and_its_reference_runs(n):
    drv = H.load_driver(n)
    size = tuple(drv.SIZES["small"])
    case = drv.make_case(size, np.random.default_rng(1))
    exp = case.expected()
    assert set(exp) == set(case.outputs)
    for k, (shape, dt) in case.outputs.items():
        assert tuple(np.shape(exp[k])) == tuple(shape), k
        assert np.all(np.isfinite(np.asarray(exp[k], dtype=np.float64))), k
    assert case.bytes > 0 or case.flops > 0, "a case says how many bytes or FLOPs it must move/do"


def test_progress_md_and_readme_tables_are_in_sync():
    from common.progress import outputs

    stale = [str(p) for p, text in outputs().items() if not p.exists() or p.read_text() != text]
    assert not stale, f"out of date (run `make progress`): {stale}"


def test_readme_block_is_replaced_and_idempotent():
    from common.progress import BEGIN, END, render_readme

    text = f"# Day 9\n\nintro\n{BEGIN}\nold table\n{END}\n\nafter\n"
    once = render_readme(text, None)
    assert "old table" not in once and "Not measured" in once and once.endswith("after\n")
    assert render_readme(once, None) == once


def test_results_files_have_the_stable_keys():
    from common.results import load_all

    for n, rec in load_all().items():
        assert rec["day"] == n and rec["device"]["name"] and rec["date"] and rec["commit"]
        for c in rec["cases"]:
            assert "size" in c and "rows" in c and "baseline" in c
            for r in c["rows"]:
                # a row is a measurement, or says why not (a version that cannot hold the case:
                # day 36's ELL at a row of 100,000 nonzeros) or whose kernel it shares
                assert "version" in r and ("ok" in r or "skipped" in r or "same_as" in r)
                if "median_ms" in r:
                    assert {"pct_of_ceiling", "max_err"} <= set(r)
                    assert r.get("gbps") is not None or r.get("tflops") is not None


# --- bars, README markers, figures, BEST --------------------------------------------------

def _rec(rows, baseline=(), size=(64, 64), size_pct=None):
    for r in rows:
        r.setdefault("ok", True)
        if size_pct is not None:
            r["pct_of_size_ceiling"] = size_pct
    return {"day": 5, "date": "2026-11-23", "device": {"name": "GPU", "sms": 132, "l2_bytes": 60 << 20,
                                                      "smem_per_block_optin": 232448},
            "copy_bandwidth_gbps": 4000.0,
            "cases": [{"size": list(size), "rows": rows, "baseline": list(baseline),
                       "ceiling": {"gbps": 4000.0}}]}


def test_bar_judge_met_and_missed():
    from common.bars import judge

    rec = _rec([{"version": "v1", "median_ms": 2.0, "pct_of_ceiling": 40.0},
                {"version": "v2", "median_ms": 1.0, "pct_of_ceiling": 86.0}],
               [{"name": "lib", "median_ms": 1.1}])
    ok, fig = judge([{"pct": 85, "vs_baseline": 1.0}], rec)
    assert ok and "86.0%" in fig and "1.10x" in fig
    ok, fig = judge([{"pct": 90}], rec)
    assert ok is False and "86.0% < 90.0%" in fig
    ok, fig = judge([{"vs_baseline": 1.2}], rec)
    assert ok is False and "1.10x library < 1.20x library" in fig
    ok, fig = judge([{"over": ("v1", 3.0)}], rec)
    assert ok is False and "2.00x v1" in fig
    ok, fig = judge([{"sizes": [(8, 8)], "pct": 10}], rec)  # a size that was not run
    assert ok is False and "not measured" in fig
    # the fastest row is excluded when it is kept to show a failure
    ok, fig = judge([{"pct": 50}], rec, exclude=("v2",))
    assert ok is False and "40.0%" in fig
    ok, fig = judge([{"text": "custom", "check": lambda r: (True, "fine")}], rec)
    assert ok and "custom: fine" in fig
    assert judge([{"pct": 85}], None) == (None, "not measured")


def test_markers_resolve_from_results():
    from common.progress import fill_markers

    rec = _rec([{"version": "v1", "median_ms": 2.0, "gbps": 1000.0, "pct_of_ceiling": 25.0},
                {"version": "v2", "median_ms": 0.5, "gbps": 4000.0, "pct_of_ceiling": 100.0}],
               [{"name": "torch.softmax", "median_ms": 1.0, "gbps": 2000.0}])
    text = ("v2 moves <!--m:64x64;v2;gbps-->old<!--/m--> (<!--m:64x64;v2;pct-->x<!--/m-->), "
            "<!--m:64x64;v2;over:v1-->?<!--/m--> v1 and <!--m:64x64;v2;over:torch.softmax-->?<!--/m--> "
            "torch in <!--m:2^6x64;v2;us-->?<!--/m--> on the <!--m:gpu_date-->?<!--/m--> "
            "(<!--m:l2-->?<!--/m--> L2, <!--m:smem_block-->?<!--/m-->); <!--m:64x64;v9;ms-->?<!--/m-->")
    out, missing = fill_markers(text, rec)
    assert "<!--m:64x64;v2;gbps-->4000 GB/s<!--/m-->" in out
    assert "100.0%" in out and "4.00x<!--/m--> v1" in out and "2.00x<!--/m--> torch" in out
    assert "500.0 us" in out and "GPU, 2026-11-23" in out and "60 MB" in out and "227 KB" in out
    assert missing == ["64x64;v9;ms"] and "(not measured)" in out
    assert fill_markers(out, rec)[0] == out  # filling is idempotent


def test_readme_markers_all_resolve():
    """Every figure a README quotes comes from the committed results (no stale key)."""
    from common.progress import fill_markers
    from common.results import load_all

    results = load_all()
    bad = {}
    for n, folder in H.day_folders().items():
        _, missing = fill_markers((folder / "README.md").read_text(), results.get(n), results)
        if missing:
            bad[folder.name] = missing
    assert not bad, f"README markers with no value in results/: {bad}"


@pytest.mark.parametrize("n", sorted(H.day_folders()))
def test_readme_figures_exist(n):
    """Each README shows its figures, and every picture it links is in the day folder."""
    import re

    from common.plot import figures_for

    folder = H.day_folders()[n]
    readme = (folder / "README.md").read_text()
    linked = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", readme)
    for f in linked:
        assert (folder / f).exists(), f"{folder.name}/README.md shows {f}, which is not there"
    for f in figures_for(n):
        assert f in linked, f"{folder.name}/README.md does not show {f} (make plots draws it)"


@pytest.mark.parametrize("n", sorted(H.day_folders()))
def test_public_functions_default_to_best(n):
    """BEST is a version, every public function's default version is BEST, and the committed
    results measured it as the fastest correct version at the default size (within 3%)."""
    import inspect

    from common.bars import fastest_correct
    from common.progress import wrong_on
    from common.results import load_all

    drv = H.load_driver(n)
    assert getattr(drv, "BEST", None) in drv.VERSIONS, f"day {n}: BEST must name a version"
    for name, fn in vars(drv).items():
        if inspect.isfunction(fn) and fn.__module__ == drv.__name__ and not name.startswith("_"):
            p = inspect.signature(fn).parameters.get("version")
            if p is not None and p.default is not inspect.Parameter.empty and name != "launch":
                assert p.default == drv.BEST, f"day {n}: {name}(version={p.default!r}) but BEST = {drv.BEST!r}"
    rec = load_all().get(n)
    if rec:
        want = list(drv.SIZES["default"])
        case = next((c for c in rec["cases"] if list(c["size"]) == want), None)
        if case:
            fast = fastest_correct(case, exclude=wrong_on(n))
            mine = next((r for r in case["rows"] if r["version"] == drv.BEST and "median_ms" in r), None)
            assert fast is None or (mine and mine["median_ms"] <= 1.03 * fast["median_ms"]), \
                f"day {n}: BEST = {drv.BEST} but {fast['version']} was faster at {want}"


def test_make_test_gpu_without_a_gpu_says_one_line():
    import os
    import subprocess

    r = subprocess.run(["make", "-s", "test-gpu"], cwd=H.ROOT, capture_output=True, text=True,
                       env={**os.environ, "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    lines = [ln for ln in (r.stdout + r.stderr).splitlines() if ln.strip()]
    assert r.returncode != 0 and len(lines) == 1 and "needs a CUDA GPU" in lines[0], lines


def test_mix_of_reads_and_writes():
    from common.timing import mix_of

    assert mix_of(300, None) == (1, 1)
    assert mix_of(300, 200) == (2, 1)      # vector add
    assert mix_of(400, 300) == (3, 1)      # rgb -> gray
    assert mix_of(100, 100) == (1, 0)      # a reduction
    assert mix_of(100, 99) == (1, 0)       # a histogram: 1% written
    assert mix_of(300, 100) == (1, 2)      # one read, two written


def test_short_kernel_names():
    """Library kernels as CUPTI names them, shortened for the days' kernel tables."""
    from common.baselines import short_kernel_name

    assert short_kernel_name("void cub::CUB_300000_SM_900_NS::detail::select::"
                             "DeviceSelectSweepKernel<cub::A, float*>(float*, int)") == \
        "DeviceSelectSweepKernel"
    assert short_kernel_name("cupy_copy__float32_float32") == "cupy_copy__float32_float32"
    assert short_kernel_name("void at::native::(anonymous namespace)::f(int)") == "f"
