import copy
import ctypes

import numpy as np
import pytest

from days.day06_pycuda_roll_call import driver as D
from days.day06_pycuda_roll_call import reference


# --- CPU: the reference, the launch geometry, the graph wrapper's error path ---------------------

def test_reference_by_hand():
    ids, y = reference.roll_call(np.array([1.0, -2.0, 0.5], np.float32), 3.0)
    assert ids.tolist() == [0, 1, 2]
    np.testing.assert_array_equal(y, [3.0, -6.0, 1.5])


def test_reference_flattens_and_computes_in_float64():
    x = np.full((2, 3), 0.1, np.float32)
    ids, y = reference.roll_call(x, 3.0)
    assert ids.tolist() == list(range(6)) and y.dtype == np.float64
    assert y[0] == 3.0 * float(np.float32(0.1))  # float64 product of the float32 input


def test_answered_by_hand():
    # 512 threads: numbers 0..511 answer once, 512 and -1 nobody has
    assert reference.answered([0, 511, 512, -1, 37], 512).tolist() == [1, 1, 0, 0, 1]


def test_grids():
    from days.day06_pycuda_roll_call.driver import grid_for

    wave = 132 * 8                                           # an H100: 132 SMs x 8 blocks of 256
    assert grid_for("v1", 1, wave) == 1
    assert grid_for("v1", 257, wave) == 2
    assert grid_for("v1", 2 ** 26, wave) == 2 ** 18          # one thread per element
    assert grid_for("v2", 2 ** 26, wave) == wave             # capped at one full wave
    assert grid_for("v2", 1000, wave) == 4                   # never more blocks than work
    assert grid_for("v3", 1000, wave) == 1                   # 250 float4 groups: one block
    assert grid_for("v3", 4 * 256 + 1, wave) == 1            # the tail needs no extra block
    assert grid_for("v3", 3, wave) == 1                      # tail only


def test_size_limit():
    from days.day06_pycuda_roll_call.driver import validate_size

    validate_size((2 ** 31 - 1,))
    with pytest.raises(ValueError, match="int32"):
        validate_size((2 ** 31,))


