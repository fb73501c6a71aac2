import numpy as np
import pytest

from common import bf16
from common import gpu
from common.gpu import sm_count
from days.day48_split_k_stream_k import driver, reference


# --- the reference against independent values -------------------------------------------------

def test_gemm_by_hand():
    # A . B^T = [[1*5 + 2*6, 1*7 + 2*8], [3*5 + 4*6, 3*7 + 4*8]] = [[17, 23], [39, 53]]
    a = bf16.to_bits(np.array([[1, 2], [3, 4]], np.float32))
    b = bf16.to_bits(np.array([[5, 6], [7, 8]], np.float32))
    np.testing.assert_array_equal(reference.gemm(a, b), [[17, 23], [39, 53]])


def test_slice_bounds_by_hand():
    # 10 k-blocks in 4 slices: floor(s * 10 / 4) = 0, 2, 5, 7, 10
    assert reference.slice_bounds(10, 4) == [0, 2, 5, 7, 10]
    assert reference.slice_bounds(1024, 4) == [0, 256, 512, 768, 1024]
    assert reference.slice_bounds(3, 1) == [0, 3]


@pytest.mark.parametrize("k,slices", [(64, 1), (200, 3), (1000, 4), (1000, 16), (130, 2)])
def test_the_slices_add_up_to_the_whole(k, slices):
    rng = np.random.default_rng(k + slices)
    a = bf16.to_bits(rng.standard_normal((7, k)))
    b = bf16.to_bits(rng.standard_normal((5, k)))
    np.testing.assert_allclose(reference.gemm_split_k(a, b, slices), reference.gemm(a, b),
                               rtol=1e-12, atol=1e-12)


def test_tolerance_catches_a_lost_slice():
    # a fix-up that forgets one of 4 slices misses a quarter of every dot product
    rng = np.random.default_rng(2)
    a = bf16.to_bits(rng.standard_normal((64, 1024)))
    b = bf16.to_bits(rng.standard_normal((32, 1024)))
    ref = reference.gemm(a, b)
    a2 = a.copy()
    a2[:, 256:512] = 0                      # slice 1 of reference.slice_bounds(16, 4)
    wrong = bf16.round(reference.gemm(a2, b))
    assert np.linalg.norm(wrong - ref) / np.linalg.norm(ref) > 10 * reference.TOL
    right = bf16.round(ref)
    assert np.linalg.norm(right - ref) / np.linalg.norm(ref) < reference.TOL


# --- the schedules --------------------------------------------------------------------------------

def test_tile_grid():
    # 1000 rows: 8 tiles of 128; 1000 columns: 4 of 256; K 50000: 782 k-blocks (781 x 64 + 16)
    assert driver.tile_grid(1000, 50000, 1000) == (8, 4, 782)
    assert driver.tile_grid(1, 13, 1) == (1, 1, 1)          # K padded to 16: one k-block


@pytest.mark.parametrize("tiles,nk,want", [
    (32, 1024, 4),     # 128 units of 256 k-blocks on 132 SMs; 8 slices = 2 waves of 128 + fix-up
    (64, 256, 2),      # 128 units
    (128, 512, 1),     # already 0.97 of a wave: splitting doubles the waves
    (192, 48, 2),      # 1.45 waves -> 384 units = 2.9 waves of half-length units
    (1, 313, 15),      # one tile: 15 slices (20 k-blocks each + 15 partial reads) = 16
    (4, 3, 1),         # 3 k-blocks: a partial's round trip costs more than it saves
])
def test_split_slices(tiles, nk, want):
    assert driver.split_slices(tiles, nk, 132) == want


def test_split_cost_by_hand():
    # 192 tiles, 48 k-blocks, 132 SMs: one slice = 2 waves x (48 + 1) = 98; two slices =
    # 3 waves x (24 + 1 + 4) + 2 x 1 = 89
    assert driver.split_cost(192, 48, 132, 1) == 98
    assert driver.split_cost(192, 48, 132, 2) == 89


