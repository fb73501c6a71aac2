"""Day 51 driver: a host -> GPU -> host pipeline, six ways to schedule it, checked and timed.

    from days.day51_streams_overlap.driver import rsqrt
    y = rsqrt(x)                    # numpy in, numpy out: 1/sqrt(x) by 1024 Newton steps on the GPU
    y = rsqrt(x, steps=256, version="v4", chunks=32, streams=4)

A size is NxSTEPS: N float32 elements that start and end in the host's memory, STEPS Newton
steps per element (the kernel's arithmetic, 4 FLOPs a step). The versions differ in host code:
where the host arrays live (pageable, pinned, mapped) and how copies and kernels are spread
over streams; kernel.cu is one kernel (plus v6's zero-copy loop).

How the harness sees this day. The input lives on the HOST: moving it is the op, so the Case
has no device inputs (nothing is uploaded before a launch). Host buffers (pageable and pinned)
belong to the case and are allocated once, on first use, never inside a timed launch. The
output the check reads is the HOST copy of y: the case's `decode` hook returns it and then
poisons every buffer the next launch must write (host y with NaN, device x with 0xFF bytes;
the harness poisons device y), so a chunk that is never copied fails. launch() returns only
when y is complete in host memory (it waits on the streams it used, never on the device).
"""
from __future__ import annotations

import numpy as np

from common import args as A
from common import harness as H

from . import reference

K = H.Kernels(__file__)
THREADS = 256

VERSIONS = {
    "v1": "pageable host memory, synchronous copies: in, kernel, out",
    "v2": "pinned host memory, async copies on one stream: still serial",
    "v3": "16 chunks round-robin over 2 streams (each: in, kernel, out)",
    "v4": "32 chunks round-robin over 4 streams",
    "v5": "a stream per engine (in / kernel / out), chunks chained by events",
    "v6": "zero-copy: the kernel reads and writes mapped host memory",
}
BEST = "v4"  # measured fastest (sweep of 2026-11-26, H200: .notes/day51_sweep_results.md)
# (chunks, streams) of the chunked versions; v5's streams are its three engines
PLAN = {"v3": (16, 2), "v4": (32, 4), "v5": (32, 3)}
MIN_STEPS, MAX_STEPS = 4, 65536   # 3 steps converge from the seed (reference.py); a cap on cost
MAX_CHUNKS, MAX_STREAMS = 4096, 32
ALIGN = 1024                      # v3/v4 chunks: multiples of 4 KiB
STEPS = 1024                      # the public function's default

SIZE_HELP = "NxSTEPS (float32 elements x Newton steps each, steps 4..65536), e.g. 2^26x1024"
SIZES = {"small": (1 << 20, 256), "default": (1 << 26, 1024), "large": (1 << 27, 1024)}
# n = 1 and n < the chunk count (one chunk, empty chunks must never be issued), ragged n (the
# last chunk short), n just past one or many 1024-element align units, the fewest steps
CHECK_SIZES = [(1, 4), (5, 4), (15, 33), (31, 5), (33, 64), (1023, 8), (1025, 8), (16385, 16),
               (100003, 40), (1000003, 32), (2100001, 6)]
# 256 MiB each way with the kernel about as long as the copies (the count in the README); an odd
# N with a quarter of the arithmetic per element, where the copies weigh more
BENCH_SIZES = [(1 << 26, 1024), (30000001, 256)]
OVERLAP_SIZE = (1 << 26, 1024)
TIMELINE_VERSIONS = ("v2", "v3", "v4", "v5", "v6")
BAR_HIDDEN = 0.80


def validate_size(size):
    n, steps = size
    A.fits_int32("N", n)
    if not MIN_STEPS <= steps <= MAX_STEPS:
        raise ValueError(f"STEPS = {steps}: between {MIN_STEPS} (the Newton iteration needs 3 "
                         f"to converge) and {MAX_STEPS}")


# --- host memory ----------------------------------------------------------------------------

