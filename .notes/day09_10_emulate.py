"""Day 9's v8 and day 10's v5 (and the sweep's variants) run on the CPU and checked against the
float64 references: their index arithmetic, bounds and alignment, without a GPU.

    python .notes/day09_10_emulate.py          # needs g++ (C++20) with AddressSanitizer

kernel.cu is compiled as C++ with .notes/day09_10_emu.h (blocks one after another, a thread per
CUDA thread, barriers and shuffles between them); day 9's sm_90 helpers (mbarrier, bulk copy)
are swapped for emulated ones. AddressSanitizer and UBSan stop the run on any access outside an
array or any float4 access that is not 16-byte aligned; the bulk copies check their own rules
(16-byte aligned, a positive multiple of 16 bytes, inside x). Timing is not modelled.
"""
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H  # noqa: E402
from common.check import compare_all  # noqa: E402
from days.day09_layer_norm import driver as D9  # noqa: E402
from days.day09_layer_norm import reference as R9  # noqa: E402
from days.day10_elementwise_ops import driver as D10  # noqa: E402
from days.day10_elementwise_ops import reference as R10  # noqa: E402

HERE = Path(__file__).resolve().parent
EMULATED = {  # day 9's sm_90 helpers -> the emulated ones (the whole definition is replaced)
    "mbar_init": "(uint64_t* bar, unsigned count) { emu_mbar_init(bar, count); }",
    "mbar_init_fence": "() {}",
    "fence_proxy_async_smem": "() {}",
    "bulk_load": "(void* dst_smem, const void* src, uint32_t bytes, uint64_t* bar) "
                 "{ emu_bulk_load(dst_smem, src, bytes, bar); }",
    "mbar_wait": "(uint64_t* bar, uint32_t parity) { emu_mbar_wait(bar, parity); }",
    "mbar_arrive": "(uint64_t* bar) { emu_mbar_arrive(bar); }",
}

MAIN = r"""
#include <string>
typedef void (*LnFn)(const float*, const float*, const float*, float*, float*, float*, int, int, float);
typedef void (*BaFn)(const float*, const float*, float*, int, int, float);
static float* alloc(size_t n) {  // exact size (ASan sees one float past), 256-byte aligned
    void* p = nullptr;
    if (posix_memalign(&p, 256, n ? n * 4 : 4)) emu_fail("no memory");
    return static_cast<float*>(p);
}
static void read(const char* path, float* p, size_t n) {
    FILE* f = fopen(path, "rb");
    if (!f || fread(p, 4, n, f) != n) emu_fail("cannot read input");
    fclose(f);
}
static void write(const char* path, const float* p, size_t n) {
    FILE* f = fopen(path, "wb");
    fwrite(p, 4, n, f);
    fclose(f);
}
// argv: kernel gx gy bx by smem N C scalar dir
int main(int argc, char** argv) {
    if (argc != 11) emu_fail("usage");
    std::string name = argv[1];
    emu_dim3 grid{(unsigned)atoi(argv[2]), (unsigned)atoi(argv[3]), 1};
    emu_dim3 block{(unsigned)atoi(argv[4]), (unsigned)atoi(argv[5]), 1};
    size_t smem = atol(argv[6]);
    int N = atoi(argv[7]), C = atoi(argv[8]);
    float s = (float)atof(argv[9]);
    std::string dir = argv[10];
    size_t nc = (size_t)N * C;
    float* x = alloc(nc);
    read((dir + "/x").c_str(), x, nc);
    emu_bulk_lo = (const unsigned char*)x;
    emu_bulk_hi = (const unsigned char*)(x + nc);
    LNCALLS
    BACALLS
    emu_fail("unknown kernel");
}
"""

LN_CALL = """if (name == "{k}") {{
        float *w = alloc(C), *b = alloc(C), *out = alloc(nc), *mean = alloc(N), *rstd = alloc(N);
        read((dir + "/w").c_str(), w, C); read((dir + "/b").c_str(), b, C);
        for (size_t i = 0; i < nc; ++i) out[i] = NAN;
        for (int i = 0; i < N; ++i) mean[i] = rstd[i] = NAN;
        emu_launch<const float*, const float*, const float*, float*, float*, float*, int, int, float>(
            {k}, grid, block, smem, x, w, b, out, mean, rstd, N, C, s);
        write((dir + "/out").c_str(), out, nc); write((dir + "/mean").c_str(), mean, N);
        write((dir + "/rstd").c_str(), rstd, N);
        return 0;
    }}
    """
