#!/usr/bin/env python3
"""Day 26 without a GPU: compile kernel.cu (and flash_attention.cuh) as host C++ on the emulator
of .notes/day15_20_emu.h and run every version against a float64 attention at ragged sizes
(.notes/day26_emu_main.cpp). cp.async becomes deferred copies that land at wait_group.

    .venv/bin/python .notes/day26_emulate.py          # v1-v4
    .venv/bin/python .notes/day26_emulate.py sweep    # + the sweep candidates (-DDAY26_SWEEP)

Checks indexing, bounds (NaN-poisoned outputs), masks, the online softmax and the double
buffer's wait counts; nothing about speed, registers or memory ordering without barriers.
"""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent


def host(src: str) -> str:
    src = re.sub(r"extern __shared__ (\w+) (\w+)\[\];",
                 r"static float4 emu_dyn_\2[227 * 64]; static \1* const \2 = emu_dyn_\2;", src)
    # cp.async helpers -> the deferred-copy emulation
    src = re.sub(r"__device__ __forceinline__ void cp_async16\(float\* smem, const float\* gmem, bool valid\) \{.*?\n\}",
                 "inline void cp_async16(float* smem, const float* gmem, bool valid) { emu_cp_async16(smem, gmem, valid); }",
                 src, flags=re.S)
    src = re.sub(r"__device__ __forceinline__ void cp_async_commit\(\) \{.*?\}",
                 "inline void cp_async_commit() { emu_commit(); }", src)
    src = re.sub(r"template <int PENDING>\n__device__ __forceinline__ void cp_async_wait\(\) \{.*?\n\}",
                 "template <int PENDING> inline void cp_async_wait() { emu_wait(PENDING); }", src, flags=re.S)
    return src


def main():
    sweep = "sweep" in sys.argv[1:]
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        hdr = host((ROOT / "common/cuda/flash_attention.cuh").read_text())
        assert "emu_cp_async16" in hdr and "emu_commit" in hdr and "emu_wait" in hdr, "cp.async not replaced"
        (t / "flash_attention.cuh").write_text(hdr)
        (t / "kernel.cu").write_text(host((ROOT / "days/day26_flash_attention_forward/kernel.cu").read_text()))
        exe = t / "emu"
        cmd = ["g++", "-std=c++20", "-O2", "-pthread", "-w", f"-I{t}", f"-I{NOTES}",
               f"-I{ROOT / 'common/cuda'}", f'-DKERNEL_SRC="{t / "kernel.cu"}"',
               str(NOTES / "day26_emu_main.cpp"), "-o", str(exe)] + (["-DDAY26_SWEEP"] if sweep else [])
        subprocess.run(cmd, check=True)
        sys.exit(subprocess.run([str(exe)]).returncode)


if __name__ == "__main__":
    main()
