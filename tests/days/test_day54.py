import ctypes
import re
from pathlib import Path

import numpy as np
import pytest

from days.day54_cooperative_groups import reference

KERNEL = Path(__file__).resolve().parents[2] / "days" / "day54_cooperative_groups" / "kernel.cu"


# --- the reference --------------------------------------------------------------------------

def test_reference_by_hand():
    np.testing.assert_allclose(reference.softmax([[2.0, 2.0, 2.0, 2.0]]), [[0.25] * 4])
    y = reference.softmax([[0.0, 0.0, np.log(3.0)]])
    np.testing.assert_allclose(y, [[0.2, 0.2, 0.6]], rtol=1e-15)


def test_slice_pairs_and_merge_by_hand():
    # row [0, 0, ln 3] in two slices: [0, 0] -> (0, 2); [ln 3] -> (ln 3, 1)
    m, s = reference.slice_pairs([[0.0, 0.0, np.log(3.0)]], 2)
    np.testing.assert_allclose(m, [[0.0, np.log(3.0)]])
    np.testing.assert_allclose(s, [[2.0, 1.0]])
    M, S = reference.merge_pairs(m, s)  # M = ln 3, S = 2 e^(-ln 3) + 1 = 5/3
    np.testing.assert_allclose(M, [np.log(3.0)])
    np.testing.assert_allclose(S, [5.0 / 3.0], rtol=1e-15)


def test_empty_slices_count_nothing():
    # 3 columns in 5 slices of 1: two slices are empty (-inf, 0) and must not give NaN
    m, s = reference.slice_pairs([[1.0, 2.0, 3.0]], 5)
    assert np.isneginf(m[0, 3:]).all() and (s[0, 3:] == 0).all()
    M, S = reference.merge_pairs(m, s)
    np.testing.assert_allclose(S, [1 + np.exp(-1) + np.exp(-2)], rtol=1e-15)


@pytest.mark.parametrize("parts", [1, 2, 3, 8, 16, 17])
def test_split_softmax_equals_the_direct_one(parts):
    x = np.random.default_rng(parts).standard_normal((5, 1001)) * 20
    x[1, 500:] += 60  # the row's maximum in one slice only
    np.testing.assert_allclose(reference.softmax_split(x, parts), reference.softmax(x), rtol=1e-12)


# --- the driver's choices (CPU) -------------------------------------------------------------

def test_kernel_choice():
    from days.day54_cooperative_groups.driver import kernel_for

    assert kernel_for("v1", 65536) == ("softmax_v1_t1024_i8", 1, 1024, 8)
    # v3: always 8 blocks; float4 a thread = ceil(cols / 4 / 8 / 256), rounded up to 2, 4, 8, 16
    assert kernel_for("v3", 65536)[0] == "softmax_v3_c8_t256_i8"          # 2048 float4 a block
    assert kernel_for("v3", 65540)[0] == "softmax_v3_c8_t256_i16"
    assert kernel_for("v3", 262144)[0] == "softmax_v3_c8_t256_i16"        # half read twice
    assert kernel_for("v3", 31)[0] == "softmax_v3_c8_t256_i2"
    # v4: the smallest cluster whose blocks hold <= 256 x 8 float4 each, then c8 of 512 x 8
    # (the H200 sweep's best at 100003 and 131072), then c16 256 x 8 up to 262147, then the most
    assert kernel_for("v4", 1000) == ("softmax_v4_c1_t256_i1", 1, 256, 1)
    assert kernel_for("v4", 8192)[0] == "softmax_v4_c1_t256_i8"
    assert kernel_for("v4", 8196)[0] == "softmax_v4_c2_t256_i8"
    assert kernel_for("v4", 65536) == ("softmax_v4_c8_t256_i8", 8, 256, 8)
    assert kernel_for("v4", 65540)[0] == "softmax_v4_c8_t512_i8"           # 16385 float4
    assert kernel_for("v4", 100003)[0] == "softmax_v4_c8_t512_i8"          # 25000 float4 / 8
    assert kernel_for("v4", 131075)[0] == "softmax_v4_c8_t512_i8"          # 32768 float4: holds
    assert kernel_for("v4", 131076)[0] == "softmax_v4_c16_t256_i8"         # 32769: re-reads
    assert kernel_for("v4", 262147)[0] == "softmax_v4_c16_t256_i8"         # 65536 float4
    assert kernel_for("v4", 262148)[0] == "softmax_v4_c16_t512_i16"
    assert kernel_for("v4", 10 ** 6)[0] == "softmax_v4_c16_t512_i16"       # the rest read twice
    with pytest.raises(ValueError, match="v2"):
        kernel_for("v2", 10)


