import numpy as np
import pytest

from days.day29_batched_matmul import reference


# --- the reference against independent values -------------------------------------------------

def test_reference_by_hand():
    a = np.array([[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]])
    b = np.array([[[5.0, 6.0], [7.0, 8.0]], [[2.0, 3.0], [4.0, 5.0]]])
    want = np.array([[[19.0, 22.0], [43.0, 50.0]],   # the first product
                     [[4.0, 5.0], [2.0, 3.0]]])      # a swap of B's rows
    np.testing.assert_array_equal(reference.bmm(a, b), want)


@pytest.mark.parametrize("shape", [(3, 1, 1, 1), (2, 5, 7, 3), (50, 16, 16, 16), (4, 33, 17, 65),
                                   (2, 70, 80, 90)])
def test_reference_equals_einsum(shape):
    # both of the reference's paths (loop of 2-D products, stacked matmul) against einsum
    batch, m, k, n = shape
    rng = np.random.default_rng(sum(shape))
    a, b = rng.standard_normal((batch, m, k)), rng.standard_normal((batch, k, n))
    want = np.einsum("bmk,bkn->bmn", a, b)
    np.testing.assert_allclose(reference.bmm(a, b), want, rtol=1e-12, atol=1e-12)


def test_reference_refuses_mismatched_shapes():
    with pytest.raises(ValueError, match="batch"):
        reference.bmm(np.ones((2, 3, 4)), np.ones((3, 4, 5)))
    with pytest.raises(ValueError, match="batch"):
        reference.bmm(np.ones((2, 3, 4)), np.ones((2, 5, 5)))


def test_counts_and_intensity():
    assert reference.flops(100000, 16, 16, 16) == 2 * 100000 * 16 ** 3
    assert reference.bytes_moved(100000, 16, 16, 16) == 100000 * 3 * 256 * 4
    assert reference.intensity(16, 16, 16) == pytest.approx(8192 / 3072)
    assert reference.intensity(1024, 1024, 1024) == pytest.approx(1024 / 6)
    assert reference.intensity(33, 17, 65) == pytest.approx(2 * 33 * 17 * 65 / (4 * (561 + 1105 + 2145)))


def test_tile_fill():
    assert reference.tile_fill(64, 64, 64, 64) == 1.0
    assert reference.tile_fill(32, 32, 64, 64) == 0.25
    assert reference.tile_fill(33, 65, 64, 64) == pytest.approx(2145 / (64 * 128))
    assert reference.tile_fill(1000, 513, 128, 128) == pytest.approx(1000 * 513 / (1024 * 640))


# --- the driver's plans (no GPU) -----------------------------------------------------------------

def test_make_case_reports_bytes_for_tiny_and_flops_for_large():
    from days.day29_batched_matmul import driver

    rng = np.random.default_rng(0)
    tiny = driver.make_case((10, 16, 16, 16), rng)
    assert tiny.flops == 0 and tiny.bytes == 10 * 3 * 256 * 4 and tiny.read_bytes == 10 * 2 * 256 * 4
    big = driver.make_case((1, 256, 256, 256), rng)
    assert big.flops == 2 * 256 ** 3 and big.unit == "fp32"
    assert big.outputs["c"] == ((1, 256, 256), np.float32)


def test_v4_plans_at_the_bench_sizes():
    from days.day29_batched_matmul import driver as D

    plan = {s: D.v4_plan(s, sms=132) for s in D.BENCH_SIZES}
    assert plan[D.TINY] == plan[(100000, 8, 8, 8)] == plan[(20000, 32, 32, 32)] == "tiny"
    assert plan[(1000, 33, 17, 65)] == "tiny"          # a 64x64 tile would be 26% useful
    assert plan[(4096, 64, 64, 64)].startswith("64x64")
    for s in D.LARGE + [(512, 128, 128, 128), (24, 1000, 777, 513)]:
        assert plan[s] == "128x128", s
    # one 1024^3 matrix makes 64 tiles of 128x128, a quarter of a wave: the mid tile takes it
    assert D.v4_plan((1, 1024, 1024, 1024), sms=132).startswith("64x64")
    assert D.same_as("v4", D.TINY) == "v2" and D.same_as("v4", D.LARGE[0]) == "v3"
    assert D.same_as("v4", (4096, 64, 64, 64)) is None
    assert D.same_as("v2", D.LARGE[0]) == "v1" and D.same_as("v2", D.TINY) is None
    assert D.same_as("v3", D.TINY) is None


