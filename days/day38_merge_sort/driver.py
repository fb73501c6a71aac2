"""Day 38 driver: a stable merge sort of uint32 keys (and of key-value pairs), eight versions.

    from days.day38_merge_sort.driver import sort, argsort_stable, sort_pairs
    y = sort(x)                    # numpy in, numpy out; uint32, int32 or float32 keys
    i = argsort_stable(x)          # == np.argsort(x, kind="stable") (int64)
    k, v = sort_pairs(x, values)   # values (any 4-byte dtype) follow their keys, stably

A size is (n, dist, words): n keys drawn from distribution `dist`, sorted alone (words = 1) or
with a 32-bit value each (words = 2: the values are 0..n-1, so the sorted values are the
stable argsort and any stability slip shows).
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, cupy_or_none, short_kernel_name, torch_or_none

from . import reference

K = H.Kernels(__file__)

VERSIONS = {
    "v1": "a thread per output, co-rank by binary search in DRAM, a launch per level",
    "v2": "1024-key tiles sorted in smem, then 2-way passes: a block per 1024 outputs",
    "v3": "16 keys a thread: 4096-key runs, serial merges, partition kernel, 16-B loads",
    "v4": "16384-key runs, 4-way passes (two levels a trip), exact 4-way co-rank",
    "v5": "v4 with each thread's 16 loads in flight together (v4 had one)",
    "v6": "v5 with tiles cut at sampled splitters: one short partition launch a pass",
    "v7": "v6 with fewer instructions a key: Batcher network, merges against reversed runs",
    "v8": "v7 with 8-way passes (three levels a trip): 4 passes at 2^26 instead of 6",
}
BEST = "v7"   # fastest at both 2^26 sizes (H200, 2026-11-26): 0.63x cupy.sort on random keys

DISTS = {1: "uniform random uint32", 2: "16 distinct keys (0..15)", 3: "already sorted",
         4: "reversed (descending)", 5: "all equal"}
ALL_EQUAL_KEY = 0x9E3779B9  # not 0xFFFFFFFF: poisoned outputs read as that key
SIZE_HELP = ("NxDISTxWORDS: N keys; DIST 1 random, 2 only 16 distinct keys, 3 sorted, 4 reversed, "
             "5 all equal; WORDS 1 keys only, 2 keys + values (each key's index). E.g. 2^26x1x1")
SIZES = {"small": (1000, 1, 2), "default": (2 ** 26, 1, 1), "large": (2 ** 28, 1, 1)}
# Every distribution and both widths at lengths around every tile: 1, 2, 31, 33; 1024 (v2's
# tile), 4096 (v3), 8192 and 16384 (v4's merge tiles and first runs) and one past or short;
# five v4 runs (a 4-way group and a group of one), 3 * 16384 + 5 (a group with a short last run);
# 1000003 and 2^20 + 1 (several passes, ragged last groups at every level)
CHECK_SIZES = [(1, 1, 1), (1, 1, 2), (2, 4, 2), (31, 1, 2), (33, 2, 2), (33, 5, 1), (1000, 3, 2),
               (1023, 1, 1), (1025, 2, 2), (4095, 4, 2), (4097, 1, 2), (8193, 2, 1),
               (16383, 1, 2), (16385, 5, 2), (5 * 16384, 1, 2), (3 * 16384 + 5, 2, 2),
               (100003, 4, 1), (1000003, 1, 2), (1000003, 2, 1), (2 ** 20 + 1, 3, 2),
               (2 ** 20 + 1, 5, 1), (2 ** 20 + 1, 4, 2)]
# 2^26 random keys (the bar), the same length with heavy duplicates, and key-value pairs at an
# awkward length (no multiple of any tile)
BENCH_SIZES = [(2 ** 26, 1, 1), (2 ** 26, 2, 1), (10_000_019, 1, 2)]
CUPY_SORT, CUPY_ARGSORT, TORCH_SORT = "cupy.sort", "cupy.argsort", "torch.sort(stable=True)"
# CURRICULUM.md: >= 50% of CuPy/CUB's sort throughput at 2^26 keys (same keys, same memory)
BAR = [{"sizes": [(2 ** 26, 1, 1)], "vs_baseline": 0.5, "baseline": CUPY_SORT}]

N_MAX = 2 ** 30          # 32-bit indices with headroom for 4 runs past a group start
ITEMS = 16               # keys a thread in v3 and v4 (kernel.cu: ITEMS)
V2_TILE, V2_THREADS = 1024, 256
V3_THREADS = 256         # v3: runs of 4096, merge tiles of 4096
# v4: (threads of the block sort, keys a thread there, threads of the 4-way merge), by WORDS
V4 = {1: (512, 32, 256), 2: (512, 16, 256)}   # the sweep (H200, 2026-11-26): .notes/day38_sweep_results.md
# instantiated in kernel.cu: block sorts of 16 keys a thread (and 512 x 32 for keys), merges
V4_BLOCKS, V4_MERGES = ((256, 16), (512, 16), (1024, 16), (512, 32)), (256, 512, 1024)
PARTITION_THREADS = 64   # partition kernels: small blocks spread their dependent-load chains over all SMs
# v5: v4's plan and block sort, its merge kernel with loads in flight (merge threads 256 or 512)
V5 = {1: (512, 32, 256), 2: (512, 16, 256)}
V5_MERGES = (256, 512)
# v6: (block-sort threads, keys a thread there, merge threads, S = keys between samples), by WORDS.
# A merge block holds up to T = 16 x threads keys; tiles are cut every K samples with
# (K + 3) S <= T, so K = T / S - 3 (kernel.cu: rank_samples).
V6 = {1: (512, 32, 512, 512), 2: (512, 16, 512, 512)}
V6_MERGES = (256, 512)
RANK_THREADS = 128
# v7 and v8: the same four numbers, and optionally a fifth, keys a thread in the merge (16, or 32
# for keys: sort_v7_merge_t256_i32_keys). Keys sort their blocks with sort_v7_block_t{256,512}_i32_keys
# (32 keys a thread), pairs with v4's block sorts. A tile's first level gives each of its WAYS/2
# pairs of runs whole threads, so K leaves (WAYS/2 - 1) threads' keys of slack (vn_k).
# The rank kernel costs about (n / S) (WAYS - 1) x ~6 distinct cache lines a pass (the lanes of a
# warp share only the top of their search paths), so S stays >= 256; tiles of 8192 keys keep K S
# at 75% of the tile or more.
V7 = {1: (512, 32, 256, 512, 32), 2: (512, 16, 512, 512)}
V8 = {1: (512, 32, 256, 256, 32), 2: (512, 16, 512, 256)}
VN_MERGES = (256, 512)
V7_BLOCKS = (256, 512)


def validate_size(size):
    n, dist, words = size
    if n > N_MAX:
        raise ValueError(f"n = {n} is too long: the kernels index with 32-bit integers and take "
                         f"at most 2^30 = {N_MAX} keys")
    if dist not in DISTS:
        raise ValueError(f"DIST must be one of 1-5 ({'; '.join(f'{k} {v}' for k, v in DISTS.items())}), "
                         f"got {dist}")
    if words not in (1, 2):
        raise ValueError(f"WORDS must be 1 (keys only) or 2 (keys and values), got {words}")


def make_keys(n: int, dist: int, rng) -> np.ndarray:
    if dist == 2:
        return rng.integers(0, 16, n, dtype=np.uint32)
    if dist == 5:
        return np.full(n, ALL_EQUAL_KEY, np.uint32)
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    if dist == 3:
        x.sort()
    elif dist == 4:
        x = np.ascontiguousarray(np.sort(x)[::-1])
    return x


def make_case(size, rng):
    n, dist, words = size
    validate_size(size)
    x = make_keys(n, dist, rng)
    if words == 1:
        return H.Case(size, inputs={"x": x}, outputs={"keys": ((n,), np.uint32)},
                      reference=lambda: {"keys": reference.sort_keys(x)},
                      bytes=2 * x.nbytes, read_bytes=x.nbytes)  # read the keys, write them
    v = np.arange(n, dtype=np.uint32)

    def ref():
        order = reference.argsort_stable(x)
        return {"keys": x[order], "idx": order}

    return H.Case(size, inputs={"x": x, "v": v},
                  outputs={"keys": ((n,), np.uint32), "idx": ((n,), np.uint32)},
                  reference=ref, bytes=4 * x.nbytes, read_bytes=2 * x.nbytes)


# --- the plan: which runs each pass merges ------------------------------------------------------

def first_run(version: str, words: int) -> int:
    """Keys a run holds after the block sort (v1 has none: runs of 1)."""
    return {"v1": 1, "v2": V2_TILE, "v3": V3_THREADS * ITEMS,
            "v4": V4[words][0] * V4[words][1], "v5": V5[words][0] * V5[words][1],
            "v6": V6[words][0] * V6[words][1], "v7": V7[words][0] * V7[words][1],
            "v8": V8[words][0] * V8[words][1]}[version]


def merge_tile(version: str, words: int) -> int:
    """Outputs a block of a merge pass writes (v6: at most)."""
    return {"v1": 256, "v2": V2_TILE, "v3": V3_THREADS * ITEMS, "v4": V4[words][2] * ITEMS,
            "v5": V5[words][2] * ITEMS, "v6": V6[words][2] * ITEMS, "v7": V7[words][2] * ITEMS,
            "v8": V8[words][2] * ITEMS}[version]


def ways(version: str) -> int:
    """Runs a merge pass merges into one."""
    return {"v4": 4, "v5": 4, "v6": 4, "v7": 4, "v8": 8}.get(version, 2)


def pass_lengths(version: str, n: int, words: int = 1, first: int | None = None) -> list[int]:
    """The run length L before each merge pass: v1-v3 merge pairs (L -> 2L), v4 fours (L -> 4L).
    v1 always makes one pass (a single key is copied by it)."""
    L = first or first_run(version, words)
    way = ways(version)
    out = []
    while L < n:
        out.append(L)
        L *= way
    return out or ([1] if version == "v1" else [])


def trips(version: str, n: int, words: int = 1) -> int:
    """Passes over the whole array in DRAM: the block sort (v2-v4) plus one per merge pass."""
    return len(pass_lengths(version, n, words)) + (version != "v1")


def destinations(steps: int) -> list[str]:
    """Where each of `steps` passes writes, alternating so that the last writes the output:
    'out' or 'tmp'. The input is only ever read."""
    return ["out" if (steps - 1 - k) % 2 == 0 else "tmp" for k in range(steps)]


def smem_bytes(threads: int, words: int, items: int = ITEMS) -> int:
    """kernel.cu's smem_words: a padded tile of keys (and one of values), with room for the reads
    a merge makes past the end of its tile."""
    t = threads * items + items
    return 4 * (t + (t >> 5) + 1) * words


def v4_block_kernel(threads: int, items: int, suffix: str) -> str:
    return f"sort_v4_block_t{threads}_{suffix}" if items == ITEMS else \
        f"sort_v4_block_t{threads}_i{items}_{suffix}"


def v6_plan(n: int, L: int, S: int, K: int, way: int = 4) -> tuple[int, int, int]:
    """v6 at run length L: (samples, tiles of a full group Q, tiles in all). A group of `way` runs
    has ceil(keys / S) samples and ceil(samples / K) tiles."""
    G = way * L
    Q = H.cdiv(G // S, K)
    full, rem = divmod(n, G)
    return H.cdiv(n, S), Q, full * Q + (H.cdiv(H.cdiv(rem, S), K) if rem else 0)


def vn_k(merge_threads: int, S: int, way: int = 4, slack: int = 0, items: int = ITEMS) -> int:
    """Samples a tile starts apart (v6-v8): the most K with K S + (way - 1)(S - 1) keys, a tile's
    largest (kernel.cu: rank_samples), within the block's items x threads less `slack` threads'
    keys."""
    return ((merge_threads - slack) * items - (way - 1) * (S - 1)) // S


def v6_k(merge_threads: int, S: int) -> int:
    return vn_k(merge_threads, S)


def tile_smem_bytes(threads: int, words: int, items: int = ITEMS) -> int:
    """kernel.cu's tile_words (v7, v8): a guard of 64 words, the padded tile, per word of a key."""
    T = threads * items
    return 4 * (64 + T + items + ((T + items) >> 5) + 1) * words


