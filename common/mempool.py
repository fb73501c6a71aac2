"""Device memory allocators (day 53; the training days 61-70 allocate through them).

Three ways to get temporary device memory, all on pycuda's (primary) context:

    from common.mempool import CachingAllocator, StreamOrderedPool, device_malloc, device_free

    pool = CachingAllocator()               # ours: size classes, per-stream free lists
    buf = pool.alloc(4 * n, stream)         # a Block: an int holding the device pointer
    fn.prepared_async_call(grid, block, stream, buf, ...)   # pass it wherever a pointer goes
    pool.free(buf)                          # stream-ordered: reusable at once on `stream`
    y = gpuarray.GPUArray((n,), np.float32, allocator=pool)  # pycuda arrays from the pool
                                            # (allocator=pool allocates on the default stream)
    print(pool.stats())                     # in use, reserved, peak, fragmentation, hits...
    pool.empty_cache()                      # give unused segments back to the driver

    drv = StreamOrderedPool()               # the driver's pool: cuMemAllocAsync/cuMemFreeAsync
    p = drv.alloc(nbytes, stream); drv.free(p, stream); drv.stats()

    p = device_malloc(nbytes); device_free(p)   # cuMemAlloc / cuMemFree, nothing cached

CachingAllocator, the design (PyTorch's CUDA caching allocator is the model; this one is written
for reading, in Python):
- Size classes. A request is rounded up to a multiple of 512 bytes, so every block starts a
  multiple of 512 bytes into a cuMemAlloc segment (and segments are at least 256-byte
  aligned): 16-byte vector loads are always legal. Requests up to 1 MiB are SMALL and are carved
  out of 2 MiB segments; LARGER ones get segments rounded up to 2 MiB granules. A small request
  never takes memory from a large segment and the reverse, so the many small temporaries do not
  chop up the large free blocks.
- Splitting and merging. A free block bigger than the request is split: the request is served
  from its front and the rest stays free (a large block is split only when the rest is more than
  1 MiB: smaller tails are handed out with the block). A freed block is merged with free
  neighbours of the same segment and stream, so memory freed in pieces can serve a large request.
- Stream-ordered reuse. Kernels on one stream run in order, so a block freed on stream S (after
  enqueueing the last kernel that uses it) can be handed to the next request on S at once: that
  request's kernels are queued behind the old ones. Each stream has its own free lists. Another
  stream T may take the block only once an event recorded on S at free time has completed. While
  only one stream has ever been seen, no events are recorded (nobody could take the block);
  a block freed before a second stream appeared gets its event recorded when T first asks for it,
  which is later in S's order and so just as safe.
- Best fit: the smallest free block that holds the request (the lowest address among equals).
- Misses. A request no free block of its own stream can serve first tries the other streams'
  free blocks (the event rule above); only then does it allocate a new segment with cuMemAlloc
  (a miss). When that fails for lack of memory, the cache is emptied (after a synchronize) and
  the allocation is tried once more; if it fails again, MemoryError.
- empty_cache() synchronizes the context and frees every segment with nothing allocated in it.

Rules for callers: free a block on the stream whose work last touches it (free(block, stream));
if kernels on several streams use it, synchronize them first (or free on the last one after
making it wait for the others). A Block that is garbage-collected without free() (for instance
inside a GPUArray made with allocator=pool) is freed on the stream it was allocated on. The
Block owns the memory, as pycuda's DeviceAllocation does: keeping only int(block) and dropping
the Block frees the memory back to the pool, which may hand it out again while the int you kept
still points at it. Keep the Block (or the GPUArray holding it) alive while kernels use it.
Not thread-safe: one allocator per thread.

stats() keys: allocated_bytes (sum of block sizes handed out), requested_bytes (what was asked
for: the difference is the rounding), reserved_bytes (segments held), free_bytes (reserved -
allocated), peak_allocated_bytes, peak_reserved_bytes, largest_free_block, fragmentation = 1 - allocated / reserved (the share of held memory not in
use now), free_fragmentation = 1 - largest_free_block / free_bytes (how scattered the free memory
is: 0 when it is one block), hits (requests served from the cache, cross-stream ones
included), misses (requests that took a new segment), cross_stream (hits taken from another
stream's list), allocs, frees, segments, streams (streams seen), device_mallocs, device_frees,
oom_retries, host_seconds (time spent inside alloc/free). reset_peaks() restarts the peaks and
zeroes the counters and host_seconds.

Importing this module needs neither pycuda nor a GPU; the CUDA backend is built on first use.
The bookkeeping runs on any backend with malloc/free/stream_key/record/done/release/synchronize
(tests/days/test_day53.py drives it with a fake one on the CPU).
"""
from __future__ import annotations

