"""The harness itself: checks, sizes, catalogue, ptxas parsing, progress.md, day anatomy."""
import ast
import importlib

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
                assert {"version", "ok"} <= set(r)
                if "median_ms" in r:
                    assert {"pct_of_ceiling", "max_err"} <= set(r)
                    assert r.get("gbps") is not None or r.get("tflops") is not None
