import re
from pathlib import Path

import numpy as np
import pytest

from days.day57_topk_argmax import reference

DRV = "days.day57_topk_argmax.driver"
KERNEL = Path(reference.__file__).parent / "kernel.cu"


def _driver():
    import importlib

    return importlib.import_module(DRV)


# --- the reference against hand-computed values and a second formulation ----------------------

def test_order_keys_by_hand():
    x = np.array([1.0, -1.0, 0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 2.0], np.float32)
    k = reference.order_keys(x)
    assert k[0] == 0xBF800000              # 0x3F800000 with the sign bit set
    assert k[1] == 0x407FFFFF              # ~0xBF800000: every bit of -1.0 flipped
    assert k[2] == k[3] == 0x80000000      # -0.0 is +0.0
    assert k[4] == 0xFF800000 and k[5] == 0x007FFFFF
    assert k[6] == k[7] == 0xFFFFFFFF      # every NaN above +inf
    assert k[8] == 0xC0000000


def test_order_keys_sort_as_the_floats_do():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(500).astype(np.float32) * 1e3,
                        np.array([1e-45, -1e-45, 3.4e38, -3.4e38, 0.0], np.float32)])
    order = np.argsort(reference.order_keys(x), kind="stable")
    assert np.all(np.diff(x[order].astype(np.float64)) >= 0)


def test_topk_by_hand():
    x = np.array([[3.0, 1.0, 3.0, np.nan, -0.0, 0.0, 2.0]], np.float32)
    v, i = reference.topk(x, 6)
    np.testing.assert_array_equal(i, [[3, 0, 2, 6, 1, 4]])   # NaN, the two 3s in order, 2, 1, -0
    assert np.isnan(v[0, 0]) and list(v[0, 1:5]) == [3.0, 3.0, 2.0, 1.0]
    assert v[0, 5] == 0 and np.signbit(v[0, 5])              # -0.0 (column 4) before +0.0 (5)
    v, i = reference.topk(np.array([[5.0, 5.0, 5.0]], np.float32), 2)
    np.testing.assert_array_equal(i, [[0, 1]])


def test_topk_agrees_with_lexsort_on_ties_nan_and_inf():
    rng = np.random.default_rng(11)
    x = np.round(rng.standard_normal((12, 300)).astype(np.float32) * 2) / 2
    x[0, ::7] = np.nan
    x[1, ::5] = np.inf
    x[2, ::3] = -np.inf
    x[3] = 1.0
    x[4, ::2] = -0.0
    for k in (1, 2, 17, 256, 300):
        v1, i1 = reference.topk(x, k)
        v2, i2 = reference.topk_lexsort(x, k)
        np.testing.assert_array_equal(i1, i2)
        np.testing.assert_array_equal(v1.view(np.uint32), v2.view(np.uint32))  # bit for bit


def test_topk_in_row_pieces_equals_one_piece():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((reference.ROWS_PER_PIECE + 5, 40)).astype(np.float32)
    _, i = reference.topk(x, 9)
    np.testing.assert_array_equal(i, np.argsort(-x, axis=1, kind="stable")[:, :9])


def test_argmax_is_the_top_1_and_argmin_the_top_1_of_minus_x():
    rng = np.random.default_rng(8)
    x = np.round(rng.standard_normal((40, 64)).astype(np.float32))
    x[5, [3, 9]] = np.nan
    x[6, 0] = np.nan
    x[7] = 0.0
    x[7, ::2] = -0.0
    np.testing.assert_array_equal(reference.argmax(x), reference.topk(x, 1)[1][:, 0])
    np.testing.assert_array_equal(reference.argmin(x), reference.topk(-x, 1)[1][:, 0])
    assert reference.argmax(x)[5] == 3 and reference.argmin(x)[6] == 0


def test_bytes_moved_by_hand():
    assert reference.bytes_moved(2, 10, 3) == (80 + 48, 80)


# --- sizes, cases, routing ------------------------------------------------------------------------

def test_check_cases_carry_ties_and_bench_cases_do_not():
    drv = _driver()
    c = drv.make_case((8, 300, 5), np.random.default_rng(0))
    x = c.inputs["x"]
    assert np.all(x[3] == -1.5) and set(np.unique(x[2])) <= {0.0, 1.0, 2.0}
    assert np.all(x[1] * 2 == np.round(x[1] * 2))
    size = drv.TOPK_SIZES[0]
    x = drv.make_case(size, np.random.default_rng(0)).inputs["x"]
    assert len(np.unique(x[3])) > 0.99 * size[1]


