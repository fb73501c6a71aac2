import io

import numpy as np
import pytest

from days.day51_streams_overlap import driver, reference


def _all_positive_floats(count, seed):
    """Random bit patterns of positive finite float32: subnormals through FLT_MAX."""
    rng = np.random.default_rng(seed)
    bits = rng.integers(1, 0x7F7FFFFF, count).astype(np.int32)
    edges = np.array([1, 2, 0x007FFFFF, 0x00800000, 0x00800001, 0x1F800000, 0x3F800000,
                      0x40800000, 0x7F7FFFFF], np.int32)   # subnormals, FLT_MIN, 2^-64, 1, 4, max
    return np.concatenate([edges, bits]).view(np.float32)


# --- the reference -----------------------------------------------------------------------------

def test_rsqrt_by_hand():
    np.testing.assert_array_equal(reference.rsqrt([1.0, 4.0, 0.25, 16.0, 100.0]),
                                  [1.0, 0.5, 2.0, 0.25, 0.1])


def test_seed_is_within_its_claimed_error():
    # the bit trick alone (0 steps) is within 3.5% over every binade of normal floats, and one
    # step brings it within 0.2% (the figures kernel.cu's comment quotes)
    x = _all_positive_floats(20000, 1)
    x = x[x >= np.float32(2.0 ** -64)]       # the scaled path starts from the same seed
    rel0 = np.abs(reference.newton_rsqrt(x, 0) / reference.rsqrt(x) - 1)
    rel1 = np.abs(reference.newton_rsqrt(x, 1) / reference.rsqrt(x) - 1)
    assert 0.03 < rel0.max() < 0.035
    assert 1e-3 < rel1.max() < 2e-3


@pytest.mark.parametrize("steps", [3, 4, 1000])
def test_newton_converges_and_stays_within_two_ulp(steps):
    # every positive float, subnormals included (the 2^64 scaling), after 3 steps and after
    # 1000: the iteration corrects its own rounding, nothing accumulates
    x = _all_positive_floats(5000 if steps == 1000 else 40000, steps)
    ulps = np.abs(reference.newton_rsqrt(x, steps) / reference.rsqrt(x) - 1) * 2.0 ** 23
    assert ulps.max() <= 2.0


def test_two_steps_are_not_enough():
    # the test above can fail: 2 steps leave ~5e-6 (40 ulp) somewhere
    x = _all_positive_floats(40000, 2)
    rel = np.abs(reference.newton_rsqrt(x, 2) / reference.rsqrt(x) - 1)
    assert rel.max() > 1e-6


@pytest.mark.parametrize("n,chunks,align", [(1, 16, 1024), (5, 16, 1024), (1000, 4, 1), (5000, 4, 1024),
                                            (1 << 26, 16, 1024), (30000001, 16, 270336),
                                            (1025, 8, 1024), (7, 3, 1)])
def test_chunks_cover_the_array_once(n, chunks, align):
    b = reference.chunk_bounds(n, chunks, align)
    assert b[0][0] == 0 and b[-1][1] == n
    assert all(b0[1] == b1[0] for b0, b1 in zip(b, b[1:]))      # contiguous, no overlap
    assert all(hi > lo for lo, hi in b)                          # none empty
    assert len(b) <= chunks
    assert all(lo % align == 0 for lo, _ in b)                   # every copy starts aligned
    assert all((hi - lo) % align == 0 for lo, hi in b[:-1])


def test_chunk_bounds_small_and_empty():
    assert reference.chunk_bounds(0, 4) == []
    assert reference.chunk_bounds(1, 16) == [(0, 1)]
    assert reference.chunk_bounds(10, 3, 1) == [(0, 4), (4, 8), (8, 10)]
    assert reference.chunk_bounds(3000, 2) == [(0, 2048), (2048, 3000)]


def test_hidden_fraction_by_hand():
    assert reference.hidden_fraction(10.0, 10.0, 20.0) == 0.0      # fully serial
    assert reference.hidden_fraction(10.0, 10.0, 10.0) == 1.0      # as long as the kernel alone
    assert reference.hidden_fraction(10.0, 10.0, 11.0) == pytest.approx(0.9)
    assert reference.hidden_fraction(10.0, 4.0, 30.0) == pytest.approx(-1.6)  # slower copies


def test_ideal_pipeline_by_hand():
    # busiest engine (kernel, 10) + one chunk of the other two: (5 + 5) / 16
    assert reference.ideal_pipeline(5.0, 10.0, 5.0, 16) == pytest.approx(10.625)
    # one chunk: everything in series
    assert reference.ideal_pipeline(5.0, 10.0, 5.0, 1) == pytest.approx(20.0)
    # copy-bound: copy in is the busiest
    assert reference.ideal_pipeline(6.0, 2.0, 5.0, 4) == pytest.approx(6.0 + 7.0 / 4)


# --- the driver on the CPU ---------------------------------------------------------------------

