#!/usr/bin/env python3
"""Run day 27's kernels on the host emulator (.notes/day15_20_emu.h; no GPU needed) at every
CHECK_SIZES entry, every version and every v4 tile candidate, against the float64 reference
with the day's own tolerances.

    python .notes/day27_emulate.py          # needs g++ with C++20 (std::barrier)
    python .notes/day27_emulate.py --only v6 [--quick]            # one version (N in 1, 65, 200)
    EMU_CP_EAGER=1 python .notes/day27_emulate.py --only v6       # v6's copies land at issue

The emulator runs each block as 256 std::threads with real barriers: it checks index
arithmetic, bounds, masks and barriers placement (a missing barrier may show, not reliably);
it says nothing about speed or registers.
"""
import concurrent.futures as cf
import itertools
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
sys.path.insert(0, str(ROOT))
from common.check import compare_all  # noqa: E402
from days.day27_flash_attention_backward import driver as D  # noqa: E402


def build(tmp: Path) -> Path:
    src = (ROOT / "days/day27_flash_attention_backward/kernel.cu").read_text()
    src = re.sub(r"extern __shared__ (\w+) (\w+)\[\];",
                 r"static float emu_dyn_smem_[227 * 256]; \1* \2 = (\1*)emu_dyn_smem_;", src)
    # v6's cp.async / red.global.add.v4 helpers -> day27_emu_main.cpp's emulation
    helpers = {"fa_cp_async16": "{ emu_cp_async(smem, gmem, 16, valid); }",
               "fa_cp_async4": "{ emu_cp_async(smem, gmem, 4, valid); }",
               "fa_cp_async_commit": "{ emu_commit(); }",
               "fa_cp_async_wait_all": "{ emu_wait(0); }",
               "fa_red_add4": "{ emu_red_add4(p, v); }"}
    for name, body in helpers.items():
        src, n = re.subn(rf"__device__ __forceinline__ void {name}\(([^)]*)\) \{{.*?(?:\n\}}|; \}})\n",
                         lambda m: f"inline void {name}({m.group(1)}) {body}\n", src, count=1, flags=re.S)
        assert n == 1, f"{name} not replaced"
    assert "asm" not in re.sub(r"//.*", "", src), "inline PTX left for the host"
    (tmp / "k27.cu").write_text(src)
    exe = tmp / "emu"
    cmd = ["g++", "-std=c++20", "-O2", "-pthread", "-w", "-fno-strict-aliasing", f"-I{NOTES}",
           f"-I{ROOT / 'common/cuda'}", f'-DKERNEL27="{tmp / "k27.cu"}"',
           str(NOTES / "day27_emu_main.cpp"), "-o", str(exe)]
    subprocess.run(cmd, check=True)
    return exe


def run_one(exe, tmp, size, version, tiles=None):
    bh, n, d, m = size
    case = D.make_case(size, np.random.default_rng(hash(size) & 0xFFFF))
    tag = f"{'x'.join(map(str, size))}_{version}_{'_'.join(tiles or [])}"
    wd = tmp / tag
    wd.mkdir()
    for k, v in case.inputs.items():
        np.ascontiguousarray(v, np.float32).tofile(wd / f"{k}.bin")
    args = [str(exe), str(wd), version, str(bh), str(n), str(d), str(int(m == D.CAUSAL))] + list(tiles or [])
    r = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        return tag, False, r.stderr
    out = {k: np.fromfile(wd / f"{k}.bin", np.float32).reshape(bh, n, d) for k in ("dQ", "dK", "dV")}
    res = compare_all(out, case.expected(), case.tolerance())
    return tag, res.ok, f"rel {res.rel_l2:.2e} {res.message}"


def main():
    sizes = list(dict.fromkeys(list(D.CHECK_SIZES) + [tuple(D.SIZES["small"])]))
    if "--quick" in sys.argv:
        sizes = [s for s in sizes if s[1] in (1, 65, 200)]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        exe = build(tmp)
        only = sys.argv[sys.argv.index("--only") + 1].split(",") if "--only" in sys.argv else None
        jobs = []
        for size in sizes:
            for v in ("v1", "v2", "v3"):
                jobs.append((size, v, None))
            cands = D.V4_CANDIDATES[size[2]]
            for tk, tq in itertools.zip_longest(cands["dkdv"], cands["dq"]):
                jobs.append((size, "v4", [tk or cands["dkdv"][0], tq or cands["dq"][0]]))
            for t5 in D.V5_CANDIDATES[size[2]]:
                jobs.append((size, "v5", [t5]))
            for t6 in D.V6_CANDIDATES[size[2]]:
                jobs.append((size, "v6", [t6]))
        jobs = [j for j in jobs if only is None or j[1] in only]
        bad = 0
        with cf.ThreadPoolExecutor(max_workers=2) as ex:
            for tag, ok, msg in ex.map(lambda j: run_one(exe, tmp, *j), jobs):
                print(f"{'ok  ' if ok else 'FAIL'} {tag}: {msg}", flush=True)
                bad += not ok
    print("all ok" if not bad else f"{bad} FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
