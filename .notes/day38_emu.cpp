// Day 38 on the CPU: kernel.cu compiled as host C++ on the emulator of .notes/day15_20_emu.h
// (each block's threads are std::threads, blocks run one after another) and exposed to Python
// through one entry point, so .notes/day38_emulate.py can run driver.launch() itself with a
// fake kernel loader. Checks indices, bounds, barriers-as-written and the pass plans; nothing
// about speed or registers. Built by the script (k.inc = kernel.cu with its dynamic shared
// memory replaced by a static buffer).
#include "day15_20_emu.h"
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

typedef unsigned int u32;
struct alignas(16) uint4 { u32 x, y, z, w; };
struct alignas(16) int4 { int x, y, z, w; };
inline uint4 make_uint4(u32 x, u32 y, u32 z, u32 w) { return {x, y, z, w}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline u32 min(u32 a, u32 b) { return a < b ? a : b; }
inline u32 max(u32 a, u32 b) { return a > b ? a : b; }
alignas(16) static u32 emu_dyn[1 << 16];

#include "k.inc"

typedef const long long* Args;
#define P(i) ((u32*)a[i])
#define I(i) ((int)a[i])
static std::map<std::string, std::function<void(Args)>> table() {
    std::map<std::string, std::function<void(Args)>> t;
#define K4(name) t[#name] = [](Args a) { name(P(0), P(1), P(2), P(3), I(4)); };
#define K5(name) t[#name] = [](Args a) { name(P(0), P(1), P(2), P(3), I(4), I(5)); };
#define KP(name, T) t[#name] = [](Args a) { name(P(0), P(1), P(2), P(3), I(4), (const T*)a[5], I(6)); };
    K5(sort_v1_merge_keys) K5(sort_v1_merge_pairs)
    K4(sort_v2_block_keys) K4(sort_v2_block_pairs) K5(sort_v2_merge_keys) K5(sort_v2_merge_pairs)
    K4(sort_v3_block_keys) K4(sort_v3_block_pairs)
    KP(sort_v3_merge_keys, int) KP(sort_v3_merge_pairs, int)
    K4(sort_v4_block_t256_keys) K4(sort_v4_block_t256_pairs) K4(sort_v4_block_t512_keys)
    K4(sort_v4_block_t512_pairs) K4(sort_v4_block_t1024_keys) K4(sort_v4_block_t1024_pairs)
    K4(sort_v4_block_t512_i32_keys)
    KP(sort_v4_merge_t256_keys, int4) KP(sort_v4_merge_t256_pairs, int4)
    KP(sort_v4_merge_t512_keys, int4) KP(sort_v4_merge_t512_pairs, int4)
    KP(sort_v4_merge_t1024_keys, int4) KP(sort_v4_merge_t1024_pairs, int4)
    KP(sort_v5_merge_t256_keys, int4) KP(sort_v5_merge_t256_pairs, int4)
    KP(sort_v5_merge_t512_keys, int4) KP(sort_v5_merge_t512_pairs, int4)
#define KV6(name) t[#name] = [](Args a) { name(P(0), P(1), P(2), P(3), I(4), (const int*)a[5], I(6), I(7), I(8), I(9)); };
    KV6(sort_v6_merge_t256_keys) KV6(sort_v6_merge_t256_pairs)
    KV6(sort_v6_merge_t512_keys) KV6(sort_v6_merge_t512_pairs)
    K4(sort_v7_block_t256_i32_keys) K4(sort_v7_block_t512_i32_keys)
    KV6(sort_v7_merge_t256_keys) KV6(sort_v7_merge_t256_pairs)
    KV6(sort_v7_merge_t512_keys) KV6(sort_v7_merge_t512_pairs)
    KV6(sort_v7_merge_t256_i32_keys) KV6(sort_v7_merge_t512_i32_keys)
    KV6(sort_v8_merge_t256_i32_keys) KV6(sort_v8_merge_t512_i32_keys)
    KV6(sort_v8_merge_t256_keys) KV6(sort_v8_merge_t256_pairs)
    KV6(sort_v8_merge_t512_keys) KV6(sort_v8_merge_t512_pairs)
    t["sort_v8_rank"] = [](Args a) {
        sort_v8_rank(P(0), I(1), I(2), I(3), I(4), I(5), (int*)a[6], I(7)); };
    t["sort_v6_rank"] = [](Args a) {
        sort_v6_rank(P(0), I(1), I(2), I(3), I(4), I(5), (int*)a[6], I(7)); };
    t["sort_v3_partition"] = [](Args a) { sort_v3_partition(P(0), I(1), I(2), I(3), (int*)a[4], I(5)); };
    t["sort_v4_table"] = [](Args a) { sort_v4_table(P(0), I(1), I(2), I(3), I(4), (uint4*)a[5], I(6)); };
    t["sort_v4_split"] = [](Args a) {
        sort_v4_split(P(0), I(1), I(2), I(3), I(4), (const uint4*)a[5], (int4*)a[6], I(7)); };
    return t;
}

extern "C" int emu_run(const char* name, unsigned grid, unsigned block, unsigned smem_bytes, Args a) {
    static auto t = table();
    auto it = t.find(name);
    if (it == t.end()) { fprintf(stderr, "no kernel %s\n", name); return 1; }
    if (smem_bytes > sizeof(emu_dyn)) { fprintf(stderr, "%s: %u bytes of shared memory\n", name, smem_bytes); return 2; }
    // poison the dynamic shared memory: nothing may read a word it did not write
    memset(emu_dyn, 0xA5, sizeof(emu_dyn));
    auto fn = it->second;
    emu_launch({grid, 1, 1}, {block, 1, 1}, [&] { fn(a); });
    return 0;
}
