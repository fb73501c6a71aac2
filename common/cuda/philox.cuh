// Counter-based random numbers: Philox-4x32-10 (taught on day 33, ddpm_kernel; days 58 and 59
// reuse it). Salmon, Moraes, Dror, Shaw, "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11;
// the constants are Random123's.
//
// A counter-based generator is a pure function: 128 bits of output from a 128-bit counter and
// a 64-bit key. There is no state to carry from one draw to the next, so any thread can draw
// any element of the stream directly: element i of a tensor uses counter i / 4. Ten rounds of
// two 32x32 -> 64-bit multiplies and a few XORs; the key is bumped by a Weyl sequence between
// rounds.
//
// Layout (the one cuRAND's curand_init(seed, subsequence, offset) gives Philox4_32_10):
//   key     = (seed low word, seed high word)
//   counter = (block low, block high, subsequence low, subsequence high)
// where word i of the stream (seed, subsequence) is word i % 4 of philox4x32_10(counter with
// block = i / 4, key). cuRAND's curand_init sets ctr = 0, key = seed, then
// skipahead_sequence(subsequence) adds the subsequence to the high 64 bits of the counter
// (Philox_State_Incr_hi) and skipahead(offset) adds offset / 4 to the low 64 bits
// (Philox_State_Incr) and starts at word offset % 4 (its STATE). So, for offset % 4 == 0,
// curand(&state) returns exactly stream_word(seed, subsequence, offset + k) for k = 0, 1, ...
// and curand4 returns the whole block.
//
// What matches cuRAND's DEVICE API (curand_init + curand / curand_normal) and what does not:
//   matches: the block function, the key and counter layout, the word order within a block,
//            the pairing of words for Box-Muller (words 2m, 2m+1 give normals 2m, 2m+1), and
//            the sine first, cosine second order of a pair.
//   differs: (1) an offset that is not a multiple of 4 (cuRAND's STATE: the first offset % 4
//            words of the first block are skipped); (2) the uniform mapping: cuRAND's
//            curand_uniform is u = x * 2^-32 + 2^-33 in float (uniform_curand below, in (0, 1]);
//            day 33 uses uniform_open (exact, (0, 1)); (3) curand_normal's Box-Muller computes
//            v = y * 2pi * 2^-32 + pi * 2^-32 and takes __sincosf(v) (the fast intrinsic) and
//            sqrtf(-2 logf(u)); day 33 takes sincospif(2u) and the accurate logf; (4) cuRAND
//            caches the second normal of a pair in its state (boxmuller_flag), which only
//            matters for mixing curand_normal with other draws on one state.
//
// cuRAND's HOST API (curandCreateGenerator(CURAND_RNG_PSEUDO_PHILOX4_32_10), curandGenerate*,
// day 58) lays the SAME blocks out differently: 65536 states side by side, so output chunk j
// (words 4j .. 4j+3, counting the generator offset) is block j / 65536 of subsequence
// j % 65536 (curand_counter below); uniform_curand and box_muller_curand reproduce
// curandGenerateUniform and curandGenerateNormal(0, 1) bit for bit (day 58 checks them live).
#pragma once

#include <cstdint>

