"""Day 54 driver: row softmax of long rows, one block per row (v1), split over a persistent grid
with grid.sync() (v2), split over a thread-block cluster through distributed shared memory (v3,
v4), persistent clusters that bulk-copy the next rows into shared memory while the current one
is exchanged and written (v5); day 5's best and torch.softmax timed beside them on the same
device memory.

    from days.day54_cooperative_groups.driver import softmax
    y = softmax(x)                     # numpy in, numpy out (float32), any [rows, cols]

v2 needs a cooperative launch and v3-v5 a cluster launch, which pycuda cannot make: the kernels
are loaded and launched through common/launch.py (the driver API through ctypes).
"""
from pathlib import Path

import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

KERNEL = Path(__file__).resolve().parent / "kernel.cu"
DAY5 = H.load_driver(5)                 # day 5: block-per-row softmax, the baseline to beat
DAY5_ROW = f"day 5 {DAY5.BEST}"         # its best version, timed as a baseline row

VERSIONS = {
    "v1": "one block of 1024 per row: 32768 floats in registers, the rest read twice",
    "v2": "persistent grid, row split over blocks, partials in global memory + grid.sync()",
    "v3": "cluster of 8 blocks per row, partials through DSMEM (cooperative groups)",
    "v4": "cluster size by row length (1-16), mapa/ld.shared::cluster, split barrier",
    "v5": "persistent clusters: next rows' slices bulk-copied to shared memory (mbarriers) "
          "while the current row is exchanged and written",
}
BEST = "v4"
SIZE_HELP = "ROWSxCOLS, e.g. 256x65536"
SIZES = {"small": (16, 65536), "default": (256, 65536), "large": (1024, 131072)}
# widths 1, 2, 3 (head and tail only), 31, 33, 1000 (tiny rows: most blocks of a cluster hold
# nothing), 4099, 65536 (aligned), 65537 and 100003 (every row a different alignment),
# 131075, 262147 (past 16 x 256 x 16 floats: v4's 512-thread kernel), 600001 (longer than any
# kernel keeps on chip: the rest is read twice); rows 1 to 33
CHECK_SIZES = [(1, 1), (3, 2), (2, 3), (3, 31), (2, 33), (5, 1000), (7, 4099), (4, 65536),
               (3, 65537), (2, 100003), (33, 1024), (2, 131075), (1, 262147), (1, 600001)]
# few long rows (a block-per-row kernel has 256 / 64 blocks for 132 SMs), many long rows (a
# memory-bound stream), day 5's own long-row size, and an odd width
BENCH_SIZES = [(256, 65536), (1024, 65536), (64, 262144), (1024, 131072), (96, 100003)]
# CURRICULUM.md: the cluster softmax beats day 5's best on rows of 65536+ floats
BAR = [{"version": BEST, "vs_baseline": 1.0, "baseline": DAY5_ROW,
        "sizes": [s for s in BENCH_SIZES if s[1] >= 65536]}]

MAX_CLUSTER = 16                        # Hopper: 16 with the non-portable opt-in (8 portable)


def validate_size(size):
    rows, cols = size
    A.fits_int32("cols", cols, "columns")
    if rows * MAX_CLUSTER >= 2 ** 31:  # v4 launches up to 16 blocks a row in one grid dimension
        raise ValueError(f"{rows} rows is too many: a cluster launch of {MAX_CLUSTER} blocks a row "
                         f"takes at most {(2 ** 31 - 1) // MAX_CLUSTER} rows")


make_case = DAY5.make_case   # the same rows as day 5's (its best is the baseline to beat)


# --- which kernel -------------------------------------------------------------------------

V1 = ("softmax_v1_t1024_i8", 1, 1024, 8)
V2 = ("softmax_v2_grid_t256_i8", 256, 8)
V3_CLUSTER, V3_ITEMS = 8, (2, 4, 8, 16)
# v4: (cluster, threads, float4 a thread), in the order tried: the first that holds a block's
# share of the row in registers wins. From the H200 sweep (2026-11-26, .notes/day54_sweep_results.md):
# c8 256x8 is the best at 65536, c8 512x8 at 100003 and 131072 (better than 16 blocks of 256),
# and at 262144 c16 256x8 (re-reading half of each slice, from L2) beats every kernel that
# holds its slice; past 262144 floats the kernel that holds the most (unmeasured there).
V4_KERNELS = [(1, 256, 1), (1, 256, 2), (1, 256, 4), (1, 256, 8), (2, 256, 8), (4, 256, 8),
              (8, 256, 8), (8, 512, 8)]
