"""Day 5 driver: block-per-row softmax, six versions, checked against float64 and timed.

    from days.day05_shared_softmax.driver import softmax
    y = softmax(x)                        # numpy in, numpy out (float32); version="v6" by default
"""
import numpy as np

from common import args as A
from common import harness as H
from common.baselines import as_torch, torch_or_none

from . import reference

K = H.Kernels(__file__)
THREADS = 256  # one block per row (v1-v4, v6 up to 16387 columns); v1's tree needs a power of two
LONG_THREADS = 1024  # v6 for longer rows: one block of 1024 per row (one an SM), registers
                     # + shared memory (.notes/day05_long_rows.md: the designs tried)

VERSIONS = {
    "v1": "shared-memory tree reductions, 3 passes",
    "v2": "warp-shuffle reductions, 3 passes",
    "v3": "online max+sum, 2 passes",
    "v4": "row in registers, 1 read 1 write (float4 if cols%4==0)",
    "v5": "v4 with a warp per row for rows <= 1024",
    "v6": "any width: float4 body + scalar head/tail, long rows in smem",
}
BEST = "v6"
SIZE_HELP = "ROWSxCOLS, e.g. 8192x8192"
SIZES = {"small": (64, 1000), "default": (8192, 8192), "large": (16384, 16384)}
# widths: 1, 2, 3 (head and tail only), 33, 1000, odd ones (every row a different alignment),
# 1024 / 1025 / 1027 / 1028 (the warp-per-row limit), 4096, 16387 / 16388 (the 256-thread limit),
# 40001 (registers + shared memory), 90001 (shared memory nearly full), 100003 (longer than
# registers + shared memory: the rest is read twice)
CHECK_SIZES = [(1, 1), (3, 2), (3, 3), (7, 33), (5, 1000), (3, 8193), (4, 4096), (2, 100003),
               (1000, 5), (33, 16388), (13, 1024), (9, 1025), (5, 1027), (5, 1028), (3, 999),
               (3, 16387), (3, 40001), (2, 90001)]
# aligned, short rows, long rows, an LM head's vocabulary (GPT-2: 50257, odd), an odd mid width
BENCH_SIZES = [(8192, 8192), (65536, 1024), (1024, 65536), (8192, 50257), (32768, 4097)]
BAR = [{"pct": 85, "vs_baseline": 1.0}]  # CURRICULUM.md: at every benchmark size


def validate_size(size):
    rows, cols = size
    A.fits_int32("rows", rows, "rows")
    A.fits_int32("cols", cols, "columns")


def make_case(size, rng, scale=3.0):
    rows, cols = size
    x = rng.standard_normal((rows, cols), dtype=np.float32) * np.float32(scale)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((rows, cols), np.float32)},
                  reference=lambda: {"y": reference.softmax(x)},
                  bytes=2 * x.nbytes)  # read x once, write y once


WARP_ROW_MAX = 1024  # v5 and v6 give rows up to this width (v6: + 3) one warp each


def _items(per_thread: int, choices) -> int:
    """The smallest register array that holds `per_thread` vectors (the largest if none does:
    the rest of the row is then read a second time)."""
    return next((i for i in choices if per_thread <= i), choices[-1])


def v6_smem_vecs(cols: int) -> int:
    """float4 of a long row that v6 keeps in shared memory (beyond 1024 x 8 in registers):
    as many as fit in a block's shared memory."""
    from common.gpu import device_info

    limit = (device_info().get("smem_per_block_optin") or 48 * 1024) - 1024  # static smem + slack
    return max(0, min(cols // 4 - LONG_THREADS * 8, limit // 16))


def kernel_for(version: str, cols: int) -> tuple[str, int, int]:
    """(kernel name, threads a block, rows a block) of v4-v6 at a row width."""
    vec = 4 if cols % 4 == 0 else 1  # v4/v5: float4 needs every row 16-byte aligned
    if version == "v4" or (version == "v5" and cols > WARP_ROW_MAX):
        items = _items(H.cdiv(cols // vec, THREADS), (1, 2, 4, 8, 16) if vec == 4 else (4, 8, 16, 32, 64))
        return f"softmax_v4_vec{vec}_items{items}", THREADS, 1
    if version == "v5":
        items = _items(H.cdiv(cols // vec, 32), (1, 2, 4, 8) if vec == 4 else (4, 8, 16, 32))
        return f"softmax_v5_warp_vec{vec}_items{items}", THREADS, THREADS // 32
    if version == "v6":
        body = cols // 4  # at most this many float4 after the head
        if body <= 32 * 8:
            return f"softmax_v6_warp_items{_items(H.cdiv(body, 32), (1, 2, 4, 8))}", THREADS, THREADS // 32
        if body <= THREADS * 16:
            return f"softmax_v6_block_items{_items(H.cdiv(body, THREADS), (1, 2, 4, 8, 16))}", THREADS, 1
        return "softmax_v6_long", LONG_THREADS, 1
    raise ValueError(f"kernel_for: {version!r} is not v4, v5 or v6")


def same_as(version, size):
    """v5 is v4 for rows wider than a warp takes: it runs v4's kernel there."""
    return "v4" if version == "v5" and size[1] > WARP_ROW_MAX else None


def launch(version, d):
    rows, cols = d.size
    if version in ("v1", "v2", "v3"):
        K(f"softmax_{version}", "PPii").prepared_call(
            (rows, 1, 1), (THREADS, 1, 1), d.x, d.y, rows, cols,
            shared_size=THREADS * 4 if version == "v1" else 0)
        return
    name, threads, rows_per_block = kernel_for(version, cols)
    smem_vecs = v6_smem_vecs(cols) if name == "softmax_v6_long" else 0
    K(name, "PPiii", dynamic_smem=16 * smem_vecs).prepared_call(
        (H.cdiv(rows, rows_per_block), 1, 1), (threads, 1, 1), d.x, d.y, rows, cols, smem_vecs,
        shared_size=16 * smem_vecs)


def baselines(d):
    torch = torch_or_none()
    if torch is None:
        return {}
    x = as_torch(d.array("x"))
    return {"torch.softmax": lambda: torch.softmax(x, dim=-1)}


def softmax(x, version=BEST):
    """Row softmax of a 2-D array [rows, cols] on the GPU, in float32 (other real dtypes are
    converted). An empty array gives an empty result."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x", ndim=2, what="[rows, cols]")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    validate_size(x.shape)
    case = H.Case(x.shape, inputs={"x": x}, outputs={"y": (x.shape, np.float32)})
    return H.run(launch, version, case)["y"]
