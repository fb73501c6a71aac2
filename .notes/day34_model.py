#!/usr/bin/env python3
"""Day 34: SASS instructions a pixel of v4, v5 and v6 at the bench sizes (no GPU), from the
per-path loop counts read off `cuobjdump -sass` (.notes/day34_sass.py prints the loops) and each
image's own crop: v6's column walk costs 37 / 63 / 84 instructions for an output row whose low
source row is the previous one / the previous high one / new, so the mix depends on the crop.
The chunking mirrors kernel.cu's augment_staged (greedy, `cap` source rows a ring half).

    .venv/bin/python .notes/day34_model.py
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from days.day34_image_augmentation import driver as D  # noqa: E402
from days.day34_image_augmentation import reference as R  # noqa: E402

# SASS counts (CUDA 13, sm_90), per pixel unless said otherwise
V5_FLAT, V6_FLAT = 74.5, 74.5          # pass 1, one pixel a lane (2-pixel unrolled loop / 2)
WALK = {0: 34, 1: 62, 2: 82}           # v6 pass 1, by new source rows blended for the row
PASS2_VEC, PASS2_SCALAR = 16.75, 22.0  # pass 2 (16-byte stores / scalar stores)
V4_PASS1, V4_PASS2 = 379 / 4, 138 / 4  # v4's staged path: group loops of 4 pixels
STAGE_ROW = 22 * 32                    # staging a source row: ~22 instructions of warp 0 (one
                                       # bulk copy; the compiler elects the lanes one by one),
                                       # counted as 32 lanes' worth of issue slots
CHUNK = 30                             # a thread's fixed work a chunk (the ring wait, the
                                       # barrier, the pixel loop's entry), pixels or not


def image_costs(p, oh, ow, half, k=D.V5_K, t=D.V5_T):
    """(v5 pass-1 + staging, v6 pass-1 + staging) instructions for one image, and its chunks."""
    cw, ch = int(p[R.CW]), int(p[R.CH])
    lo, _, _ = R.sample_coords(oh, ch)
    pitch = 16 * ((3 * cw + 30 + 15) // 16)
    cap = half // pitch - 1
    rows = -(-oh // k)
    walk = 2 * ch < 3 * oh
    g = max(1, t // ow)
    v5 = v6 = stage = 0.0
    chunks = 0
    for r0 in range(0, oh, rows):
        band = lo[r0:min(oh, r0 + rows)]
        i = 0
        while i < len(band):                       # the kernel's greedy chunks
            ys, j = band[i], i + 1
            while j < len(band) and min(band[j] + 1, ch - 1) - ys + 1 <= cap:
                j += 1
            nsrc = min(band[j - 1] + 1, ch - 1) - ys + 1
            stage += nsrc * STAGE_ROW + t * CHUNK
            n = j - i
            v5 += n * ow * V5_FLAT
            if not walk:
                v6 += n * ow * V6_FLAT
            else:
                L = -(-n // g)
                for a in range(i, j, L):            # a run: one thread a column walks it
                    prev = -2
                    for y in band[a:min(j, a + L)]:
                        new = 0 if y == prev else 1 if y == prev + 1 else 2
                        v6 += ow * WALK[new]
                        prev = y
            i = j
            chunks += 1
    return v5 + stage, v6 + stage, chunks


def main():
    D.smem_optin = lambda: 227 * 1024
    D.smem_per_sm = lambda: 228 * 1024
    print(f"{'size':>22} {'v4':>7} {'v5':>7} {'v6':>7}   instructions a pixel (pass 1 + pass 2)")
    for size in D.BENCH_SIZES:
        b, h, w, oh, ow = size
        prm = D.make_case(size, np.random.default_rng(5)).inputs["prm"]
        _, half, _ = D.v5_layout(size)
        c5 = c6 = 0.0
        nch = 0
        for p in prm:
            a5, a6, n = image_costs(p, oh, ow, half)
            c5 += a5
            c6 += a6
            nch += n
        npx = b * oh * ow
        p2 = PASS2_VEC if ow % 4 == 0 else PASS2_SCALAR
        print(f"{D.H.size_str(size):>22} {V4_PASS1 + V4_PASS2:7.1f} {c5 / npx + p2:7.1f} "
              f"{c6 / npx + p2:7.1f}   (half {half} B, {nch / (b * D.V5_K):.1f} chunks a band)")


if __name__ == "__main__":
    main()
