import numpy as np
import pytest

from common.check import compare
from days.day12_pytorch_integration import reference


# --- CPU: the reference against independent values ------------------------------------------------

def test_gelu_by_hand():
    # gelu(1) = 1 / (1 + exp(-2u)) with u = sqrt(2/pi) * 1.044715 (0.5 (1 + tanh u) = sigmoid(2u))
    u = np.sqrt(2 / np.pi) * 1.044715
    assert reference.gelu(1.0) == pytest.approx(1 / (1 + np.exp(-2 * u)), rel=1e-15)
    assert reference.gelu(1.0) == pytest.approx(0.8411919906082768, rel=1e-15)
    assert reference.gelu(0.0) == 0.0
    assert reference.gelu(10.0) == pytest.approx(10.0, rel=1e-15)   # tanh saturates: identity
    assert abs(reference.gelu(-10.0)) < 1e-30                         # and zero on the left


def test_gelu_odd_part_is_the_identity():
    # tanh is odd, so gelu(z) - gelu(-z) = 0.5 z (1 + t) + 0.5 z (1 - t) = z
    z = np.linspace(-6, 6, 1001)
    np.testing.assert_allclose(reference.gelu(z) - reference.gelu(-z), z, rtol=1e-13, atol=1e-14)


def test_gelu_grad_matches_finite_differences():
    z = np.linspace(-7, 7, 2001)
    h = 1e-5
    numeric = (reference.gelu(z + h) - reference.gelu(z - h)) / (2 * h)
    np.testing.assert_allclose(reference.gelu_grad(z), numeric, rtol=1e-8, atol=1e-9)
    assert reference.gelu_grad(0.0) == 0.5


def test_backward_reference_sums_the_bias_gradient_over_rows():
    rng = np.random.default_rng(1)
    x, b, gy = rng.standard_normal((3, 2, 5)), rng.standard_normal(5), rng.standard_normal((3, 2, 5))
    gx, gb = reference.bias_gelu_backward(gy, x, b)
    assert gx.shape == x.shape and gb.shape == (5,)
    np.testing.assert_allclose(gb, sum(gx[i, j] for i in range(3) for j in range(2)), rtol=1e-13)
    # db is the derivative of sum(gy * y) with respect to b: check one entry numerically
    h = 1e-6
    e = np.zeros(5)
    e[2] = h
    f = lambda bb: float((gy * reference.bias_gelu(x, bb)).sum())
    assert gb[2] == pytest.approx((f(b + e) - f(b - e)) / (2 * h), rel=1e-7)


def test_tiling_by_hand():
    from days.day12_pytorch_integration.driver import tiling, vec_for

    wave = 132 * 8  # an H100: 132 SMs x 8 blocks of 256 threads
    # GPT-2 MLP width: 768 float4 per row, 3 blocks of 256 across, 1056 / 3 = 352 block-rows
    assert vec_for(3072) == 4
    assert tiling(16384, 3072, 4, wave) == ((3, 352, 1), (256, 1, 1))
    # 5 columns: the scalar path, 32 x 8 threads, one block across, 1000 / 8 = 125 down
    assert vec_for(5) == 1
    assert tiling(1000, 5, 1, wave) == ((1, 125, 1), (32, 8, 1))
    # a misaligned pointer forces the scalar path even when cols % 4 == 0
    assert vec_for(4096, aligned=False) == 1
    # float64: two per 16 bytes
    assert vec_for(12, itemsize=8) == 2 and vec_for(13, itemsize=8) == 1
    assert tiling(5, 12, 2, wave) == ((1, 1, 1), (32, 8, 1))
    # 100003 columns: 391 blocks across, 1056 // 391 = 2 block-rows
    assert tiling(2, 100003, 1, wave) == ((391, 2, 1), (256, 1, 1))
    # a kernel that fits only 5 blocks per SM gets a smaller wave: 660 // 3 = 220 block-rows
    assert tiling(16384, 3072, 4, 132 * 5) == ((3, 220, 1), (256, 1, 1))


