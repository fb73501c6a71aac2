"""Checking and timing every version of a day, printing the table, building the results record.

Modes:
  default  the chosen size: every version checked, timed, one table
  check    the ragged CHECK_SIZES (+ the chosen size): every version checked, nothing timed
  bench    CHECK_SIZES checked, then every BENCH_SIZES case checked, timed, re-checked, tabled
"""
from __future__ import annotations

import sys
import time

import numpy as np

from . import harness as H
from .report import fmt, fmt_ms, header_line, table


class Failure(RuntimeError):
    """A version produced a wrong answer (the run goes on; the exit code says so)."""


class Report:
    """What a run prints and what --save stores."""

    def __init__(self, day_number: int, stream=sys.stdout):
        self.day = day_number
        self.stream = stream
        self.cases: list[dict] = []
        self.checks: list[dict] = []
        self.extra: dict = {}
        self.sections: list[dict] = []  # the day's own tables (extras), kept for the README
        self.failures: list[str] = []

    def say(self, text: str = ""):
        print(text, file=self.stream, flush=True)

    def section(self, title: str, rows: list[list], headers: list[str]):
        """Print a day-specific table; --save keeps it and the README shows it."""
        self.say(f"\n{title}")
        self.say(table(rows, headers))
        self.sections.append({"title": title, "headers": list(headers),
                              "rows": [[str(c) for c in r] for r in rows]})

    def record(self, key: str, value):
        self.extra[key] = value


def _seed_for(size, salt: int = 0) -> int:
    return (hash(tuple(size)) ^ salt) & 0x7FFFFFFF


def _versions(drv, only: str | None) -> list[str]:
    vs = H.versions_of(drv)
    if only is None:
        return vs
    if only not in vs:
        raise H.SizeError(f"unknown version {only!r}; this day has {', '.join(vs)}")
    return [only]


def _skip_reason(drv, version, size):
    fn = getattr(drv, "supports", None)
    return fn(version, size) if fn else None


def _same_as(drv, version, size):
    fn = getattr(drv, "same_as", None)
    return fn(version, size) if fn else None


def check_sizes(drv, rep: Report, versions: list[str], sizes: list[tuple]):
    """Check every version on every size with fresh seeded inputs; record, print one line each."""
    for size in sizes:
        seed = _seed_for(size, 17)
        case = drv.make_case(size, np.random.default_rng(seed))
        case.seed = seed
        d = H.DeviceCase(case)
        parts = []
        for v in versions:
            why = _skip_reason(drv, v, size)
            if why:
                parts.append(f"{v} skip")
                rep.checks.append({"size": list(size), "version": v, "skipped": why})
                continue
            other = _same_as(drv, v, size)
            if other:
                parts.append(f"{v} = {other}")
                continue
            r = check_and_time(rep, v, lambda dd, v=v: drv.launch(v, dd), case, d, timed=False)
            rep.checks.append({"size": list(size), "version": v, "ok": r["ok"],
                               "rel_l2": r["rel_l2"], "max_err": r["max_err"], "seed": seed})
            parts.append(f"{v} {'ok' if r['ok'] else 'FAIL'}")
        rep.say(f"  check {H.size_str(size):>16} (seed {seed}): " + ", ".join(parts))


def case_ceilings(case) -> dict:
    """What a case is measured against: for a memory-bound op the stream ceiling of its mix of
    reads and writes (at 1 GiB an array) and the same bytes moved at this size; for a
    compute-bound op the datasheet rate of its unit."""
    from .timing import compute_ceiling_tflops, mix_of, stream_ceiling

    if case.flops:
        tf, src = compute_ceiling_tflops(case.unit)
        return {"tflops": tf, "source": src}
    if not case.bytes:
        return {}
    mix = mix_of(case.bytes, case.read_bytes)
    full = stream_ceiling(mix)
    at_size = stream_ceiling(mix, case.bytes)
    return {"gbps": full.gbps, "mix": list(mix), "source": full.source,
            "size_gbps": at_size.gbps, "size_ms": at_size.ms, "size_source": at_size.source}