def table_entries(n: int, L: int, T: int) -> tuple[int, int]:
    """v4: (entries per side of a group E, entries in all) of the co-rank table at run length L."""
    E = H.cdiv(2 * L, T) + 1
    return E, H.cdiv(n, 4 * L) * 2 * E


# --- launching ----------------------------------------------------------------------------------

def _aligned(*ptrs):
    """v5 and v6 store whole uint4s: every buffer must start on 16 bytes (device allocations do)."""
    for p in ptrs:
        if int(p) % 16:
            raise ValueError(f"device buffer at {int(p):#x} is not 16-byte aligned")


def launch(version, d, v4=None, cfg=None):
    """Sort d.x (and carry d.v) into d.keys (and d.idx). `v4` = (block-sort threads, keys a
    thread there, merge threads) overrides V4; `cfg` overrides V5 (same three) or V6 (and S)
    (the sweep)."""
    A.version(version, VERSIONS)  # an unknown name never runs another version's kernel
    n, _, words = d.size
    pairs = words == 2
    suffix = "pairs" if pairs else "keys"
    x, v = d.x, (d.v if pairs else 0)
    out = {"out": (d.keys, d.idx if pairs else 0)}
    out["tmp"] = (d.scratch("tmp_keys", (n,), np.uint32),
                  d.scratch("tmp_vals", (n,), np.uint32) if pairs else 0)
    if version in ("v6", "v7", "v8"):
        return _launch_cut(version, d, x, v, out, suffix,
                           cfg or {"v6": V6, "v7": V7, "v8": V8}[version][words])
    if version == "v5":
        version, v4 = "v4", cfg or V5[words]  # v4's plan; only the merge kernel differs
        merge_name = f"sort_v5_merge_t{v4[2]}_{suffix}"
        _aligned(x, v, *out["out"], *out["tmp"])
    else:
        merge_name = None

    if version == "v1":
        widths = pass_lengths("v1", n)
        src = (x, v)
        fn = K(f"sort_v1_merge_{suffix}", "PPPPii")
        for w, dst in zip(widths, destinations(len(widths))):
            fn.prepared_call((H.cdiv(n, 256), 1, 1), (256, 1, 1), *src, *out[dst], n, w)
            src = out[dst]
        return

    if version == "v2":
        block, merge, merge_threads = (K(f"sort_v2_block_{suffix}", "PPPPi"),
                                       K(f"sort_v2_merge_{suffix}", "PPPPii"), V2_THREADS)
        T0 = T = V2_TILE
        bthreads = V2_THREADS
        bsmem = 0
    elif version == "v3":
        T0 = T = V3_THREADS * ITEMS
        bthreads = merge_threads = V3_THREADS
        bsmem = smem_bytes(V3_THREADS, words)
        block = K(f"sort_v3_block_{suffix}", "PPPPi", dynamic_smem=bsmem)
        merge = K(f"sort_v3_merge_{suffix}", "PPPPiPi", dynamic_smem=bsmem)
    else:
        bthreads, bitems, merge_threads = v4 or V4[words]
        T0, T = bthreads * bitems, merge_threads * ITEMS
        if T > 2 * T0:
            raise ValueError(f"v4 needs merge tiles of at most twice the first runs ({T} > 2 x {T0})")
        bsmem = smem_bytes(bthreads, words, bitems)
        block = K(v4_block_kernel(bthreads, bitems, suffix), "PPPPi", dynamic_smem=bsmem)
        merge = K(merge_name or f"sort_v4_merge_t{merge_threads}_{suffix}", "PPPPiPi",
                  dynamic_smem=smem_bytes(merge_threads, words))

    lengths = pass_lengths(version, n, words, first=T0)
    dests = destinations(1 + len(lengths))
    block.prepared_call((H.cdiv(n, T0), 1, 1), (bthreads, 1, 1), x, v, *out[dests[0]], n,
                        shared_size=bsmem)
    src = out[dests[0]]
    tiles = H.cdiv(n, T)
    grid_p = (H.cdiv(tiles, PARTITION_THREADS), 1, 1)
    if version == "v3":
        part = d.scratch("part", (tiles,), np.int32)
        partition = K("sort_v3_partition", "PiiiPi")
    if version == "v4":
        most = max((table_entries(n, L, T)[1] for L in lengths), default=1)
        tab = d.scratch("table", (most, 4), np.uint32)
        split = d.scratch("split", (tiles, 4), np.int32)
        table, splits = K("sort_v4_table", "PiiiiPi"), K("sort_v4_split", "PiiiiPPi")
    for L, dst in zip(lengths, dests[1:]):
        if version == "v2":
            merge.prepared_call((tiles, 1, 1), (V2_THREADS, 1, 1), *src, *out[dst], n, L)
        elif version == "v3":
            partition.prepared_call(grid_p, (PARTITION_THREADS, 1, 1), src[0], n, L, T, part, tiles)
            merge.prepared_call((tiles, 1, 1), (merge_threads, 1, 1), *src, *out[dst], n, part, L,
                                shared_size=bsmem)
        else:
            E, entries = table_entries(n, L, T)
            table.prepared_call((H.cdiv(entries, PARTITION_THREADS), 1, 1), (PARTITION_THREADS, 1, 1),
                                src[0], n, L, T, E, tab, entries)
            splits.prepared_call(grid_p, (PARTITION_THREADS, 1, 1), src[0], n, L, T, E, tab, split,
                                 tiles)
            merge.prepared_call((tiles, 1, 1), (merge_threads, 1, 1), *src, *out[dst], n, split, L,
                                shared_size=smem_bytes(merge_threads, words))
        src = out[dst]


