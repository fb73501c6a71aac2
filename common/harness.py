"""The pieces a day's driver.py is built from, and the loop that checks and times it.

A driver declares:
    VERSIONS     {"v1": "what it changes", ...} in ladder order
    SIZES        {"small": size, "default": size, "large": size}   (size = tuple of ints)
    CHECK_SIZES  ragged and edge sizes every version must get right
    BENCH_SIZES  sizes timed by --bench (default: [SIZES["default"]])
    SIZE_HELP    how to write a size on the command line, e.g. "ROWSxCOLS"
    make_case(size, rng) -> Case          inputs, output specs, reference, bytes/flops
    launch(version, d)                     enqueue the version's kernel(s) on DeviceCase d
and optionally:
    validate_size(size)                    raise ValueError("...") for sizes it cannot take
    supports(version, size) -> str | None  why a version cannot take a size (skipped, said so)
    same_as(version, size) -> str | None   the version whose kernel this one runs at this size
                                           (shown as "= v4" in the table, not timed as a rung)
    baselines(d) -> {name: fn}             library calls on the same device memory
    extras(report, mode)                   day-specific sections (device table, transfers...);
                                           an op beside the versions (an inverse, a gradient) is
                                           checked and timed with common.runner.check_and_time
    SM90A = True                           build kernel.cu for sm_90a
    BEST = "vN"                            the version the public functions default to: the
                                           fastest correct one as measured (tests check it)
    BAR = [...]                            the day's bar, judged in progress.md (common/bars.py)
    WRONG_ON = {"v1": "why"}               versions kept to show a failure (never the best)

Public numpy-in/numpy-out functions check their arguments with common.args first.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from .check import CheckResult, compare_all, tolerance_for

ROOT = Path(__file__).resolve().parent.parent


class SizeError(ValueError):
    """A size the day cannot take (the message is shown to the user as is)."""


@dataclass
class Case:
    """One problem instance: host inputs, what to allocate for outputs, how to get the answer."""

    size: tuple
    inputs: dict[str, np.ndarray]
    outputs: dict[str, tuple[tuple, object]]          # name -> (shape, dtype)
    reference: Callable[[], dict] | None = None       # -> name -> float64/int array
    bytes: int = 0                                    # bytes the op must move (read once + write once)
    read_bytes: int | None = None                     # of those, bytes read (None: half, as a copy);
                                                      # the memory ceiling moves the same mix
    flops: int = 0                                    # FLOPs the op must do
    unit: str = "fp32"                                # compute unit for the FLOP ceiling
    tol: float | dict | None = None                   # rel-L2 tolerance (default: by output dtype)
    params: dict = field(default_factory=dict)        # scalars the launch needs
    decode: dict = field(default_factory=dict)        # output name -> fn(raw host array) -> floats
                                                      # (bf16 bits, fp8 codes) before the check
    seed: int | None = None
    _expected: dict | None = field(default=None, repr=False)

    def expected(self) -> dict:
        if self._expected is None:
            if self.reference is None:
                raise ValueError("this case has no reference")
            self._expected = self.reference()
        return self._expected

    def tolerance(self):
        if self.tol is not None:
            return self.tol
        return {k: tolerance_for(np.dtype(dt)) for k, (_, dt) in self.outputs.items()
                if not np.issubdtype(np.dtype(dt), np.integer)}


class DeviceCase:
    """A Case's arrays on the GPU. `d.x` is input/output x's device pointer, `d.array("x")` the
    GPUArray, `d.size` the size, `d.params` the scalars."""

    def __init__(self, case: Case):
        from pycuda import gpuarray

        from .gpu import context

        context()
        self.case = case
        self.size = case.size
        self.params = case.params
        self.arrays = {k: gpuarray.to_gpu(np.ascontiguousarray(v)) for k, v in case.inputs.items()}
        for k, (shape, dt) in case.outputs.items():
            self.arrays[k] = gpuarray.empty(tuple(shape), np.dtype(dt))

    def __getattr__(self, name):
        arrays = self.__dict__.get("arrays", {})
        if name in arrays:
            return arrays[name].gpudata
        raise AttributeError(name)

    def array(self, name):
        return self.arrays[name]

    def scratch(self, name: str, shape, dtype=np.float32, zero: bool = False):
        """A work buffer that lives as long as this DeviceCase (partials, flags, temporaries):
        allocated on first use and grown if a later call asks for more; never poisoned or
        checked. `zero=True` clears it when it is (re)allocated. Returns the device pointer."""
        from pycuda import gpuarray

        bufs = self.__dict__.setdefault("_scratch", {})
        want = int(np.prod(shape)) * np.dtype(dtype).itemsize
        if name not in bufs or bufs[name].nbytes < want:
            a = gpuarray.empty(shape, np.dtype(dtype))
            if zero and a.nbytes:
                from .gpu import driver

                driver().memset_d8(a.gpudata, 0, a.nbytes)
            bufs[name] = a
        return bufs[name].gpudata

    def poison_outputs(self):
        """Fill every output with 0xFF bytes: NaN for floats, -1 for ints. Unwritten = fails."""
        from .gpu import driver

        cuda = driver()
        for k in self.case.outputs:
            a = self.arrays[k]
            if a.nbytes:
                cuda.memset_d8(a.gpudata, 0xFF, a.nbytes)

    def outputs(self) -> dict:
        """The outputs on the host, decoded where the case says how (bf16 bits -> float32)."""
        dec = self.case.decode
        return {k: dec[k](self.arrays[k].get()) if k in dec else self.arrays[k].get()
                for k in self.case.outputs}


class Kernels:
    """A day's kernel.cu, compiled on first use; `K("name", "PPi")` is a prepared function."""

    def __init__(self, driver_file: str, sm90a: bool = False, options: list[str] | None = None):
        self.path = Path(driver_file).resolve().parent / "kernel.cu"
        self.sm90a = sm90a
        self.options = options
        self._fns: dict = {}

    @property
    def module(self):
        from .build import load_module

        return load_module(self.path, sm90a=self.sm90a, options=self.options)

    def __call__(self, name: str, signature: str | None = None, dynamic_smem: int = 0):
        """The kernel `name`, prepared with `signature`. A kernel whose static and dynamic shared
        memory pass 48 KB must opt in first: pass the dynamic bytes as `dynamic_smem`."""
        key = (name, signature)
        if key not in self._fns:
            fn = self.module.get_function(name)
            if signature is not None:
                fn.prepare(signature)
            self._fns[key] = fn
        fn = self._fns[key]
        if dynamic_smem:
            from .gpu import opt_in_smem

            opt_in_smem(fn, dynamic_smem)
        return fn


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def run(launch, version: str, case: Case) -> dict:
    """Numpy in, numpy out: upload the case, launch `version`, return the outputs on the host."""
    from .gpu import driver

    d = DeviceCase(case)
    d.poison_outputs()
    launch(version, d)
    driver().Context.synchronize()
    return d.outputs()


