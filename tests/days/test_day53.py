import gc

import numpy as np
import pytest

from common import mempool as M

MiB = 1 << 20


# --- common/mempool.py: the CachingAllocator's bookkeeping on a fake backend (CPU) ----------

class _Event:
    def __init__(self, stream):
        self.stream, self.done = stream, False


class FakeBackend:
    """Device memory as address ranges: segments far apart, events completed by hand."""

    def __init__(self, capacity=None):
        self.capacity, self.live, self.next = capacity, {}, 1 << 40
        self.recorded, self.released, self.syncs = [], [], 0

    def malloc(self, n):
        if self.capacity is not None and sum(self.live.values()) + n > self.capacity:
            raise MemoryError("fake device is full")
        p = self.next
        self.next += n + (64 << 20)
        self.live[p] = n
        return p

    def free(self, p):
        del self.live[p]

    @staticmethod
    def stream_key(s):
        return 0 if s is None else s

    def record(self, key):
        ev = _Event(key)
        self.recorded.append(ev)
        return ev

    def done(self, ev):
        return ev.done

    def release(self, ev):
        assert ev not in self.released, "an event released twice"
        self.released.append(ev)

    def synchronize(self):
        self.syncs += 1
        for ev in self.recorded:
            ev.done = True


def pool(**kw):
    return M.CachingAllocator(FakeBackend(**kw))


def test_size_classes():
    assert [M.round_size(n) for n in (0, 1, 512, 513, 1000, MiB, MiB + 1)] == \
        [0, 512, 512, 1024, 1024, MiB, MiB + 512]
    assert M.segment_size(512) == 2 * MiB and M.segment_size(MiB) == 2 * MiB
    assert M.segment_size(MiB + 512) == 2 * MiB and M.segment_size(3 * MiB) == 4 * MiB
    assert M.segment_size(4 * MiB) == 4 * MiB


def test_small_blocks_share_a_segment_and_are_512_aligned():
    p = pool()
    a, b, c = p.alloc(1), p.alloc(700), p.alloc(4)
    assert (b - a, c - b) == (512, 1024)                     # carved one after another
    assert a.size == 512 and b.size == 1024 and b.nbytes == 700
    s = p.stats()
    assert s["segments"] == 1 and s["reserved_bytes"] == 2 * MiB and s["misses"] == 1
    assert s["hits"] == 2 and s["allocated_bytes"] == 2048 and s["requested_bytes"] == 705
    assert s["largest_free_block"] == 2 * MiB - 2048
    assert s["fragmentation"] == pytest.approx(1 - 2048 / (2 * MiB))
    assert isinstance(a, int) and int(a) % 512 == 0


def test_same_stream_reuse_is_immediate_best_fit_and_merges():
    p = pool()
    blocks = [p.alloc(1024) for _ in range(4)]
    base = int(blocks[0])
    p.free(blocks[1])
    p.free(blocks[2])                                         # merged with blocks[1]
    assert p.stats()["free_bytes"] == 2 * MiB - 2048
    x = p.alloc(2048)                                         # fits the merged hole exactly?
    # best fit: the 2048-byte hole, not the big tail of the segment
    assert int(x) == base + 1024
    p.free(x)
    y = p.alloc(100)                                          # smallest block that fits: the hole
    assert int(y) == base + 1024
    assert p.stats()["misses"] == 1 and p.backend.recorded == []   # one stream: no events


def test_large_blocks_split_only_big_tails_and_never_serve_small_requests():
    p = pool()
    a = p.alloc(3 * MiB)                  # a 4 MiB segment; the 1 MiB tail is not split off
    assert a.size == 4 * MiB and p.stats()["reserved_bytes"] == 4 * MiB
    b = p.alloc(9 * MiB)                  # a 10 MiB segment (tail 1 MiB: kept with the block)
    p.free(b)
    c = p.alloc(2 * MiB)                  # served from b's 10 MiB: the 8 MiB tail split off
    assert int(c) == int(b) and c.size == 2 * MiB
    assert p.stats()["largest_free_block"] == 8 * MiB and p.stats()["misses"] == 2
    d = p.alloc(1000)                     # small: a new small segment, not the large free tail
    assert p.stats()["misses"] == 3 and p.stats()["segments"] == 3
    p.free(a), p.free(c), p.free(d)
    assert p.stats()["allocated_bytes"] == 0 and p.stats()["fragmentation"] == 1.0


