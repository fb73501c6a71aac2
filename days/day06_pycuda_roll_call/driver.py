"""Day 6 driver: Python and the GPU. The roll call kernel in three versions (plain call, prepared
call, vectorized), device printf from chosen threads, a pycuda kernel writing into torch's
memory (and torch reading pycuda's) without a copy, and what one launch costs from Python:
plain call vs prepared call vs a CUDA graph replay.

    from days.day06_pycuda_roll_call.driver import roll_call, launch_overhead
    ids, y = roll_call(x, alpha=2.5, version="v3")   # numpy in, numpy out
    launch_overhead()                                 # microseconds per launch, by method
"""
import statistics
import time

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, torch_or_none
from common.gpu import blocks_per_sm, device_info, driver, flush_printf

from . import reference

K = H.Kernels(__file__)
THREADS = 256
ALPHA = 2.5
SIGNATURE = "PPPfq"  # x, ids, y (pointers), alpha (float32), n (int64)

VERSIONS = {
    "v1": "plain call fn(...), one element per thread",
    "v2": "prepared call, grid-stride loop, one full wave of blocks",
    "v3": "prepared call, grid-stride, 16-byte float4/int4 stores",
}
BEST = "v3"  # fastest correct version at 2^26 (results/day06.json)
SIZE_HELP = "N elements, e.g. 2^26 (at most 2^31 - 1: ids are int32)"
SIZES = {"small": (1000,), "default": (2 ** 26,), "large": (2 ** 28,)}
# 1, 3: only the v3 tail; 5, 33, 1023: a tail of 1-3 after whole float4 groups
CHECK_SIZES = [(1,), (3,), (5,), (31,), (33,), (1000,), (1023,), (1000003,), (2 ** 22 + 5,)]
# 2^26 + 3: v3's float4 groups and a tail of 3, at full size
BENCH_SIZES = [(2 ** 20,), (2 ** 26,), (2 ** 26 + 3,)]
MAX_N = 2 ** 31 - 1
MAX_CALLED = 10_000  # printf lines per roll call: device printf's 1 MB buffer drops what overflows
FLOAT32_MAX = float(np.finfo(np.float32).max)
OVERHEAD_ROWS = {"plain call": "plain call fn(...), same arguments",
                 "prepared call": "prepared_call",
                 "graph replay": "CUDA graph replay"}


def _overhead_reported(rec):
    """The bar "launch overhead figures reported": the results hold the host time per launch of
    a plain call, a prepared call and a CUDA graph replay, and the GPU counted every launch."""
    o = (rec.get("extra") or {}).get("launch_overhead") or {}
    us = o.get("us_per_launch") or {}
    got = {}
    for label, prefix in OVERHEAD_ROWS.items():
        v = next((t for k, t in us.items() if k.startswith(prefix)), None)
        if v is None or not v > 0:
            return False, f"no {label} figure in the results"
        got[label] = v
    fig = ", ".join(f"{k} {v:.2f} us" for k, v in got.items()) + " per launch"
    if o.get("launches_counted") != o.get("launches_made"):
        return False, (f"{fig}; the GPU counted {o.get('launches_counted')} of "
                       f"{o.get('launches_made')} launches")
    return True, fig


BAR = [{"text": "launch overhead figures reported", "check": _overhead_reported}]


def validate_size(size):
    if size[0] > MAX_N:
        raise ValueError("at most 2^31 - 1 elements: the ids are int32")


def make_case(size, rng, alpha=ALPHA):
    (n,) = size
    x = rng.standard_normal(n).astype(np.float32)

    def ref():
        ids, y = reference.roll_call(x, alpha)
        return {"ids": ids, "y": y}

    return H.Case(size, inputs={"x": x},
                  outputs={"ids": ((n,), np.int32), "y": ((n,), np.float32)},
                  reference=ref, params={"alpha": alpha},
                  bytes=3 * 4 * n,     # read x, write ids and y
                  read_bytes=4 * n)    # one byte read per two written


