#!/usr/bin/env python3
"""Day 34: instruction counts of each kernel's loops, from the SASS (no GPU needed).

    .venv/bin/python .notes/day34_sass.py [kernel-name-substring ...] [-D...]

Builds days/day34_image_augmentation/kernel.cu for sm_90 (-DDAY34_SWEEP too), disassembles it
with cuobjdump -sass and, for every kernel, prints each loop (a backward branch and the
instructions between its target and itself, innermost loops first) with its instruction count
and the mix by opcode. Per pixel = loop count / pixels one trip handles (read it off the source).
"""
import collections
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "days/day34_image_augmentation/kernel.cu"


def sass(defines):
    tmp = Path(tempfile.mkdtemp(prefix="sass34_"))
    cubin = tmp / "k.cubin"
    subprocess.run(["nvcc", "-arch=sm_90", "-O3", "-I", str(ROOT / "common/cuda"), "-cubin",
                    "-DDAY34_SWEEP", *defines, "-o", str(cubin), str(KERNEL)], check=True)
    return subprocess.run(["cuobjdump", "-sass", str(cubin)], check=True, capture_output=True,
                          text=True).stdout


def functions(text):
    out, name, body = {}, None, []
    for line in text.splitlines():
        m = re.match(r"\s+Function : (\w+)", line)
        if m:
            if name:
                out[name] = body
            name, body = m.group(1), []
            continue
        m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
        if m and name:
            body.append((int(m.group(1), 16), m.group(2).strip()))
    if name:
        out[name] = body
    return out


def opcode(ins):
    ins = re.sub(r"^@!?U?P\w+\s+", "", ins)
    return ins.split()[0].split(".")[0]


def loops(body):
    found = []
    for addr, ins in body:
        m = re.search(r"\bBRA\b.*?(0x[0-9a-f]+)", ins)
        if m:
            tgt = int(m.group(1), 16)
            if tgt <= addr:
                seg = [i for a, i in body if tgt <= a <= addr]
                found.append((tgt, addr, seg))
    return sorted(found, key=lambda t: t[1] - t[0])


def main():
    want = [a for a in sys.argv[1:] if not a.startswith("-D")]
    defines = [a for a in sys.argv[1:] if a.startswith("-D")]
    for name, body in sorted(functions(sass(defines)).items()):
        if want and not any(w in name for w in want):
            continue
        print(f"\n{name}: {len(body)} instructions")
        for tgt, end, seg in loops(body):
            mix = collections.Counter(opcode(i) for i in seg if opcode(i) != "NOP")
            n = sum(mix.values())
            print(f"  loop {tgt:#06x}-{end:#06x}: {n:4d}  " +
                  " ".join(f"{k} {v}" for k, v in mix.most_common()))


if __name__ == "__main__":
    main()
