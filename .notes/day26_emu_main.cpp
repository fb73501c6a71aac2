// Day 26 on the host emulator (.notes/day15_20_emu.h, no GPU): every version's kernels (and,
// with -DDAY26_SWEEP, every sweep candidate) against a float64 attention, at ragged sizes, plus
// v4 through strided Q/K/V in a fused [B, T, 3, H, D] buffer. cp.async is modelled as DEFERRED
// copies that land only at cp.async.wait_group, so a wrong wait count or a missing buffer swap
// reads stale data. Built and run by .notes/day26_emulate.py.
#include "day15_20_emu.h"
#include <deque>
#include <cstdio>
#include <random>
#include <string>

// --- cp.async emulation (per thread: a list of committed groups of pending copies) ------------
struct EmuCopy { float* dst; const float* src; bool valid; };
inline thread_local std::vector<EmuCopy> emu_open_group;
inline thread_local std::deque<std::vector<EmuCopy>> emu_groups;
inline void emu_cp_async16(float* dst, const float* src, bool valid) { emu_open_group.push_back({dst, src, valid}); }
inline void emu_commit() { emu_groups.push_back(emu_open_group); emu_open_group.clear(); }
inline void emu_wait(int pending) {
    while ((int)emu_groups.size() > pending) {
        for (auto& c : emu_groups.front()) {
            if (c.valid) std::memcpy(c.dst, c.src, 16); else std::memset(c.dst, 0, 16);
        }
        emu_groups.pop_front();
    }
}
inline float __expf(float x) { return std::exp(x); }

#include KERNEL_SRC

static int failures = 0;

static void ref_attention(const float* q, const float* k, const float* v, int bh, int n, int d,
                          bool causal, std::vector<double>& o, std::vector<double>& lse) {
    o.assign((size_t)bh * n * d, 0.0); lse.assign((size_t)bh * n, 0.0);
    const double scale = 1.0 / std::sqrt((double)d);
    std::vector<double> s(n);
    for (int h = 0; h < bh; ++h)
        for (int r = 0; r < n; ++r) {
            const int kend = causal ? r + 1 : n;
            double m = -INFINITY;
            for (int c = 0; c < kend; ++c) {
                double acc = 0;
                for (int x = 0; x < d; ++x) acc += (double)q[((size_t)h * n + r) * d + x] * k[((size_t)h * n + c) * d + x];
                s[c] = acc * scale; m = std::max(m, s[c]);
            }
            double l = 0;
            for (int c = 0; c < kend; ++c) l += std::exp(s[c] - m);
            for (int c = 0; c < kend; ++c) {
                const double p = std::exp(s[c] - m) / l;
                for (int x = 0; x < d; ++x) o[((size_t)h * n + r) * d + x] += p * v[((size_t)h * n + c) * d + x];
            }
            lse[(size_t)h * n + r] = m + std::log(l);
        }
}

