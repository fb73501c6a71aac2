import numpy as np
import pytest

from common import bf16
from common.gpu import sm_count
from days.day49_gemm_epilogue_fusion import driver, reference

K0, K1 = np.sqrt(2 / np.pi), 0.044715


def _inputs(t, c, seed=0):
    case = driver.make_case((t, c), np.random.default_rng(seed))
    return case, [case.inputs[k] for k in ("x", "w1", "b1", "w2", "b2", "r")]


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


# --- the reference against independent values -------------------------------------------------

def test_gelu_by_hand():
    # 0.5 (1 + tanh(sqrt(2/pi) (1 + 0.044715))) = 0.8411919906...; gelu(0) = 0; gelu(u) -> u for
    # large u and -> 0 for very negative u
    g = reference.gelu(np.array([0.0, 1.0, -1.0, 10.0, -10.0]))
    np.testing.assert_allclose(g[:3], [0.0, 0.8411919906082768, -0.15880800939172324], rtol=1e-12)
    assert abs(g[3] - 10) < 1e-12 and abs(g[4]) < 1e-12


def test_the_kernels_sigmoid_form_is_the_same_gelu():
    # the kernel evaluates u / (1 + exp(-2z)): 0.5 (1 + tanh z) = 1 / (1 + exp(-2z)) exactly
    u = np.linspace(-12, 12, 10001)
    z = K0 * (u + K1 * u ** 3)
    np.testing.assert_allclose(u / (1 + np.exp(-2 * z)), reference.gelu(u), rtol=1e-12, atol=1e-15)


def test_fp32_gelu_error_is_far_below_the_tolerance():
    # the same formula in float32 arithmetic (the kernel adds exp2/reciprocal approximations of
    # ~2^-22 relative): its relative L2 error is ~1e-7, a thousandth of TOL
    u = np.random.default_rng(1).standard_normal(100000).astype(np.float32) * 3
    z = np.float32(K0) * (u + np.float32(K1) * u * u * u)
    with np.errstate(over="ignore"):
        g32 = u / (np.float32(1) + np.exp(np.float32(-2) * z))
    assert _rel(g32.astype(np.float64), reference.gelu(u.astype(np.float64))) < 1e-6


def test_mlp_against_loops():
    t, c = 3, 8
    _, (x, w1, b1, w2, b2, r) = _inputs(t, c, 2)
    f = lambda b: bf16.from_bits(b).astype(float)  # noqa: E731
    X, W1, B1, W2, B2, R = map(f, (x, w1, b1, w2, b2, r))
    h = np.array([[reference.gelu(sum(X[i, k] * W1[j, k] for k in range(c)) + B1[j])
                   for j in range(4 * c)] for i in range(t)])
    hb = bf16.round(h).astype(float)
    y = np.array([[sum(hb[i, k] * W2[j, k] for k in range(4 * c)) + B2[j] + R[i, j]
                   for j in range(c)] for i in range(t)])
    got = reference.mlp(x, w1, b1, w2, b2, r)
    np.testing.assert_allclose(got["h"], h, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got["y"], y, rtol=1e-12, atol=1e-12)


def test_flops_and_bytes_by_hand():
    # 2 GEMMs of T x C x 4C multiply-adds, 2 FLOPs each: 2 * 2 * 2 * 8 * 32 = 2048
    assert reference.flops(2, 8) == 2048
    # the [T, 4C] and [T, C] intermediates written and read back, 2 bytes each: 4 * (64 + 16)
    assert reference.unfused_extra_bytes(2, 8) == 320


@pytest.fixture(scope="module")
def small_mlp():
    case, ins = _inputs(256, 64, 3)
    return case, ins, case.expected()


def test_tolerance_accepts_fused_and_unfused_rounding(small_mlp):
    """A fused kernel rounds h and y once; the unfused ones (v1, torch eager) round the GEMM's
    output to bf16 first, then again after the element-wise kernel: both stay within TOL."""
    case, (x, w1, b1, w2, b2, r), ref = small_mlp
    f = lambda b: bf16.from_bits(b).astype(float)  # noqa: E731
    assert _rel(bf16.round(ref["h"]), ref["h"]) < reference.TOL
    assert _rel(bf16.round(ref["y"]), ref["y"]) < reference.TOL
    pre = f(x) @ f(w1).T
    h1 = bf16.round(reference.gelu(bf16.round(pre).astype(float) + f(b1)))    # v1's roundings
    assert _rel(h1, ref["h"]) < reference.TOL
    y_pre = bf16.round(bf16.round(ref["h"]).astype(float) @ f(w2).T).astype(float)
    y1 = bf16.round(y_pre + f(b2) + f(r))
    assert _rel(y1, ref["y"]) < reference.TOL


