#!/usr/bin/env python3
"""Day 35 without a GPU: compile kernel.cu as host C++ on the emulator of .notes/day35_emu.h and
run v1, v2 and every v3 / v4 entry point against a float64 LayerNorm backward at ragged sizes
(.notes/day35_emu_main.cpp). Blocks of v3 / v4 run concurrently (v4's last blocks wait for the
others); shared memory is per block and poisoned with NaN.

    .venv/bin/python .notes/day35_emulate.py

Checks indexing, bounds (NaN-poisoned outputs and partial rows), the head / body / tail split,
the slabs, the group barriers, v4's tickets and counter reset, and run-to-run bits; nothing about
speed, registers or the GPU's weaker memory ordering.
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
KERNEL = ROOT / "days/day35_fused_layernorm_backward/kernel.cu"


def host(src: str) -> str:
    src = src.replace("extern __shared__ float4 smem4[];", "float4* smem4 = emu_dynamic_smem();")
    src = re.sub(r'asm volatile\("bar\.sync %0, %1;" ::"r"\(([^)]*)\), "r"\(([^)]*)\) : "memory"\);',
                 r"emu_bar_sync(\1, \2);", src)
    count = [0]

    def one(typ, decl):
        m = re.fullmatch(r"\s*(\w+)((?:\[[^\]]+\])*)\s*", decl)
        name, dims = m.group(1), m.group(2)
        count[0] += 1
        tag = f"emu_tag_{count[0]}"
        return f"static char {tag}; auto& {name} = *emu_block_slot<{typ}{dims}>(&{tag}, 1);"

    def repl(m):
        typ, decls = m.group(1), m.group(2)
        return " ".join(one(typ, d) for d in decls.split(","))

    src = re.sub(r"__shared__ (\w+) ([^;]+);", repl, src)
    assert "__shared__" not in src.replace("// ", ""), "a __shared__ declaration was not rewritten"
    assert "bar.sync" not in src, "a named barrier was not rewritten"
    return src


def table(src: str) -> str:
    rows = []
    for w, i, b, acc, _, _ in re.findall(r"^LNBWD_MAIN\((\d+), (\d+), (\d+), (\w+), (\w+), (\w+)\)",
                                         src, re.M):
        name = f"w{w}_i{i}_b{b}_{acc}"
        rows.append(f'    {{{w}, {i}, {b}, "{acc}", lnbwd_v3_{name}, lnbwd_v4_{name}}},')
    assert rows, "no LNBWD_MAIN instantiations found"
    return "static Cfg CFGS[] = {\n" + "\n".join(rows) + "\n};\n"


def main():
    src = KERNEL.read_text()
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        (t / "kernel.cu").write_text(host(src))
        (t / "table.inc").write_text(table(src))
        exe = t / "emu"
        cmd = ["g++", "-std=c++20", "-O2", "-pthread", "-w", f"-I{NOTES}", f"-I{ROOT / 'common/cuda'}",
               f'-DKERNEL_SRC="{t / "kernel.cu"}"', f'-DTABLE_SRC="{t / "table.inc"}"',
               str(NOTES / "day35_emu_main.cpp"), "-o", str(exe)]
        subprocess.run(cmd, check=True)
        sys.exit(subprocess.run([str(exe)] + sys.argv[1:]).returncode)


if __name__ == "__main__":
    main()
