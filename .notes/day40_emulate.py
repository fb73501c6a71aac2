"""Day 40: a numpy emulation of kernel.cu's index maps, run on a CPU (no GPU needed):
python .notes/day40_emulate.py. Written while building the day without a GPU; every map matched."""
# numpy emulation of day 40's dispatch and grouped-GEMM block mapping (the GEMM tile itself is day 8's)
import sys; from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np
from days.day40_moe_kernel import reference as R, driver as D
TILE = 128

def gate(x, wg):
    T, E = x.shape[0], wg.shape[1]
    lg = x.astype(np.float64) @ wg.astype(np.float64)
    topi = np.zeros(2 * T, np.int64); topw = np.zeros(2 * T)
    counts = np.zeros(E, np.int64)
    for t in range(T):
        acc = lg[t]; i0, i1 = 0, -1; l0, l1 = acc[0], -np.inf
        for e in range(1, 16):
            if e >= E: break
            l = acc[e]
            if l > l0: i1, l1, i0, l0 = i0, l0, e, l
            elif l > l1 or i1 < 0: i1, l1 = e, l
        r = np.exp(l1 - l0)
        topi[2*t], topi[2*t+1] = i0, i1; topw[2*t], topw[2*t+1] = 1/(1+r), r/(1+r)
        counts[i0] += 1; counts[i1] += 1
    return topi, topw, counts

def dispatch(topi, topw, counts, T, E, rng):
    offsets = np.zeros(E + 1, np.int64); tile_start = np.zeros(E + 1, np.int64)
    off = tiles = 0
    for e in range(E):
        offsets[e] = off; tile_start[e] = tiles; off += counts[e]; tiles += -(-counts[e] // TILE)
    offsets[E] = off; tile_start[E] = tiles
    fill = np.zeros(E, np.int64)
    S = 2 * T
    slot_token = np.full(S, -1); slot_w = np.full(S, np.nan); slot_expert = np.full(S, -1); slot_of = np.full(S, -1)
    nthreads = -(-S // 256) * 256
    warps = list(range(nthreads // 32)); rng.shuffle(warps)          # warps in any order
    for w in warps:
        lanes = range(w * 32, w * 32 + 32)
        es = [topi[p] if p < S else -1 for p in lanes]
        base = {}
        for lane, e in enumerate(es):                                   # match_any: groups
            peers = [l for l, ee in enumerate(es) if ee == e]
            leader = peers[0]
            if lane == leader and e >= 0:
                base[e] = fill[e]; fill[e] += len(peers)
        for lane, e in enumerate(es):
            if e < 0: continue
            peers = [l for l, ee in enumerate(es) if ee == e]
            rank = sum(1 for l in peers if l < lane)
            p = w * 32 + lane
            s = offsets[e] + base[e] + rank
            assert slot_token[s] == -1
            slot_token[s] = p // 2; slot_w[s] = topw[p]; slot_expert[s] = e; slot_of[p] = s
    assert (slot_token >= 0).all()
    return offsets, tile_start, slot_token, slot_w, slot_expert, slot_of

def grouped(M_of, offsets, tile_start, E, grid_y, fn):
    for g in range(grid_y):
        if g >= tile_start[E]: continue
        e = 0
        while tile_start[e + 1] <= g: e += 1
        bm = (g - tile_start[e]) * TILE
        seg = offsets[e]; M = offsets[e + 1] - seg
        assert 0 <= bm < M
        fn(e, seg, bm, M)

def run(size, version, seed=0):
    case = D.make_case(size, np.random.default_rng(seed))
    i = case.inputs; x, wg, w1, b1, w2, b2 = (i[k].astype(np.float64) for k in ("x","wg","w1","b1","w2","b2"))
    T, C, E, _ = size; H = 4 * C
    topi, topw, counts = gate(i["x"], i["wg"])
    offsets, tile_start, slot_token, slot_w, slot_expert, slot_of = dispatch(topi, topw, counts, T, E, np.random.default_rng(seed + 1))
    S = 2 * T; grid_y = -(-S // TILE) + E
    h = np.full((S, H), np.nan)
    def fc1(e, seg, bm, M):
        rows = range(bm, min(bm + TILE, M))
        for r in rows:
            h[seg + r] = R.gelu(x[slot_token[seg + r]] @ w1[e] + b1[e])
    grouped(None, offsets, tile_start, E, grid_y, fc1)
    assert not np.isnan(h).any()
    y = np.zeros((T, C)); touched = np.zeros(T, int)
    out = np.full((S, C), np.nan)
    def fc2(e, seg, bm, M):
        for r in range(bm, min(bm + TILE, M)):
            s = seg + r; o = h[s] @ w2[e]
            if version == "v3":
                y[slot_token[s]] += slot_w[s] * (o + b2[e]); touched[slot_token[s]] += 1
            else:
                out[s] = o
    grouped(None, offsets, tile_start, E, grid_y, fc2)
    if version != "v3":
        for t in range(T):
            s0, s1 = slot_of[2*t], slot_of[2*t+1]
            y[t] = topw[2*t] * (out[s0] + b2[slot_expert[s0]]) + topw[2*t+1] * (out[s1] + b2[slot_expert[s1]])
    else:
        assert (touched == 2).all()
    exp = case.expected()
    err = np.abs(y - exp["y"]).max()
    print(size, version, "counts", "ok" if np.array_equal(counts, exp["counts"]) else "WRONG", "y max err", f"{err:.2e}")

for size in [(1, 64, 8, 1), (33, 64, 8, 2), (300, 32, 16, 2), (257, 16, 3, 1), (5, 4, 2, 1)]:
    for v in ("v2", "v3"):
        run(size, v)
