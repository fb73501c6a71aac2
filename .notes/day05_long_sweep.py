"""Day 5 v6 on long rows: a block of 512 (two an SM, half the shared memory each) against a block
of 1024 (one an SM, all of it). GPU machine, repo root:  python .notes/day05_long_sweep.py"""
import os
import sys

import numpy as np

sys.path.insert(0, os.getcwd())
from common import harness as H  # noqa: E402
from common.timing import copy_bandwidth_gbps, time_fn  # noqa: E402
from days.day05_shared_softmax import driver as D  # noqa: E402

copy = copy_bandwidth_gbps()
for size in [(8192, 50257), (1024, 65536), (8192, 32001), (4096, 100003), (2048, 20000)]:
    case = D.make_case(size, np.random.default_rng(5))
    d = H.DeviceCase(case)
    line = []
    for threads in (512, 1024):
        D.LONG_THREADS = threads
        r = H.check(D.launch, "v6", case, d)
        assert r.ok, (size, threads, r.message)
        t = time_fn(lambda: D.launch("v6", d))
        line.append(f"long{threads}: {t.median_ms * 1e3:7.1f} us {100 * case.bytes / t.median_ms / 1e6 / copy:5.1f}%")
    print(f"{H.size_str(size):>12}: " + " | ".join(line), flush=True)
D.LONG_THREADS = 512