class _FakeLib:
    """Stands in for libcuda: every call fails with CUDA_ERROR_INVALID_VALUE (1)."""

    def cuGetErrorName(self, code, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_INVALID_VALUE"
        return 0

    def cuGetErrorString(self, code, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"invalid argument"
        return 0

    def cuStreamBeginCapture_v2(self, stream, mode):
        return 1


def test_graph_errors_name_the_call_and_the_code():
    from common.graphs import CudaDriverError, CudaGraph, check

    check(0, "cuAnything")  # success is silent
    with pytest.raises(CudaDriverError, match=r"cuStreamBeginCapture_v2 failed: "
                                              r"CUDA_ERROR_INVALID_VALUE \(1\): invalid argument"):
        CudaGraph(12345, lambda: None, lib=_FakeLib())
    with pytest.raises(ValueError, match="legacy default stream"):
        CudaGraph(None, lambda: None, lib=_FakeLib())


# --- CPU: the public functions refuse bad input before anything reaches the GPU -------------------

@pytest.mark.parametrize("kwargs,exc,word", [
    ({"x": np.ones(3, np.complex64)}, TypeError, "complex"),
    ({"x": np.array(["a", "b"])}, TypeError, "numbers"),
    ({"x": "abc"}, TypeError, "string"),
    ({"x": np.ones(3, bool)}, TypeError, "booleans"),
    ({"x": [[1.0], [2.0, 3.0]]}, ValueError, "ragged"),
    ({"x": np.ones(3), "alpha": "2"}, TypeError, "alpha"),
    ({"x": np.ones(3), "alpha": 1j}, TypeError, "alpha"),
    ({"x": np.ones(3), "alpha": float("nan")}, ValueError, "finite"),
    ({"x": np.ones(3), "alpha": 1e39}, ValueError, "alpha"),   # no float32 holds it
    ({"x": np.ones(3), "version": "v4"}, ValueError, "v1, v2, v3"),
    ({"x": np.ones(3), "version": None}, TypeError, "version"),
])
def test_roll_call_refuses(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        D.roll_call(**kwargs)


def test_roll_call_of_nothing_without_a_launch():
    ids, y = D.roll_call(np.zeros((0, 4)))
    assert ids.shape == y.shape == (0,) and ids.dtype == np.int32 and y.dtype == np.float32


@pytest.mark.parametrize("args,exc,word", [
    (("v9", 0x1000, 0x2000, 0x3000, 8), ValueError, "unknown version"),
    (("v2", 0x1000, 0x2000, 0x3000, -1), ValueError, "n must be"),
    (("v2", 0x1000, 0x2000, 0x3000, 2 ** 31), ValueError, "n must be"),
    (("v2", 0x1000, 0x2000, 0x3000, 8.5), TypeError, "integer"),
    (("v2", 0.5, 0x2000, 0x3000, 8), TypeError, "pointer"),
    (("v2", "0x1000", 0x2000, 0x3000, 8), TypeError, "pointer"),
    (("v2", -16, 0x2000, 0x3000, 8), ValueError, "address"),
    (("v2", 0, 0x2000, 0x3000, 8), ValueError, "null"),
    (("v3", 0x1000, 0x1004, 0x2000, 8), ValueError, "16-byte aligned"),
])
def test_launch_on_pointers_refuses(args, exc, word):
    with pytest.raises(exc, match=word):
        D.launch_on_pointers(*args)


def test_launch_on_pointers_with_nothing_to_do_launches_nothing():
    assert D.launch_on_pointers("v3", 0, 0, 0, 0) is None  # n = 0: not even the pointers matter


def test_launch_refuses_unknown_versions_before_the_device_case():
    with pytest.raises(ValueError, match="unknown version"):
        D.launch("prepared", None)


@pytest.mark.parametrize("kwargs,exc,word", [
    ({"called": [1.5]}, ValueError, "whole numbers"),
    ({"called": [2 ** 31]}, ValueError, "outside"),
    ({"called": ["a"]}, TypeError, "integers"),
    ({"called": [[1, 2]]}, ValueError, "1-D"),
    ({"called": [1], "threads": 1025}, ValueError, "1024"),
    ({"called": [1], "blocks": -1}, ValueError, "blocks"),
    ({"called": [1], "blocks": 2 ** 22, "threads": 1024}, ValueError, r"2\^31"),
    ({"called": list(range(10_001))}, ValueError, "10000"),
])
def test_printf_roll_call_refuses(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        D.printf_roll_call(**kwargs)


def test_printf_roll_call_without_threads_or_names_answers_nothing():
    assert D.printf_roll_call([]).tolist() == []
    assert D.printf_roll_call([0, 1, 2], blocks=0).tolist() == [0, 0, 0]
    assert D.printf_roll_call(np.float64(3.0), threads=0).tolist() == [0]  # 3.0 is a whole number


@pytest.mark.parametrize("fn,kwargs,word", [
    ("launch_overhead", {"launches": 0}, "launches"),
    ("launch_overhead", {"graph_nodes": 0}, "graph_nodes"),
    ("launch_overhead", {"repeats": 0}, "repeats"),
    ("share_with_torch", {"n": -1}, "n must be"),
    ("share_with_cupy", {"n": 2 ** 31}, "n must be"),
])
def test_helpers_refuse_bad_counts(fn, kwargs, word):
    with pytest.raises(ValueError, match=word):
        getattr(D, fn)(**kwargs)


def test_best_bench_sizes_and_byte_mix():
    assert D.BEST in D.VERSIONS
    assert any(s[0] % 4 for s in D.BENCH_SIZES)  # a tail after v3's float4 groups
    case = D.make_case((10,), np.random.default_rng(0))
    assert case.bytes == 120 and case.read_bytes == 40


def test_bar_reads_the_launch_overhead_record():
    from common.bars import judge
    from common.results import load_all

    rec = load_all().get(6)
    if rec is None:
        pytest.skip("no results/day06.json")
    ok, fig = judge(D.BAR, rec)
    o = rec["extra"]["launch_overhead"]["us_per_launch"]
    assert ok and f"prepared call {o['prepared_call']:.2f} us" in fig, fig
    lost = copy.deepcopy(rec)
    lost["extra"]["launch_overhead"]["launches_counted"] -= 1
    assert not judge(D.BAR, lost)[0]
    nograph = copy.deepcopy(rec)
    nograph["extra"]["launch_overhead"]["us_per_launch"] = {
        k: v for k, v in o.items() if not k.startswith("CUDA graph")}
    ok, fig = judge(D.BAR, nograph)
    assert not ok and "graph replay" in fig


# --- GPU ------------------------------------------------------------------------------------------

def test_printf_roll_call_on_gpu(gpu, capfd):
    from days.day06_pycuda_roll_call import driver

    called = [0, 31, 32, 300, 511, 512, 100000]
    got = driver.printf_roll_call(called, blocks=2, threads=256)
    assert got.tolist() == reference.answered(called, 512).tolist() == [1, 1, 1, 1, 1, 0, 0]
    out = capfd.readouterr().out
    assert "thread 300 reporting (block 1, warp 1, lane 12)" in out
    assert "thread 512 reporting" not in out


def test_v3_refuses_misaligned_pointers_on_gpu(gpu):
    from days.day06_pycuda_roll_call import driver

    with pytest.raises(ValueError, match="16-byte aligned"):
        driver.launch_on_pointers("v3", 0x1000, 0x1004, 0x2000, 8)


def test_public_function_on_gpu(gpu):
    from days.day06_pycuda_roll_call import driver

    x = np.random.default_rng(6).standard_normal(1001).astype(np.float32)
    for v in driver.VERSIONS:
        ids, y = driver.roll_call(x, 2.0, version=v)
        assert ids.dtype == np.int32 and ids.tolist() == list(range(1001)), v
        np.testing.assert_array_equal(y, 2.0 * x, err_msg=v)  # times 2 is exact


def test_pycuda_kernel_writes_torch_memory_without_copy(gpu):
    torch = pytest.importorskip("torch", reason="torch is not installed: zero-copy test skipped")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from days.day06_pycuda_roll_call import driver

    n = 4099  # a tail after the float4 groups
    x = torch.randn(n, device="cuda")
    ids = torch.full((n,), -1, dtype=torch.int32, device="cuda")
    y = torch.full((n,), float("nan"), device="cuda")
    ptr = y.data_ptr()
    for v in driver.VERSIONS:
        ids.fill_(-1)
        y.fill_(float("nan"))
        driver.launch_on_pointers(v, x.data_ptr(), ids.data_ptr(), y.data_ptr(), n, 2.0)
        assert y.data_ptr() == ptr  # still torch's own allocation: nothing was copied
        assert torch.equal(ids.cpu(), torch.arange(n, dtype=torch.int32)), v
        assert torch.equal(y, 2.0 * x), v


def test_torch_sees_pycuda_memory_without_copy(gpu):
    torch = pytest.importorskip("torch", reason="torch is not installed: zero-copy test skipped")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from pycuda import gpuarray

    g = gpuarray.to_gpu(np.arange(10, dtype=np.float32))
    t = torch.as_tensor(g, device="cuda")
    assert t.data_ptr() == int(g.gpudata)
    t.add_(1)  # a torch write lands in pycuda's buffer
    np.testing.assert_array_equal(g.get(), np.arange(1, 11, dtype=np.float32))
    from days.day06_pycuda_roll_call import driver

    rows = driver.share_with_torch(1001)
    assert [r["same"] and r["values_seen"] for r in rows] == [True, True]


def test_cupy_sees_pycuda_memory_on_gpu(gpu):
    from common.baselines import cupy_or_none
    from days.day06_pycuda_roll_call import driver

    if cupy_or_none() is None:
        pytest.skip("CuPy is not installed")
    r = driver.share_with_cupy(77)
    assert r["same"] and r["values_seen"], r


def test_graph_replays_every_captured_launch_on_gpu(gpu):
    from common.graphs import CudaGraph, is_capturing
    from common.gpu import driver as cuda_driver
    from days.day06_pycuda_roll_call import driver

    cuda = cuda_driver()
    count = cuda.mem_alloc(8)
    cuda.memset_d32(count, 0, 2)
    probe = driver.K("launch_probe", "Pfq")
    stream = cuda.Stream()
    seen = []

    def capture():
        seen.append(is_capturing(stream))
        for _ in range(7):
            probe.prepared_async_call((1, 1, 1), (32, 1, 1), stream, int(count), 1.0, 1)

    with CudaGraph(stream, capture) as g:
        assert seen == [True] and not is_capturing(stream)
        assert g.nodes == 7
        out = np.zeros(1, np.uint64)
        cuda.memcpy_dtoh(out, count)
        assert out[0] == 0  # capture records, it does not run
        g.replay(5)
        stream.synchronize()
    cuda.memcpy_dtoh(out, count)
    assert out[0] == 35


def test_capture_error_leaves_the_stream_usable_on_gpu(gpu):
    from common.graphs import CudaGraph, is_capturing
    from common.gpu import driver as cuda_driver

    cuda = cuda_driver()
    stream = cuda.Stream()

    def bad():
        raise KeyError("boom")

    with pytest.raises(KeyError):
        CudaGraph(stream, bad)
    assert not is_capturing(stream)
    stream.synchronize()


def test_launch_overhead_counts_every_launch_on_gpu(gpu):
    from days.day06_pycuda_roll_call import driver

    o = driver.launch_overhead(launches=200, graph_nodes=20, repeats=2)
    assert o["launches_counted"] == o["launches_made"] > 0
    assert all(v > 0 for v in o["us_per_launch"].values())
    assert o.get("torch_ok", True)


def test_smallest_roll_calls_on_gpu(gpu):
    for n in (1, 4, 7):  # tail only; one int4/float4 group; a group and a tail of 3
        x = np.arange(n, dtype=np.float32)
        for v in D.VERSIONS:
            ids, y = D.roll_call(x, -1.0, version=v)
            assert ids.tolist() == list(range(n)) and y.tolist() == (-x).tolist(), (n, v)


def test_printf_roll_call_with_the_largest_block_on_gpu(gpu, capfd):
    got = D.printf_roll_call([1023, 1024, 2047], blocks=2, threads=1024)
    assert got.tolist() == [1, 1, 1]
    assert "thread 2047 reporting (block 1, warp 31, lane 31)" in capfd.readouterr().out
