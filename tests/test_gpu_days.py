"""Every version of every built day against its numpy reference, on the day's ragged and edge
sizes (CHECK_SIZES) plus its small size. Fresh seeded inputs per size; outputs are poisoned
with NaN before each launch so an unwritten element fails."""
import numpy as np
import pytest

from common import harness as H

CASES = []
for _n, _folder in H.day_folders().items():
    try:
        _drv = H.load_driver(_n)
    except Exception as _e:  # a broken driver fails its own test instead of the whole collection
        CASES.append(pytest.param(_n, f"import error: {_e!r}", (), id=f"day{_n:02d}-import"))
        continue
    for _size in list(_drv.CHECK_SIZES) + [tuple(_drv.SIZES["small"])]:
        for _v in _drv.VERSIONS:
            CASES.append(pytest.param(_n, _v, tuple(_size),
                                      id=f"day{_n:02d}-{_v}-{H.size_str(_size)}"))


@pytest.mark.parametrize("day,version,size", CASES)
def test_version_matches_reference(gpu, day, version, size):
    if version.startswith("import error"):
        pytest.fail(f"day {day}: driver.py does not import: {version}")
    drv = H.load_driver(day)
    why = drv.supports(version, size) if hasattr(drv, "supports") else None
    if why:
        pytest.skip(f"{version} does not take {H.size_str(size)}: {why}")
    seed = hash((day, size)) & 0x7FFFFFFF
    case = drv.make_case(size, np.random.default_rng(seed))
    r = H.check(drv.launch, version, case)
    assert r.ok, f"day {day} {version} at {H.size_str(size)} (seed {seed}): {r.message}"
