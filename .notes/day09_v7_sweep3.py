"""Day 9 sweep 3 (GPU), 8192x768: store and L2 policies x row mappings.
Modules (text edits of kernel.cu): stcs = as shipped (st.global.cs), wb = plain stores,
wb+ef / stcs+ef = the bulk loads carry an L2 evict_first policy.
Kernels: v6 (rows strided over the grid), v6c (v6 with contiguous balanced rows per block),
v7r (bulk row loads into P slots per warp, row copied to registers, slot refilled at once)."""
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, ".")
from common import harness as H
from common.build import load_module
from common.check import compare_all
from common.gpu import blocks_per_sm, device_info, driver
from common.timing import copy_bandwidth_gbps, time_fn
from days.day09_layer_norm import driver as D

EXTRA = r'''
template <int ITEMS>
__device__ __forceinline__ void v7r_body(const float* __restrict__ x, const float* __restrict__ w,
    const float* __restrict__ b, float* __restrict__ out, float* __restrict__ mean,
    float* __restrict__ rstd, int N, int C, float eps, int P) {
    extern __shared__ __align__(128) unsigned char smem[];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    uint64_t* bars = reinterpret_cast<uint64_t*>(smem) + warp * P;
    float* slots = reinterpret_cast<float*>(smem + ((nwarps * P * 8 + 127) & ~127)) +
                   (size_t)warp * P * C;
    const int row0 = (int)((int64_t)N * blockIdx.x / gridDim.x);
    const int row1 = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    const int nrows = (row1 - row0 - warp + nwarps - 1) / nwarps;
    const uint32_t row_bytes = (uint32_t)C * 4u;
    if (lane == 0) {
        for (int s = 0; s < P; ++s) mbar_init(&bars[s], 1);
        mbar_init_fence();
        for (int t = 0; t < P && t < nrows; ++t)
            bulk_load(slots + (size_t)t * C, x + (int64_t)(row0 + warp + t * nwarps) * C,
                      row_bytes, &bars[t]);
    }
    __syncwarp();
    const int nvec = C >> 2;
    float4 wv[ITEMS], bv[ITEMS], v[ITEMS];
#pragma unroll
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) { wv[i] = __ldg(reinterpret_cast<const float4*>(w) + j);
                        bv[i] = __ldg(reinterpret_cast<const float4*>(b) + j); }
    }
    for (int t = 0; t < nrows; ++t) {
        const int s = t % P, row = row0 + warp + t * nwarps;
        mbar_wait(&bars[s], (uint32_t)(t / P) & 1u);
        const float4* xs = reinterpret_cast<const float4*>(slots + (size_t)s * C);
#pragma unroll
        for (int i = 0; i < ITEMS; ++i) { const int j = lane + 32 * i; if (j < nvec) v[i] = xs[j]; }
        __syncwarp();
        if (lane == 0 && t + P < nrows)
            bulk_load(slots + (size_t)s * C, x + (int64_t)(row0 + warp + (t + P) * nwarps) * C,
                      row_bytes, &bars[s]);
        normalize_row4<ITEMS>(v, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec,
                              lane, eps);
    }
}
extern "C" __global__ void __launch_bounds__(512) layernorm_v7r_items6(const float* __restrict__ x,
    const float* __restrict__ w, const float* __restrict__ b, float* __restrict__ out,
    float* __restrict__ mean, float* __restrict__ rstd, int N, int C, float eps, int P) {
    v7r_body<6>(x, w, b, out, mean, rstd, N, C, eps, P); }

extern "C" __global__ void __launch_bounds__(512) layernorm_v6c_items6(
    const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ b,
    float* __restrict__ out, float* __restrict__ mean, float* __restrict__ rstd, int N, int C,
    float eps, int unused) {
    constexpr int ITEMS = 6;
    const int lane = threadIdx.x & 31;
    const int nvec = C / 4;
    const int stride = blockDim.x >> 5;
    int row = (int)((int64_t)N * blockIdx.x / gridDim.x) + (threadIdx.x >> 5);
    N = (int)((int64_t)N * (blockIdx.x + 1) / gridDim.x);
    float4 wv[ITEMS], bv[ITEMS], a[ITEMS], bb[ITEMS];
    for (int i = 0; i < ITEMS; ++i) {
        const int j = lane + 32 * i;
        if (j < nvec) { wv[i] = __ldg(reinterpret_cast<const float4*>(w) + j);
                        bv[i] = __ldg(reinterpret_cast<const float4*>(b) + j); }
    }
    if (row < N) load_row4<ITEMS>(x + (int64_t)row * C, nvec, lane, a);
    while (row < N) {
        const int r1 = row + stride;
        if (r1 < N) load_row4<ITEMS>(x + (int64_t)r1 * C, nvec, lane, bb);
        normalize_row4<ITEMS>(a, wv, bv, out + (int64_t)row * C, mean + row, rstd + row, C, nvec, lane, eps);
        if (r1 >= N) break;
        const int r2 = r1 + stride;
        if (r2 < N) load_row4<ITEMS>(x + (int64_t)r2 * C, nvec, lane, a);
        normalize_row4<ITEMS>(bb, wv, bv, out + (int64_t)r1 * C, mean + r1, rstd + r1, C, nvec, lane, eps);
        row = r2;
    }
}
'''

