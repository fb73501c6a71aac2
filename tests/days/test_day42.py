import re
from pathlib import Path

import numpy as np
import pytest

from common import bf16
from days.day42_mma_ptx_gemm import reference

DRV = "days.day42_mma_ptx_gemm.driver"


def _driver():
    import importlib

    return importlib.import_module(DRV)


# --- the fragment tables: ldmatrix + mma.sync rebuild the product --------------------------------------

def test_fragment_tables_cover_each_element_once():
    a = sorted(rc for lane in range(32) for rc in reference.fragment_a(lane))
    assert a == [(r, c) for r in range(16) for c in range(16)]
    b = sorted(kn for lane in range(32) for kn in reference.fragment_b(lane))
    assert b == [(k, n) for k in range(16) for n in range(8)]
    c = sorted(rc for lane in range(32) for rc in reference.fragment_c(lane))
    assert c == [(r, q) for r in range(16) for q in range(8)]
    # by hand: lane 5 (g = 1, t = 1) holds A[1][2], A[1][3] in a[0] and A[9][10], A[9][11] in a[3]
    assert reference.fragment_a(5)[:2] == [(1, 2), (1, 3)] and reference.fragment_a(5)[6:] == [(9, 10), (9, 11)]
    assert reference.fragment_c(31) == [(7, 6), (7, 7), (15, 6), (15, 7)]


