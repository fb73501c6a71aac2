"""Random numbers on the GPU for the training days (61-70): cuRAND through ctypes, and day 58's
hand Philox, which writes the same bits as cuRAND's host API for the same seed and offset.

    from common import rng

    w = rng.he_normal((768, 3072), seed=1)          # GPUArray float32, std sqrt(2 / 3072)
    b = rng.xavier_uniform((3072, 768), seed=1, offset=w.size)
    s = rng.PhiloxStream(seed=1)                    # keeps the offset for you:
    w1, w2 = s.he_normal((768, 3072)), s.he_normal((3072, 768))   # disjoint parts of one stream
    m = rng.bernoulli(1 << 20, p=0.9, seed=7)       # 1.0 with probability 0.9, else 0.0

    g = rng.CurandGenerator(seed=1)                 # the library itself (libcurand.so)
    z = g.normal(1 << 20)                           # == rng.normal(1 << 20, seed=1), bit for bit

The stream (days/day58_curand_init/README.md, common/cuda/philox.cuh): element i of a call with
(seed, offset) is word g = offset + i of cuRAND's Philox4_32_10 host-API stream (chunk g / 4 is
Philox block (g / 4) >> 16 of subsequence (g / 4) & 0xFFFF, key = the seed). So:
- the same (seed, offset, shape) gives the same numbers on every run. u32, uniform and bernoulli
  are integer and exactly rounded float work, so they are the same on every GPU. normal and the
  normal initializers take their sine and cosine from the special-function unit (__sincosf),
  which is not specified to the bit. They matched libcurand bit for bit on an H200 (sm_90),
  where both run the same instructions; on another architecture the last bits may differ;
- two calls with offsets o1 and o2 use disjoint words when o2 >= o1 + n1 (PhiloxStream advances
  by n rounded up to a multiple of 4, which keeps every call's output 16-byte aligned);
- uniform(), normal(mean=0, std=1), u32() equal curandGenerateUniform / GenerateNormal /
  Generate from a generator with that seed and offset (tests/days/test_day58.py checks it live).

Distributions: uniform in (low, high] (u in (0, 1], as cuRAND's: fma(u, high - low, low)),
normal (Box-Muller as cuRAND's, then fma(z, std, mean)), bernoulli(p) (an integer compare of
the word with round(p 2^32): exact probability). Initializers: He / Kaiming (He et al. 2015,
std = gain / sqrt(fan_in), gain sqrt 2 for ReLU) and Xavier / Glorot (Glorot & Bengio 2010,
std = gain sqrt(2 / (fan_in + fan_out))), normal and uniform (bound sqrt(3) std). fan_in and
fan_out default to torch's reading of the shape: [out, in] for a Linear weight, [out, in, k...]
for a convolution (fan_in = in * prod(k), fan_out = out * prod(k)); a 1-D shape has
fan_in = fan_out = its length.

Every function checks its arguments first (common.args), returns a pycuda GPUArray (or writes
into `out=`, a contiguous GPUArray of the right dtype and size) and launches nothing for an
empty shape. The kernels are day 58's kernel.cu (v3 by default). Importing this module needs
no GPU; pycuda and libcurand are loaded on first use.
"""
from __future__ import annotations

import ctypes
import functools
import math

import numpy as np

from . import args as A
from .harness import ROOT, Kernels, cdiv

DAY58 = ROOT / "days" / "day58_curand_init"
THREADS = 256
SIGNATURE = "PiIIQffQ"   # out, n, key low, key high, offset, a, b, threshold
MAX_OFFSET = 2 ** 63     # offsets are 64-bit; this leaves room for offset + n
DISTS = ("u32", "uniform", "normal", "bernoulli")
VERSIONS = ("v1", "v2", "v3")
DEFAULT_VERSION = "v3"

_K = Kernels(str(DAY58 / "driver.py"))


# --- the hand Philox ----------------------------------------------------------------------------

def chunks_per_thread(version: str) -> int:
    """Outputs (v1) or chunks of 4 (v2, v3, v3_u<U>_cs<C>) one thread makes."""
    if version == "v1" or version == "v2":
        return 1
    if version == "v3":
        return 2
    if version.startswith("v3_u"):
        return int(version[4:].split("_")[0])
    raise ValueError(f"unknown generator version {version!r}")


def grid_for(version: str, n: int, offset: int) -> tuple[tuple, tuple]:
    """(grid, block) of a launch writing n outputs from `offset`."""
    if version == "v1":
        work = n
    else:
        work = cdiv(offset % 4 + n, 4)                # chunks touched
        work = cdiv(work, chunks_per_thread(version))
    return (max(1, cdiv(work, THREADS)), 1, 1), (THREADS, 1, 1)


