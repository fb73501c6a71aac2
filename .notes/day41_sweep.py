#!/usr/bin/env python3
"""Day 41 sweep (run on the GPU machine: python .notes/day41_sweep.py, well under a minute):
every candidate of days/*day41*/kernel.cu (driver.CANDIDATES) and the versions beside them,
checked once at two ragged sizes, then timed at the bench sizes with cuBLAS bf16 in the same run.
.notes/day41_gpu.md says what to do with the table."""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "sweep_common", Path(__file__).with_name("day41_43_sweep_common.py"))
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)

if __name__ == "__main__":
    sweep.run(41, extra_kernels=["hgemm_wmma_v3", "hgemm_wmma_v4", "hgemm_wmma_v5"])