@pytest.mark.parametrize("tiles,nk,mode,want", [
    (32, 1024, "hybrid", {"dp_tiles": 0, "sk_blocks": 132, "grid": 132}),
    (270, 2, "hybrid", {"dp_tiles": 132, "sk_blocks": 69, "grid": 132}),   # 138 x 2 / 4 = 69
    (270, 2, "pure", {"dp_tiles": 0, "sk_blocks": 132, "grid": 132}),
    (270, 2, "sk1", {"dp_tiles": 264, "sk_blocks": 3, "grid": 132}),       # 6 x 2 / 4 = 3
    (264, 4, "hybrid", {"dp_tiles": 264, "sk_blocks": 0, "grid": 132}),    # whole waves: none
    (1, 1, "hybrid", {"dp_tiles": 0, "sk_blocks": 1, "grid": 1}),
])
def test_stream_k_plan(tiles, nk, mode, want):
    assert driver.stream_k_plan(tiles, nk, 132, mode) == want


def test_stream_k_plan_refuses_an_unknown_mode():
    with pytest.raises(ValueError, match="hybrid"):
        driver.stream_k_plan(10, 10, 132, "greedy")


SCHEDULES = [(32, 1024, 132, "hybrid"), (1, 313, 132, "hybrid"), (4, 64, 132, "hybrid"),
             (192, 48, 132, "pure"), (192, 48, 132, "sk1"), (270, 2, 132, "hybrid"),
             (72, 8, 132, "hybrid"), (6, 16, 132, "hybrid"), (1, 1, 132, "hybrid"),
             (300, 7, 16, "hybrid"), (33, 5, 8, "pure"), (128, 512, 132, "hybrid")]


@pytest.mark.parametrize("tiles,nk,sms,mode", SCHEDULES)
def test_stream_k_covers_every_iteration_once(tiles, nk, sms, mode):
    p = driver.stream_k_plan(tiles, nk, sms, mode)
    if not p["sk_blocks"]:
        pytest.skip("no stream-K tiles: the version runs v1")
    units = driver.stream_k_units(tiles, nk, p["dp_tiles"], p["sk_blocks"], p["grid"])
    assert len(units) == p["grid"] <= sms
    seen = np.zeros((tiles, nk), int)
    for blk in units:
        for t, k0, k1 in blk:
            assert 0 <= k0 < k1 <= nk
            seen[t, k0:k1] += 1
    np.testing.assert_array_equal(seen, 1)


@pytest.mark.parametrize("tiles,nk,sms,mode", SCHEDULES)
def test_stream_k_shares_are_even(tiles, nk, sms, mode):
    p = driver.stream_k_plan(tiles, nk, sms, mode)
    if not p["sk_blocks"]:
        pytest.skip("no stream-K tiles")
    units = driver.stream_k_units(tiles, nk, p["dp_tiles"], p["sk_blocks"], p["grid"])
    sk = [sum(k1 - k0 for t, k0, k1 in blk if t >= p["dp_tiles"]) for blk in units]
    busy = sk[:p["sk_blocks"]]
    assert max(busy) - min(busy) <= 1
    assert not any(sk[p["sk_blocks"]:])
    whole = [sum(1 for t, _, _ in blk if t < p["dp_tiles"]) for blk in units]
    assert max(whole) == min(whole)           # data-parallel tiles come in whole waves


@pytest.mark.parametrize("tiles,nk,sms,mode", SCHEDULES)
def test_stream_k_fixup_roles(tiles, nk, sms, mode):
    """What the kernel's StreamKFixup relies on: a block hands over at most one partial (its
    first stream-K unit), owns at most one unfinished tile (its last unit), every piece of a
    shared tile not at k-block 0 is handed to the block that has k-block 0, and that owner's
    list of contributors (blocks after it) is exactly the blocks holding those pieces."""
    p = driver.stream_k_plan(tiles, nk, sms, mode)
    if not p["sk_blocks"]:
        pytest.skip("no stream-K tiles")
    args = (tiles, nk, p["dp_tiles"], p["sk_blocks"], p["grid"])
    units = driver.stream_k_units(*args)
    holders = {}
    for blk, mine in enumerate(units):
        sk = [u for u in mine if u[0] >= p["dp_tiles"]]
        for i, (t, k0, k1) in enumerate(sk):
            if k0 > 0:
                assert i == 0, "a partial is only ever a block's first stream-K unit"
                holders.setdefault(t, []).append(blk)
            elif k1 < nk:
                assert i == len(sk) - 1, "an unfinished owned tile is a block's last unit"
    for blk, mine in enumerate(units):
        for t, k0, k1 in mine:
            if k0 == 0 and k1 < nk:
                got = driver.stream_k_contributors(*args, blk=blk, tile=t)
                assert got == sorted(holders.get(t, []))
                assert got and all(b > blk for b in got)     # waits only for later blocks
    owned = {t for mine in units for t, k0, k1 in mine if k0 == 0}
    assert set(holders) <= owned