import bisect
import ctypes
import operator
import time

from .graphs import CudaDriverError, check, declare, libcuda, stream_handle

ROUND = 512                  # every block is a multiple of this (and aligned to it)
SMALL_LIMIT = 1 << 20        # requests up to 1 MiB are small
SMALL_SEGMENT = 2 << 20      # small requests are carved out of 2 MiB segments
LARGE_GRANULE = 2 << 20      # large segments are multiples of 2 MiB
CUDA_ERROR_OUT_OF_MEMORY = 2
CUDA_ERROR_NOT_READY = 600


def round_size(nbytes: int) -> int:
    """The size class of a request: nbytes rounded up to a multiple of 512 (0 stays 0)."""
    return -(-int(nbytes) // ROUND) * ROUND


def segment_size(size: int) -> int:
    """The segment a miss of a rounded `size` allocates: 2 MiB for small requests, else `size`
    rounded up to 2 MiB."""
    if size <= SMALL_LIMIT:
        return SMALL_SEGMENT
    return -(-size // LARGE_GRANULE) * LARGE_GRANULE


# --- the driver calls (ctypes on libcuda, like common/graphs.py) ------------------------------

_VP = ctypes.c_void_p
_U64 = ctypes.c_uint64
_MEM_SIGNATURES = {
    "cuMemAlloc_v2": [ctypes.POINTER(_U64), ctypes.c_size_t],
    "cuMemFree_v2": [_U64],
    "cuMemAllocAsync": [ctypes.POINTER(_U64), ctypes.c_size_t, _VP],
    "cuMemFreeAsync": [_U64, _VP],
    "cuCtxGetDevice": [ctypes.POINTER(ctypes.c_int)],
    "cuCtxSynchronize": [],
    "cuDeviceGetDefaultMemPool": [ctypes.POINTER(_VP), ctypes.c_int],
    "cuMemPoolSetAttribute": [_VP, ctypes.c_int, _VP],
    "cuMemPoolGetAttribute": [_VP, ctypes.c_int, _VP],
    "cuMemPoolTrimTo": [_VP, ctypes.c_size_t],
    "cuEventCreate": [ctypes.POINTER(_VP), ctypes.c_uint],
    "cuEventRecord": [_VP, _VP],
    "cuEventQuery": [_VP],
    "cuEventDestroy_v2": [_VP],
}
_declared = set()


def driver_lib(lib=None):
    """libcuda with the memory and event calls this module uses declared (once)."""
    lib = lib or libcuda()
    if id(lib) not in _declared:
        declare(lib, _MEM_SIGNATURES)
        _declared.add(id(lib))
    return lib


def _context():
    from .gpu import context

    context()


def device_malloc(nbytes: int) -> int:
    """cuMemAlloc: a fresh device allocation of nbytes (> 0); returns the pointer as an int."""
    _context()
    lib = driver_lib()
    p = _U64(0)
    check(lib.cuMemAlloc_v2(ctypes.byref(p), int(nbytes)), "cuMemAlloc", lib)
    return p.value


def device_free(ptr: int):
    """cuMemFree: give an allocation of device_malloc back to the driver (this synchronizes)."""
    lib = driver_lib()
    check(lib.cuMemFree_v2(_U64(int(ptr))), "cuMemFree", lib)


class CudaBackend:
    """What CachingAllocator needs from the GPU: segments (cuMemAlloc/cuMemFree), events
    (created once, recycled), a context synchronize."""

    def __init__(self, lib=None):
        if lib is None:
            _context()
        self.lib = driver_lib(lib)
        self._events = []

    def malloc(self, nbytes: int) -> int:
        p = _U64(0)
        check(self.lib.cuMemAlloc_v2(ctypes.byref(p), nbytes), "cuMemAlloc", self.lib)
        return p.value

    def free(self, ptr: int):
        check(self.lib.cuMemFree_v2(_U64(ptr)), "cuMemFree", self.lib)

    @staticmethod
    def stream_key(stream) -> int:
        return stream_handle(stream)

    def record(self, key: int):
        """An event recorded now on the stream with handle `key`."""
        if self._events:
            ev = self._events.pop()
        else:
            ev = _VP()
            check(self.lib.cuEventCreate(ctypes.byref(ev), 2), "cuEventCreate", self.lib)  # no timing
        check(self.lib.cuEventRecord(ev, _VP(key)), "cuEventRecord", self.lib)
        return ev

    def done(self, ev) -> bool:
        code = self.lib.cuEventQuery(ev)
        if code == CUDA_ERROR_NOT_READY:
            return False
        check(code, "cuEventQuery", self.lib)
        return True

    def release(self, ev):
        self._events.append(ev)

    def synchronize(self):
        check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize", self.lib)

    def close(self):
        for ev in self._events:
            self.lib.cuEventDestroy_v2(ev)
        self._events = []


def _nbytes(n) -> int:
    """A byte count: a whole number >= 0 (numpy integers too), else TypeError/ValueError."""
    if isinstance(n, bool):
        raise TypeError("nbytes must be a whole number of bytes, got a bool")
    try:
        n = operator.index(n)
    except TypeError:
        raise TypeError(f"nbytes must be a whole number of bytes, got {type(n).__name__} "
                        f"{n!r}") from None
    if n < 0:
        raise ValueError(f"nbytes must be >= 0, got {n}")
    return n


def _is_oom(e: BaseException) -> bool:
    return isinstance(e, MemoryError) or (isinstance(e, CudaDriverError)
                                          and e.code == CUDA_ERROR_OUT_OF_MEMORY)


# --- the caching allocator ----------------------------------------------------------------------

class Block(int):
    """A device pointer handed out by a CachingAllocator: an int (so pycuda takes it as a
    pointer: prepared calls, memcpy, GPUArray(gpudata=...)), plus what the allocator knows of
    it. `nbytes` was asked for, `size` is reserved for it (its size class)."""

    def __new__(cls, ptr: int, nbytes: int, size: int, stream_key, owner):
        b = super().__new__(cls, ptr)
        b.nbytes, b.size, b.stream_key = nbytes, size, stream_key
        b._owner, b._chunk = owner, None
        return b

    @property
    def live(self) -> bool:
        return self._chunk is not None

    def free(self, stream=None):
        self._owner.free(self, stream)

    def __del__(self):
        try:
            if self._chunk is not None and self._owner is not None:
                self._owner.free(self)
        except Exception:  # an interpreter shutting down, a context gone: nothing to do
            pass


class _Segment:
    __slots__ = ("ptr", "size", "small", "head")

    def __init__(self, ptr, size, small):
        self.ptr, self.size, self.small, self.head = ptr, size, small, None


class _Chunk:
    """A piece of a segment, free or allocated; neighbours in address order."""
    __slots__ = ("ptr", "size", "seg", "prev", "next", "free", "stream", "event", "seq")

    def __init__(self, ptr, size, seg, stream):
        self.ptr, self.size, self.seg, self.stream = ptr, size, seg, stream
        self.prev = self.next = None
        self.free, self.event, self.seq = False, None, 0


_COUNTERS = ("hits", "misses", "cross_stream", "allocs", "frees", "device_mallocs",
             "device_frees", "oom_retries")


class CachingAllocator:
    """Device memory with size classes and stream-ordered reuse (the module docstring has the
    design and the rules). alloc(nbytes, stream=None) -> Block; free(block, stream=None);
    empty_cache(); stats(); calling the allocator, pool(nbytes), allocates on the default stream
    (the pycuda `allocator=` interface)."""

    def __init__(self, backend=None):
        self.backend = backend if backend is not None else CudaBackend()
        self._free = {}           # (small?, stream key) -> sorted [(size, ptr)]
        self._free_chunks = {}    # ptr -> free _Chunk
        self._segments = {}       # ptr -> _Segment
        self._streams = set()
        self._multi_stream = False
        self._seq = 0
        self.allocated = self.requested = self.reserved = 0
        self.peak_allocated = self.peak_reserved = 0
        self.counts = dict.fromkeys(_COUNTERS, 0)
        self.host_seconds = 0.0   # time spent inside alloc/free (time.perf_counter)

    # -- public -------------------------------------------------------------------------------
    def alloc(self, nbytes: int, stream=None) -> Block:
        """A block of at least nbytes (rounded up to 512), usable on `stream` at once."""
        t0 = time.perf_counter()
        nbytes = _nbytes(nbytes)
        key = self._see(stream)
        self.counts["allocs"] += 1
        if nbytes == 0:
            self.host_seconds += time.perf_counter() - t0
            return Block(0, 0, 0, key, self)    # a null pointer: nothing to read or write
        size = round_size(nbytes)
        small = size <= SMALL_LIMIT
        c = self._best_fit(small, key, size)
        if c is not None:
            self.counts["hits"] += 1
        else:
            c = self._steal(small, key, size)
            if c is not None:
                self.counts["hits"] += 1
                self.counts["cross_stream"] += 1
            else:
                c = self._new_segment(small, size, key)
                self.counts["misses"] += 1
        self._split(c, size, small, key)
        c.free, c.stream = False, key
        self.allocated += c.size
        self.requested += nbytes
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        b = Block(c.ptr, nbytes, c.size, key, self)
        b._chunk = c
        self.host_seconds += time.perf_counter() - t0
        return b

    __call__ = alloc

    def free(self, block: Block, stream=None):
        """Give a block back, ordered on `stream` (default: the stream it was allocated on):
        the next request on that stream may reuse it at once."""
        t0 = time.perf_counter()
        if not isinstance(block, Block) or block._owner is not self:
            raise ValueError("free() takes a Block that this allocator handed out")
        if block._chunk is None:
            if block.size == 0 and block.nbytes == 0 and int(block) == 0:
                block._owner = None          # the null block of alloc(0): nothing held
                return
            raise ValueError(f"block {int(block):#x} was already freed")
        c, block._chunk = block._chunk, None
        key = block.stream_key if stream is None else self._see(stream)
        self.counts["frees"] += 1
        self.allocated -= c.size
        self.requested -= block.nbytes
        c.free, c.stream = True, key
        if self._multi_stream:
            self._set_event(c, self.backend.record(key))
        c = self._merge(c)
        self._insert(c)
        self.host_seconds += time.perf_counter() - t0

    def empty_cache(self) -> int:
        """Synchronize, then free every segment that has nothing allocated. Returns the bytes
        given back to the driver."""
        self.backend.synchronize()
        released = 0
        for seg in list(self._segments.values()):
            chunks = []
            c = seg.head
            while c is not None:
                chunks.append(c)
                c = c.next
            if all(ch.free for ch in chunks):
                for ch in chunks:
                    self._remove(ch)
                    self._set_event(ch, None)
                self.backend.free(seg.ptr)
                self.counts["device_frees"] += 1
                del self._segments[seg.ptr]
                self.reserved -= seg.size
                released += seg.size
        return released

    def stats(self) -> dict:
        """What the allocator holds now and has done (keys in the module docstring)."""
        free = self.reserved - self.allocated
        largest = max((c.size for c in self._free_chunks.values()), default=0)
        out = {"allocated_bytes": self.allocated, "requested_bytes": self.requested,
               "reserved_bytes": self.reserved, "free_bytes": free,
               "peak_allocated_bytes": self.peak_allocated,
               "peak_reserved_bytes": self.peak_reserved, "largest_free_block": largest,
               "fragmentation": 1 - self.allocated / self.reserved if self.reserved else 0.0,
               "free_fragmentation": 1 - largest / free if free else 0.0,
               "segments": len(self._segments), "streams": len(self._streams),
               "host_seconds": self.host_seconds}
        out.update(self.counts)
        return out

    def reset_peaks(self):
        """Peaks restart from what is allocated and reserved now; counters from zero."""
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved
        self.counts = dict.fromkeys(_COUNTERS, 0)
        self.host_seconds = 0.0

    def close(self):
        """Empty the cache and release the events (blocks still allocated stay valid)."""
        self.empty_cache()
        if hasattr(self.backend, "close"):
            self.backend.close()

    # -- bookkeeping ----------------------------------------------------------------------------
    def _see(self, stream):
        key = self.backend.stream_key(stream)
        if key not in self._streams:
            self._streams.add(key)
            if len(self._streams) > 1:
                self._multi_stream = True
        return key

    def _set_event(self, c: _Chunk, ev):
        if c.event is not None:
            self.backend.release(c.event)
        c.event = ev
        if ev is not None:
            self._seq += 1
            c.seq = self._seq

    def _insert(self, c: _Chunk):
        bisect.insort(self._free.setdefault((c.seg.small, c.stream), []), (c.size, c.ptr))
        self._free_chunks[c.ptr] = c

    def _remove(self, c: _Chunk):
        lst = self._free[(c.seg.small, c.stream)]
        i = bisect.bisect_left(lst, (c.size, c.ptr))
        del lst[i]
        del self._free_chunks[c.ptr]

    def _best_fit(self, small, key, size):
        lst = self._free.get((small, key))
        if not lst:
            return None
        i = bisect.bisect_left(lst, (size, -1))
        if i == len(lst):
            return None
        c = self._free_chunks[lst[i][1]]
        del lst[i]
        del self._free_chunks[c.ptr]
        self._set_event(c, None)   # reused on its own stream: stream order protects it
        return c

    def _steal(self, small, key, size):
        """The best fit among other streams' free blocks whose free-time event has completed."""
        if not self._multi_stream:
            return None
        best = None
        for (sm, other), lst in self._free.items():
            if sm != small or other == key or not lst:
                continue
            for sz, ptr in lst[bisect.bisect_left(lst, (size, -1)):]:
                if best is not None and sz >= best.size:
                    break
                c = self._free_chunks[ptr]
                if c.event is None:   # freed before a second stream existed: record it now
                    self._set_event(c, self.backend.record(c.stream))
                if self.backend.done(c.event):
                    best = c
                    break
        if best is not None:
            self._remove(best)
            self._set_event(best, None)
        return best

    def _new_segment(self, small, size, key) -> _Chunk:
        nbytes = segment_size(size)
        try:
            ptr = self.backend.malloc(nbytes)
        except Exception as e:
            if not _is_oom(e):
                raise
            self.counts["oom_retries"] += 1
            self.empty_cache()
            try:
                ptr = self.backend.malloc(nbytes)
            except Exception as e2:
                if not _is_oom(e2):
                    raise
                raise MemoryError(f"out of device memory: a {nbytes}-byte segment for a "
                                  f"{size}-byte block does not fit, even after emptying the "
                                  f"cache ({self.reserved} bytes still reserved, "
                                  f"{self.allocated} in use)") from None
        self.counts["device_mallocs"] += 1
        seg = _Segment(ptr, nbytes, small)
        c = _Chunk(ptr, nbytes, seg, key)
        seg.head = c
        self._segments[ptr] = seg
        self.reserved += nbytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return c

    def _split(self, c: _Chunk, size, small, key):
        rest = c.size - size
        if rest < ROUND or (not small and rest <= SMALL_LIMIT):
            return
        tail = _Chunk(c.ptr + size, rest, c.seg, key)
        tail.free = True
        tail.prev, tail.next = c, c.next
        if c.next is not None:
            c.next.prev = tail
        c.next = tail
        c.size = size
        self._insert(tail)

    def _merge(self, c: _Chunk) -> _Chunk:
        """Merge c with its free neighbours of the same stream. The merged block keeps the
        later of the two events: in one stream's order it covers the earlier one."""
        for nb in (c.prev, c.next):
            if nb is None or not nb.free or nb.stream != c.stream:
                continue
            self._remove(nb)
            later, earlier = ((nb, c) if nb.event is not None and (c.event is None or nb.seq > c.seq)
                              else (c, nb))
            ev, seq = later.event, later.seq
            if earlier.event is not None:
                self.backend.release(earlier.event)
            first, second = (nb, c) if nb is c.prev else (c, nb)
            first.size += second.size
            first.next = second.next
            if second.next is not None:
                second.next.prev = first
            first.event, first.seq = ev, seq
            c = first
        return c


# --- the driver's stream-ordered pool ---------------------------------------------------------

MEMPOOL_ATTR_RELEASE_THRESHOLD = 4     # CUmemPool_attribute (cuda.h)
MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5
MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6
MEMPOOL_ATTR_USED_MEM_CURRENT = 7
MEMPOOL_ATTR_USED_MEM_HIGH = 8
KEEP_ALL = (1 << 64) - 1


class StreamOrderedPool:
    """cuMemAllocAsync / cuMemFreeAsync on the current device's default memory pool: the
    driver's own stream-ordered caching allocator (cudaMallocAsync in the runtime).

    release_threshold: the bytes the pool keeps reserved across synchronizations (the driver's
    default, 0, gives everything back at every synchronize; KEEP_ALL keeps it all). It is a
    property of the device's default pool, so it applies to everyone using that pool."""

    def __init__(self, release_threshold: int = KEEP_ALL, lib=None):
        if lib is None:
            _context()
        self.lib = driver_lib(lib)
        dev = ctypes.c_int(0)
        check(self.lib.cuCtxGetDevice(ctypes.byref(dev)), "cuCtxGetDevice", self.lib)
        self.pool = _VP()
        check(self.lib.cuDeviceGetDefaultMemPool(ctypes.byref(self.pool), dev.value),
              "cuDeviceGetDefaultMemPool", self.lib)
        self._set(MEMPOOL_ATTR_RELEASE_THRESHOLD, release_threshold)
        self.counts = {"allocs": 0, "frees": 0}
        self.host_seconds = 0.0

    def alloc(self, nbytes: int, stream=None) -> int:
        t0 = time.perf_counter()
        p = _U64(0)
        if nbytes:
            check(self.lib.cuMemAllocAsync(ctypes.byref(p), int(nbytes), _VP(stream_handle(stream))),
                  "cuMemAllocAsync", self.lib)
        self.counts["allocs"] += 1
        self.host_seconds += time.perf_counter() - t0
        return p.value

    def free(self, ptr: int, stream=None):
        t0 = time.perf_counter()
        if int(ptr):
            check(self.lib.cuMemFreeAsync(_U64(int(ptr)), _VP(stream_handle(stream))),
                  "cuMemFreeAsync", self.lib)
        self.counts["frees"] += 1
        self.host_seconds += time.perf_counter() - t0

    def _get(self, attr: int) -> int:
        v = _U64(0)
        check(self.lib.cuMemPoolGetAttribute(self.pool, attr, ctypes.byref(v)),
              "cuMemPoolGetAttribute", self.lib)
        return v.value

    def _set(self, attr: int, value: int):
        v = _U64(value)
        check(self.lib.cuMemPoolSetAttribute(self.pool, attr, ctypes.byref(v)),
              "cuMemPoolSetAttribute", self.lib)

    def stats(self) -> dict:
        """Reserved and used bytes of the pool, now and at their high-water marks."""
        reserved = self._get(MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
        used = self._get(MEMPOOL_ATTR_USED_MEM_CURRENT)
        return {"reserved_bytes": reserved, "used_bytes": used,
                "peak_reserved_bytes": self._get(MEMPOOL_ATTR_RESERVED_MEM_HIGH),
                "peak_used_bytes": self._get(MEMPOOL_ATTR_USED_MEM_HIGH),
                "fragmentation": 1 - used / reserved if reserved else 0.0,
                "host_seconds": self.host_seconds, **self.counts}

    def reset_peaks(self):
        """High-water marks restart from now (the driver allows setting them to 0)."""
        self._set(MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0)
        self._set(MEMPOOL_ATTR_USED_MEM_HIGH, 0)
        self.counts = {"allocs": 0, "frees": 0}
        self.host_seconds = 0.0

    def trim(self, keep_bytes: int = 0):
        """Give reserved memory above keep_bytes back to the driver (after a synchronize)."""
        check(self.lib.cuCtxSynchronize(), "cuCtxSynchronize", self.lib)
        check(self.lib.cuMemPoolTrimTo(self.pool, int(keep_bytes)), "cuMemPoolTrimTo", self.lib)