class Host:
    """The host side of one case: x in pageable memory (as numpy gave it), pinned copies of x
    and y (allocated once, on first use), and which y the last launch wrote. Pinned buffers
    are also mapped (DEVICEMAP), so v6's kernel can address them."""

    def __init__(self, x: np.ndarray):
        self.x = x
        self.n = x.size
        self.y = None                 # pageable y (v1)
        self.xp = self.yp = None      # pinned x, y
        self.last = None              # the y the last launch wrote
        self.xdev = None              # the device copy of x (poisoned after each read)

    def pageable(self):
        if self.y is None:
            self.y = np.full(self.n, np.nan, np.float32)
        return self.x, self.y

    def pinned(self):
        if self.xp is None:
            from common.gpu import driver

            cuda = driver()
            flags = cuda.host_alloc_flags.DEVICEMAP
            self.xp = cuda.pagelocked_empty(self.n, np.float32, mem_flags=flags)
            self.xp[:] = self.x
            self.yp = cuda.pagelocked_empty(self.n, np.float32, mem_flags=flags)
            self.yp.fill(np.nan)
        return self.xp, self.yp

    def device_x(self, d):
        """The device buffer x is copied into (a DeviceCase scratch), poisoned when new."""
        ptr = d.scratch("x", (self.n,))
        if self.xdev is not ptr:
            self.xdev = ptr
            self._poison_device()
        return ptr

    def _poison_device(self):
        if self.xdev is not None:
            from common.gpu import driver

            driver().memset_d8(self.xdev, 0xFF, 4 * self.n)

    def take(self, _device_y=None) -> np.ndarray:
        """The output as the check sees it (Case.decode): a copy of the host y the last launch
        wrote; then that y is refilled with NaN and the device x with 0xFF bytes, so the next
        launch must write every element again."""
        if self.last is None:
            return np.full(self.n, np.nan, np.float32)
        out = self.last.copy()
        self.last.fill(np.nan)
        self._poison_device()
        return out


def mapped_pointer(a: np.ndarray) -> int:
    """The device address of a mapped pinned array (the host address itself under unified
    addressing, which every 64-bit CUDA process has)."""
    try:
        return int(a.base.get_device_pointer())
    except AttributeError:
        return int(a.ctypes.data)


def make_case(size, rng, chunks=None, streams=None):
    n, steps = size
    x = (rng.random(n, dtype=np.float32) * np.float32(3.75) + np.float32(0.25)).astype(np.float32)
    return _case(x, steps, chunks, streams)


def _case(x, steps, chunks=None, streams=None):
    n = x.size
    host = Host(x)
    return H.Case((n, steps), inputs={}, outputs={"y": ((n,), np.float32)},
                  reference=lambda: {"y": reference.rsqrt(x)},
                  flops=4 * steps * n, unit="fp32",   # FMUL + FFMA + FMUL a step
                  params={"steps": steps, "host": host, "chunks": chunks, "streams": streams},
                  decode={"y": host.take})


# --- streams, events, kernels ------------------------------------------------------------------

_STREAMS: list = []
_EVENTS: list = []


def _streams(k: int) -> list:
    """k streams, created once per process. Created with default flags they are BLOCKING
    streams: work on them waits for earlier work on the legacy default stream and later
    default-stream work waits for them, which is how the harness's two events on the default
    stream bracket a whole pipeline."""
    from common.gpu import driver

    cuda = driver()
    while len(_STREAMS) < k:
        _STREAMS.append(cuda.Stream())
    return _STREAMS[:k]


def _events(k: int) -> list:
    """k events for dependencies only (no timestamps: cheaper to record and wait on)."""
    from common.gpu import driver

    cuda = driver()
    while len(_EVENTS) < k:
        _EVENTS.append(cuda.Event(int(cuda.event_flags.DISABLE_TIMING)))
    return _EVENTS[:k]


