import hashlib

import numpy as np
import pytest

from common.harness import ROOT
from days.day36_spmv_ell_coo import formats as F
from days.day36_spmv_ell_coo import reference

DATA_SHA256 = "60905e241e6420d8112ba993d8f6cc7b8657451644b168089dcbb74c91203de0"


# --- the reference against independent values -------------------------------------------------

def test_reference_by_hand():
    # [[1, 0, 2], [0, 0, 0], [0, 3, 0]] @ [1, 10, 100] = [201, 0, 30]
    y = reference.spmv([0, 2, 2, 3], [0, 2, 1], [1.0, 2.0, 3.0], [1.0, 10.0, 100.0])
    np.testing.assert_array_equal(y, [201.0, 0.0, 30.0])


def test_reference_equals_dense_and_coo():
    a, x = F.make((5, 40, 9), np.random.default_rng(3))
    y = reference.spmv(a.indptr, a.indices, a.data, x)
    dense = reference.dense(a.indptr, a.indices, a.data, (a.rows, a.cols))
    np.testing.assert_allclose(y, dense @ x.astype(np.float64), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y, reference.spmv_coo(a.row_ids(), a.indices, a.data, x, a.rows),
                               rtol=1e-12, atol=1e-12)


# --- patterns ---------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(1, 1, 1), (1, 33, 5), (1, 40, 27), (2, 31, 8), (2, 500, 64),
                                  (3, 3000, 1500), (5, 1, 1), (5, 300, 40), (6, 37, 1)])
def test_patterns_are_valid_csr_with_the_promised_longest_row(size):
    a, x = F.make(size, np.random.default_rng(size[1]))
    lens = a.lengths()
    assert (a.rows, a.cols) == F.shape_of(size) and x.shape == (a.cols,)
    assert lens.max(initial=0) == F.longest(size)
    assert a.indices.dtype == np.int32 and a.data.dtype == np.float32
    assert np.all((a.indices >= 0) & (a.indices < a.cols))
    r = a.row_ids()
    same = r[1:] == r[:-1]
    assert np.all(np.diff(a.indices.astype(np.int64))[same] > 0), "columns distinct and sorted in a row"
    # the row lengths alone are the first draws: lengths() agrees with make()
    np.testing.assert_array_equal(F.lengths(size, np.random.default_rng(size[1])), lens)


def test_banded_is_the_band():
    a, _ = F.make((1, 6, 3), np.random.default_rng(0))
    d = reference.dense(a.indptr, a.indices, np.ones(a.nnz), (6, 6))
    np.testing.assert_array_equal(d, (np.abs(np.subtract.outer(range(6), range(6))) <= 1) * 1.0)


def test_power_law_tail():
    lens = F.lengths((3, 200_000, 100_000), np.random.default_rng(1))
    # P(length >= j) = 1/j: half the rows have one entry, one in ten at least 10
    assert abs(np.mean(lens == 1) - 0.5) < 0.01
    assert abs(np.mean(lens >= 10) - 0.1) < 0.005
    assert lens.max() == 100_000


def test_uniform_columns_cover_the_matrix():
    a, _ = F.make((2, 20_000, 32), np.random.default_rng(2))
    lens = a.lengths()
    assert lens.min() == 16 and lens.max() == 32
    counts = np.bincount(a.indices, minlength=a.cols)   # ~24 per column, no hole at either end
    assert counts[:100].mean() > 15 and counts[-100:].mean() > 15


def test_edge_pattern():
    a, _ = F.make((5, 300, 40), np.random.default_rng(4))
    lens = a.lengths()
    assert a.cols == 603 and lens[0] == 603 and 0.2 < np.mean(lens == 0) < 0.5


# --- formats against the reference -----------------------------------------------------------

def ell_product(ecol, evals, x, rows):
    """What v4/v5 compute from the ELL arrays."""
    valid = ecol >= 0
    prod = np.where(valid, evals.astype(np.float64) * x.astype(np.float64)[np.where(valid, ecol, 0)], 0)
    return prod.sum(axis=0)[:rows]


@pytest.mark.parametrize("size", [(1, 33, 5), (3, 3000, 1500), (5, 300, 40), (6, 5, 1), (5, 1, 1)])
def test_ell_holds_the_matrix(size):
    a, x = F.make(size, np.random.default_rng(7))
    ecol, evals, taken = F.ell(a)
    assert taken.all() and ecol.shape == (max(1, F.longest(size)), F.pitch_of(a.rows))
    assert F.pitch_of(a.rows) % 4 == 0
    # padding only after a row's entries (v5 stops at the first all-padding slot)
    pad = ecol < 0
    assert np.all(pad[1:] >= pad[:-1])
    np.testing.assert_allclose(ell_product(ecol, evals, x, a.rows),
                               reference.spmv(a.indptr, a.indices, a.data, x), rtol=1e-6, atol=1e-6)