def test_case_outputs_and_reference():
    drv = _driver()
    c = drv.make_case((5, 33, 4), np.random.default_rng(2))
    e = c.expected()
    assert c.outputs == {"values": ((5, 4), np.float32), "indices": ((5, 4), np.int32)}
    np.testing.assert_array_equal(e["values"], np.take_along_axis(c.inputs["x"], e["indices"], 1))
    c = drv.make_case((6, 20, 1), np.random.default_rng(2))
    np.testing.assert_array_equal(c.expected()["indices"][:, 0], np.argmax(c.inputs["x"], 1))
    assert c.read_bytes == 6 * 20 * 4 and c.bytes == c.read_bytes + 6 * 8


@pytest.mark.parametrize("size,word", [((4, 10, 0), "K = 0"), ((4, 10, 11), "K = 11"),
                                       ((4, 1000, 257), "K = 257")])
def test_validate_size_refuses_bad_k(size, word):
    with pytest.raises(ValueError, match=word):
        _driver().validate_size(size)


def test_bench_and_check_sizes_are_valid():
    drv = _driver()
    for s in drv.CHECK_SIZES + drv.BENCH_SIZES + list(drv.SIZES.values()):
        drv.validate_size(s)
    assert all(s[1] == drv.VOCAB for s in drv.VOCAB_SIZES)
    assert {s[2] for s in drv.TOPK_SIZES} == {1, 8, 50, 256}


def test_v4_routing():
    drv = _driver()
    assert [drv.v4_cluster(r) for r in (1, 32, 33, 65, 66, 131, 132, 4096)] == \
        [8, 8, 4, 4, 2, 2, None, None]
    assert drv.same_as("v4", (256, 50257, 50)) == "v3" and drv.same_as("v4", (32, 50257, 50)) is None
    assert drv.same_as("v3", (1, 5, 1)) is None
    name, grid, *_ = drv.kernel_for("v4", 33, 50257, 50)
    assert name == "topk_v4_c4_t512" and grid == (132,)
    assert drv.kernel_for("v4", 300, 50257, 1)[0] == "argmax_v3_w8_u8_max"
    assert drv.kernel_for("v3", 9, 100, 1, minimum=True)[0] == "argmax_v3_w1_u4_min"
    assert drv.kernel_for("v3", 9, 100, 1)[1] == (2,)          # 8 rows a block
    assert [drv.argmax_wpr(c) for c in (1, 2048, 2049, 8192, 8193)] == [1, 1, 4, 4, 8]


def test_every_kernel_the_driver_can_pick_is_in_kernel_cu():
    drv = _driver()
    src = KERNEL.read_text()
    names = set(re.findall(r"\b((?:argmax|topk)_v\d\w*)\b", src))
    # the macro-made names: expand the instantiations
    for wpr, u in re.findall(r"ARGMAX_V3\((\d+), (\d+)\)", src):
        names |= {f"argmax_v3_w{wpr}_u{u}_max", f"argmax_v3_w{wpr}_u{u}_min"}
    for c in re.findall(r"ARGMAX_V4\((\d+)\)", src):
        names |= {f"argmax_v4_c{c}_max", f"argmax_v4_c{c}_min"}
    for t, u in re.findall(r"TOPK_V3\((\d+), (\d+)\)", src):
        names.add(f"topk_v3_t{t}_u{u}")
    for c, t in re.findall(r"TOPK_V4\((\d+), (\d+)\)", src):
        names.add(f"topk_v4_c{c}_t{t}")
    names |= {f"argmax_{v}_{m}" for v in ("v1", "v2") for m in ("max", "min")}
    for size in drv.CHECK_SIZES + drv.BENCH_SIZES:
        for v in drv.VERSIONS:
            for minimum in ((False, True) if size[2] == 1 else (False,)):
                name = drv.kernel_for(v, *size, minimum=minimum)[0]
                assert name in names, (v, size, name)
    for t, u in drv.V3_TOPK_CHOICES:
        assert f"topk_v3_t{t}_u{u}" in names
    for c in drv.V4_CLUSTERS:
        assert f"topk_v4_c{c}_t{drv.V4_TOPK_THREADS}" in names


def test_shared_memory_layout_matches_kernel_cu():
    drv = _driver()
    src = KERNEL.read_text()
    assert f"constexpr int NB1 = {drv.NB1};" in src and f"constexpr int MAX_K = {drv.MAX_K};" in src
    assert "return NB1 * 4 + MAX_K * 8 + cap * 8;" in src
    assert drv.topk_smem_bytes() == 4096 * 4 + 256 * 8 + drv.CAP * 8 <= 227 * 1024


# --- the public functions refuse bad input before any GPU work -----------------------------------

@pytest.mark.parametrize("fn", ["argmax", "argmin"])
def test_arg_bad_input(fn):
    f = getattr(_driver(), fn)
    with pytest.raises(ValueError, match="2-D"):
        f(np.zeros(5))
    with pytest.raises(TypeError, match="complex"):
        f(np.zeros((2, 2), np.complex64))
    with pytest.raises(TypeError, match="booleans"):
        f(np.zeros((2, 2), bool))
    with pytest.raises(TypeError, match="string"):
        f("abc")
    with pytest.raises(ValueError, match="length 0"):
        f(np.zeros((3, 0)))
    with pytest.raises(ValueError, match="unknown version"):
        f(np.zeros((2, 2)), version="v9")


