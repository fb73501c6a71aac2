"""Hardware counters from Nsight Compute, kept beside the timings so that a README's claim
about the hardware (bank conflicts, L2 hit rate, occupancy) quotes a measured figure.

    python run_day.py 14 --ncu --version v2 --metrics l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum --save

profiles one run of the version (its kernels' names contain `_v2`) at the chosen size, prints
one row per kernel launch, and with --save merges the figures into results/ncu/day14.json. A
README quotes them with a marker: `<!--m:ncu;v2;METRIC-->` (the value summed over every
kernel launch of that one run of the op).
"""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

from .results import RESULTS, git_commit

NCU_DIR = RESULTS / "ncu"


def parse_csv(text: str) -> list[dict]:
    """ncu --csv --page raw output -> one dict per profiled kernel launch (metric -> value).
    Lines before the header (the program's own output, ==PROF== notes) are skipped."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, body = rows[0], rows[1:]
    if body and body[0] and body[0][0] == "":  # the units row
        body = body[1:]
    out = []
    for r in body:
        if len(r) != len(header):
            continue
        d = dict(zip(header, r))
        for k, v in list(d.items()):
            try:
                d[k] = float(v.replace(",", ""))
            except ValueError:
                pass
        out.append(d)
    return out


def target(day: int, version: str, size_text: str):
    """What ncu profiles: ONE run of the version at the size (no warm-up, no checks, no
    extras), so every kernel launch it records belongs to that one run of the op."""
    import numpy as np

    from . import harness as H
    from .gpu import driver

    drv = H.load_driver(day)
    size = H.parse_size(drv, size_text)
    d = H.DeviceCase(drv.make_case(size, np.random.default_rng(0)))
    drv.launch(version, d)
    driver().Context.synchronize()


def profile(exe: str, day: int, version: str, size: str, metrics: list[str]) -> list[dict]:
    """One run of a version under ncu; returns one dict per kernel launch."""
    prog = f"import common.ncu as n; n.target({day}, {version!r}, {size!r})"
    cmd = [exe, "--clock-control", "none", "--csv", "--page", "raw", "--metrics", ",".join(metrics),
           "--kernel-name", f"regex:_{version}(_|$)", sys.executable, "-c", prog]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=RESULTS.parent)
    rows = parse_csv(r.stdout)
    if not rows:
        raise RuntimeError(f"ncu returned no kernel rows (exit {r.returncode}): "
                           f"{(r.stderr or r.stdout)[-600:]}")
    return rows


def one_launch(rows: list[dict], metrics: list[str]) -> dict:
    """Each metric summed over every kernel launch of the one run (a tree reduction that
    relaunches itself on its partial sums counts every pass)."""
    return {m: sum(r[m] for r in rows if isinstance(r.get(m), float)) for m in metrics}


def save(day: int, version: str, size: str, values: dict, device: str):
    from .report import today

    NCU_DIR.mkdir(parents=True, exist_ok=True)
    path = NCU_DIR / f"day{day:02d}.json"
    rec = json.loads(path.read_text()) if path.exists() else {"day": day, "versions": {}}
    rec.update(device=device, date=today(), commit=git_commit(), size=size)
    rec["versions"].setdefault(version, {}).update(values)
    path.write_text(json.dumps(rec, indent=1) + "\n")
    return path


def load(day: int) -> dict | None:
    path = NCU_DIR / f"day{day:02d}.json"
    return json.loads(path.read_text()) if path.exists() else None
