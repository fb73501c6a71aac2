import re
from pathlib import Path

import numpy as np
import pytest

from common.baselines import kernels_launched
from days.day17_prefix_sum import reference


def test_scans_by_hand():
    x = np.array([3, 1, 4, 1, 5], np.int32)
    assert reference.inclusive_scan(x).tolist() == [3, 4, 8, 9, 14]
    assert reference.exclusive_scan(x).tolist() == [0, 3, 4, 8, 9]
    assert reference.prefix_sum([7], exclusive=True).tolist() == [0]
    assert reference.inclusive_scan(x).dtype == np.int32


def test_scans_wrap_like_int32():
    x = np.full(4, 2 ** 30, np.int32)
    assert reference.inclusive_scan(x).tolist() == [2 ** 30, -2 ** 31, -2 ** 30, 0]
    assert reference.exclusive_scan(x).tolist() == [0, 2 ** 30, -2 ** 31, -2 ** 30]
    # uint32 input is read as the same bits
    u = np.array([0xFFFFFFFF, 2], np.uint32)
    assert reference.inclusive_scan(u).tolist() == [-1, 1]


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 1000, 1025])
def test_block_algorithms_match_cumsum(n):
    x = np.random.default_rng(n).integers(-1000, 1000, n).astype(np.int32)
    c = np.cumsum(x.astype(np.int64))
    assert reference.hillis_steele(x).tolist() == c.tolist()
    assert reference.blelloch(x).tolist() == np.concatenate([[0], c[:-1]]).tolist()


def test_launch_plans():
    from days.day17_prefix_sum import driver

    assert driver.levels(2 ** 28 + 3, 512) == [524289, 1025, 3, 1]
    assert driver.levels(2 ** 28 + 3, 1024) == [262145, 257, 1]
    assert driver.levels(1, 1024) == [1]
    g, per = driver.segments(2 ** 28 + 3, 660)  # 32769 tiles of 8192
    assert (g, per) == (656, 50) and (g - 1) * per < 32769 <= g * per
    assert driver.segments(1, 660) == (1, 1)
    rows = driver.traffic_rows(2 ** 28 + 3)
    assert [r[4] for r in rows] == ["2.00x", "2.00x", "1.50x", "1.00x", "1.00x"]
    assert [r[2] for r in rows] == ["7", "5", "3", "1 + memset", "1"]


def _defines():
    src = (Path(reference.__file__).parent / "kernel.cu").read_text()
    return {k: int(v) for k, v in re.findall(r"^#define (\w+) (\d+)\s*$", src, re.M)}


def test_driver_shapes_match_kernel():
    from days.day17_prefix_sum import driver

    d = _defines()
    assert (d["T_THREADS"], d["CHUNKS"]) == (driver.T_THREADS, 8)
    assert driver.TILE == d["T_THREADS"] // 32 * d["CHUNKS"] * 128 == 8192
    assert (d["V1_THREADS"], d["V2_THREADS"]) == (driver.BLOCK_THREADS, driver.BLOCK_THREADS)
    assert driver.V5 == {"warps": d["V5_WARPS"], "chunks": d["V5_CHUNKS"]}
    assert driver.tile_of(**driver.V5) == 3072 and driver.tile_of(4, 8) == 4096


def test_launch_numbers_start_over_with_a_clear():
    from days.day17_prefix_sum import driver

    assert driver.next_epoch(0) == (1, False)  # a fresh (zeroed) buffer: 0 is never a launch
    assert driver.next_epoch(41) == (42, False)
    assert driver.next_epoch(driver.EPOCHS - 2) == (driver.EPOCHS - 1, False)
    # 2^30 does not fit the 30 bits beside the flag: start over at 1, after clearing the words
    assert driver.next_epoch(driver.EPOCHS - 1) == (1, True)
    assert driver.EPOCHS == 2 ** 30


def test_cub_kernel_names_are_recognised():
    from days.day17_prefix_sum import driver

    scan = ("void cub::CUB_300000_SM_900_NS::detail::scan::DeviceScanKernel<cub::detail::scan::"
            "policy_hub<int, int, int, unsigned int, cuda::std::plus<void>>::Policy900, int*>(...)")
    init = "void cub::CUB_300000_SM_900_NS::detail::scan::DeviceScanInitKernel<...>(...)"
    assert driver.is_cub_scan([init, scan])
    assert not driver.is_cub_scan([init])  # the tile-state init alone is not the scan
    assert not driver.is_cub_scan(["cupy_scan_naive", "cupy_copy__int32_int32"])
    assert not driver.is_cub_scan([])


