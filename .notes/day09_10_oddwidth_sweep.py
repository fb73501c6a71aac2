"""Day 9 (LayerNorm) and day 10 (bias + GELU) at every width: the candidate designs for rows
that are not 16-byte aligned, checked against the float64 reference, then timed beside torch.

    python .notes/day09_10_oddwidth_sweep.py          # both days (about a minute on an H200;
                                                      # the first run also compiles, ~20 s)
    python .notes/day09_10_oddwidth_sweep.py 9        # one day (9 or 10)

Run from the repository root on the GPU machine. Every candidate is first checked against the
day's float64 reference (stress rows for day 9: offsets of 1e4, constant rows...) at the tiny
widths 1, 2, 3, 5, 6, 7 and at odd and aligned widths around each benchmark width, with enough
rows that every head length 0..3 occurs and the persistent kernels' warps take several rows each.
A wrong answer is printed as FAIL and the candidate is not timed; if the shipped version (v8 of
day 9, v5 of day 10) is wrong the run stops there. Then each candidate is timed with the
project's time_fn (CUDA events, L2 flushed by a read before every run, median) at the benchmark
sizes, its output checked again, and one table per day is printed:

    us | GB/s (the op's bytes) | % of the copy ceiling (common.timing.copy_bandwidth_gbps) |
    % of a cuMemcpyDtoD of the same bytes at that size | speed-up over the fastest torch call

The candidates (kernels: the day's kernel.cu plus the instantiations in EXTRA_CU9 / EXTRA_CU10):

day 9, rows of C <= 2048 (v8's rows kernel: rows by bulk copy into shared-memory slots, one warp
per row, scalar head and tail, weight and bias in registers in the rows' layout):
    W warps per block (4 or 8), P slots per warp (1 or 2), MINB (blocks per SM asked of ptxas:
    2 squeezes 8 float4 per lane into 128 registers). The shipped choice: W = 8, P = 1 and two
    blocks per SM up to C = 1024, P = 2 and one block beyond.
day 9, rows of C > 2048 (v8's block kernel: a block per row, the row in registers):
    threads per block (at most 256, 512 or 1024: fewer threads, more float4 each), and how a
    float4 of weight and bias is fetched for a row that is not aligned: "funnel" (two aligned
    float4 loads and a shift, shipped) or "scalar" (four scalar loads).
    Beside them: v4 / v5 / v7 as shipped (their scalar fallbacks at odd widths).
day 10 (all widths):
    v5's split kernel with U = 1 or 2 rows per loop iteration, plain or streaming (evict-first)
    loads and stores, 128 or 256 threads per block; and a different design, "flat": float4
    over the whole array as one vector (every float4 aligned, no per-row split), the column of
    each element tracked incrementally and the bias read per element from L1.
    Beside them: v3 and v4 as shipped (v3 is v2's scalar kernel at odd widths).

A watchdog ends the run after 300 s (a kernel that never finishes is a bug: the last line printed
names it).
"""
import signal
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H  # noqa: E402
from common.baselines import torch_or_none  # noqa: E402
from common.build import load_module  # noqa: E402
from common.check import compare_all  # noqa: E402
from common.gpu import blocks_per_sm, device_info, driver  # noqa: E402
from common.timing import copy_bandwidth_gbps, time_fn  # noqa: E402
from days.day09_layer_norm import driver as D9  # noqa: E402
from days.day10_elementwise_ops import driver as D10  # noqa: E402

WATCHDOG_S = 300
TINY = (1, 2, 3, 5, 6, 7)

LN = ("const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b, "
      "float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C, "
      "float eps")