def test_v5_choice_and_shared_memory():
    from days.day54_cooperative_groups import driver as D

    # a stage is ceil((cols // 4) / cluster) float4: the first cluster whose stage <= 32 KiB
    assert D.v5_kernel_for(65536) == ("softmax_v5_c8_t256_s2", 8, 256, 2, 2 * 2048 * 16)
    assert D.v5_kernel_for(16384) == ("softmax_v5_c4_t256_s2", 4, 256, 2, 2 * 1024 * 16)
    assert D.v5_kernel_for(65540)[:2] == ("softmax_v5_c16_t256_s2", 16)   # c8: 2049 float4
    assert D.v5_kernel_for(100003) == ("softmax_v5_c16_t256_s2", 16, 256, 2, 2 * 1563 * 16)
    assert D.v5_kernel_for(131072)[4] == 65536
    # past the target: the largest cluster, if its two stages fit 227 KB; else v4's kernel
    assert D.v5_kernel_for(262144) == ("softmax_v5_c16_t256_s2", 16, 256, 2, 2 * 4096 * 16)
    assert D.v5_kernel_for(600001) is None                                # 2 x 150 KB
    assert D.kernel_for("v5", 600001) == D.kernel_for("v4", 600001)
    assert D.kernel_for("v5", 65536) == ("softmax_v5_c8_t256_s2", 8, 256, 2)
    # widths 1-3: no float4 at all (head only), no shared memory; 5-7: one float4 at most
    assert [D.v5_smem(4, 2, c) for c in (1, 2, 3, 4, 7, 8)] == [0, 0, 0, 32, 32, 32]
    assert D.v5_smem(16, 3, 262147) == 3 * 4096 * 16
    # every candidate the sweep times fits somewhere, and the shared limit is Hopper's
    assert D.SMEM_MAX <= 227 * 1024 and len(set(D.V5_ALL)) == len(D.V5_ALL)


def test_v2_plan():
    from days.day54_cooperative_groups.driver import v2_plan

    assert v2_plan(256, 65536, 264) == (8, 33)      # 16384 float4 / 2048 a block
    assert v2_plan(1024, 131072, 264) == (16, 16)
    assert v2_plan(5, 1, 264) == (1, 264)
    assert v2_plan(2, 65537, 264) == (8, 33)         # 16384 float4 at most
    assert v2_plan(1, 10 ** 8, 264) == (264, 1)      # more parts than blocks: capped, rest re-read


def test_every_kernel_the_driver_names_is_in_kernel_cu():
    from days.day54_cooperative_groups import driver as D

    src = KERNEL.read_text()
    have = {f"softmax_v3_c{c}_t{t}_i{i}" for c, t, i in re.findall(r"V3\((\d+), (\d+), (\d+)\)", src)}
    have |= {f"softmax_v4_c{c}_t{t}_i{i}" for c, t, i in re.findall(r"V4\((\d+), (\d+), (\d+)\)", src)}
    have |= set(re.findall(r"\b(softmax_v[12]_\w+)\(", src))
    have |= {f"softmax_v5_c{c}_t{t}_s{s}" for c, t, s in re.findall(r"V5\((\d+), (\d+), (\d+)\)", src)}
    names = {D.V1[0], D.V2[0]} | {D.kernel_name("v4", *k) for k in D.V4_ALL}
    names |= {D.v5_name(*k) for k in D.V5_ALL}
    names |= {D.kernel_name("v3", D.V3_CLUSTER, 256, i) for i in D.V3_ITEMS}
    for cols in (65536, 262144):
        names |= {k[0] for k in D.cluster_candidates(cols)}
    assert names <= have, f"not in kernel.cu: {sorted(names - have)}"


def test_cluster_candidates_cover_1_to_16():
    from days.day54_cooperative_groups.driver import cluster_candidates

    got = cluster_candidates(65536)
    assert [c for _, c, _, _ in got] == [1, 2, 4, 8, 16]
    assert got[3] == ("softmax_v4_c8_t256_i8", 8, 256, 8)
    assert got[2] == ("softmax_v4_c4_t256_i16", 4, 256, 16)   # 4096 float4 a block
    assert got[0] == ("softmax_v4_c1_t256_i8", 1, 256, 8)     # the most there is: rest re-read


