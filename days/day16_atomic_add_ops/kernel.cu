// Day 16: atomics and histograms.
//
//   hist[b] = number of i with keys[i] == b,   0 <= b < bins
//
// Keys are uint8 when bins <= 256 (a byte histogram) and uint16 otherwise (up to 4096
// bins here), and every key must be < bins (the driver checks; the kernels do not spend an
// instruction per key on it). Counts are int32, exact.
//
// Build on its own:  nvcc -arch=sm_90 -O3 -cubin kernel.cu
// Run:               python run_day.py 16
//
// Every entry point exists twice, for uint8 keys (_u8) and uint16 keys (_u16). The driver
// zeroes hist before each launch.
//
//   v1  one key per thread, atomicAdd straight into the global histogram: every increment
//       is a read-modify-write at the L2; keys that collide (a hot bin) queue up there
//   v2  privatized: each block counts into its own histogram in shared memory (atomics
//       on-chip, an order of magnitude closer than L2), grid-stride over the keys, then
//       adds its non-zero bins to the global histogram: bins x blocks global atomics, not n
//   v3  v2 + warp aggregation: __match_any_sync finds the lanes of a warp holding the same
//       key; one leader per distinct key adds the group's size. A warp whose 32 keys are all
//       the hot byte issues 1 shared atomic instead of 32 colliding ones
//   v4  v2 + 16-byte loads: one uint4 brings 16 byte keys (or 8 uint16 keys) per thread
//   v5  v4 + replicated sub-histograms: R copies of the histogram interleaved in shared
//       memory (bin b, copy r at word b*R + r); lane l counts into copy l % R. With R = 32
//       (<= 256 bins) every lane of a warp has its own bank: no bank conflicts and no
//       same-address collisions, whatever the keys. 4096 bins fit only R = 2 (32 KB)
//   v6  v5 + run aggregation in registers: a thread keeps (key, count) of the current run
//       and issues one atomicAdd(count) when the key changes. On skewed data most keys
//       repeat, so most shared atomics disappear; on uniform data it costs a compare
#include <cstdint>

// ---------------------------------------------------------------------------------------
// v1: global atomics
// ---------------------------------------------------------------------------------------
template <typename Key>
__device__ __forceinline__ void hist_global(const Key* __restrict__ keys, int* __restrict__ hist,
                                            long long n, int bins) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(hist + keys[i], 1);
}

// ---------------------------------------------------------------------------------------
// Privatization helpers (v2-v6): a block's histogram lives in dynamic shared memory as
// `bins * R` ints (R = 1 for v2-v4). Zero it, count, then merge into the global histogram.
// ---------------------------------------------------------------------------------------
__device__ __forceinline__ void zero_shared(int* sh, int words) {
    for (int i = threadIdx.x; i < words; i += blockDim.x) sh[i] = 0;
    __syncthreads();
}

// Add the block's counts to the global histogram: bin b sums its R copies (in a rotated
// order, so the 32 threads of a warp read 32 different banks), one global atomic per
// non-zero bin.
__device__ __forceinline__ void merge_to_global(const int* sh, int* __restrict__ hist, int bins,
                                                int log2r) {
    __syncthreads();
    const int R = 1 << log2r;
    for (int b = threadIdx.x; b < bins; b += blockDim.x) {
        int c = 0;
        for (int j = 0; j < R; ++j) c += sh[(b << log2r) + ((j + b) & (R - 1))];
        if (c) atomicAdd(hist + b, c);
    }
}

// ---------------------------------------------------------------------------------------
// v2: one shared histogram per block, one key per thread per grid-stride step
// ---------------------------------------------------------------------------------------
template <typename Key>
__device__ __forceinline__ void hist_shared(const Key* __restrict__ keys, int* __restrict__ hist,
                                            long long n, int bins) {
    extern __shared__ int sh[];
    zero_shared(sh, bins);
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(sh + keys[i], 1);
    merge_to_global(sh, hist, bins, 0);
}

