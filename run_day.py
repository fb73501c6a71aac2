#!/usr/bin/env python3
"""Run a day: every version checked against its numpy reference and timed, one table.

    python run_day.py 5                     default size, every version, one table
    python run_day.py 5 --size 4096x1000    an explicit size (or small / default / large)
    python run_day.py 5 --version v3        one version
    python run_day.py 5 --check             correctness only, over the ragged sizes
    python run_day.py 5 --bench --save      ragged checks + the benchmark sizes -> results/day05.json
    python run_day.py 5 --ncu --version v4  Nsight Compute on one version
    python run_day.py 5 --sanitize          compute-sanitizer memcheck + racecheck
    python run_day.py 5 --regs              registers / shared memory / spills of every kernel
    python run_day.py --list                the 100 days and their status
    python run_day.py 5 --list              the day's versions and sizes
    python run_day.py --all --bench --save  every built day
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.catalogue import DAYS  # noqa: E402
from common.gpu import NoGPU, gpu_status  # noqa: E402


class UserError(Exception):
    """Bad input: one line to the user, exit 2."""


def parse_args(argv):
    p = argparse.ArgumentParser(prog="run_day.py", description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n", 2)[2])
    p.add_argument("day", nargs="?", help="day number, 1-100")
    p.add_argument("--list", action="store_true", help="list the days, or a day's versions and sizes")
    p.add_argument("--version", help="run only this version (v1, v2, ...)")
    p.add_argument("--size", help="small, default, large, or an explicit shape such as 8192x8192 or 2^28")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="correctness only (ragged sizes)")
    mode.add_argument("--bench", action="store_true", help="ragged checks, then time the benchmark sizes")
    p.add_argument("--save", action="store_true", help="write results/dayNN.json (and refresh progress.md)")
    p.add_argument("--ncu", action="store_true", help="profile the chosen version with Nsight Compute")
    p.add_argument("--metrics", help="with --ncu: comma-separated ncu metrics to read (and --save "
                                     "into results/ncu/dayNN.json)")
    p.add_argument("--sanitize", action="store_true", help="run the checks under compute-sanitizer")
    p.add_argument("--regs", action="store_true", help="print registers/shared memory/spills per kernel")
    p.add_argument("--all", action="store_true", help="every built day")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    return p.parse_args(argv)


def day_number(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise UserError(f"day must be a number from 1 to 100, not {text!r}") from None
    if n not in DAYS:
        raise UserError(f"there is no day {n}: days run from 1 to 100")
    if n not in H.day_folders():
        raise UserError(f"day {n} ({DAYS[n].slug}) is not built yet; `python run_day.py --list` "
                        f"shows the days that are")
    return n


def list_days():
    from common.progress import status
    from common.results import load_all

    folders, results = H.day_folders(), load_all()
    for n, d in DAYS.items():
        print(f"{n:3d}  {d.folder:38s} {status(n, folders, results):22s} {d.title}")


def list_day(n: int):
    drv = H.load_driver(n)
    print(f"Day {n}: {DAYS[n].title}  (days/{DAYS[n].folder}/)")
    print("versions:")
    for v, what in drv.VERSIONS.items():
        print(f"  {v:4s} {what}")
    print("sizes (" + drv.SIZE_HELP + "):")
    for k, s in drv.SIZES.items():
        print(f"  {k:8s} {H.size_str(s)}")
    print("checked at: " + ", ".join(H.size_str(s) for s in drv.CHECK_SIZES))
    print("benchmarked at: " + ", ".join(H.size_str(s) for s in H.bench_sizes(drv)))


def print_regs(n: int):
    from common.build import ptxas_report
    from common.report import table

    folder = H.day_folders()[n]
    drv = H.load_driver(n)
    arch = "sm_90a" if getattr(drv, "SM90A", False) else "sm_90"
    rows = [[k.name, k.registers, k.smem_bytes, k.stack_bytes, k.spill_stores, k.spill_loads]
            for k in ptxas_report(folder / "kernel.cu", arch)]
    print(f"ptxas -v for days/{folder.name}/kernel.cu ({arch}):")
    print(table(rows, ["kernel", "registers", "static smem B", "stack B", "spill stores B",
                       "spill loads B"]))


def tool_run(n: int, args, tool: str):
    """Re-run this script under ncu or compute-sanitizer."""
    me = [sys.executable, str(ROOT / "run_day.py"), str(n)]
    if tool == "ncu":
        exe = shutil.which("ncu")
        if not exe:
            raise UserError("ncu (Nsight Compute) is not on PATH")
        drv = H.load_driver(n)
        v = args.version or getattr(drv, "BEST", None) or H.versions_of(drv)[-1]
        if args.metrics:
            return ncu_metrics(n, exe, v, args)
        cmds = [[exe, "--clock-control", "none", "--target-processes", "all",
                 "--kernel-name", f"regex:_{v}(_|$)", "--launch-count", "3",
                 "--section", "SpeedOfLight", "--section", "MemoryWorkloadAnalysis",
                 "--section", "Occupancy", "--section", "LaunchStats",
                 *me, "--check", "--version", v, "--size", args.size or "default"]]
    else:
        exe = shutil.which("compute-sanitizer")
        if not exe:
            raise UserError("compute-sanitizer is not on PATH")
        extra = ["--version", args.version] if args.version else []
        extra += ["--size", args.size] if args.size else []
        cmds = [[exe, "--tool", t, "--error-exitcode", "1", *me, "--check", *extra]
                for t in ("memcheck", "racecheck")]
    rc = 0
    for c in cmds:
        print("$ " + " ".join(shlex.quote(x) for x in c), flush=True)
        rc = max(rc, subprocess.run(c).returncode)
    return rc


def ncu_metrics(n: int, exe: str, version: str, args) -> int:
    from common import ncu
    from common.gpu import device_info
    from common.report import table

    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    size = args.size or "default"
    rows = ncu.profile(exe, n, version, size, metrics)
    print(table([[r.get("Kernel Name", "?")] + [f"{r.get(m, '-')}" for m in metrics] for r in rows],
                ["kernel"] + metrics))
    if args.save:
        total = ncu.one_launch(rows, metrics)
        path = ncu.save(n, version, size, total, device_info()["name"])
        print(f"saved {path.relative_to(ROOT)}: {version} {total}")
    return 0


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.list and not args.day:
        list_days()
        return 0
    if args.all:
        days = sorted(H.day_folders())
        if args.day:
            raise UserError("give a day number or --all, not both")
    elif args.day:
        days = [day_number(args.day)]
    else:
        raise UserError("which day? e.g. `python run_day.py 5` (or --list, --all)")

    if args.list:
        for n in days:
            list_day(n)
        return 0
    if args.regs:
        for n in days:
            print_regs(n)
        return 0

    sizes = {}
    for n in days:
        drv = H.load_driver(n)
        sizes[n] = H.parse_size(drv, args.size) if args.size else None
        if args.version and args.version not in drv.VERSIONS:
            raise UserError(f"day {n} has no version {args.version!r}; it has "
                            f"{', '.join(drv.VERSIONS)}")

    ok, why = gpu_status()
    if not ok:
        from common.runner import reference_only

        needs = [f for f in ("check", "bench", "save", "ncu", "sanitize") if getattr(args, f)]
        print(f"no CUDA GPU here: {why}. The kernels need one; "
              + ("cannot --" + ", --".join(needs) + "." if needs else "showing the numpy reference instead."))
        if needs:
            return 2
        for n in days:
            print(f"Day {n}: {DAYS[n].title}")
            reference_only(n, sizes[n])
        return 0

    if args.ncu or args.sanitize:
        return max(tool_run(n, args, "ncu" if args.ncu else "sanitizer") for n in days)

    from common.runner import run_day

    mode = "bench" if args.bench else "check" if args.check else "default"
    failed = []
    for n in days:
        rep = run_day(n, mode, sizes[n], args.version)
        if args.save:
            if mode == "check":
                raise UserError("--save stores timings: use it with --bench or the default run")
            from common import progress, results

            path = results.save(rep, mode)
            progress.main([])
            print(f"saved {path.relative_to(ROOT)}")
        if rep.failures:
            failed.append(n)
    if failed:
        print(f"\n{len(failed)} day(s) with failures: {', '.join(map(str, failed))}")
        return 1
    return 0


def entry() -> int:
    debug = "--debug" in sys.argv
    try:
        return main()
    except UserError as e:
        print(f"run_day.py: {e}", file=sys.stderr)
        return 2
    except H.SizeError as e:
        print(f"run_day.py: {e}", file=sys.stderr)
        return 2
    except NoGPU as e:
        print(f"run_day.py: needs a CUDA GPU: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("run_day.py: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`... | head`): not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as e:
        if debug:
            raise
        name = type(e).__name__
        if "MemoryError" in name or "out of memory" in str(e).lower():
            print(f"run_day.py: out of GPU memory for this size ({e}); try a smaller --size",
                  file=sys.stderr)
        else:
            print(f"run_day.py: {name}: {str(e).splitlines()[0] if str(e) else ''} "
                  f"(rerun with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(entry())