def test_bar_is_against_day5_best():
    from days.day54_cooperative_groups import driver as D
    from days.day05_shared_softmax import driver as day5

    assert D.DAY5_ROW == f"day 5 {day5.BEST}"
    (clause,) = D.BAR
    assert clause["baseline"] == D.DAY5_ROW and clause["vs_baseline"] >= 1.0
    assert clause["sizes"] and all(c >= 65536 for _, c in clause["sizes"])
    assert set(clause["sizes"]) <= set(D.BENCH_SIZES)


def test_validate_size():
    from common import harness as H
    from days.day54_cooperative_groups import driver as D

    assert H.parse_size(D, "256x65536") == (256, 65536)
    with pytest.raises(H.SizeError, match="too many"):
        H.parse_size(D, "2^27x4")
    with pytest.raises(H.SizeError, match="32-bit"):
        H.parse_size(D, "1x2^31")


# --- public function and launch: bad input (CPU) --------------------------------------------

@pytest.mark.parametrize("x,exc,word", [
    (np.ones((2, 3), complex), TypeError, "complex"),
    (np.ones(5), ValueError, "2-D"),
    (np.ones((2, 2, 2)), ValueError, "2-D"),
    ([[1, 2], [3]], ValueError, "ragged"),
    (None, TypeError, "None"),
    (np.array([["a"]]), TypeError, "dtype"),
    (np.ones((2, 2), bool), TypeError, "booleans"),
])
def test_softmax_refuses_bad_input(x, exc, word):
    from days.day54_cooperative_groups.driver import softmax

    with pytest.raises(exc, match=word):
        softmax(x)


def test_softmax_unknown_version_and_empty():
    from days.day54_cooperative_groups.driver import launch, softmax

    with pytest.raises(ValueError, match="unknown version 'v9'.*v1, v2, v3, v4, v5"):
        softmax(np.ones((2, 2)), version="v9")
    with pytest.raises(TypeError, match="version"):
        softmax(np.ones((2, 2)), version=4)
    with pytest.raises(ValueError, match="unknown version"):
        launch("v6", None)  # refused before anything touches the GPU
    for shape in ((0, 5), (4, 0), (0, 0)):
        y = softmax(np.ones(shape))  # nothing is launched (this runs without a GPU)
        assert y.shape == shape and y.dtype == np.float32


# --- common/launch.py (CPU: the structures must match cuda.h byte for byte) ------------------

def test_launch_structures_match_cuda_h():
    from common import launch as L

    # cuda.h: CUlaunchAttribute = {int id; char pad[4]; union (64 bytes) value}
    assert ctypes.sizeof(L.CUlaunchAttributeValue) == 64
    assert ctypes.sizeof(L.CUlaunchAttribute) == 72 and L.CUlaunchAttribute.value.offset == 8
    # CUlaunchConfig: 7 unsigned ints, then (8-byte aligned) stream, attrs, numAttrs
    assert ctypes.sizeof(L.CUlaunchConfig) == 56
    assert (L.CUlaunchConfig.hStream.offset, L.CUlaunchConfig.attrs.offset,
            L.CUlaunchConfig.numAttrs.offset) == (32, 40, 48)


def test_launch_config_and_args():
    from common import launch as L

    cfg, attrs = L.launch_config((64,), (256,), 0, None, cluster=(16, 1, 1), cooperative=True)
    assert (cfg.gridDimX, cfg.gridDimY, cfg.blockDimX, cfg.numAttrs) == (64, 1, 256, 2)
    assert attrs[0].id == L.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION == 4
    assert (attrs[0].value.clusterDim.x, attrs[0].value.clusterDim.y) == (16, 1)
    assert attrs[1].id == L.CU_LAUNCH_ATTRIBUTE_COOPERATIVE == 2 and attrs[1].value.cooperative == 1
    cfg, _ = L.launch_config((5, 2), (32,))
    assert (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.numAttrs) == (5, 2, 1, 0)
    with pytest.raises(ValueError, match="multiple of the cluster"):
        L.launch_config((100,), (256,), cluster=(16, 1, 1))
    with pytest.raises(ValueError, match="positive"):
        L.launch_config((0,), (256,))
    vals = L.pack_args("PPiqf", [4096, None, -3, 2 ** 40, 0.5])
    assert [v.value for v in vals] == [4096, None, -3, 2 ** 40, 0.5]
    with pytest.raises(TypeError, match="takes 2 arguments"):
        L.pack_args("Pi", [1])
    with pytest.raises(ValueError, match="letter"):
        L.pack_args("X", [1])


