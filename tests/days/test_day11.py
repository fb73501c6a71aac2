import numpy as np
import pytest

from common.check import compare
from days.day11_conv1d import reference


def test_conv1d_by_hand():
    # y[i] = 1 * x[i-1] + 0 * x[i] - 1 * x[i+1], zeros outside
    y = reference.conv1d([1, 2, 3, 4, 5], [1, 0, -1])
    np.testing.assert_array_equal(y, [-2, -2, -2, -2, 4])
    np.testing.assert_array_equal(reference.conv1d([1, 2, 3], [2.5]), [2.5, 5.0, 7.5])  # K = 1
    # a signal shorter than the filter: only the centre tap (w[2]) meets x[0]
    np.testing.assert_array_equal(reference.conv1d([2.0], [1, 2, 3, 4, 5]), [6.0])
    # n = 2, K = 5: y[0] = w[2] x[0] + w[3] x[1], y[1] = w[1] x[0] + w[2] x[1]
    np.testing.assert_array_equal(reference.conv1d([1.0, 10.0], [1, 2, 3, 4, 5]), [43.0, 32.0])


def test_shifts_and_identity():
    x = np.arange(1.0, 10.0)
    e = np.eye(7)
    np.testing.assert_array_equal(reference.conv1d(x, e[3]), x)                       # centre: identity
    np.testing.assert_array_equal(reference.conv1d(x, e[0]), np.r_[0, 0, 0, x[:-3]])   # w[0]: x[i - 3]
    np.testing.assert_array_equal(reference.conv1d(x, e[6]), np.r_[x[3:], 0, 0, 0])    # w[6]: x[i + 3]


@pytest.mark.parametrize("n,k", [(1, 1), (1, 31), (5, 31), (30, 31), (33, 3), (1000, 7), (2, 1023)])
def test_reference_equals_shifted_sums(n, k):
    rng = np.random.default_rng(n * 1000 + k)
    x, w = rng.standard_normal(n), rng.standard_normal(k)
    np.testing.assert_allclose(reference.conv1d(x, w), reference.conv1d_shifted_sums(x, w),
                               rtol=1e-12, atol=1e-12)


def test_even_filter_rejected():
    with pytest.raises(ValueError):
        reference.conv1d([1.0, 2.0], [1.0, 1.0])


def test_validate_size():
    from days.day11_conv1d import driver

    driver.validate_size((10, 1023))
    with pytest.raises(ValueError, match="odd"):
        driver.validate_size((10, 4))
    with pytest.raises(ValueError, match="constant buffer"):
        driver.validate_size((10, 1025))


def test_kernel_choice_and_load_counts():
    from days.day11_conv1d import driver

    assert driver.v4_kernel(1) == "conv1d_v4_r0"
    assert driver.v4_kernel(31) == "conv1d_v4_r15"
    assert driver.v4_kernel(33) is None            # too wide for v4's templates: v3
    assert driver.loads_per_output("v1", 7) == (14, 0)
    # v4, K = 31: window of 1 pad + 8 + 30 = 39 -> 40 floats for 8 outputs
    g, s = driver.loads_per_output("v4", 31)
    assert s == 5.0 and abs(g - (2048 + 30) / 2048) < 1e-12
    assert driver.loads_per_output("v3", 31)[1] == 31


def test_case_bytes_and_flops():
    from days.day11_conv1d import driver

    c = driver.make_case((1000, 7), np.random.default_rng(0))
    assert c.bytes == 8 * 1000 + 4 * 7 and c.flops == 0       # small filter: memory-bound
    c = driver.make_case((100, 255), np.random.default_rng(0))
    assert c.flops == 2 * 255 * 100                            # wide filter: compute-bound


# --- GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("k", [1, 3, 7, 31, 33])
@pytest.mark.parametrize("n", [1, 5, 256, 2049, 4096])
def test_padding_at_both_ends_on_gpu(gpu, n, k):
    """x = 1 everywhere: y[i] = sum of the taps that land inside the signal, so every
    output near either end checks the halo handling."""
    from days.day11_conv1d import driver

    w = np.random.default_rng(k).standard_normal(k).astype(np.float32)
    x = np.ones(n, np.float32)
    ref = reference.conv1d(x, w)
    for v in driver.VERSIONS:
        r = compare(driver.conv1d(x, w, v), ref)
        assert r.ok, f"{v} n={n} K={k}: {r.message}"


@pytest.mark.parametrize("p", [0, 255, 256, 2047, 2048, 4095])
def test_impulses_at_tile_edges_on_gpu(gpu, p):
    """An impulse at x[p] spreads the reversed filter around p: y[p + r - j] = w[j]."""
    from days.day11_conv1d import driver

    w = np.arange(1, 32, dtype=np.float32)  # K = 31, all taps distinct
    x = np.zeros(4096, np.float32)
    x[p] = 1.0
    ref = reference.conv1d(x, w)
    for v in driver.VERSIONS:
        y = driver.conv1d(x, w, v)
        np.testing.assert_array_equal(y, ref.astype(np.float32), err_msg=f"{v}, impulse at {p}")