def test_tiny_plan_blocks_cover_the_batch_and_fit_shared_memory():
    from days.day29_batched_matmul import driver as D

    for size in D.CHECK_SIZES + D.BENCH_SIZES:
        if not D.tiny_fits(size):
            continue
        batch, m, k, n = size
        name, g, smem, blocks = D.tiny_plan(size)
        assert blocks * g >= batch > (blocks - 1) * g
        assert smem >= 4 * g * (m * k + k * n) and smem <= 48 * 1024, size
        assert name.endswith({(0, 0): "_n4_k4", (0, 1): "_n4"}.get((n % 4, min(k % 4, 1)),
                                                                       "_k4" if k % 4 == 0 else "_any"))
    assert D.tiny_plan(D.TINY)[:2] == ("bmm_tiny_v2_n4_k4", 16)   # 16 x 2 KB = 32 KB a block
    assert D.tiny_plan((1000, 33, 17, 65))[0] == "bmm_tiny_v2_any"


class _Recorder:
    """Stands in for driver.K: records every launch instead of running it."""

    def __init__(self):
        self.calls = []

    def __call__(self, name, signature=None, dynamic_smem=0):
        rec = self

        class Fn:
            def prepared_call(self, grid, block, *args, shared_size=0):
                rec.calls.append((name, grid, block, args, shared_size))
        return Fn()


class _FakeCase:
    def __init__(self, size):
        self.size = size
        self.a, self.b, self.c = 1 << 32, 2 << 32, 3 << 32


def test_batches_past_grid_z_are_split_with_offset_pointers(monkeypatch):
    from days.day29_batched_matmul import driver as D

    rec = _Recorder()
    monkeypatch.setattr(D, "K", rec)
    size = (70000, 5, 6, 7)
    D.launch("v3", _FakeCase(size))
    (n1, g1, b1, a1, _), (n2, g2, b2, a2, _) = rec.calls
    assert n1 == n2 == "bmm_sgemm_v3_scalar" and g1 == (1, 1, 65535) and g2 == (1, 1, 4465)
    assert a2[0] - a1[0] == 4 * 65535 * 5 * 6 and a2[1] - a1[1] == 4 * 65535 * 6 * 7
    assert a2[2] - a1[2] == 4 * 65535 * 5 * 7 and a1[3:] == (5, 7, 6)
    rec.calls.clear()
    D.launch("v1", _FakeCase(size))              # v1 loops over batches in the kernel
    (name, grid, block, args, _), = rec.calls
    assert grid == (1, 1, 65535) and args[3:] == (70000, 5, 7, 6)
    rec.calls.clear()
    D.launch("v4", _FakeCase((3, 64, 64, 64)))   # the mid tile, float4 path
    (name, grid, block, args, _), = rec.calls
    assert name == "bmm_tile_v4_64x64_k8_vec" and grid == (1, 1, 3) and block == (64, 1, 1)


def test_launch_refuses_unknown_versions():
    from days.day29_batched_matmul import driver as D

    with pytest.raises(ValueError, match="unknown version"):
        D.launch("v9", _FakeCase((1, 1, 1, 1)))


# --- the public function: bad input is refused before anything reaches the GPU -----------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3, 4), np.complex64), np.ones((2, 4, 5)), TypeError, "complex"),
    (np.ones((2, 3, 4)), np.ones((2, 4, 5), bool), TypeError, "booleans"),
    ("abc", np.ones((2, 4, 5)), TypeError, "string"),
    (np.ones((3, 4)), np.ones((2, 4, 5)), ValueError, "3-D"),
    (np.ones((2, 3, 4)), np.ones((4, 5)), ValueError, "3-D"),
    (np.ones((2, 3, 4)), np.ones((3, 4, 5)), ValueError, "batch sizes"),
    (np.ones((2, 3, 4)), np.ones((2, 5, 5)), ValueError, "K = 4"),
    ([[[1.0, 2.0], [3.0]]], np.ones((1, 2, 2)), ValueError, "ragged"),
])
def test_bmm_refuses_bad_arrays(a, b, exc, word):
    from days.day29_batched_matmul import driver

    _raises(exc, word, lambda: driver.bmm(a, b))


def test_bmm_refuses_unknown_versions():
    from days.day29_batched_matmul import driver

    _raises(ValueError, "v4", lambda: driver.bmm(np.ones((1, 2, 2)), np.ones((1, 2, 2)), "v7"))
    _raises(TypeError, "version", lambda: driver.bmm(np.ones((1, 2, 2)), np.ones((1, 2, 2)), 4))


def test_bmm_of_empty_operands_launches_nothing():
    from days.day29_batched_matmul import driver

    c = driver.bmm(np.ones((2, 3, 0)), np.ones((2, 0, 4)))     # K = 0: sums of nothing
    assert c.dtype == np.float32 and c.shape == (2, 3, 4) and not c.any()
    assert driver.bmm(np.ones((0, 3, 5)), np.ones((0, 5, 4))).shape == (0, 3, 4)
    assert driver.bmm(np.ones((2, 0, 5)), np.ones((2, 5, 4))).shape == (2, 0, 4)
    assert driver.bmm(np.ones((2, 3, 5)), np.ones((2, 5, 0))).shape == (2, 3, 0)


