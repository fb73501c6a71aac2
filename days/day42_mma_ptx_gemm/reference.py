"""Day 42 reference: day 41's problem (C = A @ B of bf16 inputs in float64, imported), plus the
arithmetic of the tutorial: the mma.sync m16n8k16 fragment tables, what ldmatrix hands each lane,
and the XOR-swizzled shared layout (common/cuda/mma.cuh's Layout) with its bank groups."""
import numpy as np

from days.day41_wmma_hgemm.reference import (bank_groups, flops, matmul, padded,  # noqa: F401
                                             rel_l2, round_up, smem_bytes_per_flop, tolerance,
                                             values)


def layout_offset(row: int, chunk: int, cols: int, swizzle: bool = True) -> int:
    """Byte offset of 16-byte chunk `chunk` of row `row` in a shared tile of `cols` bf16 a row
    (mma.cuh's Layout<COLS, SWIZZLE>): plain row-major, or the chunk index XORed with
    (row / L) & X, L = rows per 128-byte line, X = min(chunks a row, 8) - 1."""
    chunks = cols // 8
    lines = 1 if chunks >= 8 else 8 // chunks
    x = min(chunks, 8) - 1
    c = chunk ^ ((row // lines) & x) if swizzle else chunk
    return row * cols * 2 + 16 * c


def fragment_a(lane: int):
    """(row, col) of the 8 bf16 of an m16n8k16 A fragment in lane `lane`, register by register
    (low half first): PTX ISA, 'Matrix fragments for mma.m16n8k16 with floating point type'."""
    g, t = lane // 4, lane % 4
    out = []
    for reg in range(4):
        row = g + 8 * (reg % 2)
        col = 2 * t + 8 * (reg // 2)
        out += [(row, col), (row, col + 1)]
    return out


def fragment_b(lane: int):
    """(k, n) of the 4 bf16 of an m16n8k16 B fragment in lane `lane` (b[0] low, high; b[1] ...)."""
    g, t = lane // 4, lane % 4
    return [(2 * t, g), (2 * t + 1, g), (2 * t + 8, g), (2 * t + 9, g)]


def fragment_c(lane: int):
    """(row, col) of the 4 fp32 accumulators c[0..3] of lane `lane`."""
    g, t = lane // 4, lane % 4
    return [(g, 2 * t), (g, 2 * t + 1), (g + 8, 2 * t), (g + 8, 2 * t + 1)]


def ldmatrix_x4(tile: np.ndarray, trans: bool = False):
    """What ldmatrix.x4 hands the 32 lanes when lane l points at row l % 16, chunk l // 16 of a
    16 x 16 tile (rows of 8-element chunks): regs[l][j] = the two elements (low, high) lane l gets
    from matrix j (matrix j = rows 8 (j % 2).., columns 8 (j // 2)..)."""
    regs = []
    for lane in range(32):
        r = []
        for j in range(4):
            m = tile[8 * (j % 2):8 * (j % 2) + 8, 8 * (j // 2):8 * (j // 2) + 8]
            if trans:
                m = m.T
            row, col = lane // 4, 2 * (lane % 4)
            r.append((m[row, col], m[row, col + 1]))
        regs.append(r)
    return regs


def mma_m16n8k16(a_regs, b_regs):
    """D = A @ B of one m16n8k16 tile, rebuilt from the 32 lanes' fragments (a_regs[l] = 4 pairs,
    b_regs[l] = 2 pairs) through the tables above; returns the [16, 8] product in float64."""
    a = np.zeros((16, 16))
    b = np.zeros((16, 8))
    for lane in range(32):
        for (r, c), v in zip(fragment_a(lane), [x for pair in a_regs[lane] for x in pair]):
            a[r, c] = v
        for (k, n), v in zip(fragment_b(lane), [x for pair in b_regs[lane] for x in pair]):
            b[k, n] = v
    return a @ b
