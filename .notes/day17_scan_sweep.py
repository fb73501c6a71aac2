"""Day 17: which single-pass look-back scan is fastest on this GPU, beside torch.cumsum and CUB.

Archive note: the run of 2026-11-23 (NVIDIA H200; table in .notes/day17_scan.md) also timed
v6 (persistent blocks, cp.async stages), with "v5 shipped" at sleeps 0/0. v6 was removed from
the day after that run (5.5x slower than v4), and with it its candidates here; "v5 shipped" now
runs the driver's LB_FIRST_NS / LB_RETRY_NS (1200/600 since that run) and the sleep rows
include 0/0.

    python .notes/day17_scan_sweep.py                  # from the repo root, on the GPU machine
    python .notes/day17_scan_sweep.py --unsafe-order   # also v5 with tile = blockIdx.x (no ticket)

What it does, in order (it stops with a non-zero exit and says why at the first wrong answer):
 1. Builds days/day17_prefix_sum/kernel.cu plus instantiations of its v5 template in other
    shapes (warps per block, chunks of 128 ints per warp, plain or streaming (evict-first)
    loads and stores); the look-back sleeps are kernel arguments.
 2. Checks every candidate, inclusive AND exclusive, against numpy's exact int64 cumsum (wrapped
    to int32, full-range int32 inputs, so the sums wrap many times) at n = 1, 31, 4097, the tile
    -1 / +1, 3 tiles + 5, 2^20+3, then at 2^28 and 2^28+3 (compared on the GPU through torch).
 3. Times every candidate and the libraries at 2^28 and 2^28+3 with common.timing.time_fn
    (CUDA events, L2 flushed by a read before each run, median), then checks the output again.
    Libraries: torch.cumsum; CUB's DeviceScan::InclusiveSum alone (cupy.cuda.cub.cub_scan,
    in place on a copy of x); cupy.cumsum with CuPy's routine accelerators set to ["cub"]
    (what CUPY_ACCELERATORS=cub sets) and set to [] (CuPy's own scan); a copy of the same bytes.
 4. Records the kernels each library call launches (CUPTI, through torch.profiler, after the
    timing so the profiler cannot touch the timings) and fails unless the CUB rows launch
    CUB's DeviceScanKernel; the [] row shows that the check can tell the difference.
 5. Prints one table: ms at both sizes, GB/s and % of common.timing.copy_bandwidth_gbps() at
    2^28+3, and the speed-up over CUB's kernel.
A few seconds of GPU time on an H200 (the checks, about 20 candidates and 5 library calls at
two sizes); the wall time is mostly the numpy reference, the uploads and nvcc. Before a GPU run,
`python3 .notes/day17_emulate.py` runs the same shapes on a CPU emulator.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, os.getcwd())
from common import harness as H  # noqa: E402
from common.baselines import kernels_launched  # noqa: E402
from common.build import load_module  # noqa: E402
from common.gpu import blocks_per_sm, device_info, driver  # noqa: E402
from common.timing import copy_bandwidth_gbps, time_fn  # noqa: E402
from days.day17_prefix_sum import driver as D  # noqa: E402

KERNEL = Path("days/day17_prefix_sum/kernel.cu")
BIG = [2 ** 28, 2 ** 28 + 3]
TICKET = "s_tile = atomicAdd(counters + (epoch & 1u), 1u);"  # v5's ticket, for --unsafe-order


class Cand:
    """One configuration: a kernel (a template instantiation) and the look-back sleeps."""

    def __init__(self, name, family, warps, chunks, stream=False, first_ns=D.LB_FIRST_NS,
                 retry_ns=D.LB_RETRY_NS, kernel=None, note=""):
        self.name, self.family, self.warps, self.chunks = name, family, warps, chunks
        self.stream, self.first_ns, self.retry_ns = stream, first_ns, retry_ns
        self.kernel = kernel or f"x_{family}_w{warps}_c{chunks}" + ("_cs" if stream else "")
        self.note = note
        self.fn = None
        self.ms = {}
        self.ok = True

    @property
    def tile(self):
        return D.tile_of(self.warps, self.chunks)

    def source(self):
        targs = f"{self.warps}, {self.chunks}, {'true' if self.stream else 'false'}"
        return (f'extern "C" __global__ void __launch_bounds__({32 * self.warps}) '
                f"{self.kernel}(SCAN_LB_ARGS) {{ scan_{self.family}_body<{targs}>(SCAN_LB_PASS); }}\n")

    def launch(self, d):
        D.launch_lookback(d, self.fn, self.warps, self.chunks, first_ns=self.first_ns,
                          retry_ns=self.retry_ns)


def candidates():
    v5, shipped = D.V5, (D.LB_FIRST_NS, D.LB_RETRY_NS)
    out = [Cand("v5 shipped", "v5", v5["warps"], v5["chunks"], kernel="scan_v5",
                note="ns before/between reads: %d/%d" % shipped)]
    # v5: one tile per block; the tile is warps x chunks x 128 ints
    for w, c in [(2, 8), (4, 4), (4, 8), (8, 3), (8, 4), (8, 6), (8, 8), (16, 2), (16, 4)]:
        out.append(Cand(f"v5 {32 * w}x{4 * c}", "v5", w, c))
    out.append(Cand(f"v5 {32 * v5['warps']}x{4 * v5['chunks']} cs", "v5", v5["warps"], v5["chunks"],
                    stream=True, note="__ldcs/__stcs"))
    out.append(Cand("v5 256x16 cs", "v5", 8, 4, stream=True, note="__ldcs/__stcs"))
    for first, retry in [(0, 0), (0, 128), (0, 512), (600, 0), (1200, 600)]:
        if (first, retry) != shipped:
            out.append(Cand(f"v5 shipped sleep {first}/{retry}", "v5", v5["warps"], v5["chunks"],
                            kernel="scan_v5", first_ns=first, retry_ns=retry,
                            note="ns before/between reads"))
    # (v6, persistent blocks with cp.async stages, was removed from the day after 2026-11-23)
    return out


def build(cands, text, tag):
    """One module: kernel.cu's text plus the candidates' instantiations (each kernel once)."""
    seen, extra = set(), []
    for c in cands:
        if not c.kernel.startswith("scan_") and c.kernel not in seen:
            seen.add(c.kernel)
            extra.append(c.source())
    path = Path(tempfile.mkdtemp(prefix=f"day17_{tag}_")) / "kernel.cu"
    path.write_text(text + "\n// ---- sweep instantiations ----\n" + "".join(extra))
    t0 = time.perf_counter()
    mod = load_module(path)
    print(f"built {len(extra)} instantiations ({tag}) in {time.perf_counter() - t0:.0f} s", flush=True)
    for c in cands:
        c.fn = mod.get_function(c.kernel)
        c.fn.prepare("PPPPqiIII")


def device_case(x):
    return H.DeviceCase(H.Case((x.size,), inputs={"x": x}, outputs={"y": ((x.size,), np.int32)},
                               params={"exclusive": 0}))


def wrong(got, want, exclusive):
    """None if got is the (exclusive) scan whose inclusive form is `want`; else where it is not."""
    exp = want if not exclusive else np.concatenate([[0], want[:-1]]).astype(np.int32)
    if np.array_equal(got, exp):
        return None
    i = int(np.argmax(got != exp))
    return f"y[{i}] = {got[i]}, want {exp[i]} (n = {want.size})"


def check_small(c, rng):
    lengths = sorted({1, 31, 4097, c.tile - 1, c.tile + 1, 3 * c.tile + 5, 2 ** 20 + 3})
    for n in lengths:
        x = rng.integers(-2 ** 31, 2 ** 31 - 1, n, dtype=np.int32, endpoint=True)
        ref = np.cumsum(x, dtype=np.int64).astype(np.int32)
        d = device_case(x)
        for excl in (0, 1):
            d.params["exclusive"] = excl
            d.poison_outputs()
            c.launch(d)
            driver().Context.synchronize()
            bad = wrong(d.outputs()["y"], ref, excl)
            if bad:
                sys.exit(f"FAIL {c.name} ({'exclusive' if excl else 'inclusive'}): {bad}")


class Big:
    """The full-size lengths: x on the GPU once per length, the reference on the GPU once."""

    def __init__(self, torch, x, ref_t):
        self.n = x.size
        self.d = device_case(x)
        self.torch = torch
        self.y_t = torch.as_tensor(self.d.array("y"), device="cuda")
        self.x_t = torch.as_tensor(self.d.array("x"), device="cuda")
        self.ref_t = ref_t[: self.n]

    def wrong(self, got_t, exclusive=False):
        t = self.torch
        want = self.ref_t if not exclusive else t.cat([self.ref_t.new_zeros(1), self.ref_t[:-1]])
        got_t = got_t.reshape(-1)
        if t.equal(got_t, want):
            return None
        i = int(t.nonzero(got_t != want)[0, 0])
        return f"y[{i}] = {int(got_t[i])}, want {int(want[i])} (n = {self.n})"

    def check(self, c, excl):
        self.d.params["exclusive"] = excl
        self.d.poison_outputs()
        c.launch(self.d)
        driver().Context.synchronize()
        self.d.params["exclusive"] = 0
        return self.wrong(self.y_t, excl)


def library_calls(torch, cupy, b):
    """name -> fn() for the libraries on Big b's x (fn returns its output, or None)."""
    xc = cupy.asarray(b.d.array("x"))
    buf = xc.copy()  # CUB scans in place: its first call (the checked one) scans x
    cub_scan = D.cub_inclusive_sum(cupy)
    with_cub, without = D.cupy_cumsum(cupy, ("cub",)), D.cupy_cumsum(cupy, ())
    cuda = driver()

    def copy():
        cuda.memcpy_dtod(b.d.y, b.d.x, 4 * b.n)

    return {"torch.cumsum": lambda: torch.cumsum(b.x_t, 0, dtype=torch.int32),
            D.CUB_ROW: lambda: cub_scan(buf),
            "cupy.cumsum (CUB)": lambda: with_cub(xc),
            "cupy.cumsum (no CUB)": lambda: without(xc),
            "copy of the same bytes": copy}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--unsafe-order", action="store_true",
                    help="also time v5 with tile = blockIdx.x (no ticket; relies on blocks "
                         "starting in index order, which CUDA does not promise)")
    args = ap.parse_args()
    import torch

    info = device_info()
    print(f"{info['name']}, {info['sms']} SMs, L2 {info['l2_bytes'] / 2 ** 20:.0f} MB; torch "
          f"{torch.__version__}; CUPY_ACCELERATORS={os.environ.get('CUPY_ACCELERATORS', '(unset)')}")
    cupy = D.cupy_or_none()
    if cupy is None:
        sys.exit("CuPy is needed for the CUB baseline (pip install cupy-cuda13x)")
    from cupy.cuda import cub as cupy_cub

    build_version = getattr(cupy_cub, "get_build_version", lambda: "?")()
    print(f"CuPy {cupy.__version__}, CUB build {build_version}, routine "
          f"accelerators at import: {list(D.routine_accelerators(cupy)[0]())} (1 = cub)")
    copy_bw = copy_bandwidth_gbps()
    print(f"copy ceiling (common.timing.copy_bandwidth_gbps): {copy_bw:.0f} GB/s", flush=True)

    cands = candidates()
    build(cands, KERNEL.read_text(), "main")
    for c in cands:
        c.bps = blocks_per_sm(c.fn, 32 * c.warps)

    # 1. correctness at small and ragged lengths (a broken candidate shows here, not at 1 GB)
    rng = np.random.default_rng(17)
    t0 = time.perf_counter()
    for c in cands:
        check_small(c, rng)
    print(f"all {len(cands)} candidates exact at small lengths, inclusive and exclusive "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)

    # 2. the full-size lengths: one full-range input, numpy's int64 cumsum of it
    t0 = time.perf_counter()
    x = rng.integers(-2 ** 31, 2 ** 31 - 1, BIG[-1], dtype=np.int32, endpoint=True)
    ref = np.cumsum(x, dtype=np.int64).astype(np.int32)
    print(f"numpy reference at {BIG[-1]}: {time.perf_counter() - t0:.1f} s", flush=True)
    ref_t = torch.from_numpy(ref).cuda()
    del ref
    bigs = {n: Big(torch, x[:n].copy(), ref_t) for n in BIG}
    del x

    # 3. shipped v4 (the baseline of this sweep), every candidate: check, time, check again
    v4 = Cand("v4 shipped", "v4", 8, 8, kernel="scan_v4")
    v4.launch = lambda d: D.launch("v4", d)
    v4.bps = None
    rows = [v4] + cands
    for n, b in bigs.items():
        for c in rows:
            for excl in (0, 1):
                bad = b.check(c, excl)
                if bad:
                    sys.exit(f"FAIL {c.name} at n = {n} ({'exclusive' if excl else 'inclusive'}): {bad}")
            c.ms[n] = time_fn(lambda: c.launch(b.d)).median_ms
            bad = b.wrong(b.y_t)
            if bad:
                sys.exit(f"FAIL {c.name} at n = {n} after the timing loop: {bad}")
        print(f"checked and timed {len(rows)} candidates at n = {n}", flush=True)

    # 4. libraries on the same inputs
    libs = {}
    for n, b in bigs.items():
        for name, fn in library_calls(torch, cupy, b).items():
            out = fn()
            driver().Context.synchronize()
            if out is not None:
                bad = b.wrong(torch.as_tensor(out, device="cuda"))
                if bad:
                    sys.exit(f"FAIL {name} at n = {n}: {bad}")
            libs.setdefault(name, {"calls": {}, "ms": {}})
            libs[name]["calls"][n] = fn
            libs[name]["ms"][n] = time_fn(fn).median_ms
        print(f"timed the libraries at n = {n}", flush=True)

    # 5. what each library call launched (CUPTI), after all timing
    n = BIG[-1]
    verified = {}
    print(f"\nkernels each library call launches at n = {n} (CUPTI via torch.profiler; us):")
    for name in ("torch.cumsum", D.CUB_ROW, "cupy.cumsum (CUB)", "cupy.cumsum (no CUB)"):
        try:
            ks = kernels_launched(libs[name]["calls"][n])
        except Exception as e:
            print(f"  {name}: could not profile: {type(e).__name__}: {e}")
            verified[name] = None
            continue
        verified[name] = D.is_cub_scan([k for k, _ in ks])
        print(f"  {name}: {'CUB DeviceScan seen' if verified[name] else 'no CUB DeviceScan'}")
        for k, us in ks:
            print(f"      {us:9.1f}  {k[:150]}")
    cub_ok = verified.get(D.CUB_ROW) and verified.get("cupy.cumsum (CUB)")
    if verified.get("cupy.cumsum (no CUB)"):
        print("  NOTE: cupy.cumsum with accelerators [] launched a DeviceScan kernel: the switch "
              "did not take; the check cannot tell the two apart on this CuPy")

    # 6. the table
    cub_ms = libs[D.CUB_ROW]["ms"]
    n = BIG[-1]
    table = []
    for c in rows:
        ms = c.ms[n]
        table.append([c.name, c.tile, 32 * c.warps, c.fn.num_regs if c.fn else "", c.bps or "",
                      f"{c.ms[BIG[0]]:.4f}", f"{ms:.4f}", f"{8 * n / ms / 1e6:.0f}",
                      f"{100 * 8 * n / ms / 1e6 / copy_bw:.1f}", f"{cub_ms[n] / ms:.3f}x",
                      c.note])
    for name, lib in libs.items():
        ms = lib["ms"][n]
        tag = {True: "", False: " (CUB NOT SEEN)", None: " (unverified)"}.get(verified.get(name), "")
        table.append([name + tag, "", "", "", "", f"{lib['ms'][BIG[0]]:.4f}", f"{ms:.4f}",
                      f"{8 * n / ms / 1e6:.0f}", f"{100 * 8 * n / ms / 1e6 / copy_bw:.1f}",
                      f"{cub_ms[n] / ms:.3f}x", "library"])
    from tabulate import tabulate

    print(f"\n8n bytes per scan; % of the {copy_bw:.0f} GB/s copy ceiling and vs CUB at n = {n}")
    print(tabulate(table, ["candidate", "tile", "thr", "regs", "blk/SM",
                           f"ms {BIG[0]}", f"ms {n}", "GB/s", "% copy", "vs CUB", "note"]))
    best = min(rows, key=lambda c: c.ms[n])
    print(f"\nfastest: {best.name} ({best.ms[n]:.4f} ms at {n}: "
          f"{100 * 8 * n / best.ms[n] / 1e6 / copy_bw:.1f}% of copy, {cub_ms[n] / best.ms[n]:.3f}x CUB; "
          f"at {BIG[0]}: {cub_ms[BIG[0]] / best.ms[BIG[0]]:.3f}x CUB)")

    if args.unsafe_order:
        src = KERNEL.read_text()
        assert TICKET in src, "kernel.cu changed: the --unsafe-order edit no longer applies"
        u = Cand("v5 shipped, tile = blockIdx.x", "v5", D.V5["warps"], D.V5["chunks"],
                 kernel="scan_v5")
        build([u], src.replace(TICKET, "s_tile = blockIdx.x;"), "unsafe")
        for n, b in bigs.items():
            bad = b.check(u, 0)
            if bad:
                sys.exit(f"FAIL {u.name} at n = {n}: {bad}")
            u.ms[n] = time_fn(lambda: u.launch(b.d)).median_ms
        print(f"{u.name}: {u.ms[BIG[0]]:.4f} / {u.ms[BIG[-1]]:.4f} ms (the ticket's cost: "
              f"v5 shipped {cands[0].ms[BIG[-1]]:.4f} ms at {BIG[-1]})")

    if not cub_ok:
        sys.exit("\nFAIL: the CUB rows were not seen launching CUB's DeviceScanKernel (above); "
                 "their times are not CUB's")


if __name__ == "__main__":
    main()
