import re
from pathlib import Path

import numpy as np
import pytest

from common import bf16
from days.day43_async_copy_pipeline import reference

DRV = "days.day43_async_copy_pipeline.driver"


def _driver():
    import importlib

    return importlib.import_module(DRV)


# --- the pipeline's invariants --------------------------------------------------------------------

@pytest.mark.parametrize("stages", [2, 3, 4, 5])
@pytest.mark.parametrize("k_tiles", [1, 2, 3, 7, 64])
def test_pipeline_schedule_holds_its_invariants(stages, k_tiles):
    steps = reference.pipeline_schedule(k_tiles, stages)
    assert [s[0] for s in steps] == [kt % stages for kt in range(k_tiles)]
    for kt, (_, issued, buf, in_flight) in enumerate(steps):
        assert len(in_flight) <= stages - 1                  # at most STAGES-1 tiles in flight
        assert all(t > kt for t in in_flight)                # tile kt itself has landed
        if issued is not None:
            assert issued == kt + stages - 1 and buf == (kt - 1) % stages


def test_pipeline_schedule_by_hand():
    # 3 stages, 4 tiles: at kt = 0 tile 2 goes into buffer 2 while tile 1 is in flight
    steps = reference.pipeline_schedule(4, 3)
    assert steps[0] == (0, 2, 2, [1, 2])
    assert steps[1] == (1, 3, 0, [2, 3])
    assert steps[3] == (0, None, 2, [])


def test_pipeline_schedule_catches_a_wait_one_too_large():
    # wait_group STAGES-1 lets the newest group, the one holding tile kt, still be in flight
    with pytest.raises(AssertionError, match="before its copy landed"):
        reference.pipeline_schedule(8, 3, wait=2)
    reference.pipeline_schedule(8, 3, wait=0)   # waiting for more is slower, never wrong


def test_grouped_order_visits_every_tile_once():
    for tm, tn, g in [(64, 32, 8), (33, 7, 8), (5, 3, 16), (1, 1, 8)]:
        order = reference.grouped_order(tm, tn, g)
        assert sorted(order) == [(i, j) for i in range(tm) for j in range(tn)]
    assert reference.grouped_order(3, 2, 2)[:4] == [(0, 0), (1, 0), (0, 1), (1, 1)]


def test_check_sizes_reach_a_short_last_group():
    drv = _driver()
    # more than one group of 8 tile-rows (BM = 128), several tile-columns, a short last group
    assert any(-(-m // 128) > 8 and -(-m // 128) % 8 and -(-n // 256) > 1 for m, k, n in drv.CHECK_SIZES)


def test_smem_bytes():
    assert reference.smem_bytes(128, 256, 32, 4) == 4 * (128 * 32 + 32 * 256) * 2 == 98304
    assert reference.smem_bytes(128, 256, 64, 3) == 147456


# --- driver tables against kernel.cu ----------------------------------------------------------------

def test_kernel_table_matches_kernel_cu():
    drv = _driver()
    src = (Path(drv.__file__).parent / "kernel.cu").read_text()
    cfgs = {m[0]: tuple(map(int, m[1:])) for m in re.findall(
        r"using (\w+) = Cfg<(\d+), (\d+), (\d+), (\d+), (\d+), (\d+), (\d+)>;", src)}
    entries = re.findall(r"^ASYNC_GEMM\((\w+), (\w+), (\d)\)", src, flags=re.M)
    assert {e[0] for e in entries} == set(drv.KERNELS)
    for name, cfg, _ in entries:
        bm, bn, bk, wm, wn, stages, group = cfgs[cfg]
        threads = 32 * (bm // wm) * (bn // wn)
        assert drv.KERNELS[name] == (bm, bn, bk, stages, threads), name
        assert drv.smem_bytes(name) == reference.smem_bytes(bm, bn, bk, stages) <= 227 * 1024
        if "_cand_" in name:   # the name says what the candidate is
            assert name.endswith(f"{bm}x{bn}_k{bk}_s{stages}_g{group}"), name
    by_name = {e[0]: e[1] for e in entries}
    assert by_name["hgemm_async_v4"] == by_name[drv.SAME_AS_V4]


def test_bar():
    drv = _driver()
    assert drv.BAR[0] == {"sizes": [(8192, 8192, 8192)], "vs_baseline": 0.65}
    assert "day 42" in drv.BAR[1]["text"]


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3), bool), np.ones((3, 2)), TypeError, "booleans"),
    (np.ones((2, 3)), np.ones((2, 3)), ValueError, "rows"),
])
def test_matmul_refuses(a, b, exc, word):
    with pytest.raises(exc, match=word):
        _driver().matmul(a, b)


def test_matmul_bits_refuses_and_empty():
    drv = _driver()
    with pytest.raises(TypeError, match="uint16"):
        drv.matmul_bits(np.ones((2, 2)), np.ones((2, 2), np.uint16))
    assert (drv.matmul_bits(np.zeros((2, 0), np.uint16), np.zeros((0, 2), np.uint16)) == 0).all()


# --- on the GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", list(__import__(DRV, fromlist=["KERNELS"]).KERNELS))
def test_every_kernel_on_gpu_ragged(gpu, kernel):
    from common import harness as H

    drv = _driver()
    for size in [(1, 1, 1), (300, 136, 520), (257, 1000, 129), (1000, 777, 513), (2100, 64, 40)]:
        case = drv.make_case(size, np.random.default_rng(43))
        r = H.check(lambda v, d: drv.launch_kernel(kernel, d), kernel, case)
        assert r.ok, f"{kernel} at {size}: {r.message}"


def test_matmul_on_gpu(gpu):
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((257, 1000)), rng.standard_normal((1000, 129))
    got = _driver().matmul(a, b)
    ref = reference.matmul(bf16.to_bits(a), bf16.to_bits(b))
    assert reference.rel_l2(got, ref) <= reference.tolerance(1000)
