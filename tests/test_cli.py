"""run_day.py as a user meets it: discovery, flags, errors (one line, no traceback), no-GPU path."""
import os
import subprocess
import sys

import pytest

from common import harness as H
from common.harness import ROOT

NO_GPU_ENV = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}  # hides every GPU, even on a GPU machine


def run(*args, env=None):
    r = subprocess.run([sys.executable, str(ROOT / "run_day.py"), *args], capture_output=True,
                       text=True, env=env or NO_GPU_ENV, timeout=300)
    return r.returncode, r.stdout, r.stderr


def one_clear_line(text):
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return len(lines) == 1 and "Traceback" not in text


def test_unknown_day():
    rc, out, err = run("999")
    assert rc == 2 and one_clear_line(err) and "no day 999" in err


def test_not_a_number():
    rc, out, err = run("five")
    assert rc == 2 and one_clear_line(err) and "number" in err


def test_unbuilt_day():
    unbuilt = next(n for n in range(100, 0, -1) if n not in H.day_folders())
    rc, out, err = run(str(unbuilt))
    assert rc == 2 and one_clear_line(err) and "not built" in err


@pytest.mark.parametrize("size,msg", [("-3", "cannot read"), ("0x4", "positive"), ("7", "dimension"), ("abc", "cannot read")])
def test_bad_size(size, msg):
    rc, out, err = run("5", "--size", size)
    assert rc == 2 and one_clear_line(err) and msg in err, err


def test_unknown_version():
    rc, out, err = run("5", "--version", "v99")
    assert rc == 2 and one_clear_line(err) and "v1" in err


def test_list_days():
    rc, out, err = run("--list")
    assert rc == 0 and len(out.strip().splitlines()) == 100 and "shared_softmax" in out


def test_list_one_day():
    rc, out, err = run("5", "--list")
    assert rc == 0 and "v4" in out and "8192x8192" in out


def test_no_gpu_runs_the_reference():
    rc, out, err = run("5")
    assert rc == 0, err
    assert out.startswith("no CUDA GPU here:") and "numpy reference" in out and "64x1000" in out


def test_no_gpu_bench_says_it_cannot():
    rc, out, err = run("5", "--bench")
    assert rc == 2 and "cannot --bench" in out and "Traceback" not in out + err


def test_no_gpu_all_days():
    rc, out, err = run("--all")
    assert rc == 0, err
    assert out.count("ran the numpy reference") == len(H.day_folders())


def test_regs_report_needs_only_nvcc():
    from common.build import nvcc_path

    if nvcc_path() is None:
        pytest.skip("nvcc not found")
    rc, out, err = run("5", "--regs")
    assert rc == 0 and "softmax_v4_vec4_items8" in out and "spill" in out
