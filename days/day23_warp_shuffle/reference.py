"""Day 23 reference (numpy, float64): the ops of the warp-level kernels.

softmax(x)              row softmax (the versions)
array_sum(x)            the sum of a flat array (block reduction)
segmented_scan(x, seg)  inclusive prefix sum restarting every `seg` elements (warp / block scan)
compact(x, t)           the elements > t, sorted (the kernels write them in no particular order)
histogram(keys, bins)   how many keys equal each of 0 .. bins-1
"""
import numpy as np


def softmax(x):
    x = np.asarray(x, dtype=np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def array_sum(x):
    return np.array([np.asarray(x, dtype=np.float64).sum()])


def segmented_scan(x, seg):
    x = np.asarray(x, dtype=np.float64).ravel()
    n = x.size
    pad = -n % seg
    xp = np.concatenate([x, np.zeros(pad)]).reshape(-1, seg)
    return np.cumsum(xp, axis=1).ravel()[:n]


def compact(x, t):
    x = np.asarray(x).ravel()
    return np.sort(x[x > t])


def histogram(keys, bins):
    return np.bincount(np.asarray(keys, dtype=np.int64).ravel(), minlength=bins)[:bins]