def bench_size(drv, rep: Report, versions: list[str], size: tuple, *, timed: bool = True,
               with_baselines: bool = True):
    """Check, time and re-check every version at one size; print and record the table."""
    seed = _seed_for(size)
    case = drv.make_case(size, np.random.default_rng(seed))
    case.seed = seed
    t0 = time.perf_counter()
    expected = case.expected()
    ref_s = time.perf_counter() - t0
    d = H.DeviceCase(case)
    ceil = case_ceilings(case) if timed else {}
    rep.say(f"\n{H.size_str(size)} (seed {seed}; numpy reference {ref_s:.2f} s)")

    rows = []
    for v in versions:
        why = _skip_reason(drv, v, size)
        if why:
            rows.append({"version": v, "description": drv.VERSIONS[v], "skipped": why})
            continue
        other = _same_as(drv, v, size)
        if other:
            rows.append({"version": v, "description": drv.VERSIONS[v], "same_as": other})
            rep.say(f"  {v}: runs {other}'s kernel at this size")
            continue
        row = {"version": v, "description": drv.VERSIONS[v],
               **check_and_time(rep, v, lambda dd, v=v: drv.launch(v, dd), case, d, timed,
                                ceil=ceil)}
        del row["name"], row["size"]
        rows.append(row)
        rep.say(f"  {v}: {'ok' if row['ok'] else 'FAIL'}"
                + (f", {fmt_ms(row['median_ms'])}" if 'median_ms' in row else ""))

    base_rows = []
    if timed and with_baselines and hasattr(drv, "baselines"):
        try:
            libs = drv.baselines(d) or {}
        except Exception as e:  # a missing or broken library must not stop the day
            rep.say(f"  baselines not timed: {type(e).__name__}: {e}")
            libs = {}
        for name, fn in libs.items():
            try:
                b = _time_baseline(name, fn, case, expected, ceil)
                base_rows.append(b)
                rep.say(f"  {name}: {fmt_ms(b['median_ms'])}"
                        + ("" if b["ok"] is not False else f" (its output is WRONG: {b['message']})"))
            except Exception as e:
                rep.say(f"  baseline {name} not timed: {type(e).__name__}: {e}")

    if timed:
        _speedups(rows, base_rows)
        _copy_same_as(rows)
    record = {"size": list(size), "seed": seed, "bytes": case.bytes, "flops": case.flops,
              "read_bytes": case.read_bytes, "unit": case.unit if case.flops else None,
              "rows": rows, "baseline": base_rows}
    if ceil.get("tflops") is not None or case.flops:
        record["ceiling"] = {"tflops": ceil.get("tflops"), "source": ceil.get("source", "")}
    elif ceil:
        record["ceiling"] = {"gbps": ceil["gbps"], "mix": ceil["mix"], "source": ceil["source"]}
        record["size_ceiling"] = {"gbps": ceil["size_gbps"], "ms": ceil["size_ms"],
                                  "source": ceil["size_source"]}
    rep.cases.append(record)
    _print_table(rep, rows, base_rows, case, ceil, timed)


def to_host(out) -> np.ndarray:
    """A library's result on the host: torch tensors, CuPy/pycuda arrays (.get()), numpy."""
    if hasattr(out, "detach"):
        out = out.detach()
        if str(out.dtype) in ("torch.bfloat16", "torch.float8_e4m3fn", "torch.float8_e5m2"):
            out = out.float()          # numpy has no such dtypes
        return out.cpu().numpy()
    if hasattr(out, "get") and not isinstance(out, dict):
        return np.asarray(out.get())
    return np.asarray(out)


def _time_baseline(name, fn, case, expected, ceil) -> dict:
    """Run a library call once and check what it returns (if anything) against the reference
    output (the first output, or the one named `fn.output`), then time it."""
    from .check import compare
    from .timing import time_fn

    out = fn()
    ok, msg = None, ""
    if out is not None:
        key = getattr(fn, "output", None) or next(iter(case.outputs))
        tol = case.tolerance()
        cr = compare(to_host(out).reshape(np.shape(expected[key])), expected[key],
                     tol.get(key) if isinstance(tol, dict) else tol, name)
        ok, msg = cr.ok, cr.message
    t = time_fn(fn)
    b = {"name": name, "median_ms": t.median_ms, "min_ms": t.min_ms, "max_ms": t.max_ms,
         "ok": ok}
    if msg:
        b["message"] = msg
    _add_rates(b, case, ceil)
    return b