// ---------------------------------------------------------------------------------------
// v3: warp-aggregated shared atomics. The loop runs over warp-sized chunks so that all 32
// lanes take every step together (lanes past the end carry a key no real key equals), as
// __match_any_sync(full mask, k) requires. peers = the lanes whose key equals mine; the
// lowest of them adds popc(peers) for the group.
// ---------------------------------------------------------------------------------------
template <typename Key>
__device__ __forceinline__ void hist_warp_aggregated(const Key* __restrict__ keys,
                                                     int* __restrict__ hist, long long n,
                                                     int bins) {
    extern __shared__ int sh[];
    zero_shared(sh, bins);
    const unsigned lane = threadIdx.x & 31;
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long base = (long long)blockIdx.x * blockDim.x + (threadIdx.x & ~31u); base < n;
         base += stride) {
        const long long i = base + lane;
        const bool valid = i < n;
        const unsigned k = valid ? (unsigned)keys[i] : 0xffffffffu;
        const unsigned peers = __match_any_sync(0xffffffffu, k);
        if (valid && lane == (unsigned)(__ffs(peers) - 1)) atomicAdd(sh + k, __popc(peers));
    }
    merge_to_global(sh, hist, bins, 0);
}

// ---------------------------------------------------------------------------------------
// v4-v6: 16-byte loads. One uint4 = 16 uint8 keys or 8 uint16 keys. The array base is
// 256-byte aligned (cudaMalloc); the last n % KEYS_PER_VEC keys are read one by one.
// ---------------------------------------------------------------------------------------
template <typename Key> struct Unpack;
// __byte_perm(w, 0, s) builds a word from the bytes of w (selectors 0-3) and of 0 (4-7):
// one PRMT instruction extracts a key and zero-extends it.
template <> struct Unpack<uint8_t> {
    static constexpr int PER_WORD = 4;
    __device__ static unsigned get(unsigned w, int j) { return __byte_perm(w, 0u, 0x4440u | j); }
};
template <> struct Unpack<uint16_t> {
    static constexpr int PER_WORD = 2;
    __device__ static unsigned get(unsigned w, int j) {
        return __byte_perm(w, 0u, j ? 0x4432u : 0x4410u);
    }
};

// Call count(k) for every key of a uint4.
template <typename Key, typename F>
__device__ __forceinline__ void for_each_key(const uint4& v, F&& count) {
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int q = 0; q < 4; ++q)
#pragma unroll
        for (int j = 0; j < Unpack<Key>::PER_WORD; ++j) count(Unpack<Key>::get(w[q], j));
}

// Grid-stride over the uint4s of keys, two loads in flight per thread (both are issued
// before the first key is counted), then the scalar tail; count(k) for each key.
template <typename Key, typename F>
__device__ __forceinline__ void scan_keys_vec(const Key* __restrict__ keys, long long n, F&& count) {
    constexpr int PER_VEC = 16 / sizeof(Key);
    const uint4* __restrict__ kv = reinterpret_cast<const uint4*>(keys);
    const long long nv = n / PER_VEC;
    const long long stride = (long long)gridDim.x * blockDim.x;
    const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long i = first;
    for (; i + stride < nv; i += 2 * stride) {
        const uint4 a = __ldcs(kv + i);
        const uint4 b = __ldcs(kv + i + stride);
        for_each_key<Key>(a, count);
        for_each_key<Key>(b, count);
    }
    if (i < nv) for_each_key<Key>(__ldcs(kv + i), count);
    const long long t = nv * PER_VEC + first;  // fewer than PER_VEC keys left
    if (t < n) count((unsigned)keys[t]);
}

template <typename Key>
__device__ __forceinline__ void hist_shared_vec(const Key* __restrict__ keys, int* __restrict__ hist,
                                                long long n, int bins) {
    extern __shared__ int sh[];
    zero_shared(sh, bins);
    scan_keys_vec(keys, n, [&](unsigned k) { atomicAdd(sh + k, 1); });
    merge_to_global(sh, hist, bins, 0);
}

// v5: R = 2^log2r interleaved copies; lane l counts into copy l % R, at word k*R + l % R.
// With R = 32 the word's bank is (k*32 + lane) % 32 = lane: each lane owns a bank.
// `mine` is the byte address of the thread's copy and `row` = 4R bytes per bin, so a key
// costs one PRMT (extract), one IMAD (k * row + mine) and the atomic.
__device__ __forceinline__ int* bin_of(char* mine, unsigned k, unsigned row) {
    return reinterpret_cast<int*>(mine + k * row);
}

template <typename Key>
__device__ __forceinline__ void hist_replicated(const Key* __restrict__ keys, int* __restrict__ hist,
                                                long long n, int bins, int log2r) {
    extern __shared__ int sh[];
    zero_shared(sh, bins << log2r);
    const unsigned row = 4u << log2r;
    char* mine = reinterpret_cast<char*>(sh + (threadIdx.x & ((1u << log2r) - 1)));
    scan_keys_vec(keys, n, [&](unsigned k) { atomicAdd(bin_of(mine, k, row), 1); });
    merge_to_global(sh, hist, bins, log2r);
}