def cut_plan(version: str, cfg) -> tuple[int, int, int]:
    """(first run, merge tile capacity, K) of v6-v8 with cfg = (block threads, keys a thread
    there, merge threads, S[, keys a thread in the merge])."""
    bthreads, bitems, mthreads, S = cfg[:4]
    mitems = cfg[4] if len(cfg) > 4 else ITEMS
    way = ways(version)
    slack = 0 if version == "v6" else way // 2 - 1
    return bthreads * bitems, mthreads * mitems, vn_k(mthreads, S, way, slack, mitems)


def merge_kernel(version: str, cfg, suffix: str) -> str:
    mitems = cfg[4] if len(cfg) > 4 else ITEMS
    if mitems == ITEMS:
        return f"sort_{version}_merge_t{cfg[2]}_{suffix}"
    if version not in ("v7", "v8") or suffix != "keys" or mitems != 32:
        raise ValueError(f"{version} merges {suffix} 16 a thread (v7 and v8 keys also 32), not {mitems}")
    return f"sort_{version}_merge_t{cfg[2]}_i32_keys"


def block_kernel(version: str, bthreads: int, bitems: int, suffix: str) -> str:
    if version in ("v7", "v8") and suffix == "keys":
        if bitems != 32:
            raise ValueError(f"{version} sorts blocks of keys 32 a thread, not {bitems}")
        return f"sort_v7_block_t{bthreads}_i32_keys"
    return v4_block_kernel(bthreads, bitems, suffix)


