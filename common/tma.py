"""Tensor maps for Hopper's Tensor Memory Accelerator (TMA), made from Python (day 44 teaches
them; day 45's GEMMs load and store through them).

A tensor map (CUtensorMap, 128 opaque bytes) tells the copy engine how a tensor lies in global
memory (element type, sizes, strides) and which box one copy moves into shared memory (box
sizes, swizzle). It is made on the host with the driver's cuTensorMapEncodeTiled. CUDA C++
passes it BY VALUE as a `const __grid_constant__ CUtensorMap` kernel parameter; pycuda's
launch cannot (measured on an H200, 2026-11-26: a kernel with such parameters received zeros
for every parameter, with or without padding), so here the maps are uploaded to device memory
and the kernel takes `const CUtensorMap *` (the copy engine reads a map from global memory as
well as from the parameter space; the upload happens before the launch, so no fence is needed):

    from common.tma import tiled_map, upload
    maps = upload(tiled_map(a_ptr, "bfloat16", dims=(K, M), box=(64, 128), swizzle=128),
                  tiled_map(b_ptr, "bfloat16", dims=(K, N), box=(64, 256), swizzle=128))
    K("gemm", "PPPiii").prepared_call(grid, block, maps.ptr(0), maps.ptr(1), c_ptr, m, n, k)

Dimensions are given innermost first (the contiguous one, then rows), as the driver wants.
Importing this module needs neither a GPU nor pycuda; libcuda is loaded on first use.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .graphs import check, libcuda

# CUtensorMapDataType (cuda.h, CUDA 12/13)
DTYPES = {"uint8": (0, 1), "uint16": (1, 2), "uint32": (2, 4), "int32": (3, 4),
          "uint64": (4, 8), "int64": (5, 8), "float16": (6, 2), "float32": (7, 4),
          "float64": (8, 8), "bfloat16": (9, 2), "float8_e4m3": (0, 1), "int8": (0, 1)}
# CUtensorMapSwizzle: bytes of the swizzle span -> enum
SWIZZLES = {0: 0, 32: 1, 64: 2, 128: 3}
# CUtensorMapL2promotion: bytes -> enum
L2_PROMOTION = {0: 0, 64: 1, 128: 2, 256: 3}
MAP_BYTES = 128


def _prepare_encode(lib):
    fn = lib.cuTensorMapEncodeTiled
    u64p, u32p = ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32)
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, u64p, u64p,
                   u32p, u32p, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


def check_tiled(dtype: str, dims, strides_bytes, box, swizzle: int, address: int):
    """The driver's rules for a tiled map, as plain sentences (ValueError) instead of
    CUDA_ERROR_INVALID_VALUE: the same checks cuTensorMapEncodeTiled makes."""
    if dtype not in DTYPES:
        raise ValueError(f"tensor map dtype {dtype!r}: one of {', '.join(DTYPES)}")
    elem = DTYPES[dtype][1]
    rank = len(dims)
    if not 1 <= rank <= 5:
        raise ValueError(f"a tensor map has 1 to 5 dimensions, not {rank}")
    if len(box) != rank or len(strides_bytes) != rank - 1:
        raise ValueError("box needs one size per dimension and strides one per dimension "
                         "after the first")
    if address % 16:
        raise ValueError(f"a tensor map's global address must be 16-byte aligned ({address:#x} "
                         "is not)")
    for i, d in enumerate(dims):
        if not 1 <= d <= 2**32:
            raise ValueError(f"dimension {i} is {d}: a tensor map dimension is 1 to 2^32")
    for i, s in enumerate(strides_bytes):
        if s % 16 or not 0 < s < 2**40:
            raise ValueError(f"stride {i + 1} is {s} bytes: tensor map strides are multiples of "
                             "16 bytes (a row of a 2-byte matrix must hold a multiple of 8 "
                             "elements)")
    for i, b in enumerate(box):
        if not 1 <= b <= 256:
            raise ValueError(f"box size {b} along dimension {i}: 1 to 256 elements")
    if (box[0] * elem) % 16:
        raise ValueError(f"the box's inner size ({box[0]} x {elem} bytes) must be a multiple of "
                         "16 bytes")
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle {swizzle}: one of {sorted(SWIZZLES)} (bytes)")
    if swizzle and box[0] * elem > swizzle:
        raise ValueError(f"with a {swizzle}-byte swizzle the box's inner size ({box[0] * elem} "
                         f"bytes) may be at most {swizzle} bytes")


def tiled_map(address: int, dtype: str, dims, box, strides_bytes=None, swizzle: int = 0,
              l2_promotion: int = 256) -> bytes:
    """A CUtensorMap (128 bytes) for a tensor at device `address`: dims and box innermost
    first; strides_bytes of dimensions 1.. (default: densely packed). Out-of-bounds elements
    of a box read as zero, and a store skips them: that is how ragged edges cost nothing."""
    dims = [int(d) for d in dims]
    box = [int(b) for b in box]
    elem = DTYPES.get(dtype, (0, 0))[1]
    if strides_bytes is None:
        strides_bytes, s = [], elem
        for d in dims[:-1]:
            s *= d
            strides_bytes.append(s)
    strides_bytes = [int(s) for s in strides_bytes]
    check_tiled(dtype, dims, strides_bytes, box, swizzle, int(address))
    if l2_promotion not in L2_PROMOTION:
        raise ValueError(f"l2_promotion {l2_promotion}: one of {sorted(L2_PROMOTION)} (bytes)")
    lib = libcuda()
    encode = _prepare_encode(lib)
    rank = len(dims)
    # 128-byte aligned storage for the map (cuda.h declares CUtensorMap alignas(128))
    raw = ctypes.create_string_buffer(MAP_BYTES + 128)
    base = (ctypes.addressof(raw) + 127) // 128 * 128
    u64, u32 = ctypes.c_uint64 * 5, ctypes.c_uint32 * 5
    gdim = u64(*dims, *[1] * (5 - rank))
    gstride = u64(*strides_bytes, *[0] * (5 - len(strides_bytes)))
    bdim = u32(*box, *[1] * (5 - rank))
    estride = u32(*[1] * 5)
    check(encode(ctypes.c_void_p(base), DTYPES[dtype][0], rank, ctypes.c_void_p(int(address)),
                 gdim, gstride, bdim, estride, 0, SWIZZLES[swizzle], L2_PROMOTION[l2_promotion],
                 0),
          "cuTensorMapEncodeTiled", lib)
    return ctypes.string_at(base, MAP_BYTES)


class DeviceMaps:
    """Tensor maps in device memory (128 bytes each, 128-byte aligned): ptr(i) is the i-th."""

    def __init__(self, maps):
        from pycuda import gpuarray

        from .gpu import context

        context()
        raw = b"".join(maps)
        self.count = len(maps)
        self.array = gpuarray.to_gpu(np.frombuffer(raw, np.uint8).copy())

    def ptr(self, i: int) -> int:
        if not 0 <= i < self.count:
            raise IndexError(f"map {i} of {self.count}")
        return int(self.array.gpudata) + MAP_BYTES * i


def upload(*maps: bytes) -> DeviceMaps:
    """Copy tensor maps (from tiled_map) to device memory for kernels that take pointers."""
    for m in maps:
        if len(m) != MAP_BYTES:
            raise ValueError(f"a tensor map is {MAP_BYTES} bytes, got {len(m)}")
    return DeviceMaps(maps)


def cached_map(d, address, dtype: str, dims, box, swizzle: int = 128) -> int:
    """The device address of a tiled map (tiled_map, uploaded), made once per DeviceCase `d`
    for these arguments: a map depends only on the pointer, the shape and the box, so the timed
    launches reuse it."""
    key = (int(address), dtype, tuple(dims), tuple(box), swizzle)
    cache = d.__dict__.setdefault("_tensor_maps", {})
    if key not in cache:
        cache[key] = upload(tiled_map(int(address), dtype, dims=dims, box=box, swizzle=swizzle))
    return cache[key].ptr(0)
