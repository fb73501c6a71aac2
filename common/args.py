"""Checking the arguments of the days' public numpy-in/numpy-out functions.

Every public function of a driver checks what it is given through these helpers before anything
reaches pycuda or a kernel, so bad input gets ONE clear sentence (TypeError for the wrong kind
of thing, ValueError for the wrong value or shape) instead of an error from inside pycuda, a
wrong answer, or a kernel reading past the end of a buffer:

    from common import args as A

    def layer_norm(x, weight, bias, eps=1e-5, version=BEST):
        version = A.version(version, VERSIONS)
        x = A.floats(x, "x", ndim=2, what="[rows, C]")
        w = A.floats(weight, "weight", shape=(x.shape[1],))
        b = A.floats(bias, "bias", shape=(x.shape[1],))
        eps = A.real(eps, "eps", low=0, low_open=True)
        if x.size == 0:                      # empty in, empty out: nothing is launched
            return np.empty_like(x), ...

Conversions are the ones a numpy user expects (float64 and integer arrays become float32,
lists become arrays); anything that would silently change the meaning is refused: complex
numbers, booleans, strings and objects, fractional labels, labels out of range, ragged lists.
"""
from __future__ import annotations

import numbers

import numpy as np

_DIMS = {0: "a scalar", 1: "1-D", 2: "2-D", 3: "3-D", 4: "4-D", 5: "5-D"}


def _dims(n: int) -> str:
    return _DIMS.get(n, f"{n}-D")


def version(v, versions) -> str:
    """The version name if the day has it; else ValueError listing the versions."""
    names = list(versions)
    if not isinstance(v, str):
        raise TypeError(f"version must be a name such as {names[-1]!r}, got {type(v).__name__} {v!r}")
    if v not in names:
        raise ValueError(f"unknown version {v!r}: this function has {', '.join(names)}")
    return v


def _as_array(x, name: str) -> np.ndarray:
    if x is None:
        raise TypeError(f"{name} is None; pass an array")
    if isinstance(x, (str, bytes)):
        raise TypeError(f"{name} must be an array of numbers, got a string")
    try:
        a = np.asarray(x)
    except ValueError:  # numpy >= 1.24 refuses ragged nested lists
        raise ValueError(f"{name} is a ragged nested list; its rows must all have one length") from None
    if a.dtype == object:
        raise TypeError(f"{name} must be an array of numbers, got objects (a ragged list, or None "
                        "inside it?)")
    return a


def _check_shape(a: np.ndarray, name: str, ndim, shape, what: str | None):
    if ndim is not None:
        allowed = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if a.ndim not in allowed:
            want = " or ".join(_dims(n) for n in allowed)
            raise ValueError(f"{name} must be {want}{' ' + what if what else ''}, got shape {a.shape}")
    if shape is not None:
        if a.ndim != len(shape) or any(w is not None and w != g for w, g in zip(shape, a.shape)):
            want = "(" + ", ".join("any" if w is None else str(w) for w in shape) + \
                   ("," if len(shape) == 1 else "") + ")"
            raise ValueError(f"{name} must have shape {want}{' ' + what if what else ''}, got {a.shape}")


def floats(x, name: str, *, ndim=None, shape=None, what: str | None = None,
           dtype=np.float32) -> np.ndarray:
    """A C-contiguous float32 (or `dtype`) copy/view of `x`.

    ndim: an int or a tuple of allowed ndims; shape: a tuple where None matches any length;
    what: how the shape reads in words, e.g. "[rows, cols]" (used in the message).
    Integers and other float widths convert; complex, bool, strings and objects are refused.
    """
    a = _as_array(x, name)
    kind = a.dtype.kind
    if kind == "c":
        raise TypeError(f"{name} must be real, got complex ({a.dtype}); pass {name}.real if that is meant")
    if kind == "b":
        raise TypeError(f"{name} must hold numbers, got booleans; convert with {name}.astype(np.float32)")
    if kind not in "fiu":
        raise TypeError(f"{name} must be an array of numbers, got dtype {a.dtype}")
    _check_shape(a, name, ndim, shape, what)
    return np.ascontiguousarray(a, dtype=dtype)