def _launch_cut(version, d, x, v, out, suffix, cfg):
    """Block sort, then per pass: the rank kernel (a thread per sample: its rank among its group's
    samples, and for every K-th the exact cut) and the merge (a block per tile). v6: 4-way passes
    on v5's tile code; v7: 4-way on mergeN_tile; v8: 8-way."""
    n, _, words = d.size
    bthreads, bitems, mthreads, S = cfg[:4]
    mitems = cfg[4] if len(cfg) > 4 else ITEMS
    T0, T, Kk = cut_plan(version, cfg)
    way = ways(version)
    if T0 % S or S & (S - 1) or Kk < 1:
        raise ValueError(f"{version} needs S a power of two dividing the first runs ({T0}) and a "
                         f"tile with room for K >= 1 samples; got S = {S}, tile {T}")
    _aligned(x, v, *out["out"], *out["tmp"])
    lengths = pass_lengths(version, n, words, first=T0)
    dests = destinations(1 + len(lengths))
    bsmem = smem_bytes(bthreads, words, bitems)
    block = K(block_kernel(version, bthreads, bitems, suffix), "PPPPi", dynamic_smem=bsmem)
    block.prepared_call((H.cdiv(n, T0), 1, 1), (bthreads, 1, 1), x, v, *out[dests[0]], n,
                        shared_size=bsmem)
    if not lengths:
        return
    src = out[dests[0]]
    msmem = smem_bytes(mthreads, words) if version == "v6" else tile_smem_bytes(mthreads, words, mitems)
    rank = K("sort_v8_rank" if way == 8 else "sort_v6_rank", "PiiiiiPi")
    merge = K(merge_kernel(version, cfg, suffix), "PPPPiPiiii", dynamic_smem=msmem)
    most = max(v6_plan(n, L, S, Kk, way)[2] for L in lengths)
    cuts = d.scratch("cuts", (most, way), np.int32)
    for L, dst in zip(lengths, dests[1:]):
        samples, Q, tiles = v6_plan(n, L, S, Kk, way)
        rank.prepared_call((H.cdiv(samples, RANK_THREADS), 1, 1), (RANK_THREADS, 1, 1), src[0], n,
                           L, S, Kk, Q, cuts, samples)
        merge.prepared_call((tiles, 1, 1), (mthreads, 1, 1), *src, *out[dst], n, cuts, L, S, Kk, Q,
                            shared_size=msmem)
        src = out[dst]