def philox_args(seed: int, offset: int) -> tuple:
    """The kernel arguments naming a stream position: the key (seed's low and high words) and
    the 64-bit word offset (philox.cuh's curand_counter makes the counter from it)."""
    return np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32), np.uint64(offset)


def launch(dist: str, version: str, out_ptr, n: int, seed: int, offset: int = 0,
           a: float = 1.0, b: float = 0.0, thr: int = 0):
    """Enqueue rng_<dist>_<version> writing n outputs at device pointer out_ptr (no checks:
    the public functions below check; day 58's driver uses this directly)."""
    grid, block = grid_for(version, n, offset)
    fn = _K(f"rng_{dist}_{version}", SIGNATURE)
    fn.prepared_call(grid, block, out_ptr, np.int32(n), *philox_args(seed, offset),
                     np.float32(a), np.float32(b), np.uint64(thr))


def checked_shape(shape) -> tuple:
    """An int or a tuple of ints as a shape tuple (each >= 0, the total within int32)."""
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        shape = (int(shape),)
    if not isinstance(shape, (tuple, list)):
        raise TypeError(f"shape must be an int or a tuple of ints, got {type(shape).__name__}")
    dims = tuple(A.count(d, "every dimension of shape") for d in shape)
    A.fits_int32("shape", int(np.prod(dims, dtype=np.int64)))
    return dims


def checked_seed(seed) -> int:
    """A seed: an integer in [0, 2^64) (the Philox key)."""
    return A.count(seed, "seed", low=0, high=2 ** 64 - 1)


def checked_offset(offset) -> int:
    """A stream offset in words: an integer in [0, 2^63]."""
    return A.count(offset, "offset", low=0, high=MAX_OFFSET)


def out_array(out, shape, dtype):
    """`out` checked (a contiguous GPUArray of the dtype and size), or a new GPUArray."""
    from pycuda import gpuarray

    from .gpu import context

    context()
    if out is None:
        return gpuarray.empty(shape, dtype)
    if not isinstance(out, gpuarray.GPUArray):
        raise TypeError(f"out must be a pycuda GPUArray, got {type(out).__name__}")
    if out.dtype != np.dtype(dtype) or out.size != int(np.prod(shape)) or not out.flags.c_contiguous:
        raise ValueError(f"out must be a contiguous {np.dtype(dtype).name} GPUArray of "
                         f"{int(np.prod(shape))} elements, got {out.dtype} with {out.size}")
    return out


def _gen(dist, shape, seed, offset, a, b, thr, out, version, dtype=np.float32):
    shape = checked_shape(shape)
    seed, offset = checked_seed(seed), checked_offset(offset)
    if version not in VERSIONS and not version.startswith("v3_u"):
        A.version(version, VERSIONS)
    out = out_array(out, shape, dtype)
    n = out.size
    if n:
        launch(dist, version, out.gpudata, n, seed, offset, a, b, thr)
    return out


def u32(shape, seed, offset: int = 0, out=None, version: str = DEFAULT_VERSION):
    """Words offset .. offset + n - 1 of the stream (curandGenerate), uint32 GPUArray."""
    return _gen("u32", shape, seed, offset, 1.0, 0.0, 0, out, version, np.uint32)


def uniform(shape, seed, offset: int = 0, low: float = 0.0, high: float = 1.0, out=None,
            version: str = DEFAULT_VERSION):
    """Uniform in (low, high]: fma(u, high - low, low), u = cuRAND's uniform in (0, 1]
    (curandGenerateUniform bit for bit when low = 0, high = 1). float32 GPUArray."""
    low, high = A.real(low, "low"), A.real(high, "high")
    if not high > low:
        raise ValueError(f"high must be greater than low, got low={low:g}, high={high:g}")
    return _gen("uniform", shape, seed, offset, high - low, low, 0, out, version)


def normal(shape, seed, offset: int = 0, mean: float = 0.0, std: float = 1.0, out=None,
           version: str = DEFAULT_VERSION):
    """Normal(mean, std): fma(z, std, mean) with cuRAND's Box-Muller z (curandGenerateNormal(0, 1)
    bit for bit when mean = 0, std = 1). float32 GPUArray."""
    mean, std = A.real(mean, "mean"), A.real(std, "std", low=0)
    return _gen("normal", shape, seed, offset, std, mean, 0, out, version)


def bernoulli_threshold(p: float) -> int:
    """round(p 2^32): a word below it is a success, so P(success) = threshold / 2^32."""
    p = A.real(p, "p", low=0.0, high=1.0)
    return int(round(p * 2.0 ** 32))


