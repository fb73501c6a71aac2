"""Every day's kernel.cu compiles with nvcc for sm_90 (sm_90a where the driver asks) and no
kernel spills registers to local memory. Needs nvcc, not a GPU."""
import pytest

from common import harness as H
from common.build import nvcc_path, ptxas_report

pytestmark = pytest.mark.skipif(nvcc_path() is None, reason="nvcc not found")


@pytest.mark.parametrize("n", sorted(H.day_folders()), ids=lambda n: f"day{n:02d}")
def test_kernel_compiles_without_spills(n):
    folder = H.day_folders()[n]
    drv = H.load_driver(n)
    arch = "sm_90a" if getattr(drv, "SM90A", False) else "sm_90"
    kernels = ptxas_report(folder / "kernel.cu", arch)
    assert kernels, "ptxas reported no entry functions"
    allowed = set(getattr(drv, "ALLOWED_SPILLS", ()))
    spilling = [f"{k.name} ({k.spill_stores} B stores, {k.spill_loads} B loads)"
                for k in kernels if k.spills and k.name not in allowed]
    assert not spilling, "register spills: " + ", ".join(spilling)
