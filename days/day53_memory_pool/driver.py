"""Day 53 driver: one MLP training step whose temporaries come from four allocators.

    from days.day53_memory_pool.driver import mlp_step
    out = mlp_step(x, t, w1, w2, lr=0.1)     # {"dw1", "dw2", "w1_new", "w2_new"}, float32

The size is BxDxH: a batch of B rows of width D, a hidden layer of width H. The step (kernel.cu
has the math) allocates 9 temporaries and frees each after its last use; the versions differ
only in where that memory comes from. The allocator itself is common/mempool.py.
"""
import statistics
import time

import numpy as np

from common import args as A
from common import harness as H
from common import mempool

from . import reference

KERN = H.Kernels(__file__)
EW = 256                       # threads of the element-wise kernels
TILE = 128                     # the GEMM's block tile (common/cuda/sgemm.cuh, day 8)
MAX_DIM = 16384
LR = 0.1

VERSIONS = {
    "v1": "cuMemAlloc/cuMemFree per tensor per step",
    "v2": "cuMemAllocAsync/cuMemFreeAsync (driver pool)",
    "v3": "CachingAllocator (common/mempool.py)",
    "v4": "all temporaries preallocated (the floor)",
}
BEST = "v4"
SIZE_HELP = "BxDxH, e.g. 512x1024x4096 (batch, input/output width, hidden width)"
SIZES = {"small": (64, 256, 512), "default": (512, 1024, 4096), "large": (1024, 4096, 4096)}
# 1-row and 1-wide edges; odd widths (the scalar GEMM path, ragged transposes and tiles);
# widths that are multiples of 4 but not of the 128 tile; one of each path at a real size
CHECK_SIZES = [(1, 1, 1), (1, 4, 8), (3, 5, 7), (33, 31, 65), (7, 100, 36), (64, 128, 256),
               (129, 257, 515), (256, 512, 1024)]
# the curriculum's batch 256-1024 and widths 512-4096, and an awkward shape (odd D: the scalar
# GEMM path, 2.4x the rows of a power of two)
BENCH_SIZES = [(256, 512, 2048), (512, 1024, 4096), (1024, 1024, 4096), (1000, 1001, 3000)]
# CURRICULUM.md: "allocation time removed from a training step". Judged at the default size:
# the caching allocator's step within 3% of the preallocated floor (time(v4) / time(v3) >= 0.97)
# and faster than allocating with cuMemAlloc/cuMemFree per tensor.
BAR = [{"version": "v3", "over": ("v4", 0.97), "sizes": [(512, 1024, 4096)]},
       {"version": "v3", "over": ("v1", 1.0), "sizes": [(512, 1024, 4096)]}]
TEMPORARIES = ("z", "h", "o", "do", "hT", "w2T", "dh", "dz", "xT")


def validate_size(size):
    for name, v in zip(("B", "D", "H"), size):
        if v > MAX_DIM:
            raise ValueError(f"{name} = {v} is larger than this day takes (at most {MAX_DIM})")


def tolerance(size) -> dict:
    """fp32 sums of up to max(B, D, H) products, three GEMMs deep: the gradients are held to
    4 * 2^-24 * sqrt(longest sum) (at least 1e-5); the new weights to fp32's 1e-5."""
    g = max(1e-5, 4 * 2.0 ** -24 * np.sqrt(max(size)))
    return {"dw1": g, "dw2": g, "w1_new": 1e-5, "w2_new": 1e-5}


def make_case(size, rng, lr=LR):
    b, d, h = size
    x = rng.standard_normal((b, d), dtype=np.float32)
    t = rng.standard_normal((b, d), dtype=np.float32)
    w1 = (rng.standard_normal((d, h)) / np.sqrt(d)).astype(np.float32)
    w2 = (rng.standard_normal((h, d)) / np.sqrt(h)).astype(np.float32)
    return H.Case(size, inputs={"x": x, "t": t, "w1": w1, "w2": w2},
                  outputs={"dw1": ((d, h), np.float32), "dw2": ((h, d), np.float32),
                           "w1_new": ((d, h), np.float32), "w2_new": ((h, d), np.float32)},
                  reference=lambda: reference.mlp_step(x, t, w1, w2, lr),
                  flops=10 * b * d * h, unit="fp32", tol=tolerance(size), params={"lr": lr})


# --- the step: kernels in the order an eager framework runs them --------------------------------