def emulate_rowblocks(a, x, blocks, items=F.ROWBLOCK_ITEMS, threads=F.ROWBLOCK_THREADS):
    """Day 36 v6's algorithm in numpy, block by block, thread by thread: staged products, row
    tails marked, ITEMS consecutive products a thread, exclusive segmented scan of the threads'
    (sum after last head, has head), sums written at tails; long rows from chunk partials."""
    nz = threads * items
    y = np.full(a.rows, np.nan)
    partials = {}
    prod_all = a.data.astype(np.float64) * x.astype(np.float64)[a.indices]
    for b, (r0, r1, z0, z1) in enumerate(blocks):
        if r1 < 0:
            partials.setdefault(r0, []).append(prod_all[z0:z1].sum())
            if len(partials[r0]) == -r1:
                y[r0] = sum(partials[r0])
            continue
        n = z1 - z0
        prod = prod_all[z0:z1]
        last_of = np.full(n, -1)
        for r in range(r0, r1):
            s, e = a.indptr[r] - z0, a.indptr[r + 1] - z0
            assert 0 <= s <= e <= n, "a row block holds whole rows"
            if e > s:
                last_of[e - 1] = r
            else:
                y[r] = 0.0
        head = np.zeros(n, bool)
        if n:
            head[0] = True
            head[1:] = last_of[:-1] >= 0
        aggs, flags = [], []
        for t in range(threads):
            agg, flag = 0.0, False
            for e in range(t * items, min(n, (t + 1) * items)):
                if head[e]:
                    agg, flag = 0.0, True
                agg += prod[e]
            aggs.append(agg)
            flags.append(flag)
        carry = 0.0
        for t in range(threads):
            s = carry
            for e in range(t * items, min(n, (t + 1) * items)):
                if head[e]:
                    s = 0.0
                s += prod[e]
                if last_of[e] >= 0:
                    y[last_of[e]] = s
            carry = aggs[t] if flags[t] else carry + aggs[t]
        assert n <= nz and r1 - r0 <= threads
    return y


@pytest.mark.parametrize("size", [(3, 3000, 1500), (3, 2500, 2500), (5, 1023, 5), (5, 300, 40),
                                  (6, 600, 1), (1, 200, 27)])
def test_row_blocks_cover_every_row_once_and_the_algorithm_sums_them(size):
    a, x = F.make(size, np.random.default_rng(8))
    blocks = F.row_blocks(a.indptr)
    covered = np.zeros(a.rows, int)
    for r0, r1, z0, z1 in blocks:
        if r1 < 0:
            assert a.indptr[r0] <= z0 < z1 <= a.indptr[r0 + 1] and z1 - z0 <= 2048
        else:
            covered[r0:r1] += 1
            assert z0 == a.indptr[r0] and z1 == a.indptr[r1] and z1 - z0 <= 2048 and r1 - r0 <= 256
    long_rows = np.flatnonzero(a.lengths() > 2048)
    covered[long_rows] += 1
    assert np.all(covered == 1)
    # chunks first, each long row's chunks consecutive
    is_chunk = blocks[:, 1] < 0
    assert not np.any(is_chunk[1:] & ~is_chunk[:-1])
    np.testing.assert_allclose(emulate_rowblocks(a, x, blocks),
                               reference.spmv(a.indptr, a.indices, a.data, x), rtol=1e-9, atol=1e-9)


def test_storage_bytes_by_hand():
    st = F.storage_bytes(np.array([3, 0, 1]))
    assert st["nnz"] == 4 and st["CSR"] == 8 * 4 + 4 * 4 and st["COO"] == 48
    assert st["ELL"] == 8 * 3 * 4             # width 3, pitch 4
    assert st["CSR row blocks"] == st["CSR"] + 16


def test_group_size():
    from days.day36_spmv_ell_coo.driver import group_size

    assert group_size(10, 10) == 2 and group_size(10, 50) == 8 and group_size(10, 51) == 8
    assert group_size(10, 170) == 32 and group_size(10, 100000) == 32 and group_size(5, 0) == 2


# --- the shipped matrix -------------------------------------------------------------------------

def test_real_matrix_file():
    path = ROOT / "data" / "day36_cage11.npz"
    assert hashlib.sha256(path.read_bytes()).hexdigest() == DATA_SHA256 == F.REAL_SHA256
    a = F.load_real()
    lens = a.lengths()
    assert (a.rows, a.cols, a.nnz) == (39082, 39082, 559722)
    assert lens.min() == 3 and lens.max() == 31 and np.all(np.diff(a.indptr) >= 0)
    assert a.data.min() > 0 and a.data.max() < 1          # cage11: transition probabilities
    # cage11's columns sum to 1 (a Markov matrix of the DNA electrophoresis model)
    colsum = np.bincount(a.indices, weights=a.data.astype(np.float64), minlength=a.cols)
    np.testing.assert_allclose(colsum, 1.0, atol=1e-5)
    assert (path.stat().st_size) < 8e6


# --- sizes, the driver, bad input -----------------------------------------------------------

@pytest.mark.parametrize("size,word", [((7, 10, 3), "pattern"), ((4, 100, 31), "cage11"),
                                       ((1, 2 ** 27, 3), "rows"), ((2, 2 ** 25, 100), "32-bit")])