def _kernel(version, stream, x, y, count, steps):
    K(f"rsqrt_newton_{version}", "PPii").prepared_async_call(
        (H.cdiv(count, THREADS), 1, 1), (THREADS, 1, 1), stream, x, y, count, steps)


def wave_elements() -> int:
    """Elements one full wave of the chunk kernel covers: SMs x resident blocks x 256."""
    from common.gpu import blocks_per_sm, sm_count

    return sm_count() * blocks_per_sm(K("rsqrt_newton_v5", "PPii"), THREADS) * THREADS


def plan(version, params) -> tuple[int, int]:
    """(chunks, streams) a chunked version runs with: the case's choice or PLAN's."""
    chunks, streams = PLAN[version]
    if version != "v5":                      # v5: one stream per engine, always three
        streams = params.get("streams") or streams
    return params.get("chunks") or chunks, streams


def chunks_of(version, n, params) -> list[tuple[int, int]]:
    chunks, _ = plan(version, params)
    align = wave_elements() if version == "v5" else ALIGN
    return reference.chunk_bounds(n, chunks, align)


class _Plain:
    """Runs each operation as is (the timed path)."""

    @staticmethod
    def op(lane, stage, chunk, stream, fn):
        fn()


class Timeline:
    """Runs each operation between two timing events recorded on its stream. An event
    completes when its stream reaches it, so a bar runs from the moment the stream was ready
    to issue the operation (which may then wait for a busy engine) to its end."""

    def __init__(self):
        from common.gpu import driver

        self.cuda = driver()
        self.start = self.cuda.Event()
        self.ops = []

    def op(self, lane, stage, chunk, stream, fn):
        e0, e1 = self.cuda.Event(), self.cuda.Event()
        e0.record(stream)
        fn()
        e1.record(stream)
        self.ops.append((lane, stage, chunk, e0, e1))

    def result(self) -> dict:
        ops = [[lane, stage, chunk, e0.time_since(self.start), e1.time_since(self.start)]
               for lane, stage, chunk, e0, e1 in self.ops]
        lanes = list(dict.fromkeys(o[0] for o in ops))
        return {"lanes": lanes, "ops": ops, "total_ms": max((o[4] for o in ops), default=0.0)}


# --- the pipelines -----------------------------------------------------------------------------

