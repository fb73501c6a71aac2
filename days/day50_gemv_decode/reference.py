"""Day 50 reference: batch-1 GEMV, y[N] = W[N, K] x[K], W and x in bf16 (uint16 bit patterns,
common.bf16), the products summed exactly (float64), y returned in float64.

The kernels sum in fp32 and round y to bf16; the tolerance (tolerance(k)) is that rounding plus
an fp32 accumulation allowance, and error_bound() gives the same bound element by element.
"""
import numpy as np

from common import bf16

ROWS_PER_PIECE = 1024   # the float64 copy of W is made this many rows at a time (memory)


def gemv(w_bits, x_bits) -> np.ndarray:
    """Sum over k of W[n, k] * x[k] in float64, from the bf16 values (exact products: 8-bit
    significands multiply into 16 bits; the float64 sum of K of them loses at most K * 2^-53)."""
    w_bits = np.asarray(w_bits)
    xv = bf16.from_bits(x_bits).astype(np.float64)
    n = w_bits.shape[0]
    y = np.empty(n, np.float64)
    for i in range(0, n, ROWS_PER_PIECE):
        y[i:i + ROWS_PER_PIECE] = bf16.from_bits(w_bits[i:i + ROWS_PER_PIECE]).astype(np.float64) @ xv
    return y


def gemv_rounded(w_bits, x_bits) -> np.ndarray:
    """What an exact kernel returns: the float64 sums rounded to bf16 (nearest even), as float32.
    (Rounding the float64 sum through float32 first can differ only within 2^-24 relative of a
    bf16 halfway point; see common.bf16.to_bits.)"""
    return bf16.round(gemv(w_bits, x_bits))


def tolerance(k: int) -> float:
    """Relative-L2 tolerance of a bf16 y: rounding to bf16 moves each element by at most 2^-8 of
    itself (half a unit in the 8th significant bit), so by at most 2^-8 in relative L2; the fp32
    sums add at most a few units of 2^-24 per term in practice (max(16, k/2) * 2^-24, the
    allowance day 41 uses). A dropped 16-byte chunk of a row costs ~sqrt(8/K) of that row."""
    return 2.0 ** -8 + max(16.0, k / 2.0) * 2.0 ** -24


def error_bound(w_bits, x_bits) -> np.ndarray:
    """Per-element bound on |y_kernel - y| for any order of fp32 summation followed by one
    rounding to bf16: |fl32 sum - y| <= (K - 1) * 2^-24 * sum |w||x| (the classic bound,
    first order) and the bf16 rounding adds 2^-8 of the fp32 sum. A little slack (1.01) covers
    the second-order terms."""
    w = bf16.from_bits(np.asarray(w_bits)).astype(np.float64)
    x = bf16.from_bits(x_bits).astype(np.float64)
    k = w.shape[1] if w.ndim == 2 else 0
    acc = max(k - 1, 0) * 2.0 ** -24 * (np.abs(w) @ np.abs(x))
    y = w @ x
    return 1.01 * (2.0 ** -8 * (np.abs(y) + acc) + acc)


# --- the layout of a row in 16-byte chunks (what the kernels do for any K) ---------------------

def row_pieces(k: int, row: int) -> tuple[int, int, int]:
    """(head, chunks, tail) of row `row` of a row-major [N, K] bf16 matrix whose base is 16-byte
    aligned: `head` scalar elements up to the row's first 16-byte boundary (0..7, at most K),
    `chunks` aligned 16-byte chunks of 8 elements, `tail` scalar elements after them (0..7)."""
    e0 = row * k
    head = min((8 - e0 % 8) % 8, k)
    chunks = (k - head) // 8
    return head, chunks, k - head - 8 * chunks


def x_alignment(k: int) -> int:
    """The alignment in elements (8, 4, 2 or 1) of the x elements that pair with a body chunk of
    any row: the offset of a row's first chunk is its head, and every head is a multiple of
    gcd(K, 8) (row * K mod 8 takes only multiples of it)."""
    return 8 if k % 8 == 0 else 4 if k % 4 == 0 else 2 if k % 2 == 0 else 1


def bytes_moved(n: int, k: int) -> tuple[int, int]:
    """(bytes the op must move, of those read): W and x read once, y (bf16) written once."""
    read = 2 * n * k + 2 * k
    return read + 2 * n, read


def bytes_in_flight(threads_per_sm: int, chunks_per_thread: int) -> int:
    """Bytes of W a resident SM has requested and not yet received when every thread has its
    chunks in flight: threads x chunks x 16 bytes (Little's law wants ~latency x bandwidth per
    SM, e.g. 1 us x 4.8 TB/s / 132 SMs = 36 KB)."""
    return threads_per_sm * chunks_per_thread * 16


def blocks_per_sm(threads: int, registers: int, sm_threads: int = 2048,
                  sm_registers: int = 65536) -> int:
    """Resident blocks of `threads` threads using `registers` each (registers allocated in units
    of 8 per thread, as Hopper does), limited by threads and registers (shared memory is not
    a limit for these kernels)."""
    regs = -(-registers // 8) * 8
    return max(0, min(sm_threads // threads, sm_registers // (threads * regs)))
