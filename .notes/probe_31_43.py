"""One GPU call before days 31-43 were written: the library figures their bars are set against,
and the dp4a / FFMA instruction rates of this GPU (torch + CuPy + nvcc only, no pycuda).
    python .notes/probe_31_43.py
Each figure: median of 20 timed calls, an L2 flush (a 256 MB read) before each."""
import os
import subprocess
import tempfile

import numpy as np
import torch

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
dev = "cuda"
flush = torch.empty(64 * 1024 * 1024, dtype=torch.float32, device=dev)


def bench(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    ts = []
    for _ in range(reps):
        flush.sum()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize()
        ts.append(a.elapsed_time(b))
    return float(np.median(ts))


p = torch.cuda.get_device_properties(0)
print(f"GPU {p.name}, {p.multi_processor_count} SMs, L2 {p.L2_cache_size >> 20} MB")

# --- instruction rates: dp4a vs ffma ------------------------------------------------------
SRC = r"""
extern "C" __global__ void rate_dp4a(int *out, int n, int a0, int b0) {
    int acc[8]; int a = a0 ^ threadIdx.x, b = b0 + threadIdx.x;
    #pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = j;
    for (int i = 0; i < n; ++i) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = __dp4a(a, b + j, acc[j]);
    }
    int s = 0;
    #pragma unroll
    for (int j = 0; j < 8; ++j) s += acc[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
extern "C" __global__ void rate_ffma(float *out, int n, float a0, float b0) {
    float acc[8]; float a = a0 + threadIdx.x, b = b0;
    #pragma unroll
    for (int j = 0; j < 8; ++j) acc[j] = j;
    for (int i = 0; i < n; ++i) {
        #pragma unroll
        for (int j = 0; j < 8; ++j) acc[j] = fmaf(a, acc[j], b);
    }
    float s = 0;
    #pragma unroll
    for (int j = 0; j < 8; ++j) s += acc[j];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
"""
try:
    import cupy as cp
    mod = cp.RawModule(code=SRC, options=("-arch=sm_90",))
    blocks, threads, n = p.multi_processor_count * 8, 256, 4096
    out_i = cp.empty(blocks * threads, cp.int32)
    out_f = cp.empty(blocks * threads, cp.float32)
    clock_ghz = None
    for name, out, args in (("rate_dp4a", out_i, (np.int32(n), np.int32(0x01020304), np.int32(0x05060708))),
                            ("rate_ffma", out_f, (np.int32(n), np.float32(0.999), np.float32(1e-3)))):
        k = mod.get_function(name)
        f = lambda: k((blocks,), (threads,), (out,) + args)
        ms = bench(f, reps=10)
        insts = blocks * threads * n * 8
        print(f"{name}: {insts / ms / 1e9:.1f} G inst/s per GPU = "
              f"{insts / ms / 1e9 / p.multi_processor_count:.2f} G inst/s/SM")
    print(subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv"],
                         capture_output=True, text=True).stdout)
except Exception as e:
    print("rates failed:", e)

# --- day 31: cuDNN fp32 conv ---------------------------------------------------------------
F = torch.nn.functional
for (n, c, h, w, k) in [(64, 1, 28, 28, 8), (64, 8, 14, 14, 16), (32, 64, 56, 56, 64)]:
    x = torch.randn(n, c, h, w, device=dev); wt = torch.randn(k, c, 3, 3, device=dev); b = torch.randn(k, device=dev)
    ms = bench(lambda: F.conv2d(x, wt, b, padding=1))
    fl = 2 * n * k * h * w * c * 9
    print(f"conv2d {n}x{c}x{h}x{w}->{k}: {ms * 1e3:.1f} us, {fl / ms / 1e9:.2f} TFLOP/s")

# --- day 35: layernorm backward -------------------------------------------------------------
for (n, c) in [(8192, 768), (8192, 4096)]:
    x = torch.randn(n, c, device=dev); dy = torch.randn(n, c, device=dev)
    g = torch.randn(c, device=dev); bta = torch.randn(c, device=dev)
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, (c,), g, bta, 1e-5)
    f = lambda: torch.ops.aten.native_layer_norm_backward(dy, x, (c,), mean, rstd, g, bta, [True, True, True])
    ms = bench(f)
    by = (3 * n * c + 3 * c + 2 * n) * 4
    print(f"LN backward {n}x{c}: {ms * 1e3:.1f} us, {by / ms / 1e6:.0f} GB/s")

# --- day 38: sort ---------------------------------------------------------------------------
try:
    import cupy as cp
    n = 1 << 26
    keys = cp.random.randint(0, 2**32 - 1, n, dtype=cp.uint64).astype(cp.uint32)
    for name, f in (("cupy.sort uint32", lambda: cp.sort(keys)),
                    ("cupy.argsort uint32", lambda: cp.argsort(keys))):
        ms = bench(f, reps=10)
        print(f"{name} 2^26: {ms:.3f} ms, {n / ms / 1e6:.0f} Mkeys/s")
    tk = torch.as_tensor(keys.astype(cp.int64), device=dev).to(torch.int32)
    ms = bench(lambda: torch.sort(tk, stable=True), reps=10)
    print(f"torch.sort(stable) int32 2^26: {ms:.3f} ms, {n / ms / 1e6:.0f} Mkeys/s")
except Exception as e:
    print("sort failed:", e)

# --- day 36: cuSPARSE SpMV ------------------------------------------------------------------
try:
    import cupy as cp
    import cupyx.scipy.sparse as sp
    rows, per = 2_000_000, 16
    rng = np.random.default_rng(0)
    cols = rng.integers(0, rows, rows * per).astype(np.int32)
    indptr = np.arange(0, rows * per + 1, per, dtype=np.int32)
    A = sp.csr_matrix((cp.asarray(rng.standard_normal(rows * per).astype(np.float32)),
                       cp.asarray(cols), cp.asarray(indptr)), shape=(rows, rows))
    xv = cp.asarray(rng.standard_normal(rows).astype(np.float32))
    ms = bench(lambda: A @ xv)
    by = rows * per * 8 + (rows + 1) * 4 + 2 * rows * 4
    print(f"cuSPARSE SpMV uniform {rows}x{per}/row: {ms * 1e3:.1f} us, {by / ms / 1e6:.0f} GB/s (CSR bytes)")
except Exception as e:
    print("spmv failed:", e)

# --- day 39/41: GEMM rates ------------------------------------------------------------------
for (m, dt, name) in [(4096, torch.float32, "fp32 sgemm"), (8192, torch.bfloat16, "bf16")]:
    a = torch.randn(m, m, device=dev, dtype=dt); b = torch.randn(m, m, device=dev, dtype=dt)
    ms = bench(lambda: a @ b, reps=10)
    print(f"torch {name} {m}^3: {ms:.3f} ms, {2 * m**3 / ms / 1e9:.1f} TFLOP/s")
a8 = torch.randint(-128, 127, (4096, 4096), device=dev, dtype=torch.int8)
b8 = torch.randint(-128, 127, (4096, 4096), device=dev, dtype=torch.int8).t().contiguous().t()
try:
    ms = bench(lambda: torch._int_mm(a8, b8), reps=10)
    print(f"torch._int_mm int8 4096^3: {ms:.3f} ms, {2 * 4096**3 / ms / 1e9:.1f} TOPS")
except Exception as e:
    print("int_mm failed:", e)
