"""Day 24 driver: many small tasks (the softmax of each segment of a flat array), five ways of
getting them to the GPU: a launch each, a block each, and a persistent grid with a static split,
a work queue, and a largest-first queue.

    from days.day24_persistent_threads.driver import segment_softmax
    y = segment_softmax(x, lengths)     # y[seg] = softmax(x[seg]) for consecutive segments
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256
UNROLL = 4
# every index a kernel forms (begin + i, i + 3 x 256 past the end of a task) stays below 2^31
MAX_ELEMENTS = 2 ** 31 - 1 - UNROLL * THREADS
# task indices (t + G in v3, the queue's counter running G past the last task) stay below 2^31
MAX_TASKS = 2 ** 31 - 2 ** 20

VERSIONS = {
    "v1": "one launch per task (host loop)",
    "v2": "one launch, one block per task",
    "v3": "persistent grid, static split (task b, b+G, ...)",
    "v4": "persistent grid, atomic work queue",
    "v5": "work queue, tasks largest first",
}
BEST = "v5"
SIZE_HELP = ("TASKSxSCALExKIND: KIND 1 = lengths uniform in [1, 2 SCALE), KIND 2 = power-law "
             "lengths (SCALE/6 x Pareto(1.2), at most 16 SCALE), e.g. 10000x32x1")
SIZES = {"small": (100, 64, 1), "default": (20000, 1024, 2), "large": (50000, 1024, 2)}
# one task of one element; tasks shorter than a warp, than a block, longer than a block's
# UNROLL x 256 = 1024 elements; a task count below the persistent grid (v3-v5 blocks idle) and
# above it; skewed lists (one task up to 16x the scale)
CHECK_SIZES = [(1, 1, 1), (1, 1, 2), (3, 33, 1), (100, 7, 2), (257, 100, 1), (33, 5000, 2),
               (1000, 3, 1), (2000, 1025, 2), (5, 3000, 1)]
# the launch-bound case (10000 tiny tasks), uniform mid-size tasks, and the skewed case
BENCH_SIZES = [(10000, 32, 1), (10000, 1024, 1), (20000, 1024, 2)]
LAUNCH_BOUND = (10000, 32, 1)
SKEWED = (20000, 1024, 2)

# CURRICULUM.md: the launch-bound case >= 3x faster persistent than one launch per task; the
# balanced queue beats the static split on skewed tasks.
BAR = [{"sizes": [LAUNCH_BOUND], "version": "v4", "over": ("v1", 3.0)},
       {"sizes": [SKEWED], "version": "v4", "over": ("v3", 1.0)},
       {"sizes": [SKEWED], "version": "v5", "over": ("v3", 1.0)}]


def validate_size(size):
    tasks, scale, kind = size
    if kind not in (1, 2):
        raise ValueError(f"KIND must be 1 (uniform lengths) or 2 (power-law lengths), got {kind}")
    if tasks > MAX_TASKS:
        raise ValueError(f"{tasks} tasks: at most 2^31 - 2^20 (task indices are 32-bit ints)")
    if tasks * 2 * scale > MAX_ELEMENTS:  # uniform: at most 2 SCALE a task; skewed: mean < SCALE
        raise ValueError(f"{tasks} tasks of scale {scale} may pass 2^31 elements: the kernels "
                         "index the flat array with 32-bit ints")


def _workload(lengths, rng, scale=3.0):
    lengths = np.asarray(lengths, dtype=np.int64)
    off = reference.offsets(lengths)
    n = int(off[-1])
    if n > MAX_ELEMENTS:
        raise ValueError(f"{n} elements: the kernels index the flat array with 32-bit ints "
                         f"(at most {MAX_ELEMENTS})")
    x = rng.standard_normal(n, dtype=np.float32) * np.float32(scale)
    return x, off.astype(np.int32), reference.largest_first(lengths).astype(np.int32)


def make_case(size, rng):
    tasks, scale, kind = size
    lengths = reference.task_lengths(tasks, scale, kind, rng)
    x, off, order = _workload(lengths, rng)
    return H.Case(size, inputs={"x": x, "off": off, "order": order},
                  outputs={"y": ((x.size,), np.float32)},
                  reference=lambda: {"y": reference.segment_softmax(x, lengths)},
                  bytes=2 * x.nbytes + off.nbytes,      # read x and the offsets, write y
                  read_bytes=x.nbytes + off.nbytes,
                  params={"tasks": tasks})


def persistent_grid(version: str) -> int:
    """v3-v5: SMs x the blocks of the kernel that fit on one SM (one full wave)."""
    from common.gpu import blocks_per_sm, device_info

    fn = K(_KERNELS[version])
    return (device_info()["sms"] or 132) * blocks_per_sm(fn, THREADS)


_KERNELS = {"v1": "seg_softmax_v1_task", "v2": "seg_softmax_v2_block", "v3": "seg_softmax_v3_static",
            "v4": "seg_softmax_v4_queue", "v5": "seg_softmax_v5_lpt"}


def launch(version, d, grid=None):
    """Enqueue `version` on DeviceCase d. `grid` overrides v3-v5's persistent grid (the sweep)."""
    A.version(version, VERSIONS)  # an unknown name is refused, never run as another version
    tasks = d.params["tasks"]
    block = (THREADS, 1, 1)
    if version == "v1":
        fn = K(_KERNELS["v1"], "PPPi")
        for t in range(tasks):  # T launches: the launch-bound baseline
            fn.prepared_call((1, 1, 1), block, d.x, d.y, d.off, t)
        return
    if version == "v2":
        K(_KERNELS["v2"], "PPPi").prepared_call((tasks, 1, 1), block, d.x, d.y, d.off, tasks)
        return
    g = grid or persistent_grid(version)
    if version == "v3":
        K(_KERNELS["v3"], "PPPi").prepared_call((g, 1, 1), block, d.x, d.y, d.off, tasks)
        return
    from common.gpu import driver

    counter = d.scratch("counter", (1,), np.int32)
    driver().memset_d32_async(counter, 0, 1)  # the queue starts at ticket 0 on every launch
    if version == "v4":
        K(_KERNELS["v4"], "PPPiP").prepared_call((g, 1, 1), block, d.x, d.y, d.off, tasks, counter)
    else:
        K(_KERNELS["v5"], "PPPPiP").prepared_call((g, 1, 1), block, d.x, d.y, d.off, d.order, tasks,
                                                  counter)


