#!/usr/bin/env python3
"""Day 28 without a GPU: run driver.stages() of every version against numpy stand-ins of
kernel.cu's entry points, on a flat float32 "device memory" addressed by byte pointers, and
compare with the float64 reference. What it checks is the HOST side: argument order of every
prepared_call, pointer offsets (W_qkv + C, the k, v thirds of qkv), the attention strides, grid
sizes (every output tile covered), v4/v5's split-K slices. The kernels' own indexing is checked
by the GPU tests, not here.

    .venv/bin/python .notes/day28_emulate.py
"""
from __future__ import annotations

import struct
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common.check import compare  # noqa: E402
from days.day28_multi_head_attention import driver as D  # noqa: E402
from days.day28_multi_head_attention import reference as R  # noqa: E402

BLOCK_M = 64


class Memory:
    def __init__(self, floats=1 << 24):
        self.buf = np.full(floats, np.nan, np.float32)
        self.top = 256                       # byte address 0 is never handed out

    def alloc(self, n):
        p = self.top
        self.top += (4 * n + 255) // 256 * 256
        assert self.top // 4 <= self.buf.size, "emulator memory full"
        return p

    def view(self, ptr, n):
        assert ptr % 16 == 0, f"pointer {ptr} not 16-byte aligned"
        return self.buf[ptr // 4: ptr // 4 + n]

    def matrix(self, ptr, rows, cols, ld):
        """rows x cols at ptr with leading dimension ld (a strided view)."""
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


class Fn:
    def __init__(self, kern, name, sig):
        self.kern, self.name, self.sig = kern, name, sig

    def prepared_call(self, grid, block, *args, shared_size=0):
        fmt = {"P": "Q", "i": "i", "q": "q", "f": "f"}
        assert len(args) == len(self.sig), f"{self.name}: {len(args)} args for {self.sig!r}"
        vals = struct.unpack("<" + "".join(fmt[c] for c in self.sig),
                             struct.pack("<" + "".join(fmt[c] for c in self.sig),
                                         *[int(a) if c in "Pi" else a for a, c in zip(args, self.sig)]))
        getattr(self.kern, "k_" + self.name.split("_v")[0] if self.name.startswith("mha_attn")
                else "k_" + self.name)(grid, block, *vals)
        self.kern.launches.append(self.name)


class FakeKern:
    def __init__(self, mem):
        self.mem, self.launches = mem, []

    def __call__(self, name, sig=None, dynamic_smem=0):
        return Fn(self, name, sig)

    # --- GEMMs --------------------------------------------------------------------------------
    def _gemm(self, grid, M, N, K, A, lda, B, ldb):
        assert grid[0] * 128 >= N and grid[1] * 128 >= M, f"grid {grid} misses {M}x{N}"
        a = self.mem.matrix(A, M, K, lda).astype(np.float64) if K else np.zeros((M, 0))
        b = self.mem.matrix(B, K, N, ldb).astype(np.float64) if K else np.zeros((0, N))
        return a @ b

    def k_mha_v1_linear(self, grid, block, X, W, ldw, bias, Y, M, N, K):
        out = self._gemm(grid, M, N, K, X, K, W, ldw) + self.mem.view(bias, N)
        self.mem.matrix(Y, M, N, N)[:] = out

    def _qkv(self, grid, X, W, bias, QKV, M, C, q_scale=1.0):
        out = self._gemm(grid, M, 3 * C, C, X, C, W, 3 * C) + self.mem.view(bias, 3 * C)
        out[:, :C] *= q_scale
        self.mem.matrix(QKV, M, 3 * C, 3 * C)[:] = out

    def k_mha_v2_qkv(self, grid, block, X, W, bias, QKV, M, C):
        self._qkv(grid, X, W, bias, QKV, M, C)

    def k_mha_v3_qkv(self, grid, block, X, W, bias, QKV, M, C, q_scale):
        self._qkv(grid, X, W, bias, QKV, M, C, q_scale)

    def k_mha_v4_qkv(self, grid, block, X, W, bias, QKV, bias_o, Y, M, C, q_scale):
        self._qkv(grid, X, W, bias, QKV, M, C, q_scale)
        self.mem.matrix(Y, M, C, C)[:] = self.mem.view(bias_o, C)

    k_mha_v5_qkv = k_mha_v4_qkv

    def k_mha_v2_out(self, grid, block, O, W, bias, Y, M, C):
        self.mem.matrix(Y, M, C, C)[:] = self._gemm(grid, M, C, C, O, C, W, C) + self.mem.view(bias, C)

    def k_mha_v4_out(self, grid, block, O, W, Y, M, C, kchunk):
        assert kchunk % 8 == 0 and grid[2] * kchunk >= C and (grid[2] - 1) * kchunk < C
        y = self.mem.matrix(Y, M, C, C)
        for z in range(grid[2]):
            k0 = z * kchunk
            n = max(0, min(kchunk, C - k0))
            y += self._gemm(grid, M, C, n, O + 4 * k0, C, W + 4 * k0 * C, C)

    k_mha_v5_out = k_mha_v4_out

    # --- permutes --------------------------------------------------------------------------------
    def k_mha_v1_split_heads(self, grid, block, src, dst, B, T, H, Dh):
        assert grid[0] * block[0] >= 1
        s = self.mem.view(src, B * T * H * Dh).reshape(B, T, H, Dh)
        self.mem.view(dst, B * T * H * Dh)[:] = s.transpose(0, 2, 1, 3).ravel()

    def k_mha_v1_merge_heads(self, grid, block, src, dst, B, T, H, Dh):
        s = self.mem.view(src, B * T * H * Dh).reshape(B, H, T, Dh)
        self.mem.view(dst, B * T * H * Dh)[:] = s.transpose(0, 2, 1, 3).ravel()

    # --- attention ------------------------------------------------------------------------------
    def _attn(self, grid, q, k, v, o, B, H, N, strides, scale, dim, causal):
        assert grid[0] * BLOCK_M >= N and grid[1] == H and grid[2] == B, f"attention grid {grid}"
        st = [strides[i:i + 3] for i in (0, 3, 6, 9)]
        base = self.mem.buf

        def gather(ptr, s):
            out = np.empty((B, H, N, dim))
            for b in range(B):
                for h in range(H):
                    for t in range(N):
                        e = ptr // 4 + b * s[0] + h * s[1] + t * s[2]
                        out[b, h, t] = base[e:e + dim]
            return out

        qq, kk, vv = gather(q, st[0]), gather(k, st[1]), gather(v, st[2])
        res = R.attention(qq * scale * np.sqrt(dim), kk, vv, causal)   # R scales by 1/sqrt(d)
        for b in range(B):
            for h in range(H):
                for t in range(N):
                    e = o // 4 + b * st[3][0] + h * st[3][1] + t * st[3][2]
                    base[e:e + dim] = res[b, h, t]

    def _attn_entry(dim, causal):
        def f(self, grid, block, q, k, v, o, B, H, N, *rest):
            *strides, scale = rest
            self._attn(grid, q, k, v, o, B, H, N, strides, scale, dim, causal)
        return f

    k_mha_attn_d64_full = _attn_entry(64, False)
    k_mha_attn_d64_causal = _attn_entry(64, True)
    k_mha_attn_d128_full = _attn_entry(128, False)
    k_mha_attn_d128_causal = _attn_entry(128, True)


def main() -> int:
    D.attn_config = lambda: {64: (BLOCK_M, 128, 103424), 128: (BLOCK_M, 128, 110592)}
    D.gemm_slots = lambda version="v4": 264
    bad = 0
    sizes = list(D.CHECK_SIZES) + [D.SIZES["small"], (2, 130, 384, 6)]
    for size in sizes:
        for causal in (False, True):
            case = D.make_case(size, np.random.default_rng(5), causal=causal)
            ref = case.expected()["y"]
            for v in D.VERSIONS:
                splits_list = (None, 1, 2, 3, 4) if v in ("v4", "v5") else (None,)
                for splits in splits_list:
                    mem = Memory(1 << 23)
                    d = FakeCase(mem, case)
                    kern = FakeKern(mem)
                    for _, fn in D.stages(v, d, kern=kern, splits=splits):
                        fn()
                    b, n, c, h = size
                    y = mem.view(d.y, b * n * c).reshape(b, n, c)
                    r = compare(y, ref, 1e-5, "y")
                    if not r.ok:
                        bad += 1
                        print(f"FAIL {v} splits={splits} {size} causal={causal}: {r.message}")
    print(f"{len(sizes)} sizes x 2 masks x every version (v4/v5 at S = default, 1..4): "
          f"{'all ok' if not bad else f'{bad} FAILED'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
