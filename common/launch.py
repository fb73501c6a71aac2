"""Kernel launches pycuda cannot make: cooperative launches (grid.sync()) and launches with a
thread-block cluster dimension, through the CUDA driver API (ctypes on libcuda.so.1).

pycuda's Function hides its CUfunction handle, so this module loads the SAME cubin a second time
(compiled by pycuda's compiler with the flags and include path of common/build.py, cached on
disk by pycuda) with cuModuleLoadData into the current (primary) context, and launches its
kernels with cuLaunchKernelEx. Memory is shared: pointers from pycuda (DeviceCase, GPUArray)
are passed as they are, and launches go to the same legacy default stream as prepared_call, so
they order with pycuda's launches, copies and the timing events.

    from common.launch import load
    mod = load("days/day54_cooperative_groups/kernel.cu")
    fn = mod.function("softmax_v4_c16_t256_i8", "PPiiP")
    fn.allow_non_portable_cluster()              # clusters of more than 8 blocks (Hopper: 16)
    fn.launch((rows * 16,), (256,), x, y, rows, cols, 0, cluster=(16, 1, 1))
    go = fn.prepare_launch(...same arguments...); go(); go()   # marshalled once
    grid = fn.max_blocks_per_sm(256) * sms       # every block resident: a cooperative grid
    fn2.launch((grid,), (256,), ..., cooperative=True)

Signatures are pycuda's letters: P pointer, i int32, I uint32, q int64, f float32, d float64.
Importing this module needs neither a GPU nor pycuda; libcuda is loaded on first use.
"""
from __future__ import annotations

import ctypes
import functools
from pathlib import Path

from .graphs import check, declare, libcuda as graphs_libcuda, stream_handle

_VP = ctypes.c_void_p

# cuda.h (CUDA 12.x / 13.0) enumerations used here
CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2
CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED = 14


class _ClusterDim(ctypes.Structure):
    _fields_ = [("x", ctypes.c_uint), ("y", ctypes.c_uint), ("z", ctypes.c_uint)]


class CUlaunchAttributeValue(ctypes.Union):
    """A union of 64 bytes in cuda.h; only the members used here are spelled out."""
    _fields_ = [("pad", ctypes.c_char * 64), ("cooperative", ctypes.c_int),
                ("clusterDim", _ClusterDim)]


class CUlaunchAttribute(ctypes.Structure):
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4),
                ("value", CUlaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", _VP),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]


_SIGNATURES = {
    "cuModuleLoadData": [ctypes.POINTER(_VP), ctypes.c_char_p],
    "cuModuleGetFunction": [ctypes.POINTER(_VP), _VP, ctypes.c_char_p],
    "cuModuleUnload": [_VP],
    "cuFuncSetAttribute": [_VP, ctypes.c_int, ctypes.c_int],
    "cuFuncGetAttribute": [ctypes.POINTER(ctypes.c_int), ctypes.c_int, _VP],
    "cuLaunchKernelEx": [ctypes.POINTER(CUlaunchConfig), _VP, ctypes.POINTER(_VP), ctypes.POINTER(_VP)],
    "cuOccupancyMaxActiveBlocksPerMultiprocessor": [ctypes.POINTER(ctypes.c_int), _VP, ctypes.c_int,
                                                    ctypes.c_size_t],
    "cuOccupancyMaxActiveClusters": [ctypes.POINTER(ctypes.c_int), _VP, ctypes.POINTER(CUlaunchConfig)],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
}

_CTYPES = {"P": _VP, "i": ctypes.c_int, "I": ctypes.c_uint, "q": ctypes.c_longlong,
           "Q": ctypes.c_ulonglong, "f": ctypes.c_float, "d": ctypes.c_double}


@functools.lru_cache(maxsize=None)
def libcuda():
    """common/graphs.py's driver library with this module's calls declared too."""
    return declare(graphs_libcuda(), _SIGNATURES)


def _dim3(d) -> tuple[int, int, int]:
    d = tuple(int(v) for v in (d if isinstance(d, (tuple, list)) else (d,)))
    if not 1 <= len(d) <= 3 or any(v < 1 for v in d):
        raise ValueError(f"a launch dimension must be 1-3 positive integers, got {d}")
    return d + (1,) * (3 - len(d))


def pack_args(signature: str, args) -> list:
    """The ctypes values of `args` by pycuda's letters (pointers: anything int() takes, such as
    a DeviceAllocation or a GPUArray's gpudata; None is a null pointer)."""
    if len(signature) != len(args):
        raise TypeError(f"signature {signature!r} takes {len(signature)} arguments, got {len(args)}")
    out = []
    for letter, a in zip(signature, args):
        if letter not in _CTYPES:
            raise ValueError(f"unknown signature letter {letter!r} (use {''.join(_CTYPES)})")
        if letter == "P":
            out.append(_VP(0 if a is None else int(a)))
        else:
            out.append(_CTYPES[letter](a))
    return out


def launch_config(grid, block, shared: int = 0, stream=None, cluster=None,
                  cooperative: bool = False):
    """A CUlaunchConfig and the attribute array it points to (keep both alive)."""
    g, b = _dim3(grid), _dim3(block)
    attrs = []
    if cluster is not None:
        c = _dim3(cluster)
        if any(gi % ci for gi, ci in zip(g, c)):
            raise ValueError(f"the grid {g} must be a multiple of the cluster {c} in every dimension")
        a = CUlaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION)
        a.value.clusterDim = _ClusterDim(*c)
        attrs.append(a)
    if cooperative:
        a = CUlaunchAttribute(id=CU_LAUNCH_ATTRIBUTE_COOPERATIVE)
        a.value.cooperative = 1
        attrs.append(a)
    arr = (CUlaunchAttribute * max(len(attrs), 1))(*attrs)
    cfg = CUlaunchConfig(g[0], g[1], g[2], b[0], b[1], b[2], int(shared),
                         _VP(stream_handle(stream)), arr, len(attrs))
    return cfg, arr


