#!/usr/bin/env python3
"""Run every day-21 kernel (v1-v5 and every v6 candidate on each of its four paths) on the
host emulator of .notes/day15_20_emu.h (one std::thread per CUDA thread, blocks one after
another), on the driver's CHECK_SIZES and small size, against numpy's transpose. Output is
poisoned with NaN first, so an unwritten element fails. Checks index arithmetic and bounds;
nothing about speed.

    python .notes/day21_emulate.py
"""
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
sys.path.insert(0, str(ROOT))
from common.harness import cdiv  # noqa: E402
from days.day21_transpose_matrix import driver as D  # noqa: E402

MAIN = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include "day15_20_emu.h"
#include "kernel.cu"
typedef void (*K)(const float*, float*, int, int);
struct Entry { const char* name; K fn; };
static Entry table[] = { %ENTRIES% };
int main(int argc, char** argv) {
    // args: kernel rows cols grid bx by ; reads rows*cols floats from stdin, writes the output
    const char* name = argv[1];
    int rows = atoi(argv[2]), cols = atoi(argv[3]), grid = atoi(argv[4]);
    int bx = atoi(argv[5]), by = atoi(argv[6]);
    K fn = nullptr;
    for (auto& e : table) if (std::string(e.name) == name) fn = e.fn;
    if (!fn) { fprintf(stderr, "no kernel %s\n", name); return 2; }
    std::vector<float> in((size_t)rows * cols), out((size_t)rows * cols);
    fread(in.data(), 4, in.size(), stdin);
    memset(out.data(), 0xFF, out.size() * 4);
    emu_launch(dim3{(unsigned)grid, 1, 1}, dim3{(unsigned)bx, (unsigned)by, 1},
               [&] { fn(in.data(), out.data(), rows, cols); });
    fwrite(out.data(), 4, out.size(), stdout);
    return 0;
}
"""


def kernels():
    names = [f"transpose_v{i}" for i in range(1, 6)]
    for cand in D.V6_CANDIDATES:
        names += [f"transpose_v6_{cand}_{p}" for p in ("l4s4", "l4s1", "l1s4", "l1s1")]
    return names


def launches(rows, cols):
    """(label, kernel, grid, bx, by) of every version and every v6 candidate at a shape."""
    t32 = cdiv(rows, 32) * cdiv(cols, 32)
    yield "v1", "transpose_v1", cdiv(rows, 8) * cdiv(cols, 32), 32, 8
    for v in ("v2", "v3", "v4"):
        yield v, f"transpose_{v}", t32, 32, 32
    yield "v5", "transpose_v5", t32, 32, 8
    for cand in D.V6_CANDIDATES:
        name, tiles, nt = D.v6_kernel(cand, rows, cols)
        yield f"v6 {cand}", name, tiles, nt, 1


def main():
    tmp = Path(tempfile.mkdtemp())
    (tmp / "kernel.cu").write_text((ROOT / "days/day21_transpose_matrix/kernel.cu").read_text())
    entries = ", ".join(f'{{"{n}", {n}}}' for n in kernels())
    (tmp / "main.cpp").write_text(MAIN.replace("%ENTRIES%", entries))
    exe = tmp / "emu"
    subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-x", "c++", f"-I{NOTES}",
                    f"-I{ROOT / 'common/cuda'}", f"-I{tmp}", str(tmp / "main.cpp"), "-o", str(exe)],
                   check=True)
    bad = 0
    sizes = list(D.CHECK_SIZES) + [tuple(D.SIZES["small"])]
    for rows, cols in sizes:
        x = np.random.default_rng(rows * 7919 + cols).standard_normal((rows, cols)).astype(np.float32)
        want = x.T
        line = []
        for label, name, grid, bx, by in launches(rows, cols):
            r = subprocess.run([str(exe), name, str(rows), str(cols), str(grid), str(bx), str(by)],
                               input=x.tobytes(), capture_output=True)
            got = np.frombuffer(r.stdout, np.float32)
            ok = r.returncode == 0 and got.size == x.size and np.array_equal(got.reshape(cols, rows), want)
            bad += not ok
            line.append(f"{label}:{'ok' if ok else 'FAIL'}")
        print(f"{rows}x{cols}: " + " ".join(line), flush=True)
    print("ALL OK" if not bad else f"{bad} FAILURES")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
