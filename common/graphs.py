"""CUDA graphs for pycuda, through the driver API (ctypes on libcuda.so.1).

pycuda wraps no stream capture, so this module calls the driver directly on pycuda's own
stream handles. A graph records many launches once; replaying it costs one host call for
all of them, and the GPU runs the nodes back to back.

    from common.graphs import CudaGraph
    stream = cuda.Stream()
    with CudaGraph(stream, lambda: [fn.prepared_async_call(grid, block, stream, *args)
                                    for _ in range(100)]) as g:
        print(g.nodes)          # 100 kernel nodes
        g.replay(10)            # 1000 kernels, 10 host calls
        stream.synchronize()

Rules of capture (the driver enforces them; a broken rule raises CudaDriverError):
- everything enqueued must go to the capturing stream (prepared_async_call(..., stream, ...));
  a launch on the legacy default stream (prepared_call, a plain call without stream=) or a
  synchronous copy while capturing invalidates the capture;
- no allocations or synchronisation inside the captured callable (global capture mode);
- the launch arguments are frozen at capture: a replay reads and writes the same pointers
  with the same scalars, so change the contents of buffers, not the buffers.

Timing and updates (day 52): `g.capture_ms` / `g.instantiate_ms` are the host cost of building
the graph; `g.upload()` moves it to the device ahead of the first replay; `g.update(enqueue)`
captures again (new pointers or scalars, same shape of graph) and patches the executable graph
in place with cuGraphExecUpdate, which is much cheaper than instantiating a new one; it
re-instantiates (and returns False) when the driver says the topology changed.

Importing this module needs neither a GPU nor pycuda; libcuda is loaded on first use.
"""
from __future__ import annotations

import ctypes
import functools
import time

CAPTURE_MODE_GLOBAL = 0        # CU_STREAM_CAPTURE_MODE_GLOBAL (the default of the runtime too)
CAPTURE_MODE_THREAD_LOCAL = 1  # CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
CAPTURE_MODE_RELAXED = 2       # CU_STREAM_CAPTURE_MODE_RELAXED


class CudaDriverError(RuntimeError):
    """A driver call returned an error; the message names the call and the CUresult."""

    def __init__(self, call: str, code: int, name: str = "", text: str = ""):
        self.call, self.code, self.name, self.text = call, code, name, text
        detail = f"{name} ({code})" if name else f"CUresult {code}"
        super().__init__(f"{call} failed: {detail}" + (f": {text}" if text else ""))


_VP = ctypes.c_void_p
CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910


class _UpdateResultInfo(ctypes.Structure):
    """CUgraphExecUpdateResultInfo (cuda.h): the reason an in-place update was refused."""
    _fields_ = [("result", ctypes.c_int), ("errorNode", _VP), ("errorFromNode", _VP)]


_SIGNATURES = {
    # name: argtypes (every driver call returns CUresult, an int)
    "cuStreamBeginCapture_v2": [_VP, ctypes.c_int],
    "cuStreamEndCapture": [_VP, ctypes.POINTER(_VP)],
    "cuStreamIsCapturing": [_VP, ctypes.POINTER(ctypes.c_int)],
    "cuGraphGetNodes": [_VP, _VP, ctypes.POINTER(ctypes.c_size_t)],
    "cuGraphInstantiateWithFlags": [ctypes.POINTER(_VP), _VP, ctypes.c_ulonglong],
    "cuGraphLaunch": [_VP, _VP],
    "cuGraphUpload": [_VP, _VP],
    "cuGraphExecUpdate_v2": [_VP, _VP, ctypes.POINTER(_UpdateResultInfo)],
    "cuGraphExecDestroy": [_VP],
    "cuGraphDestroy": [_VP],
    "cuGetErrorName": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
    "cuGetErrorString": [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)],
}


def declare(lib, signatures: dict):
    """Declare driver functions' argument types on lib (every driver call returns a CUresult);
    common/launch.py and common/mempool.py add theirs to the same library object this way."""
    for name, argtypes in signatures.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
    return lib


