"""The figures of each day, drawn from results/*.json (never from numbers typed anywhere else).

    python -m common.plot            every day with results   (make plots)
    python -m common.plot 5 9        some days

For every day with a GPU run it writes, into the day's folder:
    ladder.png     one bar per version at the day's default size (GB/s or TFLOP/s), with the
                   ceiling and the fastest library as vertical lines; GPU and date in the title
    bandwidth.png  memory-bound days timed at several sizes: GB/s at each size (ordered by the
                   bytes moved), one line per version and per library, the ceiling and the
                   same-bytes ceiling
    <day figures>  a driver may draw figures of its own from what its extras recorded:
                   FIGURES = {"timeline.png": ("timeline", draw_timeline)} draws
                   draw_timeline(rec, path, plt) -> bool when rec["extra"] has "timeline"
matplotlib is optional: without it the plots are skipped with a note and nothing else changes.
"""
from __future__ import annotations

import sys

from .catalogue import DAYS
from .harness import day_folders
from .results import load_all

COLORS = ["#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd", "#8c8c8c",
          "#e17c05", "#937860", "#da8bc3", "#2ca02c", "#17becf"]


def _matplotlib():
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        return plt
    except ImportError:
        return None


def _timed_cases(rec):
    return [c for c in rec.get("cases", []) if any("median_ms" in r for r in c["rows"])]


def _headline(rec, drv):
    cases = _timed_cases(rec)
    want = list(drv.SIZES["default"]) if drv is not None else None
    return next((c for c in cases if list(c["size"]) == want), cases[-1] if cases else None)


def _size(c) -> str:
    return "x".join(str(v) for v in c["size"])


def _title(rec, extra=""):
    d = DAYS[rec["day"]]
    return f"Day {rec['day']}: {d.title}\n{rec['device']['name']}, {rec['date']}{extra}"