V4_LONG, V4_LONG_VECS = (16, 256, 8), 65536   # rows up to 4 x 65536 (+3) floats
V4_LONGEST = (16, 512, 16)                    # longer rows
V4_EXTRA = [(2, 256, 16), (4, 256, 16), (8, 256, 16), (4, 512, 8), (16, 256, 16),  # the sweep's
            (16, 512, 8)]
V4_ALL = V4_KERNELS + [V4_LONG, V4_LONGEST] + V4_EXTRA

# v5: (cluster, threads, stages). The first of V5_KERNELS whose stage (a block's slice of a
# row, the bulk copy) is at most V5_STAGE_TARGET bytes; past all, the last one if its stages
# fit a block's shared memory; else v4's kernel. 65536 -> c8 (32 KB a stage, 64 KB a block,
# 3 blocks an SM); 100003 and 131072 -> c16 (25 / 32 KB); 262144 -> c16, 2 x 64 KB; 600001 -> v4.
V5_KERNELS = [(4, 256, 2), (8, 256, 2), (16, 256, 2)]
V5_EXTRA = [(8, 256, 3), (8, 512, 2), (16, 256, 3), (16, 256, 4), (16, 512, 2)]  # the sweep's
V5_ALL = V5_KERNELS + V5_EXTRA
V5_STAGE_TARGET = 32 * 1024
SMEM_MAX = 227 * 1024 - 1024   # dynamic shared memory a block (227 KB less room for the static)


def kernel_name(version: str, c: int, t: int, i: int) -> str:
    return f"softmax_{version}_c{c}_t{t}_i{i}"


def v5_name(c: int, t: int, stages: int) -> str:
    return f"softmax_v5_c{c}_t{t}_s{stages}"


