"""Day 52 driver: a chain of K tiny dependent kernels, launched four ways, checked exactly.

    from days.day52_cuda_graphs.driver import chain
    y = chain(x, a, b)            # y = a[K-1]*(...(a[0]*x + b[0])...) + b[K-1], float32

The size is KERNELSxN: K kernels in the chain, each over N floats. Every version computes the
same fmaf sequence per element; with reference.exact_inputs the result is exact in float32,
so the check asks for zero error.
"""
import statistics
import time

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_fp32

from . import reference

K = H.Kernels(__file__)
THREADS = 256
MAX_KERNELS = 100_000  # a chain longer than this is refused (v1 would take ~0.5 s a call)

VERSIONS = {
    "v1": "K launches, prepared_call (default stream)",
    "v2": "K launches, prepared_async_call on a stream",
    "v3": "CUDA graph of the K launches, one cuGraphLaunch",
    "v4": "fused: one kernel does all K steps (other program)",
}
BEST = "v4"
SIZE_HELP = "KERNELSxN, e.g. 1000x1024 (K kernels in the chain, N floats each)"
SIZES = {"small": (100, 1024), "default": (1000, 1024), "large": (10000, 1024)}
# one kernel of one element; one kernel; ragged vectors (31, 33, 4097: the last block partly
# idle); long chains of a single element; a chain over more than one wave of blocks
CHECK_SIZES = [(1, 1), (1, 1000), (2, 33), (3, 31), (7, 4097), (100, 1), (1000, 257),
               (33, 100003)]
# the curriculum's 1000 kernels, the kernel-count sweep 10..10000, and 1000 kernels that are
# no longer tiny (100003 floats: 391 blocks each)
BENCH_SIZES = [(10, 1024), (100, 1024), (1000, 1024), (10000, 1024), (1000, 100003)]
# CURRICULUM.md: >= 3x over plain launches for 1000 tiny kernels
BAR = [{"version": "v3", "over": ("v1", 3.0), "sizes": [(1000, 1024)]}]
COUNTS = (10, 100, 1000, 10000)  # the kernel counts of the extras' tables


def validate_size(size):
    kernels, n = size
    if kernels > MAX_KERNELS:
        raise ValueError(f"a chain of {kernels} kernels is longer than this day takes "
                         f"(at most {MAX_KERNELS})")
    A.fits_int32("n", n)


def make_case(size, rng):
    kernels, n = size
    x, a, b = reference.exact_inputs(kernels, n, rng)
    return H.Case(size, inputs={"x": x, "a": a, "b": b}, outputs={"y": ((n,), np.float32)},
                  reference=lambda: {"y": reference.chain(x, a, b)},
                  flops=2 * kernels * n, unit="fp32",
                  tol=0.0)  # exact: whole numbers below 2^24 at every step (exact_inputs)


def _grid(n):
    return (H.cdiv(n, THREADS), 1, 1)


def _pointers(d):
    return int(d.x), int(d.y), int(d.a), int(d.b)


def _stream(d):
    """The stream v2 launches on and v3 captures on: one per DeviceCase."""
    s = d.__dict__.get("_d52_stream")
    if s is None:
        from common.gpu import driver

        s = d.__dict__["_d52_stream"] = driver().Stream()
    return s


def enqueue_chain(version, d, stream=None):
    """K launches of the step kernel: prepared_call on the default stream, or
    prepared_async_call on `stream` (the path v2 times and v3 captures)."""
    kernels, n = d.size
    fn = K(f"chain_step_{version}", "PPPPii")
    x, y, a, b = _pointers(d)
    grid, block = _grid(n), (THREADS, 1, 1)
    if stream is None:
        call = fn.prepared_call
        call(grid, block, x, y, a, b, 0, n)
        for k in range(1, kernels):
            call(grid, block, y, y, a, b, k, n)
    else:
        call = fn.prepared_async_call
        call(grid, block, stream, x, y, a, b, 0, n)
        for k in range(1, kernels):
            call(grid, block, stream, y, y, a, b, k, n)


def graph_of(d):
    """v3's graph for DeviceCase d: captured on first use, then cached with d (the pointers and
    scalars of the K launches are frozen into it; d's buffers live as long as d)."""
    g = d.__dict__.get("_d52_graph")
    if g is None:
        from common.graphs import CudaGraph

        s = _stream(d)
        K("chain_step_v3", "PPPPii")  # build and load the module now: not while capturing
        g = d.__dict__["_d52_graph"] = CudaGraph(s, lambda: enqueue_chain("v3", d, s))
        if g.nodes != d.size[0]:
            raise RuntimeError(f"captured {g.nodes} graph nodes for {d.size[0]} launches")
    return g