def test_cross_stream_reuse_waits_for_the_free_time_event():
    p = pool()
    N = 2 * MiB                               # a whole segment each: no tails to reuse
    a = p.alloc(N, stream=1)
    p.free(a)                                 # one stream so far: no event recorded
    assert p.backend.recorded == []
    b = p.alloc(N, stream=2)               # a second stream: a's event is recorded now
    assert int(b) != int(a) and p.stats()["misses"] == 2
    assert len(p.backend.recorded) == 1 and p.backend.recorded[0].stream == 1
    p.backend.recorded[0].done = True
    c = p.alloc(N, stream=2)               # now stream 2 may take it
    assert int(c) == int(a) and p.stats()["cross_stream"] == 1
    p.free(c)                                 # two streams seen: an event at free time
    ev = p.backend.recorded[-1]
    assert ev.stream == 2 and not ev.done
    d = p.alloc(N, stream=1)
    assert int(d) != int(c)                   # stream 2's work may still use it
    e = p.alloc(N, stream=2)               # its own stream: at once, event given back
    assert int(e) == int(c) and ev in p.backend.released


def test_free_on_another_stream_moves_the_block_there():
    p = pool()
    a = p.alloc(512, stream=1)
    p.free(a, stream=2)                       # last used on stream 2
    assert int(p.alloc(512, stream=2)) == int(a)


def test_merge_keeps_the_later_event():
    p = pool()
    p.alloc(1, stream=9)                      # two streams: events from now on
    x, y = p.alloc(512, stream=1), p.alloc(512, stream=1)
    p.free(x)
    p.free(y)                                 # merged with x; x's event is released
    ex, ey = p.backend.recorded[-2:]
    assert ex in p.backend.released and ey not in p.backend.released
    ey.done = True                            # the later event covers both
    z = p.alloc(1024, stream=3)
    assert int(z) == int(x)


def test_empty_cache_frees_only_empty_segments_after_a_sync():
    p = pool()
    a, b = p.alloc(3 * MiB), p.alloc(100)
    keep = p.alloc(5 * MiB)
    p.free(a), p.free(b)
    released = p.empty_cache()
    assert released == 4 * MiB + 2 * MiB and p.backend.syncs == 1
    s = p.stats()
    assert s["segments"] == 1 and s["reserved_bytes"] == 6 * MiB and s["device_frees"] == 2
    assert list(p.backend.live.values()) == [6 * MiB] and keep.live


def test_out_of_memory_empties_the_cache_and_retries():
    p = pool(capacity=10 * MiB)
    a = p.alloc(6 * MiB)
    p.free(a)                                 # cached: 6 MiB reserved, nothing in use
    b = p.alloc(8 * MiB)                      # does not fit beside the cache: emptied, retried
    assert b.live and p.stats()["oom_retries"] == 1 and p.stats()["reserved_bytes"] == 8 * MiB
    with pytest.raises(MemoryError, match="even after emptying the cache"):
        p.alloc(4 * MiB)


def test_garbage_collected_blocks_come_back_and_bad_calls_are_refused():
    p = pool()
    a = p.alloc(1000)
    ptr = int(a)
    del a
    gc.collect()
    assert p.stats()["allocated_bytes"] == 0 and p.stats()["frees"] == 1
    assert int(p(1000)) == ptr                # the pycuda allocator= interface
    b = p.alloc(10)
    p.free(b)
    with pytest.raises(ValueError, match="already freed"):
        p.free(b)
    with pytest.raises(ValueError, match="handed out"):
        pool().free(p.alloc(10))
    with pytest.raises(ValueError, match="handed out"):
        p.free(12345)
    with pytest.raises(ValueError, match=">= 0"):
        p.alloc(-1)
    with pytest.raises(TypeError, match="whole number"):
        p.alloc(1.5)
    with pytest.raises(TypeError, match="bool"):
        p.alloc(True)
    assert int(p.alloc(np.int64(600))) % 512 == 0
    z = p.alloc(0)                            # a null block: nothing reserved
    assert int(z) == 0 and z.size == 0
    p.free(z)


