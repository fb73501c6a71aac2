"""progress.md and each day's measured table, generated from days/ and results/ (never typed
by hand).

    python -m common.progress          write progress.md and refresh the README tables
    python -m common.progress --check  exit 1 if any of them is out of date

A day's README.md carries its measured table between two markers:

    <!-- results:begin -->
    ...generated from results/dayNN.json...
    <!-- results:end -->

and every measured figure or device fact its prose quotes as an inline marker, filled from the
same results (the comments do not show when the markdown is rendered):

    v4 moves <!--m:8192x8192;v4;gbps-->3933 GB/s<!--/m--> on the <!--m:gpu-->NVIDIA H200<!--/m-->

Marker keys (`dNN:` in front reads another day's results, e.g. `d07:2048x2048x2048;v2;ms`):
    gpu, date, gpu_date, sms, l2, smem_block, smem_sm, clock, copy, read, datasheet
                         device facts (clock: the SMs' top clock) and the memory ceilings
    SIZE;NAME;FIELD      a version's or a library's figure at a benchmark size; FIELD is one of
                         ms, us, gbps, tflops, pct (of the ceiling), size_pct (of the same-bytes
                         ceiling at that size), vs_base (speed-up over the fastest library),
                         vs_v1, err (max abs error), over:OTHER (time of OTHER / time of NAME)
    SIZE;ceiling         the ceiling at that size; SIZE;size_ceiling the same-bytes one
    ncu;VERSION;METRIC   an Nsight Compute counter of the version (results/ncu/dayNN.json,
                         written by run_day.py N --ncu --version V --metrics M --save);
                         METRIC_A/METRIC_B gives their ratio
    sec;TITLE;ROW;COLUMN a cell of a day-specific table: the section whose title starts with
                         TITLE, the row whose first cell is ROW, the column headed COLUMN
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

from .bars import describe, fastest_correct, judge
from .catalogue import ARCS, DAYS
from .harness import ROOT, day_folders
from .report import md_table as table
from .results import load_all

DAY_FILES = ("README.md", "kernel.cu", "driver.py", "reference.py")


def status(number: int, folders: dict, results: dict) -> str:
    folder = folders.get(number)
    if folder is None:
        return "planned"
    if not all((folder / f).exists() for f in DAY_FILES):
        return "started"
    rec = results.get(number)
    if rec and rec.get("all_ok") and any(r.get("median_ms") for c in rec.get("cases", [])
                                         for r in c.get("rows", [])):
        return "verified on GPU"
    if rec:
        return "GPU run with failures"
    return "built"


def pretty_size(size) -> str:
    def one(v):
        return f"2^{v.bit_length() - 1}" if v >= 1024 and v & (v - 1) == 0 else str(v)
    return "x".join(one(int(v)) for v in size)


def driver_or_none(number: int):
    try:
        from .harness import load_driver

        return load_driver(number)
    except Exception:
        return None


def headline_size(number: int):
    """The day's default size: the case progress.md quotes."""
    drv = driver_or_none(number)
    return list(drv.SIZES["default"]) if drv else None


def wrong_on(number: int) -> dict:
    """Versions the day keeps to show a failure (WRONG_ON = {version: where it is wrong}):
    never called the best, whatever their speed on the benchmark inputs."""
    return dict(getattr(driver_or_none(number), "WRONG_ON", {}) or {})


def best(rec: dict) -> tuple[str, str]:
    """(best version, its figure) at the day's default size (else the last timed case): the
    fastest version that was correct there and is not kept only to show a failure."""
    cases = [c for c in rec.get("cases", []) if any("median_ms" in r for r in c["rows"])]
    if not cases:
        return "-", "-"
    want = headline_size(rec["day"])
    c = next((c for c in cases if list(c["size"]) == want), cases[-1])
    r = fastest_correct(c, exclude=wrong_on(rec["day"]))
    if r is None:
        return "-", "-"
    size = pretty_size(c["size"])
    if r.get("tflops"):
        fig = f"{r['tflops']:.1f} TFLOP/s"
    elif r.get("gbps"):
        fig = f"{r['gbps']:.0f} GB/s"
    else:
        fig = f"{r['median_ms']:.3f} ms"
    if r.get("pct_of_ceiling") is not None:
        fig += f" ({r['pct_of_ceiling']:.0f}% of ceiling)"
    if r.get("vs_baseline"):
        fig += f", {r['vs_baseline']:.2f}x {c['baseline'][0]['name'] if len(c['baseline']) == 1 else 'best library'}"
    return r["version"], f"{fig} at {size}"