# --- GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("size", [(3, 1), (2, 31), (3, 33), (2, 65537), (3, 100003), (2, 131075),
                                  (1, 262147), (1, 600001)])
def test_every_version_on_ragged_rows_on_gpu(gpu, size):
    from common.check import compare
    from days.day54_cooperative_groups import driver

    rng = np.random.default_rng(size[1])
    x = rng.uniform(-1e4, 1e4, size).astype(np.float32)
    x[0] = 1e4  # a row of equal, huge values: uniform output
    ref = reference.softmax(x)
    for v in driver.VERSIONS:
        r = compare(driver.softmax(x, v), ref)
        assert r.ok, f"{v} at {size}: {r.message}"


def test_v2_many_rounds_on_gpu(gpu):
    """300 rows of 65536: 8 blocks a row, far more rows than the persistent grid takes at once:
    many rounds, one grid.sync() each."""
    from common.check import compare
    from days.day54_cooperative_groups import driver

    x = np.random.default_rng(2).standard_normal((300, 65536)).astype(np.float32) * 3
    parts, per_round = driver.v2_plan(300, 65536, driver.v2_grid())
    assert 300 > per_round and parts == 8
    r = compare(driver.softmax(x, "v2"), reference.softmax(x))
    assert r.ok, r.message


@pytest.mark.parametrize("version,cols,want", [("v3", 65536, 8), ("v3", 33, 8), ("v4", 1000, 1),
                                               ("v4", 65536, 8), ("v4", 131072, 8),
                                               ("v4", 262144, 16), ("v4", 600001, 16),
                                               ("v5", 33, 4), ("v5", 65536, 8),
                                               ("v5", 100003, 16), ("v5", 600001, 16)])
def test_launch_really_made_clusters_on_gpu(gpu, version, cols, want):
    from days.day54_cooperative_groups import driver

    seen = driver.cluster_sizes_seen(version, (5, cols))
    assert driver.kernel_for(version, cols)[1] == want
    assert list(seen) == [want] * 5, f"%cluster_nctarank per row: {list(seen)}, want {want}"


