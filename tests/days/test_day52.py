import ctypes

import numpy as np
import pytest

from days.day52_cuda_graphs import reference


# --- the reference against hand-computed values and a second formulation ---------------------

def test_compose_by_hand():
    # f0(v) = 2v + 1, f1(v) = 3v - 1: f1(f0(v)) = 6v + 2
    assert reference.compose([2.0, 3.0], [1.0, -1.0]) == (6.0, 2.0)
    assert reference.compose([], []) == (1.0, 0.0)          # no step: the identity
    np.testing.assert_array_equal(reference.chain([1.0, 0.0, -2.0], [2.0, 3.0], [1.0, -1.0]),
                                  [8.0, 2.0, -10.0])
    # a[k] = -1 flips the sign each step: 4 flips are the identity, the b's alternate in sign
    np.testing.assert_array_equal(reference.chain([5.0], [-1] * 4, [1, 2, 3, 4]), [5 - 1 + 2 - 3 + 4])


def test_closed_form_equals_step_by_step():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(50)
    a = rng.uniform(-1.1, 1.1, 300)
    b = rng.standard_normal(300)
    np.testing.assert_allclose(reference.chain(x, a, b), reference.chain_step_by_step(x, a, b),
                               rtol=1e-10, atol=1e-10)


def test_exact_inputs_are_exact_in_float32():
    x, a, b = reference.exact_inputs(5000, 257, np.random.default_rng(1))
    assert x.dtype == a.dtype == b.dtype == np.float32
    assert set(np.unique(a)) <= {-1.0, 1.0} and np.all(np.abs(b) <= 4) and np.all(np.abs(x) <= 1000)
    y = x.copy()
    for ak, bk in zip(a, b):                         # float32 all the way, as the GPU does
        y = (ak * y + bk).astype(np.float32)
    np.testing.assert_array_equal(y.astype(np.float64), reference.chain(x, a, b))


def test_make_case_asks_for_zero_error_and_counts_flops():
    from days.day52_cuda_graphs import driver

    case = driver.make_case((7, 33), np.random.default_rng(2))
    assert case.tol == 0.0 and case.flops == 2 * 7 * 33
    assert case.outputs == {"y": ((33,), np.float32)}
    assert case.expected()["y"].shape == (33,)


def test_sizes_and_limits():
    from days.day52_cuda_graphs import driver

    driver.validate_size((driver.MAX_KERNELS, 2 ** 31 - 1))
    with pytest.raises(ValueError, match="at most 100000"):
        driver.validate_size((driver.MAX_KERNELS + 1, 10))
    with pytest.raises(ValueError, match="32-bit"):
        driver.validate_size((10, 2 ** 31))
    assert (1000, 1024) in driver.BENCH_SIZES and driver.BAR[0]["over"] == ("v1", 3.0)


def test_bar_judges_graph_over_plain_launches():
    from common.bars import judge
    from days.day52_cuda_graphs import driver

    def rec(v1, v3):
        rows = [{"version": "v1", "ok": True, "median_ms": v1},
                {"version": "v3", "ok": True, "median_ms": v3}]
        return {"cases": [{"size": [1000, 1024], "rows": rows}]}

    assert judge(driver.BAR, rec(5.0, 1.0))[0] is True
    ok, fig = judge(driver.BAR, rec(5.0, 2.0))
    assert ok is False and "2.50x v1" in fig


# --- the public function refuses bad input ---------------------------------------------------

@pytest.mark.parametrize("x,a,b,exc,word", [
    (np.ones(3, complex), [1.0], [0.0], TypeError, "complex"),
    (np.ones((2, 2)), [1.0], [0.0], ValueError, "1-D"),
    (None, [1.0], [0.0], TypeError, "None"),
    (np.ones(3), [1.0, 2.0], [0.0], ValueError, "one shape"),
    (np.ones(3), [[1.0]], [[0.0]], ValueError, "1-D"),
    (np.ones(3), ["a"], ["b"], TypeError, "dtype"),
    (np.ones(3), np.ones(100_001), np.ones(100_001), ValueError, "at most 100000"),
])
def test_chain_refuses_bad_input(x, a, b, exc, word):
    from days.day52_cuda_graphs.driver import chain

    with pytest.raises(exc, match=word):
        chain(x, a, b)


def test_chain_version_and_empty():
    from days.day52_cuda_graphs.driver import BEST, chain

    with pytest.raises(ValueError, match="unknown version 'v9'.*v1, v2, v3, v4"):
        chain(np.ones(2), [1.0], [0.0], version="v9")
    assert chain(np.ones(0), [2.0], [1.0]).shape == (0,)                 # no launch
    y = chain(np.arange(3, dtype=np.int64), np.ones(0), np.ones(0))       # K = 0: the identity
    assert y.dtype == np.float32 and np.array_equal(y, [0.0, 1.0, 2.0])
    assert BEST == "v4"


def test_launch_refuses_unknown_version():
    from days.day52_cuda_graphs.driver import launch

    with pytest.raises(ValueError, match="unknown version"):
        launch("v7", None)


# --- common/graphs.py: capture, update and re-instantiate against a fake driver --------------