class Launcher:
    """Enqueues the step's kernels (version `v`'s copies) on the default stream."""

    def __init__(self, version):
        self.v = version

    def gemm(self, a, b, c, m, n, k):
        """C[m, n] = A[m, k] @ B[k, n], row-major."""
        path = "vec" if k % 4 == 0 and n % 4 == 0 else "scalar"
        KERN(f"mlp_gemm_{path}_{self.v}", "PPPiii").prepared_call(
            (H.cdiv(n, TILE), H.cdiv(m, TILE), 1), (256, 1, 1), int(a), int(b), int(c), m, n, k)

    def _ew(self, name, sig, n, *args):
        KERN(f"mlp_{name}_{self.v}", sig).prepared_call((H.cdiv(n, EW), 1, 1), (EW, 1, 1), *args)

    def gelu(self, z, h, n):
        self._ew("gelu", "PPq", n, int(z), int(h), n)

    def gelu_back(self, dh, z, dz, n):
        self._ew("gelu_back", "PPPq", n, int(dh), int(z), int(dz), n)

    def mse_grad(self, o, t, d, scale, n):
        self._ew("mse_grad", "PPPfq", n, int(o), int(t), int(d), scale, n)

    def sgd(self, w, g, w_new, lr, n):
        self._ew("sgd", "PPPfq", n, int(w), int(g), int(w_new), lr, n)

    def transpose(self, src, dst, r, c):
        """dst[c, r] = src[r, c]."""
        KERN(f"mlp_transpose_{self.v}", "PPii").prepared_call(
            (H.cdiv(c, 32), H.cdiv(r, 32), 1), (32, 8, 1), int(src), int(dst), r, c)


def step(L, alloc, free, size, lr, x, t, w1, w2, dw1, dw2, w1_new, w2_new):
    """One training step. alloc(nbytes, name) -> pointer and free(pointer, name) provide the 9
    temporaries; L enqueues the kernels. Each temporary is freed right after the launch of its
    last user: stream order makes the memory safe to hand out again for later launches."""
    b, d, h = size
    f = 4
    z = alloc(f * b * h, "z")
    L.gemm(x, w1, z, b, h, d)                  # z = x @ W1
    hh = alloc(f * b * h, "h")
    L.gelu(z, hh, b * h)                       # h = gelu(z)
    o = alloc(f * b * d, "o")
    L.gemm(hh, w2, o, b, d, h)                 # o = h @ W2
    do = alloc(f * b * d, "do")
    L.mse_grad(o, t, do, 1.0 / b, b * d)       # do = (o - t) / B
    free(o, "o")
    ht = alloc(f * h * b, "hT")
    L.transpose(hh, ht, b, h)
    free(hh, "h")
    L.gemm(ht, do, dw2, h, d, b)               # dW2 = h^T @ do
    free(ht, "hT")
    w2t = alloc(f * d * h, "w2T")
    L.transpose(w2, w2t, h, d)
    dh = alloc(f * b * h, "dh")
    L.gemm(do, w2t, dh, b, h, d)               # dh = do @ W2^T
    free(w2t, "w2T")
    free(do, "do")
    dz = alloc(f * b * h, "dz")
    L.gelu_back(dh, z, dz, b * h)              # dz = dh * gelu'(z)
    free(dh, "dh")
    free(z, "z")
    xt = alloc(f * d * b, "xT")
    L.transpose(x, xt, b, d)
    L.gemm(xt, dz, dw1, d, h, b)               # dW1 = x^T @ dz
    free(xt, "xT")
    free(dz, "dz")
    L.sgd(w1, dw1, w1_new, lr, d * h)
    L.sgd(w2, dw2, w2_new, lr, h * d)


# --- the allocators behind alloc/free ----------------------------------------------------------

class RawAlloc:
    """v1: cuMemAlloc and cuMemFree for every tensor (cuMemFree waits for the GPU)."""
    name = "cuMemAlloc/cuMemFree"

    def __init__(self):
        self.device_mallocs = 0

    def alloc(self, nbytes, tag=None):
        self.device_mallocs += 1
        return mempool.device_malloc(nbytes)

    def free(self, p, tag=None):
        mempool.device_free(p)


class DriverPoolAlloc:
    """v2: the driver's stream-ordered pool, on the default stream."""
    name = "cuMemAllocAsync pool"

    def __init__(self):
        self.pool = mempool.StreamOrderedPool()

    def alloc(self, nbytes, tag=None):
        return self.pool.alloc(nbytes)

    def free(self, p, tag=None):
        self.pool.free(p)


