import numpy as np
import pytest

from days.day01_hello_cuda import driver as D
from days.day01_hello_cuda import reference


def test_whoami_reference_by_hand():
    r = reference.whoami(70, 64)
    # thread 69 is block 1, thread 5, warp 0, lane 5; thread 40 is block 0, warp 1, lane 8
    assert r[69].tolist() == [69, 1, 5, 0, 5]
    assert r[40].tolist() == [40, 0, 40, 1, 8]


def test_whoami_on_gpu(gpu):
    from days.day01_hello_cuda import driver

    n, tpb = 1000, 96  # a ragged grid: the last block is partly outside
    got = driver.whoami(n, tpb)
    assert np.array_equal(got[:, :5], reference.whoami(n, tpb))
    from common.gpu import device_info

    assert got[:, 5].min() >= 0 and got[:, 5].max() < device_info()["sms"]


def test_device_report_matches_torch(gpu):
    from common.baselines import torch_or_none
    from common.gpu import device_info

    torch = torch_or_none()
    if torch is None:
        pytest.skip("torch not installed: nothing independent to compare the report with")
    p = torch.cuda.get_device_properties(0)
    info = device_info()
    assert info["name"] == p.name
    assert info["sms"] == p.multi_processor_count
    assert abs(info["memory_bytes"] - p.total_memory) < 64 << 20
    assert info["compute_capability"] == f"{p.major}.{p.minor}"


def test_measured_copy_bandwidth_is_plausible(gpu):
    from common.gpu import device_info
    from common.timing import copy_bandwidth_gbps

    theo = device_info()["theoretical_bw_gbps"]
    bw = copy_bandwidth_gbps()
    assert bw > 100
    if theo:  # a copy cannot beat the pins: measured <= theoretical (+5% clock slack)
        assert 0.3 * theo < bw < 1.05 * theo, (bw, theo)


# --- the public functions refuse bad input before anything reaches the GPU ----------------------


def test_hello_lines_by_hand():
    # threads 0, 32 of a 64-thread block; threads 0, 7, ..., 98 (15 of them) of 100
    assert D.hello_lines(2, 64, 32) == 4
    assert D.hello_lines(3, 100, 7) == 45
    assert D.hello_lines(1, 5, 1000) == 1


@pytest.mark.parametrize("kwargs,exc,word", [
    ({"n": 2.5}, TypeError, "integer"),
    ({"n": "10"}, TypeError, "integer"),
    ({"n": -1}, ValueError, "between"),
    ({"n": 2 ** 31}, ValueError, "between"),
    ({"n": 10, "threads_per_block": 0}, ValueError, "1024"),
    ({"n": 10, "threads_per_block": 1025}, ValueError, "1024"),
    ({"n": 10, "threads_per_block": True}, TypeError, "integer"),
])
def test_whoami_refuses(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        D.whoami(**kwargs)


def test_whoami_of_nothing_is_empty_without_a_launch():
    got = D.whoami(0, 96)
    assert got.shape == (0, 6) and got.dtype == np.int32


@pytest.mark.parametrize("kwargs,exc,word", [
    ({"every": 0}, ValueError, "every"),
    ({"every": 1.5}, TypeError, "integer"),
    ({"threads": 1025}, ValueError, "1024"),
    ({"blocks": -1}, ValueError, "blocks"),
    ({"blocks": "2"}, TypeError, "integer"),
    ({"blocks": 1000, "threads": 1024, "every": 1}, ValueError, "1024000 lines"),
])
def test_hello_refuses(kwargs, exc, word):
    with pytest.raises(exc, match=word):
        D.hello(**kwargs)


def test_hello_with_no_threads_prints_nothing_and_launches_nothing(capfd):
    assert D.hello(0, 64, 1) is None
    assert D.hello(4, 0, 1) is None
    assert capfd.readouterr().out == ""


@pytest.mark.parametrize("x,exc,word", [
    (np.ones(4, np.complex64), TypeError, "complex"),
    (np.array(["a", "b"]), TypeError, "numbers"),
    ("abc", TypeError, "string"),
    (np.ones(3, bool), TypeError, "booleans"),
    ([[1.0, 2.0], [3.0]], ValueError, "ragged"),
])
def test_copy_refuses_what_is_not_real_numbers(x, exc, word):
    with pytest.raises(exc, match=word):
        D.copy(x)


def test_copy_refuses_unknown_versions():
    with pytest.raises(ValueError, match="v1, v2"):
        D.copy(np.ones(4), version="v3")
    with pytest.raises(TypeError, match="version"):
        D.copy(np.ones(4), version=2)


def test_launch_refuses_unknown_versions():
    with pytest.raises(ValueError, match="unknown version 'v9'"):
        D.launch("v9", None)  # before it looks at the device case


def test_copy_of_nothing_is_empty_without_a_launch():
    y = D.copy(np.ones((0, 3)))
    assert y.shape == (0, 3) and y.dtype == np.float32


def test_best_is_the_fastest_at_the_default_size():
    from common.bars import fastest_correct
    from common.results import load_all

    rec = load_all().get(1)
    if rec is None:
        pytest.skip("no results/day01.json")
    assert D.BEST in D.VERSIONS
    case = next(c for c in rec["cases"] if list(c["size"]) == list(D.SIZES["default"]))
    assert fastest_correct(case)["version"] == D.BEST


def test_bar_reads_the_device_table():
    import copy as copy_module

    from common.bars import judge
    from common.results import load_all

    rec = load_all().get(1)
    if rec is None:
        pytest.skip("no results/day01.json")
    ok, fig = judge(D.BAR, rec)
    assert ok, fig
    assert f"{rec['device']['sms']} SMs" in fig
    bad = copy_module.deepcopy(rec)
    bad["extra"]["device_report"]["multiprocessors (SMs)"] = "1"
    ok, fig = judge(D.BAR, bad)
    assert not ok and "multiprocessors" in fig
    faster = copy_module.deepcopy(rec)
    faster["copy_bandwidth_gbps"] = 2 * faster["device"]["theoretical_bw_gbps"]
    assert not judge(D.BAR, faster)[0]


# --- GPU: the limits themselves ------------------------------------------------------------------

def test_whoami_at_the_block_limit_and_one_thread_on_gpu(gpu):
    n, tpb = 3000, 1024  # 3 blocks of the largest size; the last one is partly outside
    got = D.whoami(n, tpb)
    assert np.array_equal(got[:, :5], reference.whoami(n, tpb))
    one = D.whoami(1, 1)
    assert one[0, :5].tolist() == [0, 0, 0, 0, 0]


@pytest.mark.parametrize("version", list(D.VERSIONS))
def test_copy_keeps_the_shape_and_the_tail_on_gpu(gpu, version):
    x = np.arange(7 * 5, dtype=np.float32).reshape(7, 5)  # 35 = 8 float4 + a tail of 3
    y = D.copy(x, version)
    assert y.shape == (7, 5) and np.array_equal(y, x)
    assert D.copy([2.5], version).tolist() == [2.5]


def test_hello_prints_exactly_the_chosen_threads_on_gpu(gpu, capfd):
    D.hello(blocks=3, threads=100, every=50)
    lines = [ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("hello from")]
    assert len(lines) == D.hello_lines(3, 100, 50) == 6
    assert sum("thread  50 (warp 1, lane 18)" in ln for ln in lines) == 3