def bar_cell(number: int, rec: dict | None) -> str:
    drv = driver_or_none(number)
    bar = getattr(drv, "BAR", None) if drv else None
    if not bar:
        return "-"
    ok, fig = judge(bar, rec, exclude=wrong_on(number))
    if ok is None:
        return f"{describe(bar)}: {fig}"
    return ("met: " if ok else "**missed**: ") + fig.replace("|", "/")


def render() -> str:
    folders = day_folders()
    results = load_all()
    counts = {"planned": 0, "started": 0, "built": 0, "verified on GPU": 0, "GPU run with failures": 0}
    lines = ["# Progress", "",
             "Generated by `make progress` from `days/` and `results/`; do not edit by hand.",
             "Status: planned (no folder yet), built (kernel, driver, reference, README), "
             "verified on GPU (results/dayNN.json from a GPU run in which every check passed).",
             "Best: the fastest version that was correct at the day's default size. Bar: the "
             "day's bar from CURRICULUM.md (BAR in its driver), judged on the same results.", ""]
    body = []
    for arc_no, (arc, first, last) in ARCS.items():
        rows = []
        for n in range(first, last + 1):
            d = DAYS[n]
            st = status(n, folders, results)
            counts[st] += 1
            rec = results.get(n)
            ver, fig = best(rec) if rec else ("-", "-")
            gpu = f"{rec['device']['name']}, {rec['date']}" if rec else "-"
            link = f"[{d.folder}](days/{d.folder}/)" if n in folders else d.folder
            bar = bar_cell(n, rec) if n in folders else "-"
            rows.append([n, link, d.title, st, ver, fig, bar, gpu])
        body += [f"## Arc {arc_no}: {arc} (days {first}-{last})", "",
                 table(rows, ["day", "folder", "what", "status", "best", "figure", "bar",
                              "measured on"]), ""]
    summary = ", ".join(f"{v} {k}" for k, v in counts.items() if v)
    return "\n".join(lines + [f"**{summary}** (of 100).", ""] + body)


BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def results_block(rec: dict | None) -> str:
    """The measured tables of one results record, as markdown."""
    if not rec:
        return ("*Not measured on a GPU yet: run `python run_day.py N --bench --save` on one, "
                "then `make progress`.*")
    from .report import fmt

    dev = rec["device"]
    ceil = _ceilings(rec)
    stream = (f"copy {ceil['copy_gbps']:.0f} GB/s, read-only {ceil['read_gbps']:.0f} GB/s "
              "(fastest stream kernels, measured in this run)" if ceil.get("read_gbps")
              else f"device-to-device copy {ceil.get('copy_gbps') or 0:.0f} GB/s")
    sheet = f"; datasheet {ceil['datasheet_gbps']:.0f} GB/s" if ceil.get("datasheet_gbps") else ""
    out = [f"Measured on {dev['name']} ({dev.get('sms', '?')} SMs, "
           f"{(dev.get('l2_bytes') or 0) / 2 ** 20:.0f} MB L2), driver {rec.get('driver', '?')}, "
           f"CUDA {rec.get('cuda', '?')}, {rec['date']}, commit {rec['commit']}; {stream}{sheet}. "
           "Median of repeated runs, L2 flushed before each; generated from "
           f"`results/day{rec['day']:02d}.json`."]
    if rec.get("failures"):
        out.append("\n**Failures in this run:** " + "; ".join(rec["failures"]))
    for c in rec.get("cases", []):
        rows = [r for r in c["rows"] if "median_ms" in r or "same_as" in r]
        if not any("median_ms" in r for r in rows):
            continue
        tf = bool(c.get("flops"))
        cl = c.get("ceiling", {})
        if tf:
            ceil_txt = f"{cl.get('tflops') or 0:.0f} TFLOP/s ({cl.get('source', '')})"
        elif cl.get("mix"):
            r_, w_ = cl["mix"]
            what = "read-only stream" if not w_ else f"stream of {r_} read : {w_} written"
            ceil_txt = f"{cl.get('gbps', 0):.0f} GB/s, {what}"
            if c.get("size_ceiling"):
                ceil_txt += f"; the same bytes at this size {c['size_ceiling']['gbps']:.0f} GB/s"
        else:
            ceil_txt = f"{cl.get('gbps', 0):.0f} GB/s copy"
        table_rows = [[r["version"], r.get("description", ""), f"{r['median_ms']:.4g}",
                       fmt(r.get("tflops") if tf else r.get("gbps"), ".1f" if tf else ".0f"),
                       fmt(r.get("pct_of_ceiling"), ".1f"), fmt(r.get("speedup_vs_v1"), ".2f"),
                       fmt(r.get("vs_baseline"), ".2f"), "ok" if r.get("ok") else "FAIL"]
                      if "same_as" not in r else
                      [r["version"], r.get("description", ""), f"= {r['same_as']}", "", "", "", "", ""]
                      for r in rows]
        table_rows += [[b["name"], "library", f"{b['median_ms']:.4g}",
                        fmt(b.get("tflops") if tf else b.get("gbps"), ".1f" if tf else ".0f"),
                        fmt(b.get("pct_of_ceiling"), ".1f"), "", "1.00" if b["median_ms"] == min(
                            x["median_ms"] for x in c["baseline"]) else "", ""]
                       for b in c.get("baseline", [])]
        out += ["", f"**{'x'.join(map(str, c['size']))}** (ceiling {ceil_txt})", "",
                table(table_rows, ["version", "what", "ms", "TFLOP/s" if tf else "GB/s",
                                   "% of ceiling", "vs v1", "vs library", "ok"])]
    esc = lambda c: str(c).replace("|", "\\|")  # a | inside a cell would split the column
    for sec in rec.get("sections", []):
        out += ["", f"**{sec['title']}**", "",
                table([[esc(c) for c in r] for r in sec["rows"]], [esc(h) for h in sec["headers"]])]
    return "\n".join(out)


MARK = re.compile(r"<!--m:(?P<key>[^>]*?)-->(?P<val>.*?)<!--/m-->", re.S)
UNRESOLVED = "(not measured)"


def _size_of(text: str):
    from .harness import _dimension

    try:
        return [_dimension(p) for p in text.lower().split("x")]
    except ValueError:
        return None


def _ceilings(rec: dict) -> dict:
    c = dict(rec.get("ceilings") or {})
    c.setdefault("copy_gbps", rec.get("copy_bandwidth_gbps"))
    c.setdefault("datasheet_gbps", rec.get("device", {}).get("theoretical_bw_gbps"))
    return c


_FIELDS = {
    "ms": lambda r: f"{r['median_ms']:.3g} ms",
    "us": lambda r: f"{r['median_ms'] * 1e3:.1f} us",
    "gbps": lambda r: f"{r['gbps']:.0f} GB/s",
    "tflops": lambda r: f"{r['tflops']:.1f} TFLOP/s",
    "pct": lambda r: f"{r['pct_of_ceiling']:.1f}%",
    "size_pct": lambda r: f"{r['pct_of_size_ceiling']:.1f}%",
    "vs_base": lambda r: f"{r['vs_baseline']:.2f}x",
    "vs_v1": lambda r: f"{r['speedup_vs_v1']:.2f}x",
    "err": lambda r: f"{r['max_err']:.1e}",
}