@pytest.mark.parametrize("version", ["v2", "v3", "v4", "v5"])
def test_the_exchange_between_blocks_on_gpu(gpu, version):
    """Each slice of a row gets its own level (slice k near 3k): a block that normalised only
    its own slice would make every slice sum to 1 and the row sum to the number of blocks.
    Only the exchanged pairs (DSMEM, or global memory after grid.sync) give the row sum 1."""
    from days.day54_cooperative_groups import driver

    rows, cols = 4, 131072
    x = np.random.default_rng(5).standard_normal((rows, cols)).astype(np.float32)
    x += (3.0 * (np.arange(cols) * 16 // cols)).astype(np.float32)
    y = driver.softmax(x, version)
    np.testing.assert_allclose(y.astype(np.float64).sum(axis=1), 1.0, rtol=1e-4)
    np.testing.assert_allclose(y, reference.softmax(x), rtol=1e-4, atol=1e-12)


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
def test_deterministic_on_gpu(gpu, version):
    from days.day54_cooperative_groups import driver

    x = np.random.default_rng(7).standard_normal((6, 100003)).astype(np.float32) * 5
    a, b = driver.softmax(x, version), driver.softmax(x, version)
    assert np.array_equal(a.view(np.uint32), b.view(np.uint32))


def test_every_v4_kernel_on_gpu(gpu):
    """Every instantiated cluster kernel (the sweep's candidates too) at a ragged width."""
    from common import harness as H
    from common.check import compare
    from common.gpu import driver as cuda
    from days.day54_cooperative_groups import driver as D

    for c, t, i in D.V4_ALL:
        case = D.make_case((3, 70001), np.random.default_rng(c * 100 + i))
        d = H.DeviceCase(case)
        d.poison_outputs()
        D.launch_kernel(D.kernel_name("v4", c, t, i), c, t, d)
        cuda().Context.synchronize()
        r = compare(d.outputs()["y"], case.expected()["y"])
        assert r.ok, f"cluster {c}, {t} x {i}: {r.message}"


@pytest.mark.parametrize("version", ["v1", "v2", "v3", "v4", "v5"])
def test_masked_stretches_on_gpu(gpu, version):
    """-inf (a mask) over whole slices of a row: those blocks/threads have no finite value; their
    outputs must be 0, not NaN (exp against a maximum of -inf)."""
    from days.day54_cooperative_groups import driver

    x = np.random.default_rng(9).standard_normal((3, 65537)).astype(np.float32)
    x[0, :40000] = -np.inf
    x[1, 20000:] = -np.inf
    x[2, ::2] = -np.inf
    y = driver.softmax(x, version)
    assert not np.isnan(y).any(), f"{version}: NaN at {np.argwhere(np.isnan(y))[:3]}"
    np.testing.assert_allclose(y, reference.softmax(x), rtol=1e-4, atol=1e-12)


# --- v5: the persistent cluster kernel --------------------------------------------------------

def _run_v5(D, kernel, size, clusters=None, seed=0, scale=3.0):
    """One v5 kernel on a fresh case (outputs poisoned with NaN); returns (y, reference)."""
    from common import harness as H
    from common.gpu import driver as cuda

    c, t, st = kernel
    case = D.make_case(size, np.random.default_rng(seed), scale=scale)
    d = H.DeviceCase(case)
    d.poison_outputs()
    D.launch_v5(D.v5_name(c, t, st), c, t, D.v5_smem(c, st, size[1]), d, clusters=clusters)
    cuda().Context.synchronize()
    return d.outputs()["y"], case.expected()["y"]


def test_every_v5_kernel_on_gpu(gpu):
    """Every v5 candidate at a ragged width (every row a different alignment), with the grid
    the driver takes and with 1 and 3 clusters: 37 and 13 rows a cluster, so every stage's
    mbarrier goes through many phases (parity 0, 1, 0, ...) and the pairs' double buffer
    through many rounds."""
    from common.check import compare
    from days.day54_cooperative_groups import driver as D

    for k in D.V5_ALL:
        for clusters in (None, 1, 3):
            y, ref = _run_v5(D, k, (37, 70001), clusters, seed=sum(k))
            r = compare(y, ref)
            assert r.ok, f"v5 {k}, {clusters} clusters: {r.message}"


@pytest.mark.parametrize("cols", [1, 2, 3, 5, 31, 33, 4099, 65536, 65537])
def test_v5_many_rows_on_gpu(gpu, cols):
    """Many rows (more than run at once) at tiny and ragged widths: slices of 0 bytes (an
    mbarrier completed by its arrival alone), heads and tails of every alignment."""
    from common.check import compare
    from days.day54_cooperative_groups import driver as D

    rows = 1000 if cols < 10000 else 300
    plan = D.v5_kernel_for(cols)
    assert plan is not None
    for clusters in (None, 2):
        y, ref = _run_v5(D, plan[1:4], (rows, cols), clusters, seed=cols)
        r = compare(y, ref)
        assert r.ok, f"{rows}x{cols}, {clusters} clusters: {r.message}"


@pytest.mark.parametrize("rows", [1, 2, 5])
def test_v5_rows_fewer_than_clusters_on_gpu(gpu, rows):
    """Fewer rows than clusters fit: the grid is one cluster a row (each loops once); and a grid
    forced LARGER than the rows: clusters with no row exit at once, the others are unaffected."""
    from common.check import compare
    from days.day54_cooperative_groups import driver as D

    for cols in (65536, 100003):
        name, c, t, st, smem = D.v5_kernel_for(cols)
        assert D.v5_max_clusters(name, c, t, smem) > 5
        for clusters in (None, rows + 3):
            y, ref = _run_v5(D, (c, t, st), (rows, cols), clusters, seed=rows)
            r = compare(y, ref)
            assert r.ok, f"{rows}x{cols}, {clusters} clusters: {r.message}"


def test_v5_deterministic_whatever_the_grid_on_gpu(gpu):
    """A row's result depends only on the row: the same bits with 1, 2 or all clusters."""
    from days.day54_cooperative_groups import driver as D

    outs = [_run_v5(D, (8, 256, 2), (40, 65536), clusters, seed=3)[0] for clusters in (1, 2, None)]
    for y in outs[1:]:
        assert np.array_equal(outs[0].view(np.uint32), y.view(np.uint32))
