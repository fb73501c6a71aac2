// Host emulation of what days 33 and 34's kernels use (no shared memory, no barriers), so that
// their index arithmetic and Philox bit patterns run on a machine without a GPU. Threads run one
// after another. Integer code (Philox, byte packing) is exact; the float math functions are the
// host's (logf, sinf...), within an ulp or two of the GPU's, so float results are compared with
// the tolerance, never bit for bit. Used by .notes/day33_emulate.py and .notes/day34_emulate.py.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct emu_uint3 { unsigned x = 0, y = 0, z = 0; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
inline emu_uint3 threadIdx, blockIdx;
inline dim3 gridDim, blockDim;

struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(4) uchar4 { unsigned char x, y, z, w; };
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
inline float2 make_float2(float x, float y) { return {x, y}; }
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }

template <class T> inline T __ldg(const T* p) { return *p; }
template <class T> inline T __ldcs(const T* p) { return *p; }
template <class T> inline void __stcs(T* p, T v) { *p = v; }

inline unsigned __umulhi(unsigned a, unsigned b) { return (unsigned)(((uint64_t)a * b) >> 32); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
inline void sincospif(float x, float* s, float* c) {
    const double a = M_PI * (double)x;
    *s = (float)std::sin(a);
    *c = (float)std::cos(a);
}
inline void __sincosf(float x, float* s, float* c) { *s = std::sin(x); *c = std::cos(x); }
inline float __saturatef(float x) { return x < 0.f ? 0.f : (x > 1.f ? 1.f : x); }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }
inline unsigned __float2uint_rn(float x) { return (unsigned)std::nearbyint(x); }
inline int __float2int_rn(float x) { return (int)std::nearbyint(x); }
inline int __float2int_rd(float x) { return (int)std::floor(x); }
inline float __int2float_rn(int x) { return (float)x; }
inline unsigned __byte_perm(unsigned x, unsigned y, unsigned s) {
    uint64_t v = ((uint64_t)y << 32) | x;
    unsigned r = 0;
    for (int i = 0; i < 4; ++i) r |= (unsigned)((v >> (8 * ((s >> (4 * i)) & 7))) & 0xFF) << (8 * i);
    return r;
}
#include <math.h>   // sqrtf, logf, floorf, fmaf, fminf, fmaxf in the global namespace

inline void emu_set_cluster(int) {}   // (day 33 has no clusters)

// Run `body` as grid x block threads, one after another.
inline void emu_launch(dim3 grid, dim3 block, const std::function<void()>& body) {
    gridDim = grid;
    blockDim = block;
    for (unsigned bz = 0; bz < grid.z; ++bz)
        for (unsigned by = 0; by < grid.y; ++by)
            for (unsigned bx = 0; bx < grid.x; ++bx) {
                blockIdx = {bx, by, bz};
                for (unsigned tz = 0; tz < block.z; ++tz)
                    for (unsigned ty = 0; ty < block.y; ++ty)
                        for (unsigned tx = 0; tx < block.x; ++tx) {
                            threadIdx = {tx, ty, tz};
                            body();
                        }
            }
}