def check_and_time(report: Report, label: str, launch, case, d=None, timed: bool = True,
                   ceil: dict | None = None) -> dict:
    """For an op BESIDE the day's versions (an inverse, a fused gradient...): check against the
    reference, and unless timed=False time it and check again, with GB/s or TFLOP/s against
    this GPU's ceiling for the case (case_ceilings). `launch(d)` enqueues the op on DeviceCase
    d. A wrong answer is added to report.failures (the run's exit code says so). Returns the
    row (the keys of a table row)."""
    from .timing import time_fn

    d = d or H.DeviceCase(case)
    as_version = lambda _, dd: launch(dd)
    r = H.check(as_version, label, case, d)
    row = {"name": label, "size": list(case.size), "ok": r.ok, "rel_l2": r.rel_l2,
           "max_err": r.max_abs}
    if timed:
        t = time_fn(lambda: launch(d))
        r2 = H.check(as_version, label, case, d)  # again, after the timing loop
        row.update(ok=r.ok and r2.ok, median_ms=t.median_ms, min_ms=t.min_ms, max_ms=t.max_ms,
                   repeats=t.repeats)
        r = r if not r.ok else r2
        _add_rates(row, case, ceil if ceil is not None else case_ceilings(case))
    if not row["ok"]:
        seed = f" (seed {case.seed})" if case.seed is not None else ""
        report.failures.append(f"{label} at {H.size_str(case.size)}{seed}: {r.message}")
    return row


def _add_rates(row, case, ceil):
    s = row["median_ms"] * 1e-3
    row["gbps"] = case.bytes / s / 1e9 if case.bytes else None
    row["tflops"] = case.flops / s / 1e12 if case.flops else None
    row["pct_of_ceiling"] = None
    if case.flops:
        if ceil.get("tflops"):
            row["pct_of_ceiling"] = 100 * row["tflops"] / ceil["tflops"]
    elif case.bytes and ceil.get("gbps"):
        row["pct_of_ceiling"] = 100 * row["gbps"] / ceil["gbps"]
        row["pct_of_size_ceiling"] = 100 * row["gbps"] / ceil["size_gbps"]


_SHARED_FIELDS = ("median_ms", "min_ms", "max_ms", "repeats", "gbps", "tflops", "pct_of_ceiling",
                  "pct_of_size_ceiling", "speedup_vs_v1", "vs_baseline", "ok", "rel_l2", "max_err")


def _copy_same_as(rows):
    """A version that runs another's kernel at this size gets that run's figures (it is the same
    launch): tables still show "= vN", but bars, BEST and the README markers can read it."""
    by_version = {r["version"]: r for r in rows}
    for r in rows:
        other = by_version.get(r.get("same_as"))
        if other is not None and "median_ms" in other:
            r.update({k: other[k] for k in _SHARED_FIELDS if k in other})


def _speedups(rows, base_rows):
    timed = [r for r in rows if "median_ms" in r and "same_as" not in r]
    if not timed:
        return
    first = timed[0]["median_ms"]
    best_base = min((b["median_ms"] for b in base_rows), default=None)
    for r in timed:
        r["speedup_vs_v1"] = first / r["median_ms"]
        r["vs_baseline"] = best_base / r["median_ms"] if best_base else None


def _print_table(rep, rows, base_rows, case, ceil, timed):
    if not timed:
        def cell(r, txt):
            return "skip" if "skipped" in r else f"= {r['same_as']}" if "same_as" in r else txt()

        rep.section("correctness", [[r["version"], r["description"],
                                     cell(r, lambda: fmt(r["max_err"])),
                                     cell(r, lambda: "ok" if r["ok"] else "FAIL")]
                                    for r in rows], ["version", "what", "max err", "ok"])
        return
    from .timing import datasheet_bandwidth_gbps

    rate_head = "TFLOP/s" if case.flops else "GB/s"
    if case.flops:
        ceil_txt = (f"{ceil['tflops']:.0f} TFLOP/s ({ceil['source']})" if ceil.get("tflops")
                    else "unknown compute ceiling")
    else:
        sheet = datasheet_bandwidth_gbps()
        ceil_txt = (f"{ceil['gbps']:.0f} GB/s ({ceil['source']}, measured now; "
                    f"the same bytes at this size: {ceil['size_gbps']:.0f} GB/s"
                    + (f"; datasheet {sheet:.0f} GB/s)" if sheet else ")"))
    out = []
    for r in rows:
        if "skipped" in r:
            out.append([r["version"], r["description"], "skipped: " + r["skipped"]] + [""] * 6)
            continue
        if "same_as" in r:
            out.append([r["version"], r["description"], f"= {r['same_as']}"] + [""] * 6)
            continue
        rate = r["tflops"] if case.flops else r["gbps"]
        out.append([r["version"], r["description"],
                    f"{fmt_ms(r['median_ms'])} [{fmt_ms(r['min_ms'])}-{fmt_ms(r['max_ms'])}]",
                    fmt(rate, ".1f" if case.flops else ".0f"), fmt(r.get("pct_of_ceiling"), ".1f"),
                    fmt(r.get("speedup_vs_v1"), ".2f") + "x",
                    (fmt(r["vs_baseline"], ".2f") + "x") if r.get("vs_baseline") else "-",
                    fmt(r["max_err"], ".2g"), "ok" if r["ok"] else "FAIL"])
    for b in base_rows:
        rate = b["tflops"] if case.flops else b["gbps"]
        out.append([b["name"], "library baseline",
                    f"{fmt_ms(b['median_ms'])} [{fmt_ms(b['min_ms'])}-{fmt_ms(b['max_ms'])}]",
                    fmt(rate, ".1f" if case.flops else ".0f"), fmt(b.get("pct_of_ceiling"), ".1f"),
                    "", "1.00x" if b["median_ms"] == min(x["median_ms"] for x in base_rows) else "",
                    "", {True: "ok", False: "FAIL", None: "-"}[b["ok"]]])
    rep.say(f"ceiling: {ceil_txt}")
    rep.say(table(out, ["version", "what", "time median [min-max]", rate_head, "% of ceiling",
                        "vs v1", "vs baseline", "max err", "ok"]))
    for r in rows + base_rows:
        pct, vs = r.get("pct_of_ceiling"), r.get("vs_baseline")
        name = r.get("version", r.get("name"))
        if pct and pct > 102:
            rep.say(f"  NOTE {name} runs at {pct:.0f}% of the ceiling: count its bytes again, or "
                    "explain in the README why it can beat the fastest stream of the same bytes")
        if (pct and pct > 1000) or (vs and vs > 10):
            rep.say(f"  WARNING {name} beats its ceiling or the library by more than 10x: "
                    "a bug until proven otherwise")