def test_sizes_past_the_kernels_limits_are_refused():
    from days.day29_batched_matmul import driver as D

    D.validate_size((D.MAX_BATCH, 1, 1, 1))
    D.validate_size((1, D.MAX_GRID * 16, 1, 1))
    _raises(ValueError, "batch", lambda: D.validate_size((D.MAX_BATCH + 1, 1, 1, 1)))
    _raises(ValueError, "gridDim.y", lambda: D.validate_size((1, D.MAX_GRID * 16 + 1, 1, 1)))
    _raises(ValueError, "32-bit", lambda: D.validate_size((1, 1, 2 ** 31, 1)))
    _raises(ValueError, "M*K", lambda: D.validate_size((1, 65536, 65536, 1)))
    _raises(ValueError, "K*N", lambda: D.validate_size((1, 1, 65536, 65536)))


# --- bar, bench sizes -----------------------------------------------------------------------------

def _case(size, ours, cublas, torch=None):
    base = [{"name": "cuBLAS strided batched", "median_ms": cublas, "ok": True}]
    if torch is not None:
        base.append({"name": "torch.bmm", "median_ms": torch, "ok": True})
    return {"size": list(size), "rows": [{"version": "v4", "median_ms": ours, "ok": True}],
            "baseline": base}


def test_bar_is_against_cublas_on_tiny_and_large():
    from common.bars import judge
    from days.day29_batched_matmul import driver as D

    def rec(tiny_ms, large_ms):
        return {"cases": [_case(D.TINY, tiny_ms, 1.0, torch=0.5)]
                + [_case(s, large_ms, 1.0) for s in D.LARGE]}

    assert judge(D.BAR, rec(0.9, 1.1))[0] is True           # 1.11x cuBLAS, 0.91x cuBLAS
    ok, fig = judge(D.BAR, rec(1.05, 1.0))                   # slower than cuBLAS on tiny
    assert ok is False and "100000x16x16x16" in fig
    ok, fig = judge(D.BAR, rec(0.9, 1.2))                    # 0.83x cuBLAS on large
    assert ok is False and "0.83x" in fig


def test_bench_sizes_cover_every_plan_and_an_awkward_shape():
    from days.day29_batched_matmul import driver as D

    plans = {D.v4_plan(s, sms=132).split()[0] for s in D.BENCH_SIZES}
    assert plans == {"tiny", "64x64", "128x128"}
    assert D.TINY in D.BENCH_SIZES and all(s in D.BENCH_SIZES for s in D.LARGE)
    assert any(all(v % 2 for v in s[1:3]) for s in D.BENCH_SIZES)     # odd M and K
    assert any(s[0] > D.MAX_GRID for s in D.CHECK_SIZES)              # past gridDim.z


# --- GPU ---------------------------------------------------------------------------------------

def _exact(batch, m, k, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-8, 9, (batch, m, k)).astype(np.float32)
    b = rng.integers(-8, 9, (batch, k, n)).astype(np.float32)
    return a, b, np.matmul(a.astype(np.int64), b.astype(np.int64))


@pytest.mark.parametrize("shape", [(9, 16, 16, 16), (5, 33, 17, 65), (3, 131, 67, 257),
                                   (2, 130, 68, 260), (70001, 2, 4, 3)])
def test_small_integers_are_exact_on_gpu(gpu, shape):
    # integer sums are exact in fp32: a misplaced matrix, tile or zero-fill shows as != 0
    from days.day29_batched_matmul import driver

    a, b, want = _exact(*shape, seed=sum(shape))
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.bmm(a, b, v), want, err_msg=v)


def test_every_mid_tile_candidate_is_right_on_gpu(gpu):
    from common import harness as H
    from days.day29_batched_matmul import driver

    for size in [(3, 65, 130, 64), (2, 100, 36, 132), (4, 1, 8, 4)]:
        case = driver.make_case(size, np.random.default_rng(29))
        for tile in driver.TILES:
            r = H.check(lambda v, d: driver.launch_tile(d, tile), str(tile), case)
            assert r.ok, f"{tile} at {size}: {r.message}"
        for smem in (8 << 10, 16 << 10, 64 << 10):
            if driver.tiny_fits(size):
                r = H.check(lambda v, d: driver.launch_tiny(d, smem), "tiny", case)
                assert r.ok, f"tiny {smem} at {size}: {r.message}"
