#!/usr/bin/env python3
"""Day 34 without a GPU: the driver's launches on the threaded host emulator (.notes/day34_emu.h,
real threads: __syncthreads, shuffles, and clusters whose K blocks run at once with their own
shared memory and map_shared_rank). The machinery (fake K / DeviceCase, the launch-script
interpreter) is .notes/day33_emulate.py's.

    .venv/bin/python .notes/day34_emulate.py          # every version at every CHECK_SIZES entry
    .venv/bin/python .notes/day34_emulate.py sweep    # + the v4 candidates and v5/v6's
                                                      #   sweep kernels (-DDAY34_SWEEP)
    .venv/bin/python .notes/day34_emulate.py v5 v6    # only these versions
    .venv/bin/python .notes/day34_emulate.py v5 ring  # + v5 on the smallest ring (many chunks)

kernel.cu is rewritten for the host: the cooperative_groups include goes (the emulator
defines the cluster API), each `__shared__` declaration becomes per-block storage.
"""
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

NOTES = Path(__file__).resolve().parent
sys.path.insert(0, str(NOTES))
import day33_emulate as E  # noqa: E402

from common import harness as H  # noqa: E402
from common.check import compare_all  # noqa: E402


def host_source(src: str) -> str:
    src = src.replace("#include <cooperative_groups.h>", "")
    src = re.sub(r"extern __shared__ (\w+) (\w+)\[\];", r"\1* \2 = emu_dyn<\1>();", src)
    n = [0]

    def arr(m):
        n[0] += 1
        return f"{m.group(1)}* {m.group(2)} = emu_smem<{m.group(1)}>({n[0]}, {m.group(3)});"

    def one(m):
        n[0] += 1
        return f"{m.group(1)}& {m.group(2)} = *emu_smem<{m.group(1)}>({n[0]}, 1);"
    src = re.sub(r"__shared__ (\w+) (\w+)\[(\w+)\];", arr, src)
    return re.sub(r"__shared__ (\w+) (\w+);", one, src)


