"""Day 31: a CPU emulation of kernel.cu's index arithmetic (no GPU here).

v5/v6 (conv::Tile): every block's shared input chunk and filter chunk are filled exactly as
load_input / load_filter fill them (same loops over i, same slot layout, same zero fill),
then each thread reads its window and filter float4s at the addresses compute_chunk uses
(asserting every read lies inside the chunk and, for a float4, is 16-byte aligned), and
store() writes the outputs it would write (every output must be written exactly once).
v2-v4: the constant slices the driver copies, and the kernels' c_w indices.

    python .notes/day31_emulate.py          # every CHECK_SIZES entry, every tile
"""
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common import harness as H  # noqa: E402
from days.day31_conv2d_tiled import driver as D  # noqa: E402
from days.day31_conv2d_tiled import reference  # noqa: E402


def tile_consts(tile, R, S):
    TM, TN, BX, BY, BZ, CB = D.TILES[tile]
    r4 = lambda v: (v + 3) // 4 * 4
    T = dict(R=R, S=S, RR=R * R, TM=TM, TN=TN, BX=BX, BY=BY, BZ=BZ, CB=CB)
    T["THREADS"] = BX * BY * BZ
    T["TW"], T["TH"], T["TK"] = BX * TM, BY, BZ * TN
    T["WL"] = (TM - 1) * S + R
    T["VEC"] = (TM * S) % 4 == 0
    T["WLV"] = r4(T["WL"]) if T["VEC"] else T["WL"]
    T["IH"] = (T["TH"] - 1) * S + R
    T["IW"] = (T["TW"] - 1) * S + R
    T["IWP"] = r4(max(T["IW"], (BX - 1) * TM * S + T["WLV"]))
    T["TKP"] = T["TK"] + 4
    T["IN"] = CB * T["IH"] * T["IWP"]
    T["WF"] = CB * T["RR"] * T["TKP"]
    return T


