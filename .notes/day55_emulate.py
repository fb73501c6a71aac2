#!/usr/bin/env python3
"""Run day 55's kernels on a CPU through the REAL driver.launch, against numpy. No GPU needed.

    .venv/bin/python .notes/day55_emulate.py            # every version and v4 shape
    .venv/bin/python .notes/day55_emulate.py --quick    # v3 and the shipped v4 only

kernel.cu is compiled by g++ as host C++ (C++20, -O1) into a shared library with the emulator
in .notes/day55_emu.h; only the bodies of the three inline-PTX helpers (lanemask_lt,
ld_relaxed, st_relaxed) are swapped for the emulator's. driver.K, common.gpu.driver (memsets)
and common.gpu.sm_count are replaced by stand-ins, and a fake DeviceCase keeps the arrays in
numpy memory (outputs poisoned with 0xFF, scratch filled with 0x5A so a status word the sort
forgets to clear reads as a stale A). Each case is sorted twice on the same buffers. Blocks run
one at a time in a random order, and P words written over A words are dropped at random, so
look-backs walk back over A counts. This checks the index arithmetic, the ranking, the scans,
the plan and the look-back's bookkeeping; not speed, not the GPU's memory model or scheduling.
"""
import argparse
import ctypes
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
sys.path.insert(0, str(ROOT))

import common.gpu as G  # noqa: E402
from days.day55_radix_sort import driver as D  # noqa: E402

KERNEL = ROOT / "days/day55_radix_sort/kernel.cu"
SIGS = {"PiiiPi": "radix_v1_count radix_v2_upsweep", "Pi": "radix_scan_counts_v1",
        "PPPPiiiPi": "radix_v1_scatter_keys radix_v1_scatter_pairs radix_v2_downsweep_keys "
                     "radix_v2_downsweep_pairs",
        "PiiP": "radix_v3_histogram", "PP": "radix_v3_scan",
        "PPPPiiiPPPP": " ".join(["radix_v3_pass_keys", "radix_v3_pass_pairs"] +
                                [D.v4_kernel(c, s) for c in D.V4_CANDIDATES for s in ("keys", "pairs")])}


def replace_body(src, head, body):
    i = src.index(head)
    j = src.index("{", i)
    depth, k = 0, j
    while True:
        depth += {"{": 1, "}": -1}.get(src[k], 0)
        if depth == 0:
            break
        k += 1
    return src[:j] + "{ " + body + " }" + src[k + 1:]


def build(out_dir: Path) -> Path:
    src = KERNEL.read_text()
    src = replace_body(src, "__device__ __forceinline__ unsigned lanemask_lt(", "return emu_lanemask_lt();")
    src = replace_body(src, "__device__ __forceinline__ unsigned ld_relaxed(", "return emu_ld_relaxed(p);")
    src = replace_body(src, "__device__ __forceinline__ void st_relaxed(", "emu_st_relaxed(p, v);")
    if re.search(r"\basm\b", src):
        sys.exit("kernel.cu has inline PTX the emulator does not replace")
    cases = []
    for sig, names in SIGS.items():
        for name in names.split():
            args = ", ".join(f"(unsigned*)a[{i}]" if c == "P" else f"(int)a[{i}]" for i, c in enumerate(sig))
            cases.append(f'    if (!std::strcmp(name, "{name}")) {{ if (nargs != {len(sig)}) return 2; '
                         f"emu_run(grid, block, [&] {{ {name}({args}); }}); return 0; }}")
    main = ("\nextern \"C\" int emu_launch(const char* name, unsigned grid, unsigned block, "
            "const long long* a, int nargs) {\n" + "\n".join(cases) + "\n    return 1;\n}\n"
            "extern \"C\" void emu_set(double drop, unsigned seed) { emu_drop_p = drop; emu_rng.seed(seed); }\n"
            "extern \"C\" unsigned long long emu_stat(int w) { return w ? emu_dropped : emu_walked; }\n")
    host = out_dir / "day55_host.cpp"
    host.write_text('#include "day55_emu.h"\n' + src + main)
    lib = out_dir / "libday55emu.so"
    cmd = ["g++", "-std=c++20", "-O1", "-shared", "-fPIC", "-pthread", f"-I{NOTES}",
           f"-I{ROOT / 'common/cuda'}", "-w", "-o", str(lib), str(host)]
    subprocess.run(cmd, check=True)
    return lib