def test_case_has_no_device_inputs_and_counts_flops():
    case = driver.make_case((1000, 8), np.random.default_rng(0))
    assert case.inputs == {}
    assert case.flops == 4 * 8 * 1000 and case.unit == "fp32"
    x = case.params["host"].x
    assert x.dtype == np.float32 and x.min() >= 0.25 and x.max() < 4.0
    np.testing.assert_allclose(case.expected()["y"], 1 / np.sqrt(x.astype(np.float64)))


def test_take_returns_the_last_output_then_poisons_it():
    host = driver.Host(np.ones(4, np.float32))
    assert np.isnan(host.take()).all()              # nothing launched yet: all NaN
    host.last = np.arange(4, dtype=np.float32)
    out = host.take()
    np.testing.assert_array_equal(out, [0, 1, 2, 3])
    assert np.isnan(host.last).all()                # the next launch must write it again
    assert np.isnan(host.take()).all()


def test_plan_defaults_and_overrides():
    assert driver.plan("v3", {}) == driver.PLAN["v3"]
    assert driver.plan("v4", {"chunks": 32, "streams": 8}) == (32, 8)
    assert driver.plan("v5", {"chunks": 7, "streams": 8}) == (7, 3)   # v5: one stream per engine


def test_validate_size():
    driver.validate_size((1, 4))
    with pytest.raises(ValueError, match="STEPS"):
        driver.validate_size((100, 3))
    with pytest.raises(ValueError, match="STEPS"):
        driver.validate_size((100, 70000))
    with pytest.raises(ValueError, match="32-bit"):
        driver.validate_size((2 ** 31, 8))


def _record(rows):
    return {"extra": {"overlap": {"size": [1 << 26, 1024], "versions": rows}}}


def test_bar_check():
    check = driver.BAR[0]["check"]
    ok, fig = check(_record({"v2": {"ms": 20.0, "hidden": 0.0, "ok": True},
                             "v5": {"ms": 11.0, "hidden": 0.9, "ok": True}}))
    assert ok and "v5 hides 90%" in fig
    ok, fig = check(_record({"v2": {"ms": 20.0, "hidden": 0.0, "ok": True},
                             "v4": {"ms": 13.0, "hidden": 0.7, "ok": True}}))
    assert not ok and "70%" in fig
    # a wrong pipeline does not count, however fast
    ok, fig = check(_record({"v4": {"ms": 13.0, "hidden": 0.7, "ok": True},
                             "v6": {"ms": 5.0, "hidden": 1.5, "ok": False}}))
    assert not ok and "v4" in fig
    assert check({"extra": {}}) == (False, "overlap not measured")