def test_peaks_and_reset():
    p = pool()
    a, b = p.alloc(MiB), p.alloc(MiB)
    p.free(a), p.free(b)
    s = p.stats()
    assert s["peak_allocated_bytes"] == 2 * MiB and s["allocated_bytes"] == 0
    p.reset_peaks()
    assert p.stats()["peak_allocated_bytes"] == 0 and p.stats()["allocs"] == 0
    assert p.stats()["peak_reserved_bytes"] == p.stats()["reserved_bytes"]


def test_random_workload_keeps_the_books_straight():
    """Many allocations and frees on two streams: no two live blocks overlap, every block lies
    in a segment, and the totals agree with the blocks."""
    rng = np.random.default_rng(5)
    p = pool()
    live = []
    for step in range(3000):
        if live and rng.random() < 0.45:
            b = live.pop(int(rng.integers(len(live))))
            p.free(b)
        else:
            n = int(rng.choice([rng.integers(1, 4096), rng.integers(1, 2 * MiB),
                                rng.integers(MiB, 12 * MiB)]))
            live.append(p.alloc(n, stream=int(rng.integers(1, 3))))
        if step % 500 == 0:
            for ev in p.backend.recorded:
                ev.done = True
    spans = sorted((int(b), int(b) + b.size) for b in live)
    assert all(e1 <= s2 for (_, e1), (s2, _) in zip(spans, spans[1:]))
    segs = p.backend.live
    assert all(any(s <= a and e <= s + n for s, n in segs.items()) for a, e in spans)
    s = p.stats()
    assert s["allocated_bytes"] == sum(b.size for b in live)
    assert s["requested_bytes"] == sum(b.nbytes for b in live)
    assert s["reserved_bytes"] == sum(segs.values())
    assert s["free_bytes"] == sum(c.size for c in p._free_chunks.values())
    for b in live:
        p.free(b)
    p.empty_cache()
    assert p.stats()["reserved_bytes"] == 0 and p.backend.live == {}


# --- day 53: the reference ----------------------------------------------------------------

from days.day53_memory_pool import reference  # noqa: E402


def test_gelu_by_hand_and_its_derivative():
    assert reference.gelu(0.0) == 0.0 and reference.gelu_grad(0.0) == 0.5
    assert abs(reference.gelu(10.0) - 10.0) < 1e-12 and abs(reference.gelu(-10.0)) < 1e-12
    u = np.linspace(-5, 5, 101)
    eps = 1e-6
    numeric = (reference.gelu(u + eps) - reference.gelu(u - eps)) / (2 * eps)
    np.testing.assert_allclose(reference.gelu_grad(u), numeric, atol=1e-8)


def test_step_gradients_match_finite_differences():
    rng = np.random.default_rng(0)
    b, d, h = 3, 4, 5
    x, t = rng.standard_normal((b, d)), rng.standard_normal((b, d))
    w1, w2 = rng.standard_normal((d, h)), rng.standard_normal((h, d))
    out = reference.mlp_step(x, t, w1, w2, lr=0.5)
    eps = 1e-6
    for name, w, g in (("w1", w1, out["dw1"]), ("w2", w2, out["dw2"])):
        num = np.zeros_like(w)
        for idx in np.ndindex(*w.shape):
            wp, wm = w.copy(), w.copy()
            wp[idx] += eps
            wm[idx] -= eps
            args = (wp, w2) if name == "w1" else (w1, wp)
            argm = (wm, w2) if name == "w1" else (w1, wm)
            num[idx] = (reference.loss(x, t, *args) - reference.loss(x, t, *argm)) / (2 * eps)
        np.testing.assert_allclose(g, num, rtol=1e-6, atol=1e-8, err_msg=name)
    np.testing.assert_allclose(out["w1_new"], w1 - 0.5 * out["dw1"])
    np.testing.assert_allclose(out["w2_new"], w2 - 0.5 * out["dw2"])


