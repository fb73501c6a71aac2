import re
from pathlib import Path

import numpy as np
import pytest

from days.day38_merge_sort import reference as R

KERNEL = Path(R.__file__).parent / "kernel.cu"


# --- the reference against independent values ---------------------------------------------------

def test_argsort_stable_by_hand():
    x = np.array([3, 1, 3, 2, 1], np.uint32)
    assert R.argsort_stable(x).tolist() == [1, 4, 3, 0, 2]  # the two 1s, then 2, then the two 3s
    assert R.argsort_stable(x).dtype == np.int64
    assert R.sort_keys(x).tolist() == [1, 1, 2, 3, 3]
    k, v = R.sort_pairs(x, np.array([10, 11, 12, 13, 14], np.int32))
    assert k.tolist() == [1, 1, 2, 3, 3] and v.tolist() == [11, 14, 13, 10, 12]
    assert R.argsort_stable(np.array([0xFFFFFFFF, 0], np.uint32)).tolist() == [1, 0]
    assert R.argsort_stable(np.zeros(0, np.uint32)).tolist() == []


@pytest.mark.parametrize("n", [1, 2, 31, 33, 1000, 4097])
@pytest.mark.parametrize("kind", ["random", "dups", "sorted", "reversed", "equal"])
def test_argsort_stable_is_numpys(n, kind):
    rng = np.random.default_rng(n)
    x = {"random": rng.integers(0, 2 ** 32, n, dtype=np.uint32),
         "dups": rng.integers(0, 4, n, dtype=np.uint32),
         "sorted": np.sort(rng.integers(0, 50, n, dtype=np.uint32)),
         "reversed": np.sort(rng.integers(0, 50, n, dtype=np.uint32))[::-1].copy(),
         "equal": np.full(n, 7, np.uint32)}[kind]
    assert np.array_equal(R.argsort_stable(x), np.argsort(x, kind="stable"))
    assert np.array_equal(R.sort_keys(x), x[np.argsort(x, kind="stable")])


def test_co_rank_by_hand():
    a, b = [1, 3, 5], [2, 3, 4]  # stable merge: 1a 2b 3a 3b 4b 5a
    assert [R.co_rank(a, b, d) for d in range(7)] == [0, 1, 1, 2, 2, 2, 3]
    assert R.co_rank([], [1, 2], 2) == 0 and R.co_rank([1, 2], [], 1) == 1
    assert R.co_rank([5, 5], [5], 2) == 2  # on equal keys a's elements come first


def test_co_rank_matches_a_stable_merge():
    rng = np.random.default_rng(3)
    for _ in range(50):
        a = np.sort(rng.integers(0, 6, rng.integers(0, 9)))
        b = np.sort(rng.integers(0, 6, rng.integers(0, 9)))
        src = np.argsort(np.concatenate([a, b]), kind="stable") < len(a)  # True: from a
        for d in range(len(a) + len(b) + 1):
            assert R.co_rank(a, b, d) == int(src[:d].sum())


def test_merge_and_merge_sort():
    rng = np.random.default_rng(4)
    a, b = np.sort(rng.integers(0, 9, 13)), np.sort(rng.integers(0, 9, 7))
    assert np.array_equal(R.merge(a, b), np.sort(np.concatenate([a, b])))
    for n in (0, 1, 2, 7, 33):
        x = rng.integers(0, 5, n)
        assert np.array_equal(R.merge_sort(x), np.sort(x))


def test_key_bits_order_int32():
    x = np.array([0, -1, 2 ** 31 - 1, -2 ** 31, 5, -5, 5, 0], np.int32)
    assert np.array_equal(np.argsort(R.key_bits(x), kind="stable"), np.argsort(x, kind="stable"))
    assert R.key_bits(np.array([-2 ** 31, -1, 0], np.int32)).tolist() == [0, 0x7FFFFFFF, 0x80000000]
    assert np.array_equal(R.from_key_bits(R.key_bits(x), np.int32), x)


