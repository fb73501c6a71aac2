#!/usr/bin/env python3
"""Run every day-22 kernel on the host emulator of .notes/day15_20_emu.h (std::thread per CUDA
thread), with the inline-PTX shared loads replaced by plain C++ loads, at a few sizes and both
mods, against reference.output. Checks the index arithmetic and the buffer bounds (the
emulated buffers are exactly as large as on the GPU, and -fsanitize=address is on).

    python .notes/day22_emulate.py
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
sys.path.insert(0, str(ROOT))
from days.day22_shared_mem_tricks import driver as D, reference as R  # noqa: E402

HOST_READ = r"""
template <int WORDS>
inline float read_words(const char* addr) {
    const float* p = reinterpret_cast<const float*>(addr);
    if constexpr (WORDS == 1) return p[0];
    else if constexpr (WORDS == 2) return p[0] + p[1];
    else return (p[0] + p[1]) + (p[2] + p[3]);
}
"""

MAIN = r"""
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include "day15_20_emu.h"
#include "kernel.cu"
typedef void (*K)(float*, int, int);
struct Entry { const char* name; K fn; };
static Entry table[] = { %ENTRIES% };
int main(int argc, char** argv) {
    const char* name = argv[1];
    int blocks = atoi(argv[2]), iters = atoi(argv[3]), mod = atoi(argv[4]);
    K fn = nullptr;
    for (auto& e : table) if (std::string(e.name) == name) fn = e.fn;
    if (!fn) return 2;
    std::vector<float> out((size_t)blocks * 256);
    memset(out.data(), 0xFF, out.size() * 4);
    emu_launch(dim3{(unsigned)blocks, 1, 1}, dim3{256, 1, 1}, [&] { fn(out.data(), iters, mod); });
    fwrite(out.data(), 4, out.size(), stdout);
    return 0;
}
"""


def host_source() -> str:
    src = (ROOT / "days/day22_shared_mem_tricks/kernel.cu").read_text()
    start = src.index("template <int WORDS>\n__device__ __forceinline__ float read_words")
    end = src.index("// fill, then")
    src = src[:start] + HOST_READ + src[end:]
    src = src.replace("const unsigned base = (unsigned)__cvta_generic_to_shared(buf);",
                      "const char* base = reinterpret_cast<const char*>(buf);")
    # the dynamic buffer: exactly NW_DYNAMIC words, like the launch gives it
    src = re.sub(r"extern __shared__ __align__\(16\) float dyn\[\];",
                 "static float dyn[NW_DYNAMIC] __attribute__((aligned(16)));", src)
    src = src.replace("__shared__ __align__(16) float buf[NW_STATIC];",
                      "static float buf[NW_STATIC] __attribute__((aligned(16)));")
    return src


def main():
    tmp = Path(tempfile.mkdtemp())
    (tmp / "kernel.cu").write_text(host_source())
    names = [D.kernel_name(v) for v in D.VERSIONS]
    (tmp / "main.cpp").write_text(MAIN.replace("%ENTRIES%", ", ".join(f'{{"{n}", {n}}}' for n in names)))
    exe = tmp / "emu"
    subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", "-x", "c++", f"-I{NOTES}", f"-I{tmp}",
                    str(tmp / "main.cpp"), "-o", str(exe)], check=True)
    bad = 0
    for size in [(1, 32), (3, 96)]:
        for mod in (32, 61):
            line = []
            for v in D.VERSIONS:
                r = subprocess.run([str(exe), D.kernel_name(v), str(size[0]), str(size[1]), str(mod)],
                                   capture_output=True)
                got = np.frombuffer(r.stdout, np.float32)
                ok = r.returncode == 0 and np.array_equal(got, R.output(v, size, mod))
                bad += not ok
                line.append(f"{v}:{'ok' if ok else 'FAIL'}")
            print(f"{size} mod {mod}: " + " ".join(line), flush=True)
    print("ALL OK" if not bad else f"{bad} FAILURES")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