# --- libraries ----------------------------------------------------------------------------------

def _returns(fn, output):
    fn.output = output
    return fn


def baselines(d):
    """cupy.sort (copy + CUB radix sort, what a CuPy user calls) or cupy.argsort for pairs, and
    torch.sort(stable=True). torch has no uint32 sort: it sorts the keys as int32 with the top bit
    flipped (the same order), copied once outside the timing; its indices are checked in the
    pair cases, its keys (flipped) are not comparable and left unchecked."""
    n, _, words = d.size
    out = {}
    cupy = cupy_or_none()
    if cupy is not None:
        xc = cupy.asarray(d.array("x"))  # a view of pycuda's memory (__cuda_array_interface__)
        if words == 1:
            out[CUPY_SORT] = lambda: cupy.sort(xc)
        else:
            out[CUPY_ARGSORT] = _returns(lambda: cupy.argsort(xc), "idx")
    torch = torch_or_none()
    if torch is not None:
        flipped = as_torch(d.array("x")).view(torch.int32) ^ (-2 ** 31)
        if words == 2:
            out[TORCH_SORT] = _returns(lambda: torch.sort(flipped, stable=True).indices, "idx")
        else:
            def torch_sort():
                torch.sort(flipped, stable=True)
            out[TORCH_SORT] = torch_sort
    return out