class CachingAlloc:
    """v3: common/mempool.py's CachingAllocator, on the default stream."""
    name = "CachingAllocator"

    def __init__(self, pool=None):
        self.pool = pool or mempool.CachingAllocator()

    def alloc(self, nbytes, tag=None):
        return self.pool.alloc(nbytes)

    def free(self, p, tag=None):
        self.pool.free(p)


class PreAlloc:
    """v4: one buffer per temporary, allocated on first use and kept (no allocator at all).
    pycuda allocations: freed with this object."""
    name = "preallocated"

    def __init__(self):
        self.bufs = {}
        self.device_mallocs = 0

    def alloc(self, nbytes, tag):
        buf = self.bufs.get(tag)
        if buf is None or buf[1] < nbytes:
            from common.gpu import driver

            buf = self.bufs[tag] = (driver().mem_alloc(nbytes), nbytes)
            self.device_mallocs += 1
        return buf[0]

    def free(self, p, tag=None):
        pass


class PycudaPoolAlloc:
    """pycuda.tools.DeviceMemoryPool: pycuda's own caching pool (power-of-two-ish bins)."""
    name = "pycuda DeviceMemoryPool"

    def __init__(self):
        from pycuda.tools import DeviceMemoryPool

        self.pool = DeviceMemoryPool()
        self.live = {}

    def alloc(self, nbytes, tag=None):
        a = self.pool.allocate(nbytes)
        self.live[int(a)] = a
        return int(a)

    def free(self, p, tag=None):
        self.live.pop(int(p)).free()


class ExactSizeCache:
    """A cache with no size classes: a freed block is reused only for a request of exactly its
    size (what an allocator without rounding or splitting does)."""
    name = "exact-size cache (no size classes)"

    def __init__(self):
        self.free_lists, self.sizes = {}, {}
        self.reserved = self.device_mallocs = 0

    def alloc(self, nbytes, tag=None):
        lst = self.free_lists.get(nbytes)
        if lst:
            return lst.pop()
        p = mempool.device_malloc(nbytes)
        self.sizes[p] = nbytes
        self.reserved += nbytes
        self.device_mallocs += 1
        return p

    def free(self, p, tag=None):
        self.free_lists.setdefault(self.sizes[p], []).append(p)

    def close(self):
        for p in self.sizes:
            mempool.device_free(p)
        self.sizes, self.free_lists, self.reserved = {}, {}, 0


_SHARED = {}


def allocator_for(version, d):
    """The allocator a version's steps use: v1 and v2 are process-wide (the driver's), v3 one
    CachingAllocator for the process (as a framework keeps one), v4 buffers kept with d."""
    if version == "v4":
        a = d.__dict__.get("_d53_prealloc")
        if a is None:
            a = d.__dict__["_d53_prealloc"] = PreAlloc()
        return a
    if version not in _SHARED:
        _SHARED[version] = {"v1": RawAlloc, "v2": DriverPoolAlloc, "v3": CachingAlloc}[version]()
    return _SHARED[version]


def _run_step(L, al, d):
    step(L, al.alloc, al.free, d.size, d.params.get("lr", LR), d.x, d.t, d.w1, d.w2, d.dw1,
         d.dw2, d.w1_new, d.w2_new)


def launch(version, d):
    A.version(version, VERSIONS)
    _run_step(Launcher(version), allocator_for(version, d), d)


def baselines(d):
    """The same step (v3's kernels) on pycuda's own caching pool, pycuda.tools.DeviceMemoryPool."""
    al = PycudaPoolAlloc()
    L = Launcher("v3")

    def run():
        _run_step(L, al, d)
        return d.array("dw1")

    run.output = "dw1"
    return {"pycuda DeviceMemoryPool": run}


# --- extras: where the time goes, and what each allocator holds --------------------------------

class Counted:
    """Wraps an allocator: calls, host seconds inside alloc/free, bytes live and their peak."""

    def __init__(self, inner):
        self.inner, self.name = inner, inner.name
        self.calls = 0
        self.seconds = 0.0
        self.live = self.peak = 0
        self.sizes = {}

    def alloc(self, nbytes, tag=None):
        t0 = time.perf_counter()
        p = self.inner.alloc(nbytes, tag)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.sizes[int(p)] = nbytes
        self.live += nbytes
        self.peak = max(self.peak, self.live)
        return p

    def free(self, p, tag=None):
        t0 = time.perf_counter()
        self.inner.free(p, tag)
        self.seconds += time.perf_counter() - t0
        self.calls += 1
        self.live -= self.sizes.pop(int(p))


