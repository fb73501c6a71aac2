"""Day 14 driver: the parallel reduction ladder, nine versions of sum(x) over float32.

    from days.day14_reduce_sum.driver import reduce_sum
    s = reduce_sum(x)                     # numpy in (any shape, flattened), np.float32 out
    s = reduce_sum(x, version="v3")       # any version of the ladder

The harness checks and times every version against the read-only ceiling (a sum reads n
floats and writes one); extras() adds the accuracy of float32 summation orders and what an
atomicAdd ending does to reproducibility.
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, torch_or_none
from common.gpu import device_info, driver

from . import reference

K = H.Kernels(__file__)
THREADS = 256       # kernel.cu's THREADS
BLOCKS_PER_SM = 8   # kernel.cu's BLOCKS_PER_SM: the resident blocks per SM of v7-v9

VERSIONS = {
    "v1": "interleaved, divergent tid % (2s)",
    "v2": "interleaved, strided index (bank conflicts)",
    "v3": "sequential addressing",
    "v4": "first add during load",
    "v5": "last warp unrolled (__syncwarp)",
    "v6": "warp shuffles",
    "v7": "grid-stride loop, two-pass",
    "v8": "float4 x4 in flight, 4 accumulators, two-pass",
    "v9": "v8 in one launch (last block sums)",
    "v10": "v9 reading contiguous 32 KB chunks",
}
# one tile per block, relaunched on the partial sums until one is left
TREE_VERSIONS = ("v1", "v2", "v3", "v4", "v5", "v6")
ELEMS_PER_BLOCK = {"v1": THREADS, "v2": THREADS, "v3": THREADS,
                   "v4": 2 * THREADS, "v5": 2 * THREADS, "v6": 2 * THREADS}

BEST = "v10"        # the fastest correct version at 2^28 in results/day14.json
V10_THREADS, V10_BLOCKS_PER_SM = 512, 4  # kernel.cu's V10_THREADS and V10_BLOCKS_PER_SM
CUB = "cupy.sum (CUB)"  # the library the bar is judged against (a baselines() name)

SIZE_HELP = "N floats, e.g. 2^28"
SIZES = {"small": (1000,), "default": (2 ** 28,), "large": (2 ** 30,)}
# 1; around one warp and one block (256 / 512 elements a block); a non-multiple of 4 (float4
# tail); sizes that need 2 and 3 passes of the tree versions; a few million
CHECK_SIZES = [(1,), (3,), (31,), (33,), (255,), (257,), (511,), (513,), (1000,), (65537,),
               (1000003,), (2 ** 22 + 5,)]
# 4 MB (launch-bound), 1 GB, and 1 GB + 3 floats: an odd size, so the float4 versions take
# their scalar tail and no grid divides it evenly
BENCH_SIZES = [(2 ** 20,), (2 ** 28,), (2 ** 28 + 3,)]
# CURRICULUM.md: best >= 90% of the read ceiling and at least as fast as CUB, at 2^28 and 2^28+3
BAR = [{"sizes": [(2 ** 28,), (2 ** 28 + 3,)], "pct": 90, "vs_baseline": 1.0, "baseline": CUB}]


def make_case(size, rng):
    (n,) = size
    # uniform in [0, 1): every term positive, no cancellation, so the relative error of the
    # scalar measures the summation order alone (see extras and the README)
    x = rng.random(n, dtype=np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((1,), np.float32)},
                  reference=lambda: {"y": np.array([reference.reduce_sum(x)])},
                  bytes=x.nbytes,       # read x once (the 4-byte result is negligible)
                  read_bytes=x.nbytes)  # it only reads: held to the read-only ceiling


def grid_blocks(n: int, per_thread: int) -> int:
    """v7-v9: a full wave (BLOCKS_PER_SM per SM), never more blocks than there is work."""
    return max(1, min(device_info()["sms"] * BLOCKS_PER_SM, H.cdiv(n, THREADS * per_thread)))


def passes(version: str, n: int) -> list[int]:
    """The grid of each launch of a tree version: n elements -> ... -> 1 block."""
    per_block = ELEMS_PER_BLOCK[version]
    grids = []
    while True:
        grids.append(H.cdiv(n, per_block))
        if grids[-1] == 1:
            return grids
        n = grids[-1]


def launch(version, d):
    A.version(version, VERSIONS)  # an unknown name is refused, never run as another version
    (n,) = d.size
    fn = K(f"reduce_{version}", "PPPPq" if version in ("v9", "v10") else "PPq")
    if version in TREE_VERSIONS:
        grids = passes(version, n)
        bufs = [d.scratch("a", grids[0]), d.scratch("b", grids[1] if len(grids) > 2 else 1)]
        src, count = d.x, n
        for k, g in enumerate(grids):
            dst = d.y if g == 1 else bufs[k % 2]  # ping-pong: a pass never reads what it writes
            fn.prepared_call((g, 1, 1), (THREADS, 1, 1), src, dst, count)
            src, count = dst, g
    elif version in ("v7", "v8"):
        g = grid_blocks(n, 1 if version == "v7" else 16)
        if g == 1:
            fn.prepared_call((1, 1, 1), (THREADS, 1, 1), d.x, d.y, n)
        else:
            part = d.scratch("a", g)
            fn.prepared_call((g, 1, 1), (THREADS, 1, 1), d.x, part, n)  # G partial sums
            fn.prepared_call((1, 1, 1), (THREADS, 1, 1), part, d.y, g)  # one block sums them
    elif version == "v9":
        g = grid_blocks(n, 16)
        # v9's ticket starts at 0 and the kernel leaves it at 0 again
        fn.prepared_call((g, 1, 1), (THREADS, 1, 1), d.x, d.scratch("a", g),
                         d.scratch("ticket", 1, np.uint32, zero=True), d.y, n)
    elif version == "v10":  # 16 floats a thread a step, as many blocks as that needs, <= 4 an SM
        g = max(1, min(device_info()["sms"] * V10_BLOCKS_PER_SM, H.cdiv(n, V10_THREADS * 16)))
        fn.prepared_call((g, 1, 1), (V10_THREADS, 1, 1), d.x, d.scratch("a", g),
                         d.scratch("ticket", 1, np.uint32, zero=True), d.y, n)
    else:
        raise ValueError(f"unknown version {version!r}")


def launch_atomic(d):
    """reduce_v7_atomic: zero y, then every block atomicAdds its partial (one launch)."""
    (n,) = d.size
    driver().memset_d32(d.y, 0, 1)
    K("reduce_v7_atomic", "PPq").prepared_call((grid_blocks(n, 1), 1, 1), (THREADS, 1, 1),
                                               d.x, d.y, n)


def baselines(d):
    out = {}
    torch = torch_or_none()
    if torch is not None:
        x = as_torch(d.array("x"))
        out["torch.sum"] = lambda: torch.sum(x)
    cupy = cupy_or_none()
    if cupy is not None:
        xc = cupy.asarray(d.array("x"))  # a view through __cuda_array_interface__
        out[CUB] = lambda: cupy.sum(xc)
    return out


def reduce_sum(x, version=BEST) -> np.float32:
    """sum(x) of a real array on the GPU, accumulated in float32; x of any shape is flattened.

    Integer and float64 input is converted to float32 first; complex, boolean and string
    input is refused (TypeError), as is an unknown version (ValueError, listing them). An empty
    x returns np.float32(0), the sum of nothing, without launching anything."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x").ravel()
    if x.size == 0:
        return np.float32(0)
    case = H.Case((x.size,), inputs={"x": x}, outputs={"y": ((1,), np.float32)})
    return H.run(launch, version, case)["y"][0]


