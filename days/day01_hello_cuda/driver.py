"""Day 1 driver: the device report, hello from chosen threads, and the first kernel (a copy)
timed against the driver's device-to-device copy (the memory ceiling of every later day).

    from days.day01_hello_cuda.driver import whoami, hello, copy
    ids = whoami(1000, threads_per_block=96)   # rows of (global, block, thread, warp, lane, SM)
    hello(blocks=2, threads=64, every=32)      # device printf from threads 0 and 32 of each block
    y = copy(x)                                # numpy in, numpy out (float32, x's shape)
"""
import numpy as np

from common import args as A
from common import harness as H
from common.gpu import device_info, driver, flush_printf

from . import reference

K = H.Kernels(__file__)
THREADS = 256
MAX_THREADS_PER_BLOCK = 1024   # a CUDA limit on every current GPU
MAX_GRID_X = 2 ** 31 - 1       # blocks along x
# whoami's global index g is an int: with n below 2^31 - 1024, even the overhang of the last
# block (at most 1023 threads past n) stays below 2^31.
MAX_WHOAMI = 2 ** 31 - MAX_THREADS_PER_BLOCK
# Device printf writes into a 1 MB buffer that is printed at synchronisation; lines beyond
# what it holds are lost without an error, so hello refuses launches that would print more.
MAX_HELLO_LINES = 10_000

VERSIONS = {
    "v1": "one float per thread",
    "v2": "one float4 per thread",
}
BEST = "v2"  # fastest at 2^28 (results/day01.json); both are exact copies
SIZE_HELP = "N floats, e.g. 2^28"
SIZES = {"small": (1000,), "default": (2 ** 28,), "large": (2 ** 30,)}
CHECK_SIZES = [(1,), (3,), (31,), (33,), (1000,), (1000003,)]
# 2^28 + 3: a float4 body and a 3-element tail, the shape most real arrays have
BENCH_SIZES = [(2 ** 20,), (2 ** 24,), (2 ** 28,), (2 ** 28 + 3,)]


def _device_matches(rec):
    """The bar "runs; figures match the device": the run passed, its device table says what the
    driver reported for the GPU in the same run, and the measured copy stays below the
    datasheet bandwidth computed from the memory clock and bus width."""
    rep = (rec.get("extra") or {}).get("device_report")
    dev = rec.get("device") or {}
    if not rep or not dev:
        return False, "no device table in the results"
    copy_bw, theo = rec.get("copy_bandwidth_gbps"), dev.get("theoretical_bw_gbps")
    wrong = [k for k, want in (("name", dev.get("name")),
                               ("multiprocessors (SMs)", str(dev.get("sms"))),
                               ("L2 cache", f"{(dev.get('l2_bytes') or 0) / 2 ** 20:.0f} MiB"))
             if rep.get(k) != want]
    if not str(rep.get("compute capability", "")).startswith(str(dev.get("compute_capability"))):
        wrong.append("compute capability")
    if copy_bw is None or (theo and copy_bw > theo):
        wrong.append("measured copy bandwidth")
    ok = bool(rec.get("all_ok")) and not wrong
    fig = (f"{dev.get('name')}: {dev.get('sms')} SMs, {rep.get('compute capability')}, "
           f"{rep.get('L2 cache')} L2, copy {copy_bw or 0:.0f} GB/s of {theo or 0:.0f} GB/s "
           "datasheet")
    if wrong:
        fig += "; differs from the device: " + ", ".join(wrong)
    if not rec.get("all_ok"):
        fig += "; the run had failures"
    return ok, fig


BAR = [{"text": "runs; figures match the device", "check": _device_matches}]


def make_case(size, rng):
    (n,) = size
    x = rng.standard_normal(n).astype(np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((n,), np.float32)},
                  reference=lambda: {"y": reference.copy(x)}, bytes=2 * x.nbytes)


def launch(version, d):
    A.version(version, VERSIONS)
    (n,) = d.size
    per_thread = 4 if version == "v2" else 1
    grid = max(1, H.cdiv(n, THREADS * per_thread))
    K(f"copy_{version}", "PPq").prepared_call((grid, 1, 1), (THREADS, 1, 1), d.x, d.y, n)


def baselines(d):
    cuda = driver()
    nbytes = d.array("x").nbytes
    return {"cuMemcpyDtoD": lambda: cuda.memcpy_dtod(d.y, d.x, nbytes)}