def test_autograd_wiring_with_a_stand_in_extension(monkeypatch):
    """The autograd.Function and the custom op, on the CPU, with torch ops standing in for the
    compiled extension: checks what is saved, the contiguity handling and the gradient routing."""
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from days.day12_pytorch_integration import torch_op

    class StandIn:
        @staticmethod
        def forward(x, b):
            assert x.is_contiguous() and b.is_contiguous()
            return torch.from_numpy(reference.bias_gelu(x.detach().numpy(), b.detach().numpy()))

        @staticmethod
        def backward(gy, x, b):
            assert gy.is_contiguous()
            gx, gb = reference.bias_gelu_backward(gy.numpy(), x.numpy(), b.numpy())
            return torch.from_numpy(gx), torch.from_numpy(gb)

    monkeypatch.setattr(torch_op, "extension", lambda verbose=False: StandIn)
    monkeypatch.setattr(torch_op, "DEVICE_TYPE", "cpu")  # the stand-in computes on the CPU
    x = torch.randn(4, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(6, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(torch_op.BiasGELU.apply, (x, b))
    assert torch.autograd.gradcheck(torch_op.bias_gelu_op, (x, b))
    torch_op.BiasGELU.apply(x.t().contiguous().t(), b).sum().backward()  # expanded grad_y
    assert x.grad.shape == x.shape and b.grad.shape == b.shape


# --- CPU: the public functions refuse bad input before anything reaches the GPU ------------------

def _raises(exc, word, fn):
    with pytest.raises(exc) as e:
        fn()
    assert word in str(e.value), str(e.value)


BAD_PAIRS = [
    (np.ones((2, 3), np.complex128), np.ones(3), TypeError, "complex"),
    (np.ones((2, 3)), np.ones(3, bool), TypeError, "booleans"),
    ("x", np.ones(3), TypeError, "string"),
    (np.float32(1.0), np.ones(1), ValueError, "scalar"),
    (np.ones((2, 3)), np.ones(4), ValueError, "(3,)"),          # one bias per column
    (np.ones((2, 3)), np.ones((1, 3)), ValueError, "1-D"),      # b is 1-D, not broadcast rows
    ([[1.0, 2.0], [3.0]], np.ones(2), ValueError, "ragged"),
]


@pytest.mark.parametrize("x,b,exc,word", BAD_PAIRS)
def test_bias_gelu_refuses_bad_input(x, b, exc, word):
    from days.day12_pytorch_integration import driver

    _raises(exc, word, lambda: driver.bias_gelu(x, b))


@pytest.mark.parametrize("x,b,exc,word", BAD_PAIRS)
def test_bias_gelu_backward_refuses_bad_input(x, b, exc, word):
    from days.day12_pytorch_integration import driver

    gy = np.ones(np.shape(x)) if not isinstance(x, (str, list)) else np.ones((2, 2))
    _raises(exc, word, lambda: driver.bias_gelu_backward(gy, x, b))


def test_backward_needs_grad_y_shaped_like_x():
    from days.day12_pytorch_integration import driver

    _raises(ValueError, "grad_y", lambda: driver.bias_gelu_backward(np.ones((3, 2)), np.ones((2, 3)),
                                                                    np.ones(3)))
    _raises(TypeError, "complex", lambda: driver.bias_gelu_backward(np.ones((2, 3), complex),
                                                                    np.ones((2, 3)), np.ones(3)))


def test_unknown_versions_are_refused_and_never_run_another_kernel():
    from days.day12_pytorch_integration import driver

    _raises(ValueError, "v1, v2", lambda: driver.bias_gelu(np.ones((2, 3)), np.ones(3), "v3"))
    _raises(TypeError, "version", lambda: driver.bias_gelu(np.ones((2, 3)), np.ones(3), 2))
    # launch_forward ran v2 for any name but "v1"
    _raises(ValueError, "unknown version", lambda: driver.launch_forward("v0", 0, 0, 0, 1, 1))


def test_empty_inputs_launch_nothing():
    from days.day12_pytorch_integration import driver

    y = driver.bias_gelu(np.ones((0, 5), np.float32), np.ones(5))
    assert y.shape == (0, 5) and y.dtype == np.float32
    assert driver.bias_gelu(np.ones((4, 0)), np.ones(0)).shape == (4, 0)
    gx, gb = driver.bias_gelu_backward(np.ones((0, 3)), np.ones((0, 3)), np.ones(3))
    assert gx.shape == (0, 3) and gx.dtype == np.float64
    np.testing.assert_array_equal(gb, np.zeros(3))                 # a sum over no rows


def test_dtype_follows_x():
    from days.day12_pytorch_integration import driver

    x, b, dt = driver._as_pair(np.ones((2, 3)), np.ones(3, np.float32))
    assert dt == np.float64 and x.dtype == b.dtype == np.float64
    x, b, dt = driver._as_pair(np.ones((2, 3), np.int64), np.ones(3))  # integers: float32
    assert dt == np.float32 and b.dtype == np.float32


def test_bar_is_gradcheck():
    from common.bars import judge
    from days.day12_pytorch_integration import driver

    rows = [["BiasGELU.apply", "5x12", "pass"], ["bias_gelu_op", "3x13", "pass"]]
    assert judge(driver.BAR, {"extra": {"torch": {"gradcheck": rows}}})[0] is True
    rows[1][2] = "FAIL"
    ok, fig = judge(driver.BAR, {"extra": {"torch": {"gradcheck": rows}}})
    assert not ok and "1 of 2" in fig
    assert judge(driver.BAR, {"extra": {"torch": "not installed"}})[0] is False
    assert driver.BEST == "v2"
    assert any(r % 2 and c % 2 for r, c in driver.BENCH_SIZES)     # an awkward shape is timed


# --- CPU with torch: the torch-facing functions refuse bad tensors in Python ----------------------

BAD_TENSORS = [  # (what, make(torch) -> (x, b), exception, word)
    ("int x", lambda t: (t.ones(2, 3, dtype=t.int32), t.ones(3, dtype=t.int32)), TypeError, "float32 or float64"),
    ("half x", lambda t: (t.ones(2, 3, dtype=t.float16), t.ones(3, dtype=t.float16)), TypeError, "float32"),
    ("mixed dtypes", lambda t: (t.ones(2, 3), t.ones(3, dtype=t.float64)), TypeError, "one dtype"),
    ("numpy b", lambda t: (t.ones(2, 3), np.ones(3, np.float32)), TypeError, "torch.Tensor"),
    ("short b", lambda t: (t.ones(2, 3), t.ones(2)), ValueError, "x.shape[-1] = 3"),
    ("2-D b", lambda t: (t.ones(2, 3), t.ones(1, 3)), ValueError, "1-D"),
    ("scalar x", lambda t: (t.tensor(1.0), t.ones(1)), ValueError, "scalar"),
    ("cpu tensors", lambda t: (t.ones(2, 3), t.ones(3)), ValueError, "CUDA"),
]


@pytest.mark.parametrize("what,make,exc,word", BAD_TENSORS, ids=[b[0] for b in BAD_TENSORS])
def test_torch_facing_functions_refuse_bad_tensors(monkeypatch, what, make, exc, word):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from days.day12_pytorch_integration import driver, torch_op

    def no_build(verbose=False):
        raise AssertionError("the extension was reached with bad tensors")

    monkeypatch.setattr(torch_op, "extension", no_build)
    x, b = make(torch)
    _raises(exc, word, lambda: driver.on_torch(x, b))
    _raises(exc, word, lambda: torch_op.bias_gelu(x, b))
    if isinstance(b, torch.Tensor):  # (the custom ops' schema refuses non-tensors itself)
        _raises(exc, word, lambda: torch_op.bias_gelu_op(x, b))
        _raises(exc, word, lambda: torch_op.bias_gelu_backward_op(torch.ones_like(x), x, b))


def test_torch_backward_op_checks_grad_y(monkeypatch):
    torch = pytest.importorskip("torch", reason="torch is not installed")
    from days.day12_pytorch_integration import torch_op

    monkeypatch.setattr(torch_op, "DEVICE_TYPE", "cpu")
    x, b = torch.ones(2, 3), torch.ones(3)
    _raises(ValueError, "grad_y", lambda: torch_op.bias_gelu_backward_op(torch.ones(3, 2), x, b))
    _raises(TypeError, "one dtype", lambda: torch_op.bias_gelu_backward_op(x.double(), x, b))


# --- GPU without torch: the pycuda route ----------------------------------------------------------

@pytest.mark.parametrize("shape", [(7, 33), (1000, 5), (3, 1001), (257, 3072), (70000, 4), (2, 3, 8)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_backward_kernels_from_pycuda(gpu, shape, dtype):
    from days.day12_pytorch_integration import driver

    rng = np.random.default_rng(sum(shape))
    x = (rng.standard_normal(shape) * 2).astype(dtype)
    b = rng.standard_normal(shape[-1]).astype(dtype)
    gy = rng.standard_normal(shape).astype(dtype)
    gx, gb = driver.bias_gelu_backward(gy, x, b)
    rgx, rgb = reference.bias_gelu_backward(gy, x, b)
    for name, out, ref in (("grad_x", gx, rgx), ("grad_b", gb, rgb)):
        r = compare(out, ref, name=name)
        assert r.ok, f"{shape} {np.dtype(dtype).name}: {r.message}"


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_float64_forward_from_pycuda(gpu, version):
    from days.day12_pytorch_integration import driver

    rng = np.random.default_rng(64)
    for shape in [(5, 12), (3, 13), (1, 1)]:
        x, b = rng.standard_normal(shape) * 3, rng.standard_normal(shape[-1])
        r = compare(driver.bias_gelu(x, b, version), reference.bias_gelu(x, b))  # 1e-12 for float64
        assert r.ok, f"{version} {shape}: {r.message}"


def test_on_torch_edges_on_gpu(gpu):
    # an empty x comes back empty (no launch); one element and an odd width take the scalar path
    torch = pytest.importorskip("torch", reason="torch is not installed")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from days.day12_pytorch_integration import driver

    e = driver.on_torch(torch.ones(0, 7, device="cuda"), torch.ones(7, device="cuda"))
    assert e.shape == (0, 7) and e.is_cuda
    for shape in [(1, 1), (3, 1001), (2, 5, 3)]:
        x, b = _inputs(torch, shape, torch.float32, seed=len(shape))
        for v in driver.VERSIONS:
            r = compare(driver.on_torch(x, b, v).cpu().numpy(),
                        reference.bias_gelu(x.cpu().numpy(), b.cpu().numpy()))
            assert r.ok, f"{v} {shape}: {r.message}"


# --- GPU with torch: the extension, autograd, gradcheck, streams, torch.compile ---------------------

@pytest.fixture(scope="module")
def ext(gpu):
    torch = pytest.importorskip("torch", reason="torch is not installed: the PyTorch part of day 12 "
                                                "is skipped")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA here")
    from days.day12_pytorch_integration import torch_op

    try:
        return torch_op.extension()
    except torch_op.ExtensionUnavailable as e:
        if "ninja" in str(e) or "toolkit" in str(e):
            pytest.skip(f"cannot build a torch extension here: {e}")
        raise  # a compiler error in our sources is a failure, not a skip


def _inputs(torch, shape, dtype, seed=0, offset=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    n = int(np.prod(shape))
    x = (torch.randn(n + offset, dtype=dtype, device="cuda", generator=g) * 2)[offset:].view(shape)
    b = torch.randn(shape[-1], dtype=dtype, device="cuda", generator=g)
    return x, b


@pytest.mark.parametrize("shape", [(7, 33), (257, 3072), (2, 3, 8), (1000, 5), (1, 1)])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
def test_extension_forward_and_backward(ext, shape, dtype_name):
    import torch

    dtype = getattr(torch, dtype_name)
    x, b = _inputs(torch, shape, dtype)
    y = ext.forward(x, b)
    assert y.shape == x.shape and y.dtype == dtype and y.is_contiguous()
    r = compare(y.cpu().numpy(), reference.bias_gelu(x.cpu().numpy(), b.cpu().numpy()))
    assert r.ok, r.message
    gy = torch.randn_like(x)
    gx, gb = ext.backward(gy, x, b)
    rgx, rgb = reference.bias_gelu_backward(gy.cpu().numpy(), x.cpu().numpy(), b.cpu().numpy())
    assert compare(gx.cpu().numpy(), rgx, name="grad_x").ok
    assert compare(gb.cpu().numpy(), rgb, name="grad_b").ok


def test_extension_takes_the_scalar_path_for_misaligned_tensors(ext):
    import torch

    x, b = _inputs(torch, (64, 256), torch.float32, offset=1)  # x starts 4 bytes into a buffer
    assert x.is_contiguous() and x.data_ptr() % 16 == 4
    r = compare(ext.forward(x, b).cpu().numpy(), reference.bias_gelu(x.cpu().numpy(), b.cpu().numpy()))
    assert r.ok, r.message
    gx, gb = ext.backward(torch.ones_like(x), x, b)
    _, rgb = reference.bias_gelu_backward(np.ones(x.shape), x.cpu().numpy(), b.cpu().numpy())
    assert compare(gb.cpu().numpy(), rgb).ok


def test_extension_rejects_bad_inputs_with_clear_messages(ext):
    import torch

    x, b = _inputs(torch, (8, 16), torch.float32)
    with pytest.raises(RuntimeError, match="CUDA tensors"):
        ext.forward(x.cpu(), b.cpu())
    with pytest.raises(RuntimeError, match="contiguous"):
        ext.forward(x.t(), torch.zeros(8, device="cuda"))
    with pytest.raises(RuntimeError, match="differ in dtype"):
        ext.forward(x, b.double())
    with pytest.raises(RuntimeError, match="float32 or float64"):
        ext.forward(x.half(), b.half())
    with pytest.raises(RuntimeError, match="x.size\\(-1\\) elements"):
        ext.forward(x, b[:3])


@pytest.mark.parametrize("shape", [(5, 12), (3, 13)])  # double2 path, scalar path
def test_gradcheck_float64(ext, shape):
    import torch

    from days.day12_pytorch_integration import torch_op

    x, b = _inputs(torch, shape, torch.float64, seed=12)
    x.requires_grad_()
    b.requires_grad_()
    assert torch.autograd.gradcheck(torch_op.BiasGELU.apply, (x, b))
    assert torch.autograd.gradcheck(torch_op.bias_gelu_op, (x, b))


def test_autograd_matches_torch_and_takes_noncontiguous_gradients(ext):
    import torch
    import torch.nn.functional as F

    from days.day12_pytorch_integration import torch_op

    x, b = _inputs(torch, (4, 16, 32), torch.float64, seed=3)
    x1, b1 = x.clone().requires_grad_(), b.clone().requires_grad_()
    x2, b2 = x.clone().requires_grad_(), b.clone().requires_grad_()
    torch_op.BiasGELU.apply(x1, b1).sum().backward()  # grad_y is an expanded (stride 0) tensor
    F.gelu(x2 + b2, approximate="tanh").sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(b1.grad, b2.grad, rtol=1e-12, atol=1e-12)


def test_extension_launches_on_torchs_current_stream(ext):
    import torch

    if not hasattr(torch.cuda, "_sleep"):
        pytest.skip("torch.cuda._sleep is not available")
    x, b = _inputs(torch, (512, 1024), torch.float32, seed=5)
    want = reference.bias_gelu(x.cpu().numpy(), b.cpu().numpy())
    s = torch.cuda.Stream()  # torch's side streams do not wait for the legacy default stream
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(50_000_000)  # keep s busy (tens of ms)
        x_late = x * 1.0               # written on s after the sleep
        y = ext.forward(x_late, b)     # must run on s, after x_late exists
    s.synchronize()
    r = compare(y.cpu().numpy(), want)
    assert r.ok, f"the kernel did not wait for the work before it on the current stream: {r.message}"


def test_pycuda_and_the_extension_run_the_same_kernel(ext):
    import torch

    from days.day12_pytorch_integration import driver

    x, b = _inputs(torch, (300, 1024), torch.float32, seed=9)
    torch.testing.assert_close(driver.on_torch(x, b, "v2"), ext.forward(x, b), rtol=2e-6, atol=1e-7)
    with torch.cuda.stream(torch.cuda.Stream()):
        with pytest.raises(ValueError, match="legacy default stream"):
            driver.on_torch(x, b)


def test_custom_op_passes_opcheck_and_compiles_without_graph_breaks(ext):
    import torch

    from days.day12_pytorch_integration import torch_op

    x, b = _inputs(torch, (16, 64), torch.float32, seed=7)
    torch.library.opcheck(torch_op.bias_gelu_op, (x, b))
    is_supported = getattr(torch._dynamo, "is_dynamo_supported", lambda: True)
    if not is_supported():
        pytest.skip("torch.compile (dynamo) is not supported on this Python")

    def f(x, b):
        return torch_op.bias_gelu_op(x, b) * 2

    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")  # fullgraph: no breaks allowed
    x1, b1 = x.clone().requires_grad_(), b.clone().requires_grad_()
    x2, b2 = x.clone().requires_grad_(), b.clone().requires_grad_()
    compiled(x1, b1).sum().backward()
    f(x2, b2).sum().backward()
    torch.testing.assert_close(x1.grad, x2.grad)
    torch.testing.assert_close(b1.grad, b2.grad)
