"""Tables and the header line that says where a figure was measured."""
from __future__ import annotations

import datetime as _dt

try:
    from tabulate import tabulate as _tabulate
except ImportError:  # tabulate is a requirement; this keeps imports working before `make setup`
    _tabulate = None


def md_table(rows: list[list], headers: list[str]) -> str:
    """A markdown table, the same bytes on every machine (generated files use this, so they do
    not depend on which tabulate version is installed)."""
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = lambda r: "| " + " | ".join(str(x).ljust(w) for x, w in zip(r, widths)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
                      + [line(r) for r in rows])


def table(rows: list[list], headers: list[str]) -> str:
    """A table for the terminal (tabulate when installed)."""
    if _tabulate is not None:
        return _tabulate(rows, headers=headers, tablefmt="github", disable_numparse=True)
    return md_table(rows, headers)


def fmt(x, spec=".3g", none="-") -> str:
    if x is None:
        return none
    if isinstance(x, float) and x != x:
        return "nan"
    return format(x, spec)


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms < 0.1:
        return f"{ms * 1e3:.1f} us"
    return f"{ms:.3f} ms"


def today() -> str:
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")


def header_line() -> str:
    from .build import nvcc_version
    from .gpu import device_info, driver_release

    info = device_info()
    drv = driver_release() or info["driver_version"]
    return (f"{info['name']} ({info['arch']}, {info['sms']} SMs) | driver {drv} | "
            f"CUDA {info['cuda_version']} (nvcc {nvcc_version() or '?'}) | {today()}")