def test_key_bits_order_float32_is_numpys():
    x = np.array([0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1.5, -1.5, 1e-45, -1e-45, 0.0,
                  -0.0, 3.0, np.nan], np.float32)
    assert np.array_equal(np.argsort(R.key_bits(x), kind="stable"), np.argsort(x, kind="stable"))
    k = R.key_bits(np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32))
    assert np.all(np.diff(k.astype(np.int64)) >= 0) and k[2] == k[3]  # -0.0 ties with +0.0
    rng = np.random.default_rng(5)
    y = (rng.standard_normal(5000) * 1e3).astype(np.float32)
    y[::97] = np.nan
    y[::89] = -0.0
    assert np.array_equal(np.argsort(R.key_bits(y), kind="stable"), np.argsort(y, kind="stable"))


# --- the driver's plan --------------------------------------------------------------------------

def _drv():
    from days.day38_merge_sort import driver

    return driver


def _defines():
    src = KERNEL.read_text()
    return {k: int(v) for k, v in re.findall(r"^#define (\w+) (\d+)\s*$", src, re.M)}


def test_driver_shapes_match_kernel():
    D, d = _drv(), _defines()
    assert (d["ITEMS"], d["V2_TILE"], d["V2_THREADS"], d["V3_THREADS"]) == \
        (D.ITEMS, D.V2_TILE, D.V2_THREADS, D.V3_THREADS)
    src = KERNEL.read_text()
    for t, items in D.V4_BLOCKS:
        assert (f"V4_BLOCK({t})" if items == 16 else
                f"block_sort<{t}, {items}, false>") in src
        assert f"void BOUNDS({t}) {D.v4_block_kernel(t, items, 'keys')}(" in src or items == 16
    for t in D.V4_MERGES:
        assert f"V4_MERGE({t})" in src
    for bs, bi, ms in D.V4.values():
        assert (bs, bi) in D.V4_BLOCKS and ms in D.V4_MERGES and ms * 16 <= 2 * bs * bi
    assert D.smem_bytes(512, 1) == 4 * (8192 + 16 + 256 + 1) and D.smem_bytes(512, 2) == 2 * D.smem_bytes(512, 1)
    assert "return T + items + ((T + items) >> 5) + 1;" in src  # kernel.cu's smem_words
    assert D.smem_bytes(1024, 2) <= 227 * 1024


def test_pass_plans():
    D = _drv()
    n = 2 ** 26
    assert [D.trips(v, n) for v in D.VERSIONS] == [26, 17, 15, 7, 7, 7, 7, 5]
    assert D.pass_lengths("v8", n) == [2 ** 14, 2 ** 17, 2 ** 20, 2 ** 23]  # 2^14 * 8^4 = 2^26
    assert D.pass_lengths("v4", n) == [2 ** 14, 2 ** 16, 2 ** 18, 2 ** 20, 2 ** 22, 2 ** 24]
    assert D.pass_lengths("v3", 4096) == [] and D.pass_lengths("v3", 4097) == [4096]
    assert D.pass_lengths("v1", 1) == [1]  # a single key is still copied by one pass
    assert D.pass_lengths("v1", 5) == [1, 2, 4]
    assert D.pass_lengths("v4", 5 * 16384) == [16384, 65536]  # a group of four and one of one
    assert D.pass_lengths("v4", 100, words=2) == []  # one tile: the block sort writes the output
    for steps in range(1, 6):
        dst = D.destinations(steps)
        assert dst[-1] == "out" and all(a != b for a, b in zip(dst, dst[1:]))
    assert D.table_entries(2 ** 26, 2 ** 14, 8192) == (5, 1024 * 2 * 5)
    assert D.table_entries(1000003, 2 ** 20, 8192) == (257, 2 * 257)


def test_new_versions_name_kernels_that_exist():
    D, src = _drv(), KERNEL.read_text()
    for t in D.V5_MERGES:
        assert f"V5_MERGE({t})" in src
    for t in D.V6_MERGES:
        assert f"V6_MERGE({t})" in src
    for t in D.VN_MERGES:
        assert f"VN_MERGE(v7, 4, {t})" in src and f"VN_MERGE(v8, 8, {t})" in src
    for t in D.V7_BLOCKS:
        assert f"V7_BLOCK({t})" in src
    for w in (1, 2):
        assert D.V5[w][2] in D.V5_MERGES and (D.V5[w][0], D.V5[w][1]) in D.V4_BLOCKS
        for ver, cfg in (("v6", D.V6[w]), ("v7", D.V7[w]), ("v8", D.V8[w])):
            bt, bi, mt, S = cfg[:4]
            assert mt in (D.V6_MERGES if ver == "v6" else D.VN_MERGES)
            assert (bt, bi) in D.V4_BLOCKS or (ver != "v6" and w == 1 and bi == 32 and bt in D.V7_BLOCKS)
            T0, T, K = D.cut_plan(ver, cfg)
            assert T0 % S == 0 and K >= 1
    assert D.block_kernel("v7", 512, 32, "keys") == "sort_v7_block_t512_i32_keys"
    assert D.block_kernel("v8", 512, 16, "pairs") == "sort_v4_block_t512_pairs"
    assert "#define GUARD 64" in src and D.tile_smem_bytes(256, 1) == 4 * (64 + 4096 + 16 + 128 + 1)
    assert D.tile_smem_bytes(512, 2) <= 227 * 1024


