"""Sparse matrices for days 36 and 37, in numpy only (no scipy): the test patterns, the real
matrix shipped in data/, and the conversions from CSR to COO, ELL, CSR row blocks and the
hybrid ELL + COO format. Everything here runs on the host, once per matrix, before any timing.

A size is (pattern, rows, k): three positive integers, because the harness reads sizes as
numbers (`python run_day.py 36 --size 3x2000000x100000`). k is the longest row in every pattern:

    1  banded     rows x rows, the k diagonals around the main one (k = 27: offsets -13 .. 13)
    2  uniform    rows x rows, row lengths uniform in [ceil(k/2), k], columns uniform at random
    3  powerlaw   rows x rows, P(length >= j) = 1/j (a Zipf tail, floor(1/U)), cut at k: half
                  the rows have one entry, 83% at most five, one in j reaches j
    4  cage11     the real matrix of data/day36_cage11.npz (39082 x 39082, rows 3..31): only
                  4x39082x31
    5  edge       rows x (2 rows + 3): a third of the rows empty, the others 0..k entries, and
                  row 0 full (every column)
    6  empty      rows x rows without a single nonzero (k is ignored)

In patterns 1-3 and 5 one row (a seeded random one, row 0 in pattern 5) has exactly the longest
length, so the widest row, the ELL width and the CSR kernels' worst case are fixed by the size.
The row lengths are drawn first from the generator, so `lengths(size, rng)` alone gives the
same lengths as `make(size, rng)` with an equally seeded rng (for tables without the matrix).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np

from common.harness import ROOT

PATTERNS = {1: "banded", 2: "uniform", 3: "powerlaw", 4: "cage11", 5: "edge", 6: "empty"}
REAL_FILE = ROOT / "data" / "day36_cage11.npz"
REAL_SHA256 = "60905e241e6420d8112ba993d8f6cc7b8657451644b168089dcbb74c91203de0"
REAL_ROWS, REAL_LONGEST, REAL_NNZ = 39082, 31, 559722
MAX_ROWS = 2 ** 26          # CSR vector with 32 lanes a row numbers rows * 32 threads in int32
INT32 = 2 ** 31


@dataclass
class CSR:
    rows: int
    cols: int
    indptr: np.ndarray    # int64 while building; int32 on the device
    indices: np.ndarray   # int32, sorted inside each row
    data: np.ndarray      # float32

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    def lengths(self) -> np.ndarray:
        return np.diff(self.indptr)

    def row_ids(self) -> np.ndarray:
        """COO's row index of every nonzero (int32)."""
        return np.repeat(np.arange(self.rows, dtype=np.int32), self.lengths())


def describe(size) -> str:
    p, rows, k = size
    return f"{PATTERNS.get(p, '?')}, {rows} rows" + ("" if p in (4, 6) else f", longest row {k}")


def shape_of(size) -> tuple[int, int]:
    p, rows, _ = size
    return (rows, 2 * rows + 3) if p == 5 else (rows, rows)


def longest(size) -> int:
    """The longest row of the pattern (the ELL width)."""
    p, rows, k = size
    cols = shape_of(size)[1]
    return {1: min(k, rows), 2: min(k, cols), 3: min(k, cols), 4: REAL_LONGEST, 5: cols, 6: 0}[p]


def validate(size):
    """ValueError, in words, for a size no pattern can take."""
    p, rows, k = size
    if p not in PATTERNS:
        raise ValueError(f"pattern {p} does not exist: the first number is one of "
                         + ", ".join(f"{i} ({n})" for i, n in PATTERNS.items()))
    if p == 4 and (rows, k) != (REAL_ROWS, REAL_LONGEST):
        raise ValueError(f"pattern 4 is the shipped matrix cage11: write it as "
                         f"4x{REAL_ROWS}x{REAL_LONGEST} (its rows and its longest row)")
    if rows > MAX_ROWS:
        raise ValueError(f"{rows} rows: at most {MAX_ROWS} (CSR vector numbers rows x 32 threads "
                         "with 32-bit integers)")
    cols = shape_of(size)[1]
    bound = {1: rows * min(k, rows), 2: rows * min(k, cols), 3: rows * (np.log(min(k, cols)) + 2) + k,
             5: rows * min(k, cols) + cols, 4: REAL_NNZ, 6: 0}[p]
    if bound >= INT32:
        raise ValueError(f"about {int(bound):,} nonzeros: the kernels index nonzeros with 32-bit "
                         f"integers (at most {INT32 - 1:,})")


# --- row lengths and columns --------------------------------------------------------------------

