import numpy as np
import pytest

from days.day58_curand_init import reference as R58
from days.day59_dropout import reference as R


# --- the reference against independent values ----------------------------------------------------

def test_threshold_and_scale_by_hand():
    assert R.keep_threshold(0.0) == 2 ** 32 and R.keep_threshold(1.0) == 0
    assert R.keep_threshold(0.5) == 2 ** 31 and R.keep_threshold(0.75) == 2 ** 30
    assert R.scale(0.5) == np.float32(2.0) and R.scale(0.75) == np.float32(4.0)
    assert R.scale(1.0) == 0 and R.scale(0.0) == 1


def test_mask_is_the_words_below_the_threshold():
    w = R58.u32(1000, 42, 8)
    np.testing.assert_array_equal(R.keep_mask(1000, 0.75, 42, 8), w < 2 ** 30)
    assert R.keep_mask(100, 0.0, 1).all() and not R.keep_mask(100, 1.0, 1).any()


def test_dropout_by_hand():
    x = np.array([1.0, -2.0, 3.0, 4.0, np.inf, np.nan, 0.5, 8.0], np.float32)
    keep = R.keep_mask(8, 0.5, 7, 3)
    y = R.dropout(x, 0.5, 7, 3)
    for i in range(8):
        if keep[i]:
            assert y[i] == 2 * x[i] or (np.isnan(x[i]) and np.isnan(y[i]))
        else:
            assert y[i] == 0.0                     # a dropped inf or NaN is 0 too
    assert keep.any() and not keep.all()           # this seed mixes both (the test can fail)


def test_backward_uses_the_forward_mask():
    dy = np.arange(1, 1001, dtype=np.float32)
    y = R.dropout(np.ones(1000, np.float32), 0.3, 11, 20)
    dx = R.dropout_backward(dy, 0.3, 11, 20)
    np.testing.assert_array_equal(y > 0, dx > 0)
    np.testing.assert_array_equal(dx[y > 0], (dy * R.scale(0.3))[y > 0])


def test_offsets_move_the_mask():
    a = R.keep_mask(4096, 0.5, 9, 0)
    b = R.keep_mask(4096, 0.5, 9, 4096)
    np.testing.assert_array_equal(R.keep_mask(4096 - 5, 0.5, 9, 5), a[5:])   # a slice of one stream
    assert 0.4 < np.mean(a == b) < 0.6                                         # independent halves


def test_mask_equals_day58_bernoulli():
    np.testing.assert_array_equal(R.keep_mask(5000, 0.2, 3, 17),
                                  R58.bernoulli(5000, 0.8, 3, 17) > 0)


@pytest.mark.parametrize("p", [0.1, 0.5, 0.9])
def test_keep_fraction(p):
    n = 1 << 18
    kept = int(R.keep_mask(n, p, 77).sum())
    assert abs(R.keep_z(kept, n, p)) < 5
    assert abs(R.keep_z(int(n * (1 - p) * 0.95), n, p)) > 5     # 5% short: the test can fail


def test_dropout_add_by_hand():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    b = np.array([10.0, 20.0], np.float32)
    r = np.array([[0.5, 0.5], [0.5, 0.5]], np.float32)
    keep = R.keep_mask(4, 0.5, 5, 0).reshape(2, 2)
    want = r + np.where(keep, 2 * (x + b), 0)
    np.testing.assert_array_equal(R.dropout_add(x, b, r, 0.5, 5, 0), want)


def test_case_reference_equals_float64_formulation():
    from days.day59_dropout import driver as D

    case = D.make_case((1001, 3), np.random.default_rng(1))
    exp = case.expected()
    pr = case.params
    np.testing.assert_array_equal(exp["y"], R.dropout(case.inputs["x"], pr["p"], pr["seed"], 3))
    np.testing.assert_array_equal(exp["dx"], R.dropout_backward(case.inputs["dy"], pr["p"], pr["seed"], 3))
    assert case.bytes == 16 * 1001 and case.read_bytes == 8 * 1001


def test_grids():
    from days.day59_dropout import driver as D

    assert D.grid_for("v1", 1000, 0)[0] == (4, 1, 1)
    assert D.grid_for("v2", 1024, 0)[0] == (1, 1, 1)          # 256 chunks
    assert D.grid_for("v2", 1024, 2)[0] == (2, 1, 1)          # 257 chunks
    assert D.grid_for("v3", 4096, 0)[0] == (1, 1, 1)          # 1024 chunks, 4 a thread
    assert D.grid_for("v3", 4097, 0)[0] == (2, 1, 1)
    assert D.per_thread("v3_u8_cs1") == 8
    with pytest.raises(ValueError, match="v7"):
        D.per_thread("v7")


