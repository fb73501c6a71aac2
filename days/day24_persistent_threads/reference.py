"""Day 24 reference (numpy, float64): the softmax of every segment of a flat array.

A task list is given by `lengths` (one length per task, >= 0); task t covers
x[off[t] : off[t + 1]] with off = [0, cumsum(lengths)]. Tasks are independent.
"""
import numpy as np


def offsets(lengths):
    """[0, l0, l0 + l1, ...]: task t is x[off[t]:off[t + 1]]."""
    return np.concatenate([[0], np.cumsum(np.asarray(lengths, dtype=np.int64))])


def segment_softmax(x, lengths):
    """y[seg] = softmax(x[seg]) for every segment (empty segments contribute nothing)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    lengths = np.asarray(lengths, dtype=np.int64)
    y = np.empty_like(x)
    if x.size == 0:
        return y
    off = offsets(lengths)
    nonempty = lengths > 0
    starts, lens = off[:-1][nonempty], lengths[nonempty]
    m = np.maximum.reduceat(x, starts)          # reduceat over a nonempty segment's range
    e = np.exp(x - np.repeat(m, lens))
    s = np.add.reduceat(e, starts)
    e /= np.repeat(s, lens)
    return e


def task_lengths(tasks, scale, kind, rng):
    """The bench workloads. kind 1 (uniform): lengths uniform in [1, 2 scale - 1] (mean
    `scale`). kind 2 (skewed): a power law, ceil(scale / 6 x Pareto(alpha = 1.2)) capped at 16
    scale: most tasks short, a few up to 16x the scale (mean about 0.7 scale)."""
    if kind == 1:
        return rng.integers(1, max(2 * scale, 2), tasks).astype(np.int64)
    if kind == 2:
        raw = np.ceil(scale / 6 * (rng.pareto(1.2, tasks) + 1.0))
        return np.clip(raw, 1, 16 * scale).astype(np.int64)
    raise ValueError(f"kind must be 1 (uniform) or 2 (skewed), got {kind}")


def largest_first(lengths):
    """Task indices ordered by length, longest first (ties in index order)."""
    return np.argsort(-np.asarray(lengths, dtype=np.int64), kind="stable")
