"""Day 37 reference: y = A x in float64. The specification is day 36's (the format changes
nothing in the result); `hybrid` computes it the way the hybrid format splits it, as a second
formulation for the tests."""
import numpy as np

from days.day36_spmv_ell_coo.reference import spmv, spmv_coo  # noqa: F401  (the specification)


def hybrid(indptr, indices, data, x, k: int) -> np.ndarray:
    """The first k entries of each row (the ELL part) plus the rest (the COO overflow), each
    summed on its own in float64, then added: what v3-v5 compute, up to the order of additions."""
    indptr = np.asarray(indptr, np.int64)
    rows = indptr.size - 1
    row = np.repeat(np.arange(rows), np.diff(indptr))
    slot = np.arange(indptr[-1]) - indptr[:-1][row]
    prod = np.asarray(data, np.float64) * np.asarray(x, np.float64)[np.asarray(indices, np.int64)]
    ell = np.bincount(row[slot < k], weights=prod[slot < k], minlength=rows)
    coo = np.bincount(row[slot >= k], weights=prod[slot >= k], minlength=rows)
    return ell + coo
