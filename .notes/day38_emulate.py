#!/usr/bin/env python3
"""Day 38 without a GPU: kernel.cu compiled as host C++ (.notes/day38_emu.cpp on the emulator of
.notes/day15_20_emu.h) into a shared library, and driver.launch() itself run against it through
a fake kernel loader and a fake DeviceCase (numpy buffers, outputs poisoned with 0xFF, scratch
with junk). Every version (and every v4 block-size candidate) on ragged sizes of every key
distribution, compared exactly with the numpy reference (keys and the stable argsort).

    .venv/bin/python .notes/day38_emulate.py            # the default set
    .venv/bin/python .notes/day38_emulate.py quick      # a few small sizes
    .venv/bin/python .notes/day38_emulate.py v4         # v4 alone, up to 1000003 keys
    .venv/bin/python .notes/day38_emulate.py v5 v6 v7 v8 [quick]   # the new versions, their
                                                        # shipped configurations and corner ones
    .venv/bin/python .notes/day38_emulate.py sweep [quick]  # every configuration the sweep times
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
    assert k >= 4, k
    (tmp / "k.inc").write_text(src)
    lib = tmp / "libemu38.so"
    subprocess.run(["g++", "-std=c++20", "-O1", "-fPIC", "-shared", "-pthread", "-w", f"-I{tmp}",
                    f"-I{NOTES}", str(NOTES / "day38_emu.cpp"), "-o", str(lib)], check=True)
    so = ctypes.CDLL(str(lib))
    so.emu_run.argtypes = [ctypes.c_char_p, ctypes.c_uint, ctypes.c_uint, ctypes.c_uint,
                           ctypes.POINTER(ctypes.c_longlong)]
    return so


def check_v6_tiles(tiles, cap, n, cuts_ptr, L, S, K, Q, way=4):
    """The cuts sort_v6_rank wrote: every tile holds 1..cap keys, and the tiles of each group
    cover it exactly, in order (kernel.cu: rank_samples's bound cnt < (K + way - 1) S)."""
    cuts = np.ctypeslib.as_array(ctypes.cast(cuts_ptr, ctypes.POINTER(ctypes.c_int32)),
                                 shape=(tiles * way,)).reshape(tiles, way).astype(np.int64)
    G = way * L
    groups = -(-n // G)
    b = 0
    for g in range(groups):
        lens = [max(0, min(n, g * G + (w + 1) * L) - min(n, g * G + w * L)) for w in range(way)]
        ntiles = -(-(-(-sum(lens) // S)) // K)
        assert b == g * Q, (b, g, Q)
        prev = None
        for k in range(ntiles):
            c = cuts[b + k]
            e = cuts[b + k + 1] if k + 1 < ntiles else np.array(lens)
            if k == 0:
                assert not c.any(), ("first cut", g, c)
            assert (e >= c).all() and (e <= np.array(lens)).all(), (g, k, c, e)
            cnt = int((e - c).sum())
            assert 1 <= cnt <= cap, ("tile size", g, k, cnt, cap)
        b += ntiles if g == groups - 1 else Q
    assert b == tiles, (b, tiles)


class Fn:
    def __init__(self, so, name):
        self.so, self.name = so, name

    def prepared_call(self, grid, block, *args, shared_size=0):
        if re.match(r"sort_v[5-8]_merge", self.name):  # they store whole uint4s
            assert all(int(a) % 16 == 0 for a in args[:4]), (self.name, [int(a) % 16 for a in args[:4]])
        if re.match(r"sort_v[6-8]_merge", self.name):
            way = 8 if self.name.startswith("sort_v8") else 4
            slack = 0 if self.name.startswith("sort_v6") else way // 2 - 1
            items = 32 if "_i32_" in self.name else 16
            check_v6_tiles(grid[0], (block[0] - slack) * items, *[int(a) for a in args[4:]], way=way)
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
    if version == "v4":
        D.launch(version, d, v4=v4)
    elif v4 is not None:  # v5 and later: their own configurations
        D.launch(version, d, cfg=v4)
    else:
        D.launch(version, d)
    exp = case.expected()
    for k, ref in exp.items():
        got = d.arrays[k].astype(np.int64)
        if not np.array_equal(got, np.asarray(ref).astype(np.int64)):
            bad = int(np.argmax(got != np.asarray(ref).astype(np.int64)))
            return f"{k}[{bad}] = {got[bad]} != {int(np.asarray(ref)[bad])}"
    return None


# v5 and later: the shipped configurations and candidates that stress each one's corners
# (v6: S = 64 gives many samples and tiles; S = 1024 with 256 merge threads gives K = 1, tiles at
# their largest against capacity)
NEW = {
    "v5": [None, (256, 16, 256), (256, 16, 512), (512, 16, 512)],
    "v6": [None, (256, 16, 256, 64), (256, 16, 256, 1024), (512, 16, 512, 512), (256, 16, 512, 128)],
    # pairs: v4's block sorts (16 a thread); keys: 32 a thread (the candidates below)
    "v7": [None, (256, 16, 256, 64), (256, 16, 256, 512), (512, 16, 512, 256)],
    "v8": [None, (256, 16, 256, 64), (256, 16, 256, 256), (512, 16, 512, 128)],
}
NEW_KEYS_ONLY = {"v5": [(512, 32, 512)], "v6": [(512, 32, 512, 256), (512, 32, 256, 128)],
                 "v7": [(256, 32, 256, 64), (256, 32, 256, 512), (512, 32, 512, 1024),
                        (512, 32, 256, 256, 32), (256, 32, 256, 64, 32)],
                 "v8": [(256, 32, 256, 64), (256, 32, 256, 256), (512, 32, 512, 512),
                        (512, 32, 256, 128, 32), (256, 32, 256, 64, 32)]}


def _cands(v, words):
    c = NEW[v] + (NEW_KEYS_ONLY.get(v, []) if words == 1 else [])
    if v in ("v7", "v8") and words == 1:  # keys: block sorts of 32 a thread only
        c = [x for x in c if x is None or x[1] == 32]
    return c


def run_new(versions, sizes):
    fails = 0
    for size in sizes:
        for v in versions:
            cands = _cands(v, size[2])
            for c in cands if size[0] >= 1000 else [None]:
                t0 = time.time()
                msg = check(v, size, c)
                name = v + (f" {c}" if c else "")
                print(f"{str(size):>20} {name:24s} {'ok' if not msg else 'FAIL ' + msg}"
                      f"  ({time.time() - t0:.1f} s)", flush=True)
                fails += msg is not None
    return fails


def sweep_candidates():
    """KEYS and PAIRS of .notes/day38_sweep.py: (version, config) lists, by words."""
    import ast

    tree = ast.parse((NOTES / "day38_sweep.py").read_text())
    lists = {t.targets[0].id: ast.literal_eval(t.value) for t in tree.body
             if isinstance(t, ast.Assign) and getattr(t.targets[0], "id", "") in ("KEYS", "PAIRS")}
    return {1: lists["KEYS"], 2: lists["PAIRS"]}


def main():
    quick = "quick" in sys.argv[1:]
    if "sweep" in sys.argv[1:]:  # every configuration the sweep times (the shipped ones among them)
        with tempfile.TemporaryDirectory() as t:
            D.K = FakeK(build(Path(t)))
            cands = sweep_candidates()
            sizes = [(1000, 3, 2), (33, 2, 1), (16385, 4, 2), (70001, 1, 1), (70001, 2, 2),
                     (300007, 4, 1), (300007, 5, 2)]
            if not quick:
                sizes += [(1000003, 1, 1), (1000003, 3, 2), (2 ** 20 + 1, 2, 1)]
            fails = 0
            for size in sizes:
                for v, c in cands[size[2]]:
                    t0 = time.time()
                    msg = check(v, size, c)
                    print(f"{str(size):>20} {v} {str(c):24s} {'ok' if not msg else 'FAIL ' + msg}"
                          f"  ({time.time() - t0:.1f} s)", flush=True)
                    fails += msg is not None
            print("fails:", fails)
            sys.exit(1 if fails else 0)
    new = [a for a in sys.argv[1:] if a in NEW]
    if new:  # e.g. `day38_emulate.py v5 v6`: the new versions and their candidates
        with tempfile.TemporaryDirectory() as t:
            D.K = FakeK(build(Path(t)))
            sizes = [(1, 1, 1), (2, 4, 2), (31, 1, 2), (33, 2, 2), (1000, 3, 2), (1025, 5, 1),
                     (4097, 1, 2), (8193, 2, 1), (16385, 4, 2), (5 * 16384, 1, 2),
                     (3 * 16384 + 5, 2, 2), (40000, 5, 2), (70001, 1, 1), (70001, 3, 2)]
            if not quick:
                sizes += [(300007, 1, 2), (300007, 2, 1), (300007, 4, 1), (1000003, 1, 1),
                          (1000003, 2, 2)]
            fails = run_new(new, sizes)
            print("fails:", fails)
            sys.exit(1 if fails else 0)
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
            runs = [("v2", None), ("v3", None), ("v4", None), ("v5", None), ("v6", None), ("v7", None),
                    ("v8", None)] + ([("v1", None)] if size[0] <= 5000 else [])
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
