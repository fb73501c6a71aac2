import math
from pathlib import Path

import numpy as np
import pytest

from days.day58_curand_init import reference as R

FIXTURE = Path(__file__).resolve().parents[2] / "days" / "day58_curand_init" / "curand_fixture.npz"


@pytest.fixture(scope="module")
def fx():
    return np.load(FIXTURE)


def philox_by_hand(c, k, rounds=10):
    """A second Philox, in plain Python integers, one block at a time."""
    c, k = list(c), list(k)
    for _ in range(rounds):
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k[0], p1 & 0xFFFFFFFF, (p0 >> 32) ^ c[3] ^ k[1], p0 & 0xFFFFFFFF]
        k = [(k[0] + 0x9E3779B9) & 0xFFFFFFFF, (k[1] + 0xBB67AE85) & 0xFFFFFFFF]
    return tuple(c)


# --- the numpy stream against cuRAND's own outputs (the fixture) ---------------------------------

def _streams(fx):
    return list(zip(fx["seed"].tolist(), fx["offset"].tolist(), range(len(fx["seed"]))))


def test_fixture_is_small_and_complete(fx):
    assert FIXTURE.stat().st_size < 16 * 1024
    assert sorted(set(fx["seed"].tolist())) == [0, 1234, 0x123456789ABCDEF]
    assert sorted(set(fx["offset"].tolist())) == [0, 1, 4, 5, 1000003]


def test_u32_equals_curand_bit_for_bit(fx):
    for seed, off, i in _streams(fx):
        np.testing.assert_array_equal(R.u32(64, seed, off), fx["u32"][i], err_msg=f"{seed} {off}")
    # the end of a 40000-word call (chunks 9996 .. 9999)
    np.testing.assert_array_equal(R.u32(40000, 1234)[-16:], fx["u32_s1234_n40000_last16"])


def test_dynamic_ordering_is_another_lane_count(fx):
    for j, seed in enumerate((0, 1234, 0x123456789ABCDEF)):
        got = R.u32(16, seed, 1000003, lanes=R.LANES_DYNAMIC_H200)
        np.testing.assert_array_equal(got, fx["u32_dynamic_o1000003"][j])
        assert not np.array_equal(R.u32(16, seed, 1000003), got)   # the default layout differs


def test_uniform_equals_curand_bit_for_bit(fx):
    for seed, off, i in _streams(fx):
        got = R.uniform(16, seed, off)
        assert got.dtype == np.float32
        np.testing.assert_array_equal(got.view(np.uint32), fx["uniform"][i].view(np.uint32))


def test_uniform_double_equals_curand_bit_for_bit(fx):
    for seed, off, i in _streams(fx):
        np.testing.assert_array_equal(R.uniform_double(16, seed, off), fx["uniform_double"][i])


# cuRAND's normals take sin and cos from the special-function unit (|error| <= 2^-21.4 of a
# sine on the angles it sees) times r <= sqrt(-2 ln 2^-33) = 6.76, plus a float32 rounding or two:
# 6.76 * 2^-21.41 + 2 * 6.76 * 2^-24 = 3.3e-6
NORMAL_TOL = 4e-6


def test_normal_matches_curand_to_the_sfu_error(fx):
    for seed, off, i in _streams(fx):
        want = fx["normal"][i].astype(np.float64)
        got = R.normal(16, seed, off)
        assert np.max(np.abs(got - want)) < NORMAL_TOL, (seed, off)
        # and the pairing is right: a shifted pair would be off by O(1)
    np.testing.assert_allclose(R.normal(40000, 1234)[-16:], fx["normal_s1234_n40000_last16"],
                               rtol=0, atol=NORMAL_TOL)


def test_normal_double_matches_curand(fx):
    for seed, off, i in _streams(fx):
        np.testing.assert_allclose(R.normal_double(16, seed, off), fx["normal_double"][i],
                                   rtol=0, atol=4e-15)