static double rel_l2(const std::vector<float>& got, const std::vector<double>& want) {
    double num = 0, den = 0;
    for (size_t i = 0; i < want.size(); ++i) {
        if (!std::isfinite(got[i])) return INFINITY;
        num += (got[i] - want[i]) * (got[i] - want[i]); den += want[i] * want[i];
    }
    return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

static void report(const std::string& what, double eo, double el) {
    const bool ok = eo <= 1e-5 && el <= 1e-5;
    if (!ok) ++failures;
    std::printf("  %-44s o %.2e lse %.2e %s\n", what.c_str(), eo, el, ok ? "ok" : "FAIL");
}

static int cdiv(int a, int b) { return (a + b - 1) / b; }

using Entry = void (*)(const float*, const float*, const float*, float*, float*, int, int, int,
                       long long, long long, long long, long long, long long, long long,
                       long long, long long, long long, long long, long long, long long, float);

static void run_flash(Entry fn, int bm, int threads, const float* q, const float* k, const float* v,
                      float* o, float* lse, int B, int H, int N, const long long* st, float scale) {
    emu_launch({(unsigned)cdiv(N, bm), (unsigned)H, (unsigned)B}, {(unsigned)threads, 1, 1}, [&] {
        fn(q, k, v, o, lse, B, H, N, st[0], st[1], st[2], st[3], st[4], st[5], st[6], st[7], st[8],
           st[9], st[10], st[11], scale);
    });
}

struct Flash { const char* name; Entry fn; int d, causal, bm, bn, tm, tn; };

#define F(n, D, C, BM, BN, TM, TN) {#n, n, D, C, BM, BN, TM, TN}
static const Flash FLASH[] = {
    F(attn_v3_d64_c0, 64, 0, 64, 64, 4, 8), F(attn_v3_d64_c1, 64, 1, 64, 64, 4, 8),
    F(attn_v3_d128_c0, 128, 0, 64, 32, 4, 4), F(attn_v3_d128_c1, 128, 1, 64, 32, 4, 4),
    F(attn_v4_d64_c0, 64, 0, 64, 64, 4, 8), F(attn_v4_d64_c1, 64, 1, 64, 64, 4, 8),
    F(attn_v4_d128_c0, 128, 0, 64, 32, 4, 4), F(attn_v4_d128_c1, 128, 1, 64, 32, 4, 4),
#ifdef DAY26_SWEEP
#define FC(D, BM, BN, TM, TN) F(flash_cand_bm##BM##n##BN##t##TM##x##TN##_d##D##_c0, D, 0, BM, BN, TM, TN), \
                              F(flash_cand_bm##BM##n##BN##t##TM##x##TN##_d##D##_c1, D, 1, BM, BN, TM, TN)
    FC(64, 64, 64, 4, 8), FC(64, 64, 32, 4, 4), FC(64, 32, 64, 2, 8), FC(64, 128, 64, 8, 4),
    FC(128, 64, 32, 4, 4), FC(128, 64, 64, 4, 8), FC(128, 32, 64, 2, 8), FC(128, 128, 32, 4, 4),
#endif
};

int main() {
    std::mt19937_64 g(26);
    std::normal_distribution<float> nd(0.f, 1.f);
    const int sizes[][3] = {{2, 1}, {1, 17}, {1, 63}, {1, 65}, {1, 130}, {1, 200}};
    for (auto& sz : sizes) {
        const int bh = sz[0], n = sz[1];
        for (int d : {64, 128})
            for (int causal : {0, 1}) {
                const size_t ne = (size_t)bh * n * d;
                std::vector<float> q(ne), k(ne), v(ne);
                for (auto* a : {&q, &k, &v}) for (auto& x : *a) x = nd(g);
                std::vector<double> ro, rl;
                ref_attention(q.data(), k.data(), v.data(), bh, n, d, causal, ro, rl);
                const float scale = 1.f / std::sqrt((float)d);
                char tag[64];
                std::snprintf(tag, sizeof tag, "%dx%dx%dx%d", bh, n, d, causal);
                auto fresh = [&](std::vector<float>& o, std::vector<float>& l) {
                    o.assign(ne, NAN); l.assign((size_t)bh * n, NAN);
                };
                std::vector<float> o, l;
                // v1
                {
                    fresh(o, l);
                    std::vector<float> S((size_t)bh * n * n, NAN);
                    auto sc = d == 64 ? (causal ? attn_v1_scores_d64_c1 : attn_v1_scores_d64_c0)
                                      : (causal ? attn_v1_scores_d128_c1 : attn_v1_scores_d128_c0);
                    auto pv = d == 64 ? (causal ? attn_v1_pv_d64_c1 : attn_v1_pv_d64_c0)
                                      : (causal ? attn_v1_pv_d128_c1 : attn_v1_pv_d128_c0);
                    emu_launch({(unsigned)cdiv(n, 16), (unsigned)cdiv(n, 16), (unsigned)bh}, {16, 16, 1},
                               [&] { sc(q.data(), k.data(), S.data(), n, scale); });
                    emu_launch({(unsigned)n, (unsigned)bh, 1}, {256, 1, 1}, [&] { attn_v1_softmax(S.data(), l.data(), n); });
                    emu_launch({(unsigned)cdiv(d, 32), (unsigned)cdiv(n, 8), (unsigned)bh}, {32, 8, 1},
                               [&] { pv(S.data(), v.data(), o.data(), n); });
                    report(std::string("v1 ") + tag, rel_l2(o, ro), rel_l2(l, rl));
                }
                // v2
                {
                    fresh(o, l);
                    auto f2 = d == 64 ? (causal ? attn_v2_d64_c1 : attn_v2_d64_c0)
                                      : (causal ? attn_v2_d128_c1 : attn_v2_d128_c0);
                    emu_launch({(unsigned)cdiv(n, V2_ROWS), (unsigned)bh, 1}, {V2_ROWS, 1, 1},
                               [&] { f2(q.data(), k.data(), v.data(), o.data(), l.data(), n, scale); });
                    report(std::string("v2 ") + tag, rel_l2(o, ro), rel_l2(l, rl));
                }
                const long long st[12] = {(long long)bh * n * d, (long long)n * d, d, (long long)bh * n * d, (long long)n * d, d,
                                          (long long)bh * n * d, (long long)n * d, d, (long long)bh * n * d, (long long)n * d, d};
                for (const Flash& f : FLASH) {
                    if (f.d != d || f.causal != causal) continue;
                    fresh(o, l);
                    run_flash(f.fn, f.bm, (f.bm / f.tm) * (f.bn / f.tn), q.data(), k.data(), v.data(),
                              o.data(), l.data(), 1, bh, n, st, scale);
                    report(std::string(f.name) + " " + tag, rel_l2(o, ro), rel_l2(l, rl));
                }
            }
    }
    // v4 through day 28's layout: Q, K, V in a fused [B, T, 3, H, D] buffer, O [B, T, H, D]
    for (int causal : {0, 1}) {
        const int B = 2, T = 77, Hh = 3, D = 64;
        std::vector<float> qkv((size_t)B * T * 3 * Hh * D);
        for (auto& x : qkv) x = nd(g);
        std::vector<float> q((size_t)B * Hh * T * D), k(q.size()), v(q.size());
        for (int b = 0; b < B; ++b) for (int t = 0; t < T; ++t) for (int h = 0; h < Hh; ++h) for (int x = 0; x < D; ++x) {
            const size_t src = (((size_t)b * T + t) * 3 * Hh + h) * D + x, dst = (((size_t)b * Hh + h) * T + t) * D + x;
            q[dst] = qkv[src]; k[dst] = qkv[src + Hh * D]; v[dst] = qkv[src + 2 * Hh * D];
        }
        std::vector<double> ro, rl;
        ref_attention(q.data(), k.data(), v.data(), B * Hh, T, D, causal, ro, rl);
        std::vector<float> o((size_t)B * T * Hh * D, NAN), l((size_t)B * Hh * T, NAN);
        const long long sb = (long long)T * 3 * Hh * D, st_ = 3 * Hh * D, sh = D;
        const long long st[12] = {sb, sh, st_, sb, sh, st_, sb, sh, st_, (long long)T * Hh * D, D, Hh * D};
        run_flash(causal ? attn_v4_d64_c1 : attn_v4_d64_c0, 64, 128, qkv.data(), qkv.data() + Hh * D,
                  qkv.data() + 2 * Hh * D, o.data(), l.data(), B, Hh, T, st, 0.125f);
        std::vector<float> ot(o.size());
        for (int b = 0; b < B; ++b) for (int t = 0; t < T; ++t) for (int h = 0; h < Hh; ++h) for (int x = 0; x < D; ++x)
            ot[(((size_t)b * Hh + h) * T + t) * D + x] = o[(((size_t)b * T + t) * Hh + h) * D + x];
        report(std::string("v4 fused qkv strides causal ") + std::to_string(causal), rel_l2(ot, ro), rel_l2(l, rl));
    }
    std::printf("%s: %d failures\n", failures ? "FAILED" : "all ok", failures);
    return failures != 0;
}
