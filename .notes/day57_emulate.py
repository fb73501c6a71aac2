#!/usr/bin/env python3
"""Day 57 without a GPU: compile kernel.cu as host C++ against .notes/day57_emu.h (a std::thread
per CUDA thread, barriers, per-block shared memory, clusters with distributed shared memory) and
run every entry point the driver can pick, at ragged tie-heavy sizes, against reference.py:
indices exactly, values bit for bit. v3/v4's candidate capacity is also run at 64 and 0 so the
fallback over the row runs on small rows.

    PYTHONPATH=. .venv/bin/python -u .notes/day57_emulate.py   (about 25 min on 2 busy cores)

Checks indexing, bounds (NaN/-1-poisoned outputs), the head/body/tail split, the barriers (a
missing one shows as a wrong answer only sometimes), the radix passes, the cluster protocol;
nothing about speed, registers or the GPU's memory ordering.
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
from days.day57_topk_argmax import driver as D  # noqa: E402
from days.day57_topk_argmax import reference as R  # noqa: E402

KERNEL = ROOT / "days/day57_topk_argmax/kernel.cu"


def host(src: str) -> str:
    src = src.replace("#include <cooperative_groups.h>", "")
    src = src.replace("extern __shared__ __align__(16) unsigned char smem[];",
                      "unsigned char* smem = emu_dynamic_smem();")
    count = [0]

    def one(typ, decl):
        m = re.fullmatch(r"\s*(\w+)((?:\[[^\]]+\])*)\s*", decl)
        name, dims = m.group(1), m.group(2)
        count[0] += 1
        tag = f"emu_tag_{count[0]}"
        return f"static char {tag}; auto& {name} = *emu_block_slot<{typ}{dims}>(&{tag}, 1);"

    def repl(m):
        typ, decls = m.group(2), m.group(3)
        return " ".join(one(typ, d) for d in decls.split(","))

    src = re.sub(r"__shared__ (__align__\(16\) )?(\w+) ([^;]+);", repl, src)
    assert "__shared__" not in src, "a __shared__ declaration was not rewritten"
    return '#include "day57_emu.h"\n' + src


def entry_points(src: str) -> dict:
    """name -> kind (0: argmax args, 1: + k, 2: + k, cap)."""
    names = {f"argmax_{v}_{m}": 0 for v in ("v1", "v2") for m in ("max", "min")}
    for w, u in re.findall(r"ARGMAX_V3\((\d+), (\d+)\)", src):
        names.update({f"argmax_v3_w{w}_u{u}_{m}": 0 for m in ("max", "min")})
    for c in re.findall(r"ARGMAX_V4\((\d+)\)", src):
        names.update({f"argmax_v4_c{c}_{m}": 0 for m in ("max", "min")})
    names.update({"topk_v1_rounds": 1, "topk_v2_radix": 1})
    for t, u in re.findall(r"TOPK_V3\((\d+), (\d+)\)", src):
        names[f"topk_v3_t{t}_u{u}"] = 2
    for c, t in re.findall(r"TOPK_V4\((\d+), (\d+)\)", src):
        names[f"topk_v4_c{c}_t{t}"] = 2
    return names


MAIN = r"""
#include <string>
struct Entry { const char* name; void* fn; int kind; };
static Entry ENTRIES[] = {
%s
};
int main(int argc, char** argv) {
    if (argc != 11) { std::fprintf(stderr, "usage\n"); return 2; }
    std::string name = argv[1];
    unsigned grid = std::atoi(argv[2]), block = std::atoi(argv[3]), cluster = std::atoi(argv[4]);
    int rows = std::atoi(argv[5]), cols = std::atoi(argv[6]), k = std::atoi(argv[7]),
        cap = std::atoi(argv[8]);
    std::vector<float> x((size_t)rows * cols), vals((size_t)rows * k);
    std::vector<int> idx((size_t)rows * k, -1);
    std::memset(vals.data(), 0xFF, vals.size() * 4);
    FILE* f = std::fopen(argv[9], "rb");
    if (std::fread(x.data(), 4, x.size(), f) != x.size()) return 3;
    std::fclose(f);
    Entry* e = nullptr;
    for (auto& en : ENTRIES) if (name == en.name) e = &en;
    if (!e) { std::fprintf(stderr, "no entry %%s\n", name.c_str()); return 4; }
    const float* xp = x.data(); float* vp = vals.data(); int* ip = idx.data();
    emu_launch(grid, block, cluster, [&] {
        if (e->kind == 0)
            ((void (*)(const float*, float*, int*, int, int))e->fn)(xp, vp, ip, rows, cols);
        else if (e->kind == 1)
            ((void (*)(const float*, float*, int*, int, int, int))e->fn)(xp, vp, ip, rows, cols, k);
        else
            ((void (*)(const float*, float*, int*, int, int, int, int))e->fn)(xp, vp, ip, rows,
                                                                           cols, k, cap);
    });
    f = std::fopen(argv[10], "wb");
    std::fwrite(vals.data(), 4, vals.size(), f);
    std::fwrite(idx.data(), 4, idx.size(), f);
    std::fclose(f);
    return 0;
}
"""

SIZES = [(1, 1, 1), (3, 7, 1), (1, 2, 2), (5, 33, 4), (4, 5, 5), (7, 9, 8), (13, 100, 31),
         (100, 37, 1), (9, 4097, 1), (3, 256, 256), (5, 3001, 50), (6, 2001, 256),
         (4, 12289, 7), (2, 50257, 1), (2, 50257, 50), (33, 100, 3), (40, 61, 9), (70, 65, 2),
         (133, 40, 5)]


def main():
    src = KERNEL.read_text()
    names = entry_points(src)
    with tempfile.TemporaryDirectory() as t:
        t = Path(t)
        (t / "k.cpp").write_text(host(src) + MAIN % "\n".join(
            f'    {{"{n}", (void*){n}, {kind}}},' for n, kind in names.items()))
        exe = t / "emu"
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-pthread", f"-I{NOTES}",
                            f"-I{ROOT / 'common/cuda'}", "-o", str(exe), str(t / "k.cpp")],
                           capture_output=True, text=True)
        if r.returncode:
            print(r.stderr[-6000:])
            sys.exit(1)
        rng = np.random.default_rng(57)
        bad = 0
        runs = 0
        for size in SIZES:
            rows, cols, k = size
            case = D.make_case(size, rng, ties=True)
            x = case.inputs["x"]
            x[0, :max(1, cols // 50)] = np.float32(np.nan) if cols > 3 else x[0, 0]
            if rows > 4:
                x[4, ::3] = np.float32(np.inf)
            x.tofile(t / "x.bin")
            jobs = []
            for v in D.VERSIONS:
                jobs.append((v, None, False))
                if k == 1:
                    jobs.append((v, None, True))
            few = rows <= 40                  # explicit cluster configs: few rows only (threads)
            if k == 1:
                jobs += [("v3", (w, u), False) for w, u in ((1, 2), (4, 8), (8, 4), (8, 8))]
                jobs += [("v4", (c,), mn) for c in D.V4_CLUSTERS for mn in (False, True) if few]
            else:
                jobs += [("v3", c, False) for c in D.V3_TOPK_CHOICES]
                jobs += [("v4", (c, tt), False) for c, tt in ((2, 512), (8, 256)) if few]
            for v, cfg, minimum in jobs:
                name, grid, threads, smem, with_k = D.kernel_for(v, rows, cols, k,
                                                                 minimum=minimum, config=cfg)
                m = re.search(r"_c(\d+)", name)
                cluster = int(m.group(1)) if m else 1
                caps = (D.CAP, 64, 0) if name.startswith("topk_v3") or name.startswith("topk_v4") \
                    else (D.CAP,)
                if k == 1:
                    want_i = (R.argmin(x) if minimum else R.argmax(x))[:, None]
                else:
                    want_i = R.topk(x, k)[1]
                want_v = np.take_along_axis(x, want_i, 1)
                for cap in caps:
                    out = subprocess.run([str(exe), name, str(grid[0]), str(threads), str(cluster),
                                          str(rows), str(cols), str(k), str(cap),
                                          str(t / "x.bin"), str(t / "o.bin")],
                                         capture_output=True, text=True)
                    runs += 1
                    if out.returncode:
                        print(f"FAIL {name} {size} cap {cap}: exit {out.returncode} {out.stderr}")
                        bad += 1
                        continue
                    o = np.fromfile(t / "o.bin", np.uint32)
                    got_v = o[:rows * k].reshape(rows, k)
                    got_i = o[rows * k:].view(np.int32).reshape(rows, k)
                    ok = np.array_equal(got_i, want_i) and \
                        np.array_equal(got_v, want_v.view(np.uint32))
                    if not ok:
                        bad += 1
                        w = np.argwhere(got_i != want_i)
                        print(f"FAIL {name} {size} cap {cap} ({v} {cfg}): first bad {w[:3].tolist()}")
            print(f"{size}: {len(jobs)} kernels checked", flush=True)
        print(f"{runs} runs, {bad} failures")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
