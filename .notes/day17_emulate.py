#!/usr/bin/env python3
"""Run day 17's v5 (every shape .notes/day17_scan_sweep.py tries) and v4 on a CPU, with the host
emulator in .notes/day17_emu.h, against an exact int64 prefix sum. No GPU needed.

    python3 .notes/day17_emulate.py            # every shape, every length
    python3 .notes/day17_emulate.py --quick    # the shipped v5 only

kernel.cu is compiled by g++ as host C++ (C++20, -O1, with -fsanitize=undefined): the inline
PTX of load_status / store_status is swapped for the emulator's versions, nothing else
changes. Several blocks run at once (each a process, threads as CUDA threads), tickets
interleave, P words become visible late, and global arrays sit between inaccessible pages.
Each run scans a few times on one status buffer with growing launch numbers (epochs),
alternating inclusive and exclusive, as the driver does, with the candidate's look-back sleeps
(a yield in the emulator). This checks the index arithmetic, the bookkeeping and the
look-back; not speed, not the GPU's memory model. (day17_emu.h still has cp.async stand-ins,
used by v6 until v6 was removed from the day after the 2026-11-23 sweep.)
"""
import argparse
import importlib.util
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NOTES = Path(__file__).resolve().parent
ROOT = NOTES.parent
KERNEL = ROOT / "days/day17_prefix_sum/kernel.cu"