class Function:
    """One kernel of a Module: launch it with cluster / cooperative attributes, ask the
    occupancy calculator about it, set its attributes."""

    def __init__(self, module: "Module", name: str, handle: _VP, signature: str | None):
        self.module, self.name, self.handle, self.signature = module, name, handle, signature
        self._non_portable = False
        self._smem_optin = 0

    def attribute(self, attr: int) -> int:
        v = ctypes.c_int(0)
        lib = libcuda()
        check(lib.cuFuncGetAttribute(ctypes.byref(v), attr, self.handle), f"cuFuncGetAttribute({self.name})", lib)
        return v.value

    def set_attribute(self, attr: int, value: int):
        lib = libcuda()
        check(lib.cuFuncSetAttribute(self.handle, attr, int(value)), f"cuFuncSetAttribute({self.name})", lib)

    @property
    def num_regs(self) -> int:
        return self.attribute(CU_FUNC_ATTRIBUTE_NUM_REGS)

    def allow_non_portable_cluster(self):
        """Clusters of more than 8 blocks (the portable limit) need this opt-in (Hopper: 16)."""
        if not self._non_portable:
            self.set_attribute(CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED, 1)
            self._non_portable = True

    def opt_in_smem(self, dynamic: int):
        """Let the kernel launch with `dynamic` bytes of dynamic shared memory. Above 48 KB in
        all a kernel must ask first (up to 227 KB a block on Hopper); the occupancy calls with
        that much dynamic memory need the opt-in too. Raised only, never lowered."""
        dynamic = int(dynamic)
        if dynamic > self._smem_optin:
            self.set_attribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamic)
            self._smem_optin = dynamic

    def max_blocks_per_sm(self, threads: int, dynamic_smem: int = 0) -> int:
        """Blocks of `threads` that one SM holds at once (the driver's occupancy calculator)."""
        n = ctypes.c_int(0)
        lib = libcuda()
        check(lib.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(n), self.handle, int(threads),
                                                              int(dynamic_smem)),
              f"cuOccupancyMaxActiveBlocksPerMultiprocessor({self.name})", lib)
        return n.value

    def max_active_clusters(self, grid, block, cluster, dynamic_smem: int = 0) -> int:
        """Clusters of this shape the GPU can run at once (they must fit inside one GPC each)."""
        if _dim3(cluster)[0] * _dim3(cluster)[1] * _dim3(cluster)[2] > 8:
            self.allow_non_portable_cluster()
        if dynamic_smem:
            self.opt_in_smem(dynamic_smem)
        cfg, keep = launch_config(grid, block, dynamic_smem, None, cluster)
        n = ctypes.c_int(0)
        lib = libcuda()
        check(lib.cuOccupancyMaxActiveClusters(ctypes.byref(n), self.handle, ctypes.byref(cfg)),
              f"cuOccupancyMaxActiveClusters({self.name})", lib)
        del keep
        return n.value

    def prepare_launch(self, grid, block, *args, shared: int = 0, stream=None, cluster=None,
                       cooperative: bool = False) -> "Launch":
        """A launch with everything marshalled once: calling it enqueues the kernel with one
        driver call (a few microseconds of host time, for timing loops)."""
        sig = self.signature
        if sig is None:
            raise TypeError(f"{self.name}: give the signature to Module.function(name, signature)")
        if cluster is not None and _dim3(cluster)[0] * _dim3(cluster)[1] * _dim3(cluster)[2] > 8:
            self.allow_non_portable_cluster()
        if shared:
            self.opt_in_smem(shared)  # dynamic shared memory above 48 KB needs the opt-in
        vals = pack_args(sig, args)
        what = (f"cuLaunchKernelEx({self.name}, grid {_dim3(grid)}, block {_dim3(block)}"
                + (f", cluster {_dim3(cluster)}" if cluster is not None else "")
                + (", cooperative" if cooperative else "") + ")")
        return Launch(self, vals, launch_config(grid, block, shared, stream, cluster, cooperative), what)

    def launch(self, grid, block, *args, shared: int = 0, stream=None, cluster=None,
               cooperative: bool = False):
        """Enqueue one launch (asynchronous, like prepared_call). `cluster`: the cluster
        dimension (the grid must be a multiple of it); `cooperative`: every block resident at
        once, so grid.sync() is legal (the driver refuses a grid that does not fit)."""
        self.prepare_launch(grid, block, *args, shared=shared, stream=stream, cluster=cluster,
                            cooperative=cooperative)()