@functools.lru_cache(maxsize=None)
def libcuda():
    """The CUDA driver library with the signatures this module uses declared."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError as e:
        raise OSError(f"the CUDA driver library libcuda.so.1 does not load: {e}") from None
    return declare(lib, _SIGNATURES)


def check(code: int, call: str, lib=None):
    """Raise CudaDriverError if a driver call returned anything but CUDA_SUCCESS (0)."""
    if code == 0:
        return
    lib = lib or libcuda()
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    try:
        lib.cuGetErrorName(code, ctypes.byref(name))
        lib.cuGetErrorString(code, ctypes.byref(text))
    except Exception:  # the message must not hide the error
        pass
    raise CudaDriverError(call, code, (name.value or b"").decode(), (text.value or b"").decode())


def stream_handle(stream) -> int:
    """The CUstream of a pycuda Stream (or an int handle); None is the legacy default stream, 0."""
    if stream is None:
        return 0
    if isinstance(stream, int):
        return stream
    return int(stream.handle)


class CudaGraph:
    """A graph captured from what `enqueue()` launches on `stream`, ready to replay.

    `enqueue` is called once, while the stream is in capture mode: nothing runs then. The
    captured graph is instantiated (checked and uploaded) once; `launch()` replays it.
    """

    def __init__(self, stream, enqueue, mode: int = CAPTURE_MODE_GLOBAL, lib=None):
        self._lib = lib or libcuda()
        self._graph = _VP()
        self._exec = _VP()
        self.stream = stream
        self.mode = mode
        self.update_ms = None
        t0 = time.perf_counter()
        self._graph = _capture(self._lib, stream, enqueue, mode)
        t1 = time.perf_counter()
        self.nodes = _count_nodes(self._lib, self._graph)
        check(self._lib.cuGraphInstantiateWithFlags(ctypes.byref(self._exec), self._graph, 0),
              "cuGraphInstantiateWithFlags", self._lib)
        self.capture_ms = (t1 - t0) * 1e3            # host time of the capture (enqueue + end)
        self.instantiate_ms = (time.perf_counter() - t1) * 1e3  # host time to instantiate

    def upload(self, stream=None):
        """Copy the executable graph to the device now (cuGraphUpload), so the first replay does
        not pay for it. Optional: a launch uploads it when needed."""
        self._live()
        s = self.stream if stream is None else stream
        check(self._lib.cuGraphUpload(self._exec, _VP(stream_handle(s))), "cuGraphUpload",
              self._lib)

    def update(self, enqueue) -> bool:
        """Capture `enqueue` again on the same stream and make it what launch() replays.

        When the new graph has the same topology (same number and kind of nodes in the same
        order: typically the same launches with other pointers or scalars), the executable graph
        is patched in place (cuGraphExecUpdate) and True is returned. Otherwise it is
        re-instantiated and False is returned. `update_ms` is the host time of the patch (or of
        the new instantiation), `capture_ms` that of the new capture."""
        self._live()
        t0 = time.perf_counter()
        graph = _capture(self._lib, self.stream, enqueue, self.mode)
        t1 = time.perf_counter()
        info = _UpdateResultInfo()
        code = self._lib.cuGraphExecUpdate_v2(self._exec, graph, ctypes.byref(info))
        patched = code == 0
        if not patched:
            if code != CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE:
                self._lib.cuGraphDestroy(graph)
                check(code, "cuGraphExecUpdate", self._lib)
            fresh = _VP()
            try:
                check(self._lib.cuGraphInstantiateWithFlags(ctypes.byref(fresh), graph, 0),
                      "cuGraphInstantiateWithFlags", self._lib)
            except BaseException:
                self._lib.cuGraphDestroy(graph)
                raise
            check(self._lib.cuGraphExecDestroy(self._exec), "cuGraphExecDestroy", self._lib)
            self._exec = fresh
        check(self._lib.cuGraphDestroy(self._graph), "cuGraphDestroy", self._lib)
        self._graph = graph
        self.nodes = _count_nodes(self._lib, graph)
        self.capture_ms = (t1 - t0) * 1e3
        self.update_ms = (time.perf_counter() - t1) * 1e3
        return patched

    def _live(self):
        if not self._exec.value:
            raise RuntimeError("this graph was closed")

    def launch(self, stream=None):
        """Enqueue one replay of the whole graph (on the capture stream unless told; the int 0
        is the legacy default stream)."""
        self._live()
        s = self.stream if stream is None else stream
        check(self._lib.cuGraphLaunch(self._exec, _VP(stream_handle(s))), "cuGraphLaunch", self._lib)

    def replay(self, times: int = 1, stream=None):
        for _ in range(times):
            self.launch(stream)

    def close(self):
        """Free the executable graph and the graph (idempotent)."""
        if self._exec.value:
            check(self._lib.cuGraphExecDestroy(self._exec), "cuGraphExecDestroy", self._lib)
            self._exec = _VP()
        if self._graph.value:
            check(self._lib.cuGraphDestroy(self._graph), "cuGraphDestroy", self._lib)
            self._graph = _VP()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _capture(lib, stream, enqueue, mode) -> _VP:
    """Run enqueue() with `stream` in capture mode; return the captured CUgraph."""
    h = stream_handle(stream)
    if h == 0:
        raise ValueError("capture needs a created stream (pycuda.driver.Stream()), "
                         "not the legacy default stream")
    check(lib.cuStreamBeginCapture_v2(_VP(h), mode), "cuStreamBeginCapture_v2", lib)
    try:
        enqueue()
    except BaseException:
        # end the capture so the stream is usable again, drop the partial graph, re-raise
        g = _VP()
        lib.cuStreamEndCapture(_VP(h), ctypes.byref(g))
        if g.value:
            lib.cuGraphDestroy(g)
        raise
    graph = _VP()
    check(lib.cuStreamEndCapture(_VP(h), ctypes.byref(graph)),
          "cuStreamEndCapture (was something enqueued outside the capturing stream?)", lib)
    return graph


def _count_nodes(lib, graph) -> int:
    n = ctypes.c_size_t(0)
    check(lib.cuGraphGetNodes(graph, None, ctypes.byref(n)), "cuGraphGetNodes", lib)
    return int(n.value)


def is_capturing(stream) -> bool:
    """Whether `stream` is in capture mode now (CU_STREAM_CAPTURE_STATUS_ACTIVE)."""
    lib = libcuda()
    status = ctypes.c_int(0)
    check(lib.cuStreamIsCapturing(_VP(stream_handle(stream)), ctypes.byref(status)),
          "cuStreamIsCapturing", lib)
    return status.value == 1
