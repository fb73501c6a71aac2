"""A sequential numpy model of day 57's radix-select kernels (topk_v2, topk_v3, topk_v4's
merge), step for step as kernel.cu does them, checked against reference.topk on tie-heavy rows
with small candidate capacities (so both v3 paths run). CPU only:

    PYTHONPATH=. .venv/bin/python .notes/day57_model.py

find_bin is modelled thread by thread (T threads, BPT bins each counted down from the top,
an inclusive scan, the crossing thread walks its bins); radix_passes with the overlapping last
digit (shift 4 -> 0); the 12-bit pass 1 over the key's top bits, the compaction or the row
fallback; the final collect (c & mask) >= prefix; the rank sort.
"""
import numpy as np

from days.day57_topk_argmax import driver as D
from days.day57_topk_argmax import reference as R

M64 = (1 << 64) - 1


def find_bin(hist, kk, T):
    nb = len(hist)
    bpt = nb // T if nb >= T else 1
    sums, his = [], []
    for t in range(T):
        hi = nb - t * bpt
        his.append(hi)
        sums.append(int(sum(hist[hi - j] for j in range(1, bpt + 1))) if hi > 0 else 0)
    incl = np.cumsum(sums)
    found = []
    for t in range(T):
        excl = incl[t] - sums[t]
        if his[t] > 0 and excl < kk <= incl[t]:
            cnt = excl
            for j in range(1, bpt + 1):
                h = int(hist[his[t] - j])
                if cnt + h >= kk:
                    found.append((his[t] - j, int(cnt), h))
                    break
                cnt += h
    assert len(found) == 1, found
    return found[0]


def radix_passes(comps, prefix, mask, kk, shift, T):
    while True:
        hist = np.zeros(256, np.int64)
        for c in comps:
            if (c & mask) == prefix:
                hist[(c >> shift) & 255] += 1
        b, above, inbin = find_bin(hist, kk, T)
        prefix |= b << shift
        mask |= 255 << shift
        kk -= above
        if inbin == kk or shift == 0:
            return prefix, mask
        shift = shift - 8 if shift >= 8 else 0


def rank_sort(sel):
    out = [None] * len(sel)
    for c in sel:
        r = sum(1 for d in sel if d > c)
        assert out[r] is None
        out[r] = c
    return out


def comps_of(row):
    return [int(c) for c in R.composites(row[None, :])[0]]


def topk_v2(row, k, T=256):
    comps = comps_of(row)
    prefix, mask = radix_passes(comps, 0, 0, k, 56, T)
    sel = [c for c in comps if (c & mask) >= prefix]
    assert len(sel) == k
    return rank_sort(sel)


def topk_v3(row, k, cap, T=512, slices=1):
    """slices > 1: v4's cluster (per-slice histograms summed; appends from every slice)."""
    comps = comps_of(row)
    cols = len(comps)
    slice_ = -(-cols // slices)
    parts = [comps[min(cols, r * slice_):min(cols, r * slice_ + slice_)] for r in range(slices)]
    hist = np.zeros(4096, np.int64)
    for part in parts:
        h = np.zeros(4096, np.int64)
        for c in part:
            h[c >> 52] += 1
        hist += h
    b1, above, inbin = find_bin(hist, k, T)
    kk = k - above
    compacted = inbin != kk and inbin <= cap
    sel, cand = [], []
    if compacted:
        for part in parts:
            for c in part:
                d = c >> 52
                if d > b1:
                    sel.append(c)
                elif d == b1:
                    cand.append(c)
        assert len(cand) == inbin and len(sel) == above
    prefix, mask = b1 << 52, 0xFFF << 52
    src = cand if compacted else comps
    if inbin != kk:
        prefix, mask = radix_passes(src, prefix, mask, kk, 44, T)
    sel += [c for c in src if (c & mask) >= prefix]
    assert len(sel) == k, (len(sel), k)
    return rank_sort(sel), compacted


def main():
    rng = np.random.default_rng(5)
    paths = set()
    for rows, cols, k in [(8, 3001, 50), (8, 2000, 256), (4, 700, 2), (8, 513, 9), (4, 5, 5),
                          (8, 4097, 256), (4, 12289, 7)]:
        case = D.make_case((rows, cols, k), rng, ties=True)
        x = case.inputs["x"]
        x[0, :min(7, cols - 2)] = np.float32(np.nan)                 # NaN ranks first
        x[0, min(9, cols - 1)] = -np.inf
        want = R.composites(x)
        _, ref_idx = R.topk(x, k)
        for r in range(rows):
            expect = [int(want[r, i]) for i in ref_idx[r]]
            assert topk_v2(x[r], k, T=256) == expect, ("v2", rows, cols, k, r)
            for cap, T, slices in ((4096, 512, 1), (64, 512, 1), (0, 256, 1), (256, 1024, 1),
                                   (4096, 512, 8), (16, 512, 4), (4096, 256, 2)):
                got, compacted = topk_v3(x[r], k, cap, T, slices)
                paths.add(compacted)
                assert got == expect, ("v3", rows, cols, k, r, cap, T, slices)
        print(f"ok {rows}x{cols} k={k}")
    assert paths == {True, False}, paths
    print("both v3 paths (candidates in shared memory, the row fallback) ran and agreed")


if __name__ == "__main__":
    main()
