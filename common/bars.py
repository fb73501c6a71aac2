"""A day's bar (the figure its best version must reach, from CURRICULUM.md), declared in its
driver and judged against the committed results, so progress.md says met or missed with the
figure, never by hand.

A driver declares BAR as a list of clauses; every clause must hold:

    BAR = [
        {"pct": 85, "vs_baseline": 1.0},                  # at every benchmark size
        {"sizes": [(8192, 768)], "size_pct": 90},         # only at these sizes
        {"version": "v2", "over": ("v1", 5.0), "sizes": [(2**28, 256, 90)]},
        {"text": "gradcheck passes", "check": fn},        # fn(record) -> (ok, figure)
    ]

Keys of a clause:
    sizes       the cases it applies to (default: every timed case of the results)
    version     the version judged (default: the fastest correct version at that size)
    pct         minimum % of the memory/compute ceiling (row "pct_of_ceiling")
    size_pct    minimum % of the same-bytes ceiling at that size (row "pct_of_size_ceiling"),
                for sizes too small to reach the full rate
    vs_baseline minimum speed-up over the fastest library timed (1.0 = at least as fast);
                "baseline": a name picks one library instead
    over        (other version, factor): time(other) / time(version) >= factor
    text, check a bar the table cannot express: check(record) -> (ok, figure text);
                all_pass(key) is such a check for an extras section of named {"ok": ...} rows
"""
from __future__ import annotations


def all_pass(key: str):
    """A check for a text clause: every entry of the extras section `key` (name -> a dict with
    "ok") passed. Figure: "all pass", or the names that failed."""
    def check(rec):
        section = (rec or {}).get("extra", {}).get(key)
        if not section:
            return False, "not measured"
        bad = [name for name, r in section.items() if not r["ok"]]
        return not bad, "all pass" if not bad else "fail: " + "; ".join(bad)
    return check


def _size_key(size) -> tuple:
    return tuple(int(v) for v in size)


def fastest_correct(case: dict, exclude=()) -> dict | None:
    rows = [r for r in case.get("rows", []) if r.get("ok") and "median_ms" in r
            and r["version"] not in exclude]
    return min(rows, key=lambda r: r["median_ms"]) if rows else None


def _pretty(size) -> str:
    return "x".join(str(v) for v in size)


def judge(bar: list[dict], rec: dict | None, exclude=()) -> tuple[bool | None, str]:
    """(met?, figure) of a BAR against a results record. None: nothing to judge yet."""
    if not bar:
        return None, "no bar declared"
    if not rec:
        return None, "not measured"
    timed = {_size_key(c["size"]): c for c in rec.get("cases", [])
             if any("median_ms" in r for r in c.get("rows", []))}
    notes, ok_all = [], True
    for clause in bar:
        if "check" in clause:
            ok, fig = clause["check"](rec)
            ok_all &= bool(ok)
            notes.append(("" if ok else "MISSED ") + f"{clause.get('text', '')}: {fig}")
            continue
        sizes = [_size_key(s) for s in clause.get("sizes", timed)]
        worst = {}
        for s in sizes:
            c = timed.get(s)
            if c is None:
                ok_all = False
                notes.append(f"MISSED {_pretty(s)} not measured")
                continue
            row = (next((r for r in c["rows"] if r["version"] == clause["version"]
                         and r.get("ok") and "median_ms" in r), None)
                   if "version" in clause else fastest_correct(c, exclude))
            if row is None:
                ok_all = False
                notes.append(f"MISSED {_pretty(s)}: no correct timing")
                continue
            for key, field, fmt in (("pct", "pct_of_ceiling", "{:.1f}%"),
                                    ("size_pct", "pct_of_size_ceiling", "{:.1f}% of same-size copy")):
                if key in clause:
                    v = row.get(field)
                    _track(worst, key, v, clause[key], s, fmt)
            if "vs_baseline" in clause:
                libs = [b for b in c.get("baseline", []) if "median_ms" in b
                        and b.get("ok") is not False
                        and ("baseline" not in clause or b["name"] == clause["baseline"])]
                v = (min(b["median_ms"] for b in libs) / row["median_ms"]) if libs else None
                _track(worst, "vs_baseline", v, clause["vs_baseline"], s, "{:.2f}x library")
            if "over" in clause:
                other, factor = clause["over"]
                o = next((r for r in c["rows"] if r["version"] == other and "median_ms" in r), None)
                v = o["median_ms"] / row["median_ms"] if o else None
                _track(worst, "over", v, factor, s, "{:.2f}x " + other)
        for key, (v, want, s, fmt) in worst.items():
            if v is None:
                ok_all = False
                notes.append(f"MISSED {key} not measured at {_pretty(s)}")
            elif v < want:
                ok_all = False
                notes.append(f"MISSED {fmt.format(v)} < {fmt.format(want)} at {_pretty(s)}")
            else:
                where = f" at {_pretty(s)}" if len(sizes) > 1 else ""
                notes.append(f"{fmt.format(v)} (bar {fmt.format(want)}){' worst' + where if where else ''}")
    return ok_all, "; ".join(notes)


def _track(worst: dict, key, value, want, size, fmt):
    """Keep, per criterion, the size where the margin is smallest (or a missing value)."""
    cur = worst.get(key)
    if cur is not None and cur[0] is None:
        return
    if value is None or cur is None or value / want < cur[0] / cur[1]:
        worst[key] = (value, want, size, fmt)


def describe(bar: list[dict]) -> str:
    """The bar in words, for progress.md."""
    parts = []
    for c in bar or []:
        if "check" in c:
            parts.append(c.get("text", "custom"))
            continue
        bits = []
        if "pct" in c:
            bits.append(f">= {c['pct']}% of ceiling")
        if "size_pct" in c:
            bits.append(f">= {c['size_pct']}% of a same-bytes copy")
        if "vs_baseline" in c:
            lib = c.get("baseline", "the library")
            bits.append(f"{'at least as fast as' if c['vs_baseline'] == 1 else str(c['vs_baseline']) + 'x'} {lib}")
        if "over" in c:
            bits.append(f">= {c['over'][1]}x {c['over'][0]}")
        where = ("at " + ", ".join(_pretty(s) for s in c["sizes"])) if "sizes" in c else "at every bench size"
        who = f"{c['version']} " if "version" in c else ""
        parts.append(who + " and ".join(bits) + " " + where)
    return "; ".join(parts)