EXTRA_CU9 = f"""
#define SWEEP_ROWS(I, P, MINB) extern "C" __global__ void __launch_bounds__(256, MINB)  \\
    sweep_rows_i##I##_p##P##_b##MINB({LN}) {{                                             \\
        layernorm_v8_rows_body<I, P>(x, w, b, out, mean, rstd, N, C, eps); }}
SWEEP_ROWS(6, 1, 1)
SWEEP_ROWS(6, 2, 1)
SWEEP_ROWS(8, 1, 1)
SWEEP_ROWS(8, 1, 2)
SWEEP_ROWS(8, 2, 1)
SWEEP_ROWS(16, 1, 1)
SWEEP_ROWS(16, 2, 1)
#define SWEEP_BLOCK(I, FUNNEL, TAG, T) extern "C" __global__ void __launch_bounds__(T)  \\
    sweep_block_i##I##_##TAG##_t##T({LN}) {{                                               \\
        layernorm_v8_block_row<I, FUNNEL>(x, w, b, out, mean, rstd, blockIdx.x, C, eps); }}
SWEEP_BLOCK(1, true, funnel, 1024)
SWEEP_BLOCK(2, true, funnel, 1024)
SWEEP_BLOCK(2, true, funnel, 512)
SWEEP_BLOCK(4, true, funnel, 512)
SWEEP_BLOCK(4, true, funnel, 256)
SWEEP_BLOCK(8, true, funnel, 256)
SWEEP_BLOCK(1, false, scalar, 1024)
SWEEP_BLOCK(2, false, scalar, 1024)
SWEEP_BLOCK(2, false, scalar, 512)
SWEEP_BLOCK(4, false, scalar, 512)
SWEEP_BLOCK(4, false, scalar, 256)
SWEEP_BLOCK(8, false, scalar, 256)
"""

BA = ("const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y, "
      "int N, int C, float scale")
EXTRA_CU10 = f"""
#define SWEEP_SPLIT(U, S, TAG) extern "C" __global__ void __launch_bounds__(256)           \\
    sweep_split_u##U##_##TAG({BA}) {{ bias_act_split_body<ACT_GELU, U, S>(x, bias, y, N, C, scale); }}
SWEEP_SPLIT(1, false, plain)
SWEEP_SPLIT(1, true, stream)
SWEEP_SPLIT(2, false, plain)
SWEEP_SPLIT(2, true, stream)

// "flat": the array as one vector of float4 (its start is 16-byte aligned, so every float4 is);
// the column of the float4's first element advances by (4 * stride) mod C each step, and each
// element's bias is a scalar load (L1 hits: the bias is 4C bytes). The last (N*C) % 4 floats:
// the first threads of block 0.
template <bool STREAM>
__device__ __forceinline__ void flat_body({BA}) {{
    const int64_t total = (int64_t)N * C, n4 = total >> 2;
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int col = (int)((4 * i) % C);
    const int step = (int)((4 * stride) % C);
    for (; i < n4; i += stride) {{
        float v[4];
        load<4, STREAM>(x + 4 * i, v);
#pragma unroll
        for (int k = 0; k < 4; ++k) {{
            int c = col + k;
            while (c >= C) c -= C;
            v[k] = activate<ACT_GELU>(fmaf(v[k], scale, __ldg(bias + c)));
        }}
        store<4, STREAM>(y + 4 * i, v);
        col += step;
        if (col >= C) col -= C;
    }}
    if (blockIdx.x == 0 && threadIdx.x < total - 4 * n4) {{
        const int64_t e = 4 * n4 + threadIdx.x;
        y[e] = activate<ACT_GELU>(fmaf(x[e], scale, __ldg(bias + (int)(e % C))));
    }}
}}
extern "C" __global__ void __launch_bounds__(256) sweep_flat_plain({BA}) {{
    flat_body<false>(x, bias, y, N, C, scale); }}
extern "C" __global__ void __launch_bounds__(256) sweep_flat_stream({BA}) {{
    flat_body<true>(x, bias, y, N, C, scale); }}
"""


def build(day_dir: str, extra: str):
    """The day's kernel.cu with `extra` appended, compiled for this GPU."""
    src = (Path(day_dir) / "kernel.cu").read_text() + extra
    path = Path(tempfile.mkdtemp()) / "kernel.cu"
    path.write_text(src)
    return load_module(path)


