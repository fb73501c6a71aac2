"""Shared test setup: the repo on sys.path, and the `gpu` fixture.

GPU tests take the `gpu` fixture. Without a usable GPU they skip with the reason; with
REQUIRE_GPU=1 (what `make test-gpu` sets) they fail instead, so a GPU run cannot pass by
skipping everything.
"""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from common.gpu import gpu_status  # noqa: E402


@pytest.fixture(scope="session")
def gpu():
    ok, why = gpu_status()
    if not ok:
        if os.environ.get("REQUIRE_GPU") == "1":
            pytest.fail(f"REQUIRE_GPU=1 but no usable GPU: {why}")
        pytest.skip(f"no GPU: {why}")
    from common.gpu import context

    return context()


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU (takes the gpu fixture)")
    if os.environ.get("REQUIRE_GPU") == "1" and not gpu_status()[0]:
        # one line instead of a failure per GPU test
        pytest.exit(f"REQUIRE_GPU=1 but there is no usable GPU: {gpu_status()[1]}", returncode=2)


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "gpu" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.gpu)


def pytest_report_header(config):
    ok, why = gpu_status()
    return f"GPU: {'yes, ' + why if ok else 'no (' + why + '): GPU tests will skip'}"