def bernoulli(shape, p: float, seed, offset: int = 0, value: float = 1.0, out=None,
              version: str = DEFAULT_VERSION):
    """`value` with probability p (word < round(p 2^32)), else 0.0. float32 GPUArray."""
    thr = bernoulli_threshold(p)
    value = A.real(value, "value")
    return _gen("bernoulli", shape, seed, offset, value, 0.0, thr, out, version)


# --- initializers -------------------------------------------------------------------------------

def fans(shape) -> tuple[int, int]:
    """(fan_in, fan_out) of a weight shape as torch reads it: [out, in, *kernel] ->
    (in * prod(kernel), out * prod(kernel)); a 1-D shape [n] -> (n, n)."""
    shape = checked_shape(shape)
    if len(shape) == 0:
        raise ValueError("a weight needs at least one dimension to have a fan-in")
    if len(shape) == 1:
        return shape[0], shape[0]
    k = int(np.prod(shape[2:], dtype=np.int64))
    return shape[1] * k, shape[0] * k


def _fan(v, name, default):
    v = default if v is None else v
    return A.count(v, name, low=1)


def he_std(fan_in: int, gain: float = math.sqrt(2.0)) -> float:
    return gain / math.sqrt(fan_in)


def xavier_std(fan_in: int, fan_out: int, gain: float = 1.0) -> float:
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def he_normal(shape, seed, offset: int = 0, fan_in: int | None = None,
              gain: float = math.sqrt(2.0), out=None, version: str = DEFAULT_VERSION):
    """He (Kaiming) normal: N(0, (gain / sqrt(fan_in))^2), gain sqrt 2 (ReLU)."""
    fan_in = _fan(fan_in, "fan_in", fans(shape)[0])
    gain = A.real(gain, "gain", low=0)
    return normal(shape, seed, offset, 0.0, he_std(fan_in, gain), out, version)


def he_uniform(shape, seed, offset: int = 0, fan_in: int | None = None,
               gain: float = math.sqrt(2.0), out=None, version: str = DEFAULT_VERSION):
    """He (Kaiming) uniform: (-a, a] with a = sqrt(3) gain / sqrt(fan_in) (the He variance)."""
    fan_in = _fan(fan_in, "fan_in", fans(shape)[0])
    gain = A.real(gain, "gain", low=0, low_open=True)
    a = math.sqrt(3.0) * he_std(fan_in, gain)
    return uniform(shape, seed, offset, -a, a, out, version)


def xavier_normal(shape, seed, offset: int = 0, fan_in: int | None = None,
                  fan_out: int | None = None, gain: float = 1.0, out=None,
                  version: str = DEFAULT_VERSION):
    """Xavier (Glorot) normal: N(0, gain^2 2 / (fan_in + fan_out))."""
    fi, fo = fans(shape)
    fan_in, fan_out = _fan(fan_in, "fan_in", fi), _fan(fan_out, "fan_out", fo)
    gain = A.real(gain, "gain", low=0)
    return normal(shape, seed, offset, 0.0, xavier_std(fan_in, fan_out, gain), out, version)


def xavier_uniform(shape, seed, offset: int = 0, fan_in: int | None = None,
                   fan_out: int | None = None, gain: float = 1.0, out=None,
                   version: str = DEFAULT_VERSION):
    """Xavier (Glorot) uniform: (-a, a] with a = gain sqrt(6 / (fan_in + fan_out))."""
    fi, fo = fans(shape)
    fan_in, fan_out = _fan(fan_in, "fan_in", fi), _fan(fan_out, "fan_out", fo)
    gain = A.real(gain, "gain", low=0, low_open=True)
    a = math.sqrt(3.0) * xavier_std(fan_in, fan_out, gain)
    return uniform(shape, seed, offset, -a, a, out, version)