def test_ldmatrix_addressing_feeds_mma_the_right_fragments():
    """mma.cuh's addressing (lane l -> row l % 16, chunk l / 16; .trans for B) handed to the
    PTX fragment tables reproduces A @ B: the mapping the kernels rely on."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((16, 16))
    b = rng.standard_normal((16, 16))          # [k][n]: two n8 tiles
    a_regs = reference.ldmatrix_x4(a)
    b_regs = reference.ldmatrix_x4(b, trans=True)
    for tile in range(2):                      # registers (0, 1) feed n-tile 0, (2, 3) n-tile 1
        breg = [[regs[2 * tile], regs[2 * tile + 1]] for regs in b_regs]
        np.testing.assert_allclose(reference.mma_m16n8k16(a_regs, breg),
                                   a @ b[:, 8 * tile:8 * tile + 8], rtol=1e-12)


def test_wrong_addressing_is_caught():
    # pointing lanes 8-15 at chunk 1 instead of rows 8-15 gives another product
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((16, 16)), rng.standard_normal((16, 16))
    a_swapped = np.block([[a[:8, :8], a[8:, :8]], [a[:8, 8:], a[8:, 8:]]])
    a_regs = reference.ldmatrix_x4(a_swapped)
    breg = [[regs[0], regs[1]] for regs in reference.ldmatrix_x4(b, trans=True)]
    assert not np.allclose(reference.mma_m16n8k16(a_regs, breg), a @ b[:, :8])


# --- the swizzled layout ------------------------------------------------------------------------------

@pytest.mark.parametrize("cols", [32, 64, 128, 256])
def test_swizzle_is_conflict_free_and_a_permutation(cols):
    chunks = cols // 8
    for r0 in range(0, 32, 8):
        for c in range(chunks):
            off = lambda r, ch: reference.layout_offset(r, ch, cols)   # noqa: E731
            assert reference.bank_groups(0, chunk=c, offset=lambda r, ch: off(r0 + r, ch)) == 8
    for r in range(16):   # each row's chunks are a permutation of the row
        offs = sorted(reference.layout_offset(r, c, cols) for c in range(chunks))
        assert offs == [r * cols * 2 + 16 * c for c in range(chunks)]


@pytest.mark.parametrize("cols,groups", [(32, 2), (64, 1), (128, 1), (256, 1)])
def test_plain_layout_conflicts(cols, groups):
    off = lambda r, c: reference.layout_offset(r, c, cols, swizzle=False)   # noqa: E731
    assert reference.bank_groups(0, offset=off) == groups


def test_swizzle_by_hand():
    # 64-byte rows (BK = 32): rows 0-1 keep their chunks, rows 2-3 XOR 1, rows 4-5 XOR 2 ...
    assert [reference.layout_offset(r, 0, 32) % 64 // 16 for r in range(8)] == [0, 0, 1, 1, 2, 2, 3, 3]
    # 256-byte rows (BN = 128): chunk c of row r at c ^ (r % 8)
    assert reference.layout_offset(3, 5, 128) == 3 * 256 + 16 * (5 ^ 3)


# --- driver tables against kernel.cu ----------------------------------------------------------------

def test_kernel_table_matches_kernel_cu():
    drv = _driver()
    src = (Path(drv.__file__).parent / "kernel.cu").read_text()
    shapes = {m[0]: tuple(map(int, m[1:])) for m in
              re.findall(r"using (\w+) = Shape<(\d+), (\d+), (\d+), (\d+), (\d+)>;", src)}
    entries = re.findall(r"^MMA_GEMM\((\w+), (\w+), (\w+), (\w+), (\w+), (\d)\)", src, flags=re.M)
    assert {e[0] for e in entries} == set(drv.KERNELS)
    for name, shape, swz, pipe, frag2, minb in entries:
        bm, bn, bk, wm, wn = shapes[shape]
        threads = 32 * (bm // wm) * (bn // wn)
        assert drv.KERNELS[name] == (bm, bn, threads, 2 if pipe == "true" else 1), name
        assert bk == drv.BK
    for v in drv.VERSIONS:
        assert f"hgemm_mma_{v}" in drv.KERNELS


def test_bar_and_previous_day_check():
    drv = _driver()
    assert drv.BAR[0] == {"sizes": [(8192, 8192, 8192)], "vs_baseline": 0.55}
    rec = {"extra": {"versus_previous": {"8192x8192x8192": {
        "previous": {"ok": True}, "this": {"ok": True}, "speedup": 1.3}}}}
    assert drv._beats_previous(rec) == (True, "1.30x the previous day's best at 8192x8192x8192")
    rec["extra"]["versus_previous"]["8192x8192x8192"]["speedup"] = 0.9
    assert drv._beats_previous(rec)[0] is False
    rec["extra"]["versus_previous"]["8192x8192x8192"]["this"]["ok"] = False
    assert "wrong" in drv._beats_previous(rec)[1]
    assert drv._beats_previous({})[0] is False


@pytest.mark.parametrize("a,b,exc,word", [
    (np.ones((2, 3), np.complex64), np.ones((3, 2)), TypeError, "complex"),
    (np.ones((2, 3)), np.ones((4, 2)), ValueError, "rows"),
    (np.ones((2, 3)), np.ones((3,)), ValueError, "2-D"),
])
def test_matmul_refuses(a, b, exc, word):
    with pytest.raises(exc, match=word):
        _driver().matmul(a, b)


def test_matmul_bits_refuses_and_empty():
    drv = _driver()
    with pytest.raises(TypeError, match="uint16"):
        drv.matmul_bits(np.ones((2, 2), np.int16), np.ones((2, 2), np.uint16))
    with pytest.raises(ValueError, match="unknown version"):
        drv.matmul_bits(np.ones((2, 2), np.uint16), np.ones((2, 2), np.uint16), version="v7")
    assert drv.matmul_bits(np.zeros((3, 0), np.uint16), np.zeros((0, 4), np.uint16)).shape == (3, 4)


# --- on the GPU ------------------------------------------------------------------------------------

@pytest.mark.parametrize("kernel", list(__import__(DRV, fromlist=["KERNELS"]).KERNELS))
def test_every_kernel_on_gpu_ragged(gpu, kernel):
    from common import harness as H

    drv = _driver()
    for size in [(1, 1, 1), (300, 136, 520), (257, 1000, 129), (1000, 777, 513)]:
        case = drv.make_case(size, np.random.default_rng(42))
        r = H.check(lambda v, d: drv.launch_kernel(kernel, d), kernel, case)
        assert r.ok, f"{kernel} at {size}: {r.message}"


def test_matmul_on_gpu(gpu):
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((130, 70)), rng.standard_normal((70, 257))
    got = _driver().matmul(a, b)
    ref = reference.matmul(bf16.to_bits(a), bf16.to_bits(b))
    assert reference.rel_l2(got, ref) <= reference.tolerance(70)
