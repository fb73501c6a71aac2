"""Day 43 reference: day 41's problem (C = A @ B of bf16 inputs in float64, imported), plus the
arithmetic of the tutorial: which k-tiles are in flight at each step of a STAGES-deep cp.async
ring, the grouped tile order, and the shared memory a configuration needs."""
from days.day25_cublas_integration.reference import grouped_order  # noqa: F401  (same order)
from days.day41_wmma_hgemm.reference import (flops, matmul, rel_l2, round_up,  # noqa: F401
                                             tolerance, values)


def pipeline_schedule(k_tiles: int, stages: int, wait: int | None = None):
    """Simulate kernel.cu's loop: per iteration kt, (the buffer multiplied, the tile issued and
    its buffer, the tiles whose copies are still in flight after the wait). Raises if a buffer
    would be refilled while its tile is still to be multiplied, or a tile is multiplied before
    its copy is waited for: the invariants the kernel relies on. `wait` is the N of
    cp.async.wait_group N (the kernel's: stages - 2)."""
    wait = stages - 2 if wait is None else wait
    groups = []                     # committed groups, oldest first: tile number or None (empty)
    for s in range(stages - 1):
        groups.append(s if s < k_tiles else None)
    landed, steps = set(), []
    for kt in range(k_tiles):
        while len(groups) > wait:                # cp.async.wait_group N
            t = groups.pop(0)
            if t is not None:
                landed.add(t)
        if kt not in landed:
            raise AssertionError(f"tile {kt} multiplied before its copy landed")
        nt = kt + stages - 1
        buf = nt % stages
        if nt < k_tiles and any(t % stages == buf for t in range(kt, nt)):
            raise AssertionError(f"tile {nt} would overwrite a buffer still to be read")
        groups.append(nt if nt < k_tiles else None)
        steps.append((kt % stages, nt if nt < k_tiles else None, buf,
                      sorted(t for t in groups if t is not None)))
    return steps


def smem_bytes(bm: int, bn: int, bk: int, stages: int) -> int:
    """Dynamic shared memory of a configuration: a ring of STAGES (A, B) tile pairs in bf16."""
    return stages * (bm * bk + bk * bn) * 2