# --- day 53: the step's schedule, run on the CPU through the caching allocator ---------------

class NumpyDevice:
    """Device memory as one float32 array (NaN until written) and the step's kernels in numpy,
    so the step's order of allocs, launches and frees runs on the CPU: a temporary freed before
    its last use gets overwritten through the allocator's immediate reuse, and the answer is
    wrong."""
    BASE = 1 << 40

    def __init__(self, nbytes=48 << 20):
        self.mem = np.full(nbytes // 4, np.nan, np.float32)
        self.launches = []

    def view(self, p, n):
        i = (int(p) - self.BASE) // 4
        assert (int(p) - self.BASE) % 16 == 0 and i + n <= self.mem.size
        return self.mem[i:i + n]

    def gemm(self, a, b, c, m, n, k):
        self.launches.append(("gemm", m, n, k))
        A_ = self.view(a, m * k).reshape(m, k).astype(np.float64)
        B_ = self.view(b, k * n).reshape(k, n).astype(np.float64)
        self.view(c, m * n)[:] = (A_ @ B_).ravel()

    def gelu(self, z, h, n):
        self.launches.append(("gelu",))
        self.view(h, n)[:] = reference.gelu(self.view(z, n))

    def gelu_back(self, dh, z, dz, n):
        self.launches.append(("gelu_back",))
        self.view(dz, n)[:] = self.view(dh, n) * reference.gelu_grad(self.view(z, n))

    def mse_grad(self, o, t, d, scale, n):
        self.launches.append(("mse_grad",))
        self.view(d, n)[:] = (self.view(o, n).astype(np.float64) - self.view(t, n)) * scale

    def sgd(self, w, g, w_new, lr, n):
        self.launches.append(("sgd",))
        self.view(w_new, n)[:] = self.view(w, n) - np.float32(lr) * self.view(g, n)

    def transpose(self, src, dst, r, c):
        self.launches.append(("transpose", r, c))
        self.view(dst, r * c)[:] = self.view(src, r * c).reshape(r, c).T.ravel()


class PackedBackend(FakeBackend):
    """FakeBackend whose segments sit back to back from NumpyDevice.BASE."""

    def __init__(self):
        super().__init__()
        self.next = NumpyDevice.BASE

    def malloc(self, n):
        p = self.next
        self.next += n
        self.live[p] = n
        return p


def _run_steps_on_cpu(size, steps=2):
    from days.day53_memory_pool import driver

    dev = NumpyDevice()
    io = M.CachingAllocator(PackedBackend())
    case = driver.make_case(size, np.random.default_rng(4))
    ptrs = {}
    for k, v in case.inputs.items():
        ptrs[k] = io.alloc(v.nbytes)
        dev.view(ptrs[k], v.size)[:] = v.ravel()
    for k, (shape, _) in case.outputs.items():
        ptrs[k] = io.alloc(4 * int(np.prod(shape)))
    pool = M.CachingAllocator(io.backend)      # the step's own allocator, same address space
    calls = []

    def alloc(n, tag):
        calls.append(("alloc", tag, n))
        return pool.alloc(n)

    def free(p, tag):
        calls.append(("free", tag))
        dev.view(p, p.nbytes // 4)[:] = np.nan   # poison: a later read of it fails
        pool.free(p)

    misses = []
    for _ in range(steps):
        before = pool.stats()["misses"]
        driver.step(dev, alloc, free, size, 0.1, *(ptrs[k] for k in
                    ("x", "t", "w1", "w2", "dw1", "dw2", "w1_new", "w2_new")))
        misses.append(pool.stats()["misses"] - before)
    outs = {k: dev.view(ptrs[k], int(np.prod(s))).reshape(s) for k, (s, _) in case.outputs.items()}
    return case, outs, calls, misses, dev, pool


@pytest.mark.parametrize("size", [(5, 6, 7), (1, 1, 1), (33, 20, 65)])
def test_step_schedule_computes_the_step_through_the_allocator(size):
    from common.check import compare_all

    case, outs, calls, misses, dev, pool = _run_steps_on_cpu(size)
    r = compare_all(outs, case.expected(), case.tolerance())
    assert r.ok, r.message
    b, d, h = size
    allocs = [c for c in calls if c[0] == "alloc"]
    assert len(allocs) == 18 and len([c for c in calls if c[0] == "free"]) == 18
    assert [c[1] for c in allocs[:9]] == ["z", "h", "o", "do", "hT", "w2T", "dh", "dz", "xT"]
    assert [l[1:] for l in dev.launches if l[0] == "gemm"][:5] == \
        [(b, h, d), (b, d, h), (h, d, b), (b, h, d), (d, h, b)]
    assert len(dev.launches) == 2 * 13          # 5 GEMMs, 3 transposes, 5 element-wise
    assert misses[1] == 0                       # the second step is served from the cache
    assert pool.stats()["allocated_bytes"] == 0  # every temporary came back


def test_a_premature_free_is_caught_by_the_cpu_schedule(monkeypatch):
    """The CPU schedule test can fail: free `h` right after gelu (before its transpose)."""
    from common.check import compare_all
    from days.day53_memory_pool import driver

    real = driver.step

    def broken(L, alloc, free, *a):
        held = {}

        def alloc2(n, tag):
            p = alloc(n, tag)
            if tag == "h":
                held["h"] = p
            if tag == "o":
                free(held["h"], "h")              # h freed before its last user, the transpose
            return p

        real(L, alloc2, lambda p, tag: None if tag == "h" else free(p, tag), *a)

    monkeypatch.setattr(driver, "step", broken)
    case, outs, *_ = _run_steps_on_cpu((5, 6, 7), steps=1)
    assert not compare_all(outs, case.expected(), case.tolerance()).ok


# --- day 53: the driver's pieces on the CPU ---------------------------------------------------

def test_sizes_tolerance_and_bar():
    from common.bars import judge
    from days.day53_memory_pool import driver

    driver.validate_size((16384, 16384, 16384))
    with pytest.raises(ValueError, match="at most 16384"):
        driver.validate_size((1, 16385, 1))
    tol = driver.tolerance((512, 1024, 4096))
    assert tol["w1_new"] == 1e-5 and tol["dw1"] == pytest.approx(4 * 2.0 ** -24 * 64)
    assert driver.tolerance((3, 5, 7))["dw2"] == 1e-5
    case = driver.make_case((3, 5, 7), np.random.default_rng(1))
    assert case.flops == 10 * 3 * 5 * 7 and set(case.outputs) == {"dw1", "dw2", "w1_new", "w2_new"}

    def rec(v1, v3, v4):
        rows = [{"version": v, "ok": True, "median_ms": ms} for v, ms in
                (("v1", v1), ("v3", v3), ("v4", v4))]
        return {"cases": [{"size": [512, 1024, 4096], "rows": rows}]}

    assert judge(driver.BAR, rec(2.0, 1.02, 1.0))[0] is True
    ok, fig = judge(driver.BAR, rec(2.0, 1.05, 1.0))
    assert ok is False and "v4" in fig
    assert judge(driver.BAR, rec(1.0, 1.01, 1.0))[0] is False


def test_exact_size_cache_misses_on_every_new_size(monkeypatch):
    from days.day53_memory_pool import driver

    addrs = iter(range(1 << 20, 1 << 30, 1 << 20))
    monkeypatch.setattr(M, "device_malloc", lambda n: next(addrs))
    monkeypatch.setattr(M, "device_free", lambda p: None)
    c = driver.ExactSizeCache()
    a = c.alloc(1000)
    c.free(a)
    assert c.alloc(1000) == a and c.device_mallocs == 1
    c.free(a)
    assert c.alloc(1001) != a and c.device_mallocs == 2 and c.reserved == 2001
    pre = driver.PreAlloc.__new__(driver.PreAlloc)     # v4's bookkeeping, without pycuda
    assert pre.free(123) is None


@pytest.mark.parametrize("kw,exc,word", [
    ({"x": np.ones((2, 3), complex)}, TypeError, "complex"),
    ({"x": np.ones(3)}, ValueError, "2-D"),
    ({"t": np.ones((2, 4))}, ValueError, "t must have shape"),
    ({"w1": np.ones((4, 5))}, ValueError, "w1 must have shape"),
    ({"w2": np.ones((5, 4))}, ValueError, "w2 must have shape"),
    ({"lr": float("nan")}, ValueError, "finite"),
    ({"lr": "0.1"}, TypeError, "real"),
    ({"x": np.ones((0, 3)), "t": np.ones((0, 3))}, ValueError, "B must be >= 1"),
    ({"version": "v0"}, ValueError, "unknown version"),
    ({"x": None}, TypeError, "None"),
])
def test_mlp_step_refuses_bad_input(kw, exc, word):
    from days.day53_memory_pool.driver import mlp_step

    args = {"x": np.ones((2, 3)), "t": np.ones((2, 3)), "w1": np.ones((3, 5)),
            "w2": np.ones((5, 3))}
    args.update(kw)
    with pytest.raises(exc, match=word):
        mlp_step(**args)


def test_mlp_step_empty_widths_and_best():
    from days.day53_memory_pool.driver import BEST, mlp_step

    out = mlp_step(np.ones((2, 3)), np.ones((2, 3)), np.ones((3, 0)), np.ones((0, 3)))
    assert out["dw1"].shape == (3, 0) and out["w2_new"].shape == (0, 3)
    out = mlp_step(np.ones((2, 0)), np.ones((2, 0)), np.ones((0, 4)), np.ones((4, 0)))
    assert out["dw2"].shape == (4, 0) and out["dw1"].dtype == np.float32
    assert BEST == "v4"


# --- GPU ------------------------------------------------------------------------------------------

def test_every_version_on_a_ragged_step(gpu):
    from common.check import compare_all
    from days.day53_memory_pool import driver

    case = driver.make_case((37, 65, 129), np.random.default_rng(9))
    for v in driver.VERSIONS:
        out = driver.mlp_step(*(case.inputs[k] for k in ("x", "t", "w1", "w2")), lr=0.1, version=v)
        r = compare_all(out, case.expected(), case.tolerance())
        assert r.ok, f"{v}: {r.message}"


def test_caching_allocator_on_the_device(gpu):
    from pycuda import gpuarray

    from common.gpu import driver

    cuda = driver()
    pool = M.CachingAllocator()
    x = np.arange(1000, dtype=np.float32)
    g = gpuarray.to_gpu(x, allocator=pool)            # pycuda's allocator= interface
    assert isinstance(g.gpudata, M.Block) and np.array_equal((g * 2).get(), 2 * x)
    ptr = int(g.gpudata)
    del g
    import gc as _gc
    _gc.collect()
    assert pool.stats()["allocated_bytes"] == 0       # the array's block came back
    b = pool.alloc(4000)
    assert int(b) == ptr                              # and is reused at once (same stream)
    cuda.memcpy_htod(b, x)
    y = np.empty_like(x)
    cuda.memcpy_dtoh(y, b)
    assert np.array_equal(x, y)
    pool.free(b)
    # another stream takes it only after the free-time event completed
    s1, s2 = cuda.Stream(), cuda.Stream()
    big = 4 << 20
    a = pool.alloc(big, s1)
    pool.free(a)
    cuda.Context.synchronize()
    c = pool.alloc(big, s2)                           # event recorded now on s1: done after a sync?
    cuda.Context.synchronize()
    pool.free(c)
    assert pool.stats()["allocated_bytes"] == 0
    assert pool.empty_cache() > 0 and pool.stats()["reserved_bytes"] == 0


def test_stream_ordered_pool_on_the_device(gpu):
    from common.gpu import driver

    cuda = driver()
    p = M.StreamOrderedPool()
    p.reset_peaks()
    a = p.alloc(1 << 20)
    x = np.arange(1 << 18, dtype=np.float32)
    cuda.memcpy_htod(a, x)
    y = np.empty_like(x)
    cuda.memcpy_dtoh(y, a)
    assert np.array_equal(x, y)
    s = p.stats()
    assert s["used_bytes"] >= 1 << 20 and s["reserved_bytes"] >= s["used_bytes"]
    p.free(a)
    cuda.Context.synchronize()
    assert p.stats()["used_bytes"] < s["used_bytes"]
