#!/usr/bin/env python3
"""Day 38: instructions per key from the machine code (no GPU needed).

    .venv/bin/python .notes/day38_sass.py            # the kernels of v4-v8 at their shipped sizes

Compiles kernel.cu for sm_90, dumps each kernel's SASS (cuobjdump -sass) and splits it at block
barriers into phases. Inside a phase, instructions between a backward branch and its target form
a loop (the co-rank searches); the rest runs once per thread. Dynamic count per thread =
straight-line + loop body x iterations, with iterations = the binary search's steps (given
per loop below, log2 of the range it searches); divided by the keys a thread handles. Predicated
instructions count (they issue); a branch not taken counts once. An estimate: it ignores the
branches skipped by idle threads and the tails of ragged tiles.
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "days/day38_merge_sort/kernel.cu"

INS = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?);")


def sass(cubin: Path, fn: str) -> list[tuple[int, str]]:
    out = subprocess.run(["cuobjdump", "-sass", "-fun", fn, str(cubin)], capture_output=True,
                         text=True, check=True).stdout
    return [(int(m.group(1), 16), m.group(2).strip()) for m in map(INS.match, out.splitlines()) if m]


def loops(ins):
    """(start, end) address ranges of backward branches."""
    out = []
    for addr, text in ins:
        m = re.search(r"BRA (?:`\(\.L_x_\d+\)|)?\s*(0x[0-9a-f]+)", text)
        if m and int(m.group(1), 16) <= addr:
            out.append((int(m.group(1), 16), addr))
    return out


def phases(ins):
    """Instructions grouped between BAR.SYNCs: [(straight, [loop body sizes])]."""
    lp = loops(ins)
    res, cur = [], []
    for a, t in ins:
        cur.append((a, t))
        if "BAR.SYNC" in t:
            res.append(cur)
            cur = []
    res.append(cur)
    out = []
    for ph in res:
        lo, hi = (ph[0][0], ph[-1][0]) if ph else (0, -1)
        bodies = [(s, e) for s, e in lp if lo <= s and e <= hi]
        inside = sum(1 for a, _ in ph if any(s <= a <= e for s, e in bodies))
        out.append((len(ph) - inside, [sum(1 for a, _ in ph if s <= a <= e) for s, e in bodies]))
    return out


# kernel: (keys a thread, iterations of each phase's loops in order, note)
# kernel: (keys a thread, note). The shipped configurations (driver.py V4-V8) at 2^26 keys.
KERNELS = {
    "sort_v4_merge_t256_keys": (16, "v4/v5 merge: (512, 32, 256)"),
    "sort_v5_merge_t256_keys": (16, "v5"),
    "sort_v6_merge_t512_keys": (16, "v6 (512, 32, 512, 512)"),
    "sort_v7_merge_t256_i32_keys": (32, "v7 keys (512, 32, 256, 512, 32)"),
    "sort_v8_merge_t256_i32_keys": (32, "v8 keys (512, 32, 256, 256, 32): 3 levels"),
    "sort_v5_merge_t256_pairs": (16, "v5 pairs"),
    "sort_v7_merge_t512_pairs": (16, "v7 pairs (512, 16, 512, 512)"),
    "sort_v8_merge_t512_pairs": (16, "v8 pairs (512, 16, 512, 256)"),
    "sort_v4_block_t512_i32_keys": (32, "block sort v4-v6 keys: level loop runs 9 times"),
    "sort_v7_block_t512_i32_keys": (32, "block sort v7/v8 keys: level loop runs 9 times"),
    "sort_v6_rank": (1, "a thread a sample: 3 searches over the samples side by side, then (1 in K) the exact cut"),
    "sort_v8_rank": (1, "7 searches"),
}


def main():
    with tempfile.TemporaryDirectory() as t:
        cubin = Path(t) / "k.cubin"
        subprocess.run(["nvcc", "-arch=sm_90", "-O3", "-std=c++17", "-cubin", str(SRC), "-o",
                        str(cubin)], check=True)
        for fn, (items, note) in KERNELS.items():
            ins = sass(cubin, fn)
            ph = phases(ins)
            print(f"{fn}: {len(ins)} instructions; {note}")
            for i, (straight, bodies) in enumerate(ph):
                print(f"   phase {i}: {straight:5d} straight ({straight / items:5.1f} a key), loop bodies {bodies}")


if __name__ == "__main__":
    main()