@pytest.mark.parametrize("mistake", ["no bias", "no gelu", "no residual", "no b2"])
def test_tolerance_catches_a_missing_epilogue_step(small_mlp, mistake):
    case, (x, w1, b1, w2, b2, r), ref = small_mlp
    f = lambda b: bf16.from_bits(b).astype(float)  # noqa: E731
    pre = f(x) @ f(w1).T
    if mistake in ("no bias", "no gelu"):
        h = reference.gelu(pre) if mistake == "no bias" else pre + f(b1)
        assert _rel(bf16.round(h), ref["h"]) > 3 * reference.TOL
    else:
        y = bf16.round(ref["h"]).astype(float) @ f(w2).T
        y += f(b2) if mistake == "no residual" else f(r)
        assert _rel(bf16.round(y), ref["y"]) > 3 * reference.TOL


# --- tile choices -------------------------------------------------------------------------------

def test_wave_efficiency():
    assert driver.wave_efficiency(192, 132) == pytest.approx(192 / 264)
    assert driver.wave_efficiency(132, 132) == 1.0


@pytest.mark.parametrize("size,want", [
    ((8192, 768), 128),     # 192 tiles: 0.73 of 2 waves; 384: 0.97 of 3
    ((8192, 1024), 256),    # 256 tiles: 0.97 already
    ((8192, 1280), 128),    # 320: 0.81; 640: 0.97
    ((5000, 768), 256),     # 120: 0.91; 240: 0.91 -> no gain
])
def test_fc2_tile(size, want):
    assert driver.fc2_tile(*size, 132) == want


def test_kernels_of():
    assert driver.kernels_of("v5", (8192, 768), 132) == ("fc1_v5", "fc2_v5")
    assert driver.kernels_of("v1", (8192, 768), 132) == ("gemm_v1", "gemm_v1")
    assert driver.kernels_of("v3", (8192, 768), 132) == ("fc1_v3", "fc2_v3")
    assert driver.kernels_of("v4", (8192, 768), 132) == ("fc1_v4", "fc2_v4_bn128")
    assert driver.kernels_of("v4", (8192, 1024), 132) == ("fc1_v4", "fc2_v4_bn256")
    with pytest.raises(ValueError, match="unknown"):
        driver.kernels_of("v7", (8, 8), 132)


def test_shared_memory_fits():
    # 227 KB a block on Hopper, less the kernels' static shared memory (mbarriers, < 128 bytes)
    assert max(s for _, s in driver.KERNELS.values()) <= 227 * 1024 - 128
    assert driver.smem(256, 4, 2) == 4 * 48 * 1024 + 2 * 2 * 8192 + 1024
    for pm, pn, stages, nbuf, _, _ in driver.PINGPONG.values():
        assert driver.pingpong_smem(pm, pn, stages, nbuf) <= 227 * 1024 - 128
    # v5: 6 stages of (128 + 128) x 64 bf16, 2 warpgroups x 2 boxes of 64 x 64 bf16
    assert driver.pingpong_smem(128, 128, 6, 2) == 6 * 32 * 1024 + 2 * 2 * 8192 + 1024


def test_every_kernel_the_driver_names_is_in_kernel_cu():
    import re
    from pathlib import Path

    src = (Path(driver.__file__).parent / "kernel.cu").read_text()
    entries = set(re.findall(r'extern "C" __global__ void\s+(?:__\w+__\([^)]*\)\s*)*(\w+)\s*\(',
                             src))
    missing = (set(driver.KERNELS) | set(driver.PINGPONG)) - entries
    assert not missing, missing
    assert {"fc1_v5", "fc2_v5", "gemm_v5"} <= entries


# --- sizes and the public function -------------------------------------------------------------

def test_sizes_refused_in_words():
    with pytest.raises(ValueError, match="multiple of 8"):
        driver.validate_size((16, 100))
    with pytest.raises(ValueError, match="32-bit"):
        driver.validate_size((2 ** 20, 1024))


def _args(t=4, c=8):
    return [np.zeros((t, c)), np.zeros((4 * c, c)), np.zeros(4 * c), np.zeros((c, 4 * c)),
            np.zeros(c), np.zeros((t, c))]


