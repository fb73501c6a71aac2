"""Day 1 driver: the device report, hello from chosen threads, and the first kernel (a copy)
timed against the driver's device-to-device copy (the memory ceiling of every later day)."""
import numpy as np

from common import harness as H
from common.gpu import device_info, driver, flush_printf

from . import reference

K = H.Kernels(__file__)
THREADS = 256

VERSIONS = {
    "v1": "one float per thread",
    "v2": "one float4 per thread",
}
SIZE_HELP = "N floats, e.g. 2^28"
SIZES = {"small": (1000,), "default": (2 ** 28,), "large": (2 ** 30,)}
CHECK_SIZES = [(1,), (3,), (31,), (33,), (1000,), (1000003,)]
BENCH_SIZES = [(2 ** 20,), (2 ** 24,), (2 ** 28,)]


def make_case(size, rng):
    (n,) = size
    x = rng.standard_normal(n).astype(np.float32)
    return H.Case(size, inputs={"x": x}, outputs={"y": ((n,), np.float32)},
                  reference=lambda: {"y": reference.copy(x)}, bytes=2 * x.nbytes)


def launch(version, d):
    (n,) = d.size
    per_thread = 4 if version == "v2" else 1
    grid = max(1, H.cdiv(n, THREADS * per_thread))
    K(f"copy_{version}", "PPq").prepared_call((grid, 1, 1), (THREADS, 1, 1), d.x, d.y, n)


def baselines(d):
    cuda = driver()
    nbytes = d.array("x").nbytes
    return {"cuMemcpyDtoD": lambda: cuda.memcpy_dtod(d.y, d.x, nbytes)}


def whoami(n: int, threads_per_block: int = THREADS) -> np.ndarray:
    """Launch `whoami` over n threads; rows of (global, block, thread, warp, lane, sm)."""
    from pycuda import gpuarray

    cuda = driver()
    ids = gpuarray.empty((n, 6), np.int32)
    cuda.memset_d8(ids.gpudata, 0xFF, ids.nbytes)
    K("whoami", "Pi").prepared_call((H.cdiv(n, threads_per_block), 1, 1), (threads_per_block, 1, 1),
                                    ids.gpudata, n)
    return ids.get()


def hello(blocks: int = 2, threads: int = 64, every: int = 32):
    """Print hello from every `every`-th thread of each block (device printf)."""
    flush_printf()
    K("hello")(np.int32(every), grid=(blocks, 1, 1), block=(threads, 1, 1))
    driver().Context.synchronize()  # device printf output is flushed at synchronisation
    flush_printf()


def copy(x, version="v2"):
    x = np.ascontiguousarray(x, dtype=np.float32).ravel()
    return H.run(launch, version, H.Case(x.shape, {"x": x}, {"y": (x.shape, np.float32)}))["y"]


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