namespace cuda100 {
namespace philox {

constexpr uint32_t M0 = 0xD2511F53u;   // multipliers
constexpr uint32_t M1 = 0xCD9E8D57u;
constexpr uint32_t W0 = 0x9E3779B9u;   // key increments (Weyl): golden ratio, sqrt(3) - 1
constexpr uint32_t W1 = 0xBB67AE85u;

// One round: (hi0, lo0) = M0 * c.x, (hi1, lo1) = M1 * c.z (32x32 -> 64 bits: one IMAD.HI and
// one IMAD each), then c = (hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0).
__device__ __forceinline__ uint4 one_round(uint4 c, uint2 k) {
    const uint32_t hi0 = __umulhi(M0, c.x), lo0 = M0 * c.x;
    const uint32_t hi1 = __umulhi(M1, c.z), lo1 = M1 * c.z;
    return make_uint4(hi1 ^ c.y ^ k.x, lo1, hi0 ^ c.w ^ k.y, lo0);
}

// Philox-4x32-R; R = 10 is the standard (Crush-resistant with a safety margin) and cuRAND's.
template <int R = 10>
__device__ __forceinline__ uint4 philox4x32(uint4 c, uint2 k) {
#pragma unroll
    for (int r = 0; r < R; ++r) {
        c = one_round(c, k);
        k.x += W0;
        k.y += W1;
    }
    return c;
}

__device__ __forceinline__ uint4 philox4x32_10(uint4 counter, uint2 key) {
    return philox4x32<10>(counter, key);
}

__device__ __forceinline__ uint2 key_of(unsigned long long seed) {
    return make_uint2((uint32_t)seed, (uint32_t)(seed >> 32));
}

// the counter of block `block` (= stream word / 4) of subsequence `sub`
__device__ __forceinline__ uint4 counter_of(unsigned long long block, unsigned long long sub) {
    return make_uint4((uint32_t)block, (uint32_t)(block >> 32), (uint32_t)sub, (uint32_t)(sub >> 32));
}

// --- 32-bit word -> uniform float -----------------------------------------------------------
//
// uniform_open: u = ((x >> 8) | 1) * 2^-24 = (2k + 1) * 2^-24 with k = x >> 9, the odd
// multiples of 2^-24 in the OPEN interval (0, 1): 2^-24 <= u <= 1 - 2^-24. Each is exact in
// float32 (an odd integer below 2^24 times a power of two), so a CPU computes the same u from
// the same word. Built without an int-to-float conversion (I2F runs at 1/8 of the FP32 rate):
// the bits 0x3F800000 | k are the float 1 + k 2^-23 in [1, 2), and subtracting 1 - 2^-24 is
// exact (Sterbenz: both operands within a factor of 2), leaving (2k + 1) 2^-24.
__device__ __forceinline__ float uniform_open(uint32_t x) {
    return __uint_as_float(0x3F800000u | (x >> 9)) - 0.99999994039535522461f;  // 1 - 2^-24
}

// cuRAND's curand_uniform mapping (for day 58): x * 2^-32 + 2^-33 in float, in (0, 1]
// (x converted to float first, so words near 2^32 round to 1.0f).
__device__ __forceinline__ float uniform_curand(uint32_t x) {
    return (float)x * 2.3283064365386963e-10f + 1.1641532182693481e-10f;
}

// --- two words -> two standard normals (Box-Muller) ---------------------------------------
//
// r = sqrt(-2 ln u1), theta = 2 pi u2, (r sin theta, r cos theta). With uniform_open the
// largest |z| is sqrt(-2 ln 2^-24) = 5.77 (a normal exceeds it with probability 8e-9).
// Accurate: logf and sqrtf as IEEE float, sincospif(2 u2) = sin/cos of pi * (2 u2) with the
// multiplication by pi done inside (2 u2 is exact), errors of a few ulp.
__device__ __forceinline__ float2 box_muller(uint32_t a, uint32_t b) {
    const float u1 = uniform_open(a), u2 = uniform_open(b);
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    sincospif(2.0f * u2, &s, &c);
    return make_float2(r * s, r * c);
}

// Fast: sin and cos from the special-function unit (MUFU) instead of sincospif's
// polynomials. __sincosf is accurate to ~2^-21.4 absolute only on [-pi, pi], so the angle is
// taken as pi (2 u2 - 1) in (-pi, pi) and the signs flipped: sin(2 pi u) = -sin(pi (2u - 1)),
// cos(2 pi u) = -cos(pi (2u - 1)); |error| <= 5.77 * 2^-21.4 = 2e-6. The logarithm stays
// logf: __logf's absolute error (2^-21.4 near 1) exceeds -ln u1 itself when u1 is within
// 1e-6 of 1, and r = sqrt(-2 ln u1) would lose all its digits there (or turn NaN).
__device__ __forceinline__ float2 box_muller_fast(uint32_t a, uint32_t b) {
    const float u1 = uniform_open(a), u2 = uniform_open(b);
    const float r = sqrtf(-2.0f * logf(u1));
    float s, c;
    __sincosf(3.14159265358979f * (2.0f * u2 - 1.0f), &s, &c);
    return make_float2(-r * s, -r * c);
}

// Four normals from one block: (w.x, w.y) -> normals 0, 1 and (w.z, w.w) -> normals 2, 3.
template <bool FAST = false>
__device__ __forceinline__ float4 normal4(uint4 w) {
    const float2 p = FAST ? box_muller_fast(w.x, w.y) : box_muller(w.x, w.y);
    const float2 q = FAST ? box_muller_fast(w.z, w.w) : box_muller(w.z, w.w);
    return make_float4(p.x, p.y, q.x, q.y);
}

// Normals 4*block .. 4*block + 3 of stream (seed, subsequence) = (key, sub).
template <bool FAST = false>
__device__ __forceinline__ float4 normal4_at(unsigned long long block, unsigned long long sub,
                                             uint2 key) {
    return normal4<FAST>(philox4x32_10(counter_of(block, sub), key));
}

// --- cuRAND's host-API stream (day 58) --------------------------------------------------------
//
// curandGenerate* with CURAND_RNG_PSEUDO_PHILOX4_32_10 (orderings default, BEST and DEFAULT):
// word g of the output stream (g = generator offset + element index) is word g % 4 of the block
// of chunk j = g / 4, whose counter is (block j >> 16, subsequence j & 0xFFFF) under the key of
// the seed. (CURAND_ORDERING_PSEUDO_DYNAMIC uses a device-dependent number of subsequences.)
constexpr int CURAND_LANES_LOG2 = 16;

__device__ __forceinline__ uint4 curand_counter(unsigned long long chunk) {
    return counter_of(chunk >> CURAND_LANES_LOG2, chunk & ((1ull << CURAND_LANES_LOG2) - 1));
}

// the four words of chunk j of cuRAND's stream for `key`
__device__ __forceinline__ uint4 curand_block(unsigned long long chunk, uint2 key) {
    return philox4x32_10(curand_counter(chunk), key);
}

// curandGenerateNormal's Box-Muller on words (a, b), bit for bit: u = a 2^-32 + 2^-33 (as
// uniform_curand), v = fma(b, c, c / 2) with c = float(2 pi) 2^-32 (0x1.921fb6p-30, exact in
// float: cuRAND's CURAND_2POW32_INV_2PI), r = sqrtf(-2 logf(u)) (IEEE sqrt, the accurate logf),
// (sin v, cos v) from __sincosf; returns (r sin v, r cos v). u may be 1.0f (r = 0: z = +-0).
__device__ __forceinline__ float2 box_muller_curand(uint32_t a, uint32_t b) {
    const float u = uniform_curand(a);
    const float v = __fmaf_rn((float)b, 0x1.921fb6p-30f, 0x1.921fb6p-31f);
    float s, c;
    __sincosf(v, &s, &c);
    const float r = sqrtf(-2.0f * logf(u));
    return make_float2(s * r, c * r);
}

// Four normals of one block, curandGenerateNormal's order: (x, y) -> 0, 1 and (z, w) -> 2, 3.
__device__ __forceinline__ float4 normal4_curand(uint4 w) {
    const float2 p = box_muller_curand(w.x, w.y), q = box_muller_curand(w.z, w.w);
    return make_float4(p.x, p.y, q.x, q.y);
}

// Bernoulli from a word with an integer threshold t = round(p 2^32) in [0, 2^32]: P(w < t) = t
// 2^-32 exactly (no rounding of a float u near 1; p = 1 is t = 2^32, every word passes).
__device__ __forceinline__ bool bernoulli_word(uint32_t w, unsigned long long t) {
    return (unsigned long long)w < t;
}

}  // namespace philox
}  // namespace cuda100
