#!/usr/bin/env python3
"""Day 32 without a GPU: run driver.stages() of every version against numpy stand-ins of
kernel.cu's entry points, on a flat float32 "device memory" addressed by byte pointers, and
compare the logits and tokens with the float64 reference.

What it checks: the HOST side (argument order and count of every prepared_call against its
signature, every pointer offset into the stacked weights, the attention strides, the grids:
every GEMM output tile, every layernorm row, every elementwise element covered) and the index
arithmetic of the small kernels, transcribed from kernel.cu thread by thread (patchify v1/v2,
assemble, bias, the EMBED epilogue's row remap, the QKV scale's column test). The GEMM main
loop and the attention tile are day 8's / day 26's, checked by their own days and by the GPU
tests; here they are plain numpy products.

    .venv/bin/python .notes/day32_emulate.py
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common.check import compare  # noqa: E402
from days.day32_vision_transformer_forward import driver as D  # noqa: E402
from days.day32_vision_transformer_forward import reference as R  # noqa: E402


class Memory:
    def __init__(self, floats):
        self.buf = np.full(floats, np.nan, np.float32)
        self.top = 256

    def alloc(self, n):
        p = self.top
        self.top += (4 * n + 255) // 256 * 256
        assert self.top // 4 <= self.buf.size, "emulator memory full"
        return p

    def view(self, ptr, n):
        assert ptr % 4 == 0
        return self.buf[ptr // 4: ptr // 4 + n]

    def matrix(self, ptr, rows, cols, ld):
        base = ptr // 4
        assert base + (rows - 1) * ld + cols <= self.buf.size
        return np.lib.stride_tricks.as_strided(self.buf[base:], (rows, cols), (4 * ld, 4))


class FakeCase:
    def __init__(self, mem, case):
        self.mem, self.case, self.size, self.params = mem, case, case.size, case.params
        self.ptrs, self._scr = {}, {}
        for k, v in case.inputs.items():
            p = mem.alloc(v.size)
            mem.view(p, v.size)[:] = v.ravel()
            self.ptrs[k] = p
        for k, (shape, _) in case.outputs.items():
            self.ptrs[k] = mem.alloc(int(np.prod(shape)))

    def __getattr__(self, name):
        if name in self.__dict__.get("ptrs", {}):
            return self.ptrs[name]
        raise AttributeError(name)

    def scratch(self, name, shape, dtype=np.float32, zero=False):
        n = int(np.prod(shape))
        if name not in self._scr or self._scr[name][1] < n:
            self._scr[name] = (self.mem.alloc(n), n)
        return self._scr[name][0]


FMT = {"P": "Q", "i": "i", "q": "q", "f": "f"}


class Fn:
    def __init__(self, kern, name, sig):
        self.kern, self.name, self.sig = kern, name, sig

    def prepared_call(self, grid, block, *args, shared_size=0):
        assert len(args) == len(self.sig), f"{self.name}: {len(args)} args for {self.sig!r}"
        packed = struct.pack("<" + "".join(FMT[c] for c in self.sig),
                             *[int(a) if c in "Piq" else a for a, c in zip(args, self.sig)])
        vals = struct.unpack("<" + "".join(FMT[c] for c in self.sig), packed)
        self.kern.run(self.name, grid, block, vals, shared_size)


def threads(grid, block):
    return np.arange(grid[0] * block[0], dtype=np.int64)


class FakeKern:
    def __init__(self, mem):
        self.mem, self.launches = mem, []

    def __call__(self, name, sig=None, dynamic_smem=0):
        return Fn(self, name, sig)

    def run(self, name, grid, block, vals, smem):
        self.launches.append(name)
        if name.startswith("vit_attn"):
            return self.attention(name, grid, block, vals, smem)
        if name.startswith("vit_layernorm"):
            return self.layernorm(grid, block, *vals)
        if name.startswith("vit_gemm_v1") or "_t128" in name or "_t64" in name:
            return self.gemm(name, grid, block, *vals)
        getattr(self, name.replace("_v2_v3", "").replace("_v1", ""))(name, grid, block, *vals)

    # --- elementwise, thread by thread (kernel.cu's index math) ------------------------------
    def vit_patchify(self, name, grid, block, img, patches, S, P, total):
        e = threads(grid, block)
        assert e.size >= total
        e = e[e < total]
        G, KP = S // P, 3 * P * P
        NP = G * G
        k = e % KP
        m = e // KP
        p = m % NP
        b = m // NP
        c, r = k // (P * P), k % (P * P)
        i, j = r // P, r % P
        py, px = p // G, p % G
        src = ((b * 3 + c) * S + py * P + i) * S + px * P + j
        self.mem.buf[patches // 4 + e] = self.mem.buf[img // 4 + src]

    def vit_assemble(self, name, grid, block, emb, patch_b, cls, pos, x, T, C, total4):
        e = threads(grid, block)
        assert e.size >= total4
        e = e[e < total4]
        B = self.mem.buf
        for q in range(4):
            idx = 4 * e + q
            c = idx % C
            row = idx // C
            t = row % T
            b = row // T
            v = np.where(t == 0, B[cls // 4 + c],
                         B[emb // 4 + np.maximum(b * (T - 1) + t - 1, 0) * C + c] + B[patch_b // 4 + c])
            B[x // 4 + idx] = v + B[pos // 4 + t * C + c]

    def _patchify_cls(self, vec, grid, block, img, cls, pos, patches, x, Bn, S, P, C):
        W = 4 if vec else 1
        G, KP = S // P, 3 * P * P
        NP, T = G * G, G * G + 1
        assert not vec or (P % 4 == 0 and KP % 4 == 0)
        units = Bn * NP * KP // W
        e = threads(grid, block)
        assert e.size >= units + Bn * C // 4
        mem = self.mem.buf
        ep = e[e < units]
        for q in range(W):
            idx = ep * W
            k = idx % KP
            m = idx // KP
            p = m % NP
            b = m // NP
            c, r = k // (P * P), k % (P * P)
            i, j = r // P, r % P
            if vec:
                assert np.all(j % 4 == 0) and np.all(j + 3 < P)
            py, px = p // G, p % G
            src = ((b * 3 + c) * S + py * P + i) * S + px * P + j
            if vec:
                assert np.all((img // 4 + src) % 4 == 0), "unaligned float4 load"
            mem[patches // 4 + idx + q] = mem[img // 4 + src + q]
        ec = e[(e >= units) & (e < units + Bn * C // 4)]
        qq = 4 * (ec - units)
        b = qq // C
        c = qq % C
        for q in range(4):
            mem[x // 4 + b * T * C + c + q] = mem[cls // 4 + c + q] + mem[pos // 4 + c + q]

    def vit_patchify_vec(self, name, grid, block, *a):
        self._patchify_cls(True, grid, block, *a)

    def vit_patchify_scalar(self, name, grid, block, *a):
        self._patchify_cls(False, grid, block, *a)

    def _bias(self, vec, grid, block, y, bias, n, N):
        i = threads(grid, block)
        mem = self.mem.buf
        if vec:
            e = 4 * i
            e = e[e < n]
            assert e.size * 4 >= n
            for q in range(4):
                mem[y // 4 + e + q] += mem[bias // 4 + e % N + q]
        else:
            assert i.size >= n
            i = i[i < n]
            mem[y // 4 + i] += mem[bias // 4 + i % N]

    def vit_bias_vec(self, name, grid, block, *a):
        self._bias(True, grid, block, *a)

    def vit_bias_scalar(self, name, grid, block, *a):
        self._bias(False, grid, block, *a)

    def vit_gelu(self, name, grid, block, h, n):
        assert grid[0] * block[0] * 4 >= n
        v = self.mem.view(h, n)
        v[:] = R.gelu(v.astype(np.float64))

    def vit_residual(self, name, grid, block, x, y, n):
        assert grid[0] * block[0] * 4 >= n
        self.mem.view(x, n)[:] += self.mem.view(y, n)

    # --- layernorm -----------------------------------------------------------------------------
    def layernorm(self, grid, block, x, ldx, w, b, out, rows, C, eps):
        assert block[0] == 256 and grid[0] * D.LN_ROWS >= rows
        xs = self.mem.matrix(x, rows, C, ldx).astype(np.float64)
        y = R.layer_norm(xs, self.mem.view(w, C).astype(np.float64),
                         self.mem.view(b, C).astype(np.float64), float(np.float32(eps)))
        self.mem.matrix(out, rows, C, C)[:] = y

    # --- GEMMs (kernel.cu's Epi) ----------------------------------------------------------------
    def gemm(self, name, grid, block, A, Bm, bias, add, out, M, N, K, p0, f):
        tile = "t128" if "_t128_" in name or name.startswith("vit_gemm_v1") else \
            "t128x64" if "_t128x64_" in name else "t64"
        bm, bn, thr = D.TILES[tile]
        assert block[0] == thr, f"{name}: {block[0]} threads, tile {tile} wants {thr}"
        assert grid[0] * bn >= N and grid[1] * bm >= M and grid[0] <= 2 ** 31 - 1
        assert grid[1] <= 65535
        if name.endswith("_vec"):
            assert K % 4 == 0 and N % 4 == 0 and A % 16 == 0 and Bm % 16 == 0, f"{name}: not 16-byte"
            assert out % 16 == 0 and (bias == 0 or bias % 16 == 0)
        acc = self.mem.matrix(A, M, K, K).astype(np.float64) @ \
            self.mem.matrix(Bm, K, N, N).astype(np.float64)
        mode = name.split("_")[1]
        mem = self.mem.buf
        if mode == "gemm":                   # v1: STORE
            self.mem.matrix(out, M, N, N)[:] = acc
            return
        acc += self.mem.view(bias, N)
        rows = np.arange(M)
        if mode == "embed":
            b, p = rows // p0, rows % p0
            dst = b * (p0 + 1) + 1 + p
            acc += self.mem.matrix(add, p0 + 1, N, N)[1 + p]
            for r, dr in zip(rows, dst):
                mem[out // 4 + dr * N: out // 4 + dr * N + N] = acc[r]
            return
        o = self.mem.matrix(out, M, N, N)
        if mode == "qkv":
            cols = np.arange(N)
            acc[:, cols < p0] *= np.float32(f)
        elif mode == "gelu":
            acc = R.gelu(acc)
        elif mode == "res":
            acc += o
        o[:] = acc

    # --- attention -------------------------------------------------------------------------------
    def attention(self, name, grid, block, vals, smem):
        q, k, v, o, B, H, N, *rest = vals
        *st, scale = rest
        bm, thr, want_smem = D.attn_config()[name]
        assert grid == (-(-N // bm), H, B) and block[0] == thr and smem == want_smem
        dim = int(name.split("_d")[1].split("_")[0])
        st = [st[i:i + 3] for i in (0, 3, 6, 9)]
        base = self.mem.buf

        def idx(ptr, s):
            b = np.arange(B)[:, None, None, None]
            h = np.arange(H)[None, :, None, None]
            t = np.arange(N)[None, None, :, None]
            dd = np.arange(dim)[None, None, None, :]
            e = ptr // 4 + b * s[0] + h * s[1] + t * s[2] + dd
            assert np.all((ptr // 4 + b * s[0] + h * s[1] + t * s[2]) % 4 == 0), "unaligned row"
            return e

        qq, kk, vv = (base[idx(p, s)].astype(np.float64) for p, s in zip((q, k, v), st[:3]))
        s = qq @ kk.transpose(0, 1, 3, 2) * float(np.float32(scale))
        s -= s.max(-1, keepdims=True)
        s = np.exp(s)
        s /= s.sum(-1, keepdims=True)
        base[idx(o, st[3])] = s @ vv


def attn_config_stub(kern=None):
    # Tile<32>, Tile<64>: 64 rows, 128 threads; Tile<128>: 64 rows, 128 threads (header); any smem
    return {name: (32 if "bm32" in name else 64, 128, 100000) for name in D.ATTN_KERNELS}


def main() -> int:
    D.attn_config = attn_config_stub
    bad = 0
    sizes = list(D.CHECK_SIZES) + [D.SIZES["small"]]
    saved = dict(D.V3_ATTN), D.NARROW_TILE, D.WIDE_TILE
    variants = [("default", saved[0], saved[1], saved[2]), ("t64", {}, "t64", "t64"),
                ("t128x64 wide", {}, "t64", "t128x64"),
                ("attn bn32", {64: "vit_attn_cand_d64_bm64_bn32"}, saved[1], saved[2]),
                ("attn bm32", {64: "vit_attn_cand_d64_bm32_bn32"}, saved[1], saved[2])]
    for size in sizes:
        case = D.make_case(size, np.random.default_rng(5))
        exp = case.expected()
        tol = case.tolerance()
        for label, v3attn, narrow, wide in variants:
            D.V3_ATTN.clear()
            D.V3_ATTN.update(v3attn)
            D.NARROW_TILE, D.WIDE_TILE = narrow, wide
            for v in D.VERSIONS:
                if label != "default" and v != "v3":
                    continue
                mem = Memory(1 << 24)
                d = FakeCase(mem, case)
                kern = FakeKern(mem)
                for _, fn in D.stages(v, d, kern=kern):
                    fn()
                b, cfg = R.Config.from_size(size)
                got = {"logits": mem.view(d.logits, b * cfg.classes).reshape(b, cfg.classes),
                       "tokens": mem.view(d.tokens, b * cfg.tokens * cfg.dim)
                       .reshape(b, cfg.tokens, cfg.dim)}
                for key in got:
                    r = compare(got[key], exp[key], max(tol[key], 1e-5), key)
                    if not r.ok:
                        bad += 1
                        print(f"FAIL {v} ({label}) {D.H.size_str(size)} {key}: {r.message}")
                if label == "default":
                    tiles = sorted({n.split("_")[2] for n in kern.launches if "_t" in n})
                    print(f"  {v} {D.H.size_str(size)}: {len(kern.launches)} launches, tiles {tiles}")
    D.V3_ATTN.clear()
    D.V3_ATTN.update(saved[0])
    D.NARROW_TILE, D.WIDE_TILE = saved[1], saved[2]
    print(f"{len(sizes)} sizes x every version (+ v3 with other tiles and the attention "
          f"candidates): {'all ok' if not bad else f'{bad} FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