# --- the public functions refuse bad input before anything reaches the GPU -------------------

def _public():
    from days.day17_prefix_sum import driver

    return [driver.prefix_sum, driver.inclusive_scan, driver.exclusive_scan]


@pytest.mark.parametrize("fi", range(3))
@pytest.mark.parametrize("x, exc, word", [
    (np.array([1.5, 2.0]), ValueError, "whole"),
    (np.array([2 ** 40]), ValueError, "int32"),
    (np.array([1 + 2j, 3]), TypeError, "integers"),
    (np.array([True, False]), TypeError, "booleans"),
    (np.array(["1", "2"]), TypeError, "integers"),
    ("123", TypeError, "string"),
    (None, TypeError, "None"),
    (np.ones((2, 3), np.int32), ValueError, "1-D"),
    (np.int32(7), ValueError, "1-D"),
    ([[1, 2], [3]], ValueError, "ragged"),
])
def test_public_functions_refuse_bad_x(fi, x, exc, word):
    with pytest.raises(exc, match=word):
        _public()[fi](x)


def test_prefix_sum_rejects_what_is_not_int32():
    from days.day17_prefix_sum import driver

    with pytest.raises(ValueError, match="int32"):
        driver.prefix_sum(np.array([1.5, 2.0]))
    with pytest.raises(ValueError, match="int32"):
        driver.prefix_sum(np.array([2 ** 40]))
    with pytest.raises(ValueError, match="int32"):
        driver.prefix_sum(np.array([-2 ** 31 - 1, 0]))  # one below int32's range


@pytest.mark.parametrize("fi", range(3))
def test_unknown_version_lists_the_versions(fi):
    with pytest.raises(ValueError, match="v1, v2, v3, v4, v5$"):
        _public()[fi]([1, 2, 3], version="v6")
    with pytest.raises(TypeError, match="version"):
        _public()[fi]([1, 2, 3], version=4)


def test_launch_refuses_an_unknown_version():
    from days.day17_prefix_sum import driver

    # before it looks at the case: no version name runs another version's kernel
    with pytest.raises(ValueError, match="unknown version 'v6'"):  # v6 was removed
        driver.launch("v6", None)


@pytest.mark.parametrize("bad", [2, "yes", None, 0.5])
def test_exclusive_must_be_a_flag(bad):
    from days.day17_prefix_sum import driver

    with pytest.raises(TypeError, match="exclusive"):
        driver.prefix_sum([1, 2, 3], exclusive=bad)


@pytest.mark.parametrize("fi", range(3))
def test_empty_input_gives_an_empty_int32_array(fi):
    for x in ([], np.empty(0, np.int32), np.empty(0, np.uint32), np.empty(0, np.float64)):
        y = _public()[fi](x)  # no launch: this runs without a GPU
        assert y.dtype == np.int32 and y.shape == (0,)


def test_validate_size_refuses_too_long():
    from days.day17_prefix_sum import driver

    driver.validate_size((driver.MAX_N,))
    with pytest.raises(ValueError, match="too long"):
        driver.validate_size((driver.MAX_N + 1,))


# --- GPU ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 33, 1025, 3073, 4097, 1_000_003])
def test_exclusive_and_inclusive_on_gpu(gpu, n):
    from days.day17_prefix_sum import driver

    x = np.random.default_rng(n).integers(0, 8, n, dtype=np.int32)
    for v in driver.VERSIONS:
        for excl in (False, True):
            got = driver.prefix_sum(x, exclusive=excl, version=v)
            assert np.array_equal(got, reference.prefix_sum(x, excl)), (v, excl)


def test_wrap_around_is_exact_on_gpu(gpu):
    from days.day17_prefix_sum import driver

    # full-range values: the running sums wrap modulo 2^32 many times
    rng = np.random.default_rng(3)
    x = rng.integers(-2 ** 31, 2 ** 31, 300_007, dtype=np.int64).astype(np.int32)
    for v in driver.VERSIONS:
        assert np.array_equal(driver.inclusive_scan(x, v), reference.inclusive_scan(x)), v
        assert np.array_equal(driver.exclusive_scan(x, v), reference.exclusive_scan(x)), v


