// Day 27: run kernel.cu's kernels on the host emulator of days 15/20 (.notes/day15_20_emu.h),
// reading a case from files and writing dQ, dK, dV, so .notes/day27_emulate.py can compare
// them with the float64 reference. Not part of the project's build.
//   emu <dir> <version> BH N d causal [dkdv_tile dq_tile]
#include "day15_20_emu.h"
#include <cmath>
#include <cstdio>
#include <string>
#include <map>

// --- v6's cp.async and 16-byte reductions (day27_emulate.py swaps kernel.cu's helpers for these).
// Per thread: copies wait in committed groups. EMU_CP_EAGER=1 lands each copy when it is issued
// (a read of a stage that another thread is still refilling then shows up as a wrong value);
// otherwise copies land only at cp.async.wait_group (a missing wait reads stale data).
#include <cstring>
#include <deque>
#include <mutex>
struct EmuCopy { float* dst; const float* src; int bytes; bool valid; };
inline thread_local std::vector<EmuCopy> emu_open_group;
inline thread_local std::deque<std::vector<EmuCopy>> emu_groups;
static const bool emu_eager = getenv("EMU_CP_EAGER") && atoi(getenv("EMU_CP_EAGER"));
inline void emu_land(const EmuCopy& c) {
    if (c.valid) std::memcpy(c.dst, c.src, c.bytes); else std::memset(c.dst, 0, c.bytes);
}
inline void emu_cp_async(float* dst, const float* src, int bytes, bool valid) {
    EmuCopy c{dst, src, bytes, valid};
    if (emu_eager) emu_land(c); else emu_open_group.push_back(c);
}
inline void emu_commit() { emu_groups.push_back(emu_open_group); emu_open_group.clear(); }
inline void emu_wait(int pending) {
    if (!emu_open_group.empty()) { fprintf(stderr, "cp.async copies never committed\n"); exit(3); }
    while ((int)emu_groups.size() > pending) {
        for (auto& c : emu_groups.front()) emu_land(c);
        emu_groups.pop_front();
    }
}
inline void emu_red_add4(float* p, float4 v) {
    if (reinterpret_cast<uintptr_t>(p) % 16) { fprintf(stderr, "misaligned red.v4\n"); exit(3); }
    std::lock_guard<std::mutex> g(emu_atomic_mutex);
    p[0] += v.x; p[1] += v.y; p[2] += v.z; p[3] += v.w;
}

namespace k27 {
#include KERNEL27
}
using namespace k27;

static std::vector<float> readf(const std::string& path, size_t n) {
    std::vector<float> v(n);
    FILE* f = fopen(path.c_str(), "rb");
    if (!f || fread(v.data(), 4, n, f) != n) { fprintf(stderr, "cannot read %s\n", path.c_str()); exit(2); }
    fclose(f);
    return v;
}
static void writef(const std::string& path, const std::vector<float>& v) {
    FILE* f = fopen(path.c_str(), "wb");
    fwrite(v.data(), 4, v.size(), f);
    fclose(f);
}
static int cdiv(long a, long b) { return (int)((a + b - 1) / b); }

typedef void (*FlashFn)(const float*, const float*, const float*, const float*, const float*,
                        const float*, float*, float*, float*, int, float, int);