// v6: v5 + one atomicAdd per run of equal keys seen by a thread (its keys are consecutive
// within each uint4, and the run carries over from one uint4 to the next).
template <typename Key>
__device__ __forceinline__ void hist_replicated_runs(const Key* __restrict__ keys,
                                                     int* __restrict__ hist, long long n, int bins,
                                                     int log2r) {
    extern __shared__ int sh[];
    zero_shared(sh, bins << log2r);
    const unsigned row = 4u << log2r;
    char* mine = reinterpret_cast<char*>(sh + (threadIdx.x & ((1u << log2r) - 1)));
    unsigned run_key = 0xffffffffu;  // no run yet
    int run_len = 0;
    scan_keys_vec(keys, n, [&](unsigned k) {
        if (k == run_key) {
            ++run_len;
        } else {
            if (run_len) atomicAdd(bin_of(mine, run_key, row), run_len);
            run_key = k;
            run_len = 1;
        }
    });
    if (run_len) atomicAdd(bin_of(mine, run_key, row), run_len);
    merge_to_global(sh, hist, bins, log2r);
}

// ---------------------------------------------------------------------------------------
// Entry points: hist_vN_u8 / hist_vN_u16 (keys, hist, n, bins[, log2r])
// ---------------------------------------------------------------------------------------
#define HIST_ENTRIES(SUFFIX, KEY)                                                              \
    extern "C" __global__ void hist_v1_##SUFFIX(const KEY* __restrict__ keys, int* __restrict__ hist, \
                                                long long n, int bins) {                        \
        hist_global<KEY>(keys, hist, n, bins);                                                 \
    }                                                                                          \
    extern "C" __global__ void hist_v2_##SUFFIX(const KEY* __restrict__ keys, int* __restrict__ hist, \
                                                long long n, int bins) {                        \
        hist_shared<KEY>(keys, hist, n, bins);                                                 \
    }                                                                                          \
    extern "C" __global__ void hist_v3_##SUFFIX(const KEY* __restrict__ keys, int* __restrict__ hist, \
                                                long long n, int bins) {                        \
        hist_warp_aggregated<KEY>(keys, hist, n, bins);                                        \
    }                                                                                          \
    extern "C" __global__ void hist_v4_##SUFFIX(const KEY* __restrict__ keys, int* __restrict__ hist, \
                                                long long n, int bins) {                        \
        hist_shared_vec<KEY>(keys, hist, n, bins);                                             \
    }                                                                                          \
    extern "C" __global__ void hist_v5_##SUFFIX(const KEY* __restrict__ keys, int* __restrict__ hist, \
                                                long long n, int bins, int log2r) {             \
        hist_replicated<KEY>(keys, hist, n, bins, log2r);                                      \
    }                                                                                          \
    extern "C" __global__ void hist_v6_##SUFFIX(const KEY* __restrict__ keys, int* __restrict__ hist, \
                                                long long n, int bins, int log2r) {             \
        hist_replicated_runs<KEY>(keys, hist, n, bins, log2r);                                 \
    }

HIST_ENTRIES(u8, uint8_t)
HIST_ENTRIES(u16, uint16_t)

// ---------------------------------------------------------------------------------------
// Extra (not a version): float atomics for partial sums, seg_sum[segment[i]] += values[i].
// segsum_global adds straight into global memory; segsum_shared privatizes in shared
// memory like v2. The totals match a float64 reference to float32 rounding, but the order
// of the additions (and so the last bits) changes from run to run.
// ---------------------------------------------------------------------------------------
extern "C" __global__ void segsum_global(const float* __restrict__ values,
                                         const uint8_t* __restrict__ segment,
                                         float* __restrict__ seg_sum, long long n, int segs) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(seg_sum + segment[i], values[i]);
}

extern "C" __global__ void segsum_shared(const float* __restrict__ values,
                                         const uint8_t* __restrict__ segment,
                                         float* __restrict__ seg_sum, long long n, int segs) {
    extern __shared__ float part[];
    for (int s = threadIdx.x; s < segs; s += blockDim.x) part[s] = 0.f;
    __syncthreads();
    const long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        atomicAdd(part + segment[i], values[i]);
    __syncthreads();
    for (int s = threadIdx.x; s < segs; s += blockDim.x) atomicAdd(seg_sum + s, part[s]);
}