def allocation_costs(size=None, steps=20):
    """Per allocator: wall-clock per step (host timer, synchronized), alloc+free calls per step,
    host microseconds spent inside them per step, cuMemAlloc calls per step in the steady state
    (after one warm-up step). Every step's output is checked. Returns JSON-able rows."""
    from common.check import compare_all
    from common.gpu import driver

    sync = driver().Context.synchronize
    size = tuple(size or SIZES["default"])
    case = make_case(size, np.random.default_rng(53))
    d = H.DeviceCase(case)
    L = Launcher("v3")
    rows = []
    for v, inner in (("v1", RawAlloc()), ("v2", DriverPoolAlloc()), ("v3", CachingAlloc()),
                     ("v4", PreAlloc()), (None, PycudaPoolAlloc())):
        c = Counted(inner)
        _run_step(L, c, d)          # warm-up: caches fill, preallocated buffers appear
        sync()
        c.calls, c.seconds = 0, 0.0
        misses0 = _device_mallocs(inner)
        walls = []
        d.poison_outputs()
        for _ in range(steps):
            t0 = time.perf_counter()
            _run_step(L, c, d)
            sync()
            walls.append((time.perf_counter() - t0) * 1e3)
        ok = compare_all(d.outputs(), case.expected(), case.tolerance()).ok
        misses = _device_mallocs(inner)
        rows.append({"version": v, "allocator": inner.name, "step_ms": statistics.median(walls),
                     "calls_per_step": c.calls / steps, "alloc_us_per_step": c.seconds * 1e6 / steps,
                     "device_mallocs_per_step": (None if misses is None
                                                 else (misses - misses0) / steps),
                     "ok": ok})
        if hasattr(inner, "close"):
            inner.close()
    return {"size": list(size), "steps": steps, "rows": rows}


def _device_mallocs(al):
    if isinstance(al, CachingAlloc):
        return al.pool.counts["device_mallocs"]
    return getattr(al, "device_mallocs", None)   # None: the driver's and pycuda's pools


BATCHES = (256, 1024, 384, 768, 512, 640, 896, 320, 1000, 448, 576, 960)


def varying_batches(d_in=512, hidden=2048, rounds=4):
    """Steps whose batch changes every step (BATCHES, `rounds` times over), with each caching
    allocator fresh at the start: what each holds at the end against the most the step ever had
    live at once. Returns JSON-able rows."""
    from common.check import compare_all
    from common.gpu import driver

    cuda = driver()
    sync = cuda.Context.synchronize
    rng = np.random.default_rng(7)
    cases = {b: make_case((b, d_in, hidden), rng) for b in BATCHES}
    devs = {b: H.DeviceCase(c) for b, c in cases.items()}
    L = Launcher("v3")
    rows = []
    for make in (DriverPoolAlloc, CachingAlloc, ExactSizeCache, PycudaPoolAlloc):
        inner = make()
        if isinstance(inner, DriverPoolAlloc):
            inner.pool.trim(0)
            inner.pool.reset_peaks()
        c = Counted(inner)
        ok = True
        for _ in range(rounds):
            for b in BATCHES:
                _run_step(L, c, devs[b])
        sync()
        for b in BATCHES:
            ok &= compare_all(devs[b].outputs(), cases[b].expected(), cases[b].tolerance()).ok
        row = {"allocator": inner.name, "needed_peak_mb": c.peak / 2 ** 20, "ok": bool(ok),
               "steps": rounds * len(BATCHES)}
        if isinstance(inner, DriverPoolAlloc):
            s = inner.pool.stats()
            row.update(reserved_mb=s["peak_reserved_bytes"] / 2 ** 20, device_mallocs=None,
                       largest_free_mb=None)
        elif isinstance(inner, CachingAlloc):
            s = inner.pool.stats()
            row.update(reserved_mb=s["peak_reserved_bytes"] / 2 ** 20,
                       device_mallocs=s["device_mallocs"], hits=s["hits"],
                       largest_free_mb=s["largest_free_block"] / 2 ** 20,
                       rounding_mb=None, stats=s)
            inner.pool.close()
        elif isinstance(inner, ExactSizeCache):
            row.update(reserved_mb=inner.reserved / 2 ** 20, device_mallocs=inner.device_mallocs,
                       largest_free_mb=None)
            inner.close()
        else:
            managed = getattr(inner.pool, "managed_bytes", None)
            row.update(reserved_mb=None if managed is None else managed / 2 ** 20,
                       device_mallocs=None, largest_free_mb=None,
                       held_blocks=inner.pool.held_blocks)
            inner.pool.free_held()
        r = row.get("reserved_mb")
        row["fragmentation"] = None if not r else 1 - row["needed_peak_mb"] / r
        rows.append(row)
    return {"batches": list(BATCHES), "d": d_in, "h": hidden, "rounds": rounds, "rows": rows}


