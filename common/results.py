"""results/dayNN.json: every figure of a run with where and when it was measured.

Stable keys that tools read: day, device.name, date, commit, cases[].size,
cases[].rows[] (version, median_ms, gbps | tflops, pct_of_ceiling, max_err, ok),
cases[].baseline[] (name, median_ms).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "results"


def git_commit() -> str:
    """The commit measured: GIT_COMMIT if set (the GPU machine gets a copy of the tree without
    .git, so the command that runs there passes it), else `git rev-parse`."""
    if os.environ.get("GIT_COMMIT"):
        return os.environ["GIT_COMMIT"]
    try:
        r = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=ROOT,
                           capture_output=True, text=True)
        sha = r.stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        return sha + ("-dirty" if dirty and sha else "") if sha else "unknown"
    except OSError:
        return "unknown"


def environment() -> dict:
    from .build import BASE_FLAGS, nvcc_version
    from .gpu import device_info, driver_release
    from .timing import copy_bandwidth_gbps, datasheet_bandwidth_gbps, read_bandwidth_gbps

    info = dict(device_info())
    return {
        "device": info,
        "driver": driver_release() or info["driver_version"],
        "cuda": info["cuda_version"],
        "nvcc": nvcc_version(),
        "nvcc_flags": BASE_FLAGS + [f"-arch compute_{info['arch'][3:]} -code {info['arch']}"],
        "clocks": {"sm_max_mhz": info.get("sm_clock_mhz"), "mem_mhz": info.get("mem_clock_mhz")},
        "copy_bandwidth_gbps": copy_bandwidth_gbps(),
        "ceilings": {"copy_gbps": copy_bandwidth_gbps(), "read_gbps": read_bandwidth_gbps(),
                     "datasheet_gbps": datasheet_bandwidth_gbps(),
                     "how": "best float4 stream kernel (or cuMemcpyDtoD) at 1 GiB an array, L2 "
                            "flushed before each run; each case is held to the stream of its own "
                            "mix of reads and writes (case.ceiling)"},
    }


def save(report, mode: str) -> Path:
    from .catalogue import DAYS
    from .report import today

    RESULTS.mkdir(exist_ok=True)
    record = {"day": report.day, "slug": DAYS[report.day].slug, "title": DAYS[report.day].title,
              "date": today(), "commit": git_commit(), "mode": mode, **environment(),
              "all_ok": not report.failures, "failures": report.failures,
              "checks": report.checks, "cases": report.cases, "sections": report.sections,
              "extra": report.extra}
    path = RESULTS / f"day{report.day:02d}.json"
    path.write_text(json.dumps(record, indent=1, default=_jsonable) + "\n")
    return path


def _jsonable(x):
    import numpy as np

    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, np.ndarray):
        return x.tolist()
    return str(x)


def load_all() -> dict[int, dict]:
    out = {}
    for p in sorted(RESULTS.glob("day[0-9][0-9]*.json")):
        try:
            rec = json.loads(p.read_text())
            out[int(rec["day"])] = rec
        except (ValueError, KeyError):
            continue
    return out
