"""torch.softmax and a same-bytes copy at the shapes day 5 is benchmarked on (GPU machine)."""
import os
import sys

sys.path.insert(0, os.getcwd())
import torch  # noqa: E402

from common.gpu import context, driver  # noqa: E402
from common.timing import time_fn  # noqa: E402

context()
cuda = driver()
for rows, cols in [(8192, 8192), (65536, 1024), (1024, 65536), (8192, 50257), (8192, 32001),
                   (32768, 4097), (8192, 1023), (4096, 100003), (16384, 3)]:
    x = torch.randn(rows, cols, device="cuda") * 3
    y = torch.empty_like(x)
    t = time_fn(lambda: torch.softmax(x, -1, out=y) if False else torch.softmax(x, -1))
    c = time_fn(lambda: cuda.memcpy_dtod(y.data_ptr(), x.data_ptr(), x.numel() * 4))
    gb = 8 * x.numel() / 1e9
    print(f"{rows}x{cols}: torch.softmax {t.median_ms * 1e3:8.1f} us {gb / t.median_ms * 1e3:6.0f} GB/s"
          f" | same-bytes copy {c.median_ms * 1e3:8.1f} us {gb / c.median_ms * 1e3:6.0f} GB/s")
    del x, y
