"""Day 5 v6 on long rows: which way of giving a long row to a block keeps the memory busy?
GPU machine, repo root:  python .notes/day05_long_sweep.py
  long1024      one block of 1024 a row, one an SM, registers + all of the shared memory
  long512       one block of 512 a row, two an SM, half the shared memory each
  persist d=N   a grid of two blocks an SM walking the rows; the odd blocks start N ns later
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
from common import harness as H  # noqa: E402
from common.gpu import device_info  # noqa: E402
from common.timing import copy_bandwidth_gbps, time_fn  # noqa: E402
from days.day05_shared_softmax import driver as D  # noqa: E402

copy = copy_bandwidth_gbps()
sms = device_info()["sms"]


def persist(delay):
    def run(d):
        rows, cols = d.size
        sv = D.v6_smem_vecs(cols, 512)
        D.K("softmax_v6_long_persist", "PPiiii", dynamic_smem=16 * sv).prepared_call(
            (min(rows, 2 * sms), 1, 1), (512, 1, 1), d.x, d.y, rows, cols, sv, delay,
            shared_size=16 * sv)
    return run


def current(threads):
    def run(d):
        D.LONG_THREADS = threads
        D.launch("v6", d)
        D.LONG_THREADS = 512
    return run


variants = [("long1024", current(1024)), ("long512", current(512))] + \
           [(f"persist d={ns}", persist(ns)) for ns in (0, 1000, 2000, 4000, 8000)]
for size in [(8192, 50257), (1024, 65536), (8192, 32001), (2048, 20000)]:
    case = D.make_case(size, np.random.default_rng(5))
    d = H.DeviceCase(case)
    line = []
    for name, fn in variants:
        r = H.check(lambda v, dd: fn(dd), "v6", case, d)
        assert r.ok, (size, name, r.message)
        t = time_fn(lambda: fn(d))
        line.append(f"{name}: {t.median_ms * 1e3:6.1f} us {100 * case.bytes / t.median_ms / 1e6 / copy:5.1f}%")
    print(f"{H.size_str(size):>12}: " + " | ".join(line), flush=True)