class Sweep:
    """Check-then-time bookkeeping shared by both days."""

    def __init__(self, drv, shipped: str):
        self.drv, self.shipped = drv, shipped
        self.cuda = driver()
        self.info = device_info()
        self.sms = self.info["sms"]
        self.copy = copy_bandwidth_gbps()
        self._cases, self._fns, self._checked = {}, {}, {}
        self.failures = []
        self.rows = []
        self.timed = []  # (size, label, ms, same-size copy ms) of every correct timing

    def case(self, size, stress=None):
        key = (tuple(size), stress)
        if key not in self._cases:
            rng = np.random.default_rng(size[0] * 100003 + size[1] + (7 if stress else 0))
            c = (self.drv.make_case(size, rng) if stress is None
                 else self.drv.make_case(size, rng, stress=stress))
            self._cases[key] = (c, H.DeviceCase(c))
        return self._cases[key]

    def fn(self, module, name, sig, smem=0):
        key = (id(module), name)
        if key not in self._fns:
            f = module.get_function(name)
            f.prepare(sig)
            self._fns[key] = f
        f = self._fns[key]
        if smem > 48 * 1024:
            f.set_attribute(self.cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, smem)
        return f

    def check(self, label, go, sizes, stress=None):
        """go(d) against the reference at every size; False (and a FAIL line) if wrong. A
        candidate checked on the same sizes before is not checked again."""
        key = (label, tuple(sizes), stress)
        if key not in self._checked:
            self._checked[key] = self._check(label, go, sizes, stress)
        return self._checked[key]

    def _check(self, label, go, sizes, stress):
        for size in sizes:
            case, d = self.case(size, stress)
            d.poison_outputs()
            go(d)
            self.cuda.Context.synchronize()
            r = compare_all(d.outputs(), case.expected(), case.tolerance())
            if not r.ok:
                msg = f"{label} at {H.size_str(size)}: {r.message}"
                print(f"  FAIL {msg}", flush=True)
                self.failures.append(msg)
                if label.startswith(self.shipped):
                    raise SystemExit(f"the shipped {self.shipped} is wrong: {msg}")
                return False
        return True

    def time(self, size, label, go, check_sizes, torch_ms, copy_ms, stress=None):
        print(f"  {H.size_str(size):>10} {label} ...", end="", flush=True)
        if not self.check(label, go, check_sizes, stress):
            self.rows.append([H.size_str(size), label] + ["-"] * 5 + ["FAIL"])
            return
        case, d = self.case(size)
        t = time_fn(lambda: go(d), repeats=100 if case.bytes < 300e6 else 30)
        r = self.spot_check(case, d)  # the output of the last timed run
        if not r.ok:
            self.failures.append(f"{label} at {H.size_str(size)} after timing: {r.message}")
        print(f" {t.median_ms * 1e3:.2f} us", flush=True)
        if r.ok:
            self.timed.append((tuple(size), label, t.median_ms, copy_ms))
        self.rows.append(self.row(size, label, t.median_ms, copy_ms, torch_ms) + ["ok" if r.ok else "FAIL"])

    @staticmethod
    def spot_check(case, d, nrows=64):
        """64 rows spread over the output (all of the 1-D outputs' entries there) against the
        reference: cheaper than the whole 8192 x 8192 output, and a wrong kernel shows."""
        rows = np.unique(np.linspace(0, case.size[0] - 1, nrows).astype(int))
        got, want = d.outputs(), case.expected()
        return compare_all({k: v[rows] for k, v in got.items()}, {k: want[k][rows] for k in got},
                           case.tolerance())

    def row(self, size, label, ms, copy_ms, torch_ms):
        case, _ = self.case(size)
        gbps = case.bytes / (ms * 1e-3) / 1e9
        return [H.size_str(size), label, f"{ms * 1e3:.2f}", f"{gbps:.0f}",
                f"{100 * gbps / self.copy:.1f}", f"{100 * copy_ms / ms:.1f}",
                f"{torch_ms / ms:.2f}x" if torch_ms else "-"]

    def refs(self, size):
        """(fastest torch call in ms or None, cuMemcpyDtoD of the input's bytes in ms); both
        go into the table. "% same-size copy" is the copy's time over the candidate's."""
        case, d = self.case(size)
        n, c = size
        out = next(iter(case.outputs))
        copy = time_fn(lambda: self.cuda.memcpy_dtod(getattr(d, out), d.x, 4 * n * c),
                       repeats=100).median_ms
        libs = {name: time_fn(f, repeats=100).median_ms
                for name, f in (self.drv.baselines(d) or {}).items()}
        best = min(libs.values()) if libs else None
        self.rows.append(self.row(size, "cuMemcpyDtoD of x (same bytes)", copy, copy, best) + [""])
        for name, ms in libs.items():
            self.rows.append(self.row(size, name, ms, copy, best) + [""])
        return best, copy

    def table(self, title):
        from common.report import table
        print(f"\n{title} (copy ceiling {self.copy:.0f} GB/s, {self.info['name']})")
        print(table(self.rows, ["size", "candidate", "us", "GB/s", "% ceiling", "% same-size copy",
                                "vs torch", "ok"]))
        print("\nfastest candidate per size against the shipped version:")
        for size in dict.fromkeys(t[0] for t in self.timed):
            here = [t for t in self.timed if t[0] == size]
            best = min(here, key=lambda t: t[2])
            ship = next((t for t in here if t[1].startswith(self.shipped + " ")), None)
            pct = lambda t: 100 * self.case(size)[0].bytes / (t[2] * 1e-3) / 1e9 / self.copy
            line = f"  {H.size_str(size):>10}: fastest {best[1]} {best[2] * 1e3:.2f} us ({pct(best):.1f}%)"
            if ship:
                line += (f"; {self.shipped} as shipped {ship[2] * 1e3:.2f} us ({pct(ship):.1f}%, "
                         f"{100 * ship[3] / ship[2]:.1f}% of the same-size copy)")
            print(line)