BA_CALL = """if (name == "{k}") {{
        float *bias = alloc(C), *y = alloc(nc);
        read((dir + "/b").c_str(), bias, C);
        for (size_t i = 0; i < nc; ++i) y[i] = NAN;
        emu_launch<const float*, const float*, float*, int, int, float>(
            {k}, grid, block, smem, x, bias, y, N, C, s);
        write((dir + "/out").c_str(), y, nc);
        return 0;
    }}
    """


def swap_helpers(src: str) -> str:
    for name, repl in EMULATED.items():
        m = re.search(r"__device__ __forceinline__ (\w+) " + name + r"\(.*?\n\}\n", src, re.S)
        assert m, f"kernel.cu has no {name}()"
        src = src[:m.start()] + f"__device__ __forceinline__ {m.group(1)} {name}{repl}\n" + src[m.end():]
    return src.replace("extern __shared__ __align__(128) unsigned char smem[];",
                       "unsigned char* smem = emu_dyn_smem;")


def build(day_dir, extra, ln_kernels, ba_kernels, tmp):
    src = (Path(day_dir) / "kernel.cu").read_text() + extra
    src = swap_helpers(src) if "bulk_load" in src else src
    main = MAIN.replace("LNCALLS", "".join(LN_CALL.format(k=k) for k in ln_kernels))
    main = main.replace("BACALLS", "".join(BA_CALL.format(k=k) for k in ba_kernels))
    path = Path(tmp) / f"{Path(day_dir).name}.cpp"
    path.write_text(f'#include "{HERE / "day09_10_emu.h"}"\n' + src + main)
    exe = path.with_suffix("")
    cmd = ["g++", "-std=c++20", "-O1", "-g", "-pthread", "-fsanitize=address,undefined",
           "-fno-sanitize-recover=all", "-Wno-unused", "-w", "-x", "c++", str(path), "-o", str(exe)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"g++ failed:\n{r.stderr[-6000:]}")
    return exe


def run(exe, tmp, kernel, grid, block, smem, n, c, scalar, inputs):
    for k, v in inputs.items():
        np.ascontiguousarray(v, np.float32).tofile(Path(tmp) / k)
    r = subprocess.run([str(exe), kernel, str(grid[0]), str(grid[1]), str(block[0]), str(block[1]),
                        str(smem), str(n), str(c), repr(float(scalar)), str(tmp)],
                       capture_output=True, text=True, timeout=600,
                       env={**os.environ, "ASAN_OPTIONS": "detect_leaks=0"})
    if r.returncode:
        raise SystemExit(f"{kernel} at {n}x{c} stopped:\n{r.stderr[-3000:]}")
    return lambda k, shape: np.fromfile(Path(tmp) / k, np.float32).reshape(shape)