def launch(version, d, tl=None):
    """Run `version`'s pipeline on DeviceCase d; returns when y is complete in host memory.
    `tl` (a Timeline) records every operation's events."""
    A.version(version, VERSIONS)
    from common.gpu import driver

    cuda = driver()
    tl = tl or _Plain
    n, steps = d.size
    host = d.params["host"]
    y_dev = int(d.y)
    if version == "v6":
        xp, yp = host.pinned()
        fn = K("rsqrt_newton_v6_mapped", "PPii")
        from common.gpu import blocks_per_sm, sm_count

        grid = min(H.cdiv(n, THREADS), sm_count() * blocks_per_sm(fn, THREADS))
        s = _streams(1)[0]
        tl.op("stream 0", "kernel", 0, s, lambda: fn.prepared_async_call(
            (grid, 1, 1), (THREADS, 1, 1), s, mapped_pointer(xp), mapped_pointer(yp), n, steps))
        host.last = yp
        s.synchronize()
        return
    x_dev = int(host.device_x(d))
    if version == "v1":
        # synchronous copies from/to pageable memory: the driver stages them through its own
        # pinned buffer, and the host waits for each one (None: the legacy default stream)
        x, y = host.pageable()
        tl.op("default stream", "copy in", 0, None, lambda: cuda.memcpy_htod(x_dev, x))
        tl.op("default stream", "kernel", 0, None, lambda: _kernel("v1", None, x_dev, y_dev, n, steps))
        tl.op("default stream", "copy out", 0, None, lambda: cuda.memcpy_dtoh(y, y_dev))
        host.last = y
        return
    xp, yp = host.pinned()
    host.last = yp
    if version == "v2":
        s = _streams(1)[0]
        tl.op("stream 0", "copy in", 0, s, lambda: cuda.memcpy_htod_async(x_dev, xp, s))
        tl.op("stream 0", "kernel", 0, s, lambda: _kernel("v2", s, x_dev, y_dev, n, steps))
        tl.op("stream 0", "copy out", 0, s, lambda: cuda.memcpy_dtoh_async(yp, y_dev, s))
        s.synchronize()
        return
    bounds = chunks_of(version, n, d.params)
    if version in ("v3", "v4"):
        _, k = plan(version, d.params)
        streams = _streams(k)
        for c, (a, b) in enumerate(bounds):
            s, lane = streams[c % k], f"stream {c % k}"
            xa, ya = x_dev + 4 * a, y_dev + 4 * a
            tl.op(lane, "copy in", c, s, lambda: cuda.memcpy_htod_async(xa, xp[a:b], s))
            tl.op(lane, "kernel", c, s, lambda: _kernel(version, s, xa, ya, b - a, steps))
            tl.op(lane, "copy out", c, s, lambda: cuda.memcpy_dtoh_async(yp[a:b], ya, s))
        for s in streams[:min(k, len(bounds))]:
            s.synchronize()
        return
    if version == "v5":
        # one stream per engine; chunk c's kernel waits on the event "chunk c is in", its copy
        # out on "chunk c is computed". No stream ever waits for the whole device.
        s_in, s_k, s_out = _streams(3)
        ev = _events(2 * len(bounds))
        for c, (a, b) in enumerate(bounds):
            xa, ya = x_dev + 4 * a, y_dev + 4 * a
            arrived, computed = ev[2 * c], ev[2 * c + 1]
            tl.op("copy-in stream", "copy in", c, s_in,
                  lambda: cuda.memcpy_htod_async(xa, xp[a:b], s_in))
            arrived.record(s_in)
            s_k.wait_for_event(arrived)
            tl.op("kernel stream", "kernel", c, s_k, lambda: _kernel("v5", s_k, xa, ya, b - a, steps))
            computed.record(s_k)
            s_out.wait_for_event(computed)
            tl.op("copy-out stream", "copy out", c, s_out,
                  lambda: cuda.memcpy_dtoh_async(yp[a:b], ya, s_out))
        s_out.synchronize()
        return


# --- the bar: the share of the copy time the fastest pipeline hides ---------------------------

def _hides_copies(rec):
    ov = (rec.get("extra") or {}).get("overlap")
    if not ov:
        return False, "overlap not measured"
    rows = {v: r for v, r in ov["versions"].items() if r.get("ok")}
    if not rows:
        return False, "no correct pipeline in the overlap table"
    v, r = min(rows.items(), key=lambda kv: kv[1]["ms"])
    size = "x".join(str(s) for s in ov["size"])
    return (r["hidden"] >= BAR_HIDDEN,
            f"{v} hides {100 * r['hidden']:.0f}% of the copy time at {size}")


BAR = [{"text": f"the fastest pipeline hides >= {100 * BAR_HIDDEN:.0f}% of the copy time "
                "(pinned copies alone + kernel alone - pipeline, over the copies; one run)",
        "check": _hides_copies}]


# --- extras: each engine alone, the overlap table, the timeline ------------------------------

def extras(report, mode):
    if mode == "check":
        return
    overlap(report)


