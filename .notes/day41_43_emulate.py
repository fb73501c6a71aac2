#!/usr/bin/env python3
"""Days 41-43 without a GPU: compile each kernel.cu as host C++ on .notes/day41_43_emu.h into a
shared library, then run each day's OWN driver.launch (padding, grids, shared-memory sizes) on
fake device memory (numpy arrays), every version and every CHECK_SIZES entry against the float64
reference, with the day's tolerance. C is poisoned with NaN first; cp.async copies land late
(at wait_group) in one pass and at issue in another.

    .venv/bin/python .notes/day41_43_emulate.py            # days 41, 42, 43, every version
    .venv/bin/python .notes/day41_43_emulate.py 43 v2      # one day, some versions
    EMU_SIZES=small ...                                    # only the day's small size
    EMU_SIZES=1100x72x520,1x1x1 ...                        # only these sizes
    EMU_CANDIDATES=1 ... 43                                # the sweep candidates instead of the versions
    EMU_MUTATE='old=>new' ...                               # plant a bug in kernel.cu's text first
    EMU_ASAN=1 ...                                         # build with AddressSanitizer (run under
                                                           #   LD_PRELOAD=$(gcc -print-file-name=libasan.so))

Checks indexing, bounds, fragment layouts, padding and the pipeline's wait counts; nothing about
speed, registers or memory ordering without barriers.
"""
import ctypes
import hashlib
import importlib
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
sys.path.insert(0, str(ROOT))

DAYS = {41: "day41_wmma_hgemm", 42: "day42_mma_ptx_gemm", 43: "day43_async_copy_pipeline"}
BUILD = Path(tempfile.gettempdir()) / "day41_43_emu"


def entry_names(src: str):
    names = set(re.findall(r'void(?:\s+__launch_bounds__\([^)]*\))?\s+(\w+)\(', src))
    names |= set(re.findall(r'^[A-Z_0-9]+\((\w+),', src, flags=re.M))
    return sorted(n for n in names if n.startswith(("hgemm", "pad_bf16")))


def host(src: str) -> str:
    return re.sub(r"extern __shared__ __align__\(\d+\) unsigned char (\w+)\[\];",
                  r"unsigned char* \1 = emu_smem;", src)


def build(day: int, mutate: bool = False) -> ctypes.CDLL:
    folder = ROOT / "days" / DAYS[day]
    src = host((folder / "kernel.cu").read_text())
    if mutate and os.environ.get("EMU_MUTATE"):   # "old=>new": check that the emulator catches a planted bug
        old, new = os.environ["EMU_MUTATE"].split("=>")
        assert old in src, f"EMU_MUTATE: {old!r} not in kernel.cu"
        src = src.replace(old, new)
    names = entry_names(src)
    glue = ['#include "day41_43_emu.h"', f'#include "{folder.name}_host.cu"']
    for n in names:
        if n == "pad_bf16":
            glue.append(f'extern "C" void emu_run_{n}(unsigned gx, unsigned bx, size_t smem, void* s, int r, int c, void* d, int rp, int cp) '
                        f'{{ emu_launch({{gx,1,1}}, {{bx,1,1}}, smem, [&] {{ {n}((const uint16_t*)s, r, c, (uint16_t*)d, rp, cp); }}); }}')
        else:
            glue.append(f'extern "C" void emu_run_{n}(unsigned gx, unsigned bx, size_t smem, void* a, void* b, void* c, int M, int N, int K, int lda, int ldb) '
                        f'{{ emu_launch({{gx,1,1}}, {{bx,1,1}}, smem, [&] {{ {n}((const uint16_t*)a, (const uint16_t*)b, (float*)c, M, N, K, lda, ldb); }}); }}')
    glue.append('extern "C" void emu_set_early(int e) { emu_cp_early = e; }')
    BUILD.mkdir(exist_ok=True)
    (BUILD / "mma.h").write_text("#pragma once\n")
    (BUILD / "cuda_bf16.h").write_text("#pragma once\n")
    (BUILD / f"{folder.name}_host.cu").write_text(src)
    main = "\n".join(glue) + "\n"
    asan = os.environ.get("EMU_ASAN") == "1"
    key = hashlib.sha1((main + src + (NOTES / "day41_43_emu.h").read_text() + str(asan) +
                        "".join((ROOT / "common/cuda" / h).read_text() for h in ("mma.cuh", "cp_async.cuh"))
                        ).encode()).hexdigest()[:12]
    lib = BUILD / f"emu_{day}_{key}.so"
    if not lib.exists():
        (BUILD / f"glue_{day}.cpp").write_text(main)
        cmd = ["g++", "-std=c++20", "-O1", "-g", "-shared", "-fPIC", "-pthread", "-w", "-x", "c++",
               f"-I{BUILD}", f"-I{NOTES}", f"-I{ROOT / 'common/cuda'}", str(BUILD / f"glue_{day}.cpp"),
               "-o", str(lib)] + (["-fsanitize=address"] if asan else [])
        subprocess.run(cmd, check=True)
    return ctypes.CDLL(str(lib))


