"""Day 56: the kernels' index arithmetic replayed on the CPU, lane by lane (numpy vectors of
32 lanes), to check the reasoning without a GPU: Tile::pos / flags (unique's shuffles) /
ranks (ballots), v2-v4's scatter and staging, v1's scatter from positions, and the warp
look-back's window rule over random publication states. Not a test of the CUDA code itself
(that is the GPU tests' job); a test of the arithmetic that code spells out.

    .venv/bin/python .notes/day56_emulate.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from days.day56_stream_compaction import reference as R  # noqa: E402

LANES = np.arange(32)
UNSTAGED = -7777.25  # no input holds it: x in [0, 1), unique's runs are multiples of 0.5 >= -1000


def pos(warp, k, items, vec):
    if vec:
        return warp * 32 * items + (k >> 2) * 128 + LANES * 4 + (k & 3)
    return warp * 32 * items + k * 32 + LANES


def shfl_up(v, d=1):
    out = v.copy()
    out[d:] = v[:-d]
    return out


def tile_flags(op, x, base, n, t, v, warp, items, vec):
    """v: [items, 32] values of this warp; returns bits [items, 32] (bool)."""
    e0 = base + warp * 32 * items
    before_slice = x[e0 - 1] if (0 < e0 <= n) else 0.0
    bits = np.zeros((items, 32), bool)
    for k in range(items):
        e = base + pos(warp, k, items, vec)
        if op == "unique":
            if vec and (k & 3):
                prev = v[k - 1]
            else:
                up = shfl_up(v[k + 3] if vec else v[k])
                wrap = v[k - 1][31] if k > 0 else before_slice
                prev = np.where(LANES > 0, up, wrap)
            keep = (e == 0) | (v[k] != prev)
        else:
            keep = v[k] > t
        bits[k] = (e < n) & keep
    return bits


def ranks(bits, warp_base, items, vec):
    """[(k, rank[32], kept[32])] in the kernel's order."""
    out = []
    lt = [(1 << l) - 1 for l in range(32)]
    r = warp_base
    if vec:
        for g in range(items // 4):
            b = [bits[4 * g + c] for c in range(4)]
            masks = [int(sum(1 << l for l in range(32) if bc[l])) for bc in b]
            lanes_before = np.array([sum(bin(m & lt[l]).count("1") for m in masks) for l in range(32)])
            row = sum(bin(m).count("1") for m in masks)
            own = np.zeros(32, int)
            for c in range(4):
                kept = b[c]
                out.append((4 * g + c, r + lanes_before + own, kept))
                own += kept
            r += row
    else:
        for k in range(items):
            m = int(sum(1 << l for l in range(32) if bits[k][l]))
            out.append((k, r + np.array([bin(m & lt[l]).count("1") for l in range(32)]), bits[k]))
            r += bin(m).count("1")
    return out


def tiled(op, x, t, warps, items, vec, stage, vst=False, y_word=0):
    """v2/v3/v4 (the prefix of each tile from a sequential scan of the totals); vst: v4's
    write-out with 16-byte stores, y starting at word address y_word."""
    n = x.size
    size = warps * 32 * items
    tiles = -(-n // size)
    y = np.full(n, np.nan, np.float32)
    prefix, count = 0, None
    for tile in range(tiles):
        base = tile * size
        tile_n = min(size, n - base)
        per_warp = []
        for w in range(warps):
            v = np.zeros((items, 32), np.float32)
            for k in range(items):
                e = base + pos(w, k, items, vec)
                v[k] = np.where(e < n, x[np.minimum(e, n - 1)], 0.0)
            per_warp.append((v, tile_flags(op, x, base, n, t, v, w, items, vec)))
        tot = [int(b.sum()) for _, b in per_warp]
        total = sum(tot)
        stagebuf = np.full(size + 4, UNSTAGED)
        for w, (v, bits) in enumerate(per_warp):
            for k, rank, kept in ranks(bits, sum(tot[:w]), items, vec):
                q = pos(w, k, items, vec)
                for l in range(32):
                    if kept[l]:
                        if stage:
                            stagebuf[rank[l]] = v[k][l]
                        else:
                            y[prefix + rank[l]] = v[k][l]
                    elif op == "partition" and base + q[l] < n:
                        if stage:
                            stagebuf[tile_n - 1 - (q[l] - rank[l])] = v[k][l]
                        else:
                            y[n - 1 - (base - prefix) - (q[l] - rank[l])] = v[k][l]
        if stage:  # kernel.cu: the kept run, then partition's rejected run
            write_run(y, y_word, prefix, stagebuf, 0, total, 32 * warps, vst)
            if op == "partition":
                write_run(y, y_word, n - (base - prefix) - tile_n + total, stagebuf, total,
                          tile_n - total, 32 * warps, vst)
        if tile == tiles - 1:
            count = prefix + total
        prefix += total
    return y, count


def write_run(y, y_word, d0, stage, s0, length, nt, vst):
    """kernel.cu's write_run, thread by thread: stage[s0 .. s0 + length) -> y[d0 ...]. y_word:
    the word address of y[0] (its low 2 bits: y's misalignment in words). Every read of stage
    is checked against its size (SIZE + 4) and every picked word must have been staged (the
    padding and never-staged words hold UNSTAGED here)."""
    def read(idx):
        assert 0 <= idx < stage.size, ("stage read out of bounds", idx, stage.size)
        return stage[idx]

    written = []

    def store(idx, val):
        assert val != UNSTAGED, ("an unstaged word reached y", idx)
        y[idx] = val
        written.append(idx)

    if not vst:
        for tid in range(nt):
            for p in range(tid, length, nt):
                store(d0 + p, read(s0 + p))
        return written
    word = y_word + d0
    h = min(length, (-word) & 3)
    body = (length - h) >> 2
    tail = h + 4 * body
    s = s0 + h
    sh = s & 3
    for tid in range(nt):
        if tid < h:
            store(d0 + tid, read(s0 + tid))
        if tid < length - tail:
            store(d0 + tail + tid, read(s0 + tail + tid))
        for j in range(tid, body, nt):
            a = [read(s - sh + 4 * j + c) for c in range(4)]
            b = [read(s - sh + 4 * j + 4 + c) for c in range(4)] if sh else [None] * 4
            o = (a + b)[sh: sh + 4]
            assert (y_word + d0 + h + 4 * j) % 4 == 0, "a float4 store off its 16 bytes"
            for c in range(4):
                store(d0 + h + 4 * j + c, o[c])
    return written


def write_run_check(rng, trials=3000):
    """write_run with 16-byte stores against the plain copy: every offset of y, of the run in
    stage and of the output, lengths 0 .. a tile; each output word written exactly once."""
    for _ in range(trials):
        size = int(rng.choice([16, 128, 4096]))
        nt = int(rng.choice([32, 256, 288]))
        s0 = int(rng.integers(0, size + 1))
        length = int(rng.integers(0, size - s0 + 1))
        stage = np.full(size + 4, UNSTAGED)
        stage[s0: s0 + length] = rng.random(length) + 1.0
        y_word = int(rng.integers(0, 4))
        d0 = int(rng.integers(0, 50))
        y = np.zeros(d0 + length + 8)
        written = write_run(y, y_word, d0, stage, s0, length, nt, True)
        assert sorted(written) == list(range(d0, d0 + length)), "each word exactly once"
        assert np.array_equal(y[d0: d0 + length], stage[s0: s0 + length])
    return trials


def v1(op, x, t):
    n = x.size
    f = (R.unique_flags(x) if op == "unique" else R.select_flags(x, t)).astype(np.int64)
    s = np.cumsum(f)
    y = np.full(n, np.nan, np.float32)
    for i in range(n):
        before = s[i - 1] if i else 0
        if s[i] != before:
            y[s[i] - 1] = x[i]
        elif op == "partition":
            y[n - 1 - (i - before)] = x[i]
    return y, int(s[-1])


def look_back_rule(rng, trials=20000):
    """The warp look-back's window rule against the plain exclusive prefix: tiles before
    `tile` in random states (X, A, P) consistent with a real run (a P's value is the true
    inclusive prefix); when the rule says 'done', its sum must be the true prefix."""
    done_count = 0
    for _ in range(trials):
        tile = int(rng.integers(1, 100))
        agg = rng.integers(0, 50, tile)
        incl = np.cumsum(agg)
        state = rng.choice([0, 1, 2], tile, p=[0.2, 0.5, 0.3])
        prefix, newest, ok = 0, tile - 1, True
        while True:
            idx = newest - LANES
            flag = np.where(idx >= 0, state[np.maximum(idx, 0)], 2)
            value = np.where(idx >= 0, np.where(flag == 2, incl[np.maximum(idx, 0)],
                                                agg[np.maximum(idx, 0)]), 0)
            p_lanes = int(sum(1 << l for l in range(32) if flag[l] == 2))
            x_lanes = int(sum(1 << l for l in range(32) if flag[l] == 0))
            needed = ((p_lanes & -p_lanes) - 1) if p_lanes else 0xFFFFFFFF
            if x_lanes & needed:
                ok = False  # the kernel would wait here (someone publishes later)
                break
            if p_lanes:
                nearest = (p_lanes & -p_lanes).bit_length() - 1
                prefix += int(value[: nearest + 1].sum())
                break
            prefix += int(value.sum())
            newest -= 32
        if ok:
            done_count += 1
            assert prefix == incl[-1], (tile, prefix, incl[-1])
    return done_count


def main():
    rng = np.random.default_rng(0)
    shapes = [(8, 8, False), (8, 16, False), (4, 16, True), (2, 8, True), (1, 4, True), (2, 4, False)]
    sizes = [1, 2, 3, 5, 31, 33, 127, 128, 129, 255, 256, 257, 1000, 1025, 2049, 4097]
    for op in ("select", "partition", "unique"):
        for n in sizes:
            for pct in (0, 10, 50, 100):
                if op == "unique":
                    x, t = R.runs_input(n, pct, rng), 0.0
                else:
                    x, t = rng.random(n, dtype=np.float32), float(R.threshold_for(pct))
                want, k = R.compact(op, x, t)
                got, c = v1(op, x, t)
                assert c == k and np.array_equal(got[: want.size], want), ("v1", op, n, pct)
                for w, i, vec in shapes:
                    if w * 32 * i > 4 * max(n, 256):  # keep it quick: skip tiles far past n
                        continue
                    for stage, vst in ((False, False), (True, False), (True, True)):
                        got, c = tiled(op, x, t, w, i, vec, stage, vst, y_word=n % 4)
                        assert c == k, (op, n, pct, w, i, vec, stage, c, k)
                        assert np.array_equal(got[: want.size], want), (op, n, pct, w, i, vec, stage, vst)
        print(f"{op}: every shape and size agrees with the reference")
    print(f"look-back rule: {look_back_rule(rng)} finished windows, every one the true prefix")
    print(f"write_run (16-byte stores): {write_run_check(rng)} random runs copied exactly")


if __name__ == "__main__":
    main()
