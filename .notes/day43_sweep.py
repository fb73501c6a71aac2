#!/usr/bin/env python3
"""Day 43 sweep (run on the GPU machine: python .notes/day43_sweep.py, well under a minute):
every candidate of days/*day43*/kernel.cu (driver.CANDIDATES) and the versions beside them,
checked once at two ragged sizes, then timed at the bench sizes with cuBLAS bf16 in the same run.
.notes/day43_gpu.md says what to do with the table."""
import importlib.util
from pathlib import Path

spec = importlib.util.spec_from_file_location(
    "sweep_common", Path(__file__).with_name("day41_43_sweep_common.py"))
sweep = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep)

if __name__ == "__main__":
    sweep.run(43, extra_kernels=["hgemm_async_v1", "hgemm_async_v2", "hgemm_async_v3", "hgemm_async_v4"])