def test_plan_for_runs_v1_where_nothing_splits():
    # 2048 x 2048: 128 tiles, splitting does not pay -> v2 and v3 run v1's kernel
    p = driver.plan_for("v3", (2048, 32768, 2048), 132)
    assert p["version"] == "v1" and p["kernel"] == "gemm_v1" and p["grid"] == 128
    p = driver.plan_for("v3", (1024, 65536, 1024), 132)
    assert p == {"version": "v3", "kernel": "gemm_v3", "slices": 4, "grid": 128}
    # 264 tiles = 2 whole waves: stream-K has nothing to balance
    assert driver.plan_for("v4", (1536, 256, 5632), 132)["version"] == "v1"


def test_plan_for_clusters_and_fixed_slices():
    p = driver.plan_for("v3", (1100, 4096, 600), 132, slices=3, cluster=2)
    # 9 row tiles -> 5 pairs x 3 column tiles x 3 slices = 45 cluster units -> 90 blocks
    assert p == {"version": "v3", "kernel": "gemm_v3_c2", "slices": 3, "grid": 90}
    assert driver.plan_for("v1", (8192, 8192, 8192), 132, cluster=2)["grid"] == 132
    # never more slices than k-blocks
    assert driver.plan_for("v2", (128, 128, 256), 132, slices=9)["slices"] == 2


def test_same_as(monkeypatch):
    monkeypatch.setattr(gpu, "sm_count", lambda: 132)
    assert driver.same_as("v2", (2048, 32768, 2048)) == "v1"
    assert driver.same_as("v2", (1024, 65536, 1024)) is None
    assert driver.same_as("v1", (1024, 65536, 1024)) is None


def test_schedule_table_rows():
    rows = driver.schedule_rows(132)
    assert [r[0] for r in rows] == ["x".join(map(str, s)) for s in driver.BENCH_SIZES]
    first = dict(zip(driver.SCHEDULE_HEADERS, rows[0]))
    assert first["tiles"] == 32 and first["S"] == 4 and first["stream-K blocks"] == 132
    assert first["iterations a block"] == "248.2"          # 32 x 1024 / 132


def test_shared_memory_fits():
    assert driver.SMEM <= 227 * 1024


# --- v5: the ping-pong schedule ------------------------------------------------------------------

def test_plan_for_v5():
    # 8192 x 3072 x 768 on 128 x 128 tiles: 64 x 6 = 384 tiles, 48 k-blocks; no split pays
    assert driver.plan_for("v5", (8192, 3072, 768), 132) == {
        "version": "v5", "kernel": "gemm_v5", "slices": 1, "grid": 132}
    # 1024 x 65536 x 1024: 64 tiles of 1024 k-blocks -> 2 slices, 128 units
    assert driver.plan_for("v5", (1024, 65536, 1024), 132) == {
        "version": "v5", "kernel": "gemm_v5", "slices": 2, "grid": 128}
    # 64 x 256 tiles: 1100 rows = 18 row tiles, 600 columns = 3 column tiles
    p = driver.plan_for("v5", (1100, 4096, 600), 132, tile=64, slices=1)
    assert p == {"version": "v5", "kernel": "gemm_v5_64", "slices": 1, "grid": 54}
    # clusters of two: 9 row tiles of 128 -> 5 pairs x 5 column tiles x 3 slices = 75 > 66
    p = driver.plan_for("v5", (1100, 4096, 600), 132, cluster=2, slices=3)
    assert p == {"version": "v5", "kernel": "gemm_v5_c2", "slices": 3, "grid": 132}
    assert driver.plan_for("v5", (128, 128, 256), 132, slices=9)["slices"] == 2   # <= nk
    with pytest.raises(ValueError, match="tile"):
        driver.plan_for("v5", (128, 128, 128), 132, tile=64, cluster=2)


def test_v5_runs_its_own_kernel(monkeypatch):
    monkeypatch.setattr(gpu, "sm_count", lambda: 132)
    assert driver.same_as("v5", (2048, 32768, 2048)) is None
    assert driver.same_as("v5", (8192, 3072, 768)) is None


