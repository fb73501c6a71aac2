import numpy as np
import pytest

from days.day22_shared_mem_tricks import reference as R


def test_passes_by_hand():
    assert R.passes(range(32)) == 1                         # stride 1
    assert R.passes([2 * l for l in range(32)]) == 2        # bank 0 holds words 0 and 32
    assert R.passes([3 * l for l in range(32)]) == 1        # odd stride: a permutation of banks
    assert R.passes([32 * l for l in range(32)]) == 32      # one bank, 32 words
    assert R.passes([0] * 32) == 1                          # broadcast: one word, one pass
    assert R.passes([5, 5, 37, 37] + list(range(6, 34))) == 2   # words 5 and 37 share bank 5
    # 8 bytes a lane: two half-warps of 128 bytes; 16 bytes: four quarter-warps
    assert R.passes([2 * l for l in range(32)], width=2) == 2
    assert R.passes([4 * l for l in range(32)], width=4) == 4
    # a float2 stride of 2 float2 (4 words) doubles it: each half-warp spans 256 bytes
    assert R.passes([4 * l for l in range(32)], width=2) == 4


@pytest.mark.parametrize("version,want", [("v1", 1), ("v2", 2), ("v3", 1), ("v4", 32), ("v5", 1),
                                          ("v6", 1), ("v7", 1), ("v8", 2), ("v9", 4), ("v10", 1)])
def test_every_window_and_warp_costs_the_same(version, want):
    for w in range(R.WARPS):
        for j in range(32):
            assert R.pattern_passes(version, w, j) == want, (w, j)


def test_counters_closed_form():
    size = (132, 1024)
    requests = 132 * 8 * 1024
    c = R.counters("v4", size)
    assert c["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] == 32 * requests
    assert c["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == 31 * requests == 33_521_664
    assert c["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] == 132 * 2048 // 32
    c = R.counters("v9", size)  # float4: 4 wavefronts a request, none of them a conflict
    assert c["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] == 4 * requests
    assert c["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == 0
    assert R.counters("v10", size)["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"] == 132 * 24576 // 32
    assert R.counters("v2", size)["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"] == requests


def test_output_by_hand():
    # v7 broadcast, mod 61, one round: every thread reads words 0..31 -> 0 + 1 + ... + 31
    assert np.all(R.output("v7", (2, 32)) == 496) and R.output("v7", (2, 32)).shape == (512,)
    # v1, lane l reads words l .. l + 31; with mod 61 and l <= 29 no value wraps
    o = R.output("v1", (1, 64))
    assert o[5] == 2 * sum(range(5, 37))
    # v4 lane 1: words 32 .. 63 -> values 32..60, 0, 1, 2 (63 % 61 = 2)
    assert R.output("v4", (1, 32))[1] == sum(range(32, 61)) + 0 + 1 + 2
    # v9 (float4) divides by 4: lane 0 reads words 0..127 once each over the round
    assert R.output("v9", (1, 32))[0] == (sum(w % 61 for w in range(128))) / 4
    with pytest.raises(ValueError, match="multiple of 32"):
        R.output("v1", (1, 33))


def test_bank_sum_is_every_versions_output_with_mod_32():
    for v in R.PATTERNS:
        np.testing.assert_array_equal(R.output(v, (3, 96), mod=32), R.bank_sum_output((3, 96)))


def test_patterns_stay_inside_their_buffers_and_are_aligned():
    for v, (_, width, word, nw) in R.PATTERNS.items():
        for w in range(R.WARPS):
            for l in range(32):
                for j in range(32):
                    a = word(w, l, j)
                    assert 0 <= a and a + width <= nw, (v, w, l, j)
                    assert a % width == 0, (v, "a vector read must be aligned")
    # v10's warps read disjoint slices
    word = R.PATTERNS["v10"][2]
    assert max(word(0, l, j) for l in range(32) for j in range(32)) < R.SLICE


def test_driver_sizes_and_bar_arithmetic():
    from days.day22_shared_mem_tricks import driver as D

    with pytest.raises(ValueError, match="multiple of 32"):
        D.validate_size((4, 40))
    with pytest.raises(ValueError, match="exact"):
        D.validate_size((4, 2 * D.MAX_ITERS))
    with pytest.raises(ValueError, match="32-bit"):
        D.validate_size((2 ** 23, 32))
    assert D.kernel_name("v10") == "smem_v10_dynamic96k"
    prof = {"size": "132x1024", "versions": {v: R.counters(v, D.NCU_SIZE) for v in D.VERSIONS}}
    assert D.compare_counters(prof) == (True, [])
    prof["versions"]["v4"][D.LD_CONFLICTS] *= 0.9   # 10% off: beyond the margin
    ok, bad = D.compare_counters(prof)
    assert not ok and "v4" in bad[0]
    del prof["versions"]["v9"]
    assert "v9 not profiled" in D.compare_counters(prof)[1]
    ok, fig = D._v1_at_ideal({"extra": {"patterns": {"v1": {"of_ideal": 0.85, "ok": True}}}})
    assert ok and "85.0%" in fig
    assert not D._v1_at_ideal({"extra": {"patterns": {"v1": {"of_ideal": 0.5, "ok": True}}}})[0]


@pytest.mark.parametrize("kw,exc,word", [
    ({"version": "v11"}, ValueError, "unknown version"),
    ({"version": 1}, TypeError, "version"),
    ({"blocks": -1}, ValueError, "blocks"),
    ({"blocks": 1.5}, TypeError, "blocks"),
    ({"iters": 33}, ValueError, "multiple of 32"),
    ({"iters": "32"}, TypeError, "iters"),
    ({"mod": 0}, ValueError, "mod"),
    ({"mod": 65}, ValueError, "mod"),
])
def test_pattern_refuses_bad_input(kw, exc, word):
    from days.day22_shared_mem_tricks.driver import pattern

    with pytest.raises(exc, match=word):
        pattern(**kw)


def test_pattern_empty_without_launch():
    from days.day22_shared_mem_tricks.driver import pattern

    assert pattern("v4", blocks=0).shape == (0,)
    np.testing.assert_array_equal(pattern("v4", blocks=2, iters=0), np.zeros(512, np.float32))


@pytest.mark.parametrize("size", [(1, 32), (5, 96), (133, 1024)])
def test_every_pattern_exact_with_mod_61_on_gpu(gpu, size):
    from days.day22_shared_mem_tricks.driver import VERSIONS, pattern

    for v in VERSIONS:
        np.testing.assert_array_equal(pattern(v, *size, mod=61), R.output(v, size, 61), err_msg=v)
