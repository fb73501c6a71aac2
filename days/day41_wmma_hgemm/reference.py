"""Day 41 reference: C = A @ B for bf16 A [M, K] and B [K, N] (uint16 bit patterns) in float64,
and the arithmetic the tutorial and the tests use: the tolerance that fp32 accumulation over K
warrants, a pessimistic model of how a tensor core accumulates, shared-memory bytes per FLOP of a
warp tile, and which bank groups 8 rows of a shared tile hit.

Days 42 and 43 solve the same problem and import this module.
"""
import numpy as np

from common import bf16

U = 2.0 ** -24   # float32 unit roundoff


def values(bits) -> np.ndarray:
    """bf16 bit patterns -> float64 values (exact)."""
    return bf16.from_bits(bits).astype(np.float64)


def matmul(a_bits, b_bits) -> np.ndarray:
    """The specification: the exact product of the bf16 inputs, in float64. (Each product of
    two bf16 values is exact in float32 already: 8 + 8 significant bits <= 24.)"""
    return values(a_bits) @ values(b_bits)


def flops(m: int, k: int, n: int) -> int:
    return 2 * m * n * k


def tolerance(k: int) -> float:
    """Relative-L2 tolerance for fp32 accumulation over K of exact bf16 products:
    2^-24 * max(16, K / 2). accumulate_truncating (below) models a tensor core that rounds toward
    zero after every k16 step, the worst behaviour documented for NVIDIA tensor cores; its error
    grows like K * 2^-24 / 32 (1.1e-5 at K = 8192) and this tolerance sits ~20-40x above it at
    every K, while a dropped or repeated k16 slice errs by about sqrt(16 / K) (0.044 at K = 8192),
    ~180x above it. So a correct kernel passes with room and a wrong tile order fails."""
    return U * max(16.0, k / 2.0)


def accumulate_truncating(a_bits, b_bits, step: int = 16) -> np.ndarray:
    """C in float32 as a pessimistic tensor core computes it: each k-slice of `step` products
    summed exactly, then added to the float32 accumulator and rounded TOWARD ZERO (truncation
    is biased, so the error grows ~linearly in K instead of ~sqrt(K))."""
    a, b = values(a_bits), values(b_bits)
    m, k = a.shape
    acc = np.zeros((m, b.shape[1]), np.float32)
    for k0 in range(0, k, step):
        s = acc.astype(np.float64) + a[:, k0:k0 + step] @ b[k0:k0 + step]
        f = s.astype(np.float32)                       # round to nearest ...
        over = np.abs(f.astype(np.float64)) > np.abs(s)
        f[over] = np.nextafter(f[over], np.float32(0))  # ... then one step toward zero if it grew
        acc = f
    return acc


def rel_l2(x, ref) -> float:
    ref = np.asarray(ref, np.float64)
    n = np.linalg.norm(ref)
    return float(np.linalg.norm(np.asarray(x, np.float64) - ref) / (n if n else 1.0))


def round_up(v: int, multiple: int) -> int:
    return -(-v // multiple) * multiple


def padded(a_bits, rows: int, cols: int) -> np.ndarray:
    """What the driver's pad kernel makes: a [rows, cols] copy, zeros past the input."""
    out = np.zeros((rows, cols), np.uint16)
    out[:a_bits.shape[0], :a_bits.shape[1]] = a_bits
    return out


def smem_bytes_per_flop(wm: int, wn: int) -> float:
    """Shared-memory bytes a warp reads per FLOP when its WM x WN tile advances by one k16 slice:
    (WM + WN) rows/columns of 16 bf16 for 2 * WM * WN * 16 FLOP = (WM + WN) / (WM * WN)."""
    return (wm + wn) * 16 * 2 / (2 * wm * wn * 16)


def bank_groups(row_bytes: int, rows: int = 8, chunk: int = 0, offset=None) -> int:
    """How many distinct 16-byte bank groups (byte address / 16 mod 8: 8 groups of 4 banks) the
    16-byte chunk `chunk` of `rows` consecutive rows falls in, rows `row_bytes` apart (or at
    offset(row, chunk) bytes if given). 8 = an 8-row matrix is read in one pass, conflict-free;
    8 / g passes otherwise."""
    off = (lambda r, c: r * row_bytes + 16 * c) if offset is None else offset
    return len({(off(r, chunk) // 16) % 8 for r in range(rows)})


def flop_per_byte(bm: int, bn: int) -> float:
    """FLOPs per byte a block tile of BM x BN outputs reads from L2 (bf16 A and B): per k the
    block reads BM + BN values (2 bytes each) for 2 * BM * BN FLOP -> BM * BN / (BM + BN)."""
    return bm * bn / (bm + bn)


def lane_banks(row_bytes: int):
    """The 4-byte banks the 32 lanes of one WMMA fragment load hit on sm_90: lane 4g + t reads the
    4 bytes at row g, byte 4t of an 8-row block (the LD pattern in the SASS). Returns the largest
    number of distinct addresses that share one bank: 1 = conflict-free."""
    banks = {}
    for lane in range(32):
        g, t = lane // 4, lane % 4
        addr = g * row_bytes + 4 * t
        banks.setdefault((addr // 4) % 32, set()).add(addr)
    return max(len(v) for v in banks.values())