def baselines(d):
    """torch, as a user would write a ragged softmax without a custom kernel: segment max and
    sum with torch.segment_reduce, broadcast back with repeat_interleave (output_size given, so
    nothing waits on the host)."""
    torch = torch_or_none()
    if torch is None or not hasattr(torch, "segment_reduce"):
        return {}
    x = as_torch(d.array("x"))
    lengths = torch.diff(as_torch(d.array("off")).long())
    n = x.numel()

    def torch_segment_softmax():
        m = torch.segment_reduce(x, "max", lengths=lengths)
        e = torch.exp(x - torch.repeat_interleave(m, lengths, output_size=n))
        s = torch.segment_reduce(e, "sum", lengths=lengths)
        return e / torch.repeat_interleave(s, lengths, output_size=n)

    return {"torch segment_reduce": torch_segment_softmax}


def segment_softmax(x, lengths, version=BEST):
    """y[seg] = softmax(x[seg]) for consecutive segments of a 1-D float array, in float32:
    segment t has lengths[t] elements (integers >= 0 that add up to len(x)). Every segment is
    an independent task. An empty x gives an empty y (nothing is launched)."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=1, what="[n]")
    lengths = A.integers(lengths, "lengths", low=0, ndim=1, what="[tasks]", dtype=np.int64)
    if int(lengths.sum()) != x.size:
        raise ValueError(f"lengths add up to {int(lengths.sum())} but x has {x.size} elements")
    if x.size == 0:
        return np.empty(0, np.float32)
    if x.size > MAX_ELEMENTS:
        raise ValueError(f"x has {x.size} elements: the kernels index it with 32-bit ints "
                         f"(at most {MAX_ELEMENTS})")
    if lengths.size > MAX_TASKS:
        raise ValueError(f"{lengths.size} tasks: at most 2^31 - 2^20 (task indices are 32-bit ints)")
    off = reference.offsets(lengths).astype(np.int32)
    order = reference.largest_first(lengths).astype(np.int32)
    case = H.Case((lengths.size, 1, 1), inputs={"x": x, "off": off, "order": order},
                  outputs={"y": ((x.size,), np.float32)}, params={"tasks": lengths.size})
    return H.run(launch, version, case)["y"]


def extras(report, mode):
    """The two figures the bar reads, side by side: persistent over launch-per-task on the
    launch-bound case, and queue over static split on the skewed case (from the bench rows)."""
    if mode == "check":
        return
    report.say("\n(the persistent grid: "
               f"{persistent_grid('v4')} blocks = SMs x blocks of 256 threads that fit on an SM)")
    report.record("persistent_grid", persistent_grid("v4"))