def test_cut_plan_by_hand():
    D = _drv()
    # 4-way, tile of 256 x 16 = 4096 keys, S = 256: K S + 3 (S - 1) <= 4096 -> K = 13
    assert D.cut_plan("v6", (512, 32, 256, 256)) == (16384, 4096, 13)
    # v7: one thread's keys (16) of slack: K S + 3 (S - 1) <= 4080 -> 128 K <= 3699 -> K = 28
    assert D.cut_plan("v7", (512, 32, 256, 128)) == (16384, 4096, 28)
    # v8: 7 (S - 1) and three threads of slack: 64 K <= 4096 - 48 - 441 -> K = 56
    assert D.cut_plan("v8", (512, 32, 256, 64)) == (16384, 4096, 56)
    # samples, tiles of a full group, tiles: 2^26 keys, L = 2^14, S = 256, K = 13: a group of
    # 2^16 keys has 256 samples -> 20 tiles; 1024 groups
    assert D.v6_plan(2 ** 26, 2 ** 14, 256, 13) == (2 ** 18, 20, 20 * 1024)
    # ragged: 100000 keys, L = 16384, groups of 65536: one full (Q = 20), then 34464 keys ->
    # ceil(34464 / 256) = 135 samples -> 11 tiles
    assert D.v6_plan(100000, 2 ** 14, 256, 13) == (391, 20, 31)
    assert D.v6_plan(1000, 2 ** 14, 256, 13, way=8) == (4, 40, 1)  # Q = ceil(2^17 / 256 / 13)
    with pytest.raises(ValueError, match="power of two"):
        D._launch_cut("v6", type("d", (), {"size": (10, 1, 1)})(), 0, 0, {}, "keys", (512, 32, 256, 96))


def _cut_before(runs, r, i, S):
    """The cut before sample (run r, index i S) as kernel.cu's rank_samples defines it."""
    x = runs[r][i * S]
    return [i * S if w == r else int(np.searchsorted(runs[w], x, side="right" if w < r else "left"))
            for w in range(len(runs))]