def check(launch, version: str, case: Case, d: DeviceCase | None = None) -> CheckResult:
    """Poison, launch, compare with the reference."""
    from .gpu import driver

    d = d or DeviceCase(case)
    d.poison_outputs()
    launch(version, d)
    driver().Context.synchronize()
    return compare_all(d.outputs(), case.expected(), case.tolerance())


# --- loading days ---------------------------------------------------------------------------

def day_folders() -> dict[int, Path]:
    out = {}
    for p in sorted((ROOT / "days").glob("day[0-9][0-9]*_*")):
        if p.is_dir() and (p / "driver.py").exists():
            out[int(p.name[3:].split("_")[0])] = p
    return out


def load_driver(number: int):
    folders = day_folders()
    if number not in folders:
        raise KeyError(number)
    return importlib.import_module(f"days.{folders[number].name}.driver")


def versions_of(drv) -> list[str]:
    return list(drv.VERSIONS)


def bench_sizes(drv) -> list[tuple]:
    return list(getattr(drv, "BENCH_SIZES", [drv.SIZES["default"]]))


def parse_size(drv, text: str) -> tuple:
    """'small' / 'default' / 'large' / '8192x8192' / '2^28' -> a size tuple, or SizeError."""
    text = text.strip()
    if text in drv.SIZES:
        size = tuple(drv.SIZES[text])
    else:
        parts = text.lower().replace("*", "x").split("x")
        dims = []
        for p in parts:
            try:
                v = _dimension(p)
            except ValueError:
                raise SizeError(f"cannot read size {text!r}: expected one of "
                                f"{', '.join(drv.SIZES)} or {drv.SIZE_HELP}") from None
            dims.append(v)
        size = tuple(dims)
    want = len(next(iter(drv.SIZES.values())))
    if len(size) != want:
        raise SizeError(f"size {text!r} has {len(size)} dimension(s); this day takes {want}: "
                        f"{drv.SIZE_HELP}")
    if any(v <= 0 for v in size):
        raise SizeError(f"size {text!r}: every dimension must be a positive integer ({drv.SIZE_HELP})")
    if hasattr(drv, "validate_size"):
        try:
            drv.validate_size(size)
        except ValueError as e:
            raise SizeError(f"size {text!r}: {e}") from None
    return size


def _dimension(text: str) -> int:
    """'8192', '2^28', '2^28+3', '2^20-1' -> int (no other arithmetic)."""
    import re

    text = text.strip()
    if not re.fullmatch(r"\d+(\^\d+)?([+-]\d+(\^\d+)?)*", text):
        raise ValueError(text)
    total = 0
    for sign, term in re.findall(r"([+-]?)(\d+(?:\^\d+)?)", text):
        b, _, e = term.partition("^")
        v = int(b) ** int(e) if e else int(b)
        total += -v if sign == "-" else v
    return total


def size_str(size) -> str:
    return "x".join(str(s) for s in size)
