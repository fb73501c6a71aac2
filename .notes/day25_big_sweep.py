#!/usr/bin/env python3
"""Lead's sweep: .notes/day25_big.cu candidates (day 8's structure, bigger tiles / BK / block
order) against cuBLAS sgemm and day 25's v1 in the same run. Sizes MxKxN."""
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from common import harness as H  # noqa: E402
from common.baselines import sgemm  # noqa: E402
from common.build import load_module  # noqa: E402
from common.gpu import context  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day25_cublas_integration import driver as D  # noqa: E402

CANDS = {"big_128x128_k8_g1": (128, 128), "big_128x128_k8_g8": (128, 128),
         "big_128x128_k16_g1": (128, 128), "big_128x128_k16_g8": (128, 128),
         "big_128x256_k8_g1": (128, 256), "big_128x256_k8_g8": (128, 256),
         "big_256x128_k8_g8": (256, 128)
}
SIZES = [(4096, 4096, 4096), (8192, 768, 3072), (8192, 3072, 768), (2048, 2048, 2048),
         (8192, 1024, 8192), (1024, 1024, 1024)]


def main():
    context()
    import pycuda.gpuarray as ga
    mod = load_module(ROOT / ".notes" / "day25_big.cu")
    for size in SIZES:
        m, k, n = size
        rng = np.random.default_rng(1)
        a = ga.to_gpu(rng.standard_normal((m, k), dtype=np.float32))
        b = ga.to_gpu(rng.standard_normal((k, n), dtype=np.float32))
        c = ga.empty((m, n), np.float32)
        ref = ga.empty((m, n), np.float32)
        sgemm(a.gpudata, b.gpudata, ref.gpudata, m, n, k)
        r = ref.get()
        t_cub = time_fn(lambda: sgemm(a.gpudata, b.gpudata, ref.gpudata, m, n, k)).median_ms
        fl = 2 * m * n * k / 1e9
        print(f"{H.size_str(size)}: cuBLAS {t_cub:.3f} ms {fl / t_cub:.1f} TF", flush=True)
        d = H.DeviceCase(H.Case(size, inputs={"a": a.get(), "b": b.get()},
                                outputs={"c": ((m, n), np.float32)}))
        t1 = time_fn(lambda: D.launch("v1", d)).median_ms
        print(f"   day25 v1           {t1:.3f} ms {fl / t1:.1f} TF {t_cub / t1:.3f}x", flush=True)
        for name, (bm, bn) in CANDS.items():
            fn = mod.get_function(name)
            grid = (H.cdiv(m, bm) * H.cdiv(n, bn), 1, 1)
            c.fill(np.nan)
            run = lambda: fn(a.gpudata, b.gpudata, c.gpudata, np.int32(m), np.int32(n), np.int32(k),
                             block=(256, 1, 1), grid=grid)
            run()
            err = np.linalg.norm(c.get() - r) / np.linalg.norm(r)
            t = time_fn(run).median_ms
            print(f"   {name:18s} {t:.3f} ms {fl / t:.1f} TF {t_cub / t:.3f}x err {err:.1e}"
                  f"{'' if err < 1e-5 else '  WRONG'}", flush=True)


main()