@pytest.mark.parametrize("index,value,exc,msg", [
    (1, np.zeros((8, 32)), ValueError, "w1 must have shape"),
    (2, np.zeros(8), ValueError, "b1 must have shape"),
    (3, np.zeros((32, 8)), ValueError, "w2 must have shape"),
    (4, np.zeros(32), ValueError, "b2 must have shape"),
    (5, np.zeros((5, 8)), ValueError, "r must have shape"),
    (0, np.zeros(8), ValueError, "2-D"),
    (0, np.zeros((4, 8), complex), TypeError, "real"),
    (4, None, TypeError, "None"),
])
def test_mlp_bad_input(index, value, exc, msg):
    a = _args()
    a[index] = value
    with pytest.raises(exc, match=msg):
        driver.mlp(*a)


def test_mlp_width_not_a_multiple_of_8():
    with pytest.raises(ValueError, match="multiple of 8"):
        driver.mlp(*_args(4, 12))


def test_mlp_unknown_version():
    with pytest.raises(ValueError, match="v1, v2"):
        driver.mlp(*_args(), version="v9")


def test_mlp_empty_needs_no_gpu():
    h, y = driver.mlp(*_args(0, 8))
    assert h.shape == (0, 32) and y.shape == (0, 8)


# --- GPU ----------------------------------------------------------------------------------------

def _device(size, seed):
    from common import harness as H

    case = driver.make_case(size, np.random.default_rng(seed))
    return case, H.DeviceCase(case)


def _outputs(d, layers):
    from common.gpu import driver as cuda

    d.poison_outputs()
    for layer, kernel, kw in layers:
        driver.run_layer(d, layer, kernel, sm_count(), **kw)
    cuda().Context.synchronize()
    return d.array("h").get(), d.array("y").get()


@pytest.mark.parametrize("version", list(driver.VERSIONS))
def test_mlp_on_the_gpu(gpu, version):
    t, c = 131, 200
    case, ins = _inputs(t, c, 4)
    ref = case.expected()
    floats = [bf16.from_bits(a) for a in ins]
    h, y = driver.mlp(*floats, version=version)
    assert _rel(h, ref["h"]) < reference.TOL and _rel(y, ref["y"]) < reference.TOL


@pytest.mark.parametrize("size", [(300, 136), (1000, 768)])
def test_fused_store_paths_give_the_same_bits(gpu, size):
    """v2 (register stores), v3 (shared memory + TMA) and v4 (stmatrix + TMA) run the same
    128 x 256 GEMM and the same fp32 epilogue for fc1: their h must match bit for bit; fc2 on
    the same tiles too (v2, v3, and v4's 128 x 256 kernel)."""
    _, d = _device(size, 5)
    runs = {}
    for name, k1, k2 in (("v2", "fc1_v2", "fc2_v2"), ("v3", "fc1_v3", "fc2_v3"),
                         ("v4", "fc1_v4", "fc2_v4_bn256")):
        runs[name] = _outputs(d, [(1, k1, {}), (2, k2, {})])
    for name in ("v3", "v4"):
        np.testing.assert_array_equal(runs[name][0], runs["v2"][0], err_msg=f"h of {name}")
        np.testing.assert_array_equal(runs[name][1], runs["v2"][1], err_msg=f"y of {name}")


@pytest.mark.parametrize("fc1,fc2,kw", [
    ("fc1_s3b4", "fc2_v4_bn128", {}), ("fc1_bn128", "fc2_v4_bn256", {}),
    ("fc1_v4", "fc2_sk", {"mode": "hybrid"}), ("fc1_v4", "fc2_sk", {"mode": "pure"}),
    ("fc1_v4", "fc2_sk", {"mode": "sk1"}),
    ("fc1_v5", "fc2_v5", {}), ("fc1_v5_b4", "fc2_v5_64", {}), ("fc1_v5_64", "fc2_v5_c2", {}),
    ("fc1_v5_c2", "fc2_v5", {}), ("fc1_v5_direct", "fc2_v5", {}),
])
@pytest.mark.parametrize("size", [(2000, 136), (257, 1024)])
def test_sweep_candidates_are_correct(gpu, fc1, fc2, kw, size):
    case, d = _device(size, 6)
    h, y = _outputs(d, [(1, fc1, {}), (2, fc2, kw)])
    ref = case.expected()
    hf, yf = bf16.from_bits(h).astype(float), bf16.from_bits(y).astype(float)
    assert np.isfinite(hf).all() and np.isfinite(yf).all()
    assert _rel(hf, ref["h"]) < reference.TOL and _rel(yf, ref["y"]) < reference.TOL


