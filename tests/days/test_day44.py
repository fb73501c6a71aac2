import numpy as np
import pytest

from days.day44_tma_bulk_copy import driver, reference


def test_reference_by_hand():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    np.testing.assert_array_equal(reference.transpose(x), [[1, 4], [2, 5], [3, 6]])
    np.testing.assert_array_equal(reference.copy(x), x)
    assert reference.transpose(x).flags.c_contiguous


def test_swizzled_transpose_covers_every_element_once_and_reads_conflict_free():
    # the lane -> (row, column) map of kernel.cu's transpose_tile over its 32 steps, and the
    # swizzled word each access hits (16-byte chunk q of row r stored at chunk q ^ (r % 8))
    def swz(row, col):
        return row * 32 + ((((col >> 2) ^ (row & 7)) << 2) | (col & 3))

    seen, worst_read, worst_write = set(), 0, 0
    for step in range(32):
        s, k = step >> 3, step & 7
        reads, writes = [], []
        for lane in range(32):
            r, c = lane, 4 * k + (((lane >> 3) + s) & 3)
            seen.add((r, c))
            reads.append(swz(r, c) % 32)            # bank of the word read
            writes.append(swz(c, r) % 32)
        worst_read = max(worst_read, max(np.bincount(reads)))
        worst_write = max(worst_write, max(np.bincount(writes)))
    assert len(seen) == 32 * 32
    assert worst_read == 1 and worst_write <= 2


def test_same_as_for_shapes_a_tensor_map_cannot_take():
    assert driver.same_as("v3", (31, 33, driver.TRANSPOSE)) == "v1"
    assert driver.same_as("v2", (36, 100, driver.TRANSPOSE)) is None
    assert driver.same_as("v3", (31, 33, driver.COPY)) is None        # a copy views any length flat
    assert driver.same_as("v1", (31, 33, driver.TRANSPOSE)) is None


def test_shared_memory_fits():
    # 227 KB of dynamic shared memory a block at most on Hopper
    for c in [driver.V3_COPY] + driver.COPY_CANDIDATES:
        assert driver.copy_smem(*c) <= 227 * 1024, c
    for c in [driver.V3_TRANSPOSE] + driver.TRANSPOSE_CANDIDATES:
        assert driver.transpose_smem(*c) <= 227 * 1024, c


@pytest.mark.parametrize("size,msg", [((4, 4, 3), "OP"), ((65536, 65536, 1), "elements"),
                                      ((4, 2 ** 22, 2), "columns")])
def test_sizes_refused_in_words(size, msg):
    with pytest.raises(ValueError, match=msg):
        driver.validate_size(size)


@pytest.mark.parametrize("fn", [driver.copy, driver.transpose])
def test_public_functions_check_their_input(fn):
    with pytest.raises(ValueError, match="2-D"):
        fn(np.zeros(5))
    with pytest.raises(TypeError, match="real"):
        fn(np.zeros((2, 2), complex))
    with pytest.raises(ValueError, match="unknown version"):
        fn(np.zeros((2, 2)), version="v7")
    assert fn(np.zeros((0, 3))).shape in ((0, 3), (3, 0))


@pytest.mark.parametrize("version", list(driver.VERSIONS))
@pytest.mark.parametrize("shape", [(1, 1), (5, 7), (64, 36), (100, 260), (1, 300)])
def test_public_functions_on_the_gpu(gpu, version, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(driver.copy(x, version=version), x)
    np.testing.assert_array_equal(driver.transpose(x, version=version), x.T)


def test_repeated_launches_reuse_the_maps(gpu):
    # the tensor maps are cached on the DeviceCase; a second launch must still be right
    from common import harness as H

    case = driver.make_case((256, 260, driver.TRANSPOSE), np.random.default_rng(2))
    d = H.DeviceCase(case)
    for _ in range(3):
        assert H.check(driver.launch, "v3", case, d).ok