def test_uint32_and_whole_floats_on_gpu(gpu):
    from days.day17_prefix_sum import driver

    u = np.array([0xFFFFFFFF, 2, 0x80000000], np.uint32)  # read as -1, 2, -2^31
    assert driver.prefix_sum(u).tolist() == [-1, 1, -2 ** 31 + 1]
    assert driver.prefix_sum(np.array([3.0, 4.0]), exclusive=True).tolist() == [0, 3]


def test_v4_state_is_reset_between_launches_on_gpu(gpu):
    from days.day17_prefix_sum import driver

    rng = np.random.default_rng(4)
    for n in (1_000_003, 5, 8192 * 40, 8193):  # tile counts 123, 1, 40, 2 back to back
        x = rng.integers(-5, 5, n, dtype=np.int32)
        assert np.array_equal(driver.prefix_sum(x, version="v4"), reference.inclusive_scan(x)), n


def _one_case(x):
    from common import harness as H

    return H.DeviceCase(H.Case((x.size,), inputs={"x": x}, outputs={"y": ((x.size,), np.int32)},
                               params={"exclusive": 0}))


def _run(d, version, exclusive=0):
    from common.gpu import driver as cuda
    from days.day17_prefix_sum import driver

    d.params["exclusive"] = exclusive
    d.poison_outputs()
    driver.launch(version, d)
    cuda().Context.synchronize()
    return d.outputs()["y"]


def test_v5_reuses_its_status_words_on_gpu(gpu):
    """One DeviceCase, many launches: the words and counters are never cleared between them;
    the launch number in each word and the alternating counters must keep them apart."""
    x = np.random.default_rng(5).integers(-2 ** 31, 2 ** 31, 300_007, dtype=np.int64).astype(np.int32)
    inc, exc = reference.inclusive_scan(x), reference.exclusive_scan(x)
    d = _one_case(x)
    for k in range(7):
        assert np.array_equal(_run(d, "v5", k % 2), exc if k % 2 else inc), k
    assert d._lookback_epoch["epoch"] == 7


def test_v5_launch_numbers_wrap_on_gpu(gpu):
    """Past 2^30 - 1 launches the numbers start over at 1, and the driver clears the words
    first: here the buffer is filled with launch-1 words (P, garbage) and the counters with 7
    just before the wrap. Without the clear the next launch would trust those words."""
    from days.day17_prefix_sum import driver

    x = np.random.default_rng(6).integers(0, 8, 100_003, dtype=np.int32)
    inc = reference.inclusive_scan(x)
    d = _one_case(x)
    assert np.array_equal(_run(d, "v5"), inc)  # allocates the buffer
    d._lookback_epoch["epoch"] = driver.EPOCHS - 1
    buf = d._scratch["lookback"]
    junk = np.full(buf.shape, ((1 << 2 | 2) << 32) | 12345, np.uint64)  # epoch 1, P, 12345
    junk[0] = (7 << 32) | 7  # both tile counters at 7
    buf.set(junk)
    assert np.array_equal(_run(d, "v5"), inc)
    assert d._lookback_epoch["epoch"] == 1
    assert np.array_equal(_run(d, "v5", 1), reference.exclusive_scan(x))  # and it goes on


def test_cub_rows_run_cub_on_gpu(gpu):
    """The CUB baselines launch CUB's DeviceScanKernel (CUPTI through torch.profiler sees every
    kernel in the process), and cupy.cumsum without the accelerator does not: the check can
    fail."""
    pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    from common import harness as H
    from days.day17_prefix_sum import driver

    case = driver.make_case((1_000_003,), np.random.default_rng(7))
    d = H.DeviceCase(case)
    libs = driver.baselines(d)
    want = case.expected()["y"]
    for name in (driver.CUB_ROW, "cupy.cumsum (CUB)"):
        assert name in libs, f"{name} missing: is CuPy's CUB module there?"
        out = libs[name]()  # the first call scans x (the CUB row scans a copy of it in place)
        assert np.array_equal(cupy.asnumpy(out), want), name
        names = [k for k, _ in kernels_launched(libs[name])]
        assert driver.is_cub_scan(names), (name, names)
    xc = cupy.asarray(d.array("x"))
    names = [k for k, _ in kernels_launched(lambda: driver.cupy_cumsum(cupy, ())(xc))]
    assert names and not driver.is_cub_scan(names), names