def resolve(key: str, rec: dict | None, results: dict | None = None) -> str | None:
    """The text a marker key stands for in a results record; None if it is not there."""
    m = re.match(r"d(\d+):(.*)$", key)
    if m:
        return resolve(m.group(2), (results or {}).get(int(m.group(1))), results)
    if not rec:
        return None
    dev = rec.get("device", {})
    ceil = _ceilings(rec)
    try:
        facts = {
            "gpu": lambda: dev["name"],
            "date": lambda: rec["date"],
            "gpu_date": lambda: f"{dev['name']}, {rec['date']}",
            "sms": lambda: str(dev["sms"]),
            "l2": lambda: f"{dev['l2_bytes'] / 2 ** 20:.0f} MB",
            "smem_block": lambda: f"{dev['smem_per_block_optin'] // 1024} KB",
            "smem_sm": lambda: f"{dev['smem_per_sm'] // 1024} KB",
            "clock": lambda: f"{dev['sm_clock_mhz'] / 1000:.2f} GHz",
            "copy": lambda: f"{ceil['copy_gbps']:.0f} GB/s",
            "read": lambda: f"{ceil['read_gbps']:.0f} GB/s",
            "datasheet": lambda: f"{ceil['datasheet_gbps']:.0f} GB/s",
        }
        if key in facts:
            return facts[key]()
        parts = key.split(";")
        if parts[0] == "ncu" and len(parts) == 3:
            from .ncu import load

            prof = load(rec["day"]) or {}
            got = prof["versions"][parts[1]]
            if "/" in parts[2]:  # a ratio of two counters, e.g. sectors per request
                a, b = parts[2].split("/")
                return f"{got[a] / got[b]:.3g}"
            v = got[parts[2]]
            return f"{v:,.0f}" if float(v).is_integer() or abs(v) >= 100 else f"{v:.3g}"
        if parts[0] == "sec" and len(parts) == 4:
            _, title, row, col = parts
            sec = next(x for x in rec.get("sections", []) if x["title"].startswith(title))
            j = sec["headers"].index(col)
            return next(r[j] for r in sec["rows"] if r[0] == row)
        size = _size_of(parts[0])
        case = next(c for c in rec.get("cases", []) if list(c["size"]) == size)
        if len(parts) == 2 and parts[1] in ("ceiling", "size_ceiling"):
            cl = case.get(parts[1]) or {}
            return f"{cl['tflops']:.0f} TFLOP/s" if cl.get("tflops") else f"{cl['gbps']:.0f} GB/s"
        name, field = parts[1], parts[2]
        row = next(r for r in case["rows"] + case.get("baseline", [])
                   if r.get("version", r.get("name")) == name and "median_ms" in r)
        if field.startswith("over:"):
            other = field[5:]
            o = next(r for r in case["rows"] + case.get("baseline", [])
                     if r.get("version", r.get("name")) == other and "median_ms" in r)
            return f"{o['median_ms'] / row['median_ms']:.2f}x"
        return _FIELDS[field](row)
    except (StopIteration, KeyError, IndexError, ValueError, TypeError):
        return None


def fill_markers(text: str, rec: dict | None, results: dict | None = None) -> tuple[str, list[str]]:
    """The text with every marker's value refreshed; and the keys that did not resolve."""
    missing = []

    def one(m):
        v = resolve(m.group("key"), rec, results)
        if v is None:
            missing.append(m.group("key"))
            v = UNRESOLVED
        return f"<!--m:{m.group('key')}-->{v}<!--/m-->"

    return MARK.sub(one, text), missing


def render_readme(text: str, rec: dict | None, results: dict | None = None) -> str:
    text = fill_markers(text, rec, results)[0]
    if BEGIN not in text or END not in text:
        return text
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{results_block(rec)}\n{END}{tail}"


def outputs() -> dict[Path, str]:
    """Every generated file and its wanted content."""
    results = load_all()
    files = {ROOT / "progress.md": render()}
    for n, folder in day_folders().items():
        readme = folder / "README.md"
        if readme.exists():
            files[readme] = render_readme(readme.read_text(), results.get(n), results)
    return files


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    stale = [p for p, text in outputs().items() if not p.exists() or p.read_text() != text]
    if "--check" in argv:
        for p in stale:
            print(f"{p.relative_to(ROOT)} is out of date: run `make progress`", file=sys.stderr)
        return 1 if stale else 0
    for p, text in outputs().items():
        if p in stale:
            p.write_text(text)
            print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