def day9(tmp):
    sweep = Path(".notes/day09_10_oddwidth_sweep.py").read_text()
    extra = re.search(r'EXTRA_CU9 = f"""(.*?)"""', sweep, re.S).group(1)
    ln = ("const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, "
          "float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, "
          "int C, float eps")
    extra = extra.replace("{LN}", ln).replace("{{", "{").replace("}}", "}").replace("\\\\", "\\")
    tests = []  # (kernel, grid, block, smem, n, c)
    for c in (1, 2, 3, 4, 5, 6, 7, 33, 767, 768, 771, 1021, 1023, 1024, 1025, 1027, 2045, 2047,
              2048):
        kind, name, threads, smem = D9.v8_config(c)
        assert kind == "rows"
        tests.append((name, (3, 1), (threads, 1), smem, 8 * 3 * 3 + 5, c))  # >= 3 rows a warp
        tests.append((name, (2, 1), (threads, 1), smem, 5, c))              # warps with no row
    for c in (1, 3, 7, 768, 1023, 2049, 2050, 4097, 8191, 8192, 16387, 16388, 16389, 20001):
        kind, name, threads, _ = D9.v8_config(c, hopper=c > 2048)
        tests.append((name, (9, 1), (threads, 1), 0, 9, c))
    # the sweep's variants: 4 warps per block, both slot counts, scalar loads of w and b
    for name, warps, p, c in (("sweep_rows_i8_p2_b1", 4, 2, 1023), ("sweep_rows_i8_p1_b1", 4, 1, 1021),
                              ("sweep_rows_i16_p1_b1", 8, 1, 2047), ("sweep_rows_i6_p2_b1", 8, 2, 767)):
        smem = H.cdiv(warps * p * 8, 128) * 128 + warps * p * (c // 4) * 16
        tests.append((name, (3, 1), (32 * warps, 1), smem, 4 * 3 * 4 + 3, c))
    for name, threads, c in (("sweep_block_i1_scalar_t1024", 1024, 4097),
                             ("sweep_block_i8_scalar_t256", 256, 8191),
                             ("sweep_block_i4_funnel_t256", 256, 4095)):
        tests.append((name, (9, 1), (threads, 1), 0, 9, c))
    exe = build("days/day09_layer_norm", extra, sorted({t[0] for t in tests}), [], tmp)
    rng = np.random.default_rng(9)
    for name, grid, block, smem, n, c in tests:
        x = D9.stress_rows(rng, n, c)
        w = (1 + 0.1 * rng.standard_normal(c)).astype(np.float32)
        b = (0.1 * rng.standard_normal(c)).astype(np.float32)
        get = run(exe, tmp, name, grid, block, smem, n, c, D9.EPS, {"x": x, "w": w, "b": b})
        out, mean, rstd = R9.layer_norm(x, w, b)
        r = compare_all({"out": get("out", (n, c)), "mean": get("mean", (n,)), "rstd": get("rstd", (n,))},
                        {"out": out, "mean": mean, "rstd": rstd}, 1e-5)
        print(f"  day 9 {name:32s} {n:4d} x {c:5d} grid {grid[0]} x {block[0]:4d}: "
              f"{'ok' if r.ok else 'FAIL ' + r.message}", flush=True)
        if not r.ok:
            raise SystemExit(1)


def day10(tmp):
    sweep = Path(".notes/day09_10_oddwidth_sweep.py").read_text()
    extra = re.search(r'EXTRA_CU10 = f"""(.*?)"""', sweep, re.S).group(1)
    ba = ("const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y, "
          "int N, int C, float scale")
    extra = extra.replace("{BA}", ba).replace("{{", "{").replace("}}", "}").replace("\\\\", "\\")
    kernels = ["bias_act_v5_gelu", "bias_act_v5_relu", "sweep_split_u2_stream", "sweep_split_u1_plain",
               "sweep_flat_plain"]
    exe = build("days/day10_elementwise_ops", extra, [], kernels, tmp)
    rng = np.random.default_rng(10)
    for n, c in ((9, 1), (6, 2), (9, 3), (9, 5), (7, 6), (9, 7), (9, 30), (13, 33), (9, 1001),
                 (9, 3072), (9, 3073), (5, 4099), (70001, 3)):
        x = (2 * rng.standard_normal((n, c))).astype(np.float32)
        b = (0.5 * rng.standard_normal(c)).astype(np.float32)
        for name in kernels:
            act = "relu" if name.endswith("relu") else "gelu"
            if name == "sweep_flat_plain":
                grid, block = (5, 1), (256, 1)
            else:
                u = 2 if "_u2_" in name else 1
                tx, ty = D10.block_shape(D10.threads_per_row(c))
                gy = D10.round_rows(max(1, min(5, H.cdiv(n, ty * u))), ty, 4)
                grid, block = (H.cdiv(D10.threads_per_row(c), tx), gy), (tx, ty)
            get = run(exe, tmp, name, grid, block, 0, n, c, 0.7, {"x": x, "b": b})
            r = compare_all({"y": get("out", (n, c))}, {"y": R10.bias_act(x, b, 0.7, act)}, 1e-5)
            print(f"  day 10 {name:24s} {n:5d} x {c:4d} grid {grid} block {block}: "
                  f"{'ok' if r.ok else 'FAIL ' + r.message}", flush=True)
            if not r.ok:
                raise SystemExit(1)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as tmp:
        day9(tmp)
        day10(tmp)
    print("all emulated launches agree with the references")