def grid_for(version: str, n: int, wave: int) -> int:
    """Blocks of THREADS threads for a version: v1 covers n with one thread each; v2 and v3
    launch one full wave (`wave` = SMs x the blocks of this kernel that fit on one SM at
    once, 8 x 256 threads on Hopper), no larger than the work, and loop."""
    if version == "v1":
        return max(1, H.cdiv(n, THREADS))
    work = n // 4 if version == "v3" else n  # v3: whole float4 groups (threads 0-2 take the tail)
    return max(1, min(wave, H.cdiv(work, THREADS)))


def _pointer(p, name):
    """A device pointer as an int: an int, a DeviceAllocation, anything int() takes."""
    if isinstance(p, (bool, float, str, bytes)):
        raise TypeError(f"{name} must be a device pointer (an int, a DeviceAllocation or a "
                        f"tensor's data_ptr()), got {type(p).__name__}")
    try:
        v = int(p)
    except (TypeError, ValueError):
        raise TypeError(f"{name} must be a device pointer (an int, a DeviceAllocation or a "
                        f"tensor's data_ptr()), got {type(p).__name__}") from None
    if v < 0 or v >= 2 ** 64:
        raise ValueError(f"{name} = {v} is not a 64-bit address")
    return v


def launch_on_pointers(version, x, ids, y, n, alpha=ALPHA):
    """Launch `version` on raw device pointers (ints, DeviceAllocations, torch data_ptr()s) on
    the legacy default stream: torch's default stream too, so torch work before and after is
    ordered with it. x holds n float32, ids n int32, y n float32; n = 0 launches nothing.
    Refused: unknown versions, n above 2^31 - 1 (ids are int32), null pointers, and (v3)
    pointers that are not 16-byte aligned. The pointers themselves cannot be checked further:
    they must point at n elements each."""
    version = A.version(version, VERSIONS)
    x, ids, y = _pointer(x, "x"), _pointer(ids, "ids"), _pointer(y, "y")
    n = A.count(n, "n", low=0, high=MAX_N)
    alpha = A.real(alpha, "alpha", low=-FLOAT32_MAX, high=FLOAT32_MAX)
    if n == 0:
        return
    if 0 in (x, ids, y):
        raise ValueError(f"a null device pointer: x={x:#x} ids={ids:#x} y={y:#x}")
    block = (THREADS, 1, 1)
    if version == "v1":
        grid = (grid_for(version, n, 0), 1, 1)
        # A plain call: pycuda looks at each argument to pack it. Pointers must be np.uintp
        # (a bare int is refused), scalars sized numpy numbers (np.float32, np.int64).
        K("roll_call_v1")(np.uintp(x), np.uintp(ids), np.uintp(y), np.float32(alpha),
                          np.int64(n), block=block, grid=grid)
        return
    if version == "v3" and (x | ids | y) % 16:
        raise ValueError("v3 needs 16-byte aligned pointers (float4 / int4 accesses); "
                         f"got x={x:#x} ids={ids:#x} y={y:#x}")
    # A prepared call: the argument types were given once ("PPPfq"), so the call only packs.
    fn = K(f"roll_call_{version}", SIGNATURE)
    grid = (grid_for(version, n, device_info()["sms"] * blocks_per_sm(fn, THREADS)), 1, 1)
    fn.prepared_call(grid, block, x, ids, y, alpha, n)


def launch(version, d):
    A.version(version, VERSIONS)
    (n,) = d.size
    launch_on_pointers(version, d.x, d.ids, d.y, n, d.params["alpha"])


def baselines(d):
    """What a user would write instead: pycuda's ElementwiseKernel, and two torch ops."""
    (n,) = d.size
    alpha = np.float32(d.params["alpha"])
    x, ids, y = d.array("x"), d.array("ids"), d.array("y")
    ek = _elementwise_kernel()

    def elementwise():
        ek(x, ids, y, alpha)
        return ids  # checked exactly against the reference's ids

    out = {"pycuda ElementwiseKernel": elementwise}
    torch = torch_or_none()
    if torch is not None:
        xt, it, yt = as_torch(x), as_torch(ids), as_torch(y)

        def torch_roll_call():
            torch.arange(n, out=it)
            torch.mul(xt, float(alpha), out=yt)
            return yt

        torch_roll_call.output = "y"  # the runner checks this output against the reference
        out["torch.arange + torch.mul"] = torch_roll_call
    return out