def launch(version, d):
    A.version(version, VERSIONS)
    kernels, n = d.size
    if version == "v1":
        enqueue_chain("v1", d)
    elif version == "v2":
        enqueue_chain("v2", d, _stream(d))
    elif version == "v3":
        graph_of(d).launch(0)  # on the legacy default stream, like v1 and the timing events
    elif version == "v4":
        x, y, a, b = _pointers(d)
        K("chain_fused_v4", "PPPPii").prepared_call(_grid(n), (THREADS, 1, 1), x, y, a, b,
                                                    kernels, n)


def baselines(d):
    """torch: one addcmul kernel per step (eager), and the same K ops in a torch.cuda.graph."""
    torch = torch_fp32()
    if torch is None:
        return {}
    kernels, n = d.size
    x, a, b = (as_torch(d.array(k)) for k in ("x", "a", "b"))
    a_k, b_k = [a[k] for k in range(kernels)], [b[k] for k in range(kernels)]  # 0-d views
    y = torch.empty(n, device="cuda")

    def eager():
        torch.addcmul(b_k[0], x, a_k[0], out=y)        # y = b + x * a: one kernel
        for k in range(1, kernels):
            torch.addcmul(b_k[k], y, a_k[k], out=y)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        eager()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        eager()
    torch.cuda.synchronize()
    return {"torch eager (addcmul a step)": lambda: (eager(), y)[1],
            "torch.cuda.graph replay": lambda: (g.replay(), y)[1]}


# --- extras: wall clock per kernel, what a graph costs to build, updating a graph -------------

def _wall_ms(fn, sync, repeats=5):
    """Median host wall-clock of fn() + sync() over `repeats` rounds after one warm-up."""
    fn()
    sync()
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def _host_ms(fn, sync, repeats=5):
    """Median host time of the enqueue alone (the calls return before the GPU is done)."""
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t0) * 1e3)
    sync()
    return statistics.median(out)


def launch_costs(counts=COUNTS, n=1024):
    """Wall clock (enqueue + synchronize) and host enqueue time per kernel of every version at
    each chain length; graph build costs (capture, instantiate, first replay). Every run's
    output is checked. Returns a JSON-able dict."""
    from common.check import compare
    from common.gpu import driver

    cuda = driver()
    sync = cuda.Context.synchronize
    out = {"n": n, "kernels": list(counts), "wall_us_per_kernel": {v: [] for v in VERSIONS},
           "host_us_per_kernel": {v: [] for v in VERSIONS}, "graph": [], "failures": []}
    for kernels in counts:
        case = make_case((kernels, n), np.random.default_rng(kernels))
        d = H.DeviceCase(case)
        g = graph_of(d)
        t0 = time.perf_counter()
        g.launch(0)
        sync()
        first_ms = (time.perf_counter() - t0) * 1e3
        for v in VERSIONS:
            d.poison_outputs()
            wall = _wall_ms(lambda v=v, d=d: launch(v, d), sync)
            host = _host_ms(lambda v=v, d=d: launch(v, d), sync)
            out["wall_us_per_kernel"][v].append(wall * 1e3 / kernels)
            out["host_us_per_kernel"][v].append(host * 1e3 / kernels)
            r = compare(d.outputs()["y"], case.expected()["y"], 0.0)
            if not r.ok:
                out["failures"].append(f"{v} at {kernels}x{n}: {r.message}")
        out["graph"].append({"kernels": kernels, "capture_ms": g.capture_ms,
                             "instantiate_ms": g.instantiate_ms, "first_replay_ms": first_ms})
        g.close()
    return out


def graph_update(kernels=1000, n=1024):
    """Point the captured chain at another input: capture again and patch the executable graph
    (cuGraphExecUpdate), against instantiating the new capture from scratch. Both results are
    checked. Returns a JSON-able dict."""
    from pycuda import gpuarray

    from common.check import compare
    from common.gpu import driver
    from common.graphs import CudaGraph

    cuda = driver()
    rng = np.random.default_rng(52)
    case = make_case((kernels, n), rng)
    d = H.DeviceCase(case)
    s = _stream(d)
    g = graph_of(d)
    x2 = rng.integers(-1000, 1001, n).astype(np.float32)
    d.arrays["x"] = gpuarray.to_gpu(x2)   # a new buffer: the frozen graph still reads the old one
    want = reference.chain(x2, case.inputs["a"], case.inputs["b"])
    patched = g.update(lambda: enqueue_chain("v3", d, s))
    d.poison_outputs()
    g.launch(0)
    cuda.Context.synchronize()
    ok_update = compare(d.outputs()["y"], want, 0.0).ok
    fresh = CudaGraph(s, lambda: enqueue_chain("v3", d, s))
    d.poison_outputs()
    fresh.launch(0)
    cuda.Context.synchronize()
    ok_fresh = compare(d.outputs()["y"], want, 0.0).ok
    res = {"kernels": kernels, "patched_in_place": patched, "capture_ms": g.capture_ms,
           "update_ms": g.update_ms, "instantiate_ms": fresh.instantiate_ms,
           "ok_update": ok_update, "ok_fresh": ok_fresh}
    fresh.close()
    g.close()
    return res


