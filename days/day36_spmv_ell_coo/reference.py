"""Day 36 reference: y = A x for a sparse A in CSR, in float64 (the specification every format
is checked against)."""
import numpy as np


def spmv(indptr, indices, data, x, rows: int | None = None) -> np.ndarray:
    """y[r] = sum over j in [indptr[r], indptr[r+1]) of data[j] * x[indices[j]], in float64.
    An empty row gives 0. One np.bincount over the products: no Python loop over rows."""
    indptr = np.asarray(indptr, np.int64)
    rows = indptr.size - 1 if rows is None else rows
    lens = np.diff(indptr)
    row = np.repeat(np.arange(rows), lens)
    prod = np.asarray(data, np.float64) * np.asarray(x, np.float64)[np.asarray(indices, np.int64)]
    return np.bincount(row, weights=prod, minlength=rows).astype(np.float64)


def spmv_coo(row, col, val, x, rows: int) -> np.ndarray:
    """The same product from COO triplets (any order, duplicates add up): a second formulation
    for the tests."""
    out = np.zeros(rows, np.float64)
    np.add.at(out, np.asarray(row, np.int64),
              np.asarray(val, np.float64) * np.asarray(x, np.float64)[np.asarray(col, np.int64)])
    return out


def dense(indptr, indices, data, shape) -> np.ndarray:
    """The matrix as a dense float64 array (small matrices, for the tests)."""
    a = np.zeros(shape, np.float64)
    indptr = np.asarray(indptr, np.int64)
    row = np.repeat(np.arange(shape[0]), np.diff(indptr))
    np.add.at(a, (row, np.asarray(indices, np.int64)), np.asarray(data, np.float64))
    return a