def is_cub_radix(names) -> bool:
    """Whether kernel names include a CUB radix sort pass (onesweep or the older downsweep)."""
    return any("RadixSort" in n and ("Onesweep" in n or "Downsweep" in n or "SingleTile" in n)
               for n in names)


# --- public functions ---------------------------------------------------------------------------

_KEY_TYPES = "uint32, int32 or float32"


def _keys(x, name="keys"):
    """(uint32 sort keys, how to map them back: "u" as they are, "i" sign bit flipped back,
    "f" float32, the caller's dtype). uint32, int32 and float32 map as key_bits says; narrower
    types widen exactly; 64-bit integers (a Python list) map as uint32 if every value fits,
    else as int32 if every value fits."""
    a = A._as_array(x, name)
    kind = a.dtype.kind
    if kind == "b":
        raise TypeError(f"{name} must hold numbers, got booleans")
    if kind not in "fiu":
        raise TypeError(f"{name} must be an array of {_KEY_TYPES} numbers, got dtype {a.dtype}")
    if a.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {a.shape}")
    if a.size > N_MAX:
        raise ValueError(f"{name} has {a.size} keys; the kernels take at most 2^30 = {N_MAX}")
    if a.size == 0:  # nothing to sort, whatever the type (an empty list is float64)
        return np.zeros(0, np.uint32), "u", a.dtype
    if kind == "f":
        if a.dtype.itemsize > 4:
            raise TypeError(f"{name} is {a.dtype}; the kernels sort 32-bit keys: pass "
                            f"{name}.astype(np.float32) if float32 precision is enough")
        return reference.key_bits(a.astype(np.float32)), "f", a.dtype
    if a.dtype.itemsize <= 4:  # uint8..uint32, int8..int32: exact
        signed = kind == "i"
        return reference.key_bits(a.astype(np.int32 if signed else np.uint32)), "iu"[not signed], a.dtype
    lo, hi = int(a.min()), int(a.max())
    if lo >= 0 and hi < 2 ** 32:
        return a.astype(np.uint32), "u", a.dtype
    if lo >= -2 ** 31 and hi < 2 ** 31:
        return reference.key_bits(a.astype(np.int32)), "i", a.dtype
    bad = (a < -2 ** 31) | (a >= 2 ** 32) if (lo < -2 ** 31 or hi >= 2 ** 32) else (a < 0)
    i = int(np.argmax(bad))
    raise ValueError(f"{name}[{i}] = {a[i]} does not fit 32 bits: {name} must all lie in uint32's "
                     f"range [0, 2^32) or all in int32's range [-2^31, 2^31)")


def _undo(bits: np.ndarray, mode: str, dtype) -> np.ndarray:
    """Sorted uint32 keys back to the caller's integer dtype."""
    if mode == "i":
        return reference.from_key_bits(bits, np.int32).astype(dtype)
    return bits.astype(dtype)


def _run(bits: np.ndarray, values: np.ndarray | None, version: str):
    """The GPU sort of uint32 keys (and uint32 values): (keys, values or None)."""
    n = bits.size
    inputs, outputs = {"x": bits}, {"keys": ((n,), np.uint32)}
    if values is not None:
        inputs["v"] = values
        outputs["idx"] = ((n,), np.uint32)
    case = H.Case((n, 1, 1 if values is None else 2), inputs=inputs, outputs=outputs)
    res = H.run(launch, version, case)
    return res["keys"], res.get("idx")


def sort(keys, version=BEST) -> np.ndarray:
    """The keys in ascending order on the GPU, in their own dtype. Integer keys sort by value;
    float32 (and float16) keys in numpy's order: NaNs last, -0.0 equal to +0.0, equal keys in
    input order, so the result equals np.sort(keys, kind="stable") bit for bit. An empty array
    gives an empty one without a launch."""
    version = A.version(version, VERSIONS)
    bits, mode, dtype = _keys(keys)
    if bits.size == 0:
        return np.empty(0, dtype)
    if mode == "f":  # carry the original bits as values: -0.0, +0.0 and NaNs come back as given
        original = np.asarray(keys).astype(np.float32).view(np.uint32)
        _, vals = _run(bits, original, version)
        return vals.view(np.float32).astype(dtype)
    out, _ = _run(bits, None, version)
    return _undo(out, mode, dtype)


