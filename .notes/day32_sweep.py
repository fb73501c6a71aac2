#!/usr/bin/env python3
"""Day 32 sweep, for the GPU machine (about 30-60 s):  python .notes/day32_sweep.py

1. Checks every candidate once against the float64 reference at two ragged sizes: v1..v3, v3
   with each GEMM tile forced on every 16-byte GEMM (t128 = day 8's 128x128, t128x64, t64),
   v3 with each attention kernel (the header's Tile<64> and the three candidates).
2. At each bench size, times (median us, L2 flushed, one launch alone) each GEMM of block 0 and
   the embedding with each tile, and attention with each kernel; then the whole forward of v2,
   v3 as configured, v3 with the best tiles found, and torch eager.
3. Prints what to set in driver.py: NARROW_TILE (N % 128 != 0: C = 192, 3C = 576), WIDE_TILE
   (N % 128 == 0: fc1's 768), V3_ATTN, and BEST.
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import harness as H  # noqa: E402
from common.baselines import torch_or_none  # noqa: E402
from common.report import table  # noqa: E402
from common.timing import time_fn  # noqa: E402
from days.day32_vision_transformer_forward import driver as D  # noqa: E402

CHECK = [(2, 224, 16, 192, 3, 2, 768, 1000), (3, 64, 4, 192, 3, 1, 768, 10)]
TILES = list(D.TILES)
ATTNS = ["vit_attn_d64_v1_v2_v3"] + [k for k in D.ATTN_KERNELS if "cand" in k]
# (role, a fragment of its stage name); N of each at ViT-Tiny: 192, 576, 192, 768, 192
ROLES = [("embed", "embed: GEMM"), ("qkv", "QKV GEMM"), ("proj", "projection GEMM"),
         ("fc1", "fc1 GEMM"), ("fc2", "fc2 GEMM")]


def run_stages(tile=None, attn=None):
    return lambda v, d: [fn() for _, fn in D.stages(v, d, tile=tile, attn=attn)]


def checks() -> bool:
    ok_all = True
    for size in CHECK:
        case = D.make_case(size, np.random.default_rng(320))
        res = []
        for v in D.VERSIONS:
            res.append((v, H.check(D.launch, v, case)))
        for tile in TILES:
            res.append((f"v3 tile {tile}", H.check(run_stages(tile=tile), "v3", case)))
        for attn in ATTNS:
            res.append((f"v3 {attn}", H.check(run_stages(attn=attn), "v3", case)))
        for name, r in res:
            ok_all &= r.ok
            if not r.ok:
                print(f"  FAIL {name} at {H.size_str(size)}: {r.message}")
        print(f"check {H.size_str(size)}: {sum(r.ok for _, r in res)}/{len(res)} ok")
    return ok_all


def stage_us(d, fragment, **kw) -> float:
    fn = next(fn for name, fn in D.stages("v3", d, layers=[0], **kw) if fragment in name)
    return time_fn(fn).median_ms * 1e3


def sweep(size):
    case = D.make_case(size, np.random.default_rng(321))
    d = H.DeviceCase(case)
    D.launch("v2", d)                          # every intermediate filled
    shapes = D.gemm_shapes(size)
    rows, best_tile = [], {}
    for role, frag in ROLES:
        m, n, k = shapes[role]
        us = {t: stage_us(d, frag, tile=t) for t in TILES}
        best_tile[role] = min(us, key=us.get)
        rows.append([f"{role} {m}x{n}x{k}"] + [f"{us[t]:.1f}" for t in TILES]
                    + [best_tile[role], D.tile_for("v3", n, k)])
    print(f"\n{H.size_str(size)}: GEMMs of block 0 (and the embedding), us, each tile")
    print(table(rows, ["GEMM MxNxK"] + TILES + ["fastest", "v3 now"]))

    dh = size[3] // size[4]
    attn_us = {}
    if dh == 64:
        attn_us = {a: stage_us(d, "attention", attn=a) for a in ATTNS}
        print(table([[a, f"{u:.1f}"] for a, u in attn_us.items()], ["attention kernel", "us"]))

    # whole forwards: v2, v3 as configured, v3 with the fastest tile per N class
    narrow = [r for r, _ in ROLES if shapes[r][1] % 128 and shapes[r][1] % 64 == 0]
    wide = [r for r, _ in ROLES if shapes[r][1] % 128 == 0]
    pick = lambda roles, cur: max(TILES, key=lambda t: sum(best_tile[r] == t for r in roles)) \
        if roles else cur
    nt, wt = pick(narrow, D.NARROW_TILE), pick(wide, D.WIDE_TILE)
    ba = min(attn_us, key=attn_us.get) if attn_us else None
    out = {}
    for v in D.VERSIONS:
        out[v] = time_fn(lambda v=v: D.launch(v, d)).median_ms
    saved = D.NARROW_TILE, D.WIDE_TILE, dict(D.V3_ATTN)
    D.NARROW_TILE, D.WIDE_TILE = nt, wt
    if ba and ba != "vit_attn_d64_v1_v2_v3":
        D.V3_ATTN[64] = ba
    out[f"v3 narrow={nt} wide={wt} attn={ba}"] = time_fn(lambda: D.launch("v3", d)).median_ms
    D.NARROW_TILE, D.WIDE_TILE = saved[0], saved[1]
    D.V3_ATTN.clear()
    D.V3_ATTN.update(saved[2])
    if torch_or_none() is not None:
        fn = D.torch_forward(d)
        fn()
        out[D.TORCH] = time_fn(fn).median_ms
    print(table([[k, f"{ms:.3f}", f"{case.flops / (ms * 1e-3) / 1e12:.1f}"] for k, ms in out.items()],
                ["whole forward", "ms", "TFLOP/s"]))
    return nt, wt, ba, out


def main() -> int:
    ok = checks()
    picks = [sweep(size) for size in D.BENCH_SIZES]
    nt, wt, ba, out = picks[0]
    print("\nsuggested (from the headline size):")
    print(f"  NARROW_TILE = {nt!r}, WIDE_TILE = {wt!r}"
          + (f", V3_ATTN = {{64: {ba!r}}}" if ba and ba != "vit_attn_d64_v1_v2_v3" else
             ", V3_ATTN = {}"))
    fastest = min((k for k in out if k != D.TORCH), key=out.get)
    print(f"  fastest forward: {fastest} ({out[fastest]:.3f} ms"
          + (f", torch eager {out[D.TORCH]:.3f} ms" if D.TORCH in out else "") + ")")
    if not ok:
        print("SOME CANDIDATES FAILED THEIR CHECK (see above)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