def engines_alone(d, host, repeats=10) -> dict:
    """Median ms of each engine's whole share of the pipeline at d's size, done alone."""
    from common.gpu import driver
    from common.timing import time_fn

    cuda = driver()
    n, steps = d.size
    xp, yp = host.pinned()
    x, y = host.pageable()
    x_dev, y_dev = int(host.device_x(d)), int(d.y)
    s0, s1 = _streams(2)

    def sync(*ss):
        for s in ss:
            s.synchronize()

    fns = {
        "copy in, pinned": lambda: (cuda.memcpy_htod_async(x_dev, xp, s0), sync(s0)),
        "kernel alone": lambda: (_kernel("v2", s0, x_dev, y_dev, n, steps), sync(s0)),
        "copy out, pinned": lambda: (cuda.memcpy_dtoh_async(yp, y_dev, s0), sync(s0)),
        "both copies at once, pinned": lambda: (cuda.memcpy_htod_async(x_dev, xp, s0),
                                                cuda.memcpy_dtoh_async(yp, y_dev, s1), sync(s0, s1)),
        "copy in, pageable": lambda: cuda.memcpy_htod(x_dev, x),
        "copy out, pageable": lambda: cuda.memcpy_dtoh(y, y_dev),
    }
    return {k: time_fn(fn, warmup=2, repeats=repeats).median_ms for k, fn in fns.items()}


def overlap(report, size=OVERLAP_SIZE, repeats=10):
    """At `size`: each engine alone, every version's pipeline, the share of the copy time
    each hides (the bar), and a timeline of TIMELINE_VERSIONS (the figure)."""
    from common.check import compare_all
    from common.gpu import driver
    from common.timing import time_fn

    cuda = driver()
    n, steps = size
    case = make_case(size, np.random.default_rng(51))
    d = H.DeviceCase(case)
    host = case.params["host"]
    label = H.size_str(size)
    mb = 4 * n / 1e6

    alone = engines_alone(d, host, repeats)
    dev = cuda.Context.get_device()
    engines = dev.get_attribute(cuda.device_attribute.ASYNC_ENGINE_COUNT)
    rows = [[k, f"{ms:.3f}", "" if k == "kernel alone" else
             f"{(2 if k.startswith('both') else 1) * mb / ms:.1f}"] for k, ms in alone.items()]
    report.section(f"Engines alone at {label} ({4 * n / 2 ** 20:.0f} MiB each way; the driver "
                   f"reports {engines} copy engines)", rows, ["stage", "ms", "GB/s"])
    t_in, t_out = alone["copy in, pinned"], alone["copy out, pinned"]
    t_copy, t_k = t_in + t_out, alone["kernel alone"]
    bound = max(t_in, t_k, t_out)

    versions, rows = {}, []
    for v in VERSIONS:
        d.poison_outputs()
        launch(v, d)
        r = compare_all(d.outputs(), case.expected(), case.tolerance())
        ms = time_fn(lambda v=v: launch(v, d), warmup=1, repeats=repeats).median_ms
        hidden = reference.hidden_fraction(t_copy, t_k, ms)
        versions[v] = {"ms": ms, "hidden": hidden, "of_bound": bound / ms, "ok": r.ok}
        if not r.ok:
            report.failures.append(f"{v} wrong in the overlap table at {label}: {r.message}")
        rows.append([v, f"{ms:.3f}", f"{t_copy + t_k:.3f}", f"{100 * hidden:.0f}%",
                     f"{100 * bound / ms:.0f}%", "ok" if r.ok else "FAIL"])
    report.section(f"Overlap at {label}: copies alone {t_copy:.3f} ms (pinned, in + out), kernel "
                   f"alone {t_k:.3f} ms", rows,
                   ["version", "pipeline ms", "copies + kernel ms", "hidden", "bound / pipeline",
                    "ok"])
    report.record("overlap", {"size": list(size), "async_engines": engines,
                              "engines_ms": alone, "t_copy_ms": t_copy,
                              "t_compute_ms": t_k, "bound_ms": bound, "versions": versions})

    lines = {}
    for v in TIMELINE_VERSIONS:
        launch(v, d)                      # warm
        cuda.Context.synchronize()
        tl = Timeline()
        tl.start.record()
        launch(v, d, tl)
        lines[v] = {"what": VERSIONS[v], **tl.result()}
    report.record("timeline", {"size": list(size), "versions": lines})


# --- the figure --------------------------------------------------------------------------------

STAGE_COLORS = {"copy in": "#4c72b0", "kernel": "#55a868", "copy out": "#c44e52"}