class PhiloxStream:
    """One seed's stream handed out in disjoint pieces: every call takes the next words and
    advances `offset` by the call's size rounded up to a multiple of 4 (so every piece starts
    16-byte aligned in the stream's chunks). A training loop that builds its model with one
    PhiloxStream(seed) gets the same weights every run; `offset` can be saved and restored."""

    def __init__(self, seed: int, offset: int = 0):
        self.seed = checked_seed(seed)
        self.offset = checked_offset(offset)

    def _take(self, shape) -> int:
        n = int(np.prod(checked_shape(shape), dtype=np.int64))
        o = self.offset
        self.offset = checked_offset(o + 4 * cdiv(n, 4))
        return o

    def u32(self, shape, **kw):
        return u32(shape, self.seed, self._take(shape), **kw)

    def uniform(self, shape, **kw):
        return uniform(shape, self.seed, self._take(shape), **kw)

    def normal(self, shape, **kw):
        return normal(shape, self.seed, self._take(shape), **kw)

    def bernoulli(self, shape, p, **kw):
        return bernoulli(shape, p, self.seed, self._take(shape), **kw)

    def he_normal(self, shape, **kw):
        return he_normal(shape, self.seed, self._take(shape), **kw)

    def he_uniform(self, shape, **kw):
        return he_uniform(shape, self.seed, self._take(shape), **kw)

    def xavier_normal(self, shape, **kw):
        return xavier_normal(shape, self.seed, self._take(shape), **kw)

    def xavier_uniform(self, shape, **kw):
        return xavier_uniform(shape, self.seed, self._take(shape), **kw)


# --- cuRAND through ctypes ----------------------------------------------------------------------

PHILOX4_32_10 = 161                  # curandRngType_t CURAND_RNG_PSEUDO_PHILOX4_32_10
ORDERINGS = {"best": 100, "default": 101, "seeded": 102, "legacy": 103, "dynamic": 104}


@functools.lru_cache(maxsize=None)
def _curand_or_error():
    from .baselines import load_toolkit_library

    return load_toolkit_library("curand")


def curand_status() -> tuple[bool, str]:
    """(available, reason): whether libcurand loads (tests skip with the reason)."""
    lib, why = _curand_or_error()
    return lib is not None, why or "libcurand loaded"


def curand():
    lib, why = _curand_or_error()
    if lib is None:
        raise OSError(why)
    return lib


def curand_version() -> int:
    v = ctypes.c_int()
    _ok(curand().curandGetVersion(ctypes.byref(v)), "curandGetVersion")
    return v.value


def _ok(status: int, what: str):
    if status != 0:
        raise RuntimeError(f"{what} failed with cuRAND status {status}")


class CurandGenerator:
    """cuRAND's host-API Philox4_32_10 generator on the primary context, writing into pycuda
    memory. Successive calls continue the stream (cuRAND advances its own position);
    set_offset() jumps. `ordering`: None (cuRAND's default) or a name of ORDERINGS."""

    def __init__(self, seed: int = 0, offset: int = 0, ordering: str | None = None):
        from .gpu import context

        context()
        lib = curand()
        self._lib = lib
        self._g = ctypes.c_void_p()
        _ok(lib.curandCreateGenerator(ctypes.byref(self._g), PHILOX4_32_10), "curandCreateGenerator")
        _ok(lib.curandSetPseudoRandomGeneratorSeed(self._g, ctypes.c_ulonglong(checked_seed(seed))),
            "curandSetPseudoRandomGeneratorSeed")
        if ordering is not None:
            _ok(lib.curandSetGeneratorOrdering(self._g, ORDERINGS[A.choice(ordering, "ordering", ORDERINGS)]),
                "curandSetGeneratorOrdering")
        self.set_offset(offset)

    def set_offset(self, offset: int):
        _ok(self._lib.curandSetGeneratorOffset(self._g, ctypes.c_ulonglong(checked_offset(offset))),
            "curandSetGeneratorOffset")

    def _call(self, fn, shape, dtype, out, *extra):
        shape = checked_shape(shape)
        out = out_array(out, shape, dtype)
        if out.size:
            _ok(fn(self._g, ctypes.c_void_p(int(out.gpudata)), ctypes.c_size_t(out.size), *extra),
                fn.__name__)
        return out

    def u32(self, shape, out=None):
        return self._call(self._lib.curandGenerate, shape, np.uint32, out)

    def uniform(self, shape, out=None):
        return self._call(self._lib.curandGenerateUniform, shape, np.float32, out)

    def normal(self, shape, mean: float = 0.0, std: float = 1.0, out=None):
        """curandGenerateNormal: cuRAND wants an even count (Box-Muller pairs)."""
        return self._call(self._lib.curandGenerateNormal, shape, np.float32, out,
                          ctypes.c_float(mean), ctypes.c_float(std))

    def uniform_double(self, shape, out=None):
        return self._call(self._lib.curandGenerateUniformDouble, shape, np.float64, out)

    def normal_double(self, shape, mean: float = 0.0, std: float = 1.0, out=None):
        return self._call(self._lib.curandGenerateNormalDouble, shape, np.float64, out,
                          ctypes.c_double(mean), ctypes.c_double(std))

    def close(self):
        if getattr(self, "_g", None) is not None and self._g.value:
            self._lib.curandDestroyGenerator(self._g)
            self._g = ctypes.c_void_p()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