def emulate_direct(x, w, b, size, tile):
    N, C, Hh, Ww, K, R, S, P = size
    Ho, Wo = D.out_hw(size)
    T = tile_consts(tile, R, S)
    y = np.full((N, K, Ho, Wo), np.nan, np.float64)
    written = np.zeros((N, K, Ho, Wo), int)
    xf, wf = x.ravel().astype(np.float64), w.ravel().astype(np.float64)
    tiles_x = H.cdiv(Wo, T["TW"])
    grid = (H.cdiv(Ho, T["TH"]) * tiles_x, H.cdiv(K, T["TK"]), N)
    tid = np.arange(T["THREADS"])
    tz, tx, ty = tid % T["BZ"], tid // T["BZ"] % T["BX"], tid // (T["BZ"] * T["BX"])
    CBRR = T["CB"] * T["RR"]
    ROWS8 = (CBRR + 7) // 8 * 8
    KQ, QN = T["TK"] // 4, T["TN"] // 4
    for n in range(grid[2]):
        for by in range(grid[1]):
            for bx in range(grid[0]):
                oy0, ox0 = bx // tiles_x * T["TH"], bx % tiles_x * T["TW"]
                k0 = by * T["TK"]
                iy0, ix0 = oy0 * S - P, ox0 * S - P
                acc = np.zeros((T["THREADS"], T["TM"], T["TN"]))
                for j in range(T["TN"]):
                    k = k0 + tz * T["TN"] + j
                    acc[:, :, j] = np.where(k < K, b[np.minimum(k, K - 1)], 0.0)[:, None]
                for c0 in range(0, C, T["CB"]):
                    # load_input
                    i = np.arange(T["IN"])
                    cc = i // (T["IH"] * T["IWP"])
                    rem = i - cc * (T["IH"] * T["IWP"])
                    iy, ix = rem // T["IWP"], rem % T["IWP"]
                    c, gy, gx = c0 + cc, iy0 + iy, ix0 + ix
                    ok = (c < C) & (gy >= 0) & (gy < Hh) & (gx >= 0) & (gx < Ww) & (ix < T["IW"])
                    src = np.where(ok, ((n * C + c) * Hh + gy) * Ww + gx, 0)
                    s_in = np.where(ok, xf[src], 0.0)
                    # load_filter
                    s_w = np.full(T["WF"], np.nan)        # unwritten slots stay NaN: a read fails
                    i = np.arange(ROWS8 * T["TK"])
                    r8, jj, rest = i & 7, (i >> 3) & 3, i >> 5
                    kq, row = rest % KQ, (rest // KQ) * 8 + (i & 7)
                    keep = row < CBRR
                    i, r8, jj, kq, row = i[keep], r8[keep], jj[keep], kq[keep], row[keep]
                    k = k0 + kq * 4 + jj
                    ok = (k < K) & (row < (C - c0) * T["RR"])
                    src = np.where(ok, (k * C + c0) * T["RR"] + row, 0)
                    slot = ((kq % QN) * T["BZ"] + kq // QN) * 4 + jj
                    dst = row * T["TKP"] + slot
                    assert len(np.unique(dst)) == len(dst), "two threads store one filter slot"
                    assert dst.max() < T["WF"]
                    s_w[dst] = np.where(ok, wf[src], 0.0)
                    # compute_chunk
                    for cc in range(T["CB"]):
                        for r in range(R):
                            base = (cc * T["IH"] + ty * S + r) * T["IWP"] + tx * T["TM"] * S
                            if T["VEC"]:
                                assert np.all(base % 4 == 0)
                            idx = base[:, None] + np.arange(T["WLV"])[None, :]
                            # the window stays inside its row of the tile
                            assert np.all(idx // T["IWP"] == base[:, None] // T["IWP"])
                            win = s_in[idx]
                            for s in range(R):
                                wr = (cc * T["RR"] + r * R + s) * T["TKP"] + tz * 4
                                widx = np.concatenate([wr[:, None] + q * T["BZ"] * 4 + np.arange(4)
                                                       for q in range(QN)], axis=1)
                                assert np.all((wr % 4) == 0) and widx.max() < T["WF"]
                                wv = s_w[widx]
                                assert not np.isnan(wv).any(), "read a filter slot nobody wrote"
                                acc += win[:, [i * S + s for i in range(T["TM"])]][:, :, None] * \
                                    wv[:, None, :]
                # store
                oy, ox = oy0 + ty, ox0 + tx * T["TM"]
                for t in range(T["THREADS"]):
                    if oy[t] >= Ho or ox[t] >= Wo:
                        continue
                    for j in range(T["TN"]):
                        k = k0 + tz[t] * T["TN"] + j
                        if k >= K:
                            break
                        for i in range(T["TM"]):
                            if ox[t] + i < Wo:
                                y[n, k, oy[t], ox[t] + i] = acc[t, i, j]
                                written[n, k, oy[t], ox[t] + i] += 1
    assert np.all(written == 1), "an output written never or twice"
    return y


def emulate_constant(x, w, b, size, version):
    """v2/v3/v4's sums through the c_w slices the driver copies (the copies' arithmetic)."""
    N, C, Hh, Ww, K, R, S, P = size
    RR = R * R
    y = np.full(reference.conv2d(x, w, b, S, P).shape, np.nan)
    for k0, kc, c0, cc in D.constant_slices(C, K, RR):
        flat = w.reshape(K, C * RR)
        if cc == C:
            c_w = w.ravel()[k0 * C * RR:(k0 + kc) * C * RR]
        else:
            c_w = np.concatenate([flat[k0 + j, c0 * RR:(c0 + cc) * RR] for j in range(kc)])
        assert c_w.size <= D.CONST_W_FLOATS and kc <= D.CONST_B_FLOATS
        c_b = b[k0:k0 + kc]
        wsl = c_w.reshape(kc, cc, R, R)       # the kernels index c_w[(kl*cc + c)*RR + r*R + s]
        part = reference.conv2d(x[:, c0:c0 + cc], wsl, c_b if c0 == 0 else None, S, P)
        if c0 == 0:
            y[:, k0:k0 + kc] = part
        else:
            y[:, k0:k0 + kc] += part
    return y


def main():
    sizes = list(D.CHECK_SIZES) + [tuple(D.SIZES["small"])]
    bad = 0
    for size in sizes:
        rng = np.random.default_rng(sum(size))
        case = D.make_case(size, rng)
        x, w, b = case.inputs["x"], case.inputs["w"], case.inputs["b"]
        want = case.expected()["y"]
        got = emulate_constant(x, w, b, size, "v2")
        e = np.abs(got - want).max()
        msgs = [f"const {e:.1e}"]
        bad += e > 1e-9
        tiles = [D.tile_for(size)] if D.tile_for(size) else []
        if size[5:7] == (3, 1):
            tiles = list(t for t in D.TILES)
        for t in tiles:
            if t is None:
                continue
            if np.prod(size[:5]) > 200000 and t != D.tile_for(size):
                continue
            got = emulate_direct(x, w, b, size, t)
            e = np.abs(got - want).max()
            bad += not e < 1e-9
            msgs.append(f"{t} {e:.1e}")
        print(H.size_str(size), " ".join(msgs), flush=True)
    print("FAIL" if bad else "all emulated outputs match the reference")
    return bad


if __name__ == "__main__":
    sys.exit(1 if main() else 0)
