import numpy as np

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
    import pytest

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