def test_constant_filter_follows_the_case_on_gpu(gpu):
    """Two cases with different filters launched in turn: the constant buffer must be
    reloaded whenever the case changes (v2-v4 read the filter from it)."""
    from common import harness as H
    from days.day11_conv1d import driver

    rng = np.random.default_rng(5)
    cases = [driver.make_case((3000, 7), rng) for _ in range(2)]
    devs = [H.DeviceCase(c) for c in cases]
    for v in ("v2", "v3", "v4"):
        for i in (0, 1, 0):
            r = H.check(driver.launch, v, cases[i], devs[i])
            assert r.ok, f"{v} case {i}: {r.message}"


def test_matches_torch_on_gpu(gpu):
    from common.baselines import torch_or_none
    from days.day11_conv1d import driver

    torch = torch_or_none()
    if torch is None:
        pytest.skip("torch not installed")
    rng = np.random.default_rng(7)
    x = rng.standard_normal(10007).astype(np.float32)
    w = rng.standard_normal(7).astype(np.float32)
    torch.backends.cudnn.allow_tf32 = False
    t = torch.nn.functional.conv1d(torch.as_tensor(x, device="cuda").view(1, 1, -1),
                                   torch.as_tensor(w, device="cuda").view(1, 1, -1), padding=3)
    np.testing.assert_allclose(driver.conv1d(x, w), t.cpu().numpy().ravel(), rtol=1e-5, atol=1e-5)


# --- the public function: bad input is refused before anything reaches the GPU -------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("x,w,exc,word", [
    (np.ones((4, 100)), np.ones(3), ValueError, "1-D"),        # a 2-D signal is not convolved by rows
    (np.ones(100), np.ones((1, 3)), ValueError, "1-D"),
    (np.float32(1.0), np.ones(3), ValueError, "1-D"),
    (np.ones(10, np.complex64), np.ones(3), TypeError, "complex"),
    (np.ones(10), np.ones(3, bool), TypeError, "booleans"),
    ("signal", np.ones(3), TypeError, "string"),
    (np.ones(10), np.ones(4), ValueError, "odd length"),       # even: no centre tap
    (np.ones(10), np.ones(0), ValueError, "empty"),
    (np.ones(10), np.ones(1025), ValueError, "1023"),          # past the constant buffer
    (np.ones(10), np.ones(1024), ValueError, "odd"),
])
def test_conv1d_refuses_bad_input(x, w, exc, word):
    from days.day11_conv1d import driver

    _raises(exc, word, lambda: driver.conv1d(x, w))


def test_conv1d_refuses_unknown_versions_and_launch_too():
    from days.day11_conv1d import driver

    _raises(ValueError, "v4", lambda: driver.conv1d(np.ones(10), np.ones(3), "v5"))
    _raises(TypeError, "version", lambda: driver.conv1d(np.ones(10), np.ones(3), None))
    # launch() used to run v3 for any name it did not know
    _raises(ValueError, "unknown version", lambda: driver.launch("v9", None))
    _raises(ValueError, "unknown version", lambda: driver.loads_per_output("v0", 7))


def test_conv1d_of_an_empty_signal_launches_nothing():
    from days.day11_conv1d import driver

    y = driver.conv1d(np.ones(0), np.ones(5))
    assert y.dtype == np.float32 and y.shape == (0,)
    np.testing.assert_array_equal(reference.conv1d(np.ones(0), np.ones(5)), y)   # the spec agrees


def test_signal_length_limit():
    from days.day11_conv1d import driver

    driver.validate_size((driver.MAX_N, 31))
    _raises(ValueError, "32-bit", lambda: driver.validate_size((driver.MAX_N + 1, 31)))


def test_bar_best_and_bench_sizes():
    from common.bars import judge
    from days.day11_conv1d import driver

    assert driver.BEST == "v4"
    # an awkward length (odd, no tile divides it) is timed, with a small filter like the others
    awkward = [(n, k) for n, k in driver.BENCH_SIZES if n % 2 and n % 256 and n % 2048]
    assert awkward and all(k <= 2 * driver.V4_MAX_R + 1 for _, k in driver.BENCH_SIZES)
    # the bar is 70% of the ceiling at every bench size
    row = lambda pct: {"version": "v4", "ok": True, "median_ms": 1.0, "pct_of_ceiling": pct}
    rec = {"cases": [{"size": list(s), "rows": [row(80.0)], "baseline": []} for s in driver.BENCH_SIZES]}
    assert judge(driver.BAR, rec)[0] is True
    rec["cases"][-1]["rows"] = [row(69.0)]
    ok, fig = judge(driver.BAR, rec)
    assert ok is False and "69.0%" in fig


def test_case_reads_half_its_bytes():
    from days.day11_conv1d import driver

    c = driver.make_case((1000, 7), np.random.default_rng(0))
    assert c.read_bytes == 4 * 1000 + 4 * 7 and c.bytes - c.read_bytes == 4 * 1000


def test_widest_filter_and_tiniest_signal_on_gpu(gpu):
    # K = 1023 (the constant buffer's limit) over a signal shorter than the filter, every version
    from days.day11_conv1d import driver

    w = (np.arange(1023) % 5 - 2).astype(np.float32)
    for x in (np.array([3.0], np.float32), np.arange(1, 6, dtype=np.float32)):
        want = reference.conv1d(x, w).astype(np.float32)     # small integers: exact in float32
        for v in driver.VERSIONS:
            np.testing.assert_array_equal(driver.conv1d(x, w, v), want, err_msg=f"{v} n={x.size}")