# --- extras: the accuracy of float32 orders, and what atomics do to reproducibility ----------

def accuracy_rows(n: int = 2 ** 26, seed: int = 14, gpu_versions=("v3", "v7", "v9")):
    """Relative error of float32 summation orders vs the float64 sum, on n uniform [0, 1)
    values: numpy's sequential / pairwise / tree / Kahan, then the given GPU versions."""
    x = np.random.default_rng(seed).random(n, dtype=np.float32)
    rows = reference.accuracy_table(x)
    exact = reference.reduce_sum(x)
    if gpu_versions:
        case = H.Case((n,), inputs={"x": x}, outputs={"y": ((1,), np.float32)})
        d = H.DeviceCase(case)
        for v in gpu_versions:
            launch(v, d)
            y = d.array("y").get()[0]
            rows.append([f"GPU {v} ({VERSIONS[v]})", f"{float(y):.1f}",
                         f"{reference.relative_error(y, exact):.2e}"])
    return rows


def atomic_rows(n: int = 2 ** 26, runs: int = 20, seed: int = 14):
    """The two-pass v7 vs reduce_v7_atomic, run `runs` times each on the same input: how many
    distinct float32 results each gives, and their spread."""
    from common.timing import time_fn

    x = np.random.default_rng(seed).random(n, dtype=np.float32)
    exact = reference.reduce_sum(x)
    d = H.DeviceCase(H.Case((n,), inputs={"x": x}, outputs={"y": ((1,), np.float32)}))
    rows = []
    for name, fn in [("v7 two-pass", lambda: launch("v7", d)),
                     ("v7 + atomicAdd per block", lambda: launch_atomic(d))]:
        vals = []
        for _ in range(runs):
            fn()
            vals.append(d.array("y").get()[0])
        t = time_fn(fn)
        bits = {v.view(np.uint32).item() for v in vals}
        errs = [reference.relative_error(v, exact) for v in vals]
        rows.append([name, f"{t.median_ms:.3f} ms", f"{len(bits)} of {runs}",
                     f"{min(errs):.2e} .. {max(errs):.2e}"])
    return rows


def extras(report, mode):
    if mode == "check":
        return
    rows = accuracy_rows()
    report.section("float32 summation order vs the float64 sum, 2^26 values uniform in [0, 1)",
                   rows, ["method", "result", "relative error"])
    report.record("accuracy", rows)
    rows = atomic_rows()
    report.section("deterministic two-pass vs one atomicAdd per block (2^26 floats, 20 runs)",
                   rows, ["final step", "median time", "distinct results", "relative error"])
    report.record("atomics", rows)
