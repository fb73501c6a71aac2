import re
from pathlib import Path

import numpy as np
import pytest

from days.day55_radix_sort import driver as D
from days.day55_radix_sort import reference as R

KERNEL = Path(R.__file__).parent / "kernel.cu"


# --- the reference against independent values ---------------------------------------------------

def test_key_bits_by_hand():
    assert R.key_bits(np.array([-2 ** 31, -1, 0, 2 ** 31 - 1], np.int32)).tolist() == \
        [0, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
    f = np.array([-np.inf, -1.0, -0.0, 0.0, 1.0, np.inf, np.nan], np.float32)
    k = R.key_bits(f)
    assert k[0] == 0x007FFFFF and k[3] == 0x80000000 and k[4] == 0xBF800000  # ~0xff800000, 0|sign, 1.0|sign
    assert k[2] == k[3]                      # -0.0 ties with +0.0
    assert np.all(np.diff(k.astype(np.int64)) >= 0)
    assert k[6] == 0xFFC00000                # the one NaN, after +inf (0xFF800000)
    neg_nan = np.array([0xFFC00001], np.uint32).view(np.float32)
    assert R.key_bits(neg_nan)[0] == 0xFFC00000  # a negative NaN still sorts last
    assert R.key_bits(np.array([5], np.uint32), descending=True)[0] == 0xFFFFFFFA
    with pytest.raises(TypeError, match="uint32, int32 or float32"):
        R.key_bits(np.zeros(2, np.int64))


def test_argsort_and_sort_pairs_by_hand():
    x = np.array([3, 1, 3, 2, 1], np.uint32)
    assert R.argsort(x).tolist() == [1, 4, 3, 0, 2]            # the two 1s in input order
    assert R.argsort(x, descending=True).tolist() == [0, 2, 3, 1, 4]  # 3s, then 2, then 1s: ties stay in order
    k, v = R.sort_pairs(x, np.array([10, 11, 12, 13, 14], np.int32))
    assert k.tolist() == [1, 1, 2, 3, 3] and v.tolist() == [11, 14, 13, 10, 12]
    assert R.argsort(np.array([-1, 0, -5], np.int32)).tolist() == [2, 0, 1]
    assert R.argsort(np.zeros(0, np.uint32)).tolist() == []
    f = np.array([0.0, np.nan, -0.0, -1.0, np.nan, 0.0], np.float32)
    assert R.argsort(f).tolist() == [3, 0, 2, 5, 1, 4]
    assert R.argsort(f, descending=True).tolist() == [1, 4, 0, 2, 5, 3]
    s = R.sort(f)
    assert s.view(np.uint32).tolist() == f[[3, 0, 2, 5, 1, 4]].view(np.uint32).tolist()  # -0.0 kept


@pytest.mark.parametrize("dt", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("n", [1, 2, 31, 33, 1000, 5000])
def test_argsort_is_numpys_stable_argsort(dt, n):
    rng = np.random.default_rng(n)
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    if n > 10:
        bits[::7] = bits[3]  # duplicates
    x = bits.view(dt)
    if dt == np.float32 and n > 10:
        x = x.copy()
        x[::11] = -0.0
        x[::13] = np.nan
        x[::17] = 0.0
    assert np.array_equal(R.argsort(x), np.argsort(x, kind="stable"))


@pytest.mark.parametrize("dt", [np.uint32, np.int32, np.float32])
def test_descending_is_a_second_formulation(dt):
    """Descending and stable, computed with np.lexsort: primary key the negated value (NaNs
    first for floats), ties by index."""
    rng = np.random.default_rng(7)
    x = rng.integers(0, 40, 3000).astype(dt)
    if dt == np.int32:
        x -= 20
    if dt == np.float32:
        x[::9] = np.nan
        x[::10] = -0.0
    idx = np.arange(x.size)
    if dt == np.float32:
        nan = np.isnan(x)
        val = np.where(nan, 0.0, x.astype(np.float64)) + 0.0
        want = np.lexsort((idx, -val, ~nan))
    else:
        want = np.lexsort((idx, -x.astype(np.int64)))
    assert np.array_equal(R.argsort(x, descending=True), want)


def test_onesweep_positions_by_hand():
    # 2-bit digits, tiles of 2: [3, 1 | 2, 1 | 3, 0]; digit starts 0, 1, 3, 4; the second 1 is
    # one after the first (tile 0 has one 1), the second 3 one after the first
    pos = R.onesweep_positions(np.array([3, 1, 2, 1, 3, 0], np.uint32), 0, tile=2, digit_bits=2)
    assert pos.tolist() == [4, 1, 3, 2, 5, 0]


def test_histograms_by_hand():
    h = R.histograms(np.array([0x01020304, 0x01020305, 0xFF000004], np.uint32))
    assert h.shape == (4, 256) and h.sum(axis=1).tolist() == [3, 3, 3, 3]
    assert h[0, 4] == 2 and h[0, 5] == 1 and h[1, 3] == 2 and h[1, 0] == 1
    assert h[2, 2] == 2 and h[3, 1] == 2 and h[3, 255] == 1


@pytest.mark.parametrize("n,tile,bits", [(1, 7680, 8), (33, 4, 8), (1000, 7, 4), (5000, 1024, 8),
                                         (20000, 7680, 8)])
def test_lsd_radix_argsort_is_the_stable_order(n, tile, bits):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    x[::3] = rng.integers(0, 5, x[::3].size)  # many ties
    perm = R.lsd_radix_argsort(x, tile=tile, digit_bits=bits)
    assert np.array_equal(perm, np.argsort(x, kind="stable"))


def test_one_pass_is_a_permutation_and_stable_by_its_digit():
    x = np.random.default_rng(1).integers(0, 2 ** 32, 10000, dtype=np.uint32)
    pos = R.onesweep_positions(x, 8, tile=333)
    assert np.array_equal(np.sort(pos), np.arange(x.size))
    out = np.empty_like(x)
    out[pos] = x
    assert np.array_equal(out, x[np.argsort((x >> 8) & 255, kind="stable")])


# --- the driver: cases, plans, the kernel's shapes ---------------------------------------------

def _defines():
    return {k: int(v) for k, v in re.findall(r"^#define (\w+) (\d+)\s*$", KERNEL.read_text(), re.M)}


def test_driver_shapes_match_kernel():
    d, src = _defines(), KERNEL.read_text()
    assert (d["V1_THREADS"], d["V1_ITEMS"], d["V2_THREADS"], d["V2_ITEMS"], d["HIST_THREADS"]) == \
        (D.V1_THREADS, D.V1_ITEMS, D.V2_THREADS, D.V2_ITEMS, D.HIST_THREADS)
    assert f"onesweep_pass<{D.V3[0]}, {D.V3[1]}, true, false, false>" in src
    assert f"__launch_bounds__({D.V3[0]}, 2) radix_v3_pass_keys" in src
    for t, i, r in D.V4_CANDIDATES:
        assert f"V4_PASS({t}, {i}, {'true' if r == 'm' else 'false'}, {r})" in src
    assert tuple(D.V4) in [tuple(c) for c in D.V4_CANDIDATES]
    assert (d["MODE_SIGNED"], d["MODE_FLOAT"], d["MODE_DESCENDING"]) == (1, 2, 4)
    assert D.MODES == {1: 0, 2: 1, 3: 2, 4: 6, 5: 4, 6: 5}


def test_v4_kernel_names_and_bad_shapes():
    assert D.v4_kernel((512, 15, "m"), "pairs") == "radix_v4_t512_i15_m_pairs"
    with pytest.raises(ValueError, match="not instantiated"):
        D.v4_kernel((512, 16, "m"), "keys")


def test_plans():
    for steps in (4, 8):
        dst = D.destinations(steps)
        assert dst[-1] == "out" and dst[0] == "tmp" and all(a != b for a, b in zip(dst, dst[1:]))
    assert D.tile_of("v1") == 1024 and D.tile_of("v3") == 7680 and D.tile_of("v4", (1024, 8, "m")) == 8192
    # v2: one wave of 2 blocks an SM on 132 SMs; 2^28 keys = 34953 tiles -> 133 a block
    assert D.v2_plan(2 ** 28, 132) == (133, 263)
    assert D.v2_plan(1, 132) == (1, 1) and D.v2_plan(4000037, 132) == (2, 261)
    # the status words of the longest array fit 32-bit indices; counts fit 30 bits
    smallest_tile = min(t * i for t, i, _ in D.V4_CANDIDATES)
    assert 2 * -(-D.N_MAX // smallest_tile) * 256 < 2 ** 31 and D.N_MAX < 2 ** 30


@pytest.mark.parametrize("kind", sorted(D.KINDS))
@pytest.mark.parametrize("dist", sorted(D.DISTS))
def test_make_case_and_its_reference(kind, dist):
    n = 517
    case = D.make_case((n, dist, 2, kind), np.random.default_rng(kind * 10 + dist))
    raw, exp = case.inputs["x"], case.expected()
    dt, desc = D.KINDS[kind]
    assert raw.dtype == np.uint32 and case.inputs["v"].tolist() == list(range(n))
    assert np.array_equal(np.sort(exp["vals"]), np.arange(n))          # a permutation
    assert np.array_equal(exp["keys"], raw[exp["vals"]])
    kb = R.key_bits(exp["keys"].view(dt), desc).astype(np.int64)
    assert np.all(np.diff(kb) >= 0)                                     # in order
    same = np.diff(kb) == 0
    assert np.all(np.diff(exp["vals"])[same] > 0)                       # ties in input order
    if dist == 3:
        assert np.array_equal(exp["vals"], np.arange(n))
    if dist == 5:
        assert np.all(raw == D.ALL_EQUAL_KEY) and np.array_equal(exp["vals"], np.arange(n))
    if dist == 2:
        assert np.unique(raw).size <= 16
    assert case.bytes == 16 * n and case.read_bytes == 8 * n


def test_float_cases_hold_the_special_values():
    raw = D.make_raw(5000, 1, 3, np.random.default_rng(0))
    for s in (0x80000000, 0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000):
        assert (raw == s).any(), hex(s)


def test_check_sizes_cover_every_kind_width_and_the_tiles():
    sizes = D.CHECK_SIZES
    assert {s[3] for s in sizes} == set(D.KINDS) and {s[2] for s in sizes} == {1, 2}
    assert {s[1] for s in sizes} == set(D.DISTS)
    ns = {s[0] for s in sizes}
    assert {1, 31, 33} <= ns and any(n % 7680 and n > 7680 for n in ns)
    assert any(n > 2 * 132 * 7680 for n in ns)  # v2 walks several tiles a block
    for s in sizes + D.BENCH_SIZES:
        D.validate_size(s)


@pytest.mark.parametrize("size,msg", [((2 ** 30, 1, 1, 1), "too long"), ((10, 6, 1, 1), "DIST"),
                                      ((10, 1, 3, 1), "WORDS"), ((10, 1, 1, 7), "KIND")])
def test_validate_size_refuses(size, msg):
    with pytest.raises(ValueError, match=msg):
        D.validate_size(size)


def test_traffic_rows():
    rows = {r[0]: r for r in D.traffic_rows(2 ** 28)}
    assert rows["v3"][3] == "4.5" and rows["v2"][3] == "6.0" and rows["v1"][3] == "12.0"
    assert rows["floor"][2] == "2.15 GB"
    pairs = {r[0]: r for r in D.traffic_rows(2 ** 28, words=2)}
    assert pairs["v4"][3] == "4.2"   # (1 + 4 x 4) / 4 words


# --- public functions: bad input (checked before anything touches the GPU) --------------------

def test_public_functions_refuse_bad_keys():
    with pytest.raises(TypeError, match="uint32, int32 or float32"):
        D.sort(np.zeros(4, np.int64))
    with pytest.raises(TypeError, match="uint32, int32 or float32"):
        D.sort([1, 2, 3])                      # a list is int64
    with pytest.raises(TypeError, match="booleans"):
        D.argsort(np.zeros(3, bool))
    with pytest.raises(ValueError, match="1-D"):
        D.sort(np.zeros((2, 2), np.float32))
    with pytest.raises(TypeError, match="None"):
        D.sort(None)
    with pytest.raises(ValueError, match="at most"):
        D.sort(np.broadcast_to(np.uint32(0), (2 ** 30,)))


def test_public_functions_refuse_bad_values_and_options():
    k = np.zeros(4, np.uint32)
    with pytest.raises(TypeError, match="4-byte"):
        D.sort_pairs(k, np.zeros(4, np.int64))
    with pytest.raises(TypeError, match="4-byte"):
        D.sort_pairs(k, np.zeros(4, bool))
    with pytest.raises(ValueError, match="one shape"):
        D.sort_pairs(k, np.zeros(5, np.int32))
    with pytest.raises(TypeError, match="descending"):
        D.sort(k, descending="yes")
    with pytest.raises(ValueError, match="v1, v2, v3, v4"):
        D.sort(k, version="v9")
    with pytest.raises(TypeError, match="version"):
        D.argsort(k, version=4)
    with pytest.raises(ValueError, match="v1, v2"):
        D.launch("v7", None)


def test_empty_inputs_need_no_gpu():
    e = D.sort(np.zeros(0, np.float32))
    assert e.dtype == np.float32 and e.size == 0
    k, v = D.sort_pairs(np.zeros(0, np.int32), np.zeros(0, np.float32), descending=True)
    assert k.dtype == np.int32 and v.dtype == np.float32 and k.size == v.size == 0
    a = D.argsort(np.zeros(0, np.uint32))
    assert a.dtype == np.int64 and a.size == 0


# --- GPU ----------------------------------------------------------------------------------------

# The look-back kernels (v3, v4 and every v4 shape) first run in a child process with a time
# limit: a protocol bug would otherwise hang this test process (the kernels' own watchdog traps
# after ~1 s of waiting on one status word, which also ends the child with an error).
SMOKE_SIZES = [(1, 1, 2, 1), (33, 2, 2, 3), (7681, 1, 2, 1), (100003, 5, 2, 2), (1000003, 2, 2, 4),
               (2 ** 20 + 7, 1, 1, 6)]

_SMOKE_CHILD = """
import json, sys
import numpy as np
from common import harness as H
from days.day55_radix_sort import driver as D
runs = [("v3", None)] + [("v4", tuple(c)) for c in D.V4_CANDIDATES]
for size in json.loads(sys.argv[1]):
    case = D.make_case(tuple(size), np.random.default_rng(3))
    exp = case.expected()
    d = H.DeviceCase(case)
    for v, cfg in runs:
        r = H.check(lambda ver, dd: D.launch(ver, dd, cfg), v, case, d)
        print(json.dumps([size, v, cfg, bool(r.ok), r.message]), flush=True)
"""


def test_look_back_kernels_in_a_child_process(gpu):
    import json
    import subprocess
    import sys

    from common.harness import ROOT

    try:
        r = subprocess.run([sys.executable, "-c", _SMOKE_CHILD, json.dumps(SMOKE_SIZES)], cwd=ROOT,
                           capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"the look-back kernels did not finish in 300 s (a deadlock?); output so far: "
                    f"{e.stdout!r}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(rows) == len(SMOKE_SIZES) * (1 + len(D.V4_CANDIDATES)), r.stdout
    bad = [row for row in rows if not row[3]]
    assert not bad, bad


@pytest.mark.parametrize("version", list(D.VERSIONS))
@pytest.mark.parametrize("dt", [np.uint32, np.int32, np.float32])
@pytest.mark.parametrize("desc", [False, True])
def test_public_functions_match_numpy(gpu, version, dt, desc):
    rng = np.random.default_rng(11)
    n = 123457
    bits = rng.integers(0, 2 ** 32, n, dtype=np.uint32)
    bits[::5] = bits[rng.integers(0, n, bits[::5].size)]  # duplicates
    x = bits.view(dt).copy()
    if dt == np.float32:
        x[::31] = -0.0
        x[::37] = 0.0
        x[::41] = np.nan
    want = R.argsort(x, desc)
    got = D.sort(x, descending=desc, version=version)
    assert got.dtype == dt and np.array_equal(got.view(np.uint32), x[want].view(np.uint32))
    if not desc:
        assert np.array_equal(got.view(np.uint32), np.sort(x, kind="stable").view(np.uint32))
    assert np.array_equal(D.argsort(x, descending=desc, version=version), want)
    vals = rng.standard_normal(n).astype(np.float32)
    k, v = D.sort_pairs(x, vals, descending=desc, version=version)
    assert np.array_equal(k.view(np.uint32), x[want].view(np.uint32))
    assert v.dtype == np.float32 and np.array_equal(v.view(np.uint32), vals[want].view(np.uint32))


@pytest.mark.parametrize("version", list(D.VERSIONS))
def test_stable_with_few_distinct_keys(gpu, version):
    """3 distinct keys over 3 million: every key's value must come out in input order."""
    rng = np.random.default_rng(2)
    x = rng.integers(0, 3, 3_000_001).astype(np.int32) - 1
    v = np.arange(x.size, dtype=np.int32)
    k, out = D.sort_pairs(x, v, version=version)
    assert np.array_equal(k, np.sort(x))
    for key in (-1, 0, 1):
        assert np.all(np.diff(out[k == key]) > 0)
    assert np.array_equal(out, np.argsort(x, kind="stable"))


def test_every_v4_shape_at_a_ragged_size(gpu):
    from common import harness as H

    for size in [(2 ** 20 + 7, 1, 2, 1), (4000037, 2, 1, 3)]:
        case = D.make_case(size, np.random.default_rng(4))
        d = H.DeviceCase(case)
        for cfg in D.V4_CANDIDATES:
            r = H.check(lambda ver, dd: D.launch(ver, dd, cfg), "v4", case, d)
            assert r.ok, (size, cfg, r.message)


def test_repeated_launches_reuse_the_status_words(gpu):
    """The status words are cleared by the sort itself (pass p clears pass p + 1's): many sorts
    on one DeviceCase, each checked."""
    from common import harness as H

    case = D.make_case((1000003, 1, 2, 1), np.random.default_rng(6))
    d = H.DeviceCase(case)
    for v in ("v3", "v4", "v3", "v4", "v4"):
        assert H.check(D.launch, v, case, d).ok