def whoami(n: int, threads_per_block: int = THREADS) -> np.ndarray:
    """Launch `whoami` over n threads in blocks of `threads_per_block`; returns an (n, 6) int32
    array of (global index, block, thread, warp, lane, SM) per thread.

    n = 0 returns an empty (0, 6) array without launching. Refused: a block of more than 1024
    threads (CUDA's limit), n of 2^31 - 1024 or more (the kernel's index is an int)."""
    n = A.count(n, "n", low=0, high=MAX_WHOAMI - 1)
    tpb = A.count(threads_per_block, "threads_per_block", low=1, high=MAX_THREADS_PER_BLOCK)
    if n == 0:
        return np.empty((0, 6), np.int32)
    from pycuda import gpuarray

    cuda = driver()
    ids = gpuarray.empty((n, 6), np.int32)
    cuda.memset_d8(ids.gpudata, 0xFF, ids.nbytes)
    K("whoami", "Pi").prepared_call((H.cdiv(n, tpb), 1, 1), (tpb, 1, 1), ids.gpudata, n)
    return ids.get()


def hello_lines(blocks: int, threads: int, every: int) -> int:
    """How many lines hello(blocks, threads, every) prints: in each block, threads 0, every,
    2 * every, ... below `threads`."""
    return blocks * -(-threads // every)


def hello(blocks: int = 2, threads: int = 64, every: int = 32):
    """Print hello from every `every`-th thread of each block (device printf), one line each.

    0 blocks or 0 threads print nothing and launch nothing. Refused: more than 1024 threads a
    block, every < 1, and launches that would print more than 10,000 lines (device printf's
    buffer would drop some)."""
    blocks = A.count(blocks, "blocks", low=0, high=MAX_GRID_X)
    threads = A.count(threads, "threads", low=0, high=MAX_THREADS_PER_BLOCK)
    every = A.count(every, "every", low=1, high=2 ** 31 - 1)
    if blocks == 0 or threads == 0:
        return
    lines = hello_lines(blocks, threads, every)
    if lines > MAX_HELLO_LINES:
        raise ValueError(f"hello({blocks}, {threads}, every={every}) would print {lines} lines; "
                         f"device printf's buffer holds about {MAX_HELLO_LINES}: use fewer "
                         "blocks or a larger every")
    flush_printf()
    K("hello")(np.int32(every), grid=(blocks, 1, 1), block=(threads, 1, 1))
    driver().Context.synchronize()  # device printf output is flushed at synchronisation
    flush_printf()


def copy(x, version=BEST):
    """y = x on the GPU with one of this day's copy kernels: a float32 array of x's shape.

    Any shape (it is copied as one flat run of floats); an empty x returns an empty array
    without launching."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    flat = x.ravel()
    y = H.run(launch, version, H.Case(flat.shape, {"x": flat}, {"y": (flat.shape, np.float32)}))["y"]
    return y.reshape(x.shape)


def extras(report, mode):
    """The device report, and hello from chosen threads."""
    from common.timing import copy_bandwidth_gbps

    info = device_info()
    gib = 1 << 30
    measured = copy_bandwidth_gbps()
    rows = [
        ["name", info["name"]],
        ["compute capability", f"{info['compute_capability']} ({info['arch']})"],
        ["multiprocessors (SMs)", info["sms"]],
        ["global memory", f"{info['memory_bytes'] / gib:.1f} GiB"],
        ["L2 cache", f"{info['l2_bytes'] / (1 << 20):.0f} MiB"],
        ["shared memory per block (default / opt-in)",
         f"{info['smem_per_block'] // 1024} KiB / {info['smem_per_block_optin'] // 1024} KiB"],
        ["shared memory per SM", f"{info['smem_per_sm'] // 1024} KiB"],
        ["registers per block", info["regs_per_block"]],
        ["max threads per block / per SM", f"{info['max_threads_per_block']} / {info['max_threads_per_sm']}"],
        ["SM clock (max)", f"{info['sm_clock_mhz']:.0f} MHz" if info["sm_clock_mhz"] else "not reported"],
        ["memory clock, bus width", f"{info['mem_clock_mhz']:.0f} MHz, {info['mem_bus_bits']} bits"
         if info["mem_clock_mhz"] else "not reported"],
        ["theoretical bandwidth (2 x clock x bus)", f"{info['theoretical_bw_gbps']:.0f} GB/s"
         if info["theoretical_bw_gbps"] else "not reported"],
        ["measured copy bandwidth (read + write)", f"{measured:.0f} GB/s"
         + (f" ({100 * measured / info['theoretical_bw_gbps']:.0f}% of theoretical)"
            if info["theoretical_bw_gbps"] else "")],
    ]
    report.section("the device", rows, ["property", "value"])
    report.record("device_report", {r[0]: str(r[1]) for r in rows})
    report.say("\nhello from every 32nd thread of 2 blocks of 64:")
    hello(2, 64, 32)