def test_validate_size_refuses(size, word):
    from days.day36_spmv_ell_coo import driver

    with pytest.raises(ValueError, match=word):
        driver.validate_size(size)


def test_supports_only_refuses_ell_past_int32():
    from days.day36_spmv_ell_coo import driver

    assert "TB" in driver.supports("v4", driver.POWERLAW)
    assert driver.supports("v6", driver.POWERLAW) is None
    for s in driver.CHECK_SIZES + driver.BENCH_SIZES:
        if s != driver.POWERLAW:
            assert all(driver.supports(v, s) is None for v in driver.VERSIONS), s


def test_case_bytes_are_csr_bytes():
    from days.day36_spmv_ell_coo import driver

    c = driver.make_case((1, 33, 5), np.random.default_rng(0))
    assert c.bytes == 8 * 159 + 4 * 34 + 4 * 33 + 4 * 33 and c.read_bytes == c.bytes - 4 * 33


def test_bar_check():
    from days.day36_spmv_ell_coo.driver import _faster_somewhere

    case = lambda ours, lib: {"size": [1, 2, 3], "rows": [{"version": "v6", "ok": True, "median_ms": ours}],
                              "baseline": [{"name": "cusparse", "median_ms": lib}]}
    ok, fig = _faster_somewhere({"cases": [case(1.0, 0.9), case(1.0, 1.2)]})
    assert ok and "1.20x" in fig
    ok, fig = _faster_somewhere({"cases": [case(1.0, 0.9)]})
    assert not ok and "0.90x" in fig


@pytest.mark.parametrize("args,exc,word", [
    (([0, 1], [0], [1.0], np.ones((2, 2))), ValueError, "1-D"),
    (([1, 1], [0], [1.0], [1.0]), ValueError, "indptr\\[0\\]"),
    (([0, 2, 1], [0, 0], [1.0, 1.0], [1.0]), ValueError, "decrease"),
    (([0, 2], [0], [1.0, 1.0], [1.0]), ValueError, "indices"),
    (([0, 1], [0], [1.0, 2.0], [1.0]), ValueError, "data"),
    (([0, 1], [3], [1.0], [1.0, 2.0]), ValueError, "outside"),
    (([0, 1], [0.5], [1.0], [1.0]), ValueError, "whole"),
    (([0, 1], [0], [1 + 2j], [1.0]), TypeError, "complex"),
    (([0, 1], [0], [1.0], None), TypeError, "None"),
    (([], [], [], [1.0]), ValueError, "leading 0"),
    (([0, 1], [0], [1.0], []), ValueError, "x is empty"),
])
def test_spmv_refuses_bad_input(args, exc, word):
    from days.day36_spmv_ell_coo.driver import spmv

    with pytest.raises(exc, match=word):
        spmv(*args)


def test_spmv_version_and_empty_results():
    from days.day36_spmv_ell_coo.driver import BEST, spmv

    with pytest.raises(ValueError, match="unknown version 'v9'"):
        spmv([0, 1], [0], [1.0], [1.0], version="v9")
    y = spmv([0, 0, 0], [], [], [1.0, 2.0])      # no nonzeros: zeros, no launch
    assert y.dtype == np.float32 and np.array_equal(y, [0.0, 0.0])
    assert spmv([0], [], [], [1.0]).shape == (0,)
    assert BEST in ("v1", "v2", "v3", "v4", "v5", "v6")


@pytest.mark.parametrize("size", [(3, 20000, 1000), (5, 1023, 5), (2, 100003, 16), (4, 39082, 31)])
def test_every_version_through_the_public_function_on_gpu(gpu, size):
    from common.check import compare
    from days.day36_spmv_ell_coo import driver

    a, x = F.make(size, np.random.default_rng(11))
    ref = reference.spmv(a.indptr, a.indices, a.data, x)
    for v in driver.VERSIONS:
        r = compare(driver.spmv(a.indptr, a.indices, a.data, x, version=v), ref)
        assert r.ok, f"{v} at {size}: {r.message}"


def test_rowblocks_candidates_and_repeat_launches_on_gpu(gpu):
    """v6's three block sizes, each launched twice on one case (the long-row counters must be
    back at 0 after every launch), and cuSPARSE's answer on the same memory."""
    from common import harness as H
    from common.check import compare
    from days.day36_spmv_ell_coo import driver

    case = driver.make_case((3, 20000, 5000), np.random.default_rng(5))
    d = H.DeviceCase(case)
    for items in (4, 8, 16):
        d.arrays[f"blocks{items}"] = __import__("pycuda.gpuarray", fromlist=["to_gpu"]).to_gpu(
            F.row_blocks(case.inputs["ptr"], 256 * items, 256))
        for _ in range(2):
            r = H.check(lambda v, dd: driver.launch_rowblocks(dd, items, f"blocks{items}"), "v6",
                        case, d)
            assert r.ok, f"v6 ITEMS={items}: {r.message}"
    libs = driver.baselines(d)
    for name, fn in libs.items():
        from common.runner import to_host

        assert compare(to_host(fn()), case.expected()["y"]).ok, name
