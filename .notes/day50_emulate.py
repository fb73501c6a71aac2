"""Day 50 on the CPU: the index arithmetic of every kernel in kernel.cu, replayed in numpy for
every version (and every sweep candidate) at every CHECK_SIZES entry, with three checks:
  1. every element of W of a stored row is read exactly once (no chunk dropped or doubled),
     and nothing outside W or x is read;
  2. every 16-byte load of W is 16-byte aligned, every x piece aligned to its XA;
  3. the sums, rounded to bf16, are within reference.error_bound of the float64 product.
It mirrors the kernels line by line (grid -> rows, threads -> chunks, head/body/tail), so a
wrong bound or stride in kernel.cu has to be wrong here too to pass.

    .venv/bin/python .notes/day50_emulate.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import bf16  # noqa: E402
from days.day50_gemv_decode import driver as drv  # noqa: E402
from days.day50_gemv_decode import reference as ref  # noqa: E402


class Mem:
    def __init__(self, w, x):
        self.w = bf16.from_bits(w).astype(np.float64).ravel()
        self.x = bf16.from_bits(x).astype(np.float64)
        self.n, self.k = w.shape
        self.hits = np.zeros(self.w.size, np.int64)

    def wread(self, idx, count=True):
        idx = np.asarray(idx)
        assert idx.size == 0 or (idx.min() >= 0 and idx.max() < self.w.size), "W read out of bounds"
        if count:
            np.add.at(self.hits, idx, 1)
        return self.w[idx]

    def xread(self, idx):
        idx = np.asarray(idx)
        assert idx.size == 0 or (idx.min() >= 0 and idx.max() < self.x.size), "x read out of bounds"
        return self.x[idx]


def partial_dots(m, rows, unroll, xa, r0, G):
    """kernel.cu partial_dots for all G threads at once: acc[rows][G] (float64)."""
    n, k = m.n, m.k
    t = np.arange(G)
    acc = np.zeros((rows, G))
    heads, bodies = [], []
    for r in range(rows):
        row = min(r0 + r, n - 1)
        count = r0 + r < n          # rows past N are read again but never stored
        e0 = row * k
        head = 0 if xa == 8 else min((8 - (e0 & 7)) & 7, k)
        if xa == 8:
            assert e0 % 8 == 0
        else:
            tail0 = head + 8 * ((k - head) >> 3)
            a = t < head
            acc[r, a] += m.wread(e0 + t[a], count) * m.xread(t[a])
            b = t < k - tail0
            acc[r, b] += m.wread(e0 + tail0 + t[b], count) * m.xread(tail0 + t[b])
        heads.append(head)
        bodies.append((e0 + head, count))
    chunks = (k - heads[0]) >> 3
    if xa == 8:
        assert all(h == 0 for h in heads)
    # for (c0 = t; c0 < chunks; c0 += G * U): thread t runs while its c0 < chunks
    c0 = t.copy()
    while True:
        live = c0 < chunks
        if not live.any():
            break
        for u in range(unroll):
            c = c0 + G * u
            inn = live & (c < chunks)
            tt, cc = t[inn], c[inn]
            xoff = heads[0] + 8 * cc
            assert np.all(xoff % xa == 0), "x piece misaligned"
            xs = m.xread(xoff[:, None] + np.arange(8))
            for r in range(rows):
                base, count = bodies[r]
                woff = base + 8 * cc
                assert np.all((woff * 2) % 16 == 0), "W chunk misaligned"
                ws = m.wread(woff[:, None] + np.arange(8), count)
                acc[r, tt] += (ws * xs).sum(axis=1)
        c0 = c0 + G * unroll
    return acc


def rows_dots(m, rows, unroll, xa, r0, G):
    if xa == 8:
        return partial_dots(m, rows, unroll, 8, r0, G)
    return np.concatenate([partial_dots(m, 1, unroll, xa, r0 + r, G) for r in range(rows)])


def run(version, m, config=None):
    n, k = m.n, m.k
    name, grid, block = drv.kernel_for(version, n, k, config)
    y = np.full(n, np.nan)
    stores = np.zeros(n, np.int64)
    xa = ref.x_alignment(k)
    if version == "v1":
        for r in range(min(n, grid[0] * block[0])):
            y[r] = (m.wread(r * k + np.arange(k)) * m.xread(np.arange(k))).sum()
            stores[r] += 1
        return y, stores
    if version in ("v2", "v3"):
        rows, unroll = (1, 1) if version == "v2" else (config or drv.V3)[:2]
        warps = block[0] // 32
        assert name == (f"gemv_v2_x{xa}" if version == "v2" else f"gemv_v3_r{rows}_u{unroll}_x{xa}")
        for b in range(grid[0]):
            for w in range(warps):
                r0 = (b * warps + w) * rows
                if r0 >= n:
                    continue
                acc = rows_dots(m, rows, unroll, xa, r0, 32)
                for r in range(rows):
                    if r0 + r < n:
                        y[r0 + r] = acc[r].sum()
                        stores[r0 + r] += 1
        return y, stores
    threads, rows, unroll = config or (drv.V4_THREADS, drv.V4_ROWS, drv.v4_unroll(k))
    assert name == f"gemv_v4_t{threads}_r{rows}_u{unroll}_x{xa}" and block[0] == threads
    for b in range(grid[0]):
        r0 = b * rows
        assert r0 < n
        acc = rows_dots(m, rows, unroll, xa, r0, threads)
        for r in range(rows):
            if r0 + r < n:
                y[r0 + r] = acc[r].sum()
                stores[r0 + r] += 1
    return y, stores


def main():
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        from day50_sweep import V3_CANDIDATES, V4_CANDIDATES
    except ImportError:
        V3_CANDIDATES, V4_CANDIDATES = [], []
    jobs = [(v, None) for v in drv.VERSIONS]
    jobs += [("v3", c) for c in V3_CANDIDATES] + [("v4", c) for c in V4_CANDIDATES]
    bad = 0
    for size in drv.CHECK_SIZES + [drv.SIZES["small"]]:
        n, k = size
        case = drv.make_case(size, np.random.default_rng(7))
        w, x = case.inputs["w"], case.inputs["x"]
        want = ref.gemv(w, x)
        bound = ref.error_bound(w, x)
        for version, cfg in jobs:
            if cfg is not None and k % 8:
                continue          # candidates exist for K % 8 == 0 only
            m = Mem(w, x)
            y, stores = run(version, m, cfg)
            yb = bf16.round(y).astype(np.float64)
            ok = (np.all(stores == 1) and np.all(m.hits == 1)
                  and np.all(np.abs(yb - want) <= bound))
            if not ok:
                bad += 1
                print(f"FAIL {version} {cfg} at {n}x{k}: stores {np.unique(stores)}, "
                      f"hits {np.unique(m.hits)}, max err/bound "
                      f"{np.max(np.abs(yb - want) / bound):.3g}")
        print(f"{n}x{k}: {len(jobs)} kernels checked", flush=True)
    print("all ok" if not bad else f"{bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
