#!/usr/bin/env python3
"""Run days 15 and 20's v4 kernels on the host emulator (no GPU needed), for every tile
configuration the GPU sweep tries, against float64 references.

    python .notes/day15_20_emulate.py            # every configuration, both days
    python .notes/day15_20_emulate.py 15         # day 15 only (or 20)

Needs g++ with C++20 (std::barrier). Each configuration is one executable: the day's kernel.cu
(with `extern __shared__` turned into a pointer the emulator provides) compiled as host code
with -DFA2_WARPS_M / -DFA2_BK, the emulator in day15_20_emu.h. This checks index arithmetic,
bounds and the persistent tile walk; it says nothing about speed or the register budget.
"""
import concurrent.futures as cf
import re
import subprocess
import sys
import tempfile
from pathlib import Path

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
KERNELS = {15: ROOT / "days/day15_fa2_forward/kernel.cu", 20: ROOT / "days/day20_fa2_backward/kernel.cu"}
CONFIGS = [{"FA2_WARPS_M": wm, "FA2_BK": bk} for bk in (8, 16) for wm in (4, 8, 2, 1)]


def host_source(path: Path) -> str:
    src = path.read_text()
    # dynamic shared memory: a static buffer of the largest size a kernel asks for (227 KB)
    src = re.sub(r"extern __shared__ (\w+) (\w+)\[\];",
                 r"static float emu_dyn_smem_[227 * 256]; \1* \2 = (\1*)emu_dyn_smem_;", src)
    return src


def build_and_run(cfg, days, tmp: Path):
    tag = "_".join(f"{k[4:].lower()}{v}" for k, v in cfg.items())
    srcs = {}
    for n, p in KERNELS.items():
        out = tmp / f"k{n}.cu"
        out.write_text(host_source(p))
        srcs[n] = out
    exe = tmp / f"emu_{tag}"
    defs = [f"-D{k}={v}" for k, v in cfg.items()]
    cmd = ["g++", "-std=c++20", "-O2", "-pthread", "-w", "-fno-strict-aliasing",
           f"-I{NOTES}", f'-DKERNEL15="{srcs[15]}"', f'-DKERNEL20="{srcs[20]}"', "-DWITH_DAY20",
           *defs, str(NOTES / "day15_20_emu_test.cpp"), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        return tag, False, f"compile failed:\n{r.stderr[-3000:]}"
    outs, ok = [], True
    for n in days:
        r = subprocess.run([str(exe), str(n)], capture_output=True, text=True, timeout=1200)
        outs.append(r.stdout + r.stderr)
        ok &= r.returncode == 0
    return tag, ok, "".join(outs)


def main(argv):
    days = [int(a) for a in argv] or [15, 20]
    with tempfile.TemporaryDirectory() as t:
        tmp = Path(t)
        jobs = []
        with cf.ThreadPoolExecutor(max_workers=4) as ex:
            for cfg in CONFIGS:
                d = tmp / "_".join(map(str, cfg.values()))
                d.mkdir()
                jobs.append(ex.submit(build_and_run, cfg, days, d))
            bad = 0
            for j in jobs:
                tag, ok, text = j.result()
                print(f"=== {tag}: {'ok' if ok else 'FAILED'}")
                if not ok or "-v" in sys.argv:
                    print(text)
                bad += not ok
    print("every configuration ok" if not bad else f"{bad} configuration(s) FAILED")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:] if a != "-v"]))