def lengths(size, rng) -> np.ndarray:
    """The row lengths of pattern `size` (int64): the first draws `make` takes from rng."""
    p, rows, k = size
    cols = shape_of(size)[1]
    if p == 1:
        h = (min(k, rows) - 1) // 2
        lo = np.maximum(np.arange(rows) - h, 0)
        hi = np.minimum(np.arange(rows) - h + min(k, rows), rows)
        return (hi - lo).astype(np.int64)
    if p == 2:
        k = min(k, cols)
        n = rng.integers((k + 1) // 2, k + 1, rows)
        n[rng.integers(rows)] = k
        return n.astype(np.int64)
    if p == 3:
        k = min(k, cols)
        u = 1.0 - rng.random(rows)                  # (0, 1]
        n = np.floor(np.minimum(1.0 / u, k)).astype(np.int64)
        n[rng.integers(rows)] = k
        return n
    if p == 4:
        return np.diff(load_real().indptr)
    if p == 5:
        n = rng.integers(0, min(k, cols) + 1, rows)
        n[rng.random(rows) < 1 / 3] = 0
        n[0] = cols
        return n.astype(np.int64)
    return np.zeros(rows, np.int64)


def sorted_columns(lens: np.ndarray, cols: int, rng) -> np.ndarray:
    """Distinct columns in increasing order inside each row, uniform at random, all rows at once.
    A row of n entries takes n + 1 exponential gaps; their normalized running sums u_1 < ... < u_n
    are the order statistics of n uniforms on (0, 1), and floor(u_j (cols - n)) + j (j = 0..n-1)
    is then strictly increasing and below cols: a sorted random n-subset (within rounding)."""
    nnz = int(lens.sum())
    if nnz == 0:
        return np.zeros(0, np.int32)
    rows = lens.size
    row = np.repeat(np.arange(rows), lens)
    start = np.concatenate([[0], np.cumsum(lens)[:-1]])         # indptr[:-1]
    gstart = start + np.arange(rows)                              # each row has n + 1 gaps
    c = np.concatenate([[0.0], np.cumsum(rng.exponential(size=nnz + rows))])
    base = c[gstart]
    total = c[gstart + lens + 1] - base
    j = np.arange(nnz) - start[row]
    u = (c[np.arange(nnz) + row + 1] - base[row]) / total[row]
    col = np.floor(u * (cols - lens[row])).astype(np.int64) + j
    return np.minimum(col, cols - 1).astype(np.int32)            # u < 1; the min guards rounding


def make(size, rng) -> tuple[CSR, np.ndarray]:
    """(A, x) for a size: A in CSR with float32 values ~ N(0, 1), x ~ N(0, 1) float32."""
    validate(size)
    p, rows, k = size
    rows, cols = shape_of(size)
    if p == 4:
        a = load_real()
        x = rng.standard_normal(cols, dtype=np.float32)
        return a, x
    lens = lengths(size, rng)
    indptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    if p == 1:
        w = min(k, rows)
        h = (w - 1) // 2
        r = np.arange(rows, dtype=np.int64)[:, None]
        c = r - h + np.arange(w)[None, :]
        col = c[(c >= 0) & (c < rows)].astype(np.int32)           # row-major: sorted by row, column
    else:
        col = sorted_columns(lens, cols, rng)
    val = rng.standard_normal(col.size, dtype=np.float32)
    x = rng.standard_normal(cols, dtype=np.float32)
    return CSR(rows, cols, indptr, col, val), x


# --- the real matrix ----------------------------------------------------------------------------

_REAL = None


def load_real() -> CSR:
    """vanHeukelum/cage11 from data/day36_cage11.npz (provenance: data/day36_README.md)."""
    global _REAL
    if _REAL is None:
        with np.load(REAL_FILE) as z:
            indptr = z["indptr"].astype(np.int64)
            _REAL = CSR(int(z["shape"][0]), int(z["shape"][1]), indptr,
                        z["indices"].astype(np.int32), z["data"].astype(np.float32))
    return _REAL


def real_sha256() -> str:
    return hashlib.sha256(REAL_FILE.read_bytes()).hexdigest()


# --- conversions ----------------------------------------------------------------------------------

def pitch_of(rows: int) -> int:
    return max(4, -(-rows // 4) * 4)


def ell_fits(rows: int, width: int) -> bool:
    """ELL indexes slot k of row r as k * pitch + r in 32-bit integers."""
    return max(1, width) * pitch_of(rows) < INT32


def ell(a: CSR, width: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """ELL of the first `width` entries of every row (all of them by default: width = the
    longest row): (ecol [width, pitch] int32 with -1 padding, eval [width, pitch] float32 with
    0 padding, taken [nnz] bool: which nonzeros went into the ELL part). width >= 1 always (an
    all-padding slot for an empty matrix), pitch = rows rounded up to 4."""
    lens = a.lengths()
    w = int(lens.max(initial=0)) if width is None else int(width)
    w = max(1, w)
    pitch = pitch_of(a.rows)
    if not ell_fits(a.rows, w):
        raise ValueError(f"ELL of {a.rows} rows x width {w} has {w * pitch:,} slots: more than "
                         "32-bit indexing reaches")
    row = a.row_ids()
    slot = np.arange(a.nnz, dtype=np.int64) - a.indptr[:-1][row]
    taken = slot < w
    ecol = np.full((w, pitch), -1, np.int32)
    evals = np.zeros((w, pitch), np.float32)
    ecol[slot[taken], row[taken]] = a.indices[taken]
    evals[slot[taken], row[taken]] = a.data[taken]
    return ecol, evals, taken


ROWBLOCK_THREADS, ROWBLOCK_ITEMS = 256, 8     # day 36 v6: at most 2048 nonzeros and 256 rows a block


def row_blocks(indptr: np.ndarray, nz_per_block: int = ROWBLOCK_THREADS * ROWBLOCK_ITEMS,
               max_rows: int = ROWBLOCK_THREADS) -> np.ndarray:
    """CSR row blocks for day 36 v6, int32 [blocks, 4]. Greedy: from row s, take rows while the
    block holds at most nz_per_block nonzeros and max_rows rows -> {s, e, indptr[s], indptr[e]}.
    A row longer than nz_per_block gets ceil(len / nz_per_block) blocks of its own,
    {row, -chunks, chunk start, chunk end}; these come first in the list (so the longest work
    starts first), each row's chunks consecutive. One step per block (searchsorted), not per row."""
    indptr = np.asarray(indptr, np.int64)
    rows = indptr.size - 1
    lens = np.diff(indptr)
    normal, chunks = [], []
    s = 0
    while s < rows:
        if lens[s] > nz_per_block:
            n = -(-int(lens[s]) // nz_per_block)
            a = int(indptr[s])
            for c in range(n):
                chunks.append((s, -n, a + c * nz_per_block, min(a + (c + 1) * nz_per_block,
                                                                 int(indptr[s + 1]))))
            s += 1
            continue
        e = int(np.searchsorted(indptr, indptr[s] + nz_per_block, side="right")) - 1
        # e > s (row s fits); a long row never lands inside [s, e): it alone passes the bound
        e = min(max(e, s + 1), s + max_rows, rows)
        normal.append((s, e, int(indptr[s]), int(indptr[e])))
        s = e
    out = np.array(chunks + normal, dtype=np.int64).reshape(-1, 4)
    return out.astype(np.int32)


def choose_k(lens: np.ndarray, coo_cost: float = 3.0) -> int:
    """Day 37's ELL width for the hybrid format, from the row-length histogram.

    Cost model: an ELL slot costs 1 (8 bytes: a column and a value, read whether or not it holds
    a nonzero), a COO entry coo_cost (12 bytes and an atomic add: about 3 slots). Widening the ELL
    part from K to K + 1 adds one slot to every row and moves one entry out of COO for each row
    longer than K, so it pays while  #(rows longer than K) * coo_cost > rows. The width is the
    first K where it stops paying: the smallest K with #(len > K) <= rows / coo_cost. With
    coo_cost = 3 that is Bell and Garland's rule (the widest K that at least a third of the rows
    fill). At least 1, at most the longest row."""
    lens = np.asarray(lens)
    if lens.size == 0 or lens.max(initial=0) == 0:
        return 1
    hist = np.bincount(lens)
    longer = lens.size - np.cumsum(hist)            # longer[K] = #(len > K)
    ok = np.flatnonzero(longer * coo_cost <= lens.size)
    return int(max(1, ok[0]))


def hybrid(a: CSR, k: int) -> dict:
    """The hybrid format: ELL of the first k entries of each row, and the rest (the overflow) in
    COO, sorted by row, padded to a multiple of 4 entries with row -1 (a padding entry adds
    nothing). Also a bit mask of the rows that have overflow (bit r % 32 of word r // 32)."""
    ecol, evals, taken = ell(a, k)
    over = ~taken
    row = a.row_ids()[over]
    n = int(row.size)
    n4 = max(4, -(-n // 4) * 4)
    orow = np.full(n4, -1, np.int32)
    ocol = np.zeros(n4, np.int32)
    oval = np.zeros(n4, np.float32)
    orow[:n], ocol[:n], oval[:n] = row, a.indices[over], a.data[over]
    pitch = ecol.shape[1]
    words = np.zeros(-(-pitch // 32), np.uint32)
    over_rows = np.unique(row).astype(np.int64)
    np.bitwise_or.at(words, over_rows >> 5, (np.uint32(1) << (over_rows & 31).astype(np.uint32)))
    return {"ecol": ecol, "eval": evals, "orow": orow, "ocol": ocol, "oval": oval,
            "overflow": n, "mask": words, "k": k}


def storage_bytes(lens: np.ndarray, width: int | None = None) -> dict:
    """Bytes each format stores for a matrix with these row lengths (int32 indices, fp32
    values): CSR 8 nnz + 4 (rows + 1); COO 12 nnz; ELL 8 width pitch (None when it cannot be
    indexed in 32 bits); CSR row blocks = CSR + 16 a block descriptor."""
    lens = np.asarray(lens, np.int64)
    rows, nnz = lens.size, int(lens.sum())
    w = max(1, int(lens.max(initial=0)) if width is None else width)
    indptr = np.concatenate([[0], np.cumsum(lens)])
    out = {"nnz": nnz, "CSR": 8 * nnz + 4 * (rows + 1), "COO": 12 * nnz,
           "ELL": 8 * w * pitch_of(rows) if ell_fits(rows, w) else None}
    out["CSR row blocks"] = out["CSR"] + 16 * len(row_blocks(indptr))
    return out