def main():
    from days.day34_image_augmentation import driver as D
    from days.day34_image_augmentation import reference as R

    sweep = "sweep" in sys.argv[1:]
    only = [a for a in sys.argv[1:] if a in D.VERSIONS] or list(D.VERSIONS)   # e.g. `v5 v6`
    D.smem_optin = lambda: 227 * 1024          # an H100/H200's opt-in limit (no device here)
    D.smem_per_sm = lambda: 228 * 1024
    src = (E.ROOT / "days/day34_image_augmentation/kernel.cu").read_text()
    tmp = Path(tempfile.mkdtemp(prefix="emu34_"))
    kpath = tmp / "kernel_host.cu"
    kpath.write_text(host_source(src))
    names = {k: v for k, v in E.kernel_names(src).items()}
    for m in re.finditer(r"\bAUG_V4\((\w+), (\w+), (\w+)\)", src):
        if not m.group(1).isupper():
            names[m.group(1)] = 9
    for m in re.finditer(r"\bAUG_STAGED\((\w+), (\w+), (\w+), (\w+), (\w+)\)", src):
        if not m.group(1).isupper():
            names[m.group(1)] = 11
    if not sweep:
        names = {k: v for k, v in names.items()
                 if not re.match(r"aug_v4_k\d", k) and not re.match(r"aug_v[56]_", k)}

    def cluster_of(name):
        if name == "aug_v4":
            return D.V4_K
        if re.match(r"aug_v[56](_|$)", name):
            return D.V5_K
        m = re.match(r"aug_v4_k(\d+)_t", name)
        return int(m.group(1)) if m else 1
    emu = E.Emulator(kpath, names, ["DAY34_SWEEP"] if sweep else [], workdir=tmp,
                     header="day34_emu.h", cluster_of=cluster_of)
    real_run = H.run
    H.run = lambda launch, version, case: E.emu_run(emu, D, launch, version, case)
    fails = 0
    try:
        for size in list(D.CHECK_SIZES) + [D.SIZES["small"]]:
            case = D.make_case(size, np.random.default_rng(sum(size)))
            exp = case.expected()
            res = []
            for v in only:
                out = E.emu_run(emu, D, D.launch, v, case)
                r = compare_all(out, exp, case.tolerance())
                res.append(f"{v} {'ok' if r.ok else 'FAIL ' + r.message}")
                fails += not r.ok
            print(H.size_str(size), "|", ", ".join(res), flush=True)
        if sweep:
            for k, t in D.V4_CANDIDATES:
                for size in [(2, 17, 33, 8, 9), (2, 64, 48, 31, 33), (1, 100, 75, 24, 24)]:
                    case = D.make_case(size, np.random.default_rng(7))
                    go = lambda _, d, k=k, t=t: D.launch_v4(d, f"aug_v4_k{k}_t{t}", k, t)
                    r = compare_all(E.emu_run(emu, D, go, "cand", case), case.expected(),
                                    case.tolerance())
                    fails += not r.ok
                    print(f"cand k{k} t{t} {H.size_str(size)}: {'ok' if r.ok else 'FAIL ' + r.message}",
                          flush=True)
        if "ring" in sys.argv[1:]:      # v5+: the smallest ring (3 staged rows a half): a chunk
            D.V5_HALF_MAX = 1           # per output row or two, the halves reused many times
            try:
                for size in D.CHECK_SIZES:
                    case = D.make_case(size, np.random.default_rng(sum(size) + 1))
                    for v in [v for v in only if v >= "v5"]:
                        r = compare_all(E.emu_run(emu, D, D.launch, v, case), case.expected(),
                                        case.tolerance())
                        fails += not r.ok
                        print(f"small ring {v} {H.size_str(size)}: {'ok' if r.ok else 'FAIL ' + r.message}",
                              flush=True)
            finally:
                D.V5_HALF_MAX = None
        if sweep:                       # v5/v6 sweep kernels (-DDAY34_SWEEP), two ring sizes
            for name, t, knobs in [("aug_v5_cpasync", 512, {}), ("aug_v5_cpasync", 512, {"V5_HALF_MAX": 1}),
                                   ("aug_v5_t1024", 1024, {"V5_TWO_A_SM": False}),
                                   ("aug_v6_t1024", 1024, {"V5_TWO_A_SM": False})]:
                for size in [(2, 17, 33, 8, 9), (2, 64, 48, 31, 33), (3, 40, 41, 64, 64),
                             (1, 1, 1, 3, 5)]:
                    case = D.make_case(size, np.random.default_rng(8))
                    old = {k: getattr(D, k) for k in knobs}
                    for k, v in knobs.items():
                        setattr(D, k, v)
                    try:
                        go = lambda _, d, name=name, t=t: D.launch_v5(d, name, D.V5_K, t)
                        r = compare_all(E.emu_run(emu, D, go, "cand", case), case.expected(),
                                        case.tolerance())
                    finally:
                        for k, v in old.items():
                            setattr(D, k, v)
                    fails += not r.ok
                    print(f"{name} {knobs} {H.size_str(size)}: {'ok' if r.ok else 'FAIL ' + r.message}",
                          flush=True)
        # the public function, and the same parameters give the same output
        imgs = D.photo_batch(np.random.default_rng(3), 3, 40, 30)
        for v in only:
            out, prm = D.augment(imgs, (17, 19), seed=5, version=v)
            again, _ = D.augment(imgs, (17, 19), params=prm, version=v)
            r = compare_all({"o": out}, {"o": R.augment(imgs, prm, 17, 19)}, 1e-5)
            same = np.array_equal(out, again)
            print(f"augment() {v}: {'ok' if r.ok and same else 'FAIL ' + r.message}")
            fails += not (r.ok and same)
    finally:
        H.run = real_run
    print("FAILURES:", fails)
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