def draw_timeline(rec, path, plt) -> bool:
    """One panel per version: a row per stream, a bar per operation (from its two events),
    coloured by stage, on one time axis."""
    tl = (rec.get("extra") or {}).get("timeline")
    if not tl or not tl.get("versions"):
        return False
    vs = tl["versions"]
    heights = [max(len(x["lanes"]), 1) + 0.8 for x in vs.values()]
    fig, axes = plt.subplots(len(vs), 1, sharex=True, figsize=(10, 0.42 * sum(heights) + 1.4),
                             dpi=110, gridspec_kw={"height_ratios": heights})
    axes = list(np.atleast_1d(axes))
    for ax, (v, x) in zip(axes, vs.items()):
        lanes = x["lanes"]
        for i, lane in enumerate(lanes):
            y = len(lanes) - 1 - i
            for stage, color in STAGE_COLORS.items():
                bars = [(o[3], o[4] - o[3]) for o in x["ops"] if o[0] == lane and o[1] == stage]
                if bars:
                    ax.broken_barh(bars, (y - 0.36, 0.72), facecolors=color, edgecolor="white",
                                   linewidth=0.4)
        ax.set_yticks(range(len(lanes)), lanes[::-1], fontsize=8)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        # the chunk and stream counts from the recorded events themselves (a description
        # recorded with the run can be older than the plan it ran)
        chunks = sum(1 for o in x["ops"] if o[1] == "kernel")
        what = x["what"] if chunks <= 1 else f"{chunks} chunks on {len(lanes)} streams"
        ax.set_title(f"{v}: {what}  ({x['total_ms']:.2f} ms)", fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1].set_xlabel("ms since the pipeline's first operation was issued (CUDA events)")
    from matplotlib.patches import Patch

    fig.legend(handles=[Patch(color=c, label=s) for s, c in STAGE_COLORS.items()],
               loc="upper right", ncol=3, fontsize=8, frameon=False)
    size = "x".join(str(s) for s in tl["size"])
    fig.suptitle(f"Day 51: streams at {size} ({rec['device']['name']}, {rec['date']})",
                 fontsize=10, x=0.01, ha="left")
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    fig.savefig(path)
    plt.close(fig)
    return True


FIGURES = {"timeline.png": ("timeline", draw_timeline)}


# --- the public function -----------------------------------------------------------------------

def rsqrt(x, steps=STEPS, version=BEST, chunks=None, streams=None):
    """1/sqrt(x) of a float32 array (any shape) that lives in host memory, computed on the GPU
    by `steps` Newton steps per element and returned in host memory. `chunks` (v3, v4, v5) and
    `streams` (v3, v4) override the version's pipeline plan. x must hold positive finite
    values. Each call allocates (and frees) pinned buffers the size of x twice."""
    version = A.version(version, VERSIONS)
    x = A.floats(x, "x")
    steps = A.count(steps, "steps", low=MIN_STEPS, high=MAX_STEPS)
    if chunks is not None:
        if version not in PLAN:
            raise ValueError(f"chunks applies to {', '.join(PLAN)}; {version} does not cut x")
        chunks = A.count(chunks, "chunks", low=1, high=MAX_CHUNKS)
    if streams is not None:
        if version not in ("v3", "v4"):
            raise ValueError(f"streams applies to v3 and v4; {version} has a fixed set of streams")
        streams = A.count(streams, "streams", low=1, high=MAX_STREAMS)
    A.fits_int32("x", x.size)
    bad = ~(np.isfinite(x) & (x > 0))
    if bad.any():
        i = np.unravel_index(int(np.argmax(bad)), x.shape)
        raise ValueError(f"x must hold positive finite numbers (1/sqrt is finite there); "
                         f"x[{', '.join(map(str, i))}] = {x[i]!r}")
    if x.size == 0:
        return np.empty(x.shape, np.float32)
    case = _case(x.ravel(), steps, chunks, streams)
    return H.run(launch, version, case)["y"].reshape(x.shape)
