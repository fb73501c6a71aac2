"""Day 59 sweep (run on the GPU): dropout candidates of kernel.cu at n = 2^27, offset 0, p = 0.1
(one pass: 8 bytes per element), each checked against numpy on a 1 Mi-element slice first, then
timed (common.timing.time_fn, L2 flushed); plus copy_ceiling with the same layout. ~20 s."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from common.timing import time_fn  # noqa: E402
from days.day59_dropout import driver as D  # noqa: E402
from days.day59_dropout import reference as R  # noqa: E402

N = 1 << 27
CANDS = ["v1", "v2", "v3", "v3_u1_cs0", "v3_u2_cs0", "v3_u4_cs0", "v3_u2_cs1", "v3_u4_cs1",
         "v3_u8_cs1"]


def main():
    from common.gpu import context

    context()  # pycuda's gpuarray needs the retained primary context first
    from pycuda import gpuarray

    x = gpuarray.to_gpu(np.random.default_rng(0).standard_normal(N, dtype=np.float32))
    y = gpuarray.empty(N, np.float32)
    xs = x[: 1 << 20].get()
    want = R.dropout(xs, 0.1, 5, 0).astype(np.float32)
    rows = []
    for v in CANDS:
        D.launch_pass(v, x.gpudata, y.gpudata, 1 << 20, 5, 0, 0.1)
        ok = np.array_equal(y[: 1 << 20].get(), want)
        t = time_fn(lambda: D.launch_pass(v, x.gpudata, y.gpudata, N, 5, 0, 0.1))
        rows.append((v, t.median_ms * 1e3, 8 * N / (t.median_ms * 1e-3) / 1e9, ok))
    cp = D.K("copy_ceiling", "PPi")
    n4 = N // 4
    t = time_fn(lambda: cp.prepared_call(((n4 + 1023) // 1024, 1, 1), (256, 1, 1), x.gpudata,
                                         y.gpudata, n4))
    rows.append(("copy (float4, 4/thread, cs)", t.median_ms * 1e3, 8 * N / (t.median_ms * 1e-3) / 1e9, None))
    print(f"{'candidate':28} {'us':>8} {'GB/s':>7}  correct")
    for v, us, gb, ok in rows:
        print(f"{v:28} {us:8.1f} {gb:7.0f}  {ok}")


if __name__ == "__main__":
    main()
