import numpy as np
import pytest

from days.day36_spmv_ell_coo import formats as F
from days.day36_spmv_ell_coo import reference


def test_choose_k_by_hand():
    # 9 rows: lengths 1 x6, 5, 7, 40. #(len > K): K=1 -> 3 <= 9/3 = 3: K = 1
    assert F.choose_k(np.array([1] * 6 + [5, 7, 40])) == 1
    # a third of the rows at 10, the rest 2: #(len > 2) = 3 <= 3 -> K = 2
    assert F.choose_k(np.array([2] * 6 + [10] * 3)) == 2
    # four rows of 10 among 9: K = 2 leaves 4 > 3 longer, so K = 10
    assert F.choose_k(np.array([2] * 5 + [10] * 4)) == 10
    # equal rows: K = that length; empty matrix: 1; a cheaper COO moves K down
    assert F.choose_k(np.full(100, 27)) == 27 and F.choose_k(np.zeros(5, int)) == 1
    assert F.choose_k(np.array([2] * 5 + [10] * 4), coo_cost=2.0) == 2   # 4 * 2 <= 9
    assert F.choose_k(np.array([2] * 5 + [10] * 4), coo_cost=1.0) == 1   # COO as cheap as ELL


def test_choose_k_minimises_the_cost_it_states():
    lens = F.lengths((3, 50_000, 2000), np.random.default_rng(2))
    cost = lambda k: len(lens) * k + 3.0 * np.maximum(lens - k, 0).sum()
    k = F.choose_k(lens)
    assert cost(k) <= min(cost(j) for j in range(1, 200))


def hybrid_product(h, x, rows):
    valid = h["ecol"] >= 0
    ell = np.where(valid, h["eval"].astype(np.float64) * x.astype(np.float64)[np.where(valid, h["ecol"], 0)], 0)
    y = ell.sum(axis=0)[:rows]
    n = h["overflow"]
    np.add.at(y, h["orow"][:n], h["oval"][:n].astype(np.float64) * x.astype(np.float64)[h["ocol"][:n]])
    return y


@pytest.mark.parametrize("size", [(3, 3000, 1500), (5, 300, 40), (2, 500, 32), (6, 9, 1), (4, 39082, 31)])
def test_hybrid_holds_the_matrix(size):
    a, x = F.make(size, np.random.default_rng(1))
    k = F.choose_k(a.lengths())
    h = F.hybrid(a, k)
    lens = a.lengths()
    assert h["ecol"].shape == (k, F.pitch_of(a.rows))
    assert h["overflow"] == np.maximum(lens - k, 0).sum()
    assert h["orow"].size % 4 == 0 and np.all(h["orow"][h["overflow"]:] == -1)
    assert np.all(np.diff(h["orow"][:h["overflow"]]) >= 0), "overflow sorted by row"
    # the mask has the bit of exactly the rows longer than k
    bits = (h["mask"][np.arange(a.rows) >> 5] >> (np.arange(a.rows) & 31).astype(np.uint32)) & 1
    np.testing.assert_array_equal(bits.astype(bool), lens > k)
    np.testing.assert_allclose(hybrid_product(h, x, a.rows),
                               reference.spmv(a.indptr, a.indices, a.data, x), rtol=1e-9, atol=1e-9)


def emulate_segmented_tiles(h, x, rows):
    """v5's overflow reduction in numpy: per warp tile of 128 entries, lanes of 4, a lane's
    (sum after its last head, has head), the exclusive segmented scan over lanes, one add per
    row tail in the tile. Returns the overflow's y and the number of atomics."""
    y = np.zeros(rows)
    atomics = 0
    key = h["orow"]
    p = np.where(key >= 0, h["oval"].astype(np.float64) * x.astype(np.float64)[h["ocol"]], 0.0)
    for t0 in range(0, key.size, 128):
        k, v = key[t0:t0 + 128], p[t0:t0 + 128]
        k = np.concatenate([k, np.full(128 - k.size, -1)])
        v = np.concatenate([v, np.zeros(128 - v.size)])
        head = np.ones(128, bool)
        head[1:] = k[1:] != k[:-1]
        tail = np.ones(128, bool)
        tail[:-1] = k[:-1] != k[1:]
        aggs, flags = [], []
        for lane in range(32):
            agg, flag = 0.0, False
            for e in range(4 * lane, 4 * lane + 4):
                if head[e]:
                    agg, flag = 0.0, True
                agg += v[e]
            aggs.append(agg)
            flags.append(flag)
        carry = 0.0
        for lane in range(32):
            s = carry
            for e in range(4 * lane, 4 * lane + 4):
                if head[e]:
                    s = 0.0
                s += v[e]
                if tail[e] and k[e] >= 0:
                    y[k[e]] += s
                    atomics += 1
            carry = aggs[lane] if flags[lane] else carry + aggs[lane]
    return y, atomics


def test_segmented_overflow_reduction():
    a, x = F.make((3, 4000, 3000), np.random.default_rng(3))
    h = F.hybrid(a, F.choose_k(a.lengths()))
    n = h["overflow"]
    want = np.zeros(a.rows)
    np.add.at(want, h["orow"][:n], h["oval"][:n].astype(np.float64) * x.astype(np.float64)[h["ocol"][:n]])
    got, atomics = emulate_segmented_tiles(h, x, a.rows)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    # one add per row per tile: far fewer than one per entry
    rows_over = int((a.lengths() > h["k"]).sum())
    assert atomics <= rows_over + h["orow"].size // 128 and atomics < n / 3