class FakeKernel:
    def __init__(self, lib, name):
        self.fn = getattr(lib, f"emu_run_{name}")
        self.name = name

    def prepared_call(self, grid, block, *args, shared_size=0):
        assert grid[1] == grid[2] == 1 and block[1] == block[2] == 1, (grid, block)
        assert block[0] <= 1024 and shared_size <= 232448
        conv = [ctypes.c_uint(grid[0]), ctypes.c_uint(block[0]), ctypes.c_size_t(shared_size)]
        for a in args:
            conv.append(ctypes.c_void_p(a) if isinstance(a, Ptr) else ctypes.c_int(int(a)))
        self.fn(*conv)


class Ptr(int):
    pass


class FakeK:
    def __init__(self, lib):
        self.lib = lib

    def __call__(self, name, signature=None, dynamic_smem=0):
        return FakeKernel(self.lib, name)


def aligned(shape, dtype, fill):
    """An array whose data starts 256-byte aligned, as cudaMalloc's do."""
    n = int(np.prod(shape)) * np.dtype(dtype).itemsize
    raw = np.full(n + 256, 0xFF, np.uint8)   # slack after the array reads as NaN
    off = (-raw.ctypes.data) % 256
    a = raw[off:off + n].view(dtype).reshape(shape)
    a[...] = fill
    return a


class FakeDevice:
    """DeviceCase on numpy arrays: d.a is the address of the array (a Ptr)."""

    def __init__(self, case):
        self.case, self.size, self.params = case, case.size, case.params
        self.arrays = {k: aligned(v.shape, v.dtype, v) for k, v in case.inputs.items()}
        for k, (shape, dt) in case.outputs.items():
            self.arrays[k] = aligned(shape, dt, np.nan)
        self._scratch = {}

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return Ptr(arrays[name].ctypes.data)
        raise AttributeError(name)

    def array(self, name):
        return self.arrays[name]

    def scratch(self, name, shape, dtype=np.float32, zero=False):
        want = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if name not in self._scratch or self._scratch[name].nbytes < want:
            self._scratch[name] = aligned(shape, dtype, 0xFFFF if np.dtype(dtype).kind == "u" else np.nan)
        return Ptr(self._scratch[name].ctypes.data)


def main():
    want_days = [int(a) for a in sys.argv[1:] if a.isdigit()] or list(DAYS)
    want_versions = [a for a in sys.argv[1:] if a.startswith(("v", "hgemm"))]
    failures = 0
    for day in want_days:
        drv = importlib.import_module(f"days.{DAYS[day]}.driver")
        lib = build(day, mutate=True)
        drv_mods = [drv] + [m for m in (getattr(drv, "day41", None), getattr(drv, "day42", None)) if m]
        if os.environ.get("EMU_CANDIDATES") == "1":   # every sweep candidate instead of the versions
            drv.VERSIONS = {k: k for k in drv.CANDIDATES}
            drv.launch = lambda v, d: drv.launch_kernel(v, d)
        for m in drv_mods:   # every driver whose launch this day's kernels go through
            m.K = FakeK(lib)
        for m in drv_mods:   # shared-memory tables that drivers read from the module's constants
            if hasattr(m, "SMEM_SYMBOL"):
                arr = (ctypes.c_int * (max(m.SMEM_INDEX.values()) + 1)).in_dll(
                    build(41), m.SMEM_SYMBOL)
                m._SMEM.update({v: int(arr[i]) for v, i in m.SMEM_INDEX.items()})
        from common.check import compare

        env = os.environ.get("EMU_SIZES", "")
        if env == "small":
            sizes = [tuple(drv.SIZES["small"])]
        elif env:   # e.g. EMU_SIZES=1100x72x520,1x1x1
            sizes = [tuple(int(v) for v in s.split("x")) for s in env.split(",")]
        else:
            sizes = list(drv.CHECK_SIZES) + [tuple(drv.SIZES["small"])]
        versions = want_versions or list(drv.VERSIONS)
        uses_cp_async = "cp_async" in (ROOT / "days" / DAYS[day] / "kernel.cu").read_text()
        for early in ((0, 1) if uses_cp_async else (0,)):
            lib.emu_set_early(early)
            for v in versions:
                t0 = time.time()
                bad = []
                for size in sizes:
                    case = drv.make_case(size, np.random.default_rng(hash(size) & 0xFFFF))
                    d = FakeDevice(case)
                    drv.launch(v, d)
                    r = compare(d.array("c"), case.expected()["c"], case.tolerance())
                    if not r.ok:
                        bad.append(f"{'x'.join(map(str, size))}: {r.message}")
                failures += bool(bad)
                print(f"day {day} {v} ({'early' if early else 'late'} cp.async): "
                      f"{'ok' if not bad else 'FAIL'} on {len(sizes)} sizes ({time.time() - t0:.1f} s)", flush=True)
                for b in bad[:4]:
                    print("    " + b)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