def extras(report, mode):
    if mode == "check":
        return
    costs = launch_costs()
    report.record("per_kernel", costs)
    for f in costs["failures"]:
        report.failures.append("launch costs: " + f)
    vs = list(VERSIONS)
    wall, host = costs["wall_us_per_kernel"], costs["host_us_per_kernel"]
    rows = [[k] + [f"{wall[v][i]:.2f}" for v in vs]
            + [f"{1e6 / wall['v1'][i] / 1e3:.0f} k", f"{1e6 / wall['v3'][i] / 1e3:.0f} k",
               f"{wall['v1'][i] / wall['v3'][i]:.1f}x"]
            for i, k in enumerate(costs["kernels"])]
    report.section(f"wall clock per kernel (us; enqueue + synchronize, median of 5), "
                   f"chains over {costs['n']} floats", rows,
                   ["kernels"] + vs + ["v1 kernels/s", "v3 kernels/s", "v3 over v1"])
    rows = [[k] + [f"{host[v][i]:.2f}" for v in vs] for i, k in enumerate(costs["kernels"])]
    report.section("host time per kernel (us): the enqueue calls alone, before the GPU is done",
                   rows, ["kernels"] + vs)
    rows = []
    for i, gr in enumerate(costs["graph"]):
        saved_ms = (wall["v1"][i] - wall["v3"][i]) * gr["kernels"] / 1e3  # per replay
        build = gr["capture_ms"] + gr["instantiate_ms"]
        rows.append([gr["kernels"], f"{gr['capture_ms']:.3f}", f"{gr['instantiate_ms']:.3f}",
                     f"{gr['first_replay_ms']:.3f}", f"{wall['v3'][i] * gr['kernels'] / 1e3:.3f}",
                     f"{build / saved_ms:.1f}" if saved_ms > 0 else "never"])
    report.section("graph build cost (host ms)", rows,
                   ["kernels", "capture", "instantiate", "first replay", "later replay",
                    "replays to pay back"])
    try:
        up = graph_update()
    except Exception as e:  # the rest of the day must still run; the failure is reported
        report.failures.append(f"graph update: {type(e).__name__}: {e}")
        return
    report.record("graph_update", up)
    report.section(f"re-pointing a graph of {up['kernels']} kernels (host ms)",
                   [["cuGraphExecUpdate (patch in place)", f"{up['capture_ms']:.3f}",
                     f"{up['update_ms']:.3f}", "ok" if up["ok_update"] else "WRONG"],
                    ["cuGraphInstantiate (new graph)", f"{up['capture_ms']:.3f}",
                     f"{up['instantiate_ms']:.3f}", "ok" if up["ok_fresh"] else "WRONG"]],
                   ["way", "capture", "update or instantiate", "output"])
    if not (up["ok_update"] and up["ok_fresh"] and up["patched_in_place"]):
        report.failures.append(f"graph update: {up}")


def draw_per_kernel(rec, path, plt) -> bool:
    """Wall-clock microseconds per kernel against the chain length, one line per version."""
    data = (rec.get("extra") or {}).get("per_kernel")
    if not data:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=110)
    for v, ys in data["wall_us_per_kernel"].items():
        ax.plot(data["kernels"], ys, marker="o", label=f"{v}: {VERSIONS.get(v, '')}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("kernels in the chain")
    ax.set_ylabel("wall-clock us per kernel")
    ax.set_title(f"Day 52: launch cost per kernel ({data['n']} floats each)\n"
                 f"{rec['device']['name']}, {rec['date']}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


FIGURES = {"per_kernel.png": ("per_kernel", draw_per_kernel)}


# --- public function ---------------------------------------------------------------------------

def chain(x, a, b, version=BEST):
    """y = f_{K-1}(...f_0(x)), f_k(v) = fmaf(a[k], v, b[k]), element by element, on the GPU in
    float32, as K kernels (v1-v3) or one (v4). x: 1-D; a, b: 1-D of one length K (0 to 100000).
    K = 0 returns x as float32; an empty x an empty result."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=1, what="[n]")
    a = A.floats(a, "a", ndim=1, what="[K]")
    b = A.floats(b, "b", ndim=1, what="[K]")
    A.same_shape(a=a, b=b)
    kernels, n = len(a), len(x)
    if kernels > MAX_KERNELS:
        raise ValueError(f"a chain of {kernels} steps is longer than this day takes "
                         f"(at most {MAX_KERNELS})")
    A.fits_int32("x", n)
    if kernels == 0 or n == 0:
        return x.copy()
    case = H.Case((kernels, n), inputs={"x": x, "a": a, "b": b},
                  outputs={"y": ((n,), np.float32)})
    return H.run(launch, version, case)["y"]