def run_day(number: int, mode: str = "default", size: tuple | None = None,
            version: str | None = None, stream=sys.stdout) -> Report:
    """Run one day on the GPU in a mode; returns the Report (failures listed in .failures)."""
    drv = H.load_driver(number)
    rep = Report(number, stream)
    versions = _versions(drv, version)
    from .catalogue import DAYS

    rep.say(f"Day {number}: {DAYS[number].title}")
    rep.say(header_line())
    if hasattr(drv, "extras"):
        drv.extras(rep, mode)
    if mode == "check":
        sizes = [size] if size else list(drv.CHECK_SIZES) + [tuple(drv.SIZES["small"])]
        check_sizes(drv, rep, versions, sizes)
    elif mode == "bench":
        check_sizes(drv, rep, versions, list(drv.CHECK_SIZES))
        for s in ([size] if size else H.bench_sizes(drv)):
            bench_size(drv, rep, versions, s)
    else:
        bench_size(drv, rep, versions, size or tuple(drv.SIZES["default"]))
    if rep.failures:
        rep.say("\nFAILURES:")
        for f in rep.failures:
            rep.say("  " + f)
    return rep


REFERENCE_MAX_ELEMENTS = 1 << 27  # the no-GPU path runs numpy at sizes up to this product


def reference_only(number: int, size: tuple | None = None, stream=sys.stdout):
    """The no-GPU path: what the day measured on a GPU (results/dayNN.json), then the numpy
    reference on the small case (or on `size`), so the tutorial still runs on a laptop."""
    from .progress import results_block
    from .results import load_all

    drv = H.load_driver(number)
    if size is not None and int(np.prod(size, dtype=np.float64)) > REFERENCE_MAX_ELEMENTS:
        raise H.SizeError(f"size {H.size_str(size)} is too large for the numpy reference on the "
                          f"CPU (at most {REFERENCE_MAX_ELEMENTS} as the product of the "
                          "dimensions); pick a smaller --size")
    rec = load_all().get(number)
    if rec:
        print(f"What this day measured on a GPU (results/day{number:02d}.json):\n", file=stream)
        print(results_block(rec), file=stream)
        print("", file=stream)
    else:
        print("This day has no GPU results yet (results/dayNN.json is written by --bench --save "
              "on a GPU).", file=stream)
    size = tuple(size or drv.SIZES["small"])
    case = drv.make_case(size, np.random.default_rng(0))
    t0 = time.perf_counter()
    exp = case.expected()
    dt = time.perf_counter() - t0
    print(f"ran the numpy reference on {'the small case ' if size == tuple(drv.SIZES['small']) else ''}"
          f"{H.size_str(size)} in {dt * 1e3:.1f} ms:", file=stream)
    for k, v in exp.items():
        flat = np.asarray(v).ravel()
        print(f"  {k}: shape {tuple(np.shape(v))}, first values {np.array2string(flat[:4], precision=4)}",
              file=stream)