# --- public functions: bad input ------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,word", [
    (lambda D: D.dropout(np.ones(4), 0.1, 1, version="v9"), ValueError, "v9"),
    (lambda D: D.dropout(np.ones(4), 1.5, 1), ValueError, "p"),
    (lambda D: D.dropout(np.ones(4), -0.1, 1), ValueError, "p"),
    (lambda D: D.dropout(np.ones(4), "a", 1), TypeError, "p"),
    (lambda D: D.dropout(np.ones(4), 0.1, -1), ValueError, "seed"),
    (lambda D: D.dropout(np.ones(4), 0.1, 1, offset=2 ** 64), ValueError, "offset"),
    (lambda D: D.dropout(np.ones(4, complex), 0.1, 1), TypeError, "complex"),
    (lambda D: D.dropout(None, 0.1, 1), TypeError, "None"),
    (lambda D: D.dropout_backward(np.array(["a"]), 0.1, 1), TypeError, "dtype"),
    (lambda D: D.dropout_backward(np.ones(3), 0.1, 2.5), TypeError, "seed"),
    (lambda D: D.dropout_mask((2, -1), 0.1, 1), ValueError, "dimension"),
    (lambda D: D.dropout_add(np.ones((2, 3)), np.ones(4), np.ones((2, 3)), 0.1, 1), ValueError, "bias"),
    (lambda D: D.dropout_add(np.ones((2, 3)), np.ones(3), np.ones((3, 2)), 0.1, 1), ValueError, "residual"),
    (lambda D: D.dropout_add(np.ones(6), np.ones(3), np.ones(6), 0.1, 1), ValueError, "2-D"),
])
def test_refuses_bad_input(call, exc, word):
    from days.day59_dropout import driver as D

    with pytest.raises(exc, match=word):
        call(D)


def test_empty_is_empty():
    from days.day59_dropout import driver as D

    assert D.dropout(np.ones((0, 3)), 0.1, 1).shape == (0, 3)
    assert D.dropout_backward(np.ones(0), 0.1, 1).dtype == np.float32
    assert D.dropout_mask((0,), 0.1, 1).shape == (0,)
    assert D.dropout_add(np.ones((0, 3)), np.ones(3), np.ones((0, 3)), 0.1, 1).shape == (0, 3)


def test_bar_checks_read_the_record():
    from days.day59_dropout import driver as D

    rec = {"extra": {"passes": {"forward": {
        "v3": {"median_ms": 1.0, "pct_of_ceiling": 92.0, "ok": True},
        "torch": {"median_ms": 1.5}}}}}
    ok, fig = D._pass_alone("forward")(rec)
    assert ok and "1.50x torch" in fig
    rec["extra"]["passes"]["forward"]["torch"]["median_ms"] = 0.9
    assert not D._pass_alone("forward")(rec)[0]
    assert not D.BAR[-1]["check"]({"extra": {"reproducibility": {"a": {"ok": False}}}})[0]


# --- on the GPU ----------------------------------------------------------------------------------

@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v3_u1_cs0", "v3_u2_cs0", "v3_u4_cs0",
                                     "v3_u2_cs1", "v3_u4_cs1", "v3_u8_cs1"])
def test_gpu_every_candidate_equals_numpy(gpu, version):
    from pycuda import gpuarray

    from days.day59_dropout import driver as D

    rg = np.random.default_rng(3)
    for n, off in ((1, 0), (3, 1), (33, 2), (4097, 3), (4096 * 5 + 8, 0), (100003, 1 << 33)):
        x = rg.standard_normal(n, dtype=np.float32)
        y = gpuarray.empty(n, np.float32)
        y.fill(np.float32(np.nan))
        D.launch_pass(version, gpuarray.to_gpu(x).gpudata, y.gpudata, n, 99, off, 0.3)
        np.testing.assert_array_equal(y.get(), R.dropout(x, 0.3, 99, off).astype(np.float32),
                                      err_msg=f"{version} n={n} offset={off}")


def test_gpu_reproducible_and_masks_agree(gpu):
    from days.day59_dropout import driver as D

    x = np.ones(70001, np.float32)
    y1 = D.dropout(x, 0.25, 5, 12)
    np.testing.assert_array_equal(y1, D.dropout(x, 0.25, 5, 12))                 # same seed
    np.testing.assert_array_equal(y1 > 0, D.dropout_backward(x, 0.25, 5, 12) > 0)  # fwd = bwd
    np.testing.assert_array_equal(y1 > 0, D.dropout_mask(x.shape, 0.25, 5, 12))
    assert not np.array_equal(y1, D.dropout(x, 0.25, 5, 12 + 70004))             # next offset
    assert not np.array_equal(y1, D.dropout(x, 0.25, 6, 12))                     # other seed
    np.testing.assert_array_equal(D.dropout(x, 0.0, 5), x)
    assert not D.dropout(x, 1.0, 5).any()


def test_gpu_shapes_and_gpu_arrays(gpu):
    from pycuda import gpuarray

    from days.day59_dropout import driver as D

    x = np.random.default_rng(0).standard_normal((7, 9, 11)).astype(np.float32)
    y = D.dropout(x, 0.5, 1, 4)
    assert y.shape == x.shape
    np.testing.assert_array_equal(y.ravel(), R.dropout(x, 0.5, 1, 4).astype(np.float32).ravel())
    g = D.dropout_gpu(gpuarray.to_gpu(x), 0.5, 1, 4)
    np.testing.assert_array_equal(g.get(), y)
    with pytest.raises(TypeError, match="GPUArray"):
        D.dropout_gpu(x, 0.5, 1)


def test_gpu_dropout_add(gpu):
    from days.day59_dropout import driver as D

    rg = np.random.default_rng(4)
    for rows, C, off in ((3, 8, 0), (5, 7, 0), (4, 12, 3), (33, 1000, 8)):
        x = rg.standard_normal((rows, C), dtype=np.float32)
        b = rg.standard_normal(C, dtype=np.float32)
        r = rg.standard_normal((rows, C), dtype=np.float32)
        got = D.dropout_add(x, b, r, 0.2, 9, off)
        np.testing.assert_array_equal(got, R.dropout_add(x, b, r, 0.2, 9, off).astype(np.float32))