def load_sweep():
    sys.path.insert(0, str(ROOT))
    spec = importlib.util.spec_from_file_location("day17_sweep", NOTES / "day17_scan_sweep.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def replace_body(src: str, head: str, body: str) -> str:
    """Swap the brace-balanced body of the function whose signature starts with `head`."""
    i = src.index(head)
    j = src.index("{", i)
    depth, k = 0, j
    while True:
        depth += {"{": 1, "}": -1}.get(src[k], 0)
        if depth == 0:
            break
        k += 1
    return src[:j] + "{ " + body + " }" + src[k + 1:]


def host_source(cands, kernel=KERNEL) -> str:
    src = Path(kernel).read_text()
    src = replace_body(src, "__device__ __forceinline__ unsigned long long load_status(",
                       "return emu_load_status(p);")
    src = replace_body(src, "__device__ __forceinline__ void store_status(", "emu_store_status(p, v);")
    if re.search(r"\basm\b", src):
        sys.exit("kernel.cu has inline PTX the emulator does not replace: " +
                 ", ".join(sorted(set(re.findall(r"(\w+)\([^)]*\)\s*\{[^{}]*\basm\b", src)))))
    seen, extra, table = set(), [], []
    for c in cands:
        if not c.kernel.startswith("scan_") and c.kernel not in seen:
            extra.append(c.source())
        if c.kernel not in seen:
            seen.add(c.kernel)
            table.append(f'    {{"{c.kernel}", {c.kernel}, {c.warps}, {c.chunks}, {c.first_ns}u, '
                         f'{c.retry_ns}u}},')
    main = MAIN.replace("@TABLE@", "\n".join(table))
    return '#include "day17_emu.h"\n' + src + "\n" + "".join(extra) + main


MAIN = r'''
#include <string>
typedef void (*LbKernel)(const unsigned*, unsigned*, unsigned long long*, unsigned*, long long,
                         int, unsigned, unsigned, unsigned);
struct Shape { const char* name; LbKernel fn; int warps, chunks; unsigned first_ns, retry_ns; };
static const Shape SHAPES[] = {
@TABLE@
};

// usage: prog KERNEL N SEED LAUNCHES TOGETHER P_DELAY   (KERNEL scan_v4 runs v4 with its memset)
int main(int argc, char** argv) {
    if (argc != 7) { std::fprintf(stderr, "usage\n"); return 2; }
    const std::string which = argv[1];
    const long long n = std::atoll(argv[2]);
    const unsigned seed = (unsigned)std::atoi(argv[3]);
    const int launches = std::atoi(argv[4]);
    const unsigned together = (unsigned)std::atoi(argv[5]);
    emu_p_delay_max = std::atoi(argv[6]);
    std::mt19937 rng(seed);
    unsigned* x = emu_global<unsigned>(n);
    unsigned* y = emu_global<unsigned>(n);
    std::vector<unsigned> inc(n);
    for (int l = 0; l < launches; ++l) {
        const int excl = l % 2;
        unsigned s = 0;  // new values every launch: a word left by the last launch is stale
        for (long long i = 0; i < n; ++i) { x[i] = rng(); s += x[i]; inc[i] = s; }  // wraps mod 2^32
        std::memset(y, 0xFF, n * 4);
        bool ok;
        if (which == "scan_v4") {
            const long long tiles = (n + 8191) / 8192;
            unsigned long long* st = emu_global<unsigned long long>(tiles + 1);  // zeroed
            ok = emu_launch(scan_v4, (unsigned)tiles, 256, together, seed + l, (const unsigned*)x, y,
                            st, (unsigned*)(st + tiles), n, excl);
        } else {
            const Shape* sh = nullptr;
            for (const Shape& c : SHAPES) if (which == c.name) sh = &c;
            if (!sh) { std::fprintf(stderr, "unknown kernel %s\n", which.c_str()); return 2; }
            const long long tile = (long long)sh->warps * sh->chunks * 128;
            const long long tiles = (n + tile - 1) / tile;
            static unsigned long long* buf = nullptr;  // one status buffer for every launch
            if (!buf) buf = emu_global<unsigned long long>(tiles + 1);
            ok = emu_launch(sh->fn, (unsigned)tiles, 32 * sh->warps, together, seed + l, (const unsigned*)x,
                            y, buf + 1, (unsigned*)buf, n, excl, (unsigned)(l + 1), sh->first_ns,
                            sh->retry_ns);
        }
        if (!ok) { std::printf("FAIL %s n=%lld launch %d: a block died\n", which.c_str(), n, l); return 1; }
        for (long long i = 0; i < n; ++i) {
            const unsigned want = excl ? (i ? inc[i - 1] : 0u) : inc[i];
            if (y[i] != want) {
                std::printf("FAIL %s n=%lld launch %d (%s): y[%lld] = %u, want %u\n", which.c_str(), n, l,
                            excl ? "exclusive" : "inclusive", i, y[i], want);
                return 1;
            }
        }
    }
    std::printf("ok %s n=%lld\n", which.c_str(), n);
    return 0;
}
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="the shipped v5 only")
    ap.add_argument("--kernel", default=str(KERNEL), help="another kernel.cu (to try a change)")
    args = ap.parse_args()
    sweep = load_sweep()
    cands = sweep.candidates()
    if args.quick:
        cands = [c for c in cands if c.kernel == "scan_v5"][:1]
    tmp = Path(tempfile.mkdtemp(prefix="day17_emu_"))
    (tmp / "emu.cpp").write_text(host_source(cands, args.kernel))
    exe = tmp / "emu"
    t0 = time.perf_counter()
    r = subprocess.run(["g++", "-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=undefined",
                        "-fno-sanitize-recover=undefined", f"-I{NOTES}", "-w", str(tmp / "emu.cpp"),
                        "-o", str(exe)], capture_output=True, text=True)
    if r.returncode:
        sys.exit(r.stderr[-4000:])
    print(f"built the emulator in {time.perf_counter() - t0:.0f} s ({tmp})", flush=True)
    runs = [("scan_v4", n, 3, 3) for n in (1, 8193, 5 * 8192 + 7)]
    shapes = {}
    for c in cands:
        shapes.setdefault(c.kernel, c)
    for name, c in shapes.items():
        t = c.tile
        lengths = [1, 31, t - 1, t + 1, 3 * t + 5] + ([] if args.quick else [9 * t + 3])
        runs += [(name, n, 4, 6) for n in sorted(set(lengths))]
        runs.append((name, 5 * t + 2, 4, 0))  # P words visible at once
    bad = 0
    t0 = time.perf_counter()
    for name, n, together, delay in runs:
        r = subprocess.run([str(exe), name, str(n), str(n % 97 + 1), "3", str(together), str(delay)],
                           capture_output=True, text=True, timeout=600)
        line = (r.stdout.strip() or r.stderr.strip()[-400:] or f"exit {r.returncode}").splitlines()[-1]
        if r.returncode:
            bad += 1
            print(f"FAIL {name} n={n}: {line}", flush=True)
    print(f"{len(runs) - bad} of {len(runs)} runs exact ({time.perf_counter() - t0:.0f} s)")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