# --- the layout by hand -------------------------------------------------------------------------

def test_layout_by_hand():
    seed = 0xFEDCBA9876543210
    key = (seed & 0xFFFFFFFF, seed >> 32)
    for g in (0, 3, 4, 4 * 65535 + 2, 4 * 65536, 4 * 65536 + 5, 4 * (3 * 65536 + 17) + 1,
              4 * (1 << 40) + 3):
        j = g // 4
        ctr = ((j >> 16) & 0xFFFFFFFF, j >> 48, j & 0xFFFF, 0)
        assert R.u32(1, seed, g)[0] == philox_by_hand(ctr, key)[g % 4], g


def test_philox_equals_day33s_and_known_answers():
    from days.day33_ddpm_kernel import reference as R33

    rng = np.random.default_rng(5)
    c = rng.integers(0, 2 ** 32, (70000, 4), dtype=np.uint64)
    seed = 0x243F6A8885A308D3
    got = R.philox(c[:, 0], c[:, 1], c[:, 2], c[:, 3], seed)
    np.testing.assert_array_equal(got, R33.philox4x32(c, R33.key_of(seed)))
    # Random123's known answer for counter 0, key 0
    assert tuple(R.philox(0, 0, 0, 0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)


@pytest.mark.parametrize("fn", [R.u32, R.uniform, R.normal, R.uniform_double])
def test_offset_is_a_slice_of_one_stream(fn):
    full = fn(300, 77)
    for o in (1, 2, 3, 4, 5, 131):
        np.testing.assert_array_equal(fn(300 - o, 77, o), full[o:])


def test_uniform_of_words_by_hand():
    w = np.array([0, 1, 0x80000000, 0xFFFFFF7F, 0xFFFFFF80, 0xFFFFFFFF], np.uint32)
    got = R.uniform_of_words(w)
    # 2^-33; 2^-32 + 2^-33 (exact); 1/2 (2^-33 is below half an ulp of 1/2); just below 1:
    # 0xFFFFFF7F rounds to float 2^32 - 256, u = 1 - 2^-24 (+ 2^-33 lost); 0xFFFFFF80 is a tie
    # that rounds to even, 2^32: u = 1.0f; 0xFFFFFFFF -> 1.0f
    np.testing.assert_array_equal(got, np.array([2.0 ** -33, 3 * 2.0 ** -33, 0.5, 1 - 2.0 ** -24,
                                                 1.0, 1.0], np.float32))


def test_box_muller_uv_by_hand():
    u, v = R.box_muller_uv(np.array([0], np.uint32), np.array([0x80000000], np.uint32))
    assert u[0] == np.float32(2.0 ** -33)
    # v = 2^31 * c + c/2 = float(2 pi) (1/2 + 2^-33): float32(pi) to the float's precision
    assert v[0] == np.float32(np.float32(2 * np.pi) * (0.5 + 2.0 ** -33))


def test_bernoulli_threshold_and_edges():
    assert R.bernoulli_threshold(0.0) == 0 and R.bernoulli_threshold(1.0) == 2 ** 32
    assert R.bernoulli_threshold(0.5) == 2 ** 31
    assert not R.bernoulli(1000, 0.0, 3).any() and R.bernoulli(1000, 1.0, 3).all()
    w = R.u32(1000, 3)
    np.testing.assert_array_equal(R.bernoulli(1000, 0.25, 3), (w < 2 ** 30).astype(np.float32))


def test_initializer_scales_by_hand():
    assert R.he_std(2) == pytest.approx(1.0)
    assert R.he_bound(6) == pytest.approx(1.0)                 # sqrt(3) sqrt(2/6)
    assert R.xavier_std(1, 3) == pytest.approx(math.sqrt(0.5))
    assert R.xavier_bound(2, 4) == pytest.approx(1.0)          # sqrt(6 / 6)
    x = R.symmetric_uniform(10000, 0.5, 9)
    assert x.max() <= 0.5 and x.min() > -0.5


# --- distribution tests on the numpy reference (the GPU's are the same numbers) ------------------

def test_uniform_distribution():
    u = R.uniform(1 << 18, 11)
    assert R.ks_uniform(u)[1] > 1e-3
    for k, (val, want, se) in R.uniform_moments(u).items():
        assert abs(val - want) < 5 * se, k
    assert u.min() > 0 and u.max() <= 1


def test_normal_distribution():
    z = R.normal(1 << 18, 12, 3)
    assert R.ks_normal(z)[1] > 1e-3
    for k, v in R.moments(z).items():
        if k != "n":
            val, want, se = v
            assert abs(val - want) < 5 * se, k


def test_distribution_tests_can_fail():
    u = R.uniform(1 << 16, 11)
    assert R.ks_uniform(u ** 1.05)[1] < 1e-6                   # a slightly wrong distribution
    assert R.ks_normal(R.normal(1 << 16, 12) * 1.05)[1] < 1e-6   # std 1.05
    m = R.uniform_moments(u * 0.98)
    assert abs(m["mean"][0] - m["mean"][1]) > 5 * m["mean"][2]


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_bernoulli_frequency(p):
    n = 1 << 18
    ones = int(R.bernoulli(n, p, 13).sum())
    assert abs(R.bernoulli_z(ones, n, p)) < 5


def test_pairs_use_sine_then_cosine():
    w = R.u32(2, 21)
    u, v = R.box_muller_uv(w[:1], w[1:])
    r = math.sqrt(-2 * math.log(float(u[0])))
    z = R.normal(2, 21)
    assert z[0] == pytest.approx(r * math.sin(float(v[0])), abs=1e-12)
    assert z[1] == pytest.approx(r * math.cos(float(v[0])), abs=1e-12)


# --- common/rng.py and the driver without a GPU --------------------------------------------------

def test_fans():
    from common import rng

    assert rng.fans((768, 3072)) == (3072, 768)
    assert rng.fans((64, 3, 7, 7)) == (147, 3136)
    assert rng.fans(10) == (10, 10)
    with pytest.raises(ValueError, match="dimension"):
        rng.fans(())


def test_grids_and_chunks():
    from common import rng

    assert rng.chunks_per_thread("v1") == 1 and rng.chunks_per_thread("v3") == 2
    assert rng.chunks_per_thread("v3_u4_cs1") == 4
    assert rng.grid_for("v1", 1000, 0)[0] == (4, 1, 1)              # 1000 threads
    assert rng.grid_for("v2", 1024, 0)[0] == (1, 1, 1)              # 256 chunks
    assert rng.grid_for("v2", 1024, 1)[0] == (2, 1, 1)              # 257 chunks
    assert rng.grid_for("v3", 2048 + 1, 3)[0] == (2, 1, 1)          # 513 chunks, 2 a thread
    with pytest.raises(ValueError, match="v9"):
        rng.chunks_per_thread("v9")


def test_philox_stream_offsets():
    from common import rng

    s = rng.PhiloxStream(5, offset=8)
    assert s._take(10) == 8 and s.offset == 20           # rounded up to a multiple of 4
    assert s._take((3, 4)) == 20 and s.offset == 32
    assert s._take(0) == 32 and s.offset == 32


@pytest.mark.parametrize("call,exc,word", [
    (lambda D: D.normal(10, 1, version="v9"), ValueError, "v9"),
    (lambda D: D.normal(-1, 1), ValueError, "n"),
    (lambda D: D.normal(2.5, 1), TypeError, "integer"),
    (lambda D: D.normal(2 ** 31, 1), ValueError, "32-bit"),
    (lambda D: D.normal(10, -1), ValueError, "seed"),
    (lambda D: D.normal(10, 2 ** 64), ValueError, "seed"),
    (lambda D: D.normal(10, "a"), TypeError, "seed"),
    (lambda D: D.normal(10, 1, offset=2 ** 64), ValueError, "offset"),
    (lambda D: D.normal(10, 1, std=-1.0), ValueError, "std"),
    (lambda D: D.normal(10, 1, mean=float("nan")), ValueError, "finite"),
    (lambda D: D.bernoulli(10, 1.5, 1), ValueError, "p"),
    (lambda D: D.bernoulli(10, None, 1), TypeError, "p"),
    (lambda D: D.u32(10, 1.5), TypeError, "seed"),
    (lambda D: D.uniform(10, 1, version=3), TypeError, "version"),
])
def test_driver_refuses_bad_input(call, exc, word):
    from days.day58_curand_init import driver as D

    with pytest.raises(exc, match=word):
        call(D)


def test_driver_empty_is_empty():
    from days.day58_curand_init import driver as D

    assert D.normal(0, 1).shape == (0,) and D.normal(0, 1).dtype == np.float32
    assert D.u32(0, 1).dtype == np.uint32 and D.bernoulli(0, 0.5, 1).size == 0


@pytest.mark.parametrize("call,exc,word", [
    (lambda r: r.normal("x", 1), TypeError, "shape"),
    (lambda r: r.normal((3, -1), 1), ValueError, "dimension"),
    (lambda r: r.normal((1 << 16, 1 << 16), 1), ValueError, "32-bit"),
    (lambda r: r.uniform(5, 1, low=1.0, high=1.0), ValueError, "greater"),
    (lambda r: r.uniform(5, 1, low=float("inf")), ValueError, "finite"),
    (lambda r: r.he_normal((4, 4), 1, fan_in=0), ValueError, "fan_in"),
    (lambda r: r.xavier_uniform((4, 4), 1, fan_out=-3), ValueError, "fan_out"),
    (lambda r: r.he_uniform((4, 4), 1, gain=0.0), ValueError, "gain"),
    (lambda r: r.bernoulli(4, -0.1, 1), ValueError, "p"),
    (lambda r: r.normal(4, -5), ValueError, "seed"),
    (lambda r: r.normal(4, 1, offset=-1), ValueError, "offset"),
    (lambda r: r.normal(4, 1, version="v7"), ValueError, "v7"),
    (lambda r: r.PhiloxStream(-1), ValueError, "seed"),
])
def test_rng_refuses_bad_input(call, exc, word):
    from common import rng

    with pytest.raises(exc, match=word):
        call(rng)


def test_bar_checks_read_the_record():
    from days.day58_curand_init import driver as D

    ok, fig = D._bit_exact({"extra": {"curand_match": {"normal v3": {"values": 10, "differ": 1}}}})
    assert not ok and "1 of 10" in fig
    dist = D.BAR[1]["check"]
    assert dist({"extra": {"distribution_tests": {"normal KS": {"ok": True}}}})[0]
    ok, fig = dist({"extra": {"distribution_tests": {"normal KS": {"ok": True},
                                                     "He std": {"ok": False}}}})
    assert not ok and "He std" in fig
    assert dist({})[1] == "not measured"
    assert D._bit_exact({})[0] is False


# --- on the GPU ----------------------------------------------------------------------------------

def _curand_or_skip():
    from common import rng

    ok, why = rng.curand_status()
    if not ok:
        pytest.skip(why)
    return rng


STREAMS = [(0, 0, 4100), (1234, 5, 9002), (0x0123456789ABCDEF, 1000003, 4100),
           ((1 << 63) | 12345, 3, 300002), (7, (1 << 34) + 4, 70000)]


# the sweep candidates (v3_*) exist for uniform and normal only
LIBCURAND_PAIRS = [(dist, v) for dist in ("u32", "uniform", "normal")
                   for v in ("v1", "v2", "v3", "v3_u1_cs0", "v3_u4_cs0", "v3_u2_cs1", "v3_u4_cs1")
                   if dist != "u32" or not v.startswith("v3_")]


@pytest.mark.parametrize("dist,version", LIBCURAND_PAIRS)
def test_gpu_equals_libcurand_bit_for_bit(gpu, dist, version):
    rng = _curand_or_skip()
    for seed, off, n in STREAMS:
        with rng.CurandGenerator(seed, off) as g:
            want = getattr(g, dist)(n).get()
        got = getattr(rng, dist)(n, seed, off, version=version).get()
        bad = np.nonzero(got.view(np.uint32) != want.view(np.uint32))[0]
        assert bad.size == 0, (f"{dist} {version} seed {seed} offset {off}: {bad.size} differ, "
                               f"first at {bad[:3]}: {got[bad[:3]]} vs {want[bad[:3]]}")


@pytest.mark.parametrize("version", ["v1", "v2", "v3"])
def test_gpu_equals_numpy(gpu, version):
    from days.day58_curand_init import driver as D

    for n, off in ((1, 0), (5, 3), (33, 2), (4101, 1000003), (70001, 1)):
        np.testing.assert_array_equal(D.u32(n, 99, off, version), R.u32(n, 99, off))
        np.testing.assert_array_equal(D.uniform(n, 99, off, version), R.uniform(n, 99, off))
        np.testing.assert_array_equal(D.bernoulli(n, 0.3, 99, off, version), R.bernoulli(n, 0.3, 99, off))
        np.testing.assert_allclose(D.normal(n, 99, off, version=version), R.normal(n, 99, off),
                                   rtol=0, atol=NORMAL_TOL)


def test_gpu_numpy_doubles_equal_libcurand_within_a_round(gpu):
    rng = _curand_or_skip()
    for seed, off in ((5, 0), (6, 1000003)):
        n = 4 * 40000          # quads within one round of 65536 subsequences
        with rng.CurandGenerator(seed, off) as g:
            ud = g.uniform_double(n).get()
            g.set_offset(off)
            nd = g.normal_double(n).get()
        np.testing.assert_array_equal(ud, R.uniform_double(n, seed, off))
        np.testing.assert_allclose(nd, R.normal_double(n, seed, off), rtol=0, atol=2e-14)


def test_gpu_initializers_and_stream(gpu):
    from common import rng

    w = rng.he_normal((512, 2048), 3)
    assert w.shape == (512, 2048) and w.dtype == np.float32
    x = w.get().astype(np.float64)
    sd = math.sqrt(2 / 2048)
    assert abs(x.std() / sd - 1) < 5 * math.sqrt(1 / (2 * x.size))
    np.testing.assert_allclose(x.ravel(), sd * R.normal(x.size, 3), rtol=0, atol=NORMAL_TOL * sd + 1e-7)
    u = rng.xavier_uniform((256, 1024), 4).get()
    a = math.sqrt(6 / (256 + 1024))
    assert u.max() <= a * (1 + 1e-6) and u.min() >= -a * (1 + 1e-6)
    s = rng.PhiloxStream(8)
    p1, p2 = s.normal(1001), s.normal(999)
    full = rng.normal(2003, 8).get()
    np.testing.assert_array_equal(p1.get(), full[:1001])
    np.testing.assert_array_equal(p2.get(), full[1004:2003])     # offset 1001 -> 1004
    out = rng.uniform(100, 1).get()
    from pycuda import gpuarray

    buf = gpuarray.empty(100, np.float32)
    assert rng.uniform(100, 1, out=buf) is buf
    np.testing.assert_array_equal(buf.get(), out)
    with pytest.raises(ValueError, match="float32"):
        rng.uniform(100, 1, out=gpuarray.empty(100, np.float64))


def test_gpu_distributions(gpu):
    from days.day58_curand_init import driver as D

    res = D.distribution_tests(n=1 << 22)
    bad = {k: r for k, r in res.items() if not r["ok"]}
    assert not bad, bad
