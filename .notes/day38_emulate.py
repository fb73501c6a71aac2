#!/usr/bin/env python3
"""Day 38 without a GPU: kernel.cu compiled as host C++ (.notes/day38_emu.cpp on the emulator of
.notes/day15_20_emu.h) into a shared library, and driver.launch() itself run against it through
a fake kernel loader and a fake DeviceCase (numpy buffers, outputs poisoned with 0xFF, scratch
with junk). Every version (and every v4 block-size candidate) on ragged sizes of every key
distribution, compared exactly with the numpy reference (keys and the stable argsort).

    .venv/bin/python .notes/day38_emulate.py            # the default set
    .venv/bin/python .notes/day38_emulate.py quick      # a few small sizes
    .venv/bin/python .notes/day38_emulate.py v4         # v4 alone, up to 1000003 keys
"""
import ctypes
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

from days.day38_merge_sort import driver as D  # noqa: E402
from days.day38_merge_sort import reference as R  # noqa: E402


def build(tmp: Path) -> ctypes.CDLL:
    src = (ROOT / "days/day38_merge_sort/kernel.cu").read_text()
    src, k = re.subn(r"extern __shared__ u32 smem\[\];", "u32* const smem = emu_dyn;", src)
    assert k == 3, k
    (tmp / "k.inc").write_text(src)
    lib = tmp / "libemu38.so"
    subprocess.run(["g++", "-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-w", f"-I{tmp}",
                    f"-I{NOTES}", str(NOTES / "day38_emu.cpp"), "-o", str(lib)], check=True)
    so = ctypes.CDLL(str(lib))
    so.emu_run.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                           ctypes.POINTER(ctypes.c_longlong)]
    return so


class Fn:
    def __init__(self, so, name):
        self.so, self.name = so, name

    def prepared_call(self, grid, block, *args, shared_size=0):
        vals = (ctypes.c_longlong * len(args))(*[int(a) for a in args])
        rc = self.so.emu_run(self.name.encode(), grid[0], block[0], shared_size, vals)
        assert rc == 0, (self.name, rc)


class FakeK:
    def __init__(self, so):
        self.so = so

    def __call__(self, name, signature=None, dynamic_smem=0):
        assert dynamic_smem <= 227 * 1024, (name, dynamic_smem)
        return Fn(self.so, name)


class FakeD:
    def __init__(self, case):
        self.size, self.params, self.case = case.size, case.params, case
        self.arrays = {k: np.ascontiguousarray(v).copy() for k, v in case.inputs.items()}
        for k, (shape, dt) in case.outputs.items():
            self.arrays[k] = np.full(shape, 0xFF, np.uint8).view(dt).reshape(shape) \
                if np.dtype(dt).itemsize == 1 else np.frombuffer(
                    b"\xff" * (int(np.prod(shape)) * np.dtype(dt).itemsize), dtype=dt).copy()
        self._keep = {}

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name].ctypes.data
        raise AttributeError(name)

    def scratch(self, name, shape, dtype=np.float32, zero=False):
        a = np.random.default_rng(7).integers(0, 2 ** 32, int(np.prod(shape)), dtype=np.uint64)
        a = a.astype(np.uint32).view(np.dtype(dtype)) if np.dtype(dtype).itemsize == 4 else a
        self._keep[name] = a
        return a.ctypes.data


def check(version, size, v4=None):
    case = D.make_case(size, np.random.default_rng(hash(size) & 0xFFFF))
    d = FakeD(case)
    D.launch(version, d, v4=v4) if version == "v4" else D.launch(version, d)
    exp = case.expected()
    for k, ref in exp.items():
        got = d.arrays[k].astype(np.int64)
        if not np.array_equal(got, np.asarray(ref).astype(np.int64)):
            bad = int(np.argmax(got != np.asarray(ref).astype(np.int64)))
            return f"{k}[{bad}] = {got[bad]} != {int(np.asarray(ref)[bad])}"
    return None


def main():
    quick = "quick" in sys.argv[1:]
    if "v4" in sys.argv[1:]:  # v4's 4-way split on many groups and long runs
        with tempfile.TemporaryDirectory() as t:
            D.K = FakeK(build(Path(t)))
            fails = 0
            for size in [(70001, 2, 2), (300007, 1, 1), (300007, 5, 2), (1000003, 2, 1),
                         (1000003, 4, 2), (1000003, 1, 1)]:
                for c in [(256, 16, 256), (256, 16, 512), (512, 16, 512)] + ([(512, 32, 512)] if size[2] == 1 else []):
                    t0 = time.time()
                    msg = check("v4", size, c)
                    print(f"{str(size):>20} v4 {str(c):12s} {'ok' if not msg else 'FAIL ' + msg}"
                          f"  ({time.time() - t0:.1f} s)", flush=True)
                    fails += msg is not None
            print("fails:", fails)
            sys.exit(1 if fails else 0)
    with tempfile.TemporaryDirectory() as t:
        so = build(Path(t))
        D.K = FakeK(so)
        sizes = [(1, 1, 1), (2, 4, 2), (31, 1, 2), (33, 2, 2), (1000, 3, 2), (1025, 5, 1), (4097, 1, 2)]
        if not quick:
            sizes += [(8193, 2, 1), (16385, 4, 2), (5 * 16384, 1, 2), (3 * 16384 + 5, 2, 2),
                      (40000, 5, 2), (70001, 1, 1), (70001, 3, 2), (300007, 1, 2), (300007, 2, 1)]
        fails = 0
        for size in sizes:
            runs = [("v2", None), ("v3", None), ("v4", None)] + ([("v1", None)] if size[0] <= 5000 else [])
            if size[0] >= 1000:
                runs += [("v4", c) for c in [(256, 16, 256), (256, 16, 512), (512, 16, 256), (1024, 16, 1024)]]
                if size[2] == 1:
                    runs += [("v4", (512, 32, 512)), ("v4", (512, 32, 1024))]
            for v, c in runs:
                t0 = time.time()
                msg = check(v, size, c)
                name = v + (f" {c}" if c else "")
                print(f"{str(size):>20} {name:16s} {'ok' if not msg else 'FAIL ' + msg}"
                      f"  ({time.time() - t0:.1f} s)", flush=True)
                fails += msg is not None
        print("fails:", fails)
        sys.exit(1 if fails else 0)


if __name__ == "__main__":
    main()
