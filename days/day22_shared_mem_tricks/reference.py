"""Day 22 reference: what each access pattern's kernel writes, and the shared-memory
arithmetic Nsight Compute counts (bank conflicts and wavefronts), exactly.

The model (CUDA C++ Programming Guide, "Shared Memory", compute capability 5.x and later):
32 banks of 4-byte words, word w in bank w % 32. A warp's request is served in wavefronts
(passes); in one pass a bank delivers ONE word, to any number of lanes that asked for it. A
4-byte request takes as many passes as the largest number of different words asked of one
bank. An 8-byte (16-byte) request moves 256 (512) bytes, at least 2 (4) passes of 128 bytes:
each half-warp (quarter-warp) is one such group, costed the same way.
"""
import numpy as np

BANKS = 32
THREADS = 256                 # a block: 8 warps
WARPS = THREADS // 32
NW_STATIC = 2048              # words the static-buffer kernels fill
NW_DYNAMIC = 24576            # words (96 KB) of v10's dynamic buffer
SLICE = NW_DYNAMIC // WARPS   # v10: warp w reads its own 3072 words

# version -> (name in kernel.cu, words a lane reads at once, word(w, l, j) of its first word,
# words of the buffer the kernel fills)
PATTERNS = {
    "v1": ("stride1", 1, lambda w, l, j: l + j, NW_STATIC),
    "v2": ("stride2", 1, lambda w, l, j: 2 * l + j, NW_STATIC),
    "v3": ("stride3", 1, lambda w, l, j: 3 * l + j, NW_STATIC),
    "v4": ("stride32", 1, lambda w, l, j: 32 * l + j, NW_STATIC),
    "v5": ("padded_column", 1, lambda w, l, j: 33 * l + j, NW_STATIC),
    "v6": ("swizzled_column", 1, lambda w, l, j: 32 * l + (j ^ l), NW_STATIC),
    "v7": ("broadcast", 1, lambda w, l, j: j, NW_STATIC),
    "v8": ("float2", 2, lambda w, l, j: 2 * (l + j), NW_STATIC),
    "v9": ("float4", 4, lambda w, l, j: 4 * (l + j), NW_STATIC),
    "v10": ("dynamic96k", 1, lambda w, l, j: SLICE * w + l + 97 * j, NW_DYNAMIC),
}


def value_of(i, mod: int = 61):
    """What the kernels store in word i of the buffer: i % mod, small integers, so every sum
    is exact in float32. With mod = 32 a word's value is its bank."""
    return np.asarray(i) % mod


def passes(words, width: int = 1) -> int:
    """Wavefronts one warp request takes. `words`: the first word each of the 32 lanes reads;
    `width`: 1, 2 or 4 words a lane (4-, 8-, 16-byte access)."""
    words = [int(w) for w in words]
    group = 32 // width             # lanes served together: 32, 16 (half-warp), 8 (quarter)
    total = 0
    for g in range(0, len(words), group):
        per_bank: dict[int, set] = {}
        for w0 in words[g:g + group]:
            for k in range(width):
                per_bank.setdefault((w0 + k) % BANKS, set()).add(w0 + k)
        total += max((len(s) for s in per_bank.values()), default=0)
    return total


def ideal_passes(width: int = 1) -> int:
    """The fewest wavefronts a full-warp request of `width` words a lane can take."""
    return width


def pattern_passes(version: str, w: int = 0, j: int = 0) -> int:
    _, width, word, _ = PATTERNS[version]
    return passes([word(w, l, j) for l in range(32)], width)


def output(version: str, size, mod: int = 61) -> np.ndarray:
    """The kernel's output for `version` at size (blocks, iters), iters a multiple of 32:
    out[b * 256 + t] = (the sum, over it = 0..iters-1, of the words thread t reads at window
    j = it % 32) / (words a read). Exact in float32: every partial sum is an integer < 2^24."""
    blocks, iters = size
    if iters % 32:
        raise ValueError(f"iters must be a multiple of 32, got {iters}")
    _, width, word, _ = PATTERNS[version]
    t = np.arange(THREADS)
    w, l = t // 32, t % 32
    round_sum = sum(value_of(word(w, l, j) + k, mod) for j in range(32) for k in range(width))
    round_sum = np.broadcast_to(round_sum, (THREADS,))
    return np.tile((iters // 32) * round_sum / width, blocks).astype(np.float64)


def bank_sum_output(size) -> np.ndarray:
    """Every version's output with mod = 32 (value = bank): in each round of 32 windows every
    lane meets every bank once per word it reads, so it sums 0 + 1 + ... + 31 = 496 a round."""
    blocks, iters = size
    return np.full(blocks * THREADS, 496.0 * (iters // 32))


def counters(version: str, size) -> dict:
    """The Nsight Compute counters of ONE launch of `version` at size (blocks, iters), exactly:
    requests, wavefronts and bank conflicts (wavefronts beyond the ideal of the access width)
    for shared loads (the pattern) and stores (the fill: stride 1, conflict-free)."""
    blocks, iters = size
    _, width, word, nw = PATTERNS[version]
    ld_wave = ld_req = 0
    for w in range(WARPS):
        ld_wave += (iters // 32) * sum(pattern_passes(version, w, j) for j in range(32))
        ld_req += iters
    st_req = WARPS * -(-nw // THREADS)   # fill loop: every warp stores 32 consecutive words a turn
    st_wave = st_req                      # (nw is a multiple of 256: no partial warp)
    return {
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum": blocks * ld_wave,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum":
            blocks * (ld_wave - ld_req * ideal_passes(width)),
        "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum": blocks * st_wave,
        "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum": 0,
        "smsp__inst_executed_op_shared_ld.sum": blocks * ld_req,
    }
