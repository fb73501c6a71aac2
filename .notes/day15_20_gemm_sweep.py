#!/usr/bin/env python3
"""Days 15 and 20: every v4 tile configuration checked against float64, then timed at the
benchmark case (4096 x 256 x 50257) beside cuBLAS and torch. Run on the GPU machine from the
repo root:

    python .notes/day15_20_gemm_sweep.py            # everything (about a minute of GPU time)
    python .notes/day15_20_gemm_sweep.py --quick    # the BK = 8 configurations only

Candidates: FA2_WARPS_M (warps along the 128-row side of the tile: 8 -> 16 x 128 warp tiles,
v1-v3's arrangement; 4 -> 32 x 64; 2 -> 64 x 32; 1 -> 128 x 16) x FA2_BK (8, 16), each with the
persistent grid (2 blocks per SM walking the tiles) and with one block per tile; day 20's dX
split over K for one or two waves of work units. Each kernel.cu is compiled per configuration
with nvcc in parallel (-D defines, the same flags as the harness), loaded with pycuda.

A configuration that gets a wrong answer is reported (FAIL, with the error) and not timed; the
script exits 1 if any did. Printed at the end: one table per day, the fastest configuration
marked, and the lines to change to make it the default (kernel.cu's #define, the drivers'
V4_GRID / V4_SPLIT_WAVES).
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.build import BASE_FLAGS, INCLUDE_DIRS, arch_flags, device_arch, nvcc_path, parse_ptxas  # noqa: E402
from common.check import compare_all  # noqa: E402
from common.gpu import context, device_info, driver  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day15_fa2_forward import driver as d15  # noqa: E402
from days.day20_fa2_backward import driver as d20  # noqa: E402

BENCH = (4096, 256, 50257)
CHUNK = 1024
REPEATS = 15
KERNELS = {15: ROOT / "days/day15_fa2_forward/kernel.cu", 20: ROOT / "days/day20_fa2_backward/kernel.cu"}


def configs(quick: bool):
    out = []
    for bk in ((8,) if quick else (8, 16)):
        for wm in (4, 8, 2, 1):
            out.append({"FA2_WARPS_M": wm, "FA2_BK": bk})
    return out


def tag(cfg) -> str:
    return f"WM={cfg['FA2_WARPS_M']} BK={cfg['FA2_BK']}"


class Module:
    """A compiled kernel.cu with the interface of common.harness.Kernels: K(name, signature)."""

    def __init__(self, cubin: Path, resources):
        self.module = driver().module_from_file(str(cubin))
        self.resources = {k.name: k for k in resources}
        self._fns = {}

    def __call__(self, name, signature=None, dynamic_smem=0):
        key = (name, signature)
        if key not in self._fns:
            fn = self.module.get_function(name)
            if signature:
                fn.prepare(signature)
            self._fns[key] = fn
        return self._fns[key]

    def regs(self, names):
        rs = [self.resources[n] for n in names if n in self.resources]
        spill = sum(r.spill_stores + r.spill_loads for r in rs)
        return f"{max(r.registers for r in rs)}r" + (f" SPILL {spill}B" if spill else "")


def compile_all(cfgs, tmp: Path):
    """nvcc -cubin for every (day, configuration), 8 at a time: {(day, tag): Module or error}."""
    nvcc, arch = nvcc_path(), device_arch()

    def one(day, cfg):
        out = tmp / f"d{day}_{cfg['FA2_WARPS_M']}_{cfg['FA2_BK']}.cubin"
        cmd = [nvcc, "-cubin", *BASE_FLAGS, *arch_flags(arch), "-Xptxas", "-v",
               *[f"-D{k}={v}" for k, v in cfg.items()],
               *[f"-I{d}" for d in INCLUDE_DIRS + [str(KERNELS[day].parent)]],
               str(KERNELS[day]), "-o", str(out)]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            err = [l for l in r.stderr.splitlines() if "error" in l]
            return day, cfg, None, (err[0] if err else r.stderr[-300:]).strip()
        return day, cfg, out, parse_ptxas(r.stderr + r.stdout)

    with cf.ThreadPoolExecutor(max_workers=8) as ex:
        jobs = [ex.submit(one, day, cfg) for cfg in cfgs for day in (15, 20)]
        results = {}
        for j in jobs:
            day, cfg, cubin, info = j.result()
            results[(day, tag(cfg))] = Module(cubin, info) if cubin else f"does not compile: {info}"
    return results


def ms(fn):
    return time_fn(fn, warmup=2, repeats=REPEATS).median_ms


def tflops(flop, t):
    return flop / (t * 1e-3) / 1e12


# --- correctness: fail loudly -------------------------------------------------------------------

# ragged sizes: tile edges, more tiles than the persistent grid has blocks, K of one step
# (cases and their float64 references are built once, on first use)
SIZES15 = [(130, 17, 257), (257, 9, 33001), (1, 1, 1), (300, 20, 4099)]
SIZES20 = [(129, 9, 131), (300, 130, 1007), (1100, 40, 9001), (7, 40, 50257)]
_cases = {}


def _device_case(key, make):
    if key not in _cases:
        case = make()
        case.expected()
        _cases[key] = (case, H.DeviceCase(case))
    return _cases[key]


def check15(mod, grid):
    bad = []
    for size in SIZES15:
        for with_logp in (False, True):
            case, d = _device_case((15, size, with_logp), lambda: d15.make_case(
                size, np.random.default_rng(size[0] + size[2]), with_logp=with_logp))
            d.poison_outputs()
            d15.launch_v4(d, kern=mod, grid=grid)
            driver().Context.synchronize()
            r = compare_all(d.outputs(), case.expected(), case.tolerance())
            if not r.ok:
                bad.append(f"day 15 {H.size_str(size)}{' logp' if with_logp else ''}: {r.message}")
    return bad


def check20(mod, grid, waves):
    bad = []
    for size in SIZES20:
        case, d = _device_case((20, size), lambda: d20.make_case(size, np.random.default_rng(size[1])))
        d.poison_outputs()
        d20.launch_v4(d, kern=mod, grid=grid, waves=waves)
        driver().Context.synchronize()
        r = compare_all(d.outputs(), case.expected(), case.tolerance())
        if not r.ok:
            bad.append(f"day 20 backward {H.size_str(size)}: {r.message}")
    N, dd, V, chunk = d20.LCE_CHECK
    if "lce" not in _cases:
        H_, W, b, y = d20.lce_problem(N, dd, V, seed=3)
        loss, dH, dW, db = d20.reference.linear_cross_entropy(H_, W, b, y)
        _cases["lce"] = ((H_, W, b, y), {"loss": loss, "dH": dH, "dW": dW, "db": db})
    inputs, ref = _cases["lce"]
    for ch in (None, N, chunk):
        p = d20.LinearCrossEntropy(*inputs, ch, kern=mod, grid=grid)
        p.run()
        out = p.results()
        p.free()
        r = d20.compare_lce(out, ref)
        if not r.ok:
            bad.append(f"day 20 linear+CE chunk {ch}: {r.message}")
    return bad


# --- timing ---------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="BK = 8 configurations only")
    args = ap.parse_args()
    t_start = time.time()
    context()
    info = device_info()
    sms = info["sms"]
    cfgs = configs(args.quick)
    torch = d15.torch_or_none()
    if torch is not None:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 FFMA GEMMs on both sides
    print(f"{info['name']}, {sms} SMs; torch {'absent' if torch is None else torch.__version__}")

    with tempfile.TemporaryDirectory() as t:
        mods = compile_all(cfgs, Path(t))
    print(f"compiled {len(mods)} modules in {time.time() - t_start:.0f} s")

    m, dd, c = BENCH
    gemm_flop = 2 * m * dd * c
    failures = []

    # ---- references: cuBLAS, torch, the versions the days had -----------------------------
    from common.baselines import sgemm

    case15 = d15.make_case(BENCH, np.random.default_rng(1))
    dv15 = H.DeviceCase(case15)
    Zbuf = driver().mem_alloc(4 * m * c)
    refs = {"cuBLAS sgemm 4096x50257x256 (Z = X W, stores Z)":
            ms(lambda: sgemm(dv15.X, dv15.W, Zbuf, m, c, dd))}
    for v in ("v3", "v4"):
        refs[f"day 15 {v} (kernel.cu defaults)"] = ms(lambda v=v: d15.launch(v, dv15))
    if torch is not None:
        base = d15.baselines(dv15)
        for name, fn in base.items():
            refs[name] = ms(fn)
    case20 = d20.make_case(BENCH, np.random.default_rng(2))
    dv20 = H.DeviceCase(case20)
    for v in ("v2", "v4"):
        refs[f"day 20 {v} backward (defaults)"] = ms(lambda v=v: d20.launch(v, dv20))
    if torch is not None:
        from common.baselines import as_torch

        X, W, logp = (as_torch(dv20.array(k)) for k in ("X", "W", "logp"))
        refs["torch X^T @ dZ (dW's shape, 256x50257x4096)"] = ms(lambda: X.t() @ logp)
        refs["torch dZ @ W^T (dX's shape, 4096x256x50257)"] = ms(lambda: logp @ W.t())
        for name, fn in d20.baselines(dv20).items():
            refs[name + " (backward)"] = ms(fn)
        H_, W_, b_, y_ = d20.lce_problem(m, dd, c)
        row, _ = d20._torch_lce(torch, H_, W_, b_, y_, REPEATS)
        refs["torch F.linear + F.cross_entropy + backward"] = row["median_ms"]
        torch.cuda.empty_cache()
    print("\nreferences (median ms, L2 flushed):")
    for k, v in refs.items():
        print(f"  {v:8.3f}  {k}")
    Zbuf.free()

    # ---- day 15: the fused forward --------------------------------------------------------------
    rows15 = []
    stats = dv15.scratch("stats", (m, H.cdiv(c, 128), 2))
    zlab = dv15.scratch("zlab", (m,))
    for cfg in cfgs:
        mod = mods[(15, tag(cfg))]
        if isinstance(mod, str):
            rows15.append([tag(cfg), "-", mod])
            continue
        for grid in ("persistent", "tiles"):
            bad = check15(mod, grid)
            if bad:
                failures += [f"{tag(cfg)} {grid}: {b}" for b in bad]
                rows15.append([tag(cfg), grid, "FAIL: " + bad[0][:60]])
                continue
            fn = mod("fa2_v4_gemm_stats", "PPPPPPiii")
            blocks = d15.v4_blocks(fn, H.cdiv(m, 128) * H.cdiv(c, 128), grid)
            t_gemm = ms(lambda: fn.prepared_call((blocks, 1, 1), (256, 1, 1), dv15.X, dv15.W, dv15.b,
                                                 dv15.y, stats, zlab, m, dd, c))
            t_all = ms(lambda: d15.launch_v4(dv15, kern=mod, grid=grid))
            rows15.append([tag(cfg), grid, mod.regs(["fa2_v4_gemm_stats", "fa2_v4_gemm_logits"]),
                           t_gemm, tflops(gemm_flop, t_gemm), t_all])
    # the bench-size loss of the default build against torch's (an indexing slip at this size
    # would show as an O(1) difference)
    if torch is not None:
        d15.launch("v4", dv15)
        driver().Context.synchronize()
        ours = float(dv15.array("loss").get()[0])
        theirs = float(next(iter(d15.baselines(dv15).values()))().item())
        if abs(ours - theirs) > 1e-4 * abs(theirs):
            failures.append(f"day 15 v4 at the bench size: loss {ours} vs torch {theirs}")

    # ---- day 20: the backward's GEMMs, and forward + backward -----------------------------------
    rows20 = []
    ws = dv20.scratch("sweep_ws", (8 * m * dd,))
    H_, W_, b_, y_ = d20.lce_problem(m, dd, c)
    for cfg in cfgs:
        mod = mods[(20, tag(cfg))]
        if isinstance(mod, str):
            rows20.append([tag(cfg), "-", "-", mod])
            continue
        for grid, waves in (("persistent", 1), ("persistent", 2), ("tiles", 1)):
            bad = check20(mod, grid, waves)
            if bad:
                failures += [f"{tag(cfg)} {grid} waves {waves}: {b}" for b in bad]
                rows20.append([tag(cfg), grid, waves, "FAIL: " + bad[0][:60]])
                continue
            kw = dict(kern=mod, grid=grid)
            t_dw = ms(lambda: d20.tile_gemm("fa2b_v4_gemm_tn_dz_db", dv20.X, dv20.logp, dv20.dW,
                                            dd, c, m, dd, c, colsum=dv20.db, labels=dv20.y,
                                            scale=1.0 / m, **kw))
            plan = d20.v4_split(m, dd, c, waves=waves)
            t_dx = ms(lambda: d20.tile_gemm_nt("fa2b_v4_gemm_nt_dz", dv20.logp, dv20.W, dv20.dX,
                                               m, dd, c, c, c, ws, plan, labels=dv20.y,
                                               scale=1.0 / m, **kw))
            t_bwd = ms(lambda: d20.launch_v4(dv20, kern=mod, grid=grid, waves=waves))
            fb = {}
            if waves == 1:  # the split of the linear+CE paths follows V4_SPLIT_WAVES
                for name, ch in (("fused", m), ("chunked", CHUNK)):
                    p = d20.LinearCrossEntropy(H_, W_, b_, y_, ch, kern=mod, grid=grid)
                    fb[name] = ms(p.run)
                    p.free()
            rows20.append([tag(cfg), grid, waves,
                           mod.regs(["fa2b_v4_gemm_tn_dz_db", "fa2b_v4_gemm_nt_dz", "lce_gemm_logits",
                                     "lce_gemm_tn_dz_acc_db"]),
                           t_dw, tflops(gemm_flop, t_dw), t_dx, tflops(gemm_flop, t_dx), t_bwd,
                           fb.get("fused"), fb.get("chunked")])

    # ---- the tables ----------------------------------------------------------------------------
    from common.report import table

    f = lambda v, spec: "-" if v is None else format(v, spec)
    torch_fwd = refs.get("torch F.linear+F.cross_entropy")
    timed15 = [r for r in rows15 if len(r) == 6]
    best15 = min(timed15, key=lambda r: r[5]) if timed15 else None
    print(f"\nday 15 v4 at {H.size_str(BENCH)}: GEMM alone (fa2_v4_gemm_stats) and the whole "
          f"forward (GEMM + lse + loss); torch F.linear+F.cross_entropy {f(torch_fwd, '.3f')} ms")
    print(table([[r[0], r[1], r[2], f(r[3], ".3f"), f(r[4], ".1f"), f(r[5], ".3f"),
                  f(torch_fwd / r[5] if torch_fwd else None, ".2f") + ("  <- best" if r is best15 else "")]
                 if len(r) == 6 else r + [""] * (7 - len(r)) for r in rows15],
                ["config", "grid", "regs", "GEMM ms", "TFLOP/s", "forward ms", "vs torch"]))
    torch_fb = refs.get("torch F.linear + F.cross_entropy + backward")
    torch_bwd = refs.get("torch exp/scatter + cuBLAS (backward)")
    timed20 = [r for r in rows20 if len(r) == 11]
    best20 = min(timed20, key=lambda r: r[8]) if timed20 else None
    print(f"\nday 20 v4 at {H.size_str(BENCH)}: dW = X^T dZ (+ db), dX = dZ W^T (split over K for "
          f"1 or 2 waves), the backward; forward + backward fused and chunked ({CHUNK} rows). "
          f"torch: backward {f(torch_bwd, '.3f')} ms, forward + backward {f(torch_fb, '.3f')} ms")
    print(table([[r[0], r[1], r[2], r[3], f(r[4], ".3f"), f(r[5], ".1f"), f(r[6], ".3f"), f(r[7], ".1f"),
                  f(r[8], ".3f") + ("  <- best" if r is best20 else ""), f(r[9], ".3f"), f(r[10], ".3f"),
                  f(torch_fb / min(x for x in r[9:11] if x) if torch_fb and any(r[9:11]) else None, ".2f")]
                 if len(r) == 11 else r + [""] * (12 - len(r)) for r in rows20],
                ["config", "grid", "waves", "regs", "dW ms", "TFLOP/s", "dX ms", "TFLOP/s", "backward ms",
                 "fused f+b ms", "chunked f+b ms", "f+b vs torch"]))

    if best15:
        wm, bk = best15[0].split()
        print(f"\nfastest day 15 forward: {best15[0]}, grid {best15[1]}: kernel.cu `#define "
              f"FA2_WARPS_M {wm[3:]}` / `#define FA2_BK {bk[3:]}`, driver V4_GRID = \"{best15[1]}\"")
    if best20:
        wm, bk = best20[0].split()
        print(f"fastest day 20 backward: {best20[0]}, grid {best20[1]}, waves {best20[2]}: kernel.cu "
              f"`#define FA2_WARPS_M {wm[3:]}` / `#define FA2_BK {bk[3:]}`, driver V4_GRID = "
              f"\"{best20[1]}\", V4_SPLIT_WAVES = {best20[2]}")
    print(f"(a configuration marked SPILL must not become the default: tests/test_compile.py "
          f"forbids spills)\nwall time {time.time() - t_start:.0f} s")
    if failures:
        print("\nFAILED:\n  " + "\n  ".join(failures))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