def argsort_stable(keys, version=BEST) -> np.ndarray:
    """The permutation that sorts the keys, equal keys in input order: np.argsort(keys,
    kind="stable") (int64), for integer or float32 keys (floats in numpy's order)."""
    version = A.version(version, VERSIONS)
    bits, _, _ = _keys(keys)
    if bits.size == 0:
        return np.empty(0, np.int64)
    _, idx = _run(bits, np.arange(bits.size, dtype=np.uint32), version)
    return idx.astype(np.int64)


def sort_pairs(keys, values, version=BEST):
    """(keys sorted, values reordered with their keys, equal keys in input order). values: an
    array of the keys' length of a 4-byte dtype (int32, uint32, float32), moved bit for bit by
    the kernels. For float keys the permutation is sorted on the GPU and both arrays gathered
    by it (so that -0.0 and NaN payloads of the keys survive)."""
    version = A.version(version, VERSIONS)
    bits, mode, dtype = _keys(keys)
    vals = A._as_array(values, "values")
    if vals.dtype.kind not in "fiu" or vals.dtype.itemsize != 4:
        raise TypeError(f"values must be a 4-byte type (int32, uint32 or float32), got {vals.dtype}; "
                        "for indices use argsort_stable")
    A.same_shape(keys=bits, values=vals)
    vals = np.ascontiguousarray(vals)
    if bits.size == 0:
        return np.empty(0, dtype), vals.copy()
    if mode == "f":
        _, perm = _run(bits, np.arange(bits.size, dtype=np.uint32), version)
        perm = perm.astype(np.int64)
        return np.asarray(keys)[perm], vals[perm]
    out, moved = _run(bits, vals.view(np.uint32), version)
    return _undo(out, mode, dtype), moved.view(vals.dtype)


# --- extras: passes, bytes, and what the library really runs ------------------------------------

def traffic_rows(n: int, copy_gbps: float | None = None, words: int = 1) -> list[list]:
    """Trips through DRAM per version at n keys (each reads and writes the array once:
    4 * words * 2 * n bytes), and the time that traffic alone takes at the copy rate; CUB's
    onesweep radix sort beside them (one histogram read, then 4 passes of 8 bits)."""
    per = 8 * words * n
    rows = []
    for v in VERSIONS:
        t = trips(v, n, words)
        launches = len(pass_lengths(v, n, words)) * {"v1": 1, "v2": 1, "v3": 2, "v4": 3, "v5": 3,
                                                     "v6": 2, "v7": 2, "v8": 2}[v] + (v != "v1")
        rows.append([v, VERSIONS[v], str(t), str(launches), f"{t * per / 1e9:.2f} GB"])
    cub = 4 * words * n + 4 * per  # histogram pass reads the keys; 4 digit passes read + write
    rows.append(["CUB onesweep", "library: 1 histogram read + 4 passes of 8 bits", "4 + 1 read",
                 "-", f"{cub / 1e9:.2f} GB"])
    rows.append([CUPY_SORT, "library: a copy, then CUB's sort", "5 + 1 read", "-",
                 f"{(cub + per) / 1e9:.2f} GB"])
    if copy_gbps:
        for r in rows:
            r.append(f"{float(r[4].split()[0]) / copy_gbps * 1e3:.3f} ms")
    return rows


def launch_times(version: str, size, reps: int = 5) -> list[tuple[str, int, float]]:
    """(kernel, run length L or 0, microseconds) of every launch of `version` at `size`, in plan
    order: the plan is recorded once, then replayed `reps` times with an event between launches
    (mean)."""
    global K
    from common.gpu import driver

    d = H.DeviceCase(make_case(size, np.random.default_rng(3)))
    real, calls = K, []

    class Noted:
        def __init__(self, name, fn):
            self.name, self.fn = name, fn

        def prepared_call(self, grid, block, *args, shared_size=0):
            calls.append((self.name, grid, block, args, shared_size, self.fn))
            self.fn.prepared_call(grid, block, *args, shared_size=shared_size)

    K = lambda name, sig=None, dynamic_smem=0: Noted(name, real(name, sig, dynamic_smem=dynamic_smem))  # noqa: E731
    try:
        launch(version, d)
    finally:
        K = real
    cuda = driver()
    ev = [cuda.Event() for _ in range(len(calls) + 1)]
    us = np.zeros(len(calls))
    for _ in range(reps):
        ev[0].record()
        for i, (_, grid, block, args, sh, fn) in enumerate(calls):
            fn.prepared_call(grid, block, *args, shared_size=sh)
            ev[i + 1].record()
        ev[-1].synchronize()
        us += [1e3 * ev[i + 1].time_since(ev[i]) for i in range(len(calls))]
    us /= reps
    out = []
    for (name, _, _, args, _, _), t in zip(calls, us):
        L = 0
        if "merge" in name and "v1" not in name:
            L = int(args[6] if len(args) > 6 else args[5])
        elif any(k in name for k in ("rank", "table", "split", "partition")):
            L = int(args[2])
        out.append((name, L, float(t)))
    return out