# v5 (the ping-pong kernels) on ragged shapes in a child process: a protocol bug would otherwise
# hang (or, through the kernel's watchdog, fault) this test process. C = 8: fc2's N = 8 and
# fc1's K one partial k-block; T = 1, 33, 130, 257, 1000, 2000: partial tiles, an empty second
# fragment, blocks whose last unit falls on either warpgroup; clusters with an empty half.
V5_SMOKE = [(1, 8), (33, 768), (130, 200), (300, 136), (1000, 8), (257, 1024), (2000, 136)]
V5_PAIRS = [("fc1_v5", "fc2_v5"), ("fc1_v5_b4", "fc2_v5_64"), ("fc1_v5_64", "fc2_v5_c2"),
            ("fc1_v5_c2", "fc2_v5"), ("fc1_v5_direct", "fc2_v5")]

_SMOKE_CHILD = """
import json, sys
import numpy as np
from common import bf16, harness as H
from common.gpu import driver as cuda, sm_count
from days.day49_gemm_epilogue_fusion import driver, reference
sizes, pairs = json.loads(sys.argv[1]), json.loads(sys.argv[2])
sms = sm_count()
for size in sizes:
    case = driver.make_case(tuple(size), np.random.default_rng(2))
    ref = case.expected()
    d = H.DeviceCase(case)
    for fc1, fc2 in pairs:
        d.poison_outputs()
        driver.run_layer(d, 1, fc1, sms)
        driver.run_layer(d, 2, fc2, sms)
        cuda().Context.synchronize()
        errs = []
        for name in ("h", "y"):
            got = bf16.from_bits(d.array(name).get()).astype(np.float64)
            ok = bool(np.isfinite(got).all())
            err = float(np.linalg.norm(got - ref[name]) / max(np.linalg.norm(ref[name]), 1e-30))
            errs += [ok, err]
        print(json.dumps([size, fc1, fc2] + errs), flush=True)
"""


def test_v5_in_a_child_process(gpu):
    """Every v5 kernel on ragged shapes, in a child with a time limit: a deadlock fails this
    test instead of hanging the run (the kernel's own watchdog faults after ~9 s of waiting)."""
    import json
    import subprocess
    import sys

    from common.harness import ROOT

    try:
        r = subprocess.run([sys.executable, "-c", _SMOKE_CHILD, json.dumps(V5_SMOKE),
                            json.dumps(V5_PAIRS)], cwd=ROOT, capture_output=True, text=True,
                           timeout=480)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"v5 did not finish in 480 s (a deadlock?); output so far: {e.stdout!r}")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    rows = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("[")]
    assert len(rows) == len(V5_SMOKE) * len(V5_PAIRS), r.stdout
    bad = [row for row in rows if not (row[3] and row[5] and row[4] < reference.TOL
                                       and row[6] < reference.TOL)]
    assert not bad, bad


@pytest.mark.parametrize("size", [(300, 136), (1000, 768)])
@pytest.mark.parametrize("layer,kernel,twin", [
    (1, "fc1_v5", "fc1_bn128"), (2, "fc2_v5", "fc2_v4_bn128"),      # m64n128k16 both
    (1, "fc1_v5_64", "fc1_v4"), (2, "fc2_v5_64", "fc2_v4_bn256"),   # m64n256k16 both
    (1, "fc1_v5_b4", "fc1_v5"), (1, "fc1_v5_c2", "fc1_v5"), (1, "fc1_v5_direct", "fc1_v5"),
    (2, "fc2_v5_c2", "fc2_v5"),
])
def test_v5_gives_the_same_bits_as_its_twin(gpu, size, layer, kernel, twin):
    """A ping-pong kernel runs the same wgmma instruction over the same k order, and the same
    fp32 epilogue, as its cooperative twin (or the v5 it varies): h (fc1) or y (fc2, on the same
    h) must match bit for bit."""
    _, d = _device(size, 9)
    out = 0 if layer == 1 else 1
    first = [(1, "fc1_v4", {})] if layer == 2 else []
    a = _outputs(d, first + [(layer, kernel, {})])[out]
    b = _outputs(d, first + [(layer, twin, {})])[out]
    np.testing.assert_array_equal(a, b)


def test_v5_plain_gemm(gpu):
    """gemm_v5 (the sweep's GEMM-alone timing: no bias, no GELU) stores x W1^T."""
    case, d = _device((257, 200), 10)
    h, _ = _outputs(d, [(1, "gemm_v5", {})])
    x, w1 = (bf16.from_bits(case.inputs[k]).astype(np.float64) for k in ("x", "w1"))
    want = x @ w1.T
    assert _rel(bf16.from_bits(h).astype(np.float64), want) < reference.TOL


def test_torch_baseline_agrees(gpu):
    from common.runner import to_host

    case, d = _device((300, 136), 7)
    base = driver.baselines(d)
    if not base:
        pytest.skip("no torch")
    y = to_host(base["torch eager bf16"]()).astype(np.float64)
    assert _rel(y, case.expected()["y"]) < reference.TOL