class FakeFn:
    def __init__(self, lib, name):
        self.lib, self.name = lib, name

    def prepared_call(self, grid, block, *args, shared_size=0):
        a = (ctypes.c_longlong * len(args))(*[int(x) for x in args])
        rc = self.lib.emu_launch(self.name.encode(), grid[0], block[0], a, len(args))
        if rc:
            raise RuntimeError(f"emu_launch({self.name}) = {rc}")


class FakeCuda:
    @staticmethod
    def memset_d32_async(ptr, value, count, stream=None):
        assert value == 0
        ctypes.memset(int(ptr), 0, 4 * count)


class FakeD:
    def __init__(self, case):
        self.case, self.size, self.params = case, case.size, case.params
        self.arrays = {k: np.ascontiguousarray(v).copy() for k, v in case.inputs.items()}
        for k, (shape, dt) in case.outputs.items():
            self.arrays[k] = np.empty(shape, dt)
        self._scratch = {}

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name].ctypes.data
        raise AttributeError(name)

    def array(self, name):
        return self.arrays[name]

    def poison(self):
        for k in self.case.outputs:
            self.arrays[k].view(np.uint8)[:] = 0xFF

    def scratch(self, name, shape, dtype=np.float32, zero=False):
        want = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if name not in self._scratch or self._scratch[name].nbytes < want:
            a = np.empty(max(want, 16) + 64, np.uint8)
            off = (-a.ctypes.data) % 64
            a = a[off:off + max(want, 16)]
            a[:] = 0 if zero else 0x5A
            self._scratch[name] = a
        return self._scratch[name].ctypes.data


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    import tempfile

    tmp = Path(tempfile.mkdtemp(prefix="day55emu"))
    t0 = time.time()
    lib = ctypes.CDLL(str(build(tmp)))
    lib.emu_launch.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint,
                               ctypes.POINTER(ctypes.c_longlong), ctypes.c_int]
    lib.emu_set.argtypes = [ctypes.c_double, ctypes.c_uint]
    lib.emu_stat.restype = ctypes.c_ulonglong
    lib.emu_set(0.5, args.seed)
    print(f"built in {time.time() - t0:.1f} s")
    D.K = lambda name, sig=None, dynamic_smem=0: FakeFn(lib, name)
    G.driver = lambda: FakeCuda()
    G.sm_count = lambda: 1  # v2: 2 blocks in all, so each walks several tiles

    runs = [("v3", None), ("v4", None)]
    if not args.quick:
        runs += [("v4", tuple(c)) for c in D.V4_CANDIDATES if tuple(c) != tuple(D.V4)]
        runs += [("v2", None), ("v1", None)]
    sizes = [(1, 1, 2, 3), (2, 4, 1, 1), (33, 2, 2, 3), (33, 5, 1, 4), (1000, 3, 2, 5),
             (7681, 2, 2, 3), (8193, 1, 1, 2), (20001, 1, 2, 1), (30001, 5, 2, 6),
             (50001, 2, 2, 4), (40000, 1, 1, 1)]
    bad = 0
    for size in sizes:
        case = D.make_case(size, np.random.default_rng(size[0] + args.seed))
        exp = case.expected()
        d = FakeD(case)
        for v, cfg in runs:
            if v == "v1" and size[0] > 20001:
                continue
            for rep in range(2):
                d.poison()
                t = time.time()
                D.launch(v, d, cfg)
                ok = all(np.array_equal(d.arrays[k].astype(np.int64), np.asarray(exp[k]).astype(np.int64))
                         for k in case.outputs)
                if not ok:
                    bad += 1
                    k0 = d.arrays["keys"].astype(np.int64)
                    wrong = np.flatnonzero(k0 != exp["keys"].astype(np.int64))
                    print(f"  FAIL {size} {v} {cfg} rep {rep}: {wrong.size} keys wrong, first at "
                          f"{wrong[:5].tolist()}")
            print(f"{str(size):<22} {v} {str(cfg or ''):<16} {'ok' if ok else 'FAIL'} "
                  f"({time.time() - t:.1f} s a sort)", flush=True)
    print(f"look-back reads {lib.emu_stat(0)}, P words dropped {lib.emu_stat(1)}")
    print("ALL OK" if not bad else f"{bad} FAILURES")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