def launch_rows(times, n: int, words: int = 1) -> list[list[str]]:
    """launch_times grouped: block sort, partition (rank, or table + split), merges: launches,
    microseconds, microseconds a merge pass (the block sort: its own), and GB/s for the two that
    move the array (8 bytes a key a trip)."""
    groups = {"block sort": [], "partition": [], "merge passes": []}
    for name, _, us in times:
        key = "block sort" if "block" in name else "merge passes" if "merge" in name else "partition"
        groups[key].append(us)
    per = 8 * words * n
    passes = max(1, len(groups["merge passes"]))
    rows = []
    for g, ts in groups.items():
        if not ts:
            continue
        trips = 0 if g == "partition" else len(ts)
        gbps = f"{trips * per / (sum(ts) * 1e-6) / 1e9:.0f}" if trips else "-"
        each = sum(ts) if g == "block sort" else sum(ts) / passes
        rows.append([g, str(len(ts)), f"{sum(ts):.1f}", f"{each:.1f}", gbps])
    total = sum(t for _, _, t in times)
    rows.append(["total", str(len(times)), f"{total:.1f}", "-", "-"])
    return rows


def cupy_sort_kernels(n: int):
    """(name, us) of every kernel one cupy.sort of n random uint32 keys launches (CUPTI, after a
    warm-up call), or None without CuPy and torch (its profiler reads CUPTI)."""
    cupy, torch = cupy_or_none(), torch_or_none()
    if cupy is None or torch is None:
        return None
    from common.baselines import kernels_launched

    x = cupy.asarray(np.random.default_rng(0).integers(0, 2 ** 32, n, dtype=np.uint32))
    cupy.sort(x)  # warm: CuPy builds its plan and memory pool once
    return kernels_launched(lambda: cupy.sort(x))


def extras(report, mode):
    if mode == "check":
        return
    from common.timing import copy_bandwidth_gbps

    n = SIZES["default"][0]
    bw = copy_bandwidth_gbps()
    rows = traffic_rows(n, bw)
    report.section(f"trips through DRAM at n = 2^26 keys (each moves 8n = {8 * n / 1e9:.2f} GB; "
                   f"floor = bytes at the {bw:.0f} GB/s copy rate)", rows,
                   ["version", "what", "trips", "launches", "DRAM bytes", "floor"])
    report.record("traffic", rows)
    size = (n, 1, 1)
    for v, title in (("v4", "launches of v4"), (BEST, f"launches of the best version ({BEST})")):
        times = launch_times(v, size)
        report.section(f"{title} at n = 2^26 random keys (each timed alone in plan order, mean "
                       f"of 5)", launch_rows(times, n),
                       ["launches", "count", "us", "us a pass", "GB/s"])
        report.record(f"launch_times_{v}", [[k, L, t] for k, L, t in times])
    ks = cupy_sort_kernels(n)
    if ks is None:
        report.say("\n(cupy.sort's kernels not listed: needs CuPy and torch's profiler)")
        return
    agg = {}
    for name, us in ks:
        c, t = agg.get(short_kernel_name(name), (0, 0.0))
        agg[short_kernel_name(name)] = (c + 1, t + us)
    krows = [[k, str(c), f"{t:.1f}"] for k, (c, t) in agg.items()]
    krows.append(["CUB radix sort kernels alone", "", f"{sum(t for k, (c, t) in agg.items() if 'Radix' in k):.1f}"])
    report.section("kernels cupy.sort launches at n = 2^26 (CUPTI, one call)", krows,
                   ["kernel", "launches", "us"])
    report.record("cupy_sort_kernels", [[n_, us] for n_, us in ks])
    report.record("cupy_sort_is_cub", is_cub_radix([n_ for n_, _ in ks]))