def test_arg_empty_rows_give_an_empty_result():
    drv = _driver()
    for f in (drv.argmax, drv.argmin):
        r = f(np.zeros((0, 7)))
        assert r.shape == (0,) and r.dtype == np.int64


def test_topk_bad_input():
    drv = _driver()
    x = np.zeros((3, 10), np.float32)
    with pytest.raises(ValueError, match="between 1 and 10"):
        drv.topk(x, 0)
    with pytest.raises(ValueError, match="between 1 and 10"):
        drv.topk(x, 11)
    with pytest.raises(ValueError, match="between 1 and 256"):
        drv.topk(np.zeros((2, 1000)), 257)
    with pytest.raises(TypeError, match="integer"):
        drv.topk(x, 2.5)
    with pytest.raises(TypeError, match="integer"):
        drv.topk(x, "3")
    with pytest.raises(ValueError, match="length 0"):
        drv.topk(np.zeros((2, 0)), 1)
    with pytest.raises(ValueError, match="2-D"):
        drv.topk(np.zeros((2, 3, 4)), 1)
    with pytest.raises(ValueError, match="unknown version"):
        drv.topk(x, 2, version="v0")


def test_topk_no_rows_gives_empty_results():
    v, i = _driver().topk(np.zeros((0, 9)), 4)
    assert v.shape == (0, 4) and i.shape == (0, 4) and v.dtype == np.float32 and i.dtype == np.int64


# --- on the GPU --------------------------------------------------------------------------------

def _special_rows(rng, rows, cols):
    x = np.round(rng.standard_normal((rows, cols)).astype(np.float32) * 2) / 2
    x[0, ::97] = np.nan                    # NaN ranks first (the first NaN is argmax and argmin)
    x[1, ::13] = np.inf
    x[2, ::11] = -np.inf
    x[3] = -np.inf
    x[4] = 0.0
    x[4, ::3] = -0.0
    x[5, cols // 2:] = np.nan
    return x


@pytest.mark.parametrize("rows,cols", [(7, 5), (33, 1000), (9, 50257), (140, 3001)])
def test_gpu_nan_inf_and_zeros_every_version(gpu, rows, cols):
    drv = _driver()
    x = _special_rows(np.random.default_rng(rows + cols), rows, cols)
    for v in drv.VERSIONS:
        np.testing.assert_array_equal(drv.argmax(x, version=v), np.argmax(x, 1), err_msg=v)
        np.testing.assert_array_equal(drv.argmin(x, version=v), np.argmin(x, 1), err_msg=v)
        for k in sorted({2, 5, min(256, cols)}):
            val, idx = drv.topk(x, k, version=v)
            rv, ri = reference.topk(x, k)
            np.testing.assert_array_equal(idx, ri, err_msg=f"{v} k={k}")
            # every value is x[row, index], bit for bit (NaN payloads and -0.0 included)
            np.testing.assert_array_equal(val.view(np.uint32), rv.view(np.uint32), err_msg=v)


@pytest.mark.parametrize("rows,cols,k", [(1, 50257, 256), (32, 50257, 50), (33, 50257, 8),
                                         (70, 12289, 100), (256, 4097, 3), (32, 50257, 1),
                                         (1000, 37, 1), (5, 9001, 1)])
def test_gpu_every_sweep_candidate(gpu, rows, cols, k):
    """The tile choices the sweep times (kernel_for's config) give the reference's answer."""
    drv = _driver()
    from common import harness as H

    case = drv.make_case((rows, cols, k), np.random.default_rng(k), ties=True)
    configs = [("v3", c) for c in drv.V3_TOPK_CHOICES] + \
              [("v4", (c, drv.V4_TOPK_THREADS)) for c in drv.V4_CLUSTERS] + [("v4", (8, 256))]
    if k == 1:
        configs = [("v3", (w, u)) for w, u in ((1, 2), (1, 4), (4, 2), (4, 4), (4, 8), (8, 2),
                                               (8, 4), (8, 8))] + \
                  [("v4", (c,)) for c in drv.V4_CLUSTERS]
    for v, cfg in configs:
        r = H.check(lambda ver, d: drv.launch(ver, d, config=cfg), v, case)
        assert r.ok, (v, cfg, r.message)


def test_gpu_argmin_ties_every_version(gpu):
    drv = _driver()
    c = drv.make_case((37, 9001, 1), np.random.default_rng(1), ties=True)
    x = c.inputs["x"]
    for v in drv.VERSIONS:
        np.testing.assert_array_equal(drv.argmin(x, version=v), np.argmin(x, 1), err_msg=v)
