"""Correctness: compare a kernel's output with the float64 reference.

A result passes only if every element is finite, the relative L2 error
||out - ref|| / ||ref|| is within the dtype's tolerance, and no single element is off by
more than 10x that tolerance times max|ref| (so one bad element cannot hide in the norm).
Integer outputs must match exactly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# relative-L2 tolerance by the dtype the kernel computes in (CONVENTIONS.md)
TOLERANCE = {
    "float64": 1e-12,
    "float32": 1e-5,
    "tf32": 1e-3,
    "float16": 1e-2,
    "bfloat16": 1e-2,
}


def _where(flat_index: int, shape) -> tuple:
    return tuple(int(i) for i in np.unravel_index(int(flat_index), shape))


def tolerance_for(dtype) -> float:
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    if name not in TOLERANCE:
        raise KeyError(f"no tolerance for dtype {name}; pass tol= explicitly")
    return TOLERANCE[name]


@dataclass
class CheckResult:
    ok: bool
    rel_l2: float
    max_abs: float
    message: str = ""

    def __bool__(self) -> bool:
        return self.ok


def compare(out, ref, tol: float | None = None, name: str = "out") -> CheckResult:
    """Compare `out` (any dtype) with `ref` (float64 or integer) and say what is wrong."""
    out = np.asarray(out)
    ref = np.asarray(ref)
    if out.shape != ref.shape:
        return CheckResult(False, np.inf, np.inf, f"{name}: shape {out.shape} != reference {ref.shape}")
    if ref.size == 0:
        return CheckResult(True, 0.0, 0.0)
    if np.issubdtype(ref.dtype, np.integer) or ref.dtype == bool:
        diff = out.astype(np.int64) != ref.astype(np.int64)
        n = int(diff.sum())
        max_abs = float(np.abs(out.astype(np.int64) - ref.astype(np.int64)).max())
        if n:
            i = _where(np.argmax(diff), ref.shape)
            return CheckResult(False, float(n) / ref.size, max_abs,
                               f"{name}: {n} of {ref.size} elements differ, first at {i}: "
                               f"{out[i]} != {ref[i]}")
        return CheckResult(True, 0.0, 0.0)

    if tol is None:
        tol = tolerance_for(out.dtype)
    o = out.astype(np.float64)
    r = ref.astype(np.float64)
    bad = ~np.isfinite(o)
    if bad.any():
        i = _where(np.argmax(bad), o.shape)
        return CheckResult(False, np.inf, np.inf,
                           f"{name}: {int(bad.sum())} of {o.size} elements are NaN/Inf "
                           f"(unwritten or overflowed), first at {i}")
    d = o - r
    ref_norm = np.linalg.norm(r)
    err_norm = np.linalg.norm(d)
    rel = float(err_norm / ref_norm) if ref_norm > 0 else float(err_norm)
    abs_err = np.abs(d)
    max_abs = float(abs_err.max())
    scale = float(np.abs(r).max()) or 1.0
    if rel > tol:
        i = _where(np.argmax(abs_err), o.shape)
        return CheckResult(False, rel, max_abs,
                           f"{name}: rel-L2 error {rel:.3g} > {tol:g}; worst at {i}: "
                           f"{o[i]!r} vs {r[i]!r}")
    if max_abs > 10 * tol * scale:
        i = _where(np.argmax(abs_err), o.shape)
        return CheckResult(False, rel, max_abs,
                           f"{name}: element {i} off by {max_abs:.3g} (> 10*tol*max|ref| = "
                           f"{10 * tol * scale:.3g}): {o[i]!r} vs {r[i]!r}")
    return CheckResult(True, rel, max_abs)


def compare_all(outs: dict, refs: dict, tol) -> CheckResult:
    """Compare several named outputs; tol is a float or a dict name -> float."""
    worst = CheckResult(True, 0.0, 0.0)
    for name, ref in refs.items():
        t = tol.get(name) if isinstance(tol, dict) else tol
        r = compare(outs[name], ref, t, name)
        if not r.ok:
            return r
        if r.rel_l2 >= worst.rel_l2:
            worst = CheckResult(True, r.rel_l2, max(r.max_abs, worst.max_abs))
        else:
            worst.max_abs = max(worst.max_abs, r.max_abs)
    return worst