@pytest.mark.parametrize("way", [4, 8])
@pytest.mark.parametrize("kind", ["random", "dups", "sorted", "blocks"])
def test_sampled_cuts_are_stable_merge_prefixes(way, kind):
    """The partition of v6-v8 in numpy: every sample's cut is exactly the prefix of the stable
    merge before it, samples in (key, run, index) order have increasing cuts, and tiles of K
    samples hold at most K S + (way - 1)(S - 1) keys (the bound the driver's K relies on)."""
    rng = np.random.default_rng(way)
    S, K, L = 8, 3, 64
    lens = [L] * (way - 1) + [37]  # a short last run, as at the end of an array
    gen = {"random": lambda m: rng.integers(0, 1000, m), "dups": lambda m: rng.integers(0, 3, m),
           "sorted": lambda m: np.arange(m) * 7, "blocks": lambda m: np.repeat(rng.integers(0, 50, -(-m // 8)), 8)[:m]}[kind]
    runs = [np.sort(gen(m)).astype(np.uint32) for m in lens]
    allk = np.concatenate(runs)
    src_run = np.concatenate([np.full(m, w) for w, m in enumerate(lens)])
    order = np.argsort(allk, kind="stable")  # the stable merge of the runs (in input order)
    samples = [(int(runs[r][i * S]), r, i) for r in range(way) for i in range(-(-lens[r] // S))]
    samples.sort()
    pos_in_merge = np.empty(allk.size, np.int64)
    pos_in_merge[order] = np.arange(allk.size)
    starts = np.cumsum([0] + lens[:-1])
    cuts = []
    for rank, (_, r, i) in enumerate(samples):
        c = _cut_before(runs, r, i, S)
        # the elements before sample s in the stable merge, counted per run
        before = order[:pos_in_merge[starts[r] + i * S]]
        assert c == [int((src_run[before] == w).sum()) for w in range(way)]
        if rank % K == 0:
            cuts.append(c)
    cuts.append(lens)
    assert cuts[0] == [0] * way
    sizes = [sum(b) - sum(a) for a, b in zip(cuts, cuts[1:])]
    assert all(1 <= z <= K * S + (way - 1) * (S - 1) for z in sizes), sizes
    assert sum(sizes) == sum(lens)


def test_launch_rows_by_hand():
    D = _drv()
    n = 2 ** 20
    times = [("sort_v7_block_t512_i32_keys", 0, 100.0), ("sort_v6_rank", 16384, 5.0),
             ("sort_v7_merge_t256_i32_keys", 16384, 200.0), ("sort_v6_rank", 65536, 7.0),
             ("sort_v7_merge_t256_i32_keys", 65536, 300.0)]
    rows = {r[0]: r for r in D.launch_rows(times, n)}
    assert rows["block sort"] == ["block sort", "1", "100.0", "100.0", f"{8 * n / 100e-6 / 1e9:.0f}"]
    assert rows["partition"] == ["partition", "2", "12.0", "6.0", "-"]  # us a merge pass
    assert rows["merge passes"][1:4] == ["2", "500.0", "250.0"]
    assert rows["merge passes"][4] == f"{2 * 8 * n / 500e-6 / 1e9:.0f}"
    assert rows["total"][:3] == ["total", "5", "612.0"]
    assert [r[0] for r in D.launch_rows(times[:1], n)] == ["block sort", "total"]
    v4 = [("sort_v4_block_t512_i32_keys", 0, 700.0)] + [("sort_v4_table", 1, 20.0),
          ("sort_v4_split", 1, 120.0), ("sort_v4_merge_t256_keys", 1, 490.0)] * 2
    rows = {r[0]: r for r in D.launch_rows(v4, n)}
    assert rows["partition"][1:4] == ["4", "280.0", "140.0"] and rows["block sort"][3] == "700.0"


def test_traffic_rows():
    D = _drv()
    rows = D.traffic_rows(2 ** 26, copy_gbps=4000.0)
    by = {r[0]: r for r in rows}
    assert by["v4"][2] == "7" and by["v4"][4] == f"{7 * 8 * 2 ** 26 / 1e9:.2f} GB"
    assert by["v8"][2] == "5" and by["v8"][3] == str(4 * 2 + 1) and by["v6"][3] == str(6 * 2 + 1)
    assert by["v3"][3] == str(14 * 2 + 1)  # partition + merge per pass, and the block sort
    assert by["CUB onesweep"][4] == f"{36 * 2 ** 26 / 1e9:.2f} GB"
    assert by["v4"][5] == f"{float(by['v4'][4].split()[0]) / 4000.0 * 1e3:.3f} ms"


def test_cases_and_distributions():
    D = _drv()
    rng = np.random.default_rng(0)
    x = D.make_keys(1000, 3, rng)
    assert np.all(np.diff(x.astype(np.int64)) >= 0)
    x = D.make_keys(1000, 4, rng)
    assert np.all(np.diff(x.astype(np.int64)) <= 0) and x.flags.c_contiguous
    assert set(D.make_keys(1000, 2, rng).tolist()) <= set(range(16))
    e = D.make_keys(10, 5, rng)
    assert np.all(e == e[0]) and e[0] != 0xFFFFFFFF  # poison must not look like a right answer
    c = D.make_case((33, 2, 2), rng)
    exp = c.expected()
    assert set(exp) == set(c.outputs) == {"keys", "idx"}
    assert np.array_equal(exp["idx"], np.argsort(c.inputs["x"], kind="stable"))
    assert c.bytes == 16 * 33 and c.read_bytes == 8 * 33
    c1 = D.make_case((31, 1, 1), rng)
    assert set(c1.outputs) == {"keys"} and c1.bytes == 8 * 31


@pytest.mark.parametrize("size, word", [((2 ** 30 + 1, 1, 1), "too long"), ((5, 0, 1), "DIST"),
                                        ((5, 6, 1), "DIST"), ((5, 1, 3), "WORDS")])
def test_validate_size(size, word):
    with pytest.raises(ValueError, match=word):
        _drv().validate_size(size)


def test_bar_and_bench():
    D = _drv()
    assert D.BEST in D.VERSIONS
    assert (2 ** 26, 1, 1) in D.BENCH_SIZES and D.BAR[0]["baseline"] == D.CUPY_SORT
    assert D.BAR[0]["vs_baseline"] == 0.5


def test_cub_kernel_names_are_recognised():
    D = _drv()
    names = ["void cub::CUB_300000_SM_900_NS::detail::radix_sort::DeviceRadixSortOnesweepKernel<...>(...)",
             "void cub::CUB_300000_SM_900_NS::detail::radix_sort::DeviceRadixSortHistogramKernel<...>(...)"]
    assert D.is_cub_radix(names)
    assert not D.is_cub_radix(names[1:])  # the histogram alone is not the sort
    assert not D.is_cub_radix(["cupy_copy__uint32_uint32", "thrust::cuda_cub::core::_kernel_agent"])


def test_launch_refuses_an_unknown_version():
    with pytest.raises(ValueError, match="unknown version 'v9'"):
        _drv().launch("v9", None)


# --- the public functions refuse bad input before anything reaches the GPU ----------------------

def _public():
    D = _drv()
    # sort_pairs checks its keys before its values: any values do here
    return [D.sort, D.argsort_stable, lambda k, **kw: D.sort_pairs(k, np.zeros(2, np.int32), **kw)]


@pytest.mark.parametrize("fi", range(3))
@pytest.mark.parametrize("x, exc, word", [
    (None, TypeError, "None"),
    ("123", TypeError, "string"),
    (np.array([True, False]), TypeError, "booleans"),
    (np.array([1 + 2j, 3]), TypeError, "dtype"),
    (np.array(["a", "b"]), TypeError, "dtype"),
    (np.array([1.0, 2.0]), TypeError, "float64"),
    (np.ones((2, 3), np.uint32), ValueError, "1-D"),
    (np.uint32(7), ValueError, "1-D"),
    ([[1, 2], [3]], ValueError, "ragged"),
    (np.array([2 ** 32], np.int64), ValueError, "32 bits"),
    (np.array([-1, 2 ** 31], np.int64), ValueError, "32 bits"),
    (np.array([-2 ** 31 - 1], np.int64), ValueError, "32 bits"),
])
def test_public_functions_refuse_bad_keys(fi, x, exc, word):
    with pytest.raises(exc, match=word):
        _public()[fi](x)


@pytest.mark.parametrize("fi", range(3))
def test_unknown_version_lists_the_versions(fi):
    with pytest.raises(ValueError, match="v1, v2, v3, v4, v5, v6, v7, v8$"):
        _public()[fi](np.array([3, 1], np.uint32), version="v9")
    with pytest.raises(TypeError, match="version"):
        _public()[fi](np.array([3, 1], np.uint32), version=4)


@pytest.mark.parametrize("vals, exc, word", [
    (np.arange(3, dtype=np.int64), TypeError, "4-byte"),
    (np.array([True, False, True]), TypeError, "4-byte"),
    (np.arange(4, dtype=np.int32), ValueError, "one shape"),
    (np.zeros((3, 1), np.float32), ValueError, "one shape"),
    (None, TypeError, "None"),
])
def test_sort_pairs_refuses_bad_values(vals, exc, word):
    with pytest.raises(exc, match=word):
        _drv().sort_pairs(np.array([3, 1, 2], np.uint32), vals)


def test_empty_input_needs_no_gpu():
    D = _drv()
    assert D.sort(np.zeros(0, np.int32)).dtype == np.int32 and D.sort([]).size == 0
    assert D.argsort_stable(np.zeros(0, np.float32)).dtype == np.int64
    k, v = D.sort_pairs(np.zeros(0, np.uint32), np.zeros(0, np.float32))
    assert k.size == 0 and v.dtype == np.float32


def test_key_mapping_of_python_ints():
    D = _drv()
    bits, mode, dtype = D._keys([3, 0, 2 ** 32 - 1])
    assert mode == "u" and bits.dtype == np.uint32 and dtype == np.int64
    bits, mode, _ = D._keys([3, -1, 2])
    assert mode == "i" and np.array_equal(np.argsort(bits, kind="stable"), [1, 2, 0])
    assert np.array_equal(D._undo(np.sort(bits), mode, np.int64), [-1, 2, 3])
    bits, mode, _ = D._keys(np.array([200, 3], np.uint8))
    assert mode == "u" and bits.tolist() == [200, 3]
    bits, mode, _ = D._keys(np.array([1.5, -0.0], np.float16))
    assert mode == "f" and bits.dtype == np.uint32


# --- on the GPU ---------------------------------------------------------------------------------

def test_public_functions_on_gpu(gpu):
    D = _drv()
    rng = np.random.default_rng(11)
    for n in (1, 33, 5000, 100003):
        u = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
        assert np.array_equal(D.sort(u), np.sort(u))
        i = rng.integers(-2 ** 31, 2 ** 31, n, dtype=np.int64).astype(np.int32)
        assert np.array_equal(D.sort(i), np.sort(i))
        d = rng.integers(0, 3, n).astype(np.int32)
        assert np.array_equal(D.argsort_stable(d), np.argsort(d, kind="stable"))
        f = rng.standard_normal(n).astype(np.float32)
        f[::7] = -0.0
        f[::11] = 0.0
        f[::13] = np.nan
        assert np.array_equal(D.argsort_stable(f), np.argsort(f, kind="stable"))
        got = D.sort(f)
        want = np.sort(f, kind="stable")
        assert np.array_equal(got.view(np.uint32), want.view(np.uint32))  # -0.0 vs +0.0 too
        vals = rng.standard_normal(n).astype(np.float32)
        k, v = D.sort_pairs(d, vals)
        order = np.argsort(d, kind="stable")
        assert np.array_equal(k, d[order]) and np.array_equal(v.view(np.uint32), vals[order].view(np.uint32))
    for version in D.VERSIONS:
        x = rng.integers(0, 5, 3000).astype(np.uint32)
        assert np.array_equal(D.argsort_stable(x, version=version), np.argsort(x, kind="stable"))


def test_v4_candidates_on_gpu(gpu):
    """Every v4 block-size pair the sweep may pick sorts correctly (keys and pairs)."""
    from common import harness as H

    D = _drv()
    for size in [(70001, 1, 2), (3 * 16384 + 5, 2, 1), (1000003, 4, 2)]:
        case = D.make_case(size, np.random.default_rng(5))
        for bs, bi in D.V4_BLOCKS:
            for ms in D.V4_MERGES:
                if ms * 16 > 2 * bs * bi or (size[2] == 2 and bi == 32):  # 32 a thread: keys only
                    continue
                r = H.check(lambda v, d: D.launch(v, d, v4=(bs, bi, ms)), "v4", case)
                assert r.ok, f"v4 ({bs}, {bi}, {ms}) at {size}: {r.message}"


def _entry_points():
    """Every extern "C" kernel name kernel.cu defines, its macros expanded (V4_BLOCK(512) ->
    sort_v4_block_t512_keys, sort_v4_block_t512_pairs, ...)."""
    src = KERNEL.read_text()
    names = set(re.findall(r'extern "C" __global__ void (?:BOUNDS\(\w+\) |__launch_bounds__\([^)]*\) )?(sort_\w+)\(', src))
    for t in re.findall(r"^V4_BLOCK\((\d+)\)", src, re.M):
        names |= {f"sort_v4_block_t{t}_keys", f"sort_v4_block_t{t}_pairs"}
    for v, t in re.findall(r"^V([456])_MERGE\((\d+)\)", src, re.M):
        names |= {f"sort_v{v}_merge_t{t}_keys", f"sort_v{v}_merge_t{t}_pairs"}
    for t in re.findall(r"^V7_BLOCK\((\d+)\)", src, re.M):
        names.add(f"sort_v7_block_t{t}_i32_keys")
    for v, t in re.findall(r"^VN_MERGE\((v\d), \d, (\d+)\)", src, re.M):
        names |= {f"sort_{v}_merge_t{t}_keys", f"sort_{v}_merge_t{t}_pairs", f"sort_{v}_merge_t{t}_i32_keys"}
    return names


def test_entry_points_expand():
    names = _entry_points()
    assert {"sort_v1_merge_keys", "sort_v4_split", "sort_v6_rank", "sort_v8_rank",
            "sort_v4_block_t512_i32_keys", "sort_v4_block_t1024_pairs", "sort_v5_merge_t512_pairs",
            "sort_v7_block_t256_i32_keys", "sort_v8_merge_t256_i32_keys"} <= names
    assert "sort_v9_merge_t256_keys" not in names


def _sweep_candidates():
    """The configurations .notes/day38_sweep.py times, by version and words (its KEYS, PAIRS)."""
    import ast

    src = (Path(R.__file__).parents[2] / ".notes" / "day38_sweep.py").read_text()
    tree = ast.parse(src)
    lists = {t.targets[0].id: ast.literal_eval(t.value) for t in tree.body
             if isinstance(t, ast.Assign) and getattr(t.targets[0], "id", "") in ("KEYS", "PAIRS")}
    out = {}
    for words, key in ((1, "KEYS"), (2, "PAIRS")):
        for v, c in lists[key]:
            if c is not None:
                out.setdefault(v, {}).setdefault(words, []).append(c)
    return out


def test_sweep_candidates_are_valid():
    """Every configuration the sweep may pick names kernels that exist and has K >= 1."""
    D = _drv()
    names = _entry_points()
    for v, by_words in _sweep_candidates().items():
        for words, cfgs in by_words.items():
            for c in cfgs:
                if v == "v5":
                    assert (c[0], c[1]) in D.V4_BLOCKS and c[2] in D.V5_MERGES
                    continue
                T0, T, K = D.cut_plan(v, c)
                assert K >= 1 and T0 % c[3] == 0, (v, c)
                suffix = "keys" if words == 1 else "pairs"
                assert D.block_kernel(v, c[0], c[1], suffix) in names, (v, c)
                assert D.merge_kernel(v, c, suffix) in names, (v, c)
    for w in (1, 2):  # the shipped ones are among them
        for v, ship in (("v6", D.V6), ("v7", D.V7), ("v8", D.V8)):
            assert ship[w] in _sweep_candidates()[v][w]


def test_new_version_candidates_on_gpu(gpu):
    """v5-v8 with each configuration the sweep may pick, keys and pairs, ragged lengths (several
    passes, partial last groups, every distribution)."""
    from common import harness as H

    D = _drv()
    for size in [(70001, 1, 2), (3 * 16384 + 5, 2, 1), (1000003, 4, 2), (1000003, 1, 1),
                 (2 ** 20 + 1, 5, 1), (300007, 3, 2)]:
        case = D.make_case(size, np.random.default_rng(6))
        for ver, by_words in _sweep_candidates().items():
            for cfg in by_words[size[2]]:
                r = H.check(lambda v, d: D.launch(v, d, cfg=cfg), ver, case)
                assert r.ok, f"{ver} {cfg} at {size}: {r.message}"


def test_baselines_sort_on_gpu(gpu):
    """cupy.sort and torch's flipped-int32 sort give the reference order; cupy.sort runs CUB's
    radix sort (not a fallback)."""
    from common import harness as H
    from common.baselines import cupy_or_none, kernels_launched, torch_or_none

    D = _drv()
    if cupy_or_none() is None or torch_or_none() is None:
        pytest.skip("needs CuPy and torch")
    torch = torch_or_none()
    case = D.make_case((100003, 2, 1), np.random.default_rng(2))
    d = H.DeviceCase(case)
    libs = D.baselines(d)
    assert np.array_equal(libs[D.CUPY_SORT]().get(), case.expected()["keys"])
    flipped = D.as_torch(d.array("x")).view(torch.int32) ^ (-2 ** 31)
    back = (torch.sort(flipped, stable=True).values ^ (-2 ** 31)).cpu().numpy().view(np.uint32)
    assert np.array_equal(back, case.expected()["keys"])
    names = [n for n, _ in kernels_launched(libs[D.CUPY_SORT])]
    assert D.is_cub_radix(names), names
    pcase = D.make_case((100003, 2, 2), np.random.default_rng(3))
    pd = H.DeviceCase(pcase)
    plibs = D.baselines(pd)
    for name in (D.CUPY_ARGSORT, D.TORCH_SORT):
        got = plibs[name]()
        got = got.get() if hasattr(got, "get") else got.cpu().numpy()
        assert np.array_equal(got, pcase.expected()["idx"]), name