def ladder(rec, drv, path, plt):
    """Bars per version at the headline size, the ceiling and the best library as lines."""
    c = _headline(rec, drv)
    if c is None:
        return False
    tf = bool(c.get("flops"))
    key, unit = ("tflops", "TFLOP/s") if tf else ("gbps", "GB/s")
    rows = [r for r in c["rows"] if "median_ms" in r and r.get(key) and "same_as" not in r]
    if not rows:
        return False
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 2.4), dpi=110)
    names = [r["version"] + ("" if r.get("ok") else " (WRONG)") for r in rows]
    vals = [r[key] for r in rows]
    y = list(range(len(rows)))[::-1]
    bars = ax.barh(y, vals, color=[COLORS[i % len(COLORS)] for i in range(len(rows))], height=0.65)
    ax.set_yticks(y, names)
    top = max(vals)
    ceil = (c.get("ceiling") or {}).get("tflops" if tf else "gbps")
    if ceil:
        top = max(top, ceil)
        ax.axvline(ceil, color="black", lw=1.5, ls="--",
                   label=f"ceiling {ceil:.0f} {unit}" + ("" if tf else " (fastest stream, same mix)"))
    sc = (c.get("size_ceiling") or {}).get("gbps")
    if sc and not tf and abs(sc - (ceil or 0)) / sc > 0.03:
        ax.axvline(sc, color="gray", lw=1.2, ls=":", label=f"same bytes at this size {sc:.0f} {unit}")
    libs = [b for b in c.get("baseline", []) if b.get(key)]
    if libs:
        b = min(libs, key=lambda b: b["median_ms"])
        top = max(top, b[key])
        ax.axvline(b[key], color="#d62728", lw=1.5, label=f"{b['name']} {b[key]:.0f} {unit}"
                   if not tf else f"{b['name']} {b[key]:.1f} {unit}")
    for rect, r in zip(bars, rows):
        pct = r.get("pct_of_ceiling")
        txt = f" {r[key]:.1f}" if tf else f" {r[key]:.0f}"
        if pct is not None:
            txt += f" ({pct:.0f}%)"
        ax.text(rect.get_width(), rect.get_y() + rect.get_height() / 2, txt, va="center", fontsize=8)
    ax.set_xlim(0, top * 1.22)
    ax.set_xlabel(f"{unit} ({'FLOPs the op must do' if tf else 'bytes the op must move'} / median time)")
    ax.set_title(_title(rec, f", size {_size(c)}"), fontsize=10)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16 - 0.3 / (len(rows) + 2)), ncol=3,
              fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def bandwidth(rec, path, plt):
    """GB/s at each benchmark size (one slot per size, ordered by the bytes moved), for
    memory-bound days timed at two or more sizes."""
    cases = [c for c in _timed_cases(rec) if not c.get("flops") and c.get("bytes")]
    if len(cases) < 2:
        return False
    cases.sort(key=lambda c: c["bytes"])
    xs = list(range(len(cases)))
    fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(cases) + 3), 4.6), dpi=110)
    names = []
    for c in cases:
        for r in c["rows"]:
            if "median_ms" in r and "same_as" not in r and r["version"] not in names:
                names.append(r["version"])

    def series(pick):
        pts = [(x, pick(c)) for x, c in zip(xs, cases)]
        return [p for p in pts if p[1]]

    for i, v in enumerate(names):
        pts = series(lambda c: next((r["gbps"] for r in c["rows"] if r["version"] == v
                                     and r.get("gbps") and "same_as" not in r), None))
        if pts:
            ax.plot(*zip(*pts), marker="o", ms=4, lw=1.3, color=COLORS[i % len(COLORS)], label=v)
    libs = sorted({b["name"] for c in cases for b in c.get("baseline", [])})
    for j, name in enumerate(libs):
        pts = series(lambda c: next((b["gbps"] for b in c.get("baseline", []) if b["name"] == name
                                     and b.get("gbps")), None))
        if pts:
            ax.plot(*zip(*pts), marker="s", ms=4, lw=1.3, ls="--",
                    color="#d62728" if j == 0 else "#ff9896", label=name)
    pts = series(lambda c: (c.get("size_ceiling") or {}).get("gbps"))
    if pts:
        ax.plot(*zip(*pts), color="black", lw=1, ls=":", marker="x", label="same bytes, fastest stream")
    pts = series(lambda c: (c.get("ceiling") or {}).get("gbps"))
    if pts:
        ax.plot(*zip(*pts), color="black", lw=1.2, ls="--", label="ceiling (fastest stream, same mix)")
    ax.set_xticks(xs, [f"{_size(c)}\n{c['bytes'] / 2 ** 20:.0f} MiB" for c in cases], fontsize=7)
    ax.set_xlim(-0.4, len(cases) - 0.6)
    ax.set_ylim(0, None)
    ax.set_ylabel("GB/s (bytes the op must move / median time)")
    ax.set_xlabel("benchmark size (bytes moved)")
    ax.set_title(_title(rec), fontsize=10)
    ax.legend(fontsize=7, ncol=1, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def day_figures(rec, drv) -> dict:
    """The driver's own figures whose data the results hold: file name -> draw function."""
    figs = getattr(drv, "FIGURES", None) or {}
    extra = rec.get("extra") or {}
    return {name: draw for name, (key, draw) in figs.items() if key in extra}


def figures_for(number: int) -> list[str]:
    """The file names `make plots` writes for a day with its current results."""
    rec = load_all().get(number)
    if not rec or not _timed_cases(rec):
        return []
    out = ["ladder.png"]
    mem = [c for c in _timed_cases(rec) if not c.get("flops") and c.get("bytes")]
    if len(mem) >= 2:
        out.append("bandwidth.png")
    from .harness import load_driver

    try:
        drv = load_driver(number)
    except Exception:
        drv = None
    out += list(day_figures(rec, drv))
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    plt = _matplotlib()
    if plt is None:
        print("matplotlib is not installed: plots skipped (pip install matplotlib to draw them)")
        return 0
    from .harness import load_driver

    results = load_all()
    folders = day_folders()
    days = [int(a) for a in argv] if argv else sorted(results)
    for n in days:
        rec, folder = results.get(n), folders.get(n)
        if rec is None or folder is None:
            print(f"day {n}: no results, no plot")
            continue
        try:
            drv = load_driver(n)
        except Exception:
            drv = None
        made = []
        if ladder(rec, drv, folder / "ladder.png", plt):
            made.append("ladder.png")
        if bandwidth(rec, folder / "bandwidth.png", plt):
            made.append("bandwidth.png")
        for name, draw in day_figures(rec, drv).items():
            if draw(rec, folder / name, plt):
                made.append(name)
        print(f"day {n}: wrote {', '.join(made) or 'nothing'} in days/{folder.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