def integers(x, name: str, *, low: int | None = None, high: int | None = None, ndim=None,
             shape=None, what: str | None = None, dtype=np.int32) -> np.ndarray:
    """A C-contiguous int32 (or `dtype`) array of `x`, every value in [low, high).

    Float input is accepted only where every value is a whole number (labels stored as 3.0);
    2.5 is refused rather than cut to 2. Values are checked before the cast, so a label too
    large for int32 is reported, not wrapped.
    """
    a = _as_array(x, name)
    kind = a.dtype.kind
    if kind == "b":
        raise TypeError(f"{name} must hold integers, got booleans")
    if kind == "c" or kind not in "fiu":
        raise TypeError(f"{name} must hold integers, got dtype {a.dtype}")
    _check_shape(a, name, ndim, shape, what)
    if kind == "f" and a.size:
        bad = ~np.isfinite(a) | (a != np.floor(a))
        if bad.any():
            i = np.unravel_index(int(np.argmax(bad)), a.shape)
            raise ValueError(f"{name} must hold whole numbers; {name}[{', '.join(map(str, i))}] = "
                             f"{a[i].item()!r}")
    if a.size:
        lo_lim = np.iinfo(dtype).min if low is None else low
        hi_lim = np.iinfo(dtype).max + 1 if high is None else high
        if high is not None and low is not None and high <= low:
            raise ValueError(f"{name} has an empty range [{low}, {high})")
        out = (a < lo_lim) | (a >= hi_lim)
        if out.any():
            i = np.unravel_index(int(np.argmax(out)), a.shape)
            v = a[i].item()
            v = int(v) if isinstance(v, float) else v
            raise ValueError(f"{name}[{', '.join(map(str, i))}] = {v} lies outside "
                             f"[{lo_lim}, {hi_lim})")
    return np.ascontiguousarray(a, dtype=dtype)


def uint8(x, name: str, *, ndim=None, shape=None, what: str | None = None) -> np.ndarray:
    """A C-contiguous uint8 array (pixels): integer input in [0, 255] only."""
    return integers(x, name, low=0, high=256, ndim=ndim, shape=shape, what=what, dtype=np.uint8)


def same_shape(**arrays) -> tuple:
    """ValueError unless every named array has one shape; returns that shape."""
    items = list(arrays.items())
    first_name, first = items[0]
    for n, a in items[1:]:
        if np.shape(a) != np.shape(first):
            raise ValueError(f"{first_name} and {n} must have one shape, got {np.shape(first)} "
                             f"and {np.shape(a)}")
    return np.shape(first)


def nt_shapes(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """(M, K, N) of C = a @ b.T for 2-D a [M, K] and b [N, K]; ValueError unless the K agree."""
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a is {a.shape[0]}x{a.shape[1]} and b is {b.shape[0]}x{b.shape[1]}: "
                         "C = a @ b.T needs the same K (columns) in both")
    return a.shape[0], a.shape[1], b.shape[0]


def count(v, name: str, *, low: int = 0, high: int | None = None) -> int:
    """An integer argument (a length, a bin count, a chunk) in [low, high]."""
    if isinstance(v, bool) or not isinstance(v, numbers.Integral):
        if isinstance(v, numbers.Real) and not isinstance(v, bool) and float(v).is_integer():
            v = int(v)
        else:
            raise TypeError(f"{name} must be an integer, got {type(v).__name__} {v!r}")
    v = int(v)
    if v < low or (high is not None and v > high):
        rng = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{name} must be {rng}, got {v}")
    return v


def real(v, name: str, *, low: float | None = None, high: float | None = None,
         low_open: bool = False) -> float:
    """A finite real scalar (eps, a scale) in [low, high] ((low, high] with low_open)."""
    if isinstance(v, bool) or not isinstance(v, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(v).__name__} {v!r}")
    v = float(v)
    if not np.isfinite(v):
        raise ValueError(f"{name} must be finite, got {v}")
    if low is not None and (v < low or (low_open and v == low)):
        raise ValueError(f"{name} must be {'>' if low_open else '>='} {low:g}, got {v:g}")
    if high is not None and v > high:
        raise ValueError(f"{name} must be <= {high:g}, got {v:g}")
    return v


def choice(v, name: str, options) -> str:
    """One of a few named options (an activation, a kind)."""
    opts = list(options)
    if v not in opts:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, opts))}, got {v!r}")
    return v


def fits_int32(name: str, n: int, what: str = "elements"):
    """ValueError if a count the kernels index with 32-bit ints would overflow."""
    if n >= 2 ** 31:
        raise ValueError(f"{name} has {n} {what}; the kernels index with 32-bit integers "
                         f"(at most {2 ** 31 - 1})")