def test_pingpong_shared_memory_fits():
    # 227 KB a block, less the static mbarriers (< 128 bytes)
    for pm, pn, stages, _ in driver.PINGPONG.values():
        assert driver.pingpong_smem(pm, pn, stages) <= 227 * 1024 - 128
    assert driver.pingpong_smem(128, 128, 6) == 6 * 32 * 1024 + 1024


def test_schedule_rows_show_v5():
    rows = [dict(zip(driver.SCHEDULE_HEADERS, r)) for r in driver.schedule_rows(132)]
    first, last = rows[0], rows[-1]
    assert first["v5 tiles (128x128)"] == 64 and first["v5 S"] == 2
    assert first["v5 units a block"] == "1.00"
    assert last["size"] == "8192x3072x768" and last["v5 tiles (128x128)"] == 384
    assert last["v5 S"] == 1 and last["v5 units a block"] == "2.91"


# A model of run_pingpong's barriers (wgmma_gemm.cuh) for one block: the producer and the two
# consumer warpgroups are generators, the mbarriers count arrivals and completed phases, and
# a wait by parity succeeds as the hardware's does (when the barrier's current phase has the
# other parity), so a wait that would see a stale phase is caught. Checked on every step: a
# consumer reads the k-block that was loaded for its ring position, the producer never refills
# a stage a wgmma may still read, and only one warpgroup issues wgmma at a time.

class _Bar:
    def __init__(self, count):
        self.count, self.arrived, self.phases = count, 0, 0

    def arrive(self):
        self.arrived += 1
        if self.arrived == self.count:
            self.arrived, self.phases = 0, self.phases + 1

    def ready(self, parity):
        return (self.phases & 1) != parity


