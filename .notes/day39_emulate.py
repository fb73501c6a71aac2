"""Day 39: a numpy emulation of kernel.cu's index maps, run on a CPU (no GPU needed):
python .notes/day39_emulate.py. Written while building the day without a GPU; every map matched."""
# numpy emulation of kernel.cu's v4/v5 index maps (one grid, every block), with dp4a on bytes
import sys; from pathlib import Path; sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np
from days.day39_quantization_ops import reference as R

BM = BN = 128; THREADS = 256; AS_LD = BM + 4

def words_to_bytes(w):  # int32 array -> [..., 4] int8
    return np.ascontiguousarray(w.astype("<i4")).view(np.int8).reshape(w.shape + (4,)).astype(np.int64)

def dp4a(a, b):  # elementwise over arrays of words
    return (words_to_bytes(a) * words_to_bytes(b)).sum(-1)

def operands(a, b):
    m, k = a.shape; n = b.shape[1]
    kp = R.padded_k(k); ap = np.zeros((m, kp), np.int8); ap[:, :k] = a
    aw = ap.view("<i4"); bp = R.pack_b(b)
    return aw, aw.shape[1], bp, bp.shape[1], kp // 4

def thread_rows_cols(tid):
    ty, tx = tid // 16, tid % 16
    rows = [ty * 4 + i if i < 4 else 64 + ty * 4 + (i - 4) for i in range(8)]
    cols = [tx * 4 + j if j < 4 else 64 + tx * 4 + (j - 4) for j in range(8)]
    return rows, cols

def v5(a, b, BKW=16, STAGES=3):
    aw, lda, bp, ldb, Kq = operands(a, b)
    M, N = a.shape[0], b.shape[1]
    A_LD = BKW + 4
    C = np.full((M, N), -1, np.int64)
    tiles = -(-Kq // BKW)
    for by in range(-(-M // BM)):
        for bx in range(-(-N // BN)):
            bm, bn = by * BM, bx * BN
            acc = np.zeros((THREADS, 8, 8), np.int64)
            for t in range(tiles):
                k0 = t * BKW
                As = np.full(BM * A_LD, 12345, np.int64); Bs = np.full(BKW * BN, 12345, np.int64)
                LA = BM * BKW // 4 // THREADS; LB = BKW * BN // 4 // THREADS
                for tid in range(THREADS):
                    for l in range(LA):
                        f = tid + l * THREADS; r = f // (BKW // 4); q = (f % (BKW // 4)) * 4
                        ok = bm + r < M and k0 + q < Kq
                        for j in range(4):
                            As[r * A_LD + q + j] = aw[bm + r, k0 + q + j] if ok else 0
                    for l in range(LB):
                        f = tid + l * THREADS; r = f // (BN // 4); q = (f % (BN // 4)) * 4
                        ok = k0 + r < Kq and bn + q < ldb
                        for j in range(4):
                            Bs[r * BN + q + j] = bp[k0 + r, bn + q + j] if ok else 0
                for tid in range(THREADS):
                    rows, cols = thread_rows_cols(tid)
                    for kk in range(0, BKW, 2):
                        for q in range(2):
                            av = np.array([As[r * A_LD + kk + q] for r in rows])
                            bv = np.array([Bs[(kk + q) * BN + c] for c in cols])
                            assert (av != 12345).all() and (bv != 12345).all()
                            acc[tid] += dp4a(av[:, None] * np.ones((1, 8), np.int64), bv[None, :] * np.ones((8, 1), np.int64))
            for tid in range(THREADS):
                rows, cols = thread_rows_cols(tid)
                for i, r in enumerate(rows):
                    for j, c in enumerate(cols):
                        if bm + r < M and bn + c < N:
                            C[bm + r, bn + c] = acc[tid, i, j]
    return C

def v4(a, b, BKW=8):
    aw, lda, bp, ldb, Kq = operands(a, b)
    M, N = a.shape[0], b.shape[1]
    C = np.full((M, N), -1, np.int64)
    tiles = -(-Kq // BKW)
    for by in range(-(-M // BM)):
        for bx in range(-(-N // BN)):
            bm, bn = by * BM, bx * BN
            acc = np.zeros((THREADS, 8, 8), np.int64)
            for t in range(tiles):
                k0 = t * BKW
                As = np.full(BKW * AS_LD, 12345, np.int64); Bs = np.full(BKW * BN, 12345, np.int64)
                LA = BM * BKW // 4 // THREADS; LB = BKW * BN // 4 // THREADS
                for tid in range(THREADS):
                    for l in range(LA):
                        f = tid + l * THREADS; r = f // (BKW // 4); q = (f % (BKW // 4)) * 4
                        ok = bm + r < M and k0 + q < Kq
                        for j in range(4):
                            As[(q + j) * AS_LD + r] = aw[bm + r, k0 + q + j] if ok else 0
                    for l in range(LB):
                        f = tid + l * THREADS; r = f // (BN // 4); q = (f % (BN // 4)) * 4
                        ok = k0 + r < Kq and bn + q < ldb
                        for j in range(4):
                            Bs[r * BN + q + j] = bp[k0 + r, bn + q + j] if ok else 0
                for tid in range(THREADS):
                    ty, tx = tid // 16, tid % 16
                    for k in range(BKW):
                        a0 = As[k * AS_LD + ty * 4: k * AS_LD + ty * 4 + 4]
                        a1 = As[k * AS_LD + 64 + ty * 4: k * AS_LD + 64 + ty * 4 + 4]
                        b0 = Bs[k * BN + tx * 4: k * BN + tx * 4 + 4]
                        b1 = Bs[k * BN + 64 + tx * 4: k * BN + 64 + tx * 4 + 4]
                        av = np.concatenate([a0, a1]); bv = np.concatenate([b0, b1])
                        assert (av != 12345).all() and (bv != 12345).all()
                        acc[tid] += dp4a(np.repeat(av[:, None], 8, 1), np.repeat(bv[None, :], 8, 0))
            for tid in range(THREADS):
                rows, cols = thread_rows_cols(tid)
                for i, r in enumerate(rows):
                    for j, c in enumerate(cols):
                        if bm + r < M and bn + c < N:
                            C[bm + r, bn + c] = acc[tid, i, j]
    return C

rng = np.random.default_rng(0)
for (m, k, n) in [(130, 36, 131), (5, 100, 4), (129, 16, 1)]:
    a = rng.integers(-128, 128, (m, k), dtype=np.int8); b = rng.integers(-128, 128, (k, n), dtype=np.int8)
    ref = R.int8_matmul(a, b)
    for name, fn in (("v4", v4), ("v5", v5)):
        got = fn(a, b)
        print(name, (m, k, n), "ok" if np.array_equal(got, ref) else f"WRONG {np.sum(got != ref)}")
