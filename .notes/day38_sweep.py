"""Day 38 sweep (run on the GPU machine from the repo root: python .notes/day38_sweep.py).

Candidates: v4's block sizes (threads of the block sort and its keys a thread, threads of the
4-way merge at 16 keys a thread: first runs of threads x keys, merge tiles of 16 x threads), the
pairs kernel.cu instantiates with merge tile <= 2 x first run. Each is checked once against numpy at
three ragged sizes (keys and pairs), then timed (median of common.timing.time_fn, L2 flushed)
at the bench sizes beside v3 and cupy.sort / cupy.argsort. Then a breakdown of the shipped v4 at
2^26 keys: each kernel of the plan timed alone (block sort, and per pass the table, the split and
the merge), to show where the time goes. Under a minute.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from common import harness as H  # noqa: E402
from common.gpu import driver  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day38_merge_sort import driver as D  # noqa: E402

# (block-sort threads, keys a thread there, merge threads)
KEYS = [(1024, 16, 512), (512, 32, 512), (512, 16, 512), (1024, 16, 256), (512, 32, 256),
        (512, 16, 256), (256, 16, 256), (1024, 16, 1024)]
PAIRS = [(512, 16, 512), (256, 16, 256), (512, 16, 256), (1024, 16, 512), (256, 16, 512)]
CHECK = [(1000003, 1, 2), (70001, 2, 1), (3 * 16384 + 5, 4, 2), (2 ** 20 + 1, 5, 1)]
SIZES = [(2 ** 26, 1, 1), (2 ** 26, 2, 1), (10_000_019, 1, 2)]


def candidates(words):
    return KEYS if words == 1 else PAIRS


def main():
    bad = []
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(1))
        d = H.DeviceCase(case)
        for c in candidates(size[2]):
            r = H.check(lambda v, dd: D.launch(v, dd, v4=c), "v4", case, d)
            if not r.ok:
                bad.append(f"v4 {c} at {H.size_str(size)}: {r.message}")
    print("checks:", "all ok" if not bad else "\n  ".join(["FAILED"] + bad))

    for size in SIZES:
        n, _, words = size
        case = D.make_case(size, np.random.default_rng(2))
        d = H.DeviceCase(case)
        print(f"\n{H.size_str(size)}  (ms, median; Gkeys/s)")
        rows = [("v3", lambda: D.launch("v3", d))]
        rows += [(f"v4 {c}", lambda c=c: D.launch("v4", d, v4=c)) for c in candidates(words)]
        rows += list(D.baselines(d).items())
        for name, fn in rows:
            ms = time_fn(fn).median_ms
            print(f"   {name:26s} {ms:8.3f} ms  {n / ms / 1e6:6.2f} Gkeys/s")

    # where the time goes: the shipped v4 plan at 2^26 keys, each launch timed alone
    size = (2 ** 26, 1, 1)
    case = D.make_case(size, np.random.default_rng(3))
    d = H.DeviceCase(case)
    d.poison_outputs()
    steps = []
    D.launch("v4", d)  # builds the kernels; now re-run the plan launch by launch
    bt, bi, mt = D.V4[1]
    T0, T = bt * bi, mt * D.ITEMS
    n = size[0]
    tmp = d.scratch("tmp_keys", (n,), np.uint32)
    lengths = D.pass_lengths("v4", n, 1, first=T0)
    dst = {"out": d.keys, "tmp": tmp}
    dests = D.destinations(1 + len(lengths))
    bsmem = D.smem_bytes(bt, 1, bi)
    block = D.K(D.v4_block_kernel(bt, bi, "keys"), "PPPPi", dynamic_smem=bsmem)
    merge = D.K(f"sort_v4_merge_t{mt}_keys", "PPPPiPi", dynamic_smem=D.smem_bytes(mt, 1))
    table, split = D.K("sort_v4_table", "PiiiiPi"), D.K("sort_v4_split", "PiiiiPPi")
    tiles = H.cdiv(n, T)
    most = max(D.table_entries(n, L, T)[1] for L in lengths)
    tab = d.scratch("table", (most, 4), np.uint32)
    spl = d.scratch("split", (tiles, 4), np.int32)
    steps.append(("block sort", lambda: block.prepared_call((H.cdiv(n, T0), 1, 1), (bt, 1, 1), d.x, 0,
                                                            dst[dests[0]], 0, n,
                                                            shared_size=bsmem)))
    src = dst[dests[0]]
    pt = D.PARTITION_THREADS
    for L, dd in zip(lengths, dests[1:]):
        E, entries = D.table_entries(n, L, T)
        out = dst[dd]
        steps.append((f"L={L} table", lambda s=src, L=L, E=E, e=entries: table.prepared_call(
            (H.cdiv(e, pt), 1, 1), (pt, 1, 1), s, n, L, T, E, tab, e)))
        steps.append((f"L={L} split", lambda s=src, L=L, E=E: split.prepared_call(
            (H.cdiv(tiles, pt), 1, 1), (pt, 1, 1), s, n, L, T, E, tab, spl, tiles)))
        steps.append((f"L={L} merge", lambda s=src, o=out, L=L: merge.prepared_call(
            (tiles, 1, 1), (mt, 1, 1), s, 0, o, 0, n, spl, L, shared_size=D.smem_bytes(mt, 1))))
        src = out
    # run the plan in order once per repeat so every launch sees the data it expects
    cuda = driver()
    ev = [cuda.Event() for _ in range(len(steps) + 1)]
    times = np.zeros(len(steps))
    reps = 10
    for _ in range(reps):
        ev[0].record()
        for i, (_, fn) in enumerate(steps):
            fn()
            ev[i + 1].record()
        ev[-1].synchronize()
        times += [ev[i + 1].time_since(ev[i]) for i in range(len(steps))]
    times /= reps
    ok = np.array_equal(d.array("keys").get(), case.expected()["keys"])
    print(f"\nv4 {D.V4[1]} at 2^26 keys, launch by launch (mean of {reps}; sorted correctly: {ok})")
    for (name, _), ms in zip(steps, times):
        gb = 8 * n / (ms * 1e-3) / 1e9 if ("merge" in name or "block" in name) else float("nan")
        print(f"   {name:22s} {ms * 1e3:9.1f} us   {gb:7.0f} GB/s")
    print(f"   {'total':22s} {times.sum() * 1e3:9.1f} us")


if __name__ == "__main__":
    main()
