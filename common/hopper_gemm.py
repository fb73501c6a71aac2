"""The host side of the Hopper GEMMs of days 45-49: C[M, N] = A[M, K] . B[N, K]^T with both
operands K-major (rows along K), fed to the kernels through tensor maps.

    a_ptr, b_ptr, kk = k_major_operands(d, K("pad_k_v0", "PPiii"), np.uint16, align=8)
    amap = cached_map(d, a_ptr, "bfloat16", dims=(kk, m), box=(64, 128))
    grid = persistent_grid(tiles, cluster=2)
    libs = cublas_bf16_nt(d)            # the library to match, on the same device arrays

A DeviceCase `d` has size (M, K, N) and arrays "a" [M, K] and "b" [N, K] (and "c" [M, N]).
Importing this module needs neither a GPU nor pycuda.
"""
from __future__ import annotations

import numpy as np

from .harness import cdiv
from . import gpu
from .tma import cached_map

PAD_THREADS = 256
PAD_MAX_BLOCKS = 132 * 16          # a grid-stride copy: enough blocks to fill an H100/H200


def k_major_operands(d, pad, dtype, align: int):
    """Device pointers of A and B whose rows are a multiple of `align` elements (16 bytes: a
    tensor map's row stride must be), and that K. If K is not, zero-padded copies [rows, K']
    are made by `pad` (a prepared kernel taking src, dst, rows, K, K') into scratch first,
    every call: part of the op's time."""
    m, k, n = d.size
    if k % align == 0:
        return d.a, d.b, k
    kp = cdiv(k, align) * align
    out = []
    for name, src, rows in (("a_pad", d.a, m), ("b_pad", d.b, n)):
        dst = d.scratch(name, (rows, kp), dtype)
        pad.prepared_call((min(cdiv(rows * kp, PAD_THREADS), PAD_MAX_BLOCKS), 1, 1),
                          (PAD_THREADS, 1, 1), src, dst, rows, k, kp)
        out.append(dst)
    return out[0], out[1], kp


def persistent_grid(units: int, cluster: int = 1) -> tuple:
    """One block an SM (whole clusters of `cluster` blocks), never more blocks than work
    units (a unit: a tile, or a cluster's tiles)."""
    per = gpu.sm_count() // cluster
    return (cluster * min(units, per), 1, 1)


# The kernels of common/cuda/wgmma_gemm_op.cuh (days 46, 47: 8-bit operands): 128 x 256 output
# tiles, a k-block one 128-byte row (128 values); v1 one block a tile, the others persistent.
OP_BM, OP_BN, OP_BK = 128, 256, 128


def op_maps(d, a_ptr, b_ptr, kk: int, dtype: str, clustered: bool):
    """Tensor maps of A (box 128 values of K x 128 rows) and B (256 rows, or 128 when a cluster
    of two fetches half each) for a wgmma_gemm_op kernel."""
    m, _, n = d.size
    bn = OP_BN // 2 if clustered else OP_BN
    return (cached_map(d, a_ptr, dtype, dims=(kk, m), box=(OP_BK, OP_BM)),
            cached_map(d, b_ptr, dtype, dims=(kk, n), box=(OP_BK, bn)))


def op_grid(m: int, n: int, one_buffer: bool, clustered: bool) -> tuple:
    """one_buffer (v1): a block a tile; else persistent, one block an SM (pairs for a cluster)."""
    if one_buffer:
        return (cdiv(n, OP_BN), cdiv(m, OP_BM), 1)
    if clustered:
        return persistent_grid(cdiv(cdiv(m, OP_BM), 2) * cdiv(n, OP_BN), cluster=2)
    return persistent_grid(cdiv(m, OP_BM) * cdiv(n, OP_BN))


def cublas_bf16_nt(d) -> dict:
    """cuBLAS bf16 C = A . B^T on the case's own A and B: through torch (cublasLt, what a user
    calls) and cublasGemmEx directly; each writes its own bf16 C (torch tensors, which the
    runner checks too). Without torch, cublasGemmEx alone, unchecked."""
    from .baselines import as_torch, gemm_ex, torch_or_none

    m, k, n = d.size
    torch = torch_or_none()
    if torch is None:
        c = d.scratch("c_cublas", (m, n), np.uint16)
        return {"cuBLAS bf16 (cublasGemmEx)":
                lambda: gemm_ex(d.a, d.b, c, m, n, k, mode="bf16", b_transposed=True)}
    at = as_torch(d.array("a")).view(torch.bfloat16)
    bt = as_torch(d.array("b")).view(torch.bfloat16)
    c1 = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")
    c2 = torch.empty((m, n), dtype=torch.bfloat16, device="cuda")

    def cublas_ex():
        gemm_ex(d.a, d.b, c2.data_ptr(), m, n, k, mode="bf16", b_transposed=True)
        return c2
    return {"cuBLAS bf16 (torch.matmul)": lambda: torch.matmul(at, bt.t(), out=c1),
            "cuBLAS bf16 (cublasGemmEx)": cublas_ex}


def bf16_nt_matmul(a, b, version: str, launch, validate_size) -> np.ndarray:
    """The public C = a @ b.T of the bf16 GEMM days (45, 48): a [M, K], b [N, K] float arrays,
    checked and rounded to bf16 (nearest even); `launch(version, d)` runs the day's kernel;
    returns the bf16 C as float32 [M, N]. Empty M or N, or K = 0: zeros without a launch."""
    from . import args as A
    from . import bf16
    from .harness import Case, run

    a = A.floats(a, "a", ndim=2)
    b = A.floats(b, "b", ndim=2)
    m, k, n = A.nt_shapes(a, b)
    if m == 0 or n == 0 or k == 0:
        return np.zeros((m, n), np.float32)
    validate_size((m, k, n))
    case = Case((m, k, n), inputs={"a": bf16.to_bits(a), "b": bf16.to_bits(b)},
                outputs={"c": ((m, n), np.uint16)}, decode={"c": bf16.from_bits})
    return run(launch, version, case)["c"]