_ek = None


def _elementwise_kernel():
    global _ek
    if _ek is None:
        from pycuda.elementwise import ElementwiseKernel

        _ek = ElementwiseKernel("float *x, int *ids, float *y, float alpha",
                                "ids[i] = (int)i; y[i] = alpha * x[i]", "roll_call_elementwise")
    return _ek


def roll_call(x, alpha=ALPHA, version=BEST):
    """ids, y = roll_call(x): ids[i] = i (int32), y = alpha * x (float32), on the GPU.

    x: real numbers of any shape, taken flat as reference.roll_call does (at most 2^31 - 1 of
    them: ids are int32); alpha: a real number within float32's range. An empty x gives two
    empty arrays without a launch."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x").ravel()
    alpha = A.real(alpha, "alpha", low=-FLOAT32_MAX, high=FLOAT32_MAX)
    validate_size(x.shape)
    if x.size == 0:
        return np.zeros(0, np.int32), np.zeros(0, np.float32)
    case = H.Case(x.shape, inputs={"x": x},
                  outputs={"ids": (x.shape, np.int32), "y": (x.shape, np.float32)},
                  params={"alpha": alpha})
    out = H.run(launch, version, case)
    return out["ids"], out["y"]


# --- device printf ---------------------------------------------------------------------------

def printf_roll_call(called, blocks: int = 2, threads: int = THREADS) -> np.ndarray:
    """The threads whose global numbers are in `called` print "thread N reporting". Returns how
    many threads answered each number (1, or 0 for a number no thread has).

    called: whole numbers (int32), a scalar or a 1-D list of at most 10,000 (one printf line
    each at most); blocks x threads threads run, at most 1024 a block and fewer than 2^31 in
    all (a thread's number is an int). Nothing called, or no threads, answers nothing without a
    launch."""
    called = A.integers(called, "called", ndim=(0, 1)).ravel()
    blocks = A.count(blocks, "blocks", low=0, high=2 ** 31 - 1)
    threads = A.count(threads, "threads", low=0, high=1024)
    if blocks * threads > MAX_N:
        raise ValueError(f"{blocks} blocks of {threads} threads number more than 2^31 - 1 threads; "
                         "a thread's number is an int")
    if called.size > MAX_CALLED:
        raise ValueError(f"{called.size} numbers called; at most {MAX_CALLED} (each answer is a "
                         "printf line, and device printf's buffer drops what does not fit)")
    if called.size == 0 or blocks * threads == 0:
        return np.zeros(called.size, np.int32)
    from pycuda import gpuarray

    cuda = driver()
    d_called = gpuarray.to_gpu(called)
    d_answered = gpuarray.zeros(called.size, np.int32)
    flush_printf()  # what Python printed so far goes out first
    K("roll_call_printf", "PiP").prepared_call((blocks, 1, 1), (threads, 1, 1), d_called.gpudata,
                                               called.size, d_answered.gpudata)
    cuda.Context.synchronize()  # device printf output is delivered at synchronisation
    flush_printf()
    return d_answered.get()


# --- zero-copy sharing -----------------------------------------------------------------------

def _shared(direction, library_ptr, pycuda_ptr, values_seen):
    return {"direction": direction, "library_ptr": int(library_ptr), "pycuda_ptr": int(pycuda_ptr),
            "same": int(library_ptr) == int(pycuda_ptr), "values_seen": bool(values_seen)}


def share_with_torch(n: int = 1000, alpha: float = 2.0):
    """Both directions of zero-copy sharing with torch; None if torch (with CUDA) is absent.

    1. torch owns the memory: the pycuda kernel writes through tensor.data_ptr(), and torch
       reads the answers in place.
    2. pycuda owns the memory: torch.as_tensor(gpuarray) views it through
       __cuda_array_interface__, and what torch writes there pycuda reads back.
    n: elements (0 to 2^31 - 1); alpha: a real number (2.0 is exact, so the values compare equal).
    """
    n = A.count(n, "n", low=0, high=MAX_N)
    alpha = A.real(alpha, "alpha", low=-FLOAT32_MAX, high=FLOAT32_MAX)
    torch = torch_or_none()
    if torch is None:
        return None
    from pycuda import gpuarray

    driver()  # pycuda's context is the device's primary context: the one torch uses
    x = torch.randn(n, device="cuda")
    ids = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    launch_on_pointers("v3", x.data_ptr(), ids.data_ptr(), y.data_ptr(), n, alpha)
    # alpha = 2 is exact, so torch's x * alpha and the kernel's agree to the bit
    seen = bool(torch.equal(ids, torch.arange(n, dtype=torch.int32, device="cuda"))
                and torch.equal(y, x * alpha))
    into_torch = _shared("pycuda kernel -> torch tensor (tensor.data_ptr())", y.data_ptr(),
                         y.data_ptr(), seen)

    g = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    t = torch.as_tensor(g, device="cuda")
    t.mul_(2)  # torch writes into pycuda's memory (both on the default stream: ordered)
    into_pycuda = _shared("torch.as_tensor(GPUArray) -> pycuda memory", t.data_ptr(), g.gpudata,
                          np.array_equal(g.get(), 2 * np.arange(n, dtype=np.float32)))
    return [into_torch, into_pycuda]


def share_with_cupy(n: int = 1000):
    """pycuda memory viewed and written by CuPy (cupy.asarray through __cuda_array_interface__);
    None if CuPy is absent. n: elements, 0 to 2^31 - 1."""
    n = A.count(n, "n", low=0, high=MAX_N)
    cupy = cupy_or_none()
    if cupy is None:
        return None
    from pycuda import gpuarray

    driver()
    g = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    c = cupy.asarray(g)
    c *= 3
    cupy.cuda.runtime.deviceSynchronize()
    return _shared("cupy.asarray(GPUArray) -> pycuda memory", c.data.ptr, g.gpudata,
                   np.array_equal(g.get(), 3 * np.arange(n, dtype=np.float32)))


# --- launch overhead -------------------------------------------------------------------------

def _per_launch_us(enqueue, launches: int, sync, repeats: int) -> float:
    """Host wall-clock per launch: `launches` calls of enqueue(i) then one sync, median of
    `repeats` rounds (after one warm-up round)."""
    times = []
    for r in range(repeats + 1):
        sync()
        t0 = time.perf_counter()
        for i in range(launches):
            enqueue(i)
        sync()
        if r:  # round 0 warms up (first-call costs, the argument cache)
            times.append((time.perf_counter() - t0) / launches * 1e6)
    return statistics.median(times)


def launch_overhead(launches: int = 2000, graph_nodes: int = 100, repeats: int = 5) -> dict:
    """Microseconds per launch of `launch_probe` (one block of 32 threads that ticks a counter),
    host wall-clock over many back-to-back launches, by launch method. Every launch is counted
    on the GPU, and the count is checked ('launches counted' == 'launches made').
    launches, graph_nodes, repeats: whole numbers >= 1 (the graph row replays
    max(1, launches // graph_nodes) graphs of graph_nodes launches)."""
    launches = A.count(launches, "launches", low=1)
    graph_nodes = A.count(graph_nodes, "graph_nodes", low=1)
    repeats = A.count(repeats, "repeats", low=1)
    from common.graphs import CudaGraph

    cuda = driver()
    plain = K("launch_probe")
    probe = K("launch_probe", "Pfq")
    count = cuda.mem_alloc(8)
    cuda.memset_d32(count, 0, 2)
    ptr = int(count)
    grid, block = (1, 1, 1), (32, 1, 1)
    a, one = np.float32(1.0), np.int64(1)
    stream = cuda.Stream()
    ctx_sync = cuda.Context.synchronize
    made = 0
    rows = {}

    def measure(name, enqueue, sync=ctx_sync, n=launches, per_call=1):
        nonlocal made
        us = _per_launch_us(enqueue, n, sync, repeats)
        made += n * per_call * (repeats + 1)
        rows[name] = us / per_call

    measure("plain call fn(...), same arguments",
            lambda i: plain(np.uintp(ptr), a, one, block=block, grid=grid))
    measure("plain call fn(...), a new scalar each call",
            lambda i: plain(np.uintp(ptr), np.float32(i), one, block=block, grid=grid))
    measure("prepared_call", lambda i: probe.prepared_call(grid, block, ptr, 1.0, 1))
    measure("prepared_async_call on a stream",
            lambda i: probe.prepared_async_call(grid, block, stream, ptr, 1.0, 1), sync=stream.synchronize)
    measure("prepared_call + synchronize each (round trip)",
            lambda i: (probe.prepared_call(grid, block, ptr, 1.0, 1), ctx_sync()), n=max(1, launches // 4))

    def capture():
        for _ in range(graph_nodes):
            probe.prepared_async_call(grid, block, stream, ptr, 1.0, 1)

    with CudaGraph(stream, capture) as graph:
        if graph.nodes != graph_nodes:
            raise RuntimeError(f"captured {graph.nodes} graph nodes, expected {graph_nodes}")
        measure(f"CUDA graph replay ({graph_nodes} launches per graph)", lambda i: graph.launch(),
                sync=stream.synchronize, n=max(1, launches // graph_nodes), per_call=graph_nodes)

    counted = np.zeros(1, np.uint64)
    cuda.memcpy_dtoh(counted, count)
    count.free()
    out = {"us_per_launch": rows, "launches_made": made, "launches_counted": int(counted[0])}

    torch = torch_or_none()
    if torch is not None:  # for comparison: one tiny torch op (one kernel each)
        z = torch.zeros(1, device="cuda")
        n_torch = launches * (repeats + 1)
        out["us_per_launch"]["torch: z.add_(1) on one element"] = _per_launch_us(
            lambda i: z.add_(1), launches, torch.cuda.synchronize, repeats)
        out["torch_ok"] = int(z.item()) == n_torch
    return out


# --- the day's extra sections -----------------------------------------------------------------

CALLED = [0, 1, 31, 32, 255, 256, 511, 9999]  # 2 blocks of 256: 512 threads; 9999 is absent


def extras(report, mode):
    report.say(f"\nroll call (device printf) over 2 blocks of {THREADS}: "
               f"numbers {CALLED}; printf order is not guaranteed")
    got = printf_roll_call(CALLED)
    want = reference.answered(CALLED, 2 * THREADS)
    report.section("who answered", [[c, int(g), int(w)] for c, g, w in zip(CALLED, got, want)],
                   ["number called", "answered", "expected"])
    report.record("printf_roll_call", {"called": CALLED, "answered": got.tolist()})
    if not np.array_equal(got, want):
        report.failures.append(f"printf roll call: answered {got.tolist()}, expected {want.tolist()}")

    rows = (share_with_torch() or []) + [r for r in [share_with_cupy()] if r]
    if not rows:
        report.say("\nzero-copy sharing: neither torch (with CUDA) nor CuPy is installed: not shown")
    else:
        report.section("zero-copy sharing: one allocation, two libraries",
                       [[r["direction"], f"{r['library_ptr']:#x}", f"{r['pycuda_ptr']:#x}",
                         "yes" if r["same"] else "NO", "yes" if r["values_seen"] else "NO"]
                        for r in rows],
                       ["direction", "library's pointer", "pycuda's pointer", "same", "values seen"])
        report.record("sharing", rows)
        for r in rows:
            if not (r["same"] and r["values_seen"]):
                report.failures.append(f"zero-copy sharing failed: {r}")

    if mode == "check":
        return
    o = launch_overhead()
    rows = [[k, f"{v:.2f}", f"{1e6 / v / 1e3:.0f} k"] for k, v in o["us_per_launch"].items()]
    report.section("launch overhead: host wall-clock per launch of a one-block kernel, "
                   "median of 5 x 2000 back-to-back launches", rows,
                   ["method", "us per launch", "launches per second"])
    report.say(f"  every launch counted on the GPU: {o['launches_counted']} of {o['launches_made']}")
    if o["launches_counted"] != o["launches_made"]:
        report.failures.append(f"launch overhead: the GPU counted {o['launches_counted']} launches, "
                               f"{o['launches_made']} were made")
    if o.get("torch_ok") is False:
        report.failures.append("launch overhead: the torch counter is wrong")
    report.record("launch_overhead", o)