int main(int argc, char** argv) {
    const std::string dir = argv[1], ver = argv[2];
    const int BH = atoi(argv[3]), N = atoi(argv[4]), d = atoi(argv[5]), causal = atoi(argv[6]);
    const std::string tk = argc > 7 ? argv[7] : "bm64_bn64_b1", tq = argc > 8 ? argv[8] : "bm64_bn64_b1";
    const size_t nd = (size_t)BH * N * d, nr = (size_t)BH * N;
    auto Q = readf(dir + "/Q.bin", nd), K = readf(dir + "/K.bin", nd), V = readf(dir + "/V.bin", nd),
         O = readf(dir + "/O.bin", nd), dO = readf(dir + "/dO.bin", nd), L = readf(dir + "/LSE.bin", nr);
    std::vector<float> dQ(nd, NAN), dK(nd, NAN), dV(nd, NAN), Dv(nr, NAN);
    const float scale = 1.0f / std::sqrt((float)d);
    const int rows = BH * N;
    emu_launch({(unsigned)cdiv(rows, 8), 1, 1}, {256, 1, 1}, [&] {
        fa_bwd_preprocess(O.data(), dO.data(), Dv.data(), (ver == "v2" || ver == "v5" || ver == "v6") ? dQ.data() : nullptr, rows, d);
    });
#define FN(name) {#name, name}
    std::map<std::string, FlashFn> fns = {
        FN(fa_bwd_v2_d64), FN(fa_bwd_v2_d128), FN(fa_bwd_v3_dkdv_d64), FN(fa_bwd_v3_dkdv_d128),
        FN(fa_bwd_v3_dq_d64), FN(fa_bwd_v3_dq_d128),
        FN(fa_bwd_v4_dkdv_d64_bm64_bn64_b1), FN(fa_bwd_v4_dkdv_d64_bm64_bn128_b1),
        FN(fa_bwd_v4_dkdv_d64_bm32_bn64_b2), FN(fa_bwd_v4_dkdv_d64_bm32_bn128_b1),
        FN(fa_bwd_v4_dkdv_d128_bm64_bn64_b1), FN(fa_bwd_v4_dkdv_d128_bm32_bn64_b1),
        FN(fa_bwd_v4_dq_d64_bm64_bn64_b1), FN(fa_bwd_v4_dq_d64_bm64_bn64_b2),
        FN(fa_bwd_v4_dq_d64_bm128_bn64_b1), FN(fa_bwd_v4_dq_d64_bm64_bn32_b2),
        FN(fa_bwd_v4_dq_d128_bm64_bn64_b1), FN(fa_bwd_v4_dq_d128_bm32_bn64_b1),
        FN(fa_bwd_v5_d64_bm64_bn64_b1), FN(fa_bwd_v5_d64_bm32_bn64_b2),
        FN(fa_bwd_v5_d128_bm64_bn64_b1), FN(fa_bwd_v5_d128_bm32_bn64_b1),
        FN(fa_bwd_v6_d64_bm64_bn64_s2_b1), FN(fa_bwd_v6_d64_bm32_bn64_s2_b2),
        FN(fa_bwd_v6_d64_bm64_bn128_s2_b1), FN(fa_bwd_v6_d64_bm32_bn128_s2_b1),
        FN(fa_bwd_v6_d128_bm32_bn64_s2_b1), FN(fa_bwd_v6_d128_bm64_bn64_s1_b1)};
    auto tile = [](const std::string& t, int& bm, int& bn) { sscanf(t.c_str(), "bm%d_bn%d", &bm, &bn); };
    auto run = [&](const std::string& name, bool dkdv, int bm, int bn) {
        if (!fns.count(name)) { fprintf(stderr, "no kernel %s\n", name.c_str()); exit(2); }
        FlashFn f = fns[name];
        dim3 grid{(unsigned)BH, (unsigned)cdiv(N, dkdv ? bn : bm), 1};
        emu_launch(grid, {256, 1, 1}, [&] {
            f(Q.data(), K.data(), V.data(), dO.data(), L.data(), Dv.data(), dQ.data(), dK.data(),
              dV.data(), N, scale, causal);
        });
    };
    const std::string D = std::to_string(d);
    if (ver == "v1") {
        std::vector<float> P((size_t)BH * N * N, NAN), dS((size_t)BH * N * N, NAN);
        emu_launch({(unsigned)cdiv(N, 32), (unsigned)cdiv(N, 8), (unsigned)BH}, {32, 8, 1}, [&] {
            fa_bwd_v1_scores(Q.data(), K.data(), V.data(), dO.data(), L.data(), Dv.data(), P.data(),
                             dS.data(), N, d, scale, causal);
        });
        emu_launch({(unsigned)cdiv(d, 32), (unsigned)cdiv(N, 8), (unsigned)BH}, {32, 8, 1}, [&] {
            fa_bwd_v1_dkdv(Q.data(), dO.data(), P.data(), dS.data(), dK.data(), dV.data(), N, d, scale);
        });
        emu_launch({(unsigned)cdiv(d, 32), (unsigned)cdiv(N, 8), (unsigned)BH}, {32, 8, 1}, [&] {
            fa_bwd_v1_dq(K.data(), dS.data(), dQ.data(), N, d, scale);
        });
    } else if (ver == "v2") {
        run("fa_bwd_v2_d" + D, true, 64, 64);
    } else if (ver == "v3") {
        run("fa_bwd_v3_dkdv_d" + D, true, 64, 64);
        run("fa_bwd_v3_dq_d" + D, false, 64, 64);
    } else if (ver == "v6") {
        int bm, bn;
        tile(tk, bm, bn);
        run("fa_bwd_v6_d" + D + "_" + tk, true, bm, bn);
    } else if (ver == "v5") {
        int bm, bn;
        tile(tk, bm, bn);
        run("fa_bwd_v5_d" + D + "_" + tk, true, bm, bn);
    } else {
        int bm, bn;
        tile(tk, bm, bn);
        run("fa_bwd_v4_dkdv_d" + D + "_" + tk, true, bm, bn);
        tile(tq, bm, bn);
        run("fa_bwd_v4_dq_d" + D + "_" + tq, false, bm, bn);
    }
    writef(dir + "/dQ.bin", dQ);
    writef(dir + "/dK.bin", dK);
    writef(dir + "/dV.bin", dV);
    return 0;
}
