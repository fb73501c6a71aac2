"""Building kernel.cu files.

- `load_module(path)`: compile with pycuda's SourceModule for the device's own arch
  (sm_90 on Hopper, sm_90a when the day asks for it), cached by pycuda on source + flags.
- `ptxas_report(path)`: compile with nvcc -cubin -Xptxas -v (no GPU needed) and parse the
  registers / shared memory / stack / spills of every kernel. CI uses it to check that every
  kernel compiles without spills; run_day.py --regs prints it.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# device helpers taught by earlier days (CONVENTIONS.md): kernel.cu files from day 21 on
# write `#include "warp.cuh"`; alone: nvcc -I common/cuda ...
INCLUDE_DIRS = [str(ROOT / "common" / "cuda")]
BASE_FLAGS = ["-O3", "-std=c++17", "-lineinfo"]


def nvcc_path() -> str | None:
    for cand in (os.environ.get("CUDA_ROOT"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if cand and Path(cand, "bin", "nvcc").exists():
            return str(Path(cand, "bin", "nvcc"))
    return shutil.which("nvcc")


@functools.lru_cache(maxsize=None)
def nvcc_version() -> str:
    nvcc = nvcc_path()
    if not nvcc:
        return ""
    out = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+)", out)
    return m.group(1) if m else ""


def arch_flags(arch: str) -> list[str]:
    """nvcc flags for 'sm_90' or 'sm_90a' (the 'a' target needs the -gencode form)."""
    num = arch.removeprefix("sm_")
    return [f"-gencode=arch=compute_{num},code=sm_{num}"]


def host_library(source: str | Path, arch: str, tag: str = ""):
    """A .cu file with host functions (a library baseline such as CUB called from C++) built by
    nvcc into a shared library and loaded with ctypes. Built once: the file is cached in the temp
    dir under a name made of the source, the nvcc version and the arch. Call it after the primary
    context exists, so the CUDA runtime inside the library uses that context too."""
    import ctypes
    import hashlib
    import tempfile

    source = Path(source)
    nvcc = nvcc_path()
    if not nvcc:
        raise OSError(f"nvcc not found: {source.name} is built with nvcc")
    src = source.read_text()
    key = hashlib.sha1(f"{src}|{nvcc_version()}|{arch}".encode()).hexdigest()[:16]
    stem = tag or source.stem
    lib = Path(tempfile.gettempdir()) / f"{stem}_{key}" / f"lib{stem}.so"
    if not lib.exists():
        lib.parent.mkdir(parents=True, exist_ok=True)
        tmp = lib.with_suffix(".so.partial")
        r = subprocess.run([nvcc, *arch_flags(arch), "-O3", "-std=c++17", "-shared",
                            "-Xcompiler", "-fPIC", str(source), "-o", str(tmp)],
                           capture_output=True, text=True)
        if r.returncode:
            raise OSError(f"building {source.name} failed: {r.stderr.strip()[-400:]}")
        tmp.replace(lib)
    return ctypes.CDLL(str(lib))


def device_arch(needs_arch_specific: bool = False) -> str:
    from .gpu import device_info

    arch = device_info()["arch"]
    if needs_arch_specific:
        if arch != "sm_90":
            from .gpu import NoGPU

            raise NoGPU(f"this day needs a Hopper GPU (sm_90a); this one is {arch}")
        arch += "a"
    return arch


_modules: dict = {}


def load_module(path: str | Path, *, sm90a: bool = False, options: list[str] | None = None):
    """SourceModule for kernel.cu at `path`, on the primary context, built for this device."""
    from .gpu import context

    context()
    from pycuda.compiler import SourceModule

    path = Path(path)
    arch = device_arch(sm90a)
    key = (str(path), arch, tuple(options or ()))
    if key not in _modules:
        src = path.read_text()
        num = arch.removeprefix("sm_")
        flags = BASE_FLAGS + list(options or [])
        _modules[key] = SourceModule(
            src,
            no_extern_c=True,
            arch=f"compute_{num}",
            code=f"sm_{num}",
            options=flags,
            include_dirs=INCLUDE_DIRS + [str(path.parent)],
        )
    return _modules[key]


@dataclass
class KernelResources:
    name: str
    registers: int
    smem_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int
    cmem_bytes: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


_FUNC = re.compile(r"Compiling entry function '(\S+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def demangle(name: str) -> str:
    cxxfilt = shutil.which("cu++filt") or shutil.which("c++filt")
    if cxxfilt and name.startswith("_Z"):
        r = subprocess.run([cxxfilt, name], capture_output=True, text=True)
        if r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    return name


def parse_ptxas(text: str) -> list[KernelResources]:
    """Parse nvcc -Xptxas -v output into one record per entry function."""
    out: list[KernelResources] = []
    cur: dict | None = None
    for line in text.splitlines():
        m = _FUNC.search(line)
        if m:
            if cur:
                out.append(KernelResources(**cur))
            cur = dict(name=demangle(m.group(1)), registers=0, smem_bytes=0, stack_bytes=0,
                       spill_stores=0, spill_loads=0)
            continue
        if cur is None:
            continue
        m = _FRAME.search(line)
        if m:
            cur["stack_bytes"], cur["spill_stores"], cur["spill_loads"] = map(int, m.groups())
        m = _USED.search(line)
        if m:
            cur["registers"] = int(m.group(1))
            s = _SMEM.search(line)
            if s:
                cur["smem_bytes"] = int(s.group(1))
    if cur:
        out.append(KernelResources(**cur))
    return out


class BuildError(RuntimeError):
    pass


def ptxas_report(path: str | Path, arch: str = "sm_90") -> list[KernelResources]:
    """Compile `path` to a cubin with nvcc and return the resources of every kernel."""
    nvcc = nvcc_path()
    if not nvcc:
        raise BuildError("nvcc not found (set CUDA_ROOT or put nvcc on PATH)")
    path = Path(path)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [nvcc, "-cubin", *BASE_FLAGS, *arch_flags(arch), "-Xptxas", "-v",
               *[f"-I{d}" for d in INCLUDE_DIRS + [str(path.parent)]],
               str(path), "-o", str(Path(tmp) / "k.cubin")]
        r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise BuildError(f"nvcc failed on {path}:\n{r.stderr[-4000:]}")
    return parse_ptxas(r.stderr + r.stdout)