def test_histogram_and_split_rows():
    from days.day37_spmv_hybrid.driver import histogram_rows, split_row

    lens = np.array([0, 1, 1, 2, 3, 4, 5, 9, 17])
    rows = histogram_rows(lens, 2)
    assert [r[0] for r in rows] == ["0", "1", "2", "3-4", "5-8", "9-16", "17-32"]
    assert [r[1] for r in rows] == ["1", "2", "1", "2", "1", "1", "1"]
    assert rows[3][4] == "3" and rows[6][4] == "15"          # beyond K = 2: (1 + 2), 15
    s = split_row((3, 9, 17), lens)
    assert s[2] == str(F.choose_k(lens))


def test_bar_check():
    from days.day37_spmv_hybrid.driver import _beats_pure_formats

    def case(size, **ms):
        return {"size": list(size), "rows": [{"version": v, "ok": True, "median_ms": t}
                                             for v, t in ms.items()]}
    ok, fig = _beats_pure_formats({"cases": [case((3, 10, 5), v1=2.0, v2=9.0, v3=1.5, v5=1.0)]})
    assert ok and "2.00x v1" in fig
    ok, fig = _beats_pure_formats({"cases": [case((3, 10, 5), v1=0.9, v2=9.0, v5=1.0)]})
    assert not ok and "0.90x v1" in fig
    skipped = case((3, 20, 5), v1=3.0, v5=1.0)
    skipped["rows"].append({"version": "v2", "skipped": "too wide"})
    assert _beats_pure_formats({"cases": [skipped]})[0]
    assert not _beats_pure_formats({"cases": [case((2, 10, 5), v1=1.0, v5=0.5)]})[0]


def test_sizes_match_day36():
    from common.runner import _seed_for
    from days.day36_spmv_ell_coo import driver as d36
    from days.day37_spmv_hybrid import driver as d37

    assert set(d37.BENCH_SIZES) <= set(d36.BENCH_SIZES)
    assert d37.supports("v2", d36.POWERLAW) and d37.supports("v5", d36.POWERLAW) is None
    assert _seed_for(d36.POWERLAW) == _seed_for(tuple(d36.POWERLAW))   # same matrices both days


@pytest.mark.parametrize("kw,exc,word", [
    (dict(k=0), ValueError, "k must be"), (dict(k=1.5), TypeError, "integer"),
    (dict(version="v7"), ValueError, "unknown version"),
])
def test_spmv_hybrid_refuses_bad_arguments(kw, exc, word):
    from days.day37_spmv_hybrid.driver import spmv_hybrid

    with pytest.raises(exc, match=word):
        spmv_hybrid([0, 1], [0], [1.0], [1.0], **kw)


@pytest.mark.parametrize("args,exc,word", [
    (([0, 2, 1], [0, 0], [1.0, 1.0], [1.0]), ValueError, "decrease"),
    (([0, 1], [5], [1.0], [1.0]), ValueError, "outside"),
    (([0, 1], [0], ["a"], [1.0]), TypeError, "dtype"),
    (([0, 1], [0], [1.0], [[1.0]]), ValueError, "1-D"),
])
def test_spmv_hybrid_refuses_bad_input(args, exc, word):
    from days.day37_spmv_hybrid.driver import spmv_hybrid

    with pytest.raises(exc, match=word):
        spmv_hybrid(*args)


def test_spmv_hybrid_empty():
    from days.day37_spmv_hybrid.driver import spmv_hybrid

    assert np.array_equal(spmv_hybrid([0, 0, 0], [], [], [1.0, 2.0]), [0.0, 0.0])
    assert spmv_hybrid([0], [], [], [1.0]).shape == (0,)


@pytest.mark.parametrize("size", [(3, 30000, 3000), (5, 1023, 5), (4, 39082, 31)])
def test_every_version_and_several_widths_on_gpu(gpu, size):
    from common.check import compare
    from days.day37_spmv_hybrid.driver import VERSIONS, spmv_hybrid

    a, x = F.make(size, np.random.default_rng(12))
    ref = reference.spmv(a.indptr, a.indices, a.data, x)
    for v in VERSIONS:
        r = compare(spmv_hybrid(a.indptr, a.indices, a.data, x, version=v), ref)
        assert r.ok, f"{v} at {size}: {r.message}"
    for k in (1, 2, 7, 31, 10_000):   # every split, down to all-COO and up to all-ELL
        for v in ("v3", "v4", "v5"):
            r = compare(spmv_hybrid(a.indptr, a.indices, a.data, x, version=v, k=k), ref)
            assert r.ok, f"{v} k={k} at {size}: {r.message}"


def test_reference_split_equals_the_whole():
    from days.day37_spmv_hybrid import reference as R

    a, x = F.make((3, 2000, 300), np.random.default_rng(9))
    want = R.spmv(a.indptr, a.indices, a.data, x)
    for k in (1, 2, 5, 300):
        np.testing.assert_allclose(R.hybrid(a.indptr, a.indices, a.data, x, k), want, rtol=1e-12, atol=1e-12)
    # by hand: [[1, 2, 3]] @ [1, 1, 1] split at k = 1: ELL 1, COO 5
    assert R.hybrid([0, 3], [0, 1, 2], [1.0, 2.0, 3.0], [1.0, 1.0, 1.0], 1)[0] == 6.0