def _pingpong_model(units, stages, inflight, seed, turn_parity=None, wait_turns=True):
    """Run the model; units = k-blocks of each unit of the block, in order. Returns the
    (warpgroup, unit) mainloop order. Raises AssertionError on a deadlock or a violation."""
    full = [_Bar(1) for _ in range(stages)]
    empty = [_Bar(1) for _ in range(stages)]
    turn = [_Bar(128), _Bar(128)]
    loaded = [None] * stages           # ring position whose data a stage holds
    reading = set()                    # positions a wgmma may still read
    issuing = []                       # warpgroups inside their mainloop
    order = []
    parity_of = turn_parity or (lambda i, c: (((i + c) >> 1) & 1) ^ 1)

    def wait(bar, parity, phase):
        while not bar.ready(parity):
            yield
        assert bar.phases > phase, "a wait returned on a stale phase"

    def producer():
        it = 0
        for nkb in units:
            for _ in range(nkb):
                s, r = it % stages, it // stages
                if r > 0:
                    yield from wait(empty[s], (r - 1) & 1, r - 1)
                assert not any(p % stages == s for p in reading), "refilled a stage in use"
                loaded[s] = it
                full[s].arrive()
                it += 1
                yield

    def release(p):
        reading.discard(p)
        empty[p % stages].arrive()

    def consumer(c):
        it = 0
        for i, nkb in enumerate(units):
            if i % 2 == c:
                if i > 0 and wait_turns:
                    yield from wait(turn[c], parity_of(i, c), (i + c) // 2 - 1)
                assert not issuing, "both warpgroups issue wgmma at once"
                issuing.append(c)
                order.append((c, i))
                p = it
                for kb in range(nkb):
                    s, r = p % stages, p // stages
                    yield from wait(full[s], r & 1, r)
                    assert loaded[s] == p, "read a k-block loaded for another position"
                    reading.add(p)
                    yield
                    if kb >= inflight - 1:
                        release(p - (inflight - 1))
                    p += 1
                issuing.remove(c)
                for _ in range(128):
                    turn[1 - c].arrive()
                if inflight > 1:
                    release(p - 1)
                for _ in range(3):     # the epilogue
                    yield
            it += nkb

    rng = np.random.default_rng(seed)
    actors = [producer(), consumer(0), consumer(1)]
    for _ in range(100000):
        if not actors:
            return order
        a = actors[rng.integers(len(actors))]
        try:
            next(a)
        except StopIteration:
            actors.remove(a)
    raise AssertionError("deadlock: no progress in 100000 steps")


@pytest.mark.parametrize("units", [[12] * 7, [1] * 5, [3, 1, 4, 1, 5, 9, 2, 6], [5], [2, 2],
                                   [1], [40, 1, 1, 40]])
@pytest.mark.parametrize("stages,inflight", [(2, 2), (3, 1), (4, 2), (6, 2), (7, 1)])
def test_pingpong_protocol_model(units, stages, inflight):
    for seed in range(8):
        order = _pingpong_model(units, stages, inflight, seed)
        assert order == [(i % 2, i) for i in range(len(units))]


def test_pingpong_model_catches_a_broken_protocol():
    # without the turn barriers the warpgroups issue at once, or one waits for a ring position
    # a whole round ahead of the producer and its parity wait passes on the stale phase; with
    # the turns counted as i // 2 for both warpgroups, warpgroup 0 reads a stale turn phase
    with pytest.raises(AssertionError, match="at once|stale"):
        for seed in range(20):
            _pingpong_model([4] * 6, 4, 2, seed, wait_turns=False)
    with pytest.raises(AssertionError, match="stale"):
        for seed in range(20):
            _pingpong_model([4] * 6, 4, 2, seed, turn_parity=lambda i, c: (i // 2) & 1)


# --- sizes and the public function -------------------------------------------------------------

def test_sizes_refused_in_words():
    with pytest.raises(ValueError, match="C = "):
        driver.validate_size((65536, 8, 65536))
    with pytest.raises(ValueError, match="32-bit"):
        driver.validate_size((2 ** 31, 8, 1))


def test_matmul_checks_its_input():
    # the same public function as day 45's (common.hopper_gemm.bf16_nt_matmul, whose every bad
    # input day 45's tests cover); here that day 48 routes through it, with its own versions
    with pytest.raises(ValueError, match="same K"):
        driver.matmul(np.zeros((3, 4)), np.zeros((5, 3)))
    with pytest.raises(ValueError, match="v1, v2"):
        driver.matmul(np.zeros((2, 8)), np.zeros((2, 8)), version="v9")
    assert driver.matmul(np.zeros((0, 8)), np.zeros((3, 8))).shape == (0, 3)


# --- GPU ----------------------------------------------------------------------------------------

# v5 on ragged shapes in a child process first: a protocol bug in the ping-pong kernel would
# otherwise hang (or, through its watchdog, fault) this test process. (1100, 520, 600): 9 x 5
# tiles; (2304, 136, 3840): 540 tiles, 4 or 5 a block (a block's last unit on either
# warpgroup); (100, 20000, 90): one tile in 15 slices; K % 8 != 0 (the pad path); clusters
# with an empty half (9 row tiles).
V5_SMOKE = [((1, 1, 1), {}), ((131, 777, 77), {}), ((300, 1000, 260), {"slices": 3}),
            ((1100, 520, 600), {}), ((2304, 136, 3840), {}), ((100, 20000, 90), {}),
            ((385, 2056, 770), {"tile": 64}), ((2304, 136, 3840), {"tile": 64}),
            ((1100, 520, 600), {"cluster": 2}), ((1100, 2056, 600), {"cluster": 2, "slices": 3})]

_SMOKE_CHILD = """
import json, sys
import numpy as np
from common import harness as H
from common.gpu import driver as cuda, sm_count
from days.day48_split_k_stream_k import driver, reference
out = []
for size, kw in json.loads(sys.argv[1]):
    case = driver.make_case(tuple(size), np.random.default_rng(1))
    d = H.DeviceCase(case)
    plan = driver.plan_for("v5", tuple(size), sm_count(), **kw)
    d.poison_outputs()
    driver.run_plan(d, plan)
    cuda().Context.synchronize()
    got = reference.bf16_to_float(d.array("c").get()).astype(np.float64)
    want = case.expected()["c"]
    ok = bool(np.isfinite(got).all())
    err = float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30))
    out.append([size, kw, plan["kernel"], plan["slices"], ok, err])
    print(json.dumps(out[-1]), flush=True)
"""


def test_v5_in_a_child_process(gpu):
    """Every v5 kernel on ragged shapes, in a child with a time limit: a deadlock fails this
    test instead of hanging the run (the kernel's own watchdog faults after ~9 s of waiting)."""
    import json
    import subprocess
    import sys

    from common.harness import ROOT

    try:
        r = subprocess.run([sys.executable, "-c", _SMOKE_CHILD, json.dumps(V5_SMOKE)], cwd=ROOT,
                           capture_output=True, text=True, timeout=480)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"v5 did not finish in 480 s (a deadlock?); output so far: {e.stdout!r}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(rows) == len(V5_SMOKE), r.stdout
    bad = [row for row in rows if not row[4] or row[5] >= reference.TOL]
    assert not bad, bad


@pytest.mark.parametrize("kw,other", [({"tile": 64, "slices": 1}, ("v1", {})),
                                      ({"cluster": 2, "slices": 1}, ("v5", {"slices": 1}))])
def test_v5_gives_the_same_bits_as_its_twin(gpu, kw, other):
    """v5 on 64 x 256 tiles runs v1's instruction (m64n256k16) on the same rows and k order: the
    same bits; clusters only change who loads B: the same bits as v5 without them."""
    size = (1100, 2056, 600)
    _, d = _device_case(size, 8)
    sms = sm_count()
    a = _run(d, driver.plan_for("v5", size, sms, **kw))
    b = _run(d, driver.plan_for(other[0], size, sms, **other[1]))
    np.testing.assert_array_equal(a, b)

def _device_case(size, seed):
    from common import harness as H

    case = driver.make_case(size, np.random.default_rng(seed))
    return case, H.DeviceCase(case)


def _run(d, plan):
    from common.gpu import driver as cuda

    d.poison_outputs()
    driver.run_plan(d, plan)
    cuda().Context.synchronize()
    return d.array("c").get()


@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_matmul_on_the_gpu(gpu, version):
    rng = np.random.default_rng(3)
    a = rng.standard_normal((131, 9000))          # 1 x 1 tiles, 141 k-blocks: every version splits
    b = rng.standard_normal((77, 9000))
    got = driver.matmul(a, b, version=version)
    want = bf16.round(a).astype(float) @ bf16.round(b).astype(float).T
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < reference.TOL


@pytest.mark.parametrize("size", [(300, 20000, 520), (1000, 4104, 1000)])
@pytest.mark.parametrize("version", ["v3", "v4", "v5"])
def test_fixups_are_deterministic(gpu, version, size):
    """Two launches on the same data give the same bits: the partial sums meet in a fixed
    order (v3, v5: slice order; v4: owner, then blocks in order), whichever block finishes
    first."""
    case, d = _device_case(size, 5)
    plan = driver.plan_for(version, size, sm_count())
    assert plan["version"] == version                  # the size really splits
    first = _run(d, plan)
    for _ in range(3):
        np.testing.assert_array_equal(_run(d, plan), first)
    got = reference.bf16_to_float(first).astype(np.float64)
    want = case.expected()["c"]
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < reference.TOL


@pytest.mark.parametrize("version,kw", [
    ("v2", {"slices": 2}), ("v2", {"slices": 7}), ("v3", {"slices": 3}), ("v3", {"slices": 16}),
    ("v3", {"slices": 5, "cluster": 2}), ("v1", {"cluster": 2}),
    ("v4", {"mode": "pure"}), ("v4", {"mode": "sk1"}), ("v4", {"mode": "hybrid"}),
    ("v5", {"slices": 1}), ("v5", {"slices": 3}), ("v5", {"slices": 4}), ("v5", {"tile": 64}),
    ("v5", {"tile": 64, "slices": 3}), ("v5", {"cluster": 2}), ("v5", {"cluster": 2, "slices": 3}),
])
@pytest.mark.parametrize("size", [(1100, 2056, 600), (2304, 136, 3840)])
def test_sweep_candidates_are_correct(gpu, version, kw, size):
    case, d = _device_case(size, 6)
    plan = driver.plan_for(version, size, sm_count(), **kw)
    got = reference.bf16_to_float(_run(d, plan)).astype(np.float64)
    want = case.expected()["c"]
    assert np.isfinite(got).all()
    assert np.linalg.norm(got - want) / np.linalg.norm(want) < reference.TOL, plan


def test_counters_and_flags_reset_themselves(gpu):
    """v3's per-tile counters and v4's flags are back at zero after every launch (the next
    launch needs them so, and nobody clears them in between)."""
    size = (640, 8192, 1000)
    _, d = _device_case(size, 7)
    for version in ("v3", "v4", "v5"):
        plan = driver.plan_for(version, size, sm_count())
        assert plan["version"] == version and plan.get("slices", 2) > 1
        _run(d, plan)
        _run(d, plan)
    for name in ("sem_v3", "flags_v4", "sem_v5"):
        assert not d._scratch[name].get().any(), name