class Launch:
    """One kernel launch with its arguments and configuration marshalled (see prepare_launch)."""

    def __init__(self, fn: Function, vals: list, config, what: str):
        self.fn, self._vals, self.what = fn, vals, what
        self._cfg, self._attrs = config
        self._params = (_VP * max(len(vals), 1))(*[ctypes.cast(ctypes.pointer(v), _VP) for v in vals])

    def __call__(self):
        lib = libcuda()
        check(lib.cuLaunchKernelEx(ctypes.byref(self._cfg), self.fn.handle, self._params, None),
              self.what, lib)


class Module:
    """A cubin loaded into the current context with cuModuleLoadData."""

    def __init__(self, image: bytes):
        from .gpu import context

        context()  # the primary context pycuda holds: the module lives beside pycuda's memory
        self.handle = _VP()
        self._image = image
        lib = libcuda()
        check(lib.cuModuleLoadData(ctypes.byref(self.handle), image), "cuModuleLoadData", lib)
        self._fns: dict = {}

    def function(self, name: str, signature: str | None = None) -> Function:
        key = (name, signature)
        if key not in self._fns:
            h = _VP()
            lib = libcuda()
            check(lib.cuModuleGetFunction(ctypes.byref(h), self.handle, name.encode()),
                  f"cuModuleGetFunction({name})", lib)
            self._fns[key] = Function(self, name, h, signature)
        return self._fns[key]


def cubin(path: str | Path, *, sm90a: bool = False, options: list[str] | None = None) -> bytes:
    """kernel.cu compiled to a cubin for this device, exactly as common.build.load_module
    compiles it (pycuda's compiler: same flags, same include path, same disk cache)."""
    from pycuda.compiler import compile as nvcc_compile

    from .build import BASE_FLAGS, INCLUDE_DIRS, device_arch

    path = Path(path)
    num = device_arch(sm90a).removeprefix("sm_")
    return nvcc_compile(path.read_text(), options=BASE_FLAGS + list(options or []),
                        no_extern_c=True, arch=f"compute_{num}", code=f"sm_{num}",
                        include_dirs=INCLUDE_DIRS + [str(path.parent)])


_modules: dict = {}


def load(path: str | Path, *, sm90a: bool = False, options: list[str] | None = None) -> Module:
    """The Module of kernel.cu at `path` (compiled and loaded once per process)."""
    key = (str(Path(path).resolve()), sm90a, tuple(options or ()))
    if key not in _modules:
        _modules[key] = Module(cubin(path, sm90a=sm90a, options=options))
    return _modules[key]