class _FakeDriver:
    """Records the graph calls; cuGraphExecUpdate_v2 answers `update_code`."""

    def __init__(self, update_code=0, nodes=3):
        self.update_code, self.nodes, self.calls, self.next = update_code, nodes, [], 100

    def _handle(self, out):
        self.next += 1
        ctypes.cast(out, ctypes.POINTER(ctypes.c_void_p))[0] = self.next
        return self.next

    def cuStreamBeginCapture_v2(self, stream, mode):
        self.calls.append(("begin", stream.value, mode))
        return 0

    def cuStreamEndCapture(self, stream, out):
        self.calls.append(("end", self._handle(out)))
        return 0

    def cuGraphGetNodes(self, graph, nodes, count):
        ctypes.cast(count, ctypes.POINTER(ctypes.c_size_t))[0] = self.nodes
        return 0

    def cuGraphInstantiateWithFlags(self, out, graph, flags):
        self.calls.append(("instantiate", graph.value, self._handle(out)))
        return 0

    def cuGraphExecUpdate_v2(self, exe, graph, info):
        self.calls.append(("update", exe.value, graph.value))
        return self.update_code

    def cuGraphExecDestroy(self, exe):
        self.calls.append(("exec_destroy", exe.value))
        return 0

    def cuGraphDestroy(self, graph):
        self.calls.append(("graph_destroy", graph.value))
        return 0

    def cuGraphLaunch(self, exe, stream):
        self.calls.append(("launch", exe.value, stream.value))
        return 0

    def cuGraphUpload(self, exe, stream):
        self.calls.append(("upload", exe.value, stream.value))
        return 0

    def cuGetErrorName(self, code, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"CUDA_ERROR_X"
        return 0

    def cuGetErrorString(self, code, out):
        ctypes.cast(out, ctypes.POINTER(ctypes.c_char_p))[0] = b"x"
        return 0


def test_graph_update_patches_in_place():
    from common.graphs import CudaGraph

    lib = _FakeDriver(update_code=0)
    g = CudaGraph(7, lambda: None, lib=lib)
    assert g.nodes == 3 and g.capture_ms >= 0 and g.instantiate_ms >= 0 and g.update_ms is None
    assert lib.calls == [("begin", 7, 0), ("end", 101), ("instantiate", 101, 102)]
    g.launch(0)
    g.upload()
    assert lib.calls[-2:] == [("launch", 102, None), ("upload", 102, 7)]  # c_void_p(0).value is None
    lib.calls.clear()
    assert g.update(lambda: None) is True
    # new capture 103 patched into exec 102; the old graph 101 is dropped, the exec kept
    assert lib.calls == [("begin", 7, 0), ("end", 103), ("update", 102, 103), ("graph_destroy", 101)]
    assert g.update_ms >= 0
    lib.calls.clear()
    g.close()
    assert lib.calls == [("exec_destroy", 102), ("graph_destroy", 103)]


def test_graph_update_reinstantiates_when_the_topology_changed():
    from common.graphs import CudaGraph

    lib = _FakeDriver(update_code=910)  # CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE
    g = CudaGraph(7, lambda: None, lib=lib)
    lib.calls.clear()
    assert g.update(lambda: None) is False
    assert lib.calls == [("begin", 7, 0), ("end", 103), ("update", 102, 103),
                         ("instantiate", 103, 104), ("exec_destroy", 102), ("graph_destroy", 101)]
    g.launch()
    assert lib.calls[-1] == ("launch", 104, 7)


def test_graph_update_other_errors_raise():
    from common.graphs import CudaDriverError, CudaGraph

    lib = _FakeDriver(update_code=1)
    g = CudaGraph(7, lambda: None, lib=lib)
    with pytest.raises(CudaDriverError, match="cuGraphExecUpdate failed: CUDA_ERROR_X"):
        g.update(lambda: None)
    assert ("graph_destroy", 103) in lib.calls   # the new capture is not leaked
    g.close()
    with pytest.raises(RuntimeError, match="closed"):
        g.update(lambda: None)


def test_draw_per_kernel(tmp_path):
    plt = pytest.importorskip("matplotlib.pyplot")
    from days.day52_cuda_graphs import driver

    rec = {"device": {"name": "GPU"}, "date": "today",
           "extra": {"per_kernel": {"n": 1024, "kernels": [10, 100],
                                    "wall_us_per_kernel": {"v1": [6.0, 5.0], "v3": [2.0, 1.0]}}}}
    assert driver.draw_per_kernel(rec, tmp_path / "p.png", plt) and (tmp_path / "p.png").exists()
    assert driver.draw_per_kernel({"extra": {}}, tmp_path / "q.png", plt) is False


# --- GPU ----------------------------------------------------------------------------------------

def test_every_version_on_float_values(gpu):
    from common.check import compare
    from days.day52_cuda_graphs import driver

    rng = np.random.default_rng(52)
    x = rng.standard_normal(3001).astype(np.float32)
    a = rng.uniform(0.9, 1.05, 777).astype(np.float32)
    b = rng.standard_normal(777).astype(np.float32) * 0.01
    outs = {v: driver.chain(x, a, b, version=v) for v in driver.VERSIONS}
    for v, y in outs.items():
        assert compare(y, reference.chain(x, a, b)).ok, v
        np.testing.assert_array_equal(y, outs["v1"], err_msg=f"{v}: the same fmaf sequence, other bits")


def test_graph_is_cached_and_update_repoints_it(gpu):
    from days.day52_cuda_graphs import driver

    up = driver.graph_update(kernels=50, n=100)
    assert up["patched_in_place"] and up["ok_update"] and up["ok_fresh"]
    case = driver.make_case((20, 65), np.random.default_rng(3))
    from common import harness as H

    d = H.DeviceCase(case)
    assert driver.graph_of(d) is driver.graph_of(d) and driver.graph_of(d).nodes == 20