# --- day 9 ------------------------------------------------------------------------------------

def near(c):
    """Widths around a benchmark width that need no more float4 per row than it does (so the
    same kernel configuration takes them), odd and aligned, and the tiny ones."""
    return sorted({w for w in range(c - 3, c + 4) if w // 4 <= c // 4} | set(TINY))


def day9():
    S = Sweep(D9, "v8")
    mod = build("days/day09_layer_norm", EXTRA_CU9)
    sig = D9.SIG

    def slot_bytes(warps, P, c):
        return H.cdiv(warps * P * 8, 128) * 128 + warps * P * (c // 4) * 16

    def rows_kernel(name, warps, P, c):
        smem = slot_bytes(warps, P, c)  # the most any width of near(c) needs
        f = S.fn(mod, name, sig, smem=smem)
        per_sm = blocks_per_sm(f, 32 * warps, smem)

        def go(d):
            n, cc = d.size
            f.prepared_call((min(S.sms * per_sm, n), 1, 1), (32 * warps, 1, 1), d.x, d.w, d.b,
                            d.out, d.mean, d.rstd, n, cc, np.float32(D9.EPS),
                            shared_size=slot_bytes(warps, P, cc))
        return go, per_sm

    def block_kernel(name, threads):
        f = S.fn(mod, name, sig)

        def go(d):
            n, c = d.size
            f.prepared_call((n, 1, 1), (threads, 1, 1), d.x, d.w, d.b, d.out, d.mean, d.rstd, n,
                            c, np.float32(D9.EPS))
        return go

    shipped = {v: (lambda d, v=v: D9.launch(v, d)) for v in D9.VERSIONS}
    for size in D9.BENCH_SIZES:
        n, c = size
        torch_ms, copy_ms = S.refs(size)
        # rows kernels: 6000 rows (several per warp: every slot refilled, both barrier phases)
        # at the benchmark width and its odd neighbour below, 300 at the other widths; block
        # kernels: 9 rows (every head length at least twice)
        odd = c - 1 if c % 2 == 0 else c
        rows_checks = (sorted({(6000, c), (6000, odd), (6000, 3)}) +
                       [(300, w) for w in near(c) if w not in (c, odd)])
        block_checks = [(9, w) for w in near(c)]
        S.time(size, "v8 as shipped", shipped["v8"], rows_checks if c <= 2048 else block_checks,
               torch_ms, copy_ms, stress=True)
        for v in (["v7", "v5"] if c <= 2048 else ["v4"]):
            S.time(size, f"{v} as shipped", shipped[v], [(9, c)], torch_ms, copy_ms, stress=True)
        if c <= 2048:
            items = next(i for i in D9.V8_ROWS_ITEMS if H.cdiv(c // 4, 32) <= i)
            for P, minb in ((1, 1), (1, 2), (2, 1)):
                name = f"sweep_rows_i{items}_p{P}_b{minb}"
                try:
                    mod.get_function(name)
                except Exception:
                    continue  # not instantiated (would spill, or the same as another)
                for warps in (8, 4):
                    go, per_sm = rows_kernel(name, warps, P, c)
                    S.time(size, f"rows W={warps} P={P} minB={minb} ({per_sm}/SM)", go,
                           rows_checks, torch_ms, copy_ms, stress=True)
        else:
            nvec = c // 4
            for max_threads in (1024, 512, 256):
                items = next(i for i in (1, 2, 4, 8) if H.cdiv(nvec, i) <= max_threads)
                threads = 32 * H.cdiv(H.cdiv(nvec, items), 32)
                for tag in ("funnel", "scalar"):
                    S.time(size, f"block {threads} thr x {items} float4, w/b {tag}",
                           block_kernel(f"sweep_block_i{items}_{tag}_t{max_threads}", threads),
                           block_checks,
                           torch_ms, copy_ms, stress=True)
    S.table("day 9: LayerNorm, 8192 rows; bars: >= 80% of the ceiling at C = 1023..8192, "
            ">= 90% of the same-size copy at C = 768, faster than torch")
    return S.failures


# --- day 10 -----------------------------------------------------------------------------------

def day10():
    S = Sweep(D10, "v5")
    mod = build("days/day10_elementwise_ops", EXTRA_CU10)
    sig = "PPPiif"
    scale = np.float32(D10.SCALE)

    def split(name, U, threads):
        f = S.fn(mod, name, sig)
        per_sm = blocks_per_sm(f, threads)

        def go(d):
            n, c = d.size
            ncols = D10.threads_per_row(c)
            tx = min(threads, 32 * H.cdiv(ncols, 32))
            ty = threads // tx
            gx = H.cdiv(ncols, tx)
            gy = max(1, min(65535, H.cdiv(n, ty * U), S.sms * per_sm // gx))
            gy = D10.round_rows(gy, ty, 4)  # the row step a multiple of 4, as the driver's
            f.prepared_call((gx, gy, 1), (tx, ty, 1), d.x, d.bias, d.y, n, c, scale)
        return go

    def flat(name):
        f = S.fn(mod, name, sig)
        grid = S.sms * blocks_per_sm(f, 256)

        def go(d):
            n, c = d.size
            f.prepared_call((min(grid, H.cdiv(n * c // 4 + 1, 256)), 1, 1), (256, 1, 1), d.x,
                            d.bias, d.y, n, c, scale)
        return go

    checks = [(37, w) for w in (1, 2, 3, 5, 6, 7, 33, 1001, 3071, 3072, 3073, 3075, 8191, 8192)]
    checks += [(70001, 3)]
    shipped = {v: (lambda d, v=v: D10.launch(v, d)) for v in D10.VERSIONS}
    for size in D10.BENCH_SIZES:
        torch_ms, copy_ms = S.refs(size)
        S.time(size, "v5 as shipped", shipped["v5"], checks, torch_ms, copy_ms)
        for v in ("v3", "v4"):
            S.time(size, f"{v} as shipped", shipped[v], [(37, 3073)], torch_ms, copy_ms)
        for U in (1, 2):
            for tag in ("plain", "stream"):
                for threads in (256, 128):
                    S.time(size, f"split U={U} {tag} {threads} thr",
                           split(f"sweep_split_u{U}_{tag}", U, threads), checks, torch_ms, copy_ms)
        for tag in ("plain", "stream"):
            S.time(size, f"flat {tag}", flat(f"sweep_flat_{tag}"), checks, torch_ms, copy_ms)
    S.table("day 10: y = gelu(0.7 x + b); bars: >= 85% of the ceiling everywhere, faster than "
            "torch at 8191x3073")
    return S.failures


def main():
    days = sys.argv[1:] or ["9", "10"]
    if any(d not in ("9", "10") for d in days):
        raise SystemExit("usage: python .notes/day09_10_oddwidth_sweep.py [9] [10]")
    signal.alarm(WATCHDOG_S)  # default action: the process ends (a hung kernel)
    if torch_or_none() is None:
        print("torch is not installed: no 'vs torch' column")
    import time
    t0 = time.perf_counter()
    failures = []
    if "9" in days:
        failures += day9()
    if "10" in days:
        failures += day10()
    print(f"\n{time.perf_counter() - t0:.0f} s in all")
    if failures:
        print("\nFAILURES:\n  " + "\n  ".join(failures))
        raise SystemExit(1)


if __name__ == "__main__":
    main()
