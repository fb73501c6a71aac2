"""Day 58 sweep (run on the GPU): the v3 candidates of kernel.cu (chunks per thread U = 1, 2, 4;
streaming stores or not) for normal and uniform, checked against libcurand once, then timed at
2^25 outputs (median of common.timing.time_fn, L2 flushed). Prints one table; ~20 s."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from common import rng  # noqa: E402
from common.timing import time_fn  # noqa: E402

N = 1 << 25
CANDS = ["v2", "v3", "v3_u1_cs0", "v3_u2_cs0", "v3_u4_cs0", "v3_u2_cs1", "v3_u4_cs1"]


def main():
    from common.gpu import context

    context()  # pycuda's gpuarray needs the retained primary context first
    from pycuda import gpuarray

    ok, why = rng.curand_status()
    out = gpuarray.empty(N, np.float32)
    rows = []
    for dist in ("normal", "uniform"):
        if ok:
            with rng.CurandGenerator(3, 8) as g:
                want = getattr(g, dist)(1 << 20).get()
        for v in CANDS:
            got = getattr(rng, dist)(1 << 20, 3, 8, version=v).get()
            same = (got.view(np.uint32) == want.view(np.uint32)).all() if ok else None
            t = time_fn(lambda: rng.launch(dist, v, out.gpudata, N, 3, 0))
            rows.append((dist, v, t.median_ms * 1e3, 4 * N / (t.median_ms * 1e-3) / 1e9, same))
    fill = rng._K("fill_ceiling", "Pii")
    t = time_fn(lambda: fill.prepared_call(((N // 4 + 511) // 512, 1, 1), (256, 1, 1),
                                           out.gpudata, N // 4, 0))
    rows.append(("write-only", "fill", t.median_ms * 1e3, 4 * N / (t.median_ms * 1e-3) / 1e9, None))
    print(f"{'dist':10} {'cand':10} {'us':>8} {'GB/s':>7}  = libcurand")
    for d, v, us, gb, same in rows:
        print(f"{d:10} {v:10} {us:8.1f} {gb:7.0f}  {same}")


if __name__ == "__main__":
    main()
