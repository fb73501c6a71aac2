import numpy as np
import pytest

from days.day21_transpose_matrix import reference


def test_reference_by_hand():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    y = reference.transpose(x)
    assert y.shape == (3, 2) and y.flags.c_contiguous
    np.testing.assert_array_equal(y, [[1, 4], [2, 5], [3, 6]])


def test_reference_against_index_arithmetic():
    # a second formulation: flat index r*C + c of the input is flat index c*R + r of the output
    rows, cols = 37, 53
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    flat = np.empty(rows * cols, np.float32)
    for r in range(rows):
        for c in range(cols):
            flat[c * rows + r] = x.ravel()[r * cols + c]
    np.testing.assert_array_equal(reference.transpose(x).ravel(), flat)


def test_reference_refuses_1d():
    with pytest.raises(ValueError, match="2-D"):
        reference.transpose(np.ones(3))


def test_bank_arithmetic_of_the_three_tiles():
    # v2: tile[32][32], column c read by 32 lanes: word 32*lane + c, all in bank c
    assert reference.column_read_banks(5, "plain") == [5] * 32
    assert reference.passes([reference.tile_word(l, 5, "plain") for l in range(32)]) == 32
    # v3: 33 words a row: bank (lane + c) % 32, all different
    assert reference.column_read_banks(5, "padded") == [(l + 5) % 32 for l in range(32)]
    assert reference.passes([reference.tile_word(l, 7, "padded") for l in range(32)]) == 1
    # v4: element (r, c) at column c ^ r: column read hits bank c ^ lane
    assert reference.column_read_banks(5, "swizzled") == [5 ^ l for l in range(32)]
    for c in range(32):
        assert sorted(reference.column_read_banks(c, "swizzled")) == list(range(32))
        # and the row write (r fixed, lanes along c) stays conflict-free
        assert reference.passes([reference.tile_word(c, l, "swizzled") for l in range(32)]) == 1
    # the swizzle is a bijection on the tile: no two elements share a word
    words = {reference.tile_word(r, c, "swizzled") for r in range(32) for c in range(32)}
    assert words == set(range(1024))
    with pytest.raises(ValueError, match="layout"):
        reference.tile_word(0, 0, "diagonal")


def test_passes_counts_distinct_words():
    assert reference.passes([0] * 32) == 1                    # broadcast: one word
    assert reference.passes(list(range(32))) == 1
    assert reference.passes([2 * l for l in range(32)]) == 2  # stride 2: words l and l + 32 share a bank
    assert reference.passes([]) == 0


def test_v6_lane_layout_is_conflict_free():
    """The 8 x 4 lane layout of v6 (kernel.cu): every shared-memory store of the load phase and
    every column read of the store phase touches 32 different banks, for every candidate."""
    from days.day21_transpose_matrix.driver import V6_CANDIDATES

    for tr, tc, nt in set(V6_CANDIDATES.values()):
        p = tc + 1
        for i in range(tr * tc // 4 // nt):
            for w in range(nt // 32):
                fs = [w * 32 + lane + i * nt for lane in range(32)]
                for k in range(4):
                    ld = [(4 * ((f >> 5) // (tc // 32)) + ((f >> 3) & 3)) * p
                          + 32 * ((f >> 5) % (tc // 32)) + 4 * (f & 7) + k for f in fs]
                    st = [(32 * ((f >> 5) % (tr // 32)) + 4 * (f & 7) + k) * p
                          + 4 * ((f >> 5) // (tr // 32)) + ((f >> 3) & 3) for f in fs]
                    assert reference.passes(ld) == 1 and reference.passes(st) == 1
    # the same layout WITHOUT the pad (64 words a row): the read hits 4 banks, 8 words each
    st = [(4 * (l & 7) + 0) * 64 + (l >> 3) for l in range(32)]
    assert reference.passes(st) == 8


def test_v6_kernel_choice():
    from days.day21_transpose_matrix.driver import v6_kernel

    assert v6_kernel("64x64_n256", 8192, 8192) == ("transpose_v6_64x64_n256_l4s4", 128 * 128, 256)
    assert v6_kernel("64x64_n256", 4097, 3001)[0] == "transpose_v6_64x64_n256_l1s1"
    assert v6_kernel("64x64_n256", 4097, 3000)[0] == "transpose_v6_64x64_n256_l4s1"  # rows odd
    assert v6_kernel("64x64_n256", 4096, 3001)[0] == "transpose_v6_64x64_n256_l1s4"
    assert v6_kernel("128x64_n256", 129, 65)[1:] == (2 * 2, 256)
    with pytest.raises(ValueError, match="candidate"):
        v6_kernel("16x16_n64", 8, 8)


@pytest.mark.parametrize("x,exc,word", [
    (np.ones((2, 3), complex), TypeError, "complex"),
    (np.ones(5), ValueError, "2-D"),
    (np.ones((2, 2, 2)), ValueError, "2-D"),
    ([[1, 2], [3]], ValueError, "ragged"),
    (None, TypeError, "None"),
    (np.array([["a"]]), TypeError, "dtype"),
    (np.ones((2, 2), bool), TypeError, "booleans"),
])
def test_transpose_refuses_bad_input(x, exc, word):
    from days.day21_transpose_matrix.driver import transpose

    with pytest.raises(exc, match=word):
        transpose(x)


def test_transpose_unknown_version_empty_and_too_large():
    from days.day21_transpose_matrix.driver import BEST, transpose, validate_size

    with pytest.raises(ValueError, match="unknown version 'v9'.*v1, v2, v3, v4, v5, v6"):
        transpose(np.ones((2, 2)), version="v9")
    with pytest.raises(TypeError, match="version"):
        transpose(np.ones((2, 2)), version=6)
    for shape in ((0, 5), (4, 0), (0, 0)):
        y = transpose(np.ones(shape))  # nothing is launched (this runs without a GPU)
        assert y.shape == shape[::-1] and y.dtype == np.float32
    with pytest.raises(ValueError, match="32-bit"):
        validate_size((65536, 32768))
    validate_size((16384, 16384))
    assert BEST == "v6"


def test_launch_refuses_unknown_version():
    from days.day21_transpose_matrix.driver import launch

    with pytest.raises(ValueError, match="unknown version"):
        launch("v7", None)


@pytest.mark.parametrize("shape", [(1, 1), (3, 5), (4, 8), (129, 67), (1000, 3), (513, 2052)])
def test_every_version_and_candidate_on_gpu(gpu, shape):
    from common import harness as H
    from days.day21_transpose_matrix import driver

    x = np.random.default_rng(shape[0]).standard_normal(shape).astype(np.float32)
    for v in driver.VERSIONS:
        np.testing.assert_array_equal(driver.transpose(x, v), x.T, err_msg=v)
    for cand in driver.V6_CANDIDATES:  # every candidate the sweep may promote
        case = H.Case(shape, inputs={"x": x}, outputs={"y": (shape[::-1], np.float32)})
        y = H.run(lambda _, d: driver.launch_v6(cand, d), cand, case)["y"]
        np.testing.assert_array_equal(y, x.T, err_msg=cand)


def test_integer_input_converts_on_gpu(gpu):
    from days.day21_transpose_matrix.driver import transpose

    x = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(transpose(x), x.T.astype(np.float32))