src = Path("days/day09_layer_norm/kernel.cu").read_text()
STCS = "__stcs(reinterpret_cast<float4*>(outr) + j, o);"
WB = "reinterpret_cast<float4*>(outr)[j] = o;"
BULK = ('asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"\n'
        '                 " [%0], [%1], %2, [%3];"\n'
        '                 ::"r"(smem_addr(dst_smem)), "l"(src), "r"(bytes), "r"(smem_addr(bar))')
BULK_EF = ('uint64_t pol; asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));\n'
           '    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"\n'
           '                 " [%0], [%1], %2, [%3], %4;"\n'
           '                 ::"r"(smem_addr(dst_smem)), "l"(src), "r"(bytes), "r"(smem_addr(bar)), "l"(pol)')
assert STCS in src and BULK in src, "kernel.cu changed: update the text edits"
base = src + EXTRA
variants = {"stcs": base, "wb": base.replace(STCS, WB),
            "wb+ef": base.replace(STCS, WB).replace(BULK, BULK_EF),
            "stcs+ef": base.replace(BULK, BULK_EF)}
mods = {}
for name, text in variants.items():
    p = Path(tempfile.mkdtemp()) / "kernel.cu"
    p.write_text(text)
    mods[name] = load_module(p, options=["-diag-suppress", "1556"])

cuda = driver()
rng = np.random.default_rng(0)
info = device_info()
sms, optin = info["sms"], info["smem_per_block_optin"]
copy = copy_bandwidth_gbps()
print(info["name"], "copy GB/s %.0f" % copy)
_fns = {}


def get(mod, kname, sig):
    key = (mod, kname)
    if key not in _fns:
        fn = mods[mod].get_function(kname)
        fn.prepare(sig)
        if "v7" in kname:
            fn.set_attribute(cuda.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, optin)
        _fns[key] = fn
    return _fns[key]


def launch(d, mod, kname, W, P, per_sm):
    n, c = d.size
    args = (d.x, d.w, d.b, d.out, d.mean, d.rstd, n, c, np.float32(D.EPS))
    if kname == "v6":
        fn = get(mod, "layernorm_v6_items6", D.SIG)
        grid = min(sms * blocks_per_sm(fn, 256), H.cdiv(n, 8))
        fn.prepared_call((grid, 1, 1), (256, 1, 1), *args)
        return
    smem = ((W * P * 8 + 127) // 128) * 128 + W * P * c * 4 if kname == "v7r" else 0
    fn = get(mod, f"layernorm_{kname}_items6", D.SIG + "i")
    fn.prepared_call((min(sms * per_sm, n), 1, 1), (32 * W, 1, 1), *args, P, shared_size=smem)


def check(d, case, go):
    d.poison_outputs()
    go()
    cuda.Context.synchronize()
    return compare_all(d.outputs(), case.expected(), case.tolerance()).ok


n, c = 8192, 768
case = D.make_case((n, c), rng)
small = D.make_case((1025, 764), rng, stress=True)
d, ds = H.DeviceCase(case), H.DeviceCase(small)
gb = case.bytes / 1e9
src_, dst_ = cuda.mem_alloc(n * c * 4), cuda.mem_alloc(n * c * 4)
t = time_fn(lambda: cuda.memcpy_dtod(dst_, src_, n * c * 4), repeats=100)
print(f"{n}x{c}: memcpy same bytes {t.median_ms*1e3:.2f} us")
configs = [("v6", 8, 0, 2)]
configs += [("v6c", W, 0, ps) for W, ps in [(8, 1), (8, 2), (16, 1), (4, 4), (4, 3)]]
configs += [("v7r", W, P, ps) for W, P, ps in [(8, 2, 1), (16, 1, 1), (16, 2, 1), (8, 1, 2),
                                               (8, 2, 2), (8, 4, 2), (4, 2, 2), (4, 2, 3), (4, 1, 4)]]
results = []
for rep in range(2):
    for mod in mods:
        for kname, W, P, ps in configs:
            if kname != "v7r" and "ef" in mod:
                continue
            go = lambda: launch(d, mod, kname, W, P, ps)
            ok = True
            if rep == 0:
                ok = check(d, case, go) and check(ds, small, lambda: launch(ds, mod, kname, W, P, ps))
            tm = time_fn(go, repeats=80).median_ms * 1e3
            print(f"{mod:8s} {kname:4s} W={W:2d} P={P} blocks/SM={ps}: {tm:.2f} us "
                  f"{100*gb/(tm*1e-6)/copy:.1f}%  ok={ok}", flush=True)