def v5_smem(c: int, stages: int, cols: int) -> int:
    """v5's dynamic shared memory: STAGES buffers of the longest slice a row can give a block
    (ceil((cols // 4) / c) float4; kernel.cu computes the same `cap` and traps if short)."""
    return stages * H.cdiv(cols // 4, c) * 16


def v5_kernel_for(cols: int):
    """(kernel, cluster, threads, stages, dynamic shared bytes) of v5 at a width, or None when
    no candidate's stages fit a block's shared memory (v5 then runs v4's kernel)."""
    k = next((k for k in V5_KERNELS if v5_smem(k[0], 1, cols) <= V5_STAGE_TARGET), None)
    if k is None:
        k = V5_KERNELS[-1]
        if v5_smem(k[0], k[2], cols) > SMEM_MAX:
            return None
    c, t, st = k
    return v5_name(c, t, st), c, t, st, v5_smem(c, st, cols)


def kernel_for(version: str, cols: int) -> tuple[str, int, int, int]:
    """(kernel, cluster size, threads a block, float4 a thread) of v1, v3 or v4 at a width;
    for v5 (kernel, cluster, threads, stages), or v4's kernel where v5 falls back to it."""
    vecs = cols // 4  # a row's aligned float4 number at most this many
    if version == "v1":
        return V1
    if version == "v3":
        per = H.cdiv(vecs, V3_CLUSTER)
        i = next((i for i in V3_ITEMS if per <= 256 * i), V3_ITEMS[-1])
        return kernel_name("v3", V3_CLUSTER, 256, i), V3_CLUSTER, 256, i
    if version == "v4":
        k = next((k for k in V4_KERNELS if H.cdiv(vecs, k[0]) <= k[1] * k[2]), None)
        if k is None:
            k = V4_LONG if vecs <= V4_LONG_VECS else V4_LONGEST
        c, t, i = k
        return kernel_name("v4", c, t, i), c, t, i
    if version == "v5":
        plan = v5_kernel_for(cols)
        return kernel_for("v4", cols) if plan is None else plan[:4]
    raise ValueError(f"kernel_for: {version!r} is not v1, v3, v4 or v5")


def v2_plan(rows: int, cols: int, grid: int) -> tuple[int, int]:
    """(parts a row, rows a round) of v2 on a persistent grid of `grid` blocks: enough parts
    that a block's slice fits its registers (256 threads x 8 float4), at most the grid."""
    _, t, i = V2
    parts = max(1, min(H.cdiv(cols // 4, t * i), grid))
    return parts, grid // parts


def module():
    from common.launch import load

    return load(KERNEL)


_GRID: dict = {}


def v2_grid() -> int:
    """Blocks of v2 that are resident at once on the whole GPU: the cooperative grid."""
    if "v2" not in _GRID:
        from common.gpu import sm_count

        fn = module().function(V2[0], "PPiiPii")
        _GRID["v2"] = fn.max_blocks_per_sm(V2[1]) * sm_count()
    return _GRID["v2"]


def _prepared(d, key, make):
    """The marshalled launch of `key` on DeviceCase d, built once: a timing loop then pays one
    driver call a launch, not the argument packing (common/launch.py)."""
    cache = d.__dict__.setdefault("_day54_launches", {})
    if key not in cache:
        cache[key] = make()
    return cache[key]


def launch_kernel(name: str, cluster: int, threads: int, d, info=None):
    """One cluster launch of a v3/v4 kernel: rows x cluster blocks, clusters of (cluster, 1, 1)."""
    rows, cols = d.size
    fn = module().function(name, "PPiiP")
    _prepared(d, (name, cluster, threads, None if info is None else int(info)),
              lambda: fn.prepare_launch((rows * cluster,), (threads,), d.x, d.y, rows, cols, info,
                                        cluster=(cluster, 1, 1)))()


_CLUSTERS: dict = {}


def v5_max_clusters(name: str, c: int, t: int, smem: int) -> int:
    """Clusters of v5's kernel that run at once with `smem` bytes of dynamic shared memory
    (the occupancy calculator: blocks an SM by registers, threads and shared memory, clusters
    packed into GPCs): the persistent grid's size at most."""
    key = (name, smem)
    if key not in _CLUSTERS:
        fn = module().function(name, "PPiiP")
        _CLUSTERS[key] = fn.max_active_clusters((c * 1024,), (t,), (c, 1, 1), smem)
    return _CLUSTERS[key]


def launch_v5(name: str, c: int, t: int, smem: int, d, clusters: int | None = None, info=None):
    """One launch of a v5 kernel: a persistent grid of `clusters` clusters of c blocks (default:
    as many as run at once, at most one a row), `smem` bytes of dynamic shared memory."""
    rows, cols = d.size
    g = min(rows, v5_max_clusters(name, c, t, smem)) if clusters is None else int(clusters)
    if g < 1:
        raise RuntimeError(f"{name}: no cluster of {c} x {t} threads with {smem} bytes of shared "
                           f"memory fits on this GPU")
    fn = module().function(name, "PPiiP")
    _prepared(d, (name, g, smem, None if info is None else int(info)),
              lambda: fn.prepare_launch((g * c,), (t,), d.x, d.y, rows, cols, info, shared=smem,
                                        cluster=(c, 1, 1)))()


def launch(version, d, info=None):
    """Enqueue `version` on DeviceCase d. `info` (v3-v5, optional): a device int32 array of
    `rows` where each cluster's rank 0 writes the cluster size the hardware gave it."""
    version = A.version(version, VERSIONS)
    rows, cols = d.size
    if version == "v1":
        name, _, t, _ = V1
        fn = module().function(name, "PPii")
        _prepared(d, (name,), lambda: fn.prepare_launch((rows,), (t,), d.x, d.y, rows, cols))()
    elif version == "v2":
        grid = v2_grid()
        parts, per_round = v2_plan(rows, cols, grid)
        pairs = d.scratch("pairs", (rows * parts * 2,), np.float32)
        fn = module().function(V2[0], "PPiiPii")
        _prepared(d, (V2[0], int(pairs)), lambda: fn.prepare_launch(
            (grid,), (V2[1],), d.x, d.y, rows, cols, pairs, parts, per_round, cooperative=True))()
    elif version == "v5" and v5_kernel_for(cols) is not None:
        name, c, t, _, smem = v5_kernel_for(cols)
        launch_v5(name, c, t, smem, d, info=info)
    else:  # v3, v4 (and v5 on rows too long for its shared memory)
        name, c, t, _ = kernel_for("v4" if version == "v5" else version, cols)
        launch_kernel(name, c, t, d, info)


def cluster_sizes_seen(version: str, size) -> np.ndarray:
    """Run v3, v4 or v5 once at `size` and return, per row, %cluster_nctarank as its cluster's
    rank 0 read it: the number of blocks the hardware really put in the cluster (a test)."""
    from pycuda import gpuarray

    from common.gpu import driver

    case = make_case(size, np.random.default_rng(0))
    d = H.DeviceCase(case)
    info = gpuarray.zeros((size[0],), np.int32)
    launch(version, d, info=info.gpudata)
    driver().Context.synchronize()
    return info.get()


def baselines(d):
    out = {}

    def day5():
        DAY5.launch(DAY5.BEST, d)  # day 5's launch reads d.x, d.y and d.size, as this day's
        return d.array("y")        # returned: checked against the reference before timing
    out[DAY5_ROW] = day5
    torch = torch_or_none()
    if torch is not None:
        x = as_torch(d.array("x"))
        out["torch.softmax"] = lambda: torch.softmax(x, dim=-1)
    return out


# --- the cluster sizes side by side (extras) ------------------------------------------------

CLUSTER_SIZES = [(256, 65536), (64, 262144)]
CLUSTER_TITLE = "Cluster size (v4's kernel at each size, 256 threads)"


def cluster_candidates(cols: int) -> list[tuple[str, int, int, int]]:
    """For each cluster size 1-16 the v4 kernel of 256 threads with the fewest float4 a thread
    that hold a block's share of the row (or the most, when none does)."""
    out = []
    for c in (1, 2, 4, 8, 16):
        ks = sorted(k for k in V4_ALL if k[0] == c and k[1] == 256)
        per = H.cdiv(cols // 4, c)
        t, i = next(((t, i) for _, t, i in ks if per <= t * i), ks[-1][1:])
        out.append((kernel_name("v4", c, t, i), c, t, i))
    return out


def extras(report, mode):
    if mode == "check":
        return
    from common.runner import check_and_time

    rows, rec = {}, {}
    for size in CLUSTER_SIZES:
        case = make_case(size, np.random.default_rng(54))
        d = H.DeviceCase(case)
        for name, c, t, i in cluster_candidates(size[1]):
            r = check_and_time(report, f"{name} (cluster {c})",
                               lambda dd, name=name, c=c, t=t: launch_kernel(name, c, t, dd), case, d)
            fn = module().function(name, "PPiiP")
            clusters = fn.max_active_clusters((size[0] * c,), (t,), (c, 1, 1))
            rows.setdefault(c, [str(c)]).extend(
                [f"{1e3 * r['median_ms']:.1f}" + ("" if r["ok"] else " (WRONG)"), f"{t} x {i}",
                 str(clusters)])
            rec.setdefault(H.size_str(size), {})[str(c)] = {
                "kernel": name, "median_ms": r["median_ms"], "ok": r["ok"],
                "max_active_clusters": clusters}
    headers = ["cluster"]
    for s in CLUSTER_SIZES:
        headers += [f"{H.size_str(s)} us", f"{H.size_str(s)} threads x float4",
                    f"{H.size_str(s)} clusters at once"]
    report.section(CLUSTER_TITLE, list(rows.values()), headers)
    report.record("clusters", rec)


# --- public function ------------------------------------------------------------------------

def softmax(x, version=BEST):
    """Row softmax of a 2-D array [rows, cols] on the GPU, in float32 (other real dtypes are
    converted); any width. An empty array gives an empty result (nothing is launched)."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    validate_size(x.shape)
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": (x.shape, np.float32)})
    return H.run(launch, version, case)["y"]