def test_draw_timeline(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    rec = {"device": {"name": "GPU"}, "date": "2026-12-01",
           "extra": {"timeline": {"size": [1024, 8], "versions": {
               "v2": {"what": "serial", "lanes": ["stream 0"], "total_ms": 3.0,
                      "ops": [["stream 0", "copy in", 0, 0.0, 1.0], ["stream 0", "kernel", 0, 1.0, 2.0],
                              ["stream 0", "copy out", 0, 2.0, 3.0]]},
               "v5": {"what": "engines", "lanes": ["copy-in stream", "kernel stream"], "total_ms": 2.0,
                      "ops": [["copy-in stream", "copy in", 0, 0.0, 1.0],
                              ["kernel stream", "kernel", 0, 1.0, 2.0]]}}}}}
    assert driver.draw_timeline(rec, tmp_path / "t.png", plt)
    assert (tmp_path / "t.png").stat().st_size > 1000
    assert not driver.draw_timeline({"extra": {}}, tmp_path / "u.png", plt)


# --- the public function: bad input --------------------------------------------------------------

@pytest.mark.parametrize("kwargs,exc,word", [
    ({"version": "v9"}, ValueError, "unknown version"),
    ({"version": 5}, TypeError, "version"),
    ({"steps": 3}, ValueError, "steps"),
    ({"steps": 2.5}, TypeError, "steps"),
    ({"steps": 10 ** 6}, ValueError, "steps"),
    ({"version": "v1", "chunks": 4}, ValueError, "chunks"),
    ({"version": "v4", "chunks": 0}, ValueError, "chunks"),
    ({"version": "v5", "streams": 2}, ValueError, "streams"),
    ({"version": "v4", "streams": 0}, ValueError, "streams"),
    ({"version": "v4", "streams": "4"}, TypeError, "streams"),
])
def test_rsqrt_bad_arguments(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        driver.rsqrt(np.ones(8, np.float32), **kwargs)


@pytest.mark.parametrize("x,exc,word", [
    (np.array([1.0, -2.0], np.float32), ValueError, "positive"),
    (np.array([1.0, 0.0]), ValueError, "positive"),
    (np.array([[1.0, np.nan]]), ValueError, r"x\[0, 1\]"),
    (np.array([np.inf]), ValueError, "finite"),
    (np.array([1 + 1j]), TypeError, "complex"),
    (np.array([True]), TypeError, "booleans"),
    (np.array(["a"]), TypeError, "numbers"),
    (None, TypeError, "None"),
])
def test_rsqrt_bad_x(x, exc, word):
    with pytest.raises(exc, match=word):
        driver.rsqrt(x)


def test_rsqrt_empty_needs_no_gpu():
    assert driver.rsqrt(np.empty((3, 0), np.float32)).shape == (3, 0)
    assert driver.rsqrt([]).shape == (0,)


# --- on a GPU --------------------------------------------------------------------------------

def _ulps(y, x):
    return np.abs(y.astype(np.float64) / reference.rsqrt(x) - 1) * 2.0 ** 23


@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_every_float_and_odd_shapes_on_gpu(gpu, version):
    # edge values (subnormals, FLT_MIN, FLT_MAX) element by element, in a 2-D array
    x = _all_positive_floats(4087, 7).reshape(16, 256)
    y = driver.rsqrt(x, steps=8, version=version)
    assert y.shape == x.shape and y.dtype == np.float32
    assert _ulps(y, x).max() <= 2.0


@pytest.mark.parametrize("version", ["v3", "v4", "v5"])
@pytest.mark.parametrize("n,chunks,streams", [(1, 16, 4), (3, 7, 2), (1025, 3, 5), (4097, 64, 3),
                                              (100003, 5, 1), (100003, 1, 2), (262147, 33, 8)])
def test_chunked_versions_any_plan_on_gpu(gpu, version, n, chunks, streams):
    x = np.random.default_rng(n + chunks).uniform(0.1, 10.0, n).astype(np.float32)
    y = driver.rsqrt(x, steps=5, version=version, chunks=chunks,
                     streams=None if version == "v5" else streams)
    assert _ulps(y, x).max() <= 2.0


def test_a_check_poisons_what_the_next_launch_must_write_on_gpu(gpu):
    from common import harness as H
    from common.gpu import driver as cuda_driver

    case = driver.make_case((5000, 8), np.random.default_rng(3))
    d = H.DeviceCase(case)
    assert H.check(driver.launch, "v5", case, d).ok
    host = case.params["host"]
    assert np.isnan(host.yp).all()
    xdev = np.empty(5000, np.float32)
    cuda_driver().memcpy_dtoh(xdev, host.xdev)
    assert np.isnan(xdev).all()
    assert H.check(driver.launch, "v3", case, d).ok        # and the next launch rewrites all


def _timeline(version, size=(300007, 16)):
    from common import harness as H
    from common.gpu import driver as cuda_driver

    case = driver.make_case(size, np.random.default_rng(5))
    d = H.DeviceCase(case)
    driver.launch(version, d)
    cuda_driver().Context.synchronize()
    tl = driver.Timeline()
    tl.start.record()
    driver.launch(version, d, tl)
    out = tl.result()
    assert np.allclose(case.params["host"].take(), case.expected()["y"], rtol=1e-6)
    return out, d


@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_timeline_structure_on_gpu(gpu, version):
    tl, d = _timeline(version)
    ops = tl["ops"]
    assert ops and all(0 <= o[3] <= o[4] <= tl["total_ms"] for o in ops)
    for lane in tl["lanes"]:              # a stream runs its operations one after the other
        mine = [o for o in ops if o[0] == lane]
        assert all(a[4] <= b[3] + 1e-3 for a, b in zip(mine, mine[1:]))
    stages = [o[1] for o in ops]
    if version == "v6":
        assert stages == ["kernel"]
        return
    n = d.size[0]
    chunks = len(driver.chunks_of(version, n, d.params)) if version in driver.PLAN else 1
    assert sorted(stages) == sorted(["copy in", "kernel", "copy out"] * chunks)
    by = {(o[1], o[2]): o for o in ops}
    for c in range(chunks):               # the events' order: in, then kernel, then out
        assert by[("copy in", c)][4] <= by[("kernel", c)][3] + 1e-3
        assert by[("kernel", c)][4] <= by[("copy out", c)][3] + 1e-3
    if version == "v5":
        assert tl["lanes"] == ["copy-in stream", "kernel stream", "copy-out stream"]
    if version in ("v3", "v4"):
        assert len(tl["lanes"]) == min(driver.PLAN[version][1], chunks)


def test_overlap_extras_on_gpu(gpu, tmp_path):
    from common.runner import Report

    rep = Report(51, io.StringIO())
    driver.overlap(rep, size=(1 << 20, 64), repeats=3)
    ov, tl = rep.extra["overlap"], rep.extra["timeline"]
    assert set(ov["versions"]) == set(driver.VERSIONS)
    assert all(r["ok"] for r in ov["versions"].values()), rep.failures
    assert ov["t_copy_ms"] > 0 and ov["t_compute_ms"] > 0
    assert set(tl["versions"]) == set(driver.TIMELINE_VERSIONS)
    assert [s["title"].split(" at ")[0] for s in rep.sections] == ["Engines alone", "Overlap"]
    ok, fig = driver.BAR[0]["check"]({"extra": rep.extra})
    assert "hides" in fig
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rec = {"device": {"name": "GPU"}, "date": "today", "extra": rep.extra}
    assert driver.draw_timeline(rec, tmp_path / "timeline.png", plt)