def _f(v, fmt):
    return "-" if v is None else format(v, fmt)


def extras(report, mode):
    if mode == "check":
        return
    costs = allocation_costs()
    report.record("allocation_costs", costs)
    rows = []
    for r in costs["rows"]:
        rows.append([r["allocator"], f"{r['step_ms']:.3f}", _f(r["calls_per_step"], ".0f"),
                     f"{r['alloc_us_per_step']:.1f}", _f(r["device_mallocs_per_step"], ".2f"),
                     "ok" if r["ok"] else "WRONG"])
        if not r["ok"]:
            report.failures.append(f"allocation costs: {r['allocator']} gave a wrong step")
    b, dd, hh = costs["size"]
    report.section(f"allocation cost per step at {b}x{dd}x{hh} (host timers, median of "
                   f"{costs['steps']} synchronized steps)", rows,
                   ["allocator", "step ms", "alloc+free calls", "us in alloc+free",
                    "cuMemAlloc calls", "output"])
    vb = varying_batches()
    report.record("varying_batches", vb)
    rows = []
    for r in vb["rows"]:
        rows.append([r["allocator"], f"{r['needed_peak_mb']:.1f}", _f(r["reserved_mb"], ".1f"),
                     _f(r["fragmentation"], ".1%"), _f(r["device_mallocs"], "d"),
                     _f(r.get("largest_free_mb"), ".1f"), "ok" if r["ok"] else "WRONG"])
        if not r["ok"]:
            report.failures.append(f"varying batches: {r['allocator']} gave a wrong step")
    report.section(f"memory held after {vb['rows'][0]['steps']} steps of varying batch "
                   f"({min(BATCHES)}-{max(BATCHES)}) at D={vb['d']} H={vb['h']} (MB)", rows,
                   ["allocator", "peak needed", "reserved (peak)", "fragmentation",
                    "cuMemAlloc calls", "largest free block", "output"])


# --- public function ----------------------------------------------------------------------------

def mlp_step(x, t, w1, w2, lr=LR, version=BEST):
    """One SGD step of the MLP o = gelu(x @ w1) @ w2 on the loss sum((o - t)^2) / (2B), on the
    GPU in float32. x, t: [B, D] (B >= 1); w1: [D, H]; w2: [H, D]; lr: a finite real.
    Returns {"dw1", "dw2", "w1_new", "w2_new"} (w_new = w - lr * dw). D = 0 or H = 0 gives
    empty arrays without a launch."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[B, D]")
    t = A.floats(t, "t", shape=x.shape, what="[B, D] like x")
    b, d = x.shape
    w1 = A.floats(w1, "w1", shape=(d, None), what="[D, H]")
    h = w1.shape[1]
    w2 = A.floats(w2, "w2", shape=(h, d), what="[H, D]")
    lr = A.real(lr, "lr")
    if b == 0:
        raise ValueError("x has no rows: the loss averages over the batch, so B must be >= 1")
    validate_size((b, d, h))
    if d == 0 or h == 0:
        return {"dw1": np.zeros((d, h), np.float32), "dw2": np.zeros((h, d), np.float32),
                "w1_new": w1.copy(), "w2_new": w2.copy()}
    case = H.Case((b, d, h), inputs={"x": x, "t": t, "w1": w1, "w2": w2},
                  outputs={"dw1": ((d, h), np.float32), "dw2": ((h, d), np.float32),
                           "w1_new": ((d, h), np.float32), "w2_new": ((h, d), np.float32)},
                  params={"lr": lr})
    return H.run(launch, version, case)
